"""The figures of docs/RELIABILITY.md "Limits": hostile servers against a checkout's ``lab``.

    python tests/limits_walk.py [CHECKOUT] [--wait S]

Runs ``lab record`` / ``lab replay`` of CHECKOUT (default: this one) in a child process
against servers on 127.0.0.1 that trickle a body one byte every 20 ms, trickle headers one
line every 100 ms, or stream for ever; and replays a capture whose one read is a
``Content-Encoding: gzip, gzip`` body of a few KB that inflates to 1.6 GB. A child still
running after ``--wait`` seconds (default 20) is killed; its peak RSS (VmHWM) is sampled
while it runs. Run it from a checkout without the limits for the "before" column.
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from test_limits import endless, serve, trickle_body, trickle_headers  # noqa: E402


def _hwm_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run(checkout: Path, args: list[str], wait: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(checkout), CUSTOM_API_KEY="sk-walk-0000")
    err_file = tempfile.TemporaryFile()
    t0 = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "lab.cli", *args],
        env=env,
        cwd=tempfile.gettempdir(),  # python -m puts the cwd first: PYTHONPATH must win
        stdout=subprocess.DEVNULL,  # an answer of hundreds of MB must not fill a pipe
        stderr=err_file,
    )
    peak, samples = 0.0, []
    while child.poll() is None and time.monotonic() - t0 < wait:
        peak = max(peak, _hwm_mb(child.pid))
        samples.append((time.monotonic() - t0, peak))
        time.sleep(0.1)
    killed = child.poll() is None
    if killed:
        peak = max(peak, _hwm_mb(child.pid))
        child.kill()
    child.wait()
    err_file.seek(0)
    err = err_file.read().decode("utf-8", "replace")
    elapsed = time.monotonic() - t0
    growth = None
    if killed and len(samples) > 20:  # MB/s over the second half
        (ta, ma), (tb, mb) = samples[len(samples) // 2], samples[-1]
        growth = (mb - ma) / (tb - ta) if tb > ta else None
    return {
        "ended": not killed,
        "seconds": round(elapsed, 2),
        "exit": None if killed else child.returncode,
        "peak_rss_mb": round(peak, 1),
        "rss_growth_mb_s": None if growth is None else round(growth, 1),
        "last_stderr": (err.strip().splitlines() or [""])[-1][:160],
    }


def _end_reasons(root: Path) -> list[str] | None:
    """The end reasons a finished recording holds (None: nothing written yet)."""
    from lab.capture import open as open_capture

    try:
        return [ex.end_reason for ex in open_capture(root).exchanges()]
    except Exception:  # noqa: BLE001 - a killed run may leave nothing to open
        return None


def bomb_capture(root: Path, decoded: int) -> Path:
    """A capture of one exchange whose single read is a nested gzip bomb."""
    from lab.capture.writer import CaptureWriter

    z = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = bytes(1 << 20)
    inner = b"".join(z.compress(block) for _ in range(decoded >> 20)) + z.flush()
    outer = gzip.compress(inner, 9)
    with CaptureWriter(root) as writer:
        rec = writer.exchange(
            stream_id="bomb",
            attempt=0,
            attempt_label="default",
            provider="custom",
            model="m",
            method="POST",
            url="http://127.0.0.1:9/v1/chat/completions",
            request_headers={},
            request_body=b"{}",
            meta=None,
        )
        rec.on_response(
            200, {"content-type": "text/event-stream", "content-encoding": "gzip, gzip"}, "HTTP/1.1"
        )
        rec.on_read(outer)
        rec.on_end("eof")
        path = writer.path
    print(f"bomb: {len(outer)} bytes of gzip, gzip -> {decoded / 1e9:.2f} GB decoded")
    return Path(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkout", nargs="?", default=str(HERE.parent))
    ap.add_argument("--wait", type=float, default=20.0)
    ap.add_argument("--bomb-gb", type=float, default=1.6)
    ap.add_argument("--max-seconds", default=None, help="also pass --max-seconds S to record")
    ap.add_argument(
        "--only",
        default="trickle-body,trickle-headers,endless-stream,bomb",
        help="comma-separated scenarios to run (default: all four)",
    )
    a = ap.parse_args()
    only = set(a.only.split(","))
    checkout = Path(a.checkout).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        extra = ["--max-seconds", a.max_seconds] if a.max_seconds else []
        for name, behave in [
            ("trickle body", trickle_body),
            ("trickle headers", trickle_headers),
            ("endless stream", endless),
        ]:
            if name.replace(" ", "-") not in only:
                continue
            with serve(behave) as url:
                cmd = ["record", "--provider", "custom", "--model", "m", "--prompt", "hi"]
                cmd += ["--base-url", url, "--out", str(Path(tmp) / name.replace(" ", "-"))]
                outcome = run(checkout, cmd + extra, a.wait)
                outcome["recorded_end_reason"] = _end_reasons(Path(tmp) / name.replace(" ", "-"))
                print(f"{name}: {outcome}", flush=True)
        if "bomb" not in only:
            return
        bomb = bomb_capture(Path(tmp) / "bomb", int(a.bomb_gb * 1e9) >> 20 << 20)
        print(f"gzip bomb replay: {run(checkout, ['replay', str(bomb)], max(a.wait, 60))}")


if __name__ == "__main__":
    main()
