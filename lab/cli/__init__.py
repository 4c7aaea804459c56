"""``lab`` — the command line.

::

    lab demo [--out DIR] [--n N]       record every bundled fake scenario, replay, tables, plots
    lab fake-server [--port N]         the scripted fake providers on loopback
    lab record --provider P --model M --prompt TEXT [--base-url URL] [--api chat|responses]
               [--n N] [--out DIR] [--config FILE] [--max-seconds S] [--max-bytes N]
    lab sweep --provider P --model M --prompts FILE.jsonl [--backends auto|a,b] [--n K]
              [--concurrency C] [--max-requests R] [--base-url URL] [--out DIR]
              [--config FILE] [--max-seconds S] [--max-bytes N] [--compare PREVIOUS_OUT]
    lab compare A B [--correction holm|bh] [--alpha A]   what changed between two runs
    lab replay PATH [--config FILE] [--compare FILE] [--workers N] [--format F] [--provider P] [--out DIR]
                    [--engine local|dask] [--scheduler ADDR]
    lab show PATH [STREAM_ID] [--raw] [--config FILE] [--color auto|always|never]
                                       one stream: request, answer beside reasoning, timing
    lab proxy --provider P [--upstream URL] [--port N] [--host H] [--out DIR] [--label L]
    lab import har FILE [--out DIR];  lab import vcr CASSETTE... [--out DIR]
    lab report PATH [--out DIR] [--config FILE] [--workers N]
    lab capture compact DIR             merge small parts into large sorted ones
    lab export otlp PATH --out FILE.jsonl | --endpoint URL   one span per logical request
    lab sql "SELECT ..." [--captures PATH] [--results DIR]   DuckDB views over both
    lab fixtures export PATH --stream ID [--name NAME] [--dest DIR]
    lab fixtures shrink PATH --stream ID --predicate P [--name NAME] [--dest DIR]
    lab config example                 every config field at its default, commented
    lab --version

Commands that print tables take ``--columns N`` (default: the terminal's width, 100 when
not a terminal), ``--all`` / ``--limit N`` (default 40 rows); rendering is ``lab.console``.

Every command exits 0 on success, 2 on bad input with one line saying what was wrong
(checked before any work is done), 130 on Ctrl-C (with one line saying so); ``lab record``
exits 1 when every request failed, 3 when some did and 4 when the capture could not be
written (it stops sending), ``lab demo`` 1 when a replay differs from the live run.
``lab COMMAND --help`` says what each option does, with its default.

Each command is one module of this package holding its parser (``add_parser``) beside its
handler (``run``): ``lab.cli.record`` is ``lab record``, ``lab.cli.import_`` is ``lab import``;
``lab.cli.common`` holds what they share (usage errors, output directories, console tables).
"""

from __future__ import annotations

import argparse
import sys

from lab._version import __version__
from lab.cli import (
    capture,
    compare,
    config,
    demo,
    export,
    fake_server,
    fixtures,
    import_,
    proxy,
    record,
    replay,
    report,
    show,
    sql,
    sweep,
)
from lab.cli.common import UsageError, table_options
from lab.cli.record import (
    RECORD_ALL_FAILED,
    RECORD_SOME_FAILED,
    RECORD_TERMINATED,
    RECORD_WRITE_FAILED,
)

__all__ = [
    "RECORD_ALL_FAILED",
    "RECORD_SOME_FAILED",
    "RECORD_TERMINATED",
    "RECORD_WRITE_FAILED",
    "build_parser",
    "main",
]

COMMANDS = (
    demo,
    fake_server,
    record,
    sweep,
    compare,
    replay,
    show,
    proxy,
    import_,
    report,
    config,
    sql,
    export,
    capture,
    fixtures,
)
"""The command modules, in the order ``lab --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lab", description="Stream Lab: record, replay and tabulate LLM provider streams."
    )
    p.add_argument("--version", action="version", version=f"lab (stream-lab) {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    tv = table_options()
    for command in COMMANDS:
        command.add_parser(sub, tv)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except UsageError as exc:
        print(f"lab: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"lab {args.command}: interrupted (Ctrl-C)", file=sys.stderr)
        return 130
    except Exception as exc:  # clear one-line errors for known bad input
        from lab.capture import CaptureError
        from lab.config import ConfigError

        if isinstance(exc, (CaptureError, ConfigError, FileNotFoundError, ValueError)):
            print(f"lab: error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
