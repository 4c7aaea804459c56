"""Scripted fake-provider scenarios as data.

A scenario is chosen by ``(family, model id)``. ``script()`` returns the full response plan
(status, headers, byte reads, delays) without any server, so tests and benchmarks can use the
exact bytes the fake server would send::

    render_body("openrouter", "fake/think-leak", seed=3)      # -> bytes
    scenario_reads("anthropic", "fake/thinking")               # -> list[bytes], one per read

Wire families, by their short names: ``openrouter``, ``openai`` (OpenAI-compatible), ``google``
(alias ``gemini``), ``anthropic``. ``SCENARIOS[family][model] -> one-line description``.

Determinism: the same ``(family, model, body, seed, call_index)`` always gives the same bytes.
For OpenRouter the serving backend (the chunk ``provider`` field) is
``backends[seed % len(backends)]`` of the scenario's pool, so consecutive seeds spread over
backends; the first backend of a pool is the faulty one.
"""

from __future__ import annotations

from typing import Any

from . import anthropic as _anthropic  # noqa: F401  (importing registers the scenarios)
from . import google as _google  # noqa: F401
from . import model_equality as _model_equality  # noqa: F401
from . import openai_compat as _openai_compat  # noqa: F401
from . import openai_responses as _openai_responses  # noqa: F401
from . import openrouter as _openrouter  # noqa: F401
from . import tools as _tools  # noqa: F401
from .base import (
    FAMILIES,
    REGISTRY,
    UNKNOWN_MODEL,
    Ctx,
    Script,
    canonical_family,
)
from .openrouter import OPENROUTER_SCENARIOS, no_allowed_providers, routing

__all__ = [
    "FAMILIES",
    "OPENROUTER_SCENARIOS",
    "SCENARIOS",
    "Script",
    "backends_for",
    "default_body",
    "render_body",
    "scenario_reads",
    "script",
]

SCENARIOS: dict[str, dict[str, str]] = {
    family: {model: sc.description for model, sc in REGISTRY[family].items()} for family in FAMILIES
}


def default_body(family: str, model: str) -> dict[str, Any]:
    """The request body assumed when none is given (a one-line user greeting)."""
    family = canonical_family(family)
    if family == "google":
        return {"contents": [{"role": "user", "parts": [{"text": "Hi! Any café tips?"}]}]}
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "Hi! Any café tips?"}],
        "stream": True,
    }
    if family == "anthropic":
        body["max_tokens"] = 1024
    if family == "openai":
        body["stream_options"] = {"include_usage": True}
    return body


def backends_for(family: str, model: str) -> tuple[str, ...]:
    """The backend pool of a scenario (empty for families without backend routing)."""
    sc = REGISTRY[canonical_family(family)].get(model)
    return sc.backends if sc else ()


def script(
    family: str,
    model: str,
    body: dict[str, Any] | None = None,
    seed: int = 0,
    *,
    call_index: int = 0,
    headers: dict[str, str] | None = None,
) -> Script:
    """The response the fake server sends for this request.

    ``call_index`` is how many earlier requests for the same (family, model) the server has
    seen; only stateful scenarios (``fake/overloaded-then-ok``) look at it. ``headers``
    (names lower-case) are the request's; only ``fake/echo-key`` looks at them. An unknown
    model gives the family's real unknown-model error response.
    """
    family = canonical_family(family)
    if body is None:
        body = default_body(family, model)
    sc = REGISTRY[family].get(model)
    backends = sc.backends if sc else ()
    ctx = Ctx(
        family,
        model,
        body,
        int(seed),
        call_index=call_index,
        backends=backends,
        headers=dict(headers or {}),
    )
    if sc is None:
        return UNKNOWN_MODEL[family](ctx)
    if family == "openrouter":
        route = routing(body, backends)
        if route.unavailable:
            return no_allowed_providers(ctx)
        ctx.pinned = route.backend
    return sc.fn(ctx)


def scenario_reads(
    family: str,
    model: str,
    *,
    seed: int = 0,
    body: dict[str, Any] | None = None,
    call_index: int = 0,
) -> list[bytes]:
    """The response body as the list of network reads the server writes."""
    return list(script(family, model, body, seed, call_index=call_index).reads)


def render_body(
    family: str,
    model: str,
    *,
    seed: int = 0,
    body: dict[str, Any] | None = None,
    call_index: int = 0,
) -> bytes:
    """The whole response body as bytes."""
    return script(family, model, body, seed, call_index=call_index).body
