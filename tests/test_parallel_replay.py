"""Parallel replay: ``replay(path, workers=N)`` gives exactly the serial results, in capture
order, shows progress over every process, survives a worker that dies, and the records each
process builds for its share equal the ones the whole capture gives."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

import lab.capture
import lab.replay.many
import lab.replay.pool
from lab.replay import _gc, replay
from lab.replay.pool import guided_bounds
from lab.result import ChunkOrigin

CAPTURES = Path(__file__).resolve().parents[1] / "captures"


def _full(result) -> dict:
    """Everything a result holds, timings and read provenance included."""
    d = result.to_dict()
    d["origins"] = list(result.origins)
    d["read_t_ns"] = result.read_t_ns
    d["chunks"] = [c.model_dump() for c in result.chunks]
    d["divergence"] = result.divergence
    return d


@pytest.fixture(scope="module")
def serial():
    return [_full(r) for r in replay(CAPTURES)]


def test_two_workers_give_the_serial_results_in_capture_order(serial):
    parallel = replay(CAPTURES, workers=2)
    assert [_full(r) for r in parallel] == serial


def test_three_workers_over_a_list_of_requests_give_the_serial_results(serial):
    requests = lab.capture.open(CAPTURES).requests()
    parallel = replay(requests, workers=3)
    assert [_full(r) for r in parallel] == serial


def test_progress_bar_counts_every_stream_of_every_process(serial, capsys):
    replay(CAPTURES, workers=2, progress=True)
    err = capsys.readouterr().err
    n = len(serial)
    assert f"{n}/{n}" in err


def test_a_worker_that_dies_loses_nothing(serial, monkeypatch):
    real = lab.replay.pool._child_main

    def dies_after_one_share(source, replay_one, shares, state, lock, folder):
        i = lab.replay.pool._claim(state, lock)  # claims a share, then dies without delivering it
        assert i < len(shares)
        os._exit(3)

    monkeypatch.setattr(lab.replay.pool, "_child_main", dies_after_one_share)
    with pytest.warns(RuntimeWarning, match=r"exited with code \[3\]"):
        parallel = replay(CAPTURES, workers=2)
    assert [_full(r) for r in parallel] == serial
    assert real is not lab.replay.pool._child_main


def test_one_request_runs_in_this_process():
    capture = lab.capture.open(CAPTURES)
    one = capture.requests()[:1]
    assert [_full(r) for r in replay(one, workers=4)] == [_full(r) for r in replay(one)]


def test_records_built_per_share_equal_the_whole_capture():
    capture = lab.capture.open(CAPTURES)
    whole = capture.requests()
    plan = capture.request_plan()
    assert len(plan) == len(whole) > 0
    fresh = lab.capture.open(CAPTURES)  # nothing built yet: requests_at reads the tables
    for start, stop in guided_bounds(len(plan), 2):
        assert fresh.requests_at(plan[start:stop]) == whole[start:stop]
    assert fresh.requests_at(plan[::-7]) == whole[::-7]  # any order, any subset


def test_guided_bounds_cover_every_request_once_and_shrink_at_the_end():
    for n in (1, 2, 3, 17, 132, 1760):
        for workers in (2, 3, 8):
            bounds = guided_bounds(n, workers)
            covered = [i for a, b in bounds for i in range(a, b)]
            assert covered == list(range(n))
            sizes = [b - a for a, b in bounds]
            assert sizes == sorted(sizes, reverse=True)
    assert [b - a for a, b in guided_bounds(3, 2)] == [1, 1, 1]
    assert max(b - a for a, b in guided_bounds(10_000, 2)) == 64


def test_results_survive_pickling_exactly():
    results = replay(CAPTURES)
    again = pickle.loads(pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL))
    assert results
    assert [_full(r) for r in again] == [_full(r) for r in results]
    for a, b in zip(results, again, strict=True):
        assert [c.model_fields_set for c in a.chunks] == [c.model_fields_set for c in b.chunks]
        assert all(type(o) is ChunkOrigin for o in b.origins)


def test_results_pickle_and_copy_exactly_with_every_pickle_protocol():
    # StreamResult is a slots dataclass: without a reduce of its own, protocols 0 and 1
    # refused it (TypeError: a class that defines __slots__ without defining __getstate__)
    import copy

    from lab.model import NO_METADATA

    results = replay(CAPTURES)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps(results, protocol=protocol))
        assert type(again).__name__ == "Results", protocol
        assert [_full(r) for r in again] == [_full(r) for r in results], protocol
        # the shared read-only empties come back as the one shared object
        assert again[0].chunks[0].metadata is NO_METADATA, protocol
    first = results[0]
    shallow = copy.copy(first)
    assert shallow == first and shallow.chunks is first.chunks
    deep = copy.deepcopy(first)
    assert deep == first and deep.chunks is not first.chunks


def test_attempt_info_pickles_every_field():
    import dataclasses

    from lab.result import AttemptInfo

    values = {
        "attempt": 2,
        "label": "targeted_drop_min_p",
        "status": 400,
        "error": "boom",
        "degradable": "generic_400",
        "end_reason": "http_error",
        "committed": True,
        "body_keys": ["min_p"],
        "n_reads": 7,
        "n_events": 5,
    }
    assert [f.name for f in dataclasses.fields(AttemptInfo)] == list(values)
    info = AttemptInfo(**values)
    assert pickle.loads(pickle.dumps(info)) == info


def test_spawned_workers_give_the_serial_results(serial, monkeypatch):
    """Where processes do not fork (macOS, Windows), the Capture is pickled to the worker."""
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")
    monkeypatch.setattr(lab.replay.pool, "mp_context", lambda: spawn)
    assert [_full(r) for r in replay(CAPTURES, workers=2)] == serial


def test_no_more_children_than_shares(serial, monkeypatch):
    import multiprocessing

    started = []
    real_start = multiprocessing.process.BaseProcess.start

    def start(self):
        started.append(self)
        return real_start(self)

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    requests = lab.capture.open(CAPTURES).requests()[:3]  # three shares of one request
    results = replay(requests, workers=8)
    assert [_full(r) for r in results] == serial[:3]
    assert len(started) == 2


def test_replay_returns_once_every_share_is_delivered_not_when_children_exit(serial, monkeypatch):
    import multiprocessing
    import time

    real = lab.replay.pool._child_main

    def slow_to_exit(*args):
        real(*args)
        time.sleep(30)  # delivered everything, then lingers

    monkeypatch.setattr(lab.replay.pool, "_child_main", slow_to_exit)
    before = set(multiprocessing.active_children())
    results = replay(CAPTURES, workers=2)
    lingering = [c for c in multiprocessing.active_children() if c not in before]
    try:
        assert [_full(r) for r in results] == serial
        assert len(lingering) == 1 and lingering[0].is_alive()  # still sleeping: not waited for
    finally:
        for child in lingering:
            child.terminate()
            child.join()


def test_a_pickled_capture_carries_its_tables_not_the_records_built_from_them():
    capture = lab.capture.open(CAPTURES)
    whole = capture.requests()  # builds and keeps the records
    assert capture._exchanges is not None
    again = pickle.loads(pickle.dumps(capture))
    assert again._exchanges is None and again._rows is None
    assert again.streams_table.equals(capture.streams_table)
    assert again.requests() == whole


def test_workers_fork_on_linux_asked_for_by_name():
    """Python 3.14 made forkserver the Linux default: replay still forks there."""
    import multiprocessing
    import sys

    method = lab.replay.pool.mp_context().get_start_method()
    default = multiprocessing.get_context().get_start_method()
    assert method == ("fork" if sys.platform == "linux" else default)


def _young_collections(fn) -> list[int]:
    """The generations the collector ran on while ``fn()`` ran, automatic collections
    held off (a threshold no test reaches), so only the ones asked for show."""
    import gc

    seen: list[int] = []

    def note(phase, info):  # noqa: ANN001
        if phase == "start":
            seen.append(info["generation"])

    thresholds = gc.get_threshold()
    gc.set_threshold(10**9)
    gc.callbacks.append(note)
    try:
        fn()
    finally:
        gc.callbacks.remove(note)
        gc.set_threshold(*thresholds)
    return seen


def _replay_one() -> None:
    from lab.replay import replay_sse

    replay_sse("openrouter", b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n')


def test_a_replay_collects_the_young_generation_once_and_turns_the_collector_back_on():
    import gc

    assert gc.isenabled()
    assert _young_collections(_replay_one) == [0]
    assert gc.isenabled()


def test_a_replay_leaves_a_collector_that_was_off_alone():
    # parallel replay's children run with the collector off: no collection per replay there
    import gc

    gc.disable()
    try:
        assert _young_collections(_replay_one) == []
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_nested_pauses_collect_per_replay_and_restore_the_collector_at_the_outermost_exit():
    import gc

    inside: list[tuple] = []

    def twice_inside_a_pause() -> None:
        with _gc.paused():  # a fleet's: the collector off, each replay's young=True too
            _replay_one()
            _replay_one()
            inside.append((gc.isenabled(), gc.get_threshold()))

    thresholds = gc.get_threshold()
    assert _young_collections(twice_inside_a_pause) == [0, 0, 0]
    assert inside == [(False, (10**9, *thresholds[1:]))]
    assert gc.isenabled()
    assert gc.get_threshold() == thresholds


def _long_body(n: int = 8000) -> bytes:
    data = b"".join(b'data: {"choices":[{"delta":{"content":"w%d "}}]}\n\n' % i for i in range(n))
    return data + b"data: [DONE]\n\n"


def _generations_at_default_thresholds(fn) -> tuple[list[int], tuple]:
    """The generations collected while ``fn()`` ran with the interpreter's default
    thresholds, and the thresholds right after it."""
    import gc

    seen: list[int] = []

    def note(phase, info):  # noqa: ANN001
        if phase == "start":
            seen.append(info["generation"])

    thresholds = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    gc.callbacks.append(note)
    try:
        fn()
    finally:
        gc.callbacks.remove(note)
        after = gc.get_threshold()
        gc.set_threshold(*thresholds)
    return seen, after


def test_a_long_replay_collects_only_the_young_generation_as_it_goes_and_restores_the_collector():
    # each chunk's objects are scanned while they are in the caches, soon after they were
    # made, not all at once at the end; the older generations, which would rescan the
    # result as it grows, are never collected inside the replay
    import gc

    from lab.replay import replay_sse

    results = []
    seen, after = _generations_at_default_thresholds(
        lambda: results.append(replay_sse("openai", _long_body()))
    )
    assert len(results[0].chunks) >= 8000
    assert len(seen) >= 3  # young collections as the stream went, and one on the way out
    assert set(seen) == {0}
    assert after == (700, 10, 10)
    assert gc.isenabled()


def test_a_short_replay_is_collected_once_on_its_way_out_as_with_the_collector_off():
    # a stream of a few hundred chunks stays under YOUNG_EVERY: one collection, not two
    from lab.replay import replay_sse

    seen, after = _generations_at_default_thresholds(lambda: replay_sse("openai", _long_body(120)))
    assert seen == [0]
    assert after == (700, 10, 10)


@pytest.mark.parametrize(
    ("caller", "inside"),
    [
        ((700, 10, 10), (_gc.YOUNG_EVERY, _gc.OLDER_HELD_OFF, _gc.OLDER_HELD_OFF)),
        ((10**6, 5, 7), (10**6, _gc.OLDER_HELD_OFF, _gc.OLDER_HELD_OFF)),  # rarer: theirs
        ((0, 5, 7), (0, _gc.OLDER_HELD_OFF, _gc.OLDER_HELD_OFF)),  # no automatic ones: none
    ],
)
def test_a_young_pause_holds_off_the_older_generations_and_gives_the_callers_thresholds_back(
    caller, inside
):
    import gc

    saved = gc.get_threshold()
    gc.set_threshold(*caller)
    try:
        with _gc.paused(young=True):
            state = (gc.isenabled(), gc.get_threshold())
        assert state == (True, inside)
        assert gc.get_threshold() == caller
        assert gc.isenabled()
    finally:
        gc.set_threshold(*saved)


def test_thresholds_a_caller_sets_inside_a_pause_stand():
    import gc

    saved = gc.get_threshold()
    try:
        for young in (True, False):
            gc.set_threshold(700, 10, 10)
            with _gc.paused(young=young):
                gc.set_threshold(1000, 20, 20)
            assert gc.get_threshold() == (1000, 20, 20)
    finally:
        gc.set_threshold(*saved)


def test_a_callers_gc_disable_inside_a_young_pause_stands_until_the_outermost_one_ends():
    import gc

    with _gc.paused(young=True):
        gc.disable()
        with _gc.paused(young=True):  # another replay of its own inside: no change of kind
            pass
        assert not gc.isenabled()
    assert gc.isenabled()  # the pause found it on, and gives it back on


def test_a_pause_left_by_an_exception_restores_every_count():
    import gc

    thresholds = gc.get_threshold()
    with pytest.raises(ValueError), _gc.paused(young=True), _gc.paused(defer=True):
        raise ValueError("inside")
    assert (gc.isenabled(), gc.get_threshold()) == (True, thresholds)
    with _gc.paused(young=True):  # nothing of the two left counted: young again
        assert gc.isenabled()
        assert gc.get_threshold()[1] == _gc.OLDER_HELD_OFF


def test_replays_in_a_loop_leave_no_response_behind():
    # a young collection mid-stream moves what is alive to an older generation, which a
    # loop allocating nothing between replays never collects: a replay must leave no
    # cycle (httpx binds each response and its stream into one; the runner unbinds them)
    import gc

    import httpx

    from lab.replay import replay_sse

    body = _long_body(6000)
    for _ in range(5):
        result = replay_sse("openai", body)
    assert len(result.chunks) >= 6000
    assert not [o for o in gc.get_objects() if type(o) is httpx.Response]


def test_replay_request_on_its_own_asks_for_a_young_pause(monkeypatch):
    import lab.replay.one

    asked: list[dict] = []
    real = lab.replay.one._gc_paused

    def paused(**kwargs):
        asked.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(lab.replay.one, "_gc_paused", paused)
    request = next(iter(lab.capture.open(CAPTURES).requests()))
    lab.replay.one.replay_request(request)
    assert asked == [{"young": True}]


def test_a_fleet_pause_keeps_the_collector_off_for_a_long_replay_inside_it():
    # a fleet keeps the collector off: a request's cycle moved to an older generation by a
    # young collection would otherwise wait for the whole fleet
    from lab.replay import replay_sse

    def inside_a_fleet() -> None:
        with _gc.paused():
            replay_sse("openai", _long_body())

    seen, after = _generations_at_default_thresholds(inside_a_fleet)
    assert seen == [0, 0]  # on the way out of the replay, then of the fleet's pause: none before
    assert after == (700, 10, 10)


def test_a_pause_inside_a_deferring_one_keeps_the_collector_off_and_the_outer_one_restores_it():
    import gc

    states: list[bool] = []
    thresholds = gc.get_threshold()
    with _gc.paused(young=True):
        states.append(gc.isenabled())
        with _gc.paused(defer=True, young=True):
            states.append(gc.isenabled())
            with _gc.paused(young=True):
                states.append(gc.isenabled())
            states.append(gc.isenabled())
        states.append(gc.isenabled())  # young collections again, once nothing defers
        assert gc.get_threshold()[1:] == (_gc.OLDER_HELD_OFF, _gc.OLDER_HELD_OFF)
    assert states == [True, False, False, False, True]
    assert gc.isenabled()
    assert gc.get_threshold() == thresholds


def test_a_deferring_pause_collects_once_for_every_replay_inside_it():
    # replay --out's units: the results are dropped when the unit's files are written, so
    # a collection per stream would only scan what reference counts free anyway
    import gc

    def twice_inside_a_deferring_pause() -> None:
        with _gc.paused(defer=True):
            _replay_one()
            with _gc.paused():
                _replay_one()
            assert not gc.isenabled()

    assert _young_collections(twice_inside_a_deferring_pause) == [0]
    assert gc.isenabled()
    assert _young_collections(_replay_one) == [0]  # the next replay collects its own again


def test_replay_to_files_collects_the_young_generation_once_a_unit(tmp_path):
    import gc

    streams = len(replay(CAPTURES))
    written: list = []
    seen = _young_collections(lambda: written.append(replay(CAPTURES, out=tmp_path / "path")))
    assert streams > written[0].units > 1
    assert seen == [0] * written[0].units
    loaded = lab.capture.open(CAPTURES)
    assert _young_collections(lambda: replay(loaded, out=tmp_path / "loaded")) == [0]
    assert gc.isenabled()


def test_serial_replay_builds_its_records_with_the_collector_paused(monkeypatch):
    # the records live as long as the replay: a collection while building them only rescans
    import gc

    built: list[bool] = []
    real = lab.capture.Capture.requests

    def requests(self):
        built.append(gc.isenabled())
        return real(self)

    monkeypatch.setattr(lab.capture.Capture, "requests", requests)
    capture = Path(__file__).parent / "fixtures" / "think-leak-chutes" / "capture"
    assert len(replay(capture)) == 1  # a path: read unit by unit
    assert len(replay(lab.capture.open(capture))) == 1  # a loaded Capture
    assert built == [False, False]
    assert gc.isenabled()


def test_a_fleet_replay_keeps_the_collector_paused_between_streams(monkeypatch):
    # a unit's records and results live until the unit ends: between two streams the
    # collector's older generations would only rescan them (each stream's exit still
    # collects the young generation)
    import gc

    entered: list[bool] = []
    real = lab.replay.many.replay_request

    def replay_request(*args, **kwargs):
        entered.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(lab.replay.many, "replay_request", replay_request)
    n = len(replay(CAPTURES))  # a path: unit by unit
    assert len(replay(lab.capture.open(CAPTURES))) == n  # a loaded Capture
    assert len(entered) == 2 * n > 2
    assert not any(entered)
    assert gc.isenabled()


def _dumps_counted(monkeypatch) -> list[int]:
    """Count the config dumps that fingerprints take (LabConfig.model_dump_json of the
    fields away from their defaults)."""
    from lab.config import LabConfig

    dumps: list[int] = []
    real = LabConfig.model_dump_json

    def model_dump_json(self, **kwargs):
        if kwargs.get("exclude_defaults"):  # the fingerprint's (a run's signature dumps all)
            dumps.append(1)
        return real(self, **kwargs)

    monkeypatch.setattr(LabConfig, "model_dump_json", model_dump_json)
    return dumps


def test_a_fleet_replay_works_out_its_config_fingerprint_once(serial, monkeypatch):
    # every result records the config's fingerprint: one dump for the whole fleet, not one
    # a stream (~20 us each), serial, unit by unit, loaded, or on two workers
    dumps = _dumps_counted(monkeypatch)
    results = replay(CAPTURES)
    assert len(results) > 2
    assert len({r.config for r in results}) == 1
    assert len(dumps) == 1
    dumps.clear()
    assert [_full(r) for r in replay(lab.capture.open(CAPTURES))] == serial
    assert len(dumps) == 1
    dumps.clear()
    assert [_full(r) for r in replay(CAPTURES, workers=2)] == serial
    assert len(dumps) <= 2  # this process and its child, once each


def test_a_fleet_replayed_to_files_works_out_its_config_fingerprint_once(monkeypatch, tmp_path):
    import pandas as pd

    expected = replay(CAPTURES, out=tmp_path / "before").read("streams")
    dumps = _dumps_counted(monkeypatch)
    got = replay(CAPTURES, out=tmp_path / "after")
    assert len(dumps) == 1
    pd.testing.assert_frame_equal(got.read("streams"), expected)


def test_a_held_fingerprint_is_the_configs_own_and_ends_with_the_block(monkeypatch):
    from lab.config import LabConfig, fingerprints_held

    tuned = LabConfig(strip_think_blocks=False)
    default = LabConfig()
    expected = (default.fingerprint(), tuned.fingerprint())
    dumps = _dumps_counted(monkeypatch)
    with fingerprints_held():
        got = [(default.fingerprint(), tuned.fingerprint()) for _ in range(3)]
    assert got == [expected] * 3
    assert len(dumps) == 2  # one a config
    assert default.fingerprint() == expected[0]  # outside the block: worked out again
    assert len(dumps) == 3
    with fingerprints_held():
        default.fingerprint()
        with fingerprints_held():  # nested: the outer block's
            assert default.fingerprint() == expected[0]
    assert len(dumps) == 4


def test_a_unit_replayed_to_files_builds_its_tables_with_the_collector_paused(
    monkeypatch, tmp_path
):
    import gc

    import lab.tables

    states: list[bool] = []
    real = lab.tables.stream_columns

    def stream_columns(*args, **kwargs):
        states.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(lab.tables, "stream_columns", stream_columns)
    units = len(replay(CAPTURES, out=tmp_path / "path").files) - 1  # four files a unit, latency
    replay(lab.capture.open(CAPTURES), out=tmp_path / "loaded")  # one unit
    assert units % 4 == 0
    assert states == [False] * (units // 4 + 1)
    assert gc.isenabled()


def test_replay_starts_no_thread_that_is_alive_when_it_forks(serial, monkeypatch, capsys):
    # Python 3.12+ warns when a process with threads forks (a lock a thread holds stays
    # held in the child); replay's own progress bar and reaper must not be such threads
    import multiprocessing
    import threading
    import time

    before = {t.ident for t in threading.enumerate()}
    at_fork: list[set[str]] = []
    real_start = multiprocessing.process.BaseProcess.start

    def start(self):
        at_fork.append({t.name for t in threading.enumerate() if t.ident not in before})
        return real_start(self)

    real_child = lab.replay.pool._child_main
    gate = lab.replay.pool.mp_context().Event()

    def slow_to_exit(*args):
        real_child(*args)
        gate.wait(30)  # delivered everything; exits when the test lets it ...
        time.sleep(0.2)  # ... and not at once: its reaper is still waiting at the next fork

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    monkeypatch.setattr(lab.replay.pool, "_child_main", slow_to_exit)
    first = replay(CAPTURES, workers=2, progress=True)
    assert [t.name for t in threading.enumerate()].count("lab-replay-reap") == 1
    gate.set()
    second = replay(CAPTURES, workers=2, progress=True)
    assert [_full(r) for r in first] == [_full(r) for r in second] == serial
    assert at_fork == [set(), set()]
    assert "replay: 100%" in capsys.readouterr().err


def test_progress_bar_ends_at_every_stream_when_a_child_counts_late(serial, capsys, monkeypatch):
    # a child publishes its share, then counts it: the parent may load the share first
    real = lab.replay.pool._count_done
    monkeypatch.setattr(lab.replay.pool, "_count_done", lambda state, lock, k: None)
    try:
        replay(CAPTURES, workers=2, progress=True)
    finally:
        monkeypatch.setattr(lab.replay.pool, "_count_done", real)
    err = capsys.readouterr().err
    n = len(serial)
    assert f"{n}/{n}" in err


def test_progress_bar_ends_at_every_stream_when_children_count_while_it_draws(
    serial, capsys, monkeypatch
):
    # a bar slow to draw leaves time for the children to count between reads of the count:
    # the bar must still end at every stream (it once ended at 114/132, CI at 130/132)
    import time

    real = lab.replay.pool.progress_bar
    bars = []

    def slow_bar(total):
        bar = real(total)
        update = bar.update

        def slow_update(k=1):
            time.sleep(0.02)
            return update(k)

        bar.update = slow_update
        bars.append(bar)
        return bar

    monkeypatch.setattr(lab.replay.pool, "progress_bar", slow_bar)
    for _ in range(3):
        replay(CAPTURES, workers=2, progress=True)
    n = len(serial)
    assert [bar.n for bar in bars] == [n, n, n]
    # each bar's last drawing, the one close() leaves on screen, says every stream
    lines = capsys.readouterr().err.split("\n")[:-1]  # close() ends each bar with "\n"
    finals = [line.split("\r")[-1] for line in lines]
    assert len(finals) == 3 and all(f"| {n}/{n} [" in line for line in finals), finals
