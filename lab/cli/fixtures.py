"""``lab fixtures``: regression fixtures from captured streams."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from lab.cli.common import DEST_HELP, UsageError, check_out_dir, open_loaded, positive


def run(args: argparse.Namespace) -> int:
    from lab import fixtures

    check_out_dir("--dest", args.dest)
    args.capture = open_loaded(args.path)  # says which recordings the fixtures come from
    if args.fixtures_command == "export" and getattr(args, "format", "lab") == "vcr":
        return _export_vcr(args)
    return fixtures.cli(args)


def _export_vcr(args: argparse.Namespace) -> int:
    """``lab fixtures export PATH --stream ID... --format vcr``: one cassette, every stream."""
    from lab.capture import open as open_capture
    from lab.fixtures import FixtureError, _find_request, check_name
    from lab.interchange import InterchangeError, export_vcr

    cap = getattr(args, "capture", None) or open_capture(args.path)
    try:
        ids = [_find_request(cap, sid).stream_id for sid in args.stream]
        # a name given is one file name in --dest; a stream id made one
        made = re.sub(r"[^A-Za-z0-9._-]", "_", ids[0]).lstrip("._-") or "stream"
        name = check_name(args.name or made)
    except FixtureError as exc:
        raise UsageError(str(exc)) from None
    dest = Path(args.dest) / (name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
    if dest.exists() and not args.force:
        raise UsageError(f"{dest} exists (--force replaces it)")
    try:
        path, n = export_vcr(cap, ids, dest)
    except (InterchangeError, ImportError) as exc:
        raise UsageError(str(exc)) from None
    print(f"exported {len(ids)} stream(s), {n} interaction(s) -> {path}")
    return 0


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    """Add ``lab fixtures`` to ``sub`` (``tv``: the table options parent parser)."""
    fx = sub.add_parser("fixtures", help="regression fixtures from captured streams")
    fx_sub = fx.add_subparsers(dest="fixtures_command", required=True)
    ex = fx_sub.add_parser("export", help="export streams as regression fixtures")
    ex.add_argument("path", help="the capture the streams are in")
    ex.add_argument("--stream", action="append", required=True, help="stream id (repeatable)")
    ex.add_argument(
        "--name", default=None, help="fixture name (default: MODEL-BACKEND-<end of the stream id>)"
    )
    ex.add_argument("--dest", default="tests/fixtures", help=DEST_HELP)
    ex.add_argument(
        "--force",
        action="store_true",
        help="replace an existing fixture directory (default: refuse)",
    )
    ex.add_argument(
        "--format",
        choices=("lab", "vcr"),
        default="lab",
        help="lab: one fixture directory per stream (capture, SSE, golden); vcr: one vcrpy "
        "cassette DEST/NAME.yaml holding every stream, which vcrpy replays byte for byte "
        "matching on method, path and body (default: lab)",
    )
    sh = fx_sub.add_parser(
        "shrink", help="shrink a stream to the smallest one that keeps a property"
    )
    sh.add_argument("path", help="the capture the stream is in")
    sh.add_argument("--stream", required=True, help="stream id")
    sh.add_argument(
        "--predicate",
        required=True,
        help="spill_guard | guard=NAME[:rule=RULE] | classifier=NAME | anomaly=NAME | "
        "error_type=TYPE (a guard keeps the rule that fired first unless rule=* is given)",
    )
    sh.add_argument(
        "--name",
        default=None,
        help="fixture name (default: MODEL-BACKEND-<end of the stream id>-shrunk)",
    )
    sh.add_argument("--dest", default="tests/fixtures", help=DEST_HELP)
    sh.add_argument(
        "--granularity",
        choices=["events", "reads"],
        default="events",
        help="remove whole SSE events or single network reads (default: events)",
    )
    sh.add_argument(
        "--max-replays",
        type=positive,
        default=2000,
        help="give up shrinking after this many replays (default 2000)",
    )
    sh.add_argument(
        "--force",
        action="store_true",
        help="replace an existing fixture directory (default: refuse)",
    )
    fx.set_defaults(func=run)
