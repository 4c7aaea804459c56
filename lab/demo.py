"""What ``lab demo`` records: every bundled fake scenario, a few times each.

Kept apart from the CLI so tests and notebooks can build the same request list.
"""

from __future__ import annotations

from typing import Any

__all__ = ["demo_requests"]

_PROMPTS = (
    "What is the capital of France?",
    "Write one sentence about streams.",
    "Plan a two-day trip to Paris.",
    "Explain SSE keepalives briefly.",
)


def demo_requests(n: int = 3) -> list[dict[str, Any]]:
    """``n`` requests per bundled OpenRouter fake scenario, deterministic.

    Each item: ``provider``, ``base_path`` (appended to the fake server's URL) and ``body``.
    Scenarios that exercise the degradation ladder get the parameters they reject.
    """
    from lab.fakes import OPENROUTER_SCENARIOS
    from lab.request import build_body

    if n < 1:
        raise ValueError("n must be at least 1")
    items = []
    for model in OPENROUTER_SCENARIOS:
        for i in range(n):
            prompt = _PROMPTS[i % len(_PROMPTS)]
            body = build_body("openrouter", model=model, prompt=prompt)
            body["seed"] = i
            items.append({"provider": "openrouter", "base_path": "/api/v1", "body": body})
    return items
