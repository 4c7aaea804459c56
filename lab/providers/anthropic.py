"""Anthropic Messages (``POST {base}/messages``, named SSE events).

The reference pipeline has no Anthropic stream adapter; this one follows the wire format
(docs/reference.md, "1.5 Anthropic Messages") and the shared rules the other adapters use::

    message_start        usage (input, cache read/write) remembered
    content_block_start  text | thinking | redacted_thinking | tool_use (id, name)
    content_block_delta  text_delta      -> think strip -> spill guard -> speaker guard -> text
                         thinking_delta  -> raw ThoughtLogEntry (the spill guard observes it)
                         signature_delta -> the thinking block's signature
                         input_json_delta-> arguments accumulated per block index
    content_block_stop   thinking: kept (with its signature) for replay; tool_use: the
                         arguments parsed (a cut payload repaired, never fabricated:
                         arguments_truncated + a json_repair GuardEvent) -> function_call
    message_delta        cumulative usage; stop_reason end_turn/stop_sequence -> stop,
                         max_tokens -> length, tool_use -> tool_calls, refusal ->
                         content_filter -> done
                         citations_delta -> the text block's citations (metadata)
    server tools         server_tool_use / mcp_tool_use (input parsed) and *_tool_result
                         blocks -> metadata["server_tools"] at their block stop: never
                         client function calls
    message_stop         noted;  ping: ignored, counted;  unknown events, blocks and
                         deltas: ignored, counted (facts["unhandled_shapes"])
    error                lab.errors.anthropic_stream_error (overloaded_error ->
                         provider_overloaded, retryable); the stream ends

Lab choices: no parameter-degradation ladder (seed 02 gives it to OpenRouter and the
OpenAI-compatible adapters only; the Gemini adapter has none either), so a failure is the
stream's error; the attempt commits at the first content (not at ``message_start``, which
every stream opens with); a stream cut inside a ``tool_use`` block at EOF yields the
repaired call (truncated) - also when the cut falls inside an event, which is a truncation,
not invalid JSON - while on the error path the partial calls go into the error
chunk's ``metadata["incomplete_tool_calls"]`` so the error stays the outcome;
``Usage.input_tokens`` is input + cache read + cache write (the contract: input includes
cached tokens).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, Literal

from lab import _json
from lab.errors import (
    CODE_429_BALANCE,
    OPENAI_TIMEOUT_STATUSES,
    RATE_LIMIT_BALANCE_PHRASES,
    UNKNOWN_ERROR_MESSAGE,
    code_string,
    dig,
    first_text,
    inner_error,
    is_model_error_message,
    parse_error_body,
    parse_status_code,
    status_phrase,
)
from lab.http.sse import SSEEvent
from lab.model import (
    ErrorType,
    FunctionCall,
    ProcessedChunk,
    ProviderError,
    ThoughtLogEntry,
    Usage,
    new_content_chunk,
    new_raw_thought,
    new_thought,
)
from lab.providers.base import (
    RetryAttempt,
    StreamAdapter,
    join_url,
    note_shape,
    note_unknown_keys,
    wire_int,
)
from lab.providers.wire import MAX_WIRE_INT
from lab.request import (
    DATA_URL_RE,
    function_tools,
    image_url,
    parts_of,
    pop_max_tokens,
    pop_stops,
    text_of,
    tool_args,
)

__all__ = [
    "ANTHROPIC_ERROR_TYPES",
    "STOP_REASON_MAP",
    "AnthropicAdapter",
    "anthropic_body",
    "anthropic_error",
    "anthropic_stream_error",
]

ANTHROPIC_VERSION = "2023-06-01"

# -- HTTP and stream errors (no reference adapter: this table is the lab's) ----------------

ANTHROPIC_ERROR_TYPES: dict[str, tuple[ErrorType, bool]] = {
    "invalid_request_error": ("api_error", False),
    "authentication_error": ("api_error", False),
    "permission_error": ("api_error", False),
    "not_found_error": ("api_error", False),
    "request_too_large": ("api_error", False),
    "billing_error": ("api_error", False),
    "rate_limit_error": ("rate_limit", True),
    "api_error": ("api_error", True),
    "timeout_error": ("timeout", True),
    "overloaded_error": ("provider_overloaded", True),
}
ANTHROPIC_OVERLOADED_STATUS = 529
ANTHROPIC_NOT_FOUND_MODEL_PREFIX = "model:"


def anthropic_error(
    error_obj: Mapping[str, Any] | None, *, status: int | None = None
) -> ProviderError:
    """An Anthropic ``{"type":"error","error":{"type","message"}}`` (or its inner object),
    from an HTTP body (with ``status``) or an ``event: error`` frame."""
    err = inner_error(error_obj or {})
    kind = err.get("type") if isinstance(err.get("type"), str) else None
    message = first_text(err.get("message")) or status_phrase(status) or UNKNOWN_ERROR_MESSAGE
    error_type: ErrorType
    retryable: bool
    if status == ANTHROPIC_OVERLOADED_STATUS:
        error_type, retryable = "provider_overloaded", True
    elif kind in ANTHROPIC_ERROR_TYPES:
        error_type, retryable = ANTHROPIC_ERROR_TYPES[kind]
    else:
        error_type, retryable = _anthropic_status_type(status)
    code = kind or code_string(err.get("code")) or (str(status) if status else "unknown")
    lowered = message.lower()
    if error_type == "rate_limit" and any(p in lowered for p in RATE_LIMIT_BALANCE_PHRASES):
        error_type, code, retryable = "api_error", CODE_429_BALANCE, False
    if is_model_error_message(message) or (
        kind == "not_found_error" and lowered.startswith(ANTHROPIC_NOT_FOUND_MODEL_PREFIX)
    ):
        error_type, retryable = "model_error", False
        code = f"{status}_model" if status is not None else "model_error"
    return ProviderError(
        type=error_type,
        message=f"Anthropic API error ({kind or status or 'unknown'}): {message}",
        retryable=retryable,
        code=code,
        status=status,
        user_message=message,
        original_error=dict(error_obj) if isinstance(error_obj, Mapping) else error_obj,
    )


def _anthropic_status_type(status: int | None) -> tuple[ErrorType, bool]:
    if status is None:
        return "unknown", False
    if status == 429:
        return "rate_limit", True
    if status in OPENAI_TIMEOUT_STATUSES:
        return "timeout", True
    if status >= 500:
        return "api_error", True
    return "api_error", False


def anthropic_stream_error(error_obj: Mapping[str, Any]) -> ProviderError:
    """An ``event: error`` payload, e.g. ``{"type":"error","error":{"type":"overloaded_error",
    "message":"Overloaded"}}``."""
    return anthropic_error(error_obj)


# -- request body (Messages API: system, content blocks, tool_use / tool_result) -------

ANTHROPIC_DEFAULT_MAX_TOKENS = 4096


def _anthropic_part(part: dict) -> dict | None:
    if part.get("type") == "text":
        return {"type": "text", "text": part["text"]} if part.get("text") else None
    url = image_url(part)
    if url is None:
        return None
    m = DATA_URL_RE.match(url)
    if m:
        source = {
            "type": "base64",
            "media_type": m.group("mime") or "image/png",
            "data": m.group("data"),
        }
    else:
        source = {"type": "url", "url": url}
    return {"type": "image", "source": source}


def anthropic_body(model: str, msgs: list[dict], tools: list[dict] | None, options: dict) -> dict:
    system_texts: list[str] = []
    out: list[dict] = []

    def add(role: str, blocks: list[dict]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:  # the API wants alternating turns
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})

    for m in msgs:
        role = m.get("role")
        if role == "system":
            text = text_of(m.get("content"))
            if text:
                system_texts.append(text)
        elif role == "assistant":
            blocks: list[dict] = []
            for tb in m.get("thinking_blocks") or ():
                if isinstance(tb, dict):
                    blocks.append(tb)
            blocks.extend(b for b in map(_anthropic_part, parts_of(m.get("content"))) if b)
            for tc in m.get("tool_calls") or ():
                fn = tc.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": tc.get("id") or "",
                        "name": fn.get("name", ""),
                        "input": tool_args(tc),
                    }
                )
            add("assistant", blocks)
        elif role == "tool":
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": m.get("tool_call_id") or "",
                        "content": text_of(m.get("content")),
                    }
                ],
            )
        else:
            add("user", [b for b in map(_anthropic_part, parts_of(m.get("content"))) if b])

    max_tokens = pop_max_tokens(options)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens if max_tokens is not None else ANTHROPIC_DEFAULT_MAX_TOKENS,
        "messages": out,
        "stream": True,
    }
    if system_texts:
        body["system"] = "\n\n".join(system_texts)
    for key in ("temperature", "top_p", "top_k"):
        if options.get(key) is not None:
            body[key] = options.pop(key)
    stops = pop_stops(options)
    if stops:
        body["stop_sequences"] = stops
    fns = function_tools(tools)
    if fns:
        body["tools"] = [
            {
                "name": fn["name"],
                **({"description": fn["description"]} if fn.get("description") else {}),
                "input_schema": fn.get("parameters") or {"type": "object", "properties": {}},
            }
            for fn in fns
        ]
    choice = options.pop("tool_choice", None)
    if choice is not None and fns:
        body["tool_choice"] = _anthropic_tool_choice(choice)
    thinking = options.pop("thinking", None)
    budget = options.pop("thinking_budget", None)
    if isinstance(thinking, dict):
        body["thinking"] = thinking
    elif (
        thinking is True
        or budget is not None
        or (isinstance(thinking, int) and not isinstance(thinking, bool))
    ):
        if isinstance(thinking, int) and not isinstance(thinking, bool):
            budget = thinking
        body["thinking"] = {"type": "enabled", "budget_tokens": budget or 1024}
    for key, value in options.items():  # passed through: the API (and the ladder) decide
        if value is not None:
            body[key] = value
    return body


def _anthropic_tool_choice(choice: Any) -> dict:
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") or choice.get("name")
        return {"type": "tool", "name": name} if name else {"type": "any"}
    return {"type": {"auto": "auto", "none": "none", "required": "any"}.get(str(choice), "auto")}


# -- stream -------------------------------------------------------------------------------

STOP_REASON_MAP: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
"""Anthropic stop_reason -> the lab's cross-provider finish reason (others kept as is)."""


EVENT_TYPES = frozenset(
    {
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "ping",
        "error",
    }
)
MESSAGE_KEYS = frozenset(
    {
        "id",
        "model",
        "usage",
        # knowingly ignored: constant or null at message_start
        "type",
        "role",
        "content",
        "stop_reason",
        "stop_sequence",
        "container",
    }
)
USAGE_COUNTS: tuple[str, ...] = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
USAGE_KEYS = frozenset(
    {*USAGE_COUNTS, "server_tool_use", "service_tier", "cache_creation", "inference_geo"}
)
"""``usage`` keys read (``service_tier``, ``inference_geo`` and the ``cache_creation`` TTL
breakdown are knowingly ignored; ``server_tool_use`` counts go to the done chunk)."""
MESSAGE_DELTA_KEYS = frozenset({"stop_reason", "stop_sequence", "stop_details", "container"})
CLIENT_BLOCK_TYPES = frozenset({"text", "thinking", "redacted_thinking", "tool_use"})
SERVER_CALL_BLOCK_TYPES = frozenset({"server_tool_use", "mcp_tool_use"})
"""Tool calls the API runs itself: read into ``metadata["server_tools"]``, never a client
function call."""
SERVER_RESULT_SUFFIX = "_tool_result"
"""``web_search_tool_result``, ``web_fetch_tool_result``, ``code_execution_tool_result``,
``mcp_tool_result``, ...: what a server tool returned (``metadata["server_tools"]``)."""
DELTA_TYPES = frozenset(
    {"text_delta", "thinking_delta", "signature_delta", "input_json_delta", "citations_delta"}
)


# -- the lean path: text and thinking deltas straight to their chunk ----------------------
#
# Nearly every event of a stream is a content_block_delta carrying a text_delta or a
# thinking_delta. With msgspec such a line is decoded straight into the typed structs below
# (the event's type, its index as a count, the delta's type and text): no dict per event,
# no dispatch by name. Keys the structs do not name are skipped, as the general way reads
# only these (it counts nothing else in a delta event either). Any other line (another event
# or delta type, an index that is not a plain count, a delta that is not an object, text
# that is not a string ...) goes the general way, which decides as before.
# tests/test_anthropic_lean.py checks the two against each other on generated streams.

decode_delta: Callable[[str | bytes], Any] | None = None
"""``decode_delta(line)``: the typed content_block_delta event of a data line; raises
``ValueError`` (msgspec's ``DecodeError`` or ``ValidationError``) or ``RecursionError``
when the line is not one (another event type, no delta object, an index that is not a
count). None itself when msgspec is not the lab's parser. A line longer than
:data:`lab._json.FAST_MAX_CHARS` is not given to it (the caller's test, inline). An
adapter takes it when an attempt starts (``reset``)."""

if _json.PARSER == "msgspec":
    import msgspec
    from msgspec import Meta, Struct

    _Count = Annotated[int, Meta(ge=0, le=MAX_WIRE_INT)]

    class _TypedBlockDelta(Struct, gc=False):
        type: Any = None
        text: Any = None
        thinking: Any = None

    class _TypedDeltaEvent(Struct, gc=False, kw_only=True):
        # the event type and a delta object are required: msgspec refuses any other line
        # in C, so the caller tests nothing more (no Python call per event for the check)
        type: Literal["content_block_delta"]
        index: _Count | None = None
        delta: _TypedBlockDelta

    decode_delta = msgspec.json.Decoder(_TypedDeltaEvent).decode


_DELTA_BLOCK = {
    "text_delta": "text",
    "citations_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "input_json_delta": "tool_use",  # or server_tool_use, mcp_tool_use: any *tool_use
}
"""The block each content delta belongs to; one sent to another kind of block is counted
(``unhandled_shape``)."""


class AnthropicAdapter(StreamAdapter):
    """Anthropic Messages API streaming."""

    provider = "anthropic"
    family = "anthropic"
    sends_done_sentinel = False
    degrades = False  # seed 02 names OpenRouter and the OpenAI-compatible family only
    default_base_url = "https://api.anthropic.com/v1"
    api_key_env = "ANTHROPIC_API_KEY"
    mandatory_keys = ("model", "messages", "stream", "max_tokens")
    """``max_tokens`` is required by the Messages API, so the ladder never drops it."""
    drops_empty_messages = True
    request_paths = {"/messages": ""}
    request_header_markers = ("anthropic-version",)
    request_body_markers = {"anthropic_version": ""}

    # -- request side -------------------------------------------------------------------

    @classmethod
    def tool_id_style(cls, model: str) -> str | None:
        """Claude's tool-call id rule, whatever the model id."""
        return "claude"

    def endpoint(self, base_url: str | None, model: str | None) -> str:
        return join_url(base_url or self.default_base_url, "/messages")

    def request_headers(self, api_key: str | None) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        if api_key and api_key.strip():
            headers["x-api-key"] = api_key
        return headers

    def failure_message(self, status: int, body_text: str) -> str:
        return type(self).error_message(body_text, status) or f"HTTP {status}"

    @classmethod
    def build_body(
        cls, model: str, messages: list[dict], tools: list[dict] | None, options: dict
    ) -> dict[str, Any]:
        """Messages API body: system, content blocks, tool_use / tool_result, max_tokens."""
        return anthropic_body(model, messages, tools, options)

    @classmethod
    def error_message(cls, body_text: str, status: int | None = None) -> str:
        """``error.message``, ``message``, the raw text, the status phrase."""
        parsed = parse_error_body(body_text)
        raw = body_text if isinstance(body_text, str) else ""
        return first_text(
            dig(parsed, "error", "message"), dig(parsed, "message"), raw, status_phrase(status)
        )

    @classmethod
    def normalize_http_error(
        cls, status: int, body_text: str, *, body_error_codes: bool = False
    ) -> ProviderError:
        """The body's ``error.type`` and message by :func:`anthropic_error` (529 ->
        provider_overloaded)."""
        parsed = parse_error_body(body_text)
        inner = {
            "type": dig(parsed, "error", "type"),
            "message": cls.error_message(body_text, status),
        }
        error = anthropic_error({"type": "error", "error": inner}, status=status)
        original = {"provider": cls.provider, "status": status, "body": body_text}
        return error.model_copy(update={"original_error": original})

    # -- per-attempt state --------------------------------------------------------------

    def reset(self) -> None:
        self._make_guards()  # text runs think, spill and speaker (no dedup, as before)
        self.blocks: dict[int, dict[str, Any]] = {}
        self._decode = decode_delta if self._lean else None
        """:data:`decode_delta` when the typed path is on (read once, not per event), else
        None."""
        self.thinking_blocks: list[dict[str, Any]] = []
        self.last_signature: str | None = None
        self.usage_raw: dict[str, int] = {}
        self.usage_final = False
        """``message_delta`` came: the usage is the final report, not message_start's."""
        self.server_tool_use: dict[str, int] = {}
        self.message_id: str | None = None
        self.ended = False

    lean: ClassVar[bool] = True
    """Do text and thinking deltas take the typed path (:data:`decode_delta`, with msgspec)?
    Off, every event goes the general way (the tests compare the two). Read as
    :attr:`StreamAdapter.lean` says."""

    # -- stage 02 + 03 ------------------------------------------------------------------

    def feed_data(self, data: str, event: SSEEvent, out: list[ProcessedChunk]) -> None:
        """One named event: its JSON payload to its ``_on_<type>`` handler; invalid JSON
        ends the stream as an error, unless the body was cut inside this event."""
        decode = self._decode
        if decode is not None and len(data) <= _json.FAST_MAX_CHARS:
            raw = event.raw  # the line's bytes: msgspec would encode data again
            try:  # (unstripped: JSON's whitespace is a part of what str.strip removes)
                ev = decode(data if raw is None else raw)
            except (ValueError, RecursionError):  # another shape or type: the general way
                ev = None
            if ev is not None:
                d = ev.delta
                dtype = d.type
                index = ev.index
                block = None if index is None else self.blocks.get(index)
                # a delta sent to another kind of block goes the general way (counted there)
                if dtype == "text_delta":
                    text = d.text
                    if type(text) is str and (block is None or block["type"] == "text"):
                        think = self.think
                        if (
                            self.speaker is None
                            and not self.spill.inspecting
                            and (think is None or think.idle and "<" not in text)
                        ):  # _text with every guard passing it as it is, inlined: per event
                            if text:
                                if think is not None:
                                    think.fed += len(text)
                                self.committed = True
                                out.append(new_content_chunk(text, []))
                        else:
                            self._text(text, out)
                        return
                elif (
                    dtype == "thinking_delta"
                    and type(d.thinking) is str
                    and (block is None or block["type"] == "thinking")
                ):
                    self._thinking(block, d.thinking, out)
                    return
        text = data.strip()
        try:
            payload = _json.loads(text)
        except (ValueError, RecursionError) as exc:
            if event.unterminated:  # the stream was cut inside this event: a truncation
                self.facts["cut_event_chars"] = len(text)
                return
            self.facts["invalid_json"] += 1
            what = "empty data line" if not text else f"invalid JSON in event data: {exc}"
            error = ProviderError(
                type="unknown",
                message=f"Anthropic stream error: {what}",
                retryable=False,
                code="invalid_json",
                original_error={"event": event.event, "data": text[:2000]},
            )
            out.extend(self.fail(error))
            self.stopped = True
            return
        if not isinstance(payload, dict):
            self._count("unknown_events")
            note_shape(self.facts, f"event data ({type(payload).__name__})")
            return
        kind = payload.get("type")
        if kind == "content_block_delta":  # the common event, without the lookup by name
            self._on_content_block_delta(payload, out)
            return
        if not isinstance(kind, str):
            kind = event.event
        if kind not in EVENT_TYPES:
            self._count("unknown_events")
            note_shape(self.facts, f"event:{kind}")
            return
        getattr(self, f"_on_{kind}")(payload, out)

    def _count(self, key: str) -> None:
        self.facts[key] = self.facts.get(key, 0) + 1

    def _on_ping(self, payload: dict, out: list[ProcessedChunk]) -> None:
        self._count("pings")

    def _on_message_start(self, payload: dict, out: list[ProcessedChunk]) -> None:
        got = payload.get("message")
        message: dict = got if isinstance(got, dict) else {}
        note_unknown_keys(self.facts, message, MESSAGE_KEYS, "message")
        if isinstance(message.get("id"), str):
            self.message_id = message["id"]
            self.facts["response_id"] = message["id"]
        if isinstance(message.get("model"), str):
            self.facts["served_model"] = message["model"]
            self.facts["response_model"] = message["model"]
        self._update_usage(message.get("usage"))
        content, stop = message.get("content"), message.get("stop_reason")
        blocks = content if isinstance(content, list) else []
        if not (isinstance(stop, str) and stop):
            stop = None
        if blocks or stop:
            self._message_start_content(blocks, stop, message, out)

    def _message_start_content(
        self, blocks: list, stop: str | None, message: dict, out: list[ProcessedChunk]
    ) -> None:
        """A ``message_start`` whose message is already whole (content **blocks**, a
        **stop** reason): read as the blocks' start and stop events and a ``message_delta``
        would be, with ``config.read_message_start_content``; counted otherwise."""
        if not self.config.read_message_start_content:
            for _ in blocks:
                note_shape(self.facts, "message.content[]")
            if stop:
                note_shape(self.facts, "message.stop_reason")
            return
        for block in blocks:
            index = len(self.blocks)
            self._on_content_block_start({"index": index, "content_block": block}, out)
            self._on_content_block_stop({"index": index}, out)
        if stop:
            self._on_message_delta(
                {"delta": {"stop_reason": stop, "stop_sequence": message.get("stop_sequence")}},
                out,
            )

    def _on_message_stop(self, payload: dict, out: list[ProcessedChunk]) -> None:
        self.facts["message_stop"] = True

    def _update_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        note_unknown_keys(self.facts, usage, USAGE_KEYS, "usage")
        bad: list[str] = []
        for key in USAGE_COUNTS:
            value = wire_int(usage.get(key), f"usage.{key}", bad)
            if value is not None:
                self.usage_raw[key] = value
        stu = usage.get("server_tool_use")
        if isinstance(stu, dict):
            for key, raw in stu.items():
                value = wire_int(raw, f"usage.server_tool_use.{key}", bad)
                if value is not None:
                    self.server_tool_use[str(key)] = value
        if bad:
            self.facts.setdefault("hostile_values", []).extend(bad)

    def _usage(self) -> Usage | None:
        """The usage so far; under ``final_usage_only`` only once ``message_delta`` came."""
        if self.config.final_usage_only and not self.usage_final:
            return None
        return self._usage_so_far()

    def _note_provisional_usage(self) -> None:
        if not self.usage_final:
            usage = self._usage_so_far()
            if usage is not None:
                self.facts["provisional_usage"] = usage.model_dump()

    def _usage_so_far(self) -> Usage | None:
        u = self.usage_raw
        if not u:
            return None
        cache_read = u.get("cache_read_input_tokens", 0)
        cache_write = u.get("cache_creation_input_tokens", 0)
        return Usage(
            input_tokens=u.get("input_tokens", 0) + cache_read + cache_write,
            output_tokens=u.get("output_tokens", 0),
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        )

    def _index(self, payload: dict) -> int | None:
        index = payload.get("index")
        if type(index) is int and 0 <= index <= MAX_WIRE_INT:  # the common case: no list
            return index
        bad: list[str] = []
        value = wire_int(index, "index", bad)
        if bad:
            self.facts.setdefault("hostile_values", []).extend(bad)
        return value

    def _on_content_block_start(self, payload: dict, out: list[ProcessedChunk]) -> None:
        index = self._index(payload)
        if index is None:
            index = len(self.blocks)
        got = payload.get("content_block")
        cb: dict = got if isinstance(got, dict) else {}
        got_type = cb.get("type")
        btype: str = got_type if isinstance(got_type, str) else "unknown"
        block: dict[str, Any] = {"type": btype, "parts": [], "signature": "", "open": True}
        self.blocks[index] = block
        if btype in ("tool_use", *SERVER_CALL_BLOCK_TYPES):
            block["id"] = cb.get("id") if isinstance(cb.get("id"), str) else None
            block["name"] = cb.get("name") if isinstance(cb.get("name"), str) else ""
            block["input"] = cb.get("input") if isinstance(cb.get("input"), dict) else {}
            if btype != "tool_use":
                block["server_name"] = cb.get("server_name")
            self.committed = True
        elif btype.endswith(SERVER_RESULT_SUFFIX):
            block["result"] = {k: v for k, v in cb.items()}
            self.committed = True
        elif btype == "redacted_thinking":
            data = cb.get("data") if isinstance(cb.get("data"), str) else ""
            self.thinking_blocks.append({"type": "redacted_thinking", "data": data})
            self._count("redacted_thinking")
            self.committed = True
        elif btype == "thinking":
            if isinstance(cb.get("thinking"), str) and cb["thinking"]:
                self._thinking(block, cb["thinking"], out)
            if isinstance(cb.get("signature"), str):
                block["signature"] = cb["signature"]
        elif btype == "text":
            if isinstance(cb.get("citations"), list) and cb["citations"]:
                block["citations"] = list(cb["citations"])
            if isinstance(cb.get("text"), str) and cb["text"]:
                self._text(cb["text"], out)
        else:
            self._count("unknown_blocks")
            note_shape(self.facts, f"content_block:{btype}")

    def _on_content_block_delta(self, payload: dict, out: list[ProcessedChunk]) -> None:
        index = self._index(payload)
        block = self.blocks.get(index) if index is not None else None
        got = payload.get("delta")
        delta: dict = got if isinstance(got, dict) else {}
        dtype = delta.get("type")
        if (
            block is not None
            and type(dtype) is str
            and dtype in _DELTA_BLOCK
            and block["type"] != _DELTA_BLOCK[dtype]
        ):
            btype = block["type"]
            if not (dtype == "input_json_delta" and str(btype).endswith("tool_use")):
                # a delta sent to another kind of block (sglang #25876, openllmetry #4050):
                # read as it comes, where that loses it (JSON into a text block), counted
                note_shape(self.facts, f"{dtype} on a {btype} block")
        elif block is None and dtype == "input_json_delta":
            note_shape(self.facts, "input_json_delta on no started block")
        if dtype == "text_delta" and isinstance(delta.get("text"), str):
            self._text(delta["text"], out)
        elif dtype == "thinking_delta" and isinstance(delta.get("thinking"), str):
            self._thinking(block, delta["thinking"], out)
        elif dtype == "signature_delta" and isinstance(delta.get("signature"), str):
            if block is not None:
                block["signature"] += delta["signature"]
        elif dtype == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            if block is not None:
                block["parts"].append(delta["partial_json"])
        elif dtype == "citations_delta" and isinstance(delta.get("citation"), dict):
            if block is not None:
                block.setdefault("citations", []).append(delta["citation"])
        else:
            self._count("unknown_deltas")
            note_shape(self.facts, f"delta:{dtype if isinstance(dtype, str) else '?'}")

    def _on_content_block_stop(self, payload: dict, out: list[ProcessedChunk]) -> None:
        index = self._index(payload)
        block = self.blocks.get(index) if index is not None else None
        if block is None or not block["open"]:
            return
        block["open"] = False
        server = self._server_entry(block)
        if server is not None:
            out.append(ProcessedChunk(type="text", content="", metadata={"server_tools": [server]}))
        elif block.get("citations"):
            out.append(
                ProcessedChunk(type="text", content="", metadata={"citations": block["citations"]})
            )
        if block["type"] == "thinking":
            sig = block["signature"] or None
            self.thinking_blocks.append(
                {"type": "thinking", "thinking": "".join(block["parts"]), "signature": sig or ""}
            )
            if sig:
                self.last_signature = sig
                out.append(
                    ProcessedChunk(type="text", content="", metadata={"thoughtSignature": sig})
                )
        elif block["type"] == "tool_use":
            self._flush_speaker(out)
            out.append(self._call_chunk(block))

    def _on_message_delta(self, payload: dict, out: list[ProcessedChunk]) -> None:
        self.usage_final = True
        self._update_usage(payload.get("usage"))
        got = payload.get("delta")
        delta: dict = got if isinstance(got, dict) else {}
        note_unknown_keys(self.facts, delta, MESSAGE_DELTA_KEYS, "message_delta.delta")
        stop = delta.get("stop_reason")
        metadata: dict[str, Any] = {}
        usage = self._usage()
        if usage is not None:
            metadata["usage"] = usage
        if self.server_tool_use:
            metadata["server_tool_use"] = dict(self.server_tool_use)
        if isinstance(stop, str) and stop:
            finish = STOP_REASON_MAP.get(stop, stop)
            self._record_finish(finish)
            metadata["finish_reason"] = finish
            metadata["native_finish_reason"] = stop
            if isinstance(delta.get("stop_sequence"), str):
                metadata["stop_sequence"] = delta["stop_sequence"]
            self._flush_speaker(out)
            out.append(ProcessedChunk(type="done", metadata=metadata))
        elif metadata:
            out.append(ProcessedChunk(type="text", content="", metadata=metadata))

    def _on_error(self, payload: dict, out: list[ProcessedChunk]) -> None:
        error = anthropic_stream_error(payload)
        if not self.committed:
            status = parse_status_code(error.status)
            got = payload.get("error")
            inner: dict = got if isinstance(got, dict) else payload
            message = inner.get("message") if isinstance(inner.get("message"), str) else ""
            if self.on_precommit_error(status, message or error.message):
                raise RetryAttempt(status, message or error.message)
        out.extend(self.fail(error))

    # -- text and thinking --------------------------------------------------------------

    def _thinking(self, block: dict | None, text: str, out: list[ProcessedChunk]) -> None:
        if not text:
            return
        if block is not None:
            block["parts"].append(text)
        spill = self.spill
        if spill.inspecting:  # observe_reasoning is a no-op after the answer started
            spill.observe_reasoning(text)
        self.committed = True
        out.append(new_content_chunk("", [new_raw_thought(text)]))

    def _text(self, text: str, out: list[ProcessedChunk]) -> None:
        # the spill and speaker guards' note drain (_ran), inlined: per delta
        reasoning = ""
        think = self.think
        if think is not None and text:
            if think.idle and "<" not in text:  # passed as it is: only counted (per delta)
                think.fed += len(text)
            else:
                g = self._ran(think, think.feed(text))
                text = g.content
                reasoning = g.reasoning  # empty when capture_think_blocks_as_thoughts is off
        spill = self.spill
        if reasoning:
            spill.observe_reasoning(reasoning)
        if text and spill.inspecting:  # filter passes every delta once the answer started
            g = spill.filter(text)
            if spill.notes:
                self._drain(spill)
            text = g.content
            if g.reasoning:
                reasoning += g.reasoning
        fired = False
        speaker = self.speaker
        if speaker is not None and text:
            text = speaker.feed(text)
            if speaker.notes:
                self._drain(speaker)
            fired = speaker.fired
        if text or reasoning:
            self.committed = True
            out.append(new_content_chunk(text, [new_raw_thought(reasoning)] if reasoning else []))
        if fired:
            self.stopped = True

    def _flush_speaker(self, out: list[ProcessedChunk]) -> None:
        if self.speaker is not None:
            tail = self.speaker.flush()
            if tail:
                out.append(ProcessedChunk(type="text", content=tail))

    # -- tool calls ---------------------------------------------------------------------

    def _build_call(self, block: dict) -> FunctionCall:
        raw = "".join(block["parts"])
        if raw:
            parsed = self._parse_arguments(raw, block["name"])
            args, truncated, error = parsed.args, parsed.truncated, parsed.error
        else:  # no input_json_delta (or only ""): the start event's input, normally {}
            args, truncated, error = dict(block.get("input") or {}), False, None
        if block["open"]:  # the stream ended inside the block: its input may be cut
            truncated = True
        provider_fields: dict[str, Any] = {}
        if self.thinking_blocks:
            provider_fields["thinking_blocks"] = list(self.thinking_blocks)
        if error is not None:
            provider_fields["raw_arguments"] = raw
            provider_fields["arguments_error"] = error
        return FunctionCall(
            name=block["name"],
            args=args,
            id=block.get("id"),
            thought_signature=self.last_signature,
            arguments_truncated=truncated,
            provider_fields=provider_fields,
        )

    def _call_chunk(self, block: dict) -> ProcessedChunk:
        metadata: dict[str, Any] = {}
        usage = self._usage()
        if usage is not None:
            metadata["usage"] = usage
        return ProcessedChunk(
            type="function_call", function_call=self._build_call(block), metadata=metadata
        )

    def _server_entry(self, block: dict) -> dict[str, Any] | None:
        """A server tool's call (its input parsed) or result, as kept in metadata."""
        btype = block["type"]
        if btype in SERVER_CALL_BLOCK_TYPES:
            raw = "".join(block["parts"])
            entry: dict[str, Any] = {"type": btype, "id": block.get("id"), "name": block["name"]}
            if block.get("server_name") is not None:
                entry["server_name"] = block["server_name"]
            if raw:
                parsed = self._parse_arguments(raw, block["name"])
                entry["input"] = parsed.args
                if parsed.truncated or parsed.error is not None:
                    entry["raw_input"] = raw
            else:
                entry["input"] = dict(block.get("input") or {})
            return entry
        if btype.endswith(SERVER_RESULT_SUFFIX):
            return block.get("result")
        return None

    def _open_tool_blocks(self) -> list[dict]:
        return [b for _, b in sorted(self.blocks.items()) if b["open"] and b["type"] == "tool_use"]

    # -- end of stream ------------------------------------------------------------------

    def release_held(self, out: list[ProcessedChunk], *, error_path: bool) -> None:
        """Spill flush, then think flush and the speaker tail (the error path: the tail
        first)."""
        g = self._ran(self.spill, self.spill.flush())
        if g.content:
            out.append(ProcessedChunk(type="text", content=g.content))

        def think_flush() -> None:
            if self.think is None:
                return
            g = self._ran(self.think, self.think.flush())
            reasoning = g.reasoning  # empty when capture_think_blocks_as_thoughts is off
            if g.content or reasoning:
                thoughts = [_raw(reasoning)] if reasoning else []
                out.append(ProcessedChunk(type="text", content=g.content, thoughts=thoughts))

        if error_path:
            self._flush_speaker(out)
            think_flush()
        else:
            think_flush()
            self._flush_speaker(out)

    def close_open_calls(self, out: list[ProcessedChunk], metadata: dict | None) -> None:
        """A tool_use block the stream cut: at a natural end its repaired (truncated) call;
        on the error path its partial call in ``metadata["incomplete_tool_calls"]``."""
        if metadata is None:
            for block in self._open_tool_blocks():
                self.facts["cut_tool_use"] = True
                out.append(self._call_chunk(block))
                block["open"] = False
            return
        partial = []
        for block in self._open_tool_blocks():
            partial.append(self._build_call(block).model_dump())
            block["open"] = False
        if partial:
            metadata["incomplete_tool_calls"] = partial

    def settle(self, out: list[ProcessedChunk], metadata: dict | None) -> None:
        """The error carries the usage so far; usage never made final is named provisional."""
        if metadata is not None:
            usage = self._usage()
            if usage is not None:
                metadata["usage"] = usage
        self._note_provisional_usage()


def _raw(text: str) -> ThoughtLogEntry:
    return new_thought(kind="raw", content=text)
