"""``lab report``: tables, plots and an HTML report for captures."""

from __future__ import annotations

import argparse
from typing import Any

from lab.cli.common import (
    CONFIG_HELP,
    PATH_HELP,
    WORKERS_HELP,
    UsageError,
    check_out_dir,
    make_out_dir,
    open_loaded,
    positive,
    print_report,
    table_view,
)


def run(args: argparse.Namespace) -> int:
    from lab.replay import replay
    from lab.report import write_report

    out = check_out_dir("--out", args.out, children=("plots",))
    if (out / "report.html").is_dir():
        raise UsageError(f"--out {args.out}: {out / 'report.html'} is a directory")
    from lab.console import load_config

    config = load_config(args.config)
    capture = open_loaded(args.path)
    results = replay(capture, config=config, workers=args.workers, progress=True)
    make_out_dir("--out", out)  # after the replay: a bad PATH leaves no empty --out behind
    print_report(results, out / "plots", table_view(args))
    page = write_report(results, out, title=f"Stream Lab report: {args.path}")
    print(f"\nHTML report: {page}")
    return 0


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    """Add ``lab report`` to ``sub`` (``tv``: the table options parent parser)."""
    rep = sub.add_parser(
        "report",
        parents=[tv],
        help="tables and plots for captures",
        description="Replay a capture and write its plots and an HTML report under --out.",
    )
    rep.add_argument("path", help=PATH_HELP)
    rep.add_argument("--out", default="lab-report", help="output directory (default: lab-report)")
    rep.add_argument("--config", default=None, help=CONFIG_HELP)
    rep.add_argument("--workers", type=positive, default=None, help=WORKERS_HELP)
    rep.set_defaults(func=run)
