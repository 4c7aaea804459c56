"""``lab sql``: DuckDB over captures and replay result tables."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from lab.cli.common import UsageError, print_table, table_view
from lab.console import FORMATS
from lab.replay.files import IncompleteResults


def run(args: argparse.Namespace) -> int:
    from lab.sqlviews import sql

    captures = args.captures
    if captures is None and args.results is None:
        captures = "captures"
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", IncompleteResults)
            df = sql(args.query, captures=captures, results=args.results)
        for w in caught:  # an unfinished replay under --results: one line on stderr
            if issubclass(w.category, IncompleteResults):
                print(f"lab: warning: {w.message}", file=sys.stderr, flush=True)
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    except (ImportError, FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    except Exception as exc:  # DuckDB's own errors: a bad query is bad input
        if type(exc).__module__.split(".")[0] != "duckdb" and "duckdb" not in repr(type(exc)):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"sql: {first}") from None
    print_table("sql", df, None, table_view(args))
    return 0


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    """Add ``lab sql`` to ``sub`` (``tv``: the table options parent parser)."""
    sq = sub.add_parser(
        "sql",
        help="DuckDB over captures and replay result tables",
        description="Run one SQL query over the views streams and chunks (the capture "
        "tables under --captures) and results, leaks, attempts, gaps, latency (the tables "
        "lab replay --out DIR wrote under --results). Needs the [sql] extra (duckdb).",
        parents=[tv],
    )
    sq.add_argument("query", help="the SQL query")
    sq.add_argument(
        "--captures",
        default=None,
        help="a capture: recording dir or root (default: captures, when --results is not given)",
    )
    sq.add_argument(
        "--results", default=None, help="a directory of lab replay --out (default: none)"
    )
    sq.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table, markdown, or csv / json for programs (default: table)",
    )
    sq.set_defaults(func=run)
