"""``lab compare``: what changed between two runs, per backend and verdict, with tests."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lab.cli.common import UsageError, displayable, print_table, table_view

COMPARE_VIEW = [
    "serving_provider",
    "verdict",
    "a_n",
    "a_value",
    "b_n",
    "b_value",
    "difference",
    "test",
    "p_adjusted",
    "changed",
]
"""The columns ``lab compare`` prints (``--format csv`` / ``json`` print them all)."""


def print_changes(
    a: Any,
    b: Any,
    *,
    correction: str = "holm",
    alpha: float = 0.05,
    config: Any = None,
    names: tuple[str, str] = ("A", "B"),
) -> Any:
    """Compare two runs (:func:`lab.changes.compare_runs`) and print what changed, one
    sentence each, then the notes; returns the table."""
    from lab.changes import change_sentences, compare_runs

    table = compare_runs(a, b, correction=correction, alpha=alpha, config=config, names=names)
    for line in change_sentences(table):
        print(displayable(line))
    return table


def run(args: argparse.Namespace) -> int:
    for run in (args.a, args.b):
        if not Path(run).exists():
            raise UsageError(f"{run}: no such file or directory")
    if not 0.0 < args.alpha < 1.0:
        raise UsageError(f"--alpha {args.alpha}: must be between 0 and 1")
    from lab.config import LabConfig

    config = LabConfig.coerce(args.config) if args.config else None
    table = print_changes(
        args.a,
        args.b,
        correction=args.correction,
        alpha=args.alpha,
        config=config,
        names=(args.a, args.b),
    )
    print()
    columns = None if args.format in ("csv", "json") else COMPARE_VIEW
    print_table("compare", table, columns, table_view(args))
    return 0


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    from lab.console import FORMATS

    cp = sub.add_parser(
        "compare",
        parents=[tv],
        help="what changed between two runs, per backend and verdict, with tests",
        description="Compare two runs (captures, result directories of lab replay --out, or "
        "sweep --out directories) per serving backend and verdict: leak, error and stall "
        "rates (two-proportion z test, Fisher exact when counts are small) and latency "
        "(Mann-Whitney U on the per-stream values), each with its interval, p-values "
        "adjusted for the number of comparisons. Prints one sentence per change, then the "
        "table.",
    )
    cp.add_argument("a", help="the earlier run (capture, result dir or sweep dir)")
    cp.add_argument("b", help="the later run")
    cp.add_argument(
        "--correction",
        choices=("holm", "bh"),
        default="holm",
        help="holm (family-wise error) or bh (Benjamini-Hochberg, false discovery rate) "
        "(default: holm)",
    )
    cp.add_argument("--alpha", type=float, default=0.05, help="level of a change (default 0.05)")
    cp.add_argument(
        "--config", default=None, help="a LabConfig JSON to replay captures with (default: none)"
    )
    cp.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table, markdown, or csv / json for programs (default: table)",
    )
    cp.set_defaults(func=run)
