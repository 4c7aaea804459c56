"""Benchmark: CPU per chunk of a fleet replay to result files against ``replay_sse``.

Issue 34, item 1, in CPU time (``bench/callgrind_fleet.py`` counts the same comparison in
instructions, on a smaller fleet: callgrind is ~50x slower than the CPU). Builds the
4,000-stream OpenRouter fleet of bench_scale.py (``build_fleet``: 120 chunks a stream, 1-3
events a read, ~170 MB of raw reads, 11 capture parts), then measures, interleaved
(sse, out, sse, out, ...) for ``--repeat`` rounds, the CPU time (``time.process_time``, this
process only: no worker) of

- ``sse``: ``replay_sse("openrouter", reads)`` of every stream of the fleet, each with its own
  recorded reads (read from the capture before the clock starts): the single-body path
  over the same bodies;
- ``out``: ``replay(capture, out=DIR)``: open the capture unit by unit, replay every request,
  build the four result tables and ``latency.parquet``, write them.

The ratio is the median over rounds of ``out`` against the mean of the ``sse`` runs on either
side of it (:func:`_common.bracketed_rounds`); target <= 1.2x.

With ``--phases``, one more ``out`` run is split by phase, in CPU time per chunk: opening the
capture's parts (``lab.capture.open``), replaying the recorded requests
(``replay_request``), building and writing each unit's four files (``_write_unit``),
``latency.parquet`` (``_write_latency``), and the rest (the requests' records, freeing the
results, the run's bookkeeping). Each phase is timed by wrapping its function for that run
only; ``process_time`` counts every thread of this process (pyarrow's readers too).

    python bench/bench_fleet_cpu.py [--streams 4000] [--chunks 120] [--repeat 3] [--phases]
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Table, bracketed_rounds, machine_notes, verdict  # noqa: E402
from bench_scale import build_fleet  # noqa: E402

TARGET = 1.2
"""``replay --out`` at most this many times ``replay_sse``'s CPU per chunk."""


def _cpu(fn: object) -> float:
    gc.collect()
    t0 = time.process_time()
    fn()  # type: ignore[operator]
    return time.process_time() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=4000)
    ap.add_argument("--chunks", type=int, default=120)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--phases", action="store_true", help="split one more out run by phase")
    args = ap.parse_args(argv)
    import lab.capture
    from lab.replay import replay, replay_sse

    with tempfile.TemporaryDirectory(prefix="lab-bench-fleetcpu-") as root:
        path, chunks, raw = build_fleet(Path(root) / "fleet", args.streams, args.chunks)
        bodies = [
            [bytes(r) for r in request.exchanges[0].reads]
            for request in lab.capture.open(path).requests()
        ]
        print(
            f"# {len(bodies)} streams, {chunks} chunks, {raw / 1e6:.1f} MB raw ({machine_notes()})"
        )
        out = Path(root) / "out"

        def sse() -> None:
            for i, reads in enumerate(bodies):
                replay_sse("openrouter", reads, stream_id=f"s{i}")

        def to_files() -> None:
            shutil.rmtree(out, ignore_errors=True)
            replay(path, out=out)

        sse()  # warm-up: imports, lazy set-up
        to_files()
        base, fleet = [_cpu(sse)], []
        for _ in range(args.repeat):
            fleet.append(_cpu(to_files))
            base.append(_cpu(sse))
        ratios = [1 / x for x in bracketed_rounds(base, fleet)]  # out / sse
        table = Table("round", "sse us/chunk", "out us/chunk", "out/sse")
        for r, (b0, b1, f, ratio) in enumerate(
            zip(base[:-1], base[1:], fleet, ratios, strict=True)
        ):
            table.add(r, (b0 + b1) / 2 / chunks * 1e6, f / chunks * 1e6, f"{ratio:.3f}x")
        table.print()
        if args.phases:
            print()
            _phases(to_files, chunks, statistics.mean(base))
    median = statistics.median(ratios)
    detail = (
        f"median {median:.3f}x over {args.repeat} rounds (target <= {TARGET}x; {machine_notes()})"
    )
    return (
        0
        if verdict("fleet replay --out CPU per chunk vs replay_sse", median <= TARGET, detail)
        else 1
    )


PHASES = (
    ("opening the parts", "lab.capture", "open"),
    ("replaying the requests", "lab.replay.many", "replay_request"),
    ("the four unit files", "lab.replay.files", "_write_unit"),
    ("latency.parquet", "lab.replay.files", "_write_latency"),
)
"""(row, module, function): the phases of ``replay --out`` timed by ``--phases``."""


def _phases(to_files: object, chunks: int, sse_cpu: float) -> None:
    """One ``out`` run with each phase's function wrapped to add up its CPU time."""
    import importlib

    spent = dict.fromkeys([name for name, _, _ in PHASES], 0.0)
    saved = []
    for name, module_name, attr in PHASES:
        module = importlib.import_module(module_name)
        inner = getattr(module, attr)

        def timed(*a: object, _inner: object = inner, _name: str = name, **k: object) -> object:
            t0 = time.process_time()
            try:
                return _inner(*a, **k)  # type: ignore[operator]
            finally:
                spent[_name] += time.process_time() - t0

        saved.append((module, attr, inner))
        setattr(module, attr, timed)
    try:
        total = _cpu(to_files)
    finally:
        for module, attr, inner in saved:
            setattr(module, attr, inner)
    table = Table("phase of one out run", "us/chunk", "share")
    for name, cpu in spent.items():
        table.add(name, cpu / chunks * 1e6, f"{cpu / total:.0%}")
    rest = total - sum(spent.values())
    table.add("the rest", rest / chunks * 1e6, f"{rest / total:.0%}")
    table.add("out, whole", total / chunks * 1e6, "100%")
    table.add("sse (mean of the rounds' runs)", sse_cpu / chunks * 1e6, "")
    table.print()


if __name__ == "__main__":
    sys.exit(main())
