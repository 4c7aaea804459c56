"""Benchmark: replay memory stays flat as a capture grows (``replay(path, out=DIR)``).

Builds two synthetic OpenRouter fleets with the lab's own writer (``CaptureWriter``, the
parts it chooses): N streams and 4N streams of ``--chunks`` SSE chunks each, read in 1-3
event reads. Each is replayed to Parquet result tables (``replay(path, out=DIR)``, one
capture unit at a time) in a fresh process that reports its own peak RSS and the CPU time
of the replay. For contrast the N fleet is also replayed the old way, into memory
(``replay(path)``: the whole capture loaded, every result kept).

Prints the table, then, last, one line:

    scale: N=<n> peak_rss_mb=<a> 4N peak_rss_mb=<b> ratio=<b/a> us_per_chunk=<c>

(``us_per_chunk``: CPU microseconds of the 4N replay per SSE chunk.) Goal: ratio <= 1.2.
The 4N fleet is also replayed into memory (``replay(path)``, read unit by unit, every
result kept): its peak RSS over the fleet's raw bytes, goal <= 3.0.
The 4N fleet is also replayed with ``workers=2`` (units on two forked processes), and the
CPU seconds of that (children included) over the serial loop's are printed: the local
process pool must not cost more CPU than a serial loop over units.

Units saturate at the writer's part size (16 MiB of pending reads start a part), so N
should give at least a few parts (N >= 400 at the default 120 chunks a stream): with a
single small unit at N the ratio compares unit sizes, not capture sizes.

    python bench/bench_scale.py [--streams 1000] [--chunks 120]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Table, machine_notes, openrouter_chunks, verdict  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.2
MEMORY_TARGET = 3.0  # issue 34 item 1: in-memory replay() peak RSS over the raw bytes

_CHILD = r"""
import json, resource, sys, time
mode, path, out = sys.argv[1], sys.argv[2], sys.argv[3]
from lab.replay import replay
t0 = time.process_time()
if mode in ("out", "out2"):
    written = replay(path, out=out, workers=2 if mode == "out2" else None)
    streams = written.streams
else:
    results = replay(path)
    streams = len(results)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = time.process_time() - t0 + kids.ru_utime + kids.ru_stime
peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"streams": streams, "cpu_s": cpu, "peak_mb": peak_kb / 1024}))
"""


def build_fleet(root: Path, n: int, chunks: int, seed: int = 0) -> tuple[Path, int, int]:
    """``n`` OpenRouter streams written by CaptureWriter; returns (path, chunks, raw bytes)."""
    from lab.capture import CaptureWriter

    rng = random.Random(seed)
    events = [
        b"data: " + json.dumps(c, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
        for c in openrouter_chunks(chunks, seed=seed)
    ] + [b"data: [DONE]\n\n"]
    reads: list[bytes] = []
    i = 0
    while i < len(events):  # 1-3 events per read, like a real socket
        k = rng.randint(1, 3)
        reads.append(b"".join(events[i : i + k]))
        i += k
    body = json.dumps(
        {"model": "z-ai/glm-4.6", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    ).encode()
    headers = {"content-type": "text/event-stream"}
    total = 0
    with CaptureWriter(root, label=f"bench-scale-{n}") as writer:
        for s in range(n):
            sid = f"s{seed:02d}{s:08d}"
            with writer.logical_request(sid):
                rec = writer.exchange(
                    stream_id=sid,
                    attempt=0,
                    attempt_label="default",
                    provider="openrouter",
                    model="z-ai/glm-4.6",
                    method="POST",
                    url="https://openrouter.ai/api/v1/chat/completions",
                    request_headers={"content-type": "application/json"},
                    request_body=body,
                )
                rec.on_response(200, headers, "HTTP/1.1")
                for r in reads:
                    rec.on_read(r)
                rec.on_end("eof")
            total += len(body)
        path = writer.path
    raw = sum(len(r) for r in reads) * n
    return path, (len(events) - 1) * n, raw


def measure(mode: str, path: Path, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(path), str(out)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", type=int, default=1000, help="N (default 1000)")
    p.add_argument("--chunks", type=int, default=120, help="SSE chunks per stream (default 120)")
    args = p.parse_args(argv)
    n = args.streams
    table = Table("fleet", "streams", "raw MB", "parts", "replay", "peak RSS MB", "us/chunk")
    with tempfile.TemporaryDirectory(prefix="lab-bench-scale-") as tmp:
        tmp = Path(tmp)
        runs = {}
        for label, count, seed in (("N", n, 1), ("4N", 4 * n, 2)):
            t0 = time.perf_counter()
            path, chunks, raw = build_fleet(tmp / label, count, args.chunks, seed)
            built = time.perf_counter() - t0
            parts = len(list(path.glob("streams-*.parquet")))
            m = measure("out", path, tmp / f"{label}-results")
            runs[label] = (m, chunks)
            table.add(
                label,
                m["streams"],
                f"{raw / 1e6:.1f}",
                parts,
                "out=DIR (units)",
                f"{m['peak_mb']:.0f}",
                f"{m['cpu_s'] / chunks * 1e6:.1f}",
            )
            print(
                f"built {label}: {count} streams, {raw / 1e6:.1f} MB raw in {built:.1f} s",
                file=sys.stderr,
            )
            if label == "4N":  # the local process pool must not cost more CPU than serial
                two = measure("out2", path, tmp / f"{label}-results-2")
                runs["4N-2"] = (two, chunks)
                table.add(
                    label,
                    two["streams"],
                    f"{raw / 1e6:.1f}",
                    parts,
                    "out=DIR workers=2",
                    f"{two['peak_mb']:.0f} (parent)",
                    f"{two['cpu_s'] / chunks * 1e6:.1f}",
                )
            if label == "4N":  # issue 34 item 1: the in-memory replay against the raw bytes
                mem4 = measure("memory", path, tmp / "unused")
                runs["4N-memory"] = (mem4, raw)
                table.add(
                    label,
                    mem4["streams"],
                    f"{raw / 1e6:.1f}",
                    parts,
                    "in memory",
                    f"{mem4['peak_mb']:.0f}",
                    f"{mem4['cpu_s'] / chunks * 1e6:.1f}",
                )
            if label == "N":
                mem = measure("memory", path, tmp / "unused")
                table.add(
                    label,
                    mem["streams"],
                    f"{raw / 1e6:.1f}",
                    parts,
                    "in memory",
                    f"{mem['peak_mb']:.0f}",
                    f"{mem['cpu_s'] / chunks * 1e6:.1f}",
                )
        print(machine_notes())
        print(table.render())
        a = runs["N"][0]["peak_mb"]
        b = runs["4N"][0]["peak_mb"]
        c = runs["4N"][0]["cpu_s"] / runs["4N"][1] * 1e6
        cpu_ratio = runs["4N-2"][0]["cpu_s"] / runs["4N"][0]["cpu_s"]
        print(
            f"CPU of replay(out=DIR, workers=2) / serial loop over units at 4N: {cpu_ratio:.2f} "
            "(processes included)"
        )
        ratio = b / a
        ok = verdict(
            "bench_scale",
            ratio <= TARGET,
            f"peak RSS of replay(out=DIR) at 4N / at N = {ratio:.2f} (target <= {TARGET})",
        )
        mem4, raw4 = runs["4N-memory"]
        in_memory = mem4["peak_mb"] * 2**20 / raw4
        ok = (
            verdict(
                "bench_scale in memory",
                in_memory <= MEMORY_TARGET,
                f"peak RSS of replay(path) at 4N / its raw bytes = {in_memory:.2f} "
                f"(target <= {MEMORY_TARGET})",
            )
            and ok
        )
        print(
            f"scale: N={n} peak_rss_mb={a:.0f} 4N peak_rss_mb={b:.0f} ratio={ratio:.2f} "
            f"us_per_chunk={c:.1f}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
