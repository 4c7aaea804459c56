"""A streamed JSON array (``[{...},\\r\\n{...}]``) framed element by element, as SSE events.

Gemini's ``streamGenerateContent`` without ``alt=sse`` answers with one JSON array whose
elements (``GenerateContentResponse`` objects, pretty-printed over many lines) arrive as the
model writes them. :class:`JSONArrayDecoder` has :class:`~lab.http.sse.SSEDecoder`'s
``decode(chunk, seq)`` / ``flush()`` interface and yields each element's JSON text as the
``data`` of one :class:`~lab.http.sse.SSEEvent`, so an adapter reads both framings alike.

It is linear: each read is scanned once for the structural bytes (``"``, ``\\``, brackets,
braces, commas) with a compiled regex, the bytes of the element in progress are kept as a
list of slices and joined once when it completes; a growing buffer is never rescanned. A
read may split an element, a string, an escape or a UTF-8 character anywhere.

At EOF (``flush``) an element cut short is surfaced with ``unterminated=True``; an array
whose closing ``]`` never came surfaces one ``data=None`` event flagged ``unterminated``, so
the cut is evidence, never silence. Bytes after the closing ``]`` are ignored.

:class:`SniffingDecoder` decides at the first non-blank byte of the body: ``[`` is a JSON
array, anything else SSE.
"""

from __future__ import annotations

import re

from lab.http.sse import SSEDecoder, SSEEvent

__all__ = ["JSONArrayDecoder", "SniffingDecoder"]

_STRUCT = re.compile(rb'["\[\]{},]')
_IN_STRING = re.compile(rb'["\\]')
_BLANK = b" \t\r\n\xef\xbb\xbf"  # whitespace and the UTF-8 BOM's bytes


class JSONArrayDecoder:
    """Incremental framer of one streamed JSON array: one event per element."""

    __slots__ = (
        "_started",
        "_closed",
        "_depth",
        "_in_string",
        "_escape",
        "_parts",
        "_first_seq",
        "_last_seq",
        "_index",
    )

    def __init__(self) -> None:
        self._started = False  # the opening "[" was seen
        self._closed = False  # the closing "]" was seen: the rest is ignored
        self._depth = 0  # nesting inside the outer array (0: between elements)
        self._in_string = False
        self._escape = False  # a backslash ended the previous read inside a string
        self._parts: list[bytes] = []  # bytes of the element in progress
        self._first_seq = 0
        self._last_seq = 0
        self._index = 0

    def decode(self, chunk: bytes, seq: int) -> list[SSEEvent]:
        """Feed one network read; return the elements it completed."""
        out: list[SSEEvent] = []
        if not chunk or self._closed:
            return out
        self._last_seq = seq
        pos, n = 0, len(chunk)
        start = 0  # where this read's share of the element in progress begins
        if not self._started:
            at = chunk.find(b"[")
            if at < 0:
                return out
            self._started = True
            pos = start = at + 1
        while pos < n:
            if self._escape:
                self._escape = False
                pos += 1
                continue
            if self._in_string:
                m = _IN_STRING.search(chunk, pos)
                if m is None:
                    break
                pos = m.end()
                if chunk[m.start()] == 0x5C:  # backslash: the next byte is escaped
                    self._escape = True
                else:
                    self._in_string = False
                continue
            m = _STRUCT.search(chunk, pos)
            if m is None:
                break
            b = chunk[m.start()]
            pos = m.end()
            if b == 0x22:  # "
                self._in_string = True
            elif b in (0x7B, 0x5B):  # { [
                self._depth += 1
            elif b in (0x7D, 0x5D) and self._depth > 0:  # } ]
                self._depth -= 1
            elif self._depth == 0:  # "," between elements, or the closing "]"
                self._element(chunk[start : m.start()], seq, out)
                start = pos
                if b == 0x5D:
                    self._closed = True
                    return out
        if start < n:
            if not self._parts:
                self._first_seq = seq
            self._parts.append(chunk[start:])
        return out

    def _element(self, tail: bytes, seq: int, out: list[SSEEvent]) -> None:
        if not self._parts:
            self._first_seq = seq
        self._parts.append(tail)
        raw = b"".join(self._parts)
        self._parts = []
        if raw.strip(_BLANK):
            out.append(self._event(raw, seq, unterminated=False))

    def _event(self, raw: bytes, seq: int, *, unterminated: bool) -> SSEEvent:
        text = raw.decode("utf-8", "replace").strip()
        event = SSEEvent(
            self._index, text, None, None, None, None, self._first_seq, seq, unterminated
        )
        self._index += 1
        return event

    def flush(self) -> list[SSEEvent]:
        """At EOF: an element cut short (unterminated), or the missing ``]`` as evidence."""
        out: list[SSEEvent] = []
        if not self._started or self._closed:
            return out
        raw = b"".join(self._parts)
        self._parts = []
        self._closed = True
        if raw.strip(_BLANK):
            out.append(self._event(raw, self._last_seq, unterminated=True))
        else:
            out.append(
                SSEEvent(
                    self._index, None, None, None, None, None, self._last_seq, self._last_seq, True
                )
            )
            self._index += 1
        return out


class SniffingDecoder:
    """SSE or a streamed JSON array, decided by the body's first non-blank byte."""

    __slots__ = ("_inner", "_head")

    def __init__(self) -> None:
        self._inner: SSEDecoder | JSONArrayDecoder | None = None
        self._head: list[bytes] = []  # blank bytes seen before the decision

    def decode(self, chunk: bytes, seq: int) -> list[SSEEvent]:
        if self._inner is None:
            rest = chunk.lstrip(_BLANK)
            if not rest:
                self._head.append(chunk)
                return []
            self._inner = JSONArrayDecoder() if rest[:1] == b"[" else SSEDecoder()
            head, self._head = b"".join(self._head), []
            chunk = head + chunk
        return self._inner.decode(chunk, seq)

    def flush(self) -> list[SSEEvent]:
        if self._inner is None:
            self._inner = SSEDecoder()
            if self._head:
                out = self._inner.decode(b"".join(self._head), 0)
                return out + self._inner.flush()
        return self._inner.flush()
