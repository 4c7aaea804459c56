"""Benchmark: every wire family's ``replay_sse`` against the json.loads floor of its own body.

Five bodies (issue 34, item 3), each ``--chunks`` data events (bench/_common.py,
``FAMILY_BODIES``): OpenRouter reasoning + text, one chat-completions tool call streamed as
argument deltas (the OpenAI-compatible chat machine, provider ``openai``), an OpenAI
Responses API text stream, Anthropic thinking + text, Gemini thoughts + text.

The floor is what any consumer must at least do with the same bytes: split the body into
lines, keep the ``data:`` payloads and ``json.loads`` each one. The lab does that plus SSE
framing, typed decoding, every guard, ProcessedChunks, the processor and the result.

The contenders run interleaved (floor, lab, floor, lab, ..., floor: ``--repeat`` lab runs,
each between two floor runs) and the ratio is the median over rounds of each lab run
against the mean of the floor runs on either side (as bench_replay_floor.py does).

Targets: with ``[speed]`` (msgspec) every family <= 2x its floor; without it (orjson, the
core dependency) <= 3x.

The peers (bench/sdk_peers.py, where installed; ``--no-peers`` leaves them out) run in the
same rounds, each checked to read the same text: a hand-written httpx-sse + json.loads loop
with no guards (target: the lab faster, lab/loop < 1) and the family's official SDK (target:
the lab >= 10x faster than openai and google-genai, >= 4x than anthropic).

With no ``--parser`` the script runs itself once per installed
parser, each in its own process (the parser is picked when ``lab`` is imported).

    python bench/bench_families.py [--chunks 20000] [--repeat 5] [--parser msgspec|orjson]
                                   [--only NAME ...] [--no-peers]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    FAMILY_BODIES,
    Table,
    bracketed_rounds,
    family_body,
    machine_notes,
    paired_times,
    timed_call,
    verdict,
)
from sdk_peers import expected_text, peers, sdk_target  # noqa: E402

TARGETS = {"msgspec": 2.0, "orjson": 3.0}
"""lab / floor per chunk, by the lab's JSON parser."""


def floor(body: bytes) -> int:
    """Bare SSE line splitting + json.loads of every data payload."""
    n = 0
    loads = json.loads
    for line in body.split(b"\n"):
        if line.startswith(b"data: "):
            payload = line[6:]
            if payload != b"[DONE]":
                loads(payload)
                n += 1
    return n


def measure(
    name: str, n_chunks: int, repeat: int, with_peers: bool
) -> tuple[int, dict[str, list[float]]]:
    from lab.replay import replay_sse

    provider, path, body = family_body(name, n_chunks)
    events = floor(body)
    result = replay_sse(provider, body, path=path)
    assert result.error is None and (result.text or result.function_calls), (name, result.error)
    assert not result.facts.get("unhandled_shapes"), (name, result.facts)

    def lab() -> object:
        return replay_sse(provider, body, path=path)

    fns = {"floor": lambda: floor(body), "lab": lab}
    if with_peers:
        want = expected_text(name, body)
        for peer, read in peers(name, body).items():
            got = read()
            assert got == want, (name, peer, len(got), len(want))
            fns[peer] = read
    times = paired_times(fns, repeat=repeat, warmup=1)
    times["floor"].append(timed_call(lambda: floor(body)))
    return events, times


def run(parser: str, n_chunks: int, repeat: int, only: list[str] | None, with_peers: bool) -> int:
    from lab import _json

    target = TARGETS.get(_json.PARSER, TARGETS["orjson"])
    print(f"# families vs json.loads floor, parser {_json.PARSER}  ({machine_notes()})")
    table = Table("body", "events", "floor µs/chunk", "lab µs/chunk", "lab/floor", "target")
    others = Table("body", "peer", "peer µs/chunk", "lab µs/chunk", "peer/lab", "target")
    rows = []
    peer_rows = []
    for name in FAMILY_BODIES:
        if only and not any(o.lower() in name.lower() for o in only):
            continue
        events, times = measure(name, n_chunks, repeat, with_peers)
        rounds = [1 / r for r in bracketed_rounds(times["floor"], times["lab"])]
        ratio = statistics.median(rounds)
        fl = statistics.median(times["floor"]) / events * 1e6
        lab = statistics.median(times["lab"]) / events * 1e6
        table.add(name, events, fl, lab, f"{ratio:.2f}x", f"<= {target}x")
        rows.append((name, ratio, rounds))
        for peer, runs in times.items():
            if peer in ("floor", "lab"):
                continue
            speedup = statistics.median(p / t for p, t in zip(runs, times["lab"], strict=True))
            goal = sdk_target(peer)
            want = f">= {goal:g}x" if goal is not None else "> 1x"
            others.add(name, peer, statistics.median(runs) / events * 1e6, lab,
                       f"{speedup:.2f}x", want)  # fmt: skip
            peer_rows.append((name, peer, speedup, goal if goal is not None else 1.0))
    table.print()
    if peer_rows:
        print()
        others.print()
    ok = True
    for name, ratio, rounds in rows:
        detail = (
            f"lab/floor = {ratio:.2f}x per chunk (target <= {target}x; rounds "
            + ", ".join(f"{r:.2f}" for r in rounds)
            + ")"
        )
        ok = verdict(f"family {name} [{_json.PARSER}]", ratio <= target, detail) and ok
    for name, peer, speedup, goal in peer_rows:
        passed = speedup > goal if goal == 1.0 else speedup >= goal
        sign = ">" if goal == 1.0 else ">="
        detail = f"{peer} takes {speedup:.2f}x the lab's time (target {sign} {goal:g}x)"
        ok = verdict(f"family {name} vs {peer} [{_json.PARSER}]", passed, detail) and ok
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--parser", choices=sorted(TARGETS), default=None)
    ap.add_argument("--only", nargs="*", help="body names (substring match)")
    ap.add_argument("--no-peers", action="store_true", help="time the lab and the floor only")
    args = ap.parse_args(argv)
    if args.parser is not None:
        if os.environ.get("LAB_JSON_PARSER") != args.parser:
            raise SystemExit(f"run with LAB_JSON_PARSER={args.parser} (the parent does)")
        return run(args.parser, args.chunks, args.repeat, args.only, not args.no_peers)
    import importlib.util

    status = 0
    for parser in ("msgspec", "orjson"):
        if importlib.util.find_spec(parser) is None:
            print(f"SKIP: families [{parser}]: not installed")
            continue
        cmd = [sys.executable, __file__, "--parser", parser, "--chunks", str(args.chunks)]
        cmd += ["--repeat", str(args.repeat)]
        if args.only:
            cmd += ["--only", *args.only]
        if args.no_peers or parser != "msgspec":  # the peers do not depend on the parser
            cmd += ["--no-peers"]
        env = {**os.environ, "LAB_JSON_PARSER": parser}
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True)
        sys.stdout.write(proc.stdout)
        sys.stdout.flush()
        if proc.returncode:
            status = 1
            if "FAIL:" not in proc.stdout:
                print(f"FAIL: families [{parser}]: exited {proc.returncode}")
    return status


if __name__ == "__main__":
    sys.exit(main())
