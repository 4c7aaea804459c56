"""Crash-safe, append-only capture writer.

One ``CaptureWriter`` is one recording: one ``capture_id`` and one directory
``<root>/<capture_id>/``. Its life on disk:

1. ``exchange(...)`` redacts the request and appends its header record to the recording's
   journal (``journal-<n>.journal``, shared by all exchanges; see ``journal.py``).
2. ``on_response`` queues one small record for the journal (a deque append: no syscall,
   no Parquet work); ``on_read`` appends the read and its time to two lists and, once
   ``journal_interval`` (5 ms) has passed since any thread last did, writes the queue and
   each exchange's new reads packed into one record (``tee`` does so after handing the
   read on). A flusher thread writes whatever is left once ``journal_idle_interval`` (50 ms)
   has passed since the last write, for streams that have paused; ``on_end`` writes the
   rest and its end record before returning (``journal_interval=0``: written in the caller, every call).
3. A finished exchange (its ``E`` record is in the journal) is queued for a
   background thread, which writes the queued exchanges together as ``chunks-<n>.parquet``
   then ``streams-<n>.parquet`` (each written as a hidden ``.*.tmp`` file, then
   ``os.replace``-d into place); journal segments nobody needs are deleted. It writes when the oldest has
   waited ``flush_interval`` seconds (default 1 s), when 16 MiB or 1000 exchanges are
   pending, on ``flush()`` and on ``close()``: Parquet work never sits on the request path
   and short exchanges share parts. A part takes whole logical requests and stops at
   32 MiB of reads (a replay unit: :mod:`lab.capture.units`). Parts are numbered in order and never rewritten.

A process killed at any point leaves only complete Parquet files (a torn ``.tmp`` is
ignored), plus journals for exchanges not yet in a part; the reader turns those into rows:
with their recorded end reason when the ``E`` record made it, else ``"incomplete"``.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lab.capture.errors import CaptureError, CaptureWriteError
from lab.capture.journal import JournalWriter, bytes_record, check_intervals, json_record
from lab.capture.redact import REDACTION_POLICY, Redactor
from lab.capture.schema import END_REASONS, capture_info, schema_for

__all__ = ["CaptureWriter", "ExchangeRecorder", "new_capture_id", "write_part"]

_MAX_PART_BYTES = 256 * 1024 * 1024  # keep one part's binary column well under 2 GiB
_EAGER_PART_BYTES = 16 * 1024 * 1024  # write a part early once this much is pending
_MAX_PART_EXCHANGES = 1000
_PART_TARGET_BYTES = 32 * 1024 * 1024  # a part stops growing here (at a request boundary),
# even when more is pending: a part is a replay unit, and replay's memory follows its size


def new_capture_id() -> str:
    """``YYYYmmddTHHMMSS-<8 hex>`` (UTC): sorts by time, unique enough per second."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(4)


def encode_body(body: bytes) -> tuple[str, str]:
    """The request body as a string column value and its encoding ("utf-8" | "base64")."""
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


def error_text(error: BaseException | str | None) -> str | None:
    if error is None:
        return None
    if isinstance(error, BaseException):
        message = str(error)
        return f"{type(error).__name__}: {message}" if message else type(error).__name__
    return str(error)


@dataclass
class _Finished:
    row: dict[str, Any]
    reads: list[bytes]
    read_t_ns: list[int]
    finished_at: float
    in_journal_only: bool = False
    """Its reads went past ``spill_bytes``: they are in the journal only, which keeps it."""


_monotonic_ns = time.monotonic_ns

REDACTED_META = "lab.redacted"
"""The ``meta`` key under which an exchange says how many echoed secrets were replaced in its
response (:attr:`ExchangeRecorder.redacted`); absent when none was."""
DECODED_META = "lab.decoded"
"""The ``Content-Encoding`` of a response recorded decoded (the request sent a secret)."""
UNDECODED_META = "lab.undecoded"
"""The ``Content-Encoding`` of a response to a request that sent a secret, recorded as it
came because the lab cannot decode it: an echo inside it could not be looked for."""

ERROR_BODY_CHARS = 500
"""How much of an HTTP error body goes into the ``error`` column (all of it is in chunks)."""


class ExchangeRecorder:
    """Records one HTTP exchange; hand it every read as it arrives, then ``on_end``."""

    __slots__ = (
        "_writer",
        "_row",
        "_redactor",
        "_t0",
        "_reads",
        "_ts",
        "_append",
        "_sync_reads",
        "_journal",
        "_write_due",
        "_ended",
        "_lock",
        "_note",
        "_scrubber",
        "_held_ts",
        "_header_scrubs",
        "_decoded",
        "_undecoded",
        "exchange",
    )

    def __init__(self, writer: CaptureWriter, exchange: int, row: dict[str, Any], redactor):
        self._writer = writer
        self.exchange = exchange
        self._row = row
        self._redactor = redactor
        self._reads: list[bytes] = []
        self._ts: list[int] = []
        self._ended = False
        self._note: str | None = None
        self._lock = threading.Lock()
        # the secrets this exchange sent, looked for in its response (None: none sent)
        self._scrubber = redactor.response_scrubber()
        self._held_ts: deque[int] = deque()  # arrival times of the reads it holds back
        self._header_scrubs = 0
        self._decoded: str | None = None
        self._undecoded: str | None = None
        journal = writer._journal
        self._append = journal.append
        self._sync_reads = journal.sync if not journal.interval else None
        self._journal = journal
        self._write_due = journal.write_due
        header = dict(row)
        body = header.pop("_body")
        journal.begin(
            exchange,
            json_record(b"H", exchange, header) + bytes_record(b"B", exchange, body),
            self._reads,
            self._ts,
            writer.spill_bytes,
        )
        self._t0 = time.monotonic_ns()  # offsets are measured from here ("request send")

    @property
    def t0_ns(self) -> int:
        """``time.monotonic_ns()`` at request send; every offset is relative to it."""
        return self._t0

    @property
    def ended(self) -> bool:
        return self._ended

    def on_response(self, status: int, headers: Mapping[str, str], http_version: str) -> None:
        """The response line and headers arrived (timestamps itself)."""
        t = time.monotonic_ns() - self._t0
        if self._ended:
            return
        row = self._row
        row["status"] = int(status)
        row["http_version"] = http_version
        if self._scrubber is not None:  # echoed secrets in headers kept by name
            self._header_scrubs += self._redactor.count_in_headers(headers)
        row["response_headers"] = json.dumps(self._redactor.headers(headers), ensure_ascii=False)
        row["t_headers_ns"] = t
        self._write(
            json_record(
                b"S",
                self.exchange,
                {
                    "status": row["status"],
                    "http_version": http_version,
                    "response_headers": row["response_headers"],
                    "t_headers_ns": t,
                },
            )
        )

    def on_read(self, data: bytes) -> None:
        """One network read (timestamps itself with ``time.monotonic_ns() - t0``).

        The hot path of recording: two list appends; once no thread has written the
        journal for ``journal_interval``, the new reads are packed into journal records and
        written (``JournalWriter.write_due``).
        """
        t = _monotonic_ns() - self._t0
        if self._ended or not data:
            return
        if type(data) is not bytes:
            data = bytes(data)
        if self._scrubber is not None:
            self._held_ts.append(t)
            for piece in self._scrubber.feed(data):
                self._reads.append(piece)
                self._ts.append(self._held_ts.popleft())
        else:
            self._reads.append(data)  # the read before its time: the journal relies on it
            self._ts.append(t)
        try:
            if self._sync_reads is not None:  # journal_interval=0: on disk before returning
                self._sync_reads()
            elif t + self._t0 >= self._journal.due_ns:
                self._write_due(t + self._t0)
        except (OSError, ValueError):  # disk trouble: the copy in memory reaches Parquet
            pass

    def tee(
        self, chunks: Iterable[bytes], on_error: Callable[[BaseException], None]
    ) -> Iterator[bytes]:
        """Yield ``chunks`` unchanged, recording each as a read: the hot loop of recording.

        What ``on_read`` does, inlined (a method call per read cost ~55 ns, a tenth of the
        recorder's cost per read), except that the journal is written after the read has
        been handed on, when the consumer asks for the next one. ``on_end("eof")`` when the
        chunks run out; ``on_error(exc)`` when iterating them raises (then the exception
        propagates).

        When the request sent a secret, the reads go through the exchange's
        :class:`~lab.capture.redact.ResponseScrubber` first (:meth:`_tee_scrubbed`): the
        client and the capture get the same scrubbed bytes, with the wire's boundaries.
        """
        if self._scrubber is not None:
            return self._tee_scrubbed(chunks, on_error)
        return self._tee(chunks, on_error)

    def _tee(
        self, chunks: Iterable[bytes], on_error: Callable[[BaseException], None]
    ) -> Iterator[bytes]:
        reads, ts, t0, sync = self._reads, self._ts, self._t0, self._sync_reads
        journal, write, clock = self._journal, self._write_due, _monotonic_ns
        try:
            for data in chunks:
                now = clock()  # compared as it is: one subtraction per read, no addition
                if data and not self._ended:
                    reads.append(data if type(data) is bytes else bytes(data))  # read first
                    ts.append(now - t0)
                    if sync is not None:
                        try:
                            sync()
                        except (OSError, ValueError):  # disk trouble: Parquet still gets it
                            pass
                yield data
                if now >= journal.due_ns:  # the read handed on (never, when sync is set)
                    try:
                        write(now)
                    except (OSError, ValueError):  # disk trouble: Parquet still gets it
                        pass
        except GeneratorExit:  # the consumer stopped early: the transport records it
            raise
        except BaseException as exc:
            on_error(exc)
            raise
        self.on_end("eof")

    def _release(self, pieces: list[bytes]) -> None:
        """Record reads the scrubber let go, each with its arrival time."""
        held_ts = self._held_ts
        if self._ended:
            for _ in pieces:
                held_ts.popleft()
            return
        reads, ts = self._reads, self._ts
        for piece in pieces:
            reads.append(piece)  # the read before its time: the journal relies on it
            ts.append(held_ts.popleft())
        if self._sync_reads is not None:
            try:
                self._sync_reads()
            except (OSError, ValueError):  # disk trouble: Parquet still gets it
                pass

    def _tee_scrubbed(
        self, chunks: Iterable[bytes], on_error: Callable[[BaseException], None]
    ) -> Iterator[bytes]:
        """:meth:`_tee` through the scrubber: a read that may end in the start of a secret
        is handed on (and recorded) once the next read settles it."""
        t0, scrubber, held_ts = self._t0, self._scrubber, self._held_ts
        journal, write = self._journal, self._write_due
        assert scrubber is not None
        try:
            for data in chunks:
                now = _monotonic_ns()
                if not data:
                    continue
                held_ts.append(now - t0)
                pieces = scrubber.feed(data if type(data) is bytes else bytes(data))
                self._release(pieces)
                yield from pieces
                if now >= journal.due_ns:
                    try:
                        write(now)
                    except (OSError, ValueError):  # disk trouble: Parquet still gets it
                        pass
        except GeneratorExit:  # the consumer stopped early: on_end records what is held
            raise
        except BaseException as exc:
            pieces = scrubber.flush()  # what arrived before the failure, as replay serves it
            self._release(pieces)
            yield from pieces
            on_error(exc)
            raise
        pieces = scrubber.flush()
        self._release(pieces)
        yield from pieces
        self.on_end("eof")

    def atee(
        self, chunks: AsyncIterable[bytes], on_error: Callable[[BaseException], None]
    ) -> AsyncIterator[bytes]:
        """:meth:`tee` for an async stream."""
        if self._scrubber is not None:
            return self._atee_scrubbed(chunks, on_error)
        return self._atee(chunks, on_error)

    async def _atee_scrubbed(
        self, chunks: AsyncIterable[bytes], on_error: Callable[[BaseException], None]
    ) -> AsyncIterator[bytes]:
        t0, scrubber, held_ts = self._t0, self._scrubber, self._held_ts
        journal, write = self._journal, self._write_due
        assert scrubber is not None
        try:
            async for data in chunks:
                now = _monotonic_ns()
                if not data:
                    continue
                held_ts.append(now - t0)
                pieces = scrubber.feed(data if type(data) is bytes else bytes(data))
                self._release(pieces)
                for piece in pieces:
                    yield piece
                if now >= journal.due_ns:
                    try:
                        write(now)
                    except (OSError, ValueError):
                        pass
        except GeneratorExit:
            raise
        except BaseException as exc:
            pieces = scrubber.flush()
            self._release(pieces)
            for piece in pieces:
                yield piece
            on_error(exc)
            raise
        pieces = scrubber.flush()
        self._release(pieces)
        for piece in pieces:
            yield piece
        self.on_end("eof")

    async def _atee(
        self, chunks: AsyncIterable[bytes], on_error: Callable[[BaseException], None]
    ) -> AsyncIterator[bytes]:
        reads, ts, t0, sync = self._reads, self._ts, self._t0, self._sync_reads
        journal, write, clock = self._journal, self._write_due, _monotonic_ns
        try:
            async for data in chunks:
                now = clock()
                if data and not self._ended:
                    reads.append(data if type(data) is bytes else bytes(data))
                    ts.append(now - t0)
                    if sync is not None:
                        try:
                            sync()
                        except (OSError, ValueError):
                            pass
                yield data
                if now >= journal.due_ns:
                    try:
                        write(now)
                    except (OSError, ValueError):
                        pass
        except GeneratorExit:
            raise
        except BaseException as exc:
            on_error(exc)
            raise
        self.on_end("eof")

    def atee_batches(
        self,
        batches: AsyncIterable[tuple[list[bytes], list[int]]],
        on_error: Callable[[BaseException], None],
    ) -> AsyncIterator[list[bytes]]:
        """:meth:`atee` for a stream that hands over reads in batches: ``(reads, times)``,
        each read with the ``time.monotonic_ns()`` it arrived at (an
        :class:`~lab.http.wire.AsyncWireTransport` response: every read that came in while
        the consumer was busy). Yields each batch's reads as the client gets them, with the
        wire's boundaries; each read is recorded at its own arrival time. The work per read
        is two list extends per batch (the scrubber, when the request sent a secret, sees
        every read in order as in :meth:`atee`)."""
        if self._scrubber is not None:
            return self._atee_batches_scrubbed(batches, on_error)
        return self._atee_batches(batches, on_error)

    async def _atee_batches(
        self,
        batches: AsyncIterable[tuple[list[bytes], list[int]]],
        on_error: Callable[[BaseException], None],
    ) -> AsyncIterator[list[bytes]]:
        reads, ts, t0, sync = self._reads, self._ts, self._t0, self._sync_reads
        journal, write = self._journal, self._write_due
        try:
            async for batch, times in batches:
                if batch and not self._ended:
                    reads.extend(batch)  # the reads before their times: the journal relies on it
                    ts.extend([t - t0 for t in times])
                    if sync is not None:
                        try:
                            sync()
                        except (OSError, ValueError):
                            pass
                yield batch
                now = _monotonic_ns()
                if now >= journal.due_ns:  # the batch handed on
                    try:
                        write(now)
                    except (OSError, ValueError):
                        pass
        except GeneratorExit:
            raise
        except BaseException as exc:
            on_error(exc)
            raise
        self.on_end("eof")

    async def _atee_batches_scrubbed(
        self,
        batches: AsyncIterable[tuple[list[bytes], list[int]]],
        on_error: Callable[[BaseException], None],
    ) -> AsyncIterator[list[bytes]]:
        t0, scrubber, held_ts = self._t0, self._scrubber, self._held_ts
        journal, write = self._journal, self._write_due
        assert scrubber is not None
        try:
            async for batch, times in batches:
                out: list[bytes] = []
                for data, t in zip(batch, times, strict=True):
                    if data:
                        held_ts.append(t - t0)
                        pieces = scrubber.feed(data)
                        self._release(pieces)
                        out += pieces
                yield out
                now = _monotonic_ns()
                if now >= journal.due_ns:
                    try:
                        write(now)
                    except (OSError, ValueError):
                        pass
        except GeneratorExit:
            raise
        except BaseException as exc:
            pieces = scrubber.flush()
            self._release(pieces)
            yield pieces
            on_error(exc)
            raise
        pieces = scrubber.flush()
        self._release(pieces)
        yield pieces
        self.on_end("eof")

    def note_error(self, text: str) -> None:
        """What went wrong, as the client understood it (an HTTP error's message, a
        pre-commit SSE error that made the ladder retry); stored in ``error`` at ``on_end``
        unless the transport itself failed."""
        self._note = text

    def on_end(self, reason: str, error: BaseException | str | None = None) -> None:
        """The exchange is over (idempotent: only the first call counts)."""
        t = time.monotonic_ns() - self._t0
        if reason not in END_REASONS:
            raise ValueError(f"end reason must be one of {END_REASONS}, not {reason!r}")
        with self._lock:
            if self._ended:
                return
            if self._scrubber is not None:  # reads still held: they did arrive
                self._release(self._scrubber.flush())
            self._ended = True
        text = error_text(error)
        if text is None:
            text = self._note
        if text is None and (self._row.get("status") or 0) >= 400:
            # an HTTP failure: its body is the error (kept whole in `chunks`)
            head = b"".join(self._reads)[:ERROR_BODY_CHARS].decode("utf-8", "replace")
            text = f"HTTP {self._row['status']}: {head.strip()}"
        if text is not None and self._redactor.secrets:
            text = self._redactor.scrub(text)
        row = self._row
        row["end_reason"] = reason
        row["error"] = text
        row["t_end_ns"] = t
        n_bytes, dropped = self._journal.spilled(self.exchange, self._reads)
        end: dict[str, Any] = {
            "end_reason": reason,
            "error": text,
            "t_end_ns": t,
            # what the journal must hold for the reader to vouch for this exchange
            "n_reads": len(self._reads),
            "n_bytes": n_bytes,
        }
        redacted = self.redacted
        if redacted or self._decoded or self._undecoded:  # say what was done, or could not be
            meta = json.loads(row["meta"])
            if redacted:
                meta[REDACTED_META] = redacted
            if self._decoded:
                meta[DECODED_META] = self._decoded
            if self._undecoded:
                meta[UNDECODED_META] = self._undecoded
            row["meta"] = end["meta"] = json.dumps(meta, ensure_ascii=False, sort_keys=True)
        record = json_record(b"E", self.exchange, end)
        try:  # the remaining reads, then this: the exchange is whole on disk from here on
            self._journal.end(self.exchange, record)
        except (OSError, ValueError):  # disk trouble: the in-memory copy still reaches Parquet
            pass
        row.pop("_body", None)
        reads, ts = self._reads, self._ts
        self._reads, self._ts = [], []  # a racing late on_read cannot change this exchange
        row["t_first_read_ns"] = ts[0] if ts else None
        row["t_last_read_ns"] = ts[-1] if ts else None
        row["n_reads"] = len(reads)
        row["n_bytes"] = n_bytes
        item = _Finished(row, reads, ts, time.monotonic(), in_journal_only=bool(dropped))
        self._writer._finished(self, item)

    @property
    def scrubs(self) -> bool:
        """Whether the request sent a secret this exchange's response is scrubbed of."""
        return self._scrubber is not None

    def note_decoded(self, content_encoding: str) -> None:
        """The response is recorded decoded (its ``Content-Encoding`` was this): a
        compressed echo of a secret would be out of the scrubber's sight
        (``meta["lab.decoded"]``)."""
        self._decoded = content_encoding

    def note_undecoded(self, content_encoding: str) -> None:
        """The response came in a ``Content-Encoding`` the lab cannot decode, so it is
        recorded as it came and an echo of a secret inside it could not be looked for
        (``meta["lab.undecoded"]``, the anomaly ``secret_unchecked``)."""
        self._undecoded = content_encoding

    @property
    def undecoded(self) -> str | None:
        """The ``Content-Encoding`` that kept the scrubber from looking (None: it looked)."""
        return self._undecoded

    @property
    def redacted(self) -> dict[str, int]:
        """How many occurrences of a secret this exchange sent were replaced in its
        response: ``{"response_body": n, "response_assembled": a, "response_headers": m}``
        (``response_assembled``: echoes only the assembled text spelled out, split into
        tokens across events), zero counts left out."""
        scrubber = self._scrubber
        counts = {
            "response_body": scrubber.count if scrubber is not None else 0,
            "response_assembled": scrubber.assembled if scrubber is not None else 0,
            "response_headers": self._header_scrubs,
        }
        return {k: v for k, v in counts.items() if v}

    def client_headers(self, headers: Any) -> Any:
        """Response headers as the client should see them: each secret this exchange sent
        replaced by its same-length marker (``headers`` itself when none is there)."""
        if self._scrubber is None:
            return headers
        items = list(headers.multi_items()) if hasattr(headers, "multi_items") else list(headers)
        out, changed = [], False
        for name, value in items:
            new, n = self._redactor.scrub_same_length(value)
            changed = changed or bool(n)
            out.append((name, new))
        return out if changed else headers

    def _write(self, record: bytes) -> None:
        try:
            self._append(self.exchange, record)
        except (OSError, ValueError):  # disk trouble: the in-memory copy still reaches Parquet
            pass


class CaptureWriter:
    """One recording: ``with CaptureWriter(root) as w: rec = w.exchange(...)``.

    Thread-safe: exchanges may be recorded concurrently from many threads.

    **Parameters**
    - **root** – the captures root; this recording goes in ``root/<capture_id>/``.
    - **label** – a free-form tag stored in every file's footer.
    - **capture_id** – default: a new time-ordered id; an existing one is refused.
    - **flush_interval** – seconds a finished exchange may wait before its Parquet part
      is written (default 1 s).
    - **journal_interval** – seconds a flowing stream's reads may wait in memory before a
      recording thread writes them to the journal (default 5 ms; 0: every read, at once).
    - **journal_idle_interval** – how often the flusher thread writes what a paused
      stream's thread could not (default 50 ms).
    - **spill_bytes** – an exchange holds at most about this many bytes of reads in
      memory (default None: all of them until its part is written): past it, the reads
      written to the journal are dropped from memory, and the exchange stays in the
      journal instead of going into a Parquet part (``lab.capture.open`` reads it from
      there; the journal is kept). ``lab proxy`` sets it, so an endless stream costs it a
      fixed window of memory.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        label: str | None = None,
        capture_id: str | None = None,
        flush_interval: float = 1.0,
        journal_interval: float = 0.005,
        journal_idle_interval: float = 0.05,
        spill_bytes: int | None = None,
    ) -> None:
        check_intervals(journal_interval, journal_idle_interval)  # before the directory
        self.spill_bytes = spill_bytes
        self.in_journal_only = 0
        """Exchanges that went past ``spill_bytes``: kept in the journal, not in a part."""
        self.capture_id = capture_id or new_capture_id()
        if (
            not self.capture_id
            or any(c in self.capture_id for c in "/\\")
            or ".." in self.capture_id
        ):
            raise CaptureError(f"invalid capture_id {self.capture_id!r}")
        self.label = label
        self.root = Path(root)
        self.path = self.root / self.capture_id
        try:
            self.path.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            raise CaptureError(
                f"{self.path}: a recording with capture_id {self.capture_id!r} already "
                "exists; captures are append-only, pick a new capture_id"
            ) from None
        self.created_at = datetime.now(UTC).isoformat()
        self._info = capture_info(self.capture_id, label, self.created_at)
        self._journal = JournalWriter(
            self.path,
            self._info,
            REDACTION_POLICY,
            interval=journal_interval,
            idle_interval=journal_idle_interval,
        )
        self._journal.start()
        self._streams_schema = schema_for("streams", self._info, REDACTION_POLICY)
        self._chunks_schema = schema_for("chunks", self._info, REDACTION_POLICY)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._next_exchange = 0
        self._next_part = 0
        self._live: set[ExchangeRecorder] = set()
        self._pending: list[_Finished] = []
        self._held: dict[str, int] = {}  # logical requests in progress (logical_request)
        self._busy = False
        self._flush_waiters = 0
        self._flush_requested = False
        self._failures = 0  # failed part writes so far (flush() waits for one attempt)
        self._retry_at = 0.0  # after a failed part write, the next try waits till then
        self._in_parts: set[int] = set()
        self.flush_interval = flush_interval
        self._closed = False
        self._stopping = False
        self._error: BaseException | None = None  # the last part write's failure, if it failed
        self.parts: list[Path] = []
        # started here, not when the first exchange ends: starting a thread waits for it,
        # and that wait would land at the end of a recorded stream
        self._thread = threading.Thread(
            target=self._run, name=f"lab-capture-{self.capture_id}", daemon=True
        )
        self._thread.start()

    # -- context manager -------------------------------------------------------------------

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<CaptureWriter {self.capture_id} at {self.path}>"

    # -- recording -------------------------------------------------------------------------

    def exchange(
        self,
        *,
        stream_id: str,
        attempt: int,
        attempt_label: str,
        provider: str,
        model: str | None,
        method: str,
        url: str,
        request_headers: Mapping[str, str],
        request_body: bytes,
        meta: dict | None = None,
    ) -> ExchangeRecorder:
        """Start recording one exchange; call right before sending the request."""
        redactor = Redactor()
        headers = redactor.headers(request_headers)
        url = redactor.url(str(url))
        body = redactor.body(bytes(request_body or b""))
        meta_json = json.dumps(meta or {}, ensure_ascii=False, default=str, sort_keys=True)
        if redactor.secrets:
            meta_json = redactor.scrub(meta_json)
        body_text, body_encoding = encode_body(body)
        with self._lock:
            if self._closed:
                raise CaptureError(f"{self.path}: CaptureWriter is closed")
            k = self._next_exchange
            self._next_exchange += 1
        row: dict[str, Any] = {
            "capture_id": self.capture_id,
            "exchange": k,
            "stream_id": str(stream_id),
            "attempt": int(attempt),
            "attempt_label": str(attempt_label),
            "provider": str(provider),
            "model": None if model is None else str(model),
            "method": str(method).upper(),
            "url": url,
            "request_headers": json.dumps(headers, ensure_ascii=False),
            "request_body": body_text,
            "request_body_encoding": body_encoding,
            "started_at": time.time_ns() // 1000,
            "status": None,
            "http_version": None,
            "response_headers": None,
            "t_headers_ns": None,
            "t_first_read_ns": None,
            "t_last_read_ns": None,
            "t_end_ns": None,
            "end_reason": "incomplete",
            "error": None,
            "n_reads": 0,
            "n_bytes": 0,
            "meta": meta_json,
            "_body": body,
        }
        recorder = ExchangeRecorder(self, k, row, redactor)
        with self._lock:
            self._live.add(recorder)
        return recorder

    def flush(self, timeout: float | None = None) -> None:
        """Block until every finished exchange is in a Parquet part; a
        :class:`~lab.capture.CaptureWriteError` when writing one fails."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._flush_waiters += 1
            self._flush_requested = True
            failures = self._failures
            self._cond.notify_all()
        failed: BaseException | None = None
        try:
            with self._cond:
                while self._pending or self._busy:
                    if self._failures != failures and not self._busy:
                        failed = self._error or OSError("part write failed")
                        break
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        raise TimeoutError(f"{self.path}: parts not written after {timeout}s")
                    self._cond.wait(remaining)
        finally:
            with self._cond:
                self._flush_waiters -= 1
        if failed is not None:  # counted outside the lock (safety() takes it)
            raise self._write_failure(failed)

    @property
    def write_error(self) -> BaseException | None:
        """Why this recording cannot be written now (the last Parquet part or journal
        write failed and nothing has been written since), or None."""
        if self._error is not None:
            return self._error
        if not self._journal.ok:
            return self._journal.error
        return None

    def safety(self) -> tuple[int, int, int]:
        """``(total, in_parts, in_journals)``: exchanges started, those in Parquet parts,
        and those whole in journals only (``open()`` recovers them); the rest are cut or
        not on disk."""
        with self._lock:
            in_parts = len(self._in_parts)
            total = self._next_exchange
        in_journals = len(self._journal.complete - self._in_parts)
        return total, in_parts, in_journals

    def check(self) -> None:
        """Raise :class:`~lab.capture.CaptureWriteError` when the recording cannot be written
        now (a recorder calls this before and after each request)."""
        error = self.write_error
        if error is not None:
            raise self._write_failure(error)

    def _write_failure(self, cause: BaseException) -> CaptureWriteError:
        total, in_parts, in_journals = self.safety()
        return CaptureWriteError(
            self.path, cause, total=total, in_parts=in_parts, in_journals=in_journals
        )

    def close(self) -> None:
        """End unfinished exchanges as "incomplete", write everything, stop the thread.

        When the parts cannot be written, :class:`~lab.capture.CaptureWriteError` says how
        many exchanges are safe on disk and where (journals stay for ``open()``)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            live = list(self._live)
        for recorder in live:
            recorder.on_end("incomplete", "CaptureWriter closed before the exchange ended")
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
        failure: BaseException | None = None
        with self._lock:
            try:
                if self._pending:  # the thread gave up (or died): one last try from here
                    self._write_batch(self._pending)
                    self._pending = []
                if not self.parts and self._next_exchange == 0:
                    self._write_batch([])  # an empty recording still has a schema and footer
            except BaseException as exc:  # noqa: BLE001 - reported below, journals kept
                failure = exc
        self._journal.close()
        if failure is not None or self._pending:
            raise self._write_failure(failure or self._error or OSError("part write failed"))

    # -- internals -------------------------------------------------------------------------

    @contextmanager
    def logical_request(self, stream_id: str) -> Iterator[None]:
        """Keep every attempt of one logical request in one part: its finished exchanges
        wait (safe in their journals, with their end record) until the request ends, so a
        part is a self-contained unit (:mod:`lab.capture.units`). ``flush()`` and
        ``close()`` write them anyway."""
        with self._cond:
            self._held[stream_id] = self._held.get(stream_id, 0) + 1
        try:
            yield
        finally:
            with self._cond:
                left = self._held.pop(stream_id) - 1
                if left:
                    self._held[stream_id] = left
                self._cond.notify_all()

    def _ready(self) -> list[_Finished]:
        """The pending exchanges a part may take now (none of a request still running)."""
        if self._stopping or self._flush_waiters or not self._held:
            return self._pending
        return [item for item in self._pending if item.row["stream_id"] not in self._held]

    def _finished(self, recorder: ExchangeRecorder, item: _Finished) -> None:
        with self._cond:
            self._live.discard(recorder)
            if item.in_journal_only:  # its reads are on disk only: it stays in its journal
                self.in_journal_only += 1
            else:
                self._pending.append(item)
            self._cond.notify_all()

    def _run(self) -> None:
        """Write finished exchanges in batches: when flush()/close() asks, when enough bytes
        or exchanges are pending, or when the oldest has waited ``flush_interval`` seconds.
        Until then they are safe in their journals (with their end record). A batch that
        fails goes back to the front of the queue, to be tried again after
        ``flush_interval`` (at least 0.5 s), on ``flush()`` or at ``close()``."""
        while True:
            with self._cond:
                while not self._should_write():
                    self._cond.wait(self._idle_wait())
                if not self._pending:
                    return  # stopping and nothing left
                batch = self._take_batch()
                self._flush_requested = False
                self._busy = True
                stopping = self._stopping
            failed: BaseException | None = None
            try:
                self._write_batch(batch)
            except BaseException as exc:  # noqa: BLE001 - kept, retried, reported by check()
                failed = exc
            with self._cond:
                self._busy = False
                if failed is not None:
                    self._pending[:0] = batch  # nothing dropped: tried again later
                    self._error = failed
                    self._failures += 1
                    self._retry_at = time.monotonic() + max(self.flush_interval, 0.5)
                else:
                    self._error = None
                self._cond.notify_all()
            if failed is not None and stopping:
                return  # close() makes the last attempt and reports

    def _idle_wait(self) -> float | None:
        ready = self._ready()
        if not ready:
            return None
        now = time.monotonic()
        wake = ready[0].finished_at + self.flush_interval
        if self._error is not None:
            wake = max(wake, self._retry_at)
        return max(0.001, wake - now)

    def _should_write(self) -> bool:
        if self._stopping:
            return True
        ready = self._ready()
        if not ready:
            return False
        if self._flush_requested:
            return True
        if self._error is not None and time.monotonic() < self._retry_at:
            return False
        if self._flush_waiters or len(ready) >= _MAX_PART_EXCHANGES:
            return True
        if sum(item.row["n_bytes"] for item in ready) >= _EAGER_PART_BYTES:
            return True
        return time.monotonic() - ready[0].finished_at >= self.flush_interval

    def _take_batch(self) -> list[_Finished]:
        # whole logical requests (their attempts may sit apart in finish order), in order
        requests: dict[str, list[_Finished]] = {}
        for item in self._ready():
            requests.setdefault(item.row["stream_id"], []).append(item)
        batch: list[_Finished] = []
        size = 0
        for items in requests.values():
            n = sum(item.row["n_bytes"] for item in items)
            if batch and (
                size + n > _MAX_PART_BYTES
                or size >= _PART_TARGET_BYTES
                or len(batch) >= _MAX_PART_EXCHANGES
            ):
                break
            batch.extend(items)
            size += n
        taken = {id(item) for item in batch}
        self._pending = [item for item in self._pending if id(item) not in taken]
        return batch

    def _write_batch(self, batch: list[_Finished]) -> None:
        n = self._next_part  # taken only once the part is written: no gap after a failure
        streams_path, chunks_path = write_part(
            self.path,
            n,
            [(item.row, item.reads, item.read_t_ns) for item in batch],
            streams_schema=self._streams_schema,
            chunks_schema=self._chunks_schema,
        )
        self._next_part = n + 1
        self.parts += [streams_path, chunks_path]
        self._in_parts.update(item.row["exchange"] for item in batch)  # callers may hold _lock
        self._journal.written(item.row["exchange"] for item in batch)


def write_part(
    directory: Path,
    n: int,
    exchanges: Iterable[tuple[Mapping[str, Any], list[bytes], list[int]]],
    *,
    streams_schema: Any,
    chunks_schema: Any,
) -> tuple[Path, Path]:
    """Write exchanges as part ``n`` of a capture directory: the one writer of the format.

    **exchanges** – ``(row, reads, read_t_ns)`` per exchange: ``row`` holds every column of
    ``streams_schema`` (extra keys are ignored), ``reads`` the raw reads and ``read_t_ns``
    their offsets. **streams_schema / chunks_schema** – from
    :func:`~lab.capture.schema.schema_for` (they carry the footer metadata).

    Writes ``chunks-<n>.parquet`` (one row per read, ``seq`` from 0 per exchange) and then
    ``streams-<n>.parquet``, each as a hidden ``.<name>.tmp`` ``os.replace``-d into place,
    so a streams row on disk always has its chunks on disk and no reader ever sees half a
    file; a write that fails removes its temporary file. Returns (streams path, chunks
    path). :class:`CaptureWriter` writes its parts with it, ``lab.fixtures`` its captures.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows: list[Mapping[str, Any]] = []
    chunk_cols: dict[str, list] = {
        "capture_id": [],
        "exchange": [],
        "stream_id": [],
        "attempt": [],
        "seq": [],
        "t_ns": [],
        "raw": [],
        "n_bytes": [],
    }
    for row, reads, read_t_ns in exchanges:
        rows.append(row)
        count = len(reads)
        chunk_cols["capture_id"] += [row["capture_id"]] * count
        chunk_cols["exchange"] += [row["exchange"]] * count
        chunk_cols["stream_id"] += [row["stream_id"]] * count
        chunk_cols["attempt"] += [row["attempt"]] * count
        chunk_cols["seq"] += range(count)
        chunk_cols["t_ns"] += read_t_ns
        chunk_cols["raw"] += reads
        chunk_cols["n_bytes"] += map(len, reads)
    chunks = pa.table(chunk_cols, schema=chunks_schema)
    streams = pa.table(
        {name: [row[name] for row in rows] for name in streams_schema.names},
        schema=streams_schema,
    )
    directory = Path(directory)
    chunks_path = directory / f"chunks-{n:05d}.parquet"
    streams_path = directory / f"streams-{n:05d}.parquet"
    # chunks first: a streams row on disk always has its chunks on disk
    for table, final in ((chunks, chunks_path), (streams, streams_path)):
        tmp = final.with_name(f".{final.name}.tmp")
        # no dictionary on raw (reads are unique: a dictionary only grows the file, and the
        # reader would have to count what its rows expand to, lab.capture.bounds)
        plain = [n for n in table.column_names if n != "raw"]
        try:
            pq.write_table(table, tmp, compression="zstd", use_dictionary=plain)
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return streams_path, chunks_path
