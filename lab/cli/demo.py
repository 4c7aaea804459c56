"""``lab demo``: record every bundled fake scenario, replay, print tables, write plots, sweep."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lab.cli.common import (
    check_out_dir,
    displayable,
    make_out_dir,
    positive,
    print_report,
    progress,
    table_view,
)
from lab.cli.sweep import print_sweep
from lab.demo import DEMO_SWEEPS, DemoSweep


def run(args: argparse.Namespace) -> int:
    from lab.demo import demo_requests
    from lab.fakes import FakeServer
    from lab.recorder import Recorder
    from lab.replay import replay

    out = check_out_dir(
        "--out", args.out, children=("captures", "plots", *(s.out_dir for s in DEMO_SWEEPS))
    )
    make_out_dir("--out", out)
    plan = demo_requests(args.n)
    print(f"lab demo: {len(plan)} requests against the fake providers (loopback, no keys)")
    with FakeServer() as server:
        print(f"fake server on {server.base_url}")
        with Recorder(out / "captures", label="lab demo") as rec:
            for item in progress(plan, "record", disable=args.quiet):
                rec.record(
                    item["provider"], item["body"], base_url=server.base_url + item["base_path"]
                )
            live = rec.results
            path = rec.path
    print(f"capture written to {path}")
    replayed = replay(path, progress=not args.quiet)
    same = sum(1 for a, b in zip(live, replayed, strict=True) if a.to_dict() == b.to_dict())
    print(f"replay reproduces live: {same}/{len(live)} streams identical")
    print_report(replayed, out / "plots", table_view(args))
    print(displayable(SCRIPTED_NOTE))
    for spec in DEMO_SWEEPS:
        _demo_sweep(spec, out / spec.out_dir, quiet=args.quiet)
    if same != len(live):
        print("error: some replays differ from the live run", file=sys.stderr)
        return 1
    return 0


SCRIPTED_NOTE = (
    "lab demo: every stream above comes from a scripted scenario of the fake server (one "
    "known provider behaviour each: leaks, errors, rejections, cut streams; `lab fake-server` "
    "lists them), and the families and backends carry different numbers of them: a verdict "
    "above describes the script, not any real provider."
)


def _demo_sweep(spec: DemoSweep, out: Path, *, quiet: bool) -> Any:
    """One of the demo's sweeps (:data:`lab.demo.DEMO_SWEEPS`), offline, ended like
    ``lab sweep``, then what was planted against what the scorecard found."""
    from lab.demo import demo_sweep, planted_sentences

    with_ref = f" --reference {spec.reference}" if spec.reference else ""
    print(
        f"\nlab demo: sweep of {spec.model} over its backends, {spec.shows} "
        f"(like `lab sweep{with_ref}`)"
    )
    report, targets, prompts = demo_sweep(spec, out, progress=not quiet)
    card = print_sweep(out, report, targets, prompts, spec.n, reference=spec.reference)
    for sentence in planted_sentences(spec, card):
        print(displayable(sentence))
    return card


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    """Add ``lab demo`` to ``sub`` (``tv``: the table options parent parser)."""
    d = sub.add_parser(
        "demo",
        help="record every bundled fake scenario, replay, print tables, write plots",
        parents=[tv],
    )
    d.add_argument("--out", default="lab-demo", help="output directory (default: lab-demo)")
    d.add_argument("--n", type=positive, default=3, help="recordings per scenario (default 3)")
    d.add_argument("--quiet", action="store_true", help="no progress bars (default: show them)")
    d.set_defaults(func=run)
