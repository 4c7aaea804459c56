"""The collector pause every offline replay runs under (see :func:`paused`)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["OLDER_HELD_OFF", "YOUNG_EVERY", "paused", "reset_after_fork"]

OLDER_HELD_OFF = 2**31 - 1
"""The thresholds of the older generations while a **young** pause lets young collections
run: more young collections than any replay makes, so the older generations are never
collected inside one (the largest value ``gc.set_threshold`` takes)."""

YOUNG_EVERY = 5000
"""Inside a **young** pause, a young collection runs at most this often (net allocations
of tracked objects; the interpreter's own threshold when it is larger). A stream of a few
hundred chunks stays under it and is collected once, on the way out, as with the collector
off; a long one is collected every ~1,500 chunks, while they are in the caches. (At the
interpreter's default, 700, a 120-chunk stream got a second collection, mid-stream: 1-3 %
slower in a loop, the review measured.)"""

_gc_lock = threading.Lock()
_gc_depth = 0
_gc_was_enabled = False
_gc_deferring = 0
_gc_off = 0  # pauses in effect that want the collector off (not young, or deferring)
_gc_young = False  # the pauses in effect hold off only the older generations
_gc_thresholds = (700, 10, 10)  # the caller's, saved by the outermost pause
_gc_set: tuple[int, int, int] | None = None  # what a young pause set them to, if it did


@contextmanager
def paused(*, defer: bool = False, young: bool = False) -> Iterator[None]:
    """Pause the cyclic GC while one replay runs, or while records are built for replay
    (thread-safe, nestable).

    A replay keeps every chunk it builds alive in its result, so the collector's passes over
    its older generations rescan a heap that only grows: at 200k chunks they were over a
    third of the time and made the cost per chunk grow with the stream. The young
    generation is collected on the way out, so that cost stays inside the call (a nested
    pause collects too: parallel replay's own loop pauses around its replays, and a
    collection per replay keeps that cost inside the work its processes share out). When
    the collector was already off (parallel replay's children run without it) nothing is
    collected: whoever turned it off does their own collecting. Only offline replay
    pauses; live recording never does.

    By default the collector is off inside. With **young** (one replay on its own:
    ``replay_sse``, ``replay_request`` outside a fleet), as long as no pause in effect
    wants it off, only the older generations are held off: young collections run every
    :data:`YOUNG_EVERY` allocations, each object scanned once, soon after it was made,
    while it is still in the processor's caches. With the collector off until the end, one
    young collection of a whole 20,000-chunk result found it in memory the caches no
    longer held (4.6 % of an OpenRouter replay, 8-16 % of a Gemini one); collected as it
    goes, such a replay in 1 KB reads took 4 % and 9 % less (docs/PERFORMANCE.md, 11,
    stop 58). The older generations' thresholds come back on the way out of the outermost
    pause, unless someone else changed them meanwhile; their counts keep the young
    collections made inside, so the interpreter's next automatic collection after the
    pause is an older one. The runner unbinds each response it closes from its stream
    (:data:`lab.stream._SPENT`), so a replay leaves no cycle of its own for a young
    collection to move up; a cycle another path leaves (an error's traceback, say) waits
    for that older collection, which a loop that allocates nothing between replays does
    not reach. A fleet keeps the collector off (its pauses are not **young**): there such
    a cycle would wait for the whole fleet.

    With **defer**, the pauses nested inside collect nothing and this one collects once,
    on the way out. That is for a caller that lets go of everything the nested replays
    built before it ends (a unit of ``replay --out``, its results dropped once its files
    are written). Those objects are then freed by their reference counts without ever being
    scanned, where a collection per stream scanned each once (~1.5 % of a fleet's
    instructions).
    """
    global _gc_depth, _gc_was_enabled, _gc_thresholds, _gc_deferring, _gc_off, _gc_set
    off = defer or not young
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            _gc_thresholds = gc.get_threshold()
            _gc_set = None
        _gc_depth += 1
        _gc_deferring += defer
        _gc_off += off
        _hold_off(first=_gc_depth == 1)
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            _gc_deferring -= defer
            _gc_off -= off
            collect = _gc_was_enabled and not _gc_deferring
            if _gc_depth == 0:
                if _gc_set is not None and gc.get_threshold() == _gc_set:
                    gc.set_threshold(*_gc_thresholds)
                if _gc_was_enabled:
                    gc.enable()
            else:
                _hold_off(first=False)
        if collect:
            gc.collect(0)


def _hold_off(*, first: bool) -> None:
    """Put the collector as the pauses in effect want it, when that changed (caller holds
    ``_gc_lock``, inside at least one pause): off when it was off or a pause wants it off,
    else young collections only. Left as it is otherwise, so a caller's own
    ``gc.disable()`` inside a pause stands until the outermost one ends."""
    global _gc_young, _gc_set
    young = _gc_was_enabled and not _gc_off
    if not first and young == _gc_young:
        return
    _gc_young = young
    if not young:
        gc.disable()
        return
    if _gc_set is None:
        young_every = max(_gc_thresholds[0], YOUNG_EVERY) if _gc_thresholds[0] else 0
        _gc_set = (young_every, OLDER_HELD_OFF, OLDER_HELD_OFF)
        gc.set_threshold(*_gc_set)
    gc.enable()


def reset_after_fork() -> None:
    """A forked child's fresh pause state: a fork copies the lock in whatever state it was,
    and the counts of pauses that are its parent's, not its own."""
    global _gc_lock, _gc_depth, _gc_deferring, _gc_off, _gc_young, _gc_set
    _gc_lock, _gc_depth = threading.Lock(), 0
    _gc_deferring = _gc_off = 0
    _gc_young, _gc_set = False, None
