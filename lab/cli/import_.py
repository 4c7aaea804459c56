"""``lab import``: captures from HAR files and VCR cassettes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lab.cli.common import UsageError, check_out_dir


def run(args: argparse.Namespace) -> int:
    from lab.interchange import InterchangeError, import_har, import_vcr

    files = [args.file] if args.import_command == "har" else args.cassettes
    for f in files:
        if not Path(f).is_file():
            raise UsageError(f"{f}: no such file")
    check_out_dir("--out", args.out)
    try:
        if args.import_command == "har":
            report = import_har(args.file, args.out, label=args.label)
        else:
            report = import_vcr(args.cassettes, args.out, label=args.label)
    except (InterchangeError, ImportError) as exc:
        raise UsageError(str(exc)) from None
    print(report.summary())
    return 0 if report.imported else 1


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    """Add ``lab import`` to ``sub`` (it prints no tables: ``tv`` is unused)."""
    im = sub.add_parser(
        "import",
        help="captures from HAR files and VCR cassettes",
        description="Turn the streamed LLM exchanges of a HAR file (browser DevTools, "
        "mitmproxy, Charles) or of vcrpy / pytest-recording cassettes into a new capture "
        "under --out. Each body is one read (these formats keep it whole); a HAR's header "
        "and end timings are kept, per-read timing is not known. Other entries are counted "
        "and skipped. Exit 1 when nothing was imported.",
    )
    im_sub = im.add_subparsers(dest="import_command", required=True)
    har = im_sub.add_parser("har", help="import a HAR 1.2 file")
    har.add_argument("file", help="the .har file")
    vc = im_sub.add_parser("vcr", help="import vcrpy / pytest-recording YAML cassettes")
    vc.add_argument("cassettes", nargs="+", help="cassette files (one capture for all)")
    for p in (har, vc):
        p.add_argument(
            "--out",
            default="recordings",
            help="capture root (default: recordings; captures/ holds the bundled sample)",
        )
        p.add_argument("--label", default=None, help="a label for the capture (default: none)")
    im.set_defaults(func=run)
