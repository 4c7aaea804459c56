"""What ``lab demo`` records: every bundled fake scenario of every family, a few times each.

Kept apart from the CLI so tests and notebooks can build the same request list.
"""

from __future__ import annotations

from typing import Any

import lab.fakes.scenarios  # noqa: F401  (importing the fakes registers their routes)
from lab.fakes.base import FAMILIES, ROUTES

__all__ = [
    "DEMO_TOOLS_MODEL",
    "DEMO_TOOLS_N",
    "FAMILY_ROUTES",
    "demo_requests",
    "scenario_options",
    "tools_sweep",
]

DEMO_TOOLS_MODEL = "fake/tools"
"""The fake model the demo's tools sweep compares the backends of (:mod:`lab.fakes.tools`)."""
DEMO_TOOLS_N = 1
"""Repetitions of each prompt of the ``tools`` preset per backend in the demo."""

_PROMPTS = (
    "What is the capital of France?",
    "Write one sentence about streams.",
    "Plan a two-day trip to Paris.",
    "Explain SSE keepalives briefly.",
)

FAMILY_ROUTES: dict[str, tuple[str, str]] = {
    family: (ROUTES[family].provider, ROUTES[family].record_base) for family in FAMILIES
}
"""Fake-server family -> (the provider adapter that records it, its base path on the fake
server), from the fake modules' own routes (:class:`lab.fakes.base.FakeRoute`)."""

_WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather forecast for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
_IMAGE = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg=="


def scenario_options(model: str) -> dict[str, Any]:
    """Request options that make a scenario show its behaviour (e.g. the rejected param)."""
    if model == "fake/reject-min-p":
        return {"temperature": 0.7, "min_p": 0.05, "top_p": 0.95}
    if model == "fake/no-endpoints" or model in (
        "fake/tool-call",
        "fake/function-call",
        "fake/tool-use",
    ):
        return {"tools": [_WEATHER_TOOL]}
    if model == "fake/credit-affordability":
        return {"max_tokens": 16384}
    if model == "fake/truncated-tool-args":
        return {"tools": [_WEATHER_TOOL], "max_tokens": 32}
    if model == "fake/nvidia-problem":
        return {"temperature": 0.6, "top_k": 40}
    return {}


def _messages(model: str, prompt: str) -> list[dict[str, Any]]:
    if model in ("fake/reject-images", "fake/vllm-multimodal-500"):
        return [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "image_url", "image_url": {"url": _IMAGE}},
                ],
            }
        ]
    return [{"role": "user", "content": prompt}]


def demo_requests(n: int = 3, *, families: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """``n`` requests per bundled fake scenario, deterministic.

    Each item: ``provider``, ``base_path`` (appended to the fake server's URL), ``family``
    and ``body``. Only families whose adapter is available are included.
    """
    from lab.fakes import SCENARIOS
    from lab.providers import PROVIDERS, build_body

    if n < 1:
        raise ValueError("n must be at least 1")
    items = []
    for family, scenarios in SCENARIOS.items():
        if families is not None and family not in families:
            continue
        provider, base_path = FAMILY_ROUTES[family]
        if provider not in PROVIDERS:
            continue
        for model in scenarios:
            for i in range(n):
                prompt = _PROMPTS[i % len(_PROMPTS)]
                body = build_body(  # each adapter puts the seed where its API reads it
                    provider,
                    model=model,
                    messages=_messages(model, prompt),
                    seed=i,
                    **scenario_options(model),
                )
                items.append(
                    {"provider": provider, "family": family, "base_path": base_path, "body": body}
                )
    return items


def tools_sweep(
    out: Any, *, n: int = DEMO_TOOLS_N, concurrency: int = 8, progress: bool = False
) -> tuple[Any, Any]:
    """The scorecard demo, offline: the ``tools`` prompt preset ``n`` times against every
    backend of :data:`DEMO_TOOLS_MODEL` on a loopback fake server, recorded under ``out``.
    Returns the sweep report and the sweep's streams table (``lab.tables.scorecard`` of it
    flags each planted backend for its fault)."""
    from lab import sweep
    from lab.fakes import FakeServer

    prompts = sweep.load_prompts(sweep.preset_prompts("tools"))
    with FakeServer(delay_scale=0) as server:
        base = server.base_url + "/api/v1"
        backends = sweep.discover_backends(DEMO_TOOLS_MODEL, base_url=base)
        targets = sweep.openrouter_targets(DEMO_TOOLS_MODEL, backends, base_url=base)
        plan = sweep.sweep_plan("openrouter", prompts, targets, n=n)
        report = sweep.run_sweep(
            plan, provider="openrouter", out=out, concurrency=concurrency, progress=progress
        )
    return report, sweep.sweep_streams(out)
