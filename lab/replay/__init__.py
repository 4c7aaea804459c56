"""Replay: captures (or one raw response body) through the full stack, offline.

Replay runs :func:`lab.stream.run_stream` — the same code as a live recording — with a
:class:`~lab.http.transports.ReplayTransport` that serves the recorded reads back with their
original boundaries. The degradation ladder runs again: when it asks for an attempt whose
body differs from the recorded one, or for more attempts than were recorded, the result's
``divergence`` says so.

The package's rooms:

- :mod:`lab.replay.one`: one response body (:func:`replay_sse`) or one recorded request
  with all its attempts (:func:`replay_request`);
- :mod:`lab.replay.many`: every request of a capture (:func:`replay`), and two configs
  compared over the same streams (:func:`compare`, :func:`diff_results`);
- :mod:`lab.replay.pool`: the requests of a capture shared out over local processes;
- :mod:`lab.replay.files`: a capture replayed unit by unit into Parquet result tables
  (``replay(..., out=DIR)``);
- :mod:`lab.replay.dask_engine`: those units mapped over a Dask cluster (``engine="dask"``).

The pool and the Dask engine are handed the function that replays a record or a unit; they
import no replay of their own.

>>> from lab.replay import replay_sse
>>> r = replay_sse("openrouter", b'data: {"choices":[{"delta":{"content":"hi"}}]}\\n\\n')
>>> r.text
'hi'
"""

from __future__ import annotations

from lab.replay.many import compare, diff_results, replay
from lab.replay.one import replay_request, replay_sse
from lab.result import StreamResult

__all__ = ["StreamResult", "compare", "diff_results", "replay", "replay_request", "replay_sse"]
