"""The one definition of a reasoning tag (docs/reference.md, "7.1 Reasoning tags").

A reasoning tag is ``<`` + optional ``/`` + optional namespace + a tag name + ``>``, matched
case-insensitively. The namespace is one segment: a letter, then word characters, ``.`` or
``-``, then a colon (the ``mm:`` in ``<mm:think>``); any such namespace is accepted. The tag
names are :data:`REASONING_TAG_NAMES`; teaching the guards a new vendor tag name is a
one-line change to that tuple, and every consumer (the streaming stripper, the final
clean-up sweep, anomaly detectors) picks it up because they all use the regexes and the
partial-tag detector below.

``<thinker>``, ``<mm:thinking>`` and ``<think attr="x">`` are not tags. A complete tag needs
the ``>`` directly after the name.

:func:`find_trailing_tag_prefix` answers the streaming question "could the end of this
chunk be the start of a tag?" by looking only at the last :data:`MAX_PARTIAL_TAG_CHARS`
characters, so a guard that calls it per delta stays linear.

Known quirk (kept from the reference): the complete-tag regex accepts a namespace of any
length, but the partial detector gives up on a run longer than 64 characters, so a tag with
a namespace of roughly 55+ characters is only recognised when it arrives within one delta.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

__all__ = [
    "MAX_PARTIAL_TAG_CHARS",
    "NAMESPACE_PATTERN",
    "REASONING_CLOSE_TAG_RE",
    "REASONING_OPEN_TAG_RE",
    "REASONING_TAG_NAMES",
    "REASONING_TAG_RE",
    "THINK_CLOSE_TAG",
    "TagMatch",
    "TagPrefix",
    "find_reasoning_tag",
    "find_reasoning_tag_close",
    "find_reasoning_tag_open",
    "find_trailing_tag_prefix",
]

REASONING_TAG_NAMES: tuple[str, ...] = ("think",)
"""Tag names that delimit reasoning. Add a vendor's tag name here (one line)."""

NAMESPACE_PATTERN = r"[A-Za-z][A-Za-z0-9_.-]*:"
"""One optional namespace segment, colon included (``mm:``)."""

THINK_CLOSE_TAG = "</think>"
"""The literal closer (used by stop-string rules, which providers match literally)."""

MAX_PARTIAL_TAG_CHARS = 64
"""A trailing ``<...`` run longer than this is never treated as a partial tag."""

_NAMES_ALT = "|".join(re.escape(n) for n in sorted(REASONING_TAG_NAMES, key=len, reverse=True))

REASONING_TAG_RE = re.compile(rf"<(/?)(?:{NAMESPACE_PATTERN})?(?:{_NAMES_ALT})>", re.IGNORECASE)
"""Any complete tag; group 1 is ``"/"`` for a closer, ``""`` for an opener."""

REASONING_OPEN_TAG_RE = re.compile(rf"<(?:{NAMESPACE_PATTERN})?(?:{_NAMES_ALT})>", re.IGNORECASE)
REASONING_CLOSE_TAG_RE = re.compile(rf"</(?:{NAMESPACE_PATTERN})?(?:{_NAMES_ALT})>", re.IGNORECASE)

_PARTIAL_RUN_RE = re.compile(r"/?[A-Za-z0-9_.:-]*")
_FORMING_NAMESPACE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
_LOWER_NAMES = tuple(n.lower() for n in REASONING_TAG_NAMES)


class TagMatch(NamedTuple):
    """A complete tag: where it starts, how long it is, and whether it closes."""

    index: int  # type: ignore[assignment]  # shadows tuple.index, on purpose: the public name
    length: int
    closing: bool

    @property
    def end(self) -> int:
        return self.index + self.length


class TagPrefix(NamedTuple):
    """A possible tag cut at the end of a chunk: index of its ``<`` and the kind it would be.

    ``kind`` is ``"close"`` when the run has a slash or is a bare ``<`` (which could still
    become ``</think>``), otherwise ``"open"``.
    """

    index: int  # type: ignore[assignment]  # shadows tuple.index, as TagMatch.index does
    kind: Literal["open", "close"]


def _match(m: re.Match[str] | None) -> TagMatch | None:
    if m is None:
        return None
    return TagMatch(m.start(), m.end() - m.start(), m.group(0)[1] == "/")


def find_reasoning_tag(text: str, start: int = 0) -> TagMatch | None:
    """The first complete open *or* close tag at or after ``start``."""
    return _match(REASONING_TAG_RE.search(text, start))


def find_reasoning_tag_open(text: str, start: int = 0) -> TagMatch | None:
    """The first complete open tag at or after ``start``."""
    return _match(REASONING_OPEN_TAG_RE.search(text, start))


def find_reasoning_tag_close(text: str, start: int = 0) -> TagMatch | None:
    """The first complete close tag at or after ``start``."""
    return _match(REASONING_CLOSE_TAG_RE.search(text, start))


def _is_name_prefix(run: str) -> bool:
    low = run.lower()
    return any(name.startswith(low) for name in _LOWER_NAMES)


def find_trailing_tag_prefix(text: str, start: int = 0) -> TagPrefix | None:
    """Detect a reasoning tag split at the end of ``text`` (only ``text[start:]`` counts).

    The trailing run must be ``<``, an optional ``/``, then only ``[A-Za-z0-9_.:-]`` up to
    the end, at most :data:`MAX_PARTIAL_TAG_CHARS` characters in all. With a colon, the part
    after the last colon must be a prefix of a tag name; without one, the run must be empty,
    a prefix of a tag name, or a still-forming namespace. Looks at no more than the last 64
    characters, so it is O(1) per call.
    """
    n = len(text)
    i = text.rfind("<", max(start, n - MAX_PARTIAL_TAG_CHARS), n)
    if i < 0:
        return None
    if _PARTIAL_RUN_RE.fullmatch(text, i + 1) is None:
        return None
    slash = i + 1 < n and text[i + 1] == "/"
    run = text[i + 2 :] if slash else text[i + 1 :]
    colon = run.rfind(":")
    if colon >= 0:
        if not _is_name_prefix(run[colon + 1 :]):
            return None
    elif run and not _is_name_prefix(run) and _FORMING_NAMESPACE_RE.fullmatch(run) is None:
        return None
    return TagPrefix(i, "close" if slash or not run else "open")
