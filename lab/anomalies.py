"""Anomaly detectors: what is still wrong with a stream *after* the guards ran.

The guards move, drop, repair and recover text, and every such act is a ``GuardEvent``. The
detectors here flag the failures the guards do **not** fix, so the ``anomalies`` column of
:func:`lab.tables.streams` shows which streams a user would still have seen broken. Each
detector is a small pure function over a :class:`~lab.result.StreamResult` returning a bool;
:data:`DETECTORS` registers them in display order, :func:`detect` lists the names that fired
and :func:`explain` gives one line per name.

Detectors and the real-world bug each one catches
(docs/reference.md, "1.6 Failures seen in the wild"):

- ``tool_markup_in_content`` – a tool call written as text into the answer: MiniMax
  ``<minimax:tool_call>`` via OpenRouter (earendil-works/pi #368), GLM/Qwen/Hermes
  ``<tool_call>`` (Gitlawb/openclaude PR #1791), DeepSeek ``<｜tool▁calls▁begin｜>``.
- ``tool_markup_in_reasoning`` – the same markup inside reasoning: Kimi-K2
  ``<|tool_calls_section_begin|> <|tool_call_begin|> functions.bash:0 …`` in the thinking
  block (anomalyco/opencode #8851, vybestack/llxprt-code #749); the call is never made.
- ``markup_leak`` – any protocol markup the markup guard (:mod:`lab.guards.markup`) saw
  in text or reasoning, recovered or not: gpt-oss harmony channels
  (``<|channel|>analysis<|message|>``, Sidekick #75) and the same with the tokens decoded
  to nothing (``analysisUser says…assistantfinalHello!``, oobabooga/textgen #7374), tool
  blocks of every dialect, stray special tokens (``<|im_end|>``, moltis #306);
  :func:`markup_leak_kinds` names the classes.
- ``duplicated_deltas`` – every reasoning delta sent twice, ``TheThe user is user is``
  (maximhq/bifrost #6427), each reasoning delta resending all of the one before (cumulative
  snapshots: DashScope paths, QwenLM/qwen-code #3896), or a long passage repeated back to
  back in the answer.
- ``glued_reasoning_summaries`` – summary headings concatenated with no separator,
  ``**Planning exact formatted output****Confirming exact reproduction requirement**``
  (diegosouzapw/OmniRoute #9500, NousResearch/hermes-agent PR #80736, zendev-sh/goai PR #129).
- ``eof_without_terminator`` – the connection was cut and the turn accepted as complete:
  no ``[DONE]`` and no finish reason (OpenAI-style), no finish reason and no
  ``message_stop`` (Gemini and Anthropic never send ``[DONE]``), or an unterminated last SSE
  event (anomalyco/opencode #39968/#40061, kittors/CliRelay #964). A stream the speaker guard
  stopped on purpose is not truncated.
- ``recording_cut`` – not the provider's doing: the *recording* ends before the stream did
  (the recorder was killed, ``end_reason="incomplete"``, or interrupted, ``"cancelled"``),
  so how the stream really ended is unknown. Such a stream is never also flagged
  ``eof_without_terminator``.
- ``limit_reached`` – not the provider's doing either: the lab's own limit ended the
  stream (``LabConfig.max_exchange_s``, ``end_reason="time_limit"``, or
  ``max_exchange_bytes``, ``"byte_limit"``); never also ``error_in_200_stream`` or
  ``eof_without_terminator``.
- ``truncated_tool_arguments`` – a tool call whose argument JSON was cut short: OpenRouter
  rewriting ``length`` to ``tool_calls`` (NousResearch/hermes-agent PR #7693, #91717),
  DeepSeek-v4 ``Unterminated string`` arguments at exactly ``max_tokens``, vLLM PR #46303,
  or an Anthropic stream that ended inside a ``tool_use`` block (``facts["cut_tool_use"]``).
- ``tool_arguments_glued`` – a tool call whose arguments are two or more whole JSON objects
  back to back (``{"query":"A"}{"query":"B"}``): several calls sent at one index with no
  name or id between them, appended by the reference into arguments that do not parse
  (GPT-5.4, open-webui #22235). Not also ``truncated_tool_arguments``.
- ``tool_arguments_resent`` – a tool call whose argument deltas each carried the arguments
  so far (``{"a"``, ``{"a": 1``, ``{"a": 1}``), appended by the reference into arguments that
  do not parse (DeepSeek, Baidu Qianfan: NousResearch/hermes-agent PR #35718);
  ``LabConfig.read_cumulative_tool_arguments`` reads the last. Not also
  ``truncated_tool_arguments``.
- ``empty_answer_with_reasoning`` – ``finish_reason: stop`` with empty content and the answer
  (or nothing) in reasoning (thedotmack/claude-mem #3569, chunkhound/chunkhound #415).
- ``think_tags_after_guards`` – a reasoning tag still in the final text (a ``<think>`` the
  stripper was told not to strip, a stray ``</think>`` …; ollama #18044, pi #9007); the tag
  shape is :mod:`lab.guards.tags`, the one definition every guard uses.
- ``error_in_200_stream`` – informational: the request failed *inside* an HTTP-200 stream
  (OpenRouter mid-stream error, cline #5449), so the status code alone says "OK".
- ``error_swallowed_in_200`` – the stream carried an error (``finish_reason: "error"``, an
  error object turned into a ``done`` chunk) but the result holds no error: the partial answer
  looks complete (OmniRoute #4177, hydra #869, the luca ``provider_unavailable`` regression).

- ``tool_calls_dropped`` – the reference rule lost tool calls the provider sent: Gemini
  ``functionCall`` parts after the first of a chunk (kept only in
  ``metadata["ignored_function_calls"]``), or a call streamed as ``partialArgs`` pieces
  built piece by piece as empty calls (``facts["tool_calls_dropped"]``; the switch
  ``LabConfig.assemble_function_calls`` builds them whole).
- ``tool_call_failed`` – the finish reason says the model tried to call a tool and the call
  failed (Gemini's ``MALFORMED_FUNCTION_CALL``, ``UNEXPECTED_TOOL_CALL``,
  ``TOO_MANY_TOOL_CALLS``: :data:`lab.toolcheck.FAILED_CALL_FINISHES`): no call, or none the
  provider stood by, arrived; the tool-call checks count it as a ``failed_finish``, with the
  provider's ``finishMessage`` (which quotes the broken call) in its detail.
- ``usage_not_final`` – the stream ended before the provider's final usage report (Gemini's
  chunk with ``finishReason``, Anthropic's ``message_delta``): the usage known is a running
  count that understates what was generated (``facts["provisional_usage"]``; a stream
  that ended in an error is not flagged, the error says it failed; under
  ``LabConfig.final_usage_only`` the result reports no usage instead).
- ``refusal`` – the model refused: OpenAI's ``delta.refusal`` or the Responses API's
  refusal parts carried its answer (``result.refusal``); the reference shows an empty,
  ``stop``-finished answer (``LabConfig.refusal_content_filter`` finishes ``content_filter``).
- ``body_not_as_sent`` – an imported body is not the bytes the server sent: the file's
  writer replaced bytes it could not decode with U+FFFD (``meta.source_body == "lossy"``,
  :mod:`lab.interchange`), so the text around them may differ from what the app saw.

- ``secret_redacted`` – informational: the response echoed a secret the request sent (a
  provider quoting the key in an error, a model repeating it token by token) and the
  recorder replaced each echo by a marker (``facts["secrets_redacted"]``, from
  ``meta["lab.redacted"]``): the text around it is as sent, the key is not.
- ``secret_unchecked`` – the response to a request that sent a secret came in a
  ``Content-Encoding`` the lab cannot decode (``br``/``zstd`` without their libraries, an
  unknown one), so it was recorded as it came and an echo inside it could not be looked for
  (``facts["secret_unchecked"]``, from ``meta["lab.undecoded"]``).

Every threshold is a field of :class:`AnomalyConfig` whose default is the module constant of
the same name in capitals; pass ``config=`` to :func:`detect` (or to a detector) to change it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from lab.capture.schema import CUT_END_REASONS, LIMIT_END_REASONS
from lab.guards.markup import MARKUP_CLASSES, TOOL_BLOCK_OPENERS, markup_kinds
from lab.guards.tags import REASONING_TAG_RE
from lab.guards.text import is_word_repeat
from lab.providers import PROVIDERS, get_adapter
from lab.repetition import BackToBack, first_back_to_back, immediate_repetition
from lab.result import counted_thoughts
from lab.toolcheck import FAILED_CALL_FINISHES, glued_json_objects

if TYPE_CHECKING:
    from lab.result import StreamResult

_V = TypeVar("_V")

__all__ = [
    "DETECTORS",
    "DUPLICATE_DELTA_MIN_CHARS",
    "GLUED_SUMMARY_RE",
    "NO_DONE_SENTINEL_PROVIDERS",
    "REPETITION_MAX_PERIOD",
    "REPETITION_MIN_ALNUM",
    "REPETITION_MIN_CHARS",
    "TOOL_MARKUP_MARKERS",
    "TOOL_MARKUP_RE",
    "AnomalyConfig",
    "detect",
    "duplicated_deltas",
    "empty_answer_with_reasoning",
    "eof_without_terminator",
    "error_in_200_stream",
    "error_swallowed_in_200",
    "explain",
    "find_duplicated_delta",
    "find_immediate_repetition",
    "glued_reasoning_summaries",
    "limit_reached",
    "markup_leak",
    "markup_leak_kinds",
    "recording_cut",
    "shown_before_close",
    "shown_close_events",
    "think_tags_after_guards",
    "tool_markup_in_content",
    "tool_calls_dropped",
    "tool_markup_in_reasoning",
    "tool_arguments_glued",
    "tool_arguments_resent",
    "truncated_tool_arguments",
    "usage_not_final",
]

# --------------------------------------------------------------------------- thresholds

DUPLICATE_DELTA_MIN_CHARS = 6
"""A delta counts as non-trivial when it has at least this many characters after stripping
whitespace and at least one letter or digit (so ``"    "`` indentation or ``"\\n\\n"`` repeated
back to back never fires)."""

DUPLICATE_DELTA_MIN_WORDS = 3
"""A non-trivial delta of at least this many (whitespace-separated) words sent twice in a row
is flagged on its own: a model does not double a phrase that long."""

DUPLICATE_DELTA_MIN_PAIRS = 2
"""A shorter one (a word doubled on purpose, ``" really really"``, ``"very, very"``) only when
this many such pairs are in the text, or in the reasoning: a backend that doubles deltas
doubles most of them (bifrost #6427)."""

DUPLICATE_DELTA_MAX_GAP = 2
"""...and each such pair at most this many deltas after the pair before it: a backend that
doubles deltas doubles them one after another, two words doubled far apart are English."""

REPETITION_MIN_CHARS = 80
"""A passage repeated immediately (``XX``) in the answer must be at least this long."""

REPETITION_MIN_ALNUM = 20
"""... and hold at least this many letters or digits (a ``====`` rule repeated is fine)."""

REPETITION_MAX_PERIOD = 4000
"""The longest passage the repetition search looks for (keeps it linear in the text)."""


def _no_done_sentinel_providers() -> frozenset[str]:
    return frozenset(p for p in PROVIDERS if not get_adapter(p).sends_done_sentinel)


NO_DONE_SENTINEL_PROVIDERS: frozenset[str] = _no_done_sentinel_providers()
"""Providers whose family never sends ``data: [DONE]`` (each adapter's
``sends_done_sentinel``); their only end evidence is a finish reason (Gemini
``finishReason``, Anthropic ``message_delta.stop_reason`` / ``message_stop``)."""


class AnomalyConfig(BaseModel):
    """Detector thresholds. Defaults are the module constants of the same name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    duplicate_delta_min_chars: int = Field(default=DUPLICATE_DELTA_MIN_CHARS, ge=1)
    """Minimum stripped length of a delta that counts when repeated back to back."""
    duplicate_delta_min_words: int = Field(default=DUPLICATE_DELTA_MIN_WORDS, ge=1)
    """A delta of at least this many words repeated back to back is flagged on its own."""
    duplicate_delta_min_pairs: int = Field(default=DUPLICATE_DELTA_MIN_PAIRS, ge=1)
    """Shorter deltas are flagged once this many of them are repeated back to back."""
    duplicate_delta_max_gap: int = Field(default=DUPLICATE_DELTA_MAX_GAP, ge=0)
    """...each within this many deltas of the pair before it (a backend that doubles its
    deltas doubles them one after another; two words doubled far apart are English)."""
    repetition_min_chars: int = Field(default=REPETITION_MIN_CHARS, ge=1)
    """Minimum length of a passage immediately repeated in the answer text."""
    repetition_min_alnum: int = Field(default=REPETITION_MIN_ALNUM, ge=0)
    """Minimum letters/digits in that passage."""
    repetition_max_period: int = Field(default=REPETITION_MAX_PERIOD, ge=1)
    """Longest passage the repetition search considers."""
    no_done_sentinel_providers: frozenset[str] = NO_DONE_SENTINEL_PROVIDERS
    """Provider families judged by finish reason alone (no ``[DONE]`` expected)."""


_DEFAULT = AnomalyConfig()

# --------------------------------------------------------------------------- patterns

TOOL_MARKUP_MARKERS: tuple[str, ...] = TOOL_BLOCK_OPENERS
"""Literal openers of tool-call markup that models emit as text when the serving backend does
not parse its own template: MiniMax ``<minimax:tool_call>`` (pi #368), Kimi
``<|tool_calls_section_begin|>`` (opencode #8851) and its singular form (llama.cpp PR
#17376), GLM/Hermes/Qwen ``<tool_call>`` (openclaude PR #1791), Qwen3-Coder ``<function=``,
DeepSeek ``<｜tool▁calls▁begin｜>``. The one list is
:data:`lab.guards.markup.TOOL_BLOCK_OPENERS`."""

TOOL_MARKUP_RE = re.compile("|".join(re.escape(m) for m in TOOL_MARKUP_MARKERS), re.IGNORECASE)
"""The one pattern both tool-markup detectors use."""
_TOOL_MARKUP_LEAD = "<" if all(m.startswith("<") for m in TOOL_MARKUP_MARKERS) else ""
"""What every marker starts with: a text without it holds none (``""``: no such shortcut)."""

GLUED_SUMMARY_RE = re.compile(
    r"\*\*[^*\n]+\*\*\*\*[^*\n]+\*\*"  # **A****B**: two headings with nothing between
    r"|[^\s*][.!?:]\*\*[A-Z][^*\n]{2,}\*\*(?:\n|$)"  # body.**Heading**\n: heading glued to text
)
"""Bold reasoning-summary headings glued to the previous segment with no separator."""

# --------------------------------------------------------------------------- helpers


def _cfg(config: AnomalyConfig | None) -> AnomalyConfig:
    return _DEFAULT if config is None else config


def _reasoning_deltas(result: StreamResult) -> Iterator[str]:
    """The reasoning deltas as sent: each chunk's thoughts, except those a chunk repeats of
    the one before it (:func:`lab.result.counted_thoughts`: OpenRouter's text/tool split
    keeps one delta's reasoning on both pieces; it was sent once)."""
    if result.chunks:
        for chunk in result.chunks:
            if chunk.thoughts:
                for thought in counted_thoughts(chunk):
                    if thought.content:
                        yield thought.content
    else:  # a hand-built result with thoughts but no chunks
        for thought in result.thoughts:
            if thought.content:
                yield thought.content


_CONTENT = attrgetter("content")


def _thought_texts(result: StreamResult) -> str:
    """Every thought's text, NUL between them (no marker spans two thoughts); joined once
    per :func:`detect` call (two detectors look into it)."""
    return _shared(result, "thought_texts", lambda: "\0".join(map(_CONTENT, result.thoughts)))


def _back_to_back(cfg: AnomalyConfig) -> BackToBack:
    """The duplicated-delta rule (:class:`lab.repetition.BackToBack`) at ``cfg``'s thresholds."""
    return BackToBack(
        cfg.duplicate_delta_min_chars,
        cfg.duplicate_delta_min_words,
        cfg.duplicate_delta_min_pairs,
        cfg.duplicate_delta_max_gap,
    )


def find_duplicated_delta(result: StreamResult, config: AnomalyConfig | None = None) -> str | None:
    """The first non-trivial delta repeated back to back in text or reasoning, or None.

    Non-trivial: at least ``duplicate_delta_min_chars`` characters after stripping and a
    letter or digit. One such pair is enough when its delta holds at least
    ``duplicate_delta_min_words`` words; shorter ones (a word doubled on purpose, ``" really
    really"``) take ``duplicate_delta_min_pairs`` pairs in the text, or in the reasoning, each
    within ``duplicate_delta_max_gap`` deltas of the pair before, and the first of them is
    returned. A CJK character counts as a word. In the reasoning, a delta that starts with the whole
    delta before it repeats that one too (cumulative snapshots); in the text the reference's
    dedup guard already cuts such a repeat (its guard event says so).
    """
    return _chunk_facts(result, _cfg(config)).duplicate


class _ChunkFacts(NamedTuple):
    """What the detectors that read every chunk need, from one pass (:func:`_chunk_facts`)."""

    duplicate: str | None
    """:func:`find_duplicated_delta`'s answer."""
    error_chunk: bool
    """A chunk of type ``error``."""
    error_said: bool
    """A chunk's metadata says error (``finish_reason`` ``"error"``, or ``originalError``)."""


_SHARED: ContextVar[tuple[StreamResult, dict[str, Any]] | None] = ContextVar(
    "lab_anomalies_shared", default=None
)
"""Inside :func:`detect`: its result and what its detectors worked out once for it."""


def _shared(result: StreamResult, name: str, compute: Callable[[], _V]) -> _V:
    """``compute()``, made once per :func:`detect` call for what several detectors read
    (inside one call the config is one), every time outside one."""
    held = _SHARED.get()
    if held is None or held[0] is not result:
        return compute()
    memo = held[1]
    if name not in memo:
        memo[name] = compute()
    return memo[name]


def _chunk_facts(result: StreamResult, cfg: AnomalyConfig) -> _ChunkFacts:
    return _shared(result, "chunk_facts", lambda: _scan_chunks(result, cfg))


def _scan_chunks(result: StreamResult, cfg: AnomalyConfig) -> _ChunkFacts:
    """One pass over the chunks (it runs over every chunk of every stream a table is built
    from): :func:`lab.repetition.first_back_to_back` over the text deltas and, apart, the reasoning deltas
    (:func:`_reasoning_deltas`; a text finding comes first), and whether a chunk is an
    error or its metadata says one (:func:`error_swallowed_in_200`)."""
    chunks = result.chunks
    if not chunks:  # a hand-built result with thoughts but no chunks
        found = first_back_to_back(_reasoning_deltas(result), _back_to_back(cfg))
        return _ChunkFacts(found, False, False)
    text_rule, reasoning_rule = _back_to_back(cfg), _back_to_back(cfg)
    found = found_r = None
    previous = None  # the text delta before
    position = 0
    previous_r = ""  # the reasoning delta before
    position_r = 0
    error_chunk = said = False
    for chunk in chunks:
        fields = chunk.__dict__  # every field is there; a model's attribute costs more
        delta = fields["content"]
        if delta:
            if delta == previous and found is None:
                found = text_rule.pair(delta, position)
            previous = delta
            position += 1
        if fields["type"] == "error":
            error_chunk = True
        meta = fields["metadata"]
        if meta and not said:
            said = meta.get("finish_reason") == "error" or "originalError" in meta
        thoughts = fields["thoughts"]
        if thoughts and found_r is None:
            if meta and meta.get("repeated_thoughts"):
                continue  # counted_thoughts: sent once, with the chunk before
            for thought in thoughts:
                said_r = thought.content
                if said_r:
                    if previous_r and said_r.startswith(previous_r):
                        found_r = reasoning_rule.pair(previous_r, position_r)
                        if found_r is not None:
                            break
                    previous_r = said_r
                    position_r += 1
    return _ChunkFacts(found if found is not None else found_r, error_chunk, said)


def find_immediate_repetition(
    text: str, config: AnomalyConfig | None = None
) -> tuple[int, int] | None:
    """A passage ``X`` repeated immediately (``XX``) in ``text``: ``(start, len(X))`` or None;
    ``X`` at least ``repetition_min_chars`` long, at most ``repetition_max_period``, with
    ``repetition_min_alnum`` letters or digits (:func:`lab.repetition.immediate_repetition`
    says how it is found, and what it can miss)."""
    cfg = _cfg(config)
    return immediate_repetition(
        text, cfg.repetition_min_chars, cfg.repetition_min_alnum, cfg.repetition_max_period
    )


def _last_attempt_end(result: StreamResult) -> str | None:
    return result.attempts[-1].end_reason if result.attempts else None


def _error_chunk_attempt(result: StreamResult) -> int | None:
    for i, chunk in enumerate(result.chunks):
        if chunk.type == "error" and i < len(result.origins):
            return result.origins[i].attempt
    return None


# --------------------------------------------------------------------------- detectors


def tool_markup_in_content(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """Tool-call markup (MiniMax, Kimi, GLM/Qwen/Hermes, DeepSeek) left in the visible answer."""
    return _TOOL_MARKUP_LEAD in result.text and TOOL_MARKUP_RE.search(result.text) is not None


def tool_markup_in_reasoning(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """Tool-call markup inside reasoning: the model meant to call a tool and no call was made."""
    lead, search = _TOOL_MARKUP_LEAD, TOOL_MARKUP_RE.search
    if lead in result.reasoning and search(result.reasoning) is not None:
        return True
    if lead not in _thought_texts(result):  # one scan in C before a search per thought
        return False
    return any(lead in t.content and search(t.content) for t in result.thoughts)


def markup_leak_kinds(result: StreamResult) -> list[str]:
    """The classes of protocol markup that leaked into ``result`` (in
    :data:`lab.guards.markup.MARKUP_CLASSES` order): what the markup guard saw while the
    stream ran (its ``markup_detected`` events, recovered or not) and what is still in the
    text or reasoning."""
    kinds = {
        e.detail.get("kind")
        for e in result.guard_events
        if e.guard == "markup" and e.detail.get("rule") == "markup_detected"
    }
    kinds.update(markup_kinds(result.text, result.reasoning))
    return [k for k in MARKUP_CLASSES if k in kinds]


def markup_leak(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """Protocol markup (harmony channels, a tool block, special tokens) leaked into the stream."""
    return bool(markup_leak_kinds(result))


def duplicated_deltas(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """The same non-trivial delta sent twice in a row, or a long passage repeated in the answer."""
    if find_duplicated_delta(result, config) is not None:
        return True
    return find_immediate_repetition(result.text, config) is not None


def glued_reasoning_summaries(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """Bold summary headings glued together (``**A****B**``) in reasoning or thoughts."""
    search = GLUED_SUMMARY_RE.search  # both of its forms hold "**": a text without is clean
    if "**" in result.reasoning and search(result.reasoning):
        return True
    if "**" not in _thought_texts(result):  # one scan in C before a search per thought
        return False
    return any("**" in t.content and search(t.content) for t in result.thoughts)


def eof_without_terminator(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """The stream ended with no end evidence ([DONE] / finish reason) and no error: truncated."""
    if recording_cut(result) or limit_reached(result):
        return False  # the recording, or the lab, stops there, not the stream
    facts = result.facts
    if facts.get("unterminated_tail") and (
        facts.get("cut_event_chars")  # the last event was cut inside its data
        or not (facts.get("done_seen") or result.finish_reason or facts.get("message_stop"))
    ):
        # a last event with no blank line after it is a cut only when its data was cut
        # or nothing else says the stream ended
        return True
    if result.error is not None or result.finish_reason:
        return False
    if _last_attempt_end(result) == "stopped_by_guard":
        return False  # the speaker guard ended it on purpose
    if result.facts.get("message_stop"):  # Anthropic's terminal event
        return False
    if result.provider in _cfg(config).no_done_sentinel_providers:
        return True
    return not result.facts.get("done_seen", False)


def recording_cut(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """The recording ends before the stream did: the recorder was killed or interrupted."""
    return _last_attempt_end(result) in CUT_END_REASONS


def limit_reached(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """The lab's own time or byte limit (LabConfig.max_exchange_s / max_exchange_bytes) ended the stream."""
    return _last_attempt_end(result) in LIMIT_END_REASONS


def truncated_tool_arguments(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """A tool call built from cut-short argument JSON (repaired, or kept raw because unparsable).

    Not whole objects glued together: ``tool_arguments_glued`` names those.
    """
    if result.facts.get("cut_tool_use"):  # Anthropic: the stream ended inside a tool_use block
        return True
    if result.facts.get("cut_tool_calls"):  # chat: cut before the call's finish chunk
        return True
    return any(
        fc.arguments_truncated
        or (
            "raw_arguments" in fc.provider_fields
            and not fc.provider_fields.get("arguments_resent")
            and not _glued_arguments(fc.provider_fields)
        )
        for fc in result.function_calls
    )


def _glued_arguments(fields: dict) -> bool:
    raw = fields.get("raw_arguments")
    return isinstance(raw, str) and glued_json_objects(raw) > 0


def tool_arguments_resent(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """A tool call whose argument deltas each resent the arguments so far, appended whole."""
    return any(fc.provider_fields.get("arguments_resent") for fc in result.function_calls)


def tool_arguments_glued(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """A tool call whose arguments are whole JSON objects back to back (``{..}{..}``)."""
    return any(
        not fc.arguments_truncated and _glued_arguments(fc.provider_fields)
        for fc in result.function_calls
    )


def empty_answer_with_reasoning(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """No answer text, no tool call, no refusal and no error, but the model did reason."""
    if result.text.strip() or result.function_calls or result.error is not None:
        return False
    if result.refusal:  # the answer is the refusal (anomaly ``refusal``), not empty
        return False
    return bool(result.reasoning.strip()) or any(t.content.strip() for t in result.thoughts)


def think_tags_after_guards(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """A reasoning tag (``<think>``, ``</think>``, ``<mm:think>``...) is still in the final text."""
    return REASONING_TAG_RE.search(result.text) is not None


def error_in_200_stream(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """Informational: the request failed inside an HTTP-200 stream (status alone says OK)."""
    if result.error is None or not result.attempts or limit_reached(result):
        return False  # no error, or the lab's limit (not the provider) ended the stream
    attempt = _error_chunk_attempt(result)
    info = None
    if attempt is not None:
        info = next((a for a in result.attempts if a.attempt == attempt), None)
    if info is None:
        info = result.attempts[-1]
    return info.status == 200


def error_swallowed_in_200(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """The stream carried an error (finish "error", error object) but the result has no error."""
    if result.error is not None:
        return False
    facts = _chunk_facts(result, _cfg(config))  # an error chunk clears it all
    return not facts.error_chunk and (
        facts.error_said
        or result.finish_reason == "error"
        or ("error" in result.facts.get("finish_reasons", ()))
    )


def parallel_tool_calls_dropped(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """Streamed tool calls the reference never builds (index other than 0, or no tool finish)."""
    return bool(result.facts.get("dropped_tool_calls"))


def reasoning_field_ignored(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """Reasoning arrived in a field this provider's adapter does not read (it is lost)."""
    return bool(result.facts.get("ignored_reasoning_chars"))


def usage_excludes_reasoning(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """The usage's completion tokens leave reasoning out (output_tokens is too low)."""
    return bool(result.facts.get("usage_excludes_reasoning"))


def unhandled_shape(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """The stream carried field paths or event types the adapter does not read."""
    return bool(result.facts.get("unhandled_shapes"))


def hostile_value(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """A number on the wire was not a usable count (NaN, inf, negative, huge, wrong type)."""
    return bool(result.facts.get("hostile_values"))


def dedup_dropped_repeat(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """The dedup guard dropped a whole delta that was whitespace or one repeated word."""
    return any(
        e.guard == "dedup" and e.detail.get("rule") == "full_repeat" and is_word_repeat(e.moved)
        for e in result.guard_events
    )


def length_content_dropped(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """Text on the ``length`` finish chunk was not emitted (the reference drops it)."""
    return bool(result.facts.get("length_content_dropped"))


FINISH_VOCABULARY = frozenset({"stop", "length", "tool_calls", "content_filter", "error"})
"""The lab's finish reasons; anything else passed through as the provider sent it."""


def tool_call_failed(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """The finish reason says the model's tool call failed (Gemini's MALFORMED_FUNCTION_CALL)."""
    return result.finish_reason in FAILED_CALL_FINISHES


def unknown_finish_reason(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """The finish reason is outside the lab's vocabulary, so whether the answer is whole is unknown.

    ``eos``, ``eos_token``, DeepSeek's ``insufficient_system_resource`` ... (not the finish
    reasons of a failed tool call: ``tool_call_failed`` names those)
    """
    finish = result.finish_reason
    return (
        finish is not None
        and finish not in FINISH_VOCABULARY
        and finish not in FAILED_CALL_FINISHES
    )


def choices_mixed(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """Chunks of several choices (``n > 1``) were read as one answer (the reference does)."""
    return bool(result.facts.get("other_choices"))


def tool_calls_merged(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """Several calls (distinct ids) came at one index and the reference glued them into one."""
    return bool(result.facts.get("merged_tool_calls"))


def tool_call_header_resent(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """A call's whole header (id and name) came twice, so the reference doubled its name."""
    return bool(result.facts.get("resent_tool_headers"))


def shown_before_close(result: StreamResult) -> list[tuple[str, str]]:
    """Leaks the think stripper cleaned only in part, as ``(shown, moved)`` pairs.

    A closing reasoning tag with no opening tag (``orphan_close``) makes everything before it
    reasoning, but only what the stripper still held: text it had already emitted as the
    answer stays there. The event's ``offset`` counts the stripper's input, so
    ``result.text[:offset]`` is what the user saw before the tag arrived (text moved
    earlier is not in ``result.text``; each earlier move shifts that window by its length).
    """
    return [(shown, moved) for _, shown, moved in shown_close_events(result)]


def shown_close_events(result: StreamResult) -> list[tuple[int, str, str]]:
    """:func:`shown_before_close` with where each came from: ``(index in
    result.guard_events of the stripper's orphan_close event, shown, moved)``."""
    out: list[tuple[int, str, str]] = []
    removed = 0  # characters of the stripper's input earlier events took out of the text
    for i, e in enumerate(result.guard_events):
        if e.guard != "think_stripper":
            continue
        if e.detail.get("rule") == "orphan_close" and e.offset > removed:
            shown = result.text[: e.offset - removed]
            if shown.strip():
                out.append((i, shown, e.moved))
        removed += len(e.moved)
    return out


def reasoning_shown_before_close(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """Reasoning was already shown as the answer before its closing tag arrived."""
    return bool(shown_before_close(result))


def unhandled_shapes(result: StreamResult) -> dict[str, int]:
    """The field paths / event types behind ``unhandled_shape``, with how often each came."""
    return dict(result.facts.get("unhandled_shapes") or {})


def tool_calls_dropped(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """Tool calls the provider sent were dropped or built in pieces by the reference rule."""
    return bool(result.facts.get("tool_calls_dropped"))


def usage_not_final(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """The stream ended before the final usage report: the usage known is a running count."""
    if result.error is not None:
        return False  # the error says the stream failed; a short count goes with it
    return bool(result.facts.get("provisional_usage"))


def refusal(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """The model refused: its answer is a refusal (``result.refusal``), not text."""
    return bool(result.refusal)


def secret_redacted(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """The response echoed a secret the request sent; the recorder replaced it by a marker."""
    return bool(result.facts.get("secrets_redacted"))


def secret_unchecked(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """The response came in an encoding the lab cannot decode: an echoed secret went unseen."""
    return bool(result.facts.get("secret_unchecked"))


def body_not_as_sent(result: StreamResult, config: AnomalyConfig | None = None) -> bool:
    """An imported body is not the bytes sent: the file's writer replaced undecodable bytes."""
    return bool(result.meta) and result.meta.get("source_body") == "lossy"


# --------------------------------------------------------------------------- registry


class Detector(Protocol):
    """A detector: ``fn(result)`` or ``fn(result, config)`` -> bool."""

    def __call__(self, result: StreamResult, config: AnomalyConfig | None = None) -> bool: ...


DETECTORS: dict[str, Detector] = {
    "tool_markup_in_content": tool_markup_in_content,
    "tool_markup_in_reasoning": tool_markup_in_reasoning,
    "markup_leak": markup_leak,
    "duplicated_deltas": duplicated_deltas,
    "glued_reasoning_summaries": glued_reasoning_summaries,
    "eof_without_terminator": eof_without_terminator,
    "recording_cut": recording_cut,
    "limit_reached": limit_reached,
    "truncated_tool_arguments": truncated_tool_arguments,
    "tool_arguments_glued": tool_arguments_glued,
    "tool_arguments_resent": tool_arguments_resent,
    "empty_answer_with_reasoning": empty_answer_with_reasoning,
    "think_tags_after_guards": think_tags_after_guards,
    "error_in_200_stream": error_in_200_stream,
    "error_swallowed_in_200": error_swallowed_in_200,
    "parallel_tool_calls_dropped": parallel_tool_calls_dropped,
    "reasoning_field_ignored": reasoning_field_ignored,
    "usage_excludes_reasoning": usage_excludes_reasoning,
    "unhandled_shape": unhandled_shape,
    "hostile_value": hostile_value,
    "dedup_dropped_repeat": dedup_dropped_repeat,
    "tool_call_header_resent": tool_call_header_resent,
    "tool_calls_merged": tool_calls_merged,
    "length_content_dropped": length_content_dropped,
    "tool_call_failed": tool_call_failed,
    "unknown_finish_reason": unknown_finish_reason,
    "choices_mixed": choices_mixed,
    "reasoning_shown_before_close": reasoning_shown_before_close,
    "tool_calls_dropped": tool_calls_dropped,
    "usage_not_final": usage_not_final,
    "body_not_as_sent": body_not_as_sent,
    "refusal": refusal,
    "secret_redacted": secret_redacted,
    "secret_unchecked": secret_unchecked,
}
"""Every detector, in the order :func:`detect` reports them."""


def detect(result: StreamResult, config: AnomalyConfig | None = None) -> list[str]:
    """Names of the detectors that fired on ``result``, in :data:`DETECTORS` order.

    >>> from lab.result import StreamResult
    >>> detect(StreamResult(stream_id="s", provider="openrouter", text="<think>x</think>hi",
    ...                     finish_reason="stop"))
    ['think_tags_after_guards']
    """
    cfg = _cfg(config)
    token = _SHARED.set((result, {}))
    try:
        return [name for name, fn in DETECTORS.items() if fn(result, cfg)]
    finally:
        _SHARED.reset(token)


def explain(name: str) -> str:
    """One line saying what detector ``name`` flags (the first line of its docstring)."""
    try:
        fn = DETECTORS[name]
    except KeyError:
        raise KeyError(f"unknown anomaly {name!r}; known: {', '.join(DETECTORS)}") from None
    return (fn.__doc__ or name).strip().splitlines()[0]
