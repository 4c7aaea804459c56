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
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lab.exceptions import LabError
from lab.view import KEY_COLUMNS

__all__ = ["main"]


class UsageError(LabError):
    """Bad input from the command line: printed as one line, exit status 2."""


def displayable(text: str) -> str:
    """:func:`lab.console.displayable` (imported on use: ``lab --help`` stays fast)."""
    from lab.console import displayable as safe

    return safe(text)


def _check_out_dir(option: str, value: str, children: tuple[str, ...] = ()) -> Path:
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


def _make_out_dir(option: str, out: Path) -> None:
    """Create an output directory :func:`_check_out_dir` passed; an OSError is bad input."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{option} {out}: cannot create it: {exc.strerror or exc}") from None


def _check_base_url(url: str) -> None:
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


def _table_view(args: argparse.Namespace) -> TableView:
    width = getattr(args, "columns", None)
    if width is None:
        width = shutil.get_terminal_size((100, 24)).columns if sys.stdout.isatty() else 100
    fmt = getattr(args, "format", "table")
    limit = getattr(args, "limit", None)
    if getattr(args, "all", False):
        limit = None
    elif limit is None and fmt in ("table", "markdown"):  # csv / json: every row by default
        limit = TableView.limit
    return TableView(width=max(width, 20), limit=limit, fmt=fmt)


def _print_table(
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
            f"{', '.join(left_out)}; --columns N widens, --format csv shows every column)"
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


def _report(results: list, out: Path | None, view: TableView | None = None) -> dict[str, Path]:
    from lab import tables

    st = tables.streams(results)
    _print_table("streams", st, STREAM_VIEW, view)
    bb = tables.by_backend(st)
    _print_table("by backend", bb, None, view)
    for sentence in tables.backend_verdicts(bb):
        print(displayable(sentence))
    _print_table(
        "leaks",
        tables.leaks(results),
        ["stream_id", "serving_provider", "guard", "rule", "moved"],
        view,
    )
    _print_table("classifiers", tables.classifiers(st), None, view)
    att = tables.attempts(results)
    degraded = att.groupby("stream_id")["attempt"].transform("max") > 0 if len(att) else []
    _print_table(
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


def cmd_demo(args: argparse.Namespace) -> int:
    from lab.demo import demo_requests
    from lab.fakes import FakeServer
    from lab.recorder import Recorder
    from lab.replay import replay

    out = _check_out_dir("--out", args.out, children=("captures", "plots", "sweep"))
    _make_out_dir("--out", out)
    plan = demo_requests(args.n)
    print(f"lab demo: {len(plan)} requests against the fake providers (loopback, no keys)")
    with FakeServer() as server:
        print(f"fake server on {server.base_url}")
        with Recorder(out / "captures", label="lab demo") as rec:
            for item in _progress(plan, "record", disable=args.quiet):
                rec.record(
                    item["provider"], item["body"], base_url=server.base_url + item["base_path"]
                )
            live = rec.results
            path = rec.path
    print(f"capture written to {path}")
    replayed = replay(path, progress=not args.quiet)
    same = sum(1 for a, b in zip(live, replayed, strict=True) if a.to_dict() == b.to_dict())
    print(f"replay reproduces live: {same}/{len(live)} streams identical")
    _report(replayed, out / "plots", _table_view(args))
    _demo_sweep(out / "sweep", quiet=args.quiet)
    if same != len(live):
        print("error: some replays differ from the live run", file=sys.stderr)
        return 1
    return 0


DEMO_SWEEP_MODEL = "fake/think-leak"
DEMO_SWEEP_N = 5


def _demo_sweep(out: Path, *, quiet: bool) -> None:
    """The investigation itself, offline: the bundled prompts DEMO_SWEEP_N times against
    every backend the fake endpoints API lists for DEMO_SWEEP_MODEL."""
    from lab import sweep
    from lab.fakes import FakeServer

    prompts = sweep.load_prompts(Path(__file__).parent / "data" / "sweep_prompts.jsonl")
    with FakeServer() as server:
        base = server.base_url + "/api/v1"
        backends = sweep.discover_backends(DEMO_SWEEP_MODEL, base_url=base)
        targets = sweep.openrouter_targets(DEMO_SWEEP_MODEL, backends, base_url=base)
        plan = sweep.sweep_plan("openrouter", prompts, targets, n=DEMO_SWEEP_N)
        print(
            f"\nlab demo: sweep of {DEMO_SWEEP_MODEL} over its {len(backends)} backends "
            f"({len(prompts)} prompts x {DEMO_SWEEP_N}, like `lab sweep`)"
        )
        report = sweep.run_sweep(
            plan, provider="openrouter", out=out, concurrency=8, progress=not quiet
        )
    _print_sweep(out, report, len(targets), len(prompts), DEMO_SWEEP_N)


def _print_sweep(out: Path, report: Any, targets: int, prompts: int, n: int) -> Any:
    """The end of a sweep: what was sent, the per-backend table and its verdicts."""
    from lab import sweep, tables

    print(
        f"lab sweep: {targets} target(s) x {prompts} prompt(s) x {n} = "
        f"{report.planned} planned; {report.already} done before, {report.finished} now, "
        f"{report.missing} missing; sent {_requests(report.sent)}, {report.throttled} "
        f"answered 429 (sent again after Retry-After, {report.waited_s:.1f} s paused)"
    )
    for line in report.errors:
        print(f"lab sweep: error: {line}", file=sys.stderr)
    if report.path is not None:
        print(f"capture written to {report.path}")
    st = sweep.sweep_streams(out)
    bb = tables.by_backend(st)
    _print_table("by backend", bb, SWEEP_VIEW)
    for sentence in tables.backend_verdicts(bb):
        print(displayable(sentence))
    elsewhere = int(st["pinned_elsewhere"].sum()) if len(st) else 0
    if elsewhere:
        print(f"warning: {_requests(elsewhere)} served by another backend than the pinned one")
    return bb


def _progress(items: list, desc: str, disable: bool = False) -> Any:
    from tqdm.auto import tqdm

    return tqdm(items, desc=desc, unit="stream", leave=False, disable=disable)


def cmd_fake_server(args: argparse.Namespace) -> int:
    from lab.fakes import serve_forever

    port = args.port
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port}: must be 0-65535 (0 = any free port)")
    try:
        serve_forever(port)
    except OSError as exc:
        # binding the socket is the first thing serve_forever does: nothing served yet
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"--port {port}: already in use on 127.0.0.1") from None
        if exc.errno == errno.EACCES:
            raise UsageError(
                f"--port {port}: permission denied on 127.0.0.1 (ports below 1024 "
                "need privileges; 0 = any free port)"
            ) from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise UsageError(f"--port {port}: cannot listen on 127.0.0.1: {exc.strerror}") from None
        raise
    return 0


def _add_live_config_args(parser: argparse.ArgumentParser) -> None:
    """``--config``, ``--max-seconds`` and ``--max-bytes``: what a live command runs under."""
    parser.add_argument("--config", default=None, help=_CONFIG_HELP)
    parser.add_argument(
        "--max-seconds",
        type=_positive_float,
        default=None,
        metavar="S",
        help="end an exchange that takes longer than S seconds, headers and body, however "
        "slowly it trickles (LabConfig.max_exchange_s; default 1800)",
    )
    parser.add_argument(
        "--max-bytes",
        type=_positive,
        default=None,
        metavar="N",
        help="stop reading a response past N decoded bytes "
        "(LabConfig.max_exchange_bytes; default 268435456, 256 MiB)",
    )


def _live_config(args: argparse.Namespace) -> Any:
    """The LabConfig of ``--config`` with ``--max-seconds`` / ``--max-bytes`` on top."""
    from lab.console import load_config

    config = load_config(args.config)
    limits = {"max_exchange_s": args.max_seconds, "max_exchange_bytes": args.max_bytes}
    chosen = {k: v for k, v in limits.items() if v is not None}
    return config.model_copy(update=chosen) if chosen else config


def cmd_record(args: argparse.Namespace) -> int:
    from lab.capture.errors import CaptureWriteError
    from lab.providers import adapter_for, build_body
    from lab.recorder import Recorder

    path = API_PATHS[args.api]
    try:
        adapter = adapter_for(args.provider, path)
    except ValueError as exc:
        raise UsageError(str(exc) if path is None else f"--api {args.api}: {exc}") from None
    if args.base_url is not None:
        _check_base_url(args.base_url)
    elif not adapter.default_base_url:  # 'custom' has no public API to default to
        raise UsageError(
            f"provider {args.provider!r} needs a base URL (e.g. --base-url http://host/v1)"
        )
    key = adapter.api_key_from_env()
    if not key and not args.base_url:
        names = _key_names(adapter)
        raise UsageError(
            f"no API key: set {names} (or pass --base-url to a server that needs none)"
        )
    _check_out_dir("--out", args.out)
    body = build_body(args.provider, model=args.model, prompt=args.prompt)
    if path is not None:
        from lab.providers.openai_responses import responses_body

        body = responses_body(body)
    config = _live_config(args)
    try:
        rec = Recorder(args.out, label=args.label, config=config)
    except OSError as exc:
        raise UsageError(
            f"--out {args.out}: cannot create a recording directory: {exc.strerror or exc}"
        ) from None
    restore = _stop_on_sigterm()
    try:
        with rec:
            for _ in _progress(list(range(args.n)), "record", disable=args.n == 1):
                r = rec.record(args.provider, body, base_url=args.base_url, api_key=key, path=path)
                if args.n == 1:
                    print(displayable(r.text))
                if r.error is not None:
                    message = displayable(r.error.message)
                    print(f"stream error ({r.error.type}): {message}", file=sys.stderr)
            results = rec.results
            print(f"capture written to {rec.path}")
    except KeyboardInterrupt as stop:
        done = len(rec.results)
        how = "terminated (SIGTERM)" if isinstance(stop, Terminated) else "interrupted"
        print(
            f"lab: {how} after {done} of {_requests(args.n)}; "
            f"partial capture written to {rec.path}",
            file=sys.stderr,
        )
        return RECORD_TERMINATED if isinstance(stop, Terminated) else 130
    except CaptureWriteError as first:  # disk full, I/O error: stop sending, say what is safe
        error = first
        try:
            rec.close()  # a no-op when leaving the with block closed it already
        except CaptureWriteError as final:  # the last word on what reached the disk
            error = final
        print(
            f"lab: error: cannot write the capture: {error}; stopped sending after "
            f"{len(rec.results)} of {_requests(args.n)}",
            file=sys.stderr,
        )
        return RECORD_WRITE_FAILED
    finally:
        restore()
    from lab import tables

    _print_table("streams", tables.streams(results), STREAM_VIEW, _table_view(args))
    failed = sum(1 for r in results if r.error is not None)
    if failed:
        severity = "error" if failed == len(results) else "warning"
        print(
            f"lab: {severity}: {failed} of {_requests(len(results))} failed; "
            f"capture written to {rec.path}",
            file=sys.stderr,
        )
        return RECORD_ALL_FAILED if failed == len(results) else RECORD_SOME_FAILED
    return 0


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the signal lands: a KeyboardInterrupt, so whatever stops on
    Ctrl-C stops on it too (the recorder closes, the partial capture is flushed)."""


def _stop_on_sigterm() -> Any:
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


API_PATHS: dict[str, str | None] = {"chat": None, "responses": "/responses"}
"""``lab record --api``: the provider API a recording goes to, as the endpoint path after the
base URL (None: the family's own, chat completions for the OpenAI-shaped families). An API is
named rather than a path given because the base URL already carries the version prefix
(``/v1``, ``/api/v1``) and the path also decides the body shape and the adapter."""

RECORD_ALL_FAILED = 1
"""``lab record``'s exit status when every request failed (each is still in the capture)."""
RECORD_SOME_FAILED = 3
"""``lab record``'s exit status when some requests failed and others got an answer."""
RECORD_WRITE_FAILED = 4
"""``lab record``'s exit status when the capture could not be written (disk full, I/O
error): it stopped sending, and the last line on stderr says how many exchanges are safe on
disk and where."""
RECORD_TERMINATED = 143
"""``lab record``'s exit status on SIGTERM (128 + 15, what a shell reports for a process the
signal killed): it stops sending like on Ctrl-C (130), and the last line on stderr says
where the partial capture is."""

_RECORD_EPILOG = (
    "exit status: 0 when every request got an answer; 1 when every request failed; 3 when "
    "some failed (each failure is recorded too, and the last line on stderr says how many "
    "of N failed and where the capture is); 4 when the capture could not be written "
    "(disk full, I/O error: it stops sending, and the last line on stderr says how many "
    "exchanges are safe on disk and where); 2 on bad input, before anything is sent or "
    "written; 130 on Ctrl-C and 143 on SIGTERM, after saying where the partial capture is."
)


SWEEP_VIEW = [
    "serving_provider",
    "streams",
    "leaked",
    "leak_rate",
    "leak_rate_ci_low",
    "leak_rate_ci_high",
    "leak_worse",
    "errors",
    "error_rate",
    "error_rate_ci_low",
    "error_rate_ci_high",
    "error_worse",
    "median_ttft_ms",
]


def _csv(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def _sweep_targets(args: argparse.Namespace, adapter: Any, key: str | None) -> list:
    from lab import sweep

    base_url = args.base_url or adapter.default_base_url
    if args.base_urls:
        for url in _csv(args.base_urls):
            _check_base_url(url)
        if not args.model:
            raise UsageError("--base-urls needs --model (the model every base URL serves)")
        return sweep.base_url_targets(args.model, _csv(args.base_urls))
    if args.models:
        return sweep.model_targets(_csv(args.models), base_url=args.base_url)
    if not args.model:
        raise UsageError("--model is required (or --models a,b to sweep over models)")
    if not adapter.names_backend:  # only a provider that names its backends has some
        raise UsageError(
            f"--provider {args.provider} has no backends to sweep: give --models a,b or "
            "--base-urls URL1,URL2"
        )
    backends = _csv(args.backends) if args.backends != "auto" else None
    if backends is None:
        if not base_url:
            raise UsageError("--backends auto needs --base-url")
        try:
            backends = sweep.discover_backends(args.model, base_url=base_url, api_key=key)
        except sweep.SweepError as exc:
            raise UsageError(str(exc)) from None
        print(displayable(f"{args.model}: {len(backends)} backend(s): {', '.join(backends)}"))
    if not backends:
        raise UsageError("--backends: give auto or a comma-separated list of backends")
    return sweep.openrouter_targets(args.model, backends, base_url=args.base_url)


def cmd_sweep(args: argparse.Namespace) -> int:
    from lab import sweep
    from lab.providers import get_adapter

    try:
        adapter = get_adapter(args.provider)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.base_url is not None:
        _check_base_url(args.base_url)
    elif not adapter.default_base_url and not args.base_urls:
        raise UsageError(f"provider {args.provider!r} needs a base URL (--base-url URL)")
    key = adapter.api_key_from_env()
    if not key and not (args.base_url or args.base_urls):
        raise UsageError(
            f"no API key: set {_key_names(adapter)} (or pass --base-url to a server that "
            "needs none)"
        )
    out = _check_out_dir("--out", args.out)
    if args.compare is not None and not Path(args.compare).exists():
        raise UsageError(f"--compare {args.compare}: no such file or directory")
    config = _live_config(args)  # a bad --config is bad input, before any request
    try:
        prompts = sweep.load_prompts(args.prompts)
        targets = _sweep_targets(args, adapter, key)
        plan = sweep.sweep_plan(args.provider, prompts, targets, n=args.n)
    except sweep.SweepError as exc:
        raise UsageError(str(exc)) from None
    _make_out_dir("--out", out)

    def interrupted(in_flight: int) -> None:
        print(
            f"\nlab sweep: stopping; waiting for {_requests(in_flight)} in flight "
            "(Ctrl-C again to stop waiting)",
            file=sys.stderr,
        )

    report = sweep.run_sweep(
        plan,
        provider=args.provider,
        config=config,
        out=out,
        concurrency=args.concurrency,
        max_requests=args.max_requests,
        api_key=key,
        label=args.label,
        progress=not args.quiet,
        on_interrupt=interrupted,
    )
    _print_sweep(out, report, len(targets), len(prompts), args.n)
    if args.compare is not None:
        print(f"\nlab sweep: what changed since {args.compare}")
        print_changes(args.compare, out, config=config, names=(str(args.compare), str(out)))
    if report.missing:
        why = (
            "interrupted"
            if report.interrupted
            else "--max-requests reached"
            if report.capped
            else "still throttled"
        )
        print(
            f"lab sweep: {why}: {report.missing} of {report.planned} missing; run the same "
            f"command again to send only those (same --out {out})",
            file=sys.stderr,
        )
    return 130 if report.interrupted else 0


# --------------------------------------------------------------------------- lab compare

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


def cmd_compare(args: argparse.Namespace) -> int:
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
    _print_table("compare", table, columns, _table_view(args))
    return 0


def _add_compare_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
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
    cp.set_defaults(func=cmd_compare)


def cmd_sql(args: argparse.Namespace) -> int:
    from lab.sqlviews import sql

    captures = args.captures
    if captures is None and args.results is None:
        captures = "captures"
    try:
        df = sql(args.query, captures=captures, results=args.results)
    except (ImportError, FileNotFoundError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    except Exception as exc:  # DuckDB's own errors: a bad query is bad input
        if type(exc).__module__.split(".")[0] != "duckdb" and "duckdb" not in repr(type(exc)):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UsageError(f"sql: {first}") from None
    _print_table("sql", df, None, _table_view(args))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from lab.console import load_config
    from lab.otel import export_otlp

    if (args.out is None) == (args.endpoint is None):
        raise UsageError("lab export otlp: give --out FILE.jsonl or --endpoint URL (one of them)")
    if args.endpoint is not None:
        _check_base_url(args.endpoint)
    if args.out is not None:
        out = Path(args.out)
        if out.is_dir():
            raise UsageError(f"--out {args.out}: a directory; give a file name (spans.jsonl)")
        _check_out_dir("--out", str(out.parent) if str(out.parent) else ".")
    try:
        n = export_otlp(
            args.path,
            out=args.out,
            endpoint=args.endpoint,
            config=load_config(args.config),
            provider=args.provider,
        )
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    where = args.out if args.out is not None else args.endpoint
    print(f"lab export otlp: {n} span(s), one per logical request, to {where}")
    return 0


def cmd_capture(args: argparse.Namespace) -> int:
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


def _requests(n: int) -> str:
    return f"{n} request" if n == 1 else f"{n} requests"


def _config_name(path: str | None) -> str:
    """How a config is named in a comparison: its file name, or ``defaults``."""
    return Path(path).name if path else "defaults"


def cmd_replay(args: argparse.Namespace) -> int:
    from lab import tables
    from lab.console import load_config
    from lab.replay import compare, replay

    config = load_config(args.config)
    if args.compare:
        other = load_config(args.compare)
        a, b = _config_name(args.config), _config_name(args.compare)
        if a == b:  # same file name in two folders: say which is which
            a, b = f"{a} (--config)", f"{b} (--compare)"
        df = compare(_open_loaded(args.path), config, other, names=(a, b))
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
    if provider is not None and provider not in _providers():
        raise UsageError(f"--provider {provider}: unknown; one of: {', '.join(_providers())}")
    kwargs = {"provider": provider} if provider is not None else {}
    if args.out is not None:
        out = _check_out_dir("--out", args.out)
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
        print(
            f"lab replay: {written.streams} streams from {written.units} unit(s); result "
            f"tables in {out}: "
            + ", ".join(f"{t}-*.parquet" for t in ("streams", "leaks", "attempts"))
        )
        bb = tables.by_backend(written.read("streams"))
        _print_table("by backend", bb, None, _table_view(args))
        for sentence in tables.backend_verdicts(bb):
            print(displayable(sentence))
        return 0
    view = _table_view(args)
    for_people = view.fmt not in ("csv", "json")
    capture = _open_loaded(args.path, say=for_people)
    results = replay(capture, config=config, workers=args.workers, progress=for_people, **kwargs)
    _print_table("streams", tables.streams(results), STREAM_VIEW, view)
    return 0


def _open_loaded(path: str, say: bool = True) -> Any:
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


def cmd_config(args: argparse.Namespace) -> int:
    from lab.console import config_example

    print(config_example())
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from lab.replay import replay
    from lab.report import write_report

    out = _check_out_dir("--out", args.out, children=("plots",))
    if (out / "report.html").is_dir():
        raise UsageError(f"--out {args.out}: {out / 'report.html'} is a directory")
    from lab.console import load_config

    config = load_config(args.config)
    capture = _open_loaded(args.path)
    results = replay(capture, config=config, workers=args.workers, progress=True)
    _make_out_dir("--out", out)  # after the replay: a bad PATH leaves no empty --out behind
    _report(results, out / "plots", _table_view(args))
    page = write_report(results, out, title=f"Stream Lab report: {args.path}")
    print(f"\nHTML report: {page}")
    return 0


def cmd_fixtures(args: argparse.Namespace) -> int:
    from lab import fixtures

    _check_out_dir("--dest", args.dest)
    args.capture = _open_loaded(args.path)  # says which recordings the fixtures come from
    if args.fixtures_command == "export" and getattr(args, "format", "lab") == "vcr":
        return _export_vcr(args)
    return fixtures.cli(args)


def _export_vcr(args: argparse.Namespace) -> int:
    """``lab fixtures export PATH --stream ID... --format vcr``: one cassette, every stream."""
    from lab.capture import open as open_capture
    from lab.fixtures import FixtureError, _find_request
    from lab.interchange import InterchangeError, export_vcr

    cap = getattr(args, "capture", None) or open_capture(args.path)
    try:
        ids = [_find_request(cap, sid).stream_id for sid in args.stream]
    except FixtureError as exc:
        raise UsageError(str(exc)) from None
    name = args.name or ids[0].replace("/", "_")
    dest = Path(args.dest) / (name if name.endswith((".yaml", ".yml")) else f"{name}.yaml")
    if dest.exists() and not args.force:
        raise UsageError(f"{dest} exists (--force replaces it)")
    try:
        path, n = export_vcr(cap, ids, dest)
    except (InterchangeError, ImportError) as exc:
        raise UsageError(str(exc)) from None
    print(f"exported {len(ids)} stream(s), {n} interaction(s) -> {path}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from lab.interchange import InterchangeError, import_har, import_vcr

    files = [args.file] if args.import_command == "har" else args.cassettes
    for f in files:
        if not Path(f).is_file():
            raise UsageError(f"{f}: no such file")
    _check_out_dir("--out", args.out)
    try:
        if args.import_command == "har":
            report = import_har(args.file, args.out, label=args.label)
        else:
            report = import_vcr(args.cassettes, args.out, label=args.label)
    except (InterchangeError, ImportError) as exc:
        raise UsageError(str(exc)) from None
    print(report.summary())
    return 0 if report.imported else 1


def _add_import_parser(sub: Any) -> None:
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
    im.set_defaults(func=cmd_import)


_WORKERS_HELP = (
    "replay on N processes, this one included (default 1); results equal a serial replay's"
)
_PATH_HELP = "a recording directory, a root of recordings, a .parquet, a glob"
_CONFIG_HELP = (
    "a LabConfig / SpillGuardConfig JSON file, or 'complete' for every switch beyond the "
    "reference pipeline (default: the built-in defaults, the reference)"
)
_DEST_HELP = "where fixtures go (default: tests/fixtures)"


def _positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _providers() -> list[str]:
    from lab.providers import PROVIDERS

    return sorted(PROVIDERS)


def _key_names(adapter: Any) -> str:
    """The environment variable(s) an adapter reads its API key from (``A or B``)."""
    from lab.recorder import key_names

    return key_names(adapter)


def _key_help() -> str:
    from lab.providers import get_adapter

    return "; ".join(f"{name}: {_key_names(get_adapter(name))}" for name in _providers())


def cmd_proxy(args: argparse.Namespace) -> int:
    from lab.providers import get_adapter
    from lab.proxy import (
        PROXY_TOKEN_ENV,
        ProxyConfig,
        is_loopback,
        require_httptools,
        require_uvicorn,
        serve,
    )

    try:
        adapter = get_adapter(args.provider)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    upstream = args.upstream or adapter.default_base_url
    if not upstream:
        raise UsageError(
            f"provider {args.provider!r} has no public API: give --upstream http://host/v1"
        )
    try:
        _check_base_url(upstream)
    except UsageError as exc:
        raise UsageError(str(exc).replace("--base-url", "--upstream", 1)) from None
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: must be 0-65535 (0 = any free port)")
    _check_out_dir("--out", args.out)
    try:
        require_uvicorn()
        if args.upstream_http == "wire":
            require_httptools()
    except ImportError as exc:
        raise UsageError(str(exc)) from None
    token = args.auth_token if args.auth_token is not None else os.environ.get(PROXY_TOKEN_ENV)
    if not is_loopback(args.host) and not args.allow_remote:
        raise UsageError(
            f"--host {args.host} is beyond loopback: anyone who reaches it could send requests "
            "through the proxy and fill --out; pass --allow-remote (and set --auth-token) to "
            "do it anyway"
        )
    config = ProxyConfig(
        upstream_http=args.upstream_http,
        provider=args.provider,
        upstream=upstream,
        out=args.out,
        label=args.label,
        roll_bytes=int(args.roll_mb * 1024 * 1024),
        roll_seconds=args.roll_minutes * 60.0,
        lab_config=_live_config(args),
        auth_token=token or None,
        require_recording=args.require_recording,
        **{
            field: value
            for field, value in (
                ("max_request_body_bytes", args.max_request_bytes),
                ("header_timeout_s", args.header_timeout),
                ("body_timeout_s", args.body_timeout),
            )
            if value is not None  # None: ProxyConfig's default
        },
    )
    restore = _stop_on_sigterm()  # SIGTERM ends it as Ctrl-C does: the report is printed
    try:
        report = serve(config, host=args.host, port=args.port, allow_remote=args.allow_remote)
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise UsageError(f"--port {args.port} on {args.host}: {exc.strerror}") from None
        raise
    finally:
        restore()
    if report is not None:  # the capture could not be written: say what is safe, and where
        print(report, file=sys.stderr)
        return RECORD_WRITE_FAILED
    return 0


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def _add_proxy_parser(sub: Any) -> None:
    px = sub.add_parser(
        "proxy",
        help="a recording reverse proxy in front of a provider API",
        description="Serve a streaming reverse proxy whose root stands for the upstream base "
        "URL (POST {proxy}/chat/completions goes to {upstream}/chat/completions), recording "
        "every exchange byte for byte under --out. Point any client at it by changing its "
        "base URL. The first line printed is the proxy's URL, then one line per finished "
        "exchange. The client's key is forwarded and never written. An X-Lab-Session header "
        "names the exchange's session (not forwarded). Needs the [proxy] extra (uvicorn).",
    )
    px.add_argument("--provider", required=True, help="one of: " + ", ".join(_providers()))
    px.add_argument(
        "--upstream",
        default=None,
        help="the upstream base URL (default: the provider's public API; 'custom' needs one)",
    )
    px.add_argument("--port", type=int, default=8787, help="port (default 8787; 0 = any free)")
    px.add_argument("--host", default="127.0.0.1", help="address (default 127.0.0.1)")
    px.add_argument(
        "--out",
        default="recordings",
        help="capture root directory (default: recordings; captures/ holds the bundled sample)",
    )
    px.add_argument(
        "--label", default=None, help="a label stored with each recording (default: none)"
    )
    px.add_argument(
        "--roll-mb",
        type=_positive_float,
        default=256.0,
        help="start a new recording directory after this many MiB of responses (default 256)",
    )
    px.add_argument(
        "--roll-minutes",
        type=_positive_float,
        default=60.0,
        help="... or after this many minutes (default 60)",
    )
    px.add_argument(
        "--upstream-http",
        choices=("wire", "httpx"),
        default="wire",
        help="the upstream client: wire (HTTP/1.1 parsed by httptools, the fast one; default) "
        "or httpx (the client of lab record; for what wire does not do: HTTP/2)",
    )
    _add_live_config_args(px)
    px.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host beyond loopback (a warning is printed; set --auth-token too). "
        "(default: loopback only)",
    )
    px.add_argument(
        "--auth-token",
        default=None,
        metavar="TOKEN",
        help="every request must carry X-Lab-Proxy-Token: TOKEN, or a path starting with "
        "/lab-token/TOKEN/ (so a base URL alone can carry it); others get 401 (default: "
        "the LAB_PROXY_TOKEN environment variable, else none)",
    )
    px.add_argument(
        "--require-recording",
        action="store_true",
        help="once the capture cannot be written (a full disk), refuse requests with 503 "
        "(default: forward them unrecorded; either way the proxy says so at once)",
    )
    px.add_argument(
        "--max-request-bytes",
        type=_positive,
        default=None,
        metavar="N",
        help="the largest request body taken; 413 past it (default 33554432, 32 MiB)",
    )
    px.add_argument(
        "--header-timeout",
        type=_positive_float,
        default=None,
        metavar="S",
        help="a client has S seconds to send its request line and headers; 408 past it "
        "(default 10)",
    )
    px.add_argument(
        "--body-timeout",
        type=_positive_float,
        default=None,
        metavar="S",
        help="a client has S seconds to send its request body; 408 past it (default 120)",
    )
    px.set_defaults(func=cmd_proxy)


def _table_options() -> argparse.ArgumentParser:
    """The options every command that prints tables takes (a parent parser)."""
    tv = argparse.ArgumentParser(add_help=False)
    tv.add_argument(
        "--columns",
        type=_positive,
        default=None,
        metavar="N",
        help="fit tables in N columns (default: the terminal's width, 100 when not a "
        "terminal); columns that do not fit are left out from the right and named",
    )
    rows = tv.add_mutually_exclusive_group()
    rows.add_argument("--all", action="store_true", help="print every row (default: 40)")
    rows.add_argument(
        "--limit",
        type=_positive,
        default=None,
        metavar="N",
        help="print N rows (default 40; --format csv / json: every row)",
    )
    return tv


def build_parser() -> argparse.ArgumentParser:
    from lab import __version__
    from lab.console import FORMATS

    p = argparse.ArgumentParser(
        prog="lab", description="Stream Lab: record, replay and tabulate LLM provider streams."
    )
    p.add_argument("--version", action="version", version=f"lab (stream-lab) {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    tv = _table_options()

    d = sub.add_parser(
        "demo",
        help="record every bundled fake scenario, replay, print tables, write plots",
        parents=[tv],
    )
    d.add_argument("--out", default="lab-demo", help="output directory (default: lab-demo)")
    d.add_argument("--n", type=_positive, default=3, help="recordings per scenario (default 3)")
    d.add_argument("--quiet", action="store_true", help="no progress bars (default: show them)")
    d.set_defaults(func=cmd_demo)

    f = sub.add_parser("fake-server", help="run the scripted fake providers on 127.0.0.1")
    f.add_argument(
        "--port",
        type=int,
        default=0,
        help="port on 127.0.0.1, 0-65535 (default 0: any free port, printed at start)",
    )
    f.set_defaults(func=cmd_fake_server)

    r = sub.add_parser(
        "record",
        parents=[tv],
        help="record live streams into a capture",
        description="Send one prompt to a provider, stream the answer and record it byte for "
        "byte (every read, its timing, every degradation attempt) into a new recording "
        "directory under --out. The API key comes from the provider's environment variable: "
        + _key_help()
        + ". It is sent, never written to the capture.",
        epilog=_RECORD_EPILOG,
    )
    r.add_argument("--provider", required=True, help="one of: " + ", ".join(_providers()))
    r.add_argument("--model", required=True, help="the model name as the provider spells it")
    r.add_argument("--prompt", required=True, help="the user message")
    r.add_argument(
        "--base-url",
        default=None,
        help="another endpoint of the provider's API family, e.g. a vLLM server "
        "(default: the provider's public API; 'custom' needs one)",
    )
    r.add_argument(
        "--api",
        choices=sorted(API_PATHS),
        default="chat",
        help="which API of the provider: chat (its chat completions or native API, the "
        "default) or responses (the OpenAI Responses API, POST {base}/responses: openai, "
        "openrouter, deepseek)",
    )
    r.add_argument("--n", type=_positive, default=1, help="how many times (default 1)")
    _add_live_config_args(r)
    r.add_argument(
        "--out",
        default="recordings",
        help="capture root directory (default: recordings; captures/ holds the bundled sample)",
    )
    r.add_argument(
        "--label", default=None, help="a label stored with the recording (default: none)"
    )
    r.set_defaults(func=cmd_record)

    sw = sub.add_parser(
        "sweep",
        help="every prompt K times against every backend of a model; per-backend table",
        description="Send every prompt of FILE.jsonl --n times to every backend serving the "
        "model (OpenRouter: pinned with provider.order + allow_fallbacks false; --backends "
        "auto asks the endpoints API), record everything under --out, and print the "
        "per-backend table with Wilson 95 %% intervals. A rerun into the same --out sends "
        "only what is missing. Ctrl-C lets the requests in flight finish.",
        epilog="exit status: 0 when the sweep ran (missing items are listed on stderr); 2 on "
        "bad input, before anything is sent; 130 on Ctrl-C.",
    )
    sw.add_argument("--provider", required=True, help="one of: " + ", ".join(_providers()))
    sw.add_argument(
        "--model",
        default=None,
        help="the model id (OpenRouter: author/slug; default: none, --models or --base-urls "
        "then name the targets)",
    )
    sw.add_argument(
        "--prompts",
        required=True,
        help="JSONL: a JSON string (user message) or a request body (messages, tools, "
        "reasoning options...) per line",
    )
    sw.add_argument(
        "--backends",
        default="auto",
        help="OpenRouter backends, comma-separated, or auto: the endpoints API (default auto)",
    )
    sw.add_argument(
        "--models", default=None, help="sweep over these models instead (a,b; default: none)"
    )
    sw.add_argument(
        "--base-urls",
        default=None,
        help="sweep over these base URLs instead (URL1,URL2; default: none)",
    )
    sw.add_argument(
        "--n", type=_positive, default=10, help="requests per prompt and backend (default 10)"
    )
    sw.add_argument(
        "--concurrency", type=_positive, default=4, help="requests in flight (default 4)"
    )
    sw.add_argument(
        "--max-requests",
        type=_positive,
        default=None,
        help="send at most this many requests in this run (default: no limit)",
    )
    sw.add_argument(
        "--base-url", default=None, help="the provider's API base (default: its public API)"
    )
    sw.add_argument("--out", default="sweeps", help="capture root directory (default: sweeps)")
    _add_live_config_args(sw)
    sw.add_argument(
        "--label", default=None, help="a label stored with the recording (default: lab sweep)"
    )
    sw.add_argument("--quiet", action="store_true", help="no progress bar (default: show it)")
    sw.add_argument(
        "--compare",
        default=None,
        metavar="PREVIOUS_OUT",
        help="end with what changed since this earlier sweep's --out, per backend and "
        "verdict with tests (lab compare PREVIOUS_OUT OUT; default: none)",
    )
    sw.set_defaults(func=cmd_sweep)
    _add_compare_parser(sub, tv)

    rp = sub.add_parser(
        "replay",
        parents=[tv],
        help="replay captures through the full stack",
        description="Replay every logical request of a capture offline through "
        "normalization, guards, the degradation ladder and the processor (the code that "
        "ran live), and print one row per stream.",
    )
    rp.add_argument("path", help=_PATH_HELP)
    rp.add_argument("--config", default=None, help=_CONFIG_HELP)
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
    rp.add_argument("--workers", type=_positive, default=None, help=_WORKERS_HELP)
    rp.add_argument(
        "--provider",
        default=None,
        help="replay every stream as this family, one of: "
        + ", ".join(_providers())
        + " (default: each stream's recorded family, else the one its request shows)",
    )
    rp.add_argument(
        "--out",
        default=None,
        help="write the result tables as Parquet under this directory (streams-*.parquet, "
        "leaks-*.parquet, attempts-*.parquet), one capture unit at a time, memory bounded by "
        "the largest unit (default: print the stream table)",
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
    rp.set_defaults(func=cmd_replay)
    _add_proxy_parser(sub)
    _add_import_parser(sub)

    rep = sub.add_parser(
        "report",
        parents=[tv],
        help="tables and plots for captures",
        description="Replay a capture and write its plots and an HTML report under --out.",
    )
    rep.add_argument("path", help=_PATH_HELP)
    rep.add_argument("--out", default="lab-report", help="output directory (default: lab-report)")
    rep.add_argument("--config", default=None, help=_CONFIG_HELP)
    rep.add_argument("--workers", type=_positive, default=None, help=_WORKERS_HELP)
    rep.set_defaults(func=cmd_report)

    cf = sub.add_parser("config", help="config files for --config and --compare")
    cf_sub = cf.add_subparsers(dest="config_command", required=True)
    cf_sub.add_parser(
        "example",
        help="print every config field at its default, each under a // comment "
        "(lab config example > my-config.json, edit, then --config my-config.json)",
    )
    cf.set_defaults(func=cmd_config)

    sq = sub.add_parser(
        "sql",
        help="DuckDB over captures and replay result tables",
        description="Run one SQL query over the views streams and chunks (the capture "
        "tables under --captures) and results, leaks, attempts (the tables lab replay "
        "--out DIR wrote under --results). Needs the [sql] extra (duckdb).",
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
    sq.set_defaults(func=cmd_sql)

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
    ot.add_argument("path", help=_PATH_HELP)
    ot.add_argument(
        "--out", default=None, help="write OTLP/JSON lines to this file (default: none)"
    )
    ot.add_argument(
        "--endpoint",
        default=None,
        help="post OTLP/HTTP protobuf here, e.g. http://127.0.0.1:4318/v1/traces (default: none)",
    )
    ot.add_argument("--config", default=None, help=_CONFIG_HELP)
    ot.add_argument(
        "--provider",
        default=None,
        help="replay every stream as this family (default: each stream's recorded family)",
    )
    ex_.set_defaults(func=cmd_export)

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
    cap.set_defaults(func=cmd_capture)

    fx = sub.add_parser("fixtures", help="regression fixtures from captured streams")
    fx_sub = fx.add_subparsers(dest="fixtures_command", required=True)
    ex = fx_sub.add_parser("export", help="export streams as regression fixtures")
    ex.add_argument("path", help="the capture the streams are in")
    ex.add_argument("--stream", action="append", required=True, help="stream id (repeatable)")
    ex.add_argument(
        "--name", default=None, help="fixture name (default: MODEL-BACKEND-<end of the stream id>)"
    )
    ex.add_argument("--dest", default="tests/fixtures", help=_DEST_HELP)
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
        help="spill_guard | guard=NAME | classifier=NAME | anomaly=NAME | error_type=TYPE",
    )
    sh.add_argument(
        "--name",
        default=None,
        help="fixture name (default: MODEL-BACKEND-<end of the stream id>-shrunk)",
    )
    sh.add_argument("--dest", default="tests/fixtures", help=_DEST_HELP)
    sh.add_argument(
        "--granularity",
        choices=["events", "reads"],
        default="events",
        help="remove whole SSE events or single network reads (default: events)",
    )
    sh.add_argument(
        "--max-replays",
        type=_positive,
        default=2000,
        help="give up shrinking after this many replays (default 2000)",
    )
    sh.add_argument(
        "--force",
        action="store_true",
        help="replace an existing fixture directory (default: refuse)",
    )
    fx.set_defaults(func=cmd_fixtures)
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
