"""The in-flight journal: an append-only binary log of the exchanges being recorded.

One recording appends to one journal *segment* at a time (``journal-<n>.journal``; a new
segment starts past 64 MiB). A segment starts with the 8 bytes ``MAGIC``; records from
concurrent exchanges interleave after it, each framed and checksummed::

    sync (2 bytes 0xD7 0x1A) | kind (1 byte) | exchange (uint32 LE) | payload length
    (uint32 LE) | CRC-32 of kind, exchange, length and payload (uint32 LE) | payload

- ``G`` (exchange 0xFFFFFFFF): JSON capture info and redaction policy, first in a segment;
- ``H``: JSON header of one exchange (the redacted request, started_at), followed by
- ``B``: the (redacted) request body bytes;
- ``S``: JSON response line (status, redacted headers, http_version, t_headers_ns);
- ``R``: network reads of one exchange: ``first`` (uint32 LE, the index of the first read
  in this record), ``count`` (uint32 LE), ``count`` arrival offsets ``t_ns`` (int64 LE),
  ``count`` lengths (uint32 LE), then the raw bytes of the reads, concatenated;
- ``E``: JSON end record (end_reason, error, t_end_ns, n_reads, n_bytes).

Segments of earlier versions (no ``MAGIC``: records ``kind | exchange | length | payload``
with no checksum, ``R`` without ``first``, and ``D`` records of one read) still read.

Records are queued in memory and written in order, unbuffered (no fsync): by a recording
thread, right after it has handed a read on, once ``interval`` (5 ms) has passed since
any thread last wrote; by a flusher thread every ``idle_interval`` (50 ms), for streams that
have paused; and synchronously when an exchange ends (see ``JournalWriter``). Reads are not
queued one by one: each write packs each exchange's new reads into one ``R`` record straight
from the recorder's lists (so a read costs the recording thread two list appends).

I/O errors (EIO, ENOSPC, a short write): a record counts as written only once all of its
bytes are; what a failed write did not finish is cut back off the file (``ftruncate``) and
written again, whole, by the next write, so a read is marked journaled only after it is on
disk; a segment that cannot be created or whose first record fails is dropped and the next
write starts another (the flusher never dies of it). ``JournalWriter.error`` holds the last
failure, ``ok`` says whether everything queued has since been written.

A process killed with SIGKILL leaves every finished exchange whole, at most the last
``interval`` of a flowing stream's reads missing (the last ``idle_interval`` of a paused
one's), and at most a torn record. The reader skips a torn or damaged record (bad framing
or checksum) to the next good one and checks each exchange against itself: reads must
continue where the last ``R`` record stopped and add up to the ``E`` record's counts, else
the exchange is marked cut (``"incomplete"``, with the reason); no byte is ever made up.
There is no per-exchange file to create. A segment is deleted once every exchange with
records in it is in a Parquet part.

The reader turns each exchange found here that is not already in a part into a row: with
its recorded end reason when its ``E`` record made it and it is whole, else end_reason
``"incomplete"``.
"""

from __future__ import annotations

import errno
import json
import os
import struct
import sys
import threading
import time
import zlib
from array import array
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import accumulate
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
_NEVER = 2**63 - 1  # ``due_ns`` of a journal that writes every record at once (interval 0)

MAGIC = b"\xd7LABJ\x02\r\n"  # a segment of this version (v1 segments start with b"G")
SYNC = b"\xd7\x1a"
REC2 = struct.Struct("<2scIII")  # sync, kind, exchange, payload length, crc32
_CRC_HEAD = struct.Struct("<cII")  # what the checksum covers before the payload
REC = struct.Struct("<cII")  # earlier versions: kind, exchange, payload length
_T = struct.Struct("<q")
_COUNT = struct.Struct("<I")
_FIRST_COUNT = struct.Struct("<II")
_KINDS = frozenset(b"GHBSRE")
# an R record of one read: what its checksum covers before the data (the _CRC_HEAD fields,
# then first, count, t_ns, length), and how long its meta (first to length) is
_CRC_ONE = struct.Struct("<cIIIIqI")
_ONE_READ_META = 20


def frame(kind: bytes, exchange: int, payload: bytes | list[bytes]) -> bytes:
    """One framed, checksummed record (``payload`` may be several buffers)."""
    parts = payload if isinstance(payload, list) else [payload]
    size = sum(map(len, parts))
    crc = zlib.crc32(_CRC_HEAD.pack(kind, exchange, size))
    for part in parts:
        crc = zlib.crc32(part, crc)
    return REC2.pack(SYNC, kind, exchange, size, crc) + b"".join(parts)


def json_record(kind: bytes, exchange: int, obj: dict[str, Any]) -> bytes:
    return frame(kind, exchange, json.dumps(obj, ensure_ascii=False).encode("utf-8"))


def bytes_record(kind: bytes, exchange: int, payload: bytes) -> bytes:
    return frame(kind, exchange, payload)


def reads_record(exchange: int, first: int, reads: list[bytes], ts: list[int]) -> list[bytes]:
    """One ``R`` record holding these reads (``reads`` and ``ts`` of equal length; ``first``:
    the index of the first), as two buffers to write: its header and the reads joined.
    (Handing ``writev`` one buffer per read measured slower: a call per 1,024 reads, and each
    call gives up the GIL and has to win it back from the recording thread.)

    One read, the common case of a stream paced slower than the journal's ``interval``
    (``lab proxy`` carrying 200 of them packs ~6,000 such records a second), is packed
    with one struct instead of the arrays: the same bytes."""
    if len(reads) == 1:
        data = reads[0]
        size = _ONE_READ_META + len(data)
        fields = _CRC_ONE.pack(b"R", exchange, size, first, 1, ts[0], len(data))
        crc = zlib.crc32(data, zlib.crc32(fields))
        return [REC2.pack(SYNC, b"R", exchange, size, crc) + fields[9:], data]
    return _reads_record_arrays(exchange, first, reads, ts)


def _reads_record_arrays(
    exchange: int, first: int, reads: list[bytes], ts: list[int]
) -> list[bytes]:
    """:func:`reads_record` for any number of reads (the arrays hold times and lengths)."""
    times, lengths = array("q", ts), array("I", map(len, reads))
    if sys.byteorder != "little":  # pragma: no cover - the format is little-endian
        times.byteswap()
        lengths.byteswap()
    data = b"".join(reads)
    meta = _FIRST_COUNT.pack(first, len(reads)) + times.tobytes() + lengths.tobytes()
    size = len(meta) + len(data)
    crc = zlib.crc32(data, zlib.crc32(meta, zlib.crc32(_CRC_HEAD.pack(b"R", exchange, size))))
    return [REC2.pack(SYNC, b"R", exchange, size, crc) + meta, data]


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
    queue and every exchange's new reads go out in one ``writev``, from that thread; a
    thread that finds another one writing skips its turn instead of waiting. A daemon
    thread writes everything once ``idle_interval`` (default 50 ms) has passed since any
    thread last wrote: it only matters for a stream that has paused, whose last reads no
    new read will carry out (while streams flow it only looks at the clock: :meth:`_run`).
    ``sync()`` writes everything now (``end`` does, so a finished exchange is entirely on disk before
    ``on_end`` returns, unless the disk refused it: then ``ok`` is False). A recorder killed
    mid-stream loses at most the last ``interval`` of a flowing stream's reads
    (``idle_interval`` of a paused one's), and that exchange is marked incomplete anyway.
    ``interval`` = 0: every record is written by ``append`` itself.

    A write that fails (see the module docstring) raises nothing: its records stay queued
    (its reads unmarked) for the next write, ``error`` keeps the ``OSError`` and ``ok`` is
    False until a later write has put everything queued on disk. ``complete`` holds the
    exchanges whose end record (and so every record before it) is on disk.

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
        self._idle_ns = int(idle_interval * 1e9)
        self._drained_ns = 0  # when a thread last drained (``time.monotonic_ns()``)
        self.due_ns = 0 if interval else _NEVER
        """``time.monotonic_ns()`` from which ``write_due`` writes (``interval`` after the
        last write by any thread); recording threads compare each read's time with it.
        Never reached with ``interval`` = 0 (every record is written at once then)."""
        self.segment_bytes = SEGMENT_BYTES
        self.error: OSError | None = None
        """The last write failure (kept after the journal recovered; ``ok`` says if it did)."""
        self.ok = True
        """False from a failed write until a later one has written everything queued."""
        self.failures = 0
        self.complete: set[int] = set()
        """Exchanges whose end record is on disk, all their records before it."""
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

    def begin(
        self,
        exchange: int,
        record: bytes,
        reads: list[bytes],
        read_t_ns: list[int],
        spill_bytes: int | None = None,
    ) -> None:
        """Queue an exchange's first record and make sure the flusher runs.

        ``reads`` / ``read_t_ns``: the recorder's lists, appended to as reads arrive (the
        read first, then its time); the flusher journals what is new in them.
        ``spill_bytes``: once more than this many of the exchange's bytes are in the
        journal, every read written to it is dropped from ``reads`` (replaced by ``b""``:
        the indexes stay), so the exchange holds no more than about this much in memory
        whatever its length; :meth:`spilled` says how many bytes were dropped.
        """
        if self._closed:
            raise ValueError(f"{self.directory}: journal is closed")
        self.start()
        # [reads, ts, reads journaled, spill_bytes, bytes dropped, bytes journaled, dropped up to]
        self._tracked[exchange] = [reads, read_t_ns, 0, spill_bytes, 0, 0, 0]
        self._queue.append((exchange, record))
        self._wake.set()
        if not self.interval:
            self.sync()

    def end(self, exchange: int, record: bytes) -> None:
        """Write the exchange's remaining reads, then its last record, now."""
        with self._wlock:
            entry = self._tracked.pop(exchange, None)
            if entry is not None:
                reads, ts, done = entry[:3]
                n = len(ts)
                if n > done:  # not journaled yet (or a write of them failed): before the end
                    rest = b"".join(reads_record(exchange, done, reads[done:n], ts[done:n]))
                    self._queue.append((exchange, rest))
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
        """Write the queue, then every exchange's new reads, in one ``writev`` (caller holds
        ``_wlock``). Only records written whole count: the rest goes back to the queue (its
        reads stay unmarked) and is written again, whole, next time.

        A write finds the exchanges with new reads in one comprehension over all of them:
        with 200 paced streams in flight, as ``lab proxy`` carries, this runs 200 times a
        second, each time for about a sixth of them."""
        now = self._drained_ns = time.monotonic_ns()
        if self._interval_ns:
            self.due_ns = now + self._interval_ns
        queue = self._queue
        items = [queue.popleft() for _ in range(len(queue))]
        # (exchange, entry, reads there now): a read is appended before its time, so both
        # are there up to len(ts); list() as begin() adds from other threads
        new_reads = [(k, e, n) for k, e in list(self._tracked.items()) if (n := len(e[1])) > e[2]]
        if not items and not new_reads:
            return
        # where each record ends in the write: queued items, then one R record (2 buffers)
        # per exchange with new reads
        buffers = [record for _, record in items]
        ends = list(accumulate(map(len, buffers)))
        total = ends[-1] if ends else 0
        for k, entry, n in new_reads:
            done = entry[2]
            head, data = reads_record(k, done, entry[0][done:n], entry[1][done:n])
            buffers += (head, data)
            total += len(head) + len(data)
            ends.append(total)
        seg = self._segment()
        if seg is None:  # no segment could be started: everything stays queued
            self._requeue(items)
            return
        assert seg.fd is not None  # _segment returns an open one
        written, exc = _write_buffers(seg.fd, buffers)
        if exc is not None:
            written = self._cut_back(seg, written, [e for e in ends if e <= written], exc)
        else:
            seg.size += written
            self.ok = True
        whole = sum(1 for end in ends if end <= written) if exc is not None else len(ends)
        live = seg.live
        for k, record in items[: min(whole, len(items))]:
            live.add(k)
            if record[2:3] == b"E":  # its end record, every earlier one before it
                self.complete.add(k)
        first = len(items)
        for i, (k, entry, n) in enumerate(new_reads[: max(0, whole - first)]):
            entry[2] = n
            live.add(k)
            if entry[3] is not None:  # spill_bytes: drop what is on disk past it
                entry[5] += len(buffers[first + 2 * i + 1])
                if entry[5] > entry[3]:
                    _drop(entry, n)
        if whole < len(items):
            self._requeue(items[whole:])

    def spilled(self, exchange: int, reads: list[bytes]) -> tuple[int, int]:
        """``(bytes of the exchange's reads, of those the bytes dropped from memory)``,
        counted together while no write can drop more (``begin``'s ``spill_bytes``)."""
        with self._wlock:
            entry = self._tracked.get(exchange)
            dropped = entry[4] if entry is not None else 0
            return dropped + sum(map(len, reads)), dropped

    def _requeue(self, items: list[tuple[int, bytes]]) -> None:
        self._queue.extendleft(reversed(items))

    def _cut_back(self, seg: _Segment, written: int, boundaries: list[int], exc: OSError) -> int:
        """A write failed after ``written`` bytes: cut the record it tore off the file (it
        ends at the last whole record then) and note the failure; returns how many bytes
        of the write are on disk as whole records (a torn tail that could not be cut off
        stays, and the reader skips it)."""
        self.error = exc
        self.ok = False
        self.failures += 1
        keep = boundaries[-1] if boundaries else 0
        if keep < written and seg.fd is not None:
            try:
                os.ftruncate(seg.fd, seg.size + keep)
                written = keep
            except OSError:
                pass
        seg.size += written
        return keep

    def _segment(self) -> _Segment | None:
        """The segment to append to: the current one, or a new one (past ``segment_bytes``,
        or when none is open); None when a new one cannot be started."""
        seg = self._segments[-1] if self._segments else None
        if seg is not None and seg.fd is not None and seg.size < self.segment_bytes:
            return seg
        if seg is not None and seg.fd is not None:
            os.close(seg.fd)
            seg.fd = None
            self._drop_finished()
        path = self.directory / f"journal-{self._next:05d}{JOURNAL_SUFFIX}"
        self._next += 1
        fd = None
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
            head = MAGIC + self._g
            view = memoryview(head)
            while view:  # all of it, or the segment is dropped
                view = view[os.write(fd, view) :]
        except OSError as exc:  # the next write tries a new segment
            self.error = exc
            self.ok = False
            self.failures += 1
            if fd is not None:
                os.close(fd)
            _unlink(path)
            return None
        seg = _Segment(path, fd, len(head))
        self._segments.append(seg)
        return seg

    def _run(self) -> None:
        """The flusher: while anything is in flight, it writes once ``idle_interval`` has
        passed since any thread last wrote (a paused stream's reads, records no read will
        carry out), and otherwise sleeps until then. A flowing stream's own thread writes
        every ``interval``, so the flusher only wakes to look at the clock: it never
        waits for the write lock a recording thread holds across its ``writev``, nor writes
        the few reads that thread is about to write anyway (which, on 2 cores, cost a
        stream read back-to-back ~5 % of its throughput: docs/PERFORMANCE.md, 4)."""
        while not self._closed:
            if self._queue or self._tracked:  # in flight: what their threads have not written
                wait = self._drained_ns + self._idle_ns - time.monotonic_ns()
                if wait <= 0:
                    try:
                        self.sync()
                    except Exception as exc:  # noqa: BLE001 - the flusher must outlive any failure
                        self.error = (
                            exc if isinstance(exc, OSError) else OSError(errno.EIO, str(exc))
                        )
                        self.ok = False
                    wait = self._idle_ns
                self._stop.wait(wait / 1e9)
            else:
                self._wake.clear()
                if not (self._queue or self._tracked):
                    self._wake.wait(0.1)

    def written(self, exchanges: Iterable[int]) -> None:
        """These exchanges are in a Parquet part: delete segments nobody needs any more."""
        done = set(exchanges)
        with self._wlock:
            for seg in self._segments:
                seg.live -= done
            self.complete -= done
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


def _drop(entry: list[Any], n: int) -> None:
    """Drop an exchange's journaled reads ``[dropped up to, n)`` from memory (``b""`` in
    their place), counting their bytes."""
    reads = entry[0]
    dropped = 0
    for i in range(entry[6], n):
        dropped += len(reads[i])
        reads[i] = b""
    entry[4] += dropped
    entry[6] = n


_IOV_MAX = 1024  # POSIX minimum is 16; Linux and macOS allow 1024


def _write_buffers(fd: int, buffers: list[bytes]) -> tuple[int, OSError | None]:
    """Write ``buffers`` in order with ``writev`` (the kernel gathers them, without the
    GIL); returns how many bytes were written, and the error that stopped it (or None)."""
    total = 0
    try:
        if not hasattr(os, "writev"):  # pragma: no cover - Windows
            view = memoryview(b"".join(buffers))
            while view:
                n = os.write(fd, view)
                total += n
                view = view[n:]
            return total, None
        for i in range(0, len(buffers), _IOV_MAX):
            batch = buffers[i : i + _IOV_MAX]
            size = sum(map(len, batch))
            n = os.writev(fd, batch)
            total += n
            if n < size:  # a short write (full disk, signal): the rest the plain way
                view = memoryview(b"".join(batch))[n:]
                while view:
                    m = os.write(fd, view)
                    if m <= 0:
                        raise OSError(errno.EIO, "write wrote nothing")
                    total += m
                    view = view[m:]
    except OSError as exc:
        return total, exc
    return total, None


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
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
    cut: str | None = None
    """Why the journal cannot vouch for this exchange although its records were read (a
    torn or missing record): the reader marks it ``"incomplete"`` with this reason."""
    torn: int = 0  # damaged records that named this exchange

    def _check(self) -> None:
        end = self.end
        if self.cut is None and end is not None and isinstance(end.get("n_reads"), int):
            if len(self.reads) != end["n_reads"] or sum(map(len, self.reads)) != end.get(
                "n_bytes", sum(map(len, self.reads))
            ):
                self.cut = (
                    f"the journal holds {len(self.reads)} of the exchange's {end['n_reads']} "
                    "reads (a journal write failed or was torn)"
                )
        if self.cut is not None and self.torn:
            self.cut += f"; {self.torn} torn journal record(s) skipped"


def _unpack_reads(data: bytes, start: int, end: int, item: JournalContents) -> None:
    """A v1 ``R`` record (no ``first``)."""
    (n,) = _COUNT.unpack_from(data, start)
    _append_reads(data, start + _COUNT.size, end, n, item)


def _append_reads(data: bytes, pos: int, end: int, n: int, item: JournalContents) -> None:
    ts = array("q", data[pos : pos + 8 * n])
    pos += 8 * n
    lens = array("I", data[pos : pos + 4 * n])
    pos += 4 * n
    if sys.byteorder != "little":  # pragma: no cover - the format is little-endian
        ts.byteswap()
        lens.byteswap()
    if pos + sum(lens) != end:
        raise ValueError(f"R record whose read lengths do not add up ({pos + sum(lens)} != {end})")
    for length in lens:
        item.reads.append(data[pos : pos + length])
        pos += length
    item.read_t_ns.extend(ts)


def _reads_v2(data: bytes, start: int, end: int, item: JournalContents) -> None:
    """A v2 ``R`` record: appended where it continues the reads; a repeat is skipped; a gap
    (a record of earlier reads lost) cuts the exchange there."""
    if item.cut is not None:
        return
    first, n = _FIRST_COUNT.unpack_from(data, start)
    have = len(item.reads)
    if first > have:
        item.cut = f"reads {have} to {first - 1} are missing from the journal"
        return
    if first + n <= have:  # written again after a failure: already here
        return
    tmp = JournalContents({}, {}, {}, b"")
    _append_reads(data, start + _FIRST_COUNT.size, end, n, tmp)
    skip = have - first
    item.reads.extend(tmp.reads[skip:])
    item.read_t_ns.extend(tmp.read_t_ns[skip:])


def _record_at(data: bytes, pos: int) -> tuple[bytes, int, int, int] | None:
    """``(kind, exchange, start, end)`` of the v2 record at ``pos`` if it is whole and its
    checksum holds, else None."""
    if data[pos : pos + 2] != SYNC or pos + REC2.size > len(data):
        return None
    _, kind, exchange, length, crc = REC2.unpack_from(data, pos)
    start = pos + REC2.size
    end = start + length
    if kind[0] not in _KINDS or end > len(data):
        return None
    view = memoryview(data)[start:end]
    if zlib.crc32(view, zlib.crc32(_CRC_HEAD.pack(kind, exchange, length))) != crc:
        return None
    return kind, exchange, start, end


def _resync(data: bytes, pos: int) -> int:
    """Where the next good v2 record after ``pos`` starts (``len(data)``: none)."""
    while True:
        pos = data.find(SYNC, pos)
        if pos < 0:
            return len(data)
        if _record_at(data, pos) is not None:
            return pos
        pos += 1


def read_journals(paths: Iterable[Path]) -> list[JournalContents]:
    """Parse journal segments (of one or more recordings), merging each exchange's records
    across segments in segment order. A torn or damaged record is skipped (and the
    exchange it belonged to marked cut unless a later copy made it whole); an exchange whose
    header never made it to disk is dropped (nothing of it was recorded)."""
    found: dict[tuple[str, int], JournalContents] = {}
    pending: dict[tuple[str, int], dict[str, Any]] = {}
    for path in sorted(paths, key=lambda p: (str(p.parent), p.name)):
        data = path.read_bytes()
        if data.startswith(MAGIC):
            _read_v2(data, found, pending)
        else:
            _read_v1(data, found, pending)
    for item in found.values():
        item._check()
    return list(found.values())


def _read_v2(
    data: bytes,
    found: dict[tuple[str, int], JournalContents],
    pending: dict[tuple[str, int], dict[str, Any]],
) -> None:
    pos, n = len(MAGIC), len(data)
    capture: dict[str, Any] | None = None
    redaction: dict[str, Any] = {}
    torn: list[int] = []  # exchanges named by damaged records, before capture is known
    while pos < n:
        record = _record_at(data, pos)
        if record is None:  # torn or damaged: on to the next good record
            if data[pos : pos + 2] == SYNC and pos + REC2.size <= n:
                torn.append(REC2.unpack_from(data, pos)[2])
            pos = _resync(data, pos + 1)
            continue
        kind, exchange, start, end = record
        pos = end
        if kind == b"G":
            g = json.loads(data[start:end])
            capture, redaction = g.get("capture") or {}, g.get("redaction") or {}
            continue
        if capture is None:
            return  # a segment whose first record was lost: nothing here can be placed
        key = (str(capture.get("capture_id")), exchange)
        item = found.get(key)
        if kind == b"R":
            if item is not None:
                _reads_v2(data, start, end, item)
        elif kind == b"H":
            pending[key] = json.loads(data[start:end])
        elif kind == b"B":
            header = pending.pop(key, None)
            if header is not None and item is None:
                found[key] = JournalContents(capture, redaction, header, data[start:end])
        elif kind == b"S" and item is not None:
            item.response = json.loads(data[start:end])
        elif kind == b"E" and item is not None:
            item.end = json.loads(data[start:end])
    if capture is not None:
        cid = str(capture.get("capture_id"))
        for exchange in torn:
            item = found.get((cid, exchange))
            if item is not None:
                item.torn += 1


def _read_v1(
    data: bytes,
    found: dict[tuple[str, int], JournalContents],
    pending: dict[tuple[str, int], dict[str, Any]],
) -> None:
    """A segment written before records had checksums: a torn final record is ignored."""
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
