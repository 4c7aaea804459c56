"""OpenAI-compatible chat completions: OpenAI, DeepSeek, Z.ai, NVIDIA NIM and Custom endpoints.

One adapter (``pipeline-reference.md`` §3) with class-level options; each provider is a
subclass that only sets options. Per SSE event::

    data line -> json (invalid or empty: the stream ENDS as an error chunk, unlike OpenRouter)
      -> mid-stream error before the commit point? ask the degradation plan (RetryAttempt)
      -> think strip (stripped text is held as a pending thought, not put into reasoning)
      -> spill guard (observes reasoning_content; spilled text appended to it)
      -> split text + tool signal
      -> per piece: dedup -> speaker guard -> commit check -> speaker tail flush before a
         non-text terminal piece -> meaningful filter -> process_chunk -> ProcessedChunk

Where this differs from OpenRouter on purpose (the reference does):

- invalid JSON or an empty ``data:`` line ends the stream as an error chunk;
- think-block text becomes ONE raw thought attached to the next processed chunk, after that
  chunk's own thoughts;
- ``finish_reason: "length"`` returns ``done`` and the content on that chunk is not emitted
  (it is kept in ``metadata["dropped_content"]`` so nothing is lost silently);
- HTTP failures are classified on the raw body text; a 502 never degrades.

Lab choices where the reference is silent: the split's text piece carries only ``role`` and
``content`` (reasoning stays on the tool piece, so it is logged once); pending think thoughts
also attach to an error chunk and a final flush chunk, so none is dropped; tool calls at an
index other than 0 (the reference builds only index 0) are listed in
``metadata["ignored_tool_calls"]``; only ``reasoning_content`` is read as reasoning
(``reasoning_fields`` widens it, e.g. for vLLM's newer ``reasoning``), and a delta field that
was ignored is counted in ``facts["ignored_reasoning_chars"]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from lab import _json
from lab.degrade import custom_should_retry_without_stop, stop_rejection, stream_options_rejection
from lab.errors import (
    CODE_429_BALANCE,
    CODE_429_PLAN_ACCESS,
    OPENAI_API_ERROR_STATUSES,
    OPENAI_OVERLOADED_STATUSES,
    OPENAI_TIMEOUT_STATUSES,
    RATE_LIMIT_BALANCE_PHRASES,
    RATE_LIMIT_PLAN_ACCESS_PHRASES,
    UNKNOWN_ERROR_MESSAGE,
    code_string,
    compact_json,
    dig,
    first_text,
    inner_error,
    is_model_error_message,
    parse_error_body,
    parse_status_code,
    status_phrase,
)
from lab.guards import (
    VerbatimToolCallParser,
)
from lab.http.sse import SSEEvent
from lab.model import (
    ErrorType,
    FunctionCall,
    ProcessedChunk,
    ProviderError,
    ThoughtLogEntry,
    Usage,
    new_chunk,
    new_raw_thought,
    new_text_chunk,
    new_thought,
)
from lab.providers.base import RetryAttempt, StreamAdapter
from lab.providers.dispatch import registered_adapter
from lab.providers.wire import (
    ToolCallAccumulator,
    choice_usage,
    join_url,
    note_shape,
    note_unknown_keys,
    openai_usage,
    reasoning_details_text,
    split_text_and_tool,
    typed_content,
    wire_int,
)
from lab.request import is_claude_model

__all__ = [
    "CustomAdapter",
    "DeepSeekAdapter",
    "FireworksAdapter",
    "GroqAdapter",
    "MistralAdapter",
    "NvidiaAdapter",
    "OllamaAdapter",
    "OpenAIAdapter",
    "OpenAICompatibleAdapter",
    "TogetherAdapter",
    "VllmAdapter",
    "XaiAdapter",
    "ZaiAdapter",
]

_MISSING = object()

# --------------------------------------------------------------------------- errors (§10)

CONNECTION_REFUSED_PHRASES: tuple[str, ...] = ("econnrefused", "connection refused")
CODE_CONNECTION_REFUSED = "ECONNREFUSED"
HTTP_STATUS_IN_MESSAGE = re.compile(r"HTTP (\d{3})")


@dataclass(frozen=True, slots=True)
class OpenAICompatibleErrorOptions:
    """Per-provider knobs of the OpenAI-compatible error formatter."""

    prefix: str
    """``errorMessagePrefix``: messages read "<prefix>: HTTP 429: ..."."""
    balance_codes: frozenset[str] = frozenset()
    """Body business codes that mean "no balance" under HTTP 429 (lab addition)."""
    plan_access_codes: frozenset[str] = frozenset()
    """Body business codes that mean "your plan lacks this model" under HTTP 429."""


OPENAI_COMPATIBLE_STREAM_DEFAULT_MESSAGE = "{prefix}: provider API error"


class StatusClassification(NamedTuple):
    type: ErrorType
    code: str
    retryable: bool


def classify_openai_compatible_status(
    status: int | None, message: str | None
) -> StatusClassification:
    """``classifyOpenAICompatibleStatus`` (see the module table)."""
    if status is None:
        return StatusClassification("unknown", "unknown", False)
    code = str(status)
    lowered = (message or "").lower()
    if status in OPENAI_API_ERROR_STATUSES:
        return StatusClassification("api_error", code, False)
    if status == 429:
        if any(p in lowered for p in RATE_LIMIT_BALANCE_PHRASES):
            return StatusClassification("api_error", CODE_429_BALANCE, False)
        if any(p in lowered for p in RATE_LIMIT_PLAN_ACCESS_PHRASES):
            return StatusClassification("api_error", CODE_429_PLAN_ACCESS, False)
        return StatusClassification("rate_limit", code, True)
    if status in OPENAI_TIMEOUT_STATUSES:
        return StatusClassification("timeout", code, True)
    if status in OPENAI_OVERLOADED_STATUSES:
        return StatusClassification("provider_overloaded", code, True)
    return StatusClassification("api_error", code, False)


def _options(provider: str) -> OpenAICompatibleErrorOptions:
    """The endpoint's error options: its adapter's ``error_options`` (prefix, codes)."""
    adapter: Any = registered_adapter(provider)  # any class of the family has error_options
    if adapter.family != "openai_compatible":
        raise ValueError(f"{provider!r} is not an OpenAI-compatible provider")
    return adapter.error_options()


def openai_compatible_provider_error(
    provider: str,
    message: str,
    *,
    status: int | None = None,
    error_code: str | None = None,
    user_message: str | None = None,
    original_error: Any = None,
    prefix: str | None = None,
) -> ProviderError:
    """``normalizeOpenAICompatibleProviderError`` for a thrown error's ``message``
    (terminal HTTP errors read "HTTP <status>: <parsed message>").

    1. The status is "HTTP nnn" found in the message (else ``status``), classified by
       :func:`classify_openai_compatible_status`; a 429 whose body ``error_code`` is one of
       the provider's billing codes is re-coded (lab addition).
    2. Model-error text (message, or ``error_code``) -> model_error "<status>_model".
    3. Else "econnrefused"/"connection refused" -> api_error "ECONNREFUSED".
    4. Else "timeout" -> timeout, retryable, code kept.
    5. message = "<prefix>: <message>".
    """
    options = _options(provider)
    found = HTTP_STATUS_IN_MESSAGE.search(message) if re.search(r"HTTP [45]", message) else None
    if found:
        status = int(found.group(1))
    error_type, code, retryable = classify_openai_compatible_status(status, message)
    if error_type == "rate_limit" and error_code is not None:
        if error_code in options.balance_codes:
            error_type, code, retryable = "api_error", CODE_429_BALANCE, False
        elif error_code in options.plan_access_codes:
            error_type, code, retryable = "api_error", CODE_429_PLAN_ACCESS, False
    lowered = message.lower()
    if is_model_error_message(message) or (error_code and is_model_error_message(error_code)):
        error_type, retryable = "model_error", False
        code = f"{status}_model" if status is not None else "model_error"
    elif any(p in lowered for p in CONNECTION_REFUSED_PHRASES):
        error_type, code, retryable = "api_error", CODE_CONNECTION_REFUSED, False
    elif "timeout" in lowered:
        error_type, retryable = "timeout", True
    return ProviderError(
        type=error_type,
        message=f"{prefix or options.prefix}: {message}",
        retryable=retryable,
        code=code,
        status=status,
        user_message=user_message,
        original_error=original_error,
    )


def openai_compatible_stream_error(provider: str, error_obj: Mapping[str, Any]) -> ProviderError:
    """``processChunk``'s error branch for an SSE ``error`` object (or a chunk holding one).

    Status = the numeric ``code`` (or None), classified by
    :func:`classify_openai_compatible_status`; model-error text -> model_error
    "<code>_model" (or "model_error"); message = the raw message plus " (<error.type>)" when
    that type is not already in it; code = the classification code unless "unknown", else
    the raw code, else "unknown".
    """
    options = _options(provider)
    err = inner_error(error_obj)
    raw_code = err.get("code")
    status = parse_status_code(raw_code)
    raw_message = first_text(err.get("message")) or OPENAI_COMPATIBLE_STREAM_DEFAULT_MESSAGE.format(
        prefix=options.prefix
    )
    error_type, code, retryable = classify_openai_compatible_status(status, raw_message)
    raw_code_text = code_string(raw_code)
    if is_model_error_message(raw_message):
        error_type, retryable = "model_error", False
        code = f"{raw_code_text}_model" if raw_code_text else "model_error"
    elif code == "unknown":
        code = raw_code_text or "unknown"
    message = raw_message
    kind = err.get("type")
    if isinstance(kind, str) and kind and kind.lower() not in raw_message.lower():
        message = f"{raw_message} ({kind})"
    return ProviderError(
        type=error_type,
        message=message,
        retryable=retryable,
        code=code,
        status=status,
        original_error=dict(err),
    )


# --------------------------------------------------------------------------- request body (§3)

OPENAI_COMPAT_BODY_ORDER = (
    "temperature",
    "stop",
    "max_tokens",
    "tools",
    "top_p",
    "top_k",
    "frequency_penalty",
    "presence_penalty",
    "min_p",
    "repetition_penalty",
    "logit_bias",
)
"""OpenAI-compatible (§3) optional keys, in order."""

_OPENAI_TOOL_CALL_KEYS = ("id", "type", "function", "index")


def ordered_body(model: str, msgs: list[dict], order: tuple[str, ...], options: dict) -> dict:
    """A chat-completions body: model, messages, stream with usage, then **options** with
    the keys of **order** first, in that order (None values left out)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": msgs,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    for key in order:
        if options.get(key) is not None:
            body[key] = options.pop(key)
    for key, value in options.items():
        if value is not None:
            body[key] = value
    return body


def _thinking_object(value: Any) -> Any:
    if isinstance(value, bool):
        return {"type": "enabled" if value else "disabled"}
    return value


# --------------------------------------------------------------------------- the adapter

CHUNK_KEYS = frozenset(
    {
        "id", "object", "created", "model", "choices", "usage", "error", "system_fingerprint",
        "service_tier", "provider", "x_groq", "obfuscation", "prompt_filter_results",
        # server timing and padding, no content: llama.cpp, Cerebras, Mistral, Together
        "timings", "time_info", "p", "seed",
    }
)  # fmt: skip
"""Top-level chunk keys the chat adapters read or know to carry nothing for the stream
(ids, fingerprints, timings, padding); any other non-empty key is counted as an unhandled
shape."""
CHOICE_KEYS = frozenset(
    {
        "index", "delta", "finish_reason", "logprobs", "native_finish_reason", "stop_reason",
        "matched_stop", "content_filter_results", "content_filter_offsets",
        # Together's per-choice echo of the token (the delta carries the text)
        "text", "seed", "token_id",
    }
)  # fmt: skip
DELTA_KEYS = frozenset(
    {
        "role", "content", "reasoning_content", "reasoning", "reasoning_details", "tool_calls",
        "channel",  # Groq gpt-oss: which harmony channel the delta's text belongs to
    }
)  # fmt: skip
TOOL_CALL_KEYS = frozenset({"index", "id", "type", "function", "thought_signature"})
REASONING_FIELDS = ("reasoning_content", "reasoning")
"""The string reasoning fields OpenAI-compatible servers send (DeepSeek, vLLM, Groq ...)."""


def first_dict(raw: dict, paths: tuple[tuple[str, ...], ...]) -> dict | None:
    """The first of **paths** in **raw** that holds an object (``usage_paths``)."""
    for path in paths:
        got = dig(raw, *path)
        if isinstance(got, dict):
            return got
    return None


class OpenAICompatibleAdapter(StreamAdapter):
    """The shared OpenAI-compatible stream adapter; subclasses set the options below.

    A subclass's identity is never inherited: one that sets ``provider`` but not its own
    ``api_key_env``, ``default_base_url`` or ``error_prefix`` gets ``<PROVIDER>_API_KEY``, no
    default base URL (a base URL is then required) and its provider name as the prefix, so a
    new endpoint can never send another provider's key to its host or to another host.
    """

    provider = "openai"
    default_base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "provider" not in own:
            return  # an intermediate class: register() refuses it under another name
        name = cls.provider
        if "api_key_env" not in own and "api_key_envs" not in own:
            cls.api_key_env = "".join(c if c.isalnum() else "_" for c in name.upper()) + "_API_KEY"
            cls.api_key_envs = ()
        if "default_base_url" not in own:
            cls.default_base_url = ""
            if "requires_base_url" not in own:
                cls.requires_base_url = True
        if "error_prefix" not in own:
            cls.error_prefix = name

    error_prefix: ClassVar[str] = "OpenAI"
    """``errorMessagePrefix``: error messages read "<prefix>: HTTP 429: ..."."""
    balance_codes: ClassVar[frozenset[str]] = frozenset()
    """Body business codes that mean "no balance" under HTTP 429 (``body_error_codes``)."""
    plan_access_codes: ClassVar[frozenset[str]] = frozenset()
    """Body business codes that mean "your plan lacks this model" under HTTP 429."""

    # -- options (reference §3 ``OpenAICompatibleStreamAdapterOptions``) ---------------
    append_error_details_for_codes: ClassVar[tuple[str, ...]] = ()
    """Error codes whose user-facing description gets the provider's details appended."""
    placeholder_api_key: ClassVar[str | None] = None
    """A key equal to this sends no Authorization header (keyless local servers)."""
    enable_speaker_guard: ClassVar[bool] = True
    """The speaker guard runs only when this AND ``config.speaker_guard`` are on."""
    include_persona_speaker_stop: ClassVar[bool] = True
    """Request side: add the ``"\\n<Persona>:"`` stop string (Custom turns it off)."""
    preserve_reasoning_content: ClassVar[bool] = False
    """Accumulate reasoning_content and put it on the FunctionCall (DeepSeek)."""
    mandatory_body_keys: ClassVar[tuple[str, ...]] = ()
    """Keys the degradation ladder never drops, besides model/messages/stream."""
    # priority_keys (base class) = degradationPriorityKeys: probed first on the ladder
    degrade_on_502 = False
    degrade_on_opaque_5xx = False
    strip_think_blocks_from_content: ClassVar[bool] = True
    """Run the think stripper over content (AND ``config.strip_think_blocks``)."""
    capture_think_blocks_as_thoughts: ClassVar[bool] = True
    """Keep stripped think text as a thought (AND ``config.capture_think_blocks_as_thoughts``)."""
    should_retry_without_stop: ClassVar[Callable[[int | None, str], bool] | None] = None
    """``shouldRetryWithoutStop`` hook: a body with ``stop`` failing this way degrades."""
    reasoning_fields: ClassVar[tuple[str, ...]] = ("reasoning_content",)
    """Delta fields read as reasoning, first non-empty wins (reference: reasoning_content);
    ``config.read_all_reasoning_fields`` reads every known one."""
    typed_content_lists: ClassVar[bool] = False
    """The endpoint streams ``content`` as a typed list (Mistral); read its text and
    thinking parts (always on with ``config.read_all_reasoning_fields``)."""
    usage_paths: ClassVar[tuple[tuple[str, ...], ...]] = ()
    """Where else the endpoint puts usage when the chunk has no top-level ``usage``."""
    completion_excludes_reasoning: ClassVar[bool] = False
    """The endpoint's ``completion_tokens`` leave reasoning out (xAI): always normalize."""
    requires_base_url: ClassVar[bool] = False
    thinking_as_object: ClassVar[bool] = False
    """Request side: a boolean ``thinking`` option is sent as ``{"type": "enabled"}``."""
    max_tokens_key: ClassVar[str] = "max_tokens"
    """Request side: the key ``max_tokens`` is sent as (OpenAI: ``max_completion_tokens``,
    as o-series and gpt-5 models reject ``max_tokens``)."""

    # -- request side -------------------------------------------------------------------

    def endpoint(self, base_url: str | None, model: str | None) -> str:
        base = base_url or self.default_base_url
        if not base:
            raise ValueError(
                f"provider {self.provider!r} needs a base URL (e.g. --base-url http://host/v1)"
            )
        return join_url(base, "/chat/completions")

    def transport_error(self, exc: BaseException) -> ProviderError:
        """``normalizeOpenAICompatibleProviderError`` over the thrown message (§10.3):
        "connection refused" -> api_error ECONNREFUSED, not retryable; a message with
        "timeout" -> timeout, retryable; otherwise no status: unknown, not retryable."""
        return openai_compatible_provider_error(self.provider, self.transport_message(exc))

    def request_headers(self, api_key: str | None) -> dict[str, str]:
        if self.placeholder_api_key is not None and api_key == self.placeholder_api_key:
            api_key = None
        return super().request_headers(api_key)

    def mandatory_keys_for(self, body: dict) -> tuple[str, ...]:
        keys = list(self.mandatory_keys)
        keys.extend(k for k in self.mandatory_body_keys if k not in keys)
        return tuple(keys)

    def extra_classifiers(self, body: dict) -> tuple[Callable[..., Any], ...]:
        classifiers: list[Callable[..., Any]] = [stream_options_rejection]
        hook = type(self).should_retry_without_stop
        if hook is not None and "stop" in body:
            classifiers.append(stop_rejection(hook))
        return tuple(classifiers)

    # failure_message: the base class returns the raw body text (reference: no parsing).

    @classmethod
    def build_body(
        cls, model: str, messages: list[dict], tools: list[dict] | None, options: dict
    ) -> dict[str, Any]:
        """§3 body: reference stop strings on request, lab-side tool-call fields kept off the
        wire, ``thinking`` as an object where the endpoint wants one (DeepSeek, Z.ai),
        OpenAI's ``max_completion_tokens``, the optional keys in reference order."""
        if tools:
            options["tools"] = tools
        persona = options.pop("persona_name", None)
        if options.pop("reference_stops", False):
            from lab.guards.stops import build_provider_stop_strings

            options["stop"] = build_provider_stop_strings(
                existing_stops=options.get("stop"),
                provider_name=cls.provider,
                model=model,
                persona_name=persona,
                include_persona_speaker_stop=cls.include_persona_speaker_stop,
            )
        for m in messages:  # lab-side continuity fields (thought_signature ...) stay off the wire
            if isinstance(m.get("tool_calls"), list):
                m["tool_calls"] = [
                    {k: v for k, v in tc.items() if k in _OPENAI_TOOL_CALL_KEYS}
                    for tc in m["tool_calls"]
                    if isinstance(tc, dict)
                ]
        if cls.thinking_as_object and "thinking" in options:
            options["thinking"] = _thinking_object(options["thinking"])
        if cls.max_tokens_key != "max_tokens" and options.get("max_tokens") is not None:
            options.setdefault(cls.max_tokens_key, options.pop("max_tokens"))
        return ordered_body(model, messages, OPENAI_COMPAT_BODY_ORDER, options)

    @classmethod
    def error_message(cls, body_text: str, status: int | None = None) -> str:
        """The endpoint's own message in an HTTP error body: ``error.message``, a string
        ``error``, ``message``, ``detail`` (a non-string as JSON), ``title`` (problem JSON),
        the raw text, the status phrase, "Unknown error"."""
        parsed = parse_error_body(body_text)
        detail = dig(parsed, "detail")
        if detail is not None and not isinstance(detail, str):
            detail = compact_json(detail)
        error_field = dig(parsed, "error")
        return first_text(
            dig(parsed, "error", "message"),
            error_field if isinstance(error_field, str) else None,
            dig(parsed, "message"),
            detail,
            dig(parsed, "title"),
            body_text if isinstance(body_text, str) else "",
            status_phrase(status),
            UNKNOWN_ERROR_MESSAGE,
        )

    @classmethod
    def normalize_http_error(
        cls, status: int, body_text: str, *, body_error_codes: bool = False
    ) -> ProviderError:
        """``normalizeOpenAICompatibleProviderError`` over "HTTP <status>: <message>"; the
        body's ``error.code`` decides too with ``body_error_codes`` (lab addition)."""
        message = cls.error_message(body_text, status)
        parsed = parse_error_body(body_text)
        original: dict[str, Any] = {"provider": cls.provider, "status": status, "body": body_text}
        body_error = dig(parsed, "error")
        if isinstance(body_error, Mapping):
            # the body's own error object (code, type, param; Groq's failed_generation):
            # evidence for the tables, read by nothing that decides (body_error_codes does)
            original["error"] = dict(body_error)
        return openai_compatible_provider_error(
            cls.provider,
            f"HTTP {status}: {message}",
            status=status,
            error_code=code_string(dig(parsed, "error", "code")) if body_error_codes else None,
            user_message=message,
            original_error=original,
            prefix=cls.error_prefix or cls.provider,
        )

    # -- per-attempt state --------------------------------------------------------------

    def reset(self) -> None:
        cfg = self.config
        self._make_guards(
            think=self.strip_think_blocks_from_content,
            capture_thoughts=self._capture_thoughts,
            speaker=self.enable_speaker_guard,
        )
        self.tool_acc = ToolCallAccumulator()
        self._extra: list[ProcessedChunk] = []
        self.reasoning_acc: list[str] = []
        self.pending_think: list[str] = []
        self.ended = False
        self._read_all = cfg.read_all_reasoning_fields
        self._choice_keys = CHOICE_KEYS | {"usage"} if cfg.usage_in_choices else CHOICE_KEYS

    @property
    def _capture_thoughts(self) -> bool:
        return (
            self.config.capture_think_blocks_as_thoughts and self.capture_think_blocks_as_thoughts
        )

    # -- stage 02 -----------------------------------------------------------------------

    _decode_typed: ClassVar[Callable[[str, list[str]], dict | None] | None] = None
    """A family's typed fast path (OpenRouter with msgspec): a data line of the common shape
    -> its normalized chunk and hostile counts, handed to :meth:`_on_normalized`; None for
    any other line, which is parsed as JSON and goes to :meth:`_on_raw`."""

    def _on_normalized(self, chunk: dict, bad: list[str], out: list[ProcessedChunk]) -> None:
        raise NotImplementedError  # pragma: no cover - only with a _decode_typed

    def feed(self, event: SSEEvent) -> list[ProcessedChunk]:
        self._note_event(event)
        data = event.data
        out: list[ProcessedChunk] = []
        if data is None or event.comment is not None or self.ended:  # comment: no data
            return out
        typed = type(self)._decode_typed  # a plain function (staticmethod), not a method
        for line in data.split("\n") if "\n" in data else (data,):
            line = line.strip()
            if line == "[DONE]":
                self.facts["done_seen"] = True
                continue
            if typed is not None:
                bad: list[str] = []
                chunk = typed(line, bad)
                if chunk is not None:
                    self._on_normalized(chunk, bad, out)
                    if self.stopped:
                        break
                    continue
            try:
                raw = _json.loads(line)
            except (ValueError, RecursionError) as exc:
                if self._unparsable(line, exc, event, out):
                    return out
                continue
            self._on_raw(raw, out)
            if self.stopped:
                break
        return out

    def _unparsable(
        self, line: str, exc: Exception, event: SSEEvent, out: list[ProcessedChunk]
    ) -> bool:
        """A data line that is not JSON (or empty); True ends the stream.

        Reference (§3): JSON.parse is not guarded, the throw ends the stream as an error
        chunk. A body cut inside its last event is different: the reference's line reader
        keeps a partial last line and never parses it, so the lab counts it
        (``facts["cut_event_chars"]``) and the unterminated tail makes the cut visible
        (``eof_without_terminator``)."""
        if event.unterminated and line:
            self.facts["cut_event_chars"] = self.facts.get("cut_event_chars", 0) + len(line)
            return False
        self.facts["invalid_json"] += 1
        what = "empty data line" if not line else f"invalid JSON in data line: {exc}"
        error = openai_compatible_provider_error(
            self.provider, what, original_error={"data": line[:2000]}
        )
        out.extend(self.fail(error))
        self.stopped = True
        return True

    def _on_raw(self, raw: Any, out: list[ProcessedChunk]) -> None:
        if not isinstance(raw, dict):
            self.facts["dropped_chunks"] = self.facts.get("dropped_chunks", 0) + 1
            return
        chunk = self._normalize(raw)
        err = chunk.get("error")
        if err is not None and not self.committed:
            status = parse_status_code(err.get("code"))
            message = err.get("message") if isinstance(err.get("message"), str) else ""
            if not message:
                message = f"{self._prefix}: provider API error"
            if self.on_precommit_error(status, message):
                raise RetryAttempt(status, message)
        choices = chunk.get("choices")
        if choices and (choices[0]["index"] != 0 or len(choices) > 1):
            choices = self._other_choices(chunk, choices)
        delta = choices[0]["delta"] if choices else None
        if delta is not None:
            self._guard_content(delta)
        for piece in split_text_and_tool(chunk, drop=("usage", "error")):
            self._pipeline(piece, out)
            if self.stopped:
                return

    def _other_choices(self, chunk: dict, choices: list[dict]) -> list[dict]:
        """A chunk for another choice than the first (``n > 1``): the reference reads the
        first choice of every chunk, so the answers interleave into one text; the count goes
        to ``facts["other_choices"]`` (anomaly ``choices_mixed``) and ``first_choice_only``
        keeps choice 0 alone."""
        self.facts["other_choices"] = self.facts.get("other_choices", 0) + 1
        if not self.config.first_choice_only:
            return choices
        kept = [c for c in choices if c["index"] == 0]
        chunk["choices"] = kept
        return kept

    @property
    def _prefix(self) -> str:
        return self.error_prefix or self.provider

    @classmethod
    def error_options(cls) -> OpenAICompatibleErrorOptions:
        """The error formatter's knobs for this endpoint (prefix, business codes)."""
        return OpenAICompatibleErrorOptions(
            cls.error_prefix or cls.provider,
            balance_codes=cls.balance_codes,
            plan_access_codes=cls.plan_access_codes,
        )

    def _normalize(self, raw: dict) -> dict:
        """The fields the pipeline reads, correctly typed; everything else passes through.

        Keys nobody reads are counted in ``facts["unhandled_shapes"]``; reasoning in a field
        this endpoint does not read is counted in ``facts["ignored_reasoning_chars"]``.
        """
        facts = self.facts
        if not self._ids_seen:
            self._note_response_ids(raw)
        if not raw.keys() <= CHUNK_KEYS:
            note_unknown_keys(facts, raw, CHUNK_KEYS, "")
        out: dict[str, Any] = {}
        err = raw.get("error")
        if err:
            out["error"] = err if isinstance(err, dict) else {"message": str(err)}
        choices_raw = raw.get("choices")
        if isinstance(choices_raw, list):
            choices = []
            for pos, ch in enumerate(choices_raw):
                if not isinstance(ch, dict):
                    continue
                if not ch.keys() <= self._choice_keys:
                    note_unknown_keys(facts, ch, self._choice_keys, "choices[]")
                got = ch.get("delta")
                delta_raw: dict = got if isinstance(got, dict) else {}
                if not delta_raw.keys() <= DELTA_KEYS:
                    note_unknown_keys(facts, delta_raw, DELTA_KEYS, "choices[].delta")
                delta: dict[str, Any] = {}
                if isinstance(delta_raw.get("role"), str):
                    delta["role"] = delta_raw["role"]
                content = delta_raw.get("content", _MISSING)
                typed_reasoning = ""
                if content is None or isinstance(content, str):
                    delta["content"] = content
                elif isinstance(content, list):
                    if self.typed_content_lists or self._read_all:
                        delta["content"], typed_reasoning = typed_content(content)
                    else:
                        note_shape(facts, "choices[].delta.content[]")
                delta["reasoning_content"] = self._read_reasoning(delta_raw, typed_reasoning, delta)
                tcs = delta_raw.get("tool_calls")
                if isinstance(tcs, list):
                    delta["tool_calls"] = [t for t in tcs if isinstance(t, dict)]
                fr = ch.get("finish_reason")
                index = ch.get("index")
                if type(index) is not int or index < 0:  # the common case skips the call
                    index = self._int(index, "choices[].index")
                choices.append(
                    {
                        "index": pos if index is None else index,
                        "delta": delta,
                        "finish_reason": fr if isinstance(fr, str) else None,
                    }
                )
            out["choices"] = choices
        usage = raw.get("usage")
        if isinstance(usage, dict):
            out["usage"] = usage
        elif self.usage_paths and (usage := first_dict(raw, self.usage_paths)) is not None:
            out["usage"] = usage  # the endpoint's own place (Groq: x_groq.usage)
        elif self.config.usage_in_choices:
            usage = choice_usage(raw)
            if usage is not None:
                out["usage"] = usage
        return out

    def _read_reasoning(self, delta_raw: dict, typed: str, delta: dict) -> str | None:
        """The delta's reasoning: the first non-empty field this endpoint reads (with
        ``read_all_reasoning_fields``: every known field, ``reasoning_details`` only when no
        string field carried it, typed thinking parts added). Unread reasoning is counted."""
        fields = REASONING_FIELDS if self._read_all else self.reasoning_fields
        reasoning = None
        for name in fields:
            v = delta_raw.get(name)
            if isinstance(v, str) and v:
                reasoning = v
                break
        rd = delta_raw.get("reasoning_details")
        rd_text = rd_summary = ""
        if isinstance(rd, list) and rd:
            rd_text, rd_summary = reasoning_details_text(rd)
        if self._read_all:
            if reasoning is None and rd_text:
                reasoning = rd_text
            if reasoning is None and rd_summary:
                delta["reasoning_summary"] = rd_summary
            if typed:
                reasoning = (reasoning or "") + typed
            return reasoning
        if typed and self.typed_content_lists:
            reasoning = (reasoning or "") + typed
            typed = ""
        ignored = 0
        for name in REASONING_FIELDS:
            v = delta_raw.get(name)
            if name not in fields and isinstance(v, str) and v and v != reasoning:
                ignored += len(v)
        if reasoning is None:
            ignored += len(rd_text) + len(rd_summary)
        ignored += len(typed)
        if ignored:
            self.facts["ignored_reasoning_chars"] = (
                self.facts.get("ignored_reasoning_chars", 0) + ignored
            )
        return reasoning

    def _guard_content(self, delta: dict) -> None:
        """Think strip, then the spill guard, on the whole chunk's content (§3 steps 1-2)."""
        content = delta.get("content")
        if self.think is not None and isinstance(content, str) and content:
            g = self.think.feed(content)
            if self.think.notes:  # _ran, inlined in the per-chunk path
                self._drain(self.think)
            content = g.content
            if g.reasoning and self._capture_thoughts:
                self.pending_think.append(g.reasoning)
            delta["content"] = content
        reasoning = delta.get("reasoning_content")
        if reasoning:
            self.spill.observe_reasoning(reasoning)
        if isinstance(content, str) and content:
            g = self.spill.filter(content)
            if self.spill.notes:  # _ran, inlined in the per-chunk path
                self._drain(self.spill)
            delta["content"] = g.content
            if g.reasoning:
                delta["reasoning_content"] = (delta.get("reasoning_content") or "") + g.reasoning

    _reasoning_key: ClassVar[str] = "reasoning_content"
    """Where the normalized delta holds reasoning (OpenRouter: ``reasoning``)."""

    _piece_pre_guards: ClassVar[bool] = False
    """Does :meth:`_pre_guards` run on every piece? (OpenRouter: think strip and the spill
    guard per piece; here they ran on the whole chunk in :meth:`_guard_content`.)"""

    def _pre_guards(self, delta: dict) -> None:
        """Guards a family runs on each piece before dedup and the speaker guard."""

    def _pipeline(self, chunk: dict, out: list[ProcessedChunk]) -> None:
        """One piece: guards, the commit point, the speaker tail before a terminal piece,
        the meaningful filter, then process_chunk (one definition for the chat adapters)."""
        choices = chunk.get("choices")
        delta = choices[0]["delta"] if choices else None
        fired = False
        content = None
        if delta is not None:
            if self._piece_pre_guards:
                self._pre_guards(delta)
            # the per-piece guards (§3: dedup, then the speaker guard), inlined: per chunk
            content = delta.get("content")
            if isinstance(content, str) and content:
                content = self.dedup.filter(content)
                if self.dedup.notes:
                    self._drain(self.dedup)
                if self.speaker is not None and content:
                    content = self.speaker.feed(content)
                    if self.speaker.notes:
                        self._drain(self.speaker)
                    fired = self.speaker.fired
            if "content" in delta or content:
                delta["content"] = content

        if not self.committed and (
            "usage" in chunk
            or self.pending_think
            or (
                delta is not None
                and (
                    content
                    or delta.get(self._reasoning_key)
                    or delta.get("tool_calls")
                    or delta.get("reasoning_details")
                )
            )
        ):
            self.committed = True

        if self.speaker is not None and not content:  # the tail step's own first test
            tail = self._speaker_tail_before_terminal(chunk, content, delta)
            if tail:
                self._emit_text(tail, out)

        if "error" not in chunk and "usage" not in chunk and not choices:
            self.facts["dropped_chunks"] = self.facts.get("dropped_chunks", 0) + 1
            if fired:
                self.stopped = True
            return
        if self._posting or self._extra:
            self._emit(chunk, out)
        else:  # _emit's common case, inlined: per chunk
            out.append(self.process_chunk(chunk))
            if self._extra:
                extra, self._extra = self._extra, []
                out.extend(extra)
        if fired:
            self.stopped = True

    def _emit_text(self, text: str, out: list[ProcessedChunk]) -> None:
        """Emit guard-released text (a speaker tail, a flush) as a text chunk."""
        self._emit(self._text_raw(text), out)

    @staticmethod
    def _text_raw(text: str) -> dict:
        return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}

    def _emit(self, chunk: dict, out: list[ProcessedChunk]) -> None:
        """process_chunk, then the post-processing hook (Custom's verbatim parser) when
        this attempt has one (``self._posting``; skipped in the hot loop otherwise)."""
        if self._posting:
            out.extend(self._post(self.process_chunk(chunk)))
        else:
            out.append(self.process_chunk(chunk))
        if self._extra:  # further tool calls of the step (config.all_tool_calls)
            extra, self._extra = self._extra, []
            for c in extra:
                out.extend(self._post(c))

    _posting: bool = False
    """Does ``_post`` change chunks in this attempt? (Custom with a verbatim parser.)"""

    def _post(self, chunk: ProcessedChunk) -> list[ProcessedChunk]:
        return [chunk]

    # -- stage 03 -----------------------------------------------------------------------

    def _take_pending_thoughts(self) -> list[ThoughtLogEntry]:
        if not self.pending_think:
            return []
        text = "".join(self.pending_think)
        self.pending_think = []
        return [new_thought(kind="raw", content=text)] if text else []

    def _map_usage(self, raw: dict) -> Usage | None:
        """OpenAI-shaped usage -> :class:`Usage` (one definition: ``openai_usage``).

        When the completion count leaves reasoning out (``total = prompt + completion +
        reasoning``, reasoning > 0), the endpoint's ``completion_excludes_reasoning`` or
        ``config.normalize_usage_reasoning`` adds it back; otherwise the fact is noted."""
        bad: list[str] = []
        usage = openai_usage(raw, bad)
        if bad:
            self.facts.setdefault("hostile_values", []).extend(bad)
        if (
            usage is not None
            and usage.reasoning_tokens
            and usage.total_tokens is not None
            and usage.total_tokens
            == usage.input_tokens + usage.output_tokens + usage.reasoning_tokens
        ):
            if self.completion_excludes_reasoning or self.config.normalize_usage_reasoning:
                usage = usage.model_copy(
                    update={"output_tokens": usage.output_tokens + usage.reasoning_tokens}
                )
            else:
                self.facts["usage_excludes_reasoning"] = True
        return usage

    def process_chunk(self, chunk: dict) -> ProcessedChunk:
        """§3 ``processChunk``, in decision order."""
        err = chunk.get("error")
        if err is not None:
            self._record_finish("error")
            error = openai_compatible_stream_error(self.provider, err)
            return new_chunk(
                type="error",
                error=error,
                thoughts=self._take_pending_thoughts(),
                metadata={"finish_reason": "error"},
            )

        metadata: dict[str, Any] = {}
        raw_usage = chunk.get("usage")
        if isinstance(raw_usage, dict):
            usage = self._map_usage(raw_usage)
            if usage is not None:
                metadata["usage"] = usage
            metadata["raw_usage"] = raw_usage
        choices = chunk.get("choices")
        if not choices:
            return new_chunk(type="text", content="", metadata=metadata)

        first = choices[0]
        delta = first["delta"]
        thoughts: list[ThoughtLogEntry] = []
        reasoning = delta.get("reasoning_content")
        if reasoning:
            thoughts.append(new_raw_thought(reasoning))
            if self.preserve_reasoning_content:
                self.reasoning_acc.append(reasoning)
        summary = delta.get("reasoning_summary")
        if summary:
            thoughts.append(new_thought(kind="summary", content=summary))
        thoughts.extend(self._take_pending_thoughts())
        finish = first["finish_reason"]
        if finish:
            self._record_finish(finish)
            metadata["finish_reason"] = finish
        content = delta.get("content")

        step = self._tool_step(finish, delta, metadata) if finish else None
        if step is not None:
            if not step:
                if content and finish != "tool_calls":
                    return new_chunk(
                        type="text", content=content, thoughts=thoughts, metadata=metadata
                    )
                return new_chunk(type="done", thoughts=thoughts, metadata=metadata)
            if content and finish != "tool_calls":
                self._extra.extend(self._call_chunk(c) for c in step)
                return new_chunk(type="text", content=content, thoughts=thoughts, metadata=metadata)
            self._extra.extend(self._call_chunk(c) for c in step[1:])
            return new_chunk(
                type="function_call", function_call=step[0], thoughts=thoughts, metadata=metadata
            )
        if finish == "stop":
            if content:
                return new_chunk(type="text", content=content, thoughts=thoughts, metadata=metadata)
            return new_chunk(type="done", thoughts=thoughts, metadata=metadata)
        if finish == "length":
            # Reference: done; content on this chunk is not emitted (kept in metadata, named
            # in facts; keep_length_content emits it, as vLLM sends its last token here).
            if content:
                metadata["dropped_content"] = content
                if self.config.keep_length_content:
                    return new_chunk(
                        type="text", content=content, thoughts=thoughts, metadata=metadata
                    )
                self.facts["length_content_dropped"] = self.facts.get(
                    "length_content_dropped", 0
                ) + len(content)
            return new_chunk(type="done", thoughts=thoughts, metadata=metadata)
        if delta.get("tool_calls"):
            self._accumulate_tools(delta)
            return new_chunk(type="text", content="", thoughts=thoughts, metadata=metadata)
        return new_text_chunk(content or "", thoughts, metadata)

    def _tool_step(
        self, finish: str | None, delta: dict, metadata: dict
    ) -> list[FunctionCall] | None:
        """At a finish chunk: the step's calls when this finish builds them (``tool_calls``;
        any finish with ``config.all_tool_calls`` when calls were streamed), else None. Calls
        streamed before another finish are named in ``facts["dropped_tool_calls"]``, as the
        reference never builds them. Ignored calls go to ``metadata["ignored_tool_calls"]``."""
        if finish == "tool_calls" or (
            finish and self.config.all_tool_calls and (self.tool_acc or delta.get("tool_calls"))
        ):
            self._accumulate_tools(delta)
            calls, ignored = self._build_calls()
            if ignored:
                metadata["ignored_tool_calls"] = ignored
            return calls
        if finish and (self.tool_acc or delta.get("tool_calls")):
            self._accumulate_tools(delta)  # the finish chunk's own calls are named too
            self.facts.setdefault("dropped_tool_calls", []).extend(self.tool_acc.names())
            self.tool_acc = ToolCallAccumulator()
        return None

    def _call_chunk(self, call: FunctionCall) -> ProcessedChunk:
        return new_chunk(
            type="function_call", function_call=call, serving_provider=self.serving_provider
        )

    def _first_call_fields(self) -> dict[str, Any]:
        """Provider fields the step's first call carries (DeepSeek: its reasoning_content)."""
        reasoning = "".join(self.reasoning_acc)
        self.reasoning_acc = []
        if self.preserve_reasoning_content and reasoning:
            return {"reasoning_content": reasoning}
        return {}

    def _accumulate_tools(self, delta: dict) -> None:
        acc = self.tool_acc
        for tc in delta.get("tool_calls") or ():
            if not tc.keys() <= TOOL_CALL_KEYS:
                note_unknown_keys(self.facts, tc, TOOL_CALL_KEYS, "choices[].delta.tool_calls[]")
            index = tc.get("index")
            if type(index) is not int or index < 0:
                index = self._int(index, "choices[].delta.tool_calls[].index")
            # an empty id ("", DeepSeek v4 continuation deltas) is no id: it never
            # overwrites the call's real one
            fields = {
                k: v
                for k in ("id", "type", "thought_signature")
                if isinstance(v := tc.get(k), str) and v
            }
            fn = tc.get("function")
            name = args = None
            if isinstance(fn, dict):
                if isinstance(fn.get("name"), str):
                    name = fn["name"]
                a = fn.get("arguments")
                if isinstance(a, str):
                    args = a
                elif isinstance(a, dict):  # some servers send the object itself
                    try:
                        args = json.dumps(a, ensure_ascii=False)
                    except (RecursionError, ValueError):  # nested past any parser's stack
                        self.facts.setdefault("hostile_values", []).append(
                            "choices[].delta.tool_calls[].function.arguments"
                        )
            if self.config.all_tool_calls:
                sig = dig(tc, "extra_content", "google", "thought_signature")
                if isinstance(sig, str) and sig and "thought_signature" not in fields:
                    fields["thought_signature"] = sig  # Gemini's OpenAI-compatible endpoint
            index = 0 if index is None else index
            if name and "id" in fields and acc.starts_new_call(index, fields["id"]):
                # a new call header (another id) where a call already is: calls sent with no
                # index, or all at index 0 (Gemini's, Mistral's, Ollama's and vLLM's
                # OpenAI-compatible endpoints). The reference glues them into one call.
                if self.config.all_tool_calls:
                    index = acc.next_index()
                else:
                    self.facts["merged_tool_calls"] = self.facts.get("merged_tool_calls", 0) + 1
            if name and "id" in fields and acc.resends_header(index, fields["id"], name):
                # the whole call header (same id, same name) sent again: the reference
                # appends the name a second time
                if self.config.merge_resent_tool_headers:
                    name = None
                else:
                    self.facts["resent_tool_headers"] = self.facts.get("resent_tool_headers", 0) + 1
            acc.add(index, name=name, arguments=args, fields=fields)

    def _build_calls(self, *, truncated: bool = False) -> tuple[list[FunctionCall], list[dict]]:
        """The step's calls: the one at index 0 (reference), or every one in index order
        (``config.all_tool_calls``); the others are returned as ``ignored`` and named in
        ``facts["dropped_tool_calls"]``. **truncated**: the stream was cut before the
        call's finish chunk, so each call is marked ``arguments_truncated``."""
        built = self.tool_acc.take()
        first_fields = self._first_call_fields()
        if self.config.all_tool_calls:
            keep, ignored = built, []
        else:
            keep = [(i, a) for i, a in built if i == 0]
            ignored = [{"index": i, **a} for i, a in built if i != 0]
        if ignored:
            self.facts.setdefault("dropped_tool_calls", []).extend(a["name"] for a in ignored)
        calls: list[FunctionCall] = []
        for _, acc in keep:
            if not acc["name"]:
                continue
            parsed = self._parse_arguments(acc["arguments"], acc["name"])
            provider_fields: dict[str, Any] = {} if calls else dict(first_fields)
            if parsed.error is not None:
                provider_fields["raw_arguments"] = acc["arguments"]
                provider_fields["arguments_error"] = parsed.error
            calls.append(
                FunctionCall(
                    name=acc["name"],
                    args=parsed.args,
                    id=acc.get("id"),
                    thought_signature=acc.get("thought_signature"),
                    arguments_truncated=parsed.truncated or truncated,
                    provider_fields=provider_fields,
                )
            )
        return calls, ignored

    def _cut_tool_calls(self, out: list[ProcessedChunk]) -> None:
        """The stream ended with streamed calls that no finish chunk built. Cut before the
        end (no ``[DONE]``): named in ``facts["cut_tool_calls"]``, and emitted marked
        ``arguments_truncated`` with ``config.keep_cut_tool_calls``. Ended by ``[DONE]``
        with no finish: named in ``facts["dropped_tool_calls"]``, and built as they came with
        ``config.all_tool_calls``. The reference builds neither."""
        if not self.tool_acc:
            return
        if self.facts.get("done_seen"):
            # The server ended the stream ([DONE]) without a finish for the calls: nothing
            # was cut, the reference just never builds them (all_tool_calls does).
            if not self.config.all_tool_calls:
                self.facts.setdefault("dropped_tool_calls", []).extend(self.tool_acc.names())
                self.tool_acc = ToolCallAccumulator()
                return
            calls, _ = self._build_calls()
        else:
            self.facts.setdefault("cut_tool_calls", []).extend(self.tool_acc.names())
            if not self.config.keep_cut_tool_calls:
                self.tool_acc = ToolCallAccumulator()
                return
            calls, _ = self._build_calls(truncated=True)
        out.extend(self._call_chunk(c) for c in calls)

    # -- end of stream ------------------------------------------------------------------

    def _flush_guards(self, out: list[ProcessedChunk], *, error_path: bool) -> None:
        """Spill flush, then (natural end) think flush + speaker tail, or (error path)
        speaker tail + think flush. Flushed think text joins the pending thoughts."""
        g = self._ran(self.spill, self.spill.flush())
        if g.content:
            self._emit(self._text_raw(g.content), out)

        def think_flush() -> None:
            if self.think is None:
                return
            g = self._ran(self.think, self.think.flush())
            if g.reasoning and self._capture_thoughts:
                self.pending_think.append(g.reasoning)
            if g.content:
                self._emit(self._text_raw(g.content), out)

        def speaker_flush() -> None:
            if self.speaker is not None:
                tail = self.speaker.flush()
                if tail:
                    self._emit(self._text_raw(tail), out)

        if error_path:
            speaker_flush()
            think_flush()
        else:
            think_flush()
            speaker_flush()

    def finish(self) -> list[ProcessedChunk]:
        out: list[ProcessedChunk] = []
        if self.stopped or self.ended:
            return out
        self.ended = True
        self._flush_guards(out, error_path=False)
        out.extend(self._final_flush())
        self._cut_tool_calls(out)
        if self.pending_think:
            out.append(
                ProcessedChunk(type="text", content="", thoughts=self._take_pending_thoughts())
            )
        return out

    def _final_flush(self) -> list[ProcessedChunk]:
        """Post-processing state to release at the end (Custom's verbatim parser)."""
        return []

    def fail(self, error: ProviderError) -> list[ProcessedChunk]:
        out: list[ProcessedChunk] = []
        if self.ended:
            return out
        self.ended = True
        self._flush_guards(out, error_path=True)
        out.extend(self._final_flush())
        self._cut_tool_calls(out)
        self._record_finish("error")
        out.append(
            ProcessedChunk(
                type="error",
                error=error,
                thoughts=self._take_pending_thoughts(),
                metadata={"finish_reason": "error"},
            )
        )
        return out


class OpenAIAdapter(OpenAICompatibleAdapter):
    """OpenAI's own chat completions."""

    provider = "openai"
    error_prefix = "OpenAI"
    max_tokens_key = "max_completion_tokens"
    drops_reasoning_history = True
    default_base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"


class DeepSeekAdapter(OpenAICompatibleAdapter):
    """DeepSeek: reasoning_content is kept on the tool call for thinking-mode replay."""

    provider = "deepseek"
    error_prefix = "DeepSeek"
    thinking_as_object = True
    default_base_url = "https://api.deepseek.com"
    api_key_env = "DEEPSEEK_API_KEY"
    preserve_reasoning_content = True
    requires_reasoning_content_replay = True
    mandatory_body_keys = ("thinking",)

    def _map_usage(self, raw: dict) -> Usage | None:
        usage = super()._map_usage(raw)
        hit = wire_int(raw.get("prompt_cache_hit_tokens"))
        if hit is not None:
            if usage is None:
                usage = Usage()
            if not usage.cache_read_tokens:
                usage = usage.model_copy(update={"cache_read_tokens": hit})
        return usage


class ZaiAdapter(OpenAICompatibleAdapter):
    """Z.ai / Zhipu GLM (general endpoint; the coding plan uses ``/api/coding/paas/v4``)."""

    provider = "zai"
    error_prefix = "Z.ai"
    thinking_as_object = True
    balance_codes = frozenset({"1113"})
    plan_access_codes = frozenset({"1309", "1311"})
    default_base_url = "https://api.z.ai/api/paas/v4"
    api_key_env = "ZAI_API_KEY"


class NvidiaAdapter(OpenAICompatibleAdapter):
    """NVIDIA NIM hosted endpoints: opaque 5xx degrade, reasoning keys probed first."""

    provider = "nvidia"
    error_prefix = "NVIDIA"
    default_base_url = "https://integrate.api.nvidia.com/v1"
    api_key_env = "NVIDIA_API_KEY"
    mandatory_body_keys = ("chat_template_kwargs",)
    priority_keys = ("reasoning_budget",)  # degradationPriorityKeys
    degrade_on_opaque_5xx = True
    append_error_details_for_codes = ("400", "404", "500")


class GroqAdapter(OpenAICompatibleAdapter):
    """Groq: reasoning models stream ``reasoning``; a failed tool call's error carries the
    model's raw output in ``error.failed_generation`` (kept on ``ProviderError.original_error``)."""

    provider = "groq"
    error_prefix = "Groq"
    default_base_url = "https://api.groq.com/openai/v1"
    api_key_env = "GROQ_API_KEY"
    reasoning_fields = ("reasoning",)
    usage_paths = (("x_groq", "usage"),)


class XaiAdapter(OpenAICompatibleAdapter):
    """xAI Grok: ``reasoning_content``; its ``completion_tokens`` leave reasoning out, so
    usage is normalized (output = completion + reasoning) as everywhere else."""

    provider = "xai"
    error_prefix = "xAI"
    default_base_url = "https://api.x.ai/v1"
    api_key_env = "XAI_API_KEY"
    completion_excludes_reasoning = True


class MistralAdapter(OpenAICompatibleAdapter):
    """Mistral: reasoning models (Magistral) stream ``content`` as a typed list of
    ``{"type": "thinking"}`` and ``{"type": "text"}`` parts."""

    provider = "mistral"
    error_prefix = "Mistral"
    default_base_url = "https://api.mistral.ai/v1"
    api_key_env = "MISTRAL_API_KEY"
    typed_content_lists = True

    @classmethod
    def tool_id_style(cls, model: str) -> str | None:
        """Mistral's rule for every model it serves (a Claude id rule still wins)."""
        return "claude" if is_claude_model(model) else "mistral"


class TogetherAdapter(OpenAICompatibleAdapter):
    """Together AI: reasoning models stream ``reasoning`` (older ones ``<think>`` in content)."""

    provider = "together"
    error_prefix = "Together"
    default_base_url = "https://api.together.xyz/v1"
    api_key_env = "TOGETHER_API_KEY"
    reasoning_fields = ("reasoning", "reasoning_content")


class FireworksAdapter(OpenAICompatibleAdapter):
    """Fireworks AI: ``reasoning_content`` for reasoning models."""

    provider = "fireworks"
    error_prefix = "Fireworks"
    default_base_url = "https://api.fireworks.ai/inference/v1"
    api_key_env = "FIREWORKS_API_KEY"


class VllmAdapter(OpenAICompatibleAdapter):
    """A vLLM server (``vllm serve``): ``reasoning_content``, newer releases ``reasoning``;
    local servers need no key (``EMPTY`` sends none)."""

    provider = "vllm"
    error_prefix = "vLLM"
    default_base_url = "http://127.0.0.1:8000/v1"
    api_key_env = "VLLM_API_KEY"
    placeholder_api_key = "EMPTY"
    reasoning_fields = ("reasoning_content", "reasoning")


class OllamaAdapter(OpenAICompatibleAdapter):
    """Ollama's OpenAI-compatible endpoint: ``reasoning`` for thinking models; no key."""

    provider = "ollama"
    error_prefix = "Ollama"
    default_base_url = "http://127.0.0.1:11434/v1"
    api_key_env = "OLLAMA_API_KEY"
    placeholder_api_key = "ollama"
    reasoning_fields = ("reasoning",)


class CustomAdapter(OpenAICompatibleAdapter):
    """Any OpenAI-compatible server (vLLM, llama.cpp, LM Studio ...): base URL required.

    With ``config.verbatim_tool_calls`` on, tools exposed and the request carrying tool
    schemas, text content runs through :class:`~lab.guards.VerbatimToolCallParser`: a call
    written as text (``get_weather({"city": "Bern"})``) becomes a ``function_call`` chunk.
    """

    provider = "custom"
    error_prefix = "Custom"
    default_base_url = ""
    api_key_env = "CUSTOM_API_KEY"
    include_persona_speaker_stop = False
    requires_base_url = True
    # mypy reads a callable class attribute as a method (self bound); this one is a plain
    # function, as the ClassVar on the base class says.
    should_retry_without_stop = staticmethod(custom_should_retry_without_stop)  # type: ignore[assignment]

    def reset(self) -> None:
        super().reset()
        self.verbatim: VerbatimToolCallParser | None = None
        if self.config.verbatim_tool_calls and self.tools:
            parser = VerbatimToolCallParser(self.tools)
            if parser.has_tools:
                self.verbatim = parser
        self._posting = self.verbatim is not None

    def _post(self, chunk: ProcessedChunk) -> list[ProcessedChunk]:
        parser = self.verbatim
        if parser is None:
            return [chunk]
        out: list[ProcessedChunk] = []
        if chunk.type == "text" and chunk.content:
            pieces = self._ran(parser, parser.feed_all(chunk.content))
            first = True
            for p in pieces:
                if p.function_call is not None:
                    out.append(self._verbatim_call(p.function_call, chunk if first else None))
                elif p.text:
                    out.append(self._with(chunk if first else None, content=p.text))
                first = False
            if first:  # everything held back: keep the chunk's thoughts and metadata
                out.append(chunk.model_copy(update={"content": ""}))
            return out
        if chunk.type == "done":
            flushed = self._ran(parser, parser.flush())
            if flushed.text:
                out.append(ProcessedChunk(type="text", content=flushed.text))
            if flushed.function_call is not None:
                out.append(self._verbatim_call(flushed.function_call, chunk))
                return out
        out.append(chunk)
        return out

    @staticmethod
    def _with(chunk: ProcessedChunk | None, **update: Any) -> ProcessedChunk:
        if chunk is None:
            return ProcessedChunk(type="text", **update)
        return chunk.model_copy(update=update)

    def _verbatim_call(self, call: FunctionCall, chunk: ProcessedChunk | None) -> ProcessedChunk:
        fields: dict[str, Any] = {"type": "function_call", "function_call": call, "content": None}
        if chunk is None:
            return ProcessedChunk(**fields)
        return chunk.model_copy(update=fields)

    def _final_flush(self) -> list[ProcessedChunk]:
        parser = self.verbatim
        if parser is None:
            return []
        flushed = self._ran(parser, parser.flush())
        out: list[ProcessedChunk] = []
        if flushed.text:
            out.append(ProcessedChunk(type="text", content=flushed.text))
        if flushed.function_call is not None:
            out.append(self._verbatim_call(flushed.function_call, None))
        return out
