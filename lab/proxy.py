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
  anomaly flags), from a replay of the recorded bytes through the full stack; an exchange
  past ``window_bytes`` is not held for it (``summary=skipped``).
- Fit to leave running (docs/RELIABILITY.md, "The proxy, fit to leave running"): the limits
  of ``lab record`` (``lab_config``: ``time_limit`` / ``byte_limit``), a fixed memory window
  per exchange (its reads leave memory once journaled), limits on what clients send (413,
  431, 408), loopback only unless ``--allow-remote``, an optional token
  (``X-Lab-Proxy-Token`` or ``/lab-token/TOKEN/``), request targets that cannot leave the
  upstream base path, and a capture that cannot be written said at once (exit 4).

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
import hmac
import ipaddress
import json
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import unquote

import httpx

from lab.config import LabConfig
from lab.exceptions import LabError
from lab.http.limits import deadline, expired

__all__ = ["ProxyApp", "ProxyConfig", "ProxyExchange", "ProxyServer", "serve"]

SESSION_HEADER = "x-lab-session"
TOKEN_HEADER = b"x-lab-proxy-token"
"""The header that carries ``--auth-token`` (never forwarded, never recorded)."""
TOKEN_PATH = b"/lab-token/"
"""... or the path prefix that does, for a client that can only set a base URL."""
PROXY_TOKEN_ENV = "LAB_PROXY_TOKEN"
"""The environment variable ``lab proxy`` reads its ``--auth-token`` from by default."""
TARGET_SCOPE_KEY = "lab.target"
"""The ASGI scope key where the proxy's server protocols put the request target as sent."""
HEALTH_PATH = "/lab-proxy/health"
"""``GET`` here is the proxy's own answer, never forwarded: ``200 {"status": "ok", ...}``
while it records, ``503 {"status": "not_recording", ...}`` once its capture cannot be
written; a supervisor, a load balancer or a script waiting for the proxy to listen polls it.
It needs no token and says nothing about the traffic but counts."""
UPSTREAM_ERROR = "lab_proxy_upstream_error"
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
_NOT_FORWARDED = _HOP_BY_HOP | {
    "host",
    "content-length",
    "accept-encoding",
    SESSION_HEADER,
    TOKEN_HEADER.decode(),
}


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
    out: str | Path = "recordings"
    """The captures root: each recording (one per roll-over) is a directory under it
    (default ``recordings/``; ``captures/`` holds the bundled sample)."""
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
    lab_config: LabConfig | None = None
    """The limits of ``lab record``, read from the same :class:`~lab.config.LabConfig` fields
    (None: the defaults): ``max_exchange_s`` (one exchange's total time, ``time_limit``),
    ``max_exchange_bytes`` (its decoded body, ``byte_limit``) and ``max_error_body_bytes``
    (an HTTP error's decoded body). The summary replays under it too."""
    auth_token: str | None = None
    """When set, every request must carry it (``X-Lab-Proxy-Token: TOKEN``, or the path
    starting with ``/lab-token/TOKEN``); any other gets a 401 and reaches neither the upstream
    nor the capture. The header and the path prefix are never forwarded nor recorded."""
    max_request_body_bytes: int = 32 * 1024 * 1024
    """The largest request body taken (413 past it): 32 MiB, the request size limit of the
    largest provider API that documents one (Anthropic's Messages API); a body is held whole
    to be redacted and recorded."""
    max_header_bytes: int = 64 * 1024
    """The request line and headers together, in bytes (431 past it): 64 KiB, eight times
    what nginx takes by default."""
    max_headers: int = 100
    """Request header fields at most (431 past it): 100, as Node.js and Apache allow."""
    header_timeout_s: float = 10.0
    """The longest a client may take to send a request line and its headers, from the
    connection's start (or the end of the previous response on a kept-alive connection);
    past it the proxy answers 408 and closes the connection, so slow clients cannot hold
    its file descriptors."""
    body_timeout_s: float = 120.0
    """The longest a client may take to send a request body, in total (408 past it): 32 MiB
    at about 2 Mbit/s."""
    require_recording: bool = False
    """Refuse new requests with 503 once the capture cannot be written (a full disk)
    instead of forwarding them unrecorded."""
    window_bytes: int = 8 * 1024 * 1024
    """The proxy keeps an exchange's reads for its summary line up to this many bytes; a
    longer exchange is not summarized (``summary=skipped``: replay the capture for it), so
    the proxy's memory per exchange stays bounded whatever the stream's length."""


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
    capture_path: Path | None
    """The recording directory it is in; None when it was forwarded unrecorded."""
    backend: str | None = None
    leak_guards: list[str] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    error: str | None = None
    recorded: bool = True
    summarized: bool = True
    """False when the exchange went past ``window_bytes``: not replayed for its line."""

    def line(self) -> str:
        """The one short line ``lab proxy`` prints (client-sent text is made printable)."""
        parts = [
            self.provider,
            _printable(self.model or "-"),
            str(self.status) if self.status is not None else "---",
            self.end_reason,
        ]
        if self.summarized:
            parts += [
                f"backend={_printable(self.backend or '-')}",
                "leak=" + (",".join(self.leak_guards) or "no"),
                "anomalies=" + (",".join(self.anomalies) or "-"),
            ]
        else:
            parts.append("summary=skipped")
        if self.session is not None:
            parts.append(f"session={_printable(self.session)}")
        if not self.recorded:
            parts.append("UNRECORDED")
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

        self.writer = CaptureWriter(config.out, label=config.label, spill_bytes=config.window_bytes)
        self.transport = AsyncRecordingTransport(self.writer, inner=inner)
        self.started = time.monotonic()
        self.n_bytes = 0
        self.active = 0
        self.retired = False


class ProxyApp:
    """The proxy as an ASGI application (serve it with uvicorn; :func:`serve` does).

    **on_exchange** is called with a :class:`ProxyExchange` for every finished exchange
    (default: print its line to stdout); **on_capture_error** with the message, once, when
    the capture cannot be written (default: print it to stderr).
    """

    def __init__(
        self,
        config: ProxyConfig,
        *,
        on_exchange: Callable[[ProxyExchange], None] | None = None,
        on_capture_error: Callable[[str], None] | None = None,
        inner: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        from lab.providers import PROVIDERS

        if config.provider not in PROVIDERS:
            known = ", ".join(sorted(PROVIDERS))
            raise ValueError(f"unknown provider {config.provider!r}; known providers: {known}")
        self.config = config
        self.limits = config.lab_config or LabConfig()
        self._base, self._base_path, self._shown = _upstream_base(config.upstream)
        self.upstream = self._shown
        """The upstream base URL as shown (its userinfo, if any, left out)."""
        self._token = config.auth_token.encode() if config.auth_token else None
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
        self._on_exchange = on_exchange or (lambda ex: say(ex.line(), sys.stdout))
        self._on_capture_error = on_capture_error or (lambda text: say(text, sys.stderr))
        from lab.clients import RetryChains

        self._retries = RetryChains(self.limits.client_retry_window_s)  # an SDK's retries
        self._lock = threading.Lock()
        self._current: _Recording | None = None
        self._writers: list[Any] = []
        self.recordings: list[Path] = []
        self.active = 0
        """Exchanges in flight now; ``peak_active`` the most there were at once."""
        self.peak_active = 0
        self._closers: set[asyncio.Task] = set()
        self.capture_error: BaseException | None = None
        """Why the capture cannot be written (set once; from then on nothing is recorded)."""
        self.unrecorded = 0
        """Requests forwarded unrecorded (or refused, ``require_recording``) since then."""
        self.finished = 0
        """Exchanges that have ended (recorded or not) since the proxy started."""
        self._close_failures: list[BaseException] = []

    # -- recordings ------------------------------------------------------------------------

    def _acquire(self) -> _Recording | None:
        """The recording a new exchange goes in; None once the capture cannot be written."""
        self._check_capture()
        with self._lock:
            if self.capture_error is None:
                rec = self._current
                try:
                    if rec is None or self._due(rec):
                        if rec is not None:
                            self._retire(rec)
                        rec = self._current = _Recording(self.config, self._inner)
                        self._writers.append(rec.writer)
                        self.recordings.append(rec.writer.path)
                except OSError as exc:  # a new recording directory cannot be made
                    self._current = rec = None
                    failed: BaseException | None = exc
                else:
                    failed = None
            else:
                rec, failed = None, None
            if rec is None:
                self.unrecorded += 1
            else:
                rec.active += 1
            self.active += 1
            self.peak_active = max(self.peak_active, self.active)
        if failed is not None:
            self._capture_failed(failed)
        return rec

    def _check_capture(self, rec: _Recording | None = None) -> None:
        """Say at once (and stop recording) when a recording cannot be written: ``rec``
        (the one an exchange just ended in) or the current one."""
        for r in (rec, self._current):
            if self.capture_error is None and r is not None:
                error = r.writer.write_error
                if error is not None:
                    self._capture_failed(error)

    def _capture_failed(self, error: BaseException) -> None:
        with self._lock:
            if self.capture_error is not None:
                return
            self.capture_error = error
            rec, self._current = self._current, None
            if rec is not None:
                self._retire(rec)
        why = getattr(error, "strerror", None) or str(error) or type(error).__name__
        then = (
            "new requests are refused with 503 (--require-recording)"
            if self.config.require_recording
            else "new requests are forwarded unrecorded"
        )
        self._on_capture_error(
            f"lab proxy: error: cannot write the capture under {self.config.out} ({why}); "
            f"recording stopped: {then}; stop the proxy to learn what is safe on disk"
        )

    def _due(self, rec: _Recording) -> bool:
        cfg = self.config
        return rec.n_bytes >= cfg.roll_bytes or time.monotonic() - rec.started >= cfg.roll_seconds

    def _retire(self, rec: _Recording) -> None:
        rec.retired = True
        if rec.active == 0:
            self._close_later(rec)

    def _release(self, rec: _Recording | None, n_bytes: int) -> None:
        with self._lock:
            self.active -= 1
            self.finished += 1
            if rec is None:
                return
            rec.active -= 1
            rec.n_bytes += n_bytes
            if rec is self._current and self._due(rec):
                self._current = None
                self._retire(rec)
            elif rec.retired and rec.active == 0:
                self._close_later(rec)

    def _close_later(self, rec: _Recording) -> None:
        # CaptureWriter.close joins its writer thread: off the event loop
        task = asyncio.get_running_loop().create_task(asyncio.to_thread(self._close, rec))
        self._closers.add(task)
        task.add_done_callback(self._closers.discard)

    def _close(self, rec: _Recording) -> None:
        from lab.capture.errors import CaptureWriteError

        try:
            rec.writer.close()
        except CaptureWriteError as exc:  # counted in close_report()
            self._close_failures.append(exc)

    async def aclose(self) -> None:
        """Close every recording (a still-open exchange is recorded ``incomplete``)."""
        with self._lock:
            rec, self._current = self._current, None
        if rec is not None:
            await asyncio.to_thread(self._close, rec)
        if self._closers:
            await asyncio.gather(*self._closers, return_exceptions=True)
        await self._inner.aclose()

    def close_report(self) -> str | None:
        """After :meth:`aclose`: None when every exchange was recorded and written; else
        what is safe on disk and where, and what was not recorded (``lab proxy`` prints it
        and exits with ``lab record``'s disk code, 4)."""
        failure = self.capture_error or (self._close_failures[0] if self._close_failures else None)
        if failure is None:
            return None
        cause = getattr(failure, "cause", failure)
        why = getattr(cause, "strerror", None) or str(cause) or type(cause).__name__
        total = in_parts = in_journals = 0
        for writer in self._writers:
            t, p, j = writer.safety()
            total, in_parts, in_journals = total + t, in_parts + p, in_journals + j
        safe = in_parts + in_journals
        text = (
            f"lab proxy: error: cannot write the capture ({why}); {safe} of {total} recorded "
            f"exchange(s) are safe on disk in {len(self._writers)} recording(s) under "
            f"{self.config.out} ({in_parts} in Parquet parts, {in_journals} in journals that "
            "lab.capture.open() recovers)"
        )
        if total > safe:
            text += f"; {total - safe} are cut or lost"
        if self.unrecorded:
            what = "refused with 503" if self.config.require_recording else "forwarded unrecorded"
            text += f"; {self.unrecorded} request(s) after the failure were {what}"
        return text

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
        if scope["path"] == HEALTH_PATH and scope["method"] in ("GET", "HEAD"):
            await self._health(send)
            return
        try:
            request, session, path = await self._admit(scope, receive)
        except _Refused as refused:
            await _send_error(send, refused.status, refused.message, refused.kind)
            return
        except _ClientGone:
            return  # gone before its request was whole: nothing was sent upstream
        cfg = self.config
        rec = self._acquire()
        if rec is None and cfg.require_recording:
            self._release(None, 0)
            await _send_error(
                send,
                503,
                "lab proxy: the capture cannot be written (see the proxy's stderr); "
                "--require-recording refuses requests it cannot record",
                "lab_proxy_not_recording",
            )
            return
        from lab.clients import exchange_info

        meta = {"via": "proxy"} | ({"session": session} if session is not None else {})
        info = exchange_info(request, cfg.provider, meta)
        retry_key = self._retries.name(request, info)  # an SDK's retry: the same stream
        request.extensions = {
            "lab": info,
            "timeout": {
                "connect": cfg.connect_timeout_s,
                "read": cfg.read_timeout_s,
                "write": cfg.connect_timeout_s,
                "pool": cfg.read_timeout_s,
            },
        }
        where = rec.writer.path if rec is not None else None
        state = _Exchange(info, scope["method"], path, session, where)
        state.keep = cfg.summarize
        state.keep_bytes = cfg.window_bytes
        try:
            with deadline(self.limits.max_exchange_s) as limit:
                state.deadline = limit
                # the pump task copies this context: the recorder sees the deadline
                await self._watching(state, rec, request, receive, send)
        except _UpstreamCut:
            pass  # the response stays incomplete: the server closes the client's connection
        finally:
            self._release(rec, state.n_bytes)
            self._retries.ended(retry_key, state.status)
        self._check_capture(rec)
        await self._report(state)

    async def _health(self, send: Callable) -> None:
        """The answer at :data:`HEALTH_PATH`: is the proxy recording, and its counts."""
        self._check_capture()
        ok = self.capture_error is None
        payload = json.dumps(
            {
                "status": "ok" if ok else "not_recording",
                "in_flight": self.active,
                "finished": self.finished,
                "unrecorded": self.unrecorded,
                "recordings": len(self.recordings),
            }
        ).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            (b"cache-control", b"no-store"),
        ]
        await send(
            {"type": "http.response.start", "status": 200 if ok else 503, "headers": headers}
        )
        await send({"type": "http.response.body", "body": payload, "more_body": False})

    async def _admit(self, scope: dict, receive: Callable) -> tuple[httpx.Request, Any, str]:
        """The request to send upstream, its session and its path, or :class:`_Refused`
        (the client gets a 4xx and nothing reaches the upstream or the capture)."""
        cfg = self.config
        raw = scope["headers"]
        target = scope.get(TARGET_SCOPE_KEY)
        if target is None:  # not served by the proxy's own protocols: the parsed path
            target = scope.get("raw_path") or scope["path"].encode()
        # (h11 hands over a head that came in one read whole, whatever its size)
        size = len(target) + sum(len(k) + len(v) + 4 for k, v in raw)
        if len(raw) > cfg.max_headers or size > cfg.max_header_bytes:
            raise _Refused(431, headers_too_large(cfg.max_header_bytes, cfg.max_headers))
        query = scope.get("query_string") or b""
        if b"#" in target or b"#" in query:  # (httptools keeps it in the target, h11 in the query)
            raise _Refused(
                400,
                "lab proxy: the request target holds '#': a fragment is never part of a "
                "request target, so nothing was forwarded",
            )
        target = target.partition(b"?")[0]
        token, target = _split_token(target)
        if self._token is not None:
            sent = token if token is not None else _header(raw, TOKEN_HEADER)
            if sent is None or not hmac.compare_digest(sent, self._token):
                raise _Refused(
                    401,
                    "lab proxy: this proxy needs its token: send the header "
                    "X-Lab-Proxy-Token: TOKEN, or start the path with /lab-token/TOKEN/",
                    "lab_proxy_unauthorized",
                )
        path = upstream_path(target)
        headers, session = _forward_headers(raw)
        body = await self._read_body(raw, receive)
        try:
            url = self._base.copy_with(
                raw_path=self._base_path + path.encode("ascii") + (b"?" + query if query else b"")
            )
        except httpx.InvalidURL as exc:  # what httpx refuses in a URL: a 400, no traceback
            raise _Refused(
                400, f"lab proxy: the request target makes no upstream URL httpx takes: {exc}"
            ) from None
        request = httpx.Request(scope["method"], url, headers=headers, content=body)
        return request, session, path

    async def _read_body(self, raw: list[tuple[bytes, bytes]], receive: Callable) -> bytes:
        cfg = self.config
        limit = cfg.max_request_body_bytes
        length = _header(raw, b"content-length")
        too_large = (
            f"lab proxy: the request body is larger than {limit} bytes "
            "(ProxyConfig.max_request_body_bytes)"
        )
        if length is not None and length.isdigit() and int(length) > limit:
            raise _Refused(413, too_large)
        parts: list[bytes] = []
        size = 0
        end = time.monotonic() + cfg.body_timeout_s
        while True:
            try:
                async with asyncio.timeout_at(
                    asyncio.get_running_loop().time() + end - time.monotonic()
                ):
                    message = await receive()
            except TimeoutError:
                raise _Refused(
                    408,
                    f"lab proxy: the request body did not arrive within {cfg.body_timeout_s:g} s "
                    "(ProxyConfig.body_timeout_s)",
                ) from None
            if message["type"] == "http.disconnect":
                raise _ClientGone
            data = message.get("body", b"")
            size += len(data)
            if size > limit:
                raise _Refused(413, too_large)
            if data:
                parts.append(data)
            if not message.get("more_body"):
                return b"".join(parts)

    async def _watching(
        self,
        state: _Exchange,
        rec: _Recording | None,
        request: httpx.Request,
        receive: Callable,
        send: Callable,
    ) -> None:
        """Forward the exchange while watching for the client going away and for the
        exchange's total time limit (``LabConfig.max_exchange_s``)."""
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
        limit = state.deadline
        try:
            left = None if limit is None else limit.at - time.monotonic()
            done, _ = await asyncio.wait(
                {pump, watcher}, timeout=left, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:  # the time limit: end it as lab record does
                await self._time_limit(state, pump, send)
            elif pump not in done and not state.complete:  # the client left: cancel upstream
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

    async def _time_limit(self, state: _Exchange, pump: asyncio.Future, send: Callable) -> None:
        limit = state.deadline
        assert limit is not None
        limit.fired = True  # the recorder's end: time_limit (lab.http.transports._failed)
        message = limit.message()
        state.end_reason, state.error = "time_limit", message
        if state.recorder is not None:
            state.recorder.on_end("time_limit", message)
        started = state.status is not None and not state.error_sent
        pump.cancel()
        await asyncio.gather(pump, return_exceptions=True)
        if not started:  # nothing sent yet: the client is told why
            state.status = 504
            await _send_error(send, 504, f"lab proxy: {message}", "lab_proxy_limit")
        else:
            raise _UpstreamCut(message)

    async def _forward(
        self, state: _Exchange, rec: _Recording | None, request: httpx.Request, send: Callable
    ) -> None:
        transport = rec.transport if rec is not None else self._inner
        try:
            response = await transport.handle_async_request(request)
        except httpx.TransportError as exc:  # recorded by the transport already
            if expired(state.deadline):
                state.end_reason, state.error, status = "time_limit", str(exc), 504
            else:
                status = 504 if isinstance(exc, httpx.TimeoutException) else 502
                state.end_reason = "timeout" if status == 504 else "read_error"
                state.error = f"{type(exc).__name__}: {exc}"
            state.status = status
            state.complete = True
            state.error_sent = True
            await _send_error(
                send, status, f"lab proxy: upstream {self._shown}: {state.error}", UPSTREAM_ERROR
            )
            return
        state.recorder = response.extensions.get("lab.exchange")
        state.status = response.status_code
        state.response_headers = dict(response.headers)
        state.http_version = response.extensions.get("http_version", b"HTTP/1.1")
        state.counter = _ByteCounter(
            self.limits, response.status_code, response.headers.get("content-encoding")
        )
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
            if self._batched and rec is not None:
                await self._relay_batches(state, response, send)
            else:
                await self._relay(state, response, send)
            state.end_reason = "eof"
            state.complete = True  # from here a disconnect is the server ending the response
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except _AtLimit as at:  # the byte limit: recorded so, the client's stream is cut
            state.end_reason, state.error = "byte_limit", at.message
            if state.recorder is not None:
                state.recorder.on_end("byte_limit", at.message)
            raise _UpstreamCut(at.message) from None
        except httpx.TransportError as exc:  # mid-stream: the client sees the stream cut
            if expired(state.deadline):
                state.end_reason, state.error = "time_limit", str(exc)
            else:
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
        reads = response.aiter_raw()
        try:  # the first read inline: no task hop before the first byte
            first = await reads.__anext__()
        except StopAsyncIteration:
            return
        first = state.take(first)
        await send({"type": "http.response.body", "body": first, "more_body": True})
        state.check_limit()
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
        async for batch in response.stream.aiter_batches():  # type: ignore[union-attr]
            if not batch:
                continue
            data = state.take_batch(batch)
            if data:
                await send({"type": "http.response.body", "body": data, "more_body": True})
            state.check_limit()

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
            recorded=state.capture_path is not None,
        )
        if state.reads is None:
            ex.summarized = False
        elif self.config.summarize and state.status is not None and state.status < 600:
            try:  # all of it in a worker thread: the event loop keeps serving streams
                summary = await asyncio.to_thread(
                    _summarize, self.config.provider, state, self.limits
                )
            except Exception as exc:  # a summary must never take the proxy down
                ex.error = ex.error or f"summary failed: {type(exc).__name__}: {exc}"
            else:
                ex.backend, ex.leak_guards, ex.anomalies = summary
        self._on_exchange(ex)


_EOF = object()


async def _read_upstream(reads: Any, state: _Exchange, queue: asyncio.Queue) -> None:
    """Queue every further upstream read as the client is to get it, then ``_EOF`` (or the
    transport error that ended it, or :class:`_AtLimit` after the part of the read that
    crossed the byte limit)."""
    try:
        async for data in reads:
            data = state.take(data)
            await queue.put(data)
            if state.counter is not None and state.counter.over is not None:
                await queue.put(_AtLimit(state.counter.over))
                return
    except httpx.TransportError as exc:
        await queue.put(exc)
    else:
        await queue.put(_EOF)


class _UpstreamCut(LabError):
    """The upstream stream broke after the response started: the client's stream is cut."""


class _Refused(LabError):
    """A request the proxy answers itself with a 4xx (or 503), before the upstream."""

    def __init__(self, status: int, message: str, kind: str = "lab_proxy_bad_request") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


class _ClientGone(LabError):
    """The client left before its request was whole."""


class _AtLimit(LabError):
    """The response went past the byte limit: what was sent ends exactly at it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _ByteCounter:
    """Counts an exchange's decoded body against ``max_exchange_bytes`` (an HTTP error's
    against ``max_error_body_bytes`` too), as :func:`lab.stream.run_stream` does, so a
    replay under the same config stops at the same read. An identity body is cut at the
    limit exactly; an encoded one loses the read that crossed it (compressed bytes cannot
    be cut where the decoded ones end)."""

    __slots__ = ("max", "decoded", "over", "_decoder", "_message")

    def __init__(self, limits: LabConfig, status: int, encoding: str | None) -> None:
        from lab.http.decoding import decoder_for
        from lab.http.limits import byte_limit_message, error_body_limit_message

        cap = limits.max_exchange_bytes
        message = byte_limit_message
        if status >= 400:
            error_cap = limits.max_error_body_bytes
            cap = error_cap if cap is None else min(cap, error_cap)
            message = error_body_limit_message
        self.max = cap
        self.decoded = 0
        self.over: str | None = None
        """The limit's message once the body went past it."""
        self._message = message(cap) if cap is not None else ""
        self._decoder = decoder_for(encoding) if cap is not None else None

    def take(self, data: bytes) -> bytes:
        """What of ``data`` the client gets (all of it until the limit)."""
        cap = self.max
        if cap is None or self.over is not None:
            return data if self.over is None else b""
        if self._decoder is None:
            room = cap - self.decoded
            if len(data) > room:
                self.decoded, self.over = cap, self._message
                return data[:room]
            self.decoded += len(data)
            return data
        for piece in self._decoder.feed(data):  # in bounded pieces: a bomb stops early
            self.decoded += len(piece)
            if self.decoded > cap:
                self.over = self._message
                return b""
        return data


@dataclass
class _Exchange:
    info: dict
    method: str
    path: str
    session: str | None
    capture_path: Path | None
    status: int | None = None
    end_reason: str = "incomplete"
    complete: bool = False
    error: str | None = None
    n_bytes: int = 0
    """Bytes sent on to the client."""
    reads: list[bytes] | None = field(default_factory=list)
    """The reads kept for the summary line; None once they went past
    ``window_bytes`` (then none are kept: the summary is skipped)."""
    keep: bool = True
    keep_bytes: int = 8 * 1024 * 1024
    held: int = 0
    response_headers: dict = field(default_factory=dict)
    http_version: Any = b"HTTP/1.1"
    recorder: Any = None
    deadline: Any = None
    counter: _ByteCounter | None = None
    error_sent: bool = False
    """The proxy answered with its own error (502, 504): nothing of a response was sent."""

    def _hold(self, data: bytes) -> None:
        reads = self.reads
        if reads is None or not self.keep:
            return
        self.held += len(data)
        if self.held > self.keep_bytes:
            self.reads = None  # the window is full: the summary is skipped, memory freed
        else:
            reads.append(data)

    def take(self, data: bytes) -> bytes:
        """One upstream read: kept for the summary (within the window), counted against
        the byte limit; returns what the client gets."""
        self._hold(data)
        counter = self.counter
        if counter is not None:
            data = counter.take(data)
        self.n_bytes += len(data)
        return data

    def check_limit(self) -> None:
        """Raise :class:`_AtLimit` once the body went past the byte limit."""
        if self.counter is not None and self.counter.over is not None:
            raise _AtLimit(self.counter.over)

    def take_batch(self, batch: list[bytes]) -> bytes:
        """:meth:`take` for a batch of reads, joined; past the byte limit, the part before
        it (``counter.over`` then says so)."""
        out = []
        for data in batch:
            out.append(self.take(data))
            if self.counter is not None and self.counter.over is not None:
                break
        return out[0] if len(out) == 1 else b"".join(out)


def _forward_headers(raw: list[tuple[bytes, bytes]]) -> tuple[list[tuple[str, str]], str | None]:
    """The headers to forward and the session; :class:`_Refused` (400) for a header value
    that is not ASCII (HTTP allows only ASCII text in them; the proxy guesses no charset)."""
    headers: list[tuple[str, str]] = []
    session = None
    for k, v in raw:
        name = k.decode("latin-1")
        if not v.isascii():
            raise _Refused(
                400,
                f"lab proxy: the value of header {_printable(name)} is not ASCII; "
                "encode it (percent-encoding, RFC 8187) or leave it out",
            )
        lower = name.lower()
        if lower == SESSION_HEADER:
            session = v.decode("ascii")
        elif lower not in _NOT_FORWARDED:
            headers.append((name, v.decode("ascii")))
    return headers, session


def headers_too_large(max_bytes: int, max_headers: int) -> str:
    """The 431's message."""
    return (
        f"lab proxy: the request line and headers are larger than {max_bytes} bytes "
        f"(ProxyConfig.max_header_bytes) or hold more than {max_headers} fields "
        "(ProxyConfig.max_headers)"
    )


def _header(raw: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower case), or None."""
    for k, v in raw:
        if k.lower() == name:
            return v.strip()
    return None


def _split_token(target: bytes) -> tuple[bytes | None, bytes]:
    """``/lab-token/TOKEN/rest`` -> (TOKEN, ``/rest``); any other target -> (None, it)."""
    if not target.startswith(TOKEN_PATH):
        return None, target
    token, slash, rest = target[len(TOKEN_PATH) :].partition(b"/")
    return token, slash + rest


def upstream_path(target: bytes) -> str:
    """The path a request target stands for under the upstream base path, or
    :class:`_Refused` (400) when it could leave it: a target that is not a path starting
    with ``/`` (``*``, ``@host``, ``http://host/...`` absolute-form), or one with a dot
    segment (``.`` or ``..``), raw or percent-encoded (once or more), also between
    backslashes. Returns the target as it came (ASCII)."""
    shown = _printable(target.decode("latin-1"))
    if not target.startswith(b"/"):
        raise _Refused(
            400,
            f"lab proxy: the request target must be a path starting with / (origin-form), "
            f"not {shown!r}",
        )
    if not target.isascii():
        raise _Refused(400, f"lab proxy: the request path is not ASCII: {shown!r}")
    text = target.decode("ascii")
    for _ in range(8):  # %252e%252e -> %2e%2e -> ..
        decoded = unquote(text)
        if decoded == text:
            break
        text = decoded
    if any(seg in (".", "..") for seg in text.replace("\\", "/").split("/")):
        raise _Refused(
            400,
            f"lab proxy: the request path {shown!r} holds a dot segment (. or .., raw or "
            "percent-encoded): it could leave the upstream base path",
        )
    return target.decode("ascii")


def _upstream_base(upstream: str) -> tuple[httpx.URL, bytes, str]:
    """(the base URL, its path without a trailing slash, the URL as shown: no userinfo)."""
    base = httpx.URL(upstream)
    path = base.raw_path.partition(b"?")[0].rstrip(b"/")
    shown = str(base.copy_with(username=None, password=None)).rstrip("/")
    return base, path, shown


async def _send_error(
    send: Callable, status: int, message: str, kind: str = "lab_proxy_upstream_error"
) -> None:
    payload = json.dumps({"error": {"type": kind, "message": message, "code": status}}).encode()
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


def _summarize(
    provider: str, state: _Exchange, config: LabConfig
) -> tuple[str | None, list[str], list[str]]:
    """(backend, leak guards that moved text, anomalies) of one proxied exchange."""
    from lab.tables import LEAK_GUARDS, _anomalies

    result = _replay_exchange(provider, state, config)
    guards = {e.guard for e in result.guard_events if e.guard in LEAK_GUARDS and e.moved}
    return result.serving_provider, sorted(guards), list(_anomalies(result))


def _replay_exchange(provider: str, state: _Exchange, config: LabConfig | None = None) -> Any:
    """The full-stack result of one proxied exchange, from the reads recorded (replayed
    under the proxy's limits, it ends where the client's stream did)."""
    from lab.capture.records import RecordedExchange, RecordedRequest
    from lab.replay import replay_request

    info = state.info
    version = state.http_version
    reads = state.reads or []
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
        reads=reads,
        read_t_ns=[0] * len(reads),
        end_reason=state.end_reason if state.end_reason != "incomplete" else "eof",
        error=state.error,
        meta=_scrub_meta(state.recorder),
    )
    request = RecordedRequest(exchange.stream_id, provider, exchange.model, [exchange])
    return replay_request(request, config=config)


def _scrub_meta(recorder: Any) -> dict[str, Any]:
    """What the recorder did about secrets in this exchange, as the capture's ``meta`` says
    it (``lab.redacted``, ``lab.undecoded``), so the summary line names the anomalies
    ``secret_redacted`` / ``secret_unchecked`` as a replay of the capture does."""
    if recorder is None:
        return {}
    meta: dict[str, Any] = {}
    if recorder.redacted:
        meta["lab.redacted"] = recorder.redacted
    if recorder.undecoded:
        meta["lab.undecoded"] = recorder.undecoded
    return meta


# -- serving -------------------------------------------------------------------------------


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def say(text: str, out: TextIO) -> None:
    """Write one line in one write and flush it: print() writes the text and its newline
    separately when Python runs unbuffered, and a process sharing the terminal or file
    (the fake server beside the proxy in the README) could land between the two."""
    out.write(text + "\n")
    out.flush()


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (``127.0.0.0/8``, ``::1``,
    ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, config: ProxyConfig) -> str:
    """What ``lab proxy --allow-remote`` prints when it listens beyond loopback."""
    text = (
        f"lab proxy: warning: listening on {host}, beyond loopback: whoever reaches it can "
        f"send requests through it to {_upstream_base(config.upstream)[2]} (with any key "
        "they hold, or the one in --upstream) and fill the disk under "
        f"{config.out}"
    )
    if not config.auth_token:
        text += "; no --auth-token is set, so anyone can"
    return text


class _Limits:
    """The client-side limits the proxy's server protocols apply while a request's line
    and headers arrive (the app checks the rest)."""

    def __init__(self, config: ProxyConfig) -> None:
        self.max_header_bytes = config.max_header_bytes
        self.max_headers = config.max_headers
        self.header_timeout_s = config.header_timeout_s


def _protocol(kind: str, limits: _Limits) -> type:
    """uvicorn's ``kind`` (``httptools`` or ``h11``) HTTP protocol with the proxy's header
    limits: request line and headers within ``header_timeout_s`` (from the connection's
    start, or the previous response's end) and ``max_header_bytes`` / ``max_headers``, else
    408 / 431 and the connection closed; the request target as sent goes into the scope
    (``TARGET_SCOPE_KEY``) so the app refuses an absolute-form one under both parsers."""
    import h11

    base: Any
    if kind == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        base = H11Protocol
    else:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        base = HttpToolsProtocol

    class Protocol(base):
        _lab_timer: Any = None
        _lab_refusal: tuple[int, str] | None = None
        _lab_size = 0
        _lab_count = 0

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._lab_arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._lab_disarm()
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._lab_arm()  # the next request's headers have as long

        def _lab_arm(self) -> None:
            self._lab_disarm()
            self._lab_size = self._lab_count = 0
            self._lab_timer = self.loop.call_later(limits.header_timeout_s, self._lab_late)

        def _lab_disarm(self) -> None:
            if self._lab_timer is not None:
                self._lab_timer.cancel()
                self._lab_timer = None

        def _lab_late(self) -> None:
            self._lab_timer = None
            if not self.transport.is_closing():
                self._lab_refuse(
                    408,
                    f"lab proxy: the request line and headers did not arrive within "
                    f"{limits.header_timeout_s:g} s (ProxyConfig.header_timeout_s)",
                )

        def _lab_refuse(self, status: int, message: str) -> None:
            self._lab_disarm()
            payload = json.dumps(
                {"error": {"type": "lab_proxy_bad_request", "message": message, "code": status}}
            ).encode()
            reason = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}
            self.transport.write(
                b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                % (status, reason.get(status, b"Bad Request"), len(payload), payload)
            )
            self.transport.close()

        def _lab_too_large(self) -> None:
            self._lab_refusal = (
                431,
                headers_too_large(limits.max_header_bytes, limits.max_headers),
            )

        def send_400_response(self, msg: str) -> None:
            if self._lab_refusal is None and kind == "h11":  # h11 refuses past its limit
                if len(self.conn.trailing_data[0]) > limits.max_header_bytes:
                    self._lab_too_large()
            if self._lab_refusal is not None:
                self._lab_refuse(*self._lab_refusal)
            else:
                self._lab_disarm()
                super().send_400_response(msg)

        if kind == "h11":

            def handle_events(self) -> None:
                try:
                    super().handle_events()
                finally:
                    if self.conn.their_state in (h11.SEND_BODY, h11.DONE):
                        self._lab_disarm()  # the headers are in

        else:

            def on_url(self, url: bytes) -> None:
                self._lab_size += len(url)
                if self._lab_size > limits.max_header_bytes:
                    self._lab_too_large()
                    raise ValueError("request line too long")
                super().on_url(url)

            def on_header(self, name: bytes, value: bytes) -> None:
                self._lab_size += len(name) + len(value) + 4
                self._lab_count += 1
                if self._lab_size > limits.max_header_bytes or self._lab_count > limits.max_headers:
                    self._lab_too_large()
                    raise ValueError("headers too large")
                super().on_header(name, value)

            def on_headers_complete(self) -> None:
                self._lab_disarm()
                self.scope[TARGET_SCOPE_KEY] = self.url
                super().on_headers_complete()

    return Protocol


def _server(app: ProxyApp, sock: socket.socket, http: str | None = None) -> Any:
    uvicorn = require_uvicorn()
    cfg = app.config
    if http is None:
        try:
            import httptools  # noqa: F401

            http = "httptools"
        except ImportError:
            http = "h11"
    config = uvicorn.Config(
        app,
        http=_protocol(http, _Limits(cfg)),
        log_level="warning",
        access_log=False,
        lifespan="on",
        backlog=2048,
        timeout_graceful_shutdown=5,
        h11_max_incomplete_event_size=cfg.max_header_bytes,
    )
    return uvicorn.Server(config)


def raise_fd_limit() -> int:
    """Raise this process's open-file limit to its hard limit (each client connection and
    each upstream one is a file descriptor; a 1,024 soft limit is what slow clients
    exhausted). Returns the limit now in force."""
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return -1
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    return soft


def serve(
    config: ProxyConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    out: TextIO | None = None,
    err: TextIO | None = None,
    allow_remote: bool = False,
) -> str | None:
    """Run the proxy in this thread until Ctrl-C / SIGTERM (``lab proxy``).

    The first line written to **out** (default stdout) is the proxy's URL; then one line per
    finished exchange. A host beyond loopback needs **allow_remote** (a ``ValueError``
    otherwise) and a warning goes to **err** (default stderr). Returns None, or when the
    capture could not be written, what is safe on disk and where
    (:meth:`ProxyApp.close_report`).
    """
    out = out or sys.stdout
    err = err or sys.stderr
    require_uvicorn()
    if not is_loopback(host) and not allow_remote:
        raise ValueError(
            f"--host {host} is beyond loopback: the proxy would forward anyone's requests "
            "and record them; pass --allow-remote (and set --auth-token) to do it anyway"
        )
    app = ProxyApp(
        config,
        on_exchange=lambda ex: say(ex.line(), out),
        on_capture_error=lambda text: say(text, err),
    )
    raise_fd_limit()
    sock = _bind(host, port)
    if not is_loopback(host):
        say(exposure_warning(host, config), err)
    say(_url(sock), out)
    server = _server(app, sock)
    stop: KeyboardInterrupt | None = None
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt as exc:  # the signal uvicorn raises again once it shut down
        stop = exc
    finally:
        sock.close()
    report = app.close_report()
    if report is None and stop is not None:
        raise stop
    return report


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
        on_capture_error: Callable[[str], None] | None = None,
        http: str | None = None,
    ) -> None:
        self.exchanges: list[ProxyExchange] = []
        self._lock = threading.Lock()

        def report(ex: ProxyExchange) -> None:
            with self._lock:
                self.exchanges.append(ex)
            if on_exchange is not None:
                on_exchange(ex)

        self.app = ProxyApp(config, on_exchange=report, on_capture_error=on_capture_error)
        self._sock = _bind(host, port)
        self.url = _url(self._sock)
        self._server = _server(self.app, self._sock, http)
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
