"""Self-contained units of a capture: the pieces replay can read one at a time.

A unit is a set of files that holds every exchange of every logical request it mentions, so
replaying it needs nothing else. The writer puts every attempt of a logical request in one
part, so for its recordings a unit is one part (``streams-N.parquet`` with its
``chunks-N.parquet``). Older recordings may split a request's attempts across parts; those
parts are joined into one unit (found from the small ``streams`` tables alone, without
reading any ``raw`` bytes). A recording with journals left by a crash is one unit (a
journal may repeat an exchange a part already holds; the reader drops the repeat only when
it sees both). Files that are not named like parts (exported fixtures) are one unit.

A copy of a recording (a ``cp -r`` backup inside the captures root) shares its logical
requests with the original, so each copied part joins the original's part in one unit and
the reader keeps one copy of each exchange. ``capture_units`` warns once
(``CaptureWarning``) about such copies and about parts missing from a sequence; replaying
the units does not repeat it per unit.

A unit holds one exchange at most when it is large: a logical request with an exchange of
more than :data:`LARGE_EXCHANGE_BYTES` (its ``n_bytes``) is a unit of its own, made of its
part's files and a :class:`Selection` of that request, and the other requests of the part
are one more unit (a compacted part holds hundreds). The reader reads only a unit's
requests (:func:`lab.capture.open`'s ``select``), batch by batch, so memory for a replay
over units is bounded by the largest unit or the largest request, not by the capture.
"""

from __future__ import annotations

import re
import warnings
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lab.capture.errors import CaptureWarning
from lab.capture.journal import read_journals

__all__ = [
    "LARGE_EXCHANGE_BYTES",
    "SELECT_BATCH_BYTES",
    "Selection",
    "Unit",
    "capture_units",
    "read_columns",
    "read_selected",
]

_PART = re.compile(r"^(streams|chunks)-(\d+)\.parquet$")

LARGE_EXCHANGE_BYTES = 64 * 1024 * 1024
"""An exchange with more response bytes than this (``n_bytes``) makes its logical request
a unit of its own (see the module's docstring)."""


@dataclass(frozen=True)
class Selection:
    """Which logical requests, ``(capture_id, stream_id)``, of a unit's files are the unit:
    ``requests`` only (``keep``), or every one but them (not ``keep``)."""

    requests: frozenset[tuple[str, str]]
    keep: bool

    def mask(self, capture_ids: list[str], stream_ids: list[str]) -> list[bool]:
        """Per row: is the row's request in the unit?"""
        wanted, keep = self.requests, self.keep
        return [(key in wanted) == keep for key in zip(capture_ids, stream_ids, strict=True)]


@dataclass(frozen=True)
class Unit:
    """Files to open together, and which of their requests (all when ``select`` is None):
    ``lab.capture.open(list(unit.files), select=unit.select)``."""

    files: tuple[Path, ...]
    n_bytes: int  # on disk
    select: Selection | None = None

    def __len__(self) -> int:
        return len(self.files)


SELECT_BATCH_BYTES = 16 * 1024 * 1024
"""About how many decoded bytes a selected read (a unit's :class:`Selection`) decodes at a
time before it keeps the rows of its requests."""


def read_columns(path: Path, names: list[str]) -> pa.Table:
    """These columns of the Parquet file at ``path``: ``ParquetFile.read``, not
    ``pq.read_table``, whose dataset layer imports pandas, which a replay never needs."""
    with pq.ParquetFile(path) as pf:
        return pf.read(columns=names)


def read_selected(path: Path, pf: pq.ParquetFile, select: Selection) -> pa.Table:
    """The rows of ``pf`` whose request ``select`` keeps, read batch by batch (about
    :data:`SELECT_BATCH_BYTES` decoded each): the other rows never sit in memory."""
    meta = pf.metadata
    size = sum(
        meta.row_group(g).column(c).total_uncompressed_size
        for g in range(meta.num_row_groups)
        for c in range(meta.num_columns)
    )
    rows = max(1, meta.num_rows)
    batch = max(1, min(rows, SELECT_BATCH_BYTES * rows // max(1, size)))
    kept = []
    for b in pf.iter_batches(batch_size=batch):
        names = b.schema.names
        if "capture_id" not in names or "stream_id" not in names:
            from lab.capture.errors import CaptureError

            raise CaptureError(f"{path}: no capture_id and stream_id columns to select by")
        mask = select.mask(
            b.column(names.index("capture_id")).to_pylist(),
            b.column(names.index("stream_id")).to_pylist(),
        )
        kept.append(b.filter(pa.array(mask, pa.bool_())))
    return pa.Table.from_batches(kept, schema=pf.schema_arrow)


def release_freed() -> None:
    """Hand Arrow's freed memory back to the system, once a unit's tables are dropped.

    Arrow's default pool (mimalloc in the wheels) keeps what a unit's tables used: ~50 MB
    after a 17 MB unit, held while the next unit's results grow in Python's own heap, so
    a replay of many units peaked that much higher. Best effort (``release_unused``:
    ~0.5 ms a unit); a pool that cannot release ignores it."""
    pa.default_memory_pool().release_unused()


def capture_units(path: str | Path, *, split_large: bool = True) -> list[Unit]:
    """The units of the capture at ``path`` (what :func:`lab.capture.open` accepts), in
    file order. A directory under compaction gives the units of one whole set of its parts;
    a file gone between listing and reading (a compaction moved on) makes it list again.
    **split_large**: a request with an exchange over :data:`LARGE_EXCHANGE_BYTES` is a
    unit of its own (False: units are whole files, as compaction needs)."""
    from lab.capture.errors import CaptureError
    from lab.capture.reader import VANISHED_RETRIES

    for attempt in range(VANISHED_RETRIES + 1):
        try:
            return _capture_units(path, split_large)
        except FileNotFoundError as exc:
            if attempt == VANISHED_RETRIES:
                raise CaptureError(
                    f"{exc.filename}: listed and gone before it was read, "
                    f"{VANISHED_RETRIES + 1} times (is a compaction or a recorder running?)"
                ) from None
        except CaptureError:
            raise
        except Exception as exc:  # a part the listing could not read: open() names why
            from lab.capture.reader import _one_line
            from lab.capture.reader import open as open_capture

            open_capture(path)  # raises the reader's one clear CaptureError for the part
            raise CaptureError(f"{path}: could not list its units ({_one_line(exc)})") from None
    raise AssertionError("unreachable")  # pragma: no cover


def _capture_units(path: str | Path, split_large: bool) -> list[Unit]:
    from lab.capture.reader import _resolve

    parts, journals = _resolve(path)
    for problem in [*_duplicates(parts), *_missing(path, parts)]:
        warnings.warn(problem, CaptureWarning, stacklevel=3)
    by_dir_journals: dict[Path, list[Path]] = defaultdict(list)
    for j in journals:
        by_dir_journals[j.parent].append(j)
    # pair streams/chunks parts by (directory, number); anything else is its own group
    pairs: dict[tuple[Path, str], list[Path]] = {}
    loose: list[Path] = []
    for p in parts:
        m = _PART.match(p.name)
        if m:
            pairs.setdefault((p.parent, m.group(2)), []).append(p)
        else:
            loose.append(p)
    units: list[Unit] = []
    whole_dirs = set(by_dir_journals)
    # a recording with journals is one group (parts and journals); a copy of it elsewhere in
    # the root (its parts, its journals or both) shares its requests and joins it, so the
    # reader sees both copies and keeps one
    groups = [
        [
            *sorted(f for (pd_, _), fs in pairs.items() if pd_ == d for f in fs),
            *sorted(by_dir_journals[d]),
        ]
        for d in sorted(whole_dirs)
    ]
    groups += [fs for (d, _), fs in sorted(pairs.items()) if d not in whole_dirs]
    for fs in _join_split_requests(groups):
        if any(f.suffix == ".journal" for f in fs):
            units.append(
                _unit(
                    [
                        *sorted(f for f in fs if f.suffix != ".journal"),
                        *sorted(f for f in fs if f.suffix == ".journal"),
                    ]
                )
            )
            continue
        unit = _unit(sorted(fs))
        units.extend(_split_large(unit) if split_large else [unit])
    if loose:
        units.append(_unit(sorted(loose)))
    return units


def _unit(files: list[Path]) -> Unit:
    return Unit(tuple(files), sum(f.stat().st_size for f in files))


def _split_large(unit: Unit) -> list[Unit]:
    """``unit`` as it is, or, when a request in it has an exchange over
    :data:`LARGE_EXCHANGE_BYTES`, one unit for its other requests and one per such request
    (from the small ``streams`` tables alone)."""
    large: dict[tuple[str, str], None] = {}
    every: set[tuple[str, str]] = set()
    for f in unit.files:
        if not f.name.startswith("streams-"):
            continue
        table = read_columns(f, ["capture_id", "stream_id", "n_bytes"])
        rows = zip(
            table["capture_id"].to_pylist(),
            table["stream_id"].to_pylist(),
            table["n_bytes"].to_pylist(),
            strict=True,
        )
        for capture_id, stream_id, n_bytes in rows:
            every.add((capture_id, stream_id))
            if n_bytes is not None and n_bytes > LARGE_EXCHANGE_BYTES:
                large[(capture_id, stream_id)] = None
    if not large:
        return [unit]
    alone = [Unit(unit.files, unit.n_bytes, Selection(frozenset([key]), True)) for key in large]
    if len(every) == len(large):
        return alone
    return [Unit(unit.files, unit.n_bytes, Selection(frozenset(large), False)), *alone]


def _join_split_requests(groups: list[list[Path]]) -> list[list[Path]]:
    """Merge the part groups that share a logical request (union-find over stream ids)."""
    parent = list(range(len(groups)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[tuple[str, str], int] = {}
    for i, files in enumerate(groups):
        ids: set[tuple[str, str]] = set()
        for f in files:
            if not f.name.startswith("streams-"):
                continue
            table = read_columns(f, ["capture_id", "stream_id"])
            ids.update(
                zip(table["capture_id"].to_pylist(), table["stream_id"].to_pylist(), strict=True)
            )
        journals = [f for f in files if f.suffix == ".journal"]
        if journals:  # left by a crash: small, and read whole only here and by the reader
            ids.update(
                (str(c.header.get("capture_id")), str(c.header.get("stream_id")))
                for c in read_journals(journals)
            )
        for key in ids:
            j = owner.setdefault(key, i)
            if find(j) != find(i):
                parent[find(i)] = find(j)
    merged: dict[int, list[Path]] = defaultdict(list)
    for i, files in enumerate(groups):
        merged[find(i)].extend(files)
    return [merged[k] for k in sorted(merged)]


def _missing(path: str | Path, parts: list[Path]) -> list[str]:
    from lab.capture.reader import missing_parts

    return [] if Path(path).is_file() else missing_parts(parts)


def _duplicates(parts: list[Path]) -> list[str]:
    """One message per recording whose exchanges are in several ``streams`` parts (from the
    key columns alone; the reader compares the copies when it opens a unit)."""
    first: dict[tuple[str, int], Path] = {}
    found: dict[str, dict[tuple[Path, Path], int]] = {}
    for f in parts:
        if not _PART.match(f.name) or not f.name.startswith("streams-"):
            continue
        table = read_columns(f, ["capture_id", "exchange"])
        keys = zip(table["capture_id"].to_pylist(), table["exchange"].to_pylist(), strict=True)
        for key in keys:
            kept = first.setdefault(key, f)
            if kept is not f:
                pairs = found.setdefault(key[0], {})
                pair = (kept.parent, f.parent) if kept.parent != f.parent else (kept, f)
                pairs[pair] = pairs.get(pair, 0) + 1
    problems = []
    for capture_id, pairs in found.items():
        (kept, dropped), _n = next(iter(pairs.items()))
        more = len(pairs) - 1
        problems.append(
            f"{sum(pairs.values())} exchange(s) of recording {capture_id} are in both {kept} "
            f"and {dropped}"
            + (f" (and {more} more pair(s) of places)" if more else "")
            + f"; replay keeps the copies in {kept}, ignores those in {dropped}"
        )
    return problems
