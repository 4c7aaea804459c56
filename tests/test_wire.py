"""``AsyncWireTransport`` (the proxy's upstream client) over real loopback sockets: the
same reads, statuses and errors as httpx's own transport, recorded the same way."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from lab.capture import CaptureWriter
from lab.capture import open as open_capture
from lab.fakes import FakeServer
from lab.fakes.scenarios import script
from lab.http.transports import AsyncRecordingTransport

pytest.importorskip("httptools")
from lab.http.wire import AsyncWireTransport  # noqa: E402

HI = [{"role": "user", "content": "hi"}]
BODY = {"model": "fake/think-leak", "messages": HI, "seed": 0}
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def _server(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A raw HTTP server on 127.0.0.1 answering with ``handler``; yields its URL and the
    list of connections it accepted (one entry per connection)."""
    accepted: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}", accepted


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":")[1]))
    return head


def _chunked(*pieces: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


OK_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)


async def _record(url: str, tmp_path, inner: httpx.AsyncBaseTransport, *, batches: bool):
    """One streamed POST through AsyncRecordingTransport(inner); (client bytes, exchange)."""
    writer = CaptureWriter(tmp_path)
    transport = AsyncRecordingTransport(writer, inner=inner)
    request = httpx.Request("POST", url, json=BODY)
    request.extensions = {"lab": {"provider": "openrouter", "model": BODY["model"]}}
    response = await transport.handle_async_request(request)
    got: list[bytes] = []
    try:
        if batches:
            async for batch in response.stream.aiter_batches():
                got += batch
        else:
            got = [data async for data in response.aiter_raw()]
    finally:
        await response.aclose()
        await transport.aclose()
    writer.close()
    (exchange,) = open_capture(writer.path).exchanges()
    return got, exchange


def test_the_wire_transport_records_the_same_reads_as_httpx_own_transport(tmp_path):
    # at the fake's real delays each event is its own socket read: the boundaries are the
    # server's, so every path must record exactly the scenario's reads
    runs = {
        "httpx": (httpx.AsyncHTTPTransport(), False),
        "wire": (AsyncWireTransport(), False),
        "wire batches": (AsyncWireTransport(), True),
        "httpx batches": (httpx.AsyncHTTPTransport(), True),
    }
    with FakeServer(delay_scale=1) as fake:
        url = fake.family_base_url("openrouter") + "/chat/completions"
        recorded = [
            asyncio.run(_record(url, tmp_path / str(i), inner, batches=batches))
            for i, (inner, batches) in enumerate(runs.values())
        ]
    for i, (name, (got, exchange)) in enumerate(zip(runs, recorded, strict=True)):
        expected = list(script("openrouter", BODY["model"], BODY, 0, call_index=i).reads)
        assert got == expected, name
        assert exchange.reads == expected, name
        assert (exchange.status, exchange.end_reason, exchange.error) == (200, "eof", None), name
        assert len(exchange.read_t_ns) == len(expected), name
        assert exchange.read_t_ns == sorted(exchange.read_t_ns), name
        assert 0 < exchange.t_headers_ns <= exchange.read_t_ns[0], name
        headers = {k.lower(): v for k, v in exchange.response_headers.items()}
        assert headers["content-type"] == "text/event-stream", name


def test_a_batch_holds_every_read_that_arrived_meanwhile_each_at_its_arrival_time(tmp_path):
    pieces = [b"data: %d\n\n" % i for i in range(5)]

    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(OK_HEAD + _chunked(*pieces))  # one write: one socket read
        await writer.drain()

    async def run():
        async with _server(handler) as (url, _):
            return await _record(url, tmp_path, AsyncWireTransport(), batches=True)

    got, exchange = asyncio.run(run())
    assert got == pieces and exchange.reads == pieces
    assert len(set(exchange.read_t_ns)) == 1  # all five came in the same socket read


def test_one_connection_serves_requests_one_after_another():
    async def handler(reader, writer):
        for _ in range(3):
            await _read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    async def run():
        async with _server(handler) as (url, accepted):
            async with httpx.AsyncClient(transport=AsyncWireTransport()) as client:
                texts = [(await client.post(url + "/x", content=b"q")).text for _ in range(3)]
            return texts, len(accepted)

    assert asyncio.run(run()) == (["ok", "ok", "ok"], 1)


def test_an_idle_connection_the_server_closed_is_replaced_not_failed():
    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()  # then the handler returns: the server closes the connection

    async def run():
        async with _server(handler) as (url, accepted):
            async with httpx.AsyncClient(transport=AsyncWireTransport()) as client:
                first = (await client.get(url)).text
                await asyncio.sleep(0.05)  # the close reaches the client
                second = (await client.get(url)).text
            return first, second, len(accepted)

    assert asyncio.run(run()) == ("ok", "ok", 2)


def test_a_body_cut_mid_stream_raises_after_its_reads_and_is_recorded_read_error(tmp_path):
    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(OK_HEAD + b"5\r\nhello\r\n8\r\nwor")  # then the connection closes
        await writer.drain()

    async def run():
        async with _server(handler) as (url, _):
            with pytest.raises(httpx.RemoteProtocolError) as info:
                await _record(url, tmp_path, AsyncWireTransport(), batches=True)
            return str(info.value)

    assert asyncio.run(run()) == "peer closed connection without sending complete message body"
    (exchange,) = open_capture(next(tmp_path.iterdir())).exchanges()
    assert (exchange.reads, exchange.end_reason) == ([b"hello", b"wor"], "read_error")
    assert exchange.error == (
        "RemoteProtocolError: peer closed connection without sending complete message body"
    )


def test_a_server_gone_before_its_response_and_a_refused_connect_are_httpx_errors():
    async def handler(reader, writer):
        await _read_request(reader)

    async def run():
        async with _server(handler) as (url, _):
            async with httpx.AsyncClient(transport=AsyncWireTransport()) as client:
                with pytest.raises(httpx.RemoteProtocolError) as gone:
                    await client.get(url)
                with pytest.raises(httpx.ConnectError) as refused:
                    await client.get("http://127.0.0.1:9/")
        return str(gone.value), str(refused.value)

    assert asyncio.run(run()) == (
        "Server disconnected without sending a response.",
        "cannot connect to 127.0.0.1:9: Connection refused",
    )


def test_silence_past_the_read_timeout_is_a_read_timeout():
    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(OK_HEAD + b"2\r\nhi\r\n")
        await writer.drain()
        await asyncio.sleep(1)

    async def run():
        async with _server(handler) as (url, _):
            timeout = httpx.Timeout(5, read=0.1)
            async with httpx.AsyncClient(transport=AsyncWireTransport(), timeout=timeout) as c:
                async with c.stream("GET", url) as response:
                    got = []
                    with pytest.raises(httpx.ReadTimeout):
                        async for data in response.aiter_raw():
                            got.append(data)
                    return response.status_code, got

    assert asyncio.run(run()) == (200, [b"hi"])


def _paced(n: int, gap_s: float, *, then_silent: float | None = None) -> Handler:
    """A server answering with ``n`` one-digit chunks (``0``, ``1``, ...), ``gap_s`` apart;
    then the body's end, or ``then_silent`` seconds of silence instead."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(OK_HEAD)
        for i in range(n):
            writer.write(b"1\r\n%d\r\n" % i)
            await writer.drain()
            await asyncio.sleep(gap_s)
        if then_silent is not None:
            await asyncio.sleep(then_silent)
            return
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    return handler


def test_reads_each_inside_the_read_timeout_never_time_out_however_long_the_stream():
    # one wait timer per connection, re-armed when it fires during a later wait: six gaps
    # of 0.15 s under a 0.4 s read timeout (0.9 s in all) pass, the silence after them not
    handler = _paced(6, 0.15, then_silent=2)

    async def run():
        async with _server(handler) as (url, _):
            timeout = httpx.Timeout(5, read=0.4)
            async with httpx.AsyncClient(transport=AsyncWireTransport(), timeout=timeout) as c:
                async with c.stream("GET", url) as response:
                    got = []
                    with pytest.raises(httpx.ReadTimeout):
                        async for data in response.aiter_raw():
                            got.append(data)
                    return got

    assert asyncio.run(run()) == [b"0", b"1", b"2", b"3", b"4", b"5"]


def test_waiting_for_each_read_of_a_paced_stream_asks_asyncio_for_no_loop(monkeypatch):
    # on Python 3.11 asyncio.get_running_loop() is a getpid() system call: a paced stream
    # waits once per read, so the connection keeps its loop instead of asking per wait
    import lab.http.wire as wire

    real = asyncio.get_running_loop
    calls: list[int] = []

    def counting() -> asyncio.AbstractEventLoop:
        if sys._getframe(1).f_code.co_filename == wire.__file__:
            calls.append(1)
        return real()

    handler = _paced(10, 0.01)

    async def run():
        async with _server(handler) as (url, _):
            async with httpx.AsyncClient(transport=AsyncWireTransport(), timeout=5) as c:
                async with c.stream("GET", url) as response:
                    monkeypatch.setattr(asyncio, "get_running_loop", counting)
                    got = [data async for data in response.aiter_raw()]
                    monkeypatch.setattr(asyncio, "get_running_loop", real)
                    return got

    assert asyncio.run(run()) == [b"%d" % i for i in range(10)]
    assert calls == []


def test_close_delimited_head_informational_and_no_content_responses():
    responses = {
        b"GET /close": b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end",
        b"HEAD /head": b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n",
        b"POST /continue": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n"
        b"Content-Length: 4\r\n\r\ndone",
        b"DELETE /none": b"HTTP/1.1 204 No Content\r\n\r\n",
    }

    async def handler(reader, writer):
        head = await _read_request(reader)
        writer.write(responses[head.split(b" HTTP/")[0]])
        await writer.drain()

    async def run():
        async with _server(handler) as (url, _):
            async with httpx.AsyncClient(transport=AsyncWireTransport()) as client:
                out = []
                for line in responses:
                    method, path = line.decode().split(" ")
                    r = await client.request(method, url + path, content=b"x" * 3)
                    out.append((r.status_code, r.content, r.http_version))
                return out

    assert asyncio.run(run()) == [
        (200, b"until the end", "HTTP/1.0"),
        (200, b"", "HTTP/1.1"),
        (201, b"done", "HTTP/1.1"),
        (204, b"", "HTTP/1.1"),
    ]


def test_the_request_goes_out_as_httpx_would_send_it():
    seen: list[bytes] = []

    async def handler(reader, writer):
        seen.append(await _read_request(reader))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()

    async def run():
        async with _server(handler) as (url, _):
            async with httpx.AsyncClient(transport=AsyncWireTransport()) as client:
                await client.post(url + "/v1/x?a=1&b=%20", content=b"{}", headers={"X-K": "v"})
            return url

    url = asyncio.run(run())
    host = url.removeprefix("http://")
    # what httpx accepts depends on the decoders installed (zstandard adds "zstd", brotli "br")
    with httpx.Client() as probe:
        accepted = probe.headers["Accept-Encoding"]
    assert seen == [
        b"POST /v1/x?a=1&b=%20 HTTP/1.1\r\n"
        + f"Host: {host}\r\n".encode()
        + f"Accept: */*\r\nAccept-Encoding: {accepted}\r\nConnection: keep-alive\r\n".encode()
        + f"User-Agent: python-httpx/{httpx.__version__}\r\n".encode()
        + b"X-K: v\r\nContent-Length: 2\r\n\r\n"
    ]


def test_requests_beyond_max_connections_wait_for_one_then_time_out():
    release = asyncio.Event()

    async def handler(reader, writer):
        await _read_request(reader)
        await release.wait()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()

    async def run():
        async with _server(handler) as (url, _):
            timeout = httpx.Timeout(5, pool=0.1)
            transport = AsyncWireTransport(max_connections=1)
            async with httpx.AsyncClient(transport=transport, timeout=timeout) as client:
                first = asyncio.ensure_future(client.get(url))
                await asyncio.sleep(0.05)
                with pytest.raises(httpx.PoolTimeout):
                    await client.get(url)
                release.set()
                return (await first).text

    assert asyncio.run(run()) == "ok"


def test_a_consumer_that_lags_stops_the_reading_at_max_buffered_bytes():
    total = 32 * 1024 * 1024
    sent = [0]

    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % total)
        piece = b"x" * 65536
        for _ in range(total // len(piece)):
            writer.write(piece)
            await writer.drain()  # blocks while the client's socket buffer is full
            sent[0] += len(piece)

    async def run():
        async with _server(handler) as (url, _):
            transport = AsyncWireTransport(max_buffered_bytes=1024 * 1024)
            async with httpx.AsyncClient(transport=transport) as client:
                async with client.stream("GET", url) as response:
                    await asyncio.sleep(0.5)  # nothing read: the connection holds ~1 MiB
                    held = sent[0]
                    n = sum([len(data) async for data in response.aiter_raw()])
            return held, n

    held, n = asyncio.run(run())
    assert n == total
    # what the server got out while the client read nothing: the 1 MiB the connection
    # holds plus what the kernel's socket buffers take, far from all 32 MiB
    assert held < total // 2, held


def test_https_upstreams_are_verified_against_the_given_ca():
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)

    async def handler(reader, writer):
        await _read_request(reader)
        writer.write(OK_HEAD + _chunked(b"data: a\n\n", b"data: b\n\n"))
        await writer.drain()

    async def run():
        server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=server_ctx)
        url = f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
        async with server:
            async with httpx.AsyncClient(transport=AsyncWireTransport(verify=trusting)) as c:
                async with c.stream("GET", url) as response:
                    reads = [data async for data in response.aiter_raw()]
            default = AsyncWireTransport()  # the system's CAs: this one is not among them
            async with httpx.AsyncClient(transport=default) as c:
                with pytest.raises(httpx.ConnectError) as refused:
                    await c.get(url)
        return reads, str(refused.value)

    reads, refused = asyncio.run(run())
    assert reads == [b"data: a\n\n", b"data: b\n\n"]
    assert refused.startswith("cannot connect to 127.0.0.1:")
    assert "CERTIFICATE_VERIFY_FAILED" in refused
