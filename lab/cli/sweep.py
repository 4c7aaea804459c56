"""``lab sweep``: every prompt K times against every backend of a model."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lab.cli.common import (
    TableView,
    UsageError,
    add_live_config_args,
    check_base_url,
    check_out_dir,
    displayable,
    key_env_names,
    live_config,
    make_out_dir,
    n_requests,
    positive,
    print_table,
    providers,
    table_view,
)
from lab.cli.compare import print_changes


def _csv(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def _sweep_targets(args: argparse.Namespace, adapter: Any, key: str | None) -> list:
    from lab import sweep

    base_url = args.base_url or adapter.default_base_url
    if args.base_urls:
        for url in _csv(args.base_urls):
            check_base_url(url)
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


def run(args: argparse.Namespace) -> int:
    from lab import sweep
    from lab.providers import get_adapter

    try:
        adapter = get_adapter(args.provider)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.base_url is not None:
        check_base_url(args.base_url)
    elif not adapter.default_base_url and not args.base_urls:
        raise UsageError(f"provider {args.provider!r} needs a base URL (--base-url URL)")
    key = adapter.api_key_from_env()
    if not key and not (args.base_url or args.base_urls):
        raise UsageError(
            f"no API key: set {key_env_names(adapter)} (or pass --base-url to a server that "
            "needs none)"
        )
    out = check_out_dir("--out", args.out)
    if args.compare is not None and not Path(args.compare).exists():
        raise UsageError(f"--compare {args.compare}: no such file or directory")
    config = live_config(args)  # a bad --config is bad input, before any request
    try:
        source = args.prompts if args.preset is None else sweep.preset_prompts(args.preset)
        prompts = sweep.load_prompts(source)
        targets = _sweep_targets(args, adapter, key)
        plan = sweep.sweep_plan(args.provider, prompts, targets, n=args.n)
    except sweep.SweepError as exc:
        raise UsageError(str(exc)) from None
    labels = [t.label for t in targets]
    if args.reference is not None and args.reference not in labels:
        raise UsageError(
            f"--reference {args.reference}: not one of the targets ({', '.join(labels)})"
        )
    make_out_dir("--out", out)

    def interrupted(in_flight: int) -> None:
        print(
            f"\nlab sweep: stopping; waiting for {n_requests(in_flight)} in flight "
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
    print_sweep(
        out,
        report,
        len(targets),
        len(prompts),
        args.n,
        reference=args.reference,
        view=table_view(args),
    )
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


def print_sweep(
    out: Path,
    report: Any,
    targets: int,
    prompts: int,
    n: int,
    *,
    reference: str | None = None,
    view: TableView | None = None,
) -> Any:
    """The end of a sweep: what was sent, then the backend scorecard
    (:func:`lab.tables.scorecard` against ``reference``) as a compact table and its
    sentences, then the prompt lines where a backend's tool decision differed
    (:func:`lab.scorecard.trigger_disagreement_lines`). Returns the scorecard."""
    from lab import sweep, tables
    from lab.scorecard import compact_scorecard, trigger_disagreement_lines

    print(
        f"lab sweep: {targets} target(s) x {prompts} prompt(s) x {n} = "
        f"{report.planned} planned; {report.already} done before, {report.finished} now, "
        f"{report.missing} missing; sent {n_requests(report.sent)}, {report.throttled} "
        f"answered 429 (sent again after Retry-After, {report.waited_s:.1f} s paused)"
    )
    for line in report.errors:
        print(f"lab sweep: error: {line}", file=sys.stderr)
    if report.path is not None:
        print(f"capture written to {report.path}")
    view = view or TableView(formats=False)  # lab sweep and lab demo take no --format
    st = sweep.sweep_streams(out)
    card = tables.scorecard(st, reference=reference)
    against = f" against {reference}" if reference is not None else ""
    print_table(f"backend scorecard{against}", compact_scorecard(card), None, view)
    if view.fmt in ("table", "markdown"):
        print(
            "(rate (95 % interval); * worse with confidence than the other backends, "
            "or a different model (Holm-adjusted p); ttft: time to first token in ms)"
        )
    for sentence in card.attrs["sentences"]:
        print(displayable(sentence))
    for sentence in trigger_disagreement_lines(st, reference=reference):
        print(displayable(sentence))
    elsewhere = int(st["pinned_elsewhere"].sum()) if len(st) else 0
    if elsewhere:
        print(f"warning: {n_requests(elsewhere)} served by another backend than the pinned one")
    return card


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    """Add ``lab sweep`` to ``sub`` (``tv``: the table options parent parser)."""
    sw = sub.add_parser(
        "sweep",
        help="every prompt K times against every backend of a model; the backend scorecard",
        description="Send every prompt of FILE.jsonl (or of a --preset) --n times to every "
        "backend serving the model (OpenRouter: pinned with provider.order + "
        "allow_fallbacks false; --backends auto asks the endpoints API), record everything "
        "under --out, and print the backend scorecard: every verdict per backend (leaks, "
        "markup, errors, stalls, tool-call validity, trigger agreement) with its Wilson 95 "
        "% interval, the median and p90 time to first token with bootstrap intervals, and "
        "whether each backend serves the same model as --reference (MMD test); flags from "
        "one-sided Fisher exact tests, Holm-adjusted. A rerun into the same --out sends only "
        "what is missing. Ctrl-C lets the requests in flight finish.",
        epilog="exit status: 0 when the sweep ran (missing items are listed on stderr); 2 on "
        "bad input, before anything is sent; 130 on Ctrl-C.",
        parents=[tv],
    )
    sw.add_argument("--provider", required=True, help="one of: " + ", ".join(providers()))
    sw.add_argument(
        "--model",
        default=None,
        help="the model id (OpenRouter: author/slug; default: none, --models or --base-urls "
        "then name the targets)",
    )
    source = sw.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--prompts",
        default=None,
        help="JSONL: a JSON string (user message) or a request body (messages, tools, "
        "reasoning options...) per line (default: none; --prompts or --preset is required)",
    )
    source.add_argument(
        "--preset",
        default=None,
        metavar="NAME",
        help="a prompt set shipped with the lab instead of --prompts: tools = 54 requests "
        "offering four tools, 30 that want a call and 24 that do not (tool-call validity "
        "and trigger agreement; default: none)",
    )
    sw.add_argument(
        "--reference",
        default=None,
        metavar="TARGET",
        help="the backend (or model, or base URL) the others are held against: trigger "
        "agreement with its tool decisions, and the same-model test of every other backend "
        "against its answers (default: none: the majority of backends, the others pooled)",
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
        "--n", type=positive, default=10, help="requests per prompt and backend (default 10)"
    )
    sw.add_argument(
        "--concurrency", type=positive, default=4, help="requests in flight (default 4)"
    )
    sw.add_argument(
        "--max-requests",
        type=positive,
        default=None,
        help="send at most this many requests in this run (default: no limit)",
    )
    sw.add_argument(
        "--base-url", default=None, help="the provider's API base (default: its public API)"
    )
    sw.add_argument("--out", default="sweeps", help="capture root directory (default: sweeps)")
    add_live_config_args(sw)
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
    sw.set_defaults(func=run)
