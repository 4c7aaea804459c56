"""The response scrubber's cost per SSE event, and its linearity: a chat stream of
``--events`` OpenAI-shaped events (5-character content tokens, ~175 bytes each) through
:class:`lab.capture.redact.ResponseScrubber` for a request that sent a 73-character key;
the byte stage alone vs both stages (bytes, then the assembled text), at 1x, 4x and 16x the
events. Linear: microseconds per event stay flat as the stream grows. A second table
runs the second stage's worst case: reasoning and content tokens alternating, each ending
like the start of the key (``its``, ``s``, ``sk-``), so carry-overs are open on every
value. Also counts the key the stream spells as tokens in the scrubbed output (must be 0)
and without the second stage (the leak it closes).

    python bench/bench_scrubber.py [--events 5000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Table, machine_notes  # noqa: E402

KEY = "sk-or-v1-" + "0123456789abcdef" * 4
WORDS = "the quick brown fox jumps over a lazy dog and keeps on running".split()


def _event(token: str) -> bytes:
    obj = {
        "id": "chatcmpl-abc",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": token}, "finish_reason": None}],
    }
    return f"data: {json.dumps(obj)}\n\n".encode()


def _stream(n: int, with_key: bool) -> list[bytes]:
    reads = [_event(WORDS[i % len(WORDS)] + " ") for i in range(n)]
    if with_key:  # the key in the middle, 5 characters an event
        at = n // 2
        reads[at:at] = [_event(KEY[i : i + 5]) for i in range(0, len(KEY), 5)]
    return reads


PREFIXES = "its yes as is this was has s sk sk- gets".split()


def _prefix_stream(n: int) -> list[bytes]:
    """Reasoning and content tokens alternating (one in three reasoning), each ending like
    the start of the key: the second stage's carry-overs are open on every value."""
    reads = []
    for i in range(n):
        field = "reasoning" if i % 3 == 0 else "content"
        obj = {"choices": [{"index": 0, "delta": {field: PREFIXES[i % len(PREFIXES)]}}]}
        reads.append(f"data: {json.dumps(obj)}\n\n".encode())
    return reads


def _text(reads: list[bytes]) -> str:
    out = []
    for block in b"".join(reads).decode().split("\n\n"):
        if block.startswith("data: {"):
            out.append(json.loads(block[6:])["choices"][0]["delta"]["content"])
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"# response scrubber, per SSE event  ({machine_notes()})")
    from lab.capture.redact import ResponseScrubber

    table = Table("events", "MB", "bytes stage us/event", "both stages us/event", "ratio")
    for mult in (1, 4, 16):
        n = args.events * mult
        reads = _stream(n, with_key=False)
        size = sum(map(len, reads)) / 1e6
        times: dict[str, list[float]] = {"_feed_bytes": [], "feed": []}
        for _ in range(args.repeat):
            for name in times:  # interleaved
                s = ResponseScrubber([KEY])
                feed = getattr(s, name)
                t = time.perf_counter()
                for r in reads:
                    feed(r)
                times[name].append((time.perf_counter() - t) / n * 1e6)
        one, both = (statistics.median(times[k]) for k in ("_feed_bytes", "feed"))
        table.add(n, f"{size:.2f}", f"{one:.2f}", f"{both:.2f}", f"{both / one:.1f}")
    print(table.render())

    worst = Table("events", "both stages us/event (every token a key prefix)")
    for mult in (1, 4, 16):
        n = args.events * mult
        reads = _prefix_stream(n)
        runs = []
        for _ in range(args.repeat):
            s = ResponseScrubber([KEY])
            t = time.perf_counter()
            for r in reads:
                s.feed(r)
            s.flush()
            runs.append((time.perf_counter() - t) / n * 1e6)
        worst.add(n, f"{statistics.median(runs):.2f}")
    print(worst.render())

    reads = _stream(args.events, with_key=True)
    s = ResponseScrubber([KEY])
    bytes_only = [p for r in reads for p in s._feed_bytes(r)] + s._flush_bytes()
    s = ResponseScrubber([KEY])
    both = [p for r in reads for p in s.feed(r)] + s.flush()
    print(
        f"key spelled as tokens: {_text(bytes_only).count(KEY)} in the text after the byte "
        f"stage alone, {_text(both).count(KEY)} after both (assembled replacements: "
        f"{s.assembled})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
