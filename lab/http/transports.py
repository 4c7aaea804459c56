"""The record/replay seam: two httpx transports.

``RecordingTransport(writer, inner)`` wraps a real transport. Every exchange is recorded
into a :class:`~lab.capture.CaptureWriter`: the request (redacted), the response line, and
every network read as it arrives (bytes and a monotonic offset), teed through unbuffered —
the client sees read 1 while the server is still sending.

``ReplayTransport(exchanges)`` serves recorded exchanges back in order, one per request,
with the recorded status, headers and *the same read boundaries*; an exchange that ended
in a timeout or read error raises it again after its last read. It is as small as
``httpx.MockTransport`` and works for both ``httpx.Client`` and ``httpx.AsyncClient``.

Content encoding (what was chosen, and why)
-------------------------------------------
The recorded bytes are the inner transport's raw stream (``Response.iter_raw`` level:
transfer-encoding removed, content-encoding *not* decoded) — exactly what the wire carried.
So that those bytes are the SSE text itself, ``RecordingTransport`` by default sends
``Accept-Encoding: identity`` (``accept_encoding=None`` leaves the request untouched). The
recorded ``Content-Encoding`` response header is kept, in the capture and on replay, so if a
server compressed anyway the replayed response decodes exactly as the live one did
(``iter_raw`` gives the same compressed bytes, ``iter_bytes`` the same decoded ones). Replay
drops only ``Content-Length`` and ``Transfer-Encoding``, which describe the old framing.

Which exchange is being recorded comes from ``request.extensions["lab"]``::

    {"stream_id": ..., "attempt": 0, "attempt_label": "default",
     "provider": "openrouter", "model": "...", "meta": {...}}

When absent, a fresh stream_id, attempt 0 and label "default" are used. Both transports
hand the response the exchange's recorder as ``response.extensions["lab.exchange"]`` (so
the client can say why an exchange failed: ``note_error``).

A secret the request sent (its key, a password field) that the response echoes is replaced
by a same-length marker before the client or the capture sees it (``ExchangeRecorder.tee``),
so a live result and its replay are the same and neither holds the key.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from lab.capture.records import RecordedExchange
from lab.capture.schema import CUT_END_REASONS, LIMIT_END_REASONS
from lab.exceptions import LabError
from lab.http.limits import LimitExceeded, current_deadline_message, expired, install

if TYPE_CHECKING:
    from lab.capture.writer import CaptureWriter, ExchangeRecorder

__all__ = [
    "AsyncRecordingTransport",
    "RecordingCut",
    "RecordingTransport",
    "ReplayExhausted",
    "ReplayMismatch",
    "ReplayTransport",
    "replay_transport_for_body",
]


# -- recording -----------------------------------------------------------------------------


def _start(
    writer: CaptureWriter, request: httpx.Request, accept_encoding: str | None
) -> ExchangeRecorder:
    if accept_encoding is not None:
        request.headers["Accept-Encoding"] = accept_encoding
    info: Mapping[str, Any] = request.extensions.get("lab") or {}
    return writer.exchange(
        stream_id=str(info.get("stream_id") or f"s{uuid.uuid4().hex}"),
        attempt=int(info.get("attempt") or 0),
        attempt_label=str(info.get("attempt_label") or "default"),
        provider=str(info.get("provider") or request.url.host or "unknown"),
        model=info.get("model"),
        method=request.method,
        url=str(request.url),
        request_headers=request.headers,
        request_body=request.content,
        meta=info.get("meta"),
    )


def _failed(recorder: ExchangeRecorder, exc: BaseException) -> None:
    if isinstance(exc, LimitExceeded):
        recorder.on_end(exc.end_reason, str(exc))
    elif isinstance(exc, httpx.TimeoutException) and expired():  # LabConfig.max_exchange_s
        recorder.on_end("time_limit", str(exc))
    elif isinstance(exc, httpx.TimeoutException):
        recorder.on_end("timeout", exc)
    elif isinstance(exc, Exception):
        recorder.on_end("read_error", exc)
    elif expired():  # a task cancelled at its deadline (``lab proxy``'s watchdog)
        recorder.on_end("time_limit", current_deadline_message())
    else:  # KeyboardInterrupt, task cancellation, GeneratorExit
        recorder.on_end("cancelled", exc)


def _http_version(response: httpx.Response) -> str:
    version = response.extensions.get("http_version", b"HTTP/1.1")
    return version.decode("ascii", "replace") if isinstance(version, bytes) else str(version)


class _RecordingStream(httpx.SyncByteStream):
    """Tees every read into the recorder, passing it on unbuffered."""

    def __init__(self, inner: httpx.SyncByteStream, recorder: ExchangeRecorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def __iter__(self) -> Iterator[bytes]:
        recorder = self._recorder
        return recorder.tee(self._inner, lambda exc: _failed(recorder, exc))

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._recorder.on_end("cancelled")  # no-op after eof / error


class _AsyncRecordingStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, recorder: ExchangeRecorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def __aiter__(self) -> AsyncIterator[bytes]:
        recorder = self._recorder
        return recorder.atee(self._inner, lambda exc: _failed(recorder, exc))

    def aiter_batches(self) -> AsyncIterator[list[bytes]]:
        """The reads in batches, as the client should get them: every read that arrived
        since the last batch when the inner stream hands them over so (an
        :class:`~lab.http.wire.AsyncWireTransport` response), else one read per batch.
        Recorded exactly as iterating the stream records them, each read at its arrival."""
        recorder = self._recorder
        inner = getattr(self._inner, "aiter_batches", None)
        batches = inner() if inner is not None else _one_per_batch(self._inner)
        return recorder.atee_batches(batches, lambda exc: _failed(recorder, exc))

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._recorder.on_end("cancelled")


async def _one_per_batch(
    stream: httpx.AsyncByteStream,
) -> AsyncIterator[tuple[list[bytes], list[int]]]:
    async for data in stream:
        if data:
            yield [data if type(data) is bytes else bytes(data)], [time.monotonic_ns()]


def _decode_for_secrets(
    recorder: ExchangeRecorder, headers: httpx.Headers
) -> tuple[httpx.Headers, Any]:
    """(headers, decoder): when the request sent a secret and the body is compressed, the
    byte scrubber cannot see an echo inside it, so the exchange is recorded (and handed on)
    decoded: the headers lose ``Content-Encoding`` and ``Content-Length``, and the decoder
    undoes the encoding read by read. Otherwise the headers as they came and None.

    A body in an encoding the lab cannot decode (:func:`~lab.http.decoding.undecodable`:
    ``br``/``zstd`` without their libraries, unknown names) is recorded as it came, and the
    exchange says that its response was not looked into (``meta["lab.undecoded"]``)."""
    from lab.http.decoding import decoder_for, undecodable

    encoding = headers.get("content-encoding")
    if not recorder.scrubs or not encoding:
        return headers, None
    if undecodable(encoding):
        recorder.note_undecoded(encoding)
        return headers, None
    decoder = decoder_for(encoding)
    if decoder is None:
        return headers, None
    recorder.note_decoded(encoding)
    kept = [
        (k, v)
        for k, v in headers.multi_items()
        if k.lower() not in ("content-encoding", "content-length")
    ]
    return httpx.Headers(kept), decoder


class _Decoded(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A compressed body decoded read by read (:func:`_decode_for_secrets`)."""

    def __init__(self, inner: Any, decoder: Any) -> None:
        self._inner = inner
        self._decoder = decoder

    def __iter__(self) -> Iterator[bytes]:
        for data in self._inner:
            yield from self._decoder.feed(data)
        yield from self._decoder.flush()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for data in self._inner:
            for piece in self._decoder.feed(data):
                yield piece
        for piece in self._decoder.flush():
            yield piece

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()


class RecordingTransport(httpx.BaseTransport):
    """Record every exchange through ``inner`` into ``writer`` (see module docstring).

    **Parameters**
    - **writer** – the :class:`~lab.capture.CaptureWriter` of this recording (not closed
      by the transport).
    - **inner** – the real transport (default ``httpx.HTTPTransport()``).
    - **accept_encoding** – value forced on the ``Accept-Encoding`` request header
      (default ``"identity"`` so the recorded bytes are plain SSE); None leaves it alone.
    """

    def __init__(
        self,
        writer: CaptureWriter,
        inner: httpx.BaseTransport | None = None,
        *,
        accept_encoding: str | None = "identity",
    ) -> None:
        self.writer = writer
        self.inner = inner if inner is not None else httpx.HTTPTransport()
        self.accept_encoding = accept_encoding
        install(self.inner)  # LabConfig.max_exchange_s holds however the bytes trickle

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        recorder = _start(self.writer, request, self.accept_encoding)
        try:
            response = self.inner.handle_request(request)
        except BaseException as exc:
            _failed(recorder, exc)
            raise
        headers, decoder = _decode_for_secrets(recorder, response.headers)
        recorder.on_response(response.status_code, headers, _http_version(response))
        assert isinstance(response.stream, httpx.SyncByteStream)
        stream = response.stream if decoder is None else _Decoded(response.stream, decoder)
        return httpx.Response(
            response.status_code,
            headers=recorder.client_headers(headers),
            stream=_RecordingStream(stream, recorder),
            extensions={**response.extensions, "lab.exchange": recorder},
            request=request,
        )

    def close(self) -> None:
        self.inner.close()


class AsyncRecordingTransport(httpx.AsyncBaseTransport):
    """``RecordingTransport`` for ``httpx.AsyncClient`` (inner: ``AsyncHTTPTransport``)."""

    def __init__(
        self,
        writer: CaptureWriter,
        inner: httpx.AsyncBaseTransport | None = None,
        *,
        accept_encoding: str | None = "identity",
    ) -> None:
        self.writer = writer
        self.inner = inner if inner is not None else httpx.AsyncHTTPTransport()
        self.accept_encoding = accept_encoding
        install(self.inner)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        recorder = _start(self.writer, request, self.accept_encoding)
        try:
            response = await self.inner.handle_async_request(request)
        except BaseException as exc:
            _failed(recorder, exc)
            raise
        headers, decoder = _decode_for_secrets(recorder, response.headers)
        recorder.on_response(response.status_code, headers, _http_version(response))
        assert isinstance(response.stream, httpx.AsyncByteStream)
        stream = response.stream if decoder is None else _Decoded(response.stream, decoder)
        return httpx.Response(
            response.status_code,
            headers=recorder.client_headers(headers),
            stream=_AsyncRecordingStream(stream, recorder),
            extensions={**response.extensions, "lab.exchange": recorder},
            request=request,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


# -- replay --------------------------------------------------------------------------------


class ReplayExhausted(httpx.TransportError, LabError):
    """The client asked for more exchanges than were recorded."""


class ReplayMismatch(httpx.TransportError, LabError):
    """``strict=True``: the request body differs from the recorded one."""


class RecordingCut(httpx.TransportError, LabError):
    """The recording ends before the exchange did, on the recorder's side.

    Raised by replay after the last recorded read of an exchange whose ``end_reason`` is in
    :data:`CUT_END_REASONS` (or instead of a response that was never recorded), so a stream
    cut by a killed or interrupted recorder is not taken for one the provider cut short.
    ``end_reason`` is the recorded one. A replay that stops where the live client stopped
    (the same guard, the same read) never reads that far and never sees it.
    """

    def __init__(self, message: str, *, end_reason: str, request: httpx.Request) -> None:
        super().__init__(message, request=request)
        self.end_reason = end_reason


_STALE_HEADERS = {"content-length", "transfer-encoding"}


def _recorded_error(
    exchange: RecordedExchange, request: httpx.Request
) -> httpx.TransportError | None:
    """The exception to raise again after the last read, or None for a clean EOF."""
    if exchange.end_reason in CUT_END_REASONS:
        why = exchange.error or (
            "the recording process stopped before the exchange ended"
            if exchange.end_reason == "incomplete"
            else "the client stopped reading"
        )
        return RecordingCut(
            f"the recording ends here (end_reason={exchange.end_reason!r}): {why}",
            end_reason=exchange.end_reason,
            request=request,
        )
    if exchange.end_reason in LIMIT_END_REASONS:  # the lab's own limit ended it live
        return LimitExceeded(
            _message(exchange.error) or f"the exchange went past a limit ({exchange.end_reason})",
            end_reason=exchange.end_reason,
            request=request,
        )
    if exchange.end_reason == "timeout":
        base: type[httpx.TransportError] = httpx.TimeoutException
        default: type[httpx.TransportError] = httpx.ReadTimeout
    elif exchange.end_reason == "read_error":
        base, default = httpx.TransportError, httpx.ReadError
    else:  # eof
        return None
    error = exchange.error or ""
    name, _, message = error.partition(": ")
    cls = getattr(httpx, name, None)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        cls, message = default, error
    return cls(message or f"recorded {exchange.end_reason}", request=request)


def _message(error: str | None) -> str:
    """A recorded ``error`` (``"ReadTimeout: text"``) without the exception's name."""
    name, sep, message = (error or "").partition(": ")
    return message if sep and name.isidentifier() else (error or "")


class _ReplayStream(httpx.SyncByteStream, httpx.AsyncByteStream):
    def __init__(
        self,
        exchange: RecordedExchange,
        request: httpx.Request,
        t0: int | None,
    ) -> None:
        self._exchange = exchange
        self._request = request
        self._t0 = t0  # monotonic ns of the replayed request send, when realtime

    def _delay(self, t_ns: int) -> float:
        if self._t0 is None:
            return 0.0
        return max(0.0, (self._t0 + t_ns - time.monotonic_ns()) / 1e9)

    def __iter__(self) -> Iterator[bytes]:
        ex = self._exchange
        if ex is None:  # closed: the recording is let go (close)
            raise httpx.StreamClosed()
        for data, t_ns in zip(ex.reads, _times(ex), strict=True):
            delay = self._delay(t_ns)
            if delay:
                time.sleep(delay)
            yield data
        error = _recorded_error(ex, self._request)
        if error is not None:
            if ex.t_end_ns is not None and self._delay(ex.t_end_ns):
                time.sleep(self._delay(ex.t_end_ns))
            raise error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        ex = self._exchange
        if ex is None:  # closed: the recording is let go (close)
            raise httpx.StreamClosed()
        for data, t_ns in zip(ex.reads, _times(ex), strict=True):
            delay = self._delay(t_ns)
            if delay:
                await asyncio.sleep(delay)
            yield data
        error = _recorded_error(ex, self._request)
        if error is not None:
            if ex.t_end_ns is not None and self._delay(ex.t_end_ns):
                await asyncio.sleep(self._delay(ex.t_end_ns))
            raise error

    def close(self) -> None:
        """Let go of the recording once the response is closed: whatever still holds the
        response (a caller, or a cycle waiting for a collection) does not keep the
        recorded reads with it."""
        self._exchange = self._request = None  # type: ignore[assignment]

    async def aclose(self) -> None:
        self.close()


def _times(ex: RecordedExchange) -> list[int]:
    if len(ex.read_t_ns) == len(ex.reads):
        return list(ex.read_t_ns)
    return [0] * len(ex.reads)


class ReplayTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Serve recorded exchanges in order, one per request, with their read boundaries.

    **Parameters**
    - **exchanges** – ``RecordedExchange`` objects (a ``RecordedRequest`` or a ``Capture``
      is accepted too and expanded).
    - **realtime** – sleep to reproduce the recorded header and read offsets.
    - **strict** – raise :class:`ReplayMismatch` when the request body differs from the
      recorded one (compared after the same redaction the recorder applies).

    ``requests_seen`` lists what the client asked for, in order; ``remaining`` counts the
    exchanges not served yet. Asking for more than were recorded raises
    :class:`ReplayExhausted`.
    """

    def __init__(
        self,
        exchanges: Sequence[RecordedExchange] | Any,
        *,
        realtime: bool = False,
        strict: bool = False,
    ) -> None:
        source = getattr(exchanges, "exchanges", None)
        if source is not None:  # RecordedRequest (list) or Capture (method)
            exchanges = source() if callable(source) else source
        self.exchanges: list[RecordedExchange] = list(exchanges)
        self.realtime = realtime
        self.strict = strict
        self.requests_seen: list[httpx.Request] = []
        self._lock = threading.Lock()

    @property
    def remaining(self) -> int:
        return len(self.exchanges) - len(self.requests_seen)

    def _serve(self, request: httpx.Request) -> tuple[httpx.Response, float]:
        t0 = time.monotonic_ns()
        with self._lock:
            index = len(self.requests_seen)
            self.requests_seen.append(request)
        if index >= len(self.exchanges):
            raise ReplayExhausted(
                f"replay has {len(self.exchanges)} recorded exchange(s); the client sent "
                f"request #{index + 1} ({request.method} {request.url})",
                request=request,
            )
        ex = self.exchanges[index]
        if self.strict:
            from lab.capture.redact import Redactor

            if Redactor().body(request.content) != ex.request_body:
                raise ReplayMismatch(
                    f"request #{index + 1} body differs from the recorded one "
                    f"(stream_id={ex.stream_id!r}, attempt={ex.attempt})",
                    request=request,
                )
        delay = 0.0
        if self.realtime and ex.t_headers_ns:
            delay = max(0.0, (t0 + ex.t_headers_ns - time.monotonic_ns()) / 1e9)
        if ex.status is None:  # no response was recorded: the failure came before headers
            error = _recorded_error(ex, request) or httpx.ReadError(
                f"recorded exchange has no response (end_reason={ex.end_reason!r})",
                request=request,
            )
            raise error
        headers = [
            (k, v) for k, v in ex.response_headers.items() if k.lower() not in _STALE_HEADERS
        ]
        version = (ex.http_version or "HTTP/1.1").encode("ascii", "replace")
        response = httpx.Response(
            ex.status,
            headers=headers,
            stream=_ReplayStream(ex, request, t0 if self.realtime else None),
            # what the recorder did about secrets (read by lab.stream._note_scrubbed)
            extensions={"http_version": version, "lab.recorded_meta": ex.meta or {}},
            request=request,
        )
        return response, delay

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        response, delay = self._serve(request)
        if delay:
            time.sleep(delay)
        return response

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        await request.aread()
        response, delay = self._serve(request)
        if delay:
            await asyncio.sleep(delay)
        return response


def replay_transport_for_body(
    body: bytes | str | Iterable[bytes],
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> ReplayTransport:
    """A ``ReplayTransport`` serving one synthetic exchange.

    ``body`` as bytes or str is one read; an iterable of bytes is one read per item
    (boundaries kept). Default headers: ``content-type: text/event-stream``.
    """
    if isinstance(body, str):
        reads = [body.encode("utf-8")]
    elif isinstance(body, bytes | bytearray | memoryview):
        reads = [bytes(body)]
    else:
        reads = [bytes(b) for b in body]
    reads = [r for r in reads if r]
    exchange = RecordedExchange(
        stream_id="synthetic",
        attempt=0,
        attempt_label="default",
        provider="synthetic",
        model=None,
        method="POST",
        url="http://replay.invalid/",
        request_headers={},
        request_body=b"",
        status=status,
        http_version="HTTP/1.1",
        response_headers=dict(headers) if headers else {"content-type": "text/event-stream"},
        reads=reads,
        read_t_ns=[0] * len(reads),
        end_reason="eof",
        error=None,
    )
    return ReplayTransport([exchange])
