"""Benchmark 4: recorder overhead against plain httpx streaming from the loopback fake server.

``FakeServer(delay_scale=0)`` serves a large OpenRouter scenario (``bench/large``:
registered here, ``--chunks`` content events, ONE EVENT PER NETWORK WRITE — the worst case
for a per-read recorder). Both clients stream it with ``iter_raw()``:

- plain:    ``httpx.Client()``                                    (baseline)
- recorded: ``httpx.Client(transport=RecordingTransport(writer))`` (lab.capture journal +
  Parquet writer behind it)

The throughput target is the client-side one: the stream read from open to EOF, as the
consumer sees it. A second row adds ``writer.close()`` (everything durable in Parquet) for
information.

Targets: throughput >= 0.95x of plain; time to first read within 1 ms of plain.

    python bench/bench_recorder.py [--chunks 20000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Table, machine_notes, openrouter_chunks, verdict  # noqa: E402

THROUGHPUT_TARGET = 0.95
TTFR_TARGET_MS = 1.0
MODEL = "bench/large"


def register_large_scenario(n_chunks: int) -> int:
    """Register ``bench/large`` on the OpenRouter family; returns the body size in bytes."""
    from lab.fakes.base import Script, dumps, scenario, sse_comment, sse_data

    events = [sse_comment("OPENROUTER PROCESSING")]
    events += [sse_data(dumps(c)) for c in openrouter_chunks(n_chunks)]
    events.append(sse_data("[DONE]"))
    reads = tuple(events)
    headers = (("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"))

    @scenario("openrouter", MODEL, "benchmark: a long stream, one event per write")
    def _large(ctx):  # noqa: ANN001
        return Script(200, headers, reads, (0.0,) * len(reads), backend="Fireworks")

    return sum(map(len, reads))


def stream_once(client, url: str, body: dict) -> tuple[float, float, int]:
    """(seconds to first read, total seconds, bytes) for one streamed POST."""
    t0 = time.perf_counter()
    first = None
    n = 0
    with client.stream("POST", url, json=body) as resp:
        for chunk in resp.iter_raw():
            if first is None:
                first = time.perf_counter() - t0
            n += len(chunk)
    return first or 0.0, time.perf_counter() - t0, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    print(f"# recorder overhead  ({machine_notes()})")

    import httpx

    from lab.capture import CaptureWriter
    from lab.fakes import FakeServer
    from lab.http.transports import RecordingTransport

    size = register_large_scenario(args.chunks)
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    plain_first: list[float] = []
    plain_total: list[float] = []
    rec_first: list[float] = []
    rec_total: list[float] = []
    rec_stream: list[float] = []
    with FakeServer(delay_scale=0) as srv, tempfile.TemporaryDirectory() as tmp:
        url = f"{srv.family_base_url('openrouter')}/chat/completions"

        def plain() -> None:
            with httpx.Client(timeout=60) as client:
                f, t, n = stream_once(client, url, body)
            assert n == size
            plain_first.append(f)
            plain_total.append(t)

        def recorded() -> None:
            t0 = time.perf_counter()
            writer = CaptureWriter(tmp)
            with httpx.Client(transport=RecordingTransport(writer), timeout=60) as client:
                f, ts, n = stream_once(client, url, body)
            writer.close()  # everything durable on disk, inside the timing
            assert n == size
            rec_first.append(f)
            rec_total.append(time.perf_counter() - t0)
            rec_stream.append(ts)

        plain(), recorded()  # warm up (imports, sockets, page cache)
        for lst in (plain_first, plain_total, rec_first, rec_total, rec_stream):
            lst.clear()
        for _ in range(args.repeat):
            plain()
            recorded()

    mp, mr = statistics.median(plain_total), statistics.median(rec_total)
    ms = statistics.median(rec_stream)
    fp, fr = statistics.median(plain_first) * 1e3, statistics.median(rec_first) * 1e3
    thr = mp / ms  # recorded throughput as the client sees it, relative to plain
    table = Table("client", "bytes", "median s", "MB/s", "first read ms", "throughput vs plain")
    table.add("plain httpx", size, mp, size / mp / 1e6, fp, 1.0)
    table.add("RecordingTransport (stream)", size, ms, size / ms / 1e6, fr, thr)
    table.add("  ... + writer.close()", size, mr, size / mr / 1e6, "", mp / mr)
    table.print()
    ok1 = verdict(
        "recorder_throughput",
        thr >= THROUGHPUT_TARGET,
        f"recorded/plain throughput = {thr:.3f}x (target >= {THROUGHPUT_TARGET}x)",
    )
    ok2 = verdict(
        "recorder_first_read",
        fr - fp <= TTFR_TARGET_MS,
        f"first read +{fr - fp:.3f} ms vs plain (target <= {TTFR_TARGET_MS} ms)",
    )
    return 0 if (ok1 and ok2) else 1


if __name__ == "__main__":
    sys.exit(main())
