"""Benchmark 1: full-stack ``replay_sse("openrouter", body)`` against the floor.

The floor is what any consumer must at least do with the same bytes: split the body into
lines, keep the ``data:`` payloads and ``json.loads`` each one. The lab does that plus SSE
framing with read provenance, stage-02 normalization, every guard (think stripper, spill
guard, dedup, speaker guard), stage-03 ProcessedChunks, the processor and the result.

Target: full stack <= 3x the floor per chunk at 200k chunks (issue 21 item 7; it was 4x).

The contenders run in interleaved rounds, floor / lab / floor ...; the ratio is the median
over rounds of each lab run against the mean of the floor runs before and after it
(as benchmarks 4a and 5 do): on a shared host the floor alone moved
from 1.5 to 2.7 s within minutes, and a ratio of two medians moved with it.

    python bench/bench_replay_floor.py [--chunks 200000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Table,
    bracketed_rounds,
    machine_notes,
    openrouter_body,
    paired_times,
    timed_call,
    verdict,
)

TARGET = 3.0


def floor(body: bytes) -> int:
    """Bare SSE line splitting + json.loads of every data payload."""
    n = 0
    loads = json.loads
    for line in body.split(b"\n"):
        if line.startswith(b"data: "):
            payload = line[6:]
            if payload != b"[DONE]":
                loads(payload)
                n += 1
    return n


def full_stack(body: bytes) -> int:
    from lab.replay import replay_sse

    return len(replay_sse("openrouter", body).chunks)


def measure(n_chunks: int, repeat: int) -> dict[str, list[float]]:
    """Wall times of each contender: ``repeat`` rounds of floor, lab, then one floor more."""
    body = openrouter_body(n_chunks)
    assert floor(body) == n_chunks
    got = full_stack(body)
    assert got == n_chunks, (got, n_chunks)
    times = paired_times(
        {"floor": lambda: floor(body), "lab": lambda: full_stack(body)}, repeat=repeat, warmup=0
    )
    times["floor"].append(timed_call(lambda: floor(body)))  # every lab run between two floors
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"# replay vs floor  ({machine_notes()})")
    times = measure(args.chunks, args.repeat)
    t = {k: statistics.median(v) for k, v in times.items()}
    # lab / (mean of the floor runs on either side), round by round
    rounds = [1 / r for r in bracketed_rounds(times["floor"], times["lab"])]
    ratio = statistics.median(rounds)
    n = args.chunks
    table = Table("contender", "chunks", "median s", "us/chunk", "ratio vs floor")
    table.add("floor: split + json.loads", n, t["floor"], t["floor"] / n * 1e6, 1.0)
    table.add("lab: replay_sse full stack", n, t["lab"], t["lab"] / n * 1e6, ratio)
    table.print()
    print(
        "lab/floor per round (each lab run against the floor runs around it): "
        + ", ".join(f"{r:.2f}" for r in rounds)
    )
    ok = verdict(
        "replay_vs_floor",
        ratio <= TARGET,
        f"lab/floor = {ratio:.2f}x per chunk (target <= {TARGET}x)",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
