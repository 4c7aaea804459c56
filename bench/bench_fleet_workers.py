"""Benchmark: ``replay(path, out=DIR, workers=2)`` against the serial replay of the same fleet.

Builds the 4,000-stream OpenRouter fleet of bench_scale.py (``build_fleet``: 120 chunks a
stream, 1-3 events a read, ~170 MB of raw reads, 11 capture parts) and replays it to result
files serially and on two worker processes, interleaved (serial, workers, serial, ...),
``--repeat`` rounds; the speedup is the median over rounds of serial / workers.

Target (issue 34, item 1): >= 1.6x on two free cores. On a shared machine the ratio follows
what else runs; the load average is printed with it.

    python bench/bench_fleet_workers.py [--streams 4000] [--chunks 120] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Table, machine_notes, verdict  # noqa: E402
from bench_scale import build_fleet  # noqa: E402

TARGET = 1.6


def _timed(path: Path, workers: int | None) -> float:
    from lab.replay import replay

    out = tempfile.mkdtemp(prefix="lab-bench-out-")
    try:
        t0 = time.perf_counter()
        replay(path, out=out, workers=workers)
        return time.perf_counter() - t0
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=4000)
    ap.add_argument("--chunks", type=int, default=120)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lab-bench-fleet-") as root:
        path, chunks, raw = build_fleet(Path(root), args.streams, args.chunks)
        print(
            f"# {args.streams} streams, {chunks} chunks, {raw / 1e6:.1f} MB raw ({machine_notes()})"
        )
        table = Table("round", "serial s", "workers=2 s", "speedup")
        speedups = []
        for r in range(args.repeat):
            serial = _timed(path, None)
            parallel = _timed(path, 2)
            speedups.append(serial / parallel)
            table.add(r, f"{serial:.1f}", f"{parallel:.1f}", f"{speedups[-1]:.2f}x")
        table.print()
    median = statistics.median(speedups)
    detail = f"median speedup {median:.2f}x over {args.repeat} rounds (target >= {TARGET}x; {machine_notes()})"
    return 0 if verdict("fleet replay --out, workers=2", median >= TARGET, detail) else 1


if __name__ == "__main__":
    sys.exit(main())
