"""Scripted fake LLM providers on a real loopback HTTP server.

They speak each wire family's real format (OpenRouter, OpenAI-compatible, Gemini, Anthropic)
on real sockets; the scenario is chosen by the requested model id (for example
``fake/think-leak``), so any client can be pointed at them by base URL alone.
"""

from .scenarios import (
    OPENROUTER_SCENARIOS,
    SCENARIOS,
    Script,
    backends_for,
    render_body,
    scenario_reads,
    script,
)
from .server import FakeServer, RecordedRequest, serve_forever

__all__ = [
    "OPENROUTER_SCENARIOS",
    "SCENARIOS",
    "FakeServer",
    "RecordedRequest",
    "Script",
    "backends_for",
    "render_body",
    "scenario_reads",
    "script",
    "serve_forever",
]
