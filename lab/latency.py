"""Latency of one stream from its recorded reads (pure: a result in, numbers out).

A capture keeps every network read with its monotonic arrival offset (``chunks.t_ns``, ns
after the request was sent), and a replayed :class:`~lab.result.StreamResult` keeps them per
attempt (``read_t_ns``) with, for every processed chunk, the read that completed its SSE
event (``origins``). That is enough to answer what a tracer's single "time to first token"
cannot: when the first byte came, when the first *visible* token came (a reasoning model
spends seconds on reasoning first), how evenly the answer arrived, whether it stalled, and
whether the first chunk bundled many tokens (langfuse#3046, litellm#7636, aiperf#1279: a
first chunk holding a whole sentence makes TTFT look fine and hides a slow start).

:func:`stream_timing` walks a result's chunks once, in order (linear in the chunks, no
copy of the reads), and returns a :class:`StreamTiming`:

- ``ttfb_ms`` – the first read (first body byte) of the final attempt;
- ``ttft_content_ms`` / ``ttft_reasoning_ms`` – the read that completed the first chunk
  with visible text / with reasoning (``ttft_ms`` of the streams table is the first of
  text, reasoning or a tool call);
- ``gap_p50_ms`` … ``gap_max_ms`` – gaps between consecutive *content reads* (distinct
  reads that completed a chunk with visible text), quantiles by linear interpolation
  (numpy's default, Hyndman & Fan type 7);
- ``stalls`` / ``stall_ms`` – how many of those gaps exceed ``stall_s``
  (``LabConfig.stall_s``, 2 s) and their summed length;
- ``first_chunk_chars`` – characters of visible text the first content read delivered.

All times are ms after the request of their attempt was sent, like ``ttft_ms``.

**Streams without timing.** An exchange imported from a cassette (``meta.timing ==
"none"``) or a HAR (``"headers"``: only the headers' time is real) has no per-read offsets;
replay gives its attempts an empty ``read_t_ns``. Such a stream is ``timed=False`` and
every timing figure is None, so it is left out of every quantile instead of counting as
0 ms; :func:`lab.tables.latency` counts those streams per backend (``untimed``) and says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

import numpy as np

from lab.config import LabConfig
from lab.result import StreamResult, counted_thoughts

__all__ = [
    "DEFAULT_STALL_S",
    "LATENCY_COLUMNS",
    "LATENCY_METRICS",
    "LATENCY_QUANTILES",
    "SCORECARD_METRICS",
    "SCORECARD_QUANTILE_COLUMNS",
    "TIMING_COLUMNS",
    "StreamTiming",
    "backend_latency",
    "backend_latency_cells",
    "content_gaps",
    "latency_columns",
    "quantile",
    "stream_timing",
    "timing_row",
    "timing_values",
]

DEFAULT_STALL_S: float = LabConfig.model_fields["stall_s"].default
"""The default of ``LabConfig.stall_s``: a gap between content reads longer than this is a
stall."""


@dataclass(frozen=True, slots=True)
class StreamTiming:
    """The timing figures of one stream (None where the stream has no such moment)."""

    timed: bool
    """False when the stream's final attempt has reads but no per-read offsets (imported
    without timing); every figure below is then None."""
    ttfb_ms: float | None = None
    """First read of the final attempt (the first body byte)."""
    ttft_content_ms: float | None = None
    """The read that completed the first chunk with visible text."""
    ttft_reasoning_ms: float | None = None
    """The read that completed the first chunk with reasoning."""
    gap_p50_ms: float | None = None
    """Median gap between consecutive content reads."""
    gap_p90_ms: float | None = None
    gap_p99_ms: float | None = None
    gap_max_ms: float | None = None
    content_reads: int = 0
    """Distinct reads that completed a chunk with visible text (gaps = content_reads - 1)."""
    stalls: int | None = None
    """Gaps between content reads longer than ``stall_s``; None when untimed."""
    stall_ms: float | None = None
    """The summed length of those gaps."""
    first_chunk_chars: int | None = None
    """Characters of visible text in the first content read."""


TIMING_COLUMNS = [f.name for f in fields(StreamTiming)]
"""The columns :func:`stream_timing` adds to :func:`lab.tables.streams`, in order."""


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ascending ``sorted_values`` by linear interpolation (numpy's
    default method, Hyndman & Fan type 7).

    >>> quantile([10.0, 20.0, 40.0], 0.5), quantile([10.0, 20.0, 40.0], 0.9)
    (20.0, 36.0)
    """
    n = len(sorted_values)
    if n == 0:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be between 0 and 1, got {q!r}")
    h = (n - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, n - 1)
    low = sorted_values[lo]
    return low + (h - lo) * (sorted_values[hi] - low)


def _final_times(result: StreamResult) -> tuple[list[int], bool]:
    """The read offsets of the final attempt and whether the stream is timed."""
    if not result.attempts:
        return [], True
    final = result.attempts[-1]
    times = result.read_t_ns.get(final.attempt) or []
    return times, bool(times) or final.n_reads == 0


class _Scan:
    """What one pass over a result's chunks found (see :func:`_scan`)."""

    __slots__ = ("content_reads", "first_chars", "first_content_t", "first_reasoning_t", "gaps")

    def __init__(self) -> None:
        self.first_content_t: int | None = None
        self.first_reasoning_t: int | None = None
        self.first_chars = 0
        self.content_reads = 0
        self.gaps: list[tuple[int, int, int, int]] = []


_SHARED: ContextVar[dict[int, tuple[StreamResult, _Scan]] | None] = ContextVar(
    "lab_latency_shared_scans", default=None
)


@contextmanager
def shared_scans() -> Iterator[None]:
    """Within the block, each result's chunks are scanned once however many tables read
    its timing (:func:`stream_timing` for the streams table, :func:`content_gaps` for the
    gaps table): the result files of a replay build both from the same results. Results
    must not change inside the block."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def _scan(result: StreamResult) -> _Scan:
    """One pass over the chunks of ``result``: the first content and reasoning reads, the
    characters of the first content read, and every gap between consecutive content reads
    of one attempt (``(attempt, read_seq, t_ns, gap_ns)``). A chunk no read completed (an
    error before any event) has no time and is passed over. Inside :func:`shared_scans`
    the pass is made once per result."""
    shared = _SHARED.get()
    if shared is not None:
        hit = shared.get(id(result))
        if hit is not None and hit[0] is result:
            return hit[1]
        scan = _scan_chunks(result)
        shared[id(result)] = (result, scan)  # the result kept alive: its id stays its own
        return scan
    return _scan_chunks(result)


def _scan_chunks(result: StreamResult) -> _Scan:
    scan = _Scan()
    gaps = scan.gaps
    first_reasoning_t: int | None = None
    first_attempt = first_seq = -1  # the first content read (attempt, read_seq): none yet
    first_content_t: int | None = None
    first_chars = content_reads = 0
    prev_attempt = prev_seq = -1  # the previous content read: none yet
    previous_t = 0
    read_t_ns = result.read_t_ns
    times: list[int] = []
    times_of = None  # the attempt ``times`` belongs to: looked up when the attempt changes
    for chunk, origin in zip(result.chunks, result.origins, strict=False):
        content = chunk.content
        if not content and (first_reasoning_t is not None or not chunk.thoughts):
            continue
        attempt, read_seq = origin.attempt, origin.read_seq
        if attempt != times_of:
            times, times_of = read_t_ns.get(attempt) or [], attempt
        if read_seq < 0 or read_seq >= len(times):
            continue
        t = times[read_seq]
        if first_reasoning_t is None and chunk.thoughts and counted_thoughts(chunk):
            first_reasoning_t = t
        if not content:
            continue
        if read_seq == prev_seq and attempt == prev_attempt:  # more of the same read
            if read_seq == first_seq and attempt == first_attempt:
                first_chars += len(content)
            continue
        if first_content_t is None:
            first_attempt, first_seq, first_content_t = attempt, read_seq, t
        if read_seq == first_seq and attempt == first_attempt:
            first_chars += len(content)
        content_reads += 1
        if prev_attempt == attempt:
            gaps.append((attempt, read_seq, t, t - previous_t))
        prev_attempt, prev_seq, previous_t = attempt, read_seq, t
    scan.first_reasoning_t = first_reasoning_t
    scan.first_content_t = first_content_t
    scan.first_chars = first_chars
    scan.content_reads = content_reads
    return scan


def content_gaps(result: StreamResult) -> list[tuple[int, int, int, int]]:
    """``(attempt, read_seq, t_ns, gap_ns)`` for every content read after the first of its
    attempt, the gap measured from the previous content read of that attempt (the gaps
    :func:`stream_timing` summarizes). Empty when the stream is untimed."""
    return _scan(result).gaps if _final_times(result)[1] else []


def stream_timing(result: StreamResult, *, stall_s: float = DEFAULT_STALL_S) -> StreamTiming:
    """The timing figures of ``result`` (see the module docstring), one pass over its chunks.

    >>> from lab.replay import replay_sse
    >>> r = replay_sse("openai", [b'data: {"choices":[{"delta":{"content":"Hi"}}]}\\n\\n'])
    >>> stream_timing(r).first_chunk_chars
    2
    """
    if stall_s <= 0:
        raise ValueError(f"stall_s must be > 0, got {stall_s!r}")
    final_times, timed = _final_times(result)
    if not timed:
        return StreamTiming(timed=False)
    scan = _scan(result)
    gaps = sorted(g for _, _, _, g in scan.gaps)
    limit_ns = stall_s * 1e9
    stalled = [g for g in gaps if g > limit_ns]
    return StreamTiming(
        timed=True,
        ttfb_ms=_ms(final_times[0]) if final_times else None,
        ttft_content_ms=_ms(scan.first_content_t),
        ttft_reasoning_ms=_ms(scan.first_reasoning_t),
        gap_p50_ms=_ms(quantile(gaps, 0.5)) if gaps else None,
        gap_p90_ms=_ms(quantile(gaps, 0.9)) if gaps else None,
        gap_p99_ms=_ms(quantile(gaps, 0.99)) if gaps else None,
        gap_max_ms=_ms(gaps[-1]) if gaps else None,
        content_reads=scan.content_reads,
        stalls=len(stalled),
        stall_ms=_ms(sum(stalled)) if stalled else 0.0,
        first_chunk_chars=scan.first_chars if scan.first_content_t is not None else None,
    )


def _ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6


_TIMING_VALUES = attrgetter(*TIMING_COLUMNS)


def timing_values(result: StreamResult, *, stall_s: float = DEFAULT_STALL_S) -> tuple:
    """:func:`stream_timing` as a tuple in :data:`TIMING_COLUMNS` order (a row's cells)."""
    return _TIMING_VALUES(stream_timing(result, stall_s=stall_s))


def timing_row(result: StreamResult, *, stall_s: float = DEFAULT_STALL_S) -> dict[str, Any]:
    """:func:`stream_timing` as a dict keyed by :data:`TIMING_COLUMNS`."""
    return dict(zip(TIMING_COLUMNS, timing_values(result, stall_s=stall_s), strict=True))


# --------------------------------------------------------------------------- per backend

LATENCY_METRICS = (
    "ttfb_ms",
    "ttft_ms",
    "ttft_content_ms",
    "ttft_reasoning_ms",
    "gap_p50_ms",
    "gap_p99_ms",
    "gap_max_ms",
    "stalls",
    "stall_ms",
    "first_chunk_chars",
    "tokens_per_s",
)
"""The per-stream figures :func:`lab.tables.latency` summarizes per backend, in row order."""

LATENCY_QUANTILES = (0.5, 0.9, 0.99)
"""The quantiles of each figure per backend (columns ``p50``, ``p90``, ``p99``)."""

LATENCY_COLUMNS = [
    "serving_provider",
    "metric",
    "streams",
    "untimed",
    "n",
    "p50",
    "p50_ci_low",
    "p50_ci_high",
    "p90",
    "p90_ci_low",
    "p90_ci_high",
    "p99",
    "p99_ci_low",
    "p99_ci_high",
    "mean",
]


def backend_latency(
    frame: Any,
    *,
    confidence: float,
    n_boot: int,
    seed: int,
) -> Any:
    """The per-backend latency table of a streams table whose ``serving_provider`` column
    already holds the backend labels (:func:`lab.tables.latency` makes it)."""
    import pandas as pd

    timed = frame["timed"].astype(bool) if "timed" in frame else pd.Series(True, frame.index)

    def groups() -> Iterator[tuple[str, int, int, list[np.ndarray]]]:
        for backend, group in frame.groupby("serving_provider", sort=True):
            on = timed.loc[group.index].to_numpy()
            untimed = int((~on).sum())
            figures = group[on] if untimed else group
            samples = [_figure_values(figures[metric]) for metric in LATENCY_METRICS]
            yield backend, len(group), untimed, samples

    columns = _latency_cells(groups(), confidence=confidence, n_boot=n_boot, seed=seed)
    out = pd.DataFrame(  # typed even when empty (no stream: the same columns)
        {
            col: pd.Series(
                values,
                dtype=str
                if col in ("serving_provider", "metric")
                else "int64"
                if col in ("streams", "untimed", "n")
                else "float64",
            )
            for col, values in columns.items()
        },
        columns=LATENCY_COLUMNS,
    )
    left = frame.loc[~timed, "serving_provider"].value_counts().sort_index()
    out.attrs.update(_untimed_attrs({str(b): int(n) for b, n in left.items()}))
    out.attrs["untimed"] = int((~timed).sum())
    return out


def _latency_cells(
    groups: Iterable[tuple[str, int, int, list[np.ndarray]]],
    *,
    confidence: float,
    n_boot: int,
    seed: int,
) -> dict[str, list]:
    """The latency table's cells, one list per column of :data:`LATENCY_COLUMNS`, from each
    backend in order: ``(backend, streams, untimed, samples)``, ``samples`` the timed
    streams' values of each of :data:`LATENCY_METRICS` (floats, none missing). The one
    definition of the table's rows: :func:`backend_latency` makes its DataFrame of them and
    ``replay(..., out=DIR)`` its ``latency.parquet`` (:func:`backend_latency_cells`)."""
    from lab.stats import bootstrap_quantile_intervals_of

    columns: dict[str, list] = {col: [] for col in LATENCY_COLUMNS}
    names = [f"p{round(q * 100)}" for q in LATENCY_QUANTILES]
    for backend, streams, untimed, samples in groups:
        intervals = bootstrap_quantile_intervals_of(  # one draw for the figures of one length
            samples, LATENCY_QUANTILES, confidence, n_boot=n_boot, seed=seed
        )
        for metric, values, ci in zip(LATENCY_METRICS, samples, intervals, strict=True):
            columns["serving_provider"].append(backend)
            columns["metric"].append(metric)
            columns["streams"].append(streams)
            columns["untimed"].append(untimed)
            columns["n"].append(len(values))
            points = np.quantile(values, LATENCY_QUANTILES) if len(values) else None
            for i, (name, (low, high)) in enumerate(zip(names, ci, strict=True)):
                columns[name].append(float(points[i]) if points is not None else math.nan)
                columns[f"{name}_ci_low"].append(low)
                columns[f"{name}_ci_high"].append(high)
            columns["mean"].append(float(values.mean()) if len(values) else math.nan)
    return columns


def backend_latency_cells(
    backends: Sequence[str],
    timed: np.ndarray,
    figures: dict[str, np.ndarray],
    *,
    confidence: float,
    n_boot: int,
    seed: int,
) -> tuple[dict[str, list], dict[str, Any]]:
    """:func:`backend_latency` from plain per-stream columns, without pandas: each stream's
    backend label, whether it is timed (bools) and each of :data:`LATENCY_METRICS` as
    floats (NaN: the stream has no such figure). Returns the table's cells
    (:func:`_latency_cells`) and its ``attrs``; the same table as :func:`backend_latency` of
    a DataFrame of those columns."""
    timed = np.asarray(timed, dtype=bool)
    columns = {metric: np.asarray(figures[metric], dtype=float) for metric in LATENCY_METRICS}
    left: dict[str, int] = {}
    # each backend's rows in stream order, grouped by the labels themselves: numpy's ``==``
    # of a label would compare it as a fixed-width string ("a\x00" equal to "a"), and a
    # pass over all streams per backend costs streams x backends
    positions: dict[str, list[int]] = {}
    for i, label in enumerate(backends):
        positions.setdefault(label, []).append(i)

    def groups() -> Iterator[tuple[str, int, int, list[np.ndarray]]]:
        for backend in sorted(positions):
            rows = np.array(positions[backend], dtype=np.intp)
            on = timed[rows]
            untimed = int((~on).sum())
            if untimed:
                left[backend] = untimed
            chosen = rows[on]
            samples = []
            for metric in LATENCY_METRICS:
                values = columns[metric][chosen]
                samples.append(values[~np.isnan(values)])
            yield backend, len(rows), untimed, samples

    cells = _latency_cells(groups(), confidence=confidence, n_boot=n_boot, seed=seed)
    return cells, _untimed_attrs(left)


def _untimed_attrs(left: dict[str, int]) -> dict[str, Any]:
    """The latency table's ``attrs``: ``untimed``, the streams without per-read timing
    (``left``: how many of each backend's, by backend in order), and ``notes``, one
    sentence naming them, if any."""
    n = sum(left.values())
    if not n:
        return {"untimed": 0, "notes": []}
    per = ", ".join(f"{b}: {k}" for b, k in left.items())
    return {
        "untimed": n,
        "notes": [
            f"{n} stream{'s' if n != 1 else ''} without per-read timing (imported from a "
            f"cassette or a HAR) left out of every timing figure ({per})."
        ],
    }


def _figure_values(column: Any) -> np.ndarray:
    """A figure's values as floats, what is not a number left out."""
    import pandas as pd

    if column.dtype.kind == "f":  # the streams table's own: NaN is what is missing
        values = column.to_numpy(dtype=float)
        return values[~np.isnan(values)]
    return pd.to_numeric(column, errors="coerce").dropna().to_numpy(dtype=float)


SCORECARD_METRICS = ("ttfb_ms", "ttft_ms", "ttft_content_ms", "gap_p99_ms", "first_chunk_chars")
"""The timing figures the backend scorecard shows (median and p90, each with its interval)."""
SCORECARD_QUANTILE_COLUMNS = (
    "p50",
    "p50_ci_low",
    "p50_ci_high",
    "p90",
    "p90_ci_low",
    "p90_ci_high",
)
"""The columns of each of :data:`SCORECARD_METRICS` in the scorecard (``ttft_ms_p50``, ...)."""


def latency_columns(table: Any) -> Any:
    """The latency table (:func:`lab.tables.latency`) as one row per backend: for each of
    :data:`SCORECARD_METRICS` the median and the p90, each with its bootstrap interval
    (``ttft_ms_p50``, ``ttft_ms_p50_ci_low``, ``ttft_ms_p50_ci_high``, ``ttft_ms_p90``,
    ``ttft_ms_p90_ci_low``, ``ttft_ms_p90_ci_high``) and ``{metric}_n`` (the streams with
    the figure), indexed by ``serving_provider``; the scorecard joins it."""
    import pandas as pd

    rows = table[table["metric"].isin(SCORECARD_METRICS)]
    out = pd.DataFrame(
        index=pd.Index(sorted(table["serving_provider"].unique()), name="serving_provider")
    )
    for metric in SCORECARD_METRICS:
        part = rows[rows["metric"] == metric].set_index("serving_provider")
        for col in SCORECARD_QUANTILE_COLUMNS:
            out[f"{metric}_{col}"] = part[col].reindex(out.index).astype("float64")
        out[f"{metric}_n"] = part["n"].reindex(out.index, fill_value=0).astype("int64")
    return out
