"""``lab capture``: maintain captures on disk."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lab.cli.common import UsageError


def run(args: argparse.Namespace) -> int:
    from lab.capture.compact import compact

    path = Path(args.dir)
    if not path.is_dir():
        raise UsageError(f"{args.dir}: not a directory")
    report = compact(path)
    for rec, why in report.skipped.items():
        print(f"lab capture compact: skipped {rec}: {why}", file=sys.stderr)
    print(
        f"lab capture compact: {len(report.recordings)} recording(s), "
        f"{report.parts_before} parts ({report.bytes_before:,} bytes) -> "
        f"{report.parts_after} parts ({report.bytes_after:,} bytes)"
    )
    return 0


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    """Add ``lab capture`` to ``sub`` (``tv``: the table options parent parser)."""
    cap = sub.add_parser("capture", help="maintain captures on disk")
    cap_sub = cap.add_subparsers(dest="capture_command", required=True)
    cp = cap_sub.add_parser(
        "compact",
        help="merge each recording's small parts into large sorted ones",
        description="Rewrite every recording under DIR as few large parts: whole logical "
        "requests per part, rows sorted by stream and sequence, large row groups, no "
        "statistics or dictionary on raw, no Arrow schema blob; the lab.* footer keys are "
        "kept and the bytes are copied unchanged. Recordings with journals are skipped.",
    )
    cp.add_argument("dir", help="a recording directory or a root of recordings")
    cap.set_defaults(func=run)
