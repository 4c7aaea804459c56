"""Two tuners (two kernels: two processes) labelling into one user corpus never lose a label:
``save_label`` reads, changes and renames under an OS lock on ``<corpus>.lock``."""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import sys
from pathlib import Path

import pytest

from lab.tuning_store import LOCK_SUFFIX, corpus_lock, load_user_corpus, save_label

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fcntl: POSIX")

WAIT_S = 120.0
"""How long a step may wait for another process (generous: the machine may be busy; the
steps are ordered by events, never by sleeps)."""


def _row(i: str, leak: bool = False) -> dict:
    return {"id": i, "text": f"text {i}", "leak": leak, "seam": 5 if leak else None}


def _ids(path: Path) -> list[str]:
    return [json.loads(ln)["id"] for ln in path.read_text(encoding="utf-8").splitlines()]


def _holder(path: str, log, go) -> None:
    """Save label 'a'; between reading the corpus and writing it back, say so and wait
    until the other process is blocked on the lock."""
    import lab.tuning_store as store

    write = store.write_text_atomic

    def slow_write(*args, **kwargs):
        log.put("a read")
        if not go.wait(WAIT_S):
            log.put("a gave up waiting")
        result = write(*args, **kwargs)
        log.put("a wrote")
        return result

    store.write_text_atomic = slow_write
    save_label(_row("a", leak=True), path)


def _waiter(path: str, log) -> None:
    """Save label 'b', saying when the lock is found taken and when the corpus is read."""
    import fcntl

    import lab.tuning_store as store

    flock = fcntl.flock

    def observed_flock(fd, op):
        try:
            flock(fd, op | fcntl.LOCK_NB)
        except BlockingIOError:
            log.put("b blocked")
            flock(fd, op)

    fcntl.flock = observed_flock
    load = store.load_user_corpus

    def logged_load(p):
        log.put("b read")
        return load(p)

    store.load_user_corpus = logged_load
    save_label(_row("b"), path)
    log.put("b wrote")


def _next(log) -> str:
    try:
        return log.get(timeout=WAIT_S)
    except queue.Empty:  # pragma: no cover - a hang is a failure, said plainly
        return "(nothing within the wait)"


def test_a_second_tuner_waits_for_the_first_and_keeps_its_label(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    path = tmp_path / "seam_corpus.jsonl"
    save_label(_row("earlier"), path)
    # A manager's queue: each put returns once the manager holds the message, so the order
    # read here is the order the steps happened in (a plain Queue flushes from a feeder
    # thread, and a's "a wrote" could arrive after b's "b read").
    manager = ctx.Manager()
    log, go = manager.Queue(), ctx.Event()
    a = ctx.Process(target=_holder, args=(str(path), log, go))
    a.start()
    assert _next(log) == "a read"  # a holds the lock, its read done, its write not yet
    b = ctx.Process(target=_waiter, args=(str(path), log))
    b.start()
    assert _next(log) == "b blocked"  # b reached the lock while a held it
    go.set()
    assert [_next(log) for _ in range(3)] == ["a wrote", "b read", "b wrote"]
    for p in (a, b):
        p.join(WAIT_S)
        assert p.exitcode == 0
    manager.shutdown()
    assert _ids(path) == ["earlier", "a", "b"]  # without the lock b's rewrite drops "a"
    assert load_user_corpus(path)["id"].tolist() == ["earlier", "a", "b"]
    assert (tmp_path / f"seam_corpus.jsonl{LOCK_SUFFIX}").exists()


def _crasher(path: str, log) -> None:
    """Die (as a killed kernel does) while holding the lock, before the rename."""
    import lab.tuning_store as store

    def crash(*args, **kwargs):
        log.put("crashing")
        log.close()
        log.join_thread()  # the message is in the pipe before the process dies
        os._exit(3)

    store.write_text_atomic = crash
    save_label(_row("lost"), path)


def test_a_tuner_that_dies_mid_save_leaves_the_old_corpus_and_releases_the_lock(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    path = tmp_path / "seam_corpus.jsonl"
    save_label(_row("kept"), path)
    log = ctx.Queue()
    p = ctx.Process(target=_crasher, args=(str(path), log))
    p.start()
    assert _next(log) == "crashing"
    p.join(WAIT_S)
    assert p.exitcode == 3
    assert _ids(path) == ["kept"]
    save_label(_row("after"), path)  # the OS released the dead holder's lock
    assert _ids(path) == ["kept", "after"]


def _many(path: str, who: int, n: int, start) -> None:
    start.wait(WAIT_S)
    for i in range(n):
        save_label(_row(f"{who}-{i}", leak=i % 2 == 0), path)


def test_four_tuners_saving_at_once_keep_every_label(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    path = tmp_path / "seam_corpus.jsonl"
    start = ctx.Event()
    procs = [ctx.Process(target=_many, args=(str(path), w, 15, start)) for w in range(4)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(WAIT_S)
        assert p.exitcode == 0
    ids = _ids(path)
    assert sorted(ids) == sorted(f"{w}-{i}" for w in range(4) for i in range(15))
    for w in range(4):  # each process's labels in the order it saved them
        mine = [x for x in ids if x.startswith(f"{w}-")]
        assert mine == [f"{w}-{i}" for i in range(15)]


def test_the_lock_is_exclusive_between_processes_and_made_beside_the_corpus(tmp_path):
    import fcntl

    path = tmp_path / "deep" / "seam_corpus.jsonl"
    with corpus_lock(path) as lock:
        assert lock == tmp_path / "deep" / "seam_corpus.jsonl.lock"
        fd = os.open(lock, os.O_RDWR)
        try:  # another open file description (as another process has) cannot take it
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    fd = os.open(lock, os.O_RDWR)
    try:  # released when the block ends
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
    assert not path.exists()  # the lock makes no corpus
