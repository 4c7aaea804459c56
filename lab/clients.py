"""httpx clients that record every exchange, to hand to an httpx-based SDK.

::

    import openai, lab

    http = lab.recording_client("recordings", provider="openai")
    client = openai.OpenAI(base_url=..., api_key=..., http_client=http)
    ...                                  # use the SDK as usual; every stream is recorded
    http.close()                         # writes the capture; http.capture_path says where

The current ``anthropic`` SDK (2.x) speaks ``httpx2``, httpx's successor, and refuses an
``httpx.Client``; pass ``http="httpx2"`` to get an ``httpx2.Client`` recording through the
same transport (a thin bridge converts each request and response; the bytes are the same).
``openai`` 3.x takes either.

Each request becomes one logical stream in the capture (its own ``stream_id``, attempt 0,
the provider family given here and the model read from the request), except an SDK's
automatic retry, which is the next attempt of the request it retries (label
``client_retry``; :class:`RetryChains`), recorded through
:class:`~lab.http.transports.RecordingTransport` like ``lab record``: redacted headers (the
SDK's key never reaches disk), every read with its arrival time. ``lab replay`` then replays
it with that family's adapter.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

__all__ = [
    "CLIENT_RETRY_LABEL",
    "AsyncRecordingClient",
    "RecordingClient",
    "RetryChains",
    "async_recording_client",
    "exchange_info",
    "recording_client",
]

CLIENT_RETRY_LABEL = "client_retry"
"""The attempt label of an exchange that an SDK sent again on its own (a retry after a
429, a 5xx or a dropped connection): replay sends the same body again there."""

RETRY_COUNT_HEADER = "x-stainless-retry-count"
"""How the Stainless-built SDKs (openai, anthropic) number a request's tries: 0, 1, ..."""

RETRIED_STATUSES = frozenset({408, 409, 429})
"""Statuses (besides 5xx) after which the SDKs retry on their own."""

_MAX_CHAINS = 1024  # failed requests remembered at once (the oldest is forgotten first)


def _model_of(request: httpx.Request) -> str | None:
    """The model a request asks for: the JSON body's ``model``, else Gemini's URL path."""
    from lab.infer import model_from_path

    model = model_from_path(request.url.path)
    if model is not None:
        return model
    content = request.content
    if content and content.lstrip()[:1] == b"{":
        try:
            model = json.loads(content).get("model")
        except (ValueError, AttributeError, RecursionError):
            return None
        return model if isinstance(model, str) else None
    return None


def exchange_info(
    request: httpx.Request, provider: str, meta: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ``extensions["lab"]`` entry that names a request's family, model and meta for
    :class:`~lab.http.transports.RecordingTransport` (a fresh stream_id, attempt 0)."""
    from lab.stream import new_stream_id

    info = dict(request.extensions.get("lab") or {})
    info.setdefault("stream_id", new_stream_id())
    info.setdefault("provider", provider)
    info.setdefault("model", _model_of(request))
    if meta:
        info["meta"] = {**meta, **(info.get("meta") or {})}
    return info


def _retry_count(request: httpx.Request) -> int | None:
    value = request.headers.get(RETRY_COUNT_HEADER)
    if value is None:
        return None
    try:
        return max(0, int(value.strip()))
    except ValueError:
        return None


@dataclass
class _Chain:
    stream_id: str
    attempt: int
    failed_at: float | None  # monotonic seconds of the last failure; None while in flight


class RetryChains:
    """Which logical request an SDK's automatic retry belongs to.

    An SDK retries a request that failed (a transport error, HTTP 408/409/429/5xx) by
    sending it again, unchanged but for its retry counter, after a back-off. Each such
    exchange is recorded as the next attempt of the first one's stream (label
    :data:`CLIENT_RETRY_LABEL`), so an error rate counts the request once and the tables
    show the retry (``degradation_path`` ``default>client_retry``). A retry is told by:

    - the ``x-stainless-retry-count`` header (openai, anthropic SDKs): ``n > 0`` continues
      the chain of an equal request whose last attempt was ``n - 1``; ``0`` is a new request;
    - else an equal request (method, URL and body) sent within **window_s** seconds after
      one failed (``LabConfig.client_retry_window_s``).

    A request that succeeds ends its chain; memory holds the chains of recent failures only
    (at most 1024). Thread-safe.
    """

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._chains: OrderedDict[tuple[str, str, str], _Chain] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(request: httpx.Request) -> tuple[str, str, str]:
        return (
            request.method,
            str(request.url),
            hashlib.sha256(request.content or b"").hexdigest(),
        )

    def name(self, request: httpx.Request, info: dict[str, Any]) -> tuple[str, str, str]:
        """Make ``info`` (an :func:`exchange_info` entry) the next attempt of the request
        this one retries, if it is a retry; returns the key to report the outcome under."""
        key = self.key(request)
        count = _retry_count(request)
        now = time.monotonic()
        with self._lock:
            self._forget_older_than(now - self.window_s if count is None else None)
            chain = self._chains.get(key)
            if count is not None:
                retry = count > 0 and chain is not None and chain.attempt == count - 1
            else:
                retry = (
                    chain is not None
                    and chain.failed_at is not None
                    and now - chain.failed_at <= self.window_s
                )
            if retry and chain is not None and not request.extensions.get("lab"):
                chain.attempt += 1
                chain.failed_at = None
                info["stream_id"] = chain.stream_id
                info["attempt"] = chain.attempt
                info["attempt_label"] = CLIENT_RETRY_LABEL
            else:
                self._chains[key] = _Chain(str(info["stream_id"]), 0, None)
            self._chains.move_to_end(key)
            while len(self._chains) > _MAX_CHAINS:
                self._chains.popitem(last=False)
        return key

    def ended(self, key: tuple[str, str, str], status: int | None) -> None:
        """The exchange got ``status`` (None: it failed before any response)."""
        failed = status is None or status in RETRIED_STATUSES or status >= 500
        with self._lock:
            chain = self._chains.get(key)
            if chain is None:
                return
            if failed:
                chain.failed_at = time.monotonic()
            else:
                del self._chains[key]

    def _forget_older_than(self, horizon: float | None) -> None:
        if horizon is None:
            return
        stale = [
            k for k, c in self._chains.items() if c.failed_at is not None and c.failed_at < horizon
        ]
        for k in stale:
            del self._chains[k]


def _check_provider(provider: str) -> str:
    from lab.providers import PROVIDERS

    if provider not in PROVIDERS:
        known = ", ".join(sorted(PROVIDERS))
        raise ValueError(f"unknown provider {provider!r}; known providers: {known}")
    return provider


class _NamingTransport(httpx.BaseTransport):
    """Names each request (family, model, stream) before the recording transport sees it;
    closing it closes the recording's writer too."""

    def __init__(
        self,
        recording: httpx.BaseTransport,
        writer: Any,
        provider: str,
        meta: dict,
        chains: RetryChains,
    ):
        self._recording = recording
        self._writer = writer
        self._provider = provider
        self._meta = meta
        self._chains = chains

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        info = exchange_info(request, self._provider, self._meta)
        key = self._chains.name(request, info)
        request.extensions = {**request.extensions, "lab": info}
        try:
            response = self._recording.handle_request(request)
        except BaseException:
            self._chains.ended(key, None)
            raise
        self._chains.ended(key, response.status_code)
        return response

    def close(self) -> None:
        try:
            self._recording.close()
        finally:
            self._writer.close()


class _AsyncNamingTransport(httpx.AsyncBaseTransport):
    def __init__(
        self,
        recording: httpx.AsyncBaseTransport,
        writer: Any,
        provider: str,
        meta: dict,
        chains: RetryChains,
    ):
        self._recording = recording
        self._writer = writer
        self._provider = provider
        self._meta = meta
        self._chains = chains

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        info = exchange_info(request, self._provider, self._meta)
        key = self._chains.name(request, info)
        request.extensions = {**request.extensions, "lab": info}
        try:
            response = await self._recording.handle_async_request(request)
        except BaseException:
            self._chains.ended(key, None)
            raise
        self._chains.ended(key, response.status_code)
        return response

    async def aclose(self) -> None:
        try:
            await self._recording.aclose()
        finally:
            self._writer.close()  # waits for the last Parquet part: short, and off the stream


def _httpx2() -> Any:
    try:
        import httpx2
    except ImportError:
        raise ImportError(
            'http="httpx2" needs the httpx2 package (python -m pip install httpx2; the '
            "anthropic and openai SDKs install it)"
        ) from None
    return httpx2


def _to_httpx(request: Any) -> httpx.Request:
    return httpx.Request(
        request.method,
        str(request.url),
        headers=list(request.headers.multi_items()),
        content=request.content,
        extensions=dict(request.extensions),
    )


def _httpx2_error(httpx2: Any, exc: httpx.TransportError, request: Any) -> Exception:
    """The httpx2 exception of the same name (the SDKs retry and raise by these types)."""
    cls = getattr(httpx2, type(exc).__name__, None)
    if not (isinstance(cls, type) and issubclass(cls, httpx2.TransportError)):
        cls = httpx2.TransportError
    return cls(str(exc), request=request)


@functools.cache
def _bridge_classes() -> tuple[type, type]:
    """httpx2 transports that run a request through an httpx transport (the recording one)."""
    httpx2 = _httpx2()

    class SyncStream(httpx2.SyncByteStream):  # type: ignore[name-defined]  # imported lazily
        def __init__(self, response: httpx.Response, request: Any) -> None:
            self._response, self._request = response, request

        def __iter__(self) -> Any:
            try:
                yield from self._response.iter_raw()
            except httpx.TransportError as exc:
                raise _httpx2_error(httpx2, exc, self._request) from exc

        def close(self) -> None:
            self._response.close()

    class AsyncStream(httpx2.AsyncByteStream):  # type: ignore[name-defined]  # imported lazily
        def __init__(self, response: httpx.Response, request: Any) -> None:
            self._response, self._request = response, request

        async def __aiter__(self) -> Any:
            try:
                async for data in self._response.aiter_raw():
                    yield data
            except httpx.TransportError as exc:
                raise _httpx2_error(httpx2, exc, self._request) from exc

        async def aclose(self) -> None:
            await self._response.aclose()

    def response2(response: httpx.Response, request: Any, stream: Any) -> Any:
        return httpx2.Response(
            response.status_code,
            headers=list(response.headers.multi_items()),
            stream=stream,
            extensions={"http_version": response.extensions.get("http_version", b"HTTP/1.1")},
            request=request,
        )

    class Bridge(httpx2.BaseTransport):  # type: ignore[name-defined]  # imported lazily
        def __init__(self, inner: httpx.BaseTransport) -> None:
            self._inner = inner

        def handle_request(self, request: Any) -> Any:
            request.read()
            try:
                response = self._inner.handle_request(_to_httpx(request))
            except httpx.TransportError as exc:
                raise _httpx2_error(httpx2, exc, request) from exc
            return response2(response, request, SyncStream(response, request))

        def close(self) -> None:
            self._inner.close()

    class AsyncBridge(httpx2.AsyncBaseTransport):  # type: ignore[name-defined]  # imported lazily
        def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
            self._inner = inner

        async def handle_async_request(self, request: Any) -> Any:
            await request.aread()
            try:
                response = await self._inner.handle_async_request(_to_httpx(request))
            except httpx.TransportError as exc:
                raise _httpx2_error(httpx2, exc, request) from exc
            return response2(response, request, AsyncStream(response, request))

        async def aclose(self) -> None:
            await self._inner.aclose()

    return Bridge, AsyncBridge


def _check_http(http: str) -> None:
    if http not in ("httpx", "httpx2"):
        raise ValueError(f'http must be "httpx" or "httpx2", not {http!r}')


class RecordingClient(httpx.Client):
    """An ``httpx.Client`` whose every exchange is recorded (see :func:`recording_client`)."""

    capture_path: Path
    """The recording directory (``out/<capture_id>/``); complete once the client is closed."""


class AsyncRecordingClient(httpx.AsyncClient):
    """An ``httpx.AsyncClient`` whose every exchange is recorded."""

    capture_path: Path


def _chains(config: Any) -> RetryChains:
    from lab.config import LabConfig

    return RetryChains(LabConfig.coerce(config).client_retry_window_s)


def _writer(out: str | Path, label: str | None) -> Any:
    from lab.capture import CaptureWriter

    return CaptureWriter(out, label=label)


def recording_client(
    out: str | Path,
    *,
    provider: str,
    label: str | None = None,
    meta: dict[str, Any] | None = None,
    transport: httpx.BaseTransport | None = None,
    http: str = "httpx",
    config: Any = None,
    **httpx_kwargs: Any,
) -> RecordingClient:
    """An ``httpx.Client`` recording every exchange into a new capture under **out**.

    Hand it to an httpx-based SDK: ``openai.OpenAI(http_client=...)``,
    ``anthropic.Anthropic(http_client=...)``. Closing the client (or the SDK client that
    owns it) writes the capture.

    **Parameters**
    - **out** – the captures root; this recording goes in ``out/<capture_id>/``
      (``client.capture_path``).
    - **provider** – the family recorded with each exchange (``"openai"``, ``"anthropic"``,
      ... as in ``lab.providers.PROVIDERS``): the adapter ``lab replay`` uses.
    - **label** – stored in the capture's footer; **meta** – stored with every exchange.
    - **transport** – the real transport to record through (default ``httpx.HTTPTransport()``).
    - **http** – ``"httpx"`` (an ``httpx.Client``) or ``"httpx2"`` (an ``httpx2.Client``, for
      SDKs built on httpx2 such as ``anthropic`` 2.x).
    - **config** – a :class:`~lab.config.LabConfig` (or what ``LabConfig.coerce`` takes):
      ``client_retry_window_s`` tells an SDK's automatic retry (:class:`RetryChains`).
    - **httpx_kwargs** – anything else the client class takes (``timeout``, ``headers``, ...).
    """
    from lab.http.transports import RecordingTransport

    _check_provider(provider)
    _check_http(http)
    chains = _chains(config)
    writer = _writer(out, label)
    recording = RecordingTransport(writer, inner=transport)
    naming = _NamingTransport(recording, writer, provider, dict(meta or {}), chains)
    if http == "httpx2":
        bridge, _ = _bridge_classes()
        client2 = _httpx2().Client(transport=bridge(naming), **httpx_kwargs)
        client2.capture_path = writer.path
        return client2
    client = RecordingClient(transport=naming, **httpx_kwargs)
    client.capture_path = writer.path
    return client


def async_recording_client(
    out: str | Path,
    *,
    provider: str,
    label: str | None = None,
    meta: dict[str, Any] | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    http: str = "httpx",
    config: Any = None,
    **httpx_kwargs: Any,
) -> AsyncRecordingClient:
    """:func:`recording_client` for async SDKs (``openai.AsyncOpenAI(http_client=...)``)."""
    from lab.http.transports import AsyncRecordingTransport

    _check_provider(provider)
    _check_http(http)
    chains = _chains(config)
    writer = _writer(out, label)
    recording = AsyncRecordingTransport(writer, inner=transport)
    naming = _AsyncNamingTransport(recording, writer, provider, dict(meta or {}), chains)
    if http == "httpx2":
        _, bridge = _bridge_classes()
        client2 = _httpx2().AsyncClient(transport=bridge(naming), **httpx_kwargs)
        client2.capture_path = writer.path
        return client2
    client = AsyncRecordingClient(transport=naming, **httpx_kwargs)
    client.capture_path = writer.path
    return client
