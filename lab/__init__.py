"""Stream Lab: record, replay and tabulate LLM provider streams.

The names most sessions need are here; each lives in its own module::

    lab.Recorder            live streams -> Parquet capture (lab.recorder)
    lab.replay(path)        captures -> full stack -> Results, a list of StreamResult
                            that shows as the summary table (lab.replay, lab.result)
    lab.replay_sse(p, body) one response body -> StreamResult (lab.replay)
    lab.compare(a, b)       what changed between two runs, with tests (lab.changes);
    lab.compare(cap, a, b)  three arguments: A/B replay under two configs (lab.replay)
    lab.run_stream(...)     the one code path live and replay share (lab.stream)
    lab.LabConfig           every tunable heuristic (lab.config)
    lab.LabError            the root of every exception the lab raises (lab.exceptions)
    lab.open_capture(path)  the raw capture tables (lab.capture.open)
    lab.sql(query, ...)     DuckDB over captures and result tables (lab.sqlviews, [sql])
    lab.recording_client(out, provider=P)        an httpx.Client that records (lab.clients),
    lab.async_recording_client(out, provider=P)  to hand to the openai / anthropic SDKs

Tables, plots, anomalies, fixtures and the tuner are the submodules ``lab.tables``,
``lab.plots``, ``lab.anomalies``, ``lab.fixtures`` and ``lab.tuning``. Names are imported
lazily so that ``import lab`` stays cheap.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from lab._version import __version__ as __version__

if TYPE_CHECKING:
    from lab.capture import open as open_capture
    from lab.changes import compare
    from lab.clients import async_recording_client, recording_client
    from lab.config import LabConfig
    from lab.exceptions import LabError
    from lab.guards import SpillGuardConfig
    from lab.recorder import Recorder
    from lab.replay import replay, replay_sse
    from lab.result import Results, StreamResult
    from lab.sqlviews import sql
    from lab.stream import run_stream

__all__ = [
    "LabConfig",
    "LabError",
    "Recorder",
    "Results",
    "SpillGuardConfig",
    "StreamResult",
    "async_recording_client",
    "compare",
    "open_capture",
    "recording_client",
    "replay",
    "replay_sse",
    "run_stream",
    "sql",
]

_HOME = {
    "LabConfig": ("lab.config", "LabConfig"),
    "LabError": ("lab.exceptions", "LabError"),
    "Recorder": ("lab.recorder", "Recorder"),
    "Results": ("lab.result", "Results"),
    "SpillGuardConfig": ("lab.guards", "SpillGuardConfig"),
    "StreamResult": ("lab.result", "StreamResult"),
    "async_recording_client": ("lab.clients", "async_recording_client"),
    "compare": ("lab.changes", "compare"),
    "open_capture": ("lab.capture", "open"),
    "recording_client": ("lab.clients", "recording_client"),
    "replay": ("lab.replay", "replay"),
    "replay_sse": ("lab.replay", "replay_sse"),
    "run_stream": ("lab.stream", "run_stream"),
    "sql": ("lab.sqlviews", "sql"),
}


def __getattr__(name: str) -> Any:
    try:
        module, attr = _HOME[name]
    except KeyError:
        raise AttributeError(f"module 'lab' has no attribute {name!r}") from None
    value = getattr(import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
