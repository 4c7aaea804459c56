"""Server-sent events framing over raw network reads.

``SSEDecoder`` is an incremental ``decode(chunk, seq)`` / ``flush()`` decoder in the style of
``httpx._decoders.LineDecoder``, but it works on *bytes* and keeps provenance:

- a read may split a UTF-8 character or a CRLF pair; bytes are decoded only per complete line
  (invalid UTF-8 becomes U+FFFD, the decoder never raises);
- line endings are ``\\r\\n``, ``\\r`` and ``\\n``; a read ending in ``\\r`` completes its line
  at once and a ``\\n`` opening the next read is swallowed;
- ``data:`` lines are joined with ``\\n``; ``event:``, ``id:`` (ignored when it holds NUL) and
  ``retry:`` (digits only) are kept; one space after the colon is removed; unknown fields are
  ignored, as the spec says;
- every comment line (``: keep-alive``) becomes its own comment event immediately, because a
  keepalive is evidence;
- a blank line dispatches the pending event (an event with ``event:``/``id:`` but no
  ``data:`` is surfaced with ``data=None`` rather than dropped);
- at EOF ``flush()`` parses a partial last line as a field line and surfaces the pending event
  with ``unterminated=True``: a truncated stream is never silently dropped.

Each event records ``first_seq`` (the read where its first byte arrived) and ``last_seq``
(the read that completed it). ``index`` numbers events, comments included, from 0. An event
framed by the common shapes (below) keeps its data line's bytes too (``raw``), for a typed
JSON decoder to read.

The hot path frames whole reads with ``bytes`` methods: one memchr for ``\r`` and one for
``\n`` per read, one ``split`` on ``\n`` per read that completes lines (the incomplete tail is
kept, as it came, for the next read), and the field values decoded from bytes one by one.
When the lines of a read have the common shapes (one ``data:`` or comment line and a blank
line per event, or ``event:``, ``data:``, blank), a slice of the line list shows it and each
event is built in one step; any other line goes through the general line machine, so every
rule above holds everywhere. A read longer than 64 KiB (a whole recorded body) is framed in
windows that end at line ends. The work is linear in the input, even for one event arriving
a byte per read: nothing is rescanned or joined again as the partial line grows.
``tests/sse_reference.py`` keeps the per-line framer this replaced, as the oracle of the
property tests (``tests/test_sse_reference.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

__all__ = ["MAX_RETRY_DIGITS", "WINDOW", "SSEDecoder", "SSEEvent", "iter_sse"]

MAX_RETRY_DIGITS = 18
"""A ``retry:`` value with more digits is ignored like a malformed one: it is no reconnection
time anyone means, and past 4,300 digits ``int()`` raises ``ValueError``."""

_BOM = b"\xef\xbb\xbf"  # UTF-8 byte order mark, stripped from the first line of a stream
_decode = bytes.decode
_new = object.__new__
_NAMES = 64
"""Event names (``event:`` lines) a decoder keeps decoded for its fast path; a stream with
more kinds frames the rest with the general machine, as it frames any other line."""
WINDOW = 1 << 16
"""A read longer than this is framed in windows of about this size, each ending at a line
end: a whole recorded body handed over as one read stays in the CPU cache while framed.
The stack's runner hands such a read to the decoder in slices of at most this size
(:func:`lab.stream.line_slices`), so its events are taken a slice at a time as well."""


@dataclass(slots=True)
class SSEEvent:
    """One dispatched SSE event (or one comment line), with the reads it came from."""

    index: int
    """0-based event number within the stream (comments count)."""
    data: str | None
    """``data`` lines joined with ``\\n``; None when the event had no data field."""
    event: str | None
    """The ``event:`` field."""
    id: str | None
    """The ``id:`` field of this event."""
    retry: int | None
    """The ``retry:`` field, when it was all ASCII digits (at most :data:`MAX_RETRY_DIGITS`)."""
    comment: str | None
    """For comment events only: the text after ``:`` with one leading space removed."""
    first_seq: int
    """seq of the read where the event's first byte arrived."""
    last_seq: int
    """seq of the read that completed it."""
    unterminated: bool = False
    """True for a final event cut at EOF without its blank line."""
    raw: bytes | None = field(default=None, compare=False, repr=False)
    """The bytes of the event's one ``data:`` line after ``data: ``, as they came, when the
    framer had them at hand (an event of one of the common shapes, see the module's text);
    ``data`` is their UTF-8 decoding, errors replaced. None otherwise: read ``data``. A
    typed JSON decoder reads these instead of ``data``, which it would encode to UTF-8
    again (and keep that copy on the string). Not compared, not shown."""

    @property
    def is_comment(self) -> bool:
        return self.comment is not None


class SSEDecoder:
    """Incremental SSE framer: ``decode(chunk, seq)`` per read, ``flush()`` at EOF."""

    __slots__ = (
        "_parts",
        "_parts_seq",
        "_cr_pending",
        "_at_start",
        "_last_seq",
        "_index",
        "_active",
        "_data",
        "_event",
        "_id",
        "_retry",
        "_first_seq",
        "_names",
    )

    def __init__(self) -> None:
        self._parts: list[bytes] = []  # bytes of the current partial line (no terminator)
        self._parts_seq = 0  # seq where the partial line's first byte arrived
        self._cr_pending = False  # the previous read ended in "\r": swallow a leading "\n"
        self._at_start = True  # strip a UTF-8 BOM from the first line of the stream
        self._last_seq = 0
        self._index = 0
        self._names: dict[bytes, str] = {}  # "event: x" lines seen -> their decoded name
        self._reset_event()

    def _reset_event(self) -> None:
        self._active = False
        self._data: list[str] | None = None
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None
        self._first_seq = 0

    # -- public API ------------------------------------------------------------------------

    def decode(self, chunk: bytes, seq: int) -> list[SSEEvent]:
        """Feed one network read; return the events it completed (possibly none)."""
        if not chunk:
            return []
        if self._cr_pending:
            self._cr_pending = False
            if chunk[0] == 10:  # "\n": second half of a CRLF split across reads
                chunk = chunk[1:]
                if not chunk:
                    return []
        self._last_seq = seq
        # (an int operand makes ``in`` one memchr; a bytes operand first fails as an int)
        if 13 in chunk:  # "\r": every line end becomes "\n"
            self._cr_pending = chunk[-1] == 13
            chunk = chunk.replace(b"\r\n", b"\n")
            if 13 in chunk:
                chunk = chunk.replace(b"\r", b"\n")
        parts = self._parts
        if 10 not in chunk:  # no line completed: just remember the bytes
            if not parts:
                self._parts_seq = seq
            parts.append(chunk)
            return []
        if parts:  # the first line began in an earlier read: joined once, now it is complete
            parts.append(chunk)
            buf = b"".join(parts)
            line_seq = self._parts_seq
            parts.clear()
        else:
            buf = chunk
            line_seq = seq
        if self._at_start:
            self._at_start = False
            if buf[:3] == _BOM:
                buf = buf[3:]
        out: list[SSEEvent] = []
        if len(buf) <= WINDOW:
            tail = self._frame(buf, line_seq, seq, out)
        else:  # framed a window at a time, each ending at a line end, to stay in the cache
            start = 0
            while True:
                end = buf.find(b"\n", start + WINDOW) + 1
                if not end:
                    tail = self._frame(buf[start:], line_seq, seq, out)
                    break
                self._frame(buf[start:end], line_seq, seq, out)
                line_seq = seq
                start = end
        if tail:  # after the last line end: incomplete, it waits for the next read
            parts.append(tail)
            self._parts_seq = seq
        return out

    def flush(self) -> list[SSEEvent]:
        """At EOF: surface a partial last line and a pending event, flagged unterminated."""
        out: list[SSEEvent] = []
        seq = self._last_seq
        if self._parts:
            line = b"".join(self._parts)
            self._parts.clear()
            if self._at_start:
                self._at_start = False
                if line[:3] == _BOM:
                    line = line[3:]
            if line:
                self._lines([line], self._parts_seq, seq, out)
                for ev in out:  # a comment line cut at EOF
                    ev.unterminated = True
        if self._active:
            out.append(
                SSEEvent(
                    self._index,
                    None if self._data is None else "\n".join(self._data),
                    self._event,
                    self._id,
                    self._retry,
                    None,
                    self._first_seq,
                    seq,
                    True,
                )
            )
            self._index += 1
            self._reset_event()
        self._cr_pending = False
        return out

    # -- internals -------------------------------------------------------------------------

    def _frame(self, buf: bytes, line_seq: int, seq: int, out: list[SSEEvent]) -> bytes:
        """Frame the complete lines of ``buf`` (line ends all ``\n``) into ``out`` and return
        what follows the last line end, the incomplete tail. ``line_seq``: the read where
        the first line began (every other line began in read ``seq``)."""
        lines = buf.split(b"\n")
        tail = lines.pop()
        if not lines:  # (the last window of a long read may hold only the tail)
            return tail
        if self._active:  # an event from an earlier read is pending: the general machine
            if b"" not in lines:  # up to the first blank line, which dispatches it
                self._lines(lines, line_seq, seq, out)
                return tail
            head = lines.index(b"") + 1
            self._lines(lines[:head], line_seq, seq, out)
            if head == len(lines):
                return tail
            lines = lines[head:]
            line_seq = seq
        elif not lines[0]:  # blank lines with nothing pending dispatch nothing
            head = 1
            while head < len(lines) and not lines[head]:
                head += 1
            if head == len(lines):
                return tail
            lines = lines[head:]
            line_seq = seq
        # No event is pending and ``lines`` opens with a field or comment line. The common
        # shapes: each event one data line then a blank line ("data: {...}", comments
        # alike), or an "event:" line, a "data:" line, a blank line (Anthropic, the
        # Responses API). One slice of the list tells, then each event is framed in one
        # step; any other shape, and any event that is not a plain data / event + data one,
        # takes the general machine.
        if b"" not in lines:
            self._lines(lines, line_seq, seq, out)
            return tail
        period = lines.index(b"") + 1
        rest = len(lines) % period  # lines of an event whose blank line is still to come
        first = line_seq  # the read where the next event's first line began
        index = self._index
        append = out.append
        if period == 2 and not any(lines[1::2]):
            singles = lines[::2]
            final = singles.pop() if rest else None
            for line in singles:
                if line[:6] == b"data: ":  # a whole event: its data line and the blank line
                    # SSEEvent(index, data, None, None, None, None, first, seq, raw=...), its slots
                    # set here: the dataclass's __init__ is a Python call from C per event
                    ev = _new(SSEEvent)
                    ev.index = index
                    ev.raw = raw = line[6:]
                    # strict UTF-8 (no argument to parse) where the bytes are valid, which
                    # is where "replace" changes nothing; "replace" for the rest
                    try:
                        ev.data = _decode(raw)
                    except UnicodeDecodeError:
                        ev.data = _decode(raw, "utf-8", "replace")
                    ev.event = ev.id = ev.retry = ev.comment = None
                    ev.first_seq = first
                    ev.last_seq = seq
                    ev.unterminated = False
                    append(ev)
                    index += 1
                elif line[:1] == b":":  # a comment; the blank line after it dispatches none
                    comment = line[2:] if line[1:2] == b" " else line[1:]
                    append(
                        SSEEvent(
                            index,
                            None,
                            None,
                            None,
                            None,
                            _decode(comment, "utf-8", "replace"),
                            first,
                            seq,
                        )
                    )
                    index += 1
                else:  # any other line and its blank line: the general machine
                    self._index = index
                    self._lines([line, b""], first, seq, out)
                    index = self._index
                first = seq
            self._index = index
            if final is not None:
                self._lines([final], first, seq, out)
            return tail
        if period == 3 and not any(lines[2::3]):
            names = lines[::3]
            datas = lines[1::3]
            final_lines = lines[len(lines) - rest :]
            if rest:
                del names[-1]
                if rest == 2:
                    del datas[-1]
            # a stream names few kinds of event: each "event: x" line is decoded once (up to
            # _NAMES kinds; past them, and for any other line, the general machine)
            known = self._names
            last_name = last_kind = None  # most events name the kind the one before named
            for name, data in zip(names, datas, strict=True):
                if name == last_name:
                    kind = last_kind
                else:
                    kind = known.get(name)
                    if kind is None and name[:7] == b"event: " and len(known) < _NAMES:
                        kind = known[name] = _decode(name[7:], "utf-8", "replace")
                    last_name, last_kind = name, kind
                if kind is not None and data[:6] == b"data: ":
                    # SSEEvent(index, data, kind, None, None, None, first, seq, raw=...), as above
                    ev = _new(SSEEvent)
                    ev.index = index
                    ev.raw = raw = data[6:]
                    # strict UTF-8 (no argument to parse) where the bytes are valid, which
                    # is where "replace" changes nothing; "replace" for the rest
                    try:
                        ev.data = _decode(raw)
                    except UnicodeDecodeError:
                        ev.data = _decode(raw, "utf-8", "replace")
                    ev.event = kind
                    ev.id = ev.retry = ev.comment = None
                    ev.first_seq = first
                    ev.last_seq = seq
                    ev.unterminated = False
                    append(ev)
                    index += 1
                else:
                    self._index = index
                    self._lines([name, data, b""], first, seq, out)
                    index = self._index
                first = seq
            self._index = index
            if rest:
                self._lines(final_lines, first, seq, out)
            return tail
        self._lines(lines, line_seq, seq, out)
        return tail

    def _lines(self, lines: list[bytes], line_seq: int, seq: int, out: list[SSEEvent]) -> None:
        """The general line machine over ``lines`` (complete, without their line ends);
        ``line_seq``: the read where the first line began."""
        # The pending event's fields live in locals for the loop and go back to the
        # decoder at its end (one attribute read and write per call, not per line).
        active = self._active
        data = self._data
        event = self._event
        id_ = self._id
        retry = self._retry
        first_seq = self._first_seq
        index = self._index
        append = out.append
        for line in lines:
            if not line:  # blank line: dispatch
                if active:
                    append(
                        SSEEvent(
                            index,
                            None if data is None else "\n".join(data),
                            event,
                            id_,
                            retry,
                            None,
                            first_seq,
                            seq,
                        )
                    )
                    index += 1
                    active = False
                    data = event = id_ = retry = None
                    first_seq = 0
                line_seq = seq
                continue
            if line[0] == 58:  # ":": a comment, its own event at once
                comment = line[2:] if line[1:2] == b" " else line[1:]
                append(
                    SSEEvent(
                        index,
                        None,
                        None,
                        None,
                        None,
                        _decode(comment, "utf-8", "replace"),
                        line_seq,
                        seq,
                    )
                )
                index += 1
                line_seq = seq
                continue
            if line[:6] == b"data: ":  # the common line: one slice, no partition
                name = b"data"
                value = line[6:]
            else:  # a field without a colon has the whole line as its name, value ""
                name, _, value = line.partition(b":")
                if value[:1] == b" ":  # one leading space removed, once
                    value = value[1:]
            if name == b"data":
                if data is None:
                    data = [_decode(value, "utf-8", "replace")]
                else:
                    data.append(_decode(value, "utf-8", "replace"))
            elif name == b"event":
                event = _decode(value, "utf-8", "replace")
            elif name == b"id":
                if 0 in value:  # NUL: the spec ignores the field
                    line_seq = seq
                    continue
                id_ = _decode(value, "utf-8", "replace")
            elif name == b"retry":
                # bytes.isdigit() is ASCII digits only; past MAX_RETRY_DIGITS int() would
                # raise (Python's 4,300-digit limit)
                if len(value) > MAX_RETRY_DIGITS or not value.isdigit():
                    line_seq = seq
                    continue
                retry = int(value)
            else:  # unknown field: ignored (spec)
                line_seq = seq
                continue
            if not active:
                active = True
                first_seq = line_seq
            line_seq = seq
        self._active = active
        self._data = data
        self._event = event
        self._id = id_
        self._retry = retry
        self._first_seq = first_seq
        self._index = index


def iter_sse(reads: Iterable[bytes]) -> Iterator[SSEEvent]:
    """Frame a whole sequence of reads (seq = position); flushes at the end."""
    decoder = SSEDecoder()
    for seq, chunk in enumerate(reads):
        yield from decoder.decode(chunk, seq)
    yield from decoder.flush()
