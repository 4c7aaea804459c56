"""Repetition in streamed text: the rules the ``duplicated_deltas`` anomaly reads.

Pure functions of text and thresholds (the thresholds are :class:`lab.anomalies.AnomalyConfig`
fields, passed in by :mod:`lab.anomalies`): a delta sent twice in a row
(:class:`BackToBack`, :func:`first_back_to_back`) and a passage repeated immediately
(:func:`immediate_repetition`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MAX_CANDIDATES_PER_ANCHOR", "BackToBack", "first_back_to_back", "immediate_repetition"]

MAX_CANDIDATES_PER_ANCHOR = 64
"""Bound on the lags checked per anchor block (keeps pathological text fast)."""


def _non_trivial(delta: str, min_chars: int) -> bool:
    core = delta.strip()
    return len(core) >= min_chars and any(ch.isalnum() for ch in core)


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def _words(text: str) -> int:
    """Words in **text**: runs between spaces, and each distinct CJK character one word (a
    Chinese or Japanese sentence has no spaces; ``哈哈哈哈`` is one word said four times)."""
    cjk = _CJK.findall(text)
    if not cjk:
        return len(text.split())
    return len(_CJK.sub(" ", text).split()) + len(set(cjk))


class BackToBack:
    """The rule of :func:`lab.anomalies.find_duplicated_delta`, fed the deltas a pair at a time: a
    non-trivial delta sent twice in a row counts at once when it holds at least
    ``min_words`` words (a sentence is not doubled by a model), and otherwise only once
    ``min_pairs`` such pairs are seen, each within ``max_gap`` deltas of the one before
    (``"really really"`` is English; a backend that doubles its deltas doubles them one
    after another)."""

    __slots__ = ("first", "last", "max_gap", "min_chars", "min_pairs", "min_words", "pairs")

    def __init__(self, min_chars: int, min_words: int, min_pairs: int, max_gap: int) -> None:
        self.min_chars = min_chars
        self.min_words = min_words
        self.min_pairs = min_pairs
        self.max_gap = max_gap
        self.first: str | None = None
        self.last = 0  # the position of the last pair's second delta (trivial ones too)
        self.pairs = 0

    def pair(self, delta: str, position: int) -> str | None:
        """``delta`` was just sent twice in a row, the second time at delta **position**:
        the delta to report, or None (not yet)."""
        near = position - self.last - 2 <= self.max_gap
        self.last = position  # any pair, even of a trivial delta, is the one before the next
        if not _non_trivial(delta, self.min_chars):
            return None
        if _words(delta) >= self.min_words:
            return delta
        if self.pairs and not near:
            self.first, self.pairs = None, 0  # too far from the pair before: start again
        if self.first is None:
            self.first = delta
        self.pairs += 1
        return self.first if self.pairs >= self.min_pairs else None


def first_back_to_back(deltas: Iterable[str], rule: BackToBack) -> str | None:
    """Over the reasoning deltas: a delta equal to the one before, or one that starts with
    the whole of the one before (a backend that sends the reasoning so far each time, not
    what is new: DashScope, qwen-code #3896) repeats that one."""
    previous = ""
    for position, delta in enumerate(deltas):
        if previous and delta.startswith(previous):
            found = rule.pair(previous, position)
            if found is not None:
                return found
        previous = delta
    return None


def _common_prefix_len(text: str, a: int, b: int, limit: int) -> int:
    """Length of the longest common prefix of text[a:] and text[b:], at most ``limit``."""
    lo, hi = 0, max(0, min(limit, len(text) - b, len(text) - a))
    while lo < hi:  # binary search on a monotone predicate, slice compares run in C
        mid = (lo + hi + 1) // 2
        if text[a : a + mid] == text[b : b + mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix_len(text: str, a: int, b: int, limit: int) -> int:
    """Length of the longest common suffix of text[:a] and text[:b], at most ``limit``."""
    lo, hi = 0, max(0, min(limit, a, b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if text[a - mid : a] == text[b - mid : b]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def immediate_repetition(
    text: str, min_chars: int, min_alnum: int, max_period: int
) -> tuple[int, int] | None:
    """A passage ``X`` repeated immediately (``XX``) in ``text``: ``(start, len(X))`` or None.

    ``X`` is at least ``min_chars`` long (at most ``max_period``), holds
    ``min_alnum`` letters or digits and is not itself a repetition of something
    shorter. Anchors every ``min_chars // 2`` characters; each square ``XX`` contains an anchor
    block within its first copy that recurs exactly ``len(X)`` later, and the run of matching
    characters at that lag tells whether a full copy fits. Anchor blocks that recur within
    ``min_chars`` (a ``====`` rule, short identical rows) are skipped, so a heuristic: a
    passage whose every anchor block is locally periodic can be missed.
    """
    m = min_chars
    h = max(1, m // 2)
    n = len(text)
    for a in range(0, n - m - h + 1, h):
        block = text[a : a + h]
        end = min(n, a + max_period + h)
        pos = text.find(block, a + m, end)
        if pos < 0:
            continue  # the block does not recur far enough on (nearly every anchor)
        if text.find(block, a + 1, a + m - 1 + h) >= 0:
            continue  # locally periodic (a rule, a run of short rows): no long primitive X here
        for _ in range(MAX_CANDIDATES_PER_ANCHOR):
            if pos < 0:
                break
            p = pos - a
            back = _common_suffix_len(text, a, pos, h)
            fwd = _common_prefix_len(text, a, pos, p)
            if back + fwd >= p:
                start = a - back
                x = text[start : start + p]
                primitive = (x + x).find(x, 1) == p
                if primitive and sum(ch.isalnum() for ch in x) >= min_alnum:
                    return start, p
            pos = text.find(block, pos + 1, end)
    return None
