"""The adapter contract every provider family implements, and the machinery they share.

An adapter turns one provider's SSE events into :class:`~lab.model.ProcessedChunk` objects:
stage 02 (chunk normalization, the guards, the commit point) and stage 03 (``process_chunk``).
It is pure: the runner (:mod:`lab.stream`) owns httpx, the SSE decoder and the degradation
plan, and feeds the adapter one :class:`~lab.http.sse.SSEEvent` at a time::

    adapter.start_attempt(n)             # fresh per-attempt state, guards re-armed
    for event in events:
        chunks = adapter.feed(event)      # may raise RetryAttempt before the commit point
    chunks = adapter.finish()             # natural end: guard flushes
    chunks = adapter.fail(error)          # error path: guard flushes, then the error chunk

Guards never act silently: every note a guard records is turned into a
:class:`~lab.model.GuardEvent` stamped with the stream id, the attempt and the index of the
raw chunk (SSE event) that triggered it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from lab.config import LabConfig
from lab.degrade import ExtraClassifier
from lab.guards.base import GuardNote, NoteSink
from lab.guards.json_repair import parse_tool_arguments
from lab.http.sse import SSEDecoder, SSEEvent
from lab.model import GuardEvent, ProcessedChunk, ProviderError, Usage

__all__ = [
    "NoteList",
    "RetryAttempt",
    "StreamAdapter",
    "StreamStopped",
    "ToolCallAccumulator",
    "is_number",
    "join_url",
    "note_shape",
    "note_unknown_keys",
    "openai_usage",
    "wire_float",
    "wire_int",
    "split_text_and_tool",
]


def is_number(v: Any) -> bool:
    """A finite JSON number (int or float, not bool, not NaN/inf): what every wire field
    check means by numeric. ``1e999`` parses to ``inf`` and the stdlib parser accepts
    ``NaN``/``Infinity``; neither is a number here."""
    if isinstance(v, int):
        return not isinstance(v, bool)
    return isinstance(v, float) and math.isfinite(v)


MAX_WIRE_INT = 2**53
"""The largest count or index taken from the wire (JSON's exact-integer range)."""


def wire_int(v: Any, path: str = "", bad: list[str] | None = None) -> int | None:
    """The one checked conversion of a count or index read from the wire.

    A non-negative finite number up to :data:`MAX_WIRE_INT` becomes an ``int`` (floats
    truncate, as ``int()`` does); anything else (bool, string, NaN, inf, negative, huge, a
    container) is None, and **path** is appended to **bad** when given, so the caller can
    raise an anomaly for that stream instead of an exception escaping it.

    >>> wire_int(12), wire_int(3.0), wire_int(float("inf")), wire_int(-1), wire_int("7")
    (12, 3, None, None, None)
    """
    if v is None:
        return None
    if is_number(v) and 0 <= v <= MAX_WIRE_INT:
        return int(v)
    if bad is not None:
        bad.append(path or "?")
    return None


def wire_float(v: Any, path: str = "", bad: list[str] | None = None) -> float | None:
    """A cost or other amount from the wire: a finite non-negative float, else None (and
    **path** appended to **bad**), as :func:`wire_int`."""
    if v is None:
        return None
    if is_number(v) and v >= 0:
        return float(v)
    if bad is not None:
        bad.append(path or "?")
    return None


def join_url(base: str, path: str, query: str = "") -> str:
    """``base`` with ``path`` appended to its path, before any query it carries.

    ``join_url("http://h/v1/?x=1", "/chat/completions")`` is
    ``"http://h/v1/chat/completions?x=1"``; **query** (``"alt=sse"``) is added to the base's
    own query. A fragment is dropped (it is never sent).
    """
    head = base.partition("#")[0]
    root, _, own = head.partition("?")
    params = "&".join(q for q in (own, query) if q)
    return root.rstrip("/") + path + ("?" + params if params else "")


class NoteList(NoteSink):
    """A note list for helper functions that append notes (``parse_tool_arguments``)."""

    __slots__ = ("notes",)

    def __init__(self) -> None:
        self.notes = []


class RetryAttempt(Exception):
    """Raised by ``feed`` when a pre-commit error made the degradation plan choose a retry."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class StreamStopped(Exception):
    """Internal: a guard ended the stream (speaker guard)."""


PrecommitHook = Callable[[int | None, str], bool]


class StreamAdapter:
    """Base class: per-attempt state, guard-event plumbing, request-side defaults."""

    provider: ClassVar[str] = ""
    family: ClassVar[str] = "openai_compatible"
    """The wire family: ``openrouter``, ``openai_compatible``, ``google`` or ``anthropic``.
    It picks the error normalizer and the request-body rules of ``lab.errors`` and
    ``lab.request``; a new OpenAI-compatible endpoint inherits it."""
    sends_done_sentinel: ClassVar[bool] = True
    """Does the family end a stream with ``data: [DONE]``? (Gemini and Anthropic do not; their
    only end evidence is a finish reason.)"""
    names_backend: ClassVar[bool] = False
    """Does the stream name the serving backend (OpenRouter's ``provider`` field)?"""
    default_base_url: ClassVar[str] = ""
    api_key_env: ClassVar[str] = ""
    mandatory_keys: ClassVar[tuple[str, ...]] = ("model", "messages", "stream")
    priority_keys: ClassVar[tuple[str, ...]] = ()
    degrades: ClassVar[bool] = True
    """Does a failure of this family run the parameter-degradation ladder? Seed 02: OpenRouter
    and the OpenAI-compatible adapters share one degradation queue; the Gemini adapter
    (reference §11) turns every failure into its error chunk."""
    degrade_on_502: ClassVar[bool] = False
    degrade_on_opaque_5xx: ClassVar[bool] = False
    api_key_envs: ClassVar[tuple[str, ...]] = ()
    """Environment variables holding the key, in the order they are tried (default:
    ``(api_key_env,)``)."""

    @classmethod
    def api_key_from_env(cls, environ: dict | None = None) -> str | None:
        """The API key from the provider's usual environment variables, if set."""
        import os

        env = os.environ if environ is None else environ
        for name in cls.api_key_envs or ((cls.api_key_env,) if cls.api_key_env else ()):
            value = env.get(name)
            if value and value.strip():
                return value
        return None

    @staticmethod
    def wire_body(body: dict) -> dict:
        """The JSON actually sent for ``body`` (a family may move keys into the URL)."""
        return body

    stream_key: ClassVar[bool] = True
    """Does the request body say ``"stream": true``? (Gemini streams by its URL and rejects
    the key with a 400.) The recorder adds the key only when this is set."""

    def new_decoder(self) -> SSEDecoder | Any:
        """The framer of this family's response bodies (``decode(chunk, seq)`` /
        ``flush()`` -> :class:`~lab.http.sse.SSEEvent`); SSE unless a family says otherwise."""
        return SSEDecoder()

    def __init__(
        self,
        *,
        config: LabConfig | None = None,
        tools: list[dict] | None = None,
        stream_id: str = "",
        model: str | None = None,
    ) -> None:
        self.config = config or LabConfig()
        self.tools = tools or []
        self.stream_id = stream_id
        self.model = model
        self.guard_events: list[GuardEvent] = []
        self.emitted: list[ProcessedChunk] = []
        """Every chunk the runner emitted for this request (all attempts), in order."""
        self.on_precommit_error: PrecommitHook = _never_retry
        self.serving_provider: str | None = None
        self.finish_reason: str | None = None
        self.facts: dict[str, Any] = {
            "events": 0,
            "comments": 0,
            "done_seen": False,
            "invalid_json": 0,
            "unterminated_tail": False,
            "finish_reasons": [],
        }
        self.attempt = -1
        self.seq = -1
        self.read_seq = -1
        self.committed = False
        self.stopped = False

    # -- request side -------------------------------------------------------------------

    def endpoint(self, base_url: str | None, model: str | None) -> str:
        return join_url(base_url or self.default_base_url, "/chat/completions")

    def request_headers(self, api_key: str | None) -> dict[str, str]:
        # identity: the capture keeps the SSE bytes as sent, not a gzip stream
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "accept-encoding": "identity",
        }
        if api_key and api_key.strip():
            headers["authorization"] = f"Bearer {api_key}"
        return headers

    def mandatory_keys_for(self, body: dict) -> tuple[str, ...]:
        """Keys the degradation ladder never drops for this body."""
        return self.mandatory_keys

    def extra_classifiers(self, body: dict) -> tuple[ExtraClassifier, ...]:
        """Family rejection tests the degradation classifier runs besides its own
        (``(status, message, failing_body) -> bool``: does this failure degrade?)."""
        return ()

    def failure_message(self, status: int, body_text: str) -> str:
        """The message the degradation classifier sees for an HTTP failure."""
        return body_text

    @classmethod
    def build_body(
        cls, model: str, messages: list[dict], tools: list[dict] | None, options: dict
    ) -> dict[str, Any]:
        """This family's streaming request body from normalized messages (what
        :func:`lab.request.build_body` dispatches to)."""
        from lab.request import build_body_for_family

        return build_body_for_family(cls.family, model, messages, tools, options)

    @classmethod
    def error_message(cls, body_text: str, status: int | None = None) -> str:
        """The provider's own message in an HTTP error body (what
        :func:`lab.errors.parse_error_message` dispatches to)."""
        from lab.errors import parse_error_message_for_family

        return parse_error_message_for_family(cls.family, body_text, status)

    @classmethod
    def normalize_http_error(
        cls, status: int, body_text: str, *, body_error_codes: bool = False
    ) -> ProviderError:
        """This family's mapping of an HTTP error response (what
        :func:`lab.errors.normalize_http_error` dispatches to)."""
        from lab.errors import normalize_http_error_for_family

        return normalize_http_error_for_family(
            cls.provider, cls.family, status, body_text, body_error_codes=body_error_codes
        )

    def http_error(self, status: int, body_text: str, *, body: dict, label: str) -> ProviderError:
        return type(self).normalize_http_error(
            status, body_text, body_error_codes=self.config.body_error_codes
        )

    def transport_message(self, exc: BaseException) -> str:
        """The message of the error a connection failure throws (``<Exception>: <text>``);
        the family's ``handleProviderError`` reads it (:meth:`transport_error`)."""
        return f"{type(exc).__name__}: {exc}"

    def transport_error(self, exc: BaseException) -> ProviderError:
        """A connection failure or timeout (no HTTP status) as this family's ProviderError.

        Families with a reference ``handleProviderError`` override this to run it over
        :meth:`transport_message`; this default (the Anthropic adapter's, which has no
        reference) says timeout or network error, retryable."""
        import httpx

        if isinstance(exc, httpx.TimeoutException):
            return ProviderError(
                type="timeout",
                message=f"{self.provider} stream timed out while waiting for data",
                retryable=True,
                code="timeout",
            )
        return ProviderError(
            type="api_error",
            message=f"{self.provider} connection failed: {type(exc).__name__}: {exc}",
            retryable=True,
            code="network_error",
        )

    # -- stream side --------------------------------------------------------------------

    def start_attempt(self, attempt: int) -> None:
        """Reset every per-attempt accumulator and guard (the commit point starts over)."""
        self.attempt = attempt
        self.seq = -1
        self.read_seq = -1
        self.committed = False
        self.stopped = False
        self.end_reason: str | None = None
        """Set by an adapter that ends the stream itself (why), else None."""
        self.serving_provider = None
        self.finish_reason = None
        self._ids_seen = False  # each attempt's own response id and model
        self.reset()

    def reset(self) -> None:  # pragma: no cover - subclasses override
        raise NotImplementedError

    def feed(self, event: SSEEvent) -> list[ProcessedChunk]:  # pragma: no cover
        raise NotImplementedError

    def finish(self) -> list[ProcessedChunk]:  # pragma: no cover
        raise NotImplementedError

    def fail(self, error: ProviderError) -> list[ProcessedChunk]:  # pragma: no cover
        raise NotImplementedError

    def _note_event(self, event: SSEEvent) -> None:
        self.seq = event.index
        self.read_seq = event.last_seq
        self.facts["events"] += 1
        if event.unterminated:
            self.facts["unterminated_tail"] = True
        if event.comment is not None:  # is_comment, without the property call: per event
            self.facts["comments"] += 1

    def _record_finish(self, reason: str | None) -> None:
        if reason:
            self.finish_reason = reason
            self.facts["finish_reasons"].append(reason)

    def _speaker_tail_before_terminal(self, chunk: dict, content: Any, delta: dict | None) -> str:
        """§2.6 step 7 (OpenAI-shaped chunks): a chunk with no text that carries an error,
        usage, a finish reason or tool calls first releases the speaker guard's held tail."""
        speaker = getattr(self, "speaker", None)
        if speaker is None or content:
            return ""
        choices = chunk.get("choices")
        if (
            "error" in chunk
            or "usage" in chunk
            or (choices and choices[0].get("finish_reason"))
            or (delta is not None and delta.get("tool_calls"))
        ):
            return speaker.flush()
        return ""

    def _note_response_ids(self, raw: dict) -> None:
        """The provider's own id and model of the response (``facts["response_id"]`` /
        ``["response_model"]``: ``chatcmpl-…``/``gen-…`` and the model that answered),
        from the first chunk that carries them."""
        rid = raw.get("id")
        if isinstance(rid, str) and rid:
            self.facts["response_id"] = rid
        model = raw.get("model")
        if isinstance(model, str) and model:
            self.facts["response_model"] = model
        self._ids_seen = "response_id" in self.facts and "response_model" in self.facts

    _ids_seen: bool = False

    def _int(self, value: Any, path: str) -> int | None:
        """:func:`wire_int` for this stream: a hostile value is named in
        ``facts["hostile_values"]`` (anomaly ``hostile_value``) instead of raising."""
        bad: list[str] = []
        got = wire_int(value, path, bad)
        if bad:
            self.facts.setdefault("hostile_values", []).extend(bad)
        return got

    def _make_guards(
        self,
        *,
        think: bool = True,
        capture_thoughts: bool | None = None,
        speaker: bool = True,
    ) -> None:
        """Build this attempt's guards from the config: one definition of their wiring.

        Sets ``self.think`` (None when ``strip_think_blocks`` is off or **think** is False),
        ``self.spill``, ``self.dedup`` and ``self.speaker`` (None unless ``speaker_guard``
        and **speaker**). A family uses the ones its pipeline runs (Gemini: dedup and the
        speaker guard; Anthropic: think, spill and speaker). **capture_thoughts** defaults to
        ``capture_think_blocks_as_thoughts``.
        """
        from lab.guards import (
            RecentTextDedup,
            SpeakerBoundaryGuard,
            SpillGuard,
            ThinkBlockStripper,
        )

        cfg = self.config
        capture = (
            cfg.capture_think_blocks_as_thoughts if capture_thoughts is None else capture_thoughts
        )
        self.think = (
            ThinkBlockStripper(persona_name=cfg.persona_name, capture_thoughts=capture)
            if think and cfg.strip_think_blocks
            else None
        )
        self.spill = SpillGuard(cfg.spill)
        self.dedup = RecentTextDedup(
            tail_chars=cfg.dedup_tail_chars,
            min_chars=cfg.dedup_min_chars,
            keep_word_repeats=cfg.dedup_keep_word_repeats,
        )
        self.speaker = (
            SpeakerBoundaryGuard(
                holdback_chars=cfg.speaker_holdback_chars, persona_name=cfg.persona_name
            )
            if speaker and cfg.speaker_guard
            else None
        )

    def _ran(self, guard: Any, result: Any) -> Any:
        """The step after every guard call: move the notes it just made into
        ``guard_events`` (stamped), then hand back what the call returned::

            g = self._ran(self.think, self.think.feed(content))
        """
        if guard.notes:
            self._drain(guard)
        return result

    def _drain(self, guard: Any) -> None:
        """Move a guard's notes into ``guard_events`` with stream/attempt/seq stamped."""
        notes: list[GuardNote] = guard.drain_notes()
        for n in notes:
            detail = {"rule": n.rule, **n.detail}
            self.guard_events.append(
                GuardEvent(
                    guard=n.guard,
                    stream_id=self.stream_id,
                    attempt=self.attempt,
                    seq=self.seq,
                    offset=n.offset,
                    moved=n.moved,
                    detail=detail,
                )
            )

    def _parse_arguments(self, raw: str, tool_name: str) -> Any:
        """A call's streamed arguments through the parse step (§9.2), its json_repair event
        (if it was repaired) in ``guard_events``: one definition for every adapter."""
        notes = NoteList()
        parsed = parse_tool_arguments(
            raw,
            tool_name=tool_name,
            notes=notes.notes,
            cut_number_prefixes=self.config.repair_cut_number_prefixes,
        )
        if notes.notes:
            self._drain(notes)
        return parsed

    def _drain_all(self, guards: Iterable[Any]) -> None:
        for g in guards:
            if g is not None and g.notes:
                self._drain(g)


def openai_usage(u: Any, bad: list[str] | None = None) -> Usage | None:
    """OpenAI-shaped usage (snake or camel case) -> :class:`Usage`; None when empty.

    Every count goes through :func:`wire_int`: a hostile value (``1e999``, ``NaN``, ``-1``,
    a string) is left out and its path appended to **bad**.
    """
    if not isinstance(u, dict):
        return None

    def pick(d: Any, where: str, *names: str) -> Any:
        if not isinstance(d, dict):
            return None
        for n in names:
            v = d.get(n)
            if v is not None:
                return wire_int(v, f"usage.{where}{n}", bad)
        return None

    prompt = pick(u, "", "prompt_tokens", "promptTokens", "input_tokens")
    completion = pick(u, "", "completion_tokens", "completionTokens", "output_tokens")
    total = pick(u, "", "total_tokens", "totalTokens")
    cdet = u.get("completion_tokens_details", u.get("completionTokensDetails"))
    pdet = u.get("prompt_tokens_details", u.get("promptTokensDetails"))
    reasoning = pick(cdet, "completion_tokens_details.", "reasoning_tokens", "reasoningTokens")
    cached = pick(pdet, "prompt_tokens_details.", "cached_tokens", "cachedTokens")
    cache_write = pick(pdet, "prompt_tokens_details.", "cache_write_tokens", "cacheWriteTokens")
    cost = wire_float(u.get("cost"), "usage.cost", bad)
    if all(v is None for v in (prompt, completion, total, reasoning, cached, cache_write, cost)):
        return None
    return Usage(
        input_tokens=prompt or 0,
        output_tokens=completion or 0,
        reasoning_tokens=reasoning or 0,
        cache_read_tokens=cached or 0,
        cache_write_tokens=cache_write or 0,
        total_tokens=total,
        cost=cost,
    )


class ToolCallAccumulator:
    """Streamed tool-call deltas gathered by index: one definition for the chat adapters.

    Name and argument pieces are kept in lists and joined once when the call is built, so
    a call streamed as 200,000 argument deltas costs the same per delta as one of 20,000
    (``acc += piece`` would copy the growing string each time).
    """

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: dict[int, dict[str, Any]] = {}

    def __bool__(self) -> bool:
        return bool(self.calls)

    def add(
        self,
        index: int,
        *,
        name: str | None = None,
        arguments: str | None = None,
        fields: dict[str, Any] | None = None,
    ) -> None:
        acc = self.calls.get(index)
        if acc is None:
            acc = self.calls[index] = {"name": [], "arguments": []}
        if name:
            acc["name"].append(name)
        if arguments:
            acc["arguments"].append(arguments)
        if fields:
            acc.update(fields)

    def starts_new_call(self, index: int, call_id: str) -> bool:
        """Does a header with **call_id** at **index** start another call than the one
        there (which has a name and a different id)?"""
        acc = self.calls.get(index)
        return (
            acc is not None
            and bool(acc["name"])
            and isinstance(acc.get("id"), str)
            and acc["id"] != call_id
        )

    def next_index(self) -> int:
        """A slot after every call so far (for a call that came with no index of its own)."""
        return max(self.calls, default=-1) + 1

    def resends_header(self, index: int, call_id: str, name: str) -> bool:
        """Does a delta with **call_id** and **name** repeat call **index**'s header (same id,
        same whole name) rather than stream more of its name?"""
        acc = self.calls.get(index)
        return acc is not None and acc.get("id") == call_id and "".join(acc["name"]) == name

    def take(self) -> list[tuple[int, dict[str, Any]]]:
        """Every call as ``(index, {"name", "arguments", ...fields})`` in index order; the
        accumulator is empty afterwards."""
        built = []
        for index in sorted(self.calls):
            acc = self.calls[index]
            built.append(
                (
                    index,
                    {**acc, "name": "".join(acc["name"]), "arguments": "".join(acc["arguments"])},
                )
            )
        self.calls = {}
        return built

    def names(self) -> list[str]:
        return ["".join(self.calls[i]["name"]) for i in sorted(self.calls)]


def note_shape(facts: dict[str, Any], path: str) -> None:
    """Count one field path or event type an adapter does not read (``unhandled_shape``)."""
    shapes = facts.get("unhandled_shapes")
    if shapes is None:
        shapes = facts["unhandled_shapes"] = {}
    shapes[path] = shapes.get(path, 0) + 1


def note_unknown_keys(facts: dict[str, Any], obj: dict, known: frozenset[str], where: str) -> None:
    """Count every key of **obj** outside **known** whose value is not empty (``None``, ``""``,
    ``[]``, ``{}``) as ``<where>.<key>``."""
    if obj.keys() <= known:
        return
    for key in obj.keys() - known:
        v = obj[key]
        if v is None or v == "" or v == [] or v == {}:
            continue
        note_shape(facts, f"{where}.{key}" if where else str(key))


def split_text_and_tool(
    chunk: dict,
    *,
    drop: tuple[str, ...] = ("usage",),
    text_fields: tuple[str, ...] = (),
    choice_fields: tuple[str, ...] = (),
) -> list[dict]:
    """A normalized chunk whose first choice carries both text and a tool call, split into
    a text piece then a tool piece (the reference emits them in that order); any other
    chunk as it is.

    The text piece keeps the chunk's envelope without ``drop``, a delta of ``role``,
    ``content`` and ``text_fields``, and the first choice's ``index``, ``finish_reason``
    None and ``choice_fields``. The tool piece is the chunk with ``content`` taken out of
    the first choice's delta.
    """
    choices = chunk.get("choices")
    if not choices:
        return [chunk]
    first = choices[0]
    delta = first["delta"]
    content = delta.get("content")
    has_tool = bool(delta.get("tool_calls")) or first["finish_reason"] == "tool_calls"
    if not (isinstance(content, str) and content and has_tool):
        return [chunk]
    text_chunk = {k: v for k, v in chunk.items() if k not in drop}
    text_delta = {"role": delta.get("role"), "content": content}
    text_delta.update((k, delta.get(k)) for k in text_fields)
    text_choice = {"index": first["index"], "delta": text_delta, "finish_reason": None}
    text_choice.update((k, first.get(k)) for k in choice_fields)
    text_chunk["choices"] = [text_choice]
    tool_delta = dict(delta)
    tool_delta.pop("content", None)
    tool_chunk = dict(chunk)
    tool_chunk["choices"] = [{**first, "delta": tool_delta}, *choices[1:]]
    return [text_chunk, tool_chunk]


def _never_retry(status: int | None, message: str) -> bool:
    return False
