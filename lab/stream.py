"""The one code path from a request body to a :class:`~lab.result.StreamResult`.

Live recording and offline replay both call :func:`run_stream`; only the httpx transport
differs (a real one wrapped in :class:`~lab.http.transports.RecordingTransport`, or a
:class:`~lab.http.transports.ReplayTransport` serving a capture). Per logical request::

    plan = DegradationPlan(body, ...)             # lab.degrade, pure
    for each attempt (plan.current):
        POST attempt.body                         # extensions["lab"] names the attempt
        HTTP failure -> plan.on_failure(status, message) -> next attempt | error chunk
        200 -> bytes -> adapter.new_decoder() (SSE) -> adapter.take(event) -> ProcessedChunks
               pre-commit SSE error -> plan.on_failure -> cancel, reset, next attempt
        EOF -> adapter.finish();  timeout / read error -> adapter.fail(error)
    chunks -> Processor -> outcome;  chunks -> StreamResult

Errors never escape as exceptions: a failure becomes an error chunk, as it would for a user
of the pipeline. Only programming errors (bad provider name, bad config) raise.
"""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from lab.config import LabConfig
from lab.degrade import Attempt, DegradationPlan
from lab.errors import classify_error, code_string, parse_status_code
from lab.http.decoding import decoder_for
from lab.http.limits import (
    LimitExceeded,
    byte_limit_message,
    deadline,
    error_body_limit_message,
    expired,
)
from lab.http.limits import install as install_limits
from lab.http.sse import WINDOW
from lab.http.transports import RecordingCut, ReplayExhausted
from lab.model import NO_METADATA, NO_THOUGHTS, ProcessedChunk, ProviderError, Usage
from lab.processor import Processor, model_info
from lab.providers import adapter_for
from lab.providers.base import RetryAttempt, StreamAdapter
from lab.result import AttemptInfo, ChunkOrigin, StreamResult, counted_of

__all__ = ["client_timeout", "new_stream_id", "run_stream"]


def client_timeout(read_s: float) -> httpx.Timeout:
    """The timeouts of every client the lab builds (live, recorder, replay): 30 s to
    connect, write and wait for a connection, ``read_s`` between reads
    (``LabConfig.inactivity_timeout_s``)."""
    return httpx.Timeout(30.0, read=read_s)


@functools.lru_cache(maxsize=64)
def _parsed_url(url: str) -> httpx.URL:
    """``url`` parsed once. httpx parses a URL given as a string again for every request
    (twice: the client's merge, then the request), ~50 us of a replayed stream's fixed cost;
    an ``httpx.URL`` is immutable, so every stream to the same endpoint shares one."""
    return httpx.URL(url)


def new_stream_id() -> str:
    """A time-sortable id for one logical request."""
    return f"s{time.time_ns():x}{os.urandom(3).hex()}"


class _SinglePlan:
    """A plan that never degrades (``LabConfig.degrade = False``)."""

    def __init__(self, body: dict) -> None:
        self.current = Attempt(label="default", body=body)

    def on_failure(self, status: int | None, message: str) -> None:
        return None


class _RecordedRetries:
    """A plan that follows a recording's client retries: where the recorded attempt after
    a failure is one the client sent again on its own (label ``client_retry``, see
    :class:`lab.clients.RetryChains`), the same body goes again under that label; every
    other failure is the wrapped plan's to decide."""

    def __init__(self, plan: Any, labels: list[str]) -> None:
        self._plan = plan
        self._labels = labels
        self._n = 0
        self.current = plan.current

    @property
    def history(self) -> Any:
        return getattr(self._plan, "history", None)

    def on_failure(self, status: int | None, message: str) -> Any:
        from lab.clients import CLIENT_RETRY_LABEL
        from lab.degrade import Attempt

        self._n += 1
        if self._n < len(self._labels) and self._labels[self._n] == CLIENT_RETRY_LABEL:
            self.current = Attempt(label=CLIENT_RETRY_LABEL, body=self.current.body)
            return self.current
        nxt = self._plan.on_failure(status, message)
        if nxt is not None:
            self.current = nxt
        return nxt


def _make_plan(adapter: StreamAdapter, body: dict, degrade: bool) -> Any:
    if not degrade or not adapter.degrades:
        return _SinglePlan(body)
    return DegradationPlan(
        body,
        mandatory_keys=adapter.mandatory_keys_for(body),
        priority_keys=adapter.priority_keys,
        degrade_on_502=adapter.degrade_on_502,
        degrade_on_opaque_5xx=adapter.degrade_on_opaque_5xx,
        # the adapters' classifiers return bool; lab/providers/base.py declares `str | None`
        # (the lead's rewrite fixes it there, and warn_unused_ignores then flags this line)
        extra_classifiers=adapter.extra_classifiers(body),
    )


def _classification(plan: Any) -> str | None:
    """How the plan classified the last failure (``generic_400``, ...), if it did."""
    history = getattr(plan, "history", None)
    return history[-1].classification if history else None


def run_stream(
    provider: str,
    body: dict,
    *,
    client: httpx.Client | None = None,
    transport: httpx.BaseTransport | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    config: LabConfig | Any = None,
    tools: list[dict] | None = None,
    stream_id: str | None = None,
    meta: dict | None = None,
    on_chunk: Callable[[ProcessedChunk], None] | None = None,
    path: str | None = None,
    recorded_labels: list[str] | None = None,
) -> StreamResult:
    """Send ``body`` to ``provider`` (degrading it on failure) and return the whole result.

    **Parameters**
    - **provider** – ``"openrouter"``, ``"openai"``, ``"deepseek"``, ``"zai"``, ``"nvidia"``,
      ``"custom"``, ``"google"`` or ``"anthropic"``.
    - **body** – the provider-native request body (never mutated).
    - **client / transport** – an httpx client, or a transport to build one around.
    - **config** – anything :meth:`LabConfig.coerce` accepts.
    - **on_chunk** – called with every ProcessedChunk as it is produced (live display).
    - **path** – the API the request goes to, when not the family's default: ``"/responses"``
      (the OpenAI Responses API of openai, openrouter, deepseek); see
      :func:`lab.providers.adapter_for`.
    - **recorded_labels** – replay: the recorded attempts' labels, in order; an attempt a
      client sent again on its own (``client_retry``) is replayed as such.

    The API key goes into the request headers only; a recording transport redacts it.
    """
    cfg = LabConfig.coerce(config)
    model = body.get("model") if isinstance(body, dict) else None
    sid = stream_id or new_stream_id()
    adapter_cls = adapter_for(provider, path)
    if path is None and base_url and adapter_cls.family == "google":
        adapter_cls = adapter_for(provider, base_url)  # Gemini on Vertex AI: its enum numbers
    if tools is None and isinstance(body, dict) and isinstance(body.get("tools"), list):
        tools = body["tools"]
    adapter = adapter_cls(config=cfg, tools=tools, stream_id=sid, model=model)
    own_client = client is None
    if client is not None:  # the caller's client: its httpx transport keeps the deadline too
        install_limits(getattr(client, "_transport", None))
    else:
        timeout = client_timeout(cfg.inactivity_timeout_s)
        if transport is None:
            transport = httpx.HTTPTransport()
        install_limits(transport)  # max_exchange_s holds however the bytes trickle
        client = httpx.Client(transport=transport, timeout=timeout)
    plan = _make_plan(adapter, body, cfg.degrade)
    if recorded_labels and len(recorded_labels) > 1:
        plan = _RecordedRetries(plan, list(recorded_labels))
    url = _parsed_url(adapter.endpoint(base_url, model))
    headers = adapter.request_headers(api_key)

    chunks = adapter.emitted  # every chunk of every attempt, in order
    origins = adapter.origins  # one per chunk (the adapter appends both)
    attempts: list[AttemptInfo] = []
    read_t_ns: dict[int, list[int]] = {}
    divergence: list[str] = []

    def emit(new: list[ProcessedChunk]) -> None:
        adapter.emit(new)
        if new and on_chunk is not None:
            _hand_on(on_chunk, chunks, len(new))

    request = _Request(client, adapter, plan, url, headers, emit, sid, meta, divergence, on_chunk)
    try:
        n = 0
        while True:
            attempt = plan.current
            adapter.start_attempt(n)
            info = AttemptInfo(attempt=n, label=attempt.label, body_keys=sorted(attempt.body))
            attempts.append(info)
            times: list[int] = []
            read_t_ns[n] = times
            with deadline(cfg.max_exchange_s) as limit:
                retry_next = request.run_attempt(attempt, info, times, limit)
            if not retry_next:
                break
            n += 1
    finally:
        if own_client:
            client.close()

    result = _assemble(adapter, chunks, origins, attempts, read_t_ns, cfg)
    result.divergence = divergence
    if tools:  # the tools the request offered: lab.toolcheck checks the calls against them
        result.facts["request_tools"] = tools
    return result


@dataclass(frozen=True, slots=True)
class _Request:
    """What every attempt of one logical request shares; :func:`run_stream` builds it once
    and runs each attempt with :meth:`run_attempt`."""

    client: httpx.Client
    adapter: StreamAdapter
    plan: Any
    url: httpx.URL
    headers: dict[str, str]
    emit: Callable[[list[ProcessedChunk]], None]
    """Appends the chunks an attempt produced to the result (and calls ``on_chunk``)."""
    stream_id: str
    meta: dict | None
    divergence: list[str]
    """Where a replay that left the recording says so (``StreamResult.divergence``)."""
    on_chunk: Callable[[ProcessedChunk], None] | None
    """Called with every chunk as it is produced (``run_stream``'s **on_chunk**)."""

    def run_attempt(
        self, attempt: Any, info: AttemptInfo, times: list[int], limit: Any = None
    ) -> bool:
        """Run one attempt (``attempt``: the plan's current one; ``info``: its row, filled in
        here; ``times``: its read arrival times). Returns True when the plan chose a next
        attempt.

        ``limit`` is the attempt's :func:`lab.http.limits.deadline`: a timeout it caused ends
        the attempt with ``time_limit``; the decoded body is counted against
        ``max_exchange_bytes`` read by read (``byte_limit``)."""
        client, adapter, plan, emit = self.client, self.adapter, self.plan, self.emit
        wire = adapter.wire_body(attempt.body)
        payload = json.dumps(wire, ensure_ascii=False, separators=(",", ":")).encode()
        request = client.build_request(
            "POST",
            self.url,
            content=payload,
            headers=self.headers,
            extensions={
                "lab": {
                    "stream_id": self.stream_id,
                    "attempt": info.attempt,
                    "attempt_label": attempt.label,
                    "provider": adapter.provider,
                    "model": adapter.model,
                    "meta": self.meta or {},
                }
            },
        )
        t0 = time.monotonic_ns()
        try:
            response = client.send(request, stream=True)
        except ReplayExhausted as exc:
            self.divergence.append(f"attempt {info.attempt} ({attempt.label}): {exc}")
            info.end_reason = "not_recorded"
            emit(
                adapter.fail(
                    ProviderError(
                        type="unknown",
                        retryable=False,
                        code="replay_diverged",
                        message=f"replay diverged: the ladder asked for attempt {info.attempt} "
                        f"({attempt.label}) but the capture holds no such exchange",
                    )
                )
            )
            return False
        except RecordingCut as exc:  # replay: the recorder stopped before the response came
            info.end_reason = exc.end_reason
            info.error = str(exc)
            emit(adapter.finish())
            return False
        except httpx.HTTPError as exc:
            if isinstance(exc, LimitExceeded) or expired(limit):
                _end_at_limit(adapter, info, emit, _limit_reason(exc), str(exc))
                return False
            info.end_reason = "connect_error"
            info.error = f"{type(exc).__name__}: {exc}"
            emit(adapter.fail(adapter.transport_error(exc)))
            return False

        info.status = response.status_code
        cfg = adapter.config
        max_bytes = cfg.max_exchange_bytes
        if response.status_code >= 400:  # an error body is small: read it only so far
            cap = cfg.max_error_body_bytes
            max_bytes = cap if max_bytes is None else min(max_bytes, cap)
        body = _Body(response, max_bytes, times, t0)
        try:
            if response.status_code >= 400:
                cut_reason = None
                parts: list[bytes] = []
                cut_at_limit = False
                try:  # read by read, as the stream is (counted); kept up to the byte limit
                    parts.extend(p for _, p in body.pieces())
                except LimitExceeded as exc:  # replay: the lab's limit ended the recorded body
                    if exc.end_reason == "time_limit":
                        info.n_reads = body.n_reads
                        _end_at_limit(adapter, info, emit, "time_limit", str(exc))
                        return False
                    cut_at_limit = True  # byte_limit: the body is what the recording holds
                except RecordingCut as exc:  # replay: the body was not recorded whole
                    parts, cut_reason = [], exc.end_reason
                except httpx.HTTPError as exc:
                    if expired(limit):
                        info.n_reads = body.n_reads
                        _end_at_limit(adapter, info, emit, "time_limit", str(exc))
                        return False
                    parts = [f"{type(exc).__name__}: {exc}".encode()]
                text = b"".join(parts).decode("utf-8", errors="replace")
                if body.over:
                    _note_exchange_end(response, "byte_limit", error_body_limit_message(max_bytes))
                info.n_reads = body.n_reads
                info.end_reason = cut_reason or "http_error"
                message = adapter.failure_message(response.status_code, text)
                info.error = message
                if body.over or cut_at_limit:
                    info.error += f" [error body cut at {max_bytes} bytes: the lab's byte limit]"
                nxt = plan.on_failure(response.status_code, message)
                info.degradable = _classification(plan)
                if nxt is not None:
                    return True
                emit(
                    adapter.fail(
                        adapter.http_error(
                            response.status_code, text, body=attempt.body, label=attempt.label
                        )
                    )
                )
                return False

            def precommit(status: int | None, message: str) -> bool:
                nxt = plan.on_failure(status, message)
                info.degradable = _classification(plan)
                return nxt is not None

            adapter.on_precommit_error = precommit
            chunks_before = len(adapter.emitted)
            decoder = adapter.new_decoder()
            # replay of a recording cut on the recorder's side (killed, interrupted): the stream
            # ends where the recording does, as it had for the user, with the recorded end
            # reason; no provider error is made up for it
            cut: RecordingCut | None = None
            done_before = bool(adapter.facts.get("done_seen"))
            try:
                # each event's chunks go straight to adapter.emitted (take); on_chunk sees them
                take, chunks, on_chunk = adapter.take, adapter.emitted, self.on_chunk
                try:
                    for seq, piece in body.pieces():
                        # each event (its data, its raw bytes) is dropped from the list as it is
                        # taken, freed once taken rather than with the whole read's (a
                        # body replayed as one read holds every event of the body)
                        events: list[Any] = decoder.decode(piece, seq)
                        for i, event in enumerate(events):
                            events[i] = None
                            n = take(event)
                            if n and on_chunk is not None:
                                _hand_on(on_chunk, chunks, n)
                            if adapter.stopped:
                                break
                        if adapter.stopped:
                            break
                except RecordingCut as exc:
                    cut = exc
                except LimitExceeded as exc:  # replay: the limit ended the recorded exchange
                    info.n_reads = body.n_reads
                    _end_at_limit(adapter, info, emit, exc.end_reason, str(exc))
                    return False
                info.n_reads = body.n_reads
                if body.over and not adapter.stopped:
                    message = byte_limit_message(max_bytes)
                    _note_exchange_end(response, "byte_limit", message)
                    _end_at_limit(adapter, info, emit, "byte_limit", message)
                    return False
                if adapter.stopped:
                    info.end_reason = adapter.end_reason or "stopped_by_guard"
                else:
                    for event in decoder.flush():
                        n = take(event)
                        if n and on_chunk is not None:
                            _hand_on(on_chunk, chunks, n)
                    if cut is not None and protocol_ended(adapter, done_before):
                        cut = None  # the client closed after the terminator: the stream is whole
                    info.end_reason = "eof" if cut is None else cut.end_reason
                    if cut is not None:
                        info.error = str(cut)
                    emit(adapter.finish())
                    if (
                        cut is None
                        and adapter.config.empty_response_is_error
                        and _empty(adapter, chunks_before)
                    ):
                        # the guards were flushed by finish(); only the error chunk is added
                        adapter._record_finish("error")
                        said = _foreign_error(
                            adapter,
                            response.status_code,
                            body.head,
                            body=attempt.body,
                            label=attempt.label,
                        )
                        emit(
                            [
                                ProcessedChunk(
                                    type="error",
                                    error=said or _empty_response_error(adapter),
                                    metadata={"finish_reason": "error"},
                                )
                            ]
                        )
            except RetryAttempt as exc:
                info.n_reads = body.n_reads
                info.end_reason = "retried"
                info.error = exc.message
                _note_exchange_error(response, f"pre-commit stream error, retried: {exc.message}")
                info.status = exc.status if exc.status is not None else info.status
                return True
            except httpx.HTTPError as exc:
                info.n_reads = body.n_reads
                if expired(limit):
                    _end_at_limit(adapter, info, emit, "time_limit", str(exc))
                    return False
                info.end_reason = (
                    "timeout" if isinstance(exc, httpx.TimeoutException) else "read_error"
                )
                info.error = f"{type(exc).__name__}: {exc}"
                emit(adapter.fail(adapter.transport_error(exc)))
            return False
        finally:
            info.committed = adapter.committed
            info.n_events = adapter.seq + 1
            response.close()
            response.stream = _SPENT  # httpx's bound stream refers back to the response
            _note_scrubbed(adapter, response)


def _hand_on(
    on_chunk: Callable[[ProcessedChunk], None], chunks: list[ProcessedChunk], n: int
) -> None:
    """``on_chunk`` for the last **n** chunks, in order."""
    for c in chunks[-n:]:
        on_chunk(c)


def _note_scrubbed(adapter: StreamAdapter, response: httpx.Response) -> None:
    """What the recorder did about secrets in this response, as facts of the result (the
    same live, from the recorder, and in replay, from the exchange's ``meta``):
    ``facts["secrets_redacted"]``, echoes of a secret the request sent that were replaced,
    and ``facts["secret_unchecked"]``, the ``Content-Encoding`` that kept the recorder from
    looking (the anomalies ``secret_redacted`` and ``secret_unchecked``)."""
    recorder = response.extensions.get("lab.exchange")
    if recorder is not None:
        redacted, undecoded = recorder.redacted, recorder.undecoded
    else:
        meta = response.extensions.get("lab.recorded_meta") or {}
        redacted, undecoded = meta.get("lab.redacted"), meta.get("lab.undecoded")
    if isinstance(redacted, dict):
        n = sum(v for v in redacted.values() if type(v) is int and v > 0)
        if n:
            facts = adapter.facts
            facts["secrets_redacted"] = facts.get("secrets_redacted", 0) + n
    if isinstance(undecoded, str) and undecoded:
        adapter.facts["secret_unchecked"] = undecoded


def _reads_of(response: httpx.Response) -> tuple[Iterable[bytes], bool]:
    """The response's raw reads, and whether they are decoded already.

    A response a transport built with its content (``httpx.MockTransport``'s
    ``Response(200, text=...)``) has been read: its decoded content is its one read."""
    if not response.is_stream_consumed:
        return response.iter_raw(), False
    try:
        content = response.content
    except httpx.ResponseNotRead:
        return (), True
    return ((content,) if content else ()), True


_SPENT = httpx.ByteStream(b"")
"""The stream of a response the runner has closed. httpx binds a response and its stream
into a cycle (the stream times the response); unbound once closed, the response and what
it holds are freed by their reference counts, with no collection to wait for (a replay
holds off the collector's older generations: :func:`lab.replay._gc.paused`)."""


def _as_is(raw: bytes) -> Iterable[bytes]:
    """A read as it came, or in :func:`line_slices` when it is longer than
    :data:`lab.http.sse.WINDOW` (a whole recorded body handed over as one read)."""
    return (raw,) if len(raw) <= WINDOW else line_slices(raw)


def line_slices(data: bytes, size: int = WINDOW) -> Iterator[bytes]:
    """``data`` in consecutive slices of at most ``size`` bytes that end at line ends (a
    slice is longer only when one line is), together ``data`` again.

    The runner hands a read longer than ``size`` to the decoder so: its events are framed
    and taken a slice at a time, each while its bytes and objects are in the CPU cache,
    not all framed before the first is taken (a 20,000-event body held ~20,000 events
    waiting, which the collector's young collections scanned as the stream went). The
    decoders take a read cut anywhere, as the network cuts them; cutting at line ends keeps
    an SSE line whole."""
    start, n = 0, len(data)
    while n - start > size:
        end = data.rfind(b"\n", start, start + size) + 1
        if end <= start:  # one line longer than a slice: up to its end
            end = data.find(b"\n", start + size) + 1
            if not end:
                break
        yield data[start:end]
        start = end
    if start < n:
        yield data[start:] if start else data


class _Body:
    """A response body as the stack reads it: raw reads (content-encoded, as recorded),
    decoded here in bounded pieces (:mod:`lab.http.decoding`) and counted against
    ``max_exchange_bytes``; each read's arrival time goes to ``times``."""

    __slots__ = ("_response", "_max", "_times", "_t0", "n_reads", "over", "head", "_head_left")

    def __init__(self, response: httpx.Response, max_bytes: int | None, times: list, t0: int):
        self._response = response
        self._max = max_bytes
        self._times = times
        self._t0 = t0
        self.n_reads = 0
        """Reads taken from the response so far (the one being fed included)."""
        self.over = False
        """The byte limit was reached: the last piece handed out ends exactly at it."""
        self.head: list[bytes] = []
        """The body's first :data:`BODY_HEAD_BYTES` decoded bytes (what a body that is not a
        stream said: :func:`_foreign_error`)."""
        self._head_left = BODY_HEAD_BYTES

    def pieces(self) -> Iterator[tuple[int, bytes]]:
        """``(read index, piece)`` for every decoded piece, in order; stops at the limit."""
        budget = self._max
        for seq, piece in self._decoded():
            if self._head_left > 0:  # the piece itself (no copy) while it fits
                self.head.append(
                    piece if len(piece) <= self._head_left else piece[: self._head_left]
                )
                self._head_left -= len(piece)
            if budget is not None:
                budget -= len(piece)
                if budget < 0:  # up to the limit exactly, then no more
                    self.over = True
                    yield seq, piece[: len(piece) + budget]
                    return
            yield seq, piece

    def _decoded(self) -> Iterator[tuple[int, bytes]]:
        reads, decoded = _reads_of(self._response)
        encoding = None if decoded else self._response.headers.get("content-encoding")
        decoding = decoder_for(encoding)
        pieces_of: Callable[[bytes], Iterable[bytes]] = (
            decoding.feed if decoding is not None else _as_is
        )
        times, t0 = self._times, self._t0
        for seq, raw in enumerate(reads):
            times.append(time.monotonic_ns() - t0)
            self.n_reads = seq + 1
            for piece in pieces_of(raw):
                yield seq, piece
        if decoding is not None:
            for piece in decoding.flush():
                yield self.n_reads - 1, piece


def protocol_ended(adapter: StreamAdapter, done_before: bool = False) -> bool:
    """The attempt's wire-protocol terminator arrived: ``data: [DONE]`` (chat), the
    Responses API's terminal event (both set ``facts["done_seen"]``), Anthropic's
    ``message_stop``, or, for a family that sends no sentinel (Gemini), a finish reason.

    An SDK closes the response as soon as it reads the terminator (the openai SDK right
    after ``[DONE]``), so its recording ends ``cancelled`` with every byte there: such an
    exchange is complete, and only a close *before* the terminator is a recording cut.
    ``done_before``: ``done_seen`` was already set by an earlier attempt of the request."""
    facts = adapter.facts
    if facts.get("done_seen") and not done_before:
        return True
    if facts.get("message_stop"):
        return True
    return not adapter.sends_done_sentinel and bool(adapter.finish_reason)


def _limit_reason(exc: BaseException) -> str:
    return exc.end_reason if isinstance(exc, LimitExceeded) else "time_limit"


def _end_at_limit(
    adapter: StreamAdapter,
    info: AttemptInfo,
    emit: Callable[[list[ProcessedChunk]], None],
    end_reason: str,
    message: str,
) -> None:
    """End the attempt at one of the lab's limits: an error chunk that says which."""
    info.end_reason = end_reason
    info.error = message
    emit(adapter.fail(limit_error(adapter.provider, end_reason, message)))


def limit_error(provider: str, end_reason: str, message: str) -> ProviderError:
    """The error chunk's error for a stream the lab's ``time_limit`` or ``byte_limit``
    ended: a timeout (retryable) or an oversized response (not retryable)."""
    if end_reason == "time_limit":
        return ProviderError(
            type="timeout", code="time_limit", retryable=True, message=f"{provider}: {message}"
        )
    return ProviderError(
        type="api_error", code="byte_limit", retryable=False, message=f"{provider}: {message}"
    )


def _note_exchange_end(response: httpx.Response, reason: str, text: str) -> None:
    """Tell a recording transport that the lab ended this exchange, and why."""
    recorder = response.extensions.get("lab.exchange")
    if recorder is not None:
        recorder.on_end(reason, text)


def _note_exchange_error(response: httpx.Response, text: str) -> None:
    """Tell a recording transport why this exchange failed (kept in the capture's
    ``error`` column); a no-op without one."""
    recorder = response.extensions.get("lab.exchange")
    if recorder is not None:
        recorder.note_error(text)


def _empty(adapter: StreamAdapter, start: int) -> bool:
    """Nothing visible, no reasoning, no call, no usage, no finish reason and no error
    since ``start`` (a provider that said ``stop`` over an empty answer is not "empty")."""
    if adapter.committed or adapter.finish_reason is not None:
        return False
    for c in adapter.emitted[start:]:
        if c.type in ("error", "function_call") or c.content or c.thoughts:
            return False
        if c.metadata and c.metadata.get("usage") is not None:
            return False
    return True


BODY_HEAD_BYTES = 16 * 1024
"""How much of a body's start the stack keeps to read a 200 body that is one JSON error
object, not a stream (:func:`_foreign_error`)."""


def _foreign_error(
    adapter: StreamAdapter, status: int, head: list[bytes], *, body: dict, label: str
) -> ProviderError | None:
    """The provider's own error when a body with no stream in it is one JSON object that
    holds an ``error`` (``{"error": {"message": "model is overloaded", ...}}`` sent with
    HTTP 200, not as SSE), read as the family reads an error body; None otherwise.

    The error is classified by the status its ``code`` names (``503``, ``"429"``). A code
    that names none (``"rate_limit_exceeded"``, or no code) leaves HTTP 200, which no
    family's rules read: the error then keeps the body's own code and stays retryable, as
    the empty body it was taken for is, unless a classifier knows its message (a context
    length, a model error, an exhausted balance)."""
    text = b"".join(head).decode("utf-8", "replace").lstrip("\ufeff").strip()
    if not text.startswith("{"):
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, dict) or not parsed.get("error"):
        return None
    inner = parsed["error"]
    code = inner.get("code") if isinstance(inner, dict) else None
    named = parse_status_code(code)
    if named is not None and not 400 <= named <= 599:
        named = None
    error = adapter.http_error(named or status, text, body=body, label=label)
    note = f" [a JSON error body, not a stream, sent with HTTP {status}]"
    update: dict[str, Any] = {"message": error.message + note}
    if named is None:
        update["code"] = code_string(code) or "error_body"
        if classify_error(error) is None:
            update["retryable"] = True
    return error.model_copy(update=update)


def _empty_response_error(adapter: StreamAdapter) -> ProviderError:
    f = adapter.facts
    return ProviderError(
        type="api_error",
        code="empty_response",
        retryable=True,
        message=(
            f"{adapter.provider}: the stream ended without content, reasoning, a tool call, "
            f"usage or an error ({f['events']} SSE events, {f['invalid_json']} unparsable "
            f"data lines) - an empty or foreign response body"
        ),
    )


def _assemble(
    adapter: StreamAdapter,
    chunks: list[ProcessedChunk],
    origins: list[ChunkOrigin],
    attempts: list[AttemptInfo],
    read_t_ns: dict[int, list[int]],
    cfg: LabConfig,
) -> StreamResult:
    text_parts: list[str] = []
    thoughts = []
    calls = []
    error = None
    usage: Usage | None = None
    for c in chunks:
        # the chunk's fields read from its instance dict (every field is there): an
        # attribute of a pydantic model goes through BaseModel.__getattr__'s hook, which
        # keeps CPython from specializing the lookup, and this reads six per chunk
        fields = c.__dict__
        content = fields["content"]
        if content:
            text_parts.append(content)
        metadata = fields["metadata"]
        chunk_thoughts = fields["thoughts"]
        if chunk_thoughts:
            thoughts.extend(counted_of(chunk_thoughts, metadata))
        else:  # the stream is over: one shared empty, not a list per chunk (NO_THOUGHTS)
            fields["thoughts"] = NO_THOUGHTS
        call = fields["function_call"]
        if call is not None:
            calls.append(call)
        if fields["type"] == "error" and error is None and fields["error"] is not None:
            error = fields["error"]  # the first: it ended the step (processor), later ones follow
        if metadata:
            u = metadata.get("usage")
            if isinstance(u, Usage):
                usage = u
        else:
            fields["metadata"] = NO_METADATA
    result = StreamResult(
        stream_id=adapter.stream_id,
        provider=adapter.provider,
        model=adapter.model,
        chunks=chunks,
        text="".join(text_parts),
        reasoning="".join(t.content for t in thoughts),
        thoughts=thoughts,
        function_calls=calls,
        error=error,
        classifier=classify_error(error) if error is not None else None,
        serving_provider=adapter.serving_provider,
        guard_events=adapter.guard_events,
        finish_reason=adapter.finish_reason,
        usage=usage,
        attempts=attempts,
        origins=origins,
        read_t_ns=read_t_ns,
        facts=dict(adapter.facts),
        config=cfg.fingerprint(),
    )
    _run_processor(result)
    return result


def _run_processor(result: StreamResult) -> None:
    info = model_info(result.model) if result.model else None
    processor = Processor(info)
    result.outcome = processor.process(result.chunks)
    message = processor.message
    result.cost = message.cost if message.cost_known else None  # tables: unknown, not 0
    result.doom_loop = bool(message.doom_loop)
