"""``lab demo``: record every bundled fake scenario, replay, print tables, write plots, sweep."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lab.cli.common import (
    check_out_dir,
    make_out_dir,
    positive,
    print_report,
    progress,
    table_view,
)
from lab.cli.sweep import print_sweep


def run(args: argparse.Namespace) -> int:
    from lab.demo import demo_requests
    from lab.fakes import FakeServer
    from lab.recorder import Recorder
    from lab.replay import replay

    out = check_out_dir("--out", args.out, children=("captures", "plots", "sweep"))
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

    prompts = sweep.load_prompts(Path(__file__).parents[1] / "data" / "sweep_prompts.jsonl")
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
    print_sweep(out, report, len(targets), len(prompts), DEMO_SWEEP_N)


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
