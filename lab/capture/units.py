"""Self-contained units of a capture: the pieces replay can read one at a time.

A unit is a set of files that holds every exchange of every logical request it mentions, so
replaying it needs nothing else. The writer puts every attempt of a logical request in one
part, so for its recordings a unit is one part (``streams-N.parquet`` with its
``chunks-N.parquet``). Older recordings may split a request's attempts across parts; those
parts are joined into one unit (found from the small ``streams`` tables alone, without
reading any ``raw`` bytes). A recording with journals left by a crash is one unit (a
journal may repeat an exchange a part already holds; the reader drops the repeat only when
it sees both). Files that are not named like parts (exported fixtures) are one unit.

Memory for a replay over units is bounded by the largest unit, not by the capture.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

__all__ = ["Unit", "capture_units"]

_PART = re.compile(r"^(streams|chunks)-(\d+)\.parquet$")


@dataclass(frozen=True)
class Unit:
    """Files to open together (``lab.capture.open(list(unit.files))``)."""

    files: tuple[Path, ...]
    n_bytes: int  # on disk

    def __len__(self) -> int:
        return len(self.files)


def capture_units(path: str | Path) -> list[Unit]:
    """The units of the capture at ``path`` (what :func:`lab.capture.open` accepts), in
    file order."""
    from lab.capture.reader import _resolve

    parts, journals = _resolve(path)
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
    for d in sorted(whole_dirs):
        files = [f for (pd_, _), fs in pairs.items() if pd_ == d for f in fs]
        units.append(_unit([*sorted(files), *sorted(by_dir_journals[d])]))
    groups = [fs for (d, _), fs in sorted(pairs.items()) if d not in whole_dirs]
    units.extend(_unit(sorted(fs)) for fs in _join_split_requests(groups))
    if loose:
        units.append(_unit(sorted(loose)))
    return units


def _unit(files: list[Path]) -> Unit:
    return Unit(tuple(files), sum(f.stat().st_size for f in files))


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
        for f in files:
            if not f.name.startswith("streams-"):
                continue
            table = pq.read_table(f, columns=["capture_id", "stream_id"])
            ids = zip(table["capture_id"].to_pylist(), table["stream_id"].to_pylist(), strict=True)
            for key in set(ids):
                j = owner.setdefault(key, i)
                if find(j) != find(i):
                    parent[find(i)] = find(j)
    merged: dict[int, list[Path]] = defaultdict(list)
    for i, files in enumerate(groups):
        merged[find(i)].extend(files)
    return [merged[k] for k in sorted(merged)]
