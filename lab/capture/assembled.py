"""The response scrubber's second stage: an echoed secret that only the text a result
assembles spells out (model tokens across events), found across the string values of the
assembled fields and overwritten where its pieces stand (see :class:`_AssembledScrubber`).
The first stage, the secrets and their patterns are :class:`lab.capture.redact.ResponseScrubber`'s.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lab.capture.redact import ResponseScrubber

__all__ = [
    "ASSEMBLED_FIELDS",
    "ASSEMBLED_HOLD_BYTES",
    "ASSEMBLED_INTERLEAVE",
    "REDACTED",
    "marker",
]

REDACTED = "[REDACTED]"


def marker(n: int) -> str:
    """The same-length stand-in for an ``n``-character secret found in response bytes:
    ``[REDACTED]`` padded with ``*`` (``*`` alone below 10 characters)."""
    if n < len(REDACTED):
        return "*" * n
    return "[REDACTED" + "*" * (n - len(REDACTED)) + "]"


ASSEMBLED_FIELDS = frozenset(
    {
        "content",
        "text",
        "reasoning",
        "reasoning_content",
        "thinking",
        "summary",
        "refusal",
        "arguments",
        "partial_json",
        "delta",
        "message",
        "error",
        "stringValue",
        "thoughtSummary",
        "reasoning_summary",
    }
)
"""The JSON fields whose string values a result assembles from consecutive events (visible
text, reasoning, tool-call arguments (Gemini's ``partialArgs`` ``stringValue`` too),
refusals, thought summaries, error messages, in every wire family): an echoed secret split
into model tokens across them is readable only once they are joined."""

ASSEMBLED_INTERLEAVE = 8
"""How many string values of other assembled fields may stand between two tokens of one
field's text and still join them (OpenRouter repeats each reasoning token in
``reasoning_details[].text``; parallel tool calls interleave their arguments). A field's
carry-over settles after that many; consecutive values of any fields always join (the spill
guard moves the start of the content onto the end of the reasoning)."""

ASSEMBLED_HOLD_BYTES = 256 * 1024
"""The most response bytes the assembled-text stage holds back for a value still open or
a carry-over (not a heuristic: any size bounds memory and delay). A value still open past
it is looked at in pieces as its bytes come (each piece as one more token of its field),
holding only a carry-over; a value's end that could start a secret is settled as no secret
once this much follows it."""

_FIELD_NAMES = b"|".join(sorted(f.encode() for f in ASSEMBLED_FIELDS))
_FIELDS = frozenset(f.encode() for f in ASSEMBLED_FIELDS)
_VALUE = b'(?:[^"\\\\\r\n]|\\\\[^\r\n])*'
# the string value of an assembled field: its key, then the value (a raw line break cannot be
# inside a JSON string). A quote inside a JSON string is escaped, so this never matches
# inside one, wherever a scan starts.
_FIELD_VALUE = re.compile(b'"(' + _FIELD_NAMES + b')"[ \t]*:[ \t]*"(' + _VALUE + b')"')
# the start of one that the bytes so far end inside: a key begun (a quote and any name so
# far; also a closing quote, which the next read settles), a key whole and its colon to
# come, or a value opened and not closed (group v: its bytes so far)
_FIELD_OPEN = re.compile(
    b'"(?:[a-zA-Z_]{0,24}|(?P<f>'
    + _FIELD_NAMES
    + b')"[ \t]*(?::[ \t]*(?:"(?P<v>'
    + _VALUE
    + b"\\\\?))?)?)\\Z"
)
# the same where a key may be written with JSON escapes (``"\u0063ontent"``): any key, its
# name decoded and looked up; used only for bytes that hold an escape of an ASCII letter
_KEY = b"(?:[a-zA-Z_]|\\\\u00[4-7][0-9a-fA-F]){1,48}"
_ESCAPED_KEY = re.compile(b"\\\\u00[4-7][0-9a-fA-F]|\\\\(?:u(?:0(?:0[4-7]?)?)?)?\\Z")
_FIELD_VALUE_ESCAPED = re.compile(b'"(' + _KEY + b')"[ \t]*:[ \t]*"(' + _VALUE + b')"')
_FIELD_OPEN_ESCAPED = re.compile(
    b'"(?:(?:[a-zA-Z_]|\\\\u00[0-9a-fA-F]{2}){0,48}(?:\\\\(?:u[0-9a-fA-F]{0,3})?)?|(?P<f>'
    + _KEY
    + b')"[ \t]*(?::[ \t]*(?:"(?P<v>'
    + _VALUE
    + b"\\\\?))?)?)\\Z"
)
_VALUE_BYTES = re.compile(_VALUE)
_ANY = b""  # the carry-over of consecutive values, whatever their field


def _field(name: bytes) -> bytes | None:
    """The assembled field a key names, its JSON escapes decoded (None: no such field)."""
    if name in _FIELDS:
        return name
    if b"\\" not in name:
        return None
    try:
        decoded = json.loads(b'"' + name + b'"').encode()
    except ValueError:
        return None
    return decoded if decoded in _FIELDS else None


class _AssembledScrubber:
    """The second stage of a :class:`ResponseScrubber`: an echo the assembled text spells
    out although no read holds it whole.

    A model that repeats the key writes it as tokens, one per event
    (``"content":"sk-ab"`` ... ``"content":"cd12"``), so the bytes never hold it and the
    result's text does. The stage finds the string values of :data:`ASSEMBLED_FIELDS` (one
    regex pass over the bytes each read adds, SSE or a JSON-array stream alike; a key
    written with JSON escapes is decoded) and matches each secret, in any JSON escape mix,
    across the values a result can join: consecutive values of one field, also with up to
    :data:`ASSEMBLED_INTERLEAVE` values of other fields between them, and consecutive
    values whatever their field (the end of the reasoning and the start of the content, as
    the spill guard joins them). A match is overwritten where its pieces stand in the held
    bytes by one :func:`marker` spread over them (each piece keeps its length, the JSON
    stays valid), so the capture, the client and every replay see the marker.

    Linear: each value is looked at once, with carry-overs (one per field and one for
    consecutive values, each at most the longest form of a secret less one byte: the end of
    the values before that could start one); no text grows. Bytes are held only from the
    key of a value still open at the end of a read, or from the start of the oldest open
    carry-over (up to :data:`ASSEMBLED_HOLD_BYTES`); a value open past that is looked at in
    pieces as its bytes come."""

    __slots__ = ("_s", "_buf", "_lens", "_base", "_scan", "_carries", "_n", "_open", "count")

    def __init__(self, scrubber: ResponseScrubber) -> None:
        self._s = scrubber  # its patterns (each secret as sent, percent- and JSON-escaped)
        self._buf = bytearray()  # the held bytes: reads not handed on yet
        self._lens: list[int] = []  # their lengths (boundaries kept)
        self._base = 0  # the stream offset of _buf[0]
        self._scan = 0  # where in _buf the bytes not looked into start
        # the open carry-overs: field (or _ANY) -> ([(start, end)] stream offsets, the value
        # number that set it)
        self._carries: dict[bytes, tuple[list[tuple[int, int]], int]] = {}
        self._n = 0  # values looked at so far
        self._open: bytes | None = None  # the field of a long value being read in pieces
        self.count = 0

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf.extend(data)
        self._lens.append(len(data))
        scan = self._scan
        if self._open is not None:  # a long value goes on: its next piece
            scan, closed = self._continue(scan)
            if not closed:
                self._scan = scan
                return self._release(self._base + scan)
        escaped = _ESCAPED_KEY.search(buf, scan) is not None
        scan = self._values(scan, len(buf), escaped)
        # a value (or its key) the bytes end inside: held from its key on, to be looked at
        # whole; bytes before it are handed on (a line is never held for being open)
        # (none when the bytes end a line, as an SSE read mostly does: no key or value of
        # one spans a line break)
        m = None
        if not buf.endswith((b"\n", b"\r")):
            m = (_FIELD_OPEN_ESCAPED if escaped else _FIELD_OPEN).search(buf, scan)
        hold = len(buf) if m is None else m.start()
        if m is not None and len(buf) - hold > ASSEMBLED_HOLD_BYTES:
            field = None if m.group("v") is None else _field(m.group("f"))
            if field is not None:  # a long value: from now on in pieces, as its bytes come
                self._open = field
                scan, _ = self._continue(m.start("v"))
                self._scan = scan
                return self._release(self._base + scan)
            hold = len(buf)  # a long key-like run, no value of an assembled field
        self._scan = hold
        return self._release(self._base + hold)

    def flush(self) -> list[bytes]:
        self._carries.clear()
        self._open = None
        self._scan = len(self._buf)
        return self._release(self._base + len(self._buf))

    def _continue(self, at: int) -> tuple[int, bool]:
        """The next piece of the long value open at ``buf[at]``, as a token of its field;
        returns where the scan goes on and whether the value ended."""
        buf, field = self._buf, self._open
        if field is None:  # pragma: no cover - only called with a value open
            return at, True
        m = _VALUE_BYTES.match(buf, at)
        end = m.end() if m is not None else at
        if end > at:
            self._value(field, self._base + at, self._base + end)
        if end == len(buf) or (buf[end] == 0x5C and end + 1 == len(buf)):
            return end, False  # at the end of the bytes, or before a backslash that ends them
        self._open = None  # its closing quote (or a line break: no JSON string goes on)
        return end + (buf[end] == 0x22), True

    def _release(self, safe: int) -> list[bytes]:
        """Hand on every held read that ends at or before ``safe`` and before every open
        carry-over (one older than the hold is settled: no token of it follows)."""
        carries = self._carries
        if carries:
            limit = self._base + len(self._buf) - ASSEMBLED_HOLD_BYTES
            for key in [k for k, (pieces, _) in carries.items() if pieces[0][0] < limit]:
                del carries[key]
            for pieces, _ in carries.values():
                safe = min(safe, pieces[0][0])
        lens, pos, n = self._lens, self._base, 0
        while n < len(lens) and pos + lens[n] <= safe:
            pos += lens[n]
            n += 1
        if not n:
            return []
        buf = self._buf
        cut = pos - self._base
        out, at = [], 0
        for size in lens[:n]:
            out.append(bytes(buf[at : at + size]))
            at += size
        del buf[:cut], lens[:n]
        self._base = pos
        self._scan -= cut
        return out

    def _values(self, a: int, b: int, escaped: bool) -> int:
        """Every string value of an assembled field in ``buf[a:b]``, in order; returns where
        the last one ended (``a`` when there was none)."""
        base, at = self._base, a
        if not escaped:
            for m in _FIELD_VALUE.finditer(self._buf, a, b):
                start, end = m.span(2)
                if end > start:
                    self._value(m.group(1), base + start, base + end)
                at = m.end()
            return at
        for m in _FIELD_VALUE_ESCAPED.finditer(self._buf, a, b):
            field = _field(m.group(1))
            if field is None:
                continue
            start, end = m.span(2)
            if end > start:
                self._value(field, base + start, base + end)
            at = m.end()
        return at

    def _value(self, field: bytes, start: int, end: int) -> None:
        """One string value of an assembled field, at stream offsets [start, end)."""
        s, buf, base = self._s, self._buf, self._base
        self._n += 1
        n, carries = self._n, self._carries
        if carries:  # a field's carry-over settles after ASSEMBLED_INTERLEAVE other values
            for key in [
                k for k, (_, i) in carries.items() if k != _ANY and n - i > ASSEMBLED_INTERLEAVE + 1
            ]:
                del carries[key]
        if not carries and buf.find(b"\\", start - base, end - base) < 0:
            # the common case: no carry, no escape; a carry can only start in this value
            w = s._literal_window
            found = s._literal_tail.search(buf, max(start - base, end - base - w), end - base)
            if found is not None:
                spans = [(base + found.start(), end)]
                carries[field] = (spans, n)
                carries[_ANY] = (list(spans), n)
            return
        own = carries.get(field)
        joined = carries.get(_ANY)
        keys = (
            [field]
            if joined is None or (own is not None and own[0] == joined[0])
            else [
                field,
                _ANY,
            ]
        )
        for key in keys:  # a match can only start in a carry (the byte stage took the rest)
            carry = carries.get(key)
            if carry is None:
                continue
            head = carry[0] + [(start, min(end, start + s._window + 1))]
            text = b"".join(buf[x - base : y - base] for x, y in head)
            pattern = s._pattern if s._escaped(text) else s._literal
            for m in pattern.finditer(text):
                if m.start() >= len(text) - (head[-1][1] - head[-1][0]):
                    break  # inside this value alone: the byte stage's
                spans = _spans(head, m.start(), m.end())
                self._overwrite(spans)
                # another field's carry-over over these bytes is settled: they are a marker
                for other in [k for k in carries if k not in (field, _ANY)]:
                    if any(x < b and a < y for x, y in carries[other][0] for a, b in spans):
                        del carries[other]
        for key in (field, _ANY):  # the new carries: the longest end that could start one
            carry = carries.get(key)
            found_spans = self._carry(carry[0] if carry is not None else [], start, end)
            if found_spans is None:
                carries.pop(key, None)
            else:
                carries[key] = (found_spans, n)

    def _carry(
        self, pieces: list[tuple[int, int]], start: int, end: int
    ) -> list[tuple[int, int]] | None:
        """The longest end of ``pieces`` + [start, end) that could start a secret."""
        s, buf, base = self._s, self._buf, self._base
        window = s._window
        tail_pieces = pieces + [(start, end)] if end - start < window else [(start, end)]
        rest = sum(y - x for x, y in tail_pieces)
        while len(tail_pieces) > 1 and rest - (tail_pieces[0][1] - tail_pieces[0][0]) >= window:
            rest -= tail_pieces[0][1] - tail_pieces[0][0]
            tail_pieces.pop(0)
        text = b"".join(buf[x - base : y - base] for x, y in tail_pieces)
        escaped = s._escaped(text)
        tail, w = (s._tail, window) if escaped else (s._literal_tail, s._literal_window)
        found = tail.search(text, max(0, len(text) - w))
        return None if found is None else _spans(tail_pieces, found.start(), len(text))

    def _overwrite(self, spans: list[tuple[int, int]]) -> None:
        """One :func:`marker` over the pieces of a match, in order; its fill is ``*`` in the
        first piece, ``#`` in the second, and so on alternately, so that no piece repeats the
        end of the one before (the dedup guard drops a delta that does, as a resent one)."""
        stamp = marker(sum(y - x for x, y in spans)).encode("ascii")
        buf, base, at = self._buf, self._base, 0
        for i, (x, y) in enumerate(spans):
            part = stamp[at : at + y - x]
            buf[x - base : y - base] = part.replace(b"*", b"#") if i % 2 else part
            at += y - x
        self.count += 1


def _spans(pieces: list[tuple[int, int]], i: int, j: int) -> list[tuple[int, int]]:
    """The stream offsets of bytes [i, j) of the text the pieces make, joined in order."""
    out, pos = [], 0
    for x, y in pieces:
        lo, hi = max(i, pos), min(j, pos + y - x)
        if lo < hi:
            out.append((x + lo - pos, x + hi - pos))
        pos += y - x
    return out
