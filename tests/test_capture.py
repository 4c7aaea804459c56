"""Capture format: writer/reader round trip, redaction, crash safety, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lab
from lab.capture import (
    SCHEMA_VERSION,
    Capture,
    CaptureError,
    CaptureWriter,
    RecordedExchange,
    RecordedRequest,
    redact_body,
    redact_headers,
    redact_url,
)
from lab.capture import (
    open as open_capture,
)
from lab.capture.journal import JournalWriter
from lab.capture.schema import CHUNKS_SCHEMA, STREAMS_SCHEMA

CANARY = "sk-canary-7f3a9c2e41d8"


def record(
    writer: CaptureWriter,
    reads: list[bytes],
    *,
    stream_id: str = "s1",
    attempt: int = 0,
    label: str = "default",
    end: str = "eof",
    error=None,
    status: int | None = 200,
    body: bytes = b'{"model": "m", "stream": true}',
    meta: dict | None = None,
):
    rec = writer.exchange(
        stream_id=stream_id,
        attempt=attempt,
        attempt_label=label,
        provider="openrouter",
        model="vendor/model",
        method="POST",
        url="https://example.test/v1/chat/completions",
        request_headers={"content-type": "application/json"},
        request_body=body,
        meta=meta,
    )
    if status is not None:
        rec.on_response(status, {"content-type": "text/event-stream"}, "HTTP/1.1")
    for r in reads:
        rec.on_read(r)
    rec.on_end(end, error)
    return rec


# -- round trip ----------------------------------------------------------------------------


def test_round_trip_reproduces_reads_and_body_byte_for_byte(tmp_path):
    emoji = "data: 🧠\n\n".encode()
    reads = [b": OPENROUTER PROCESSING\n\n", emoji[:8], emoji[8:], b"data: [DONE]\r", b"\n\r\n"]
    with CaptureWriter(tmp_path, label="unit") as w:
        record(w, reads, meta={"case": "emoji"})
    cap = open_capture(w.path)
    assert isinstance(cap, Capture)
    [ex] = cap.exchanges()
    assert ex.reads == reads
    assert ex.body == b"".join(reads)
    chunks = cap.chunks
    assert list(chunks["seq"]) == list(range(len(reads)))
    assert b"".join(chunks.sort_values("seq")["raw"]) == b"".join(reads)
    assert all(type(x) is bytes for x in chunks["raw"])
    assert list(chunks["n_bytes"]) == [len(r) for r in reads]
    assert list(chunks["t_ns"]) == sorted(chunks["t_ns"])
    row = cap.streams.iloc[0]
    assert (row["n_reads"], row["n_bytes"], row["status"]) == (5, len(ex.body), 200)
    assert row["end_reason"] == "eof" and pd.isna(row["error"])
    assert row["t_headers_ns"] <= row["t_first_read_ns"] <= row["t_last_read_ns"] <= row["t_end_ns"]
    assert str(row["started_at"].tz) == "UTC"
    assert ex.meta == {"case": "emoji"}
    assert (ex.status, ex.http_version, ex.response_headers) == (
        200,
        "HTTP/1.1",
        {"content-type": "text/event-stream"},
    )


def test_files_are_plain_parquet_with_explicit_schema_and_footer(tmp_path):
    with CaptureWriter(tmp_path, label="footer") as w:
        record(w, [b"data: x\n\n"])
    streams_files = sorted(w.path.glob("streams-*.parquet"))
    chunks_files = sorted(w.path.glob("chunks-*.parquet"))
    assert streams_files and chunks_files
    s = pq.read_schema(streams_files[0])
    c = pq.read_schema(chunks_files[0])
    assert s.remove_metadata().equals(STREAMS_SCHEMA)
    assert c.remove_metadata().equals(CHUNKS_SCHEMA)
    assert c.field("raw").type == pa.binary()
    assert s.field("started_at").type == pa.timestamp("us", tz="UTC")
    assert s.field("status").type == pa.int16()
    md = s.metadata
    assert md[b"lab.table"] == b"streams" and c.metadata[b"lab.table"] == b"chunks"
    assert md[b"lab.schema_version"] == str(SCHEMA_VERSION).encode()
    info = json.loads(md[b"lab.capture"])
    assert info["capture_id"] == w.capture_id and info["label"] == "footer"
    assert info["tool_version"] == lab.__version__
    assert {"created_at", "python", "httpx"} <= set(info)
    assert "authorization" in json.loads(md[b"lab.redaction"])["headers"]
    # and pandas reads the directory without this package
    df = pd.read_parquet(chunks_files[0])
    assert df["raw"].iloc[0] == b"data: x\n\n"


def test_capture_ids_sort_by_time_and_directory_is_per_recording(tmp_path):
    a = CaptureWriter(tmp_path)
    a.close()
    time.sleep(1.05)
    b = CaptureWriter(tmp_path)
    b.close()
    assert a.capture_id < b.capture_id
    assert a.path == tmp_path / a.capture_id
    import re

    assert re.fullmatch(r"\d{8}T\d{6}-[0-9a-f]{8}", a.capture_id)


def test_existing_capture_id_is_refused(tmp_path):
    CaptureWriter(tmp_path, capture_id="fixed").close()
    with pytest.raises(CaptureError, match="already exists"):
        CaptureWriter(tmp_path, capture_id="fixed")


def test_empty_recording_still_opens(tmp_path):
    with CaptureWriter(tmp_path, label="empty") as w:
        pass
    cap = open_capture(w.path)
    assert len(cap.streams) == 0 and len(cap.chunks) == 0
    assert cap.metadata["label"] == "empty"
    assert cap.requests() == []


def test_attempts_group_into_requests_in_capture_order(tmp_path):
    with CaptureWriter(tmp_path) as w:
        record(w, [b"x"], stream_id="a", attempt=0, status=400, label="default")
        record(w, [b"y"], stream_id="b", attempt=0)
        record(w, [b"z"], stream_id="a", attempt=1, label="targeted_drop_min_p")
    cap = open_capture(w.path)
    reqs = cap.requests()
    assert [r.stream_id for r in reqs] == ["a", "b"]
    assert all(isinstance(r, RecordedRequest) for r in reqs)
    a = cap.request("a")
    assert [(e.attempt, e.attempt_label, e.status) for e in a.exchanges] == [
        (0, "default", 400),
        (1, "targeted_drop_min_p", 200),
    ]
    assert all(isinstance(e, RecordedExchange) for e in a.exchanges)
    with pytest.raises(KeyError):
        cap.request("nope")
    assert list(cap.streams["stream_id"]) == ["a", "b", "a"]
    assert list(zip(cap.chunks["stream_id"], cap.chunks["attempt"], strict=True)) == [
        ("a", 0),
        ("a", 1),
        ("b", 0),
    ]


def test_end_reasons_errors_and_no_response(tmp_path):
    with CaptureWriter(tmp_path) as w:
        record(w, [], stream_id="t", end="timeout", error=TimeoutError("read timed out"))
        record(w, [b"a"], stream_id="c", end="cancelled")
        record(w, [], stream_id="n", status=None, end="read_error", error="ConnectError: refused")
        rec = record(w, [b"b"], stream_id="d")
        rec.on_end("cancelled")  # idempotent: first call wins
        with pytest.raises(ValueError):
            rec.on_end("client_cancel")
    cap = open_capture(w.path)
    by = {e.stream_id: e for e in cap.exchanges()}
    assert (by["t"].end_reason, by["t"].error) == ("timeout", "TimeoutError: read timed out")
    assert by["c"].end_reason == "cancelled"
    assert (by["n"].status, by["n"].response_headers, by["n"].error) == (
        None,
        {},
        "ConnectError: refused",
    )
    assert by["d"].end_reason == "eof"
    assert pd.isna(cap.streams.set_index("stream_id").loc["n", "status"])


def test_non_utf8_request_body_round_trips(tmp_path):
    with CaptureWriter(tmp_path) as w:
        record(w, [b"x"], body=b"\xff\x00\x01gzip?")
    [ex] = open_capture(w.path).exchanges()
    assert ex.request_body == b"\xff\x00\x01gzip?"


def test_close_marks_unfinished_exchanges_incomplete(tmp_path):
    w = CaptureWriter(tmp_path)
    rec = w.exchange(
        stream_id="s",
        attempt=0,
        attempt_label="default",
        provider="p",
        model=None,
        method="POST",
        url="http://x",
        request_headers={},
        request_body=b"{}",
    )
    rec.on_read(b"data: a\n\n")
    w.close()
    rec.on_read(b"late")  # ignored
    [ex] = open_capture(w.path).exchanges()
    assert (ex.end_reason, ex.reads, ex.model) == ("incomplete", [b"data: a\n\n"], None)
    assert not list(w.path.glob("*.journal"))


def test_parts_are_never_rewritten(tmp_path):
    w = CaptureWriter(tmp_path)
    record(w, [b"one"], stream_id="1")
    w.flush()
    first = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in w.path.glob("*.parquet")}
    assert first
    record(w, [b"two"], stream_id="2")
    w.close()
    for p, stamp in first.items():
        assert (p.stat().st_ino, p.stat().st_mtime_ns) == stamp
    assert len(list(w.path.glob("streams-*.parquet"))) == 2
    assert [e.stream_id for e in open_capture(w.path).exchanges()] == ["1", "2"]


def test_concurrent_recordings_from_threads(tmp_path):
    n_threads, n_reads = 24, 50

    def run(i: int, w: CaptureWriter) -> None:
        reads = [f"data: {i}-{k}\n\n".encode() for k in range(n_reads)]
        record(w, reads, stream_id=f"s{i:03d}")

    with CaptureWriter(tmp_path) as w:
        threads = [threading.Thread(target=run, args=(i, w)) for i in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    cap = open_capture(w.path)
    assert len(cap.streams) == n_threads
    assert len(cap.chunks) == n_threads * n_reads
    for req in cap.requests():
        i = int(req.stream_id[1:])
        [ex] = req.exchanges
        assert ex.reads == [f"data: {i}-{k}\n\n".encode() for k in range(n_reads)]
    assert sorted(cap.streams["exchange"]) == list(range(n_threads))


def test_root_with_many_recordings_and_globs(tmp_path):
    ids = []
    for name in ("a", "b"):
        with CaptureWriter(tmp_path, label=name) as w:
            record(w, [name.encode()], stream_id=name)
        ids.append(w.capture_id)
    cap = open_capture(tmp_path)
    assert sorted(cap.metadata["capture_ids"]) == sorted(ids)
    assert [r.stream_id for r in cap.requests()] == ["a", "b"]
    assert len(open_capture(str(tmp_path / "*" / "streams-*.parquet")).streams) == 2
    one = open_capture(next((tmp_path / ids[0]).glob("streams-*.parquet")))
    assert one.exchanges()[0].reads == [b"a"]  # the sibling chunks part came along


# -- redaction -----------------------------------------------------------------------------


def test_headers_and_query_params_named_like_secrets_are_redacted_by_name_part():
    out = redact_headers(
        {
            "OpenAI-Api-Key": CANARY,
            "X-Auth-Token": CANARY,
            "x_client_secret": CANARY,
            "X-RateLimit-Remaining-Tokens": "9000",
            "Keep-Alive": "timeout=5",
            "X-Title": "Stream Lab",
        }
    )
    assert out == {
        "OpenAI-Api-Key": "[REDACTED]",
        "X-Auth-Token": "[REDACTED]",
        "x_client_secret": "[REDACTED]",
        "X-RateLimit-Remaining-Tokens": "9000",
        "Keep-Alive": "timeout=5",
        "X-Title": "Stream Lab",
    }
    assert redact_url(f"http://h/v1?api-key={CANARY}&x-goog-api-key={CANARY}&tokens=5") == (
        "http://h/v1?api-key=[REDACTED]&x-goog-api-key=[REDACTED]&tokens=5"
    )
    assert (
        redact_url(f"http://h/v1?token={CANARY}&alt=sse") == "http://h/v1?token=[REDACTED]&alt=sse"
    )


def test_redact_headers_keeps_keys_case_insensitive():
    out = redact_headers(
        {
            "Authorization": f"Bearer {CANARY}",
            "X-Api-Key": CANARY,
            "x-goog-api-key": CANARY,
            "api-key": CANARY,
            "Cookie": "a=b",
            "Set-Cookie": "c=d",
            "X-Custom-Auth": f"Bearer {CANARY}",
            "Content-Type": "application/json",
        }
    )
    assert out == {
        "Authorization": "[REDACTED]",
        "X-Api-Key": "[REDACTED]",
        "x-goog-api-key": "[REDACTED]",
        "api-key": "[REDACTED]",
        "Cookie": "[REDACTED]",
        "Set-Cookie": "[REDACTED]",
        "X-Custom-Auth": "[REDACTED]",
        "Content-Type": "application/json",
    }


def test_redact_url_query_key_and_userinfo():
    assert (
        redact_url(f"https://g.test/v1beta/models/x:streamGenerateContent?alt=sse&key={CANARY}")
        == "https://g.test/v1beta/models/x:streamGenerateContent?alt=sse&key=[REDACTED]"
    )
    assert (
        redact_url("https://h.test/a?keyword=1&KEY=zz#f")
        == "https://h.test/a?keyword=1&KEY=[REDACTED]#f"
    )
    assert redact_url(f"https://u:{CANARY}@h.test/p") == "https://u:[REDACTED]@h.test/p"
    assert redact_url("https://h.test/p?x=1") == "https://h.test/p?x=1"


def test_redact_body_replaces_secret_fields_in_place():
    body = (
        f'{{"model": "m",  "api_key": "{CANARY}", "messages": [{{"role":"user","content":"hi"}}]}}'
    )
    out = redact_body(body.encode())
    assert (
        out
        == b'{"model": "m",  "api_key": "[REDACTED]", "messages": [{"role":"user","content":"hi"}]}'
    )
    plain = b'{"model": "m", "messages": [{"role": "user", "content": "what is a key?"}]}'
    assert redact_body(plain) is plain
    assert redact_body(b"not json api_key") == b"not json api_key"


def _all_text_on_disk(root: Path) -> tuple[bytes, str]:
    raw = b""
    decoded = []
    for p in root.rglob("*"):
        if p.is_file():
            raw += p.read_bytes()
            if p.suffix == ".parquet":
                t = pq.read_table(p)
                decoded.append(repr(t.to_pylist()))
                decoded.append(repr(t.schema.metadata))
    return raw, "\n".join(decoded)


def test_canary_key_never_reaches_disk(tmp_path):
    with CaptureWriter(tmp_path) as w:
        rec = w.exchange(
            stream_id="s",
            attempt=0,
            attempt_label="default",
            provider="google",
            model="gemini",
            method="POST",
            url=f"https://g.test/v1beta/models/gemini:streamGenerateContent?alt=sse&key={CANARY}",
            request_headers={
                "Authorization": f"Bearer {CANARY}",
                "x-api-key": CANARY,
                "x-goog-api-key": CANARY,
            },
            request_body=f'{{"contents": [], "api_key": "{CANARY}"}}'.encode(),
            meta={"debug": f"called with {CANARY}"},
        )
        rec.on_response(401, {"set-cookie": f"s={CANARY}", "x-echo": CANARY}, "HTTP/1.1")
        rec.on_read(b'{"error": "bad key"}')
        rec.on_end("read_error", RuntimeError(f"request to ...?key={CANARY} failed"))
        # a second, unfinished exchange stays in its journal until close
        rec2 = w.exchange(
            stream_id="s2",
            attempt=0,
            attempt_label="default",
            provider="openai",
            model="gpt",
            method="POST",
            url="https://o.test/v1/chat/completions",
            request_headers={"Authorization": f"Bearer {CANARY}"},
            request_body=b"{}",
        )
        journal_raw, _ = _all_text_on_disk(w.path)
        assert CANARY.encode() not in journal_raw
        rec2.on_read(b"data: x\n\n")
    raw, decoded = _all_text_on_disk(tmp_path)
    assert raw
    assert CANARY.encode() not in raw
    assert CANARY not in decoded
    assert "[REDACTED]" in decoded


# -- crash safety --------------------------------------------------------------------------

CRASH_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from lab.capture import CaptureWriter

    w = CaptureWriter(sys.argv[1], capture_id="crash", label="crash")

    def ex(stream_id):
        r = w.exchange(stream_id=stream_id, attempt=0, attempt_label="default",
                       provider="p", model="m", method="POST", url="http://x",
                       request_headers={"authorization": "Bearer sk-crash-canary"},
                       request_body=b'{"n": 1}')
        r.on_response(200, {"content-type": "text/event-stream"}, "HTTP/1.1")
        return r

    r0 = ex("done-flushed")
    for k in range(3):
        r0.on_read(b"data: %d\\n\\n" % k)
    r0.on_end("eof")
    w.flush()

    r1 = ex("done-unflushed")
    r1.on_read(b"data: a\\n\\n")
    r1.on_read(b"data: [DONE]\\n\\n")
    r1.on_end("eof")            # no flush: may or may not be in a part when killed

    r2 = ex("cut")
    r2.on_read(b"data: partial-1\\n\\n")
    r2.on_read("data: \\U0001f9e0".encode()[:8])   # cut inside an emoji
    print("READY", flush=True)
    while True:
        r2.on_read(b"")      # keep the exchange in flight
        time.sleep(0.01)
    """
)


def test_sigkill_mid_stream_leaves_readable_files(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASH_SCRIPT, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        line = proc.stdout.readline()
        assert line.strip() == b"READY", proc.stderr.read()
        time.sleep(0.5)  # the flusher writes a paused stream's reads within 50 ms
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    for p in (tmp_path / "crash").glob("*.parquet"):
        pq.read_table(p)  # every Parquet on disk opens
    cap = open_capture(tmp_path / "crash")
    by = {e.stream_id: e for e in cap.exchanges()}
    assert set(by) == {"done-flushed", "done-unflushed", "cut"}
    assert by["done-flushed"].end_reason == "eof"
    assert by["done-flushed"].reads == [b"data: 0\n\n", b"data: 1\n\n", b"data: 2\n\n"]
    assert by["done-unflushed"].end_reason == "eof"
    assert by["done-unflushed"].reads == [b"data: a\n\n", b"data: [DONE]\n\n"]
    cut = by["cut"]
    assert cut.end_reason == "incomplete"
    assert "journal" in cut.error
    assert cut.reads == [b"data: partial-1\n\n", "data: 🧠".encode()[:8]]
    assert cut.status == 200 and cut.t_end_ns is None
    assert len(cap.chunks) == 7
    assert cap.metadata["label"] == "crash"
    raw, _ = _all_text_on_disk(tmp_path)
    assert b"sk-crash-canary" not in raw


def _write_one(root: Path, capture_id: str, reads: list[bytes]) -> CaptureWriter:
    w = CaptureWriter(root, capture_id=capture_id)
    record(w, reads)
    w.close()
    return w


def test_journal_left_after_its_part_was_written_is_not_double_counted(tmp_path):
    # simulate a crash between "write parts" and "delete journal": keep a journal copy
    w = CaptureWriter(tmp_path, capture_id="dup")
    record(w, [b"a", b"b"])
    journal = w.path / "journal-00000.journal"
    saved = journal.read_bytes()
    w.close()
    journal.write_bytes(saved)
    cap = open_capture(w.path)
    assert len(cap.streams) == 1 and len(cap.chunks) == 2


def test_orphan_chunks_part_is_superseded_by_its_journal(tmp_path):
    # simulate a crash between the chunks part and the streams part of one batch
    w = CaptureWriter(tmp_path, capture_id="orphan")
    record(w, [b"a", b"b"])
    journal = w.path / "journal-00000.journal"
    saved = journal.read_bytes()
    w.close()
    assert not journal.exists()
    (w.path / "streams-00000.parquet").unlink()
    journal.write_bytes(saved)
    (w.path / ".streams-00001.parquet.tmp").write_bytes(b"PAR1 torn")
    cap = open_capture(w.path)
    [ex] = cap.exchanges()
    assert ex.reads == [b"a", b"b"] and ex.end_reason == "eof"
    assert len(cap.chunks) == 2


def test_torn_journal_tail_is_ignored(tmp_path):
    w = CaptureWriter(tmp_path, capture_id="torn")
    rec = _start(w, "s")
    rec.on_read(b"data: whole\n\n")
    w._journal.sync()  # one record per flush: the first read's record is whole on disk
    rec.on_read(b"data: torn-record\n\n")
    w._journal.sync()
    journal = w.path / "journal-00000.journal"
    data = journal.read_bytes()
    w._journal.close()
    journal.write_bytes(data[:-5])
    cap = open_capture(journal)
    [ex] = cap.exchanges()
    assert (ex.reads, ex.end_reason) == ([b"data: whole\n\n"], "incomplete")


# -- bad input -----------------------------------------------------------------------------


def test_nonexistent_path_names_the_path(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(CaptureError, match="nope: no such file"):
        open_capture(missing)


def test_glob_matching_nothing(tmp_path):
    with pytest.raises(CaptureError, match=r"matched no files"):
        open_capture(str(tmp_path / "*.parquet"))


def test_glob_skips_the_readme_beside_the_recordings_as_a_directory_scan_does(tmp_path):
    with CaptureWriter(tmp_path, label="a") as w:
        record(w, [b"a"], stream_id="a")
    (tmp_path / "README.md").write_text("about these captures")
    cap = open_capture(str(tmp_path / "*"))
    assert [r.stream_id for r in cap.requests()] == ["a"]
    assert [Path(p).name for p in cap.paths] == [Path(p).name for p in open_capture(tmp_path).paths]


def test_glob_matching_only_other_files_says_what_it_matched(tmp_path):
    (tmp_path / "README.md").write_text("hi")
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(
        CaptureError, match=r"matched no capture files .*, only README.md, notes.txt$"
    ):
        open_capture(str(tmp_path / "*"))


def test_a_non_capture_file_named_outright_is_still_refused(tmp_path):
    (tmp_path / "README.md").write_text("hi")
    with pytest.raises(CaptureError, match="README.md"):
        open_capture(tmp_path / "README.md")


def test_a_streams_part_without_its_chunks_part_is_refused_naming_both(tmp_path):
    """Replaying it would make up an empty response for every exchange."""
    with CaptureWriter(tmp_path, label="a") as w:
        record(w, [b"data: 1\n\n", b"data: 2\n\n"], stream_id="a")
    only = tmp_path / "only"
    only.mkdir()
    part = next(w.path.glob("streams-*.parquet"))
    (only / part.name).write_bytes(part.read_bytes())
    with pytest.raises(CaptureError) as info:
        open_capture(only)
    assert str(info.value) == (
        f"{only / part.name}: 1 of its 1 exchanges lack recorded reads (exchange 0, stream "
        f"'a' attempt 0: 2 reads recorded, 0 found in the chunks parts read); "
        f"{part.name.replace('streams', 'chunks')} is missing"
    )


def test_directory_without_captures(tmp_path):
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(CaptureError, match="no capture files"):
        open_capture(tmp_path)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_corrupt_parquet_names_the_file(tmp_path, damage):
    w = _write_one(tmp_path, "c", [b"data: x\n\n"])
    part = w.path / "chunks-00000.parquet"
    data = part.read_bytes()
    part.write_bytes(
        {"truncate": data[: len(data) // 2], "garbage": b"not parquet at all", "empty": b""}[damage]
    )
    with pytest.raises(CaptureError) as info:
        open_capture(w.path)
    assert str(part.resolve()) in str(info.value)
    assert "corrupt or truncated" in str(info.value)


def test_foreign_parquet_is_not_a_capture(tmp_path):
    foreign = tmp_path / "sales.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), foreign)
    with pytest.raises(CaptureError, match=r"sales\.parquet: not a Stream Lab capture"):
        open_capture(foreign)
    with pytest.raises(CaptureError, match=r"sales\.parquet: not a Stream Lab capture"):
        open_capture(tmp_path)


def test_newer_schema_version_is_refused(tmp_path):
    w = _write_one(tmp_path, "v", [b"x"])
    part = w.path / "streams-00000.parquet"
    t = pq.read_table(part)
    md = dict(t.schema.metadata)
    md[b"lab.schema_version"] = b"99"
    pq.write_table(t.replace_schema_metadata(md), part)
    with pytest.raises(CaptureError, match="newer than this lab"):
        open_capture(part)


def test_writer_refuses_exchanges_after_close(tmp_path):
    w = CaptureWriter(tmp_path)
    w.close()
    w.close()  # idempotent
    with pytest.raises(CaptureError, match="closed"):
        record(w, [b"x"])


def _start(w: CaptureWriter, stream_id: str):
    rec = w.exchange(
        stream_id=stream_id,
        attempt=0,
        attempt_label="default",
        provider="p",
        model="m",
        method="POST",
        url="http://x",
        request_headers={},
        request_body=b"{}",
    )
    rec.on_response(200, {}, "HTTP/1.1")
    return rec


def test_interleaved_exchanges_across_journal_segments_recover_exactly(tmp_path):
    import shutil

    w = CaptureWriter(tmp_path / "live", capture_id="seg", flush_interval=3600, journal_interval=0)
    w._journal.segment_bytes = 300  # rotate every few records
    a, b, c = _start(w, "a"), _start(w, "b"), _start(w, "c")
    for k in range(20):
        a.on_read(b"a%d;" % k)
        b.on_read(b"b%d;" % k)
        if k < 5:
            c.on_read(b"c%d;" % k)
        if k == 5:
            c.on_end("eof")
    a.on_end("eof")
    assert len(list(w.path.glob("journal-*.journal"))) > 3
    # what a SIGKILL right now would leave: every record was written unbuffered
    snapshot = tmp_path / "snap" / "seg"
    shutil.copytree(w.path, snapshot)
    cap = open_capture(snapshot)
    by = {e.stream_id: e for e in cap.exchanges()}
    assert by["a"].reads == [b"a%d;" % k for k in range(20)] and by["a"].end_reason == "eof"
    assert by["c"].reads == [b"c%d;" % k for k in range(5)] and by["c"].end_reason == "eof"
    assert by["b"].reads == [b"b%d;" % k for k in range(20)]
    assert by["b"].end_reason == "incomplete"
    # writing parts lets segments go: only the ones holding "b" (still live) stay
    w.flush()
    kept = list(w.path.glob("journal-*.journal"))
    assert kept and len(kept) < len(list(snapshot.glob("journal-*.journal")))
    b.on_end("eof")
    w.close()
    assert not list(w.path.glob("*.journal"))
    final = {e.stream_id: e for e in open_capture(w.path).exchanges()}
    assert final["b"].reads == by["b"].reads and final["b"].end_reason == "eof"


def test_flush_interval_batches_exchanges_into_few_parts(tmp_path):
    with CaptureWriter(tmp_path, flush_interval=3600) as w:
        for i in range(50):
            record(w, [b"x"], stream_id=f"s{i}")
        # nothing written yet: still safe in the journal, and readable from it
        assert not list(w.path.glob("*.parquet"))
        assert len(open_capture(w.path).streams) == 50
    assert len(list(w.path.glob("streams-*.parquet"))) == 1
    assert len(open_capture(w.path).streams) == 50


# -- journal: batched read records ---------------------------------------------------------


def _journal_snapshot(w: CaptureWriter, tmp_path: Path) -> Capture:
    """What a SIGKILL right now would leave behind, opened."""
    import shutil
    import tempfile

    snapshot = Path(tempfile.mkdtemp(prefix="snap", dir=tmp_path)) / w.capture_id
    shutil.copytree(w.path, snapshot)
    return open_capture(snapshot)


def test_reads_teed_between_flushes_come_back_from_the_journal_exactly(tmp_path):
    w = CaptureWriter(tmp_path / "live", capture_id="tee", flush_interval=3600)
    rec = _start(w, "t")
    reads = [b"data: %d\n\n" % k for k in range(2500)] + [b"\xf0\x9f", b"\x98\x80 split"]
    out = []
    for k, chunk in enumerate(rec.tee(iter(reads), on_error=lambda exc: None)):
        out.append(chunk)
        if k % 700 == 0:
            w._journal.sync()  # several R records, of different sizes
    assert out == reads  # passed on unchanged
    [ex] = _journal_snapshot(w, tmp_path).exchanges()
    assert ex.reads == reads and ex.end_reason == "eof"
    assert len(ex.read_t_ns) == len(reads) and ex.read_t_ns == sorted(ex.read_t_ns)
    w.close()


def _paced(reads: list[bytes], gap_s: float):
    for chunk in reads:
        time.sleep(gap_s)
        yield chunk


def test_a_flowing_stream_reaches_the_journal_from_its_own_thread_with_no_flusher(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(JournalWriter, "_run", lambda self: None)  # no flusher thread
    w = CaptureWriter(
        tmp_path / "live", capture_id="own", flush_interval=3600, journal_interval=0.001
    )
    rec = _start(w, "own")
    reads = [b"data: %d\n\n" % k for k in range(30)]
    it = rec.tee(_paced(reads, 0.002), on_error=lambda exc: None)  # 2 ms apart
    got = [next(it) for _ in range(10)]  # next() k+2 writes read k, then fetches read k+1
    assert got == reads[:10]
    [ex] = _journal_snapshot(w, tmp_path).exchanges()
    assert ex.end_reason == "incomplete" and ex.status == 200
    assert ex.reads == reads[:9]
    assert list(it) == reads[10:]
    w.close()
    [ex] = open_capture(w.path).exchanges()
    assert ex.reads == reads and ex.end_reason == "eof"


def test_a_paused_stream_reaches_the_journal_from_the_flusher(tmp_path):
    w = CaptureWriter(
        tmp_path / "live",
        capture_id="paused",
        flush_interval=3600,
        journal_interval=600,  # the recording thread writes its first read, then not again
        journal_idle_interval=0.02,
    )
    rec = _start(w, "paused")
    reads = [b"data: %d\n\n" % k for k in range(3)] + [b"data: never\n\n"]
    it = rec.tee(iter(reads), on_error=lambda exc: None)
    assert [next(it) for _ in range(3)] == reads[:3]  # then the stream pauses
    deadline = time.monotonic() + 10
    while True:
        [ex] = _journal_snapshot(w, tmp_path).exchanges()
        if len(ex.reads) == 3 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert ex.reads == reads[:3] and ex.end_reason == "incomplete"
    it.close()
    w.close()


def test_the_flusher_leaves_a_flowing_stream_to_its_own_thread(tmp_path, monkeypatch):
    """While a stream's own thread writes every ``journal_interval``, the flusher only looks
    at the clock: it neither writes nor waits for the lock that thread holds. Once the
    stream pauses, the flusher writes its last reads within ``journal_idle_interval``."""
    drains: list[tuple[str, float]] = []
    real = JournalWriter._drain

    def counted(self: JournalWriter) -> None:
        drains.append((threading.current_thread().name, time.monotonic()))
        real(self)

    monkeypatch.setattr(JournalWriter, "_drain", counted)
    w = CaptureWriter(
        tmp_path / "live",
        capture_id="flowing",
        flush_interval=3600,
        journal_interval=0.01,
        journal_idle_interval=0.4,
    )
    rec = _start(w, "flowing")
    reads = [b"data: %d\n\n" % k for k in range(41)]
    it = rec.tee(iter(reads), on_error=lambda exc: None)
    next(it)
    flow_start = time.monotonic()
    for _ in range(30):  # 1.5 s of a stream paced at 50 ms: over three idle intervals
        time.sleep(0.05)
        next(it)
    flow_end = time.monotonic()
    flusher = [t for name, t in drains if name != threading.current_thread().name]
    # at most its first look, when the exchange began (it had written nothing yet)
    assert len([t for t in flusher if flow_start < t < flow_end]) <= 1
    deadline = time.monotonic() + 10  # paused now: the flusher writes the last reads
    while True:
        [ex] = _journal_snapshot(w, tmp_path).exchanges()
        if len(ex.reads) == 31 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert ex.reads == reads[:31]
    it.close()
    w.close()


def test_a_recording_thread_skips_its_journal_turn_while_another_thread_writes(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(JournalWriter, "_run", lambda self: None)  # no flusher thread
    w = CaptureWriter(tmp_path / "live", capture_id="busy")
    rec = _start(w, "busy")
    journal = w._journal
    journal.sync()  # the header
    with journal._wlock:  # another thread is writing
        rec._reads.append(b"data: x\n\n")
        rec._ts.append(1)
        t = threading.Thread(target=journal.write_due, args=(time.monotonic_ns() + 10**12,))
        t.start()
        t.join(5)
        assert not t.is_alive()  # it did not wait for the lock
    [ex] = _journal_snapshot(w, tmp_path).exchanges()
    assert ex.reads == []
    journal.write_due(time.monotonic_ns() + 10**12)
    [ex] = _journal_snapshot(w, tmp_path).exchanges()
    assert ex.reads == [b"data: x\n\n"]
    rec.on_end("eof")
    w.close()


def test_concurrent_streams_share_one_journal_write_per_interval(tmp_path, monkeypatch):
    # 100 streams in flight must not mean 100 writes per interval: the first thread due
    # writes every exchange's new reads, the others find nothing due
    from lab.capture import journal as journal_mod

    monkeypatch.setattr(JournalWriter, "_run", lambda self: None)  # no flusher thread
    writes: list[int] = []
    real = journal_mod._write_buffers
    monkeypatch.setattr(
        journal_mod, "_write_buffers", lambda fd, b: writes.append(len(b)) or real(fd, b)
    )
    w = CaptureWriter(tmp_path / "live", capture_id="many", journal_interval=3600)
    recs = [_start(w, f"s{i}") for i in range(3)]
    journal = w._journal
    now = time.monotonic_ns()
    journal.write_due(now)  # due: the headers go out, the next write is an hour away
    assert len(writes) == 1
    for i, rec in enumerate(recs):
        rec.on_read(b"data: %d\n\n" % i)  # not due: a thread wrote within the interval
    assert len(writes) == 1
    journal.write_due(now + 3601 * 10**9)  # one thread, an hour later: everyone's reads
    assert len(writes) == 2
    by = {e.stream_id: e.reads for e in _journal_snapshot(w, tmp_path).exchanges()}
    assert by == {"s0": [b"data: 0\n\n"], "s1": [b"data: 1\n\n"], "s2": [b"data: 2\n\n"]}
    for rec in recs:
        rec.on_end("eof")
    w.close()


@pytest.mark.parametrize("interval, idle", [(-1, 0.05), (0.005, 0), (0.005, -1)])
def test_journal_intervals_out_of_range_are_refused(tmp_path, interval, idle):
    with pytest.raises(ValueError, match="journal intervals"):
        CaptureWriter(tmp_path, journal_interval=interval, journal_idle_interval=idle)
    assert list(tmp_path.iterdir()) == []  # refused before its directory was made


def test_tee_records_a_failing_stream_and_reraises(tmp_path):
    w = CaptureWriter(tmp_path, capture_id="fail")
    rec = _start(w, "f")
    seen = []

    def chunks():
        yield b"data: a\n\n"
        raise ConnectionResetError("peer went away")

    with pytest.raises(ConnectionResetError):
        for _ in rec.tee(
            chunks(), on_error=lambda exc: (seen.append(exc), rec.on_end("read_error", exc))
        ):
            pass
    assert [type(e) for e in seen] == [ConnectionResetError]
    w.close()
    [ex] = open_capture(w.path).exchanges()
    assert ex.reads == [b"data: a\n\n"] and ex.end_reason == "read_error"
    assert ex.error == "ConnectionResetError: peer went away"


def test_journal_of_one_read_per_record_from_earlier_versions_still_reads(tmp_path):
    from lab.capture.journal import REC

    def json_record(kind: bytes, exchange: int, obj: dict) -> bytes:  # v1: no checksum
        payload = json.dumps(obj).encode()
        return REC.pack(kind, exchange, len(payload)) + payload

    path = tmp_path / "old" / "journal-00000.journal"
    path.parent.mkdir()
    capture = {"capture_id": "old", "created_at": "2026-11-01T00:00:00+00:00"}
    header = {
        "capture_id": "old",
        "exchange": 0,
        "stream_id": "s",
        "attempt": 0,
        "attempt_label": "default",
        "provider": "p",
        "model": "m",
        "method": "POST",
        "url": "http://x",
        "request_headers": "{}",
        "request_body": "{}",
        "request_body_encoding": "utf-8",
        "started_at": 1,
        "meta": "{}",
    }

    def d(t: int, data: bytes) -> bytes:
        return REC.pack(b"D", 0, 8 + len(data)) + t.to_bytes(8, "little", signed=True) + data

    path.write_bytes(
        json_record(b"G", 0xFFFFFFFF, {"capture": capture, "redaction": {}})
        + json_record(b"H", 0, header)
        + REC.pack(b"B", 0, 2)
        + b"{}"
        + d(5, b"data: one\n\n")
        + d(9, b"data: two\n\n")
    )
    [ex] = open_capture(path).exchanges()
    assert (ex.reads, ex.read_t_ns) == ([b"data: one\n\n", b"data: two\n\n"], [5, 9])
    assert ex.end_reason == "incomplete"


def test_a_damaged_journal_record_is_skipped_and_its_exchange_marked_cut(tmp_path):
    w = CaptureWriter(tmp_path, capture_id="bad")
    rec = _start(w, "b")
    rec.on_read(b"data: x\n\n")
    w._journal.sync()
    rec.on_read(b"data: y\n\n")
    rec.on_end("eof")
    journal = w.path / "journal-00000.journal"
    data = bytearray(journal.read_bytes())
    w._journal.close()
    at = data.rindex(b"data: x\n\n") - 4  # the read's length field, just before its bytes
    data[at : at + 4] = (3).to_bytes(4, "little")  # the checksum no longer holds
    journal.write_bytes(bytes(data))
    [ex] = open_capture(journal).exchanges()
    assert ex.reads == [] and ex.end_reason == "incomplete"  # never a read made up
    assert ex.error == (
        "recorder stopped before the exchange ended (recovered from its journal): reads 0 "
        "to 0 are missing from the journal; 1 torn journal record(s) skipped"
    )


def test_a_v1_read_record_whose_lengths_do_not_add_up_is_a_corrupt_journal(tmp_path):
    from lab.capture.journal import REC

    capture = {"capture_id": "old"}
    g = json.dumps({"capture": capture, "redaction": {}}).encode()
    h = json.dumps({"capture_id": "old", "exchange": 0, "stream_id": "s"}).encode()
    r = (1).to_bytes(4, "little") + (5).to_bytes(8, "little") + (3).to_bytes(4, "little")
    r += b"data: x\n\n"
    journal = tmp_path / "old" / "journal-00000.journal"
    journal.parent.mkdir()
    journal.write_bytes(
        REC.pack(b"G", 0xFFFFFFFF, len(g))
        + g
        + REC.pack(b"H", 0, len(h))
        + h
        + REC.pack(b"B", 0, 2)
        + b"{}"
        + REC.pack(b"R", 0, len(r))
        + r
    )
    with pytest.raises(CaptureError, match=r"journal-00000\.journal: corrupt journal"):
        open_capture(journal)


def test_writev_of_more_buffers_than_one_call_takes_writes_all_in_order(tmp_path):
    from lab.capture.journal import _IOV_MAX, _write_buffers

    buffers = [b"%d," % k for k in range(3 * _IOV_MAX + 7)]
    path = tmp_path / "out"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        assert _write_buffers(fd, buffers) == (sum(map(len, buffers)), None)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"".join(buffers)


def test_close_does_not_wait_out_a_long_journal_interval(tmp_path):
    w = CaptureWriter(tmp_path, capture_id="slow-tick", journal_interval=600)
    record(w, [b"data: x\n\n"])
    t0 = time.monotonic()
    w.close()
    assert time.monotonic() - t0 < 30  # not 600: close interrupts the flusher's pause
    [ex] = open_capture(w.path).exchanges()
    assert ex.reads == [b"data: x\n\n"]


def test_a_writer_starts_its_threads_when_created_and_none_while_recording(tmp_path):
    # starting a thread waits for it: none may start between a request and its last read
    def threads_of(w: CaptureWriter) -> set[str]:
        return {t.name for t in threading.enumerate() if w.capture_id in t.name}

    w = CaptureWriter(tmp_path, capture_id="threads-up-front")
    started = threads_of(w)
    assert started == {"lab-journal-threads-up-front", "lab-capture-threads-up-front"}
    record(w, [b"data: x\n\n"])
    record(w, [b"data: y\n\n"], stream_id="s2")
    assert threads_of(w) == started
    w.close()
    assert threads_of(w) == set()
    assert [ex.reads for ex in open_capture(w.path).exchanges()] == [
        [b"data: x\n\n"],
        [b"data: y\n\n"],
    ]


def test_a_double_star_glob_does_not_follow_symlink_loops(tmp_path):
    """``**`` walks real directories only: two symlinks back up the tree made glob.glob
    follow 2^40 paths (a hang); now each recording is found once, fast."""
    root = tmp_path / "caps"
    with CaptureWriter(root, label="a") as w:
        record(w, [b"a"], stream_id="a")
    os.symlink(root, root / "loop")
    os.symlink(root, root / w.capture_id / "back")
    code = (
        "import sys; from lab.capture import open as o\n"
        "cap = o(sys.argv[1])\n"
        "print([r.stream_id for r in cap.requests()], cap.metadata['capture_ids'])"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    for pattern in ("**/streams-*.parquet", "**"):
        done = subprocess.run(
            [sys.executable, "-c", code, str(root / pattern)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"['a'] ['{w.capture_id}']"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "é"]), st.integers(0, 2), st.integers(0, 3)),
        max_size=12,
    ),
    st.randoms(use_true_random=False),
)
def test_loading_orders_rows_as_a_stable_sort_and_keeps_rows_already_in_order(rows, rnd):
    # open() puts a capture's rows in its order; rows in that order already (as a part is
    # written) are kept as they are, without copying the reads
    from lab.capture.reader import _in_order

    keys = [("stream_id", "ascending"), ("attempt", "ascending")]
    rnd.shuffle(rows)
    table = pa.table(
        {
            "stream_id": [s for s, _, _ in rows],
            "attempt": pa.array([a for _, a, _ in rows], pa.int32()),
            "raw": [bytes([i]) * n for i, (_, _, n) in enumerate(rows)],  # rows told apart
        }
    )
    ordered = _in_order(table, keys)
    assert ordered.equals(table.sort_by(keys))
    assert _in_order(ordered, keys) is ordered
    if ordered.equals(table):
        assert ordered is table
