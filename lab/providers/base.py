"""The adapter contract every wire family implements, and the machinery they share.

An adapter turns one provider's SSE events into :class:`~lab.model.ProcessedChunk` objects:
stage 02 (chunk normalization, the guards, the commit point) and stage 03 (``process_chunk``).
It is pure: the runner (:mod:`lab.stream`) owns httpx, the SSE decoder and the degradation
plan, and feeds the adapter one :class:`~lab.http.sse.SSEEvent` at a time::

    adapter.start_attempt(n)             # fresh per-attempt state, guards re-armed
    for event in events:
        n = adapter.take(event)           # may raise RetryAttempt before the commit point
    adapter.emit(adapter.finish())        # natural end: guard flushes
    adapter.emit(adapter.fail(error))     # error path: guard flushes, then the error chunk

:meth:`StreamAdapter.take` appends an event's chunks to ``adapter.emitted`` and their
origins to ``adapter.origins`` itself (the runner reads both when the request ends);
:meth:`StreamAdapter.feed` is the same returning the chunks it added.

Guards never act silently: every note a guard records is turned into a
:class:`~lab.model.GuardEvent` stamped with the stream id, the attempt and the index of the
raw chunk (SSE event) that triggered it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from lab.config import LabConfig
from lab.degrade import ExtraClassifier
from lab.errors import normalize_http_error_for_family, parse_error_message_for_family
from lab.exceptions import LabError
from lab.guards.base import GuardNote
from lab.guards.json_repair import parse_tool_arguments
from lab.guards.markup import MarkupGuard
from lab.http.sse import SSEDecoder, SSEEvent
from lab.model import ChunkOrigin, GuardEvent, ProcessedChunk, ProviderError
from lab.providers.wire import (  # re-exported: their old home, still importable
    NoteList,
    ToolCallAccumulator,
    is_number,
    join_url,
    note_shape,
    note_unknown_keys,
    openai_usage,
    split_text_and_tool,
    wire_float,
    wire_int,
)
from lab.request import (
    claude_tool_id,
    clean_text,
    drop_empty_messages,
    drop_reasoning_history,
    insert_done_before_user,
    is_claude_model,
    is_deepseek_model,
    is_mistral_model,
    map_tool_ids,
    mistral_tool_id,
    replay_reasoning_content,
)

_tuple_new = tuple.__new__

__all__ = [
    "NoteList",
    "RetryAttempt",
    "StreamAdapter",
    "ToolCallAccumulator",
    "is_number",
    "join_url",
    "note_shape",
    "note_unknown_keys",
    "openai_usage",
    "split_text_and_tool",
    "wire_float",
    "wire_int",
]


class RetryAttempt(LabError):
    """Raised by ``feed`` when a pre-commit error made the degradation plan choose a retry."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


PrecommitHook = Callable[[int | None, str], bool]


class StreamAdapter:
    """Base class: per-attempt state, guard-event plumbing, request-side defaults.

    Words: the *provider* is the registry name (``provider``, a key of
    :data:`lab.providers.PROVIDERS`); the *wire family* is the shape of the stream the
    adapter reads (``family``); many providers share one wire family.
    """

    provider: ClassVar[str] = ""
    """The registry name this class serves (``register`` checks it)."""
    family: ClassVar[str] = "openai_compatible"
    """The wire family: ``openrouter``, ``openai_compatible``, ``google`` or ``anthropic``.
    The anomaly detectors' end-of-stream rules and the tables read it; a new
    OpenAI-compatible endpoint inherits it."""

    # -- identity: what says a request or a span is this provider's ----------------------
    # Set on the class that declares ``provider`` and never inherited by another provider's
    # class (:meth:`__init_subclass__`), as the key variable is not.

    otel_name: ClassVar[str] = ""
    """OpenTelemetry's ``gen_ai.provider.name`` for this provider when it is not the
    provider name (Gemini: ``gcp.gemini``); read by :mod:`lab.otel`."""
    host_aliases: ClassVar[tuple[str, ...]] = ()
    """Hosts that serve this provider besides its default base URL's host (Z.ai:
    ``open.bigmodel.cn``); read by :mod:`lab.infer`."""
    request_paths: ClassVar[dict[str, str]] = {}
    """Request path endings that say a request is this provider's, each with the note its
    evidence gives (``{host!r}`` is filled in); the longest matching ending wins. An ending
    that starts with ``:`` is the method of the last path segment (Gemini's
    ``models/{model}:streamGenerateContent``). Read by :mod:`lab.infer`."""
    request_header_markers: ClassVar[tuple[str, ...]] = ()
    """Request headers only this provider's clients send (``anthropic-version``)."""
    request_body_markers: ClassVar[dict[str, str]] = {}
    """Top-level request body fields that say a request is this provider's, each with the
    note its evidence gives; a name ending in ``[]`` must hold a list."""
    generic_markers: ClassVar[bool] = False
    """Are this provider's header and body markers a catch-all (Custom: any OpenAI-shaped
    body), checked after every other provider's?"""

    _IDENTITY: ClassVar[dict[str, Any]] = {
        "otel_name": "",
        "host_aliases": (),
        "request_paths": {},
        "request_header_markers": (),
        "request_body_markers": {},
        "generic_markers": False,
    }

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "provider" in own:
            for name, default in StreamAdapter._IDENTITY.items():
                if name not in own:
                    setattr(cls, name, default)

    sends_done_sentinel: ClassVar[bool] = True
    """Does the family end a stream with ``data: [DONE]``? (Gemini and Anthropic do not; their
    only end evidence is a finish reason.)"""
    names_backend: ClassVar[bool] = False
    """Does the stream name the serving backend (OpenRouter's ``provider`` field)?"""
    lean: ClassVar[bool] = True
    """Does an event of the family's common shape take its lean path (each family says which
    path that is)? Off, every event goes the general way (the tests compare the two). Read
    when an attempt starts (:meth:`start_attempt`, into ``_lean``: a class attribute read
    through the instance is an unspecialized lookup, per event): set it before the stream
    is made."""
    default_base_url: ClassVar[str] = ""
    api_key_env: ClassVar[str] = ""
    mandatory_keys: ClassVar[tuple[str, ...]] = ("model", "messages", "stream")
    priority_keys: ClassVar[tuple[str, ...]] = ()
    degrades: ClassVar[bool] = True
    """Does a failure of this family run the parameter-degradation ladder? OpenRouter and
    the OpenAI-compatible adapters share one degradation queue (docs/reference.md, "6. Parameter degradation"); the Gemini adapter
    (docs/reference.md, "5.3 Gemini errors") turns every failure into its error chunk."""
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
        """Every chunk of this request (all attempts), in order: :meth:`take` and
        :meth:`emit` append to it."""
        self.origins: list[ChunkOrigin] = []
        """Where each chunk of :attr:`emitted` came from (one per chunk, same order): the
        attempt, the SSE event and the read that completed it."""
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

    # -- request side: message fixes and the body -----------------------------------------

    drops_empty_messages: ClassVar[bool] = False
    """Request side: drop empty messages and empty text parts (Anthropic rejects them)."""
    requires_reasoning_content_replay: ClassVar[bool] = False
    """Request side: assistant turns must carry ``reasoning_content`` back (DeepSeek; any
    OpenAI-compatible endpoint serving a DeepSeek model too)."""
    drops_reasoning_history: ClassVar[bool] = False
    """Request side: no reasoning fields are sent back (OpenAI rejects them)."""

    @classmethod
    def tool_id_style(cls, model: str) -> str | None:
        """Hook that maps **model** to the tool-call id rule its requests need: ``"claude"``
        (``[a-zA-Z0-9_-]``), ``"mistral"`` (9 alphanumerics and a ``"Done."`` turn between a
        tool result and a user turn) or None; override in subclasses. The default reads the
        model id, whoever serves it."""
        if is_claude_model(model):
            return "claude"
        if is_mistral_model(model):
            return "mistral"
        return None

    @classmethod
    def fix_messages(cls, model: str, messages: list[dict]) -> list[dict]:
        """Hook that maps neutral (OpenAI-shaped) messages to the ones this provider accepts,
        before :meth:`build_body`; override in subclasses (or set the data it reads).

        In order: lone surrogates become U+FFFD; empty messages dropped
        (:attr:`drops_empty_messages`); tool-call ids rewritten by :meth:`tool_id_style`;
        ``reasoning_content`` replayed on assistant turns
        (:attr:`requires_reasoning_content_replay`, or a DeepSeek model on an
        OpenAI-compatible endpoint), else reasoning dropped (:attr:`drops_reasoning_history`).
        """
        msgs = [clean_text(m) for m in messages if isinstance(m, dict)]
        if cls.drops_empty_messages:
            msgs = drop_empty_messages(msgs)
        style = cls.tool_id_style(model)
        if style == "claude":
            map_tool_ids(msgs, claude_tool_id)
        elif style == "mistral":
            map_tool_ids(msgs, mistral_tool_id)
            msgs = insert_done_before_user(msgs)
        if cls.requires_reasoning_content_replay or (
            cls.family == "openai_compatible" and is_deepseek_model(model)
        ):
            replay_reasoning_content(msgs)
        elif cls.drops_reasoning_history:
            drop_reasoning_history(msgs)
        return msgs

    @classmethod
    def build_body(
        cls, model: str, messages: list[dict], tools: list[dict] | None, options: dict
    ) -> dict[str, Any]:
        """Hook that maps fixed neutral messages, tools and options to this family's
        streaming request body (what :func:`lab.providers.build_body` calls); override in
        subclasses. The default: a family with no body rules cannot build a request."""
        raise ValueError(f"no request-body rules for family {cls.family!r}")

    # -- error side -----------------------------------------------------------------------

    @classmethod
    def error_message(cls, body_text: str, status: int | None = None) -> str:
        """Hook that maps an HTTP error body to the provider's own message (what
        :func:`lab.providers.parse_error_message` calls); override in subclasses. The
        default: ``error.message``, ``message``, the raw text, the status phrase."""
        return parse_error_message_for_family(cls.family, body_text, status)

    @classmethod
    def normalize_http_error(
        cls, status: int, body_text: str, *, body_error_codes: bool = False
    ) -> ProviderError:
        """Hook that maps an HTTP error response to a :class:`~lab.model.ProviderError` (what
        :func:`lab.providers.normalize_http_error` calls); override in subclasses. The
        default: the type by status (429 rate_limit, 408/504 timeout, 5xx api_error, all
        retryable; other codes api_error), "<provider> API error (<status>): <message>"."""
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
        self.ended = False
        """Has :meth:`finish` or :meth:`fail` run (or the family ended the stream itself)?"""
        self._ids_seen = False  # each attempt's own response id and model
        self._lean = self.lean  # read once an attempt (see lean), before the family's reset
        self.reset()

    def reset(self) -> None:  # pragma: no cover - subclasses override
        """Hook that builds this family's per-attempt state (guards, accumulators); override
        in subclasses."""
        raise NotImplementedError

    # -- the lifecycle: written once here, each family fills in its hooks ----------------

    def take(self, event: SSEEvent) -> int:
        """One SSE event: the chunks it completes are appended to :attr:`emitted`, their
        origins to :attr:`origins`; returns how many. The event is counted (``facts``); a
        comment or an event without data yields nothing; after the end, the data goes to
        :meth:`after_end`; otherwise to the family's :meth:`feed_data`. May raise
        :class:`RetryAttempt` before the commit point; nothing of that event is kept."""
        # the event counted (the facts' events, comments, an unterminated tail) and its
        # place kept for the chunks' origins
        self.seq = event.index
        self.read_seq = event.last_seq
        facts = self.facts
        facts["events"] += 1
        if event.unterminated:
            facts["unterminated_tail"] = True
        data = event.data
        if data is None or event.comment is not None:  # is_comment, inlined: per event
            if event.comment is not None:
                facts["comments"] += 1
            return 0
        if self.ended:
            self.after_end(data)
            return 0
        out = self.emitted
        n0 = len(out)
        try:
            self.feed_data(data, event, out)
        except RetryAttempt:
            del out[n0:]
            raise
        n = len(out) - n0
        if n == 1:  # _originate for one chunk, inlined: per event
            self.origins.append(_tuple_new(ChunkOrigin, (self.attempt, self.seq, self.read_seq)))
        elif n:
            self._originate(n0)
        return n

    def feed(self, event: SSEEvent) -> list[ProcessedChunk]:
        """:meth:`take`, returning the chunks it added (they are in :attr:`emitted` too)."""
        n = self.take(event)
        return self.emitted[-n:] if n else []

    def emit(self, new: list[ProcessedChunk]) -> None:
        """Append chunks made outside :meth:`take` (:meth:`finish`, :meth:`fail`, the
        runner's own) to :attr:`emitted`, with the origin of the event fed last."""
        if new:
            n0 = len(self.emitted)
            self.emitted.extend(new)
            self._originate(n0)

    def _originate(self, n0: int) -> None:
        """The origins of ``emitted[n0:]``: the attempt, the event and its last read."""
        # ChunkOrigin(...) without the namedtuple's Python __new__: one is made per event
        origin = _tuple_new(ChunkOrigin, (self.attempt, self.seq, self.read_seq))
        n = len(self.emitted) - n0
        if n == 1:
            self.origins.append(origin)
        else:
            self.origins.extend([origin] * n)

    def feed_data(self, data: str, event: SSEEvent, out: list[ProcessedChunk]) -> None:
        """Hook that maps an event's data to chunks appended to **out**; override in
        subclasses (parse, normalize, guards, then the family's stage 03)."""
        raise NotImplementedError  # pragma: no cover

    def after_end(self, data: str) -> None:
        """Hook that notes data arriving after the stream ended (a trailing ``[DONE]``);
        override in subclasses. The default ignores it."""

    def finish(self) -> list[ProcessedChunk]:
        """Natural end of the body: what the guards hold is released
        (:meth:`release_held`), calls still streaming are closed as cut
        (:meth:`close_open_calls`), then the end evidence is settled (:meth:`settle`).
        Nothing after a stop or a previous end."""
        out: list[ProcessedChunk] = []
        if self.stopped or self.ended:
            return out
        self.ended = True
        self.release_held(out, error_path=False)
        self.close_open_calls(out, None)
        self.settle(out, None)
        return out

    def fail(self, error: ProviderError) -> list[ProcessedChunk]:
        """Error path: what the guards hold is released (:meth:`release_held`), the end
        evidence settled into the error's metadata (:meth:`settle`), calls still streaming
        closed (:meth:`close_open_calls`: emitted, or listed in the metadata), then the error
        chunk (:meth:`error_chunk`). Evidence comes before the calls, so the metadata reads
        ``finish_reason``, ``usage``, ``incomplete_tool_calls``. Nothing after an end."""
        out: list[ProcessedChunk] = []
        if self.ended:
            return out
        self.ended = True
        self.release_held(out, error_path=True)
        metadata: dict[str, Any] = {"finish_reason": "error"}
        self.settle(out, metadata)
        self.close_open_calls(out, metadata)
        self._record_finish("error")
        out.append(self.error_chunk(error, metadata))
        return out

    def release_held(self, out: list[ProcessedChunk], *, error_path: bool) -> None:
        """Hook that releases what the guards (and any post-processor) still hold at the end
        of the stream, as chunks appended to **out**; override in subclasses. The order
        differs by path (the reference: a natural end flushes the think stripper before the
        speaker tail, the error path the other way round). The default holds nothing."""

    def close_open_calls(self, out: list[ProcessedChunk], metadata: dict | None) -> None:
        """Hook that closes the tool calls still streaming when the stream ends: emitted into
        **out** (marked truncated) or, on the error path (**metadata** is the error chunk's),
        listed there; override in subclasses. The default has no calls."""

    def settle(self, out: list[ProcessedChunk], metadata: dict | None) -> None:
        """Hook that settles the end evidence: usage seen but never final
        (``facts["provisional_usage"]``), thoughts still pending, and on the error path
        (**metadata**) the usage so far; override in subclasses. The default has none."""

    def error_chunk(self, error: ProviderError, metadata: dict[str, Any]) -> ProcessedChunk:
        """Hook that maps the error that ends the stream to its chunk; override in
        subclasses. The default: an error chunk carrying **metadata**."""
        return ProcessedChunk(type="error", error=error, metadata=metadata)

    def _note_refusal(self, text: str) -> None:
        """A piece of the model's refusal (OpenAI ``delta.refusal``, the Responses API's
        ``response.refusal.delta``): kept in ``facts["refusal"]``, the result's ``refusal``."""
        if text:
            self.facts["refusal"] = self.facts.get("refusal", "") + text

    def _refusal_finish(self, finish: str) -> str:
        """``content_filter`` for a ``stop`` that ends a refusal under
        ``LabConfig.refusal_content_filter``; ``finish`` otherwise (the reference)."""
        if finish == "stop" and self.facts.get("refusal") and self.config.refusal_content_filter:
            return "content_filter"
        return finish

    def _record_finish(self, reason: str | None) -> None:
        if reason:
            self.finish_reason = reason
            self.facts["finish_reasons"].append(reason)

    def _speaker_tail_before_terminal(self, chunk: dict, content: Any, delta: dict | None) -> str:
        """The speaker-tail step of the per-chunk order (OpenAI-shaped chunks; see
        docs/reference.md, "3.6 OpenRouter per-chunk order"): a chunk with no text that carries an error,
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
        and **speaker**), and the markup guards ``self.markup`` (on content) and
        ``self.markup_reasoning`` (on reasoning), which detect leaked protocol markup and
        recover it under ``recover_markup`` (both None when ``markup.classes`` is empty). A
        family uses the ones its pipeline runs (Gemini: dedup and the speaker guard;
        Anthropic: think, spill and speaker; the chat families: all).
        **capture_thoughts** defaults to ``capture_think_blocks_as_thoughts``.
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
        self.markup: MarkupGuard | None = None
        self.markup_reasoning: MarkupGuard | None = None
        if cfg.markup.classes:  # with no class to recognize, no markup guard runs
            self.markup = MarkupGuard(cfg.markup, recover=cfg.recover_markup, tools=self.tools)
            self.markup_reasoning = MarkupGuard(
                cfg.markup, recover=cfg.recover_markup, tools=self.tools
            )
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
        """A call's streamed arguments through the parse step (docs/reference.md, "7.10 The tool-argument parse step"), its json_repair event
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

    def _text_guards(self, text: str) -> str:
        """A piece's answer text (not empty) after the per-piece guards: dedup, then the
        speaker guard (its ``fired`` says whether the text reached a speaker line; one that
        fired before has stopped the attempt). The one definition for the chat machine's
        pipeline, OpenRouter's lean pieces, Gemini's pipeline and lean events and the
        Responses API's visible text (Anthropic's reference runs no dedup)."""
        dedup = self.dedup
        text = dedup.filter(text)
        if dedup.notes:
            self._drain(dedup)
        speaker = self.speaker
        if speaker is not None and text:
            text = speaker.feed(text)
            if speaker.notes:
                self._drain(speaker)
        return text

    def _drain_all(self, guards: Iterable[Any]) -> None:
        for g in guards:
            if g is not None and g.notes:
                self._drain(g)


def _never_retry(status: int | None, message: str) -> bool:
    return False
