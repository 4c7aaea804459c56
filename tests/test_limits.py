"""Issue 19, item 7: a total time limit and a byte limit per exchange, bounded decoding.

Each server here misbehaves over a real loopback socket the way the issue describes: a body
that trickles one byte at a time, headers that trickle one line at a time, a stream that
never ends. Live, the limit ends the attempt with its own end reason and error code; the
capture records it; replay ends the same way without looking at a clock.
"""

from __future__ import annotations

import gzip
import json
import socket
import socketserver
import threading
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
import pytest

from lab.capture import open as open_capture
from lab.capture.writer import CaptureWriter
from lab.config import ConfigError, LabConfig
from lab.http.decoding import PIECE_BYTES, decoder_for
from lab.http.limits import install
from lab.http.transports import RecordingTransport, ReplayTransport
from lab.recorder import Recorder
from lab.replay import replay
from lab.stream import run_stream

URL = "http://replay.invalid/v1"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def _chunk(text: str) -> bytes:
    data = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return b"data: " + json.dumps(data).encode() + b"\n\n"


HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def _piece(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@contextmanager
def serve(behave: Callable[[socket.socket, threading.Event], None]) -> Iterator[str]:
    """A raw HTTP/1.1 server on 127.0.0.1 whose replies ``behave`` writes byte by byte."""
    stop = threading.Event()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            try:
                self._handle()
            except OSError:  # the client went away: what the limits are for
                pass

        def _handle(self) -> None:
            sock = self.request
            buf = b""
            while b"\r\n\r\n" not in buf:
                got = sock.recv(65536)
                if not got:
                    return
                buf += got
            head, _, rest = buf.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            while len(rest) < length:
                rest += sock.recv(65536)
            behave(sock, stop)

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    server = Server(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def trickle_body(sock: socket.socket, stop: threading.Event) -> None:
    """Headers at once, then a valid stream one byte every 20 ms, for ever."""
    sock.sendall(HEAD)
    sock.sendall(_piece(_chunk("Hello")))
    while not stop.is_set():
        for byte in _chunk("x"):
            sock.sendall(_piece(bytes([byte])))
            if stop.wait(0.02):
                return


def trickle_headers(sock: socket.socket, stop: threading.Event) -> None:
    """The status line, then one header line every 100 ms, for ever."""
    sock.sendall(b"HTTP/1.1 200 OK\r\n")
    n = 0
    while not stop.wait(0.1):
        sock.sendall(b"x-slow-%d: 1\r\n" % n)
        n += 1


def endless(sock: socket.socket, stop: threading.Event) -> None:
    """A valid stream that never ends, as fast as the socket takes it."""
    sock.sendall(HEAD)
    n = 0
    while not stop.is_set():
        sock.sendall(_piece(b"".join(_chunk(_text(n + i)) for i in range(50))))
        n += 50


def _text(i: int) -> str:
    return f"<{i:07d}>" + "y" * 191  # 200 characters, each chunk its own


def _record(tmp_path, base_url: str, config: LabConfig):
    with Recorder(tmp_path, config=config) as rec:
        t0 = time.monotonic()
        result = rec.record("custom", BODY, base_url=base_url, api_key="sk-limit-test-0000")
        elapsed = time.monotonic() - t0
        path = rec.path
    return result, elapsed, path


def test_a_body_trickling_one_byte_at_a_time_ends_at_the_total_time_limit(tmp_path):
    config = LabConfig(max_exchange_s=0.5, inactivity_timeout_s=5)
    with serve(trickle_body) as url:
        result, elapsed, path = _record(tmp_path, url, config)
    assert 0.5 <= elapsed < 5.0  # ended by the 0.5 s limit, not by the server
    assert result.attempts[-1].end_reason == "time_limit"
    assert result.error is not None
    assert (result.error.type, result.error.code, result.error.retryable) == (
        "timeout",
        "time_limit",
        True,
    )
    assert result.error.message == (
        "custom: the exchange went past its total time limit of 0.5 s "
        "(LabConfig.max_exchange_s); the lab stopped it"
    )
    assert result.text.startswith("Hello")
    [exchange] = open_capture(path).exchanges()
    assert exchange.end_reason == "time_limit"
    # replay ends where the live stream did, from the record, with no clock involved
    [again] = replay(path, config=config)
    assert again.text == result.text
    assert again.error == result.error
    assert again.attempts[-1].end_reason == "time_limit"
    assert again.chunks == result.chunks


def test_headers_trickling_one_line_at_a_time_end_at_the_total_time_limit(tmp_path):
    config = LabConfig(max_exchange_s=0.5, inactivity_timeout_s=5)
    with serve(trickle_headers) as url:
        result, elapsed, path = _record(tmp_path, url, config)
    assert 0.5 <= elapsed < 5.0  # ended by the 0.5 s limit, not by the server
    assert result.attempts[-1].end_reason == "time_limit"
    assert result.attempts[-1].status is None
    assert result.error is not None and result.error.code == "time_limit"
    [exchange] = open_capture(path).exchanges()
    assert (exchange.status, exchange.end_reason) == (None, "time_limit")
    [again] = replay(path, config=config)
    assert again.error == result.error
    assert again.attempts[-1].end_reason == "time_limit"


def test_an_endless_stream_stops_at_the_byte_limit_live_and_on_replay(tmp_path):
    limit = 1 << 20
    config = LabConfig(max_exchange_bytes=limit)
    with serve(endless) as url:
        result, elapsed, path = _record(tmp_path, url, config)
    assert result.attempts[-1].end_reason == "byte_limit"
    assert result.error is not None
    assert (result.error.type, result.error.code, result.error.retryable) == (
        "api_error",
        "byte_limit",
        False,
    )
    assert result.error.message == (
        f"custom: the response went past the byte limit of {limit} decoded bytes "
        "(LabConfig.max_exchange_bytes); the lab stopped reading"
    )
    # the text is what the first `limit` bytes held: every whole chunk in them, in order
    per_chunk = len(_chunk(_text(0)))
    whole = limit // per_chunk
    assert result.text == "".join(_text(i) for i in range(whole))
    [exchange] = open_capture(path).exchanges()
    assert exchange.end_reason == "byte_limit"
    assert limit < sum(map(len, exchange.reads)) < limit + (1 << 20)
    [again] = replay(path, config=config)
    assert again.chunks == result.chunks
    assert again.attempts[-1].end_reason == "byte_limit"
    # under a larger limit, replay cannot read past what was recorded: it ends as live did
    [larger] = replay(path, config=LabConfig(max_exchange_bytes=64 * limit))
    assert larger.attempts[-1].end_reason == "byte_limit"
    assert larger.error is not None and larger.error.code == "byte_limit"


def test_the_default_limits_leave_an_ordinary_stream_alone(tmp_path):
    def ordinary(sock: socket.socket, stop: threading.Event) -> None:
        sock.sendall(HEAD + _piece(_chunk("Hi")) + _piece(b"data: [DONE]\n\n") + b"0\r\n\r\n")

    with serve(ordinary) as url:
        result, _, path = _record(tmp_path, url, LabConfig())
    assert (result.text, result.error, result.attempts[-1].end_reason) == ("Hi", None, "eof")
    [exchange] = open_capture(path).exchanges()
    assert exchange.end_reason == "eof"


def _bomb(decoded: int) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = bytes(1 << 20)
    out = [z.compress(block) for _ in range(decoded >> 20)]
    out.append(z.flush())
    return b"".join(out)


@pytest.mark.parametrize("nested", [False, True], ids=["gzip", "gzip-of-gzip"])
def test_a_gzip_bomb_replays_in_bounded_memory_and_stops_at_the_byte_limit(nested):
    bomb = _bomb(256 << 20)  # 256 MiB of zeros in about 250 KB
    assert len(bomb) < 300_000
    encoding = "gzip"
    if nested:  # Content-Encoding: gzip, gzip - the 256 MiB in about 2 KB
        bomb, encoding = gzip.compress(bomb, 9), "gzip, gzip"
        assert len(bomb) < 20_000
    transport = ReplayTransport(
        [_exchange([bomb[i : i + 17_000] for i in range(0, len(bomb), 17_000)], encoding)]
    )
    limit = 4 << 20
    tracemalloc.start()
    try:
        result = run_stream(
            "custom",
            BODY,
            base_url=URL,
            transport=transport,
            config=LabConfig(max_exchange_bytes=limit),
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.attempts[-1].end_reason == "byte_limit"
    assert result.error is not None and result.error.code == "byte_limit"
    # one line of zeros held by the SSE decoder up to the limit, plus pieces: never the body
    assert peak < 4 * limit, peak


def _exchange(reads: list[bytes], encoding: str | None):
    from lab.capture.records import RecordedExchange

    headers = {"content-type": "text/event-stream"}
    if encoding:
        headers["content-encoding"] = encoding
    return RecordedExchange(
        stream_id="s1",
        attempt=0,
        attempt_label="default",
        provider="custom",
        model="m",
        method="POST",
        url="http://replay.invalid/chat/completions",
        request_headers={},
        request_body=b"",
        status=200,
        http_version="HTTP/1.1",
        response_headers=headers,
        reads=reads,
        read_t_ns=[0] * len(reads),
        end_reason="eof",
        error=None,
    )


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "x-gzip"])
def test_a_compressed_stream_replays_to_the_same_result_as_its_plain_bytes(encoding):
    plain = b"".join(_chunk(f"w{i} ") for i in range(300)) + b"data: [DONE]\n\n"
    packed = gzip.compress(plain) if "gzip" in encoding else zlib.compress(plain)
    reads = [packed[i : i + 97] for i in range(0, len(packed), 97)]
    a = run_stream(
        "custom", BODY, base_url=URL, transport=ReplayTransport([_exchange(reads, encoding)])
    )
    b = run_stream(
        "custom", BODY, base_url=URL, transport=ReplayTransport([_exchange([plain], None)])
    )
    assert a.text == b.text == "".join(f"w{i} " for i in range(300))
    assert a.error is None and a.attempts[-1].end_reason == "eof"
    assert a.attempts[-1].n_reads == len(reads)


def test_a_body_that_does_not_decode_is_a_read_error_not_an_exception():
    bad = _exchange([b"\x1f\x8b\x08\x00garbage-not-gzip"], "gzip")
    result = run_stream("custom", BODY, base_url=URL, transport=ReplayTransport([bad]))
    assert result.attempts[-1].end_reason == "read_error"
    assert result.error is not None
    assert "does not decode" in (result.attempts[-1].error or "")


def test_the_bounded_decoder_inflates_in_pieces_and_keeps_every_byte():
    data = bytes(range(256)) * 4000 + b"z" * 3_000_000
    for encoding, packed in [
        ("gzip", gzip.compress(data)),
        ("deflate", zlib.compress(data)),  # zlib-wrapped, per the RFC
        ("deflate", zlib.compress(data)[2:-4]),  # raw deflate, as some servers send
        ("gzip", gzip.compress(data[:5000]) + gzip.compress(data[5000:])),  # two members
    ]:
        decoder = decoder_for(encoding)
        assert decoder is not None
        out = []
        for i in range(0, len(packed), 1000):
            out.extend(decoder.feed(packed[i : i + 1000]))
        out.extend(decoder.flush())
        assert b"".join(out) == data, encoding
        assert max(map(len, out)) <= PIECE_BYTES
    assert decoder_for(None) is None
    assert decoder_for("identity") is None
    assert decoder_for("x-unknown") is None  # passed through undecoded, as httpx does


def test_limits_are_validated_config_fields_with_generous_defaults():
    cfg = LabConfig()
    assert (cfg.max_exchange_s, cfg.max_exchange_bytes) == (1800.0, 256 * 1024 * 1024)
    assert LabConfig(max_exchange_s=None, max_exchange_bytes=None).max_exchange_s is None
    with pytest.raises(ConfigError, match="max_exchange_bytes"):
        LabConfig.coerce({"max_exchange_bytes": 0})
    with pytest.raises(ConfigError, match="max_exchange_s"):
        LabConfig.coerce({"max_exchange_s": -1})
    with pytest.raises(ConfigError, match="max_exchange_bytes"):  # not a 1-byte limit
        LabConfig.coerce({"max_exchange_bytes": True})
    assert LabConfig().max_error_body_bytes == 64 * 1024
    # the defaults leave every earlier config fingerprint as it was
    assert LabConfig().fingerprint() == LabConfig.model_validate({}).fingerprint()


def test_install_reaches_httpx_transports_and_leaves_others_alone(tmp_path):
    assert install(httpx.HTTPTransport())
    assert install(httpx.AsyncHTTPTransport())
    assert not install(httpx.MockTransport(lambda r: httpx.Response(200)))
    plain = httpx.HTTPTransport()
    with CaptureWriter(tmp_path) as writer:
        RecordingTransport(writer, inner=plain)
    assert type(plain._pool._network_backend).__name__ == "_Backend"
    # a wrapper that keeps its real transport as `inner` (the sweep's) is followed to it
    wrapped = httpx.HTTPTransport()

    class Wrapper(httpx.BaseTransport):
        inner = wrapped

    assert install(Wrapper())
    assert type(wrapped._pool._network_backend).__name__ == "_Backend"


def test_lab_record_max_seconds_ends_a_trickle_and_says_so(tmp_path, capsys):
    from lab.cli import main

    with serve(trickle_body) as url:
        t0 = time.monotonic()
        code = main(
            [
                "record",
                "--provider",
                "custom",
                "--model",
                "m",
                "--prompt",
                "hi",
                "--base-url",
                url,
                "--out",
                str(tmp_path),
                "--max-seconds",
                "0.4",
            ]
        )
        elapsed = time.monotonic() - t0
    err = capsys.readouterr().err
    assert code == 1  # every request failed
    assert elapsed < 5
    assert (
        "stream error (timeout): custom: the exchange went past its total time limit of "
        "0.4 s (LabConfig.max_exchange_s); the lab stopped it"
    ) in err
    [recording] = [p for p in tmp_path.iterdir() if p.is_dir()]
    [exchange] = open_capture(recording).exchanges()
    assert exchange.end_reason == "time_limit"


def test_only_connections_opened_inside_a_deadline_are_wrapped():
    import httpcore

    from lab.http.limits import _Backend, _Stream, deadline

    backend = _Backend(httpcore.SyncBackend())
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        outside = backend.connect_tcp("127.0.0.1", port, timeout=5)
        with deadline(60):
            inside = backend.connect_tcp("127.0.0.1", port, timeout=5)
        assert not isinstance(outside, _Stream)  # an SDK's connection pays nothing per read
        assert isinstance(inside, _Stream)
        outside.close()
        inside.close()


def test_a_mock_response_built_with_its_content_is_one_read_decoded_once():
    plain = _chunk("Hi") + b"data: [DONE]\n\n"
    headers = {"content-type": "text/event-stream", "content-encoding": "gzip"}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers=headers, content=gzip.compress(plain))

    r = run_stream("custom", BODY, base_url=URL, transport=httpx.MockTransport(handler))
    assert (r.text, r.error, r.attempts[-1].n_reads) == ("Hi", None, 1)


@pytest.mark.parametrize("tail", [b"\r\n", b"\x00" * 7, b"garbage after the body"])
def test_bytes_after_a_gzip_body_are_ignored_as_httpx_and_gzip_do(tail):
    plain = _chunk("Hi") + b"data: [DONE]\n\n"
    packed = gzip.compress(plain) + tail
    for size in (1, 7, len(packed)):
        reads = [packed[i : i + size] for i in range(0, len(packed), size)]
        r = run_stream(
            "custom", BODY, base_url=URL, transport=ReplayTransport([_exchange(reads, "gzip")])
        )
        assert (r.text, r.error, r.attempts[-1].end_reason) == ("Hi", None, "eof"), size


@pytest.mark.parametrize("raw", [False, True], ids=["zlib-wrapped", "raw"])
def test_deflate_decodes_whatever_the_first_read_holds(raw):
    data = b"".join(_chunk(f"d{i} ") for i in range(50)) + b"data: [DONE]\n\n"
    packed = zlib.compress(data)[2:-4] if raw else zlib.compress(data)
    for size in (1, 2, 3, 1000):
        decoder = decoder_for("deflate")
        assert decoder is not None
        out = [p for i in range(0, len(packed), size) for p in decoder.feed(packed[i : i + size])]
        out.extend(decoder.flush())
        assert b"".join(out) == data, size


def _error_head(extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
        + extra
        + b"transfer-encoding: chunked\r\n\r\n"
    )


def test_a_huge_error_body_is_read_only_up_to_the_error_body_cap(tmp_path):
    message = b'{"error": {"message": "' + b"x" * (4 << 20) + b'"}}'

    def huge(sock: socket.socket, stop: threading.Event) -> None:
        sock.sendall(_error_head() + _piece(message) + b"0\r\n\r\n")

    config = LabConfig(degrade=False)
    with serve(huge) as url:
        result, elapsed, path = _record(tmp_path, url, config)
    attempt = result.attempts[-1]
    assert (attempt.status, attempt.end_reason) == (400, "http_error")
    assert attempt.error is not None
    assert attempt.error.endswith(" [error body cut at 65536 bytes: the lab's byte limit]")
    assert result.error is not None and len(result.error.message) < 70_000
    [exchange] = open_capture(path).exchanges()
    assert exchange.end_reason == "byte_limit"
    assert exchange.error == (
        "the error body went past 65536 decoded bytes (LabConfig.max_error_body_bytes); "
        "the lab read no further"
    )
    [again] = replay(path, config=config)
    assert again.error == result.error
    assert again.attempts[-1].error == attempt.error
    # under a larger cap the replay reads what was recorded, and says it was cut
    [larger] = replay(path, config=LabConfig(degrade=False, max_error_body_bytes=8 << 20))
    assert larger.attempts[-1].end_reason == "http_error"
    assert (larger.attempts[-1].error or "").endswith("the lab's byte limit]")


def test_an_inflating_error_body_costs_neither_memory_nor_minutes():
    bomb = gzip.compress(_bomb(64 << 20), 9)  # 64 MiB of zeros in about 1 KB
    exchange = _exchange([bomb], "gzip, gzip")
    exchange.status = 400
    result = run_stream(
        "custom",
        BODY,
        base_url=URL,
        transport=ReplayTransport([exchange]),
        config={"degrade": False},
    )
    assert result.attempts[-1].status == 400
    # read up to the cap, no further: what is classified is 64 KiB, not 64 MiB
    assert (result.attempts[-1].error or "").endswith(
        " [error body cut at 65536 bytes: the lab's byte limit]"
    )
    assert result.error is not None and len(result.error.message) < 70_000


def test_a_time_limit_inside_an_error_body_ends_the_same_live_and_on_replay(tmp_path):
    def slow_error(sock: socket.socket, stop: threading.Event) -> None:
        sock.sendall(_error_head() + _piece(b'{"error": {"message": "bad'))
        while not stop.wait(0.05):
            sock.sendall(_piece(b"."))

    config = LabConfig(max_exchange_s=0.4, degrade=False)
    with serve(slow_error) as url:
        result, elapsed, path = _record(tmp_path, url, config)
    assert elapsed < 5
    assert result.attempts[-1].end_reason == "time_limit"
    assert result.error is not None
    assert (result.error.type, result.error.code) == ("timeout", "time_limit")
    [again] = replay(path, config=config)
    assert again.error == result.error
    assert again.attempts == result.attempts


def test_a_stream_the_lab_limit_ended_is_named_so_and_not_blamed_on_the_provider(tmp_path):
    from lab.anomalies import detect

    with serve(endless) as url:
        result, _, _ = _record(tmp_path, url, LabConfig(max_exchange_bytes=1 << 16))
    anomalies = detect(result)
    assert "limit_reached" in anomalies
    assert "error_in_200_stream" not in anomalies
    assert "eof_without_terminator" not in anomalies


def test_the_time_limit_holds_for_a_client_the_caller_passes(tmp_path):
    with serve(trickle_body) as url, httpx.Client(timeout=5) as client:
        t0 = time.monotonic()
        result = run_stream(
            "custom", BODY, base_url=url, client=client, config=LabConfig(max_exchange_s=0.4)
        )
    assert time.monotonic() - t0 < 5
    assert result.attempts[-1].end_reason == "time_limit"
