"""Replay one recorded response body, or one recorded request with all its attempts.

Both run :func:`lab.stream.run_stream` — the same code as a live recording — with a
:class:`~lab.http.transports.ReplayTransport` that serves the recorded reads back with their
original boundaries. The degradation ladder runs again: when it asks for an attempt whose
body differs from the recorded one, or for more attempts than were recorded, the result's
``divergence`` says so.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

import httpx

from lab._json import loads as json_loads
from lab.config import LabConfig, fingerprints_held
from lab.http.transports import ReplayTransport, replay_transport_for_body
from lab.infer import model_from_path, resolve_provider
from lab.model import ProcessedChunk, ProviderError
from lab.providers import PROVIDERS, adapter_for, get_adapter
from lab.providers.openai_responses import RESPONSES_PATH
from lab.replay._gc import paused as _gc_paused
from lab.result import StreamResult
from lab.stream import client_timeout, run_stream

__all__ = ["many_replays", "replay_request", "replay_sse"]

_REPLAY_BASE_URL = "http://replay.invalid"


def replay_sse(
    provider: str,
    body: str | bytes | Iterable[bytes],
    *,
    tools: list[dict] | None = None,
    config: Any = None,
    model: str | None = None,
    stream_id: str = "replay",
    path: str | None = None,
) -> StreamResult:
    """One recorded response body (HTTP 200) through the whole stack.

    Pass a distinct **stream_id** when several results go into one table. **path** is the
    request path the body answered, when it picks another API than the family's default
    (``"/responses"``: an OpenAI Responses API stream of openai, openrouter or deepseek).

    **body** is the raw SSE text or bytes (one read) or an iterable of reads (boundaries are
    kept). No degradation runs: there is no recorded next attempt to degrade into, so an error
    is reported as the stream reported it.
    """
    cfg = LabConfig.coerce(config).model_copy(update={"degrade": False})
    if provider not in PROVIDERS:
        return _error_result(
            provider,
            model,
            stream_id,
            "unknown_provider",
            f"unknown provider {provider!r}; known providers: {', '.join(sorted(PROVIDERS))}",
        )
    if path is None and not isinstance(body, (str, bytes, bytearray, memoryview)):
        body = [bytes(b) for b in body]  # read once: the sniff and the replay both see it
    if path is None and _responses_body(body):
        try:  # a Responses API stream, known by its events, of a family that has the API
            adapter_for(provider, RESPONSES_PATH)
            path = RESPONSES_PATH
        except ValueError:
            pass
    try:
        adapter_cls = adapter_for(provider, path)
    except ValueError as exc:
        return _error_result(provider, model, stream_id, "unknown_api", str(exc))
    turns = "input" if "input" in adapter_cls.mandatory_keys else "messages"
    request: dict[str, Any] = {"model": model or "replay", turns: [], "stream": True}
    if tools:
        request["tools"] = tools
    transport = replay_transport_for_body(body)
    with _gc_paused(young=True):
        result = run_stream(
            provider,
            request,
            transport=transport,
            base_url=_REPLAY_BASE_URL,
            config=cfg,
            tools=tools,
            stream_id=stream_id,
            path=path,
        )
    if model is None:
        result.model = None
    return result


_RESPONSES_EVENT = re.compile(
    rb'^(?:event:[ \t]*response\.[a-z_.]+|data:[ \t]*\{\s*"type"\s*:\s*"response\.)', re.M
)
_SNIFF_BYTES = 4096


def _responses_body(body: Any) -> bool:
    """Does a body given without ``path=`` read as an OpenAI Responses API stream: one of
    its first events (the first 4 KiB) typed ``response.*`` (``response.created``, ...)?
    Such a body replayed as chat completions would come out empty."""
    if isinstance(body, str):
        head = body[:_SNIFF_BYTES].encode("utf-8", "replace")
    elif isinstance(body, (bytes, bytearray, memoryview)):
        head = bytes(body[:_SNIFF_BYTES])
    else:  # reads: only as many as the first 4 KiB take, not the whole body joined
        taken, size = [], 0
        for read in body:
            taken.append(read)
            size += len(read)
            if size >= _SNIFF_BYTES:
                break
        head = b"".join(taken)[:_SNIFF_BYTES]
    return _RESPONSES_EVENT.search(head) is not None


def _error_result(
    provider: str, model: str | None, stream_id: str, code: str, message: str
) -> StreamResult:
    """A result that carries only an error chunk (bad input that never reached a stream)."""
    error = ProviderError(type="unknown", code=code, message=message, retryable=False)
    return StreamResult(
        stream_id=stream_id,
        provider=provider,
        model=model,
        chunks=[ProcessedChunk(type="error", error=error)],
        error=error,
        finish_reason="error",
        outcome="stop",
    )


class _Router(httpx.BaseTransport):
    """The transport of a client that replays one recorded request after another (see
    :func:`many_replays`): each request goes to the recording of the replay in progress."""

    def __init__(self) -> None:
        self.current: ReplayTransport | None = None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.current is None:
            raise RuntimeError("no replay in progress on this client")
        return self.current.handle_request(request)


class _ReplayCookies(httpx.Cookies):
    """The shared client's cookies: httpx's, except that a response with no ``Set-Cookie``
    header stores nothing without first building the urllib views of the request and the
    response that the standard library's cookie jar reads (~60 us of every replayed
    stream, for no cookie)."""

    def extract_cookies(self, response: httpx.Response) -> None:
        headers = response.headers
        if "set-cookie" in headers or "set-cookie2" in headers:
            super().extract_cookies(response)


class _ReplayClient(httpx.Client):
    """The client :func:`many_replays` shares: httpx's own, its cookies kept in
    :class:`_ReplayCookies` (httpx reads them through the ``cookies`` property)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._replay_cookies = _ReplayCookies()

    @property
    def cookies(self) -> httpx.Cookies:
        return self._replay_cookies

    @cookies.setter
    def cookies(self, cookies: Any) -> None:
        self._replay_cookies = _ReplayCookies(cookies)


class _Block:
    """One :func:`many_replays` block: the thread that entered it, its clients by read
    timeout, and whether it is still open (a copy of its context can outlive it)."""

    __slots__ = ("clients", "open", "thread")

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.clients: dict[float, tuple[httpx.Client, _Router]] = {}
        self.open = True


_CLIENTS: ContextVar[_Block | None] = ContextVar("lab_replay_clients", default=None)


@contextmanager
def many_replays() -> Iterator[None]:
    """Within the block, :func:`replay_request` calls share what each would otherwise build
    for itself, as a live application keeps one client for all its requests: one httpx
    client per read timeout (its transport switched to each request's recording, its
    cookies cleared before each request; a response without ``Set-Cookie`` skips the
    cookie jar, :class:`_ReplayCookies`) and each config's fingerprint
    (:func:`lab.config.fingerprints_held`). Building them, and the cookie jar's look at
    each response, took ~130 µs of every replayed stream. The results are those of
    replays made one by one. A block inside another shares the outer one's; the clients
    are closed when the outer block ends. A thread started inside the block replays on
    clients of its own, even one that runs in a copy of the block's context
    (``asyncio.to_thread``): the clients belong to the thread that entered the block. A
    copy of the context run after the block ended (a task it created) builds its own."""
    held = _CLIENTS.get()
    if held is not None and held.open and held.thread == threading.get_ident():
        yield
        return
    block = _Block()
    token = _CLIENTS.set(block)
    try:
        with fingerprints_held():
            yield
    finally:
        _CLIENTS.reset(token)
        block.open = False  # a copy of the context used later builds clients of its own
        for client, _ in block.clients.values():
            client.close()


def _shared_client(config: Any) -> tuple[httpx.Client, _Router] | None:
    """The client :func:`many_replays` shares for ``config``'s read timeout, or None
    outside such a block. It is the client :func:`lab.stream.run_stream` would build."""
    block = _CLIENTS.get()
    if block is None or not block.open or block.thread != threading.get_ident():
        return None
    clients = block.clients
    read = LabConfig.coerce(config).inactivity_timeout_s
    shared = clients.get(read)
    if shared is None:
        router = _Router()
        client = _ReplayClient(transport=router, timeout=client_timeout(read))
        shared = clients[read] = (client, router)
    return shared


def replay_request(
    request: Any, *, config: Any = None, provider: str | None = None
) -> StreamResult:
    """Replay one :class:`~lab.capture.RecordedRequest` (all its attempts).

    The provider is **provider** when given (``lab replay --provider``), else the recorded
    one, else the one :func:`lab.infer.infer_provider` reads from the request; when none can
    be told, the result is one error row (``unknown_provider``) and nothing raises.
    """
    exchanges = list(request.exchanges)
    first = exchanges[0]
    replay_as = _provider_for(request, first, provider)
    if isinstance(replay_as, StreamResult):
        return _stamp(replay_as, request)
    try:
        body = json.loads(first.request_body)  # bytes: the standard parser's encodings
    except ValueError:
        body = {"model": request.model, "messages": [], "stream": True}
    model = request.model or model_from_path(first.url)
    if isinstance(body, dict) and "model" not in body and model:
        body = {"model": model, **body}  # a provider that moves the model into the URL
    transport = ReplayTransport(exchanges)
    router = None
    try:
        client = None
        shared = _shared_client(config)
        if shared is not None:  # many_replays: the block's client, on this recording
            client, router = shared
            client.cookies.clear()  # a replay starts as a fresh client would
            router.current = transport
        with _gc_paused(young=True):
            result = run_stream(
                replay_as,
                body,
                client=client,
                transport=transport if client is None else None,
                base_url=_REPLAY_BASE_URL,
                config=config,
                stream_id=request.stream_id,
                meta=request.meta,
                path=_recorded_path(first, replay_as),
                recorded_labels=[ex.attempt_label for ex in exchanges],
            )
    except (ValueError, TypeError) as exc:  # this request cannot be sent (no model, ...)
        result = _error_result(
            replay_as,
            request.model,
            request.stream_id,
            "unreplayable",
            f"cannot replay {first.method} {first.url} as {replay_as!r}: {exc}",
        )
        return _stamp(result, request)
    finally:
        if router is not None:
            router.current = None  # the recording is let go with the request
    # Timings: the recorded arrival offsets, not the replay's; none for an exchange whose
    # source did not time its reads (an imported cassette), so timing tables leave it out.
    for ex in exchanges:
        if ex.attempt in result.read_t_ns or ex.attempt < len(result.attempts):
            timed = (ex.meta or {}).get("timing", "reads") == "reads"
            result.read_t_ns[ex.attempt] = list(ex.read_t_ns) if timed else []
    _stamp(result, request)
    seen = transport.requests_seen
    for i, (req, ex) in enumerate(zip(seen, exchanges, strict=False)):
        # the same bytes are the same body: JSON parsed only when they differ (a 50 KB
        # body took ~0.3 ms a stream to parse twice)
        if req.content != ex.request_body and _canonical(req.content) != _canonical(
            ex.request_body
        ):
            result.divergence.append(
                f"attempt {i}: the ladder sent a different body than recorded "
                f"({ex.attempt_label!r} was recorded)"
            )
    if len(seen) < len(exchanges):
        result.divergence.append(f"replay used {len(seen)} of {len(exchanges)} recorded attempts")
    return result


def _stamp(result: StreamResult, request: Any) -> StreamResult:
    """``result`` given what the recording says of its request: the caller's metadata, the
    wall clock its first attempt was sent at and the recording it came from."""
    result.meta = dict(request.meta or {})
    exchanges = getattr(request, "exchanges", None) or [None]
    result.started_at = getattr(exchanges[0], "started_at", None)
    result.capture_id = getattr(request, "capture_id", None)
    return result


def _provider_for(request: Any, first: Any, provider: str | None) -> str | StreamResult:
    """The provider one recorded request replays with, or its error row (see replay_request)."""
    known = ", ".join(sorted(PROVIDERS))
    if provider is not None:
        if provider in PROVIDERS:
            return provider
        message = f"unknown provider {provider!r} (given to replay); known providers: {known}"
    else:
        guess = resolve_provider(request.provider, first)
        if guess is not None:
            return guess.provider
        message = (
            f"cannot tell the provider of {first.method} {first.url} (recorded "
            f"provider {request.provider!r}; no known path, header or body shape); "
            f"replay it with provider=... (lab replay --provider P), one of: {known}"
        )
    result = _error_result(
        request.provider, request.model, request.stream_id, "unknown_provider", message
    )
    result.meta = dict(request.meta or {})
    return result


def _recorded_path(exchange: Any, provider: str) -> str | None:
    """The path the recorded request went to when it picks an API of ``provider`` other
    than the family's default (``/responses``), else None (the family's own adapter)."""
    url = getattr(exchange, "url", None)
    if not isinstance(url, str):
        return None
    try:
        path = urlsplit(url).path
        if adapter_for(provider, path) is not get_adapter(provider):
            return path
    except ValueError:  # an unknown provider fails in run_stream, with its own message
        pass
    return None


def _canonical(body: bytes | str) -> Any:
    try:
        return json_loads(body.decode() if isinstance(body, bytes) else body)
    except (ValueError, TypeError, RecursionError):
        return body
