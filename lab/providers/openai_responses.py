"""OpenAI Responses API streams (``POST {base}/responses``) for OpenAI, OpenRouter, DeepSeek.

The Responses API streams typed events, not chat-completion chunks. The adapter is chosen from
the request path (:func:`lab.providers.adapter_for`): a request to ``.../responses`` of
``openai``, ``openrouter`` or ``deepseek`` gets the subclass of :class:`ResponsesAdapter` for
that provider, whose request-side defaults (base URL, key variable, headers, HTTP and
connection error mapping, degradation flags) come from the provider's chat adapter class, so
the three differ only by data. Per SSE event (``event:`` line optional; the JSON ``type``
decides)::

    data -> json (invalid: skipped and counted, as OpenRouter's chat adapter does)
      response.output_text.delta            -> think strip -> spill -> dedup -> speaker -> text
      response.reasoning_summary_text.delta -> ThoughtLogEntry(kind="summary")
      response.reasoning_text.delta         -> ThoughtLogEntry(kind="raw")
      response.output_item.added/done       -> a function_call item opens / closes: at its
        (function_call)                        done a ``function_call`` chunk, every call kept
      response.function_call_arguments.delta/.done -> that call's arguments (by output_index)
      response.completed                    -> done, finish ``tool_calls`` if a call was made
                                               else ``stop``, usage
      response.incomplete                   -> done, finish from ``incomplete_details.reason``
                                               (``max_output_tokens`` -> ``length``,
                                               ``content_filter``), usage
      response.failed / error               -> error chunk (the provider's stream-error
                                               normalizer), finish ``error``, usage kept

Nothing is dropped silently: an event type, item type, part type or event field (with a
value) the adapter does not read is counted in ``facts["unhandled_shapes"]`` (path -> count);
a usage number or an index that is not a count is named in ``facts["hostile_values"]``; a
``.done`` event whose text differs from its deltas is counted in
``facts["done_text_mismatch"]``. A stream cut before its terminal event claims no finish
reason, and a function call still streaming is kept with ``arguments_truncated=True``.

Lab choices (there is no reference adapter for this API): every parallel call is kept (no
``complete()`` switch needed); summary parts after the first start with
:data:`SUMMARY_PART_SEPARATOR` so two summaries do not glue (``**A**...**B**``); the text of a
``.done`` event is used only when no delta of that part arrived.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Literal

from lab import _json
from lab.degrade import ExtraClassifier
from lab.errors import parse_status_code
from lab.guards import RecentTextDedup, SpeakerBoundaryGuard, SpillGuard, ThinkBlockStripper
from lab.http.sse import SSEEvent
from lab.model import (
    FunctionCall,
    ProcessedChunk,
    ProviderError,
    Usage,
    new_chunk,
    new_raw_thought,
    new_text_chunk,
    new_thought,
)
from lab.providers.base import (
    RetryAttempt,
    StreamAdapter,
    join_url,
    note_shape,
    note_unknown_keys,
    wire_float,
    wire_int,
)
from lab.providers.openai_compat import (
    DeepSeekAdapter,
    OpenAIAdapter,
    openai_compatible_stream_error,
)
from lab.providers.openrouter import OpenRouterAdapter, openrouter_stream_error
from lab.providers.wire import MAX_WIRE_INT

__all__ = [
    "RESPONSES_ADAPTERS",
    "RESPONSES_PATH",
    "SUMMARY_PART_SEPARATOR",
    "DeepSeekResponsesAdapter",
    "OpenAIResponsesAdapter",
    "OpenRouterResponsesAdapter",
    "ResponsesAdapter",
    "responses_body",
    "responses_usage",
]

RESPONSES_PATH = "/responses"
"""The endpoint path of the Responses API, appended to the provider's base URL."""

SUMMARY_PART_SEPARATOR = "\n\n"
"""Put before the first delta of a reasoning summary part that follows another one."""

INCOMPLETE_FINISH: dict[str, str] = {
    "max_output_tokens": "length",
    "max_tokens": "length",
    "content_filter": "content_filter",
}
"""``response.incomplete`` ``incomplete_details.reason`` -> the lab's finish reason. Another
reason is kept as it came and counted in ``facts["unhandled_shapes"]``."""

# Event fields each event type carries besides the ones the adapter reads; they are known and
# deliberately not read (ids, ordering, padding, echoes). Any other field is counted.
_COMMON = frozenset({"type", "sequence_number", "item_id", "output_index", "content_index"})
_KNOWN_FIELDS: dict[str, frozenset[str]] = {
    "response.created": _COMMON | {"response"},
    "response.in_progress": _COMMON | {"response"},
    "response.queued": _COMMON | {"response"},
    "response.completed": _COMMON | {"response"},
    "response.incomplete": _COMMON | {"response"},
    "response.failed": _COMMON | {"response"},
    "response.output_item.added": _COMMON | {"item"},
    "response.output_item.done": _COMMON | {"item"},
    "response.content_part.added": _COMMON | {"part"},
    "response.content_part.done": _COMMON | {"part"},
    "response.output_text.delta": _COMMON | {"delta", "logprobs", "obfuscation"},
    "response.output_text.done": _COMMON | {"text", "logprobs"},
    "response.reasoning_summary_part.added": _COMMON | {"summary_index", "part"},
    "response.reasoning_summary_part.done": _COMMON | {"summary_index", "part"},
    "response.reasoning_summary_text.delta": _COMMON | {"summary_index", "delta", "obfuscation"},
    "response.reasoning_summary_text.done": _COMMON | {"summary_index", "text"},
    "response.reasoning_text.delta": _COMMON | {"delta", "obfuscation"},
    "response.reasoning_text.done": _COMMON | {"text"},
    "response.function_call_arguments.delta": _COMMON | {"delta", "obfuscation"},
    "response.function_call_arguments.done": _COMMON | {"arguments", "name"},
    "response.refusal.delta": _COMMON | {"delta", "obfuscation"},
    "response.refusal.done": _COMMON | {"refusal"},
    "error": _COMMON | {"error", "code", "message", "param"},
}
_ITEM_TYPES = frozenset({"message", "reasoning", "function_call"})
_PART_TYPES = frozenset({"output_text", "reasoning_text", "summary_text", "refusal"})


def _label(value: Any) -> str:
    """A wire ``type`` / ``reason`` as it appears in an ``unhandled_shapes`` path: a string
    as it came, None as ``None``, any other value by its JSON kind (``<list>``, ``<float>``),
    never its contents (a hostile value can be a list that cannot be a set member, or huge)."""
    if isinstance(value, str) or value is None:
        return str(value)
    return f"<{type(value).__name__}>"


def responses_usage(u: Any, bad: list[str] | None = None) -> Usage | None:
    """A Responses ``response.usage`` object -> :class:`Usage`; None when it holds no count.

    ``input_tokens`` includes ``input_tokens_details.cached_tokens`` and ``output_tokens``
    includes ``output_tokens_details.reasoning_tokens`` (as the provider reports them, the
    shape :class:`Usage` keeps); ``cost`` is OpenRouter's. Every value goes through
    :func:`~lab.providers.base.wire_int` / ``wire_float``: a hostile one is left out and its
    path appended to **bad**.
    """
    if not isinstance(u, dict):
        return None
    where = "response.usage."

    def count(d: Any, path: str, name: str) -> int | None:
        if not isinstance(d, dict):
            return None
        return wire_int(d.get(name), where + path + name, bad)

    idet = u.get("input_tokens_details")
    odet = u.get("output_tokens_details")
    counts = {
        "input_tokens": count(u, "", "input_tokens"),
        "output_tokens": count(u, "", "output_tokens"),
        "total_tokens": count(u, "", "total_tokens"),
        "reasoning_tokens": count(odet, "output_tokens_details.", "reasoning_tokens"),
        "cache_read_tokens": count(idet, "input_tokens_details.", "cached_tokens"),
        "cache_write_tokens": count(idet, "input_tokens_details.", "cache_write_tokens"),
    }
    cost = wire_float(u.get("cost"), where + "cost", bad)
    if cost is None and all(v is None for v in counts.values()):
        return None
    total = counts.pop("total_tokens")
    return Usage(**{k: v or 0 for k, v in counts.items()}, total_tokens=total, cost=cost)


# --------------------------------------------------------------------------- request body

_DROP_FOR_RESPONSES = ("messages", "stream_options", "max_tokens", "max_completion_tokens")


def responses_body(chat_body: dict) -> dict:
    """A chat-completions request body (:func:`lab.request.build_body`) as a Responses body.

    ``messages`` become ``input`` items (a system turn becomes ``instructions``; assistant
    tool calls become ``function_call`` items and tool results ``function_call_output``
    items), ``max_tokens`` / ``max_completion_tokens`` become ``max_output_tokens``, function
    tools are flattened (``{"type": "function", "name", "parameters", ...}``), and
    ``reasoning_effort`` becomes ``reasoning.effort``; ``stream_options`` (a chat option the
    Responses API rejects) is dropped; every other key passes through.

    >>> responses_body({"model": "m", "messages": [{"role": "user", "content": "hi"}],
    ...                 "stream": True, "max_tokens": 5})
    {'model': 'm', 'input': [{'role': 'user', 'content': 'hi'}], 'stream': True, 'max_output_tokens': 5}
    """
    body: dict[str, Any] = {"model": chat_body.get("model")}
    instructions: list[str] = []
    items: list[dict] = []
    for m in chat_body.get("messages") or ():
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "system" and isinstance(m.get("content"), str):
            instructions.append(m["content"])
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": m.get("tool_call_id"),
                    "output": m.get("content") if isinstance(m.get("content"), str) else "",
                }
            )
        else:
            content = _input_content(m.get("content"), role)
            if content not in (None, "", []):
                items.append({"role": role, "content": content})
            for tc in m.get("tool_calls") or ():
                fn = tc.get("function") if isinstance(tc, dict) else None
                if isinstance(fn, dict):
                    items.append(
                        {
                            "type": "function_call",
                            "call_id": tc.get("id"),
                            "name": fn.get("name"),
                            "arguments": fn.get("arguments") or "{}",
                        }
                    )
    if instructions:
        body["instructions"] = "\n\n".join(instructions)
    body["input"] = items
    body["stream"] = chat_body.get("stream", True)
    limit = chat_body.get("max_completion_tokens", chat_body.get("max_tokens"))
    if limit is not None:
        body["max_output_tokens"] = limit
    for key, value in chat_body.items():
        if key in body or key in _DROP_FOR_RESPONSES or key == "model":
            continue
        if key == "tools" and isinstance(value, list):
            body["tools"] = [_flat_tool(t) for t in value if isinstance(t, dict)]
        elif key == "reasoning_effort":
            body.setdefault("reasoning", {})["effort"] = value
        else:
            body[key] = value
    return body


def _input_content(content: Any, role: Any) -> Any:
    if not isinstance(content, list):
        return content
    text_type = "output_text" if role == "assistant" else "input_text"
    out = []
    for p in content:
        if not isinstance(p, dict):
            continue
        if p.get("type") == "text":
            out.append({"type": text_type, "text": p.get("text", "")})
        elif p.get("type") == "image_url":
            url = (
                p.get("image_url", {}).get("url") if isinstance(p.get("image_url"), dict) else None
            )
            out.append({"type": "input_image", "image_url": url})
        else:
            out.append(p)
    return out


def _flat_tool(tool: dict) -> dict:
    fn = tool.get("function")
    if tool.get("type") == "function" and isinstance(fn, dict):
        return {"type": "function", **fn}
    return tool


# --------------------------------------------------------------------------- the adapter


# -- the lean path: output_text deltas straight to the guards --------------------------
#
# Nearly every event of a text stream is a ``response.output_text.delta``. With msgspec such
# a line is decoded straight into the typed struct below, whose fields are exactly the keys
# the general way knows for that event (``forbid_unknown_fields``: a line with another key
# is declined, and the general way counts the key), with the output and content indexes as
# plain counts and the delta a string. Without msgspec, ``_lean_text_fields`` checks the
# parsed dict against the same rules. Any other line, or one that breaks a rule, goes the
# general way, which decides as before. tests/test_responses_lean.py checks the two against
# each other on generated streams.

TEXT_DELTA = "response.output_text.delta"

decode_text_delta: Callable[[str | bytes], Any] | None = None
"""``decode_text_delta(line)``: the typed output_text delta of a data line of the lean
shape; raises ``ValueError`` (msgspec's ``DecodeError`` or ``ValidationError``) or
``RecursionError`` for any other line. None itself when msgspec is not the lab's parser. A
line longer than :data:`lab._json.FAST_MAX_CHARS` is not given to it (the caller's test,
inline). An adapter takes it when an attempt starts (``reset``)."""

if _json.PARSER == "msgspec":
    import msgspec
    from msgspec import Meta, Struct

    _Count = Annotated[int, Meta(ge=0, le=MAX_WIRE_INT)]

    class _TypedTextDelta(Struct, gc=False, forbid_unknown_fields=True):
        # the type is checked by msgspec, in C: no Python call per event for it
        type: Literal["response.output_text.delta"]  # TEXT_DELTA
        delta: str
        output_index: _Count
        content_index: _Count | None = None
        item_id: Any = None
        sequence_number: Any = None
        logprobs: Any = None
        obfuscation: Any = None

    decode_text_delta = msgspec.json.Decoder(_TypedTextDelta).decode


class _LeanTextDelta:
    """The fields of an output_text delta of the lean shape that the dict check found (no
    msgspec, or a line the typed decoder declined: past :data:`lab._json.FAST_MAX_CHARS`,
    bytes msgspec refuses): what the typed struct gives, by the same names."""

    __slots__ = ("content_index", "delta", "output_index")

    def __init__(self, delta: str, output_index: int, content_index: int | None) -> None:
        self.delta = delta
        self.output_index = output_index
        self.content_index = content_index


def _plain_count(v: Any) -> bool:
    """An index the general way takes as it is, with nothing to note (``wire_int``'s
    rule, for a plain ``int``)."""
    return type(v) is int and 0 <= v <= MAX_WIRE_INT


class ResponsesAdapter(StreamAdapter):
    """The Responses API stream adapter; a subclass names its provider's ``chat_adapter``."""

    chat_adapter: ClassVar[type[StreamAdapter]] = OpenAIAdapter
    """The provider's chat-completions adapter: request-side defaults and error mapping."""
    mandatory_keys = ("model", "input", "stream")
    stream_error_of: ClassVar[Callable[[str, dict], ProviderError]] = staticmethod(
        openai_compatible_stream_error
    )
    """The family's stream-error normalizer for an ``error`` event / ``response.error``."""

    sends_done_sentinel = False
    """OpenAI and DeepSeek end a Responses stream with its terminal event, no ``[DONE]``."""
    names_backend = False
    """No serving-backend field in Responses events (OpenRouter's included)."""

    _FROM_CHAT: ClassVar[tuple[str, ...]] = (
        "provider",
        "family",
        "default_base_url",
        "api_key_env",
        "api_key_envs",
        "degrades",
        "degrade_on_502",
        "degrade_on_opaque_5xx",
        "priority_keys",
    )

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        chat = cls.__dict__.get("chat_adapter")
        if chat is not None:
            for name in cls._FROM_CHAT:
                if name not in cls.__dict__:
                    setattr(cls, name, getattr(chat, name))

    # -- request side: the chat adapter's, at /responses ---------------------------------

    def _chat(self) -> StreamAdapter:
        chat = self.__dict__.get("_chat_instance")
        if chat is None:
            chat = self.chat_adapter(config=self.config, stream_id=self.stream_id, model=self.model)
            self._chat_instance = chat
        return chat

    def endpoint(self, base_url: str | None, model: str | None) -> str:
        base = base_url or self.default_base_url
        if not base:
            raise ValueError(f"provider {self.provider!r} needs a base URL")
        return join_url(base, RESPONSES_PATH)

    def request_headers(self, api_key: str | None) -> dict[str, str]:
        return self._chat().request_headers(api_key)

    def mandatory_keys_for(self, body: dict) -> tuple[str, ...]:
        keys = [k for k in self._chat().mandatory_keys_for(body) if k != "messages"]
        keys.extend(k for k in self.mandatory_keys if k not in keys)
        return tuple(keys)

    def extra_classifiers(self, body: dict) -> tuple[ExtraClassifier, ...]:
        return self._chat().extra_classifiers(body)

    def failure_message(self, status: int, body_text: str) -> str:
        return self._chat().failure_message(status, body_text)

    def http_error(self, status: int, body_text: str, *, body: dict, label: str) -> ProviderError:
        return self._chat().http_error(status, body_text, body=body, label=label)

    def transport_error(self, exc: BaseException) -> ProviderError:
        return self._chat().transport_error(exc)

    # -- per-attempt state --------------------------------------------------------------

    def reset(self) -> None:
        cfg = self.config
        self.think = (
            ThinkBlockStripper(
                persona_name=cfg.persona_name, capture_thoughts=cfg.capture_think_blocks_as_thoughts
            )
            if cfg.strip_think_blocks
            else None
        )
        self.spill = SpillGuard(cfg.spill)
        self.dedup = RecentTextDedup(tail_chars=cfg.dedup_tail_chars, min_chars=cfg.dedup_min_chars)
        self.speaker = (
            SpeakerBoundaryGuard(
                holdback_chars=cfg.speaker_holdback_chars, persona_name=cfg.persona_name
            )
            if cfg.speaker_guard
            else None
        )
        self.calls: dict[Any, dict[str, Any]] = {}
        """Open function-call items by output_index (else item id): name, id, pieces."""
        self.item_keys: dict[str, Any] = {}
        self.part_chars: dict[tuple, int] = {}
        """Characters of deltas received per (kind, item, part index): a ``.done`` text is
        used only for a part that streamed none. The lean path's run of deltas into one
        text part is counted in :attr:`_run_chars` and added here when another part starts
        or a ``.done`` text is compared (:meth:`_end_run`)."""
        self._decode = decode_text_delta if self._lean else None
        """:data:`decode_text_delta` when the lean path is on, else None (read once an
        attempt, not per event)."""
        self._run_index: int | None = None
        """The output_index of the text part the lean path counts in :attr:`_run_chars`
        (None: no run)."""
        self._run_part = 0
        """That part's content_index (0 for a missing or null one, as :meth:`_part` keys it)."""
        self._run_chars = 0
        """Characters of the run's deltas not yet added to :attr:`part_chars`."""
        self.summary_parts_streamed = 0
        self.n_calls = 0
        self.streamed = False
        """Did any text, reasoning or call of this attempt arrive before the terminal event?"""
        self.ended = False
        self.errored = False

    # -- stage 02 -----------------------------------------------------------------------

    def feed_data(self, data: str, event: SSEEvent, out: list[ProcessedChunk]) -> None:
        """One typed event to its handler (``_HANDLERS``); a line that is not an event is
        named as an unhandled shape, invalid JSON counted and skipped. An output_text delta
        of the lean shape (typed with msgspec, else :meth:`_lean_text_fields` on the dict)
        is :meth:`_on_text_delta` without the dict: its characters counted in the run of its
        part (:meth:`_start_run` when another part starts), the text through :meth:`_text`."""
        lean = (
            self._lean and not self.stopped and (event.event is None or event.event == TEXT_DELTA)
        )
        decode = self._decode
        ev: Any = None
        if lean and decode is not None and len(data) <= _json.FAST_MAX_CHARS:
            raw = event.raw  # the line's bytes: msgspec would encode data again
            try:
                ev = decode(data if raw is None else raw)
            except (ValueError, RecursionError):  # another shape or type: the general way
                pass
        if ev is None:
            ev = self._feed_parsed(data, event, out, lean)
            if ev is None:  # handled (or skipped) the general way
                return
        delta = ev.delta
        index = ev.output_index
        part_index = ev.content_index or 0
        if index == self._run_index and part_index == self._run_part:
            self._run_chars += len(delta)
        else:
            self._start_run(index, part_index, len(delta))
        self.streamed = True
        self._text(delta, out)

    def _feed_parsed(
        self, data: str, event: SSEEvent, out: list[ProcessedChunk], lean: bool
    ) -> _LeanTextDelta | None:
        """:meth:`feed_data`'s general way: the line parsed, then an output_text delta of
        the lean shape returned as its fields (when **lean**), any other event to its
        handler (None returned)."""
        data = data.strip()
        if data == "[DONE]":  # OpenRouter's, after the terminal event
            self.facts["done_line"] = True
            return None
        if self.stopped:
            return None
        try:
            raw = _json.loads(data)
        except (ValueError, RecursionError):
            self.facts["invalid_json"] += 1
            return None
        if lean and type(raw) is dict and raw.get("type") == TEXT_DELTA:
            got = self._lean_text_fields(raw)
            if got is not None:
                return got
        if not isinstance(raw, dict):
            self._unhandled("<event that is not an object>")
            return None
        if not isinstance(raw.get("type"), str):
            if isinstance(raw.get("error"), dict):  # a chat-style {"error": {...}} line
                self._unhandled("<error without a type>")
                if not self.errored:
                    self._error(raw["error"], out)
            else:
                self._unhandled("<event without a type>")
            return None
        kind = raw["type"]
        if event.event is not None and event.event != kind:
            self._unhandled(f"event:{event.event}!={kind}")
        handler = _HANDLERS.get(kind)
        if handler is None:
            self._unhandled(kind)
            return None
        note_unknown_keys(self.facts, raw, _KNOWN_FIELDS[kind], kind)
        handler(self, raw, out)
        return None

    lean: ClassVar[bool] = True
    """Do output_text deltas take the lean path (typed with msgspec, a dict check
    otherwise)? Off, every event goes the general way (the tests compare the two). Read as
    :attr:`StreamAdapter.lean` says."""

    _TEXT_DELTA_KEYS: ClassVar[frozenset[str]] = frozenset()  # set below, from _KNOWN_FIELDS

    def _lean_text_fields(self, raw: dict) -> _LeanTextDelta | None:
        """A parsed output_text delta's fields when it has the lean shape (the typed
        struct's rules, checked on the dict), else None."""
        delta = raw.get("delta")
        index: Any = raw.get("output_index")
        part_index = raw.get("content_index")
        if (
            type(delta) is str
            and _plain_count(index)
            and (part_index is None or _plain_count(part_index))
            and raw.keys() <= self._TEXT_DELTA_KEYS
        ):
            return _LeanTextDelta(delta, index, part_index)
        return None

    def _start_run(self, index: int, part_index: int, chars: int) -> None:
        """The lean path's deltas go to another text part: the run so far added to
        :attr:`part_chars` (:meth:`_end_run`), a run of this part begun with **chars**."""
        self._end_run()
        self._run_index = index
        self._run_part = part_index
        self._run_chars = chars

    def _end_run(self) -> None:
        """The lean path's uncounted characters added to :attr:`part_chars` (a dict update
        per part, not per delta), before the counts are read."""
        if self._run_index is not None:
            part = ("text", self._run_index, self._run_part)
            self.part_chars[part] = self.part_chars.get(part, 0) + self._run_chars
            self._run_index = None
            self._run_chars = 0

    def after_end(self, data: str) -> None:
        """OpenRouter's ``[DONE]`` comes after the terminal event: noted."""
        if data.strip() == "[DONE]":
            self.facts["done_line"] = True

    def _unhandled(self, path: str) -> None:
        note_shape(self.facts, path)

    def _key(self, raw: dict) -> Any:
        """The output item an event belongs to: its output_index, else its item id (a
        hostile output_index is named in ``facts["hostile_values"]``)."""
        index = self._int(raw.get("output_index"), "output_index")
        if index is not None:
            return index
        item_id = raw.get("item_id")
        return self.item_keys.get(item_id, item_id) if isinstance(item_id, str) else None

    def _part(self, kind: str, raw: dict, index_field: str = "content_index") -> tuple:
        return (kind, self._key(raw), self._int(raw.get(index_field), index_field) or 0)

    # text ------------------------------------------------------------------------------

    def _on_text_delta(self, raw: dict, out: list[ProcessedChunk]) -> None:
        delta = raw.get("delta")
        if not isinstance(delta, str):
            self._unhandled("response.output_text.delta.delta:not-a-string")
            return
        part = self._part("text", raw)
        self.part_chars[part] = self.part_chars.get(part, 0) + len(delta)
        self.streamed = True
        self._text(delta, out)

    def _on_refusal_delta(self, raw: dict, out: list[ProcessedChunk]) -> None:
        delta = raw.get("delta")
        if not isinstance(delta, str):
            self._unhandled("response.refusal.delta.delta:not-a-string")
            return
        part = self._part("refusal", raw)
        self.part_chars[part] = self.part_chars.get(part, 0) + len(delta)
        self.committed = self.streamed = True
        self._note_refusal(delta)

    def _on_refusal_done(self, raw: dict, out: list[ProcessedChunk]) -> None:
        """The whole refusal: kept when no delta of this part came before it."""
        text = raw.get("refusal")
        if isinstance(text, str) and not self.part_chars.get(self._part("refusal", raw)):
            self._note_refusal(text)

    def _on_text_done(self, raw: dict, out: list[ProcessedChunk]) -> None:
        self._done_text("text", raw, raw.get("text"), out)

    def _text(self, text: str, out: list[ProcessedChunk], released: list | None = None) -> None:
        """Visible text through the chat adapters' guard chain: think strip, spill guard
        (the reasoning seen so far observed), then the per-piece guards
        (:meth:`_text_guards`: dedup, the speaker guard), as a text chunk with its
        thoughts; a speaker line stops the stream. Text a guard held and released at the
        end (:meth:`_release_guards`) comes with its thoughts as **released** and takes the
        per-piece guards only."""
        if released is None:
            thoughts = []
            think = self.think
            if think is not None and text:
                if think.idle and "<" not in text:  # passed as it is: only counted (per delta)
                    think.fed += len(text)
                else:
                    g = self._ran(think, think.feed(text))
                    text = g.content
                    if g.reasoning:  # empty when capture_think_blocks_as_thoughts is off
                        thoughts.append(new_raw_thought(g.reasoning))
            if text and self.spill.inspecting:  # it passes every delta once the answer started
                g = self.spill.filter(text)
                text = g.content
                if g.reasoning:
                    thoughts.append(new_raw_thought(g.reasoning))
                if self.spill.notes:
                    self._drain(self.spill)
        else:
            thoughts = released
        fired = False
        if text:
            text = self._text_guards(text)
            fired = self.speaker is not None and self.speaker.fired
        if text or thoughts:
            self.committed = True
            out.append(new_text_chunk(text, thoughts, {}))
        if fired:
            self.stopped = True
            self.end_reason = "stopped_by_guard"

    def _release_guards(self, out: list[ProcessedChunk]) -> None:
        """Spill flush, think flush, speaker tail (the natural end's order)."""
        g = self.spill.flush()
        if self.spill.notes:
            self._drain(self.spill)
        if g.content:
            self._text(g.content, out, [])
        if self.think is not None:
            g = self.think.flush()
            if self.think.notes:
                self._drain(self.think)
            thoughts = []
            if g.reasoning and self.config.capture_think_blocks_as_thoughts:
                thoughts.append(new_thought(kind="raw", content=g.reasoning))
            if g.content or thoughts:
                self._text(g.content, out, thoughts)
        if self.speaker is not None:
            tail = self.speaker.flush()
            if tail:
                self.committed = True
                out.append(new_chunk(type="text", content=tail, thoughts=[], metadata={}))

    # reasoning -------------------------------------------------------------------------

    def _reasoning(self, kind: str, text: str, out: list[ProcessedChunk]) -> None:
        if not text:
            return
        self.spill.observe_reasoning(text)
        self.committed = True
        thought = new_thought(kind=kind, content=text)
        out.append(new_chunk(type="text", content="", thoughts=[thought], metadata={}))

    def _on_summary_part_added(self, raw: dict, out: list[ProcessedChunk]) -> None:
        self._check_part(raw, "response.reasoning_summary_part.added")

    def _on_summary_delta(self, raw: dict, out: list[ProcessedChunk]) -> None:
        delta = raw.get("delta")
        if not isinstance(delta, str):
            self._unhandled("response.reasoning_summary_text.delta.delta:not-a-string")
            return
        part = self._part("summary", raw, "summary_index")
        self.streamed = True
        if delta and self.part_chars.get(part, 0) == 0:
            delta = self._summary_prefix(part) + delta
        self.part_chars[part] = self.part_chars.get(part, 0) + len(delta)
        self._reasoning("summary", delta, out)

    def _summary_prefix(self, part: tuple) -> str:
        started = self.summary_parts_streamed
        self.summary_parts_streamed += 1
        return SUMMARY_PART_SEPARATOR if started else ""

    def _on_summary_done(self, raw: dict, out: list[ProcessedChunk]) -> None:
        self._done_text("summary", raw, raw.get("text"), out, "summary_index")

    def _on_reasoning_delta(self, raw: dict, out: list[ProcessedChunk]) -> None:
        delta = raw.get("delta")
        if not isinstance(delta, str):
            self._unhandled("response.reasoning_text.delta.delta:not-a-string")
            return
        part = self._part("raw", raw)
        self.part_chars[part] = self.part_chars.get(part, 0) + len(delta)
        self.streamed = True
        self._reasoning("raw", delta, out)

    def _on_reasoning_done(self, raw: dict, out: list[ProcessedChunk]) -> None:
        self._done_text("raw", raw, raw.get("text"), out)

    def _done_text(
        self,
        kind: str,
        raw: dict,
        text: Any,
        out: list[ProcessedChunk],
        index_field: str = "content_index",
    ) -> None:
        """A part's ``.done`` text: emitted when none of its deltas arrived, otherwise only
        compared by length (a mismatch is counted, the streamed text stays)."""
        if not isinstance(text, str):
            return
        self._end_run()
        part = self._part(kind, raw, index_field)
        streamed = self.part_chars.get(part, 0)
        if streamed == 0 and text:
            self.streamed = True
            if kind == "summary":
                text = self._summary_prefix(part) + text
            self.part_chars[part] = len(text)
            if kind == "text":
                self._text(text, out)
            else:
                self._reasoning(kind, text, out)
        elif kind != "summary" and streamed != len(text):
            mism = self.facts.setdefault("done_text_mismatch", {})
            mism[kind] = mism.get(kind, 0) + 1

    # items and parts -------------------------------------------------------------------

    def _check_part(self, raw: dict, where: str) -> None:
        part = raw.get("part")
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str) or kind not in _PART_TYPES:
            self._unhandled(f"{where}.part.type:{_label(kind)}")

    def _on_part(self, raw: dict, out: list[ProcessedChunk]) -> None:
        self._check_part(raw, raw["type"])

    def _on_item_added(self, raw: dict, out: list[ProcessedChunk]) -> None:
        got = raw.get("item")
        item: dict = got if isinstance(got, dict) else {}
        kind = item.get("type")
        if not isinstance(kind, str) or kind not in _ITEM_TYPES:
            self._unhandled(f"response.output_item.added.item.type:{_label(kind)}")
            return
        if kind != "function_call":
            return
        key = self._key(raw)
        if key is None:
            key = ("call", len(self.calls))
        if isinstance(item.get("id"), str):
            self.item_keys[item["id"]] = key
        self.committed = self.streamed = True
        acc = self.calls.setdefault(key, {"name": "", "pieces": [], "id": None})
        self._item_fields(acc, item)

    @staticmethod
    def _item_fields(acc: dict, item: dict) -> None:
        if isinstance(item.get("name"), str) and item["name"]:
            acc["name"] = item["name"]
        call_id = item.get("call_id") if isinstance(item.get("call_id"), str) else item.get("id")
        if isinstance(call_id, str):
            acc["id"] = call_id
        if isinstance(item.get("id"), str):
            acc["item_id"] = item["id"]

    def _on_args_delta(self, raw: dict, out: list[ProcessedChunk]) -> None:
        delta = raw.get("delta")
        if not isinstance(delta, str):
            self._unhandled("response.function_call_arguments.delta.delta:not-a-string")
            return
        key = self._key(raw)
        acc = self.calls.get(key)
        if acc is None:  # arguments for a call whose item never opened
            self._unhandled("response.function_call_arguments.delta:no-open-call")
            acc = self.calls.setdefault(key, {"name": "", "pieces": [], "id": None})
        acc["pieces"].append(delta)
        self.committed = self.streamed = True

    def _on_args_done(self, raw: dict, out: list[ProcessedChunk]) -> None:
        acc = self.calls.get(self._key(raw))
        if acc is None:
            self._unhandled("response.function_call_arguments.done:no-open-call")
            return
        args = raw.get("arguments")
        if isinstance(raw.get("name"), str) and raw["name"] and not acc["name"]:
            acc["name"] = raw["name"]
        if isinstance(args, str):
            self._final_arguments(acc, args)

    def _final_arguments(self, acc: dict, args: str) -> None:
        """The whole arguments a ``.done`` (or ``output_item.done``) states: they replace
        the streamed pieces when those differ (counted)."""
        streamed = "".join(acc["pieces"])
        if streamed != args:
            if streamed:
                mism = self.facts.setdefault("done_text_mismatch", {})
                mism["arguments"] = mism.get("arguments", 0) + 1
            acc["pieces"] = [args]

    def _on_item_done(self, raw: dict, out: list[ProcessedChunk]) -> None:
        got = raw.get("item")
        item: dict = got if isinstance(got, dict) else {}
        kind = item.get("type")
        if not isinstance(kind, str) or kind not in _ITEM_TYPES:
            self._unhandled(f"response.output_item.done.item.type:{_label(kind)}")
            return
        if kind != "function_call":
            return
        key = self._key(raw)
        if key not in self.calls and isinstance(item.get("id"), str):
            key = self.item_keys.get(item["id"], key)
        acc = self.calls.pop(key, None)
        if acc is None:  # a call that arrived whole, without its added event
            acc = {"name": "", "pieces": [], "id": None}
        self._item_fields(acc, item)
        if isinstance(item.get("arguments"), str):
            self._final_arguments(acc, item["arguments"])
        self._emit_call(acc, out, truncated=False)

    def _emit_call(self, acc: dict, out: list[ProcessedChunk], *, truncated: bool) -> None:
        raw_args = "".join(acc["pieces"])
        name = acc["name"]
        parsed = self._parse_arguments(raw_args, name)
        fields: dict[str, Any] = {}
        if acc.get("item_id") and acc.get("item_id") != acc.get("id"):
            fields["item_id"] = acc["item_id"]
        if parsed.error is not None or truncated:
            fields["raw_arguments"] = raw_args
        if parsed.error is not None:
            fields["arguments_error"] = parsed.error
        call = FunctionCall(
            name=name,
            args=parsed.args,
            id=acc.get("id"),
            arguments_truncated=parsed.truncated or truncated,
            provider_fields=fields,
        )
        self.n_calls += 1
        self.committed = self.streamed = True
        out.append(new_chunk(type="function_call", function_call=call, thoughts=[], metadata={}))

    # terminal events -------------------------------------------------------------------

    def _usage_metadata(self, response: Any) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        if not isinstance(response, dict):
            return meta
        raw_usage = response.get("usage")
        if isinstance(raw_usage, dict):
            bad: list[str] = []
            usage = responses_usage(raw_usage, bad)
            if bad:
                self.facts.setdefault("hostile_values", []).extend(bad)
            if usage is not None:
                meta["usage"] = usage
            meta["raw_usage"] = raw_usage
        if isinstance(response.get("id"), str):
            meta["response_id"] = response["id"]
        if isinstance(response.get("model"), str):
            meta["response_model"] = response["model"]
        return meta

    def _close_open_calls(self, out: list[ProcessedChunk], *, truncated: bool) -> None:
        for key in list(self.calls):
            self._emit_call(self.calls.pop(key), out, truncated=truncated)

    def _on_created(self, raw: dict, out: list[ProcessedChunk]) -> None:
        response = raw.get("response")
        if isinstance(response, dict) and isinstance(response.get("id"), str):
            self.facts["response_id"] = response["id"]
        if isinstance(response, dict) and isinstance(response.get("model"), str):
            self.facts["response_model"] = response["model"]

    def _on_completed(self, raw: dict, out: list[ProcessedChunk]) -> None:
        self._terminal(raw, out, "tool_calls" if self.calls or self.n_calls else "stop")

    def _on_incomplete(self, raw: dict, out: list[ProcessedChunk]) -> None:
        response = raw.get("response")
        details = response.get("incomplete_details") if isinstance(response, dict) else None
        reason = details.get("reason") if isinstance(details, dict) else None
        finish = INCOMPLETE_FINISH.get(reason) if isinstance(reason, str) else None
        if finish is None:
            self._unhandled(f"response.incomplete.incomplete_details.reason:{_label(reason)}")
            finish = reason if isinstance(reason, str) and reason else "length"
        self._terminal(raw, out, finish, incomplete_reason=reason)

    def _terminal(self, raw: dict, out: list[ProcessedChunk], finish: str, **extra: Any) -> None:
        self.facts["done_seen"] = True
        self._release_guards(out)
        self._close_open_calls(out, truncated=finish != "tool_calls" and finish != "stop")
        if not self.streamed and not self.errored:
            self._output_of_terminal(raw.get("response"), out)
            if self.n_calls and finish == "stop":
                finish = "tool_calls"
        finish = self._refusal_finish(finish)
        meta = self._usage_metadata(raw.get("response"))
        if self.errored:  # the error chunk ended the step; keep only what was billed
            out.append(new_chunk(type="text", content="", thoughts=[], metadata=meta))
            self.ended = True
            return
        self._record_finish(finish)
        meta["finish_reason"] = finish
        meta.update((k, v) for k, v in extra.items() if v is not None)
        if "usage" in meta:
            self.committed = True
        out.append(new_chunk(type="done", thoughts=[], metadata=meta))
        self.ended = True

    def _output_of_terminal(self, response: Any, out: list[ProcessedChunk]) -> None:
        """A terminal event's ``response.output`` when nothing streamed before it (a proxy
        that sends the whole response at the end): its text, reasoning and calls, in order,
        counted in ``facts["output_from_terminal"]``."""
        items = response.get("output") if isinstance(response, dict) else None
        if not isinstance(items, list):
            return
        taken = 0
        for item in items:
            kind = item.get("type") if isinstance(item, dict) else None
            if kind == "function_call":
                acc: dict[str, Any] = {"name": "", "pieces": [], "id": None}
                self._item_fields(acc, item)
                if isinstance(item.get("arguments"), str):
                    acc["pieces"] = [item["arguments"]]
                self._emit_call(acc, out, truncated=False)
                taken += 1
                continue
            parts = item.get("content") if kind in ("message", "reasoning") else None
            summary = item.get("summary") if kind == "reasoning" else None
            for n, part in enumerate(summary if isinstance(summary, list) else ()):
                text = part.get("text") if isinstance(part, dict) else None
                if isinstance(text, str) and text:
                    self._reasoning("summary", (SUMMARY_PART_SEPARATOR if n else "") + text, out)
                    taken += 1
            for part in parts if isinstance(parts, list) else ():
                if isinstance(part, dict) and part.get("type") == "refusal":
                    refused = part.get("refusal")
                    if isinstance(refused, str) and refused:
                        self._note_refusal(refused)
                        taken += 1
                    continue
                text = part.get("text") if isinstance(part, dict) else None
                if not (isinstance(text, str) and text):
                    continue
                if part.get("type") == "output_text":
                    self._text(text, out)
                elif part.get("type") == "reasoning_text":
                    self._reasoning("raw", text, out)
                else:
                    continue
                taken += 1
        if taken:
            self._release_guards(out)
            self.facts["output_from_terminal"] = taken

    def _on_failed(self, raw: dict, out: list[ProcessedChunk]) -> None:
        self.facts["done_seen"] = True
        response = raw.get("response")
        err = response.get("error") if isinstance(response, dict) else None
        if not self.errored:
            self._error(err if isinstance(err, dict) else {}, out)
        meta = self._usage_metadata(response)
        if "usage" in meta:
            out.append(new_chunk(type="text", content="", thoughts=[], metadata=meta))
        self.ended = True

    def _on_error(self, raw: dict, out: list[ProcessedChunk]) -> None:
        inner = raw.get("error")
        err = (
            inner
            if isinstance(inner, dict)
            else {k: raw[k] for k in ("code", "message", "param") if k in raw}
        )
        if not self.errored:
            self._error(err, out)

    def _error(self, err: dict, out: list[ProcessedChunk]) -> None:
        """An ``error`` event or ``response.failed``: before the commit point the plan may
        retry (RetryAttempt); else the family's stream-error chunk, finish ``error``."""
        if not self.committed:
            got = err.get("message")
            message: str = got if isinstance(got, str) else ""
            status = parse_status_code(err.get("code"))
            if self.on_precommit_error(status, message or f"{self.provider}: stream error"):
                raise RetryAttempt(status, message)
        self._release_guards(out)
        self._close_open_calls(out, truncated=True)
        self.errored = True
        self._record_finish("error")
        error = type(self).stream_error_of(self.provider, err)
        out.append(
            new_chunk(type="error", error=error, thoughts=[], metadata={"finish_reason": "error"})
        )

    # -- end of stream ------------------------------------------------------------------

    # The base class's finish/fail skeleton: without a terminal event the stream was cut:
    # held text is released, a call still streaming is kept truncated, no finish reason is
    # made up.

    def release_held(self, out: list[ProcessedChunk], *, error_path: bool) -> None:
        """Whatever the guards hold (the same order on both paths)."""
        self._release_guards(out)

    def close_open_calls(self, out: list[ProcessedChunk], metadata: dict | None) -> None:
        """Calls still streaming are emitted truncated; at a natural end they are also named
        in ``facts["cut_tool_calls"]``."""
        if metadata is None and self.calls:
            self.facts.setdefault("cut_tool_calls", []).extend(
                acc["name"] for acc in self.calls.values()
            )
        self._close_open_calls(out, truncated=True)


_HANDLERS: dict[str, Callable[[ResponsesAdapter, dict, list[ProcessedChunk]], None]] = {
    "response.created": ResponsesAdapter._on_created,
    "response.in_progress": lambda self, raw, out: None,
    "response.queued": lambda self, raw, out: None,
    "response.output_item.added": ResponsesAdapter._on_item_added,
    "response.output_item.done": ResponsesAdapter._on_item_done,
    "response.content_part.added": ResponsesAdapter._on_part,
    "response.content_part.done": ResponsesAdapter._on_part,
    "response.output_text.delta": ResponsesAdapter._on_text_delta,
    "response.output_text.done": ResponsesAdapter._on_text_done,
    "response.reasoning_summary_part.added": ResponsesAdapter._on_summary_part_added,
    "response.reasoning_summary_part.done": lambda self, raw, out: None,
    "response.reasoning_summary_text.delta": ResponsesAdapter._on_summary_delta,
    "response.reasoning_summary_text.done": ResponsesAdapter._on_summary_done,
    "response.reasoning_text.delta": ResponsesAdapter._on_reasoning_delta,
    "response.reasoning_text.done": ResponsesAdapter._on_reasoning_done,
    "response.function_call_arguments.delta": ResponsesAdapter._on_args_delta,
    "response.function_call_arguments.done": ResponsesAdapter._on_args_done,
    "response.refusal.delta": ResponsesAdapter._on_refusal_delta,
    "response.refusal.done": ResponsesAdapter._on_refusal_done,
    "response.completed": ResponsesAdapter._on_completed,
    "response.incomplete": ResponsesAdapter._on_incomplete,
    "response.failed": ResponsesAdapter._on_failed,
    "error": ResponsesAdapter._on_error,
}
assert set(_HANDLERS) == set(_KNOWN_FIELDS)
ResponsesAdapter._TEXT_DELTA_KEYS = _KNOWN_FIELDS[TEXT_DELTA]


def _openrouter_stream_error(provider: str, err: dict) -> ProviderError:
    return openrouter_stream_error(err)


class OpenAIResponsesAdapter(ResponsesAdapter):
    """OpenAI's ``/v1/responses``."""

    chat_adapter = OpenAIAdapter


class OpenRouterResponsesAdapter(ResponsesAdapter):
    """OpenRouter's ``/api/v1/responses`` (beta): ``: OPENROUTER PROCESSING`` comments,
    ``data:`` lines only, ``data: [DONE]`` after the terminal event, ``usage.cost``."""

    chat_adapter = OpenRouterAdapter
    # re-annotated: mypy reads an unannotated staticmethod override of a ClassVar Callable
    # as a bound method and reports a false signature mismatch
    stream_error_of: ClassVar[Callable[[str, dict], ProviderError]] = staticmethod(
        _openrouter_stream_error
    )
    sends_done_sentinel = True


class DeepSeekResponsesAdapter(ResponsesAdapter):
    """DeepSeek's ``/responses``: reasoning streams as ``response.reasoning_text.delta``."""

    chat_adapter = DeepSeekAdapter


_BUILT: dict[type, type[ResponsesAdapter]] = {}


def responses_adapter_for(chat: type[StreamAdapter]) -> type[ResponsesAdapter]:
    """A Responses adapter for an OpenAI-compatible chat adapter with no named one (vLLM,
    Ollama, custom, a registered endpoint): the same data, at ``/responses``."""
    built = _BUILT.get(chat)
    if built is None:
        built = type(
            f"{chat.__name__}Responses",
            (ResponsesAdapter,),
            {
                "chat_adapter": chat,
                "__module__": __name__,
                "__doc__": f"{chat.__name__} at /responses.",
            },
        )
        _BUILT[chat] = built
    return built


RESPONSES_ADAPTERS: dict[str, type[ResponsesAdapter]] = {
    "openai": OpenAIResponsesAdapter,
    "openrouter": OpenRouterResponsesAdapter,
    "deepseek": DeepSeekResponsesAdapter,
}
"""Provider name -> its Responses adapter (the providers whose API serves ``/responses``)."""
