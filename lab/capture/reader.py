"""Reading captures: Parquet parts plus leftover journals, as pandas tables and records.

``open(path)`` accepts a recording directory, a root holding many recordings, a single
``.parquet`` part (its ``streams``/``chunks`` sibling of the same number comes along), a
single ``.journal``, or a glob (read like a directory: the capture files and recordings it
matches, other files passed over). Bad input raises one ``CaptureError`` naming the file.

Recovery rules (see ``writer.py`` for why they are enough):

- a journal whose exchange is already in a ``streams`` part is ignored (the writer died
  between writing the part and deleting the journal);
- any other journal becomes an exchange: with its recorded end reason when its ``E``
  record made it to disk, else end_reason ``"incomplete"``;
- ``chunks`` rows of an exchange recovered from a journal are taken from the journal (a
  ``chunks`` part written just before a crash is superseded, never double counted).

Integrity rules (each problem is one ``CaptureWarning`` and one line of ``Capture.warnings``):

- an exchange is identified by its recording and number, ``(capture_id, exchange)``, which
  fix its ``stream_id`` and ``attempt``; when parts hold the same exchange twice (a ``cp -r``
  backup of a recording inside the captures root), the first copy in file order is kept
  with its own reads and the others are dropped, counted as byte-identical or differing;
- the writer numbers a recording's parts without gaps, so in a directory that was scanned
  a number missing between the lowest and the highest ``streams`` part is reported (a
  missing first or last part leaves no trace: there is no manifest).
"""

from __future__ import annotations

import base64
import glob as _glob
import json
import os
import re
import struct
import warnings
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lab._json import loads as json_loads
from lab.capture.bounds import MAX_COMPRESSION_RATIO, check_part
from lab.capture.errors import CaptureError, CaptureWarning, PartTooLarge
from lab.capture.journal import JOURNAL_SUFFIX, JournalContents, read_journals
from lab.capture.records import RecordedExchange, RecordedRequest
from lab.capture.schema import (
    CHUNKS_SCHEMA,
    FOOTER_CAPTURE,
    FOOTER_REDACTION,
    FOOTER_SCHEMA_VERSION,
    FOOTER_TABLE,
    SCHEMA_VERSION,
    STREAMS_SCHEMA,
    UPGRADERS,
)
from lab.capture.units import Selection, read_selected

if TYPE_CHECKING:  # pandas is imported when a table is first asked for as a DataFrame
    import pandas as pd

__all__ = ["Capture", "open"]

_PART = re.compile(r"^(streams|chunks)-(\d+)\.parquet$")
_CAPTURE_SUFFIXES = (".parquet", JOURNAL_SUFFIX)
_READ_CHUNKS_SCHEMA = CHUNKS_SCHEMA.set(
    CHUNKS_SCHEMA.get_field_index("raw"), pa.field("raw", pa.large_binary(), nullable=False)
)
"""The chunks table as the reader holds it: ``raw`` with 64-bit offsets (``large_binary``),
so that sorting and joining reads never concatenates past 2 GiB into one 32-bit column (an
exchange of any size, or many exchanges, in one table); on disk it stays ``binary``."""
_SCHEMAS = {"streams": STREAMS_SCHEMA, "chunks": _READ_CHUNKS_SCHEMA}
_INCOMPLETE_ERROR = "recorder stopped before the exchange ended (recovered from its journal)"


class Capture:
    """One or more recordings, loaded.

    - ``streams``: one row per HTTP exchange, sorted by (started_at, stream_id, attempt);
    - ``chunks``: one row per network read, sorted by (stream_id, attempt, seq); ``raw``
      holds ``bytes`` objects;
    - ``paths``: the files read; ``metadata``: footer metadata (see ``docs/capture-schema.md``);
    - ``warnings``: one line per integrity problem found while opening (exchanges found
      twice, parts missing from a sequence, a part refused for what it would decode to),
      also raised as ``CaptureWarning``; empty when the capture is whole.
      ``metadata["duplicate_exchanges"]`` counts the dropped copies,
      ``metadata["refused_parts"]`` lists the refusals.
    """

    def __init__(
        self,
        streams: pa.Table,
        chunks: pa.Table,
        paths: list[Path],
        metadata: dict[str, Any],
        warnings: list[str] | None = None,
    ) -> None:
        self.streams_table = streams
        self.chunks_table = chunks
        self.paths = paths
        self.metadata = metadata
        self.warnings: list[str] = list(warnings or [])
        self._streams: pd.DataFrame | None = None
        self._chunks: pd.DataFrame | None = None
        self._exchanges: list[RecordedExchange] | None = None
        self._rows: _Rows | None = None

    @property
    def streams(self) -> pd.DataFrame:
        """One row per HTTP exchange (pandas; built on first use and kept)."""
        if self._streams is None:
            self._streams = _streams_frame(self.streams_table)
        return self._streams

    @property
    def chunks(self) -> pd.DataFrame:
        """One row per network read (pandas; built on first use and kept)."""
        if self._chunks is None:
            self._chunks = self.chunks_table.to_pandas()
        return self._chunks

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the Arrow tables only (parallel replay sends a Capture to its workers):
        the frames and records built from them are rebuilt on first use."""
        state = self.__dict__.copy()
        state.update(_streams=None, _chunks=None, _exchanges=None, _rows=None)
        return state

    def __repr__(self) -> str:
        ids = self.metadata.get("capture_ids", [])
        return (
            f"<Capture {', '.join(ids) if len(ids) <= 3 else f'{len(ids)} recordings'}: "
            f"{self.streams_table.num_rows} exchanges, {self.chunks_table.num_rows} reads>"
        )

    def exchanges(self) -> list[RecordedExchange]:
        """Every exchange in ``streams`` order, with its reads."""
        if self._exchanges is None:
            rows = self._python_rows()
            self._exchanges = [rows.exchange(i) for i in range(self.streams_table.num_rows)]
        return list(self._exchanges)

    def requests(self) -> list[RecordedRequest]:
        """Logical requests (all attempts of one stream_id) in capture order."""
        return _group_requests(self.exchanges())

    def request_plan(self) -> list[list[int]]:
        """The logical requests as row numbers of ``streams_table``, in ``requests()`` order.

        Cheap (no reads are touched): parallel replay hands these out so that each worker
        builds only its own share of the records with :meth:`requests_at`.
        """
        groups: dict[tuple[str | None, str], list[int]] = {}
        keys = zip(
            self.streams_table["capture_id"].to_pylist(),
            self.streams_table["stream_id"].to_pylist(),
            strict=True,
        )
        for row, key in enumerate(keys):
            groups.setdefault(key, []).append(row)
        return list(groups.values())

    def requests_at(self, plan: list[list[int]]) -> list[RecordedRequest]:
        """The logical requests for entries of :meth:`request_plan` (same order, same records
        as ``requests()`` gives for them)."""
        if self._exchanges is not None:  # already built: reuse them
            every = self._exchanges
            return _group_requests([every[row] for group in plan for row in group])
        rows = self._python_rows()
        return _group_requests([rows.exchange(row) for group in plan for row in group])

    def _python_rows(self) -> _Rows:
        if self._rows is None:
            self._rows = _Rows(self.streams_table, self.chunks_table)
        return self._rows

    def request(self, stream_id: str) -> RecordedRequest:
        """The logical request with this stream_id (KeyError when absent)."""
        found = [r for r in self.requests() if r.stream_id == stream_id]
        if not found:
            raise KeyError(f"no stream_id {stream_id!r} in this capture")
        if len(found) > 1:
            ids = ", ".join(str(r.capture_id) for r in found)
            raise CaptureError(
                f"stream_id {stream_id!r} appears in several recordings ({ids}); "
                "open one recording directory"
            )
        return found[0]


# -- open ----------------------------------------------------------------------------------


VANISHED_RETRIES = 3
"""How many times :func:`open` lists and reads again when a file it listed is gone before it
was read (a compaction or a recorder finishing moved it on), before it says so."""


class _Vanished(CaptureError):
    """A capture file listed for reading was gone when it was read."""


def open(  # noqa: A001 - documented name
    path: str | Path | Sequence[str | Path],
    *,
    max_compression_ratio: float | None = None,
    select: Selection | None = None,
) -> Capture:
    """Load a capture: recording dir, root of recordings, one .parquet, or a glob; or a list
    of any of these (one unit of :func:`lab.capture.units.capture_units`, say).

    A directory under compaction is read as one whole set of parts (the old or the new,
    :func:`lab.capture.compact.hidden_by_compaction`); a file that vanishes between listing
    and reading (a compaction or a recorder moving on) makes it list and read again.

    A part that would decode to more than **max_compression_ratio** times its size
    (default :data:`MAX_COMPRESSION_RATIO`) is left out with its sibling part, and a
    ``CaptureWarning`` says so; when nothing else is left, its :class:`PartTooLarge` is
    raised.

    **select** (a unit's :class:`~lab.capture.units.Selection`): only these logical
    requests are read, each part batch by batch, so the rest of a part never sits in
    memory."""
    ratio = MAX_COMPRESSION_RATIO if max_compression_ratio is None else max_compression_ratio
    if not ratio > 0:
        raise ValueError(f"max_compression_ratio must be > 0, not {max_compression_ratio!r}")
    inputs: list[str | Path] = (
        list(path) if isinstance(path, (list, tuple)) else [path]  # type: ignore[list-item]
    )
    if not inputs:
        raise CaptureError("empty list of capture paths")
    for attempt in range(VANISHED_RETRIES + 1):
        try:
            return _open(inputs, ratio, select)
        except _Vanished as exc:
            if attempt == VANISHED_RETRIES:
                raise CaptureError(
                    f"{exc}; it was listed and gone before it was read, "
                    f"{VANISHED_RETRIES + 1} times (is a compaction or a recorder running?)"
                ) from None
    raise AssertionError("unreachable")  # pragma: no cover


def _open(inputs: list[str | Path], max_ratio: float, select: Selection | None) -> Capture:
    resolved = [_resolve(p) for p in inputs]
    parts = list(dict.fromkeys(f for ps, _ in resolved for f in ps))
    journals = list(dict.fromkeys(f for _, js in resolved for f in js))
    # scanned directories and globs must hold whole sequences; files named outright (one
    # unit of capture_units, say) are a chosen subset
    problems = missing_parts(
        [
            f
            for p, (ps, _) in zip(inputs, resolved, strict=True)
            if not Path(p).is_file()
            for f in ps
        ]
    )
    streams_tables: list[pa.Table] = []
    streams_parts: list[Path] = []
    chunks_tables: list[pa.Table] = []
    chunks_parts: list[Path] = []
    infos: dict[str, dict[str, Any]] = {}
    redaction: dict[str, Any] = {}
    versions: set[int] = set()
    read = _read_parts(parts, max_ratio, select)
    refused = [r for r in read if isinstance(r, PartTooLarge)]
    refusals: list[str] = []
    if refused:
        left_out, refusals = _leave_out(parts, read)
        if len(left_out) == len(parts) and not journals:
            raise refused[0]
        read = [r for p, r in zip(parts, read, strict=True) if p not in left_out]
        parts = [p for p in parts if p not in left_out]
        problems = refusals + problems
    for part, result in zip(parts, read, strict=True):
        if isinstance(result, PartTooLarge):  # pragma: no cover - left out above
            continue
        name, table, info, red, version = result
        versions.add(version)
        if info.get("capture_id"):
            infos.setdefault(info["capture_id"], info)
        redaction = red or redaction
        if name == "streams":
            streams_tables.append(table)
            streams_parts.append(part)
        else:
            chunks_tables.append(table)
            chunks_parts.append(part)
    n_duplicates, duplicate_problems = _drop_duplicates(
        streams_tables, streams_parts, chunks_tables, chunks_parts
    )
    problems = duplicate_problems + problems
    for problem in problems:
        warnings.warn(problem, CaptureWarning, stacklevel=3)

    streams = _concat(streams_tables, STREAMS_SCHEMA)
    chunks = _concat(chunks_tables, _READ_CHUNKS_SCHEMA)
    done = set(zip(streams["capture_id"].to_pylist(), streams["exchange"].to_pylist(), strict=True))

    rec_streams: list[dict[str, Any]] = []
    rec_chunks: list[pa.Table] = []
    used_journals = journals
    for contents in _read_journals(journals):
        row, chunk_table = _recovered(contents)
        key = (row["capture_id"], row["exchange"])
        if key in done:
            continue
        if select is not None and not select.mask([row["capture_id"]], [row["stream_id"]])[0]:
            continue
        done.add(key)
        rec_streams.append(row)
        rec_chunks.append(chunk_table)
        if contents.capture.get("capture_id"):
            infos.setdefault(contents.capture["capture_id"], contents.capture)
        redaction = contents.redaction or redaction
        versions.add(SCHEMA_VERSION)
    if rec_streams:
        if chunks.num_rows:  # drop chunk rows a crash left without their streams part
            recovered = {(r["capture_id"], r["exchange"]) for r in rec_streams}
            keep = [
                key not in recovered
                for key in zip(
                    chunks["capture_id"].to_pylist(), chunks["exchange"].to_pylist(), strict=True
                )
            ]
            chunks = chunks.filter(pa.array(keep, pa.bool_()))
        streams = pa.concat_tables([streams, pa.Table.from_pylist(rec_streams, STREAMS_SCHEMA)])
        chunks = pa.concat_tables([chunks, *rec_chunks])

    _check_reads_present(streams, chunks, streams_tables, streams_parts)
    streams = _in_order(streams, _STREAMS_ORDER)
    chunks = _in_order(chunks, _CHUNKS_ORDER)
    ids = sorted(infos)
    metadata: dict[str, Any] = {
        "schema_version": max(versions) if versions else SCHEMA_VERSION,
        "capture_ids": ids,
        "captures": infos,
        "redaction": redaction,
        "recovered_journals": [str(p) for p in used_journals],
        "duplicate_exchanges": n_duplicates,
        "refused_parts": refusals,
    }
    if len(ids) == 1:
        metadata.update(infos[ids[0]])
    return Capture(streams, chunks, [*parts, *used_journals], metadata, problems)


_STREAMS_ORDER = [
    ("started_at", "ascending"),
    ("stream_id", "ascending"),
    ("attempt", "ascending"),
    ("capture_id", "ascending"),
    ("exchange", "ascending"),
]
"""The order of a loaded capture's ``streams`` rows."""
_CHUNKS_ORDER = [
    ("stream_id", "ascending"),
    ("attempt", "ascending"),
    ("capture_id", "ascending"),
    ("exchange", "ascending"),
    ("seq", "ascending"),
]
"""The order of a loaded capture's ``chunks`` rows (an exchange's reads in ``seq`` order)."""


def _in_order(table: pa.Table, keys: list[tuple[str, str]]) -> pa.Table:
    """``table.sort_by(keys)`` (a stable sort), as it is when its rows are in that order
    already, as a part's rows are written: sorting them copied every read (the ``raw``
    column), more than half the sort."""
    order = pc.sort_indices(table, sort_keys=keys)
    # the indices as numpy sees their buffer (``to_numpy`` would import pandas: 40 MB)
    positions = np.frombuffer(order.buffers()[1], np.uint64, len(order), order.offset * 8)
    if len(positions) == 0 or (positions[0] == 0 and (np.diff(positions) == 1).all()):
        return table
    return table.take(order)


def _leave_out(parts: list[Path], read: list[_Part | PartTooLarge]) -> tuple[set[Path], list[str]]:
    """The parts to leave out, each refused part with its ``streams``/``chunks`` sibling
    (a streams row without its reads would fail the capture, reads without their row would
    be orphans), and one message per refused part saying what is left out."""
    results = dict(zip(parts, read, strict=True))
    left_out: set[Path] = set()
    messages = []
    for part, result in results.items():
        if not isinstance(result, PartTooLarge):
            continue
        left_out.add(part)
        m = _PART.match(part.name)
        sibling = (
            part.with_name(
                f"{'chunks' if m.group(1) == 'streams' else 'streams'}-{m.group(2)}.parquet"
            )
            if m
            else None
        )
        streams = part if m and m.group(1) == "streams" else sibling
        also = ""
        if sibling is not None and sibling in results:
            left_out.add(sibling)
            also = f" with {sibling.name}"
        found = results.get(streams) if streams is not None else None
        exchanges = (
            f"{found[1].num_rows} exchange(s)" if isinstance(found, tuple) else "its exchanges"
        )
        messages.append(
            f"{result}. Left out{also}: {exchanges} of that part are not in this capture; "
            "the other parts are read"
        )
    return left_out, messages


def _slot(part: Path) -> tuple[Path, str | None]:
    """Where a part's exchanges keep their reads: ``streams-N`` pairs with ``chunks-N`` of
    its directory; files not named like parts (exported fixtures) pair within their
    directory."""
    m = _PART.match(part.name)
    return part.parent, (m.group(2) if m else None)


def _drop_duplicates(
    streams_tables: list[pa.Table],
    streams_parts: list[Path],
    chunks_tables: list[pa.Table],
    chunks_parts: list[Path],
) -> tuple[int, list[str]]:
    """Keep the first copy of every exchange found in several parts (in place: the tables
    lose the later copies' rows and reads); returns (copies dropped, one message per
    recording with copies). Costs one key set when nothing is duplicated."""
    owner: dict[tuple[str | None, int], int] = {}  # exchange -> streams table of its first copy
    copies: dict[tuple[str | None, int], list[tuple[int, int]]] = {}  # -> [(table, row)]
    masks: list[list[bool] | None] = []
    for i, table in enumerate(streams_tables):
        keys = zip(table["capture_id"].to_pylist(), table["exchange"].to_pylist(), strict=True)
        mask: list[bool] = []
        for row, key in enumerate(keys):
            first = key not in owner
            if first:
                owner[key] = i
            else:
                copies.setdefault(key, []).append((i, row))
            mask.append(first)
        masks.append(None if all(mask) else mask)
    if not copies:
        return 0, []
    first_rows = {key: i for key, i in owner.items() if key in copies}
    # the reads of each duplicated exchange, per slot, before any row is dropped
    reads: dict[tuple[tuple[Path, str | None], tuple[str | None, int]], list[tuple]] = {}
    wanted = pa.array(sorted({e for _, e in copies}), pa.int64())
    kept_slot = {key: _slot(streams_parts[i]) for key, i in first_rows.items()}
    for c, (table, part) in enumerate(zip(chunks_tables, chunks_parts, strict=True)):
        hit = table.filter(pc.is_in(table["exchange"].cast(pa.int64()), value_set=wanted))
        slot = _slot(part)
        keep: list[bool] | None = None
        if hit.num_rows:
            rows = zip(
                *(hit[n].to_pylist() for n in ("capture_id", "exchange", "seq", "t_ns", "raw")),
                strict=True,
            )
            for cid, ex, seq, t_ns, raw in rows:
                if (cid, ex) in copies:
                    reads.setdefault((slot, (cid, ex)), []).append((seq, t_ns, raw))
            keep = [
                key not in copies or kept_slot[key] == slot
                for key in zip(
                    table["capture_id"].to_pylist(), table["exchange"].to_pylist(), strict=True
                )
            ]
        if keep is not None and not all(keep):
            chunks_tables[c] = table.filter(pa.array(keep, pa.bool_()))
    # compare each copy with the kept one: its streams row and its reads
    by_recording: dict[str | None, dict[str, Any]] = {}
    index: dict[int, dict[tuple[str | None, int], int]] = {}  # table -> exchange -> first row
    for key, where in copies.items():
        i = first_rows[key]
        if i not in index:
            table = streams_tables[i]
            ids = zip(table["capture_id"].to_pylist(), table["exchange"].to_pylist(), strict=True)
            index[i] = {}
            for r, k in enumerate(ids):
                index[i].setdefault(k, r)
        row = streams_tables[i].slice(index[i][key], 1).to_pylist()[0]
        kept_reads = sorted(reads.get((_slot(streams_parts[i]), key), []))
        for j, r in where:
            other = streams_tables[j].slice(r, 1).to_pylist()[0]
            same = other == row and sorted(reads.get((_slot(streams_parts[j]), key), [])) == (
                kept_reads
            )
            seen = by_recording.setdefault(
                key[0], {"n": 0, "identical": 0, "pairs": {}, "example": None}
            )
            seen["n"] += 1
            seen["identical"] += same
            pair = (
                _place(streams_parts[i], streams_parts[j]),
                _place(streams_parts[j], streams_parts[i]),
            )
            seen["pairs"][pair] = seen["pairs"].get(pair, 0) + 1
            if seen["example"] is None:
                seen["example"] = (row["stream_id"], row["attempt"])
    for i, dropped_rows in enumerate(masks):
        if dropped_rows is not None:
            streams_tables[i] = streams_tables[i].filter(pa.array(dropped_rows, pa.bool_()))
    problems = []
    for cid, seen in by_recording.items():
        (kept, dropped), _n = next(iter(seen["pairs"].items()))
        more = len(seen["pairs"]) - 1
        differing = seen["n"] - seen["identical"]
        stream_id, attempt = seen["example"]
        problems.append(
            f"{seen['n']} exchange(s) of recording {cid} are in both {kept} and {dropped}"
            + (f" (and {more} more pair(s) of places)" if more else "")
            + f": {seen['identical']} byte-identical, {differing} differing (e.g. stream "
            f"{stream_id!r} attempt {attempt}); kept the copies in {kept}, ignored those in "
            f"{dropped}"
        )
    return sum(s["n"] for s in by_recording.values()), problems


def _place(part: Path, other: Path) -> str:
    """How to name where ``part`` is, against ``other``: its directory when they differ."""
    return str(part.parent) if part.parent != other.parent else str(part)


def missing_parts(parts: Sequence[Path]) -> list[str]:
    """One message per directory whose numbered parts have a gap: a number between its
    lowest and highest ``streams`` part with no ``streams`` part (its ``chunks`` part named
    too when it is gone as well). A ``streams`` part without its ``chunks`` part is the
    reader's CaptureError when reads are lacking; a ``chunks`` part above the highest
    ``streams`` one is what a crash between the two leaves (its journal holds the
    exchanges), so neither is a gap here."""
    numbers: dict[Path, dict[str, set[int]]] = {}
    for p in parts:
        m = _PART.match(p.name)
        if m:
            by_table = numbers.setdefault(p.parent, {"streams": set(), "chunks": set()})
            by_table[m.group(1)].add(int(m.group(2)))
    problems = []
    for directory, by_table in numbers.items():
        have = by_table["streams"]
        if not have:
            continue
        lo, hi = min(have), max(have)
        absent = [
            f"{table}-{n:05d}.parquet"
            for n in range(lo, hi + 1)
            if n not in have
            for table in ("streams", "chunks")
            if n not in by_table[table]
        ]
        if absent:
            shown = ", ".join(absent[:4]) + (
                f" and {len(absent) - 4} more" if len(absent) > 4 else ""
            )
            problems.append(
                f"{directory}: part(s) missing from the sequence {lo:05d}..{hi:05d}: {shown}; "
                "their exchanges are not in this capture"
            )
    return problems


def _check_reads_present(
    streams: pa.Table, chunks: pa.Table, streams_tables: list[pa.Table], streams_parts: list[Path]
) -> None:
    """Every exchange's recorded reads are in the chunks parts, or one CaptureError.

    The writer puts a part's chunks on disk before its streams row, so a shortfall means a
    chunks part is missing or foreign, and replaying would make up empty responses. The
    totals are compared first (one sum); exchanges are looked at only when they differ.
    """
    expected = pc.sum(streams["n_reads"]).as_py() or 0
    if chunks.num_rows >= expected:
        return
    counts = chunks.group_by(["capture_id", "exchange"]).aggregate([("seq", "count")])
    found = {
        (capture_id, exchange): n
        for capture_id, exchange, n in zip(
            counts["capture_id"].to_pylist(),
            counts["exchange"].to_pylist(),
            counts["seq_count"].to_pylist(),
            strict=True,
        )
    }
    for table, part in zip(streams_tables, streams_parts, strict=True):
        cols = [table[c].to_pylist() for c in ("capture_id", "exchange", "stream_id", "attempt")]
        short = [
            (row, n, found.get((row[0], row[1]), 0))
            for row, n in zip(zip(*cols, strict=True), table["n_reads"].to_pylist(), strict=True)
            if found.get((row[0], row[1]), 0) < n
        ]
        if short:
            (_cid, exchange, stream_id, attempt), n, got = short[0]
            m = _PART.match(part.name)
            sibling = part.with_name(f"chunks-{m.group(2)}.parquet") if m else None
            hint = f"; {sibling.name} is missing" if sibling and not sibling.exists() else ""
            raise CaptureError(
                f"{part}: {len(short)} of its {table.num_rows} exchanges lack recorded reads "
                f"(exchange {exchange}, stream {stream_id!r} attempt {attempt}: {n} reads "
                f"recorded, {got} found in the chunks parts read){hint}"
            )


def _expand(pattern: str) -> list[str]:
    """The paths ``pattern`` matches, sorted; ``**`` matches any number of directories but
    never descends into a symlinked one (``glob.glob(recursive=True)`` follows them, and
    two symlinks up the tree are 2^40 paths: a hang). A symlink is still matched itself.
    Hidden names match only a part starting with ``.``, as in ``glob``."""
    if "**" not in pattern:
        return sorted(_glob.glob(pattern))
    parts = Path(pattern).parts
    fixed = 0
    while fixed < len(parts) and not _glob.has_magic(parts[fixed]):
        fixed += 1
    base = Path(*parts[:fixed]) if fixed else Path()
    rest = parts[fixed:]
    found = [str(base)] if fixed and _glob_match(rest, ()) else []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        rel = Path(dirpath).relative_to(base).parts
        found += [
            str(Path(dirpath, name))
            for name in dirnames + filenames
            if _glob_match(rest, (*rel, name))
        ]
    return sorted(found)


def _glob_match(pattern: tuple[str, ...], names: tuple[str, ...]) -> bool:
    """Whether path parts ``names`` match pattern parts (``**`` is zero or more parts)."""
    import fnmatch

    if not pattern:
        return not names
    head, tail = pattern[0], pattern[1:]
    if head == "**":
        return any(
            _glob_match(tail, names[i:])
            for i in range(len(names) + 1)
            if not any(n.startswith(".") for n in names[:i])
        )
    if not names or (names[0].startswith(".") and not head.startswith(".")):
        return False
    return fnmatch.fnmatchcase(names[0], head) and _glob_match(tail, names[1:])


def _resolve(path: str | Path) -> tuple[list[Path], list[Path]]:
    text = str(path)
    if not text.strip():
        raise CaptureError("empty capture path (give a recording directory, a file or a glob)")
    p = Path(path)
    if p.exists():
        targets = [p]
    elif _glob.has_magic(text):
        matched = [Path(m) for m in _expand(text)]
        if not matched:
            raise CaptureError(f"{text}: the glob matched no files")
        # a glob reads like a directory scan: recordings and capture files, not the README
        # beside them (a file named outright is still read, and refused if it is no capture)
        targets = [t for t in matched if t.is_dir() or t.name.endswith(_CAPTURE_SUFFIXES)]
        if not targets:
            others = ", ".join(t.name for t in matched[:3]) + (", ..." if len(matched) > 3 else "")
            raise CaptureError(
                f"{text}: the glob matched no capture files (.parquet, {JOURNAL_SUFFIX} or a "
                f"recording directory), only {others}"
            )
    else:
        raise CaptureError(f"{p}: no such file or directory")
    parts: list[Path] = []
    journals: list[Path] = []
    scanned = not p.exists()  # a glob reads like a directory scan
    for t in targets:
        if t.is_dir():
            found = _under_compaction(
                sorted(
                    f
                    for f in t.rglob("*")
                    if f.is_file() and (_PART.match(f.name) or f.name.endswith(JOURNAL_SUFFIX))
                )
            )
            if not found:  # exported fixtures and friends: any Parquet, checked by footer
                found = sorted(f for f in t.rglob("*.parquet") if not f.name.startswith("."))
            if not found:
                raise CaptureError(
                    f"{t}: no capture files here (streams-*.parquet, chunks-*.parquet, *.journal)"
                )
            for f in found:
                (journals if f.name.endswith(JOURNAL_SUFFIX) else parts).append(f)
        elif t.name.endswith(JOURNAL_SUFFIX):
            journals.append(t)
        else:
            parts.append(t)
            m = _PART.match(t.name)
            if m:  # a named part brings its sibling (a chunks glob alone would hold no streams)
                other = "chunks" if m.group(1) == "streams" else "streams"
                sibling = t.with_name(f"{other}-{m.group(2)}.parquet")
                if sibling.exists():
                    parts.append(sibling)
    if scanned:
        parts = _under_compaction(parts)
    parts = list(dict.fromkeys(p.resolve() for p in parts))
    journals = list(dict.fromkeys(p.resolve() for p in journals))
    return parts, journals


def _under_compaction(files: list[Path]) -> list[Path]:
    """``files`` without the parts a compaction under way hides in their directory (the new
    parts until all of them are in place, the old ones from then on)."""
    from lab.capture.compact import MANIFEST, hidden_by_compaction

    by_dir: dict[Path, set[str]] = {}
    for f in files:
        by_dir.setdefault(f.parent, set()).add(f.name)
    hidden: dict[Path, set[str]] = {}
    for d, names in by_dir.items():
        if (d / MANIFEST).exists():
            hidden[d] = hidden_by_compaction(d, names)
    if not any(hidden.values()):
        return files
    return [f for f in files if f.name not in hidden.get(f.parent, ())]


_Part = tuple[str, pa.Table, dict, dict, int]


def _read_parts(
    parts: list[Path], max_ratio: float, select: Selection | None = None
) -> list[_Part | PartTooLarge]:
    """Every part, read on a few threads (pyarrow decodes without the GIL: on a recording of
    many small parts this halves the time); the first bad part in order raises, except a
    part refused for its size, which is returned as its :class:`PartTooLarge`.

    One thread per core and one more, at most 8: starting a thread costs ~1 ms on these VMs,
    and on 2 cores 8 threads opened benchmark 5's capture in 27.7 ms where 3 took 26.1
    (medians of 79 interleaved opens)."""
    workers = min(8, len(parts), (os.cpu_count() or 1) + 1)

    def read(path: Path) -> _Part | PartTooLarge:
        try:
            return _read_part(path, max_ratio, select)
        except PartTooLarge as exc:
            return exc

    if workers < 2:
        return [read(p) for p in parts]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers, thread_name_prefix="lab-read") as pool:
        return list(pool.map(read, parts))


def _read_part(
    path: Path, max_ratio: float, select: Selection | None = None
) -> tuple[str, pa.Table, dict, dict, int]:
    try:
        pf = pq.ParquetFile(path)
        metadata = pf.schema_arrow.metadata or {}
    except FileNotFoundError:
        raise _Vanished(f"{path}: no such file") from None
    except Exception as exc:
        raise CaptureError(
            f"{path}: not a readable Parquet file, corrupt or truncated ({_one_line(exc)})"
        ) from None
    missing = [k.decode() for k in (FOOTER_TABLE, FOOTER_SCHEMA_VERSION) if k not in metadata]
    if missing:
        raise CaptureError(
            f"{path}: not a Stream Lab capture (footer key {', '.join(missing)} missing)"
        )
    name = metadata[FOOTER_TABLE].decode("utf-8", "backslashreplace")
    if name not in _SCHEMAS:
        raise CaptureError(f"{path}: not a Stream Lab capture table (lab.table = {name!r})")
    try:
        version = int(metadata[FOOTER_SCHEMA_VERSION])
    except ValueError:
        raise CaptureError(f"{path}: unreadable lab.schema_version footer key") from None
    if version < 1 or any((name, v) not in UPGRADERS for v in range(version, SCHEMA_VERSION)):
        raise CaptureError(
            f"{path}: capture schema version {version} is not one this lab reads "
            f"(1 to {SCHEMA_VERSION})"
        )
    if version > SCHEMA_VERSION:
        raise CaptureError(
            f"{path}: capture schema version {version} is newer than this lab "
            f"(reads up to {SCHEMA_VERSION}); upgrade stream-lab"
        )
    try:
        check_part(path, pf.metadata, max_ratio)
    except FileNotFoundError:
        raise _Vanished(f"{path}: no such file") from None
    try:
        table = pf.read() if select is None else read_selected(path, pf, select)
    except FileNotFoundError:  # pragma: no cover - the file is open; kept for other filesystems
        raise _Vanished(f"{path}: no such file") from None
    except Exception as exc:
        raise CaptureError(
            f"{path}: corrupt or truncated Parquet data ({_one_line(exc)})"
        ) from None
    for v in range(version, SCHEMA_VERSION):
        table = UPGRADERS[(name, v)](table)
    schema = _SCHEMAS[name]
    present = set(table.column_names)  # a new list on every access
    absent = [n for n in schema.names if n not in present]
    if absent:
        raise CaptureError(f"{path}: {name} table is missing column(s) {', '.join(absent)}")
    try:
        table = table.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise CaptureError(f"{path}: {name} table has wrong column types ({exc})") from None
    info = _json_footer(metadata, FOOTER_CAPTURE)
    if not isinstance(info.get("capture_id", ""), str):
        raise CaptureError(f"{path}: the lab.capture footer key's capture_id is not a string")
    redaction = _json_footer(metadata, FOOTER_REDACTION)
    return name, table, info, redaction, version


def _json_footer(metadata: dict, key: bytes) -> dict:
    try:
        value = json.loads(metadata.get(key, b"{}"))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _read_journals(paths: list[Path]) -> list[JournalContents]:
    try:
        return read_journals(paths)
    except FileNotFoundError as exc:  # the recorder wrote its part and removed the journal
        raise _Vanished(f"{getattr(exc, 'filename', None) or paths}: no such file") from None
    except OSError as exc:
        raise CaptureError(
            f"{getattr(exc, 'filename', None) or paths}: cannot read ({exc})"
        ) from None
    except (ValueError, KeyError, struct.error) as exc:
        names = ", ".join(str(p) for p in paths)
        raise CaptureError(f"{names}: corrupt journal ({type(exc).__name__}: {exc})") from None


def _recovered(contents: JournalContents) -> tuple[dict[str, Any], pa.Table]:
    h = contents.header
    row = {name: h.get(name) for name in STREAMS_SCHEMA.names}
    response = contents.response or {}
    for key in ("status", "http_version", "response_headers", "t_headers_ns"):
        row[key] = response.get(key)
    end = contents.end
    if contents.cut is not None:  # records were lost or torn: cut where the journal is whole
        row["end_reason"] = "incomplete"
        row["error"] = f"{_INCOMPLETE_ERROR}: {contents.cut}"
        row["t_end_ns"] = None
    elif end is not None:
        row["end_reason"] = end.get("end_reason") or "incomplete"
        row["error"] = end.get("error")
        row["t_end_ns"] = end.get("t_end_ns")
        if isinstance(end.get("meta"), str):  # meta the exchange ended with (lab.redacted)
            row["meta"] = end["meta"]
    else:
        row["end_reason"] = "incomplete"
        row["error"] = _INCOMPLETE_ERROR
        row["t_end_ns"] = None
    reads, ts = contents.reads, contents.read_t_ns
    row["t_first_read_ns"] = ts[0] if ts else None
    row["t_last_read_ns"] = ts[-1] if ts else None
    row["n_reads"] = len(reads)
    row["n_bytes"] = sum(map(len, reads))
    n = len(reads)
    chunk_table = pa.table(
        {
            "capture_id": [row["capture_id"]] * n,
            "exchange": [row["exchange"]] * n,
            "stream_id": [row["stream_id"]] * n,
            "attempt": [row["attempt"]] * n,
            "seq": list(range(n)),
            "t_ns": ts,
            "raw": reads,
            "n_bytes": [len(r) for r in reads],
        },
        schema=_READ_CHUNKS_SCHEMA,
    )
    return row, chunk_table


def _concat(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)


def _streams_frame(streams: pa.Table) -> pd.DataFrame:
    import pandas as pd  # heavy: replay and the records need only the Arrow tables

    df = streams.to_pandas()
    nullable = {
        pa.int16(): pd.Int16Dtype(),
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
    }
    for name in ("status", "t_headers_ns", "t_first_read_ns", "t_last_read_ns", "t_end_ns"):
        df[name] = streams[name].to_pandas(types_mapper=nullable.get)
    return df


class _Rows:
    """The tables as Python lists, converted once (column by column: ``Table.to_pylist()``
    builds a dict per row and cost a quarter of loading); records are made from these.

    Parallel replay converts them in each worker process, after it starts, so that only
    row numbers need to cross a process boundary.
    """

    def __init__(self, streams: pa.Table, chunks: pa.Table) -> None:
        self.columns = [_pylist(streams[name]) for name in _EXCHANGE_COLUMNS]
        ranges = _exchange_ranges(chunks)
        if ranges is None:  # an exchange's reads apart or out of order: sort them together
            chunks = chunks.sort_by(
                [("capture_id", "ascending"), ("exchange", "ascending"), ("seq", "ascending")]
            )
            ranges = _exchange_ranges(chunks)
        assert ranges is not None  # sorted by exchange and seq, each exchange is one run
        self.ranges: dict[tuple[str, int], tuple[int, int]] = ranges
        self.raw: list[bytes] = chunks["raw"].to_pylist()
        self.t_ns: list[int] = chunks["t_ns"].to_pylist()

    def exchange(self, row: int) -> RecordedExchange:
        """The exchange in ``streams`` row ``row``, with its reads."""
        r = dict(zip(_EXCHANGE_COLUMNS, [column[row] for column in self.columns], strict=True))
        start, stop = self.ranges.get((r["capture_id"], r["exchange"]), (0, 0))
        body = r["request_body"]
        return RecordedExchange(
            stream_id=r["stream_id"],
            attempt=r["attempt"],
            attempt_label=r["attempt_label"],
            provider=r["provider"],
            model=r["model"],
            method=r["method"],
            url=r["url"],
            request_headers=_json_dict(r["request_headers"]),
            request_body=(
                base64.b64decode(body)
                if r["request_body_encoding"] == "base64"
                else body.encode("utf-8")
            ),
            status=r["status"],
            http_version=r["http_version"],
            response_headers=_json_dict(r["response_headers"]),
            reads=self.raw[start:stop],
            read_t_ns=self.t_ns[start:stop],
            end_reason=r["end_reason"],
            error=r["error"],
            meta=_json_dict(r["meta"]),
            t_headers_ns=r["t_headers_ns"],
            t_first_read_ns=r["t_first_read_ns"],
            t_last_read_ns=r["t_last_read_ns"],
            t_end_ns=r["t_end_ns"],
            capture_id=r["capture_id"],
            exchange=r["exchange"],
            started_at=r["started_at"],
        )


def _pylist(column: pa.ChunkedArray) -> list:
    """``column.to_pylist()``; a UTC timestamp column converted here, to the same datetimes
    (``zoneinfo`` UTC), because pyarrow imports pandas to convert one (40 MB a replay does
    not otherwise need)."""
    kind = column.type
    if not (pa.types.is_timestamp(kind) and kind.tz == "UTC" and kind.unit == "us"):
        return column.to_pylist()
    epoch, step = _EPOCH_UTC, timedelta
    return [
        None if v is None else epoch + step(microseconds=v)
        for v in column.cast(pa.int64()).to_pylist()
    ]


_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=ZoneInfo("UTC"))


def _exchange_ranges(chunks: pa.Table) -> dict[tuple[str, int], tuple[int, int]] | None:
    """Each exchange's rows of ``chunks``, ``(capture_id, exchange) -> (start, stop)``, when
    each exchange's reads are one run of rows in ``seq`` order, as :func:`open` sorts them
    (by stream, attempt, exchange, seq); None otherwise. Reading the runs where they are
    spares a second sort, which copied every read of the table.

    The runs are found by Arrow's compute kernels (a row starts one where its capture id or
    exchange differs from the row before; a ``seq`` lower than the row before's inside a run
    is out of order), so Python only sees one item per exchange, not one per read."""
    n = chunks.num_rows
    if not n:
        return {}
    cid, ex, seq = chunks["capture_id"], chunks["exchange"], chunks["seq"]
    starts = [0]
    if n > 1:
        new = pc.or_kleene(_differs(cid, n), _differs(ex, n))
        back = pc.less(seq.slice(1), seq.slice(0, n - 1))
        if pc.any(pc.and_kleene(pc.invert(new), back)).as_py():
            return None
        starts += [i + 1 for i in pc.indices_nonzero(new).to_pylist()]
    ranges: dict[tuple[str, int], tuple[int, int]] = {}
    at = _int64_array(starts)
    keys = zip(cid.take(at).to_pylist(), ex.take(at).to_pylist(), strict=True)
    for key, start, stop in zip(keys, starts, [*starts[1:], n], strict=True):
        if key in ranges:  # this exchange's reads seen before, apart from these
            return None
        ranges[key] = (start, stop)
    return ranges


def _int64_array(values: list[int]) -> pa.Array:
    """``pa.array(values, pa.int64())`` from numpy's buffer: ``pa.array`` of any Python or
    numpy input imports pandas (to ask whether it is a pandas object), 38 MB that a replay
    from a path does not otherwise load."""
    return pa.Array.from_buffers(
        pa.int64(), len(values), [None, pa.py_buffer(np.asarray(values, dtype=np.int64))]
    )


def _differs(column: pa.ChunkedArray, n: int) -> pa.ChunkedArray:
    """Row i (of 1..n-1) of ``column`` differs from row i-1 (two nulls are equal, a null
    and a value differ: Python's ``!=`` on the lists)."""
    after, before = column.slice(1), column.slice(0, n - 1)
    unequal = pc.not_equal(after, before)
    if not column.null_count:
        return unequal
    return pc.coalesce(unequal, pc.xor(pc.is_null(after), pc.is_null(before)))


_EXCHANGE_COLUMNS = (
    "stream_id",
    "attempt",
    "attempt_label",
    "provider",
    "model",
    "method",
    "url",
    "request_headers",
    "request_body",
    "request_body_encoding",
    "status",
    "http_version",
    "response_headers",
    "end_reason",
    "error",
    "meta",
    "t_headers_ns",
    "t_first_read_ns",
    "t_last_read_ns",
    "t_end_ns",
    "capture_id",
    "exchange",
    "started_at",
)


def _group_requests(exchanges: list[RecordedExchange]) -> list[RecordedRequest]:
    """Exchanges (in ``streams`` order) grouped into logical requests, first seen first."""
    groups: dict[tuple[str | None, str], list[RecordedExchange]] = {}
    for ex in exchanges:
        groups.setdefault((ex.capture_id, ex.stream_id), []).append(ex)
    out = []
    for (capture_id, stream_id), members in groups.items():
        members.sort(key=lambda e: (e.attempt, e.exchange or 0))
        first = members[0]
        out.append(
            RecordedRequest(
                stream_id=stream_id,
                provider=first.provider,
                model=first.model,
                exchanges=members,
                meta=first.meta,
                capture_id=capture_id,
            )
        )
    return out


def _json_dict(text: str | None) -> dict:
    if not text:
        return {}
    try:
        value = json_loads(text)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _one_line(exc: BaseException) -> str:
    """``Type: message`` on one line (pyarrow's messages span several)."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"
