"""``replay(path, out=DIR, engine="dask", scheduler=...)``: capture units on a Dask cluster.

The same unit function as the local engine (handed in by :func:`lab.replay.files.replay_to`:
open one self-contained unit, replay it, write its ``streams-``/``leaks-``/``attempts-``/
``gaps-NNNNN.parquet``) is mapped over the units with :func:`dask.dataframe.from_map`; each
task returns one small row (unit, streams, files), so results go straight to Parquet and only
those rows travel back. ``latency.parquet`` is written by the caller after the last unit,
from the streams files (:func:`lab.replay.files.replay_to`), as for the local engine. The
same code runs on a laptop's ``LocalCluster`` and on a multi-node ``distributed`` cluster; there, the capture and ``out`` must be on a filesystem every worker
sees at the same path. Paths are made absolute here before they are shipped (a worker's
working directory is its own, so a relative ``out`` would land wherever each worker runs),
and a task whose worker cannot see the capture's files or ``out`` fails with
:class:`WorkerCannotSee`, naming the path and the worker's host, instead of writing
nothing.

``scheduler``: ``None`` uses the active ``distributed.Client`` if there is one, else Dask's
process scheduler on a pool of this machine's cores (forked on Linux); an address (``"tcp://10.0.0.5:8786"``) connects a client to that
scheduler for this call. Dask is the optional extra ``[dask]``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from lab.exceptions import LabError
from lab.replay.pool import mp_context

__all__ = ["WorkerCannotSee", "replay_dask"]


class WorkerCannotSee(FileNotFoundError, LabError):
    """A Dask worker does not see a path the replay gave it (the capture or ``out``)."""


def _dask() -> Any:
    try:
        import dask
        import dask.dataframe  # noqa: F401
    except ImportError:
        raise ImportError(
            "engine='dask' needs Dask: pip install 'stream-lab[dask]' (dask[dataframe,distributed])"
        ) from None
    return dask


_META = pd.DataFrame(
    {
        "unit": pd.Series([], dtype="int64"),
        "streams": pd.Series([], dtype="int64"),
        "files": pd.Series([], dtype="object"),
    }
)


def _visible(files: tuple[str, ...], out: str) -> None:
    """Raise :class:`WorkerCannotSee` when this worker does not see ``out`` or a file."""
    missing = [f for f in files if not Path(f).is_file()]
    if not Path(out).is_dir():
        missing.insert(0, out)
    if missing:
        import socket

        raise WorkerCannotSee(
            f"Dask worker on {socket.gethostname()} cannot see {missing[0]}"
            + (f" (and {len(missing) - 1} more path(s))" if len(missing) > 1 else "")
            + ": engine='dask' needs the capture and out= on a filesystem every worker "
            "sees at the same path"
        )


def _task(
    item: tuple[Any, ...],
    out: str,
    cfg: Any,
    provider: str | None,
    replay_unit: Callable[..., tuple[int, list]],
):
    """One Dask task: one unit replayed and written; its summary row."""
    index, files, *rest = item  # (index, files) or (index, files, selection)
    select = rest[0] if rest else None
    _visible(files, out)
    n, written = replay_unit(
        [Path(f) for f in files], Path(out), index, cfg, provider, select=select
    )
    return pd.DataFrame({"unit": [index], "streams": [n], "files": [";".join(map(str, written))]})


def _on_local_processes(frame: Any) -> pd.DataFrame:
    """Dask's process scheduler on the lab's own context (fork on Linux: the children do not
    import the caller's script again, as spawn would)."""
    with ProcessPoolExecutor(os.cpu_count() or 1, mp_context=mp_context()) as pool:
        return frame.compute(scheduler="processes", pool=pool)


def replay_dask(
    units: list,
    out: Path,
    cfg: Any,
    *,
    replay_unit: Callable[..., tuple[int, list]],
    scheduler: str | None = None,
    provider: str | None = None,
) -> pd.DataFrame:
    """Replay ``units`` (``(index, unit)`` pairs) on Dask, each with **replay_unit** (``(files, out, index, config,
    provider) -> (streams, files written)``); returns one row per unit (unit, streams, files)."""
    _dask()
    import dask.dataframe as dd

    # absolute before shipping: each worker resolves a relative path in its own directory
    items = [(i, tuple(str(Path(f).resolve()) for f in u.files), u.select) for i, u in units]
    if not items:
        return _META.copy()
    frame = dd.from_map(
        _task,
        items,
        out=str(Path(out).resolve()),
        cfg=cfg,
        provider=provider,
        replay_unit=replay_unit,
        meta=_META,
        enforce_metadata=False,
        label="lab-replay-unit",
    )
    if scheduler is None:
        try:
            from distributed import get_client

            get_client()  # an active client: dask uses it by default
            summary = frame.compute()
        except (ImportError, ValueError):  # no cluster: Dask's process scheduler, forked
            summary = _on_local_processes(frame)
    else:
        try:
            from distributed import Client
        except ImportError:
            raise ImportError(
                "scheduler= an address needs dask.distributed: pip install 'stream-lab[dask]'"
            ) from None
        with Client(scheduler) as client:
            summary = client.compute(frame).result()
    return summary.sort_values("unit").reset_index(drop=True)
