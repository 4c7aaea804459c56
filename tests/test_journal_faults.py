"""The journal survives I/O errors.

Unit tests drive one ``JournalWriter`` through a failing write; the walk
(``tests/fault_walk.py``) injects EIO, a full disk, a short write and a torn write at each
journal write position of a recorder subprocess, SIGKILLs it, and checks that every stream
it had finished opens byte-exact or is marked cut, that no exchange's bytes are wrong and
that every capture opens (a few positions per mode here, 25 with ``-m slow``).
"""

from __future__ import annotations

import errno
import os
import time

import pytest

import lab.capture
from lab.capture import CaptureWriter
from lab.capture import journal as journal_mod

READS = [b"data: one\n\n", b"data: two\n\n", b"data: [DONE]\n\n"]


def _start(writer: CaptureWriter, sid: str = "s"):
    rec = writer.exchange(
        stream_id=sid,
        attempt=0,
        attempt_label="default",
        provider="openai",
        model="m",
        method="POST",
        url="http://127.0.0.1/v1/chat/completions",
        request_headers={},
        request_body=b"{}",
    )
    rec.on_response(200, {"content-type": "text/event-stream"}, "HTTP/1.1")
    return rec


def _quiet(monkeypatch) -> None:
    """No flusher thread: only the writes a test makes happen."""
    monkeypatch.setattr(journal_mod.JournalWriter, "_run", lambda self: None)


def _fail_writes(monkeypatch, n: int, *, written: int = 0, err: int = errno.EIO) -> list[int]:
    """The next ``n`` journal writes write ``written`` bytes of their first buffer, then fail."""
    real = journal_mod._write_buffers
    left = [n]

    def flaky(fd, buffers):
        if left[0] > 0:
            left[0] -= 1
            if written:
                os.write(fd, buffers[0][:written])
            return written, OSError(err, os.strerror(err))
        return real(fd, buffers)

    monkeypatch.setattr(journal_mod, "_write_buffers", flaky)
    return left


def test_reads_are_marked_journaled_only_after_their_write_succeeded(tmp_path, monkeypatch):
    _quiet(monkeypatch)
    writer = CaptureWriter(tmp_path, capture_id="eio", journal_interval=3600)
    rec = _start(writer)
    rec.on_read(READS[0])  # the first write is due at once: read 0 goes out
    assert writer._journal._tracked[rec.exchange][2] == 1
    rec.on_read(READS[1])
    _fail_writes(monkeypatch, 1)
    writer._journal.sync()  # EIO: nothing of it counts
    assert not writer._journal.ok and writer._journal.error.errno == errno.EIO
    assert writer._journal._tracked[rec.exchange][2] == 1  # read 1 not marked journaled
    rec.on_read(READS[2])
    rec.on_end("eof")  # the next write carries everything, in order
    assert writer._journal.ok
    [ex] = lab.capture.open(writer.path / "journal-00000.journal").exchanges()
    assert (ex.reads, ex.end_reason) == (READS, "eof")
    writer.close()


def test_a_torn_write_is_cut_back_and_written_again_whole(tmp_path, monkeypatch):
    _quiet(monkeypatch)
    writer = CaptureWriter(tmp_path, capture_id="short", journal_interval=3600)
    rec = _start(writer)
    for r in READS:
        rec.on_read(r)
    journal = writer.path / "journal-00000.journal"
    size = journal.stat().st_size
    _fail_writes(monkeypatch, 1, written=7, err=errno.ENOSPC)
    writer._journal.sync()
    assert journal.stat().st_size == size  # the 7 torn bytes were taken back
    rec.on_end("eof")
    [ex] = lab.capture.open(journal).exchanges()
    assert (ex.reads, ex.end_reason) == (READS, "eof")
    writer.close()


def test_a_torn_record_that_stays_on_disk_is_skipped(tmp_path, monkeypatch):
    _quiet(monkeypatch)
    monkeypatch.setattr(journal_mod.os, "ftruncate", _refuse)
    writer = CaptureWriter(tmp_path, capture_id="torn", journal_interval=3600)
    rec = _start(writer)
    for r in READS:
        rec.on_read(r)
    journal = writer.path / "journal-00000.journal"
    size = journal.stat().st_size
    _fail_writes(monkeypatch, 1, written=20, err=errno.EIO)
    writer._journal.sync()
    assert journal.stat().st_size == size + 20  # could not be cut back
    rec.on_end("eof")  # the same records again, whole, after the torn ones
    [ex] = lab.capture.open(journal).exchanges()
    assert (ex.reads, ex.end_reason) == (READS, "eof")
    writer.close()


def _refuse(*args):
    raise OSError(errno.EIO, "Input/output error")


def test_a_failed_segment_header_does_not_kill_the_flusher(tmp_path, monkeypatch):
    real_open = journal_mod.os.open
    opened: list[str] = []

    def open_failing_once(path, flags, mode=0o777):
        # os.open is the process's: count the journal's own opens only (a library may open
        # /dev/null or a temporary file first)
        name = os.path.basename(path)
        if name.startswith("journal-"):
            opened.append(name)
            if len(opened) == 1:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, flags, mode)

    monkeypatch.setattr(journal_mod.os, "open", open_failing_once)
    writer = CaptureWriter(tmp_path, capture_id="header", journal_idle_interval=0.01)
    rec = _start(writer)
    rec.on_read(READS[0])
    thread = writer._journal._thread
    second = writer.path / "journal-00001.journal"
    deadline = time.monotonic() + 10
    # the file appears when the flusher opens it, its records a moment later
    while not (second.exists() and lab.capture.open(second).exchanges()):
        assert time.monotonic() < deadline, "the flusher never wrote again"
        time.sleep(0.01)
    assert thread.is_alive() and opened[:2] == ["journal-00000.journal", "journal-00001.journal"]
    [ex] = lab.capture.open(second).exchanges()
    assert ex.stream_id == "s" and ex.end_reason == "incomplete"
    rec.on_read(READS[1])
    rec.on_end("eof")
    writer.close()
    [ex] = lab.capture.open(writer.path).exchanges()
    assert (ex.reads, ex.end_reason) == (READS[:2], "eof")


def test_an_end_record_without_all_its_reads_marks_the_exchange_cut(tmp_path, monkeypatch):
    _quiet(monkeypatch)
    writer = CaptureWriter(tmp_path, capture_id="gap", journal_interval=3600)
    rec = _start(writer)
    rec.on_read(READS[0])
    writer._journal.sync()
    journal = writer.path / "journal-00000.journal"
    kept = journal.read_bytes()
    rec.on_read(READS[1])
    writer._journal.sync()
    lost = journal.read_bytes()[len(kept) :]  # the R record of read 1
    rec.on_read(READS[2])
    rec.on_end("eof")
    data = journal.read_bytes()
    journal.write_bytes(data.replace(lost, b"", 1))  # as if that write never happened
    [ex] = lab.capture.open(journal).exchanges()
    assert ex.reads == READS[:1] and ex.end_reason == "incomplete"  # a prefix, never a gap
    assert ex.error == (
        "recorder stopped before the exchange ended (recovered from its journal): reads 1 to "
        "1 are missing from the journal"
    )
    writer.close()


def test_an_exchange_starting_while_the_journal_writes_leaves_the_write_whole(
    tmp_path, monkeypatch
):
    # recording threads start exchanges while another thread writes the journal
    _quiet(monkeypatch)
    writer = CaptureWriter(tmp_path, capture_id="race", journal_interval=3600)
    rec = _start(writer)
    rec.on_read(READS[0])
    rec.on_read(READS[1])
    started: list = []

    def starting_another(real):  # packing a record of the exchange's reads starts another
        def pack(*args):
            if not started:
                started.append(_start(writer, "s2"))
            return real(*args)

        return pack

    monkeypatch.setattr(journal_mod, "reads_record", starting_another(journal_mod.reads_record))
    writer._journal.sync()
    assert writer._journal.ok and started
    rec.on_read(READS[2])
    rec.on_end("eof")
    started[0].on_read(READS[0])
    started[0].on_end("eof")
    writer.close()
    got = {
        ex.stream_id: (ex.reads, ex.end_reason) for ex in lab.capture.open(writer.path).exchanges()
    }
    assert got == {"s": (READS, "eof"), "s2": (READS[:1], "eof")}


# -- the walk: a fault at each write position, then SIGKILL ----------------------------------


def _walk(positions) -> dict:
    import fault_walk

    return fault_walk.walk(positions=positions)


def _bad_runs(result: dict) -> dict:
    import fault_walk

    return {mode: [(k, c) for k, c in runs if fault_walk.bad(c)] for mode, runs in result.items()}


def test_faults_at_the_first_journal_writes_lose_no_finished_stream():
    result = _walk([0, 1, 4])
    assert all(len(runs) == 3 for runs in result.values()), result
    assert _bad_runs(result) == {"eio": [], "enospc": [], "short": [], "torn": []}


@pytest.mark.slow
def test_faults_at_each_of_25_journal_write_positions_lose_no_finished_stream():
    result = _walk(range(25))
    assert all(len(runs) == 25 for runs in result.values()), result
    assert _bad_runs(result) == {"eio": [], "enospc": [], "short": [], "torn": []}
