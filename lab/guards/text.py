"""Shared text guards: recent-text dedup and the speaker-boundary guard.

The rules: docs/reference.md, "7.4 Recent-text dedup";
docs/reference.md, "7.5 The speaker guard";
docs/reference.md, "7.6 Cutting before a speaker line".

- :class:`RecentTextDedup` drops a chunk that repeats the end of what was already streamed,
  or the longest prefix of it that overlaps the recent tail (a backend that re-sends
  text after a reconnect). Only the last ``tail_chars`` characters are remembered.
- :func:`truncate_before_generic_speaker_line` finds the first ``\\nLabel:`` line that
  looks like another speaker taking a turn (outside markdown code, not an allowed
  decorated self-label) and cuts the text before its newline run.
- :class:`SpeakerBoundaryGuard` runs that check over a 32-character holdback plus each
  chunk and ends the text at the first generic speaker line.

Linear time: dedup keeps the last :data:`DEDUP_RECENT_CHARS` to twice that characters as
one string (a chunk no longer than that is ruled out by one search of it, nearly always,
or compared with one slice of it) and what came before in pieces, joined and cut back to
the tail once they hold twice the tail (each character copied a bounded number of times);
the speaker guard checks at most holdback + chunk
characters per call and skips the regex when the window has no ``\\n`` or no ``:``.

Notes: dedup (guard ``"dedup"``) records dropped text, the speaker guard (``"speaker_guard"``)
records the truncated text. Offsets count characters of each guard's own input.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

from .base import NoteSink

__all__ = [
    "CodeRange",
    "RecentTextDedup",
    "SpeakerBoundaryGuard",
    "SpeakerTruncation",
    "find_markdown_code_ranges",
    "is_decorated_self_label",
    "is_generic_speaker_stop_label",
    "truncate_before_generic_speaker_line",
]

STREAM_TEXT_TAIL_CHARS = 4096
STREAM_TEXT_MIN_DEDUP_CHARS = 8
SPEAKER_GUARD_HOLDBACK_CHARS = 32
DEDUP_RECENT_CHARS = 128
"""How many of the latest characters :class:`RecentTextDedup` keeps as one string (up to
twice as many, cut back to this many): a chunk up to this long is searched for in it; a
longer one joins the older pieces it needs. Not a rule (the result is the same at any
size): the price of a string copy per chunk against a join of pieces."""
MAX_SPEAKER_LABEL_CHARS = 64


# -- dedup ------------------------------------------------------------------------------


_WORD_REPEAT_RE = re.compile(r"\s*[\w'’-]+[.,;:!?]?\s*")


def is_word_repeat(text: str) -> bool:
    """A repeated delta that text legitimately holds twice in a row: whitespace only (two
    indentation deltas) or a single word with its spacing and punctuation (``" question"``
    twice). A multi-word passage repeated whole is more likely a provider's resend.

    >>> is_word_repeat("        "), is_word_repeat(" question"), is_word_repeat(" is worth it.")
    (True, True, False)
    """
    return text.isspace() or _WORD_REPEAT_RE.fullmatch(text) is not None


class RecentTextDedup(NoteSink):
    """Drop text that repeats the recent stream.

    ``filter(text)`` returns the text minus a full repeat (the tail already ends with it)
    or minus its longest prefix that equals a suffix of the tail (at least ``min_chars``
    long). Text shorter than ``min_chars``, or arriving before anything was streamed,
    passes unchanged. Whatever is returned is appended to the tail, which keeps the last
    ``tail_chars`` characters.

    >>> d = RecentTextDedup()
    >>> d.filter("Hello there, friend"), d.filter("there, friend. How are you?")
    ('Hello there, friend', '. How are you?')
    """

    __slots__ = (
        "notes",
        "tail_chars",
        "min_chars",
        "keep_word_repeats",
        "_older",
        "_older_len",
        "_fed",
        "_recent",
    )

    def __init__(
        self,
        tail_chars: int = STREAM_TEXT_TAIL_CHARS,
        min_chars: int = STREAM_TEXT_MIN_DEDUP_CHARS,
        keep_word_repeats: bool = False,
    ) -> None:
        """**keep_word_repeats** (``LabConfig.dedup_keep_word_repeats``, off as in the
        reference): a delta that repeats the tail's end whole is kept when it is a
        plausible repeat (:func:`is_word_repeat`: whitespace, or one word such as
        ``" question"``); a longer resend is still dropped, and so is a resent overlap."""
        self.notes = []
        self.keep_word_repeats = keep_word_repeats
        self.tail_chars = max(1, tail_chars)
        self.min_chars = max(1, min_chars)
        self._recent = ""
        """The latest characters kept, as one string: all of them up to
        :data:`DEDUP_RECENT_CHARS`, then between that many and twice that many, or the
        last piece kept when it was longer (its last ``max(tail_chars,
        DEDUP_RECENT_CHARS)`` when it was over twice that)."""
        self._older: list[str] = []
        """What came before :attr:`_recent`, in pieces: at least as much of it as the tail
        needs, at most about twice ``tail_chars`` (cut back once it holds more)."""
        self._older_len = 0
        self._fed = 0

    @property
    def tail(self) -> str:
        """The remembered tail (last ``tail_chars`` characters of emitted text)."""
        return self._last(self.tail_chars)

    def reset(self) -> None:
        self._recent = ""
        self._older.clear()
        self._older_len = 0
        self._fed = 0

    def _last(self, k: int) -> str:
        """The last ``min(k, len(tail))`` characters of the tail, touching only those."""
        recent = self._recent
        r = len(recent)
        if k > self.tail_chars:
            k = self.tail_chars
        if k <= r:
            return recent[r - k :]
        need = k - r  # from the older pieces, the last first
        got: list[str] = []
        have = 0
        for piece in reversed(self._older):
            got.append(piece)
            have += len(piece)
            if have >= need:
                break
        older = "".join(reversed(got))
        return older[len(older) - need :] + recent if need < len(older) else older + recent

    def filter(self, text: str) -> str:
        """Deduplicate one chunk against the recent tail; returns the text to emit."""
        n = len(text)
        at = self._fed
        self._fed = at + n
        if not n:
            return text
        out = text
        recent = self._recent
        m = self.min_chars
        if n >= m and recent:
            # a full repeat (the tail ends with the text) and an overlap (tail[-k:] ==
            # text[:k], k >= min_chars) both hold the text's first min_chars characters
            # in the tail's last n. The recent string holds those when the text is no
            # longer than it: one search of it rules both out for nearly every chunk
            probe = text[:m]
            if n > len(recent) or probe in recent:
                # the last k characters of the tail (an overlap is never longer than the
                # chunk); _last slices the recent string, or reaches into the older pieces
                tail = self._last(n)
                j = tail.find(probe)
                if j >= 0:
                    if tail.endswith(text):
                        if not (self.keep_word_repeats and is_word_repeat(text)):
                            self._note("dedup", "full_repeat", at, text)
                            return ""
                    else:  # the longest k >= min_chars with tail[-k:] == text[:k]
                        while j >= 0:  # leftmost start = longest overlap
                            if text.startswith(tail[j:]):
                                k = len(tail) - j
                                out = text[k:]
                                self._note("dedup", "overlap", at, text[:k], overlap=k)
                                break
                            j = tail.find(probe, j + 1)
        # remember it: a short piece joins the recent string (cut back to its last
        # DEDUP_RECENT_CHARS once it holds twice that), a long one becomes it, uncopied
        if len(out) < DEDUP_RECENT_CHARS:
            recent += out
            if len(recent) > 2 * DEDUP_RECENT_CHARS:
                self._retire(recent[: len(recent) - DEDUP_RECENT_CHARS])
                recent = recent[-DEDUP_RECENT_CHARS:]
        else:
            if recent:
                self._retire(recent)
            # uncopied, unless far longer than anything read from it: then its end only
            keep = self.tail_chars if self.tail_chars > DEDUP_RECENT_CHARS else DEDUP_RECENT_CHARS
            recent = out if len(out) <= 2 * keep else out[-keep:]
        self._recent = recent
        return out

    def _retire(self, head: str) -> None:
        """Add **head**, what the recent string lets go of, to the older pieces; cut those
        back to the tail once they hold twice it (so each character is copied a bounded
        number of times over the stream)."""
        older = self._older
        older.append(head)
        size = self._older_len + len(head)
        cap = self.tail_chars
        if size > 2 * cap:
            kept = "".join(older)[-cap:]
            older.clear()
            older.append(kept)
            size = len(kept)
        self._older_len = size


# -- markdown code ranges and speaker labels --------------------------------------------


class CodeRange(NamedTuple):
    start: int
    end: int  # exclusive


def find_markdown_code_ranges(text: str) -> list[CodeRange]:
    """Inline spans and fenced blocks: each backtick run up to the next identical run.

    An unclosed run extends to the end of the text. Empty when there are no backticks.
    """
    ranges: list[CodeRange] = []
    n = len(text)
    i = text.find("`")
    while i >= 0:
        j = i
        while j < n and text[j] == "`":
            j += 1
        run = j - i
        # the next run of exactly `run` backticks
        k = j
        close_end = -1
        while True:
            k = text.find("`", k)
            if k < 0:
                break
            e = k
            while e < n and text[e] == "`":
                e += 1
            if e - k == run:
                close_end = e
                break
            k = e
        end = n if close_end < 0 else close_end
        ranges.append(CodeRange(i, end))
        if end >= n:
            break
        i = text.find("`", end)
    return ranges


def is_generic_speaker_stop_label(label: str) -> bool:
    """Trimmed label is 1–64 chars, doesn't start with ``[``/``<``, has a letter/number/_."""
    t = label.strip()
    if not t or len(t) > MAX_SPEAKER_LABEL_CHARS or t[0] in "[<":
        return False
    return any(ch.isalnum() or ch == "_" for ch in t)


_DECORATED_RE = re.compile(r"(.+?)\s*\(([^()]*)\)")


def is_decorated_self_label(label: str, names: Iterable[str]) -> bool:
    """``"Name (modifier)"`` where Name is one of ``names`` (case-insensitive, trimmed).

    A plain ``"Name"`` is *not* allowed (the reference stops on a bare self-label too). The
    modifier must be non-empty and contain no parentheses.
    """
    m = _DECORATED_RE.fullmatch(label.strip())
    if m is None or not m.group(2).strip():
        return False
    base = m.group(1).strip().casefold()
    return any(base == n.strip().casefold() for n in names if n and n.strip())


class SpeakerTruncation(NamedTuple):
    """Result of :func:`truncate_before_generic_speaker_line`.

    ``cut_index`` is where the text was cut (the start of the newline run), or None.
    """

    text: str
    stop_triggered: bool = False
    matched_speaker: str | None = None
    cut_index: int | None = None


_SPEAKER_RE = re.compile(r"\n+\s*([^\n:]{1,64}):\s*")
_SPEAKER_RE_START = re.compile(r"(?:^|\n+)\s*([^\n:]{1,64}):\s*")


def truncate_before_generic_speaker_line(
    text: str,
    *,
    include_start: bool = False,
    is_allowed_speaker_label: Callable[[str], bool] | None = None,
) -> SpeakerTruncation:
    """Cut ``text`` before the first generic ``\\nLabel:`` line.

    A match is skipped when its label starts inside a markdown code range, when the
    trimmed label is not a generic speaker label, or when ``is_allowed_speaker_label``
    accepts it. The cut falls at the start of the newline run, so the newline goes too.

    >>> truncate_before_generic_speaker_line("Sure!\\nUser: more").text
    'Sure!'
    """
    if not text:
        return SpeakerTruncation(text)
    pattern = _SPEAKER_RE_START if include_start else _SPEAKER_RE
    ranges: list[CodeRange] | None = None
    for m in pattern.finditer(text):
        label = m.group(1)
        idx = m.start(1)
        if ranges is None:
            ranges = find_markdown_code_ranges(text)
        if any(r.start <= idx < r.end for r in ranges):
            continue
        trimmed = label.strip()
        if not is_generic_speaker_stop_label(trimmed):
            continue
        if is_allowed_speaker_label is not None and is_allowed_speaker_label(trimmed):
            continue
        return SpeakerTruncation(text[: m.start()], True, trimmed, m.start())
    return SpeakerTruncation(text)


class SpeakerBoundaryGuard(NoteSink):
    """Stop the text at the first generic speaker line, with a 32-character holdback.

    ``feed(text)`` returns what may be emitted now; it keeps the last ``holdback_chars``
    characters back so a ``\\nLabel:`` split across chunks is still caught. When a generic
    speaker line is found, the text before it is returned, :attr:`fired` becomes True and
    the stream should end: later ``feed`` calls return ``""`` (and record a note for what
    they drop). ``flush()`` releases the held tail.

    Allowed labels are decorated self-labels (``"Tomori (sleepy)"``) of ``persona_name``
    or one of ``aliases``; pass ``is_allowed_speaker_label`` to replace that rule. With
    ``enabled=False`` text passes through untouched.

    Reference quirk, kept: each check sees only the holdback plus the new chunk, so a code
    fence opened before that window does not protect a ``Label:`` line inside it.
    """

    __slots__ = ("notes", "holdback_chars", "enabled", "_allowed", "_tail", "fired",
                 "matched_speaker", "_fed")  # fmt: skip

    def __init__(
        self,
        holdback_chars: int = SPEAKER_GUARD_HOLDBACK_CHARS,
        persona_name: str | None = None,
        *,
        aliases: Iterable[str] = (),
        is_allowed_speaker_label: Callable[[str], bool] | None = None,
        enabled: bool = True,
    ) -> None:
        self.notes = []
        self.holdback_chars = max(0, holdback_chars)
        self.enabled = enabled
        if is_allowed_speaker_label is None:
            names = tuple(n for n in (persona_name, *aliases) if n)
            if names:

                def is_allowed_speaker_label(label: str) -> bool:
                    return is_decorated_self_label(label, names)

        self._allowed = is_allowed_speaker_label
        self._tail = ""
        self.fired = False
        self.matched_speaker: str | None = None
        self._fed = 0

    @property
    def pending(self) -> str:
        """The held tail."""
        return self._tail

    def feed(self, text: str) -> str:
        """Guard one chunk; returns the text to emit now."""
        at = self._fed
        self._fed += len(text)
        if not self.enabled:
            return text
        if self.fired:
            if text:
                self._note("speaker_guard", "after_stop", at, text)
            return ""
        if not text:
            return ""
        tail = self._tail
        combined = tail + text if tail else text
        base = at - len(tail)
        if "\n" in combined and ":" in combined:
            r = truncate_before_generic_speaker_line(
                combined, is_allowed_speaker_label=self._allowed
            )
            if r.stop_triggered:
                cut = r.cut_index or 0
                self._tail = ""
                self.fired = True
                self.matched_speaker = r.matched_speaker
                self._note(
                    "speaker_guard",
                    "generic_speaker_line",
                    base + cut,
                    combined[cut:],
                    speaker=r.matched_speaker,
                )
                return r.text
        hb = self.holdback_chars
        if len(combined) <= hb:
            self._tail = combined
            return ""
        split = len(combined) - hb
        self._tail = combined[split:]
        return combined[:split]

    def flush(self) -> str:
        """Release (and clear) the held tail."""
        tail = self._tail
        self._tail = ""
        return tail
