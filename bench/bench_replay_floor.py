"""Benchmark 1: full-stack ``replay_sse("openrouter", body)`` against the floor.

The floor is what any consumer must at least do with the same bytes: split the body into
lines, keep the ``data:`` payloads and ``json.loads`` each one. The lab does that plus SSE
framing with read provenance, stage-02 normalization, every guard (think stripper, spill
guard, dedup, speaker guard), stage-03 ProcessedChunks, the processor and the result.

Target: full stack <= 4x the floor per chunk at 200k chunks.

    python bench/bench_replay_floor.py [--chunks 200000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Table, machine_notes, openrouter_body, paired_medians, verdict  # noqa: E402

TARGET = 4.0


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


def measure(n_chunks: int, repeat: int) -> dict[str, float]:
    body = openrouter_body(n_chunks)
    assert floor(body) == n_chunks
    got = full_stack(body)
    assert got == n_chunks, (got, n_chunks)
    return paired_medians(
        {"floor": lambda: floor(body), "lab": lambda: full_stack(body)}, repeat=repeat, warmup=0
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"# replay vs floor  ({machine_notes()})")
    t = measure(args.chunks, args.repeat)
    n = args.chunks
    table = Table("contender", "chunks", "median s", "us/chunk", "ratio vs floor")
    table.add("floor: split + json.loads", n, t["floor"], t["floor"] / n * 1e6, 1.0)
    table.add("lab: replay_sse full stack", n, t["lab"], t["lab"] / n * 1e6, t["lab"] / t["floor"])
    table.print()
    ratio = t["lab"] / t["floor"]
    ok = verdict(
        "replay_vs_floor",
        ratio <= TARGET,
        f"lab/floor = {ratio:.2f}x per chunk (target <= {TARGET}x)",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
