"""A killed ``replay --out`` says so, and the same replay into the same directory resumes it.

The kill is real (SIGKILL of ``lab replay`` in its own process once some units are on
disk) and injected (a unit that raises), and the resumed tables are checked cell for cell
against an uninterrupted run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pandas as pd
import pytest

import lab.replay.files as files
from lab import tables
from lab.cli import main
from lab.replay import replay
from lab.replay.files import IncompleteResults, run_state
from lab.resultfiles import read_results

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "captures"
TABLES = ("streams", "leaks", "attempts", "gaps", "latency")


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> dict[str, pd.DataFrame]:
    out = tmp_path_factory.mktemp("whole") / "r"
    replay(BUNDLED, out=out)
    return {t: read_results(out, t) for t in TABLES}


def _same_tables(out: Path, whole: dict[str, pd.DataFrame]) -> None:
    for table in TABLES:
        pd.testing.assert_frame_equal(read_results(out, table), whole[table])
    # latency.parquet is the latency of the resumed run's streams files, dtypes and attrs
    latency, expected = read_results(out, "latency"), tables.latency(read_results(out))
    pd.testing.assert_frame_equal(latency, expected, check_exact=True)
    assert list(latency.dtypes) == list(expected.dtypes) and latency.attrs == expected.attrs


def _crash_after(monkeypatch, n_units: int) -> None:
    """Make the unit replay raise once ``n_units`` units are written (a crash mid-run)."""
    real = files.replay_unit
    seen: list[int] = []

    def unit(*args, **kwargs):
        if len(seen) == n_units:
            raise KeyboardInterrupt("killed")
        seen.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(files, "replay_unit", unit)


def test_an_interrupted_run_warns_on_read_and_the_same_replay_resumes_it(
    tmp_path, monkeypatch, whole
):
    out = tmp_path / "r"
    _crash_after(monkeypatch, 5)
    with pytest.raises(KeyboardInterrupt):
        replay(BUNDLED, out=out)
    monkeypatch.undo()
    state = run_state(out)
    assert (state["status"], state["units"], state["units_written"]) == ("running", 12, 5)
    assert not state["latency_written"] and not (out / "latency.parquet").exists()
    with pytest.warns(IncompleteResults) as caught:
        read_results(out, "streams")
    assert str(caught[0].message) == (
        f"{out}: an unfinished replay (5 of 12 units written): its tables miss streams; run "
        "the same replay into it again to finish it"
    )
    done = replay(BUNDLED, out=out)
    assert (done.units, done.streams, done.resumed) == (12, 132, 5)
    assert done.files[-1] == out / "latency.parquet"
    state = run_state(out)
    assert (state["status"], state["units_written"], state["latency_written"]) == (
        "complete",
        12,
        True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", IncompleteResults)
        _same_tables(out, whole)


def test_a_run_killed_before_latency_parquet_is_unfinished_and_resuming_writes_it(
    tmp_path, monkeypatch, whole
):
    """Every unit on disk but not latency.parquet: the run is not complete, reading says
    so, and the same replay replays no unit and writes latency.parquet."""
    out = tmp_path / "r"

    def killed(out):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(files, "_write_latency", killed)
    with pytest.raises(KeyboardInterrupt):
        replay(BUNDLED, out=out)
    monkeypatch.undo()
    state = run_state(out)
    assert (state["status"], state["units_written"], state["latency_written"]) == (
        "running",
        12,
        False,
    )
    with pytest.warns(IncompleteResults) as caught:
        read_results(out, "streams")
    assert str(caught[0].message) == (
        f"{out}: an unfinished replay (all 12 units written, not yet latency.parquet): run "
        "the same replay into it again to write it"
    )
    replayed: list[int] = []
    real = files.replay_unit
    monkeypatch.setattr(files, "replay_unit", lambda *a, **k: replayed.append(1) or real(*a, **k))
    done = replay(BUNDLED, out=out)
    assert (done.units, done.streams, done.resumed, replayed) == (12, 132, 12, [])
    assert run_state(out)["status"] == "complete"
    with warnings.catch_warnings():
        warnings.simplefilter("error", IncompleteResults)
        _same_tables(out, whole)


def test_an_unfinished_directory_refuses_another_config_and_a_finished_one_any_replay(
    tmp_path, monkeypatch
):
    out = tmp_path / "r"
    _crash_after(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        replay(BUNDLED, out=out)
    monkeypatch.undo()
    with pytest.raises(ValueError) as info:
        replay(BUNDLED, out=out, config={"degrade": False})
    assert str(info.value) == (
        f"out={out}: holds an unfinished replay of another capture, config or provider; run "
        "that replay again to finish it, or give a new directory"
    )
    replay(BUNDLED, out=out)
    with pytest.raises(ValueError, match=r"already holds result tables \(of a finished replay\)"):
        replay(BUNDLED, out=out)


def test_lab_sql_over_an_unfinished_run_warns_on_stderr(tmp_path, monkeypatch, capsys):
    pytest.importorskip("duckdb")
    out = tmp_path / "r"
    _crash_after(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        replay(BUNDLED, out=out)
    monkeypatch.undo()
    assert main(["sql", "SELECT count(*) AS n FROM results", "--results", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.err == (
        f"lab: warning: {out}: an unfinished replay (3 of 12 units written): its tables miss "
        "streams; run the same replay into it again to finish it\n"
    )


def test_lab_replay_killed_with_sigkill_resumes_to_the_uninterrupted_tables(
    tmp_path, whole, capsys
):
    out = tmp_path / "r"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    cmd = [sys.executable, "-m", "lab.cli", "replay", str(BUNDLED), "--out", str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (out / "gaps-00001.parquet").exists():  # two units on disk: kill it
        assert proc.poll() is None, "lab replay ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = run_state(out)
    assert state["status"] == "running" and 2 <= state["units_written"] < 12
    capsys.readouterr()
    assert main(["replay", str(BUNDLED), "--out", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first == (
        f"lab replay: 132 streams from 12 unit(s) ({state['units_written']} of them written by "
        f"an unfinished run before: resumed); result tables in {out}: streams-*.parquet, "
        "leaks-*.parquet, attempts-*.parquet, gaps-*.parquet, latency.parquet"
    )
    assert run_state(out)["status"] == "complete"
    _same_tables(out, whole)
