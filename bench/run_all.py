"""Run every benchmark; print each one's table and PASS/FAIL line, then a summary.

    python bench/run_all.py [--quick]

``--quick`` runs smaller sizes (minutes -> tens of seconds); the targets in
docs/PERFORMANCE.md are for the default sizes. Exit status 1 when any benchmark failed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

BENCHES: list[tuple[str, list[str], list[str]]] = [
    # (script, default args, --quick args)
    ("bench_replay_floor.py", [], ["--chunks", "20000"]),
    ("bench_sse_framing.py", [], ["--chunks", "5000"]),
    ("bench_families.py", [], ["--chunks", "5000", "--repeat", "3"]),
    ("bench_litellm.py", [], ["--chunks", "2000"]),
    ("bench_linearity.py", [], ["--big", "40000", "--small", "4000", "--big-chars", "200000"]),
    ("bench_recorder.py", [], ["--chunks", "5000", "--repeat", "5"]),
    ("bench_parallel_replay.py", [], ["--n", "10", "--repeat", "3"]),
    ("bench_proxy.py", [], ["--chunks", "5000", "--repeat", "3", "--ttfb-pairs", "11"]),
    ("bench_proxy_paced.py", [], ["--streams", "50", "--events", "40", "--rounds", "1"]),
    ("bench_scale.py", [], ["--streams", "400"]),
    ("bench_fleet_workers.py", [], ["--repeat", "1"]),  # fewer streams: too few units to split
    ("bench_fleet_cpu.py", [], ["--streams", "1000", "--repeat", "1"]),
    ("sdk_wrappers_record.py", [], []),  # a check, not a timing: no recording_cut (issue 30)
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="*", help="script names (substring match)")
    args = ap.parse_args(argv)
    verdicts: list[str] = []
    failed = False
    for script, default, quick in BENCHES:
        if args.only and not any(o in script for o in args.only):
            continue
        cmd = [sys.executable, str(HERE / script), *(quick if args.quick else default)]
        print(f"\n$ {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        sys.stdout.write(proc.stdout)
        lines = [
            ln for ln in proc.stdout.splitlines() if ln.startswith(("PASS:", "FAIL:", "SKIP:"))
        ]
        if proc.returncode != 0 and not any(ln.startswith("FAIL:") for ln in lines):
            lines.append(f"FAIL: {script}: exited {proc.returncode}")
        failed |= proc.returncode != 0
        verdicts += [f"{ln}  [{time.perf_counter() - t0:.0f}s]" for ln in lines]
    print("\n# summary")
    for v in verdicts:
        print(v)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
