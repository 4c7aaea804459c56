"""Everything a replay result holds, as one comparable tuple: two ways of replaying the same
bytes (a fast path and the general way, two JSON parsers) must agree on all of it."""

from __future__ import annotations

from typing import Any


def everything(result: Any) -> tuple:
    """The result's dict, chunks, origins, facts, guard events, thoughts, calls and usage."""
    return (
        result.to_dict(),
        result.chunks,
        result.origins,
        result.facts,
        result.guard_events,
        result.thoughts,
        result.function_calls,
        result.usage,
    )
