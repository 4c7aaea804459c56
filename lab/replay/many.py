"""Replay every request of a capture (here, on local processes, or into result files), and
compare two configs over the same streams."""

from __future__ import annotations

import difflib
import functools
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

import lab.capture
from lab.capture.errors import CaptureWarning, PartTooLarge
from lab.capture.units import Unit, capture_units, read_columns, release_freed
from lab.config import LabConfig
from lab.replay import _gc, pool
from lab.replay.one import many_replays, replay_request
from lab.result import Results, StreamResult

__all__ = ["compare", "diff_results", "replay"]


def _load_requests(capture_or_path: Any) -> list[Any]:
    source = _open_source(capture_or_path)
    return source.requests() if hasattr(source, "requests") else source


def _open_source(capture_or_path: Any) -> Any:
    """A loaded Capture (from a path or as given), or a list of RecordedRequests."""
    if isinstance(capture_or_path, (str, Path)):
        return lab.capture.open(capture_or_path)
    if hasattr(capture_or_path, "requests"):
        return capture_or_path
    if isinstance(capture_or_path, Sequence):
        return list(capture_or_path)
    raise TypeError(f"cannot replay {type(capture_or_path).__name__}: give a path or a Capture")


def replay(
    capture_or_path: Any,
    *,
    config: Any = None,
    workers: int | None = None,
    progress: bool = False,
    provider: str | None = None,
    out: str | Path | None = None,
    engine: str = "local",
    scheduler: str | None = None,
) -> Results | Any:
    """Replay every logical request of a capture (path, directory, glob or Capture).

    Returns a :class:`~lab.result.Results`: a ``list`` of :class:`StreamResult` in capture
    order that a notebook shows as the summary table. A capture on disk is read one unit at
    a time (:func:`lab.capture.units.capture_units`, as ``out=`` reads it): each unit's
    reads are let go before the next unit is read, so memory holds the results and one
    unit, not the whole capture.

    **workers** > 1 replays on that many processes — this one and ``workers - 1`` children —
    each taking the next share of requests until none is left; results keep capture order
    and equal a serial replay's. Children hand their results back through pickles in a
    private temporary directory (``tempfile.mkdtemp``, removed afterwards); a share a child
    never delivered is replayed in this process, with a ``RuntimeWarning``.
    **progress** shows a progress bar (streams done, over all processes).
    **provider** replays every stream as that provider (``lab replay --provider P``); by
    default each stream's recorded provider, else the one its request shows
    (:func:`lab.infer.infer_provider`), else it is one error row and the rest replay.
    **out** writes the result tables as Parquet files under that directory instead, one
    capture unit at a time (memory bounded by the largest unit), and returns a
    :class:`~lab.replay.files.ResultFiles` saying what it wrote (``.read("streams")``).
    **engine** ``"dask"`` (with ``out``) maps the units over a Dask cluster instead of local
    processes; **scheduler** is None (the active client, else Dask's process pool) or a
    scheduler address (``"tcp://host:8786"``). Optional extra ``[dask]``.
    """
    if engine != "local" and out is None:
        raise ValueError(f"engine={engine!r} writes its results to files: give out=DIR")
    if out is not None:
        from lab.replay.files import replay_to  # pandas and pyarrow: only for out=

        return replay_to(
            capture_or_path,
            out,
            config=config,
            workers=workers,
            progress=progress,
            provider=provider,
            engine=engine,
            scheduler=scheduler,
            replay=replay,
        )
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)):
        raise TypeError(f"workers must be an int or None, not {type(workers).__name__}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1 (or None: this process only), not {workers}")
    cfg = LabConfig.coerce(config)
    if isinstance(capture_or_path, (str, Path)) and not (workers and workers > 1):
        return _replay_units(capture_or_path, cfg, provider, progress)
    source = _open_source(capture_or_path)
    if workers and workers > 1:
        # a Capture's plan holds row numbers only: each process builds its own records
        plan = source if isinstance(source, list) else source.request_plan()
        if len(plan) > 1:
            one = functools.partial(replay_request, config=cfg, provider=provider)
            return Results(pool.replay_parallel(source, plan, one, workers, progress))
    # thousands of long-lived records and results: the collector's older generations would
    # only rescan them (the young one is collected after each stream)
    with _gc.paused(), many_replays():  # one client and fingerprint for every stream
        requests = source if isinstance(source, list) else source.requests()
        bar = pool.progress_bar(len(requests)) if progress else None
        results = Results()
        try:
            for r in requests:
                results.append(replay_request(r, config=cfg, provider=provider))
                if bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
    return results


def _replay_units(
    path: str | Path, cfg: LabConfig, provider: str | None, progress: bool
) -> Results:
    """A capture on disk replayed one unit at a time (:func:`lab.capture.units.capture_units`):
    each unit's tables, reads and records are let go before the next is read, so what stays
    is the results. They come back in capture order (the order of ``lab.capture.open(path)``
    over the whole capture): each result is placed by the sort key of its request's first
    exchange, the key the reader sorts a capture's exchanges by."""
    units = capture_units(path)
    counts = [_requests_in(u) for u in units] if progress else []
    bar = pool.progress_bar(sum(counts)) if progress else None
    keyed: list[tuple[tuple, StreamResult]] = []
    refused: list[PartTooLarge] = []
    try:
        with many_replays():  # one client and fingerprint for every unit's streams
            for i, unit in enumerate(units):
                with warnings.catch_warnings():  # capture_units said them once for the capture
                    warnings.simplefilter("ignore", CaptureWarning)
                    try:
                        capture = lab.capture.open(list(unit.files), select=unit.select)
                    except PartTooLarge as too_large:
                        refused.append(too_large)
                        continue
                for message in capture.metadata["refused_parts"]:
                    warnings.warn(message, CaptureWarning, stacklevel=3)
                keys = _order_keys(capture)
                # thousands of long-lived records and results: nothing for the collector's
                # older generations to find (the young one is collected after each stream)
                with _gc.paused():
                    requests = capture.requests()
                    del capture
                    release_freed()  # the unit's Arrow tables: gone, and given back
                    if bar is not None and len(requests) != counts[i]:  # a journal's, say
                        bar.total += len(requests) - counts[i]
                        bar.refresh()
                    for key, request in zip(keys, requests, strict=True):
                        keyed.append((key, replay_request(request, config=cfg, provider=provider)))
                        if bar is not None:
                            bar.update(1)
                    del requests
    finally:
        if bar is not None:
            bar.close()
    if refused and len(refused) == len(units):  # nothing left to replay: as open() raises
        raise refused[0]
    for exc in refused:  # the other units were replayed
        warnings.warn(f"{exc}. Left out of this replay", CaptureWarning, stacklevel=2)
    keyed.sort(key=lambda pair: pair[0])
    return Results(result for _, result in keyed)


def _order_keys(capture: lab.capture.Capture) -> list[tuple]:
    """Per logical request (``requests()`` order), the sort key of its first exchange: the
    columns ``lab.capture.open`` sorts exchanges by, a missing value after every other."""
    table = capture.streams_table
    columns = [_sortable(table[name]) for name in _ORDER_COLUMNS]
    return [
        tuple((column[row] is None, column[row]) for column in columns)
        for row in (group[0] for group in capture.request_plan())
    ]


def _sortable(column: pa.ChunkedArray) -> list:
    """A column's values as Python values that sort as Arrow sorts them: a timestamp as its
    integer (converting one to ``datetime`` makes pyarrow import pandas)."""
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.int64())
    return column.to_pylist()


_ORDER_COLUMNS = ("started_at", "stream_id", "attempt", "capture_id", "exchange")
"""The columns, in order, that ``lab.capture.open`` sorts a capture's exchanges by."""


def _requests_in(unit: Unit) -> int:
    """How many logical requests a unit holds (its streams tables' ids; no reads touched)."""
    keys: set[tuple[str, str]] = set()
    for f in unit.files:
        if f.name.startswith("streams-"):
            t = read_columns(f, ["capture_id", "stream_id"])
            keys.update(zip(t["capture_id"].to_pylist(), t["stream_id"].to_pylist(), strict=True))
    if unit.select is not None:
        keys = {k for k in keys if (k in unit.select.requests) == unit.select.keep}
    return len(keys)


def compare(
    captures: Any,
    config_a: Any,
    config_b: Any,
    *,
    names: tuple[str, str] = ("a", "b"),
    progress: bool | Any = False,
) -> Any:
    """Replay ``captures`` under two configs; a DataFrame of the streams whose output changed.

    Columns: stream_id, serving_provider, field (text / reasoning / function_calls / error),
    a, b, and a unified diff of the two, its sides labelled with ``names``. One row per
    changed field: count streams with ``df["stream_id"].nunique()``.
    **progress**: True shows a progress bar; a callable is called as ``progress(done, total)``
    after each stream (a notebook widget's hook).
    """
    import pandas as pd

    requests = _load_requests(captures)
    bar = pool.progress_bar(len(requests)) if progress is True else None
    rows: list[dict[str, Any]] = []
    try:
        with many_replays():  # one client for every replay, a's and b's
            for done, req in enumerate(requests, 1):
                a = replay_request(req, config=config_a)
                b = replay_request(req, config=config_b)
                rows += _changed_fields(a, b, names)
                if bar is not None:
                    bar.update(1)
                elif callable(progress):
                    progress(done, len(requests))
    finally:
        if bar is not None:
            bar.close()
    return pd.DataFrame(rows, columns=_COMPARE_COLUMNS)


_COMPARE_COLUMNS = ["stream_id", "serving_provider", "field", "a", "b", "diff"]


def diff_results(
    results_a: Sequence[StreamResult],
    results_b: Sequence[StreamResult],
    *,
    names: tuple[str, str] = ("a", "b"),
) -> Any:
    """:func:`compare` over results already replayed (the same streams in the same order,
    e.g. ``replay(path)`` and ``replay(path, config=tuned)``): no replay runs again."""
    import pandas as pd

    if len(results_a) != len(results_b):
        raise ValueError(
            f"diff_results needs the same streams on both sides: {len(results_a)} results "
            f"against {len(results_b)}"
        )
    rows: list[dict[str, Any]] = []
    for a, b in zip(results_a, results_b, strict=True):
        if a.stream_id != b.stream_id:
            raise ValueError(
                f"diff_results needs the same streams in the same order: {a.stream_id!r} "
                f"against {b.stream_id!r}"
            )
        rows += _changed_fields(a, b, names)
    return pd.DataFrame(rows, columns=_COMPARE_COLUMNS)


def _changed_fields(a: StreamResult, b: StreamResult, names: tuple[str, str]) -> list[dict]:
    """The rows of :func:`compare` for one stream replayed under two configs."""
    rows = []
    for field in ("text", "reasoning"):
        va, vb = getattr(a, field), getattr(b, field)
        if va != vb:
            diff = "\n".join(
                difflib.unified_diff(va.splitlines(), vb.splitlines(), *names, lineterm="", n=1)
            )
            rows.append(_row(a, field, va, vb, diff))
    fa = [f.model_dump(mode="json") for f in a.function_calls]
    fb = [f.model_dump(mode="json") for f in b.function_calls]
    if fa != fb:
        rows.append(_row(a, "function_calls", json.dumps(fa), json.dumps(fb), ""))
    ea = a.error.message if a.error else None
    eb = b.error.message if b.error else None
    if ea != eb:
        rows.append(_row(a, "error", ea, eb, ""))
    return rows


def _row(r: StreamResult, field: str, a: Any, b: Any, diff: str) -> dict[str, Any]:
    return {
        "stream_id": r.stream_id,
        "serving_provider": r.serving_provider,
        "field": field,
        "a": a,
        "b": b,
        "diff": diff,
    }
