"""OpenRouter: stage 02 (line rules, chunk normalization, guards, commit point) and stage 03.

Per SSE event (docs/reference.md, "3.3 OpenRouter line rules" to "3.8 OpenRouter process_chunk")::

    data line -> json (invalid: skipped, counted) -> normalize_openrouter_chunk
      -> mid-stream error before the commit point? ask the degradation plan (RetryAttempt)
      -> split text + tool signal
      -> per piece: think strip -> spill guard -> dedup -> speaker guard -> commit check
         -> speaker tail flush before a non-text terminal chunk -> meaningful filter
         -> process_chunk -> ProcessedChunk

``[DONE]`` is noted but does not stop reading (the body ends the stream). Several ``data:``
lines inside one SSE event are processed one by one, as the reference's line reader does.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from lab import _json
from lab.degrade import is_generic_error_message
from lab.errors import (
    UNKNOWN_ERROR_MESSAGE,
    code_string,
    compact_json,
    dig,
    first_text,
    inner_error,
    parse_error_body,
    parse_status_code,
    status_phrase,
)
from lab.guards.markup import MarkupGuard
from lab.http.sse import SSEEvent
from lab.model import (
    ErrorType,
    ProcessedChunk,
    ProviderError,
    ThoughtLogEntry,
    Usage,
    new_chunk,
    new_piece_chunk,
    new_raw_thought,
    new_thought,
)
from lab.providers.chat import argument_call
from lab.providers.openai_compat import (
    CHOICE_KEYS,
    CHUNK_KEYS,
    DELTA_KEYS,
    OpenAICompatibleAdapter,
    ordered_body,
)
from lab.providers.wire import (
    ToolCallAccumulator,
    choice_usage,
    is_number,
    note_shape,
    note_unknown_keys,
    openai_usage,
    reasoning_details_text,
    reasoning_object_text,
    split_text_and_tool,
    unread_chars,
    wire_int,
)

# --------------------------------------------------------------------------- errors

OPENROUTER_CODE_TYPE_TABLE: tuple[tuple[tuple[str, ...], ErrorType, bool], ...] = (
    (("400", "401", "402", "413", "404"), "api_error", False),
    (("408",), "timeout", True),
    (("429",), "rate_limit", True),
    (("502", "503"), "provider_overloaded", True),
)
"""``mapErrorCodeToType``: substrings of the code string OR the message, in order."""
OPENROUTER_MESSAGE_TYPE_TABLE: tuple[tuple[str, ErrorType, bool], ...] = (
    ("timeout", "timeout", True),
    ("content", "content_blocked", False),
)
"""Then lowercase substrings of the message alone."""
OPENROUTER_PRIVACY_MARKERS: tuple[str, ...] = (
    "data policy",
    "Paid model training",
    "openrouter.ai/settings/privacy",
)
OPENROUTER_PRIVACY_MESSAGE = (
    "OpenRouter Privacy Policy Error: The selected model requires allowing data for paid "
    "model training, but your account privacy settings block this.\n\nOriginal error: {original}"
)
OPENROUTER_DEFAULT_MESSAGE = "OpenRouter API error"
OPENROUTER_RAW_RESPONSE_MAX_CHARS = 3000
"""A generic 400's raw body is appended to the failure message up to this many characters."""
OPENROUTER_DEFAULT_MODEL_LABEL = "other-model"
OPENROUTER_MALFORMED_TOOL_CALL_CODE = "invalid_type"
OPENROUTER_MALFORMED_TOOL_CALL_MARKERS: tuple[str, ...] = (
    "expected string, received null",
    "expected string",
    "invalid_type",
)


def openrouter_error_type(code: Any, message: str | None) -> tuple[ErrorType, bool]:
    """``mapErrorCodeToType``: (type, retryable) from substrings of the code or message."""
    code_text = "" if code is None else str(code)
    text = message or ""
    for needles, error_type, retryable in OPENROUTER_CODE_TYPE_TABLE:
        if any(n in code_text or n in text for n in needles):
            return error_type, retryable
    lowered = text.lower()
    for needle, error_type, retryable in OPENROUTER_MESSAGE_TYPE_TABLE:
        if needle in lowered:
            return error_type, retryable
    return "unknown", False


def is_openrouter_privacy_error(message: str | None) -> bool:
    """The account's privacy settings exclude every endpoint of the model."""
    text = message or ""
    return any(marker in text for marker in OPENROUTER_PRIVACY_MARKERS)


def openrouter_provider_error(
    code: Any, message: str | None, original: Any = None, *, status: int | None = None
) -> ProviderError:
    """``handleProviderError`` after extraction: the privacy case, else
    "OpenRouter API error (<code>): <message>" typed by :func:`openrouter_error_type`."""
    final_message = message or UNKNOWN_ERROR_MESSAGE
    final_code = code_string(code) or "unknown"
    status = status if status is not None else parse_status_code(code)
    if is_openrouter_privacy_error(final_message):
        return ProviderError(
            type="api_error",
            message=OPENROUTER_PRIVACY_MESSAGE.format(original=final_message),
            retryable=False,
            code=final_code,
            status=status,
            original_error=original,
        )
    error_type, retryable = openrouter_error_type(final_code, final_message)
    return ProviderError(
        type=error_type,
        message=f"OpenRouter API error ({final_code}): {final_message}",
        retryable=retryable,
        code=final_code,
        status=status,
        user_message=final_message,
        original_error=original,
    )


def openrouter_http_failure_message(
    status: int,
    body_text: str,
    request_body: Mapping[str, Any],
    attempt_label: str,
) -> str:
    """The message of the error the OpenRouter adapter throws when no retry is planned:
    ``HTTP <status>[ (<error.code>)]: <message>[ | raw_response: <body>] | model: <model> |
    request_params: <sorted keys> | request_attempt: <label>``. The raw body (at most
    :data:`OPENROUTER_RAW_RESPONSE_MAX_CHARS`, then "…") is added only for a generic 400.
    Feed the result to :func:`openrouter_provider_error` with ``code=status``.
    """
    message = OpenRouterAdapter.error_message(body_text, status)
    error_code = code_string(dig(parse_error_body(body_text), "error", "code"))
    parts = [f"HTTP {status}" + (f" ({error_code})" if error_code else "") + f": {message}"]
    if status == 400 and is_generic_error_message(message):
        raw = body_text or ""
        if len(raw) > OPENROUTER_RAW_RESPONSE_MAX_CHARS:
            raw = raw[:OPENROUTER_RAW_RESPONSE_MAX_CHARS] + "…"
        parts.append(f"raw_response: {raw}")
    model = request_body.get("model")
    parts.append(
        f"model: {model if isinstance(model, str) and model else OPENROUTER_DEFAULT_MODEL_LABEL}"
    )
    parts.append(f"request_params: {', '.join(sorted(request_body))}")
    parts.append(f"request_attempt: {attempt_label}")
    return " | ".join(parts)


def is_provider_error_shape(err: Mapping[str, Any]) -> bool:
    """The normalizer's error rule: an error object that is already a ProviderError (string ``type``,
    string ``message``, boolean ``retryable``) is passed on unchanged."""
    return (
        isinstance(err.get("type"), str)
        and isinstance(err.get("message"), str)
        and isinstance(err.get("retryable"), bool)
    )


def _from_provider_error_shape(err: Mapping[str, Any]) -> ProviderError:
    """The ProviderError such an object describes; a type outside the known set is
    ``unknown`` (the object came off the wire), ``userMessage`` is ``user_message``."""
    fields: dict[str, Any] = {k: err[k] for k in ("type", "message", "retryable")}
    if fields["type"] not in typing.get_args(ErrorType):
        fields["type"] = "unknown"
    for key in ("code", "user_message"):
        if isinstance(err.get(key), str):
            fields[key] = err[key]
    if isinstance(err.get("userMessage"), str):
        fields["user_message"] = err["userMessage"]
    return ProviderError(**fields)


def openrouter_stream_error(error_obj: Mapping[str, Any] | ProviderError) -> ProviderError:
    """``processChunk``'s error branch for an SSE ``error`` object (or a chunk holding one).

    A pre-formed ProviderError (:func:`is_provider_error_shape`) passes through. Otherwise
    message = ``metadata.raw`` (a string) or ``message`` or "OpenRouter API error", code =
    the code as a string ("unknown" when there is none); type from
    :func:`openrouter_error_type`; the message is not prefixed.
    """
    if isinstance(error_obj, ProviderError):
        return error_obj
    err = inner_error(error_obj)
    if is_provider_error_shape(err):
        return _from_provider_error_shape(err)
    message = first_text(dig(err, "metadata", "raw"), err.get("message")) or (
        OPENROUTER_DEFAULT_MESSAGE
    )
    raw_code = err.get("code")
    code = "unknown" if raw_code is None or isinstance(raw_code, bool) else str(raw_code)
    error_type, retryable = openrouter_error_type(code, message)
    return ProviderError(
        type=error_type,
        message=message,
        retryable=retryable,
        code=code,
        status=parse_status_code(raw_code),
        original_error=dict(err),
    )


def is_openrouter_malformed_tool_call_error(error_obj: Mapping[str, Any]) -> bool:
    """Code exactly "invalid_type" and a message containing one of the markers (the error step of the
    reference's ``processChunk``,
    case-sensitive as in the reference, so zod's capitalised "Expected string, received
    null" matches only through "invalid_type" in its text): with a non-empty tool-call
    accumulator the adapter ends the call as ``done`` + ``malformedToolCall``."""
    err = inner_error(error_obj)
    message = err.get("message") if isinstance(err.get("message"), str) else ""
    return err.get("code") == OPENROUTER_MALFORMED_TOOL_CALL_CODE and any(
        marker in message for marker in OPENROUTER_MALFORMED_TOOL_CALL_MARKERS
    )


OPENROUTER_BODY_ORDER = (
    "reasoning",
    "temperature",
    "max_tokens",
    "tools",
    "top_p",
    "top_k",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "min_p",
    "logit_bias",
    "stop",
)
"""OpenRouter's optional body keys, in the reference's order (docs/reference.md, "3.1 OpenRouter request body")."""

_OR_CHOICE_KEYS = CHOICE_KEYS | {"finishReason"}
_OR_DELTA_KEYS = DELTA_KEYS | {"toolCalls", "reasoningDetails"}
_OR_READ_DELTA_KEYS = _OR_DELTA_KEYS | {"refusal"}
"""The delta keys OpenRouter's rules read: also ``refusal`` (OpenAI models' refusal text,
in place of content), read into the result's ``refusal`` as in the chat family. A delta
with one is not of the typed decoder's shape, so it takes the general way."""

__all__ = ["OpenRouterAdapter", "normalize_openrouter_chunk", "openrouter_usage"]

_MISSING = object()


def _norm_tool_call(tc: Any) -> dict | None:
    if not isinstance(tc, dict):
        return None
    out: dict[str, Any] = {}
    index = tc.get("index")
    if type(index) is not int:
        index = wire_int(index)
    elif index < 0:
        index = None
    if index is not None:
        out["index"] = index
    for key in ("id", "type", "thought_signature"):
        v = tc.get(key)
        if isinstance(v, str) and v:  # an empty id is no id: it never overwrites the real one
            out[key] = v
    fn = tc.get("function")
    if isinstance(fn, dict):
        f: dict[str, Any] = {}
        if isinstance(fn.get("name"), str):
            f["name"] = fn["name"]
        args = fn.get("arguments")
        if isinstance(args, str):
            f["arguments"] = args
        elif isinstance(args, dict):  # some backends send the object itself
            f["arguments"] = args
        out["function"] = f
    return out


_ENVELOPE_KEYS = ("id", "object", "model", "provider")


def normalize_openrouter_chunk(raw: Any, bad: list[str] | None = None) -> dict | None:
    """Normalize one parsed OpenRouter chunk (docs/reference.md, "3.4 OpenRouter chunk normalization");
    None means "drop it". A hostile usage
    count is left out and its path appended to **bad** (:func:`~lab.providers.base.wire_int`)."""
    if not isinstance(raw, dict):
        return None
    if "data" in raw:
        inner = raw["data"]
        if isinstance(inner, str):
            try:
                inner = _json.loads(inner)
            except (ValueError, RecursionError):  # nesting too deep is invalid JSON too
                return None
        if isinstance(inner, dict):
            return normalize_openrouter_chunk(inner, bad)
    err = raw.get("error")
    if isinstance(err, dict):
        if is_provider_error_shape(err):
            return {"error": err}
        meta = err.get("metadata")
        message = None
        if isinstance(meta, dict) and isinstance(meta.get("raw"), str):
            message = meta["raw"]
        elif isinstance(err.get("message"), str):
            message = err["message"]
        code = err.get("code")
        if not (isinstance(code, str) or is_number(code)):
            code = "unknown"
        return {"error": {"code": code, "message": message or "OpenRouter API error"}}
    if isinstance(raw.get("message"), str) and ("code" in raw or "type" in raw):
        code = raw.get("code", "unknown")
        return {
            "error": {"code": code if code is not None else "unknown", "message": raw["message"]}
        }

    out: dict[str, Any] = {}
    choices_raw = raw.get("choices")
    if isinstance(choices_raw, list):
        choices = []
        for pos, ch in enumerate(choices_raw):
            if not isinstance(ch, dict):
                continue
            delta_raw = ch.get("delta")
            delta: dict[str, Any] = {}
            if isinstance(delta_raw, dict):
                v = delta_raw.get("role")
                if isinstance(v, str):
                    delta["role"] = v
                v = delta_raw.get("content", _MISSING)
                if v is None or isinstance(v, str):
                    delta["content"] = v
                v = delta_raw.get("reasoning", _MISSING)
                if v is None or isinstance(v, str):
                    delta["reasoning"] = v
                unread = _unread_reasoning(v, delta_raw.get("reasoning_content"))
                if unread:
                    delta["_unread_reasoning"] = unread
                tcs = delta_raw.get("tool_calls")
                if tcs is None:
                    tcs = delta_raw.get("toolCalls")
                if type(tcs) is list:
                    delta["tool_calls"] = [t for t in map(_norm_tool_call, tcs) if t is not None]
                rd = delta_raw.get("reasoning_details")
                if rd is None:
                    rd = delta_raw.get("reasoningDetails")
                if type(rd) is list:
                    delta["reasoning_details"] = rd
            fr = ch["finish_reason"] if "finish_reason" in ch else ch.get("finishReason")
            idx = ch.get("index")
            if type(idx) is not int:  # the common case skips the call
                idx = wire_int(idx)
            choices.append(
                {
                    "index": pos if idx is None else idx,
                    "delta": delta,
                    "finish_reason": fr if isinstance(fr, str) else None,
                    "logprobs": ch.get("logprobs"),
                }
            )
        out["choices"] = choices
    u = raw.get("usage")
    usage = openrouter_usage(u, bad) if u is not None else None
    if usage is not None:
        out["usage"] = usage
    if "choices" not in out and "usage" not in out:
        return None
    for key in _ENVELOPE_KEYS:
        v = raw.get(key)
        if type(v) is str or isinstance(v, str):
            out[key] = v
    v = raw.get("created")
    if type(v) is int or is_number(v):
        out["created"] = v
    return out


def _lone_delta(raw: Any) -> dict | None:
    """The delta of a parsed chunk the lean steps may take, else None: the typed decoder's
    keys, no usage, one choice at index 0 (or none given) with no finish reason, a delta
    object with no ``toolCalls``, ``reasoningDetails`` or ``reasoning_content``."""
    # what turns a chunk away most often is looked at first: usage, a finish
    if type(raw) is not dict or raw.get("usage") is not None:
        return None
    if type(choices := raw.get("choices")) is not list or len(choices) != 1:
        return None
    ch = choices[0]
    if (
        type(ch) is not dict
        or ch.get("finish_reason") is not None
        or ch.get("finishReason") is not None
        or type(d := ch.get("delta")) is not dict
        or d.get("toolCalls") is not None
        or d.get("reasoning_content") is not None
        or d.get("reasoningDetails") is not None
        or not raw.keys() <= _TYPED_CHUNK_KEYS
        or not ch.keys() <= _OR_CHOICE_KEYS
        or not d.keys() <= _OR_DELTA_KEYS
        or ((idx := ch.get("index")) is not None and (type(idx) is not int or idx != 0))
    ):
        return None
    return d


def _piece_fields(d: dict) -> tuple[str | None, str | None, list | None] | None:
    """A lone delta's (content, reasoning, reasoning_details) when it is a plain piece:
    no tool call, ``role``, ``content`` and ``reasoning`` strings or null,
    ``reasoning_details`` a list or null."""
    content, reasoning, role = d.get("content"), d.get("reasoning"), d.get("role")
    details = d.get("reasoning_details")
    if (
        d.get("tool_calls") is not None
        or (content is not None and type(content) is not str)
        or (reasoning is not None and type(reasoning) is not str)
        or (role is not None and type(role) is not str)
        or (details is not None and type(details) is not list)
    ):
        return None
    return content, reasoning, details


def _argument_fields(d: dict) -> tuple[int, str] | None:
    """A lone delta's (tool-call index, arguments) when all it carries is one argument
    delta (:func:`~lab.providers.chat.argument_call`): ``content`` and ``reasoning`` empty
    or null, ``reasoning_details`` an empty list or null, ``role`` a string or null."""
    content, reasoning, role = d.get("content"), d.get("reasoning"), d.get("role")
    details = d.get("reasoning_details")
    if (
        not (content is None or content == "")
        or not (reasoning is None or reasoning == "")
        or not (role is None or type(role) is str)
        or not (details is None or (type(details) is list and not details))
    ):
        return None
    return argument_call(d.get("tool_calls"))


def lean_fields(raw: Any) -> tuple[str | None, str | None, list | None, Any] | None:
    """A parsed chunk's (content, reasoning, reasoning_details, provider) when it is a *plain
    piece*, else None. A plain piece has the typed decoder's keys (``error`` not among
    them), no usage, one choice at index 0 (or none given) with no finish reason, a delta
    object whose ``role``, ``content`` and ``reasoning`` are strings or null,
    ``reasoning_details`` a list or null, and no tool call, ``reasoning_content`` or
    ``reasoningDetails``. For such a piece :meth:`OpenRouterAdapter._lean_piece` takes the
    steps the chat machine takes (its checks of errors, other choices, tool calls, finish
    reasons and usage all pass). The same rules hold for the typed struct
    (:data:`lone_struct_delta` with no tool call)."""
    d = _lone_delta(raw)
    got = None if d is None else _piece_fields(d)
    return None if got is None else (*got, raw.get("provider"))


def lean_argument_fields(raw: Any) -> tuple[int, str] | None:
    """A parsed chunk's (tool-call index, arguments) when all it carries is one argument
    delta, else None: :func:`lean_fields`'s rules for the chunk, choice and delta, then a
    delta whose ``content`` and ``reasoning`` are empty or null, ``reasoning_details`` an
    empty list or null, and one tool call holding only ``index`` and
    ``function.arguments`` (:func:`~lab.providers.chat.argument_call`). Such a chunk meets
    none of OpenRouter's steps but the tool call's
    (:meth:`OpenRouterAdapter._lean_argument_chunk`)."""
    d = _lone_delta(raw)
    return None if d is None else _argument_fields(d)


_TYPED_CHUNK_KEYS = CHUNK_KEYS - {"error"}


# --------------------------------------------------------------------------- typed fast path


# With msgspec as the lab's JSON parser (lab/_json.py), the common chunk shape is decoded
# straight into typed structs, whose fields are exactly the keys the shape check knows
# and whose types are the ones normalize_openrouter_chunk keeps as they are. A line with
# any other key, or any value of another type (a list for content, a bool for an index, a
# NaN, an error object, a wrapped "data" ...), is not decoded here: it goes the general
# way (json, shape check, normalize_openrouter_chunk), which decides as before. The
# decoder builds the same normalized dict (tests/test_openrouter_typed.py checks it against
# normalize_openrouter_chunk on generated chunks); what it buys: docs/PERFORMANCE.md.
def _unread_reasoning(reasoning: Any, reasoning_content: Any) -> str:
    """Reasoning a delta carries where OpenRouter's rule does not read it: ``reasoning`` as
    an object (``{"text": ...}``) and ``reasoning_content`` (a string or such an object). The
    normalized delta keeps it as ``_unread_reasoning`` for :meth:`map_reasoning`."""
    said = reasoning_object_text(reasoning)
    other = (
        reasoning_content
        if isinstance(reasoning_content, str)
        else reasoning_object_text(reasoning_content)
    )
    return said + other if said and other and other != said else said or other


decode_typed_chunk: Callable[[str, list[str]], dict | None] | None = None
"""``decode_typed_chunk(line, bad)``: the normalized chunk of a data line of the common
shape (hostile usage counts appended to **bad**, as the normalizer does), or None for any
other line. None itself when msgspec is not the lab's parser."""

decode_struct: Callable[[str | bytes], Any] | None = None
"""``decode_struct(line)``: a data line of the common shape as its typed struct; raises
``ValueError`` (msgspec's ``DecodeError`` or ``ValidationError``) or ``RecursionError``
for any other line (the first step of :data:`decode_typed_chunk`; :func:`struct_chunk` is
the second). None itself when msgspec is not the lab's parser. A line longer than
:data:`lab._json.FAST_MAX_CHARS` is not given to it (the callers' test, inline)."""

struct_chunk: Callable[[Any, list[str]], dict | None] = None  # type: ignore[assignment]
"""``struct_chunk(raw, bad)``: the normalized chunk of a struct :data:`decode_struct` gave."""

lone_struct_delta: Callable[[Any], Any] = None  # type: ignore[assignment]
"""``lone_struct_delta(raw)``: :func:`_lone_delta` on a typed struct (its keys and types are
the decoder's): the delta the lean steps may take, else None. With no tool call it is a
plain piece (:func:`lean_fields`); with one, :data:`struct_arguments` says whether it is
an argument delta (:func:`lean_argument_fields`)."""

struct_arguments: Callable[[Any], tuple[int, str] | None] = None  # type: ignore[assignment]
"""``struct_arguments(d)``: :func:`_argument_fields` on a typed lone delta."""

if _json.PARSER == "msgspec":
    import msgspec
    from msgspec import UNSET, Struct, UnsetType

    class _TypedDelta(Struct, forbid_unknown_fields=True, gc=False):
        role: str | None = None  # None and missing alike: no role (as the normalizer)
        content: str | None | UnsetType = UNSET
        reasoning: str | None | UnsetType = UNSET
        tool_calls: list[Any] | None = None
        toolCalls: list[Any] | None = None  # noqa: N815 - the wire's camelCase key
        reasoning_details: list[Any] | None = None
        reasoningDetails: list[Any] | None = None  # noqa: N815
        reasoning_content: Any = None  # known, not read by OpenRouter's normalizer
        channel: Any = None

    class _TypedChoice(Struct, forbid_unknown_fields=True, gc=False):
        index: int | None = None
        delta: _TypedDelta | None = None
        finish_reason: str | None | UnsetType = UNSET
        finishReason: str | None = None  # noqa: N815
        logprobs: Any = None
        native_finish_reason: Any = None
        stop_reason: Any = None
        matched_stop: Any = None
        content_filter_results: Any = None
        content_filter_offsets: Any = None
        text: Any = None
        seed: Any = None
        token_id: Any = None

    class _TypedChunk(Struct, forbid_unknown_fields=True, gc=False):
        id: str | None = None
        object: str | None = None
        model: str | None = None
        provider: str | None = None
        created: int | float | None = None
        choices: list[_TypedChoice] | None = None
        usage: Any = None
        system_fingerprint: Any = None
        service_tier: Any = None
        x_groq: Any = None
        obfuscation: Any = None
        prompt_filter_results: Any = None
        timings: Any = None
        time_info: Any = None
        p: Any = None
        seed: Any = None

    _typed_fields = {
        _TypedChunk: _TYPED_CHUNK_KEYS,
        _TypedChoice: _OR_CHOICE_KEYS,
        _TypedDelta: _OR_DELTA_KEYS,
    }
    for _cls, _known in _typed_fields.items():  # the structs know what the shape check knows
        assert set(_cls.__struct_fields__) == _known, (_cls, _known)

    _decode = msgspec.json.Decoder(_TypedChunk).decode

    def _lone_struct_delta(raw: _TypedChunk) -> _TypedDelta | None:
        chs = raw.choices
        if raw.usage is not None or chs is None or len(chs) != 1:
            return None
        ch = chs[0]
        d = ch.delta
        if (
            d is None
            or (ch.index is not None and ch.index != 0)
            or (ch.finish_reason if ch.finish_reason is not UNSET else ch.finishReason) is not None
            or d.toolCalls is not None
            or d.reasoningDetails is not None
            or d.reasoning_content is not None
        ):
            return None
        return d

    def _struct_arguments(d: _TypedDelta) -> tuple[int, str] | None:
        if d.content or d.reasoning or d.reasoning_details:  # null, unset or empty only
            return None
        return argument_call(d.tool_calls)

    def _decode_typed_chunk(line: str, bad: list[str]) -> dict | None:
        if len(line) > _json.FAST_MAX_CHARS:
            return None
        try:
            raw = _decode(line)
        except (ValueError, RecursionError):  # another shape or type: the general way
            return None
        return _struct_chunk(raw, bad)

    def _struct_chunk(raw: _TypedChunk, bad: list[str]) -> dict | None:
        out: dict[str, Any] = {}
        typed_choices = raw.choices
        if typed_choices is not None:
            choices = []
            for pos, ch in enumerate(typed_choices):
                d = ch.delta
                delta: dict[str, Any] = {}
                if d is not None:
                    if d.role is not None:
                        delta["role"] = d.role
                    if d.content is not UNSET:
                        delta["content"] = d.content
                    if d.reasoning is not UNSET:
                        delta["reasoning"] = d.reasoning
                    if d.reasoning_content is not None:
                        unread = _unread_reasoning(None, d.reasoning_content)
                        if unread:
                            delta["_unread_reasoning"] = unread
                    tcs = d.tool_calls if d.tool_calls is not None else d.toolCalls
                    if tcs is not None:
                        delta["tool_calls"] = [
                            t for t in map(_norm_tool_call, tcs) if t is not None
                        ]
                    rd = d.reasoning_details
                    if rd is None:
                        rd = d.reasoningDetails
                    if rd is not None:
                        delta["reasoning_details"] = rd
                fr = ch.finish_reason
                if fr is UNSET:
                    fr = ch.finishReason
                idx = ch.index
                choices.append(
                    {
                        "index": pos if idx is None else idx,
                        "delta": delta,
                        "finish_reason": fr,
                        "logprobs": ch.logprobs,
                    }
                )
            out["choices"] = choices
        u = raw.usage
        usage = openrouter_usage(u, bad) if u is not None else None
        if usage is not None:
            out["usage"] = usage
        if "choices" not in out and "usage" not in out:
            return None  # dropped: the general way says so (and counts what it must)
        if raw.id is not None:
            out["id"] = raw.id
        if raw.object is not None:
            out["object"] = raw.object
        if raw.model is not None:
            out["model"] = raw.model
        if raw.provider is not None:
            out["provider"] = raw.provider
        if raw.created is not None:
            out["created"] = raw.created
        return out

    decode_typed_chunk = _decode_typed_chunk
    decode_struct = _decode
    struct_chunk = _struct_chunk
    lone_struct_delta = _lone_struct_delta
    struct_arguments = _struct_arguments


def _keep_error_envelope(raw: dict, chunk: dict) -> None:
    """The evidence an error chunk's envelope carries, which the normalizer's error rule drops.

    The normalizer returns ``{error}`` alone; the envelope can still name the backend
    (``provider``) and carry usage (wire-formats, "Mid-stream errors": ``"usage":
    {"prompt_tokens":7,...,"cost":0.001}``). Both are put back on the chunk, so the result
    knows which backend failed and the billed tokens are settled. The error chunk itself
    (its type and error) is unchanged.
    """
    provider = raw.get("provider")
    if isinstance(provider, str) and provider.strip():
        chunk["provider"] = provider
    u = raw.get("usage")
    usage = openrouter_usage(u) if u is not None else None
    if usage is not None:
        chunk["usage"] = usage


openrouter_usage = openai_usage
"""OpenAI/OpenRouter usage -> :class:`Usage` (the one definition is
:func:`lab.providers.base.openai_usage`)."""


class OpenRouterAdapter(OpenAICompatibleAdapter):
    """OpenRouter's chat-completions stream, reproduced literally (quirks included).

    It is the chat-completions machine (:mod:`lab.providers.chat`) with these hooks
    overridden, each falling back to the machine where it says nothing new:

    1. ``unparsable_line``: an invalid data line is skipped and counted, not the end;
    2. ``normalize_chunk``: :func:`normalize_openrouter_chunk` (reasoning in ``reasoning``
       and ``reasoning_details``), and an error chunk keeps its envelope's backend and usage;
    3. ``guard_piece``: every guard runs per piece, after the text/tool split
       (``split_pieces`` keeps the reasoning on the text piece);
    4. ``serving_backend``: the backend is read from ``provider`` (``names_backend``);
    5. ``map_stream_error``, ``map_reasoning``, ``map_finish``: a pre-formed error passes
       through, a malformed tool call ends as ``done``; ``reasoning_details`` is read with
       ``read_all_reasoning_fields``; ``length`` keeps the chunk's text
       (``outputTruncated``), and ``finish_reason: "error"`` ends the stream;
    6. ``release`` and ``error_chunk``: released text is a chunk of its own, and the error
       chunk names the backend.
    """

    provider = "openrouter"
    family = "openrouter"
    names_backend = True
    default_base_url = "https://openrouter.ai/api/v1"
    api_key_env = "OPENROUTER_API_KEY"
    request_paths = {
        "/api/v1/chat/completions": "OpenRouter's /api/v1/",
        "/api/v1/responses": "OpenRouter's Responses API",
    }
    degrade_on_502 = True
    error_prefix = "OpenRouter"
    reasoning_key = "reasoning"
    keeps_raw_usage = False
    stream_error_fallback = OPENROUTER_DEFAULT_MESSAGE

    # -- request side -------------------------------------------------------------------

    def request_headers(self, api_key: str | None) -> dict[str, str]:
        headers = super().request_headers(api_key)
        headers["http-referer"] = "https://github.com/stream-lab/stream-lab"
        headers["x-title"] = "Stream Lab"
        return headers

    @classmethod
    def build_body(
        cls, model: str, messages: list[dict], tools: list[dict] | None, options: dict
    ) -> dict[str, Any]:
        """The reference OpenRouter body: the optional keys in the reference's order."""
        if tools:
            options["tools"] = tools
        return ordered_body(model, messages, OPENROUTER_BODY_ORDER, options)

    def extra_classifiers(self, body: dict) -> tuple[Callable[..., Any], ...]:
        return ()  # OpenRouter's ladder has no stream_options / stop classifiers

    @classmethod
    def error_message(cls, body_text: str, status: int | None = None) -> str:
        """``error.metadata.raw`` (an object as compact JSON), ``error.message``,
        ``message``, the raw text, the status phrase."""
        parsed = parse_error_body(body_text)
        meta_raw = dig(parsed, "error", "metadata", "raw")
        if meta_raw is not None and not isinstance(meta_raw, str):
            meta_raw = compact_json(meta_raw)
        raw = body_text if isinstance(body_text, str) else ""
        return first_text(
            meta_raw,
            dig(parsed, "error", "message"),
            dig(parsed, "message"),
            raw,
            status_phrase(status),
        )

    @classmethod
    def normalize_http_error(
        cls, status: int, body_text: str, *, body_error_codes: bool = False
    ) -> ProviderError:
        """Without request context: "OpenRouter API error (<status>): <message>"."""
        original = {"provider": cls.provider, "status": status, "body": body_text}
        message = cls.error_message(body_text, status)
        return openrouter_provider_error(status, message, original, status=status)

    def failure_message(self, status: int, body_text: str) -> str:
        return type(self).error_message(body_text, status) or f"HTTP {status}"

    def http_error(self, status: int, body_text: str, *, body: dict, label: str) -> ProviderError:
        """The reference throws "HTTP <status>: ... | request_attempt: <label>" and
        ``handleProviderError`` turns it into "OpenRouter API error (<status>): ..."."""
        thrown = openrouter_http_failure_message(status, body_text, body, label)
        return openrouter_provider_error(str(status), thrown, original=body_text, status=status)

    def transport_message(self, exc: BaseException) -> str:
        import httpx

        if isinstance(
            exc, httpx.TimeoutException
        ):  # the reference: the read raced a timer and lost
            return "OpenRouter stream timed out while waiting for data"
        return super().transport_message(exc)

    def transport_error(self, exc: BaseException) -> ProviderError:
        """The reference's outer catch: ``handleProviderError`` over the thrown message. It holds
        no code, so the code is "unknown": type unknown, not retryable."""
        return openrouter_provider_error(None, self.transport_message(exc))

    # -- stage 02 hooks -----------------------------------------------------------------

    def unparsable_line(
        self, line: str, exc: Exception, event: SSEEvent, out: list[ProcessedChunk]
    ) -> bool:
        """An empty data line is skipped; a cut last line counted as every chat family
        counts it; invalid JSON skipped as the reference skips it (it logs the line and
        reads on), counted and shown (shape ``data: not JSON``, ``unhandled_shape``)."""
        if line and not self._cut_line(line, event):
            self.facts["invalid_json"] += 1
            note_shape(self.facts, "data: not JSON")
        return False

    def normalize_chunk(self, raw: Any, bad: list[str]) -> dict | None:
        """:func:`normalize_openrouter_chunk` (the reference's chunk rules), after the ids
        and the unread keys are noted; a usage object inside a choice is read with
        ``usage_in_choices``, and an error chunk keeps its envelope's backend and usage
        (:func:`_keep_error_envelope`)."""
        if type(raw) is dict:
            if not self._ids_seen:
                self._note_response_ids(raw)
            choices = raw.get("choices")
            if type(choices) is list and not (  # the common case: every key known
                raw.keys() <= CHUNK_KEYS
                and len(choices) == 1
                and type(ch := choices[0]) is dict
                and ch.keys() <= _OR_CHOICE_KEYS
                and (type(d := ch.get("delta")) is not dict or d.keys() <= _OR_READ_DELTA_KEYS)
            ):
                self._note_shapes(raw)
            if type(choices) is list:
                for ch in choices:
                    d = ch.get("delta") if type(ch) is dict else None
                    if type(d) is dict and type(r := d.get("refusal")) is str and r:
                        self._note_refusal(r)
        chunk = normalize_openrouter_chunk(raw, bad)
        if (
            self.config.usage_in_choices
            and isinstance(raw, dict)
            and (chunk is None or "usage" not in chunk)
        ):
            usage = openai_usage(choice_usage(raw))
            if usage is not None:
                chunk = {**(chunk or {}), "usage": usage}
        if chunk is not None and chunk.get("error") is not None and isinstance(raw, dict):
            _keep_error_envelope(raw, chunk)
        return chunk

    lean: ClassVar[bool] = True
    """Does a plain piece skip the normalized dict (:meth:`_lean_piece`; checked on the
    typed struct with msgspec, on the parsed dict without)? Off, it goes through
    :meth:`_on_normalized` as any other chunk (the tests compare the two). Read as
    :attr:`StreamAdapter.lean` says."""

    # a plain function, as the ClassVar on the base class says (not a method)
    _decode_typed = staticmethod(decode_typed_chunk) if decode_typed_chunk else None  # type: ignore[assignment]

    def feed_data(
        self, data: str, event: SSEEvent, out: list[ProcessedChunk], typed_first: bool = True
    ) -> None:
        """The chat machine's, except that with the typed path on (msgspec) a one-line event
        is decoded here, once: a plain piece (:func:`lean_fields`'s rules) goes straight to
        :meth:`_lean_piece` and an argument delta to :meth:`_lean_argument_chunk` (when
        :attr:`lean`), any other decoded chunk to the machine's :meth:`_on_normalized`,
        and a line the typed decoder refuses (or that leaves nothing to normalize) the
        general way. Without msgspec: :meth:`_feed_parsed_line`."""
        if not typed_first or "\n" in data:
            super().feed_data(data, event, out, typed_first=typed_first)
            return
        line = data.strip()
        if line == "[DONE]":
            self.facts["done_seen"] = True
            return
        if type(self)._decode_typed is None:
            self._feed_parsed_line(line, event, out)
            return
        if len(line) > _json.FAST_MAX_CHARS:
            super().feed_data(data, event, out, typed_first=False)
            return
        try:
            # the line's bytes when the framer kept them: msgspec would encode line again
            raw = decode_struct(line if event.raw is None else event.raw)  # type: ignore[misc]
        except (ValueError, RecursionError):  # another shape or type: the general way
            super().feed_data(data, event, out, typed_first=False)
            return
        if self._lean and not self._posting:
            d = lone_struct_delta(raw)  # a plain piece or an argument delta, checked once
            if d is not None:
                if d.tool_calls is None:
                    if not self._ids_seen:  # _on_normalized's first step
                        self._note_response_ids({"id": raw.id, "model": raw.model})
                    self._lean_piece(d.content, d.reasoning, d.reasoning_details, raw.provider, out)
                    return
                if self.speaker is None and self.tool_acc.plain:
                    got = struct_arguments(d)
                    if got is not None:
                        ids = {"id": raw.id, "model": raw.model}
                        self._lean_argument_chunk(ids, raw.provider, got, out)
                        return
        bad: list[str] = []
        chunk = struct_chunk(raw, bad)
        if chunk is None:
            super().feed_data(data, event, out, typed_first=False)
        else:
            self._on_normalized(chunk, bad, out)

    def _feed_parsed_line(self, line: str, event: SSEEvent, out: list[ProcessedChunk]) -> None:
        """A one-line event (stripped, not ``[DONE]``) without the typed decoder: parsed
        once; a plain piece (:func:`lean_fields`) goes to :meth:`_lean_piece` and an
        argument delta (:func:`lean_argument_fields`) to :meth:`_lean_argument_chunk`
        (when :attr:`lean`), any other object to the machine's :meth:`_on_parsed`, and a
        line that is not JSON to :meth:`unparsable_line`, as the machine sends it."""
        if not self._lean or self._posting:
            super().feed_data(line, event, out, typed_first=False)
            return
        try:
            raw = _json.loads(line)
        except (ValueError, RecursionError) as exc:  # a cut or invalid line
            self.unparsable_line(line, exc, event, out)
            return
        d = _lone_delta(raw)  # lean_fields and lean_argument_fields, the checks made once
        if d is not None:
            if d.get("tool_calls") is None:
                fields = _piece_fields(d)
                if fields is not None:
                    if not self._ids_seen:  # _on_normalized's first step
                        self._note_response_ids(raw)
                    self._lean_piece(*fields, raw.get("provider"), out)
                    return
            elif self.speaker is None and self.tool_acc.plain:
                got = _argument_fields(d)
                if got is not None:
                    self._lean_argument_chunk(raw, raw.get("provider"), got, out)
                    return
        self._on_parsed(raw, out)

    def _lean_argument_chunk(
        self, ids: dict, provider: Any, got: tuple[int, str], out: list[ProcessedChunk]
    ) -> None:
        """A chunk that carries only an argument delta (:func:`lean_argument_fields`), with
        no speaker guard on (a tool delta would release its held tail): the ids and the
        backend while unknown, then the chat machine's :meth:`_lean_argument_piece`.
        OpenRouter's own steps do nothing for it: the per-piece guards see no text,
        :meth:`map_reasoning` finds no reasoning and no pending think text (OpenRouter
        releases none), :meth:`split_pieces` has no text to split off."""
        if not self._ids_seen:  # _on_normalized's first step
            self._note_response_ids(ids)
        if self.serving_provider is None:  # process_chunk's first step (names_backend)
            self.serving_provider = self.serving_backend({"provider": provider})
        self._lean_argument_piece(*got, out)

    def _lean_piece(
        self,
        content: Any,
        reasoning: Any,
        details: list[Any] | None,
        provider: str | None,
        out: list[ProcessedChunk],
    ) -> None:
        """A plain piece (:func:`lean_fields`; **content** and **reasoning** a str, None or
        ``UNSET``), through the steps :meth:`_pipeline` and :meth:`process_chunk` take for
        it, without the normalized dict: the guards (:meth:`_guard_texts`), dedup and the
        speaker guard, the commit point, then a text piece carrying the reasoning as a raw
        thought and ``reasoning_details`` kept for the step's first call. The chunk
        checks the machine makes first (error, other choices, tool calls, finish, usage,
        a speaker tail before a terminal piece, a dropped chunk) cannot fire here."""
        content, reasoning = self._guard_texts(
            content if type(content) is str else None,
            reasoning if type(reasoning) is str else None,
        )
        fired = False
        if content:  # _pipeline's dedup and speaker steps
            content = self._text_guards(content)
            fired = self.speaker is not None and self.speaker.fired
        if not self.committed and (self.pending_think or content or reasoning or details):
            self.committed = True
        if self.serving_provider is None and self.names_backend:  # process_chunk's first step
            self.serving_provider = self.serving_backend({"provider": provider})
        if details:  # continuity data for the step's first call
            self.rd_acc.extend(details)
        if reasoning:
            thoughts = [new_raw_thought(reasoning)]
        elif details:  # the guards held all the reasoning: map_reasoning reads the details
            thoughts = self.map_reasoning({"reasoning_details": details}, {}, {})
        else:
            thoughts = []
        out.append(new_piece_chunk("text", content or "", thoughts, self.serving_provider, {}))
        if self._extra:
            extra, self._extra = self._extra, []
            out.extend(extra)
        if fired:
            self.stopped = True

    def _note_shapes(self, raw: dict) -> None:
        """Count the keys no rule reads (``unhandled_shape``), camelCase forms included."""
        facts = self.facts
        if not raw.keys() <= CHUNK_KEYS:
            note_unknown_keys(facts, raw, CHUNK_KEYS, "")
        choices = raw.get("choices")
        if type(choices) is list:
            for ch in choices:
                if type(ch) is dict and not (
                    ch.keys() <= _OR_CHOICE_KEYS
                    and (type(d := ch.get("delta")) is not dict or d.keys() <= _OR_READ_DELTA_KEYS)
                ):
                    known = (
                        _OR_CHOICE_KEYS | {"usage"}
                        if self.config.usage_in_choices
                        else _OR_CHOICE_KEYS
                    )
                    note_unknown_keys(facts, ch, known, "choices[]")
                    delta = ch.get("delta")
                    if isinstance(delta, dict):
                        note_unknown_keys(facts, delta, _OR_READ_DELTA_KEYS, "choices[].delta")

    def select_choices(self, chunk: dict, choices: list[dict]) -> list[dict] | None:
        """As the chat family; a chunk left with no choice and no usage is dropped as it is
        (the reference never sees it)."""
        kept = super().select_choices(chunk, choices)
        return kept if kept or "usage" in chunk else None

    def split_pieces(self, chunk: dict) -> list[dict]:
        """The text piece keeps ``reasoning`` and the choice's ``logprobs``. The reference
        leaves the reasoning on both pieces; the second is marked so the result counts that
        reasoning once (``StreamResult.reasoning``: "each piece once")."""
        pieces = split_text_and_tool(chunk, text_fields=("reasoning",), choice_fields=("logprobs",))
        if len(pieces) == 2 and chunk["choices"][0]["delta"].get("reasoning"):
            pieces[1]["_repeated_reasoning"] = True
        return pieces

    guards_whole_chunk = False
    guards_each_piece = True

    def guard_piece(self, delta: dict) -> None:
        """Think strip, then the spill guard, then the markup guards, on this piece
        (:meth:`_guard_texts`; moved text joins ``reasoning``); the shared pipeline then
        runs dedup and the speaker guard."""
        content = delta.get("content")
        reasoning = delta.get("reasoning")
        new_content, new_reasoning = self._guard_texts(content, reasoning)
        if "content" in delta or new_content:
            delta["content"] = new_content
        if new_reasoning is not reasoning:
            delta["reasoning"] = new_reasoning

    def _guard_texts(self, content: str | None, reasoning: str | None) -> tuple[Any, Any]:
        """A piece's (content, reasoning) after the think stripper, the spill guard and the
        markup guards, in that order (the one definition of OpenRouter's per-piece
        guards: :meth:`guard_piece` and :meth:`_lean_piece`)."""
        think = self.think
        if content and think is not None:
            if think.idle and "<" not in content:  # passed as it is: only counted (per chunk)
                think.fed += len(content)
            else:
                g = self._ran(think, think.feed(content))
                content = g.content
                if g.reasoning:  # empty when capture_think_blocks_as_thoughts is off
                    reasoning = (reasoning or "") + g.reasoning
        if reasoning:
            self.spill.observe_reasoning(reasoning)
        if content and self.spill.inspecting:  # normalized content is a str or None
            g = self.spill.filter(content)
            if self.spill.notes:  # _ran, inlined in the per-chunk path
                self._drain(self.spill)
            content = g.content
            if g.reasoning:
                reasoning = (reasoning or "") + g.reasoning
        # guard_markup, inlined: per chunk (an idle guard's no-marker delta is only counted;
        # normalized reasoning and content are str or None)
        mr = self.markup_reasoning
        if mr is not None:
            marked: dict[str, Any] | None = None
            if reasoning:
                if mr.idle and "<" not in reasoning:
                    mr.fed += len(reasoning)
                else:
                    marked = {"content": content, "reasoning": reasoning}
                    self._markup_reasoning(marked, reasoning)
            if content:
                mk: MarkupGuard = self.markup  # type: ignore[assignment]  # set with mr
                if mk.idle and "<" not in content:
                    mk.fed += len(content)
                else:
                    if marked is None:
                        marked = {"content": content, "reasoning": reasoning}
                    self._markup_content(marked, content)
            if marked is not None:
                content, reasoning = marked["content"], marked["reasoning"]
        return content, reasoning

    def release(self, content: str, reasoning: str, out: list[ProcessedChunk]) -> None:
        """Released text is a chunk of its own, not a piece through stage 03 (released
        reasoning rides on it as a raw thought)."""
        if content or reasoning:
            thoughts = [new_thought(kind="raw", content=reasoning)] if reasoning else []
            out.append(
                new_chunk(
                    type="text",
                    content=content,
                    thoughts=thoughts,
                    serving_provider=self.serving_provider,
                )
            )

    # -- stage 03 hooks -----------------------------------------------------------------

    def serving_backend(self, chunk: dict) -> str | None:
        """The chunk's ``provider`` field (the backend's display name), trimmed."""
        provider = chunk.get("provider")
        if isinstance(provider, str) and provider.strip():
            return provider.strip()
        return None

    def map_usage(self, raw: Any) -> Usage | None:
        """The normalizer already mapped usage (hostile counts named there): passed on."""
        return raw

    def map_stream_error(self, err: dict, chunk: dict) -> ProcessedChunk:
        """An error object passed on as it came (a pre-formed ProviderError); with calls
        streaming, the malformed-tool-call error ends the call as ``done`` +
        ``malformedToolCall``; otherwise :func:`openrouter_stream_error`. The envelope's
        usage (:func:`_keep_error_envelope`) rides along as evidence."""
        sp = self.serving_provider
        usage = chunk.get("usage")
        evidence = {"usage": usage} if usage is not None else {}
        if is_provider_error_shape(err):
            return new_chunk(
                type="error",
                error=openrouter_stream_error(err),
                serving_provider=sp,
                metadata=evidence,
            )
        if self.tool_acc and is_openrouter_malformed_tool_call_error(err):
            self.tool_acc = ToolCallAccumulator()
            self.rd_acc = []
            message = err.get("message") or OPENROUTER_DEFAULT_MESSAGE
            return new_chunk(
                type="done",
                metadata={"malformedToolCall": True, "originalError": message, **evidence},
                serving_provider=sp,
            )
        self._record_finish("error")
        error = openrouter_stream_error(err)
        return new_chunk(type="error", error=error, serving_provider=sp, metadata=evidence)

    def map_reasoning(self, delta: dict, chunk: dict, metadata: dict) -> list[ThoughtLogEntry]:
        """``reasoning`` as a raw thought. Reasoning only in ``reasoning_details`` is read
        with ``read_all_reasoning_fields`` (the reference reads the string alone) and
        counted otherwise; a repeated piece's thoughts are marked ``repeated_thoughts``."""
        reasoning = delta.get("reasoning")
        thoughts = [new_raw_thought(reasoning)] if reasoning else []
        unread = delta.get("_unread_reasoning")
        if unread and unread != reasoning:  # reasoning_content, or reasoning as an object
            if self.config.read_all_reasoning_fields and not reasoning:
                thoughts.append(new_raw_thought(unread))
                reasoning = unread
            else:
                self.facts["ignored_reasoning_chars"] = self.facts.get(
                    "ignored_reasoning_chars", 0
                ) + len(unread)
        if not reasoning and delta.get("reasoning_details"):
            text, summary = reasoning_details_text(delta["reasoning_details"])
            if self.config.read_all_reasoning_fields:
                if text:
                    thoughts.append(new_thought(kind="raw", content=text))
                if summary:
                    thoughts.append(new_thought(kind="summary", content=summary))
            elif ignored := unread_chars((text, summary), unread):
                self.facts["ignored_reasoning_chars"] = (
                    self.facts.get("ignored_reasoning_chars", 0) + ignored
                )
        if thoughts and chunk.get("_repeated_reasoning"):
            metadata["repeated_thoughts"] = True
        return thoughts

    ends_on_error_finish = True

    def map_finish(
        self, finish: str, content: Any, thoughts: list[ThoughtLogEntry], metadata: dict
    ) -> ProcessedChunk | None:
        """``length`` keeps the chunk's text and marks ``outputTruncated``; with no text it
        is ``done`` marked ``emptyTerminalChunk``."""
        if finish != "length":
            return None
        sp = self.serving_provider
        metadata["outputTruncated"] = True
        if content:
            return new_chunk(
                type="text",
                content=content,
                thoughts=thoughts,
                serving_provider=sp,
                metadata=metadata,
            )
        metadata["emptyTerminalChunk"] = True
        return new_chunk(type="done", thoughts=thoughts, serving_provider=sp, metadata=metadata)

    # -- end of stream ------------------------------------------------------------------

    def error_chunk(self, error: ProviderError, metadata: dict[str, Any]) -> ProcessedChunk:
        """The error chunk names the backend and carries no metadata (the reference's)."""
        return new_chunk(type="error", error=error, serving_provider=self.serving_provider)
