"""httpx clients that record every exchange, to hand to an httpx-based SDK.

::

    import openai, lab

    http = lab.recording_client("captures", provider="openai")
    client = openai.OpenAI(base_url=..., api_key=..., http_client=http)
    ...                                  # use the SDK as usual; every stream is recorded
    http.close()                         # writes the capture; http.capture_path says where

The current ``anthropic`` SDK (2.x) speaks ``httpx2``, httpx's successor, and refuses an
``httpx.Client``; pass ``http="httpx2"`` to get an ``httpx2.Client`` recording through the
same transport (a thin bridge converts each request and response; the bytes are the same).
``openai`` 3.x takes either.

Each request becomes one logical stream in the capture (its own ``stream_id``, attempt 0,
the provider family given here and the model read from the request), recorded through
:class:`~lab.http.transports.RecordingTransport` like ``lab record``: redacted headers (the
SDK's key never reaches disk), every read with its arrival time. ``lab replay`` then replays
it with that family's adapter.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import httpx

__all__ = [
    "AsyncRecordingClient",
    "RecordingClient",
    "async_recording_client",
    "exchange_info",
    "recording_client",
]


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


def _check_provider(provider: str) -> str:
    from lab.providers import PROVIDERS

    if provider not in PROVIDERS:
        known = ", ".join(sorted(PROVIDERS))
        raise ValueError(f"unknown provider {provider!r}; known providers: {known}")
    return provider


class _NamingTransport(httpx.BaseTransport):
    """Names each request (family, model, stream) before the recording transport sees it;
    closing it closes the recording's writer too."""

    def __init__(self, recording: httpx.BaseTransport, writer: Any, provider: str, meta: dict):
        self._recording = recording
        self._writer = writer
        self._provider = provider
        self._meta = meta

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        request.extensions = {
            **request.extensions,
            "lab": exchange_info(request, self._provider, self._meta),
        }
        return self._recording.handle_request(request)

    def close(self) -> None:
        try:
            self._recording.close()
        finally:
            self._writer.close()


class _AsyncNamingTransport(httpx.AsyncBaseTransport):
    def __init__(self, recording: httpx.AsyncBaseTransport, writer: Any, provider: str, meta: dict):
        self._recording = recording
        self._writer = writer
        self._provider = provider
        self._meta = meta

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        request.extensions = {
            **request.extensions,
            "lab": exchange_info(request, self._provider, self._meta),
        }
        return await self._recording.handle_async_request(request)

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
    - **httpx_kwargs** – anything else the client class takes (``timeout``, ``headers``, ...).
    """
    from lab.http.transports import RecordingTransport

    _check_provider(provider)
    _check_http(http)
    writer = _writer(out, label)
    recording = RecordingTransport(writer, inner=transport)
    naming = _NamingTransport(recording, writer, provider, dict(meta or {}))
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
    **httpx_kwargs: Any,
) -> AsyncRecordingClient:
    """:func:`recording_client` for async SDKs (``openai.AsyncOpenAI(http_client=...)``)."""
    from lab.http.transports import AsyncRecordingTransport

    _check_provider(provider)
    _check_http(http)
    writer = _writer(out, label)
    recording = AsyncRecordingTransport(writer, inner=transport)
    naming = _AsyncNamingTransport(recording, writer, provider, dict(meta or {}))
    if http == "httpx2":
        _, bridge = _bridge_classes()
        client2 = _httpx2().AsyncClient(transport=bridge(naming), **httpx_kwargs)
        client2.capture_path = writer.path
        return client2
    client = AsyncRecordingClient(transport=naming, **httpx_kwargs)
    client.capture_path = writer.path
    return client
