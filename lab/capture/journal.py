"""The in-flight journal: an append-only binary log of the exchanges being recorded.

One recording appends to one journal *segment* at a time (``journal-<n>.journal``; a new
segment starts past 64 MiB). Records from concurrent exchanges interleave; each record is::

    kind (1 byte) | exchange (uint32 LE) | payload length (uint32 LE) | payload

- ``G`` (exchange 0xFFFFFFFF): JSON capture info and redaction policy, first in a segment;
- ``H``: JSON header of one exchange (the redacted request, started_at), followed by
- ``B``: the (redacted) request body bytes;
- ``S``: JSON response line (status, redacted headers, http_version, t_headers_ns);
- ``R``: the network reads of one exchange since its last ``R`` record: ``count``
  (uint32 LE), ``count`` arrival offsets ``t_ns`` (int64 LE), ``count`` lengths (uint32
  LE), then the raw bytes of the reads, concatenated;
- ``D``: one network read, ``t_ns`` (int64 LE) then the raw bytes (written by earlier
  versions, still read);
- ``E``: JSON end record (end_reason, error, t_end_ns).

Records are queued in memory and written in order, unbuffered (no fsync): by a recording
thread, right after it has handed a read on, once ``interval`` (5 ms) has passed since
any thread last wrote; by a flusher thread every ``idle_interval`` (50 ms), for streams that
have paused; and synchronously when an exchange ends (see ``JournalWriter``). Reads are not
queued one by one: each write packs each exchange's new reads into one ``R`` record straight
from the recorder's lists (so a read costs the recording thread two list appends; a record
per read cost it ~1 µs more). A process killed with SIGKILL leaves every finished exchange
whole, at most the last ``interval`` of a flowing stream's reads missing (the last
``idle_interval`` of a paused one's), and at most a torn final record, which the reader
ignores. There is no per-exchange file to create. A segment is deleted once every exchange
with records in it is in a Parquet part.

The reader turns each exchange found here that is not already in a part into a row: with
its recorded end reason when its ``E`` record made it, else end_reason ``"incomplete"``.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import threading
import time
from array import array
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "JOURNAL_SUFFIX",
    "JournalContents",
    "JournalWriter",
    "read_journals",
]

JOURNAL_SUFFIX = ".journal"
NO_EXCHANGE = 0xFFFFFFFF
SEGMENT_BYTES = 64 * 1024 * 1024

REC = struct.Struct("<cII")  # kind, exchange, payload length
_T = struct.Struct("<q")
_COUNT = struct.Struct("<I")


def json_record(kind: bytes, exchange: int, obj: dict[str, Any]) -> bytes:
    payload = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    return REC.pack(kind, exchange, len(payload)) + payload


def bytes_record(kind: bytes, exchange: int, payload: bytes) -> bytes:
    return REC.pack(kind, exchange, len(payload)) + payload


def reads_record(exchange: int, reads: list[bytes], ts: list[int]) -> list[bytes]:
    """One ``R`` record holding these reads (``reads`` and ``ts`` of equal length), as two
    buffers to write: its header and the reads joined. (Handing ``writev`` one buffer per
    read measured slower: a call per 1,024 reads, and each call gives up the GIL and has to
    win it back from the recording thread.)"""
    count = _COUNT.pack(len(reads))
    times, lengths = array("q", ts), array("I", map(len, reads))
    if sys.byteorder != "little":  # pragma: no cover - the format is little-endian
        times.byteswap()
        lengths.byteswap()
    data = b"".join(reads)
    size = len(count) + 8 * len(times) + 4 * len(lengths) + len(data)
    head = REC.pack(b"R", exchange, size) + count + times.tobytes() + lengths.tobytes()
    return [head, data]


def check_intervals(interval: float, idle_interval: float) -> None:
    """``ValueError`` unless ``interval`` >= 0 and ``idle_interval`` > 0 (seconds)."""
    if not (interval >= 0 and idle_interval > 0):  # NaN fails too
        raise ValueError(
            "journal intervals must be journal_interval >= 0 and journal_idle_interval > 0 "
            f"seconds (got {interval!r} and {idle_interval!r})"
        )


@dataclass
class _Segment:
    path: Path
    fd: int | None
    size: int = 0
    live: set[int] = field(default_factory=set)  # exchanges here not yet in a part


class JournalWriter:
    """Appends records for one recording; thread-safe; rotates and deletes segments.

    ``interval`` > 0 (default 5 ms): ``append`` only queues the record (a deque append,
    no syscall). A recording thread calls ``write_due(now)`` after a read once ``due_ns``
    has passed, i.e. no thread has written for ``interval`` (``ExchangeRecorder.tee``): the
    queue and every exchange's new reads go out in one ``writev``, from that thread; a thread that finds another one writing skips its turn
    instead of waiting. A daemon thread writes everything every ``idle_interval``
    (default 50 ms): it only matters for a stream that has paused, whose last reads no new
    read will carry out. ``sync()`` writes everything
    now (``end`` does, so a finished exchange is entirely on disk before ``on_end``
    returns). A recorder killed mid-stream loses at most the last ``interval`` of a flowing
    stream's reads (``idle_interval`` of a paused one's), and that exchange is marked
    incomplete anyway. ``interval`` = 0: every record is written by ``append`` itself.

    Why the recording thread writes, not a thread ticking every 5 ms: on a busy 2-core
    machine each tick woke a thread that needed the GIL, the kernel preempted a running one
    for it (8x more involuntary context switches), and a stream read back-to-back from a
    server in the same process ran ~5 % slower though the CPU spent was the same
    (docs/PERFORMANCE.md, 4).
    """

    def __init__(
        self,
        directory: Path,
        info: dict[str, Any],
        redaction: dict[str, Any],
        interval: float = 0.005,
        idle_interval: float = 0.05,
    ):
        check_intervals(interval, idle_interval)
        self.directory = directory
        self.interval = interval
        self.idle_interval = idle_interval
        self._interval_ns = int(interval * 1e9)
        self.due_ns = 0
        """``time.monotonic_ns()`` from which ``write_due`` writes (``interval`` after the
        last write by any thread); recording threads compare each read's time with it."""
        self.segment_bytes = SEGMENT_BYTES
        self.error: OSError | None = None
        self._g = json_record(b"G", NO_EXCHANGE, {"capture": info, "redaction": redaction})
        self._queue: deque[tuple[int, bytes]] = deque()
        # exchange -> [reads, ts, how many already in the journal]: the recorder's own lists
        self._tracked: dict[int, list[Any]] = {}
        self._wlock = threading.Lock()  # held while draining + writing: keeps record order
        self._segments: list[_Segment] = []
        self._next = 0
        self._closed = False
        self._wake = threading.Event()
        self._stop = threading.Event()  # close() interrupts the flusher's pause at once
        self._thread: threading.Thread | None = None

    @property
    def paths(self) -> list[Path]:
        return [s.path for s in self._segments]

    def start(self) -> None:
        """Start the flusher thread now (``begin`` would; starting a thread waits for it,
        and a recorder should not spend that time between sending a request and its first
        read). Idempotent."""
        if self.interval and self._thread is None:
            with self._wlock:
                if self._thread is None:
                    self._thread = threading.Thread(
                        target=self._run, name=f"lab-journal-{self.directory.name}", daemon=True
                    )
                    self._thread.start()

    def begin(self, exchange: int, record: bytes, reads: list[bytes], read_t_ns: list[int]) -> None:
        """Queue an exchange's first record and make sure the flusher runs.

        ``reads`` / ``read_t_ns``: the recorder's lists, appended to as reads arrive (the
        read first, then its time); the flusher journals what is new in them.
        """
        if self._closed:
            raise ValueError(f"{self.directory}: journal is closed")
        self.start()
        self._tracked[exchange] = [reads, read_t_ns, 0]
        self._queue.append((exchange, record))
        self._wake.set()
        if not self.interval:
            self.sync()

    def end(self, exchange: int, record: bytes) -> None:
        """Write the exchange's remaining reads, then its last record, now."""
        with self._wlock:
            self._drain()
            self._tracked.pop(exchange, None)
            self._queue.append((exchange, record))
            self._drain()

    def append(self, exchange: int, record: bytes) -> None:
        """Queue one whole record (hot path: a deque append)."""
        if self._closed:
            raise ValueError(f"{self.directory}: journal is closed")
        self._queue.append((exchange, record))
        if not self.interval:
            self.sync()

    def sync(self) -> None:
        """Write everything queued so far, and every exchange's new reads, in order."""
        with self._wlock:
            self._drain()

    def write_due(self, now_ns: int) -> None:
        """Write everything in flight if ``interval`` has passed since any thread last wrote
        (``now_ns``: ``time.monotonic_ns()``). Otherwise, or while another thread is
        writing, do nothing: the caller tries again at a later read, and the flusher
        catches a stream that has no later read. However many streams are in flight, the
        journal gets at most one such write per ``interval``."""
        if now_ns >= self.due_ns and self._wlock.acquire(False):
            try:
                if now_ns >= self.due_ns:  # not written while this thread took the lock
                    self._drain()
            finally:
                self._wlock.release()

    def _drain(self) -> None:
        self.due_ns = time.monotonic_ns() + self._interval_ns
        queue = self._queue
        items = [queue.popleft() for _ in range(len(queue))]
        buffers = [record for _, record in items]
        live = {k for k, _ in items}
        for k, entry in list(self._tracked.items()):
            reads, ts, done = entry
            n = len(ts)  # a read is appended before its time: both are there up to len(ts)
            if n > done:
                buffers += reads_record(k, reads[done:n], ts[done:n])
                entry[2] = n
                live.add(k)
        if not buffers:
            return
        seg = self._segments[-1] if self._segments else None
        if seg is None or seg.fd is None or seg.size >= self.segment_bytes:
            if seg is not None and seg.fd is not None:
                os.close(seg.fd)
                seg.fd = None
                self._drop_finished()
            seg = self._open_segment()
        try:
            seg.size += _write_buffers(seg.fd, buffers)
        except OSError as exc:  # disk trouble: the in-memory copy still reaches Parquet
            self.error = exc
            return
        seg.live.update(live)

    def _run(self) -> None:
        while not self._closed:
            if self._queue or self._tracked:  # in flight: what their threads have not written
                self.sync()
                self._stop.wait(self.idle_interval)
            else:
                self._wake.clear()
                if not (self._queue or self._tracked):
                    self._wake.wait(0.1)

    def _open_segment(self) -> _Segment:
        path = self.directory / f"journal-{self._next:05d}{JOURNAL_SUFFIX}"
        self._next += 1
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        seg = _Segment(path, fd)
        self._segments.append(seg)
        _write_all(fd, self._g)
        seg.size = len(self._g)
        return seg

    def written(self, exchanges: Iterable[int]) -> None:
        """These exchanges are in a Parquet part: delete segments nobody needs any more."""
        done = set(exchanges)
        with self._wlock:
            for seg in self._segments:
                seg.live -= done
            self._drop_finished()

    def _drop_finished(self) -> None:
        keep = []
        for i, seg in enumerate(self._segments):
            current = i == len(self._segments) - 1 and seg.fd is not None
            if seg.live or current:
                keep.append(seg)
                continue
            _unlink(seg.path)
        self._segments = keep

    def close(self) -> None:
        """Write what is queued, stop the flusher, delete segments nobody needs."""
        self._closed = True
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        with self._wlock:
            self._drain()
            for seg in self._segments:
                if seg.fd is not None:
                    os.close(seg.fd)
                    seg.fd = None
            self._drop_finished()


_IOV_MAX = 1024  # POSIX minimum is 16; Linux and macOS allow 1024


def _write_buffers(fd: int, buffers: list[bytes]) -> int:
    """Write ``buffers`` in order with ``writev`` (the kernel gathers them, without the
    GIL); returns the number of bytes written."""
    if not hasattr(os, "writev"):  # pragma: no cover - Windows
        data = b"".join(buffers)
        _write_all(fd, data)
        return len(data)
    total = 0
    for i in range(0, len(buffers), _IOV_MAX):
        batch = buffers[i : i + _IOV_MAX]
        size = sum(map(len, batch))
        n = os.writev(fd, batch)
        if n < size:  # a short write (full disk, signal): the rest the plain way
            _write_all(fd, memoryview(b"".join(batch))[n:])
        total += size
    return total


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


# -- reading -------------------------------------------------------------------------------


@dataclass
class JournalContents:
    """One exchange as found in the journal."""

    capture: dict[str, Any]
    redaction: dict[str, Any]
    header: dict[str, Any]
    body: bytes
    response: dict[str, Any] | None = None
    reads: list[bytes] = field(default_factory=list)
    read_t_ns: list[int] = field(default_factory=list)
    end: dict[str, Any] | None = None


def _unpack_reads(data: bytes, start: int, end: int, item: JournalContents) -> None:
    (n,) = _COUNT.unpack_from(data, start)
    pos = start + _COUNT.size
    ts = array("q", data[pos : pos + 8 * n])
    pos += 8 * n
    lens = array("I", data[pos : pos + 4 * n])
    pos += 4 * n
    if sys.byteorder != "little":  # pragma: no cover - the format is little-endian
        ts.byteswap(), lens.byteswap()
    if pos + sum(lens) != end:
        raise ValueError(f"R record whose read lengths do not add up ({pos + sum(lens)} != {end})")
    for length in lens:
        item.reads.append(data[pos : pos + length])
        pos += length
    item.read_t_ns.extend(ts)


def read_journals(paths: Iterable[Path]) -> list[JournalContents]:
    """Parse journal segments (of one or more recordings), merging each exchange's records
    across segments in segment order. Torn trailing records are ignored; an exchange whose
    header never made it to disk is dropped (nothing of it was recorded)."""
    found: dict[tuple[str, int], JournalContents] = {}
    pending: dict[tuple[str, int], dict[str, Any]] = {}
    for path in sorted(paths, key=lambda p: (str(p.parent), p.name)):
        data = path.read_bytes()
        pos, n = 0, len(data)
        capture: dict[str, Any] | None = None
        redaction: dict[str, Any] = {}
        while pos + REC.size <= n:
            kind, exchange, length = REC.unpack_from(data, pos)
            start = pos + REC.size
            end = start + length
            if end > n:
                break  # torn final record
            pos = end
            if kind == b"G":
                try:
                    g = json.loads(data[start:end])
                except ValueError:
                    break
                capture, redaction = g.get("capture") or {}, g.get("redaction") or {}
                continue
            if capture is None:
                break  # not a journal we wrote
            key = (str(capture.get("capture_id")), exchange)
            if kind == b"R":
                item = found.get(key)
                if item is not None:
                    _unpack_reads(data, start, end, item)
            elif kind == b"D":
                item = found.get(key)
                if item is not None:
                    item.read_t_ns.append(_T.unpack_from(data, start)[0])
                    item.reads.append(data[start + 8 : end])
            elif kind == b"H":
                pending[key] = json.loads(data[start:end])
            elif kind == b"B":
                header = pending.pop(key, None)
                if header is not None:
                    found[key] = JournalContents(capture, redaction, header, data[start:end])
            elif kind == b"S" and key in found:
                found[key].response = json.loads(data[start:end])
            elif kind == b"E" and key in found:
                found[key].end = json.loads(data[start:end])
    return list(found.values())
