"""Per-exchange limits at the network edge: a total time limit that a trickle cannot dodge.

httpx's timeouts are per socket operation, so a server that sends one byte every 0.5 s, or
one header line every 2 s, is never timed out. :func:`deadline` sets a wall-clock deadline
for the exchanges started inside it (a context variable, so it follows the thread or the
asyncio task); the network streams of a transport passed through :func:`install` clamp every
read, write and connect to the time left, and fail at the deadline with a timeout that
:func:`expired` recognises. :func:`lab.stream.run_stream` sets the deadline from
``LabConfig.max_exchange_s`` around each attempt; a recording transport records such an
exchange with ``end_reason="time_limit"`` and replay raises :class:`LimitExceeded` where the
recording ends, so a replay ends the way the live stream did without looking at a clock.

The byte limit (``LabConfig.max_exchange_bytes``) is counted by ``run_stream`` itself on the
decoded body, read by read, so live and replay stop at the same read.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

from lab.capture.schema import LIMIT_END_REASONS  # re-exported: the one definition is there
from lab.exceptions import LabError

__all__ = [
    "LIMIT_END_REASONS",
    "LimitExceeded",
    "byte_limit_message",
    "current_deadline_message",
    "deadline",
    "error_body_limit_message",
    "expired",
    "install",
]


def byte_limit_message(max_bytes: int | None) -> str:
    """What a stream the byte limit (``LabConfig.max_exchange_bytes``) ended says."""
    return (
        f"the response went past the byte limit of {max_bytes} decoded bytes "
        "(LabConfig.max_exchange_bytes); the lab stopped reading"
    )


def error_body_limit_message(max_bytes: int | None) -> str:
    """What an HTTP error body cut at ``LabConfig.max_error_body_bytes`` says."""
    return (
        f"the error body went past {max_bytes} decoded bytes "
        "(LabConfig.max_error_body_bytes); the lab read no further"
    )


class LimitExceeded(httpx.TransportError, LabError):
    """An exchange went past a limit of ``LabConfig`` (``end_reason`` says which).

    Raised by replay after the last recorded read of an exchange the limit ended live; the
    message is the one recorded.
    """

    def __init__(self, message: str, *, end_reason: str, request: httpx.Request | None = None):
        super().__init__(message, request=request)
        self.end_reason = end_reason


class _Deadline:
    __slots__ = ("at", "seconds", "fired")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds
        self.fired = False

    def message(self) -> str:
        return (
            f"the exchange went past its total time limit of {self.seconds:g} s "
            "(LabConfig.max_exchange_s); the lab stopped it"
        )

    def clamp(self, timeout: float | None, error: type[Exception]) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            self.fired = True
            raise error(self.message())
        return left if timeout is None or left < timeout else timeout


_CURRENT: contextvars.ContextVar[_Deadline | None] = contextvars.ContextVar(
    "lab_exchange_deadline", default=None
)


@contextmanager
def deadline(seconds: float | None) -> Iterator[Any]:
    """Exchanges started inside this block must end within ``seconds`` (None: no limit).

    Yields the deadline (or None); :func:`expired` tells whether it was what failed."""
    if seconds is None:
        yield None
        return
    d = _Deadline(seconds)
    token = _CURRENT.set(d)
    try:
        yield d
    finally:
        _CURRENT.reset(token)


def current_deadline_message() -> str | None:
    """What the current deadline says when it ends an exchange (None: there is none)."""
    d = _CURRENT.get()
    return d.message() if d is not None else None


def expired(d: Any = None) -> bool:
    """True when the deadline (``d``, or the current one) ended an operation."""
    d = d if d is not None else _CURRENT.get()
    return bool(d is not None and d.fired)


# -- the network streams -------------------------------------------------------------------


def _timed(call: Any, timeout: float | None, error: type[Exception], d: _Deadline) -> Any:
    clamped = d.clamp(timeout, error)
    try:
        return call(clamped)
    except error:
        if clamped != timeout:  # the deadline, not the operation's own timeout, ran out
            d.fired = True
            raise error(d.message()) from None
        raise


class _Stream(httpcore.NetworkStream):
    __slots__ = ("_s",)

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._s = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        d = _CURRENT.get()
        if d is None:
            return self._s.read(max_bytes, timeout)
        return _timed(lambda t: self._s.read(max_bytes, t), timeout, httpcore.ReadTimeout, d)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        d = _CURRENT.get()
        if d is None:
            return self._s.write(buffer, timeout)
        return _timed(lambda t: self._s.write(buffer, t), timeout, httpcore.WriteTimeout, d)

    def close(self) -> None:
        self._s.close()

    def start_tls(self, ssl_context: Any, server_hostname: Any = None, timeout: Any = None):
        d = _CURRENT.get()
        if d is None:
            return _Stream(self._s.start_tls(ssl_context, server_hostname, timeout))
        inner = _timed(
            lambda t: self._s.start_tls(ssl_context, server_hostname, t),
            timeout,
            httpcore.ConnectTimeout,
            d,
        )
        return _Stream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._s.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        d = _CURRENT.get()
        if d is None:  # opened outside any deadline: left as it is, costing nothing per read
            return self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _Stream(
            _timed(
                lambda t: self._inner.connect_tcp(host, port, t, local_address, socket_options),
                timeout,
                httpcore.ConnectTimeout,
                d,
            )
        )

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


async def _atimed(call: Any, timeout: float | None, error: type[Exception], d: _Deadline) -> Any:
    clamped = d.clamp(timeout, error)
    try:
        return await call(clamped)
    except error:
        if clamped != timeout:
            d.fired = True
            raise error(d.message()) from None
        raise


class _AsyncStream(httpcore.AsyncNetworkStream):
    __slots__ = ("_s",)

    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._s = inner

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        d = _CURRENT.get()
        if d is None:
            return await self._s.read(max_bytes, timeout)
        return await _atimed(lambda t: self._s.read(max_bytes, t), timeout, httpcore.ReadTimeout, d)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        d = _CURRENT.get()
        if d is None:
            return await self._s.write(buffer, timeout)
        return await _atimed(lambda t: self._s.write(buffer, t), timeout, httpcore.WriteTimeout, d)

    async def aclose(self) -> None:
        await self._s.aclose()

    async def start_tls(self, ssl_context: Any, server_hostname: Any = None, timeout: Any = None):
        d = _CURRENT.get()
        if d is None:
            return _AsyncStream(await self._s.start_tls(ssl_context, server_hostname, timeout))
        inner = await _atimed(
            lambda t: self._s.start_tls(ssl_context, server_hostname, t),
            timeout,
            httpcore.ConnectTimeout,
            d,
        )
        return _AsyncStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._s.get_extra_info(info)


class _AsyncBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        d = _CURRENT.get()
        if d is None:  # opened outside any deadline: left as it is
            return await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        stream = await _atimed(
            lambda t: self._inner.connect_tcp(host, port, t, local_address, socket_options),
            timeout,
            httpcore.ConnectTimeout,
            d,
        )
        return _AsyncStream(stream)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Any = None
    ) -> httpcore.AsyncNetworkStream:
        return _AsyncStream(await self._inner.connect_unix_socket(path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def install(transport: Any) -> bool:
    """Make ``transport``'s connections keep the current :func:`deadline`.

    Works on ``httpx.HTTPTransport`` and ``httpx.AsyncHTTPTransport`` (direct, HTTP proxy
    or SOCKS pools): their connection pool gets a network backend whose streams clamp every
    operation to the time left. Only a connection opened inside a deadline is wrapped (one
    opened outside, by an SDK sharing the client, costs nothing and is not limited when
    reused); a wrapper that keeps its real transport as ``inner`` (the
    lab's recording and sweep transports) is followed to it. Returns False, changing
    nothing, for any other transport (a mock, a replay, a custom one): there the time limit
    does not apply. Idempotent.
    """
    for _ in range(8):  # wrappers of wrappers, not a cycle
        if hasattr(transport, "_pool") or not hasattr(transport, "inner"):
            break
        transport = transport.inner
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if isinstance(backend, (_Backend, _AsyncBackend)):
        return True
    if isinstance(backend, httpcore.NetworkBackend):
        pool._network_backend = _Backend(backend)  # type: ignore[union-attr]
        return True
    if isinstance(backend, httpcore.AsyncNetworkBackend):
        pool._network_backend = _AsyncBackend(backend)  # type: ignore[union-attr]
        return True
    return False
