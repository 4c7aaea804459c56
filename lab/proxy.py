"""``lab proxy``: a recording reverse proxy in front of one upstream provider API.

The proxy's root stands for the upstream base URL: ``POST {proxy}/chat/completions`` is
sent to ``{upstream}/chat/completions`` (and ``/responses``, ``/v1/messages``,
``/models/M:streamGenerateContent`` alike: any method, any path, the query kept), so any
client in any language is recorded by changing its base URL alone::

    lab proxy --provider openrouter --port 8787
    # http://127.0.0.1:8787
    OPENAI_BASE_URL=http://127.0.0.1:8787 my-app ...

How it works
------------
- Each exchange goes through :class:`~lab.http.transports.AsyncRecordingTransport`, the
  recording transport of ``lab record``: the request is redacted before anything is written
  (the client's own key passes through to the upstream and never reaches disk), every
  upstream read is recorded with its arrival time and handed to the client as it arrives,
  nothing is buffered. The family recorded with each exchange is ``--provider``; which of
  the family's wire formats a path speaks (``/responses`` or ``/chat/completions``) is the
  adapter's business at replay.
- The upstream client is :class:`~lab.http.wire.AsyncWireTransport` (HTTP/1.1 parsed by
  httptools, inside the recording transport): its connection keeps reading while the proxy
  sends, so every read that arrived meanwhile is recorded one by one at its arrival time and
  leaves for the client in one write; a read that arrives alone leaves alone, at once. The
  reads recorded are the ones httpx's own transport gives for the same bytes (the same
  boundaries as ``lab record``); ``--upstream-http httpx`` (``upstream_http="httpx"``) forwards
  through ``httpx.AsyncHTTPTransport`` instead (h11: a fifth of the throughput, docs/PERFORMANCE.md
  row 7a).
- The client disconnecting cancels the upstream request; the exchange is recorded
  ``cancelled``. An upstream HTTP failure reaches the client as the status, headers and body
  the upstream sent (and is recorded like any exchange); an upstream that cannot be reached
  is a 502 (a timeout before the response line a 504) with a JSON error, recorded as the
  transport error it was.
- ``X-Lab-Session: NAME`` on a request puts ``session: NAME`` in the exchange's ``meta``
  (the ``session`` column of :func:`lab.tables.streams`); the header is not forwarded.
- Captures roll over: once the current recording holds ``roll_bytes`` of response bytes
  or is ``roll_seconds`` old, new exchanges go to a new recording directory, and the old one
  is closed when its last exchange ends, so a proxy that runs for weeks writes bounded parts.
- One short line per finished exchange (provider, model, status, end, backend, leak and
  anomaly flags), from a replay of the recorded bytes through the full stack.

Why a plain ASGI application under uvicorn
------------------------------------------
The proxy is one catch-all endpoint whose whole job is the ASGI message loop: read the
request body, stream the response, and watch for ``http.disconnect`` *while* waiting on the
upstream. Starlette's ``StreamingResponse`` chooses between watching for disconnects and not
by the server's ASGI spec version; the proxy needs the watch always, so it speaks ASGI
directly (about as much code as the Starlette adapter would be) and uvicorn, the standard
ASGI server, serves it (with the ``httptools`` parser and the ``uvloop`` event loop when
installed, as the benchmark ran it). All three come with the
``[proxy]`` extra.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx

__all__ = ["ProxyApp", "ProxyConfig", "ProxyExchange", "ProxyServer", "serve"]

SESSION_HEADER = "x-lab-session"
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# not forwarded upstream: recomputed (host, content-length), set by the recording transport
# (accept-encoding: identity, so the recorded bytes are the plain stream), or the proxy's own
_NOT_FORWARDED = _HOP_BY_HOP | {"host", "content-length", "accept-encoding", SESSION_HEADER}


def require_uvicorn() -> Any:
    """The uvicorn module, or an ImportError saying which extra brings it."""
    try:
        import uvicorn
    except ImportError:
        raise ImportError(
            "lab proxy needs uvicorn: python -m pip install 'stream-lab[proxy]' "
            "(or python -m pip install uvicorn)"
        ) from None
    return uvicorn


def require_httptools() -> None:
    """ImportError saying which extra brings httptools (``upstream_http="wire"`` needs it)."""
    try:
        import httptools  # noqa: F401
    except ImportError:
        raise ImportError(
            "lab proxy needs httptools for its upstream client: python -m pip install "
            "'stream-lab[proxy]' (or python -m pip install httptools; --upstream-http httpx "
            "does without)"
        ) from None


UPSTREAM_HTTP = ("wire", "httpx")


@dataclass(frozen=True)
class ProxyConfig:
    """Everything ``lab proxy`` is told; every limit a named field."""

    provider: str
    """The family recorded with each exchange (a name in ``lab.providers.PROVIDERS``)."""
    upstream: str
    """The upstream base URL the proxy's root stands for (no trailing slash needed)."""
    out: str | Path = "captures"
    """The captures root: each recording (one per roll-over) is a directory under it."""
    label: str | None = None
    roll_bytes: int = 256 * 1024 * 1024
    """Start a new recording once the current one holds this many response bytes."""
    roll_seconds: float = 3600.0
    """... or once it is this old (seconds)."""
    connect_timeout_s: float = 30.0
    read_timeout_s: float = 600.0
    """Longest silence between two upstream reads before the exchange ends as ``timeout``."""
    disconnect_grace_s: float = 0.05
    """After the client disconnects, how long the upstream may take to end the stream on
    its own (recorded ``eof``) before it is cancelled (recorded ``cancelled``)."""
    max_pending_reads: int = 64
    """``upstream_http="httpx"``: upstream reads that may wait while the client is still
    being sent earlier ones; beyond this the proxy stops reading the upstream until the
    client catches up."""
    max_pending_bytes: int = 1024 * 1024
    """``upstream_http="wire"``: the same bound in bytes, per upstream connection."""
    max_connections: int = 1000
    """Upstream connection pool size (concurrent streams beyond it wait for a connection)."""
    upstream_http: str = "wire"
    """The upstream client: ``"wire"`` (:class:`~lab.http.wire.AsyncWireTransport`, HTTP/1.1
    parsed by httptools: the proxy's throughput) or ``"httpx"`` (``httpx.AsyncHTTPTransport``:
    h11, the same client as ``lab record``)."""
    summarize: bool = True
    """Replay each finished exchange for its one-line summary (backend, leaks, anomalies)."""


@dataclass
class ProxyExchange:
    """What the proxy reports about one finished exchange."""

    provider: str
    model: str | None
    method: str
    path: str
    status: int | None
    end_reason: str
    session: str | None
    n_bytes: int
    capture_path: Path
    backend: str | None = None
    leak_guards: list[str] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    error: str | None = None

    def line(self) -> str:
        """The one short line ``lab proxy`` prints (client-sent text is made printable)."""
        parts = [
            self.provider,
            _printable(self.model or "-"),
            str(self.status) if self.status is not None else "---",
            self.end_reason,
            f"backend={_printable(self.backend or '-')}",
            "leak=" + (",".join(self.leak_guards) or "no"),
            "anomalies=" + (",".join(self.anomalies) or "-"),
        ]
        if self.session is not None:
            parts.append(f"session={_printable(self.session)}")
        parts.append(f"{self.n_bytes}B")
        return " ".join(parts)


def _printable(text: str, limit: int = 80) -> str:
    text = "".join(c if c.isprintable() and c != " " else "_" for c in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Recording:
    """One recording directory of a rolling proxy capture and the exchanges still in it."""

    def __init__(self, config: ProxyConfig, inner: httpx.AsyncBaseTransport) -> None:
        from lab.capture import CaptureWriter
        from lab.http.transports import AsyncRecordingTransport

        self.writer = CaptureWriter(config.out, label=config.label)
        self.transport = AsyncRecordingTransport(self.writer, inner=inner)
        self.started = time.monotonic()
        self.n_bytes = 0
        self.active = 0
        self.retired = False


class ProxyApp:
    """The proxy as an ASGI application (serve it with uvicorn; :func:`serve` does).

    **on_exchange** is called with a :class:`ProxyExchange` for every finished exchange
    (default: print its line to stdout).
    """

    def __init__(
        self,
        config: ProxyConfig,
        *,
        on_exchange: Callable[[ProxyExchange], None] | None = None,
        inner: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        from lab.providers import PROVIDERS

        if config.provider not in PROVIDERS:
            known = ", ".join(sorted(PROVIDERS))
            raise ValueError(f"unknown provider {config.provider!r}; known providers: {known}")
        self.config = config
        self.upstream = config.upstream.rstrip("/")
        limits = httpx.Limits(
            max_connections=config.max_connections,
            max_keepalive_connections=config.max_connections,
        )
        if config.upstream_http not in UPSTREAM_HTTP:
            raise ValueError(
                f"upstream_http must be one of {', '.join(UPSTREAM_HTTP)}, "
                f"not {config.upstream_http!r}"
            )
        if inner is None:
            if config.upstream_http == "wire":
                require_httptools()
                from lab.http.wire import AsyncWireTransport

                inner = AsyncWireTransport(
                    max_connections=config.max_connections,
                    max_buffered_bytes=config.max_pending_bytes,
                )
            else:
                inner = httpx.AsyncHTTPTransport(limits=limits)
        self._inner = inner
        from lab.http.wire import AsyncWireTransport

        self._batched = isinstance(inner, AsyncWireTransport)
        self._on_exchange = on_exchange or (lambda ex: print(ex.line(), flush=True))
        self._lock = threading.Lock()
        self._current: _Recording | None = None
        self.recordings: list[Path] = []
        self.active = 0
        """Exchanges in flight now; ``peak_active`` the most there were at once."""
        self.peak_active = 0
        self._closers: set[asyncio.Task] = set()

    # -- recordings ------------------------------------------------------------------------

    def _acquire(self) -> _Recording:
        with self._lock:
            rec = self._current
            if rec is None or self._due(rec):
                if rec is not None:
                    self._retire(rec)
                rec = self._current = _Recording(self.config, self._inner)
                self.recordings.append(rec.writer.path)
            rec.active += 1
            self.active += 1
            self.peak_active = max(self.peak_active, self.active)
            return rec

    def _due(self, rec: _Recording) -> bool:
        cfg = self.config
        return rec.n_bytes >= cfg.roll_bytes or time.monotonic() - rec.started >= cfg.roll_seconds

    def _retire(self, rec: _Recording) -> None:
        rec.retired = True
        if rec.active == 0:
            self._close_later(rec)

    def _release(self, rec: _Recording, n_bytes: int) -> None:
        with self._lock:
            rec.active -= 1
            self.active -= 1
            rec.n_bytes += n_bytes
            if rec is self._current and self._due(rec):
                self._current = None
                self._retire(rec)
            elif rec.retired and rec.active == 0:
                self._close_later(rec)

    def _close_later(self, rec: _Recording) -> None:
        # CaptureWriter.close joins its writer thread: off the event loop
        task = asyncio.get_running_loop().create_task(asyncio.to_thread(rec.writer.close))
        self._closers.add(task)
        task.add_done_callback(self._closers.discard)

    async def aclose(self) -> None:
        """Close every recording (a still-open exchange is recorded ``incomplete``)."""
        with self._lock:
            rec, self._current = self._current, None
        if rec is not None:
            await asyncio.to_thread(rec.writer.close)
        if self._closers:
            await asyncio.gather(*self._closers, return_exceptions=True)
        await self._inner.aclose()

    # -- ASGI ------------------------------------------------------------------------------

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Callable, send: Callable) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: dict, receive: Callable, send: Callable) -> None:
        body_parts: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # gone before its request was whole: nothing was sent upstream
            body_parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        headers, session = _forward_headers(scope["headers"])
        path = scope.get("raw_path") or scope["path"].encode()
        if isinstance(path, bytes):
            path = path.decode("latin-1")
        query = scope.get("query_string") or b""
        url = self.upstream + path + ("?" + query.decode("latin-1") if query else "")
        request = httpx.Request(scope["method"], url, headers=headers, content=b"".join(body_parts))
        from lab.clients import exchange_info

        meta = {"via": "proxy"} | ({"session": session} if session is not None else {})
        info = exchange_info(request, self.config.provider, meta)
        cfg = self.config
        request.extensions = {
            "lab": info,
            "timeout": {
                "connect": cfg.connect_timeout_s,
                "read": cfg.read_timeout_s,
                "write": cfg.connect_timeout_s,
                "pool": cfg.read_timeout_s,
            },
        }
        rec = self._acquire()
        state = _Exchange(info, scope["method"], scope["path"], session, rec.writer.path)
        try:
            await self._watching(state, rec, request, receive, send)
        except _UpstreamCut:
            pass  # the response stays incomplete: the server closes the client's connection
        finally:
            self._release(rec, state.n_bytes)
        await self._report(state)

    async def _watching(
        self,
        state: _Exchange,
        rec: _Recording,
        request: httpx.Request,
        receive: Callable,
        send: Callable,
    ) -> None:
        """Forward the exchange while watching for the client going away."""
        gone = False

        async def send_while_there(message: dict) -> None:
            if not gone:  # writing to a closed connection only makes asyncio complain
                await send(message)

        pump = asyncio.ensure_future(self._forward(state, rec, request, send_while_there))

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return

        watcher = asyncio.ensure_future(watch())
        try:
            done, _ = await asyncio.wait({pump, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if pump not in done and not state.complete:  # the client left: cancel upstream
                gone = True
                # (an SDK closes right after its terminator event, a moment before the
                # upstream's end of body: a stream that ends within the grace ended itself)
                grace = self.config.disconnect_grace_s
                done, _ = await asyncio.wait({pump}, timeout=grace) if grace > 0 else (set(), set())
                if pump not in done:
                    state.end_reason = "cancelled"
                    pump.cancel()
            try:
                await pump
            except asyncio.CancelledError:
                if not pump.cancelled():
                    raise
        finally:
            watcher.cancel()
            if not pump.done():
                pump.cancel()

    async def _forward(
        self, state: _Exchange, rec: _Recording, request: httpx.Request, send: Callable
    ) -> None:
        try:
            response = await rec.transport.handle_async_request(request)
        except httpx.TransportError as exc:  # recorded by the transport already
            status = 504 if isinstance(exc, httpx.TimeoutException) else 502
            state.end_reason = "timeout" if status == 504 else "read_error"
            state.error = f"{type(exc).__name__}: {exc}"
            state.status = status
            state.complete = True
            await _send_error(send, status, f"lab proxy: upstream {self.upstream}: {state.error}")
            return
        state.status = response.status_code
        state.response_headers = dict(response.headers)
        state.http_version = response.extensions.get("http_version", b"HTTP/1.1")
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [
                        (k, v)
                        for k, v in response.headers.raw
                        if k.decode("latin-1").lower() not in _HOP_BY_HOP
                    ],
                }
            )
            await self._relay(state, response, send)
            state.end_reason = "eof"
            state.complete = True  # from here a disconnect is the server ending the response
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except httpx.TransportError as exc:  # mid-stream: the client sees the stream cut
            state.end_reason = (
                "timeout" if isinstance(exc, httpx.TimeoutException) else "read_error"
            )
            state.error = f"{type(exc).__name__}: {exc}"
            raise _UpstreamCut(state.error) from None
        finally:
            await asyncio.shield(response.aclose())

    async def _relay(self, state: _Exchange, response: httpx.Response, send: Callable) -> None:
        """Send the upstream body on as it arrives.

        A reader task takes each upstream read (recorded by the transport as it comes) and
        queues it; this coroutine sends whatever is queued, joined, as one body message. A
        read never waits for a later one: when the client keeps up, each read is sent alone
        the moment it arrives; reads that arrived while the last send was under way leave
        together (one socket write instead of one per read, which is what keeps the proxy's
        throughput near a direct connection's). At most ``max_pending_reads`` wait; then the
        reader waits too, and the upstream with it.
        """
        if self._batched:
            await self._relay_batches(state, response, send)
            return
        reads = response.aiter_raw()
        try:  # the first read inline: no task hop before the first byte
            first = await reads.__anext__()
        except StopAsyncIteration:
            return
        state.reads.append(first)
        state.n_bytes += len(first)
        await send({"type": "http.response.body", "body": first, "more_body": True})
        queue: asyncio.Queue = asyncio.Queue(self.config.max_pending_reads)
        reader = asyncio.ensure_future(_read_upstream(reads, state, queue))
        try:
            while True:
                batch = [await queue.get()]
                while not queue.empty():
                    batch.append(queue.get_nowait())
                end = batch[-1] if not isinstance(batch[-1], bytes) else None
                data = b"".join(batch[:-1] if end is not None else batch)
                if data:
                    await send({"type": "http.response.body", "body": data, "more_body": True})
                if end is _EOF:
                    return
                if end is not None:
                    raise end
        finally:
            if not reader.done():
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)

    async def _relay_batches(
        self, state: _Exchange, response: httpx.Response, send: Callable
    ) -> None:
        """:meth:`_relay` over an :class:`~lab.http.wire.AsyncWireTransport`: its connection
        keeps reading the upstream while a send is under way (up to its high-water mark), so
        each batch is every read that arrived meanwhile, recorded one by one at its arrival
        time and sent on as one body message; a read that arrives alone leaves alone, at
        once."""
        reads = state.reads
        async for batch in response.stream.aiter_batches():  # type: ignore[union-attr]
            if not batch:
                continue
            reads += batch
            data = batch[0] if len(batch) == 1 else b"".join(batch)
            state.n_bytes += len(data)
            await send({"type": "http.response.body", "body": data, "more_body": True})

    async def _report(self, state: _Exchange) -> None:
        ex = ProxyExchange(
            provider=self.config.provider,
            model=state.info.get("model"),
            method=state.method,
            path=state.path,
            status=state.status,
            end_reason=state.end_reason,
            session=state.session,
            n_bytes=state.n_bytes,
            capture_path=state.capture_path,
            error=state.error,
        )
        if self.config.summarize and state.status is not None and state.status < 600:
            try:  # all of it in a worker thread: the event loop keeps serving streams
                summary = await asyncio.to_thread(_summarize, self.config.provider, state)
            except Exception as exc:  # a summary must never take the proxy down
                ex.error = ex.error or f"summary failed: {type(exc).__name__}: {exc}"
            else:
                ex.backend, ex.leak_guards, ex.anomalies = summary
        self._on_exchange(ex)


_EOF = object()


async def _read_upstream(reads: Any, state: _Exchange, queue: asyncio.Queue) -> None:
    """Queue every further upstream read, then ``_EOF`` (or the transport error that ended
    it)."""
    try:
        async for data in reads:
            state.reads.append(data)
            state.n_bytes += len(data)
            await queue.put(data)
    except httpx.TransportError as exc:
        await queue.put(exc)
    else:
        await queue.put(_EOF)


class _UpstreamCut(Exception):
    """The upstream stream broke after the response started: the client's stream is cut."""


@dataclass
class _Exchange:
    info: dict
    method: str
    path: str
    session: str | None
    capture_path: Path
    status: int | None = None
    end_reason: str = "incomplete"
    complete: bool = False
    error: str | None = None
    n_bytes: int = 0
    reads: list[bytes] = field(default_factory=list)
    response_headers: dict = field(default_factory=dict)
    http_version: Any = b"HTTP/1.1"


def _forward_headers(raw: list[tuple[bytes, bytes]]) -> tuple[list[tuple[str, str]], str | None]:
    headers: list[tuple[str, str]] = []
    session = None
    for k, v in raw:
        name = k.decode("latin-1")
        lower = name.lower()
        if lower == SESSION_HEADER:
            session = v.decode("utf-8", "replace")
        elif lower not in _NOT_FORWARDED:
            headers.append((name, v.decode("latin-1")))
    return headers, session


async def _send_error(send: Callable, status: int, message: str) -> None:
    payload = json.dumps(
        {"error": {"type": "lab_proxy_upstream_error", "message": message, "code": status}}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload, "more_body": False})


def _summarize(provider: str, state: _Exchange) -> tuple[str | None, list[str], list[str]]:
    """(backend, leak guards that moved text, anomalies) of one proxied exchange."""
    from lab.tables import LEAK_GUARDS, _anomalies

    result = _replay_exchange(provider, state)
    guards = {e.guard for e in result.guard_events if e.guard in LEAK_GUARDS and e.moved}
    return result.serving_provider, sorted(guards), list(_anomalies(result))


def _replay_exchange(provider: str, state: _Exchange) -> Any:
    """The full-stack result of one proxied exchange, from the bytes the client got."""
    from lab.capture.records import RecordedExchange, RecordedRequest
    from lab.replay import replay_request

    info = state.info
    version = state.http_version
    exchange = RecordedExchange(
        stream_id=str(info["stream_id"]),
        attempt=0,
        attempt_label="default",
        provider=provider,
        model=info.get("model"),
        method=state.method,
        url=state.path,
        request_headers={},
        request_body=b"",
        status=state.status,
        http_version=version.decode() if isinstance(version, bytes) else str(version),
        response_headers=state.response_headers,
        reads=state.reads,
        read_t_ns=[0] * len(state.reads),
        end_reason=state.end_reason if state.end_reason != "incomplete" else "eof",
        error=state.error,
    )
    request = RecordedRequest(exchange.stream_id, provider, exchange.model, [exchange])
    return replay_request(request)


# -- serving -------------------------------------------------------------------------------


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _server(app: ProxyApp, sock: socket.socket) -> Any:
    uvicorn = require_uvicorn()
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        backlog=2048,
        timeout_graceful_shutdown=5,
    )
    return uvicorn.Server(config)


def serve(
    config: ProxyConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    out: TextIO | None = None,
) -> None:
    """Run the proxy in this thread until Ctrl-C / SIGTERM (``lab proxy``).

    The first line written to **out** (default stdout) is the proxy's URL; then one line per
    finished exchange.
    """
    out = out or sys.stdout
    require_uvicorn()
    app = ProxyApp(config, on_exchange=lambda ex: print(ex.line(), file=out, flush=True))
    sock = _bind(host, port)
    print(_url(sock), file=out, flush=True)
    server = _server(app, sock)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()


class ProxyServer:
    """The proxy on a background thread (tests, benchmarks, notebooks)::

    with ProxyServer(ProxyConfig(provider="openai", upstream=fake.base_url + "/v1")) as p:
        httpx.post(p.url + "/chat/completions", json={...})
    p.recordings          # the recording directories written
    """

    def __init__(
        self,
        config: ProxyConfig,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        on_exchange: Callable[[ProxyExchange], None] | None = None,
    ) -> None:
        self.exchanges: list[ProxyExchange] = []
        self._lock = threading.Lock()

        def report(ex: ProxyExchange) -> None:
            with self._lock:
                self.exchanges.append(ex)
            if on_exchange is not None:
                on_exchange(ex)

        self.app = ProxyApp(config, on_exchange=report)
        self._sock = _bind(host, port)
        self.url = _url(self._sock)
        self._server = _server(self.app, self._sock)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("lab proxy did not start")
            time.sleep(0.005)

    @property
    def recordings(self) -> list[Path]:
        return list(self.app.recordings)

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self._sock.close()

    def __enter__(self) -> ProxyServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
