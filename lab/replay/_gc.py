"""The collector pause every offline replay runs under (see :func:`paused`)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused", "reset_after_fork"]

_gc_lock = threading.Lock()
_gc_depth = 0
_gc_was_enabled = False
_gc_deferring = 0


@contextmanager
def paused(*, defer: bool = False) -> Iterator[None]:
    """Pause the cyclic GC while one replay runs, or while records are built for replay
    (thread-safe, nestable).

    A replay keeps every chunk it builds alive in its result, so the collector's full passes
    rescan a heap that only grows: at 200k chunks they were over a third of the time and
    made the cost per chunk grow with the stream. Replay makes no reference cycles worth
    collecting mid-stream; the young generation is collected on the way out, so that cost
    stays inside the call (a nested pause collects too: parallel replay's own loop pauses
    around its replays, and a collection per replay keeps that cost inside the work its
    processes share out). When the collector was already off (parallel replay's children
    run without it) nothing is collected: whoever turned it off does their own collecting.
    Only offline replay pauses; live recording never does.

    With **defer**, the pauses nested inside collect nothing and this one collects once, on
    the way out: for a caller that lets go of everything the nested replays built before it
    ends (a unit of ``replay --out``, its results dropped once its files are written). Those
    objects are then freed by their reference counts without ever being scanned, where a
    collection per stream scanned each once (~1.5 % of a fleet's instructions); the cycle
    each replayed request leaves (httpx's request and response, ~28 objects with the
    recorded exchange they hold) waits for that one collection.
    """
    global _gc_depth, _gc_was_enabled, _gc_deferring
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_depth += 1
        _gc_deferring += defer
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            _gc_deferring -= defer
            collect = _gc_was_enabled and not _gc_deferring
            if _gc_depth == 0 and _gc_was_enabled:
                gc.enable()
        if collect:
            gc.collect(0)


def reset_after_fork() -> None:
    """A forked child's fresh pause state: a fork copies the lock in whatever state it was."""
    global _gc_lock, _gc_depth
    _gc_lock, _gc_depth = threading.Lock(), 0
