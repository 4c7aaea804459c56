"""The processor: one model call (a *step*) of normalized chunks -> parts, usage, an outcome.

It reproduces a coding agent's session processor
(docs/reference.md, "9. The session processor") over this lab's
:class:`~lab.model.ProcessedChunk` stream instead of AI-SDK events. It does no I/O and reads
no clock; the only file access in this module is :func:`load_model_table`, which reads the
editable price/limit table ``lab/data/models.json``.

State machine of one :meth:`Processor.process` call (one step)::

    step-start part ──► consume chunks ──┬─ end of iterable ("done" included) ─► finish-step
                                         ├─ "error" chunk / iterator raised ─► halt
                                         └─ (everything else: build parts)
    finish-step: settle usage + cost, write a step-finish part, overflow check
    halt:        no step-finish (unless the provider reported usage in the step, before the
                 error or after it: then one with reason "error", so billed tokens are
                 never dropped); context-length errors ask for compaction, other errors
                 set ``message.error``
    cleanup:     close the open text/reasoning part, mark unfinished tools aborted
    outcome:     doom loop -> "stop"; overflow or context-length error -> "compact";
                 other error -> "stop"; otherwise "continue"

How chunks become parts:

- ``thoughts`` of any chunk (taken before its content) append to the open reasoning part, or
  open one; a change of thought kind (``raw``/``summary``) opens a new part.
- Non-empty ``content`` appends to the open text part, or opens one. Text and reasoning are
  never open at once: switching closes the other, so parts keep stream order. Empty deltas
  create nothing (the AI SDK drops them too).
- A ``function_call`` chunk is a finished call (the adapter has already accumulated and
  parsed its arguments), i.e. the AI SDK's tool-input-start and tool-call at once: the tool
  part is created ``pending`` and moves straight to ``running`` with ``input = args``. The
  lab executes no tools, so nothing completes it: cleanup at the end of the step marks it
  ``error`` ``"Tool execution aborted"`` with ``metadata["interrupted"] = True`` exactly as
  the reference does for unsettled tools. ``completed`` exists in the type for fidelity but
  this processor never produces it. A call id seen twice in one step overwrites its part
  (reference tool-input-start); a missing id gets a synthetic ``call_<n>``.
- ``metadata["usage"]`` (a :class:`~lab.model.Usage`; the last one of the step wins) and
  ``metadata["finish_reason"]`` (or ``finishReason``; the last one wins; ``"unknown"`` when
  the step reported none, AI SDK 5's default) are read from any chunk of the step.
- A ``done`` chunk does not end the step; the end of the iterable does (the step finishes
  when its stream closes: docs/reference.md, "9.1 Stream events"), so the usage chunk an
  OpenAI-format stream sends after its finish chunk is settled with the step. An ``error``
  chunk ends it; of the chunks after it, only their usage is read (billed tokens are never
  dropped).

A text or reasoning part's ``text`` is filled in when the part closes (deltas are buffered
meanwhile); every part is closed before ``process()`` returns.

Times: parts carry ``start``/``end`` as the ordinal of the chunk (counted over the whole
message, starting at 1) at which they opened/closed; ``end`` is None while open.

Usage and cost (docs/reference.md, "9.5 Usage buckets" and "9.6 Cost"): ``Usage`` holds the
provider's inclusive numbers, the processor's buckets are non-overlapping: ``input =
input_tokens - cache_read - cache_write``, ``output = output_tokens - reasoning``, each
clamped at 0. Cost is computed in Decimal per million tokens with reasoning billed at the
output price and cache reads/writes at their own prices (``Price.over_200k`` when input +
cache_read > 200_000); a provider-reported ``Usage.cost`` is authoritative (a reported 0 is
kept; a non-finite one counts as not reported). Unknown model (no price) and no reported
cost -> the step costs 0, as in the reference (a missing price counts as 0);
``message.cost_known`` stays False so tables can still say the cost is unknown.
``message.tokens`` are the last settled step's, ``message.cost`` the sum over steps.

Overflow (docs/reference.md, "9.8 Overflow") is checked at finish-step: ``count = total or
input+output+cache_read+cache_write``; ``usable = input_limit - reserved`` if
``input_limit`` else ``context_limit - max_output``; overflow iff ``count >= usable``. No
model, a context limit of 0 or ``auto_compact=False`` -> never.

Context-length errors: an error chunk is one when it matches the processor's overflow test
(docs/reference.md, "9.9 Overflow errors": message patterns, status 413, code
``context_length_exceeded``) or when ``lab.errors.classify_error`` says ``context_length``.

Doom loop (docs/reference.md, "9.3 The doom loop", widened as DESIGN.md requires): after a
tool part goes ``running``, the last three parts of the *message* other than step boundaries
and reasoning are examined; if they are three non-pending tool parts with the same tool name
and equal arguments (compared as canonical JSON values, so key order is ignored) it is a
doom loop. Because step-start and step-finish parts are skipped, repeats across steps count
(the reference only looks inside one step); a text part between the calls breaks the streak.
Reasoning parts are skipped too (the reference counts them as breakers): a reasoning model
thinks before every call, so otherwise no cross-step repeat could ever be seen. The lab has
no user to ask, so a doom loop is treated as denied: ``message.doom_loop = True`` and the
step returns ``"stop"`` after it has been consumed to its end (so its usage and cost are
still settled).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from lab.model import FunctionCall, ProcessedChunk, ProviderError, Usage

__all__ = [
    "DOOM_LOOP_THRESHOLD",
    "OUTPUT_TOKEN_MAX",
    "TOOL_ABORTED",
    "AssistantMessage",
    "ModelInfo",
    "Outcome",
    "Part",
    "Price",
    "Processor",
    "ProcessorConfig",
    "ReasoningPart",
    "StepFinishPart",
    "StepStartPart",
    "TextPart",
    "ToolPart",
    "is_overflow",
    "load_model_table",
    "max_output_tokens",
    "model_info",
    "normalize_usage",
    "step_cost",
]

Outcome = Literal["continue", "stop", "compact"]

OUTPUT_TOKEN_MAX = 32_000
"""opencode's ``OUTPUT_TOKEN_MAX``: the output cap used for the usable-window computation."""
DOOM_LOOP_THRESHOLD = 3
TOOL_ABORTED = "Tool execution aborted"
"""Error text cleanup gives to tool parts that never finished (reference wording)."""
_OVER_200K_THRESHOLD = 200_000
_MILLION = Decimal(1_000_000)

# --------------------------------------------------------------------------- models & prices


class Price(BaseModel):
    """USD per million tokens. Reasoning tokens are billed at ``output``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = 0
    output: float = 0
    cache_read: float = 0
    cache_write: float = 0
    over_200k: Price | None = None
    """Prices used instead when input + cache_read exceeds 200_000 tokens (strictly)."""


class ModelInfo(BaseModel):
    """What the processor needs to know about a model: limits (tokens) and price."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    context_limit: int
    """Context window; 0 disables the overflow check."""
    input_limit: int | None = None
    """Separate input limit, when the provider has one; then ``reserved`` is subtracted."""
    output_limit: int = 32_000
    price: Price | None = None
    """None = price unknown: cost is None unless the provider reports one."""


_DEFAULT_TABLE_PATH = Path(__file__).parent / "data" / "models.json"
_default_table: dict[str, ModelInfo] | None = None


def load_model_table(path: str | Path | None = None) -> dict[str, ModelInfo]:
    """Read the model table (default: the bundled, editable ``lab/data/models.json``).

    The file is ``{"models": {model_id: ModelInfo fields}}``; keys starting with ``$`` at the
    top level are comments. Raises ``ValueError`` naming the file and entry when it is bad.
    """
    source = Path(path) if path is not None else _DEFAULT_TABLE_PATH
    try:
        raw = json.loads(source.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read model table {source}: {exc}") from exc
    models = raw.get("models") if isinstance(raw, dict) else None
    if not isinstance(models, dict):
        raise ValueError(f"model table {source}: expected an object with a 'models' object")
    table: dict[str, ModelInfo] = {}
    for model_id, entry in models.items():
        try:
            table[model_id] = ModelInfo.model_validate(entry)
        except ValidationError as exc:
            raise ValueError(f"model table {source}: bad entry {model_id!r}: {exc}") from exc
    return table


def model_info(model_id: str, table: dict[str, ModelInfo] | None = None) -> ModelInfo | None:
    """The table entry for ``model_id``, or None for an unknown model.

    Without ``table`` the bundled table is read once and cached for the process. For an
    unknown model pass None to :class:`Processor` (or ``ModelInfo(context_limit=0)``): no
    cost, no overflow check.
    """
    global _default_table
    if table is None:
        if _default_table is None:
            _default_table = load_model_table()
        table = _default_table
    return table.get(model_id)


# --------------------------------------------------------------------------------- parts


@dataclass(slots=True)
class TextPart:
    """Visible text of one contiguous run of text chunks."""

    text: str = ""
    start: int = 0
    """Ordinal of the chunk that opened the part."""
    end: int | None = None
    """Ordinal of the chunk at which it closed; None while open."""
    type: Literal["text"] = "text"


@dataclass(slots=True)
class ReasoningPart:
    """Reasoning of one contiguous run of thoughts of one ``kind``."""

    text: str = ""
    kind: Literal["raw", "summary"] = "raw"
    start: int = 0
    end: int | None = None
    type: Literal["reasoning"] = "reasoning"


ToolState = Literal["pending", "running", "completed", "error"]


@dataclass(slots=True)
class ToolPart:
    """One tool call. ``state``: pending -> running -> completed | error (see module doc)."""

    call_id: str
    tool: str
    state: ToolState = "pending"
    input: dict[str, Any] = field(default_factory=dict)
    output: str | None = None
    error: str | None = None
    start: int | None = None
    """Ordinal of the chunk at which the call started running."""
    end: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    """``interrupted: True`` when cleanup aborted it."""
    function_call: FunctionCall | None = None
    """The call as the adapter produced it (thought signature, provider fields, truncation)."""
    input_key: str = field(default="", repr=False)
    """Canonical JSON of ``input`` (sorted keys): what the doom-loop check compares."""
    type: Literal["tool"] = "tool"


@dataclass(slots=True)
class StepStartPart:
    index: int
    """0-based step number within the message."""
    type: Literal["step-start"] = "step-start"


@dataclass(slots=True)
class StepFinishPart:
    index: int
    reason: str
    tokens: dict[str, int]
    """``input``, ``output``, ``reasoning``, ``cache_read``, ``cache_write`` of this step."""
    total: int | None = None
    """``Usage.total_tokens`` as reported (may be None)."""
    cost: float | None = None
    usage: Usage | None = None
    """The provider's usage exactly as reported, for evidence."""
    type: Literal["step-finish"] = "step-finish"


Part = TextPart | ReasoningPart | ToolPart | StepStartPart | StepFinishPart


def _zero_tokens() -> dict[str, int]:
    return {"input": 0, "output": 0, "reasoning": 0, "cache_read": 0, "cache_write": 0}


@dataclass(slots=True)
class AssistantMessage:
    """What the processor accumulates over the steps of one assistant turn."""

    parts: list[Part] = field(default_factory=list)
    tokens: dict[str, int] = field(default_factory=_zero_tokens)
    """The last settled step's buckets: input, output, reasoning, cache_read, cache_write."""
    total_tokens: int | None = None
    """The last settled step's ``Usage.total_tokens`` as reported."""
    cost: float = 0.0
    """USD summed over steps (a step with no price and no reported cost adds 0)."""
    cost_known: bool = False
    """Did any step have a provider-reported cost or a known price?"""
    error: ProviderError | None = None
    """The error that stopped the message (context-length errors go to ``overflow_error``)."""
    overflow_error: ProviderError | None = None
    """A context-length error that turned into "compact" (reference: not ``error``)."""
    finish_reason: str | None = None
    """Finish reason of the last settled step."""
    doom_loop: bool = False
    steps: int = 0
    """Number of ``process()`` calls (steps) so far."""


# ----------------------------------------------------------------------- usage, cost, window


class ProcessorConfig(BaseModel):
    """Tunable processor behaviour. Defaults are the reference values (DESIGN.md wins where
    it widens the reference: doom loops are counted across steps)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    auto_compact: bool = True
    """``compaction.auto``: False disables overflow detection and context-error compaction."""
    reserved_tokens: int | None = None
    """``compaction.reserved``; None = min(20_000, max output tokens)."""
    output_token_max: int = OUTPUT_TOKEN_MAX
    doom_loop_threshold: int = DOOM_LOOP_THRESHOLD
    doom_loop_across_steps: bool = True
    """False = reference scope: only calls within one step count."""
    compact_on_context_error: bool = True
    """Effect-version behaviour; False = classic: a context-length error stops with an error."""


def _safe(value: float | int | None) -> int:
    if value is None:
        return 0
    if isinstance(value, float) and not math.isfinite(value):
        return 0
    return max(0, int(value))


def normalize_usage(usage: Usage | None) -> tuple[dict[str, int], int | None]:
    """The processor's non-overlapping token buckets from inclusive provider usage."""
    if usage is None:
        return _zero_tokens(), None
    cache_read = _safe(usage.cache_read_tokens)
    cache_write = _safe(usage.cache_write_tokens)
    reasoning = _safe(usage.reasoning_tokens)
    tokens = {
        "input": _safe(_safe(usage.input_tokens) - cache_read - cache_write),
        "output": _safe(_safe(usage.output_tokens) - reasoning),
        "reasoning": reasoning,
        "cache_read": cache_read,
        "cache_write": cache_write,
    }
    return tokens, usage.total_tokens


def _dec(value: float) -> Decimal:
    return Decimal(repr(float(value)))


def step_cost(
    tokens: dict[str, int], price: Price | None, reported: float | None = None
) -> float | None:
    """USD for one step: the provider-reported cost if finite, else computed from ``price``."""
    if reported is not None and math.isfinite(reported):
        return max(0.0, float(reported))
    if price is None:
        return None  # unknown: the message adds 0 (reference) and stays cost_known=False
    if (
        price.over_200k is not None
        and tokens["input"] + tokens["cache_read"] > _OVER_200K_THRESHOLD
    ):
        price = price.over_200k
    total = (
        tokens["input"] * _dec(price.input)
        + tokens["output"] * _dec(price.output)
        + tokens["cache_read"] * _dec(price.cache_read)
        + tokens["cache_write"] * _dec(price.cache_write)
        + tokens["reasoning"] * _dec(price.output)
    )
    cost = float(total / _MILLION)
    return cost if math.isfinite(cost) and cost > 0 else 0.0


def max_output_tokens(model: ModelInfo, cap: int = OUTPUT_TOKEN_MAX) -> int:
    """min(model output limit, cap), or the cap when that minimum is 0."""
    return min(model.output_limit, cap) or cap


def is_overflow(
    tokens: dict[str, int],
    total: int | None,
    model: ModelInfo | None,
    config: ProcessorConfig | None = None,
) -> bool:
    """Does a step with these tokens fill the model's usable window?"""
    config = config or _DEFAULT_CONFIG
    if not config.auto_compact or model is None or model.context_limit == 0:
        return False
    count = total or (
        tokens["input"] + tokens["output"] + tokens["cache_read"] + tokens["cache_write"]
    )
    max_out = max_output_tokens(model, config.output_token_max)
    reserved = (
        config.reserved_tokens if config.reserved_tokens is not None else min(20_000, max_out)
    )
    if model.input_limit:
        usable = max(0, model.input_limit - reserved)
    else:
        usable = max(0, model.context_limit - max_out)
    return count >= usable


_DEFAULT_CONFIG = ProcessorConfig()

# ----------------------------------------------------------------- context-length detection

# The processor's overflow phrasings (docs/reference.md, "9.9 Overflow errors").
_OVERFLOW_RE = re.compile(
    "|".join(
        (
            r"prompt is too long",
            r"input is too long for requested model",
            r"exceeds the context window",
            r"input token count.*exceeds the maximum",
            r"maximum prompt length is \d+",
            r"reduce the length of the messages",
            r"maximum context length is \d+ tokens",
            r"exceeds the limit of \d+",
            r"exceeds the available context size",
            r"greater than the context length",
            r"context window exceeds limit",
            r"exceeded model token limit",
            r"context[_ ]length[_ ]exceeded",
            r"request entity too large",
            r"the request was too long",
            r"maximum tokens for requested operation",
            r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)",
        )
    ),
    re.IGNORECASE | re.DOTALL,
)


def _local_is_context_overflow(error: ProviderError) -> bool:
    if error.status == 413 or error.code == "context_length_exceeded":
        return True
    return _OVERFLOW_RE.search(error.message) is not None


def _is_context_overflow(error: ProviderError) -> bool:
    """The processor's overflow test (its phrasings, status 413, code
    ``context_length_exceeded``) OR ``lab.errors.classify_error`` saying ``context_length``.
    Both, because they are different reference rules: the processor's list has Anthropic's
    "prompt is too long", which the pipeline's classifier lacks, and the classifier may match
    messages the list does not; a replay must never call an error context-length in its
    tables while the processor stops on it."""
    if _local_is_context_overflow(error):
        return True
    from lab.errors import classify_error

    return classify_error(error) == "context_length"


# ------------------------------------------------------------------------------- processor


def _canonical_args(args: Any) -> str:
    try:
        return json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return json.dumps(args, sort_keys=True, separators=(",", ":"), default=repr)


def _trailing_usage(iterator: Any, usage: Usage | None) -> Usage | None:
    """The usage reported after an error chunk, in the rest of the step's stream.

    Nothing else after the error counts (the step halts there), but billed tokens are never
    dropped: OpenRouter's mid-stream 502 comes as an error chunk, a ``finish_reason:
    "error"`` chunk, then the usage (docs/reference.md, "1.2 OpenRouter"). A stream that
    raises while it is drained keeps what was found so far.
    """
    try:
        for chunk in iterator:
            raw = chunk.metadata.get("usage") if chunk.metadata else None
            if raw is not None:
                usage = _coerce_usage(raw) or usage
    except Exception:  # the error chunk already ended the step
        pass
    return usage


def _coerce_usage(value: Any) -> Usage | None:
    if isinstance(value, Usage):
        return value
    if isinstance(value, dict):
        try:
            return Usage.model_validate(value)
        except ValidationError:
            return None
    return None


class Processor:
    """Consumes one step of ``ProcessedChunk``s per :meth:`process` call (see module doc).

    ``model`` None means an unknown model: no price (cost None unless reported) and no
    overflow check. ``.message`` accumulates over steps.
    """

    def __init__(self, model: ModelInfo | None, config: ProcessorConfig | None = None) -> None:
        self.model = model
        self.config = config or _DEFAULT_CONFIG
        self.message = AssistantMessage()
        self._seq = 0
        self._cost_sum: Decimal | None = None
        self._call_counter = 0
        # per-step state
        self._text: TextPart | None = None
        self._reasoning: ReasoningPart | None = None
        self._text_buf: list[str] = []
        self._reasoning_buf: list[str] = []
        self._toolcalls: dict[str, ToolPart] = {}
        self._step_first_part = 0

    # -- the step ---------------------------------------------------------------------------

    def process(self, chunks: Iterable[ProcessedChunk]) -> Outcome:
        """Run one step: consume ``chunks`` to their end or up to an ``error`` chunk."""
        msg = self.message
        parts = msg.parts
        step = msg.steps
        msg.steps += 1
        self._text = None
        self._reasoning = None
        self._toolcalls = {}
        self._step_first_part = len(parts)
        parts.append(StepStartPart(index=step))

        usage: Usage | None = None
        finish: str | None = None
        error: ProviderError | None = None
        doom = False
        seq = self._seq

        iterator = iter(chunks)
        while True:
            try:
                chunk = next(iterator)
            except StopIteration:
                break
            except Exception as exc:  # a stream that throws takes the error path, as upstream
                error = ProviderError(
                    type="unknown",
                    message=f"{type(exc).__name__}: {exc}",
                    retryable=False,
                    original_error=exc,
                )
                break
            seq += 1
            self._seq = seq
            # the fields from the chunk's instance dict (every field is there): a model's
            # attribute goes through BaseModel.__getattr__'s hook, four reads per chunk
            fields = chunk.__dict__
            metadata = fields["metadata"]
            if metadata:
                raw_usage = metadata.get("usage")
                if type(raw_usage) is Usage:  # the adapters' own (_coerce_usage's first case)
                    usage = raw_usage
                elif raw_usage is not None:
                    usage = _coerce_usage(raw_usage) or usage
                # (the usage alone, as on most of a Gemini stream's chunks: no finish reason)
                if raw_usage is None or len(metadata) > 1:
                    reason = metadata.get("finish_reason") or metadata.get("finishReason")
                    if reason:
                        finish = str(reason)
            # (a delta that continues the open part is appended here: _add_text's and
            # _add_reasoning's last step, without their call per chunk)
            thoughts = fields["thoughts"]
            if thoughts:
                for thought in thoughts:
                    said = thought.content
                    if said:
                        part = self._reasoning
                        if part is not None and part.kind == thought.kind:
                            self._reasoning_buf.append(said)
                        else:
                            self._add_reasoning(thought.kind, said, seq)
            text = fields["content"]
            if text:
                if self._text is not None:
                    self._text_buf.append(text)
                else:
                    self._add_text(text, seq)
            kind = fields["type"]
            if kind == "function_call":
                if chunk.function_call is not None and self._add_tool_call(
                    chunk.function_call, seq
                ):
                    doom = True
            elif kind == "error":
                error = chunk.error or ProviderError(
                    type="unknown",
                    message=chunk.content or "error chunk without an error",
                    retryable=False,
                )
                usage = _trailing_usage(iterator, usage)
                break
            # a "done" chunk does not end the step: the step's stream does. The usage of an
            # OpenAI-format stream arrives in a chunk of its own after the finish chunk
            # (stream_options.include_usage), and it is this step's usage (the step finishes
            # when its stream closes).

        needs_compaction = False
        if error is None:
            self._finish_step(step, usage, finish or "unknown")
            needs_compaction = is_overflow(msg.tokens, msg.total_tokens, self.model, self.config)
        else:
            if usage is not None:  # billed before the failure: settle it, never drop it
                self._finish_step(step, usage, finish or "error")
            if (
                self.config.compact_on_context_error
                and self.config.auto_compact
                and _is_context_overflow(error)
            ):
                msg.overflow_error = error
                needs_compaction = True
            else:
                msg.error = error

        self._cleanup(seq)

        if doom:
            msg.doom_loop = True
            return "stop"
        if needs_compaction:
            return "compact"
        if error is not None:
            return "stop"
        return "continue"

    # -- events -----------------------------------------------------------------------------

    # Deltas are buffered in lists and joined when the part closes (``+=`` on an attribute
    # is quadratic over a long stream); cleanup closes every part before process() returns.

    def _add_text(self, text: str, seq: int) -> None:
        if self._text is None:
            self._close_reasoning(seq)
            self._text = TextPart(start=seq)
            self._text_buf = []
            self.message.parts.append(self._text)
        self._text_buf.append(text)

    def _add_reasoning(self, kind: Literal["raw", "summary"], text: str, seq: int) -> None:
        part = self._reasoning
        if part is None or part.kind != kind:
            self._close_text(seq)
            self._close_reasoning(seq)
            self._reasoning = ReasoningPart(kind=kind, start=seq)
            self._reasoning_buf = []
            self.message.parts.append(self._reasoning)
        self._reasoning_buf.append(text)

    def _close_text(self, seq: int) -> None:
        if self._text is not None:
            self._text.text = "".join(self._text_buf)
            self._text.end = seq
            self._text = None

    def _close_reasoning(self, seq: int) -> None:
        if self._reasoning is not None:
            self._reasoning.text = "".join(self._reasoning_buf)
            self._reasoning.end = seq
            self._reasoning = None

    def _add_tool_call(self, call: FunctionCall, seq: int) -> bool:
        """tool-input-start + tool-call; returns True when this call completes a doom loop."""
        self._close_text(seq)
        self._close_reasoning(seq)
        call_id = call.id
        if not call_id:
            self._call_counter += 1
            call_id = f"call_{self._call_counter}"
        part = self._toolcalls.get(call_id)
        if part is None:
            part = ToolPart(call_id=call_id, tool=call.name)
            self._toolcalls[call_id] = part
            self.message.parts.append(part)
        # pending -> running: the chunk carries the whole, parsed call
        part.tool = call.name
        part.input = call.args
        part.input_key = _canonical_args(call.args)
        part.function_call = call
        part.start = seq
        part.end = None
        part.error = None
        part.state = "running"
        return self._is_doom_loop(part)

    def _is_doom_loop(self, current: ToolPart) -> bool:
        threshold = self.config.doom_loop_threshold
        parts = self.message.parts
        floor = 0 if self.config.doom_loop_across_steps else self._step_first_part
        seen = 0
        for i in range(len(parts) - 1, floor - 1, -1):
            part = parts[i]
            kind = part.type
            if kind in ("step-start", "step-finish", "reasoning"):
                continue
            if (
                not isinstance(part, ToolPart)
                or part.tool != current.tool
                or part.state == "pending"
                or part.input_key != current.input_key
            ):
                return False
            seen += 1
            if seen >= threshold:
                return True
        return False

    def _finish_step(self, step: int, usage: Usage | None, reason: str) -> None:
        msg = self.message
        tokens, total = normalize_usage(usage)
        price = self.model.price if self.model is not None else None
        cost = step_cost(tokens, price, usage.cost if usage is not None else None)
        msg.finish_reason = reason
        msg.tokens = tokens
        msg.total_tokens = total
        if cost is not None:
            self._cost_sum = (self._cost_sum or Decimal(0)) + _dec(cost)
            msg.cost = float(self._cost_sum)
            msg.cost_known = True
        msg.parts.append(
            StepFinishPart(
                index=step, reason=reason, tokens=dict(tokens), total=total, cost=cost, usage=usage
            )
        )

    def _cleanup(self, seq: int) -> None:
        self._close_text(seq)
        self._close_reasoning(seq)
        for part in self._toolcalls.values():
            if part.state in ("pending", "running"):
                part.state = "error"
                part.error = TOOL_ABORTED
                part.end = seq
                part.metadata = {**part.metadata, "interrupted": True}
        self._toolcalls = {}
