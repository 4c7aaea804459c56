"""``lab proxy`` left running against hostile peers: peak RSS and service, over loopback.

Each scenario starts ``lab proxy`` from CHECKOUT as a program (its own process, so its
peak RSS is its own: ``VmHWM``), with its open-file soft limit at 1,024 (a common default;
the hard limit stays as it is), and drives it from this process::

    python bench/bench_proxy_limits.py CHECKOUT endless [--gb 4] [--seconds 120] [--no-limits]
    python bench/bench_proxy_limits.py CHECKOUT body [--gib 2] [--chunked]
    python bench/bench_proxy_limits.py CHECKOUT slow [--slow 3500] [--legit 100] [--hard-1024]

- ``endless``: an upstream that streams SSE for ever; one client reads through the proxy
  until the proxy ends the stream, ``--gb`` have passed or ``--seconds`` are up. Default
  limits, or ``--no-limits`` (a LabConfig with ``max_exchange_bytes`` and
  ``max_exchange_s`` off): what bounds the proxy's memory then is its window, not a limit.
- ``body``: one client sends a ``--gib`` request body (``Content-Length``, or chunked).
- ``slow``: ``--slow`` clients open a connection each and send one header byte a second,
  never finishing; meanwhile ordinary requests are sent one after another (a failed one
  again after 0.2 s) until ``--legit`` were served (200) or 60 s are up, then (``--wait`` s later) how
  many slow clients the proxy answered 408 and how many it still holds. ``--hard-1024``:
  the hard limit is 1,024 too, so the proxy cannot raise its own.

A measurement for docs/RELIABILITY.md, not a test (CONTRIBUTING: timing is for bench/).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":"endless "}}]}\n\n'


def _upstream() -> tuple[str, threading.Event]:
    """An endless SSE upstream (and, for any other path, a small JSON answer)."""
    stop = threading.Event()
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(4096)

    def serve(conn: socket.socket) -> None:
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                more = conn.recv(65536)
                if not more:
                    return
                data += more
            head, _, rest = data.partition(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            while len(rest) < length:
                more = conn.recv(1 << 20)
                if not more:
                    return
                rest += more
            if b" /endless" in head.split(b"\r\n")[0]:
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                body = CHUNK * 1600  # ~100 KB per write
                frame = b"%x\r\n%s\r\n" % (len(body), body)
                while not stop.is_set():
                    conn.sendall(frame)
            else:
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: 2\r\nconnection: close\r\n\r\n{}"
                )
        except OSError:
            pass
        finally:
            conn.close()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{srv.getsockname()[1]}", stop


HARD_1024 = False


def _soft_1024() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024 if HARD_1024 else hard))


def _start_proxy(checkout: str, upstream: str, out: str, extra: list[str]) -> tuple:
    env = dict(os.environ, PYTHONPATH=checkout)
    cmd = [sys.executable, "-m", "lab.cli", "proxy", "--provider", "openai", "--port", "0"]
    cmd += ["--upstream", upstream, "--out", out, *extra]
    proc = subprocess.Popen(
        cmd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_soft_1024,
        cwd=checkout,
    )
    url = proc.stdout.readline().strip()
    if not url.startswith("http://"):
        proc.kill()
        raise SystemExit(f"lab proxy did not start: {url!r} {proc.stderr.read()}")
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    return proc, url, lines


def _hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _stop(proc) -> tuple[int, str]:
    proc.send_signal(2)
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err


def _addr(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def endless(args, checkout: str) -> dict:
    upstream, stop = _upstream()
    extra: list[str] = []
    tmp = tempfile.mkdtemp(prefix="lab-proxy-bench-")
    if args.no_limits:
        cfg = Path(tmp) / "nolimits.json"
        cfg.write_text(json.dumps({"max_exchange_bytes": None, "max_exchange_s": None}))
        extra = ["--config", str(cfg)]
    proc, url, lines = _start_proxy(checkout, upstream, str(Path(tmp) / "captures"), extra)
    body = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}'
    s = socket.create_connection(_addr(url))
    s.sendall(
        b"POST /endless HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )
    goal, got, t0 = int(args.gb * 1e9), 0, time.monotonic()
    s.settimeout(5)
    how = "goal reached"
    while got < goal:
        if time.monotonic() - t0 > args.seconds:
            how = "time up"
            break
        try:
            data = s.recv(1 << 20)
        except TimeoutError:
            continue
        if not data:
            how = "the proxy ended the stream"
            break
        got += len(data)
    seconds = time.monotonic() - t0
    s.close()
    time.sleep(2)  # the exchange's end, its line
    hwm = _hwm_mb(proc.pid)
    stop.set()
    code, err = _stop(proc)
    return {
        "scenario": "endless" + (" (no limits)" if args.no_limits else " (default limits)"),
        "bytes_through": got,
        "seconds": round(seconds, 1),
        "how": how,
        "peak_rss_mb": round(hwm),
        "line": lines[0].strip() if lines else None,
        "exit": code,
    }


def body(args, checkout: str) -> dict:
    upstream, stop = _upstream()
    tmp = tempfile.mkdtemp(prefix="lab-proxy-bench-")
    proc, url, lines = _start_proxy(checkout, upstream, str(Path(tmp) / "captures"), [])
    size = int(args.gib * (1 << 30))
    s = socket.create_connection(_addr(url))
    framing = b"transfer-encoding: chunked" if args.chunked else b"content-length: %d" % size
    s.sendall(b"POST /chat/completions HTTP/1.1\r\nhost: x\r\n%s\r\n\r\n" % framing)
    piece = b"0" * (1 << 20)
    sent, t0, answer = 0, time.monotonic(), b""
    s.settimeout(0.001)
    try:
        while sent < size:
            out = b"%x\r\n%s\r\n" % (len(piece), piece) if args.chunked else piece
            s.settimeout(30)
            s.sendall(out)
            sent += len(piece)
            s.settimeout(0)
            try:
                answer += s.recv(65536)
                if answer:
                    break
            except BlockingIOError:
                pass
        if args.chunked and sent >= size:
            s.sendall(b"0\r\n\r\n")
    except OSError:
        pass
    s.settimeout(300)
    try:
        while b"\r\n\r\n" not in answer:
            more = s.recv(65536)
            if not more:
                break
            answer += more
    except OSError:
        pass
    seconds = time.monotonic() - t0
    s.close()
    time.sleep(1)
    hwm = _hwm_mb(proc.pid)
    stop.set()
    code, err = _stop(proc)
    return {
        "scenario": f"request body of {args.gib:g} GiB, "
        + ("chunked" if args.chunked else "Content-Length"),
        "body_bytes_sent": sent,
        "answer": answer.split(b"\r\n")[0].decode(errors="replace"),
        "seconds": round(seconds, 1),
        "peak_rss_mb": round(hwm),
        "exit": code,
    }


def slow(args, checkout: str) -> dict:
    import httpx

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    upstream, stop = _upstream()
    tmp = tempfile.mkdtemp(prefix="lab-proxy-bench-")
    proc, url, lines = _start_proxy(checkout, upstream, str(Path(tmp) / "captures"), [])
    addr = _addr(url)
    held: list[socket.socket] = []
    refused = 0
    for _ in range(args.slow):
        try:
            c = socket.create_connection(addr, timeout=5)
            c.sendall(b"POST /chat/completions HTTP/1.1\r\n")
            held.append(c)
        except OSError:
            refused += 1
    done = threading.Event()

    def trickle() -> None:
        while not done.wait(1.0):
            for c in held:
                try:
                    c.send(b"x")
                except OSError:
                    pass

    threading.Thread(target=trickle, daemon=True).start()
    served = failed = 0
    t0 = time.monotonic()
    first_failure = None
    with httpx.Client(timeout=30) as client:
        while served < args.legit and time.monotonic() - t0 < 60:
            try:
                r = client.post(url + "/chat/completions", json={"model": "m"})
                ok = r.status_code == 200
            except httpx.HTTPError:
                ok = False
            served += ok
            if not ok:  # a client that retries: again after a pause
                failed += 1
                first_failure = first_failure or round(time.monotonic() - t0, 1)
                time.sleep(0.2)
    seconds = time.monotonic() - t0
    time.sleep(args.wait)  # past the proxy's header timeout (10 s by default)
    answered_408 = still_open = 0
    for c in held:
        try:
            c.setblocking(False)
            data = c.recv(65536)
            answered_408 += data.startswith(b"HTTP/1.1 408")
        except BlockingIOError:
            still_open += 1
        except OSError:
            pass
    done.set()
    for c in held:
        c.close()
    hwm = _hwm_mb(proc.pid)
    stop.set()
    code, err = _stop(proc)
    return {
        "scenario": f"{args.slow} slow clients (a header byte a second) + {args.legit} requests",
        "slow_connected": len(held),
        "slow_refused_at_connect": refused,
        "slow_answered_408": answered_408,
        "slow_still_open": still_open,
        "legit_served": served,
        "legit_failed_attempts": failed,
        "seconds": round(seconds, 1),
        "peak_rss_mb": round(hwm),
        "exit": code,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("checkout")
    p.add_argument("scenario", choices=["endless", "body", "slow"])
    p.add_argument("--gb", type=float, default=4.0)
    p.add_argument("--seconds", type=float, default=120.0)
    p.add_argument("--no-limits", action="store_true")
    p.add_argument("--gib", type=float, default=2.0)
    p.add_argument("--chunked", action="store_true")
    p.add_argument("--slow", type=int, default=3500)
    p.add_argument("--legit", type=int, default=100)
    p.add_argument("--wait", type=float, default=12.0, help="slow: then count the 408s")
    p.add_argument(
        "--hard-1024",
        action="store_true",
        help="the proxy's hard open-file limit at 1,024 too (it cannot raise its own)",
    )
    args = p.parse_args()
    global HARD_1024
    HARD_1024 = args.hard_1024
    checkout = str(Path(args.checkout).resolve())
    run = {"endless": endless, "body": body, "slow": slow}[args.scenario]
    print(json.dumps(run(args, checkout)))


if __name__ == "__main__":
    main()
