"""Instructions per chunk of ``replay_sse``, per wire family, counted by callgrind.

Wall-clock ratios move with the host's load; instruction counts do not, so each step of a
speed change is compared here (docs/PERFORMANCE.md, "The cost-per-chunk stop"). For each
body of ``bench/_common.py``'s ``FAMILY_BODIES`` (OpenRouter reasoning + text, one tool
call streamed as argument deltas, the Responses API, Anthropic thinking + text, Gemini
thoughts + text) the script runs itself under ``valgrind --tool=callgrind``
(``PYTHONHASHSEED=0``, this interpreter's real binary) twice, counting only the replays
(``_common.counted``: callgrind's ``--toggle-collect``; the interpreter's start, the
imports and the body's making move by 7-13M instructions from run to run, +-5-10 % of a
1,000-chunk figure, and are left out): one replay, then three; the difference over the
2 x ``--chunks`` chunks of the two extra replays is the cost per chunk (the first replay's
lazy imports fall out). The counts repeat to the instruction from run to run.

``--detectors`` (issue 34, item 4) measures what the markup-leak and tool-validity work
costs a body without markup: each replay is followed by ``lab.anomalies.detect`` (the
``markup_leak`` anomaly among the others) and the tool-call validity check of the tables
(``lab.tables._tool_checks``: lab.toolcheck against the request's tools), and the count
is taken twice, as shipped and with that work switched off in the child (no markup guard
built or run: ``LabConfig(markup=MarkupGuardConfig(classes=()))``, so the per-chunk path
pays one ``is None`` test, as close to the code before the guard as a switch gets;
``markup_leak`` false, the validity check empty). Target: <= 3 % more instructions per
chunk.

``--peers`` (issue 34, item 3) counts the peers of ``bench_families.py`` the same way (the
hand-written httpx-sse loop and the family's SDK, bench/sdk_peers.py, each checked to read
the body's text) and gives each comparison's verdict in instructions: what each side spends
per chunk, whatever the host's load, page faults and system calls cost.

    python bench/callgrind_replay.py [--chunks 5000] [--only gemini ...] [--detectors | --peers]

``LAB_JSON_PARSER=orjson`` (or ``json``) measures the install without msgspec. A family
takes about a minute.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

DETECTOR_TARGET = 0.03
"""The markup guard and tool validity: at most 3 % more instructions per chunk."""
DETECTOR_BODIES = ("OpenRouter reasoning + text", "one tool call, 20k argument deltas")
"""The chat-family bodies (the families the markup guard runs in), without markup."""


def _detectors_off() -> Any:
    """Switch off the markup-leak and tool-validity work (the child's baseline); returns
    the config the baseline replays with (no markup guard)."""
    from lab import anomalies, tables
    from lab.config import LabConfig
    from lab.guards.markup import MarkupGuardConfig

    anomalies.DETECTORS["markup_leak"] = lambda result, cfg: False
    tables._tool_checks = lambda r, tools=None: []
    return LabConfig(markup=MarkupGuardConfig(classes=()))


def _child(name: str, chunks: int, replays: int, detectors: str) -> None:
    """Run **replays** replays of the body **name** (or its floor, or a peer) through
    ``_common.counted``: all the parent counts (set-up, imports and the body's making are
    not counted)."""
    from _common import counted, family_body

    from lab.replay import replay_sse

    provider, path, body = family_body(name, chunks)
    work: Any
    if detectors == "floor":  # the json.loads floor of the same body
        from bench_families import floor

        def work() -> None:
            for _ in range(replays):
                floor(body)

    elif detectors.startswith("peer:"):  # a peer of bench_families, built before the count
        from sdk_peers import expected_text, peers

        run = peers(name, body)[detectors.removeprefix("peer:")]
        want = expected_text(name, body)

        def work() -> None:
            for _ in range(replays):
                if run() != want:
                    raise SystemExit(f"{detectors} read other text than the body holds")

    elif detectors == "none":

        def work() -> None:
            for _ in range(replays):
                replay_sse(provider, body, path=path)

    else:
        config = _detectors_off() if detectors == "off" else None
        from lab import anomalies, tables

        def work() -> None:
            for _ in range(replays):
                result = replay_sse(provider, body, path=path, config=config)
                anomalies.detect(result)
                tables._tool_checks(result)

    counted(work)


def _instructions(name: str, chunks: int, replays: int, detectors: str = "none") -> int:
    from _common import callgrind_instructions

    return callgrind_instructions(
        __file__, "--child", str(replays), "--chunks", str(chunks), "--body", name,
        "--detector-mode", detectors, counted=True,
    )  # fmt: skip


def per_chunk(name: str, chunks: int, detectors: str = "none") -> float:
    """Instructions per chunk of the body **name**: (3 replays - 1 replay) / 2 / chunks."""
    one = _instructions(name, chunks, 1, detectors)
    three = _instructions(name, chunks, 3, detectors)
    return (three - one) / (2 * chunks)


def _peer_counts(names: list[str], chunks: int) -> int:
    """Item 3's peer comparisons in instructions: each installed peer of each body (the
    hand-written httpx-sse loop, the family's SDK: bench/sdk_peers.py) against the lab,
    with the target ``bench_families.py`` applies to the wall clock. Both sides run the
    same way (a reader built, then run once or three times; the difference counted), so
    the ratio is what each spends per chunk, free of the host's load; memory the lab keeps
    (its result) costs page faults the count does not see (docs/PERFORMANCE.md, 10)."""
    from _common import Table, family_body, verdict
    from sdk_peers import peers, sdk_target

    table = Table("body", "peer", "peer k/chunk", "lab k/chunk", "peer/lab", "target")
    ok = True
    results = []
    for name in names:
        lab = per_chunk(name, chunks)
        _, _, body = family_body(name, 10)
        for peer in peers(name, body):
            other = per_chunk(name, chunks, f"peer:{peer}")
            # the loop must be slower than the lab (> 1x); an SDK at least its target
            sdk = peer.startswith("sdk ")
            target, op = (sdk_target(peer), ">=") if sdk else (1.0, ">")
            ratio = other / lab
            wanted = f"{op} {target:g}x" if target is not None else "-"
            table.add(
                name, peer, f"{other / 1000:.1f}", f"{lab / 1000:.1f}", f"{ratio:.2f}x", wanted
            )
            if target is not None:
                results.append(
                    (name, peer, ratio, ratio >= target if sdk else ratio > target, wanted)
                )
    table.print()
    for name, peer, ratio, met, wanted in results:
        ok = (
            verdict(
                f"instructions vs {peer}, {name}",
                met,
                f"{peer} spends {ratio:.2f}x the lab's instructions per chunk (target {wanted})",
            )
            and ok
        )
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=5000)
    ap.add_argument("--only", nargs="*", help="body names (substring match)")
    ap.add_argument("--detectors", action="store_true", help="item 4: detectors on vs off")
    ap.add_argument(
        "--peers", action="store_true", help="item 3: the peers of bench_families, counted"
    )
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--body", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--detector-mode", default="none", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        _child(args.body, args.chunks, args.child, args.detector_mode)
        return 0
    if shutil.which("valgrind") is None:
        print("SKIP: callgrind_replay: valgrind is not installed")
        return 0
    from _common import FAMILY_BODIES, Table, verdict

    from lab import _json

    names = [
        n
        for n in (DETECTOR_BODIES if args.detectors else FAMILY_BODIES)
        if not args.only or any(o.lower() in n.lower() for o in args.only)
    ]
    print(f"# replay_sse under callgrind  (parser {_json.PARSER}, {sys.version.split()[0]})")
    if args.peers:
        return _peer_counts(names, args.chunks)
    if not args.detectors:
        table = Table("body", "chunks", "floor k/chunk", "lab k/chunk", "lab/floor")
        for name in names:
            fl = per_chunk(name, args.chunks, "floor")
            lab = per_chunk(name, args.chunks)
            table.add(
                name, args.chunks, f"{fl / 1000:.1f}", f"{lab / 1000:.1f}", f"{lab / fl:.2f}x"
            )
        table.print()
        return 0
    table = Table("body", "detectors off (k/chunk)", "as shipped (k/chunk)", "added")
    ok = True
    rows = []
    for name in names:
        off = per_chunk(name, args.chunks, "off")
        on = per_chunk(name, args.chunks, "on")
        added = on / off - 1
        table.add(name, f"{off / 1000:.2f}", f"{on / 1000:.2f}", f"{added * 100:+.2f} %")
        rows.append((name, added))
    table.print()
    for name, added in rows:
        ok = (
            verdict(
                f"detectors cost, {name}",
                added <= DETECTOR_TARGET,
                f"markup guard + tool validity add {added * 100:+.2f} % instructions per chunk "
                f"(target <= {DETECTOR_TARGET * 100:.0f} %)",
            )
            and ok
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
