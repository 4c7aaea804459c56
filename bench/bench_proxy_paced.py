"""Benchmark 7c: ``lab proxy``'s CPU per event on paced streams against the same events in a
burst (issue 34 item 6).

Three processes: an upstream (a bare asyncio SSE server, its own process), ``lab proxy``
(``python -m lab.cli proxy``, its own process, recording into a temporary directory) and
the clients (this process: raw-socket asyncio clients, one connection each, that read
whatever has arrived and parse nothing, so the client never sets the pace).

Each round sends ``--streams`` concurrent requests (200 by default) through the proxy; the
upstream answers each with ``--events`` OpenRouter-shaped SSE events (one chunked write
each, then ``[DONE]``):

- paced: one event every ``--gap-ms`` (30 ms by default; each stream starts at a random
  offset within one gap, as independent model streams do);
- burst: the same events written back to back.

What is measured is the proxy process's CPU time (``utime + stime`` of ``/proc/PID/stat``)
from before the round's first request until every stream has ended and the proxy has
printed its line for every exchange (so the per-exchange summary, replayed in the proxy's
worker threads, is counted too). A third kind of round, ``base``, sends the same streams
with one event each, in a burst: what a stream costs whatever its length (accepting the
connection, starting and ending the recording, the summary, the Parquet part). A paced or
burst round's CPU less the base round's, over the events it adds, is the marginal CPU per
event. Rounds go paced / burst / base, reversed every other round (``--rounds`` of each);
the verdict compares the medians:

    target: marginal CPU per event, paced <= 2x marginal CPU per event, burst

Also printed, for information: how much of the CPU was system time (``stime``: the
kernel's side of each socket read and write, which a paced event pays alone and a burst
shares out; the proxy's code cannot take it away), CPU per stream-second on the paced
rounds, the process's voluntary and involuntary context switches (``/proc/PID/status``),
and the load average.

    python bench/bench_proxy_paced.py [--streams 200] [--events 100] [--gap-ms 30] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _common import Table, machine_notes, openrouter_chunks, verdict  # noqa: E402

TARGET = 2.0

UPSTREAM = r"""
import asyncio, json, random, sys
events = [bytes(e, "utf-8") for e in json.loads(sys.stdin.readline())]

def chunk(data):
    return b"%x\r\n%s\r\n" % (len(data), data)

HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
        b"transfer-encoding: chunked\r\n\r\n")

async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            body = json.loads(await reader.readexactly(length)) if length else {}
            gap = float(body.get("gap", 0))
            writer.write(HEAD)
            if gap:
                await asyncio.sleep(random.random() * gap)
            for e in events[: int(body.get("events", len(events)))]:
                writer.write(chunk(e))
                if gap:
                    await writer.drain()
                    await asyncio.sleep(gap)
            writer.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()

async def main():
    srv = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=4096)
    print(f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}/api/v1", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


def proc_cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def proc_switches(pid: int) -> tuple[int, int]:
    """(voluntary, involuntary) context switches of every thread of the process so far."""
    vol = invol = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "status").read_text()
        except OSError:  # a thread that ended meanwhile
            continue
        for line in text.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                vol += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                invol += int(line.split()[1])
    return vol, invol


class Proxy:
    """``lab proxy`` in its own process; a thread counts the lines it prints."""

    def __init__(self, upstream: str, out: str) -> None:
        path = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
        cmd = [sys.executable, "-m", "lab.cli", "proxy", "--provider", "openrouter"]
        cmd += ["--upstream", upstream, "--port", "0", "--out", out]
        env = {**os.environ, "PYTHONPATH": path}
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            raise RuntimeError(f"lab proxy did not start: {self.url!r}")
        self.lines = 0
        self.cond = threading.Condition()
        threading.Thread(target=self._count, daemon=True).start()

    def _count(self) -> None:
        for _ in self.proc.stdout:
            with self.cond:
                self.lines += 1
                self.cond.notify_all()

    def wait_lines(self, n: int, timeout: float = 300) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.lines >= n, timeout):
                raise RuntimeError(f"lab proxy printed {self.lines} of {n} lines")

    def close(self) -> None:
        self.proc.send_signal(2)  # SIGINT: the proxy closes its recordings
        self.proc.wait(120)


async def raw_stream(host: str, port: int, path: str, body: bytes) -> int:
    """One request over a raw socket; reads everything that arrives until the chunked
    body's last chunk (no parsing per event: the client never sets the pace). Bytes read."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(
        b"POST %s HTTP/1.1\r\nhost: %s:%d\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n%s"
        % (path.encode(), host.encode(), port, len(body), body)
    )
    n = 0
    tail = b""
    try:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                break
            n += len(data)
            tail = (tail + data)[-7:]
            if tail.endswith(b"0\r\n\r\n"):
                break
    finally:
        writer.close()
    return n


async def round_of(url: str, streams: int, gap: float, events: int) -> tuple[float, int]:
    """Run ``streams`` concurrent streams through ``url``; (wall seconds, bytes)."""
    rest = url.split("://", 1)[1]
    hostport, _, base = rest.partition("/")
    host, _, port = hostport.partition(":")
    path = f"/{base}/chat/completions" if base else "/chat/completions"
    body = json.dumps(
        {"model": "bench/paced", "messages": [{"role": "user", "content": "hi"}],
         "stream": True, "gap": gap, "events": events}
    ).encode()  # fmt: skip
    t0 = time.perf_counter()
    sizes = await asyncio.gather(*(raw_stream(host, int(port), path, body) for _ in range(streams)))
    return time.perf_counter() - t0, sum(sizes)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=200)
    ap.add_argument("--events", type=int, default=100)
    ap.add_argument("--gap-ms", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"# lab proxy: CPU per event, paced vs burst  ({machine_notes()})")
    from lab.fakes.base import dumps, sse_data

    events = [sse_data(dumps(c)).decode() for c in openrouter_chunks(args.events)]
    upstream = subprocess.Popen(
        [sys.executable, "-c", UPSTREAM], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    upstream.stdin.write(json.dumps(events) + "\n")
    upstream.stdin.flush()
    base = upstream.stdout.readline().strip()
    # kind -> (gap in seconds, events per stream); "base": one event, for the fixed cost
    kinds = {"paced": (args.gap_ms / 1e3, args.events), "burst": (0.0, args.events),
             "base": (0.0, 1)}  # fmt: skip
    results: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    done = 0
    loads = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            proxy = Proxy(base, tmp)
            try:
                asyncio.run(round_of(proxy.url, 4, 0.0, args.events))  # warm up
                done += 4
                proxy.wait_lines(done)
                order = list(kinds)
                for i in range(args.rounds):
                    for kind in order if i % 2 == 0 else order[::-1]:
                        gap, n = kinds[kind]
                        pid = proxy.proc.pid
                        loads.append(os.getloadavg()[0])
                        c0, s0 = proc_cpu_split(pid), proc_switches(pid)
                        wall, _ = asyncio.run(round_of(proxy.url, args.streams, gap, n))
                        done += args.streams
                        proxy.wait_lines(done)
                        c1, s1 = proc_cpu_split(pid), proc_switches(pid)
                        results[kind].append(
                            {
                                "cpu": sum(c1) - sum(c0),
                                "sys": c1[1] - c0[1],
                                "wall": wall,
                                "vol": s1[0] - s0[0],
                                "invol": s1[1] - s0[1],
                            }  # fmt: skip
                        )
                        print(
                            f"  round {i + 1} {kind}: proxy CPU {sum(c1) - sum(c0):.3f} s "
                            f"(system {c1[1] - c0[1]:.3f}), wall "
                            f"{wall:.2f} s (load {loads[-1]:.2f})",
                            flush=True,
                        )
            finally:
                proxy.close()
    finally:
        upstream.stdin.close()
        upstream.wait(30)

    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in results.items()}
    per_stream = med["base"]["cpu"] / args.streams  # accept, record, summary, Parquet, 1 event
    extra = args.streams * (args.events - 1)  # the events a paced or burst round adds
    table = Table("round", "proxy CPU s", "of it system s", "us/event (all)",
                  "us/event (marginal)", "of it system", "wall s",
                  "ctx sw vol / invol")  # fmt: skip
    marginal = {}
    marginal_sys = {}
    for kind, (gap, n) in kinds.items():
        m = med[kind]
        total = args.streams * (n + 1)  # + [DONE]
        marginal[kind] = (m["cpu"] - med["base"]["cpu"]) / extra if kind != "base" else None
        marginal_sys[kind] = (m["sys"] - med["base"]["sys"]) / extra if kind != "base" else None
        label = f"{args.streams} streams x {n} events, " + (
            f"paced {args.gap_ms:g} ms apart" if gap else "burst"
        )
        table.add(
            label,
            m["cpu"],
            m["sys"],
            m["cpu"] / total * 1e6,
            "-" if marginal[kind] is None else f"{marginal[kind] * 1e6:.1f}",
            "-" if marginal_sys[kind] is None else f"{marginal_sys[kind] * 1e6:.1f}",
            m["wall"],
            f"{m['vol']:.0f} / {m['invol']:.0f}",
        )
    table.print()
    paced, burst = marginal["paced"], marginal["burst"]
    stream_s = args.events * args.gap_ms / 1e3
    print(
        f"per stream, fixed (the 1-event rounds): {per_stream * 1e3:.2f} ms of proxy CPU; "
        f"paced: {(med['paced']['cpu'] - med['base']['cpu']) / args.streams / stream_s * 1e3:.2f}"
        f" ms per stream-second over that ({args.streams} streams of {stream_s:.1f} s); "
        f"load {min(loads):.2f}-{max(loads):.2f}"
    )
    print(
        f"system time per event (marginal): paced {marginal_sys['paced'] * 1e6:.1f} us, burst "
        f"{marginal_sys['burst'] * 1e6:.1f} us; the paced event's system time alone is "
        f"{marginal_sys['paced'] / burst:.2f}x the burst's whole marginal cost"
    )
    ok = verdict(
        "proxy CPU per paced event",
        paced <= TARGET * burst,
        f"{paced * 1e6:.1f} us/event paced vs {burst * 1e6:.1f} us/event in a burst = "
        f"{paced / burst:.2f}x (target <= {TARGET:g}x; each less the fixed cost per stream; "
        f"medians of {args.rounds} rounds each)",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
