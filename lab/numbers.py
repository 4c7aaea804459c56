"""How a number is written, in every table and sentence of the lab (pure: numbers in, text out).

One format for a rate and its interval everywhere: the console tables, the notebook views,
the report, the scorecard's sentences, the backend verdicts and ``lab compare``.

- :data:`MISSING` – the one marker of a missing value.
- :func:`format_percent` – a share as a percentage: ``12.5 %``.
- :func:`format_rate` – a rate and its interval: ``12.5 % (8.1–18.3 %)``.
- :func:`format_interval` – any other figure and its interval: ``850 ms (800–910 ms)``.
- :data:`DECIMALS`, :func:`format_cost` – decimals per float column, a cost in USD.

The lowest layer of the house (beside the pure core), so that the analysis sentences
(:mod:`lab.tables`, :mod:`lab.changes`, :mod:`lab.scorecard`) and the views above them
(:mod:`lab.console`, :mod:`lab.view`, :mod:`lab.report`) import the same functions.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "DECIMALS",
    "MISSING",
    "RATE_DECIMALS",
    "format_cost",
    "format_interval",
    "format_percent",
    "format_rate",
]

MISSING = "—"
"""How every table and view of the lab shows a missing value (no usage, no error, ...)."""

RATE_DECIMALS = 1
"""Decimals of a percentage in every sentence and table (``12.5 %``); the terminal's compact
scorecard passes 0 to fit a row of verdicts into 100 columns (``61 % (52–70 %)``)."""

DECIMALS = {
    "ttft_ms": 1,
    "median_ttft_ms": 1,
    "duration_ms": 1,
    "t_ms": 1,
    "tokens_per_s": 1,
    "median_tokens_per_s": 1,
    "leak_rate": 3,
    "error_rate": 3,
    "leak_rate_ci_low": 3,
    "leak_rate_ci_high": 3,
    "rest_leak_rate": 3,
    "error_rate_ci_low": 3,
    "error_rate_ci_high": 3,
    "rest_error_rate": 3,
}
"""Decimals shown per float column in every table view (console, report, summary); the data
keep every digit. The report shows the two rates as percentages to one decimal instead."""


def _missing(value: Any) -> bool:
    """None, NaN or pandas' NA (which refuses ``!=``)."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except TypeError:  # pd.NA: its comparison is NA, whose truth value is ambiguous
        return True


def format_cost(value: float | None) -> str:
    """USD with 3 significant digits of a small cost (``$0.0000405``), at least 4 decimals;
    :data:`MISSING` when unknown. Every view of a cost (report, console) uses it."""
    if value is None or value != value:  # None or NaN
        return MISSING
    digits = 4 if value <= 0 else max(4, 2 - math.floor(math.log10(value)))
    return f"${value:.{digits}f}"


def format_percent(share: Any, decimals: int = RATE_DECIMALS) -> str:
    """A share of 1 as a percentage, a space before the sign; :data:`MISSING` when missing.

    >>> format_percent(0.125), format_percent(0.95, 0), format_percent(None)
    ('12.5 %', '95 %', '—')
    """
    if _missing(share):
        return MISSING
    return f"{float(share) * 100:.{decimals}f} %"


def format_rate(
    rate: Any, low: Any = None, high: Any = None, *, decimals: int = RATE_DECIMALS
) -> str:
    """A rate and its interval as every sentence and table of the lab writes them:
    ``12.5 % (8.1–18.3 %)``. A missing rate is :data:`MISSING`; a missing interval is left
    out.

    >>> format_rate(0.125, 0.0813, 0.18349)
    '12.5 % (8.1–18.3 %)'
    >>> format_rate(0.4, 0.254, 0.579, decimals=0), format_rate(0.5), format_rate(float("nan"))
    ('40 % (25–58 %)', '50.0 %', '—')
    """
    if _missing(rate):
        return MISSING
    text = format_percent(rate, decimals)
    if _missing(low) or _missing(high):
        return text
    return f"{text} ({float(low) * 100:.{decimals}f}–{float(high) * 100:.{decimals}f} %)"


def _number(x: float, decimals: int) -> str:
    return f"{x:,.{decimals}f}"


def format_interval(
    value: Any, low: Any = None, high: Any = None, *, unit: str = "", decimals: int | None = None
) -> str:
    """A figure that is not a rate (a time, a speed) and its interval in the shape of
    :func:`format_rate`: ``850.2 ms (800.0–910.5 ms)``. ``decimals`` None: one decimal when
    the three numbers are under 1,000, none when one is not. A missing value is
    :data:`MISSING`; a missing interval is left out.

    >>> format_interval(850.24, 800, 910.5, unit="ms"), format_interval(980, 920, 1010.4)
    ('850.2 ms (800.0–910.5 ms)', '980 (920–1,010)')
    >>> format_interval(61.7, 52, 70, unit="ms", decimals=0), format_interval(3.25, unit="s")
    ('62 ms (52–70 ms)', '3.2 s')
    """
    if _missing(value):
        return MISSING
    tail = f" {unit}" if unit else ""
    bounds = None if _missing(low) or _missing(high) else (float(low), float(high))
    if decimals is None:
        big = max(abs(x) for x in (float(value), *(bounds or ())))
        decimals = 1 if big < 1000 else 0
    text = f"{_number(float(value), decimals)}{tail}"
    if bounds is None:
        return text
    return f"{text} ({_number(bounds[0], decimals)}–{_number(bounds[1], decimals)}{tail})"
