"""``lab replay``: captures through the full stack, a table per stream (or Parquet)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from lab.cli.common import (
    CONFIG_HELP,
    PATH_HELP,
    STREAM_VIEW,
    WORKERS_HELP,
    UsageError,
    check_out_dir,
    config_name,
    displayable,
    open_loaded,
    positive,
    print_table,
    providers,
    table_view,
)
from lab.console import FORMATS
from lab.replay.files import RESULT_TABLES, TABLE_FILES


def run(args: argparse.Namespace) -> int:
    from lab import tables
    from lab.console import load_config
    from lab.replay import compare, replay

    config = load_config(args.config)
    if args.compare:
        other = load_config(args.compare)
        a, b = config_name(args.config), config_name(args.compare)
        if a == b:  # same file name in two folders: say which is which
            a, b = f"{a} (--config)", f"{b} (--compare)"
        df = compare(open_loaded(args.path), config, other, names=(a, b))
        n_streams = df["stream_id"].nunique()
        fields = ", ".join(f"{f} {n}" for f, n in df["field"].value_counts(sort=False).items())
        print(
            f"\n== {n_streams} stream{'' if n_streams == 1 else 's'} whose output changed "
            f"under {b} against {a}"
            + (f" ({len(df)} field{'' if len(df) == 1 else 's'}: {fields})" if len(df) else "")
            + " =="
        )
        if df.empty:
            print("(none)")
        for row in df.itertuples():  # a diff is lines: print them, not an escaped cell
            backend = row.serving_provider if isinstance(row.serving_provider, str) else None
            print(displayable(f"\n--- {row.stream_id} ({backend or '-'}): {row.field}"))
            shown = row.diff.rstrip("\n") if row.diff else f"{a}: {row.a}\n{b}: {row.b}"
            print(displayable(shown))
        return 0
    provider = getattr(args, "provider", None)
    if provider is not None and provider not in providers():
        raise UsageError(f"--provider {provider}: unknown; one of: {', '.join(providers())}")
    kwargs = {"provider": provider} if provider is not None else {}
    if args.out is not None:
        out = check_out_dir("--out", args.out)
        import warnings

        from lab.capture.errors import CaptureWarning

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", CaptureWarning)
            written: Any = replay(  # with out=: the ResultFiles of the written tables
                args.path,
                config=config,
                workers=args.workers,
                progress=True,
                out=out,
                engine=args.engine,
                scheduler=args.scheduler,
                **kwargs,
            )
        for w in caught:  # one line each, without a source line
            if issubclass(w.category, CaptureWarning):
                print(f"lab: warning: {w.message}", file=sys.stderr, flush=True)
            else:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
        resumed = (
            f" ({written.resumed} of them written by an unfinished run before: resumed)"
            if written.resumed
            else ""
        )
        print(
            f"lab replay: {written.streams} streams from {written.units} unit(s){resumed}; "
            f"result tables in {out}: " + ", ".join(TABLE_FILES[t] for t in RESULT_TABLES)
        )
        bb = tables.by_backend(written.read("streams"))
        print_table("by backend", bb, None, table_view(args))
        for sentence in tables.backend_verdicts(bb):
            print(displayable(sentence))
        return 0
    view = table_view(args)
    for_people = view.fmt not in ("csv", "json")
    capture = open_loaded(args.path, say=for_people)
    results = replay(capture, config=config, workers=args.workers, progress=for_people, **kwargs)
    print_table("streams", tables.streams(results), STREAM_VIEW, view)
    return 0


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    """Add ``lab replay`` to ``sub`` (``tv``: the table options parent parser)."""
    rp = sub.add_parser(
        "replay",
        parents=[tv],
        help="replay captures through the full stack",
        description="Replay every logical request of a capture offline through "
        "normalization, guards, the degradation ladder and the processor (the code that "
        "ran live), and print one row per stream.",
    )
    rp.add_argument("path", help=PATH_HELP)
    rp.add_argument("--config", default=None, help=CONFIG_HELP)
    rp.add_argument(
        "--compare",
        default=None,
        metavar="CONFIG",
        help="A/B: the streams whose output changes under CONFIG against --config, each "
        "side named by its file name; 'complete' (every switch beyond the reference "
        "pipeline on: what the reference loses on this capture) and 'reference' name the "
        "built-in configs ('lab config example' prints a commented config to start from; "
        "default: no comparison)",
    )
    rp.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help="table (fitted to --columns), markdown, or csv / json for programs: no progress, "
        "no title, every row unless --limit (default: table)",
    )
    rp.add_argument("--workers", type=positive, default=None, help=WORKERS_HELP)
    rp.add_argument(
        "--provider",
        default=None,
        help="replay every stream as this family, one of: "
        + ", ".join(providers())
        + " (default: each stream's recorded family, else the one its request shows)",
    )
    rp.add_argument(
        "--out",
        default=None,
        help="write the result tables as Parquet under this directory (streams-*.parquet, "
        "leaks-*.parquet, attempts-*.parquet, gaps-*.parquet), one capture unit at a time, "
        "memory bounded by the largest unit, then latency.parquet over all of them (default: "
        "print the stream table)",
    )
    rp.add_argument(
        "--engine",
        choices=["local", "dask"],
        default="local",
        help="with --out: replay the units on this process or --workers processes (local), "
        "or on a Dask cluster (dask; the [dask] extra) (default: local)",
    )
    rp.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDR",
        help="with --engine dask: the scheduler address, e.g. tcp://10.0.0.5:8786 (default: "
        "a local Dask process pool)",
    )
    rp.set_defaults(func=run)
