"""Binomial confidence intervals for per-backend rates (pure: numbers in, numbers out).

A leak rate of 2/3 and one of 200/300 are the same number and very different evidence. The
Wilson score interval (Wilson 1927; Agresti & Coull 1998 recommend it over the normal
"Wald" interval) says how far the true rate could be from the observed one: it stays inside
[0, 1], is not degenerate at 0 or n successes, and covers close to its nominal level even
for a handful of trials.

- :func:`wilson_interval` – the interval for ``successes`` of ``n``.
- :func:`z_value` – the two-sided normal quantile of a confidence level (1.96 for 95 %).
"""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["DEFAULT_CONFIDENCE", "wilson_interval", "z_value"]

DEFAULT_CONFIDENCE = 0.95
"""The confidence level of the intervals in :func:`lab.tables.by_backend`."""


def z_value(confidence: float = DEFAULT_CONFIDENCE) -> float:
    """The two-sided standard-normal quantile for ``confidence`` (0.95 -> 1.959964...)."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    return NormalDist().inv_cdf((1.0 + confidence) / 2.0)


def wilson_interval(
    successes: int, n: int, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float]:
    """The Wilson score interval ``(low, high)`` for ``successes`` out of ``n`` trials.

    ``n == 0`` carries no evidence: the interval is ``(nan, nan)``.

    >>> tuple(round(x, 4) for x in wilson_interval(5, 10))
    (0.2366, 0.7634)
    """
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (math.nan, math.nan)
    z = z_value(confidence)
    p = successes / n
    z2n = z * z / n
    centre = (p + z2n / 2.0) / (1.0 + z2n)
    half = z / (1.0 + z2n) * math.sqrt(p * (1.0 - p) / n + z2n / (4.0 * n))
    # at 0 or n successes the bound is exactly 0 or 1; floating point would leave 1e-17
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)
