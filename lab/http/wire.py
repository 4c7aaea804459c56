"""An HTTP/1.1 client transport for ``httpx.AsyncClient`` on asyncio, parsed by httptools.

``AsyncWireTransport`` is what ``lab proxy`` forwards through by default: the proxy's
upstream client. It does what ``httpx.AsyncHTTPTransport`` does for a plain HTTP/1.1
upstream (``http://`` and ``https://``, a keep-alive pool, the four timeouts of
``request.extensions["timeout"]``, errors as httpx's own exception classes) with the
response parsed by llhttp (the C parser of Node.js, through ``httptools``, which uvicorn
uses on the proxy's client side) inside an ``asyncio.Protocol``.

Why: the proxy's cost per upstream read was the ceiling on its throughput. Through httpcore
each read of the body passes the pure-Python ``h11`` state machine and four async
generators before the proxy sees it (about half of the proxy's time per read, profiled in
docs/PERFORMANCE.md row 7a); here it is one C callback that appends the bytes to a list.

What a read is, is unchanged: the response stream yields what ``h11`` would yield for the
same bytes off the socket, one piece per run of body bytes in one socket read (a chunk of a
chunked body, or what of it had arrived; with ``Content-Length`` or a body delimited by the
connection closing, what the socket read gave). So a capture recorded through
:class:`~lab.http.transports.AsyncRecordingTransport` over this transport has the same read
boundaries as one recorded over httpx's own transport. ``aiter_batches()`` additionally
hands over, in one go, every read that has arrived since it was last asked, each with the
``time.monotonic_ns()`` of the socket read that brought it (the recording tee's batch path).

Not supported (use ``httpx.AsyncHTTPTransport``): HTTP/2, proxies, protocol upgrades,
client certificates.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

__all__ = ["AsyncWireTransport"]


_monotonic_ns = time.monotonic_ns


def _require_httptools() -> Any:
    try:
        import httptools
    except ImportError:
        raise ImportError(
            "AsyncWireTransport needs httptools: python -m pip install 'stream-lab[proxy]' "
            "(or python -m pip install httptools)"
        ) from None
    return httptools


class _Connection(asyncio.Protocol):
    """One upstream connection: the parser's callbacks fill in the current response."""

    def __init__(
        self, key: tuple[str, str, int], max_buffered_bytes: int, loop: asyncio.AbstractEventLoop
    ) -> None:
        httptools = _require_httptools()
        self.key = key
        # the connection's loop, kept: on Python 3.11 every asyncio.get_running_loop() is a
        # getpid() system call (the fork check), and a paced stream waits once per read
        self._loop = loop
        self._high_water = max_buffered_bytes
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._parser_error = httptools.HttpParserError
        self.closed = False
        self.uses = 0
        self.idle_since = 0.0
        self._waiter: asyncio.Future | None = None
        self._timer: asyncio.TimerHandle | None = None  # for every wait (``wait``)
        self._wait_until = 0.0  # loop.time() at which the wait in progress times out
        self._drained: asyncio.Future | None = None
        self._paused = False
        self._reset()

    def _reset(self) -> None:
        self.got_bytes = False  # any byte of the current response
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.http_version = b"HTTP/1.1"
        self.error: BaseException | None = None
        self.reads: list[bytes] = []
        self.read_t_ns: list[int] = []
        self._informational = False
        self._framed = False  # Content-Length or chunked: else the body ends with the connection
        self.no_body = False  # a response to HEAD: headers only, whatever they announce
        self._buffered = 0
        self._t = 0

    # -- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.got_bytes = True
        self._t = _monotonic_ns()
        try:
            self._parser.feed_data(data)
        except Exception as exc:  # HttpParserError, HttpParserUpgrade, or a callback's bug
            self._fail(httpx.RemoteProtocolError(f"malformed HTTP response: {exc}"))
            self._abort()
        if self._buffered > self._high_water and not self._paused and not self.closed:
            self._paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]
        self._wake()

    def eof_received(self) -> bool:
        if self.headers_done and not self._framed and not self.complete:
            self.complete = True  # a body delimited by the connection closing ends here
            self.keep_alive = False
            self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.stop_timer()
        if not self.complete and self.error is None:
            if exc is not None:
                self.error = httpx.ReadError(str(exc) or type(exc).__name__)
            elif self.headers_done:
                self.error = httpx.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            else:
                self.error = httpx.RemoteProtocolError(
                    "Server disconnected without sending a response."
                )
        self._wake()
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def pause_writing(self) -> None:
        self._drained = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self._drained = None

    # -- httptools callbacks -------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.status, self.reason, self.headers, self._framed = 0, b"", [], False

    def on_status(self, reason: bytes) -> None:
        self.reason += reason  # may come in pieces across socket reads

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))
        lower = name.lower()
        if lower == b"content-length" or (
            lower == b"transfer-encoding" and b"chunked" in value.lower()
        ):
            self._framed = True

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # 100 Continue and friends: the response is still to come
            self._informational = True
            return
        self.status = status
        self.http_version = b"HTTP/" + self._parser.get_http_version().encode("ascii")
        self.headers_done = True
        if self.no_body or status in (204, 304):
            self._framed = True
            if self.no_body:  # llhttp would wait for the body a HEAD response announces
                self.complete = True

    def on_body(self, body: bytes) -> None:
        self.reads.append(body)
        self.read_t_ns.append(self._t)
        self._buffered += len(body)

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        self.keep_alive = self._parser.should_keep_alive()
        self.complete = True

    # -- helpers -------------------------------------------------------------------------

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def take(self) -> tuple[list[bytes], list[int]]:
        """Every body read that has arrived and not been taken yet, with its arrival time."""
        reads, ts = self.reads, self.read_t_ns
        self.reads, self.read_t_ns, self._buffered = [], [], 0
        if self._paused and not self.closed:
            self._paused = False
            self.transport.resume_reading()  # type: ignore[union-attr]
        return reads, ts

    async def wait(self, timeout: float | None, error: type[httpx.TimeoutException]) -> None:
        """Until the parser has something new (or the connection ended), for at most
        ``timeout`` seconds.

        The connection keeps one timer for its waits, not one per wait: a paced stream waits
        once per event, and a timer per wait (a handle made, pushed on the loop's heap and
        cancelled) was a good part of the proxy's CPU per event. The timer is armed for the
        first wait's deadline; when it fires while a later wait is still inside its own
        ``timeout``, it is armed again for that wait's deadline (``_check_wait``). A wait
        whose deadline comes before the armed one re-arms it earlier."""
        loop = self._loop
        self._waiter = waiter = loop.create_future()
        if timeout is not None:
            self._wait_until = at = loop.time() + timeout
            timer = self._timer
            if timer is None or timer.when() > at:
                if timer is not None:
                    timer.cancel()
                self._timer = loop.call_at(at, self._check_wait)
        try:
            await waiter
        finally:
            self._waiter = None
        if waiter.result() is _TIMED_OUT:
            raise error("timed out")

    def _check_wait(self) -> None:
        """The wait timer fired: time out the wait in progress if it is at its deadline,
        else arm the timer for that deadline (no wait in progress: the next one arms it)."""
        self._timer = None
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        loop = self._loop
        if loop.time() >= self._wait_until:
            waiter.set_result(_TIMED_OUT)
        else:
            self._timer = loop.call_at(self._wait_until, self._check_wait)

    def stop_timer(self) -> None:
        """Cancel the wait timer (the connection is released or closed)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def send(self, data: bytes, timeout: float | None) -> None:
        if self.closed or self.transport is None or self.transport.is_closing():
            raise httpx.WriteError("connection closed before the request was sent")
        self.transport.write(data)
        drained = self._drained
        if drained is not None:
            try:
                await asyncio.wait_for(asyncio.shield(drained), timeout)
            except TimeoutError:
                raise httpx.WriteTimeout("timed out") from None
        if self.closed and self.error is not None and not self.got_bytes:
            raise httpx.WriteError(str(self.error))


_TIMED_OUT = object()


class _WireStream(httpx.AsyncByteStream):
    """The response body, read by read; the connection goes back to the pool at its end."""

    def __init__(
        self, transport: AsyncWireTransport, conn: _Connection, read_timeout: float | None
    ) -> None:
        self._transport = transport
        self._conn = conn
        self._timeout = read_timeout
        self._done = False

    async def aiter_batches(self) -> AsyncIterator[tuple[list[bytes], list[int]]]:
        """``(reads, arrival times in monotonic ns)``: every read that has arrived since the
        last batch, as soon as there is one (never waits for a second read)."""
        conn = self._conn
        try:
            while True:
                if conn.reads:
                    yield conn.take()
                elif conn.complete:
                    break
                elif conn.error is not None:
                    raise conn.error
                else:
                    await conn.wait(self._timeout, httpx.ReadTimeout)
        except BaseException:
            self._close(reuse=False)
            raise
        self._close(reuse=True)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for reads, _ in self.aiter_batches():
            for data in reads:
                yield data

    async def aclose(self) -> None:
        self._close(reuse=False)

    def _close(self, *, reuse: bool) -> None:
        if self._done:
            return
        self._done = True
        self._transport._release(self._conn, reuse=reuse and self._conn.complete)


class AsyncWireTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 to ``http://`` and ``https://`` servers (see the module docstring).

    **Parameters**
    - **max_connections** – open upstream connections at most (a request beyond it waits,
      up to the ``pool`` timeout, then raises ``httpx.PoolTimeout``).
    - **keepalive_expiry** – seconds an idle connection is kept for reuse.
    - **max_buffered_bytes** – body bytes a connection holds for a consumer that lags before
      it stops reading the socket (TCP then slows the server down); it reads on once the
      consumer has taken them.
    - **verify** – an ``ssl.SSLContext``, or True/False/a CA bundle path as httpx takes it.
    """

    def __init__(
        self,
        *,
        max_connections: int = 100,
        keepalive_expiry: float = 5.0,
        max_buffered_bytes: int = 1024 * 1024,
        verify: ssl.SSLContext | bool | str = True,
    ) -> None:
        _require_httptools()
        self._max_buffered = max_buffered_bytes
        self._max_connections = max_connections
        self._keepalive_expiry = keepalive_expiry
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._slots: asyncio.Semaphore | None = None
        self._open: set[_Connection] = set()

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            verify = self._verify
            self._ssl = (
                verify if isinstance(verify, ssl.SSLContext) else httpx.create_ssl_context(verify)
            )
        return self._ssl

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol '{url}'")
        timeouts = request.extensions.get("timeout") or {}
        key = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        head = _request_head(request)
        body = await request.aread()
        if "chunked" in request.headers.get("transfer-encoding", "").lower():
            body = (b"%x\r\n%s\r\n" % (len(body), body) if body else b"") + b"0\r\n\r\n"
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._max_connections)
        try:
            await asyncio.wait_for(self._slots.acquire(), timeouts.get("pool"))
        except TimeoutError:
            raise httpx.PoolTimeout("timed out waiting for a connection") from None
        try:
            conn = await self._send(key, head + body, timeouts, request.method == "HEAD")
        except BaseException:
            self._slots.release()
            raise
        return httpx.Response(
            conn.status,
            headers=conn.headers,
            stream=_WireStream(self, conn, timeouts.get("read")),
            extensions={"http_version": conn.http_version, "reason_phrase": conn.reason},
            request=request,
        )

    async def _send(
        self, key: tuple[str, str, int], data: bytes, timeouts: dict, head_only: bool
    ) -> _Connection:
        """The request written, the response's headers read: its connection."""
        while True:
            conn = self._reuse(key)
            reused = conn is not None
            if conn is None:
                conn = await self._connect(key, timeouts.get("connect"))
            conn._reset()
            conn.no_body = head_only
            conn.uses += 1
            try:
                await conn.send(data, timeouts.get("write"))
                while not conn.headers_done:
                    if conn.error is not None:
                        raise conn.error
                    await conn.wait(timeouts.get("read"), httpx.ReadTimeout)
            except (httpx.NetworkError, httpx.RemoteProtocolError):
                conn._abort()
                self._open.discard(conn)
                if reused and not conn.got_bytes:
                    continue  # the server had closed the idle connection: a fresh one
                raise
            except BaseException:
                conn._abort()
                self._open.discard(conn)
                raise
            return conn

    def _reuse(self, key: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.closed or now - conn.idle_since > self._keepalive_expiry:
                conn._abort()
                self._open.discard(conn)
                continue
            return conn
        return None

    async def _connect(self, key: tuple[str, str, int], timeout: float | None) -> _Connection:
        scheme, host, port = key
        loop = asyncio.get_running_loop()
        tls = self._ssl_context() if scheme == "https" else None
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    lambda: _Connection(key, self._max_buffered, loop),
                    host,
                    port,
                    ssl=tls,
                    server_hostname=host if tls is not None else None,
                ),
                timeout,
            )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"timed out connecting to {host}:{port}") from None
        except OSError as exc:  # ssl.SSLError and name lookup failures included
            plain = not isinstance(exc, ssl.SSLError | socket.gaierror)
            # the errno's own text: the same on asyncio's loop and uvloop
            if plain and exc.errno:
                detail = os.strerror(exc.errno)
            else:
                detail = str(exc) or type(exc).__name__
            raise httpx.ConnectError(f"cannot connect to {host}:{port}: {detail}") from None
        self._open.add(conn)
        return conn

    def _release(self, conn: _Connection, *, reuse: bool) -> None:
        conn.stop_timer()
        if reuse and conn.keep_alive and not conn.closed and not conn.no_body:
            conn.idle_since = time.monotonic()
            self._idle.setdefault(conn.key, []).append(conn)
        else:
            conn._abort()
            self._open.discard(conn)
        if self._slots is not None:
            self._slots.release()

    async def aclose(self) -> None:
        for conn in list(self._open):
            conn._abort()
        self._open.clear()
        self._idle.clear()


def _request_head(request: httpx.Request) -> bytes:
    """The request line and headers, as httpx would send them."""
    target = request.url.raw_path or b"/"
    lines = [request.method.encode("ascii") + b" " + target + b" HTTP/1.1"]
    lines += [name + b": " + value for name, value in request.headers.raw]
    return b"\r\n".join(lines) + b"\r\n\r\n"
