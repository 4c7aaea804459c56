"""``lab.sql(query, captures=..., results=...)``: DuckDB over captures and result tables.

Views (each only when its files exist):

- ``streams`` – the capture's ``streams-*.parquet`` (one row per HTTP exchange),
- ``chunks`` – the capture's ``chunks-*.parquet`` (one row per network read, ``raw`` bytes),
- ``results`` – ``streams-*.parquet`` of a ``replay(..., out=DIR)`` (one row per logical
  request: ``lab.tables.streams``),
- ``leaks`` – ``leaks-*.parquet`` of the same directory (``lab.tables.leaks``),
- ``attempts`` – ``attempts-*.parquet`` of the same directory (``lab.tables.attempts``),
- ``gaps`` – ``gaps-*.parquet`` of the same directory (``lab.tables.gaps``),
- ``latency`` – ``latency.parquet`` of the same directory (``lab.tables.latency``: per
  backend and timing figure, written after the last unit).

Each view globs one table's prefix: ``DIR/*.parquet`` would mix ``streams`` and ``chunks``
rows into one union (``docs/capture-schema.md``, "DuckDB"). Journals (an exchange still
being recorded, or cut by a crash before its part was written) are not Parquet, so DuckDB
does not see them: ``lab.capture.open`` recovers them.

DuckDB is an optional extra: ``pip install 'stream-lab[sql]'``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["SQL_VIEWS", "connect", "sql"]

SQL_VIEWS = ("streams", "chunks", "results", "leaks", "attempts", "gaps", "latency")


def _duckdb() -> Any:
    try:
        import duckdb
    except ImportError:
        raise ImportError(
            "lab.sql needs DuckDB: pip install 'stream-lab[sql]' (or pip install duckdb)"
        ) from None
    return duckdb


def _files(root: Path, prefix: str, *, recursive: bool) -> list[str]:
    if root.is_file():
        return [str(root)] if root.name.startswith(f"{prefix}-") else []
    pattern = f"**/{prefix}-*.parquet" if recursive else f"{prefix}-*.parquet"
    return sorted(str(p) for p in root.glob(pattern) if not p.name.startswith("."))


def _paths(value: str | Path | None, option: str) -> Path | None:
    if value is None:
        return None
    path = Path(value)
    if not path.exists():
        raise FileNotFoundError(f"{option} {value}: no such file or directory")
    return path


def connect(captures: str | Path | None = None, results: str | Path | None = None) -> Any:
    """A DuckDB connection (in memory) with the views over ``captures`` and ``results``."""
    duckdb = _duckdb()
    cap = _paths(captures, "captures=")
    res = _paths(results, "results=")
    if cap is None and res is None:
        raise ValueError("give captures=PATH (a capture) and/or results=DIR (replay out=DIR)")
    con = duckdb.connect()
    views: dict[str, list[str]] = {}
    if cap is not None:
        for table in ("streams", "chunks"):
            views[table] = _files(cap, table, recursive=True)
        if not views["streams"]:
            raise ValueError(f"captures={captures}: no streams-*.parquet under it")
    if res is not None:
        from lab.replay.files import warn_if_incomplete

        warn_if_incomplete(res)
        for view, table in (
            ("results", "streams"),
            ("leaks", "leaks"),
            ("attempts", "attempts"),
            ("gaps", "gaps"),
        ):
            views[view] = _files(res, table, recursive=False)
        latency = res / "latency.parquet"  # one file, not one per unit
        views["latency"] = [str(latency)] if res.is_dir() and latency.is_file() else []
        if not views["results"]:
            raise ValueError(
                f"results={results}: no streams-*.parquet (write it with replay(out=))"
            )
    for view, files in views.items():
        if files:
            listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
            con.execute(
                f"CREATE VIEW {view} AS SELECT * FROM read_parquet([{listed}], union_by_name=true)"
            )
    return con


def sql(
    query: str, *, captures: str | Path | None = None, results: str | Path | None = None
) -> pd.DataFrame:
    """Run ``query`` over the views (``streams``, ``chunks``, ``results``, ``leaks``,
    ``attempts``, ``gaps``, ``latency``) and return a DataFrame.

    >>> lab_sql = sql  # lab.sql
    >>> lab_sql("SELECT count(*) AS exchanges FROM streams", captures="captures")
       exchanges
    0        160
    """
    con = connect(captures, results)
    try:
        return con.execute(query).df()
    except _duckdb().CatalogException as exc:
        hint = _missing_view_hint(str(exc), con)
        if hint is None:
            raise
        first, _, rest = str(exc).partition("\n")
        raise type(exc)(f"{first} ({hint})" + (f"\n{rest}" if rest else "")) from None
    finally:
        con.close()


_RESULT_VIEWS = ("results", "leaks", "attempts", "gaps", "latency")


def _missing_view_hint(message: str, con: Any) -> str | None:
    """What to do when a query names a view this connection does not have: a result table
    without ``results=``, a capture table without ``captures=``, or the views there are."""
    import re

    found = re.search(r"Table with name (\w+) does not exist", message)
    if found is None:
        return None
    name = found.group(1).lower()
    rows = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    have = sorted(row[0] for row in rows)
    if name in _RESULT_VIEWS and name not in have:
        return (
            f"{name} is a table of replay results: write them with lab replay CAPTURE "
            "--out DIR, then give --results DIR (results=DIR)"
        )
    if name in ("streams", "chunks") and name not in have:
        return f"{name} is a capture table: give --captures PATH (captures=PATH)"
    return "the views here are " + ", ".join(have) if have else None
