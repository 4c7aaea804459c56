"""The per-family benchmark's peers (bench/sdk_peers.py) read the same text the lab reads:
a peer that skipped work could look fast, so each is checked on every family body."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from lab.replay import replay_sse

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(name: str):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # sdk_peers imports nothing of bench, _common is loaded
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


common = _load("_common")
peers = _load("sdk_peers")


@pytest.mark.parametrize("name", list(common.FAMILY_BODIES))
def test_every_peer_reads_the_text_the_lab_reads(name):
    provider, path, body = common.family_body(name, 300)
    want = peers.expected_text(name, body)
    assert len(want) > 300
    result = replay_sse(provider, body, path=path)
    if result.function_calls:  # the tool body: the lab parses the arguments it joined
        (call,) = result.function_calls
        assert call.args == json.loads(want) and not result.text
    else:
        assert result.text == want
    found = peers.peers(name, body)
    assert "httpx-sse loop" in found  # a dev dependency
    assert len(found) == 2  # and the family's SDK (openai, anthropic, google-genai: dev too)
    for peer, read in found.items():
        assert read() == want, peer


def test_the_sdk_targets_are_the_issues():
    assert peers.sdk_target("sdk openai") == 10.0
    assert peers.sdk_target("sdk google.genai") == 10.0
    assert peers.sdk_target("sdk anthropic") == 4.0
    assert peers.sdk_target("httpx-sse loop") is None


def test_host_costs_name_a_page_fault_and_a_system_call_measured_once():
    import re

    first = common.host_costs()
    found = re.fullmatch(r"page fault (-?\d+\.\d) us, syscall (\d+\.\d\d) us", first)
    assert found, first
    assert float(found[1]) > 0 and float(found[2]) > 0
    assert common.host_costs() is first  # measured once a process, not per verdict line
    assert common.machine_notes().endswith(first)


def test_the_instruction_count_child_runs_each_peer_and_checks_its_text(monkeypatch):
    callgrind = _load("callgrind_replay")
    import sdk_peers

    name = "Anthropic thinking + text"
    for peer in ("httpx-sse loop", "sdk anthropic"):
        callgrind._child(name, 200, 2, f"peer:{peer}")  # reads the body's text, twice
    monkeypatch.setattr(sdk_peers, "expected_text", lambda name, body: "not the text")
    with pytest.raises(SystemExit, match="read other text than the body holds"):
        callgrind._child(name, 200, 1, "peer:httpx-sse loop")


def test_the_peer_counts_compare_each_peer_with_the_lab_against_its_target(monkeypatch, capsys):
    callgrind = _load("callgrind_replay")
    counts = {"none": 50_000, "peer:httpx-sse loop": 40_000, "peer:sdk anthropic": 210_000}
    monkeypatch.setattr(callgrind, "per_chunk", lambda name, chunks, mode="none": counts[mode])
    assert callgrind._peer_counts(["Anthropic thinking + text"], 1000) == 1
    out = capsys.readouterr().out
    assert (
        "FAIL: instructions vs httpx-sse loop, Anthropic thinking + text: httpx-sse loop "
        "spends 0.80x the lab's instructions per chunk (target > 1x)" in out
    )
    assert (
        "PASS: instructions vs sdk anthropic, Anthropic thinking + text: sdk anthropic "
        "spends 4.20x the lab's instructions per chunk (target >= 4x)" in out
    )
    assert (
        "Anthropic thinking + text  httpx-sse loop  40.0          50.0         0.80x     > 1x"
        in out
    )
    counts["peer:httpx-sse loop"] = 60_000
    assert callgrind._peer_counts(["Anthropic thinking + text"], 1000) == 0


# -- counting only the work (callgrind's --toggle-collect) -------------------------------


def test_counted_runs_the_work_once_through_the_counted_c_function(monkeypatch):
    import operator

    calls = []
    real = operator.call
    monkeypatch.setattr(operator, "call", lambda fn: calls.append(fn) or real(fn))
    assert common.COUNTED_FUNCTION == "_operator_call"  # operator.call's C function
    assert common.counted(lambda: 42) == 42
    assert len(calls) == 1


def _marking_call(inside: list[bool]):
    """``operator.call`` (what ``_common.counted`` runs its work through) that keeps a mark
    in **inside** while the work runs: a spy on the work then tells whether it was counted."""
    import operator

    real = operator.call

    def call(fn):
        inside.append(True)
        try:
            return real(fn)
        finally:
            inside.pop()

    return call


@pytest.mark.parametrize("mode", ["none", "floor", "on", "peer:httpx-sse loop"])
def test_the_instruction_count_child_runs_every_replay_inside_the_counted_region(monkeypatch, mode):
    import operator

    import bench_families
    import sdk_peers

    import lab.replay

    callgrind = _load("callgrind_replay")
    inside: list[bool] = []
    done = []

    def work(*args, **kwargs):
        done.append(bool(inside))
        return real_replay(*args, **kwargs)

    real_replay = lab.replay.replay_sse
    monkeypatch.setattr(operator, "call", _marking_call(inside))
    monkeypatch.setattr(lab.replay, "replay_sse", work)
    real_peers = sdk_peers.peers
    monkeypatch.setattr(
        sdk_peers,
        "peers",
        lambda name, body: {
            p: (lambda run=run: done.append(bool(inside)) or run())
            for p, run in real_peers(name, body).items()
        },
    )
    monkeypatch.setattr(bench_families, "floor", lambda body: done.append(bool(inside)))
    callgrind._child("Anthropic thinking + text", 100, 3, mode)
    assert done == [True, True, True]


def test_a_count_of_the_work_asks_callgrind_to_toggle_on_it_and_refuses_zero(monkeypatch):
    import subprocess

    runs = []

    def run(cmd, **kwargs):
        runs.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", stderr)

    monkeypatch.setattr(subprocess, "run", run)
    stderr = "==1== Events    : Ir\n==1== Collected : 1234567\n"
    assert common.callgrind_instructions("x.py", "--a", counted=True) == 1234567
    assert "--toggle-collect=_operator_call" in runs[-1]
    assert runs[-1][-2:] == ["x.py", "--a"]
    assert common.callgrind_instructions("x.py") == 1234567
    assert not any(arg.startswith("--toggle-collect") for arg in runs[-1])
    stderr = "==1== Collected : 0\n"
    with pytest.raises(RuntimeError, match="counted nothing inside _operator_call"):
        common.callgrind_instructions("x.py", counted=True)
    assert common.callgrind_instructions("x.py") == 0  # the whole process: no such check


# -- counting a window of every thread (callgrind's --dump-before / --dump-after) ---------


def _dump(path: Path, trigger: str, summary: int) -> None:
    path.write_text(
        "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npart: 1\n\n"
        f"desc: Timerange: Basic block 0 - 99\ndesc: Trigger: {trigger}\n\n"
        f"positions: line\nevents: Ir\nsummary: {summary}\n\nfl=(1) x.c\nfn=(1) f\n"
        "summary: 999\n"  # past the header: not read
    )


def test_a_window_count_sums_the_dumps_made_on_leaving_the_work_alone(tmp_path):
    _dump(tmp_path / "callgrind.out.1", "--dump-before=_operator_call", 5_000_000)
    _dump(tmp_path / "callgrind.out.2", "--dump-after=_operator_call", 1_234)
    _dump(tmp_path / "callgrind.out.3", "--dump-before=_operator_call", 70)
    _dump(tmp_path / "callgrind.out.4", "--dump-after=_operator_call", 4_321)
    _dump(tmp_path / "callgrind.out", "Program termination", 100)
    assert common.window_total(tmp_path) == 1_234 + 4_321


def test_a_window_count_refuses_a_run_with_no_window(tmp_path):
    _dump(tmp_path / "callgrind.out", "Program termination", 100)
    with pytest.raises(RuntimeError, match="no dump on leaving _operator_call"):
        common.window_total(tmp_path)


def test_a_window_count_asks_callgrind_to_dump_around_the_work(monkeypatch):
    import subprocess

    runs = []

    def run(cmd, **kwargs):
        runs.append(cmd)
        out = Path(next(a for a in cmd if a.startswith("--callgrind-out-file=")).split("=", 1)[1])
        _dump(out.with_name(out.name + ".1"), "--dump-before=_operator_call", 9)
        _dump(out.with_name(out.name + ".2"), "--dump-after=_operator_call", 77)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", run)
    assert common.callgrind_window("x.py", "--a") == 77
    assert "--dump-before=_operator_call" in runs[0] and "--dump-after=_operator_call" in runs[0]
    assert not any(a.startswith("--toggle-collect") for a in runs[0])  # every thread counted
    assert runs[0][-2:] == ["x.py", "--a"]


@pytest.mark.parametrize("mode", ["sse", "out", "open", "replaycap", "tables"])
def test_the_fleet_count_child_warms_up_then_runs_its_work_once_inside_the_window(
    monkeypatch, tmp_path, mode
):
    import operator

    import lab.capture
    import lab.replay
    from lab.replay import files

    fleet_bench = _load("callgrind_fleet")
    scale = _load("bench_scale")
    path, _chunks, _raw = scale.build_fleet(tmp_path / "capture", 3, 10)
    (tmp_path / "meta.json").write_text(json.dumps([str(path), _chunks, _raw]))
    inside: list[bool] = []
    done: list[bool] = []

    def spy(real):
        return lambda *a, **k: done.append(bool(inside)) or real(*a, **k)

    monkeypatch.setattr(operator, "call", _marking_call(inside))
    work = {"sse": (lab.replay, "replay_sse"), "out": (lab.replay, "replay"),
            "open": (lab.capture, "open"), "replaycap": (lab.replay, "replay"),
            "tables": (files, "_write_unit")}[mode]  # fmt: skip
    monkeypatch.setattr(*work, spy(getattr(*work)))  # the child imports it when it runs
    work_dir = tmp_path / "work"
    work_dir.mkdir()
    fleet_bench._child(mode, tmp_path, work_dir)
    if mode == "sse":
        assert done == [False] * 3 + [True] * 3  # three streams warmed up, three counted
    elif mode == "open":
        assert done == [False, False, True]  # the set-up's open, the warm-up, the count
    elif mode == "replaycap":
        assert done == [False, False, True]  # the set-up's replay, the warm-up, the count
    else:
        assert done == [False, True]
