"""Harmony with its special tokens stripped: the markup guard's stage for a shape of text.

Class ``harmony_stripped`` of :mod:`lab.guards.markup` (its docstring gives the shape, the
public reports and the rules). This mixin holds that stage's steps; :class:`~lab.guards.
markup.MarkupGuard` owns its state (the ``_hs*`` slots) and calls :meth:`_stripped` for
plain text while the stage is on, :meth:`_hs_release` at a real marker and :meth:`_hs_end`
at the end of the stream.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import NoteSink
from .markup_blocks import HARMONY_STRIPPED, MarkupClass, MarkupDetection

if TYPE_CHECKING:  # the guard's module imports this one
    from .markup import MarkupGuardConfig, _Vocab

GUARD = "markup"

_ROLE = "assistant"
"""The role of a harmony header left after ``<|start|>`` is stripped."""

# stages: off, deciding at the start of the input, inside a stripped stream
_HS_OFF, _HS_HEAD, _HS_MSG = 0, 1, 2


class StrippedHarmony(NoteSink):
    """The stripped-harmony steps of :class:`~lab.guards.markup.MarkupGuard` (and its
    ``_detect``, which every class shares)."""

    __slots__ = (
        "_hs",
        "_hs_seen",
        "_hs_start",
        "_hs_confirmed",
        "_hs_hold",
        "_hs_hold_chars",
        "_hs_hold_at",
        "_hs_header",
        "_hs_holding",
    )
    # slots of the guard that mixes this in
    config: MarkupGuardConfig
    recover: bool
    detections: list[MarkupDetection]
    _v: _Vocab

    def _hs_reset(self) -> None:
        """The stage's state at the start of a stream: deciding when the class is on."""
        self._hs = _HS_HEAD if self._v.hs_on else _HS_OFF
        self._hs_seen = ""  # _HS_HEAD: the input so far; _HS_MSG: its last hs_tail chars
        self._hs_start = ""  # the start channel that made the stream a candidate
        self._hs_confirmed = False  # a channel boundary was seen
        self._hs_hold: list[str] = []  # recovery: the open analysis message, held
        self._hs_hold_chars = 0
        self._hs_hold_at = 0  # its input offset
        self._hs_header = 0  # chars of the start header at the front of the hold
        self._hs_holding = False

    def _detect(self, kind: MarkupClass, marker: str, offset: int) -> None:
        self.detections.append(MarkupDetection(kind, marker, offset))
        self._note(GUARD, "markup_detected", offset, "", kind=kind, marker=marker)

    # harmony with its special tokens stripped ---------------------------------------

    def _stripped(self, t: str, offset: int, text_out: list[str], reason_out: list[str]) -> None:
        """Plain text while the stream may be (or is) harmony with its tokens stripped."""
        if self._hs == _HS_MSG:
            self._hs_scan(t, offset, text_out, reason_out)
            return
        # _HS_HEAD: the input so far is t's predecessors, from offset 0
        v = self._v
        head = self._hs_seen + t
        m = v.hs_head.match(head)
        if m is None:
            if len(head) < v.hs_head_max and any(h.startswith(head) for h in v.hs_heads):
                self._hs_seen = head  # could still open a stripped stream: wait
                if not self.recover:
                    text_out.append(t)
                return
            self._hs = _HS_OFF  # plain text: everything waited for goes out
            self._hs_seen = ""
            text_out.append(head if self.recover else t)
            return
        if not self.recover:
            text_out.append(t)
        self._hs = _HS_MSG
        self._hs_seen = ""
        start = m.group("start")
        if start is not None:  # a candidate: held until a boundary shows what it is
            self._hs_start = start
            if self.recover:
                self._hs_holding = True
                self._hs_hold = [start]
                self._hs_hold_chars = len(start)
                self._hs_hold_at = 0
                self._hs_header = len(start)
            self._hs_scan(head[len(start) :], len(start), text_out, reason_out)
            return
        boundary = m.group("boundary")
        self._hs_boundary(boundary, 0, boundary, text_out, reason_out, at_start=True)
        if self._hs == _HS_MSG:
            self._hs_scan(head[len(boundary) :], len(boundary), text_out, reason_out)
        elif self.recover and len(head) > len(boundary):
            text_out.append(head[len(boundary) :])

    def _hs_scan(self, s: str, base: int, text_out: list[str], reason_out: list[str]) -> None:
        """Text ``s`` at input offset ``base`` inside a stripped stream: boundaries found
        (split ones too, through the kept tail), the text between them routed."""
        if not s:
            return
        tail = self._hs_seen
        skip = len(tail)
        buf = tail + s if tail else s
        pos = 0
        for m in self._v.hs_boundary.finditer(buf):
            if m.end() <= skip:
                continue  # found with the delta it ended in
            cut = m.start() - skip
            marker = m.group()
            if cut > pos:
                self._hs_route(s[pos:cut], base + pos, text_out)
            elif cut < 0:  # its start came with earlier text: take it back
                self._hs_unroute(-cut)
            fresh = marker if cut >= 0 or self._hs_holding else marker[-cut:]
            self._hs_boundary(marker, base + cut, fresh, text_out, reason_out)
            pos = m.end() - skip
            if self._hs == _HS_OFF:  # the final answer: plain text from here
                if self.recover and pos < len(s):
                    text_out.append(s[pos:])
                return
        if pos < len(s):
            self._hs_route(s[pos:], base + pos, text_out)
        self._hs_seen = buf[-self._v.hs_tail :]

    def _hs_route(self, t: str, offset: int, text_out: list[str]) -> None:
        """Text of the open message: held while recovering one, else text as it came."""
        if not self._hs_holding:
            if self.recover:
                text_out.append(t)
            return
        self._hs_hold.append(t)
        self._hs_hold_chars += len(t)
        if self._hs_hold_chars > self.config.max_block_chars:
            self._note(
                GUARD,
                "block_too_long",
                self._hs_hold_at,
                "",
                kind=HARMONY_STRIPPED,
                chars=self._hs_hold_chars,
            )
            self._hs_release(text_out)

    def _hs_unroute(self, n: int) -> None:
        """Take the last ``n`` characters back from the hold: a boundary's first part."""
        if not self._hs_holding:
            return  # already out as text (detection only, or past recovery)
        hold = self._hs_hold
        self._hs_hold_chars -= n
        while n:
            last = hold.pop()
            if len(last) > n:
                hold.append(last[:-n])
                break
            n -= len(last)

    def _hs_release(self, text_out: list[str]) -> None:
        """Give up recovering: what is held goes out as text, unchanged."""
        if self._hs_holding:
            text_out.append("".join(self._hs_hold))
        elif self._hs == _HS_HEAD and self.recover:
            text_out.append(self._hs_seen)
        self._hs_hold = []
        self._hs_hold_chars = 0
        self._hs_holding = False

    def _hs_close(self, reason_out: list[str]) -> None:
        """Recovery: the held analysis message is reasoning; its start header is removed."""
        body = "".join(self._hs_hold)
        header = self._hs_header
        if header:
            self._note(GUARD, "removed_markup", 0, body[:header], kind=HARMONY_STRIPPED)
        at = self._hs_hold_at + header
        if len(body) > header:
            self._note(GUARD, "harmony_reasoning", at, body[header:], kind=HARMONY_STRIPPED)
            reason_out.append(body[header:])
        self._hs_hold = []
        self._hs_hold_chars = 0
        self._hs_header = 0
        self._hs_holding = False

    def _hs_boundary(
        self,
        marker: str,
        offset: int,
        fresh: str,
        text_out: list[str],
        reason_out: list[str],
        *,
        at_start: bool = False,
    ) -> None:
        """A channel boundary ``assistant<channel>`` at input ``offset``; ``fresh`` is the
        part of it not yet released as text (all of it unless it was split and the text
        before it was not held)."""
        if not self._hs_confirmed:
            self._hs_confirmed = True
            if self._hs_start:
                self._detect(HARMONY_STRIPPED, self._hs_start, 0)
        self._detect(HARMONY_STRIPPED, marker, offset)
        channel = marker[len(_ROLE) :]
        if channel == "final":
            self._hs = _HS_OFF  # the answer: nothing after it is watched
        recovering = self._hs_holding or (self.recover and at_start)
        if self._hs_holding:  # the message it closes was an analysis message
            self._hs_close(reason_out)
        if not recovering:
            if self.recover:
                text_out.append(fresh)
            return
        if channel in ("analysis", "final"):
            self._note(GUARD, "removed_markup", offset, marker, kind=HARMONY_STRIPPED)
            if channel == "analysis":
                self._hs_holding = True
                self._hs_hold = []
                self._hs_hold_chars = 0
                self._hs_hold_at = offset + len(marker)
        else:  # another channel (commentary: a preamble or a call): text from here on
            text_out.append(marker)

    def _hs_end(self, text_out: list[str], reason_out: list[str]) -> None:
        """End of stream inside a stripped stream (or still deciding)."""
        if self._hs_holding and self._hs_confirmed:
            self._hs_close(reason_out)  # an analysis message cut short
        else:
            self._hs_release(text_out)
        self._hs = _HS_OFF
        self._hs_seen = ""
