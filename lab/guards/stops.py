"""Provider stop strings (docs/reference.md, "7.7 Stop strings").

Providers match stop strings literally, so a namespaced close tag (``</mm:think>``) must
be listed per model rule here; the shared tag regex in :mod:`lab.guards.tags` does not
reach the provider.

:func:`build_provider_stop_strings` merges, in order: the existing stops, the universal
stops, the specialized rules for the provider/model, the configured stops, and (when asked)
the persona speaker stop ``"\\n<Name>:"``. :func:`merge_stop_strings` is the merge itself:
exact-string dedup in first-seen order, empty and non-string entries skipped, None when
nothing is left.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .tags import THINK_CLOSE_TAG

__all__ = [
    "SPECIALIZED_STOP_RULES",
    "UNIVERSAL_STOP_STRINGS",
    "build_provider_stop_strings",
    "merge_stop_strings",
    "persona_speaker_stop",
]

UNIVERSAL_STOP_STRINGS: tuple[str, ...] = ("<\uff5cbegin\u2581of\u2581sentence\uff5c>",)
"""Always added: DeepSeek's ``<｜begin▁of▁sentence｜>`` (fullwidth bars, U+2581)."""

SPECIALIZED_STOP_RULES: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("novelai", "glm-4-6"): ("<|user|>", "<|observation|>", "<|system|>", THINK_CLOSE_TAG),
}
"""(provider, model) -> stops; both compared trimmed and lowercased, model exactly."""

_WS_RE = re.compile(r"\s+")


def merge_stop_strings(existing: Any = None, *inputs: Any) -> list[str] | None:
    """Merge stop strings: each argument is a string, None, or an iterable of strings.

    >>> merge_stop_strings(["a"], None, "b", ["a", "", 3, "c"])
    ['a', 'b', 'c']
    >>> merge_stop_strings(None, []) is None
    True
    """
    seen: dict[str, None] = {}
    for item in (existing, *inputs):
        if item is None:
            continue
        values: Iterable[Any] = (item,) if isinstance(item, str) else item
        try:
            iterator = iter(values)
        except TypeError:
            continue
        for v in iterator:
            if isinstance(v, str) and v and v not in seen:
                seen[v] = None
    return list(seen) or None


def persona_speaker_stop(persona_name: str | None) -> str | None:
    """``"\\n<Name>:"`` with CR/LF turned into spaces and whitespace collapsed; None if empty."""
    if not persona_name:
        return None
    name = _WS_RE.sub(" ", persona_name.replace("\r", " ").replace("\n", " ")).strip()
    return f"\n{name}:" if name else None


def build_provider_stop_strings(
    *,
    existing_stops: Any = None,
    provider_name: str | None = None,
    model: str | None = None,
    persona_name: str | None = None,
    configured_stops: Any = None,
    include_persona_speaker_stop: bool = False,
) -> list[str] | None:
    """Stops for one request, merged in the reference order (see the module docstring)."""
    key = ((provider_name or "").strip().lower(), (model or "").strip().lower())
    specialized = SPECIALIZED_STOP_RULES.get(key, ())
    persona = persona_speaker_stop(persona_name) if include_persona_speaker_stop else None
    return merge_stop_strings(
        existing_stops, list(UNIVERSAL_STOP_STRINGS), list(specialized), configured_stops, persona
    )
