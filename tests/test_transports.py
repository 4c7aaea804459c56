"""Recording and replay transports over a real loopback socket."""

from __future__ import annotations

import asyncio
import gzip
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import pyarrow.parquet as pq
import pytest
from recorded import recorded_exchange

from lab.capture import CaptureWriter, RecordedExchange
from lab.capture import open as open_capture
from lab.http.sse import iter_sse
from lab.http.transports import (
    AsyncRecordingTransport,
    RecordingCut,
    RecordingTransport,
    ReplayExhausted,
    ReplayMismatch,
    ReplayTransport,
    replay_transport_for_body,
)

CANARY = "sk-canary-b4e1f09d77aa"
EMOJI = "🧠".encode()
FRAMES = [
    b": OPENROUTER PROCESSING\n\n",
    b'data: {"choices":[{"delta":{"content":"Hel"}}]}\r\n\r\n',
    b'data: {"choices":[{"delta":{"content":"lo ' + EMOJI[:2],
    EMOJI[2:] + b'"}}]}\n\n',
    b"data: [DONE]\n\n",
]
BODY = b"".join(FRAMES)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, *args: object) -> None:
        pass

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        url = urlparse(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.server.seen.append((self.path, dict(self.headers), body))
        if url.path == "/error":
            payload = b'{"error": {"message": "bad param min_p", "code": 400}}'
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        gzipped = url.path == "/gzip" and "gzip" in self.headers.get("accept-encoding", "")
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("x-request-id", "req-123")
        if gzipped:
            self.send_header("content-encoding", "gzip")
        self.end_headers()
        if gzipped:
            self._chunk(gzip.compress(BODY))
            self._chunk(b"")
            return
        token = query.get("hold")
        for i, frame in enumerate(FRAMES):
            if i == len(FRAMES) - 1:
                if token:
                    self.server.event("hold", token).wait(10)
                if url.path == "/stall":
                    time.sleep(1.0)
                    return
            self._chunk(frame)
            time.sleep(0.02)
        self._chunk(b"")
        if token:
            self.server.event("sent", token).set()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.seen: list[tuple[str, dict, bytes]] = []
        self._events: dict[tuple[str, str], threading.Event] = {}
        self._lock = threading.Lock()

    def event(self, kind: str, token: str) -> threading.Event:
        with self._lock:
            return self._events.setdefault((kind, token), threading.Event())

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture(scope="module")
def server():
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def lab_ext(stream_id: str = "s1", attempt: int = 0, label: str = "default") -> dict:
    return {
        "lab": {
            "stream_id": stream_id,
            "attempt": attempt,
            "attempt_label": label,
            "provider": "openrouter",
            "model": "vendor/model",
            "meta": {"case": stream_id},
        }
    }


REQUEST_BODY = b'{"model":"vendor/model","stream":true,"messages":[]}'


# -- recording -----------------------------------------------------------------------------


def test_recording_is_unbuffered_and_one_row_per_read(server, tmp_path):
    token = "unbuffered"
    with CaptureWriter(tmp_path) as writer:
        client = httpx.Client(transport=RecordingTransport(writer))
        with client.stream(
            "POST",
            f"{server.url}/sse?hold={token}",
            content=REQUEST_BODY,
            extensions=lab_ext(),
        ) as response:
            reads = response.iter_raw()
            first = next(reads)
            # the server is blocked before its last frame: read 1 came through unbuffered
            assert not server.event("sent", token).is_set()
            assert first == FRAMES[0]
            server.event("hold", token).set()
            client_reads = [first, *reads]
        client.close()
    assert b"".join(client_reads) == BODY
    cap = open_capture(writer.path)
    [ex] = cap.exchanges()
    assert ex.reads == client_reads  # same boundaries as the client saw
    assert ex.body == BODY  # byte for byte what the server sent
    assert len(cap.chunks) == len(client_reads)
    assert list(cap.chunks["seq"]) == list(range(len(client_reads)))
    t = list(cap.chunks["t_ns"])
    assert all(a < b for a, b in zip(t, t[1:], strict=False))
    assert (ex.stream_id, ex.attempt, ex.attempt_label, ex.provider, ex.model) == (
        "s1",
        0,
        "default",
        "openrouter",
        "vendor/model",
    )
    assert (ex.status, ex.http_version, ex.end_reason, ex.error) == (200, "HTTP/1.1", "eof", None)
    assert ex.response_headers["x-request-id"] == "req-123"
    assert ex.request_body == REQUEST_BODY
    assert ex.request_headers["accept-encoding"] == "identity"
    assert ex.meta == {"case": "s1"}
    assert 0 < ex.t_headers_ns <= ex.t_first_read_ns < ex.t_last_read_ns <= ex.t_end_ns
    events = [e.data for e in iter_sse(ex.reads) if not e.is_comment]
    assert events[-1] == "[DONE]" and "🧠" in events[-2]


def test_without_lab_extension_a_stream_id_is_generated(server, tmp_path):
    with CaptureWriter(tmp_path) as writer:
        with httpx.Client(transport=RecordingTransport(writer)) as client:
            client.post(f"{server.url}/sse", content=b"{}")
            client.post(f"{server.url}/sse", content=b"{}")
    cap = open_capture(writer.path)
    ids = list(cap.streams["stream_id"])
    assert len(set(ids)) == 2 and all(ids)
    assert set(cap.streams["attempt_label"]) == {"default"}
    assert set(cap.streams["attempt"]) == {0}


def test_cancelled_when_closed_before_eof(server, tmp_path):
    token = "cancel"
    with CaptureWriter(tmp_path) as writer:
        with httpx.Client(transport=RecordingTransport(writer)) as client:
            with client.stream("POST", f"{server.url}/sse?hold={token}", content=b"{}") as r:
                first = next(r.iter_raw())
        server.event("hold", token).set()
    [ex] = open_capture(writer.path).exchanges()
    assert ex.end_reason == "cancelled"
    assert ex.reads[0] == first


def test_timeout_is_recorded_and_reraised(server, tmp_path):
    with CaptureWriter(tmp_path) as writer:
        client = httpx.Client(
            transport=RecordingTransport(writer), timeout=httpx.Timeout(5.0, read=0.3)
        )
        got: list[bytes] = []
        with pytest.raises(httpx.ReadTimeout):
            with client.stream("POST", f"{server.url}/stall", content=b"{}") as r:
                for chunk in r.iter_raw():
                    got.append(chunk)
        client.close()
    [ex] = open_capture(writer.path).exchanges()
    assert ex.end_reason == "timeout"
    assert ex.error.startswith("ReadTimeout")
    assert ex.reads == got and b"".join(got) == b"".join(FRAMES[:-1])


def test_connect_error_is_recorded_without_response(tmp_path):
    with CaptureWriter(tmp_path) as writer:
        with httpx.Client(transport=RecordingTransport(writer)) as client:
            with pytest.raises(httpx.ConnectError):
                client.post("http://127.0.0.1:9/", content=b"{}", extensions=lab_ext("dead"))
    [ex] = open_capture(writer.path).exchanges()
    assert (ex.status, ex.end_reason, ex.reads) == (None, "read_error", [])
    assert ex.error.startswith("ConnectError")
    # and replay raises the same error type
    with httpx.Client(transport=ReplayTransport([ex])) as client:
        with pytest.raises(httpx.ConnectError):
            client.post("http://replay/", content=b"{}")


def test_canary_key_appears_in_no_file_on_disk(server, tmp_path):
    with CaptureWriter(tmp_path) as writer:
        with httpx.Client(transport=RecordingTransport(writer)) as client:
            client.post(
                f"{server.url}/sse?alt=sse&key={CANARY}",
                content=REQUEST_BODY,
                headers={"Authorization": f"Bearer {CANARY}", "x-api-key": CANARY},
                extensions=lab_ext("canary"),
            )
            with pytest.raises(httpx.ConnectError):
                client.post(
                    f"http://127.0.0.1:9/?key={CANARY}",
                    headers={"Authorization": f"Bearer {CANARY}"},
                )
    path, headers, _ = server.seen[-1]
    assert CANARY in path and headers["Authorization"] == f"Bearer {CANARY}"  # it was sent
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert files
    for p in files:
        assert CANARY.encode() not in p.read_bytes(), p
        if p.suffix == ".parquet":
            assert CANARY not in repr(pq.read_table(p).to_pylist()), p
    cap = open_capture(writer.path)
    ex = cap.exchanges()[0]
    assert ex.request_headers["authorization"] == "[REDACTED]"
    assert ex.request_headers["x-api-key"] == "[REDACTED]"
    assert ex.url.endswith("?alt=sse&key=[REDACTED]")


def test_accept_encoding_identity_by_default_and_gzip_replays_like_live(server, tmp_path):
    with CaptureWriter(tmp_path) as writer:
        with httpx.Client(transport=RecordingTransport(writer)) as client:
            plain = client.post(f"{server.url}/gzip", content=b"{}")
        with httpx.Client(transport=RecordingTransport(writer, accept_encoding=None)) as client:
            live = client.post(f"{server.url}/gzip", content=b"{}")
    assert plain.content == BODY and "content-encoding" not in plain.headers
    assert live.headers["content-encoding"] == "gzip" and live.content == BODY
    plain_ex, gz_ex = open_capture(writer.path).exchanges()
    assert plain_ex.body == BODY  # the raw column holds the SSE text itself
    assert gzip.decompress(gz_ex.body) == BODY  # raw wire bytes, not decoded
    with httpx.Client(transport=ReplayTransport([gz_ex])) as client:
        replayed = client.post("http://replay/", content=b"{}")
    assert replayed.content == BODY  # the client decodes it exactly as it did live


def test_error_status_is_recorded_with_its_body(server, tmp_path):
    with CaptureWriter(tmp_path) as writer:
        with httpx.Client(transport=RecordingTransport(writer)) as client:
            r = client.post(f"{server.url}/error", content=b"{}", extensions=lab_ext("e"))
    assert r.status_code == 400
    [ex] = open_capture(writer.path).exchanges()
    assert (ex.status, ex.body, ex.end_reason) == (400, r.content, "eof")


def test_async_recording_transport(server, tmp_path):
    async def main(writer: CaptureWriter) -> list[bytes]:
        transport = AsyncRecordingTransport(writer)
        async with httpx.AsyncClient(transport=transport) as client:
            async with client.stream(
                "POST", f"{server.url}/sse", content=b"{}", extensions=lab_ext("async")
            ) as r:
                return [c async for c in r.aiter_raw()]

    with CaptureWriter(tmp_path) as writer:
        got = asyncio.run(main(writer))
    [ex] = open_capture(writer.path).exchanges()
    assert ex.reads == got and ex.body == BODY and ex.end_reason == "eof"


def test_concurrent_recordings_through_one_transport(server, tmp_path):
    n = 16
    with CaptureWriter(tmp_path) as writer:
        client = httpx.Client(
            transport=RecordingTransport(writer, httpx.HTTPTransport()),
            limits=httpx.Limits(max_connections=n),
        )

        def run(i: int) -> None:
            client.post(f"{server.url}/sse", content=b"{}", extensions=lab_ext(f"c{i:02d}"))

        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        client.close()
    cap = open_capture(writer.path)
    assert len(cap.streams) == n
    assert all(ex.body == BODY and ex.end_reason == "eof" for ex in cap.exchanges())


CRASH_SCRIPT = textwrap.dedent(
    """
    import sys, httpx
    from lab.capture import CaptureWriter
    from lab.http.transports import RecordingTransport

    root, base, token = sys.argv[1:4]
    writer = CaptureWriter(root, capture_id="killed")
    client = httpx.Client(transport=RecordingTransport(writer))
    ext = lambda sid: {"lab": {"stream_id": sid, "attempt": 0, "attempt_label": "default",
                               "provider": "openrouter", "model": "m", "meta": {}}}
    client.post(base + "/sse", content=b"{}", extensions=ext("finished"))
    with client.stream("POST", base + "/sse?hold=" + token, content=b"{}",
                       extensions=ext("cut")) as r:
        it = r.iter_raw()
        next(it)
        next(it)
        print("READY", flush=True)
        sys.stdin.readline()       # block until killed
    """
)


def test_sigkill_of_a_recording_process_mid_stream(server, tmp_path):
    token = "crash"
    proc = subprocess.Popen(
        [sys.executable, "-c", CRASH_SCRIPT, str(tmp_path), server.url, token],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout.readline().strip() == b"READY", proc.stderr.read()
        time.sleep(0.5)  # the flusher writes a paused stream's reads within 50 ms
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        server.event("hold", token).set()
    cap = open_capture(tmp_path / "killed")
    by = {e.stream_id: e for e in cap.exchanges()}
    assert by["finished"].end_reason == "eof" and by["finished"].body == BODY
    cut = by["cut"]
    assert cut.end_reason == "incomplete" and cut.status == 200
    assert len(cut.reads) >= 2 and BODY.startswith(cut.body)


# -- replay --------------------------------------------------------------------------------


def _recorded(server, tmp_path: Path) -> list[RecordedExchange]:
    with CaptureWriter(tmp_path) as writer:
        with httpx.Client(transport=RecordingTransport(writer)) as client:
            client.post(f"{server.url}/error", content=b"{}", extensions=lab_ext("r", 0))
            client.post(
                f"{server.url}/sse", content=REQUEST_BODY, extensions=lab_ext("r", 1, "drop")
            )
    return open_capture(writer.path).request("r").exchanges


def test_replay_serves_same_read_boundaries_in_order(server, tmp_path):
    exchanges = _recorded(server, tmp_path)
    transport = ReplayTransport(exchanges)
    with httpx.Client(transport=transport) as client:
        first = client.post("http://replay.test/v1", content=b"{}")
        assert first.status_code == 400 and first.content == exchanges[0].body
        with client.stream("POST", "http://replay.test/v1", content=REQUEST_BODY) as r:
            assert r.status_code == 200
            assert r.headers["x-request-id"] == "req-123"
            assert "transfer-encoding" not in r.headers and "content-length" not in r.headers
            assert r.extensions["http_version"] == b"HTTP/1.1"
            reads = list(r.iter_raw())
        assert reads == exchanges[1].reads
        assert [str(q.url) for q in transport.requests_seen] == ["http://replay.test/v1"] * 2
        assert transport.remaining == 0
        with pytest.raises(ReplayExhausted, match="2 recorded exchange"):
            client.post("http://replay.test/v1", content=b"{}")


def test_replay_strict_checks_the_request_body(server, tmp_path):
    exchanges = _recorded(server, tmp_path)
    with httpx.Client(transport=ReplayTransport(exchanges, strict=True)) as client:
        client.post("http://replay.test/", content=b"{}")
        with pytest.raises(ReplayMismatch):
            client.post("http://replay.test/", content=b'{"different": true}')


_exchange = recorded_exchange


def test_replay_reraises_recorded_timeout_after_the_last_read():
    ex = _exchange(
        response_headers={"content-type": "text/event-stream"},
        end_reason="timeout",
        error="ReadTimeout: timed out",
    )
    got: list[bytes] = []
    with httpx.Client(transport=ReplayTransport([ex])) as client:
        with pytest.raises(httpx.ReadTimeout, match="timed out"):
            with client.stream("POST", "http://x") as r:
                for chunk in r.iter_raw():
                    got.append(chunk)
    assert got == ex.reads
    for reason, error, exc_type in [
        ("read_error", "RemoteProtocolError: peer closed", httpx.RemoteProtocolError),
        ("read_error", "OSError: boom", httpx.ReadError),
        ("timeout", "TimeoutError: x", httpx.ReadTimeout),
    ]:
        ex.end_reason, ex.error = reason, error
        with httpx.Client(transport=ReplayTransport([ex])) as client:
            with pytest.raises(exc_type):
                client.post("http://x")
    ex.end_reason, ex.error = "eof", None
    with httpx.Client(transport=ReplayTransport([ex])) as client:
        assert client.post("http://x").content == b"data: a\n\ndata: b"  # EOF after last read


@pytest.mark.parametrize("end_reason", ["incomplete", "cancelled"])
def test_replay_of_an_exchange_cut_by_the_recorder_raises_recording_cut_after_the_last_read(
    end_reason,
):
    """Not an EOF: the recording, not the provider, stopped there (replay would otherwise
    report a provider that cut its stream short)."""
    ex = _exchange(stream_id="cut", end_reason=end_reason)
    got: list[bytes] = []
    with httpx.Client(transport=ReplayTransport([ex])) as client:
        with pytest.raises(RecordingCut, match="the recording ends here") as info:
            with client.stream("POST", "http://x") as r:
                for chunk in r.iter_raw():
                    got.append(chunk)
    assert got == ex.reads
    assert info.value.end_reason == end_reason
    assert isinstance(info.value, httpx.TransportError)


def test_replay_realtime_reproduces_timing():
    reads = [b"data: 1\n\n", b"data: 2\n\n", b"data: 3\n\n"]
    ex = _exchange(
        stream_id="rt",
        reads=reads,
        read_t_ns=[50_000_000, 100_000_000, 150_000_000],
        t_headers_ns=40_000_000,
    )
    with httpx.Client(transport=ReplayTransport([ex], realtime=True)) as client:
        t0 = time.monotonic()
        with client.stream("POST", "http://x") as r:
            stamps = [(chunk, time.monotonic() - t0) for chunk in r.iter_raw()]
    assert [c for c, _ in stamps] == reads
    assert stamps[0][1] >= 0.045 and stamps[-1][1] >= 0.145
    assert stamps[-1][1] < 1.0


def test_replay_transport_for_body_keeps_boundaries():
    transport = replay_transport_for_body([b"data: a", b"\n\n", b""])
    with httpx.Client(transport=transport) as client:
        with client.stream("POST", "http://x") as r:
            assert r.headers["content-type"] == "text/event-stream"
            assert list(r.iter_raw()) == [b"data: a", b"\n\n"]
    with httpx.Client(transport=replay_transport_for_body("data: é\n\n", status=201)) as c:
        r = c.post("http://x")
        assert (r.status_code, r.content) == (201, "data: é\n\n".encode())


def test_replay_async_client():
    transport = replay_transport_for_body([b"a", b"b"])

    async def main() -> list[bytes]:
        async with httpx.AsyncClient(transport=transport) as client:
            async with client.stream("POST", "http://x") as r:
                return [c async for c in r.aiter_raw()]

    assert asyncio.run(main()) == [b"a", b"b"]


def test_replay_accepts_a_capture_or_request(server, tmp_path):
    exchanges = _recorded(server, tmp_path)
    cap = open_capture(tmp_path)
    assert len(ReplayTransport(cap).exchanges) == len(exchanges)
    assert len(ReplayTransport(cap.request("r")).exchanges) == 2


def test_a_closed_replay_stream_lets_go_of_its_recording_and_refuses_to_be_read_again():
    transport = replay_transport_for_body(b'data: {"a": 1}\n\n')
    request = httpx.Request("POST", "http://replay.invalid/v1/chat/completions")
    response = transport.handle_request(request)
    stream = response.stream
    assert b"".join(stream) == b'data: {"a": 1}\n\n'
    stream.close()
    assert stream._exchange is None and stream._request is None
    with pytest.raises(httpx.StreamClosed):
        next(iter(stream))

    async def read_async() -> None:
        async for _ in stream:
            pass

    with pytest.raises(httpx.StreamClosed):
        asyncio.run(read_async())
