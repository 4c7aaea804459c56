"""``replay(..., out=DIR, engine="dask")`` on a 2-worker LocalCluster: the same tables as a
serial replay, and the command line's --engine / --scheduler."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from lab import tables
from lab.cli import main
from lab.replay import replay
from lab.resultfiles import RESULT_TABLES, read_results

distributed = pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "captures"


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
    ) as c:
        yield c


def test_dask_on_a_two_worker_cluster_writes_the_tables_a_serial_replay_writes(cluster, tmp_path):
    serial = replay(BUNDLED, out=tmp_path / "serial")
    done = replay(
        BUNDLED, out=tmp_path / "dask", engine="dask", scheduler=cluster.scheduler_address
    )
    assert (done.units, done.streams) == (serial.units, serial.streams) == (12, 132)
    assert [p.name for p in done.files] == [p.name for p in serial.files]
    assert done.files[-1].name == "latency.parquet"
    for table in RESULT_TABLES:  # latency.parquet too
        pd.testing.assert_frame_equal(
            read_results(tmp_path / "dask", table), read_results(tmp_path / "serial", table)
        )
    latency = read_results(tmp_path / "dask", "latency")
    expected = tables.latency(read_results(tmp_path / "dask"))
    pd.testing.assert_frame_equal(latency, expected, check_exact=True)
    assert list(latency.dtypes) == list(expected.dtypes) and latency.attrs == expected.attrs


def test_lab_replay_engine_dask_with_a_scheduler_address(cluster, tmp_path, capsys):
    rc = main(
        ["replay", str(BUNDLED), "--out", str(tmp_path / "r"), "--engine", "dask"]
        + ["--scheduler", cluster.scheduler_address]
    )
    assert rc == 0
    assert "lab replay: 132 streams from 12 unit(s)" in capsys.readouterr().out


def test_engine_dask_needs_out_and_scheduler_needs_dask(tmp_path):
    with pytest.raises(ValueError, match="engine='dask' writes its results to files: give out=DIR"):
        replay(BUNDLED, engine="dask")
    with pytest.raises(ValueError, match="scheduler= is for engine='dask'"):
        replay(BUNDLED, out=tmp_path / "r", scheduler="tcp://127.0.0.1:1")


def test_dask_without_a_scheduler_runs_on_this_machines_processes(tmp_path):
    serial = replay(BUNDLED, out=tmp_path / "serial")
    done = replay(BUNDLED, out=tmp_path / "dask", engine="dask")
    assert (done.units, done.streams) == (serial.units, serial.streams)
    for table in RESULT_TABLES:
        pd.testing.assert_frame_equal(
            read_results(tmp_path / "dask", table), read_results(tmp_path / "serial", table)
        )


def test_relative_paths_are_resolved_before_they_reach_the_workers(cluster, tmp_path, monkeypatch):
    import shutil

    shutil.copytree(BUNDLED, tmp_path / "cap")
    serial = replay(BUNDLED, out=tmp_path / "serial")
    monkeypatch.chdir(tmp_path)  # the client's directory; the workers keep their own
    done = replay("cap", out="rel", engine="dask", scheduler=cluster.scheduler_address)
    assert (done.units, done.streams) == (serial.units, serial.streams)
    assert all(p.is_absolute() and p.parent == tmp_path / "rel" for p in done.files)
    for table in RESULT_TABLES:
        pd.testing.assert_frame_equal(
            read_results(tmp_path / "rel", table), read_results(tmp_path / "serial", table)
        )


def _never_called(*args):
    raise AssertionError("a worker that cannot see its paths must not replay")


def test_a_worker_that_cannot_see_a_path_says_which_and_why(tmp_path):
    import socket

    from lab.config import LabConfig
    from lab.replay.dask_engine import WorkerCannotSee, _task

    unit = (0, (str(tmp_path / "cap" / "streams-00000.parquet"),))
    with pytest.raises(WorkerCannotSee) as info:
        _task(unit, str(tmp_path / "out"), LabConfig(), None, _never_called)
    assert str(info.value) == (
        f"Dask worker on {socket.gethostname()} cannot see {tmp_path / 'out'} (and 1 more "
        "path(s)): engine='dask' needs the capture and out= on a filesystem every worker "
        "sees at the same path"
    )
