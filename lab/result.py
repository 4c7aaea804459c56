"""What one logical request produced: :class:`StreamResult` and its :class:`AttemptInfo` rows.

A result is assembled from the processed chunks the adapter yielded (over every degradation
attempt) plus what the runner observed on the wire. It is plain data: tables, plots, fixtures
and the A/B comparison all read it; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from lab.capture.schema import CUT_END_REASONS, LIMIT_END_REASONS
from lab.model import (
    ChunkOrigin,
    FunctionCall,
    GuardEvent,
    ProcessedChunk,
    ProviderError,
    ThoughtLogEntry,
    Usage,
)

__all__ = [
    "CUT_END_REASONS",
    "LIMIT_END_REASONS",
    "AttemptInfo",
    "ChunkOrigin",
    "Results",
    "StreamResult",
    "counted_thoughts",
]


def counted_thoughts(chunk: ProcessedChunk) -> list[ThoughtLogEntry]:
    """The thoughts of ``chunk`` that count toward :attr:`StreamResult.reasoning`.

    Empty when the chunk repeats the thoughts of the one before it (``metadata
    ["repeated_thoughts"]``: OpenRouter's text/tool split keeps reasoning on both pieces).
    """
    return counted_of(chunk.thoughts, chunk.metadata)


def counted_of(thoughts: list[ThoughtLogEntry], metadata: dict) -> list[ThoughtLogEntry]:
    """:func:`counted_thoughts` of a chunk's ``thoughts`` and ``metadata`` fields (for a
    loop that holds them already)."""
    if thoughts and not (metadata and metadata.get("repeated_thoughts")):
        return thoughts
    return []


@dataclass(slots=True)
class AttemptInfo:
    """One HTTP exchange of a logical request (one rung of the degradation ladder)."""

    attempt: int
    label: str
    status: int | None = None
    error: str | None = None
    """Why the attempt failed (HTTP error message or pre-commit SSE error), if it did."""
    degradable: str | None = None
    """The degradation classification of that failure (``generic_400``, ...), if any."""
    end_reason: str | None = None
    """How the response ended: eof, timeout, read_error, http_error, stopped_by_guard, ...;
    in a replay, ``incomplete`` or ``cancelled`` when the recording was cut there."""
    committed: bool = False
    body_keys: list[str] = field(default_factory=list)
    n_reads: int = 0
    n_events: int = 0

    def __reduce__(self) -> tuple:  # positional: cheaper than the slots state dict both ways
        return AttemptInfo, (
            self.attempt,
            self.label,
            self.status,
            self.error,
            self.degradable,
            self.end_reason,
            self.committed,
            self.body_keys,
            self.n_reads,
            self.n_events,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "label": self.label,
            "status": self.status,
            "error": self.error,
            "degradable": self.degradable,
            "end_reason": self.end_reason,
            "committed": self.committed,
            "body_keys": list(self.body_keys),
            "n_reads": self.n_reads,
            "n_events": self.n_events,
        }


@dataclass(slots=True, repr=False)
class StreamResult:
    """Everything one logical request produced, live or replayed.

    ``chunks`` are the ProcessedChunks in order; ``text`` their visible text; ``reasoning`` all
    reasoning in stream order (each piece once); ``guard_events`` what the guards moved;
    ``attempts`` one row per HTTP exchange; ``outcome`` the processor's continue/stop/compact.

    In a notebook a result shows as HTML (:func:`lab.view.stream_html`: the answer beside the
    reasoning, guard events, attempts, usage, anomalies); ``repr()`` is one short line.
    """

    stream_id: str
    provider: str
    model: str | None = None
    chunks: list[ProcessedChunk] = field(default_factory=list)
    text: str = ""
    reasoning: str = ""
    thoughts: list[ThoughtLogEntry] = field(default_factory=list)
    function_calls: list[FunctionCall] = field(default_factory=list)
    error: ProviderError | None = None
    classifier: str | None = None
    serving_provider: str | None = None
    guard_events: list[GuardEvent] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None
    attempts: list[AttemptInfo] = field(default_factory=list)
    outcome: str | None = None
    cost: float | None = None
    doom_loop: bool = False
    origins: list[ChunkOrigin] = field(default_factory=list)
    """Parallel to ``chunks``: where each chunk came from."""
    read_t_ns: dict[int, list[int]] = field(default_factory=dict)
    """Per attempt: the arrival offset (ns since the request was sent) of every read."""
    facts: dict[str, Any] = field(default_factory=dict)
    """Wire facts the anomaly detectors use: done_seen, unterminated_tail, invalid_json, ..."""
    config: str | None = None
    """Fingerprint of the LabConfig that produced this result."""
    divergence: list[str] = field(default_factory=list)
    """Replay only: where re-running the ladder asked for something the capture did not hold."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Replay only: the recorded request's caller metadata (``session``, ``source``, ...)."""
    started_at: datetime | None = None
    """Wall clock (UTC) when the request's first attempt was sent: the recorded one in a
    replay, the recorder's in a live recording (``Recorder.record``); None otherwise."""
    capture_id: str | None = None
    """The recording the request came from (replay) or went into (``Recorder.record``)."""

    def __repr__(self) -> str:
        error = f"{self.error.type}: {_clip(self.error.message, 60)!r}" if self.error else None
        return (
            f"StreamResult(stream_id={self.stream_id!r}, provider={self.provider!r}, "
            f"model={self.model!r}, serving_provider={self.serving_provider!r}, "
            f"text={_clip(self.text, 60)!r} ({len(self.text)} chars), "
            f"reasoning={len(self.reasoning)} chars, guard_events={len(self.guard_events)}, "
            f"attempts={self.degradation_path!r}, finish_reason={self.finish_reason!r}, "
            f"error={error})"
        )

    def __reduce__(self) -> tuple:
        # positional, as AttemptInfo: a slots dataclass has no __getstate__ of its own, so
        # pickle protocols 0 and 1 refused a result (TypeError) and 2+ went through the state
        return type(self), tuple(getattr(self, f.name) for f in fields(self))

    def _repr_html_(self) -> str:
        from lab.view import stream_html

        return stream_html(self)

    @property
    def refusal(self) -> str:
        """The model's refusal text (OpenAI ``delta.refusal``, the Responses API's refusal
        parts), "" when it did not refuse. The reference keeps it out of ``text`` and
        finishes ``stop``; ``LabConfig.refusal_content_filter`` finishes ``content_filter``."""
        value = self.facts.get("refusal")
        return value if isinstance(value, str) else ""

    @property
    def degradation_path(self) -> str:
        """The attempt labels joined with ``>`` (``default>targeted_drop_min_p``)."""
        return ">".join(a.label for a in self.attempts)

    def chunk_time_ns(self, index: int) -> int | None:
        """Arrival offset of chunk ``index`` (the read that completed its event)."""
        origin = self.origins[index] if index < len(self.origins) else None
        if origin is None or origin.read_seq < 0:
            return None
        times = self.read_t_ns.get(origin.attempt) or []
        return times[origin.read_seq] if origin.read_seq < len(times) else None

    def first_output(self) -> int | None:
        """Index of the first chunk with visible text, reasoning or a tool call, if any."""
        for i, chunk in enumerate(self.chunks):
            if chunk.content or chunk.thoughts or chunk.function_call:
                return i
        return None

    @property
    def ttft_ms(self) -> float | None:
        """Time to the first chunk with visible text, reasoning or a tool call (ms)."""
        i = self.first_output()
        t = None if i is None else self.chunk_time_ns(i)
        return None if t is None else t / 1e6

    def to_dict(self) -> dict[str, Any]:
        """The deterministic part of the result as JSON-ready data (golden fixtures use it).

        Timings are left out: they differ between a live run and its replay.
        """
        return {
            "stream_id": self.stream_id,
            "provider": self.provider,
            "model": self.model,
            "text": self.text,
            "reasoning": self.reasoning,
            "thoughts": [t.model_dump() for t in self.thoughts],
            "function_calls": [f.model_dump(mode="json") for f in self.function_calls],
            "error": None
            if self.error is None
            else self.error.model_dump(mode="json", exclude={"original_error"}),
            "classifier": self.classifier,
            "serving_provider": self.serving_provider,
            "finish_reason": self.finish_reason,
            "usage": None if self.usage is None else self.usage.model_dump(),
            "guard_events": [e.model_dump(mode="json") for e in self.guard_events],
            "attempts": [a.to_dict() for a in self.attempts],
            "outcome": self.outcome,
            "cost": self.cost,
            "n_chunks": len(self.chunks),
            "chunk_types": [c.type for c in self.chunks],
        }


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Results(list):
    """The results of a replay: a plain ``list`` of :class:`StreamResult` (indexing, ``len``,
    iteration, ``==`` and pickling are the list's) that shows as the summary table.

    ``repr()`` and a notebook's HTML view are one line (streams, backends, leaks, errors)
    and the first rows of :func:`lab.tables.streams` (:data:`lab.view.SUMMARY_COLUMNS`).
    Every ``lab.tables`` function accepts it. A slice is a ``Results`` too, and so are
    ``a + b`` (two replays, or a replay and a list of results) and ``a * n``.
    """

    __slots__ = ()

    def __getitem__(self, index: Any) -> Any:
        item = super().__getitem__(index)
        return Results(item) if isinstance(index, slice) else item

    def __add__(self, other: Any) -> Results:
        if not isinstance(other, list):
            return NotImplemented
        return Results(list.__add__(self, other))

    def __radd__(self, other: Any) -> Results:
        if not isinstance(other, list):
            return NotImplemented
        return Results(list.__add__(other, self))

    def __mul__(self, n: Any) -> Results:
        return Results(list.__mul__(self, n))

    __rmul__ = __mul__

    def get(self, stream_id: str) -> StreamResult:
        """The result of stream ``stream_id`` (KeyError, naming a few ids, when absent)."""
        for r in self:
            if r.stream_id == stream_id:
                return r
        known = ", ".join(r.stream_id for r in list.__getitem__(self, slice(0, 3)))
        raise KeyError(f"no stream {stream_id!r} among {len(self)} results (e.g. {known})")

    def __repr__(self) -> str:
        from lab.view import results_text

        return results_text(self)

    def _repr_html_(self) -> str:
        from lab.view import results_html

        return results_html(self)
