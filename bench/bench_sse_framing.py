"""Benchmark: SSE framing alone, microseconds per event, the bytes-level framer against the old.

``lab.http.sse.SSEDecoder`` frames the OpenRouter reasoning + text body of benchmark 1
(``openrouter_body``: 20k chunks, keepalive comments, ``[DONE]``): the body as one read, as
``replay_sse`` hands it over, then (informative rows) in 64 KiB and in 1,500-byte reads. The
old contender is the per-line framer it replaced, kept verbatim as
``tests/sse_reference.py``; both must give the same events, checked before timing.

Contenders run interleaved (old, new, old, new ...), medians of ``--repeat`` rounds; the
collector is paused while framing, as ``replay_sse`` pauses it. Target (issue 34 item 2):
the one-read body at <= 1.5 us per event.

    python bench/bench_sse_framing.py [--chunks 20000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from _common import Table, machine_notes, openrouter_body, paired_times, verdict  # noqa: E402
from sse_reference import ReferenceSSEDecoder  # noqa: E402

from lab.http.sse import SSEDecoder  # noqa: E402

TARGET_US = 1.5


def frame(decoder_cls: type, reads: list[bytes]) -> list:
    """Every event of ``reads``, framed with the collector paused (as in ``replay_sse``)."""
    decoder = decoder_cls()
    out: list = []
    gc.disable()
    try:
        for seq, read in enumerate(reads):
            out += decoder.decode(read, seq)
        out += decoder.flush()
    finally:
        gc.enable()
    return out


def split(body: bytes, size: int | None) -> list[bytes]:
    if size is None:
        return [body]
    return [body[i : i + size] for i in range(0, len(body), size)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"# SSE framing, old vs new  ({machine_notes()})")
    body = openrouter_body(args.chunks)
    table = Table("reads", "events", "old us/event", "new us/event", "old/new")
    one_read_new = float("nan")
    for label, size in (("one read (replay_sse)", None), ("64 KiB", 65536), ("1,500 B", 1500)):
        reads = split(body, size)
        new_events = frame(SSEDecoder, reads)
        assert new_events == frame(ReferenceSSEDecoder, reads), label
        n = len(new_events)
        runs: dict[str, Callable[[], object]] = {
            "old": lambda r=reads: frame(ReferenceSSEDecoder, r),
            "new": lambda r=reads: frame(SSEDecoder, r),
        }
        times = paired_times(runs, repeat=args.repeat, warmup=1)
        old = statistics.median(times["old"]) / n * 1e6
        new = statistics.median(times["new"]) / n * 1e6
        ratios = [o / w for o, w in zip(times["old"], times["new"], strict=True)]
        table.add(label, n, old, new, statistics.median(ratios))
        if size is None:
            one_read_new = new
    table.print()
    ok = verdict(
        "sse_framing",
        one_read_new <= TARGET_US,
        f"new framer {one_read_new:.2f} us/event on the one-read body (target <= {TARGET_US})",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
