"""pandas tables over :class:`~lab.result.StreamResult` lists.

Column names are stable (notebooks and users rely on them); see ``docs/tables.md`` for the
meaning of each and its OpenTelemetry GenAI equivalent where one exists.

- :func:`streams` – one row per logical request.
- :func:`leaks` – one row per guard event that moved or dropped text, and per leaked
  protocol marker the markup guard saw (and did not recover).
- :func:`by_backend` – one row per serving backend.
- :func:`classifiers` – error classifier counts.
- :func:`attempts` – one row per degradation attempt (HTTP exchange).
- :func:`latency` – per serving backend, quantiles of every timing figure with bootstrap
  intervals.
- :func:`gaps` – one row per gap between consecutive reads that carried visible text.
- :func:`trends` – per backend, verdict and period of one long run, with change points.
- :func:`tool_calls` – one row per tool call, checked against the request's tools.
- :func:`scorecard` – one row per serving backend with every verdict, interval and flag
  (:mod:`lab.scorecard`); :func:`trigger_agreement` for sweeps.

What each takes: :func:`streams`, :func:`by_backend`, :func:`classifiers` and
:func:`backend_labels` take the results (a ``list`` of ``StreamResult`` or the
:class:`~lab.result.Results` ``replay()`` returns) **or** the streams table, so a filtered
table works too (``by_backend(st[st.model == m])``). :func:`leaks` and :func:`attempts` need
the results themselves (guard events and attempts are not in the streams table); given a
DataFrame or anything else that is not results, they raise a ``TypeError`` saying so.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from lab.anomalies import detect, shown_close_events
from lab.latency import (
    DEFAULT_STALL_S,
    LATENCY_METRICS,
    TIMING_COLUMNS,
    backend_latency,
    backend_latency_cells,
    content_gaps,
    shared_scans,
    timing_values,
)
from lab.numbers import format_percent, format_rate
from lab.providers import PROVIDERS, get_adapter
from lab.result import StreamResult
from lab.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, DEFAULT_CONFIDENCE, wilson_interval
from lab.trends import CUSUM_PERMUTATIONS, trend_table

__all__ = [
    "ATTEMPT_COLUMNS",
    "GAP_COLUMNS",
    "LATENCY_INPUT_COLUMNS",
    "LEAK_COLUMNS",
    "LEAK_GUARDS",
    "MIN_STREAMS_TO_COMPARE",
    "STREAM_COLUMNS",
    "TOOL_CALL_COLUMNS",
    "attempt_columns",
    "attempts",
    "backend_labels",
    "backend_verdicts",
    "by_backend",
    "classifiers",
    "gap_columns",
    "gaps",
    "latency",
    "latency_cells",
    "leak_columns",
    "leak_kinds",
    "leaks",
    "safety_text",
    "scorecard",
    "shared_scans",
    "stream_columns",
    "streams",
    "tool_calls",
    "trends",
    "trigger_agreement",
    "unserved",
]

LEAK_GUARDS = frozenset({"think_stripper", "spill_guard", "cleanup"})
"""Guards whose events mean reasoning leaked into visible content."""

THINK_LEAK = "think"
"""The ``leak_kind`` of reasoning that leaked into content (:data:`LEAK_GUARDS` moved it);
the other kinds are the markup classes of :mod:`lab.guards.markup`."""

STREAM_COLUMNS = [
    "stream_id",
    "provider",
    "model",
    "serving_provider",
    "leaked",
    "leak_guards",
    "leak_chars",
    "leak_kind",
    "guard_events",
    "classifier",
    "error_type",
    "error_message",
    "safety",
    "retryable",
    "attempts",
    "degradation_path",
    "finish_reason",
    "ttft_ms",
    "duration_ms",
    "n_chunks",
    "text_chars",
    "reasoning_chars",
    "n_tool_calls",
    "tool_names",
    "tool_calls_checked",
    "tool_calls_valid",
    "tool_error_kinds",
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cached_tokens",
    "cost",
    "tokens_per_s",
    *TIMING_COLUMNS,
    "outcome",
    "anomalies",
    "divergence",
    "session",
    "source",
    "response_id",
    "response_model",
    "unhandled_shapes",
    "started_at",
    "capture_id",
]


_NOT_IN_STREAMS = {"leaks": "guard events", "gaps": "per-read gaps"}


SAFETY_NOTABLE_PROBABILITIES = frozenset({"MEDIUM", "HIGH"})
"""A rating not marked ``blocked`` is still named (the ``safety`` column) at these levels."""


def safety_text(ratings: object) -> str | None:
    """The ratings of a blocked stream that say why, for the ``safety`` column: each rating
    marked ``blocked`` or at a :data:`SAFETY_NOTABLE_PROBABILITIES` level, as
    ``CATEGORY PROBABILITY (p 0.93, SEVERITY 0.41) blocked``, joined by ``"; "``."""
    if not isinstance(ratings, list):
        return None
    parts = []
    for r in ratings:
        if not isinstance(r, dict):
            continue
        if not (r.get("blocked") or r.get("probability") in SAFETY_NOTABLE_PROBABILITIES):
            continue
        text = f"{r.get('category') or '?'} {r.get('probability') or '?'}"
        details = []
        if r.get("probability_score") is not None:
            details.append(f"p {r['probability_score']:.2f}")
        if r.get("severity"):
            sev = r["severity"]
            if r.get("severity_score") is not None:
                sev += f" {r['severity_score']:.2f}"
            details.append(sev)
        if details:
            text += f" ({', '.join(details)})"
        if r.get("blocked"):
            text += " blocked"
        parts.append(text)
    return "; ".join(parts) or None


def _need_results(results: object, fn: str) -> Iterable[StreamResult]:
    """``results`` checked to be StreamResults (a clear TypeError instead of an
    AttributeError deep inside when a table, a path or a single result is passed)."""
    if isinstance(results, StreamResult):
        raise TypeError(f"tables.{fn}() takes a list of results; for one result: {fn}([result])")
    if isinstance(results, pd.DataFrame):
        raise TypeError(
            f"tables.{fn}() needs the replay results (a list of StreamResult, e.g. "
            f"replay(...)), not a table: the streams table holds no "
            f"{_NOT_IN_STREAMS.get(fn, 'per-attempt rows')}"
        )
    if isinstance(results, (str, bytes)) or not isinstance(results, Iterable):
        raise TypeError(
            f"tables.{fn}() needs a list of StreamResult (e.g. replay(...)), "
            f"not {type(results).__name__}"
        )
    items = results if isinstance(results, list) else list(results)
    for item in items:
        if not isinstance(item, StreamResult):
            raise TypeError(
                f"tables.{fn}() needs a list of StreamResult (e.g. replay(...)); "
                f"it got a list holding {type(item).__name__}"
            )
    return items


def _stream_table(data: object, fn: str) -> pd.DataFrame:
    """The streams table: ``data`` itself, or :func:`streams` of results."""
    if isinstance(data, pd.DataFrame):
        missing = [c for c in ("stream_id", "provider", "serving_provider") if c not in data]
        if missing:
            raise TypeError(
                f"tables.{fn}() takes the streams table (tables.streams(results)) or the "
                f"results; this DataFrame has no {', '.join(missing)} column"
            )
        return data
    return streams(_need_results(data, fn))


def _fact_text(r: StreamResult, key: str) -> str | None:
    """A string the adapter read off the wire (``facts[key]``), or None."""
    v = r.facts.get(key)
    return v if isinstance(v, str) else None


def _shapes_text(r: StreamResult) -> str | None:
    """The field paths / event types the adapter did not read, ``path (count)``, most seen
    first (``facts["unhandled_shapes"]``; the anomaly ``unhandled_shape``)."""
    shapes = r.facts.get("unhandled_shapes")
    if not shapes:
        return None
    ranked = sorted(shapes.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{path} ({n})" for path, n in ranked)


def _meta_text(r: StreamResult, key: str) -> str | None:
    """A text field of the recorded request's metadata (``session``, ``source``), if any."""
    value = r.meta.get(key) if r.meta else None
    return None if value is None else str(value)


def _duration_ms(r: StreamResult) -> float | None:
    """Last read of the final attempt (read offsets are per attempt, like ``ttft_ms``)."""
    if not r.attempts:
        return None
    times = r.read_t_ns.get(r.attempts[-1].attempt) or []
    return times[-1] / 1e6 if times else None


def _anomalies(r: StreamResult) -> list[str]:
    return detect(r)


def _call_first(r: StreamResult, first: int | None) -> bool:
    """Is the first output chunk (``first``, the one ``ttft_ms`` times) a tool call alone?

    Adapters emit a call once its argument deltas are assembled, so its time is the call's
    completion, not the first generated token: ``duration - ttft`` would be the last few ms
    of the stream and ``tokens_per_s`` thousands.
    """
    if first is None:
        return False
    chunk = r.chunks[first]
    return not (chunk.content or chunk.thoughts)


def leak_kinds(r: StreamResult) -> list[str]:
    """What leaked into ``r``: ``think`` when a reasoning guard moved text out of content or
    when reasoning was shown as the answer before its closing tag came (a ``</think>`` with
    no opening tag after the stripper had emitted what came before it:
    :func:`lab.anomalies.shown_before_close`; a closer in a delta of its own, as local
    servers stream a template that pre-opens ``<think>``, leaves the guard nothing to move,
    and the whole reasoning was the user's answer), then each markup class the markup guard
    saw or that is still in the text (:func:`lab.anomalies.markup_leak_kinds`)."""
    from lab.anomalies import markup_leak_kinds

    think = any(e.guard in LEAK_GUARDS and e.moved for e in r.guard_events) or bool(
        shown_close_events(r)
    )
    return [THINK_LEAK, *markup_leak_kinds(r)] if think else markup_leak_kinds(r)


def _tool_checks(r: StreamResult, tools: object = None) -> list:
    """:func:`lab.toolcheck.check_stream` of ``r`` against ``tools`` or the tools its
    request offered (``facts["request_tools"]``; unknown: name and schema not checked)."""
    from lab.toolcheck import FAILED_CALL_FINISHES, check_stream, tool_schemas

    finish = r.finish_reason
    failed = finish in FAILED_CALL_FINISHES
    if not r.function_calls and finish != "tool_calls" and not failed:
        return []
    offered = tools if tools is not None else r.facts.get("request_tools")
    schemas = tool_schemas(offered) if isinstance(offered, list) else None
    return check_stream(r.function_calls, finish, schemas, _finish_message(r) if failed else None)


def _finish_message(r: StreamResult) -> str | None:
    """The provider's own word on how the stream finished (Gemini's ``finishMessage``,
    kept in its finish chunk's metadata), the last one said; None when none was."""
    for chunk in reversed(r.chunks):
        message = chunk.metadata.get("finishMessage") if chunk.metadata else None
        if isinstance(message, str) and message:
            return message
    return None


TOOL_CALL_COLUMNS = [
    "stream_id",
    "serving_provider",
    "position",
    "name",
    "valid",
    "error_kind",
    "detail",
    "recovered_from",
]


def tool_calls(
    results: Iterable[StreamResult], *, tools: list[dict] | dict[str, list[dict]] | None = None
) -> pd.DataFrame:
    """One row per tool call of every stream, checked against the tools its request
    offered (:mod:`lab.toolcheck`): ``valid``, the first ``error_kind``
    (:data:`lab.toolcheck.TOOL_CALL_ERROR_KINDS`) and its ``detail`` (the failing path of a
    schema violation), ``recovered_from`` the markup class of a call the markup guard
    recovered. A ``tool_calls`` finish with no call is one row with no name
    (``position`` -1).

    **tools** overrides the recorded ones: one list for every stream, or a dict by stream
    id. Needs the results.
    """
    rows = []
    for r in _need_results(results, "tool_calls"):
        offered = tools.get(r.stream_id) if isinstance(tools, dict) else tools
        for c in _tool_checks(r, offered):
            call = r.function_calls[c.position] if c.position >= 0 else None
            rows.append(
                {
                    "stream_id": r.stream_id,
                    "serving_provider": r.serving_provider,
                    "position": c.position,
                    "name": c.name,
                    "valid": c.valid,
                    "error_kind": c.error_kind,
                    "detail": c.detail,
                    "recovered_from": (call.provider_fields or {}).get("recovered_from")
                    if call is not None
                    else None,
                }
            )
    return pd.DataFrame(rows, columns=TOOL_CALL_COLUMNS)


def _columns(names: list[str], rows: list[tuple]) -> dict[str, list]:
    """``rows`` (tuples in ``names`` order) as one list per column."""
    if not rows:
        return {name: [] for name in names}
    return dict(zip(names, map(list, zip(*rows, strict=True)), strict=True))


def _stream_row(r: StreamResult, stall_s: float) -> tuple:
    """One row of :func:`streams`, its cells in :data:`STREAM_COLUMNS` order."""
    guard_events = r.guard_events
    leak_events = [e for e in guard_events if e.guard in LEAK_GUARDS and e.moved]
    kinds = leak_kinds(r)
    checks = _tool_checks(r)
    usage = r.usage
    error = r.error
    first = r.first_output()
    ttft = r.ttft_ms
    duration = _duration_ms(r)
    out_tokens = usage.output_tokens if usage else None
    tps = None
    if (
        out_tokens
        and duration
        and ttft is not None
        and duration > ttft
        and not _call_first(r, first)  # an assembled call arrives last: no generation time
    ):
        tps = out_tokens / ((duration - ttft) / 1000.0)
    return (
        r.stream_id,
        r.provider,
        r.model,
        r.serving_provider,
        bool(kinds),  # leaked
        ",".join(sorted({e.guard for e in leak_events})),  # leak_guards
        sum(len(e.moved) for e in leak_events),  # leak_chars
        ",".join(kinds),  # leak_kind
        len(guard_events),
        r.classifier,
        error.type if error else None,
        error.message if error else None,
        safety_text(r.facts.get("safety_ratings")),
        error.retryable if error else None,
        len(r.attempts),
        r.degradation_path,
        r.finish_reason,
        ttft,
        duration,
        len(r.chunks),  # n_chunks
        len(r.text),  # text_chars
        len(r.reasoning),  # reasoning_chars
        len(r.function_calls),  # n_tool_calls
        ",".join(c.name for c in r.function_calls),  # tool_names
        len(checks),  # tool_calls_checked
        sum(c.valid for c in checks),  # tool_calls_valid
        ",".join(c.error_kind for c in checks if c.error_kind),  # tool_error_kinds
        usage.input_tokens if usage else None,
        out_tokens,
        usage.reasoning_tokens if usage else None,
        usage.cache_read_tokens if usage else None,  # cached_tokens
        # a priced model's cost over no usage at all is 0.0: no usage, no cost known
        r.cost if usage is not None else None,
        tps,  # tokens_per_s
        *timing_values(r, stall_s=stall_s),
        r.outcome,
        ",".join(_anomalies(r)),
        "; ".join(r.divergence),
        _meta_text(r, "session"),
        _meta_text(r, "source"),
        _fact_text(r, "response_id"),
        _fact_text(r, "response_model"),
        _shapes_text(r),  # unhandled_shapes
        r.started_at,
        r.capture_id,
    )


def stream_columns(
    results: Iterable[StreamResult], *, stall_s: float = DEFAULT_STALL_S
) -> dict[str, list]:
    """The cells of :func:`streams` as one list per column (:data:`STREAM_COLUMNS`), before
    pandas: what the result files (:mod:`lab.replay.files`) turn into Arrow columns
    directly. Needs the results."""
    rows = [_stream_row(r, stall_s) for r in _need_results(results, "streams")]
    return _columns(STREAM_COLUMNS, rows)


def streams(
    results: Iterable[StreamResult] | pd.DataFrame, *, stall_s: float = DEFAULT_STALL_S
) -> pd.DataFrame:
    """One row per logical request (columns: :data:`STREAM_COLUMNS`).

    The timing columns (:data:`lab.latency.TIMING_COLUMNS`) come from the recorded reads
    (:func:`lab.latency.stream_timing`); a gap between content reads over ``stall_s``
    seconds (``LabConfig.stall_s``) counts as a stall.

    Given the streams table itself (a DataFrame with these columns), returns it unchanged.
    """
    if isinstance(results, pd.DataFrame):
        return _stream_table(results, "streams")
    rows = [_stream_row(r, stall_s) for r in _need_results(results, "streams")]
    df = pd.DataFrame(rows, columns=STREAM_COLUMNS)
    for col in _NULLABLE_INT_COLUMNS:
        df[col] = df[col].astype("Int64")
    for col in ("tool_calls_checked", "tool_calls_valid"):
        df[col] = df[col].astype("int64")
    for col in FLOAT_COLUMNS:
        df[col] = df[col].astype("float64")
    df["timed"] = df["timed"].astype(bool)
    df["content_reads"] = df["content_reads"].astype("int64")
    df["started_at"] = pd.to_datetime(df["started_at"], utc=True).astype("datetime64[us, UTC]")
    return df


_NULLABLE_INT_COLUMNS = (
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cached_tokens",
    "stalls",
    "first_chunk_chars",
)
FLOAT_COLUMNS = (
    "ttft_ms",
    "duration_ms",
    "cost",
    "tokens_per_s",
    "ttfb_ms",
    "ttft_content_ms",
    "ttft_reasoning_ms",
    "gap_p50_ms",
    "gap_p90_ms",
    "gap_p99_ms",
    "gap_max_ms",
    "stall_ms",
)


LEAK_COLUMNS = [
    "stream_id",
    "serving_provider",
    "attempt",
    "seq",
    "read_seq",
    "offset",
    "t_ms",
    "guard",
    "rule",
    "leak_kind",
    "moved",
    "moved_chars",
]


MARKUP_DETECTED = "markup_detected"
"""The markup guard's rule for a marker it recognized (:mod:`lab.guards.markup`): a
:func:`leaks` row of its own, with nothing moved, unless recovery took the marker out."""


def _leak_rows(results: Iterable[StreamResult]) -> list[tuple]:
    rows = []
    for r in _need_results(results, "leaks"):
        events = r.guard_events
        recovered: set[int] | None = None  # computed at the stream's first detection
        shown: set[int] | None = None  # computed at the stream's first orphan closer
        for i, e in enumerate(events):
            if not e.moved:
                rule = e.detail.get("rule")
                if e.guard == _THINK_GUARD and rule == "orphan_close":
                    # reasoning shown as the answer before this closer: a leak with
                    # nothing moved (the stripper had emitted it all already)
                    if shown is None:
                        shown = {j for j, _, _ in shown_close_events(r)}
                    if i not in shown:
                        continue
                elif e.guard != _MARKUP_GUARD or rule != MARKUP_DETECTED:
                    continue
                else:
                    if recovered is None:
                        recovered = _recovered_detections(events)
                    if i in recovered:
                        continue  # its marker is in a moved event's row already
            read_seq, t_ms = _event_read(r, e.attempt, e.seq)
            rows.append(
                (
                    r.stream_id,
                    r.serving_provider,
                    e.attempt,
                    e.seq,
                    read_seq,
                    e.offset,
                    t_ms,
                    e.guard,
                    e.detail.get("rule"),
                    THINK_LEAK if e.guard in LEAK_GUARDS else e.detail.get("kind"),  # leak_kind
                    e.moved,
                    len(e.moved),  # moved_chars
                )
            )
    return rows


_MARKUP_GUARD = "markup"
_THINK_GUARD = "think_stripper"


def _recovered_detections(events: list) -> set[int]:
    """Indices (in ``events``) of the markup guard's detections whose marker one of its
    moved events took out of the text: same attempt, the moved text spans the marker's
    characters (``offset`` to ``offset + len(marker)``) and holds exactly the marker there.

    The guard notes a detection per marker (rule ``markup_detected``, nothing moved) in
    both modes; under ``recover_markup`` it also notes what it removed or moved, grouped
    by its own units, not per marker: a header and its ``<|message|>`` as one
    ``removed_markup``, a whole tool block as one ``recovered_call``, a stray token as one
    ``removed_markup`` at the token's offset. A detection with no such event (a block that
    did not parse, one past ``max_block_chars``, markers of a harmony ``final`` message or
    after a ``commentary`` boundary) stayed in the text and keeps its row.

    The content and reasoning guards write offsets in their own inputs and the events do
    not say which; requiring the marker itself at that place in the moved text keeps one
    guard's removal from covering the other's detection unless both had the same marker
    at the same offset. One sweep over both lists sorted by offset: linear up to the sort.
    """
    moved = sorted(
        (e.attempt, e.offset, e.offset + len(e.moved), e.moved)
        for e in events
        if e.guard == _MARKUP_GUARD and e.moved
    )
    if not moved:
        return set()
    found = sorted(
        (e.attempt, e.offset, i, e.detail.get("marker") or "")
        for i, e in enumerate(events)
        if e.guard == _MARKUP_GUARD and not e.moved and e.detail.get("rule") == MARKUP_DETECTED
    )
    covered: set[int] = set()
    active: list[tuple[int, int, str]] = []  # (end, start, moved) spanning the offset
    attempt: int | None = None
    j = 0
    for att, offset, i, marker in found:
        if att != attempt:
            attempt, active = att, []
            while j < len(moved) and moved[j][0] < att:
                j += 1
        while j < len(moved) and moved[j][0] == att and moved[j][1] <= offset:
            heapq.heappush(active, (moved[j][2], moved[j][1], moved[j][3]))
            j += 1
        while active and active[0][0] <= offset:
            heapq.heappop(active)
        for _, start, text in active:
            at = offset - start
            if text[at : at + len(marker)] == marker:
                covered.add(i)
                break
    return covered


def leak_columns(results: Iterable[StreamResult]) -> dict[str, list]:
    """The cells of :func:`leaks`, one list per column (:data:`LEAK_COLUMNS`)."""
    return _columns(LEAK_COLUMNS, _leak_rows(results))


def leaks(results: Iterable[StreamResult]) -> pd.DataFrame:
    """One row per guard event that moved or dropped text (where reasoning leaked, etc.),
    one per closing reasoning tag that came after its reasoning had been shown as the
    answer (rule ``orphan_close``, ``moved`` what the stripper still held, often nothing:
    :func:`lab.anomalies.shown_before_close`), and one per protocol marker that leaked and
    stayed where it leaked.

    ``leak_kind`` is ``think`` for reasoning moved out of content or shown before its closer, the markup class
    (``harmony``, ``kimi_tool_section``, ...) for the markup guard's rows, and empty for
    other guards (dedup, speaker, ...).

    The markup guard's rows: under the default config it changes nothing and notes each
    marker it recognizes (rule ``markup_detected``); each is a row with ``moved`` empty and
    ``moved_chars`` 0, at the offset, event and read where the marker was completed. Under
    ``LabConfig.recover_markup`` (:meth:`~lab.config.LabConfig.complete`) the rows are what
    it moved or removed (``removed_markup``, ``harmony_reasoning``, ``recovered_call``, with
    the text), and a detection has a row of its own only where its marker stayed in the text
    (a tool block that did not parse, markers of a harmony ``final`` message): a marker is
    never counted twice. The marker itself is in the guard event's ``detail["marker"]``
    (``r.guard_events``; the columns stay :data:`LEAK_COLUMNS`).

    Needs the results (guard events are not in the streams table).
    """
    return pd.DataFrame(_leak_rows(results), columns=LEAK_COLUMNS)


def _event_read(r: StreamResult, attempt: int, seq: int) -> tuple[int | None, float | None]:
    """The read that completed SSE event ``seq`` of ``attempt`` and its arrival time."""
    best = None
    for o in r.origins:
        if o.attempt == attempt and o.event <= seq:
            best = o
        elif o.attempt == attempt and o.event > seq:
            break
    if best is None:
        return None, None
    times = r.read_t_ns.get(attempt) or []
    t = times[best.read_seq] / 1e6 if 0 <= best.read_seq < len(times) else None
    return best.read_seq, t


_NO_BACKEND_SUFFIX = " (no backend: failed before streaming)"
_UNKNOWN_BACKEND = "(unknown)"


def unserved(labels: pd.Series) -> pd.Series:
    """Which backend labels name no backend: a router's requests that failed before any
    chunk named one (``"openrouter (no backend: failed before streaming)"``) and
    ``"(unknown)"``. :func:`by_backend` keeps those rows for their errors, never compares them.
    """
    text = labels.astype("object").astype(str)
    return (text == _UNKNOWN_BACKEND) | text.str.endswith(_NO_BACKEND_SUFFIX)


def _unnamed_backend(provider: object) -> str | None:
    """Label for streams with no serving backend in the stream."""
    if not isinstance(provider, str):
        return None
    if _names_backend(provider):  # OpenRouter names a backend on every chunk
        return f"{provider}{_NO_BACKEND_SUFFIX}"
    return f"{provider} (direct)"


def _names_backend(provider: str) -> bool:
    """Does this provider's stream name its serving backend (the adapter's ``names_backend``)?"""
    return provider in PROVIDERS and get_adapter(provider).names_backend


def backend_labels(stream_table: pd.DataFrame | Iterable[StreamResult]) -> pd.Series:
    """The serving backend of each stream row, labelled where the stream named none.

    Takes the streams table or the results.

    Direct providers have no separate backend: the provider itself served the stream
    (``"openai (direct)"``). Used by :func:`by_backend` and the per-backend plots alike.
    """
    stream_table = _stream_table(stream_table, "backend_labels")
    return (
        stream_table["serving_provider"]
        .fillna(stream_table["provider"].astype("object").map(_unnamed_backend))
        .fillna(_UNKNOWN_BACKEND)
    )


MIN_STREAMS_TO_COMPARE = 10
"""A backend with fewer streams (or whose rest has fewer) is "too few streams to tell",
whatever its interval says.

The flag compares a backend's interval with the rest's pooled rate taken as exact, which
over-states the evidence of a handful of streams: 1 leak in 1 stream has the interval
20.7–100.0 %, wholly above a rest that leaked 3 times in 61 (4.9 %), yet Fisher's exact test
of the same counts gives p = 4/62 = 0.065."""


def by_backend(
    stream_table: pd.DataFrame | Iterable[StreamResult],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    min_streams: int = MIN_STREAMS_TO_COMPARE,
) -> pd.DataFrame:
    """One row per serving backend: streams, leak and error rates with Wilson intervals,
    classifiers, TTFT, speed, and tool-call validity (``tool_calls`` checked against the
    request's tools, ``tool_calls_valid``, ``tool_call_valid_rate`` and its Wilson
    interval ``_ci_low``/``_ci_high``; NaN where a backend made no call).

    ``leak_rate_ci_low``/``_high`` and ``error_rate_ci_low``/``_high`` are Wilson score
    intervals at ``confidence`` (:func:`lab.stats.wilson_interval`). ``rest_leak_rate`` is
    the pooled rate of every *other* backend (leaked streams over streams, rows in
    rows :func:`unserved` says no backend served left out: nothing could leak there), and ``leak_worse`` is
    True when this backend and its rest served at least ``min_streams`` streams each and
    its whole interval lies above that rate; likewise for errors.
    :func:`backend_verdicts` says the same in words.

    Takes the streams table (filter it first to narrow the view) or the results.
    """
    df = _stream_table(stream_table, "by_backend").copy()
    df["serving_provider"] = backend_labels(df)
    df["errored"] = df["error_type"].notna()
    g = df.groupby("serving_provider", sort=True)
    out = pd.DataFrame(
        {
            "streams": g.size(),
            "leaked": g["leaked"].sum(),
            "leak_rate": g["leaked"].mean(),
            "errors": g["errored"].sum(),
            "error_rate": g["errored"].mean(),
            "median_ttft_ms": g["ttft_ms"].median(),
            "median_tokens_per_s": g["tokens_per_s"].median(),
            "output_tokens": g["output_tokens"].sum(min_count=1),
            "cost": g["cost"].sum(min_count=1),
        }
    )
    for what, count in (("leak", "leaked"), ("error", "errors")):
        _add_interval(out, what, count, confidence, min_streams)
    if "tool_calls_checked" in df:
        calls = g["tool_calls_checked"].sum().astype("int64")
        valid = g["tool_calls_valid"].sum().astype("int64")
        bounds = [
            wilson_interval(int(k), int(n), confidence) for k, n in zip(valid, calls, strict=True)
        ]
        out["tool_calls"] = calls
        out["tool_calls_valid"] = valid
        out["tool_call_valid_rate"] = (valid / calls).where(calls > 0).astype("float64")
        out["tool_call_valid_rate_ci_low"] = [b[0] for b in bounds]
        out["tool_call_valid_rate_ci_high"] = [b[1] for b in bounds]
    cls = df.dropna(subset=["classifier"])
    if len(cls):
        counts = cls.groupby(["serving_provider", "classifier"]).size().unstack(fill_value=0)
        counts.columns = [f"classifier_{c}" for c in counts.columns]
        out = out.join(counts).fillna({c: 0 for c in counts.columns})
        out = out.astype({c: "int64" for c in counts.columns})
    out = out.reset_index().sort_values(["leak_rate", "streams"], ascending=[False, False])
    return out.reset_index(drop=True)


def _add_interval(
    out: pd.DataFrame, what: str, count: str, confidence: float, min_streams: int
) -> None:
    """Insert ``{what}_rate_ci_low/_high``, ``rest_{what}_rate`` and ``{what}_worse`` after
    ``{what}_rate`` (``out`` is indexed by backend label, ``count`` its success column)."""
    n = out["streams"].astype("int64")
    k = out[count].astype("int64")
    bounds = [wilson_interval(int(ki), int(ni), confidence) for ki, ni in zip(k, n, strict=True)]
    low = pd.Series([b[0] for b in bounds], index=out.index, dtype="float64")
    high = pd.Series([b[1] for b in bounds], index=out.index, dtype="float64")
    compared = ~unserved(out.index.to_series()).to_numpy()
    total_k = int(k[compared].sum())
    total_n = int(n[compared].sum())
    rest_n = (total_n - n).where(compared)
    rest = ((total_k - k) / rest_n).where(rest_n > 0)
    enough = (n >= min_streams) & (rest_n >= min_streams)
    worse = (low > rest).fillna(False) & compared & enough
    at = out.columns.get_loc(f"{what}_rate") + 1
    for offset, (name, values) in enumerate(
        (
            (f"{what}_rate_ci_low", low),
            (f"{what}_rate_ci_high", high),
            (f"rest_{what}_rate", rest.astype("float64")),
            (f"{what}_worse", worse.astype(bool)),
        )
    ):
        out.insert(at + offset, name, values)


def backend_verdicts(
    by_backend_table: pd.DataFrame,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    min_streams: int = MIN_STREAMS_TO_COMPARE,
) -> list[str]:
    """Sentences saying which backends leak (and fail) more than the rest with
    ``confidence``, which less, and which have too few streams to tell.

    A backend is *worse* when its Wilson interval lies wholly above the pooled rate of the
    rest (``leak_worse``), *better* when wholly below, and *too few streams to tell* when
    the interval contains the rest's rate, or it or its rest served fewer than
    ``min_streams`` streams.
    Pass the ``confidence`` and ``min_streams`` the table was built with.
    """
    level = format_percent(confidence, 0)
    no_backend = unserved(by_backend_table["serving_provider"])
    rows = by_backend_table[~no_backend]
    sentences: list[str] = []
    for what, count, noun in (("leak", "leaked", "leak"), ("error", "errors", "error")):
        title = f"{noun.capitalize()}s"
        if len(rows) < 2:
            sentences.append(
                f"{title}: {len(rows)} backend(s) in the table, nothing to compare them with."
            )
            continue
        if int(rows[count].sum()) == 0:
            sentences.append(f"{title}: no backend had a single {noun} in {_n(rows)}.")
            continue
        worse, better, unsure = [], [], []
        total = int(rows["streams"].sum())
        for _, r in rows.iterrows():
            rest = r[f"rest_{what}_rate"]
            low, high = r[f"{what}_rate_ci_low"], r[f"{what}_rate_ci_high"]
            desc = (
                f"{r['serving_provider']} {int(r[count])}/{int(r['streams'])}, "
                f"{format_rate(r[f'{what}_rate'], low, high)} vs {format_percent(rest)} "
                "for the rest"
            )
            if bool(r[f"{what}_worse"]):
                worse.append(desc)
            elif high < rest and min(r["streams"], total - r["streams"]) >= min_streams:
                better.append(desc)
            else:
                unsure.append(f"{r['serving_provider']} ({_n(r['streams'])})")
        if worse:
            sentences.append(
                f"{title}: worse than the rest with {level} confidence: {'; '.join(worse)}."
            )
        else:
            sentences.append(f"{title}: no backend is worse than the rest with {level} confidence.")
        if better:
            sentences.append(
                f"{title}: better than the rest with {level} confidence: {'; '.join(better)}."
            )
        if unsure:
            sentences.append(f"{title}: too few streams to tell: {', '.join(unsure)}.")
    alone = by_backend_table[no_backend]
    if len(alone):
        sentences.append(
            f"Not compared: {_n(alone)} that no backend served "
            f"({', '.join(alone['serving_provider'])})."
        )
    return sentences


def _n(streams: pd.DataFrame | int) -> str:
    n = int(streams["streams"].sum()) if isinstance(streams, pd.DataFrame) else int(streams)
    return f"{n} stream" if n == 1 else f"{n} streams"


def classifiers(stream_table: pd.DataFrame | Iterable[StreamResult]) -> pd.DataFrame:
    """Counts of each error classifier (and error type) over the streams.

    Takes the streams table or the results.
    """
    stream_table = _stream_table(stream_table, "classifiers")
    df = stream_table[stream_table["error_type"].notna()]
    if df.empty:
        return pd.DataFrame(columns=["classifier", "error_type", "streams"])
    out = (
        df.assign(classifier=df["classifier"].fillna("(none)"))
        .groupby(["classifier", "error_type"])
        .size()
        .rename("streams")
        .reset_index()
        .sort_values(["streams", "classifier", "error_type"], ascending=[False, True, True])
    )
    return out.reset_index(drop=True)


ATTEMPT_COLUMNS = [
    "stream_id",
    "provider",
    "model",
    "attempt",
    "label",
    "status",
    "end_reason",
    "committed",
    "degradable",
    "error",
    "body_keys",
    "n_reads",
    "final",
]


def _attempt_rows(results: Iterable[StreamResult]) -> list[tuple]:
    rows = []
    for r in _need_results(results, "attempts"):
        last = len(r.attempts) - 1
        for a in r.attempts:
            rows.append(
                (
                    r.stream_id,
                    r.provider,
                    r.model,
                    a.attempt,
                    a.label,
                    a.status,
                    a.end_reason,
                    a.committed,
                    a.degradable,
                    a.error,
                    ",".join(a.body_keys),
                    a.n_reads,
                    a.attempt == last,  # final
                )
            )
    return rows


def attempt_columns(results: Iterable[StreamResult]) -> dict[str, list]:
    """The cells of :func:`attempts`, one list per column (:data:`ATTEMPT_COLUMNS`)."""
    return _columns(ATTEMPT_COLUMNS, _attempt_rows(results))


def attempts(results: Iterable[StreamResult]) -> pd.DataFrame:
    """One row per degradation attempt (HTTP exchange) of every logical request.

    Needs the results (the streams table has one row per request, not per attempt).
    """
    df = pd.DataFrame(_attempt_rows(results), columns=ATTEMPT_COLUMNS)
    df["status"] = df["status"].astype("Int64")
    return df


LATENCY_INPUT_COLUMNS = ("stream_id", "provider", "serving_provider", "timed", *LATENCY_METRICS)
"""The columns of the streams table :func:`latency` reads (``replay(..., out=DIR)`` reads
only these of its streams files to write ``latency.parquet``)."""


def latency(
    stream_table: pd.DataFrame | Iterable[StreamResult],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    n_boot: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> pd.DataFrame:
    """Per serving backend and timing figure: the p50, p90 and p99 over its streams, each
    with a percentile-bootstrap interval at ``confidence`` (``n_boot`` resamples, fixed
    ``seed``: the same table every run), and the mean.

    One row per (backend, metric) for every metric of :data:`lab.latency.LATENCY_METRICS`
    (``ttfb_ms``, ``ttft_ms``, ``ttft_content_ms``, ``gap_p99_ms``, ``stalls``,
    ``first_chunk_chars``, ``tokens_per_s``, ...); columns :data:`lab.latency.LATENCY_COLUMNS`.
    ``n`` is how many of the backend's ``streams`` have the figure (a stream with no
    reasoning has no ``ttft_reasoning_ms``). Streams without per-read timing (imported from
    a cassette or a HAR: ``timed`` False) are left out of every figure and counted in
    ``untimed``; ``table.attrs["notes"]`` says so in a sentence.

    Takes the streams table (filter it first to narrow the view) or the results.
    """
    df = _stream_table(stream_table, "latency").copy()
    df["serving_provider"] = backend_labels(df)
    return backend_latency(df, confidence=confidence, n_boot=n_boot, seed=seed)


def latency_cells(
    serving_provider: Sequence[str | None],
    provider: Sequence[str | None],
    timed: Any,
    figures: dict[str, Any],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    n_boot: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[dict[str, list], dict[str, Any]]:
    """:func:`latency` of plain columns of the streams table, without pandas: the table's
    cells (one list per column of ``lab.latency.LATENCY_COLUMNS``) and its ``attrs``.
    ``serving_provider`` and ``provider`` as lists (None: missing), ``timed`` as bools,
    ``figures`` each of ``lab.latency.LATENCY_METRICS`` as floats (NaN: missing). The same
    table as :func:`latency` of a DataFrame of those columns; ``replay(..., out=DIR)``
    writes ``latency.parquet`` from it."""
    labels = [  # backend_labels, cell by cell
        s if s is not None else (_unnamed_backend(p) or _UNKNOWN_BACKEND)
        for s, p in zip(serving_provider, provider, strict=True)
    ]
    return backend_latency_cells(
        labels, timed, figures, confidence=confidence, n_boot=n_boot, seed=seed
    )


GAP_COLUMNS = ["stream_id", "serving_provider", "attempt", "read_seq", "t_ms", "gap_ms", "stall"]


def gap_columns(
    results: Iterable[StreamResult], *, stall_s: float = DEFAULT_STALL_S
) -> dict[str, list]:
    """The cells of :func:`gaps`, one list per column (:data:`GAP_COLUMNS`).

    Built column by column, one ``zip`` per stream: a fleet has a gap every few chunks,
    and a row tuple per gap, transposed again into columns, took ~40 % more wall time for
    the same instructions (allocations)."""
    sids: list[str] = []
    backends: list[str | None] = []
    attempts: list[int] = []
    seqs: list[int] = []
    t_ns: list[int] = []
    gap_ns: list[int] = []
    for r in _need_results(results, "gaps"):
        found = content_gaps(r)  # (attempt, read_seq, t_ns, gap_ns) per gap
        if found:
            n = len(found)
            sids += [r.stream_id] * n
            backends += [r.serving_provider] * n
            a, s, t, g = zip(*found, strict=True)
            attempts += a
            seqs += s
            t_ns += t
            gap_ns += g
    limit_ms = stall_s * 1000.0
    gap_ms = [g / 1e6 for g in gap_ns]
    return {
        "stream_id": sids,
        "serving_provider": backends,
        "attempt": attempts,
        "read_seq": seqs,
        "t_ms": [t / 1e6 for t in t_ns],
        "gap_ms": gap_ms,
        "stall": [g > limit_ms for g in gap_ms],
    }


def gaps(results: Iterable[StreamResult], *, stall_s: float = DEFAULT_STALL_S) -> pd.DataFrame:
    """One row per gap between consecutive reads that carried visible text (the gaps the
    ``gap_*`` columns of :func:`streams` summarize): the read that ended it, its arrival
    ``t_ms``, ``gap_ms`` and ``stall`` (longer than ``stall_s``). Streams without per-read
    timing have no rows.

    Needs the results (the streams table holds each stream's quantiles, not its gaps).
    """
    cells = gap_columns(results, stall_s=stall_s)
    # no rows: every column object, stall bool, as the table has always been
    df = pd.DataFrame(cells if cells["stall"] else [], columns=GAP_COLUMNS)
    df["stall"] = df["stall"].astype(bool)
    return df


def trends(
    stream_table: pd.DataFrame | Iterable[StreamResult],
    every: str = "1D",
    *,
    alpha: float = 0.05,
    confidence: float = DEFAULT_CONFIDENCE,
    permutations: int = CUSUM_PERMUTATIONS,
    seed: int = BOOTSTRAP_SEED,
) -> pd.DataFrame:
    """Per serving backend, verdict (leak, error and stall rates; TTFB, TTFT, p99 gap,
    tokens/s) and period of ``every`` (a pandas frequency: ``"1D"``, ``"6h"``, ``"7D"``) of
    ``started_at``: the streams, the rate with its Wilson interval or the median with its
    bootstrap interval, and the series' change point by a permutation CUSUM test
    (``change_point`` True on the period it starts in when ``change_p < alpha``; the method
    is in :mod:`lab.trends`). Streams without ``started_at`` are left out.

    Takes the streams table or the results.
    """
    df = _stream_table(stream_table, "trends").copy()
    df["serving_provider"] = backend_labels(df)
    return trend_table(
        df, every, alpha=alpha, confidence=confidence, permutations=permutations, seed=seed
    )


def scorecard(
    stream_table: pd.DataFrame | Iterable[StreamResult],
    *,
    reference: str | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """One row per serving backend with every verdict the lab has (leaks by kind, errors,
    tool-call validity, trigger agreement for sweeps), each with its Wilson interval, the
    rest's rate, a one-sided Fisher exact p-value, its Holm adjustment and a ``_worse``
    flag; ``attrs["sentences"]`` in words. See :mod:`lab.scorecard`.

    Takes the streams table (a sweep's, for trigger agreement) or the results.
    """
    from lab.scorecard import scorecard as _scorecard

    return _scorecard(
        _stream_table(stream_table, "scorecard"), reference=reference, confidence=confidence
    )


def trigger_agreement(
    stream_table: pd.DataFrame,
    *,
    reference: str | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """Per backend, agreement of its tool-call decisions with ``reference`` (or the
    majority) over a sweep's prompts. See :func:`lab.scorecard.trigger_agreement`."""
    from lab.scorecard import trigger_agreement as _agreement

    return _agreement(
        _stream_table(stream_table, "trigger_agreement"),
        reference=reference,
        confidence=confidence,
    )
