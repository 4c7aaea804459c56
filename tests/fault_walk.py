"""Fault injection into the journal: a failing or short write at each write position, then
SIGKILL; and what the capture says afterwards.

A child process records the stateless demo requests from a fake server (in this process)
with ``os.write``/``os.writev`` wrapped so that its ``position``-th write to a journal file
(0: the first segment's header) fails:

- ``eio``: that write raises ``EIO`` (the disk hiccups once);
- ``enospc``: that write and every later one raises ``ENOSPC`` (the disk is full);
- ``short``: that write writes half its bytes, the call that would finish it raises
  ``ENOSPC``, later writes succeed;
- ``torn``: that write writes half its bytes and the process SIGKILLs itself.

The child prints ``DONE <stream_id>`` after each ``record()`` that returned; this process
SIGKILLs it a little after the fault (``torn`` kills itself). Then :func:`check` opens the
capture and counts the ways it can be wrong:

- ``unopenable``: ``lab.capture.open`` raised on a recording that has capture files;
- ``lost``: a stream the child had finished (DONE) is not in the capture;
- ``wrong``: an exchange marked ``eof`` whose bytes are not what the server sent (the
  journal vouched for bytes it does not hold), or a cut one whose bytes are no prefix of it.

A run is *bad* when any count is non-zero. ``python tests/fault_walk.py [N]`` walks the
first N positions (default 25) of every mode and prints the bad runs per mode; run it with
``PYTHONPATH`` at another checkout to measure that one.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ("eio", "enospc", "short", "torn")

CHILD = r"""
import errno, os, signal, sys
mode, position, base_url, root = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
real_write, real_writev = os.write, os.writev
state = {"n": 0, "faulted": False, "full": False}

def journal(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}").endswith(".journal")
    except OSError:
        return False

def announce():
    if not state["faulted"]:
        state["faulted"] = True
        sys.stdout.write("FAULT\n")
        sys.stdout.flush()

def fault(fd, data):
    # None: no fault, do the real write
    if not journal(fd):
        return None
    k = state["n"]
    state["n"] += 1
    if state["full"]:
        raise OSError(errno.ENOSPC, "No space left on device (injected)")
    if k != position:
        return None
    announce()
    if mode == "eio":
        raise OSError(errno.EIO, "Input/output error (injected)")
    if mode == "enospc":
        state["full"] = True
        raise OSError(errno.ENOSPC, "No space left on device (injected)")
    half = max(1, len(data) // 2) if len(data) > 1 else 0
    n = real_write(fd, data[:half]) if half else 0
    if mode == "torn":
        os.kill(os.getpid(), signal.SIGKILL)
    state["next_fails"] = True  # short: the call finishing this write fails
    return n

def write(fd, data):
    if state.pop("next_fails", False) and journal(fd):
        state["n"] += 1
        raise OSError(errno.ENOSPC, "No space left on device (injected)")
    done = fault(fd, bytes(data))
    return real_write(fd, data) if done is None else done

def writev(fd, buffers):
    if state.pop("next_fails", False) and journal(fd):
        state["n"] += 1
        raise OSError(errno.ENOSPC, "No space left on device (injected)")
    buffers = list(buffers)
    done = fault(fd, b"".join(bytes(b) for b in buffers))
    return real_writev(fd, buffers) if done is None else done

os.write, os.writev = write, writev

from lab.demo import demo_requests
from lab.recorder import Recorder

items = [it for it in demo_requests(2) if "overloaded-then-ok" not in str(it["body"])]
rec = Recorder(root, label="faults")
print("READY", rec.path, flush=True)
for it in items:
    try:
        r = rec.record(it["provider"], it["body"], base_url=base_url + it["base_path"],
                       api_key="sk-fault-walk-key")
    except Exception as exc:
        print("ERROR", type(exc).__name__, str(exc).replace("\n", " "), flush=True)
        break
    print("DONE", r.stream_id, flush=True)
print("END", flush=True)
import time
time.sleep(30)  # wait to be killed: never close (close would hide what the journal holds)
"""


def run_one(server, root: Path, mode: str, position: int, after_s: float = 0.15) -> dict:
    """One child run; returns ``{"path", "done", "faulted", "ended"}``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, mode, str(position), server.base_url, str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    done: list[str] = []
    path, faulted, ended = None, False, False
    deadline = None
    try:
        for line in proc.stdout:
            parts = line.split()
            if not parts or not line.endswith("\n"):
                continue
            if parts[0] == "READY":
                path = Path(parts[1])
            elif parts[0] == "DONE":
                done.append(parts[1])
            elif parts[0] == "FAULT":
                faulted = True
                deadline = time.monotonic() + after_s
            elif parts[0] in ("END", "ERROR"):
                ended = True
                break
            if deadline is not None and time.monotonic() >= deadline:
                break
        if deadline is not None:
            time.sleep(max(0.0, deadline - time.monotonic()))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
    return {"path": path, "done": done, "faulted": faulted, "ended": ended}


def server_bodies(ex, server) -> set[bytes]:
    """What the fake server may have sent for this exchange (its scripts are pure functions
    of the request and a seed; the seed is the body's, else the one the server logged)."""
    from lab.fakes import render_body

    body = json.loads(ex.request_body)
    family = {"deepseek": "openai", "zai": "openai", "nvidia": "openai", "custom": "openai"}.get(
        ex.provider, ex.provider
    )
    if family == "google":
        seed, model = (body.get("generationConfig") or {}).get("seed"), ex.model
    else:
        seed, model = body.get("seed"), body.get("model")
    seeds = (
        {abs(seed)}
        if isinstance(seed, int)
        else {r.seed for r in server.requests if r.raw_body == ex.request_body}
    )
    return {render_body(family, model, seed=s, body=body) for s in seeds}


def check(run: dict, server) -> dict:
    """Count what is wrong with the capture a run left (see the module docstring)."""
    import lab.capture

    counts = {"unopenable": 0, "lost": 0, "wrong": 0, "eof": 0, "cut": 0}
    path = run["path"]
    files = [f for f in path.iterdir() if f.suffix in (".parquet", ".journal")] if path else []
    if not files:  # nothing reached the disk: only a stream reported finished is lost
        counts["lost"] = len(run["done"])
        return counts
    try:
        exchanges = lab.capture.open(path).exchanges()
    except Exception:  # noqa: BLE001 - that is the finding
        counts["unopenable"] = 1
        return counts
    for ex in exchanges:
        got = b"".join(ex.reads)
        wants = server_bodies(ex, server)
        if ex.end_reason == "incomplete":
            counts["cut"] += 1
            if not any(w.startswith(got) for w in wants):
                counts["wrong"] += 1
        else:
            counts["eof"] += 1
            if ex.end_reason == "eof" and got not in wants:
                counts["wrong"] += 1
    recorded = {ex.stream_id for ex in exchanges}
    counts["lost"] = len(set(run["done"]) - recorded)
    return counts


def bad(counts: dict) -> bool:
    return bool(counts["unopenable"] or counts["lost"] or counts["wrong"])


def walk(modes=MODES, positions=range(25), server=None) -> dict[str, list[tuple[int, dict]]]:
    """Every (mode, position) run: ``{mode: [(position, counts), ...]}``."""
    from lab.fakes import FakeServer

    own = server is None
    if own:
        server = FakeServer(delay_scale=0.3)
        server.__enter__()
    out: dict[str, list[tuple[int, dict]]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for mode in modes:
                out[mode] = []
                for k in positions:
                    run = run_one(server, Path(tmp) / f"{mode}-{k}", mode, k)
                    if not run["faulted"]:
                        continue  # the recording needed fewer writes than that
                    out[mode].append((k, check(run, server)))
    finally:
        if own:
            server.__exit__(None, None, None)
    return out


if __name__ == "__main__":  # pragma: no cover - a measurement, see the module docstring
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 25
    result = walk(positions=range(n))
    for mode, runs in result.items():
        worst = [k for k, c in runs if bad(c)]
        kinds = {key: sum(1 for _, c in runs if c[key]) for key in ("unopenable", "lost", "wrong")}
        print(
            f"{mode:7s} {len(worst):3d} of {len(runs):3d} runs bad  "
            f"(unopenable {kinds['unopenable']}, lost a finished stream {kinds['lost']}, "
            f"wrong bytes {kinds['wrong']})  bad positions: {worst}"
        )
