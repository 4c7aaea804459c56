"""Replay straight to Parquet: one capture unit at a time, result tables as files.

``replay(path, out=DIR)`` (and ``lab replay PATH --out DIR``) reads one self-contained unit
of the capture (:func:`lab.capture.units.capture_units`), replays it, writes its rows of
each result table and lets it go before the next, so memory is bounded by the largest unit,
not by the capture. The files are named after their table and unit::

    DIR/streams-00000.parquet   lab.tables.streams   (one row per logical request)
    DIR/leaks-00000.parquet     lab.tables.leaks     (one row per guard event that moved text
                                                      or leaked marker the markup guard saw)
    DIR/attempts-00000.parquet  lab.tables.attempts  (one row per HTTP exchange)
    DIR/gaps-00000.parquet      lab.tables.gaps      (one row per gap between content reads)
    DIR/latency.parquet         lab.tables.latency   (per backend and timing figure; once)

The per-stream timing figures are columns of ``streams`` (``ttfb_ms``, ``gap_p99_ms``,
``stalls``, ...). After the last unit, ``latency.parquet`` summarizes them per backend: it
is ``lab.tables.latency(read_results(DIR))``, computed from only the streams files' columns
latency reads (:data:`lab.tables.LATENCY_INPUT_COLUMNS`), so its memory is bounded by the
number of streams, not by their reads. Its ``attrs`` (the note on streams without per-read
timing) travel in the file's metadata and :func:`read_results` restores them.

Every file of a table has the same Arrow schema (a column that is empty in one unit is
still typed), so ``pd.read_parquet`` over a table's files, pyarrow datasets and DuckDB
(``read_parquet('DIR/streams-*.parquet')``) read them as one table; glob one table's prefix,
never ``DIR/*.parquet`` (that mixes the tables). :func:`read_results` does it for you.

``workers > 1`` replays units on that many processes; each writes its own units' files, so
only a row count crosses a process boundary.

A run says whether it finished: ``DIR/_lab_run.json`` (:data:`RUN_FILE`) is written
``"running"`` before the first unit (naming the capture's units, the config and the
provider) and ``"complete"`` after the last unit and ``latency.parquet``. A run that was
killed leaves it ``"running"``: :func:`read_results` and ``lab sql --results`` warn
(:class:`IncompleteResults`) that its tables miss streams, and the same replay into the same
``DIR`` resumes it, replaying only the units whose four files are not all there, then
writing ``latency.parquet`` (each file is written under a temporary name and renamed, so a
file that exists is whole). Another capture, config or provider into an unfinished ``DIR``
is refused, as is any replay into a finished one.

This module does not import the replay: :func:`replay_to` is handed the function that
replays a loaded capture (``replay(capture, config=..., provider=...)``), and hands the
function that replays one unit to the process pool or to the Dask engine.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import lab.capture

# the one arrow up out of the replay layer (pyproject's import contracts): the result tables
# these files hold are lab.tables' own. This module is imported only for out= (lab.replay
# imports it there), so lab.tables never loads with an in-memory replay.
from lab import tables
from lab.capture.errors import CaptureWarning, PartTooLarge
from lab.capture.units import Selection, capture_units, release_freed
from lab.config import LabConfig
from lab.replay import _gc
from lab.replay.one import many_replays
from lab.replay.pool import mp_context

__all__ = [
    "LATENCY_FILE",
    "RESULT_TABLES",
    "RUN_FILE",
    "TABLE_FILES",
    "UNIT_TABLES",
    "IncompleteResults",
    "ResultFiles",
    "read_results",
    "replay_to",
    "replay_unit",
    "run_state",
]

ReplayCapture = Callable[..., list]
"""What :func:`replay_to` is handed: ``replay(capture, config=..., provider=...)`` replays a
loaded capture in memory (:func:`lab.replay.replay` without ``out``)."""

UNIT_TABLES = ("streams", "leaks", "attempts", "gaps")
"""The tables ``replay(..., out=DIR)`` writes one file of per capture unit, in this order."""

RESULT_TABLES = (*UNIT_TABLES, "latency")
"""The tables ``replay(..., out=DIR)`` writes, in this order: those of :data:`UNIT_TABLES`,
then ``latency`` over all units' streams (one file, :data:`LATENCY_FILE`)."""

LATENCY_FILE = "latency.parquet"
"""The per-backend latency table of a result directory, written after the last unit."""

TABLE_FILES: dict[str, str] = {
    **{table: f"{table}-*.parquet" for table in UNIT_TABLES},
    "latency": LATENCY_FILE,
}
"""Each result table's file pattern inside a result directory (one file per unit, or the
one ``latency.parquet``)."""

RUN_FILE = "_lab_run.json"
"""The run's state in a result directory: ``{"status": "running" | "complete", "units": N,
...}`` (see the module docstring)."""


class IncompleteResults(UserWarning):
    """The result directory holds an unfinished replay: its tables miss streams."""


_INT = pa.int64()
_FLOAT = pa.float64()
_BOOL = pa.bool_()
_TIME = pa.timestamp("us", tz="UTC")
# Column types that differ from "string" (a column not listed here is a string column).
_TYPES: dict[str, dict[str, pa.DataType]] = {
    "streams": {
        "leaked": _BOOL,
        "retryable": _BOOL,
        **{
            c: _INT
            for c in (
                "leak_chars",
                "guard_events",
                "attempts",
                "n_chunks",
                "text_chars",
                "reasoning_chars",
                "n_tool_calls",
                "tool_calls_checked",
                "tool_calls_valid",
                "input_tokens",
                "output_tokens",
                "reasoning_tokens",
                "cached_tokens",
                "content_reads",
                "stalls",
                "first_chunk_chars",
            )
        },
        **{c: _FLOAT for c in tables.FLOAT_COLUMNS},
        "timed": _BOOL,
        "started_at": _TIME,
    },
    "leaks": {
        **{c: _INT for c in ("attempt", "seq", "read_seq", "offset", "moved_chars")},
        "t_ms": _FLOAT,
    },
    "attempts": {
        **{c: _INT for c in ("attempt", "status", "n_reads")},
        "committed": _BOOL,
        "final": _BOOL,
    },
    "gaps": {
        **{c: _INT for c in ("attempt", "read_seq")},
        **{c: _FLOAT for c in ("t_ms", "gap_ms")},
        "stall": _BOOL,
    },
    "latency": {  # the rest (p50, p50_ci_low, ..., mean) are floats: see _latency_schema
        "serving_provider": pa.string(),
        "metric": pa.string(),
        **{c: _INT for c in ("streams", "untimed", "n")},
    },
}


@dataclass
class ResultFiles:
    """What ``replay(..., out=DIR)`` wrote."""

    out: Path
    units: int = 0
    streams: int = 0  # logical requests replayed
    files: list[Path] = field(default_factory=list)
    resumed: int = 0  # units an earlier, unfinished run into ``out`` had written already

    def read(self, table: str = "streams") -> pd.DataFrame:
        """One result table, all units (see :func:`read_results`)."""
        return read_results(self.out, table)


def _builders(stall_s: float) -> dict[str, Callable[[list], pd.DataFrame]]:
    """Each result table's DataFrame builder (``lab.tables``); the files are written from
    :func:`_column_builders`, these are the reference they equal (and the fallback)."""
    return {
        "streams": functools.partial(tables.streams, stall_s=stall_s),
        "leaks": tables.leaks,
        "attempts": tables.attempts,
        "gaps": functools.partial(tables.gaps, stall_s=stall_s),
    }


def _column_builders(stall_s: float) -> dict[str, Callable[[list], dict[str, list]]]:
    """Each result table's cells as one list per column (``lab.tables.stream_columns``, ...):
    the same rows as :func:`_builders`, without pandas."""
    return {
        "streams": functools.partial(tables.stream_columns, stall_s=stall_s),
        "leaks": tables.leak_columns,
        "attempts": tables.attempt_columns,
        "gaps": functools.partial(tables.gap_columns, stall_s=stall_s),
    }


def _cell(value: Any, kind: pa.DataType) -> Any:
    if value is None or (not isinstance(value, (list, dict, str)) and pd.isna(value)):
        return None
    if kind == _INT:
        return int(value)
    if kind == _FLOAT:
        return float(value)
    if kind == _BOOL:
        return bool(value)
    if kind == _TIME:
        return pd.Timestamp(value).to_pydatetime()
    return value if isinstance(value, str) else str(value)


def _pandas_metadata(columns: list[str], types: dict[str, pa.DataType]) -> bytes:
    """The ``pandas`` schema metadata that makes plain ``pd.read_parquet`` give every
    integer column as a nullable integer (``Int64``), as :mod:`lab.tables` has the token
    counts, instead of ``float64`` wherever a unit holds a null. Built from the fixed column
    types only, so every unit's file carries the same schema."""
    import json

    def numpy_type(kind: pa.DataType) -> str:
        if kind == _INT:
            return "Int64"
        if kind == _FLOAT:
            return "float64"
        return "bool" if kind == _BOOL else "object"

    entries = [
        {
            "name": col,
            "field_name": col,
            "pandas_type": str(types.get(col, pa.string())).replace("string", "unicode"),
            "numpy_type": numpy_type(types.get(col, pa.string())),
            "metadata": None,
        }
        for col in columns
    ]
    meta = {"index_columns": [], "column_indexes": [], "columns": entries}
    return json.dumps(meta, separators=(",", ":")).encode()


def _column(values: pd.Series, kind: pa.DataType) -> pa.Array:
    """One column as ``kind``: whole-column conversions for the shapes the result tables
    have (a numeric, boolean or datetime dtype; strings with nulls), else cell by cell
    (:func:`_cell`), which gives the same array for anything (the tests compare the two)."""
    try:
        if kind == _FLOAT and pd.api.types.is_numeric_dtype(values.dtype):
            return pa.array(values.astype("float64"), type=kind, from_pandas=True)
        if kind == _INT and pd.api.types.is_integer_dtype(values.dtype):
            return pa.array(values.astype("Int64"), type=kind, from_pandas=True)
        if kind == _BOOL and pd.api.types.is_bool_dtype(values.dtype):
            return pa.array(values.astype(bool), type=kind)
        if kind == _TIME and isinstance(values.dtype, pd.DatetimeTZDtype):
            return pa.array(values.dt.tz_convert("UTC").astype("datetime64[us, UTC]"), type=kind)
        if kind == pa.string() and not pd.api.types.is_numeric_dtype(values.dtype):
            cells = values.tolist()
            if all(v is None or type(v) is str for v in cells):
                return pa.array(cells, type=kind)
    except (TypeError, ValueError, pa.ArrowException):
        pass
    return pa.array([_cell(v, kind) for v in values.tolist()], type=kind)


def _schema(table: str, columns: list[str]) -> pa.Schema:
    """The table's fixed column types and metadata (the same schema in every unit)."""
    types = _TYPES[table]
    metadata = {
        b"lab.table": f"results.{table}".encode(),
        b"pandas": _pandas_metadata(columns, types),
    }
    return pa.schema([pa.field(c, types.get(c, pa.string())) for c in columns], metadata=metadata)


def _arrow(table: str, df: pd.DataFrame) -> pa.Table:
    """``df`` with the table's fixed column types (the same schema in every unit)."""
    types = _TYPES[table]
    arrays = [_column(df[col], types.get(col, pa.string())) for col in df.columns]
    return pa.Table.from_arrays(arrays, schema=_schema(table, list(df.columns)))


_NONE = type(None)
_PLAIN: dict[pa.DataType, frozenset[type]] = {
    _INT: frozenset({int, _NONE}),
    _FLOAT: frozenset({float, int, _NONE}),
    _BOOL: frozenset({bool, _NONE}),
    _TIME: frozenset({_NONE}),  # a datetime is checked for its time zone (_plain)
    pa.string(): frozenset({str, _NONE}),
}
"""The Python types each column type converts straight from the cells (the table's
DataFrame gives the same array for them); a cell of another type sends the table down the
DataFrame path."""


def _plain(values: list, kind: pa.DataType) -> pa.Array | None:
    """``values`` as an array of ``kind`` straight from the cells, or None when a cell is not
    of a type :data:`_PLAIN` takes (or does not convert): the DataFrame path decides."""
    seen = set(map(type, values))
    if kind == _TIME:
        if datetime in seen and not any(v.tzinfo is None for v in values if v is not None):
            seen.discard(datetime)  # aware: pandas and Arrow agree on the UTC instant
    if not seen <= _PLAIN[kind]:
        return None
    try:  # from_pandas: a NaN float is null, as in the DataFrame path
        return pa.array(values, type=kind, from_pandas=True)
    except (TypeError, ValueError, OverflowError, pa.ArrowException):
        return None


def _arrow_columns(table: str, columns: dict[str, list]) -> pa.Table | None:
    """The table from its cells (:func:`_column_builders`) with the fixed column types,
    equal to :func:`_arrow` of its DataFrame; None when a cell needs the DataFrame path."""
    types = _TYPES[table]
    arrays = []
    for col, values in columns.items():
        array = _plain(values, types.get(col, pa.string()))
        if array is None:
            return None
        arrays.append(array)
    return pa.Table.from_arrays(arrays, schema=_schema(table, list(columns)))


RESULT_COMPRESSION = "snappy"
"""The codec of the result files (Parquet's default). They are summary tables, a few
hundred bytes a stream: zstd made them ~10 % smaller but cost three times as much CPU to
write (its set-up per column chunk was most of writing a unit's four files). Captures stay
zstd (:mod:`lab.capture.writer`), where the bytes are."""


def _write_parquet(data: pa.Table, path: Path) -> None:
    """``data`` as a Parquet file at ``path`` (:data:`RESULT_COMPRESSION`), written whole
    under a temporary name and renamed (a file that exists is whole). Encoded into memory
    first and written with one call: pyarrow's own file output costs several times the
    encoding of a small table."""
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink, compression=RESULT_COMPRESSION)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(sink.getvalue())
    os.replace(tmp, path)


def _write_unit(results: list, out: Path, index: int, config: Any) -> list[Path]:
    """The unit's four table files from its results, built under the collector's pause (as
    the replay that made the results runs: :func:`lab.replay._gc.paused`): the results and
    the cells live until the files are written, so the older generations would only rescan
    them (at 4,000 streams, a tenth of the run's CPU went to such passes)."""
    written = []
    with _gc.paused(), tables.shared_scans():  # shared: streams and gaps read one scan
        frames = _builders(config.stall_s)
        for table, build in _column_builders(config.stall_s).items():
            data = _arrow_columns(table, build(results))
            if data is None:  # an odd cell: the DataFrame's conversion, whatever it holds
                data = _arrow(table, frames[table](results))
            path = out / f"{table}-{index:05d}.parquet"
            _write_parquet(data, path)
            written.append(path)
    return written


def replay_unit(
    files: Sequence[Path],
    out: Path,
    index: int,
    config: Any,
    provider: str | None = None,
    *,
    replay: ReplayCapture,
    select: Selection | None = None,
) -> tuple[int, list]:
    """Open one unit (its **files**, only the requests **select** names when given),
    replay it with **replay**, write its tables; returns (requests, files written)."""
    refused: list[str] = []
    with warnings.catch_warnings():  # capture_units said it once for the whole capture
        warnings.simplefilter("ignore", CaptureWarning)
        capture: lab.capture.Capture | None = None
        try:
            capture = lab.capture.open(list(files), select=select)
            refused += capture.metadata["refused_parts"]
        except PartTooLarge as exc:  # nothing else in the unit: an empty one
            refused.append(f"{exc}. Left out of this replay; the other units are replayed")
    for message in refused:  # capture_units cannot see these: said here, once per unit
        warnings.warn(message, CaptureWarning, stacklevel=2)
    # no collection per stream: the results are dropped when the files are written, and
    # freed by their counts (see lab.replay._gc.paused's defer)
    with _gc.paused(defer=True):
        results = [] if capture is None else replay(capture, config=config, **_family(provider))
        del capture
        release_freed()  # the unit's Arrow tables: gone, and given back
        written = _write_unit(results, out, index, LabConfig.coerce(config))
        streams = len(results)
        del results
    return streams, written


def _unit_files(out: Path, index: int) -> list[Path]:
    return [out / f"{table}-{index:05d}.parquet" for table in UNIT_TABLES]


def _latency_schema(columns: list[str]) -> pa.Schema:
    types = _TYPES["latency"]
    return pa.schema([pa.field(c, types.get(c, _FLOAT)) for c in columns])


def _write_latency(out: Path) -> Path:
    """``latency.parquet``: :func:`lab.tables.latency` over the streams of every unit, read
    from the streams files with only the columns it needs (memory bounded by the number of
    streams and those columns, never by the reads). Written under a temporary name and
    renamed, like the unit files; its ``attrs`` go in the file's metadata.

    Built without pandas (:func:`_latency_arrow`: the same table, schema and metadata) when
    the streams files hold the column types the lab writes, else through the DataFrame."""
    data = _latency_arrow(out)
    if data is None:
        streams = _read_unit_table(out, "streams", list(tables.LATENCY_INPUT_COLUMNS))
        table = tables.latency(streams)
        data = pa.Table.from_pandas(
            table, schema=_latency_schema(list(table.columns)), preserve_index=False
        )
        data = _with_attrs(data, table.attrs)
    path = out / LATENCY_FILE
    _write_parquet(data, path)
    return path


def _with_attrs(data: pa.Table, attrs: dict[str, Any]) -> pa.Table:
    return data.replace_schema_metadata(
        {
            **(data.schema.metadata or {}),
            b"lab.table": b"results.latency",
            b"lab.attrs": json.dumps(attrs, sort_keys=True).encode(),
        }
    )


def _latency_arrow(out: Path) -> pa.Table | None:
    """``latency.parquet``'s table straight from the streams files' Arrow columns
    (:func:`lab.latency.backend_latency_cells`), or None when a column is not of a type the
    lab writes (a file from elsewhere: the DataFrame path decides)."""
    files = sorted(out.glob("streams-*.parquet"))
    if not files:
        raise FileNotFoundError(f"{out}: no streams-*.parquet (write them with replay(out=...))")
    wanted = list(tables.LATENCY_INPUT_COLUMNS)
    metrics = list(tables.LATENCY_METRICS)
    parts = []
    for f in files:
        with pq.ParquetFile(f) as pf:  # closed now, not when collected
            parts.append(pf.read(columns=wanted))
    if any(part.schema.names != wanted for part in parts):
        return None
    streams = pa.concat_tables(parts)
    col = streams.column
    if not all(
        _plain_type(col(name).type, kind)
        for name, kind in (("provider", "text"), ("serving_provider", "text"), ("timed", "bool"))
    ) or not all(_plain_type(col(m).type, "number") for m in metrics):
        return None
    # a null-typed column (every value missing) is cast first: fill_null refuses False there
    timed = pc.fill_null(pc.cast(col("timed"), pa.bool_()), False).to_numpy(zero_copy_only=False)
    figures = {  # unsafe: an int past 2**53 rounds to the nearest float, as pandas has it
        m: pc.cast(col(m), pa.float64(), safe=False).to_numpy(zero_copy_only=False) for m in metrics
    }
    cells, attrs = tables.latency_cells(
        col("serving_provider").to_pylist(), col("provider").to_pylist(), timed, figures
    )
    schema = _latency_schema(list(cells))
    schema = schema.with_metadata({b"pandas": _latency_pandas_metadata(attrs)})
    arrays = [  # from_pandas: NaN is null, as in the DataFrame's file
        pa.array(values, type=schema.field(c).type, from_pandas=True) for c, values in cells.items()
    ]
    return _with_attrs(pa.Table.from_arrays(arrays, schema=schema), attrs)


def _plain_type(kind: pa.DataType, want: str) -> bool:
    if pa.types.is_null(kind):  # every value missing
        return True
    if want == "text":
        return pa.types.is_string(kind) or pa.types.is_large_string(kind)
    if want == "bool":
        return pa.types.is_boolean(kind)
    return pa.types.is_floating(kind) or pa.types.is_integer(kind)


def _latency_pandas_metadata(attrs: dict[str, Any]) -> bytes:
    """The ``pandas`` schema metadata ``pa.Table.from_pandas`` gives the latency table: it
    depends on the table's dtypes and its ``attrs`` (pyarrow keeps them there, as
    ``attributes``), not on its rows. Taken once from an empty table of those dtypes, with
    these ``attrs`` put in; a file built without pandas then reads back as one built from
    the DataFrame (a test compares the two files' metadata byte for byte)."""
    meta = dict(_latency_pandas_template())
    if "attributes" in meta:  # this pyarrow keeps a frame's attrs in its metadata
        meta["attributes"] = attrs
    return json.dumps(meta).encode("utf8")


@functools.cache
def _latency_pandas_template() -> dict[str, Any]:
    empty = tables.latency(pd.DataFrame(columns=list(tables.LATENCY_INPUT_COLUMNS)))
    data = pa.Table.from_pandas(
        empty, schema=_latency_schema(list(empty.columns)), preserve_index=False
    )
    meta: dict[str, Any] = json.loads((data.schema.metadata or {})[b"pandas"])
    return meta


def run_state(out: str | Path) -> dict[str, Any] | None:
    """The run state of a result directory (:data:`RUN_FILE`), with ``units_written`` (units
    whose four files are all there) and ``latency_written`` (``latency.parquet`` is there:
    a run is ``"complete"`` only after it); ``None`` when ``out`` holds none (a directory
    written before runs said their state, or not a result directory)."""
    path = Path(out) / RUN_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: unreadable run state ({exc}); give a new directory") from None
    if not isinstance(state, dict) or state.get("status") not in ("running", "complete"):
        raise ValueError(f"{path}: not a run state of lab replay; give a new directory")
    units = int(state.get("units", 0))
    state["units_written"] = sum(
        all(f.is_file() for f in _unit_files(Path(out), i)) for i in range(units)
    )
    state["latency_written"] = (Path(out) / LATENCY_FILE).is_file()
    return state


def warn_if_incomplete(out: str | Path) -> None:
    """Warn (:class:`IncompleteResults`) when ``out`` holds an unfinished replay."""
    state = run_state(out)
    if state is not None and state["status"] != "complete":
        if state["units_written"] == state["units"]:  # killed before latency.parquet
            what = f"all {state['units']} units written, not yet {LATENCY_FILE}"
            then = "run the same replay into it again to write it"
        else:
            what = f"{state['units_written']} of {state['units']} units written"
            then = "its tables miss streams; run the same replay into it again to finish it"
        warnings.warn(
            IncompleteResults(f"{out}: an unfinished replay ({what}): {then}"), stacklevel=3
        )


def _write_state(out: Path, state: dict[str, Any]) -> None:
    tmp = out / f".{RUN_FILE}.tmp"
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, out / RUN_FILE)


def _begin_run(out: Path, signature: dict[str, Any]) -> set[int]:
    """Start (or resume) a run into ``out``; the units already written when resuming."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"out={out}: not a directory")
    state = run_state(out) if out.is_dir() else None
    if state is not None:
        if state["status"] == "complete":
            raise ValueError(
                f"out={out}: already holds result tables (of a finished replay); give an "
                "empty or new directory"
            )
        if {k: state.get(k) for k in signature} != signature:
            raise ValueError(
                f"out={out}: holds an unfinished replay of another capture, config or "
                "provider; run that replay again to finish it, or give a new directory"
            )
        for stray in out.glob(".*.tmp"):  # a write the kill interrupted
            stray.unlink()
        # written after the last unit: a run killed after it writes it again at its end
        (out / LATENCY_FILE).unlink(missing_ok=True)
        return {
            i for i in range(signature["units"]) if all(f.is_file() for f in _unit_files(out, i))
        }
    if out.is_dir():
        taken = sorted(p.name for t in RESULT_TABLES for p in out.glob(TABLE_FILES[t]))
        if taken:
            raise ValueError(
                f"out={out}: already holds result tables ({taken[0]}, ...); give an empty or "
                "new directory"
            )
    out.mkdir(parents=True, exist_ok=True)
    _write_state(out, {"status": "running", **signature})
    return set()


def _selections(units: list) -> dict[str, Any]:
    """The units' selections, for the run's signature (none when no unit has one, so a run
    of whole-file units keeps the signature it had)."""
    if not any(u.select for u in units):
        return {}
    return {
        "unit_select": [
            None
            if u.select is None
            else {"keep": u.select.keep, "requests": sorted(map(list, u.select.requests))}
            for u in units
        ]
    }


def _signature(source: Any, units: list, cfg: LabConfig, provider: str | None) -> dict[str, Any]:
    """What a resumed run must share with the one it resumes."""
    digest = hashlib.sha256(cfg.model_dump_json().encode()).hexdigest()[:16]
    return {
        "capture": str(Path(source).resolve()) if isinstance(source, (str, Path)) else None,
        "unit_files": [[str(Path(f).resolve()) for f in u.files] for u in units],
        **_selections(units),
        "units": len(units),
        "config_sha256": digest,
        "provider": provider,
    }


def _finish_run(out: Path, done: ResultFiles, signature: dict[str, Any]) -> None:
    _write_state(
        out, {"status": "complete", **signature, "streams": done.streams, "resumed": done.resumed}
    )


def replay_to(
    capture_or_path: Any,
    out: str | Path,
    *,
    config: Any = None,
    workers: int | None = None,
    progress: bool = False,
    provider: str | None = None,
    engine: str = "local",
    scheduler: str | None = None,
    replay: ReplayCapture,
) -> ResultFiles:
    """Replay ``capture_or_path`` unit by unit into result tables under ``out``, each unit
    with **replay** (see :data:`ReplayCapture`).

    ``engine="local"``: this process, or ``workers`` processes; ``engine="dask"``: the units
    are mapped over a Dask cluster (:mod:`lab.replay.dask_engine`, ``scheduler`` None or an
    address); the tables are the same.
    """
    cfg = LabConfig.coerce(config)
    out = Path(out)
    done = ResultFiles(out)
    if not isinstance(capture_or_path, (str, Path)):  # loaded already: one unit
        signature = _signature(None, [], cfg, provider) | {"units": 1}
        _begin_run(out, signature)
        with _gc.paused(defer=True):  # as replay_unit: the results dropped once written
            results = replay(capture_or_path, config=cfg, **_family(provider))
            done.units, done.streams = 1, len(results)
            done.files = _write_unit(results, out, 0, cfg)
            del results
        done.files.append(_write_latency(out))
        _finish_run(out, done, signature)
        return done
    if engine not in ("local", "dask"):
        raise ValueError(f"engine must be 'local' or 'dask', not {engine!r}")
    if scheduler is not None and engine != "dask":
        raise ValueError("scheduler= is for engine='dask'")
    units = capture_units(capture_or_path)
    signature = _signature(capture_or_path, units, cfg, provider)
    written = _begin_run(out, signature)
    for i in sorted(written):  # a resumed run: these units are on disk already
        files = _unit_files(out, i)
        _count(done, pq.ParquetFile(files[0]).metadata.num_rows, files, None, units[i])
    done.resumed = len(written)
    todo = [(i, unit) for i, unit in enumerate(units) if i not in written]
    unit_fn = functools.partial(replay_unit, replay=replay)
    if engine == "dask":
        from lab.replay.dask_engine import replay_dask  # the optional extra [dask]

        summary = replay_dask(
            todo, out, cfg, replay_unit=unit_fn, scheduler=scheduler, provider=provider
        )
        done.units += len(summary)
        done.streams += int(summary["streams"].sum())
        done.files += [Path(f) for fs in summary["files"] for f in fs.split(";") if f]
    else:
        bar = _bar([u for _, u in todo]) if progress else None
        try:
            if workers and workers > 1 and len(todo) > 1:
                _parallel(todo, out, cfg, workers, done, bar, provider, unit_fn)
            else:
                with many_replays():  # one client and fingerprint for every unit's streams
                    for i, unit in todo:
                        n, files = unit_fn(unit.files, out, i, cfg, provider, select=unit.select)
                        _count(done, n, files, bar, unit)
        finally:
            if bar is not None:
                bar.close()
    done.files.sort()
    # after every unit, then the run is complete (named absolute when the workers named theirs)
    done.files.append(_write_latency(out.resolve() if engine == "dask" else out))
    _finish_run(out, done, signature)
    return done


def _count(done: ResultFiles, n: int, files: list, bar: Any, unit: Any) -> None:
    done.units += 1
    done.streams += n
    done.files.extend(files)
    if bar is not None:
        bar.update(_exchanges(unit))


def _exchanges(unit: Any) -> int:
    streams = [f for f in unit.files if f.name.startswith("streams-")]
    if unit.select is None:
        return sum(pq.ParquetFile(f).metadata.num_rows for f in streams)
    return sum(  # a unit of some requests of its part: count theirs
        sum(unit.select.mask(t["capture_id"].to_pylist(), t["stream_id"].to_pylist()))
        for t in (pq.read_table(f, columns=["capture_id", "stream_id"]) for f in streams)
    )


def _bar(units: list) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=sum(_exchanges(u) for u in units), desc="replay", unit="exchange")


def _family(provider: str | None) -> dict[str, Any]:
    return {"provider": provider} if provider is not None else {}


def _parallel(
    units: list[tuple[int, Any]],
    out: Path,
    cfg: Any,
    workers: int,
    done: ResultFiles,
    bar: Any,
    provider: str | None,
    unit_fn: Callable[..., tuple[int, list]],
) -> None:
    """Units on ``workers`` processes, each writing its own files (fork on Linux)."""
    with ProcessPoolExecutor(min(workers, len(units)), mp_context=mp_context()) as pool:
        futures = {
            pool.submit(unit_fn, unit.files, out, i, cfg, provider, select=unit.select): unit
            for i, unit in units
        }
        for fut in as_completed(futures):
            n, files = fut.result()
            _count(done, n, files, bar, futures[fut])


def read_results(out: str | Path, table: str = "streams") -> pd.DataFrame:
    """One result table of ``replay(..., out=out)``: every unit's file, in unit order (or,
    for ``"latency"``, ``latency.parquet`` with its ``attrs``)."""
    if table not in RESULT_TABLES:
        raise ValueError(f"unknown result table {table!r}; one of {', '.join(RESULT_TABLES)}")
    warn_if_incomplete(out)
    if table == "latency":
        return _read_latency(Path(out))
    return _read_unit_table(Path(out), table)


def _read_unit_table(out: Path, table: str, columns: list[str] | None = None) -> pd.DataFrame:
    """Every unit's file of ``table`` (only ``columns`` when given), in unit order."""
    files = sorted(out.glob(f"{table}-*.parquet"))
    if not files:
        raise FileNotFoundError(f"{out}: no {table}-*.parquet (write them with replay(out=...))")
    df = pa.concat_tables([pq.read_table(f, columns=columns) for f in files]).to_pandas()
    for col, kind in _TYPES[table].items():  # nullable ints stay ints, as lab.tables has them
        if kind == _INT and col in df and df[col].isna().any():
            df[col] = df[col].astype("Int64")
    return df


def _read_latency(out: Path) -> pd.DataFrame:
    path = out / LATENCY_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{out}: no {LATENCY_FILE} (replay(out=...) writes it after the last unit; "
            "lab.tables.latency(read_results(out)) computes it from the streams)"
        )
    data = pq.read_table(path)
    df = data.to_pandas()
    df.attrs.update(json.loads((data.schema.metadata or {}).get(b"lab.attrs", b"{}")))
    return df
