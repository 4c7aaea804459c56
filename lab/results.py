"""Read the result tables ``replay(path, out=DIR)`` (``lab replay PATH --out DIR``) writes.

A result directory holds several tables side by side, one file per capture unit::

    DIR/streams-00000.parquet    lab.tables.streams   one row per logical request
    DIR/leaks-00000.parquet      lab.tables.leaks     one row per guard event that moved text
                                                      or leaked marker the markup guard saw
    DIR/attempts-00000.parquet   lab.tables.attempts  one row per HTTP exchange
    DIR/gaps-00000.parquet       lab.tables.gaps      one row per gap between content reads
    DIR/latency.parquet          lab.tables.latency   per backend and timing figure (one file,
                                                      written after the last unit)

Read one table by its own prefix (:data:`TABLE_GLOBS`), never the whole directory:
``pd.read_parquet(DIR)`` or ``DIR/*.parquet`` unions the tables into one frame whose rows
are a mix of requests, guard events, exchanges and gaps (every other table's columns empty).

>>> import lab.results
>>> sorted(lab.results.TABLE_GLOBS.items())[0]
('attempts', 'attempts-*.parquet')

``read(DIR, table)`` reads every unit's file of one table in unit order, with the column
types :mod:`lab.tables` gives (token counts as nullable integers, ``Int64``);
``read(DIR, "latency")`` is ``lab.tables.latency(read(DIR))``, attrs and all. Other tools
take the globs directly: ``pd.concat(pd.read_parquet(p) for p in sorted(glob(DIR +
"/streams-*.parquet")))``, ``pyarrow.dataset.dataset(files)``, DuckDB
``read_parquet('DIR/streams-*.parquet')`` or ``lab.sql(..., results=DIR)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lab.resultfiles import RESULT_TABLES as TABLES  # the one list of result tables
from lab.resultfiles import TABLE_FILES

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["TABLE_GLOBS", "TABLES", "read"]

TABLE_GLOBS: dict[str, str] = dict(TABLE_FILES)
"""The file pattern of each table inside a result directory (one file per capture unit;
``latency.parquet``, one file, for ``latency``)."""


def read(out: str | Path, table: str = "streams") -> pd.DataFrame:
    """One result table of ``replay(..., out=out)``: every unit's file, in unit order.

    **table** – one of :data:`TABLES` (default ``"streams"``). Raises ValueError
    for another name and FileNotFoundError when ``out`` holds no file of that table.
    """
    from lab.resultfiles import read_results

    return read_results(out, table)
