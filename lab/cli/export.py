"""``lab export``: what the lab found, to other tools (OTLP)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lab.cli.common import (
    CONFIG_HELP,
    PATH_HELP,
    UsageError,
    check_base_url,
    check_out_dir,
    positive,
)


def run(args: argparse.Namespace) -> int:
    from lab.console import load_config
    from lab.otel import export_otlp

    if args.max_chars is not None and not args.messages:
        raise UsageError("--max-chars cuts the exported messages: give it with --messages")
    if args.max_chars is None:
        from lab.otel import MESSAGE_CHARS

        args.max_chars = MESSAGE_CHARS

    if (args.out is None) == (args.endpoint is None):
        raise UsageError("lab export otlp: give --out FILE.jsonl or --endpoint URL (one of them)")
    if args.endpoint is not None:
        check_base_url(args.endpoint)
    if args.out is not None:
        out = Path(args.out)
        if out.is_dir():
            raise UsageError(f"--out {args.out}: a directory; give a file name (spans.jsonl)")
        check_out_dir("--out", str(out.parent) if str(out.parent) else ".")
    try:
        n = export_otlp(
            args.path,
            out=args.out,
            endpoint=args.endpoint,
            config=load_config(args.config),
            provider=args.provider,
            messages=args.messages,
            max_chars=args.max_chars,
        )
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    where = args.out if args.out is not None else args.endpoint
    print(f"lab export otlp: {n} span(s), one per logical request, to {where}")
    return 0


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    """Add ``lab export`` to ``sub`` (``tv``: the table options parent parser)."""
    ex_ = sub.add_parser("export", help="export what the lab found to other tools")
    ex_sub = ex_.add_subparsers(dest="export_command", required=True)
    ot = ex_sub.add_parser(
        "otlp",
        help="one OpenTelemetry span per logical request (GenAI attributes, lab verdicts)",
        description="Replay PATH and export one span per logical request with the "
        "OpenTelemetry GenAI attributes, openinference.span.kind, the lab.* verdicts "
        "(serving backend, leaked, anomalies) and guard events as span events at their "
        "recorded times. Needs the [otel] extra.",
    )
    ot.add_argument("path", help=PATH_HELP)
    ot.add_argument(
        "--out", default=None, help="write OTLP/JSON lines to this file (default: none)"
    )
    ot.add_argument(
        "--endpoint",
        default=None,
        help="post OTLP/HTTP protobuf here, e.g. http://127.0.0.1:4318/v1/traces (default: none)",
    )
    ot.add_argument("--config", default=None, help=CONFIG_HELP)
    ot.add_argument(
        "--provider",
        default=None,
        help="replay every stream as this family (default: each stream's recorded family)",
    )
    ot.add_argument(
        "--messages",
        action="store_true",
        help="add the conversation (input messages, the answer, reasoning and tool calls, "
        "redacted) as OpenInference attributes; it exports what users and models said "
        "(default: off, verdicts and counts only)",
    )
    ot.add_argument(
        "--max-chars",
        type=positive,
        default=None,
        help="with --messages: cut each exported text to this many characters "
        "(default: lab.otel.MESSAGE_CHARS)",
    )
    ex_.set_defaults(func=run)
