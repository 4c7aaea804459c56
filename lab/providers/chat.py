"""The OpenAI chat-completions stream machine, shared by every endpoint of that wire family.

:class:`OpenAICompatibleAdapter` reads ``/chat/completions`` streams; each endpoint
(OpenAI, DeepSeek, Z.ai, NVIDIA NIM, Groq, ..., Custom: :mod:`lab.providers.openai_compat`)
is a subclass that only sets options, and OpenRouter (:mod:`lab.providers.openrouter`) one
that overrides hooks. Per SSE event::

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

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from lab import _json
from lab.degrade import stop_rejection, stream_options_rejection
from lab.errors import (
    UNKNOWN_ERROR_MESSAGE,
    code_string,
    compact_json,
    dig,
    first_text,
    parse_error_body,
    parse_status_code,
    status_phrase,
)
from lab.guards.json_repair import parse_tool_arguments
from lab.guards.markup import MarkupGuard
from lab.http.sse import SSEEvent
from lab.model import (
    FunctionCall,
    ProcessedChunk,
    ProviderError,
    ThoughtLogEntry,
    Usage,
    new_chunk,
    new_piece_chunk,
    new_raw_thought,
    new_thought,
)
from lab.providers.base import RetryAttempt, StreamAdapter
from lab.providers.chat_errors import (
    OpenAICompatibleErrorOptions,
    openai_compatible_provider_error,
    openai_compatible_stream_error,
)
from lab.providers.wire import (
    ToolCallAccumulator,
    choice_usage,
    join_url,
    note_shape,
    note_unknown_keys,
    openai_usage,
    reasoning_details_text,
    reasoning_object_text,
    split_text_and_tool,
    typed_content,
    unread_chars,
)

__all__ = [
    "CHOICE_KEYS",
    "CHUNK_KEYS",
    "DELTA_KEYS",
    "OPENAI_COMPAT_BODY_ORDER",
    "REASONING_FIELDS",
    "TOOL_CALL_KEYS",
    "OpenAICompatibleAdapter",
    "first_dict",
    "ordered_body",
]

_MISSING = object()

# --------------------------------------------------------------------------- request body

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
"""The OpenAI-compatible body's optional keys, in the reference's order (docs/reference.md, "4.1 Options and request body")."""

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
READ_DELTA_KEYS = DELTA_KEYS | {"refusal"}
"""What :meth:`OpenAICompatibleAdapter.normalize_chunk` reads in a delta: also OpenAI's
``refusal`` (the refusal text, in place of content; the result's ``refusal``)."""
TOOL_CALL_KEYS = frozenset({"index", "id", "type", "function", "thought_signature"})
_ARGUMENTS_ONLY = frozenset({"index", "function"})
_TYPED_CHUNK_KEYS = CHUNK_KEYS - {"error"}
_ARGUMENT_STEPS = (
    "_on_normalized", "guards_whole_chunk", "guard_chunk", "guards_each_piece", "split_pieces",
    "_pipeline", "process_chunk", "map_reasoning", "_accumulate_tools",
)  # fmt: skip
"""What the machine does with a chunk that only carries an argument delta: an endpoint that
changes any of it keeps the general way (``_lean_argument_piece`` takes these steps)."""
REASONING_FIELDS = ("reasoning_content", "reasoning")
"""The string reasoning fields OpenAI-compatible servers send (DeepSeek, vLLM, Groq ...)."""

# The typed path of the chat machine (msgspec): a data line of the common shape is decoded
# straight into the structs below, whose fields are exactly the keys the shape check knows
# (an unknown key, an error object, a content list, a choice or delta that is not an
# object ... is declined), and OpenAICompatibleAdapter._typed_normalize builds from them the
# chunk normalize_chunk builds, through the same steps (ids, refusal, reasoning fields,
# tool calls, index checks). A declined line goes the general way, which decides as before
# and counts what it does not read. tests/test_chat_typed.py checks the two ways against
# each other on generated streams.
decode_chat_chunk: Callable[[str | bytes], Any] | None = None
"""``decode_chat_chunk(line)``: the typed chunk of a data line of the common shape (raises
``ValueError`` for any other). None itself when msgspec is not the lab's parser."""


def argument_call(tcs: Any) -> tuple[int, str] | None:
    """(index, arguments) when **tcs** is one tool call holding only ``index`` (a count) and
    ``function`` (``arguments`` a string, no name): what ``_accumulate_tools`` sends straight
    to the accumulator."""
    if (
        type(tcs) is not list
        or len(tcs) != 1
        or type(tc := tcs[0]) is not dict
        or not tc.keys() <= _ARGUMENTS_ONLY
        or type(at := tc.get("index")) is not int
        or at < 0
        or type(fn := tc.get("function")) is not dict
        or fn.get("name")
        or type(arguments := fn.get("arguments")) is not str
    ):
        return None
    return at, arguments


def lean_argument_fields(raw: Any) -> tuple[int, str] | None:
    """:data:`lean_argument_delta`'s rules, and the typed decoder's keys and types, checked
    on a parsed chunk (the path without msgspec). The tool call is looked at first: a text
    chunk is turned away after a few lookups."""
    if type(raw) is not dict or type(choices := raw.get("choices")) is not list:
        return None
    if len(choices) != 1 or type(ch := choices[0]) is not dict:
        return None
    if type(d := ch.get("delta")) is not dict or type(d.get("tool_calls")) is not list:
        return None
    content, role, index = d.get("content"), d.get("role"), ch.get("index")
    if (
        not raw.keys() <= _TYPED_CHUNK_KEYS
        or not ch.keys() <= CHOICE_KEYS
        or not d.keys() <= READ_DELTA_KEYS
        or raw.get("usage") is not None
        or not (index is None or (type(index) is int and index == 0))
        or ch.get("finish_reason") is not None
        or not (content is None or content == "")
        or d.get("reasoning_content") is not None
        or d.get("reasoning") is not None
        or d.get("reasoning_details") is not None
        or d.get("refusal")
        or not (role is None or type(role) is str)
    ):
        return None
    return argument_call(d["tool_calls"])


lean_argument_delta: Callable[[Any], tuple[int, str] | None] = None  # type: ignore[assignment]
"""``lean_argument_delta(raw)``: (tool-call index, arguments) of a typed chunk that carries
only an argument delta, else None: no usage, one choice at index 0 (or none given) with no
finish reason, a delta with no text, reasoning or refusal, and one tool call holding only
``index`` (a count) and ``function`` (``arguments`` a string, no name). What
:meth:`OpenAICompatibleAdapter._accumulate_tools` sends straight to :meth:`add`."""

if _json.PARSER == "msgspec":
    import msgspec
    from msgspec import UNSET, Struct

    class _TypedChatDelta(Struct, forbid_unknown_fields=True, gc=False):
        role: Any = None
        content: str | None | msgspec.UnsetType = UNSET  # a list goes the general way
        reasoning_content: Any = None
        reasoning: Any = None
        reasoning_details: Any = None
        tool_calls: Any = None
        channel: Any = None
        refusal: Any = None

    class _TypedChatChoice(Struct, forbid_unknown_fields=True, gc=False):
        index: Any = None
        delta: _TypedChatDelta | None = None
        finish_reason: Any = None
        logprobs: Any = None
        native_finish_reason: Any = None
        stop_reason: Any = None
        matched_stop: Any = None
        content_filter_results: Any = None
        content_filter_offsets: Any = None
        text: Any = None
        seed: Any = None
        token_id: Any = None

    class _TypedChatChunk(Struct, forbid_unknown_fields=True, gc=False):
        id: Any = None
        object: Any = None
        created: Any = None
        model: Any = None
        choices: list[_TypedChatChoice] | None = None
        usage: Any = None
        system_fingerprint: Any = None
        service_tier: Any = None
        provider: Any = None
        x_groq: Any = None
        obfuscation: Any = None
        prompt_filter_results: Any = None
        timings: Any = None
        time_info: Any = None
        p: Any = None
        seed: Any = None

    _chat_typed_fields = {
        _TypedChatChunk: _TYPED_CHUNK_KEYS,
        _TypedChatChoice: CHOICE_KEYS,
        _TypedChatDelta: READ_DELTA_KEYS,
    }
    for _cls, _known in _chat_typed_fields.items():  # what the shape check knows
        assert set(_cls.__struct_fields__) == _known, (_cls, _known)

    decode_chat_chunk = msgspec.json.Decoder(_TypedChatChunk).decode

    def _lean_argument_delta(raw: _TypedChatChunk) -> tuple[int, str] | None:
        chs = raw.choices
        if raw.usage is not None or chs is None or len(chs) != 1:
            return None
        ch = chs[0]
        d, index = ch.delta, ch.index
        if (
            d is None
            or not (index is None or (type(index) is int and index == 0))
            or ch.finish_reason is not None
            or d.content  # None or unset (an empty string is no text either)
            or d.reasoning_content is not None
            or d.reasoning is not None
            or d.reasoning_details is not None
            or d.refusal  # None or ""
            or not (d.role is None or type(d.role) is str)
        ):
            return None
        return argument_call(d.tool_calls)

    lean_argument_delta = _lean_argument_delta
    _UNSET: Any = UNSET
else:  # pragma: no cover - exercised without msgspec
    _UNSET = object()


@functools.cache
def _all_usage_paths() -> tuple[tuple[str, ...], ...]:
    """Every place a registered OpenAI-compatible endpoint reads usage besides ``usage``."""
    from lab.providers import PROVIDERS, get_adapter

    paths: list[tuple[str, ...]] = []
    for name in PROVIDERS:
        for path in getattr(get_adapter(name), "usage_paths", ()):
            if path not in paths:
                paths.append(path)
    return tuple(paths)


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

    # -- options (the reference's ``OpenAICompatibleStreamAdapterOptions``) -------------
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
        """``normalizeOpenAICompatibleProviderError`` over the thrown message (docs/reference.md, "8.2 OpenAI-compatible status classification"):
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
        """The reference OpenAI-compatible body: reference stop strings on request, lab-side tool-call fields kept off the
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
        self.rd_acc: list[Any] = []
        self.pending_think: list[str] = []
        self.ended = False
        self._read_all = cfg.read_all_reasoning_fields
        self._choice_keys = CHOICE_KEYS | {"usage"} if cfg.usage_in_choices else CHOICE_KEYS
        cls = type(self)
        machine = OpenAICompatibleAdapter
        lean = (
            self._lean
            and cls._decode_typed is None  # a family with its own typed path (OpenRouter)
            and cls.normalize_chunk is machine.normalize_chunk
            and not self.usage_paths
            and not self.reads_usage_everywhere
            and not cfg.usage_in_choices
        )
        self._typed_chat = lean and decode_chat_chunk is not None
        """Does a data line of the common shape take :meth:`_typed_normalize`?"""
        self._lean_arguments = (
            lean
            and self.speaker is None
            and not cls.names_backend
            and all(getattr(cls, name) is getattr(machine, name) for name in _ARGUMENT_STEPS)
        )
        """Does a chunk that only carries an argument delta take
        :meth:`_lean_argument_piece` (:data:`lean_argument_delta` with msgspec,
        :func:`lean_argument_fields` without)? For an endpoint that normalizes as the
        machine does and keeps the machine's steps such a chunk meets, with no speaker
        guard (whose held tail a tool delta releases)."""

    lean: ClassVar[bool] = True
    """Does an endpoint that normalizes as this machine does take the typed path
    (:data:`decode_chat_chunk`, with msgspec)? Off, every line goes the general way (the
    tests compare the two). Read as :attr:`StreamAdapter.lean` says."""

    @property
    def _capture_thoughts(self) -> bool:
        return (
            self.config.capture_think_blocks_as_thoughts and self.capture_think_blocks_as_thoughts
        )

    # -- stage 02: data lines -> normalized chunks -> pieces ----------------------------
    #
    # The hooks a chat-completions family overrides, in the order a chunk meets them:
    # normalize_chunk, select_choices, guard_chunk, split_pieces, guard_piece (stage 02);
    # serving_backend, map_stream_error, map_usage, map_reasoning, map_finish (stage 03);
    # release, then the base class's end hooks. Each is one call per chunk at most: a
    # method call is ~55 ns against ~12 µs a chunk (docs/PERFORMANCE.md, "What the hooks
    # cost"); the guard hooks a family does not run are switched off by a class flag
    # instead of a no-op call.

    _decode_typed: ClassVar[Callable[[str, list[str]], dict | None] | None] = None
    """A family's typed fast path (OpenRouter with msgspec): a data line of the common shape
    -> its normalized chunk and hostile counts, handed to :meth:`_on_normalized`; None for
    any other line, which is parsed as JSON and goes to :meth:`normalize_chunk`."""

    stream_error_fallback: ClassVar[str] = ""
    """The message of a mid-stream error object that has none (default: "<prefix>: provider
    API error")."""

    def feed_data(
        self, data: str, event: SSEEvent, out: list[ProcessedChunk], typed_first: bool = True
    ) -> None:
        """Each ``data:`` line of the event in turn (the reference's line reader): ``[DONE]``
        noted, the typed fast path when the family has one (and **typed_first**: a family
        that tried it already passes False), else JSON then :meth:`normalize_chunk`; an
        unparsable line goes to :meth:`unparsable_line`."""
        # a plain function (staticmethod), not a method
        typed = type(self)._decode_typed if typed_first else None
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
            elif self._typed_chat:
                if len(line) > _json.FAST_MAX_CHARS:
                    chunk = None
                else:
                    # a one-line event's bytes, as the framer kept them: msgspec would
                    # encode line again (data is their decoding, line it stripped)
                    src = line if event.raw is None else event.raw
                    try:
                        raw = decode_chat_chunk(src)  # type: ignore[misc]  # set: _typed_chat
                    except (ValueError, RecursionError):  # another shape or type
                        chunk = None
                    else:
                        if self._lean_arguments and self.tool_acc.plain and not self._posting:
                            got = lean_argument_delta(raw)
                            if got is not None:
                                if not self._ids_seen:
                                    self._note_response_ids({"id": raw.id, "model": raw.model})
                                self._lean_argument_piece(*got, out)
                                continue
                        chunk = self._typed_normalize(raw)
                if chunk is not None:
                    self._on_normalized(chunk, [], out)
                    if self.stopped:
                        break
                    continue
            try:
                raw = _json.loads(line)
            except (ValueError, RecursionError) as exc:
                if self.unparsable_line(line, exc, event, out):
                    return
                continue
            if (
                self._lean_arguments
                # with the typed decoder on, it turned this line away (its shape or types;
                # on the line's bytes, also invalid UTF-8 or non-JSON whitespace), and
                # _on_parsed builds what the lean argument path would
                and not self._typed_chat
                and self.tool_acc.plain
                and not self._posting
                and (got := lean_argument_fields(raw)) is not None
            ):
                if not self._ids_seen:
                    self._note_response_ids(raw)
                self._lean_argument_piece(*got, out)
                continue
            self._on_parsed(raw, out)
            if self.stopped:
                break

    def _on_parsed(self, raw: Any, out: list[ProcessedChunk]) -> None:
        """A parsed data line: :meth:`normalize_chunk`, then :meth:`_on_normalized` (a
        dropped chunk's hostile counts noted)."""
        bad: list[str] = []
        chunk = self.normalize_chunk(raw, bad)
        if chunk is None:
            if bad:
                self.facts.setdefault("hostile_values", []).extend(bad)
        else:
            self._on_normalized(chunk, bad, out)

    def unparsable_line(
        self, line: str, exc: Exception, event: SSEEvent, out: list[ProcessedChunk]
    ) -> bool:
        """Hook that maps a data line that is not JSON (or is empty) to what it does to the
        stream; True ends it; override in subclasses.

        The reference does not guard the parse here: the throw ends the stream as an error
        chunk. A body cut inside its last event is different: the reference's line reader
        keeps a partial last line and never parses it, so the lab counts it
        (``facts["cut_event_chars"]``) and the unterminated tail makes the cut visible
        (``eof_without_terminator``)."""
        if self._cut_line(line, event):
            return False
        self.facts["invalid_json"] += 1
        what = "empty data line" if not line else f"invalid JSON in data line: {exc}"
        error = openai_compatible_provider_error(
            self.provider, what, original_error={"data": line[:2000]}
        )
        out.extend(self.fail(error))
        self.stopped = True
        return True

    def _cut_line(self, line: str, event: SSEEvent) -> bool:
        """Is **line** the partial last line of a body cut inside its last event? Counted
        (``facts["cut_event_chars"]``) when it is, never parsed or counted as invalid."""
        if event.unterminated and line:
            self.facts["cut_event_chars"] = self.facts.get("cut_event_chars", 0) + len(line)
            return True
        return False

    def normalize_chunk(self, raw: Any, bad: list[str]) -> dict | None:
        """Hook that maps one parsed data line to the normalized chunk the pipeline reads
        (None drops it; a hostile value left out is appended to **bad**); override in
        subclasses.

        The fields the pipeline reads, correctly typed; everything else passes through.
        Keys nobody reads are counted in ``facts["unhandled_shapes"]``; reasoning in a field
        this endpoint does not read is counted in ``facts["ignored_reasoning_chars"]``.
        """
        if not isinstance(raw, dict):
            self.facts["dropped_chunks"] = self.facts.get("dropped_chunks", 0) + 1
            return None
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
                if not delta_raw.keys() <= READ_DELTA_KEYS:
                    note_unknown_keys(facts, delta_raw, READ_DELTA_KEYS, "choices[].delta")
                delta: dict[str, Any] = {}
                if isinstance(delta_raw.get("role"), str):
                    delta["role"] = delta_raw["role"]
                refusal = delta_raw.get("refusal")
                if isinstance(refusal, str) and refusal:
                    self._note_refusal(refusal)
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
        elif (elsewhere := self._usage_elsewhere(raw)) is not None:
            out["usage"] = elsewhere
        elif self.config.usage_in_choices:
            usage = choice_usage(raw)
            if usage is not None:
                out["usage"] = usage
        return out

    def _lean_argument_piece(self, index: int, arguments: str, out: list) -> None:
        """An argument delta (:data:`lean_argument_delta`, :func:`lean_argument_fields`)
        with nothing else in its chunk, after its ids are noted, through the steps the
        machine takes for it, without the normalized dict: the commit point, the pending
        think thoughts
        (:meth:`map_reasoning`'s last step), the arguments to their call (what
        :meth:`_accumulate_tools` does with such a delta while the accumulator is
        ``plain``), then the empty text piece :meth:`process_chunk` emits. The machine's
        other steps do nothing for it: the whole-chunk guards see no text, no speaker
        guard is on (:attr:`_lean_arguments`), no error, usage, finish or other choice."""
        self.committed = True
        thoughts = self._take_pending_thoughts() if self.pending_think else []
        self.tool_acc.add(index, arguments=arguments)
        out.append(new_piece_chunk("text", "", thoughts, self.serving_provider, {}))
        # (no _extra to pass on: every step that fills it empties it before it returns)

    def _typed_normalize(self, raw: Any) -> dict | None:
        """:meth:`normalize_chunk` of a data line of the common shape, from its typed
        structs (:data:`decode_chat_chunk`)."""
        if not self._ids_seen:
            self._note_response_ids({"id": raw.id, "model": raw.model})
        out: dict[str, Any] = {}
        choices_raw = raw.choices
        if choices_raw is not None:
            choices = []
            for pos, ch in enumerate(choices_raw):
                d = ch.delta
                delta: dict[str, Any] = {}
                if d is None:
                    delta["reasoning_content"] = None  # what _read_reasoning reads in {}
                else:
                    if isinstance(d.role, str):
                        delta["role"] = d.role
                    refusal = d.refusal
                    if isinstance(refusal, str) and refusal:
                        self._note_refusal(refusal)
                    if d.content is not _UNSET:
                        delta["content"] = d.content
                    rc, rs, rd = d.reasoning_content, d.reasoning, d.reasoning_details
                    delta["reasoning_content"] = (
                        None
                        if rc is None and rs is None and rd is None
                        else self._read_reasoning(
                            {"reasoning_content": rc, "reasoning": rs, "reasoning_details": rd},
                            "",
                            delta,
                        )
                    )
                    tcs = d.tool_calls
                    if isinstance(tcs, list):
                        delta["tool_calls"] = [t for t in tcs if isinstance(t, dict)]
                fr = ch.finish_reason
                index = ch.index
                if type(index) is not int or index < 0:
                    index = self._int(index, "choices[].index")
                choices.append(
                    {
                        "index": pos if index is None else index,
                        "delta": delta,
                        "finish_reason": fr if isinstance(fr, str) else None,
                    }
                )
            out["choices"] = choices
        usage = raw.usage
        if isinstance(usage, dict):
            out["usage"] = usage
        return out

    reads_usage_everywhere: ClassVar[bool] = False
    """The catch-all (``custom``): usage where another registered endpoint reads it (Groq's
    ``x_groq.usage``) is read under ``LabConfig.usage_everywhere``, else counted as an
    unhandled shape. Named endpoints read their own places only."""

    def _usage_elsewhere(self, raw: dict) -> dict | None:
        if not self.reads_usage_everywhere:
            return None
        for path in _all_usage_paths():
            found = first_dict(raw, (path,))
            if found is not None:
                if self.config.usage_everywhere:
                    return found
                note_shape(self.facts, ".".join(path))
                return None
        return None

    def _on_normalized(self, chunk: dict, bad: list[str], out: list[ProcessedChunk]) -> None:
        """A normalized chunk, from :meth:`normalize_chunk` or straight from the typed fast
        path: hostile counts noted, the pre-commit error check, other choices, the
        whole-chunk guards, then each piece of the text/tool split through the pipeline."""
        if not self._ids_seen:
            self._note_response_ids(chunk)  # a family's normalized chunk may keep id, model
        if bad:
            self.facts.setdefault("hostile_values", []).extend(bad)
        err = chunk.get("error")
        if err is not None and not self.committed:
            status = parse_status_code(err.get("code"))
            message = err.get("message")
            if not (isinstance(message, str) and message):
                message = self.stream_error_fallback or f"{self._prefix}: provider API error"
            if self.on_precommit_error(status, message):
                raise RetryAttempt(status, message)
        choices = chunk.get("choices")
        if choices and (choices[0]["index"] != 0 or len(choices) > 1):
            selected = self.select_choices(chunk, choices)
            if selected is None:
                return
            choices = selected
        if self.guards_whole_chunk and choices:
            self.guard_chunk(choices[0]["delta"])
        if not choices or not (
            choices[0]["delta"].get("tool_calls") or choices[0]["finish_reason"] == "tool_calls"
        ):  # no tool call, so one piece (split_text_and_tool's own test, inlined: per chunk)
            self._pipeline(chunk, out)
            return
        for piece in self.split_pieces(chunk):
            self._pipeline(piece, out)
            if self.stopped:
                return

    def select_choices(self, chunk: dict, choices: list[dict]) -> list[dict] | None:
        """Hook that maps a chunk for another choice than the first (``n > 1``) to the
        choices the pipeline reads (None drops the chunk); override in subclasses.

        The reference reads the first choice of every chunk, so the answers interleave into
        one text; the count goes to ``facts["other_choices"]`` (anomaly ``choices_mixed``)
        and ``first_choice_only`` keeps choice 0 alone."""
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
            if reasoning is None:
                for name in fields:
                    if text := reasoning_object_text(delta_raw.get(name)):
                        reasoning = text
                        break
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
        unread = []
        for name in REASONING_FIELDS:
            v = delta_raw.get(name)
            if name not in fields and isinstance(v, str):
                unread.append(v)
            elif type(v) is dict:  # an object where a string belongs: no field reads it
                unread.append(reasoning_object_text(v))
        if reasoning is None:
            unread += (rd_text, rd_summary)
        ignored = unread_chars(unread, reasoning) + len(typed)
        if ignored:
            self.facts["ignored_reasoning_chars"] = (
                self.facts.get("ignored_reasoning_chars", 0) + ignored
            )
        return reasoning

    guards_whole_chunk: ClassVar[bool] = True
    """Does :meth:`guard_chunk` run on the whole chunk, before the text/tool split?"""

    def guard_chunk(self, delta: dict) -> None:
        """Hook that runs the guards that see a whole chunk's content, before the text/tool
        split; override in subclasses (and set :attr:`guards_whole_chunk`).

        Here: think strip, then the spill guard (the reference's first two steps). Stripped
        think text is held as a pending thought; spilled text joins ``reasoning_content``."""
        content = delta.get("content")
        think = self.think
        if think is not None and isinstance(content, str) and content:
            if think.idle and "<" not in content:  # passed as it is: only counted (per chunk)
                think.fed += len(content)
            else:
                g = self._ran(think, think.feed(content))
                content = g.content
                if g.reasoning and self._capture_thoughts:
                    self.pending_think.append(g.reasoning)
                delta["content"] = content
        reasoning = delta.get("reasoning_content")
        if reasoning:
            self.spill.observe_reasoning(reasoning)
        if isinstance(content, str) and content and self.spill.inspecting:
            g = self.spill.filter(content)
            if self.spill.notes:  # _ran, inlined in the per-chunk path
                self._drain(self.spill)
            content = delta["content"] = g.content
            if g.reasoning:
                delta["reasoning_content"] = (delta.get("reasoning_content") or "") + g.reasoning
        # guard_markup, inlined: per chunk (an idle guard's no-marker delta is only counted)
        mr = self.markup_reasoning
        if mr is not None:
            reasoning = delta.get(self.reasoning_key)
            if isinstance(reasoning, str) and reasoning:
                if mr.idle and "<" not in reasoning:
                    mr.fed += len(reasoning)
                else:
                    self._markup_reasoning(delta, reasoning)
            if isinstance(content, str) and content:
                mk: MarkupGuard = self.markup  # type: ignore[assignment]  # set with mr
                if mk.idle and "<" not in content:
                    mk.fed += len(content)
                else:
                    self._markup_content(delta, content)

    def guard_markup(self, delta: dict) -> None:
        """The markup guard (:mod:`lab.guards.markup`) on the delta's reasoning, then on its
        content after the think strip and the spill guard. Default: the text is untouched
        and every marker is a guard event. Under ``recover_markup``: harmony analysis joins
        the reasoning field, recovered calls follow this piece as ``function_call`` chunks,
        stray tokens leave the text.

        The per-chunk paths (:meth:`guard_chunk`, OpenRouter's ``guard_piece``) run it
        inlined: a delta without ``<`` while the guard is idle (:attr:`MarkupGuard.idle`)
        is only counted, anything else goes through :meth:`_markup_reasoning` and
        :meth:`_markup_content` as here."""
        if self.markup_reasoning is None:
            return
        reasoning = delta.get(self.reasoning_key)
        if isinstance(reasoning, str) and reasoning:
            self._markup_reasoning(delta, reasoning)
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._markup_content(delta, content)

    def _markup_reasoning(self, delta: dict, reasoning: str) -> None:
        guard: MarkupGuard = self.markup_reasoning  # type: ignore[assignment]  # checked
        m = guard.feed(reasoning)
        if guard.notes:
            self._drain(guard)
        if guard.recover:
            delta[self.reasoning_key] = m.text + m.reasoning
            self._extra.extend(self._call_chunk(c) for c in m.calls)

    def _markup_content(self, delta: dict, content: str) -> None:
        guard: MarkupGuard = self.markup  # type: ignore[assignment]  # checked by the caller
        m = guard.feed(content)
        if guard.notes:
            self._drain(guard)
        if guard.recover:
            key = self.reasoning_key
            delta["content"] = m.text
            if m.reasoning:
                delta[key] = (delta.get(key) or "") + m.reasoning
            self._extra.extend(self._call_chunk(c) for c in m.calls)

    def _release_markup(self, out: list[ProcessedChunk]) -> None:
        """End of stream: what the markup guards still hold (a partial marker, a block cut
        before its closer: parsed as cut short)."""
        if self.markup is None or self.markup_reasoning is None:
            return
        for guard in (self.markup_reasoning, self.markup):
            m = self._ran(guard, guard.flush())
            if guard is self.markup:
                self.release(m.text, m.reasoning, out)
            else:
                self.release("", m.text + m.reasoning, out)
            out.extend(self._call_chunk(c) for c in m.calls)

    def split_pieces(self, chunk: dict) -> list[dict]:
        """Hook that maps a chunk whose first choice carries a tool call to the pieces the
        pipeline runs one by one (its text first, then the tool call, as the reference
        emits them); override in subclasses."""
        return split_text_and_tool(chunk, drop=("usage", "error"))

    reasoning_key: ClassVar[str] = "reasoning_content"
    """Where the normalized delta holds reasoning (OpenRouter: ``reasoning``)."""

    guards_each_piece: ClassVar[bool] = False
    """Does :meth:`guard_piece` run on every piece? (OpenRouter: think strip and the spill
    guard per piece; here they ran on the whole chunk in :meth:`guard_chunk`.)"""

    def guard_piece(self, delta: dict) -> None:
        """Hook that runs guards on each piece before dedup and the speaker guard; override
        in subclasses (and set :attr:`guards_each_piece`)."""

    def _pipeline(self, chunk: dict, out: list[ProcessedChunk]) -> None:
        """One piece: guards, the commit point, the speaker tail before a terminal piece,
        the meaningful filter, then process_chunk (one definition for the chat adapters)."""
        choices = chunk.get("choices")
        delta = choices[0]["delta"] if choices else None
        fired = False
        content = None
        if delta is not None:
            if self.guards_each_piece:
                self.guard_piece(delta)
            content = delta.get("content")
            if isinstance(content, str) and content:
                content = self._text_guards(content)
                # (a speaker that fired earlier stopped the attempt: this is this piece's)
                fired = self.speaker is not None and self.speaker.fired
            if "content" in delta or content:
                delta["content"] = content

        if not self.committed and (
            "usage" in chunk
            or self.pending_think
            or (
                delta is not None
                and (
                    content
                    or delta.get(self.reasoning_key)
                    or delta.get("tool_calls")
                    or delta.get("reasoning_details")
                )
            )
        ):
            self.committed = True

        if self.speaker is not None and not content:  # the tail step's own first test
            tail = self._speaker_tail_before_terminal(chunk, content, delta)
            if tail:
                self.release(tail, "", out)

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

    def release(self, content: str, reasoning: str, out: list[ProcessedChunk]) -> None:
        """Hook that maps text a guard released (a speaker tail, a flush at the end) to
        chunks appended to **out**; override in subclasses.

        Here: released reasoning joins the pending thoughts (think text, when they are
        kept); content goes through :meth:`process_chunk` as a text piece, so it carries
        them."""
        if reasoning and self._capture_thoughts:
            self.pending_think.append(reasoning)
        if content:
            self._emit(self._text_raw(content), out)

    @staticmethod
    def _text_raw(text: str) -> dict:
        return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}

    def _emit(self, chunk: dict, out: list[ProcessedChunk]) -> None:
        """process_chunk, then the post-processing hook (Custom's verbatim parser) when
        this attempt has one (``self._posting``; skipped in the hot loop otherwise)."""
        if self._posting:
            out.extend(self.post_chunk(self.process_chunk(chunk)))
        else:
            out.append(self.process_chunk(chunk))
        if self._extra:  # further tool calls of the step (config.all_tool_calls)
            extra, self._extra = self._extra, []
            for c in extra:
                out.extend(self.post_chunk(c))

    _posting: bool = False
    """Does :meth:`post_chunk` change chunks in this attempt? (Custom with a verbatim
    parser.)"""

    def post_chunk(self, chunk: ProcessedChunk) -> list[ProcessedChunk]:
        """Hook that maps a processed chunk to the chunks emitted for it (Custom's verbatim
        tool-call parser); override in subclasses and set ``_posting`` in :meth:`reset`."""
        return [chunk]

    def post_flush(self) -> list[ProcessedChunk]:
        """Hook that releases what :meth:`post_chunk` still holds at the end (Custom's
        verbatim parser); override in subclasses."""
        return []

    # -- stage 03 -----------------------------------------------------------------------

    def _take_pending_thoughts(self) -> list[ThoughtLogEntry]:
        if not self.pending_think:
            return []
        text = "".join(self.pending_think)
        self.pending_think = []
        return [new_thought(kind="raw", content=text)] if text else []

    keeps_raw_usage: ClassVar[bool] = True
    """Does a usage chunk keep the wire's usage object in ``metadata["raw_usage"]``?"""

    def map_usage(self, raw: Any) -> Usage | None:
        """Hook that maps a chunk's usage to :class:`Usage`; override in subclasses.

        OpenAI-shaped usage (one definition: ``openai_usage``). When the completion count
        leaves reasoning out (``total = prompt + completion + reasoning``, reasoning > 0),
        the endpoint's ``completion_excludes_reasoning`` or
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

    def serving_backend(self, chunk: dict) -> str | None:
        """Hook that maps a chunk to the backend that served it (read while none is known,
        when the family :attr:`names_backend`; the first value wins); override in
        subclasses."""
        return None

    def map_stream_error(self, err: dict, chunk: dict) -> ProcessedChunk:
        """Hook that maps a mid-stream error object to its chunk; override in subclasses.

        Here: the error chunk (``openai_compatible_stream_error``), carrying the pending
        thoughts."""
        self._record_finish("error")
        error = openai_compatible_stream_error(self.provider, err)
        return new_chunk(
            type="error",
            error=error,
            thoughts=self._take_pending_thoughts(),
            metadata={"finish_reason": "error"},
        )

    def map_reasoning(self, delta: dict, chunk: dict, metadata: dict) -> list[ThoughtLogEntry]:
        """Hook that maps a delta's reasoning to the chunk's thoughts; override in
        subclasses.

        Here: ``reasoning_content`` as a raw thought (kept for the step's first call with
        ``preserve_reasoning_content``), a ``reasoning_summary`` as a summary, then the
        pending think-block thoughts."""
        thoughts: list[ThoughtLogEntry] = []
        reasoning = delta.get("reasoning_content")
        if reasoning:
            thoughts.append(new_raw_thought(reasoning))
            if self.preserve_reasoning_content:
                self.reasoning_acc.append(reasoning)
        summary = delta.get("reasoning_summary")
        if summary:
            thoughts.append(new_thought(kind="summary", content=summary))
        if self.pending_think:
            thoughts.extend(self._take_pending_thoughts())
        return thoughts

    ends_on_error_finish: ClassVar[bool] = False
    """Does ``finish_reason: "error"`` end the stream as an error chunk, before any tool
    call is built (OpenRouter)?"""

    def map_finish(
        self, finish: str, content: Any, thoughts: list[ThoughtLogEntry], metadata: dict
    ) -> ProcessedChunk | None:
        """Hook that maps a finish reason other than ``tool_calls`` and ``stop`` (after the
        tool step) to the chunk; None lets the chunk go on as a text or tool delta;
        override in subclasses.

        Here: ``length`` returns ``done``, as the reference does; content on that chunk is
        not emitted (kept in ``metadata["dropped_content"]``, named in
        ``facts["length_content_dropped"]``; ``keep_length_content`` emits it, as vLLM
        sends its last token here)."""
        if finish != "length":
            return None
        if content:
            metadata["dropped_content"] = content
            if self.config.keep_length_content:
                return new_chunk(type="text", content=content, thoughts=thoughts, metadata=metadata)
            self.facts["length_content_dropped"] = self.facts.get(
                "length_content_dropped", 0
            ) + len(content)
        return new_chunk(type="done", thoughts=thoughts, metadata=metadata)

    def process_chunk(self, chunk: dict) -> ProcessedChunk:
        """Stage 03 (the reference's ``processChunk``), in decision order, through the hooks:
        the serving backend, a mid-stream error, usage, reasoning, the finish reason (the
        step's tool calls, ``stop``, then :meth:`map_finish`), a tool-call delta, text."""
        if self.serving_provider is None and self.names_backend:
            self.serving_provider = self.serving_backend(chunk)
        sp = self.serving_provider

        err = chunk.get("error")
        if err is not None:
            return self.map_stream_error(err, chunk)

        metadata: dict[str, Any] = {}
        usage = chunk.get("usage")
        if usage is not None:
            mapped = self.map_usage(usage)
            if mapped is not None:
                metadata["usage"] = mapped
            if self.keeps_raw_usage:
                metadata["raw_usage"] = usage
        choices = chunk.get("choices")
        if not choices:
            return new_chunk(type="text", content="", serving_provider=sp, metadata=metadata)

        first = choices[0]
        delta = first["delta"]
        thoughts = self.map_reasoning(delta, chunk, metadata)
        finish = first["finish_reason"]
        content = delta.get("content")
        if finish:
            finish = self._refusal_finish(finish)
            self._record_finish(finish)
            metadata["finish_reason"] = finish
            if finish == "error" and self.ends_on_error_finish:
                return new_chunk(
                    type="error",
                    error=ProviderError(
                        type="api_error",
                        message="Stream terminated due to error",
                        retryable=False,
                        code="stream_error",
                    ),
                    thoughts=thoughts,
                    serving_provider=sp,
                    metadata=metadata,
                )
            step = self._tool_step(finish, delta, metadata)
            if step is not None:
                if content and finish != "tool_calls":
                    self._extra.extend(self._call_chunk(c) for c in step)
                    return new_chunk(
                        type="text",
                        content=content,
                        thoughts=thoughts,
                        serving_provider=sp,
                        metadata=metadata,
                    )
                if not step:
                    return new_chunk(
                        type="done", thoughts=thoughts, serving_provider=sp, metadata=metadata
                    )
                self._extra.extend(self._call_chunk(c) for c in step[1:])
                return new_chunk(
                    type="function_call",
                    function_call=step[0],
                    thoughts=thoughts,
                    serving_provider=sp,
                    metadata=metadata,
                )
            if finish == "stop":
                if content:
                    return new_chunk(
                        type="text",
                        content=content,
                        thoughts=thoughts,
                        serving_provider=sp,
                        metadata=metadata,
                    )
                return new_chunk(
                    type="done", thoughts=thoughts, serving_provider=sp, metadata=metadata
                )
            mapped_finish = self.map_finish(finish, content, thoughts, metadata)
            if mapped_finish is not None:
                return mapped_finish
        if delta.get("tool_calls"):
            self._accumulate_tools(delta)
            return new_piece_chunk("text", "", thoughts, sp, metadata)
        if delta.get("reasoning_details"):  # continuity data for the step's first call
            self.rd_acc.extend(delta["reasoning_details"])
        return new_piece_chunk("text", content or "", thoughts, sp, metadata)

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
        """Provider fields the step's first call carries: its reasoning_content (DeepSeek,
        ``preserve_reasoning_content``) and the step's ``reasoning_details`` (OpenRouter)."""
        fields: dict[str, Any] = {}
        reasoning = "".join(self.reasoning_acc)
        self.reasoning_acc = []
        if self.preserve_reasoning_content and reasoning:
            fields["reasoning_content"] = reasoning
        rd, self.rd_acc = self.rd_acc, []
        if rd:
            fields["reasoning_details"] = rd
        return fields

    def _accumulate_tools(self, delta: dict) -> None:
        acc = self.tool_acc
        for tc in delta.get("tool_calls") or ():
            if self._lean and acc.plain and tc.keys() <= _ARGUMENTS_ONLY:  # its own way
                index = tc.get("index")
                fn = tc.get("function")
                if type(index) is int and index >= 0 and type(fn) is dict and not fn.get("name"):
                    a = fn.get("arguments")
                    if type(a) is str:  # what the general way below does with such a delta
                        acc.add(index, arguments=a)
                        continue
            if not tc.keys() <= TOOL_CALL_KEYS:
                note_unknown_keys(self.facts, tc, TOOL_CALL_KEYS, "choices[].delta.tool_calls[]")
            index = tc.get("index")
            if type(index) is not int or index < 0:
                index = self._int(index, "choices[].delta.tool_calls[].index")
            # an empty id ("", DeepSeek v4 continuation deltas) is no id: it never
            # overwrites the call's real one
            fields = (
                {}
                if tc.keys() <= _ARGUMENTS_ONLY  # an argument delta: no id, type, signature
                else {
                    k: v
                    for k in ("id", "type", "thought_signature")
                    if isinstance(v := tc.get(k), str) and v
                }
            )
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
            wire = index
            index = acc.slot(wire)  # under all_tool_calls: where its current call moved
            call_id = fields.get("id")
            whole = None  # the delta's name is a piece of the call's name
            held = acc.release(index) if acc.pending else None
            if held is not None and not name and not fields and not (args and args.strip()):
                acc.hold(index, held)  # a delta with nothing in it tells nothing: still held
                held = None
            elif held is not None and not self._judge_held_header(index, tc, name, args):
                held = None  # the header only repeated the name
                if self.config.merge_resent_tool_headers and args and acc.repeats_call(index, args):
                    args = None  # and the arguments that follow it are the call's again
            if held is not None:
                # the header held back began another call of the same tool: a new object
                # follows it
                if self.config.all_tool_calls:
                    index = acc.move(wire)
                    name = held
                else:
                    self.facts["merged_tool_calls"] = self.facts.get("merged_tool_calls", 0) + 1
                    acc.restart(index, held)
            elif name and (
                acc.starts_new_call(index, call_id)
                if call_id is not None and acc.has_id(index)
                else acc.starts_idless_call(index, name, args, call_id)
            ):
                # a new call (another id, or, where the call there has no id, another name or
                # object after complete arguments) where a call already is: calls sent with no index, or all at
                # index 0 (Gemini's, Mistral's, Ollama's and vLLM's OpenAI-compatible
                # endpoints). The reference glues them into one call.
                if self.config.all_tool_calls:
                    index = acc.move(wire)
                else:
                    self.facts["merged_tool_calls"] = self.facts.get("merged_tool_calls", 0) + 1
                    acc.restart(index, name)  # the next delta is judged against this call
                    whole = name
            elif name and acc.resends_header(index, call_id, name):
                # the whole name sent again (with the same id, or none): the reference
                # appends it a second time
                whole = name
                if call_id is None and not args and acc.complete(index):
                    # after complete arguments: another call of the same tool, or the name
                    # repeated? The next delta tells (_judge_held_header)
                    acc.hold(index, name)
                else:
                    self._count_resent_header()
                if self.config.merge_resent_tool_headers:
                    name = None
                    if args and acc.repeats_call(index, args) and acc.complete(index):
                        args = None  # the whole call sent again: read once
            acc.add(index, name=name, arguments=args, fields=fields, whole=whole)
        if delta.get("reasoning_details"):  # continuity data for the step's first call
            self.rd_acc.extend(delta["reasoning_details"])

    def _judge_held_header(self, index: int, tc: dict, name: str | None, args: str | None) -> bool:
        """A header (the same name, no id) came after complete arguments and was held: did
        it begin another call of the same tool? It did when this delta, with no name or id
        of its own, opens a new object that is not the call's arguments sent again.
        Otherwise it only repeated the name, counted in ``facts["resent_tool_headers"]``."""
        if (
            not name
            and not tc.get("id")
            and args
            and args.lstrip()[:1] == "{"
            and not self.tool_acc.repeats_call(index, args)
        ):
            return True
        self._count_resent_header()
        return False

    def _count_resent_header(self) -> None:
        if not self.config.merge_resent_tool_headers:
            self.facts["resent_tool_headers"] = self.facts.get("resent_tool_headers", 0) + 1

    def _settle_held_headers(self) -> None:
        """Headers still held when the calls are built only repeated the name."""
        for _ in range(len(self.tool_acc.pending)):
            self._count_resent_header()
        self.tool_acc.pending.clear()

    def _build_calls(self, *, truncated: bool = False) -> tuple[list[FunctionCall], list[dict]]:
        """The step's calls: the one at index 0 (reference), or every one in index order
        (``config.all_tool_calls``); the others are returned as ``ignored`` and named in
        ``facts["dropped_tool_calls"]``. **truncated**: the stream was cut before the
        call's finish chunk, so each call is marked ``arguments_truncated``."""
        self._settle_held_headers()
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
            so_far = acc.get("arguments_so_far")
            if so_far is not None and not parsed.parsed:  # an error, or a repair of glued text
                # probed without the repair's notes: only a last piece that parses as it is
                last = parse_tool_arguments(so_far, tool_name=acc["name"], notes=[])
                if last.error is None and not last.truncated:  # the arguments sent so far
                    if self.config.read_cumulative_tool_arguments:
                        parsed = last
                    else:
                        provider_fields["arguments_resent"] = True
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
        self._settle_held_headers()
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

    # -- end of stream: the base class's skeleton, this family's hooks --------------------

    def release_held(self, out: list[ProcessedChunk], *, error_path: bool) -> None:
        """Spill flush, then (natural end) think flush + speaker tail, or (error path)
        speaker tail + think flush, each through :meth:`release`; then what
        :meth:`post_flush` holds."""
        g = self._ran(self.spill, self.spill.flush())
        self.release(g.content, g.reasoning, out)
        self._release_markup(out)
        if error_path:
            self._release_speaker(out)
            self._release_think(out)
        else:
            self._release_think(out)
            self._release_speaker(out)
        out.extend(self.post_flush())

    def _release_think(self, out: list[ProcessedChunk]) -> None:
        if self.think is not None:
            g = self._ran(self.think, self.think.flush())
            self.release(g.content, g.reasoning, out)

    def _release_speaker(self, out: list[ProcessedChunk]) -> None:
        if self.speaker is not None:
            tail = self.speaker.flush()
            if tail:
                self.release(tail, "", out)

    def close_open_calls(self, out: list[ProcessedChunk], metadata: dict | None) -> None:
        """Calls streamed with no finish chunk to build them (:meth:`_cut_tool_calls`)."""
        self._cut_tool_calls(out)

    def settle(self, out: list[ProcessedChunk], metadata: dict | None) -> None:
        """Natural end: think thoughts still pending get a chunk of their own (on the error
        path the error chunk carries them)."""
        if metadata is None and self.pending_think:
            out.append(
                ProcessedChunk(type="text", content="", thoughts=self._take_pending_thoughts())
            )

    def error_chunk(self, error: ProviderError, metadata: dict[str, Any]) -> ProcessedChunk:
        """The error chunk carries the pending think thoughts."""
        return ProcessedChunk(
            type="error", error=error, thoughts=self._take_pending_thoughts(), metadata=metadata
        )
