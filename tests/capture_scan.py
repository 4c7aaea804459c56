"""Look for a string anywhere a capture could hold it: raw file bytes and decoded Parquet."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq


def places_holding(root: Path, needle: str) -> list[str]:
    """Every file under ``root`` whose bytes, or whose Parquet values once decompressed,
    contain ``needle`` (an empty list: it is nowhere on disk)."""
    raw = needle.encode()
    found = []
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        data = path.read_bytes()
        if raw in data:
            found.append(str(path))
        elif path.suffix == ".parquet":
            table = pq.read_table(path)
            for column in table.columns:
                for value in column.to_pylist():
                    if isinstance(value, str) and needle in value:
                        found.append(f"{path}:{column}")
                        break
                    if isinstance(value, bytes) and raw in value:
                        found.append(f"{path}:{column}")
                        break
    return found
