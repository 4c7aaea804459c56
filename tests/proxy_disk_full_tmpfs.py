"""``lab proxy`` recording into a real full disk: a small tmpfs (mounting needs root).

Starts ``lab proxy`` from CHECKOUT with ``--out`` on a SIZE tmpfs in front of the fake
providers, sends N streamed requests through it (10 at a time), stops it with SIGINT and
prints: the exit status, how many requests got a 200, how many exchange lines it printed
(and how many of those say UNRECORDED), its stderr, and what ``lab.capture.open`` finds::

    python tests/proxy_disk_full_tmpfs.py CHECKOUT [SIZE] [N]     # e.g. . 200k 300

A measurement for docs/RELIABILITY.md, not a test (tests/test_proxy_limits.py has the
exact checks with ENOSPC injected).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def main() -> None:
    checkout = str(Path(sys.argv[1]).resolve())
    size = sys.argv[2] if len(sys.argv) > 2 else "200k"
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 300
    sys.path.insert(0, checkout)
    import httpx

    import lab.capture
    from lab.fakes import FakeServer

    mnt = Path(tempfile.mkdtemp(prefix="lab-proxy-full-disk-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], check=True)
    try:
        with FakeServer(delay_scale=0) as srv:
            env = dict(os.environ, PYTHONPATH=checkout)
            command = [sys.executable, "-m", "lab.cli", "proxy", "--provider", "openai"]
            command += ["--port", "0", "--upstream", srv.base_url + "/v1"]
            command += ["--out", str(mnt / "rec")]
            proc = subprocess.Popen(
                command,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=checkout,  # python -m puts the working directory first on sys.path
            )
            url = proc.stdout.readline().strip()
            lines: list[str] = []
            threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
            body = {"model": "fake/clean", "stream": True}
            body["messages"] = [{"role": "user", "content": "hi"}]

            def one(_: int) -> int:
                try:
                    return httpx.post(url + "/chat/completions", json=body, timeout=60).status_code
                except httpx.HTTPError:
                    return -1

            with ThreadPoolExecutor(10) as pool:
                statuses = list(pool.map(one, range(n)))
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=300)
        print(f"exit {proc.returncode}; {statuses.count(200)} of {n} requests got 200")
        unrecorded = sum("UNRECORDED" in line for line in lines)
        print(f"{len(lines)} exchange lines printed, {unrecorded} say UNRECORDED")
        print("stderr:", err.strip() or None)
        found = 0
        for d in sorted((mnt / "rec").iterdir()) if (mnt / "rec").exists() else []:
            try:
                ex = lab.capture.open(d).exchanges()
            except Exception as exc:  # noqa: BLE001 - that is the finding
                print(f"open() of {d.name} failed: {type(exc).__name__}: {exc}")
                continue
            found += len(ex)
            eof = sum(e.end_reason == "eof" for e in ex)
            print(f"open() of {d.name}: {len(ex)} exchanges, {eof} eof")
        print(f"open() finds {found} exchanges in all")
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


if __name__ == "__main__":
    main()
