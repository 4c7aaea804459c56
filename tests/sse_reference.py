"""REFERENCE ONLY (test-only): the SSE framer as it was before the bytes-level rewrite.

This is a verbatim copy of ``lab/http/sse.py``'s ``SSEDecoder`` at commit 8a28629 (the
per-line ``str`` framer: one decode per read, then a Python loop over every line). It is the
oracle of ``tests/test_sse_reference.py``, which checks that today's
:class:`lab.http.sse.SSEDecoder` gives identical events on every real body split at random
and on hostile bytes, and the "old" contender of ``bench/bench_sse_framing.py``. Nothing in
``lab`` may import it. Only the names changed: ``ReferenceSSEDecoder`` and
``reference_iter_sse``; events are :class:`lab.http.sse.SSEEvent`, so they compare with ``==``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from lab.http.sse import SSEEvent

__all__ = ["MAX_RETRY_DIGITS", "ReferenceSSEDecoder", "reference_iter_sse"]

MAX_RETRY_DIGITS = 18
"""A ``retry:`` value with more digits is ignored like a malformed one: it is no reconnection
time anyone means, and past 4,300 digits ``int()`` raises ``ValueError``."""


class ReferenceSSEDecoder:
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
    )

    def __init__(self) -> None:
        self._parts: list[bytes] = []  # bytes of the current partial line (no terminator)
        self._parts_seq = 0  # seq where the partial line's first byte arrived
        self._cr_pending = False  # the previous read ended in "\r": swallow a leading "\n"
        self._at_start = True  # strip a UTF-8 BOM from the first line of the stream
        self._last_seq = 0
        self._index = 0
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
            if chunk[:1] == b"\n":  # second half of a CRLF split across reads
                chunk = chunk[1:]
                if not chunk:
                    return []
        self._last_seq = seq
        if b"\r" in chunk:
            self._cr_pending = chunk[-1:] == b"\r"
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        nl = chunk.rfind(b"\n")
        parts = self._parts
        if nl < 0:  # no line completed: just remember the bytes
            if not parts:
                self._parts_seq = seq
            parts.append(chunk)
            return []
        if parts:
            parts.append(chunk[:nl])
            region = b"".join(parts)
            first_line_seq = self._parts_seq
            parts.clear()
        else:
            region = chunk[:nl]
            first_line_seq = seq
        if nl + 1 < len(chunk):
            parts.append(chunk[nl + 1 :])
            self._parts_seq = seq
        lines = region.decode("utf-8", "replace").split("\n")
        if self._at_start:
            self._at_start = False
            if lines[0][:1] == "\ufeff":
                lines[0] = lines[0][1:]
        out: list[SSEEvent] = []
        self._process_lines(lines, first_line_seq, seq, out)
        return out

    def flush(self) -> list[SSEEvent]:
        """At EOF: surface a partial last line and a pending event, flagged unterminated."""
        out: list[SSEEvent] = []
        seq = self._last_seq
        if self._parts:
            line = b"".join(self._parts).decode("utf-8", "replace")
            self._parts.clear()
            if self._at_start:
                self._at_start = False
                if line[:1] == "\ufeff":
                    line = line[1:]
            if line:
                if line[0] == ":":
                    comment = line[1:]
                    if comment[:1] == " ":
                        comment = comment[1:]
                    start = self._parts_seq
                    out.append(
                        SSEEvent(self._index, None, None, None, None, comment, start, seq, True)
                    )
                    self._index += 1
                else:
                    self._process_lines([line], self._parts_seq, seq, out)
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

    def _process_lines(
        self, lines: list[str], first_line_seq: int, seq: int, out: list[SSEEvent]
    ) -> None:
        # The pending event's fields live in locals for the loop and go back to the
        # decoder at its end (one attribute read and write per read, not per line).
        active = self._active
        data = self._data
        event = self._event
        id_ = self._id
        retry = self._retry
        first_seq = self._first_seq
        index = self._index
        append = out.append
        line_seq = first_line_seq  # only the first line may have started in an earlier read
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
            if line[0] == ":":
                comment = line[1:]
                if comment[:1] == " ":
                    comment = comment[1:]
                append(SSEEvent(index, None, None, None, None, comment, line_seq, seq))
                index += 1
                line_seq = seq
                continue
            if line.startswith("data: "):  # the common line: one slice, no partition
                name = "data"
                value = line[6:]
            else:
                name, _, value = line.partition(":")
                if value[:1] == " ":
                    value = value[1:]
            if name == "data":
                if data is None:
                    data = [value]
                else:
                    data.append(value)
            elif name == "event":
                event = value
            elif name == "id":
                if "\x00" in value:
                    line_seq = seq
                    continue
                id_ = value
            elif name == "retry":
                # past MAX_RETRY_DIGITS int() would raise (Python's 4,300-digit limit)
                if len(value) > MAX_RETRY_DIGITS or not (value.isascii() and value.isdigit()):
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


def reference_iter_sse(reads: Iterable[bytes]) -> Iterator[SSEEvent]:
    """Frame a whole sequence of reads (seq = position); flushes at the end."""
    decoder = ReferenceSSEDecoder()
    for seq, chunk in enumerate(reads):
        yield from decoder.decode(chunk, seq)
    yield from decoder.flush()
