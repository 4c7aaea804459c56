"""Streaming ``<think>`` block stripper (docs/reference.md, "7.2 The think-block stripper").

:class:`ThinkBlockStripper` moves reasoning that a backend leaked into visible content into
the reasoning channel, one delta at a time:

- outside a block, an open tag starts a block (text before it stays visible);
- a close tag with no open tag before it (an *orphan* closer, from chat templates that
  pre-open the block) turns everything before it into reasoning;
- inside a block, text is reasoning until an explicit close tag or, when a persona name is
  set, a ``<Name>:`` label at the start of the input or of a line (the label stays visible);
- tags split across deltas are held back. A trailing partial *close* outside a block (a bare
  ``<`` included) holds the whole remainder, so the text before it can still become
  reasoning if the closer completes; a trailing partial *open* holds just the partial.

``flush()`` ends the stream: an open block or a held partial closer becomes reasoning (the
partial itself is dropped), a held partial opener (``<thi``) is dropped. So a stream ending
in ``"x <"`` routes ``"x "`` to reasoning (a reference quirk, kept).

The tag shape comes from :mod:`lab.guards.tags`. The work per delta is linear in the delta
plus the held tail (never more than 64 characters past the text already proven tag-free),
and a delta without ``<`` takes a fast path.

Every move to reasoning and every dropped partial records a :class:`~lab.guards.base.GuardNote`
(guard ``"think_stripper"``) whose ``offset`` counts characters of the stripper's input.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .base import GuardOutput, NoteSink
from .tags import REASONING_CLOSE_TAG_RE, REASONING_TAG_RE, find_trailing_tag_prefix

__all__ = ["ThinkBlockStripper", "persona_label_patterns", "split_think_blocks"]

GUARD = "think_stripper"
_EMPTY = GuardOutput("", "")
_tuple_new = tuple.__new__  # a NamedTuple without its Python __new__

# pending kinds
_NONE, _OUT_CLOSE, _OUT_OPEN, _IN_CLOSE = 0, 1, 2, 3


def persona_label_patterns(
    persona_name: str | None,
) -> tuple[re.Pattern[str], re.Pattern[str]] | None:
    """The persona-label closer as two regexes: at the scan position, and after a newline.

    The reference regex is "start of input or newline, optional whitespace, the escaped
    persona name, optional whitespace, then ``:`` or ``：``", case-insensitive. Python's
    ``^`` does not match at a search offset, so the "start of input" branch is a separate
    pattern used with ``match(text, pos)``. None when the name is empty.
    """
    if not persona_name or not persona_name.strip():
        return None
    body = rf"\s*{re.escape(persona_name)}\s*[:：]"
    return re.compile(body, re.IGNORECASE), re.compile(r"\n" + body, re.IGNORECASE)


class ThinkBlockStripper(NoteSink):
    """Route ``<think>…</think>`` text out of streamed content. See the module docstring.

    **persona_name** enables the persona-label closer (an unclosed block ends where a
    ``Name:`` line starts). **capture_thoughts** False discards reasoning instead of
    returning it (the bookkeeping and notes are the same).

    ``fed`` counts the characters fed so far (the offset of the next delta). ``idle`` is
    True while nothing is held and no block is open: a delta without ``<`` then comes back
    unchanged as content and is only counted, ``fed += len(delta)``. The adapters' per-chunk
    path does exactly that inline instead of calling :meth:`feed` (as with
    :class:`~lab.guards.markup.MarkupGuard`: a call costs more than the whole check).

    >>> s = ThinkBlockStripper()
    >>> s.feed("<thi"), s.feed("nk>plan</think>Hi")
    (GuardOutput(content='', reasoning=''), GuardOutput(content='Hi', reasoning='plan'))
    """

    __slots__ = (
        "notes",
        "persona_name",
        "capture_thoughts",
        "fed",
        "idle",
        "_persona",
        "_in_block",
        "_captured",
        "_pending",
        "_pending_kind",
        "_lead",
        "_lead_offset",
        "_nl_cache",
    )

    def __init__(self, persona_name: str | None = None, *, capture_thoughts: bool = True) -> None:
        self.notes = []
        self.capture_thoughts = capture_thoughts
        self.reset(persona_name)

    def reset(self, persona_name: str | None = None) -> None:
        """Clear all state (notes included) and set the persona name."""
        self.notes = []
        self.persona_name = persona_name
        self._persona = persona_label_patterns(persona_name)
        self._in_block = False
        self._captured = False
        self._pending = ""  # held partial tag (starts with "<")
        self._pending_kind = _NONE
        self._lead: list[str] = []  # tag-free text held before an outside partial closer
        self._lead_offset = 0
        self.fed = 0
        self.idle = True
        self._nl_cache: tuple[str, int, int] | None = None

    @property
    def in_block(self) -> bool:
        """True while inside an unclosed think block."""
        return self._in_block

    # -- streaming ---------------------------------------------------------------------

    def feed(self, text: str) -> GuardOutput:
        """Strip one delta; returns the visible content and reasoning released now."""
        if not text and not self._pending:
            return _EMPTY
        base = self.fed - len(self._pending)
        self.fed += len(text)
        if self._pending:
            s = self._pending + text
            self._pending = ""
            self._pending_kind = _NONE
        else:
            s = text
            if "<" not in s:  # fast paths (no lead: a lead only exists with a pending tag)
                if not self._in_block:
                    return _tuple_new(GuardOutput, (s, ""))  # GuardOutput(s, ""), per delta
                if self._persona is None:
                    return GuardOutput("", self._think(s, base))
        out = self._scan(s, base)
        self.idle = not self._pending and not self._in_block
        return out

    def flush(self) -> GuardOutput:
        """End of stream: release what is held (see the module docstring)."""
        if not self._pending and not self._in_block:
            return _EMPTY
        pending, kind = self._pending, self._pending_kind
        pend_at = self.fed - len(pending)
        out = _EMPTY
        if self._in_block or kind == _IN_CLOSE:
            if pending:
                out = GuardOutput("", self._think(pending, pend_at, rule="unclosed_block"))
        elif kind == _OUT_CLOSE:
            lead = "".join(self._lead)
            if lead:
                out = GuardOutput("", self._think(lead, self._lead_offset, rule="pending_close"))
            self._note(GUARD, "dropped_partial_tag", pend_at, pending)
        elif kind == _OUT_OPEN:
            self._note(GUARD, "dropped_partial_tag", pend_at, pending)
        self._in_block = False
        self._captured = False
        self._pending = ""
        self._pending_kind = _NONE
        self._lead = []
        self._nl_cache = None
        self.idle = True
        return out

    # -- internals ---------------------------------------------------------------------

    def _think(self, t: str, offset: int, rule: str = "think_block") -> str:
        """Record ``t`` (at input ``offset``) as moved to reasoning; return what to emit."""
        if t:
            self._note(GUARD, rule, offset, t)
        return t if self.capture_thoughts else ""

    def _take_lead(self, t: str, t_offset: int) -> tuple[str, int]:
        """Prefix ``t`` with the held tag-free lead text; returns (text, its offset)."""
        if not self._lead:
            return t, t_offset
        lead = "".join(self._lead)
        self._lead = []
        return lead + t, self._lead_offset

    def _persona_at(self, s: str, pos: int) -> int | None:
        """Index of the persona label in ``s[pos:]`` (start-of-remainder or after a newline)."""
        start_re, nl_re = self._persona  # type: ignore[misc]
        if start_re.match(s, pos):
            return pos
        cache = self._nl_cache
        if cache is not None and cache[0] is s and cache[1] <= pos:
            hit = cache[2]
            if hit < 0 or hit >= pos:  # nothing between the cached search start and pos
                return None if hit < 0 else hit
        m = nl_re.search(s, pos)
        hit = m.start() if m else -1
        self._nl_cache = (s, pos, hit)
        return None if hit < 0 else hit

    def _scan(self, s: str, base: int) -> GuardOutput:
        vis: list[str] = []
        th: list[str] = []
        n = len(s)
        pos = 0
        while pos < n:
            if not self._in_block:
                m = REASONING_TAG_RE.search(s, pos)
                if m is None:
                    p = find_trailing_tag_prefix(s, pos)
                    if p is None:
                        t, _ = self._take_lead(s[pos:], base + pos)
                        vis.append(t)
                    elif p.kind == "close":
                        if p.index > pos:
                            if not self._lead:
                                self._lead_offset = base + pos
                            self._lead.append(s[pos : p.index])
                        self._pending, self._pending_kind = s[p.index :], _OUT_CLOSE
                    else:
                        t, _ = self._take_lead(s[pos : p.index], base + pos)
                        vis.append(t)
                        self._pending, self._pending_kind = s[p.index :], _OUT_OPEN
                    break
                if m.group(1):  # orphan closer: everything before it is reasoning
                    t, at = self._take_lead(s[pos : m.start()], base + pos)
                    if t:
                        th.append(self._think(t, at, rule="orphan_close"))
                    else:  # what came before it went out already (a delta of its own, as
                        # local servers stream a pre-opened block): the drop is noted alone
                        self._note(GUARD, "orphan_close", at, "")
                else:
                    t, _ = self._take_lead(s[pos : m.start()], base + pos)
                    vis.append(t)
                    self._in_block = True
                    self._captured = False
                pos = m.end()
                continue
            # inside a block
            c = REASONING_CLOSE_TAG_RE.search(s, pos)
            pm = self._persona_at(s, pos) if self._persona is not None else None
            active = pm is not None and (self._captured or pm > pos)
            if c is not None and (not active or c.start() <= pm):  # type: ignore[operator]
                self._capture(th, s[pos : c.start()], base + pos)
                self._in_block = False
                pos = c.end()
            elif active:
                self._capture(th, s[pos:pm], base + pos)
                self._in_block = False
                pos = pm  # type: ignore[assignment]
            else:
                p = find_trailing_tag_prefix(s, pos)
                if p is not None and p.kind == "close":
                    self._capture(th, s[pos : p.index], base + pos)
                    self._pending, self._pending_kind = s[p.index :], _IN_CLOSE
                else:
                    self._capture(th, s[pos:], base + pos)
                break
        return GuardOutput("".join(vis), "".join(th))

    def _capture(self, th: list[str], t: str, offset: int) -> None:
        if t:
            self._captured = True
            th.append(self._think(t, offset))


def split_think_blocks(deltas: str | Iterable[str], persona_name: str | None = None) -> GuardOutput:
    """Feed every delta through a fresh :class:`ThinkBlockStripper`, then flush.

    The non-streaming path is this function, so there is one implementation of the rule.

    >>> split_think_blocks("<think>plan</think>Hello")
    GuardOutput(content='Hello', reasoning='plan')
    """
    stripper = ThinkBlockStripper(persona_name)
    if isinstance(deltas, str):
        deltas = (deltas,)
    content: list[str] = []
    reasoning: list[str] = []
    for d in deltas:
        c, r = stripper.feed(d)
        content.append(c)
        reasoning.append(r)
    c, r = stripper.flush()
    content.append(c)
    reasoning.append(r)
    return GuardOutput("".join(content), "".join(reasoning))
