"""Instructions per OpenRouter chunk of ``replay_sse``, counted by callgrind (no target).

Wall-clock ratios move with the host's load; instruction counts do not, so each step of a
speed change is compared here (docs/PERFORMANCE.md, "The cost-per-chunk stop"). The script
runs itself under ``valgrind --tool=callgrind`` (``PYTHONHASHSEED=0``, this interpreter's
real binary) twice: imports and body plus one replay, then plus three; the difference over
the 2 x 5,000 chunks of the two extra replays is the cost per chunk (the first replay's
lazy imports fall out). About a minute.

    python bench/callgrind_replay.py [--chunks 5000]

``LAB_JSON_PARSER=orjson`` (or ``json``) measures the install without msgspec.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _child(chunks: int, replays: int) -> None:
    from _common import openrouter_body

    from lab.replay import replay_sse

    body = openrouter_body(chunks)
    for _ in range(replays):
        replay_sse("openrouter", body)


def _instructions(chunks: int, replays: int) -> int:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--child",
            str(replays),
            "--chunks",
            str(chunks),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in callgrind's output: {proc.stderr[-300:]}")
    return int(found.group(1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=5000)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        _child(args.chunks, args.child)
        return 0
    if shutil.which("valgrind") is None:
        print("SKIP: callgrind_replay: valgrind is not installed")
        return 0
    from lab import _json

    one = _instructions(args.chunks, 1)
    three = _instructions(args.chunks, 3)
    per_chunk = (three - one) / (2 * args.chunks)
    print(f"# replay_sse under callgrind  (parser {_json.PARSER}, {sys.version.split()[0]})")
    print(f"instructions: 1 replay {one:,}, 3 replays {three:,}")
    print(f"replay_sse per OpenRouter chunk: {per_chunk / 1000:.1f}k instructions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
