"""Parallel replay: the requests of one capture shared out over local processes.

The pool knows nothing of how a request is replayed: :func:`replay_parallel` is handed the
function that replays one record (``replay_one(record) -> StreamResult``) and runs it in
this process and in its children.
"""

from __future__ import annotations

import functools
import gc
import multiprocessing
import multiprocessing.connection
import os
import pickle
import shutil
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable
from typing import Any

from lab.replay import _gc
from lab.replay.one import many_replays
from lab.result import StreamResult

__all__ = ["guided_bounds", "mp_context", "progress_bar", "replay_parallel"]

ReplayOne = Callable[[Any], StreamResult]
"""What the pool is handed: replay one record (a RecordedRequest) into its result."""


def progress_bar(total: int) -> Any:
    return _bar_class()(total=total, desc="replay", unit="stream")


@functools.cache
def _bar_class() -> type:
    """tqdm without its monitor thread: parallel replay forks with the bar open, and a
    thread alive at a fork is what Python 3.12+ warns about (a lock it held stays held in
    the child). The replay updates the bar every few ms, so the monitor, which redraws
    bars left idle for 10 s, has nothing to do."""
    from tqdm.auto import tqdm

    return type("_ReplayBar", (tqdm,), {"monitor_interval": 0})


def _requests_of(source: Any, share: Any) -> list[Any]:
    """The records of one share: plan entries of a Capture, or bounds into a request list."""
    if isinstance(source, list):
        return source[share[0] : share[1]]
    return source.requests_at(share)


# -- parallel replay -------------------------------------------------------------------------
# Why this shape (docs/PERFORMANCE.md, benchmark 5): sending a replay's results between
# processes costs about a sixth of the replay itself, so as little as possible crosses.
# - This process replays too: its share never crosses a process boundary.
# - Children start by fork where the platform forks and inherit the loaded Capture (Arrow
#   tables, not Python objects, so nothing is copied); each builds the records of its own
#   share from row numbers (``Capture.requests_at``).
# - Shares are claimed from a shared counter, so no process waits on a dispatcher.
# - A child writes each share's results to a file in a private temporary directory; this
#   process loads them between its own shares. A pipe would stall the child whenever this
#   process, busy replaying, is slow to drain it.
# - A share a child claimed but never delivered (the child died) is replayed here, so a
#   killed child loses nothing; a bug that fails in a child fails here again, and raises.


def mp_context() -> Any:
    """The multiprocessing context for replay workers.

    Fork on Linux, asked for by name: children inherit the loaded Capture, and nothing of
    the caller's runs again in them. (Python 3.14 made "forkserver" the Linux default; with
    it every child imports the caller's script again - all of it, if that script has no
    ``if __name__ == "__main__":`` guard - and must receive the Capture pickled; measured
    on the benchmark it was also slower, 1.36x against 1.66x, docs/PERFORMANCE.md.)
    Elsewhere the platform's default (spawn on macOS and Windows): the Capture is pickled
    to the children.

    Python 3.12+ warns (``DeprecationWarning``, hidden outside tests by default) whenever a
    process with more than one OS thread forks, since a lock another thread holds stays
    held in the child. Once a capture has been read, pyarrow's thread pools are such
    threads, so the warning comes with every parallel replay there. Arrow re-creates its
    pools in a forked child; the children run only the replay (no logging, no printing,
    no progress bar), and none of the lab's own threads is alive at the fork (the bar has
    no monitor thread; earlier replays' reapers are joined first). A thread of the
    caller's that holds a lock the replay needs is the one case this cannot rule out.
    """
    if sys.platform == "linux":
        return multiprocessing.get_context("fork")
    return multiprocessing.getmp_context()


def _claim(state: Any, lock: Any) -> int:
    with lock:
        i = state[0]
        state[0] = i + 1
    return i


def _count_done(state: Any, lock: Any, n: int) -> None:
    with lock:
        state[1] += n


def _child_main(
    source: Any,
    replay_one: ReplayOne,
    shares: list[Any],
    state: Any,
    lock: Any,
    folder: str,
) -> None:
    _gc.reset_after_fork()  # a fork copies a lock in whatever state it was
    # The collector stays off for the child's whole (short) life: replay makes no cycles
    # worth collecting, and pickling a share's results with it on set off collections
    # over the whole inherited heap (pickling 1,760 results: 176 ms with it, 96 without).
    gc.disable()
    with many_replays():  # one client and fingerprint for every share's streams
        while (i := _claim(state, lock)) < len(shares):
            results = [replay_one(r) for r in _requests_of(source, shares[i])]
            tmp = os.path.join(folder, f"{i}.tmp")
            with open(tmp, "wb") as f:
                pickle.dump(results, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, os.path.join(folder, f"{i}.pickle"))
            _count_done(state, lock, len(results))


def guided_bounds(n: int, workers: int, largest: int = 64) -> list[tuple[int, int]]:
    """Share bounds that shrink as the work runs out (guided scheduling).

    Large shares early keep the per-share cost (building records, writing a file) small;
    small shares at the end let every process finish at nearly the same time.
    """
    bounds: list[tuple[int, int]] = []
    start = 0
    while start < n:
        size = max(1, min(largest, (n - start) // (2 * workers)))
        bounds.append((start, min(start + size, n)))
        start += size
    return bounds


def replay_parallel(
    source: Any,
    plan: list[Any],
    replay_one: ReplayOne,
    workers: int,
    progress: bool,
) -> list[StreamResult]:
    """Replay the records ``plan`` names (of ``source``: a Capture or a list of records) on
    ``workers`` processes, this one included; their results in plan order."""
    n = len(plan)
    bounds = guided_bounds(n, workers)
    shares = bounds if isinstance(source, list) else [plan[a:b] for a, b in bounds]
    ctx = mp_context()
    state = ctx.RawArray("q", 2)  # [next share to claim, streams done]
    lock = ctx.Lock()
    bar = progress_bar(n) if progress else None
    shown = 0

    def show() -> None:
        nonlocal shown
        if bar is not None:
            count = state[1]  # read once: a child may count between two reads
            if count > shown:
                bar.update(count - shown)
                shown = count

    done: dict[int, list[StreamResult]] = {}
    children: list[Any] = []
    folder = tempfile.mkdtemp(prefix="lab-replay-")
    _join_reapers()

    waiting: set[int] = set()  # claimed by a child, not loaded yet
    seen = 0  # shares below this one are in `done` or in `waiting`

    def collect() -> None:
        """Load what the children delivered so far (between this process's own shares)."""
        nonlocal seen
        claimed = min(state[0], len(shares))
        waiting.update(i for i in range(seen, claimed) if i not in done)
        seen = max(seen, claimed)
        for i in sorted(waiting):
            path = os.path.join(folder, f"{i}.pickle")
            if os.path.exists(path):
                with open(path, "rb") as f:
                    done[i] = pickle.load(f)
                waiting.discard(i)

    finished = False
    try:
        for _ in range(min(workers, len(shares)) - 1):  # no child without a share to take
            args = (source, replay_one, shares, state, lock, folder)
            child = ctx.Process(target=_child_main, args=args, daemon=True)
            child.start()
            children.append(child)
        # unpickling builds as many objects as the replay did: the collector stays paused
        with _gc.paused(), many_replays():
            while (i := _claim(state, lock)) < len(shares):
                done[i] = [replay_one(r) for r in _requests_of(source, shares[i])]
                _count_done(state, lock, len(done[i]))
                show()
                collect()
            # wait for the children's last deliveries, not for their exits (a forked child
            # takes several ms to tear down its copy of this process's address space)
            collect()
            while waiting and (alive := [c for c in children if c.is_alive()]):
                multiprocessing.connection.wait([c.sentinel for c in alive], timeout=0.002)
                collect()
                show()
            lost = sorted(waiting)  # claimed by a child that died before delivering it
            for i in lost:
                done[i] = [replay_one(r) for r in _requests_of(source, shares[i])]
                _count_done(state, lock, len(done[i]))
        if lost:
            failed = [c.exitcode for c in children if c.exitcode]
            warnings.warn(
                f"{len(failed)} replay worker(s) exited with code {failed} before delivering "
                f"{len(lost)} share(s); those were replayed in this process",
                RuntimeWarning,
                stacklevel=3,
            )
        results = [result for i in range(len(shares)) for result in done.pop(i)]
        if bar is not None and len(results) > shown:
            # a child counts its streams after delivering them: the last share may be here
            # before its count is, so the bar ends at what arrived, every stream
            bar.update(len(results) - shown)
            shown = len(results)
        finished = True
        return results
    finally:
        if finished:  # the children have nothing left to do but exit: reap them off the clock
            _reap(children)
        else:  # an error or an interrupt here: stop them now
            for child in children:
                if child.is_alive():
                    child.terminate()
                child.join()
        shutil.rmtree(folder, ignore_errors=True)
        if bar is not None:
            bar.close()


_reapers: list[threading.Thread] = []


def _reap(children: list[Any]) -> None:
    """Join children on a daemon thread (they exit on their own, having delivered all)."""
    if children:
        reaper = threading.Thread(
            target=lambda: [c.join() for c in children], name="lab-replay-reap", daemon=True
        )
        reaper.start()
        _reapers.append(reaper)


def _join_reapers() -> None:
    """Wait for the children of earlier parallel replays to exit (they have delivered
    everything; a few ms at most), so that no reaper thread is alive at the next fork."""
    while True:
        try:
            reaper = _reapers.pop()
        except IndexError:  # none left (another thread may have taken the last)
            return
        reaper.join()
