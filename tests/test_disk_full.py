"""Disk full is loud and true.

When the capture cannot be written (``ENOSPC`` injected into the journal's writes and the
Parquet part writes), nothing is dropped from memory silently: the writer keeps the batch
and retries, ``Recorder.record`` raises :class:`~lab.capture.CaptureWriteError` and sends
nothing more, ``close()`` says how many exchanges are safe on disk and where (and
``open()`` then finds exactly those), and ``lab record`` stops sending and exits 4.
"""

from __future__ import annotations

import errno
import os

import pytest

import lab.capture
from lab.capture import CaptureWriteError, CaptureWriter


class Disk:
    """Make the disk "full" for journal writes and Parquet part writes (``full = True``)."""

    def __init__(self, monkeypatch) -> None:
        import pyarrow.parquet as pq

        self.full = False
        self.refused = 0
        real_write, real_writev, real_table = os.write, os.writev, pq.write_table

        def journal(fd: int) -> bool:
            try:
                return os.readlink(f"/proc/self/fd/{fd}").endswith(".journal")
            except OSError:
                return False

        def refuse() -> None:
            self.refused += 1
            raise OSError(errno.ENOSPC, "No space left on device")

        def write(fd, data):
            if self.full and journal(fd):
                refuse()
            return real_write(fd, data)

        def writev(fd, buffers):
            if self.full and journal(fd):
                refuse()
            return real_writev(fd, buffers)

        def write_table(table, where, *args, **kwargs):
            if self.full:
                with open(where, "wb") as f:  # a torn part, as a full disk leaves one
                    f.write(b"PAR1")
                refuse()
            return real_table(table, where, *args, **kwargs)

        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "writev", writev)
        monkeypatch.setattr(pq, "write_table", write_table)


@pytest.fixture
def disk(monkeypatch) -> Disk:
    return Disk(monkeypatch)


def _exchange(writer: CaptureWriter, sid: str, reads=(b"data: a\n\n", b"data: [DONE]\n\n")):
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
    for r in reads:
        rec.on_read(r)
    return rec


def test_a_part_that_cannot_be_written_is_kept_and_written_once_the_disk_has_room(tmp_path, disk):
    writer = CaptureWriter(tmp_path, capture_id="kept", flush_interval=3600)
    _exchange(writer, "s0").on_end("eof")
    disk.full = True
    with pytest.raises(CaptureWriteError) as err:
        writer.flush()
    assert str(err.value) == (
        f"{writer.path}: writing the capture failed (No space left on device); 1 of 1 "
        "exchange(s) are safe on disk (0 in Parquet parts, 1 in journals that "
        "lab.capture.open() recovers)"
    )
    assert (err.value.total, err.value.in_parts, err.value.in_journals) == (1, 0, 1)
    assert not list(writer.path.glob(".*.tmp"))  # the torn part was taken back
    assert isinstance(writer.write_error, OSError)
    disk.full = False
    writer.flush()  # the batch was kept, not dropped from memory
    assert writer.write_error is None
    writer.close()
    assert sorted(p.name for p in writer.path.iterdir()) == [
        "chunks-00000.parquet",  # numbered as if the failure never happened: no gap
        "streams-00000.parquet",
    ]
    [ex] = lab.capture.open(writer.path).exchanges()
    assert (ex.stream_id, ex.reads, ex.end_reason) == (
        "s0",
        [b"data: a\n\n", b"data: [DONE]\n\n"],
        "eof",
    )


def test_close_on_a_full_disk_counts_only_what_open_recovers(tmp_path, disk):
    writer = CaptureWriter(tmp_path, capture_id="truth", flush_interval=3600)
    _exchange(writer, "finished-before").on_end("eof")  # in the journal, whole
    disk.full = True
    _exchange(writer, "finished-after").on_end("eof")  # its records never reach the disk
    _exchange(writer, "cut", reads=[b"data: a\n\n"])  # still streaming at close
    with pytest.raises(CaptureWriteError) as err:
        writer.close()
    assert (err.value.total, err.value.safe, err.value.in_journals) == (3, 1, 1)
    assert str(err.value).endswith(
        "1 of 3 exchange(s) are safe on disk (0 in Parquet parts, 1 in journals that "
        "lab.capture.open() recovers); 2 are cut or lost"
    )
    exchanges = lab.capture.open(writer.path).exchanges()
    whole = [ex.stream_id for ex in exchanges if ex.end_reason == "eof"]
    assert whole == ["finished-before"]  # exactly what close() said is safe
    assert [ex.reads for ex in exchanges] == [[b"data: a\n\n", b"data: [DONE]\n\n"]]


def test_recorder_raises_a_typed_error_and_sends_nothing_more(tmp_path, fake_server, disk):
    from lab.recorder import Recorder

    body = {"model": "fake/clean", "messages": [{"role": "user", "content": "hi"}]}
    url = fake_server.base_url + "/v1"
    seen = len(fake_server.requests)
    rec = Recorder(tmp_path)
    first = rec.record("openai", body, base_url=url, api_key="sk-test-disk-full")
    assert first.error is None
    disk.full = True
    with pytest.raises(CaptureWriteError) as err:
        rec.record("openai", body, base_url=url, api_key="sk-test-disk-full")
    assert err.value.result.text == first.text  # the stream came; the disk did not take it
    with pytest.raises(CaptureWriteError):
        rec.record("openai", body, base_url=url, api_key="sk-test-disk-full")
    assert len(fake_server.requests) - seen == 2  # the third was never sent
    with pytest.raises(CaptureWriteError):
        rec.close()


def test_lab_record_stops_sending_into_a_full_disk_and_exits_4(
    tmp_path, fake_server, disk, monkeypatch, capsys
):
    from lab import cli
    from lab.recorder import Recorder

    made: list[Recorder] = []

    class FillingRecorder(Recorder):
        """The disk fills up during the third request (no part is due before it)."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.writer.flush_interval = 3600

        def record(self, *args, **kwargs):
            made.append(self)
            if len(self.results) == 2:
                disk.full = True
            return super().record(*args, **kwargs)

    monkeypatch.setattr("lab.recorder.Recorder", FillingRecorder)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-disk-full")
    seen = len(fake_server.requests)
    code = cli.main(
        [
            "record",
            "--provider",
            "openai",
            "--model",
            "fake/clean",
            "--prompt",
            "hi",
            "--base-url",
            fake_server.base_url + "/v1",
            "--n",
            "300",
            "--out",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err
    assert code == cli.RECORD_WRITE_FAILED == 4
    assert len(fake_server.requests) - seen == 3  # not 300
    path = made[0].path
    assert err.splitlines()[-1] == (
        f"lab: error: cannot write the capture: {path}: writing the capture failed (No space "
        "left on device); 2 of 3 exchange(s) are safe on disk (0 in Parquet parts, 2 in "
        "journals that lab.capture.open() recovers); 1 are cut or lost; stopped sending "
        "after 3 of 300 requests"
    )
    exchanges = lab.capture.open(path).exchanges()
    assert sum(ex.end_reason == "eof" for ex in exchanges) == 2  # what it said is safe
