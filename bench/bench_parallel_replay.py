"""Benchmark 5: parallel replay of a capture directory over worker processes.

Records every bundled fake scenario ``--n`` times (``lab.demo.demo_requests``) from
``FakeServer(delay_scale=0)`` into a temporary capture, then times
``replay(path, workers=2, progress=True)`` against ``replay(path, workers=1)`` (capture
loading included in both; the progress bar goes to stderr). Results must be identical.
The contenders run in interleaved rounds; the speedup is the median over rounds of the
parallel run against the mean of the serial runs before and after it.

Target: >= 1.7x on 2 cores.

For context the same run measures this machine's own ceiling: a pure-Python CPU loop of
about the serial replay's length, run whole in one process and then split in halves over
two forked processes (no data crosses, nothing is loaded). On a shared 2-core machine
that perfectly parallel work does not reach 2x either; the replay's speedup is reported as a
share of that ceiling too.

    python bench/bench_parallel_replay.py [--n 40] [--repeat 9] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Table,
    bracketed_ratio,
    machine_notes,
    paired_times,
    timed_call,
    verdict,
)

TARGET = 1.7


def record_capture(root: str, n: int) -> tuple[Path, int]:
    from lab.demo import demo_requests
    from lab.fakes import FakeServer
    from lab.recorder import Recorder

    items = demo_requests(n)
    with FakeServer(delay_scale=0) as srv, Recorder(root, label="bench") as rec:
        for item in items:
            rec.record(item["provider"], item["body"], base_url=srv.base_url + item["base_path"])
        path = rec.path
    return path, len(items)


def _cpu(fn) -> float:
    """CPU seconds of this process and its children while running ``fn``.

    Replay returns before its children have exited (a thread reaps them); their CPU time
    is counted once they have, so wait for that."""
    import multiprocessing

    a = os.times()
    fn()
    while multiprocessing.active_children():
        time.sleep(0.001)
    b = os.times()
    return (b.user + b.system + b.children_user + b.children_system) - (
        a.user + a.system + a.children_user + a.children_system
    )


def _spin(n: int) -> None:
    d: dict[int, str] = {}
    for i in range(n):
        d[i % 1000] = str(i)


PIECES = 64


def _spin_pieces(n: int, state, lock) -> None:  # noqa: ANN001
    """Claim pieces of the loop from a shared counter until none is left (as replay does)."""
    while True:
        with lock:
            i = state[0]
            state[0] = i + 1
        if i >= PIECES:
            return
        _spin(n // PIECES)


def spin_contenders(seconds: float) -> dict:
    """A pure-Python loop of about ``seconds``: whole in this process, and over this process
    and one forked child claiming pieces from a shared counter, as parallel replay claims
    its shares (nothing loaded, nothing sent back)."""
    import multiprocessing
    import time

    t0 = time.perf_counter()
    _spin(200_000)
    n = int(200_000 * seconds / (time.perf_counter() - t0))
    ctx = multiprocessing.get_context()

    def split() -> None:
        state, lock = ctx.RawArray("q", 1), ctx.Lock()
        child = ctx.Process(target=_spin_pieces, args=(n, state, lock))
        child.start()
        _spin_pieces(n, state, lock)
        child.join()

    return {"spin, 1 process": lambda: _spin(n // PIECES * PIECES), "spin, 2 processes": split}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40, help="recordings per fake scenario")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    print(f"# parallel replay  ({machine_notes()})")
    from lab.replay import replay

    with tempfile.TemporaryDirectory() as tmp:
        path, n_req = record_capture(tmp, args.n)
        serial = replay(path, workers=1)
        parallel = replay(path, workers=args.workers, progress=True)
        same = [r.to_dict() for r in serial] == [r.to_dict() for r in parallel]
        contenders = {
            "workers=1": lambda: replay(path, workers=1),
            f"workers={args.workers}": lambda: replay(path, workers=args.workers, progress=True),
        }
        if args.workers == 2:  # the machine's own ceiling, interleaved with the replays
            t0 = time.perf_counter()
            replay(path, workers=1)
            contenders.update(spin_contenders(time.perf_counter() - t0))
        times = paired_times(contenders, repeat=args.repeat, warmup=0)
        # one more run of each baseline after the last round: every parallel run then has a
        # baseline run on either side of it (bracketed_ratio), which cancels drift
        for name in ("workers=1", "spin, 1 process"):
            if name in contenders:
                times[name].append(timed_call(contenders[name]))
        cpu1 = _cpu(lambda: replay(path, workers=1))
        cpun = _cpu(lambda: replay(path, workers=args.workers))
    t = {k: statistics.median(v) for k, v in times.items()}
    t1, tn = t["workers=1"], t[f"workers={args.workers}"]
    speed = bracketed_ratio(times["workers=1"], times[f"workers={args.workers}"])
    ceiling = (
        bracketed_ratio(times["spin, 1 process"], times["spin, 2 processes"])
        if args.workers == 2
        else None
    )
    table = Table("replay", "streams", "median s", "streams/s", "CPU s (all procs)", "speedup")
    table.add("workers=1", n_req, t1, n_req / t1, cpu1, 1.0)
    table.add(f"workers={args.workers} (progress bar)", n_req, tn, n_req / tn, cpun, speed)
    table.print()
    print(
        f"identical results: {same}; cpus: {os.cpu_count()}; load avg: "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} (other tenants share the cores: "
        "the wall-clock speedup is capped by what they leave free)"
    )
    if ceiling is not None:
        print(
            f"this machine's ceiling (a pure-Python loop as long as workers=1, split over 2 "
            f"processes, interleaved with the replays, {args.repeat} rounds): "
            f"{ceiling:.2f}x; replay reaches {speed / ceiling:.0%} of it"
        )
    ok = verdict(
        "parallel_replay",
        speed >= TARGET and same,
        f"workers={args.workers} is {speed:.3f}x workers=1 (target >= {TARGET}x)"
        + ("" if same else "; RESULTS DIFFER"),
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
