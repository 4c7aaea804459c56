"""The one root of every exception Stream Lab raises: ``except lab.LabError`` catches them all.

Each class also keeps the base it had before the root existed, so code that catches
``ValueError`` or ``httpx.TransportError`` still catches what it caught. The tree (the second
name, where there is one, is the other base)::

    LabError
    ├── CaptureError                  lab.capture.errors
    │   ├── CaptureWriteError         lab.capture.errors
    │   └── PartTooLarge              lab.capture.errors
    ├── ConfigError, ValueError       lab.config
    ├── CorpusError, ValueError       lab.tuning
    ├── FixtureError, ValueError      lab.fixtures
    ├── InterchangeError, ValueError  lab.interchange
    ├── NoAPIKeyError, ValueError     lab.recorder
    ├── SweepError, ValueError        lab.sweep
    ├── RetryAttempt                  lab.providers.base (a degradation retry, before the commit point)
    ├── UsageError                    lab.cli.common (bad command-line input: one line, exit 2)
    ├── WorkerCannotSee, FileNotFoundError    lab.replay.dask_engine
    ├── LimitExceeded, httpx.TransportError   lab.http.limits
    ├── RecordingCut, httpx.TransportError    lab.http.transports
    ├── ReplayExhausted, httpx.TransportError lab.http.transports
    └── ReplayMismatch, httpx.TransportError  lab.http.transports

Internal signals derive from it too, so none can escape as a bare ``Exception``: the proxy's
own answers and cuts (``lab.proxy._UpstreamCut``, ``_Refused``, ``_ClientGone``, ``_AtLimit``)
and the delta-debugging budget of ``lab.fixtures``.

Not in the tree, on purpose: ``lab.capture.errors.CaptureWarning`` and
``lab.replay.files.IncompleteResults`` are warning categories (``warnings.warn``), and ``lab.cli.common.Terminated`` is a ``KeyboardInterrupt`` (SIGTERM taken the
way Ctrl-C is), which ``except Exception`` must not swallow.

This module imports nothing from ``lab``: every layer can import it.
"""

from __future__ import annotations

__all__ = ["LabError"]


class LabError(Exception):
    """Something Stream Lab raised on purpose; the message says what and, where it helps, why."""
