"""``lab record --n 300`` into a real full disk: a small tmpfs (mounting needs root).

Prints the exit status, how many requests reached the fake server, the last stderr line,
and what ``lab.capture.open`` finds in the recording afterwards::

    python tests/disk_full_tmpfs.py CHECKOUT [SIZE]      # e.g. . 200k

``CHECKOUT`` is the source tree to measure (its ``lab`` runs the recorder); the fake server
and the reader come from the same tree. A measurement for docs/RELIABILITY.md, not a test.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> None:
    checkout = str(Path(sys.argv[1]).resolve())
    size = sys.argv[2] if len(sys.argv) > 2 else "200k"
    sys.path.insert(0, checkout)
    import lab.capture
    from lab.fakes import FakeServer

    mnt = Path(tempfile.mkdtemp(prefix="lab-full-disk-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], check=True)
    try:
        with FakeServer() as srv:
            env = dict(os.environ, PYTHONPATH=checkout, OPENAI_API_KEY="sk-disk-full-test")
            command = [sys.executable, "-m", "lab.cli", "record", "--provider", "openai"]
            command += ["--model", "fake/clean", "--prompt", "hi", "--n", "300"]
            command += ["--base-url", srv.base_url + "/v1", "--out", str(mnt / "rec")]
            p = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
            sent = len(srv.requests)
        lines = [line for line in p.stderr.splitlines() if line.strip()]
        print(f"exit {p.returncode}; requests sent {sent}")
        print("last stderr line:", lines[-1] if lines else None)
        for d in sorted((mnt / "rec").iterdir()) if (mnt / "rec").exists() else []:
            try:
                ex = lab.capture.open(d).exchanges()
            except Exception as exc:  # noqa: BLE001 - that is the finding
                print(f"open() failed: {type(exc).__name__}: {exc}")
                continue
            eof = sum(e.end_reason == "eof" for e in ex)
            print(f"open(): {len(ex)} exchanges, {eof} eof")
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


if __name__ == "__main__":
    main()
