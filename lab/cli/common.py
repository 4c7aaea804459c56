"""What the commands share: usage errors, output directories, console tables, options."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.exceptions import LabError
from lab.view import KEY_COLUMNS


class UsageError(LabError):
    """Bad input from the command line: printed as one line, exit status 2."""


def displayable(text: str) -> str:
    """:func:`lab.console.displayable` (imported on use: ``lab --help`` stays fast)."""
    from lab.console import displayable as safe

    return safe(text)


def check_out_dir(option: str, value: str, children: tuple[str, ...] = ()) -> Path:
    """Refuse an output directory that cannot be one, before any work; nothing is created.

    ``value`` must be a directory or creatable as one (its nearest existing ancestor a
    writable directory); each of ``children`` (subdirectories the command writes) must not
    exist as anything but a directory.
    """
    out = Path(value)
    where = f"{option} {value}"
    if out.exists():
        if not out.is_dir():
            raise UsageError(f"{where}: not a directory")
        if not os.access(out, os.W_OK | os.X_OK):
            raise UsageError(f"{where}: directory is not writable")
        for child in children:
            path = out / child
            if path.exists() and not path.is_dir():
                raise UsageError(f"{where}: {path} is not a directory")
        return out
    ancestor = out.absolute().parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{where}: cannot create it, {ancestor} is not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"{where}: cannot create it, {ancestor} is not writable")
    return out


def make_out_dir(option: str, out: Path) -> None:
    """Create an output directory :func:`check_out_dir` passed; an OSError is bad input."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{option} {out}: cannot create it: {exc.strerror or exc}") from None


def check_base_url(url: str) -> None:
    """Refuse a ``--base-url`` that is not an absolute http(s) URL with a host."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise UsageError(f"--base-url {url}: not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"--base-url {url}: not an http(s) URL with a host (e.g. http://127.0.0.1:8000/v1)"
        )


@dataclass(frozen=True)
class TableView:
    """How console tables are printed: ``--columns``, ``--all`` / ``--limit``, ``--format``."""

    width: int = 100
    limit: int | None = 40
    fmt: str = "table"
    formats: bool = True  # the command takes --format (the footnote may suggest it)


def table_view(args: argparse.Namespace) -> TableView:
    width = getattr(args, "columns", None)
    if width is None:
        width = shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100
    fmt = getattr(args, "format", "table")
    limit = getattr(args, "limit", None)
    if getattr(args, "all", False):
        limit = None
    elif limit is None and fmt in ("table", "markdown"):  # csv / json: every row by default
        limit = TableView.limit
    return TableView(width=max(width, 20), limit=limit, fmt=fmt, formats=hasattr(args, "format"))


def print_table(
    title: str, df: Any, columns: list[str] | None = None, view: TableView | None = None
) -> None:
    from lab.console import render

    view = view or TableView()
    if view.fmt in ("csv", "json"):  # for programs: every column and row, no title
        print(render(df if view.limit is None else df.head(view.limit), fmt=view.fmt)[0])
        return
    shown = df[[c for c in columns if c in df.columns]] if columns else df
    limited = view.limit is not None and len(df) > view.limit
    rows = f"{len(df)} rows" + (
        f"; the first {view.limit} shown, --all for every row" if limited else ""
    )
    print(f"\n== {title} ({rows}) ==")
    if df.empty:
        print("(none)")
        return
    text, left_out = render(
        shown.head(view.limit) if limited else shown, fmt=view.fmt, width=view.width
    )
    print(text)
    if limited and view.limit is not None:
        print(f"... {len(df) - view.limit} more rows (--all or --limit N shows them)")
    if left_out:
        import textwrap

        note = (
            f"({len(left_out)} columns left out to fit {view.width} columns: "
            f"{', '.join(left_out)}; --columns N widens"
            + (", --format csv shows every column)" if view.formats else ")")
        )
        print(textwrap.fill(note, view.width))


STREAM_VIEW = [  # columns that do not fit the width go from the right
    *KEY_COLUMNS,
    "output_tokens",
    "cost",
    "provider",
    "leaked",
    "text_chars",
    "reasoning_chars",
    "outcome",
]


def print_report(results: list, out: Path | None, view: TableView | None = None) -> dict[str, Path]:
    from lab import tables

    st = tables.streams(results)
    print_table("streams", st, STREAM_VIEW, view)
    bb = tables.by_backend(st)
    print_table("by backend", bb, None, view)
    for sentence in tables.backend_verdicts(bb):
        print(displayable(sentence))
    print_table(
        "leaks",
        tables.leaks(results),
        ["stream_id", "serving_provider", "guard", "rule", "leak_kind", "moved"],
        view,
    )
    print_table("classifiers", tables.classifiers(st), None, view)
    att = tables.attempts(results)
    degraded = att.groupby("stream_id")["attempt"].transform("max") > 0 if len(att) else []
    print_table(
        "degradation attempts (streams that needed more than one)",
        att[degraded] if len(att) else att,
        ["stream_id", "model", "attempt", "label", "status", "end_reason", "error"],
        view,
    )
    written: dict[str, Path] = {}
    if out is not None:
        from lab import plots

        written = plots.write_all(results, out)
        print("\nplots:")
        for name, path in written.items():
            print(f"  {name}: {path}")
    return written


def progress(items: list, desc: str, disable: bool = False) -> Any:
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, unit="stream", leave=False, disable=disable)


def add_live_config_args(parser: argparse.ArgumentParser) -> None:
    """``--config``, ``--max-seconds`` and ``--max-bytes``: what a live command runs under."""
    parser.add_argument("--config", default=None, help=CONFIG_HELP)
    parser.add_argument(
        "--max-seconds",
        type=positive_float,
        default=None,
        metavar="S",
        help="end an exchange that takes longer than S seconds, headers and body, however "
        "slowly it trickles (LabConfig.max_exchange_s; default 1800)",
    )
    parser.add_argument(
        "--max-bytes",
        type=positive,
        default=None,
        metavar="N",
        help="stop reading a response past N decoded bytes "
        "(LabConfig.max_exchange_bytes; default 268435456, 256 MiB)",
    )


def live_config(args: argparse.Namespace) -> Any:
    """The LabConfig of ``--config`` with ``--max-seconds`` / ``--max-bytes`` on top."""
    from lab.console import load_config

    config = load_config(args.config)
    limits = {"max_exchange_s": args.max_seconds, "max_exchange_bytes": args.max_bytes}
    chosen = {k: v for k, v in limits.items() if v is not None}
    return config.model_copy(update=chosen) if chosen else config


def n_requests(n: int) -> str:
    return f"{n} request" if n == 1 else f"{n} requests"


def config_name(path: str | None) -> str:
    """How a config is named in a comparison: its file name, or ``defaults``."""
    return Path(path).name if path else "defaults"


def open_loaded(path: str, say: bool = True) -> Any:
    """Open the capture at ``path`` and say which recordings it holds (the bundled sample
    or your own), unless ``say`` is False (csv/json output is for programs)."""
    import warnings

    from lab.capture import open as open_capture
    from lab.capture.errors import CaptureWarning

    with warnings.catch_warnings():  # said below, once, without a source line
        warnings.simplefilter("ignore", CaptureWarning)
        capture = open_capture(path)
    if say:
        ids = capture.metadata.get("capture_ids", [])
        shown = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
        n = len(ids)
        loaded = f"loaded {n} recording{'' if n == 1 else 's'} from {path}: {shown}"
        print(displayable(loaded), flush=True)
    for problem in capture.warnings:  # stderr: csv/json on stdout stay clean
        print(f"lab: warning: {problem}", file=sys.stderr, flush=True)
    return capture


WORKERS_HELP = (
    "replay on N processes, this one included (default 1); results equal a serial replay's"
)


PATH_HELP = "a recording directory, a root of recordings, a .parquet, a glob"


CONFIG_HELP = (
    "a LabConfig / SpillGuardConfig JSON file, or 'complete' for every switch beyond the "
    "reference pipeline (default: the built-in defaults, the reference)"
)


DEST_HELP = "where fixtures go (default: tests/fixtures)"


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def nonnegative_float(text: str) -> float:
    """An argparse type: a finite number of at least 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def providers() -> list[str]:
    from lab.providers import PROVIDERS

    return sorted(PROVIDERS)


def key_env_names(adapter: Any) -> str:
    """The environment variable(s) an adapter reads its API key from (``A or B``)."""
    from lab.recorder import key_names

    return key_names(adapter)


def key_help() -> str:
    from lab.providers import get_adapter

    return "; ".join(f"{name}: {key_env_names(get_adapter(name))}" for name in providers())


def table_options() -> argparse.ArgumentParser:
    """The options every command that prints tables takes (a parent parser)."""
    tv = argparse.ArgumentParser(add_help=False)
    tv.add_argument(
        "--columns",
        type=positive,
        default=None,
        metavar="N",
        help="fit tables in N columns (default: the terminal's width, 100 when not a "
        "terminal); columns that do not fit are left out from the right and named",
    )
    rows = tv.add_mutually_exclusive_group()
    rows.add_argument("--all", action="store_true", help="print every row (default: 40)")
    rows.add_argument(
        "--limit",
        type=positive,
        default=None,
        metavar="N",
        help="print N rows (default 40; --format csv / json: every row)",
    )
    return tv


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the signal lands: a KeyboardInterrupt, so whatever stops on
    Ctrl-C stops on it too (the recorder closes, the partial capture is flushed)."""


def stop_on_sigterm() -> Any:
    """Make SIGTERM raise :class:`Terminated` until the returned function is called (only
    from the main thread: elsewhere signal handlers cannot be set, and nothing changes)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def terminated(signum: int, frame: Any) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, terminated)
    return lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
