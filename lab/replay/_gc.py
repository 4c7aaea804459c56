"""The collector pause every offline replay runs under (see :func:`paused`)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["OLDER_HELD_OFF", "paused", "reset_after_fork"]

OLDER_HELD_OFF = 2**31 - 1
"""The thresholds of the older generations while a **young** pause lets young collections
run: more young collections than any replay makes, so the older generations are never
collected inside one (the largest value ``gc.set_threshold`` takes)."""

_gc_lock = threading.Lock()
_gc_depth = 0
_gc_was_enabled = False
_gc_thresholds = (700, 10, 10)
_gc_deferring = 0
_gc_off = 0  # pauses in effect that want the collector off (not young, or deferring)


@contextmanager
def paused(*, defer: bool = False, young: bool = False) -> Iterator[None]:
    """Pause the cyclic GC while one replay runs, or while records are built for replay
    (thread-safe, nestable).

    A replay keeps every chunk it builds alive in its result, so the collector's passes over
    its older generations rescan a heap that only grows: at 200k chunks they were over a
    third of the time and made the cost per chunk grow with the stream. Replay makes no
    reference cycles worth collecting mid-stream; the young generation is collected on the
    way out, so that cost stays inside the call (a nested pause collects too: parallel
    replay's own loop pauses around its replays, and a collection per replay keeps that
    cost inside the work its processes share out). When the collector was already off
    (parallel replay's children run without it) nothing is collected: whoever turned it
    off does their own collecting. Only offline replay pauses; live recording never does.

    With **young** (one replay: ``replay_sse``, ``replay_request`` outside a fleet), only the
    older generations are held off while no other pause wants the collector off: young
    collections run at the interpreter's own pace (``gc.get_threshold()[0]``), each object
    scanned once, a few hundred allocations after it was made, while it is still in the
    processor's caches. With the collector off until the end, one young collection of a
    whole 20,000-chunk result found it in memory the caches no longer held (4.6 % of an
    OpenRouter replay, 8-16 % of a Gemini one); young collections as it goes made those
    replays 3 % and 8 % faster read as one body, 5 % and 16 % in 1 KB reads, and a
    120-chunk stream, which reaches no threshold, the same (docs/PERFORMANCE.md, 11). The
    older generations' thresholds come back on the way out of the outermost pause; they
    count the young collections made meanwhile, as they would have without the pause, so
    the next automatic collection after it may be an older one (it frees the request's
    cycle when a young collection had moved it there mid-stream). A fleet keeps the
    collector off (its pauses are not **young**): there a cycle moved to an older
    generation would wait for the whole fleet.

    With **defer**, the pauses nested inside collect nothing and this one collects once,
    on the way out. That is for a caller that lets go of everything the nested replays
    built before it ends (a unit of ``replay --out``, its results dropped once its files
    are written). Those objects are then freed by their reference counts without ever being
    scanned, where a collection per stream scanned each once (~1.5 % of a fleet's
    instructions); the cycle each replayed request leaves (httpx's request and response,
    ~28 objects with the recorded exchange they hold) waits for that one collection.
    """
    global _gc_depth, _gc_was_enabled, _gc_thresholds, _gc_deferring, _gc_off
    off = defer or not young
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            _gc_thresholds = gc.get_threshold()
        _gc_depth += 1
        _gc_deferring += defer
        _gc_off += off
        _hold_off()
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            _gc_deferring -= defer
            _gc_off -= off
            collect = _gc_was_enabled and not _gc_deferring
            if _gc_depth == 0:
                gc.set_threshold(*_gc_thresholds)
                if _gc_was_enabled:
                    gc.enable()
            else:
                _hold_off()
        if collect:
            gc.collect(0)


def _hold_off() -> None:
    """The collector as the pauses in effect want it (caller holds ``_gc_lock``, inside at
    least one pause): off when it was off or a pause wants it off, else young collections
    only."""
    if not _gc_was_enabled or _gc_off:
        gc.disable()
        return
    gc.set_threshold(_gc_thresholds[0], OLDER_HELD_OFF, OLDER_HELD_OFF)
    gc.enable()


def reset_after_fork() -> None:
    """A forked child's fresh pause state: a fork copies the lock in whatever state it was."""
    global _gc_lock, _gc_depth
    _gc_lock, _gc_depth = threading.Lock(), 0
