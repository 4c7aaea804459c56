"""Replay: captures (or one raw response body) through the full stack, offline.

Replay runs :func:`lab.stream.run_stream` — the same code as a live recording — with a
:class:`~lab.http.transports.ReplayTransport` that serves the recorded reads back with their
original boundaries. The degradation ladder runs again: when it asks for an attempt whose
body differs from the recorded one, or for more attempts than were recorded, the result's
``divergence`` says so.

>>> from lab.replay import replay_sse
>>> r = replay_sse("openrouter", b'data: {"choices":[{"delta":{"content":"hi"}}]}\\n\\n')
>>> r.text
'hi'
"""

from __future__ import annotations

import functools
import gc
import json
import multiprocessing
import multiprocessing.connection
import os
import pickle
import re
import shutil
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from lab._json import loads as json_loads
from lab.config import LabConfig
from lab.result import Results, StreamResult
from lab.stream import run_stream

__all__ = ["StreamResult", "compare", "diff_results", "replay", "replay_request", "replay_sse"]

_REPLAY_BASE_URL = "http://replay.invalid"

_gc_lock = threading.Lock()
_gc_depth = 0
_gc_was_enabled = False


@contextmanager
def _gc_paused() -> Iterator[None]:
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
    """
    global _gc_depth, _gc_was_enabled
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            collect = _gc_was_enabled
            if _gc_depth == 0 and collect:
                gc.enable()
        if collect:
            gc.collect(0)


def replay_sse(
    provider: str,
    body: str | bytes | Iterable[bytes],
    *,
    tools: list[dict] | None = None,
    config: Any = None,
    model: str | None = None,
    stream_id: str = "replay",
    path: str | None = None,
) -> StreamResult:
    """One recorded response body (HTTP 200) through the whole stack.

    Pass a distinct **stream_id** when several results go into one table. **path** is the
    request path the body answered, when it picks another API than the family's default
    (``"/responses"``: an OpenAI Responses API stream of openai, openrouter or deepseek).

    **body** is the raw SSE text or bytes (one read) or an iterable of reads (boundaries are
    kept). No degradation runs: there is no recorded next attempt to degrade into, so an error
    is reported as the stream reported it.
    """
    from lab.http.transports import replay_transport_for_body
    from lab.providers import PROVIDERS

    cfg = LabConfig.coerce(config).model_copy(update={"degrade": False})
    if provider not in PROVIDERS:
        return _error_result(
            provider,
            model,
            stream_id,
            "unknown_provider",
            f"unknown provider {provider!r}; known providers: {', '.join(sorted(PROVIDERS))}",
        )
    from lab.providers import adapter_for

    if path is None and not isinstance(body, (str, bytes, bytearray, memoryview)):
        body = [bytes(b) for b in body]  # read once: the sniff and the replay both see it
    if path is None and _responses_body(body):
        try:  # a Responses API stream, known by its events, of a family that has the API
            adapter_for(provider, RESPONSES_PATH)
            path = RESPONSES_PATH
        except ValueError:
            pass
    try:
        adapter_cls = adapter_for(provider, path)
    except ValueError as exc:
        return _error_result(provider, model, stream_id, "unknown_api", str(exc))
    turns = "input" if "input" in adapter_cls.mandatory_keys else "messages"
    request: dict[str, Any] = {"model": model or "replay", turns: [], "stream": True}
    if tools:
        request["tools"] = tools
    transport = replay_transport_for_body(body)
    with _gc_paused():
        result = run_stream(
            provider,
            request,
            transport=transport,
            base_url=_REPLAY_BASE_URL,
            config=cfg,
            tools=tools,
            stream_id=stream_id,
            path=path,
        )
    if model is None:
        result.model = None
    return result


RESPONSES_PATH = "/responses"
_RESPONSES_EVENT = re.compile(
    rb'^(?:event:[ \t]*response\.[a-z_.]+|data:[ \t]*\{\s*"type"\s*:\s*"response\.)', re.M
)
_SNIFF_BYTES = 4096


def _responses_body(body: Any) -> bool:
    """Does a body given without ``path=`` read as an OpenAI Responses API stream: one of
    its first events (the first 4 KiB) typed ``response.*`` (``response.created``, ...)?
    Such a body replayed as chat completions would come out empty."""
    if isinstance(body, str):
        head = body[:_SNIFF_BYTES].encode("utf-8", "replace")
    elif isinstance(body, (bytes, bytearray, memoryview)):
        head = bytes(body[:_SNIFF_BYTES])
    else:
        head = b"".join(body)[:_SNIFF_BYTES]
    return _RESPONSES_EVENT.search(head) is not None


def _error_result(
    provider: str, model: str | None, stream_id: str, code: str, message: str
) -> StreamResult:
    """A result that carries only an error chunk (bad input that never reached a stream)."""
    from lab.model import ProcessedChunk, ProviderError

    error = ProviderError(type="unknown", code=code, message=message, retryable=False)
    return StreamResult(
        stream_id=stream_id,
        provider=provider,
        model=model,
        chunks=[ProcessedChunk(type="error", error=error)],
        error=error,
        finish_reason="error",
        outcome="stop",
    )


def replay_request(
    request: Any, *, config: Any = None, provider: str | None = None
) -> StreamResult:
    """Replay one :class:`~lab.capture.RecordedRequest` (all its attempts).

    The family is **provider** when given (``lab replay --provider``), else the recorded
    one, else the one :func:`lab.infer.infer_family` reads from the request; when none can
    be told, the result is one error row (``unknown_provider``) and nothing raises.
    """
    from lab.http.transports import ReplayTransport
    from lab.infer import model_from_path

    exchanges = list(request.exchanges)
    first = exchanges[0]
    family = _family_for(request, first, provider)
    if isinstance(family, StreamResult):
        return _stamp(family, request)
    try:
        body = json.loads(first.request_body)
    except ValueError:
        body = {"model": request.model, "messages": [], "stream": True}
    model = request.model or model_from_path(first.url)
    if isinstance(body, dict) and "model" not in body and model:
        body = {"model": model, **body}  # a family that moves the model into the URL
    transport = ReplayTransport(exchanges)
    try:
        with _gc_paused():
            result = run_stream(
                family,
                body,
                transport=transport,
                base_url=_REPLAY_BASE_URL,
                config=config,
                stream_id=request.stream_id,
                meta=request.meta,
                path=_recorded_path(first, family),
                recorded_labels=[ex.attempt_label for ex in exchanges],
            )
    except (ValueError, TypeError) as exc:  # this request cannot be sent (no model, ...)
        result = _error_result(
            family,
            request.model,
            request.stream_id,
            "unreplayable",
            f"cannot replay {first.method} {first.url} as {family!r}: {exc}",
        )
        return _stamp(result, request)
    # Timings: the recorded arrival offsets, not the replay's; none for an exchange whose
    # source did not time its reads (an imported cassette), so timing tables leave it out.
    for ex in exchanges:
        if ex.attempt in result.read_t_ns or ex.attempt < len(result.attempts):
            timed = (ex.meta or {}).get("timing", "reads") == "reads"
            result.read_t_ns[ex.attempt] = list(ex.read_t_ns) if timed else []
    _stamp(result, request)
    seen = transport.requests_seen
    for i, (req, ex) in enumerate(zip(seen, exchanges, strict=False)):
        if _canonical(req.content) != _canonical(ex.request_body):
            result.divergence.append(
                f"attempt {i}: the ladder sent a different body than recorded "
                f"({ex.attempt_label!r} was recorded)"
            )
    if len(seen) < len(exchanges):
        result.divergence.append(f"replay used {len(seen)} of {len(exchanges)} recorded attempts")
    return result


def _stamp(result: StreamResult, request: Any) -> StreamResult:
    """``result`` given what the recording says of its request: the caller's metadata, the
    wall clock its first attempt was sent at and the recording it came from."""
    result.meta = dict(request.meta or {})
    exchanges = getattr(request, "exchanges", None) or [None]
    result.started_at = getattr(exchanges[0], "started_at", None)
    result.capture_id = getattr(request, "capture_id", None)
    return result


def _family_for(request: Any, first: Any, provider: str | None) -> str | StreamResult:
    """The family one recorded request replays with, or its error row (see replay_request)."""
    from lab.infer import resolve_family
    from lab.providers import PROVIDERS

    known = ", ".join(sorted(PROVIDERS))
    if provider is not None:
        if provider in PROVIDERS:
            return provider
        message = f"unknown provider {provider!r} (given to replay); known providers: {known}"
    else:
        guess = resolve_family(request.provider, first)
        if guess is not None:
            return guess.family
        message = (
            f"cannot tell the provider family of {first.method} {first.url} (recorded "
            f"provider {request.provider!r}; no known path, header or body shape); "
            f"replay it with provider=... (lab replay --provider P), one of: {known}"
        )
    result = _error_result(
        request.provider, request.model, request.stream_id, "unknown_provider", message
    )
    result.meta = dict(request.meta or {})
    return result


def _recorded_path(exchange: Any, provider: str) -> str | None:
    """The path the recorded request went to when it picks an API of ``provider`` other
    than the family's default (``/responses``), else None (the family's own adapter)."""
    from urllib.parse import urlsplit

    from lab.providers import adapter_for, get_adapter

    url = getattr(exchange, "url", None)
    if not isinstance(url, str):
        return None
    try:
        path = urlsplit(url).path
        if adapter_for(provider, path) is not get_adapter(provider):
            return path
    except ValueError:  # an unknown provider fails in run_stream, with its own message
        pass
    return None


def _canonical(body: bytes | str) -> Any:
    try:
        return json_loads(body.decode() if isinstance(body, bytes) else body)
    except (ValueError, TypeError, RecursionError):
        return body


def _load_requests(capture_or_path: Any) -> list[Any]:
    source = _open_source(capture_or_path)
    return source.requests() if hasattr(source, "requests") else source


def _open_source(capture_or_path: Any) -> Any:
    """A loaded Capture (from a path or as given), or a list of RecordedRequests."""
    from lab import capture as capture_mod

    if isinstance(capture_or_path, (str, Path)):
        return capture_mod.open(capture_or_path)
    if hasattr(capture_or_path, "requests"):
        return capture_or_path
    if isinstance(capture_or_path, Sequence):
        return list(capture_or_path)
    raise TypeError(f"cannot replay {type(capture_or_path).__name__}: give a path or a Capture")


def _requests_of(source: Any, share: Any) -> list[Any]:
    """The records of one share: plan entries of a Capture, or bounds into a request list."""
    if isinstance(source, list):
        return source[share[0] : share[1]]
    return source.requests_at(share)


def replay(
    capture_or_path: Any,
    *,
    config: Any = None,
    workers: int | None = None,
    progress: bool = False,
    provider: str | None = None,
    out: str | Path | None = None,
    engine: str = "local",
    scheduler: str | None = None,
) -> Results | Any:
    """Replay every logical request of a capture (path, directory, glob or Capture).

    Returns a :class:`~lab.result.Results`: a ``list`` of :class:`StreamResult` in capture
    order that a notebook shows as the summary table.

    **workers** > 1 replays on that many processes — this one and ``workers - 1`` children —
    each taking the next share of requests until none is left; results keep capture order
    and equal a serial replay's. Children hand their results back through pickles in a
    private temporary directory (``tempfile.mkdtemp``, removed afterwards); a share a child
    never delivered is replayed in this process, with a ``RuntimeWarning``.
    **progress** shows a progress bar (streams done, over all processes).
    **provider** replays every stream as that family (``lab replay --provider P``); by
    default each stream's recorded family, else the one its request shows
    (:func:`lab.infer.infer_family`), else it is one error row and the rest replay.
    **out** writes the result tables as Parquet files under that directory instead, one
    capture unit at a time (memory bounded by the largest unit), and returns a
    :class:`~lab.resultfiles.ResultFiles` saying what it wrote (``.read("streams")``).
    **engine** ``"dask"`` (with ``out``) maps the units over a Dask cluster instead of local
    processes; **scheduler** is None (the active client, else Dask's process pool) or a
    scheduler address (``"tcp://host:8786"``). Optional extra ``[dask]``.
    """
    if engine != "local" and out is None:
        raise ValueError(f"engine={engine!r} writes its results to files: give out=DIR")
    if out is not None:
        from lab.resultfiles import replay_to

        return replay_to(
            capture_or_path,
            out,
            config=config,
            workers=workers,
            progress=progress,
            provider=provider,
            engine=engine,
            scheduler=scheduler,
        )
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)):
        raise TypeError(f"workers must be an int or None, not {type(workers).__name__}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1 (or None: this process only), not {workers}")
    cfg = LabConfig.coerce(config)
    source = _open_source(capture_or_path)
    if workers and workers > 1:
        # a Capture's plan holds row numbers only: each process builds its own records
        plan = source if isinstance(source, list) else source.request_plan()
        if len(plan) > 1:
            return Results(_replay_parallel(source, plan, cfg, workers, progress, provider))
    if isinstance(source, list):
        requests = source
    else:  # thousands of long-lived records: the collector would only rescan them
        with _gc_paused():
            requests = source.requests()
    bar = _progress_bar(len(requests)) if progress else None
    results = Results()
    try:
        for r in requests:
            results.append(replay_request(r, config=cfg, provider=provider))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return results


def _progress_bar(total: int) -> Any:
    return _bar_class()(total=total, desc="replay", unit="stream")


@functools.cache
def _bar_class() -> type:
    """tqdm without its monitor thread: parallel replay forks with the bar open, and a
    thread alive at a fork is what Python 3.12+ warns about (a lock it held stays held in
    the child). The replay updates the bar every few ms, so the monitor, which redraws
    bars left idle for 10 s, has nothing to do."""
    from tqdm.auto import tqdm

    return type("_ReplayBar", (tqdm,), {"monitor_interval": 0})


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


def _context() -> Any:
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
    return multiprocessing.get_context()


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
    config: Any,
    shares: list[Any],
    state: Any,
    lock: Any,
    folder: str,
    provider: str | None = None,
) -> None:
    global _gc_lock, _gc_depth
    _gc_lock, _gc_depth = threading.Lock(), 0  # a fork copies a lock in whatever state it was
    # The collector stays off for the child's whole (short) life: replay makes no cycles
    # worth collecting, and pickling a share's results with it on set off collections
    # over the whole inherited heap (pickling 1,760 results: 176 ms with it, 96 without).
    gc.disable()
    while (i := _claim(state, lock)) < len(shares):
        results = [
            replay_request(r, config=config, provider=provider)
            for r in _requests_of(source, shares[i])
        ]
        tmp = os.path.join(folder, f"{i}.tmp")
        with open(tmp, "wb") as f:
            pickle.dump(results, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, os.path.join(folder, f"{i}.pickle"))
        _count_done(state, lock, len(results))


def _guided_bounds(n: int, workers: int, largest: int = 64) -> list[tuple[int, int]]:
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


def _replay_parallel(
    source: Any,
    plan: list[Any],
    cfg: LabConfig,
    workers: int,
    progress: bool,
    provider: str | None = None,
) -> list[StreamResult]:
    n = len(plan)
    bounds = _guided_bounds(n, workers)
    shares = bounds if isinstance(source, list) else [plan[a:b] for a, b in bounds]
    ctx = _context()
    state = ctx.RawArray("q", 2)  # [next share to claim, streams done]
    lock = ctx.Lock()
    bar = _progress_bar(n) if progress else None
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
            args: tuple[Any, ...] = (source, cfg, shares, state, lock, folder)
            if provider is not None:  # the override, when there is one
                args += (provider,)
            child = ctx.Process(target=_child_main, args=args, daemon=True)
            child.start()
            children.append(child)
        # unpickling builds as many objects as the replay did: the collector stays paused
        with _gc_paused():
            while (i := _claim(state, lock)) < len(shares):
                done[i] = [
                    replay_request(r, config=cfg, provider=provider)
                    for r in _requests_of(source, shares[i])
                ]
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
                done[i] = [
                    replay_request(r, config=cfg, provider=provider)
                    for r in _requests_of(source, shares[i])
                ]
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


def compare(
    captures: Any,
    config_a: Any,
    config_b: Any,
    *,
    names: tuple[str, str] = ("a", "b"),
    progress: bool | Any = False,
) -> Any:
    """Replay ``captures`` under two configs; a DataFrame of the streams whose output changed.

    Columns: stream_id, serving_provider, field (text / reasoning / function_calls / error),
    a, b, and a unified diff of the two, its sides labelled with ``names``. One row per
    changed field: count streams with ``df["stream_id"].nunique()``.
    **progress**: True shows a progress bar; a callable is called as ``progress(done, total)``
    after each stream (a notebook widget's hook).
    """
    import pandas as pd

    requests = _load_requests(captures)
    bar = _progress_bar(len(requests)) if progress is True else None
    rows: list[dict[str, Any]] = []
    try:
        for done, req in enumerate(requests, 1):
            a = replay_request(req, config=config_a)
            b = replay_request(req, config=config_b)
            rows += _changed_fields(a, b, names)
            if bar is not None:
                bar.update(1)
            elif callable(progress):
                progress(done, len(requests))
    finally:
        if bar is not None:
            bar.close()
    return pd.DataFrame(rows, columns=_COMPARE_COLUMNS)


_COMPARE_COLUMNS = ["stream_id", "serving_provider", "field", "a", "b", "diff"]


def diff_results(
    results_a: Sequence[StreamResult],
    results_b: Sequence[StreamResult],
    *,
    names: tuple[str, str] = ("a", "b"),
) -> Any:
    """:func:`compare` over results already replayed (the same streams in the same order,
    e.g. ``replay(path)`` and ``replay(path, config=tuned)``): no replay runs again."""
    import pandas as pd

    if len(results_a) != len(results_b):
        raise ValueError(
            f"diff_results needs the same streams on both sides: {len(results_a)} results "
            f"against {len(results_b)}"
        )
    rows: list[dict[str, Any]] = []
    for a, b in zip(results_a, results_b, strict=True):
        if a.stream_id != b.stream_id:
            raise ValueError(
                f"diff_results needs the same streams in the same order: {a.stream_id!r} "
                f"against {b.stream_id!r}"
            )
        rows += _changed_fields(a, b, names)
    return pd.DataFrame(rows, columns=_COMPARE_COLUMNS)


def _changed_fields(a: StreamResult, b: StreamResult, names: tuple[str, str]) -> list[dict]:
    """The rows of :func:`compare` for one stream replayed under two configs."""
    import difflib

    rows = []
    for field in ("text", "reasoning"):
        va, vb = getattr(a, field), getattr(b, field)
        if va != vb:
            diff = "\n".join(
                difflib.unified_diff(va.splitlines(), vb.splitlines(), *names, lineterm="", n=1)
            )
            rows.append(_row(a, field, va, vb, diff))
    fa = [f.model_dump(mode="json") for f in a.function_calls]
    fb = [f.model_dump(mode="json") for f in b.function_calls]
    if fa != fb:
        rows.append(_row(a, "function_calls", json.dumps(fa), json.dumps(fb), ""))
    ea = a.error.message if a.error else None
    eb = b.error.message if b.error else None
    if ea != eb:
        rows.append(_row(a, "error", ea, eb, ""))
    return rows


def _row(r: StreamResult, field: str, a: Any, b: Any, diff: str) -> dict[str, Any]:
    return {
        "stream_id": r.stream_id,
        "serving_provider": r.serving_provider,
        "field": field,
        "a": a,
        "b": b,
        "diff": diff,
    }
