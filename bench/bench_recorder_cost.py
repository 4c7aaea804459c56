"""The recorder's own cost per read, with no server and no network: an in-memory httpx
transport yields ``--reads`` reads of 348 bytes; plain ``httpx.Client`` vs the same behind
``RecordingTransport`` (journal flusher running, Parquet written after the timing).

Reports microseconds per read and the difference (median of ``--repeat`` interleaved runs).
No target: this isolates what benchmark 4 measures through a loopback server.

    python bench/bench_recorder_cost.py [--reads 200000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Table, machine_notes  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reads", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args(argv)
    print(f"# recorder cost per read, in memory  ({machine_notes()})")

    import httpx

    from lab.capture import CaptureWriter
    from lab.http.transports import RecordingTransport

    payload = b"data: " + b"x" * 340 + b"\n\n"

    class Reads(httpx.SyncByteStream):
        def __iter__(self):
            for _ in range(args.reads):
                yield bytes(payload)  # a fresh object per read, as a socket gives

    class Memory(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, stream=Reads()
            )

    def run(client: httpx.Client) -> float:
        t0 = time.perf_counter()
        with client.stream("POST", "http://memory.test/v1", json={"stream": True}) as r:
            for _ in r.iter_raw():
                pass
        return time.perf_counter() - t0

    plain: list[float] = []
    recorded: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat + 1):
            with httpx.Client(transport=Memory()) as client:
                p = run(client)
            writer = CaptureWriter(tmp)
            with httpx.Client(transport=RecordingTransport(writer, Memory())) as client:
                r = run(client)
            writer.close()
            if i:  # the first pair warms up
                plain.append(p)
                recorded.append(r)
    n = args.reads
    mp, mr = statistics.median(plain) / n * 1e6, statistics.median(recorded) / n * 1e6
    table = Table("client", "reads", "µs per read")
    table.add("plain httpx", n, mp)
    table.add("RecordingTransport", n, mr)
    table.add("recorder's cost", n, mr - mp)
    table.print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
