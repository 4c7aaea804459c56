"""Instructions per chunk of a fleet replay to result files against ``replay_sse``, by callgrind.

Issue 34, item 1: ``lab replay CAPTURE --out DIR`` must cost at most 1.2x what
``replay_sse`` costs per chunk on the same bodies. Wall-clock ratios move with the host's
load (this machine is shared); instruction counts do not, so the row is counted here.

A fleet of ``--streams`` OpenRouter streams of ``--chunks`` SSE chunks each is written with
the lab's own writer (``bench_scale.build_fleet``: 1-3 events a read), then each contender
runs under ``valgrind --tool=callgrind`` (``PYTHONHASHSEED=0``) in a process of its own: once
to warm up (imports and lazy set-up), then once more inside ``_common.counted``, and only
that second run is counted, on every thread (``_common.callgrind_window``: the threads the
replay hands Parquet work to are counted, the interpreter's start is not, which moved a
whole-process count by ~0.9 % from run to run):

- ``sse``: ``replay_sse("openrouter", reads)`` once per stream, the recorded reads of one
  stream as they are (the single-body path);
- ``out``: ``replay(capture, out=DIR)`` (open the capture, replay every request, build the
  four result tables, write them as Parquet, then ``latency.parquet``);
- with ``--parts``, also where ``out``'s extra cost goes: ``open`` (open the capture and
  read its requests), ``replaycap`` (the in-memory ``replay(capture)``), ``tables`` (build
  and write the four tables from the replayed results).

Prints instructions per chunk for each and, last, the PASS/FAIL line against 1.2.

    python bench/callgrind_fleet.py [--streams 100] [--chunks 120] [--parts]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGET = 1.2
"""``replay --out`` at most this many times ``replay_sse``'s instructions per chunk."""


def _child(mode: str, fleet: Path, work: Path) -> None:
    """Run **mode** once to warm up, then once inside ``_common.counted`` (what is counted)."""
    from _common import counted

    import lab.capture
    from lab.config import LabConfig
    from lab.replay import files, replay, replay_sse

    path, _chunks, _raw = json.loads((fleet / "meta.json").read_text())
    requests = list(lab.capture.open(path).requests())
    reads = [bytes(r) for r in requests[0].exchanges[0].reads]  # every stream's are the same
    streams = len(requests)
    del requests
    capture = results = None
    if mode in ("tables", "replaycap"):
        capture = lab.capture.open(path)
        results = replay(capture)

    def run(i: int) -> None:
        out = work / f"out-{i}"
        shutil.rmtree(out, ignore_errors=True)
        if mode == "sse":
            for s in range(streams):
                replay_sse("openrouter", reads, stream_id=f"x{s}")
        elif mode == "out":
            replay(path, out=out)
        elif mode == "open":
            for _ in lab.capture.open(path).requests():
                pass
        elif mode == "replaycap":
            replay(capture)
        elif mode == "tables":
            out.mkdir(parents=True)
            files._write_unit(results, out, i, LabConfig())
        else:
            raise SystemExit(f"unknown mode {mode!r}")

    run(0)  # the warm-up: lazy imports and first calls, not counted
    counted(lambda: run(1))


def _instructions(mode: str, fleet: Path) -> int:
    from _common import callgrind_window

    with tempfile.TemporaryDirectory(prefix="lab-cgfleet-") as work:
        return callgrind_window(__file__, "--child", mode, str(fleet), work)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--child"]:
        _child(args[1], Path(args[2]), Path(args[3]))
        return 0
    from _common import machine_notes, verdict
    from bench_scale import build_fleet

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--streams", type=int, default=100, help="streams in the fleet (default 100)")
    p.add_argument("--chunks", type=int, default=120, help="SSE chunks a stream (default 120)")
    p.add_argument("--parts", action="store_true", help="also count open, replay and tables")
    a = p.parse_args(args)
    if shutil.which("valgrind") is None:
        return 0 if verdict("fleet replay instructions", None, "valgrind is not installed") else 1
    print(machine_notes())
    with tempfile.TemporaryDirectory(prefix="lab-fleet-") as tmp:
        fleet = Path(tmp)
        path, chunks, raw = build_fleet(fleet / "capture", a.streams, a.chunks)
        (fleet / "meta.json").write_text(json.dumps([str(path), chunks, raw]))
        modes = ["sse", "out"] + (["open", "replaycap", "tables"] if a.parts else [])
        per = {}
        for mode in modes:
            per[mode] = _instructions(mode, fleet) / chunks
            print(f"{mode:10s} {per[mode]:>10,.0f} instructions per chunk", flush=True)
    ratio = per["out"] / per["sse"]
    ok = verdict(
        "replay --out per chunk against replay_sse",
        ratio <= TARGET,
        f"{ratio:.3f}x ({per['out']:,.0f} / {per['sse']:,.0f} instructions; target <= {TARGET})",
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
