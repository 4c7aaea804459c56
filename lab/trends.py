"""Verdicts over time: what each stream says, and where a long run changed (pure tables).

A *verdict* is one thing the lab judges a backend by, with a per-stream value: a rate
(:data:`RATE_VERDICTS`: leaked, failed, stalled — 0 or 1 per stream) or a latency figure
(:data:`LATENCY_VERDICTS`: TTFB, TTFT, first visible token, p99 gap, tokens/s). Both
:func:`lab.compare` (two runs) and :func:`lab.tables.trends` (one long run) read them here.

**Change points.** :func:`trend_table` follows one long run (a proxy recording for weeks)
period by period, per backend and verdict, and finds at most one change point per series
with a CUSUM (Page 1954), made a test by permutation: the streams in time order, each one's
value (0/1 for a rate, its rank among the series' values for a latency figure, so one huge
outlier is one rank) minus the series mean, cumulated; the change point is where the
cumulated sum is farthest from 0, and its p-value is the share of
:data:`CUSUM_PERMUTATIONS` random reorderings of the same streams (fixed seed) whose
largest excursion is at least as far. Under "no change" the streams are exchangeable and
the p-value is exact whatever their distribution. It finds one change (the largest); a
series that changed twice shows the larger, and a slow drift shows as a change near its
middle. The method is plain numpy (no ``ruptures`` dependency).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lab.stats import (
    BOOTSTRAP_SEED,
    DEFAULT_CONFIDENCE,
    average_ranks,
    bootstrap_quantile_interval,
    wilson_interval,
)

__all__ = [
    "CUSUM_PERMUTATIONS",
    "LATENCY_VERDICTS",
    "RATE_VERDICTS",
    "TREND_COLUMNS",
    "VERDICTS",
    "Verdict",
    "cusum_change_point",
    "trend_table",
]


@dataclass(frozen=True)
class Verdict:
    """One verdict compared between runs: its name, its words, and how a streams table gives
    its per-stream values (a boolean Series for a rate, numbers for a latency figure; NaN
    where the stream has none)."""

    name: str
    label: str
    kind: str  # "rate" | "latency"
    values: Callable[[pd.DataFrame], pd.Series]
    unit: str = ""


def _leaked(st: pd.DataFrame) -> pd.Series:
    return st["leaked"].astype(float)


def _errored(st: pd.DataFrame) -> pd.Series:
    return st["error_type"].notna().astype(float)


def _stalled(st: pd.DataFrame) -> pd.Series:
    """1 for a timed stream with a stall, 0 for a timed one without, NaN when untimed."""
    if "stalls" not in st:
        return pd.Series(math.nan, index=st.index)
    stalls = pd.to_numeric(st["stalls"], errors="coerce").astype(float)
    return (stalls > 0).astype(float).where(stalls.notna())


def _column(name: str) -> Callable[[pd.DataFrame], pd.Series]:
    def values(st: pd.DataFrame) -> pd.Series:
        if name not in st:
            return pd.Series(math.nan, index=st.index)
        return pd.to_numeric(st[name], errors="coerce").astype(float)

    return values


RATE_VERDICTS: tuple[Verdict, ...] = (
    Verdict("leak_rate", "leak rate", "rate", _leaked),
    Verdict("error_rate", "error rate", "rate", _errored),
    Verdict("stall_rate", "stall rate", "rate", _stalled),
)
"""The rates compared (a verdict whose column the table lacks is left out)."""

LATENCY_VERDICTS: tuple[Verdict, ...] = (
    Verdict("ttfb_ms", "median TTFB", "latency", _column("ttfb_ms"), "ms"),
    Verdict("ttft_ms", "median TTFT", "latency", _column("ttft_ms"), "ms"),
    Verdict(
        "ttft_content_ms", "median time to first visible token", "latency",
        _column("ttft_content_ms"), "ms",
    ),
    Verdict("gap_p99_ms", "median p99 gap", "latency", _column("gap_p99_ms"), "ms"),
    Verdict("tokens_per_s", "median tokens/s", "latency", _column("tokens_per_s"), "tok/s"),
)  # fmt: skip
"""The per-stream latency figures compared (Mann–Whitney U)."""

VERDICTS: tuple[Verdict, ...] = (*RATE_VERDICTS, *LATENCY_VERDICTS)
"""Every verdict, rates first."""


CUSUM_PERMUTATIONS = 999
"""Random reorderings behind a change point's p-value (the smallest p-value possible is
1 / (999 + 1) = 0.001)."""
_CUSUM_BLOCK = 4_000_000  # values permuted at once: memory stays bounded


def cusum_change_point(
    values: Iterable[float],
    *,
    ranks: bool = False,
    permutations: int = CUSUM_PERMUTATIONS,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[int | None, float]:
    """``(index, p)``: where the series of per-stream ``values`` (in time order) most likely
    changed level — the first index after the change, the point where the cumulated
    deviations from the mean are farthest from 0 — and the permutation p-value of that
    excursion (``(count of permutations at least as far + 1) / (permutations + 1)``, fixed
    ``seed``). ``ranks`` replaces the values by their ranks first (latency: one huge
    outlier does not make a change). ``(None, 1.0)`` under 4 values or when all are equal.

    >>> cusum_change_point([0.0] * 30 + [1.0] * 30)
    (30, 0.001)
    """
    x = np.asarray(list(values), dtype=float)
    x = x[~np.isnan(x)]
    n = len(x)
    if n < 4 or np.all(x == x[0]):
        return (None, 1.0)
    if ranks:
        x = average_ranks(x)
    centred = x - x.mean()
    path = np.cumsum(centred)[:-1]
    k = int(np.argmax(np.abs(path)))
    observed = abs(path[k])
    rng = np.random.default_rng(seed)
    rows = max(1, _CUSUM_BLOCK // n)
    at_least = 0
    for start in range(0, permutations, rows):
        m = min(rows, permutations - start)
        shuffled = rng.permuted(np.broadcast_to(centred, (m, n)), axis=1)
        excursion = np.abs(np.cumsum(shuffled, axis=1)[:, :-1]).max(axis=1)
        at_least += int((excursion >= observed - 1e-9 * max(1.0, observed)).sum())
    return (k + 1, (at_least + 1) / (permutations + 1))


TREND_COLUMNS = [
    "serving_provider",
    "verdict",
    "period",
    "n",
    "value",
    "ci_low",
    "ci_high",
    "change_point",
    "change_p",
]


def trend_table(
    st: pd.DataFrame,
    every: str = "1D",
    *,
    alpha: float = 0.05,
    confidence: float = DEFAULT_CONFIDENCE,
    permutations: int = CUSUM_PERMUTATIONS,
    seed: int = BOOTSTRAP_SEED,
) -> pd.DataFrame:
    """Per backend, verdict and period of ``every`` (a pandas frequency: ``"1D"``, ``"6h"``,
    ``"1W"``) of ``started_at``: the streams, the rate (Wilson interval) or median
    (bootstrap interval) of the period, and the series' change point
    (:func:`cusum_change_point` over its streams in time order): ``change_point`` is True on
    the period the change starts in when its p-value ``change_p`` is under ``alpha``
    (``change_p`` is the series' p-value on each of its rows). Streams without
    ``started_at`` are left out. ``st`` is a streams table whose ``serving_provider``
    holds the backend labels (:func:`lab.tables.trends` makes it).
    """
    st = st.dropna(subset=["started_at"])
    st = st.sort_values("started_at", kind="mergesort")
    st["period"] = pd.to_datetime(st["started_at"], utc=True).dt.floor(every)
    rows: list[dict[str, Any]] = []
    for backend, group in st.groupby("serving_provider", sort=True):
        for verdict in VERDICTS:
            values = verdict.values(group)
            known = values.notna()
            if not known.any():
                continue
            series = values[known]
            periods = group.loc[known, "period"]
            k, p = cusum_change_point(
                series.to_numpy(), ranks=verdict.kind == "latency",
                permutations=permutations, seed=seed,
            )  # fmt: skip
            change_period = periods.iloc[k] if k is not None and p < alpha else None
            for period, chunk in series.groupby(periods, sort=True):
                v = chunk.to_numpy(float)
                if verdict.kind == "rate":
                    value = float(v.mean())
                    low, high = wilson_interval(int(v.sum()), len(v), confidence)
                else:
                    value = float(np.median(v))
                    low, high = bootstrap_quantile_interval(v, 0.5, confidence, seed=seed)
                rows.append(
                    {
                        "serving_provider": backend,
                        "verdict": verdict.name,
                        "period": period,
                        "n": len(v),
                        "value": value,
                        "ci_low": low,
                        "ci_high": high,
                        "change_point": change_period is not None and period == change_period,
                        "change_p": p,
                    }
                )
    out = pd.DataFrame(rows, columns=TREND_COLUMNS)
    out["n"] = out["n"].astype("int64")
    out["change_point"] = out["change_point"].astype(bool)
    return out
