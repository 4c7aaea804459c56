"""Intervals and tests for per-backend figures (pure: numbers in, numbers out; numpy only).

A leak rate of 2/3 and one of 200/300 are the same number and very different evidence. The
Wilson score interval (Wilson 1927; Agresti & Coull 1998 recommend it over the normal
"Wald" interval) says how far the true rate could be from the observed one: it stays inside
[0, 1], is not degenerate at 0 or n successes, and covers close to its nominal level even
for a handful of trials.

- :func:`wilson_interval` – the interval for ``successes`` of ``n``.
- :func:`z_value` – the two-sided normal quantile of a confidence level (1.96 for 95 %).
- :func:`bootstrap_quantile_interval`, :func:`bootstrap_difference_interval` – percentile
  bootstrap intervals (fixed seed) of a quantile and of the difference of two quantiles.
- :func:`two_proportion_test`, :func:`fisher_exact`, :func:`proportion_test` – is one
  rate different from another; :func:`newcombe_difference_interval` – the interval of their
  difference.
- :func:`fisher_greater` – the one-sided Fisher exact test that one group's rate of an
  event is higher than another's (the scorecard's "worse with confidence").
- :func:`mann_whitney_u` – are two samples of one figure (latency) shifted.
- :func:`holm`, :func:`benjamini_hochberg` – p-values adjusted for many comparisons.

Every test here is checked against ``scipy.stats`` / ``statsmodels`` on fixed data in
``tests/test_stats.py``; neither is needed at run time.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from statistics import NormalDist

import numpy as np

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "BOOTSTRAP_SEED",
    "DEFAULT_CONFIDENCE",
    "MIN_EXPECTED_COUNT",
    "average_ranks",
    "benjamini_hochberg",
    "bootstrap_difference_interval",
    "bootstrap_quantile_interval",
    "bootstrap_quantile_intervals",
    "bootstrap_quantile_intervals_of",
    "fisher_exact",
    "fisher_greater",
    "holm",
    "mann_whitney_u",
    "newcombe_difference_interval",
    "proportion_test",
    "two_proportion_test",
    "wilson_interval",
    "z_value",
]

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


def _normal_two_sided(z: float) -> float:
    """P(|Z| >= |z|) for a standard normal Z."""
    return min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))


# --------------------------------------------------------------------------- bootstrap

BOOTSTRAP_RESAMPLES = 2000
"""Resamples of every bootstrap interval (a percentile interval's ends move by about
1/sqrt(B) of the resampling spread between seeds; 2000 keeps that under 3 %)."""
BOOTSTRAP_SEED = 0
"""The fixed seed of every bootstrap: the same data give the same interval, run after run."""
_BLOCK = 2_000_000  # values resampled at once: memory stays bounded for any sample size


def _resampled_quantiles(
    values: np.ndarray, qs: Sequence[float], n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """``(len(qs), n_boot)``: the quantiles of ``n_boot`` resamples of ``values``; ``rng``
    left where the draws leave it, even for a constant sample that needs none
    (:func:`bootstrap_difference_interval` draws its second sample's resamples after)."""
    return _resampled_quantiles_of([values], qs, n_boot, rng, draw_all=True)[0]


def _resampled_quantiles_of(
    samples: list[np.ndarray],
    qs: Sequence[float],
    n_boot: int,
    rng: np.random.Generator,
    *,
    draw_all: bool = False,
) -> list[np.ndarray]:
    """:func:`_resampled_quantiles` of each of ``samples`` (all of one length), from one set
    of resampled positions: what each would get from its own generator of the same seed
    (the same draws), for one draw instead of one per sample. With ``draw_all`` the
    resampled positions are drawn even when no sample needs them (all constant): ``rng`` is
    then left where the draws leave it, for a caller that draws from it again.

    numpy's ``quantile`` of every resample (a partition of each row of values) was most of a
    latency table's cost. Here each sample's values are ranked once; a resample's drawn
    positions become their ranks (``np.take``), a row of 32-bit ranks is sorted with numpy's
    vectorized sort, and the order statistics a quantile needs are the sorted values at
    those ranks (:func:`_sorted_quantiles`), interpolated by numpy's rule
    (:func:`_quantile_plan`). From the size on where counting is cheaper
    (:data:`_COUNTED_FROM` values for one sample, :data:`_COUNTED_SHARED_FROM` when two or
    more distinct samples that vary share the draws), how often each position was drawn is
    counted instead, once for all of them, and each sample's order statistics are found in
    a running count taken in its rank order (:func:`_counted_quantiles`): the same order
    statistics. Each sample's first resample is checked against
    ``np.quantile`` to the bit, and numpy's own quantile is used for all if one differs.
    A sample equal to an earlier one shares its resamples; one whose values are all the
    same bits has its own quantiles in every resample."""
    outs: list[np.ndarray] = []
    first: dict[bytes, int] = {}
    todo = []
    for i, values in enumerate(samples):
        key = values.tobytes()
        if key in first:  # the same values (ttft and ttfb often are): the same resamples
            outs.append(outs[first[key]])
            continue
        first[key] = i
        if not (values.view(np.int64) != values.view(np.int64)[0]).any():
            # every resample of bitwise equal values is those values (stalls: all 0)
            outs.append(np.repeat(np.quantile(values, qs)[:, None], n_boot, axis=1))
        else:
            outs.append(np.empty((len(qs), n_boot)))
            todo.append(i)
    if todo:
        _resample_distinct([samples[i] for i in todo], qs, n_boot, rng, [outs[i] for i in todo])
    elif draw_all:  # the draws the resamples would take, the same blocks
        for _ in _draws(rng, len(samples[0]), n_boot):
            pass
    return outs


def _draws(rng: np.random.Generator, n: int, n_boot: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(first resample, drawn positions)`` per block of resamples: ``n_boot`` resamples of
    ``n`` positions, each block one ``rng.integers`` call (the blocks fix the draws: a
    block split in two would draw other numbers)."""
    rows = max(1, _BLOCK // n)
    for start in range(0, n_boot, rows):
        yield start, rng.integers(0, n, size=(min(n_boot, start + rows) - start, n))


def _resample_distinct(
    samples: list[np.ndarray],
    qs: Sequence[float],
    n_boot: int,
    rng: np.random.Generator,
    outs: list[np.ndarray],
) -> None:
    """:func:`_resampled_quantiles_of` of distinct samples that vary, into ``outs``."""
    n = len(samples[0])
    plan = _quantile_plan(n, qs)
    ranked = [_ranked(values) for values in samples]
    step = max(1, _SORTED // n)  # resamples sorted (or counted) at once: they stay in cache
    counting = n >= (_COUNTED_FROM if len(samples) == 1 else _COUNTED_SHARED_FROM)
    positions = [_positions(ranks) for ranks, _ in ranked] if counting else []
    draws = _draws(rng, n, n_boot)
    for start, picks in draws:
        if start == 0:  # numpy's rule is still the one copied here
            mine = [_sorted_quantiles(np.take(r, picks[:1]), v, plan) for r, v in ranked]
            theirs = np.quantile(np.stack([values[picks[0]] for values in samples]), qs, axis=1)
            if not np.array_equal(np.stack(mine)[:, :, 0], theirs.T):
                _numpy_quantiles(samples, qs, itertools.chain([(start, picks)], draws), outs)
                return
        for sub in range(0, len(picks), step):
            block = picks[sub : sub + step]
            at = slice(start + sub, start + sub + len(block))
            if counting:  # one count of the drawn positions for every sample
                offsets = np.arange(len(block), dtype=np.intp) * n
                counts = np.bincount((block + offsets[:, None]).ravel(), minlength=block.size)
                counts = counts.reshape(block.shape)
                for (_, sorted_values), order, out in zip(ranked, positions, outs, strict=True):
                    out[:, at] = _counted_quantiles(counts, order, sorted_values, plan, offsets)
                continue
            for (ranks, sorted_values), out in zip(ranked, outs, strict=True):
                out[:, at] = _sorted_quantiles(np.take(ranks, block), sorted_values, plan)


def _numpy_quantiles(
    samples: list[np.ndarray],
    qs: Sequence[float],
    draws: Iterable[tuple[int, np.ndarray]],
    outs: list[np.ndarray],
) -> None:
    """numpy's own quantile of every resample of ``draws`` (:func:`_draws`)."""
    for start, picks in draws:
        for values, out in zip(samples, outs, strict=True):
            out[:, start : start + len(picks)] = np.quantile(values[picks], qs, axis=1)


_SORTED = 1 << 16
"""Positions of resamples sorted (or counted) at once by :func:`_resample_distinct`: a few
hundred KiB of ranks to sort, ~2 MiB of 64-bit counts and running counts to count (one
whole resample a block past this many values, as the draws are)."""
_COUNTED_FROM = 1000
"""A sample of at least this many values finds its resamples' order statistics by counting
(:func:`_counted_quantiles`, linear in the sample) instead of sorting each resample's ranks
(:func:`_sorted_quantiles`). Both give the same numbers. On the machine of
docs/PERFORMANCE.md (numpy 2.4, AVX2) a row of up to 512 ranks sorts in the vectorized
sort's in-register networks and sorting wins there; one sample counts faster from about
1,000 values on (1.1x there, 1.6x at 4,000)."""
_COUNTED_SHARED_FROM = 600
""":data:`_COUNTED_FROM` for two or more distinct samples that vary and share their draws
(a latency table's figures; twins and constant samples are set aside first): the count of
the drawn positions is made once for all of them, so counting wins from 600 values on
(1.2x for two samples, 1.4x for six; 3x for six at 4,000 values)."""


def _ranked(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rank of each position, sorted values)``: ``values[i] == sorted[rank[i]]``. Ranks
    are 32-bit: numpy sorts rows of them with its vectorized sort."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), dtype=np.int32)
    ranks[order] = np.arange(len(values), dtype=np.int32)
    return ranks, values[order]


def _positions(ranks: np.ndarray) -> np.ndarray:
    """The position of each rank: ``positions[ranks[i]] == i`` (the inverse permutation)."""
    positions = np.empty(len(ranks), dtype=np.intp)
    positions[ranks] = np.arange(len(ranks), dtype=np.intp)
    return positions


def _quantile_plan(n: int, qs: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For samples of ``n`` values: the sorted positions below and above each of ``qs`` and
    the weight between them, as ``np.quantile``'s default ("linear") method has them:
    ``(n - 1) * q``, its floor and the floor + 1 (both the last position at or past it), and
    the fraction. In the type numpy computes them in, the type of ``qs`` (a ``float32`` q
    is interpolated with a ``float32`` fraction), and refused as numpy refuses them."""
    quantiles = np.asanyarray(qs)
    if not ((quantiles >= 0) & (quantiles <= 1)).all():  # NaN too
        raise ValueError("Quantiles must be in the range [0, 1]")
    virtual = (n - 1) * quantiles
    below = np.floor(virtual)
    gamma = np.asanyarray(virtual - below, dtype=virtual.dtype)
    low = below.astype(np.intp)
    high = low + 1
    past = virtual >= n - 1
    low[past] = n - 1
    high[past] = n - 1
    return low, high, gamma


def _sorted_quantiles(
    ranks: np.ndarray, sorted_values: np.ndarray, plan: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> np.ndarray:
    """``(len(qs), rows)``: the quantiles of the resamples whose drawn positions' ranks
    ``ranks`` holds (a row per resample). A row of ranks sorted gives the ranks of the
    resample's order statistics, so its ``k``-th smallest value is ``sorted_values`` at
    the row's ``k``-th rank; the two around each quantile are interpolated as numpy's
    ``_lerp`` does. Integer ``qs`` (0 and 1) fall on whole positions, which numpy takes
    as they are, without interpolating: a weight of 0 would still give NaN next to a
    difference that overflows (-1e308 and 1e308)."""
    low, high, gamma = plan
    ranks.sort(axis=1)
    a = sorted_values[ranks[:, low]].T
    if gamma.dtype.kind != "f":
        return a
    return _lerp(a, sorted_values[ranks[:, high]].T, gamma)


def _lerp(a: np.ndarray, b: np.ndarray, gamma: np.ndarray) -> np.ndarray:
    """``(len(qs), rows)``: each quantile's two order statistics ``a`` and ``b`` interpolated
    by its weight in ``gamma`` as numpy's ``_lerp`` does (from the nearer end)."""
    t = gamma[:, None]
    diff = b - a
    result = a + diff * t
    np.subtract(b, diff * (1 - t), out=result, where=np.broadcast_to(t >= 0.5, result.shape))
    return result


def _counted_quantiles(
    counts: np.ndarray,
    positions: np.ndarray,
    sorted_values: np.ndarray,
    plan: tuple[np.ndarray, np.ndarray, np.ndarray],
    offsets: np.ndarray,
) -> np.ndarray:
    """:func:`_sorted_quantiles` by counting: ``counts`` holds, a row per resample, how many
    times each position was drawn (``offsets``: each row's start in ``counts`` flattened,
    ``row * n``). Taken in rank order (``positions``) and summed up across the whole block,
    the counts rise by exactly ``n`` per row, so the running count is sorted and one
    ``searchsorted`` finds, for every row at once, the first rank whose running count
    passes ``k``: the rank of the row's ``k``-th smallest drawn value. The same order
    statistics as sorting the row's ranks, in a pass or two over the block instead of a
    sort of each row; then the same interpolation."""
    low, high, gamma = plan
    running = np.cumsum(counts[:, positions].ravel())
    rows = offsets[:, None]
    a = sorted_values[np.searchsorted(running, rows + low, side="right") - rows].T
    if gamma.dtype.kind != "f":  # whole positions: no interpolation (_sorted_quantiles)
        return a
    b = sorted_values[np.searchsorted(running, rows + high, side="right") - rows].T
    return _lerp(a, b, gamma)


def _clean(values: Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    return arr[~np.isnan(arr)]


def bootstrap_quantile_interval(
    values: Sequence[float] | np.ndarray,
    q: float,
    confidence: float = DEFAULT_CONFIDENCE,
    *,
    n_boot: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """The percentile-bootstrap interval ``(low, high)`` of the ``q`` quantile of ``values``
    (NaN left out): the ``values`` resampled with replacement ``n_boot`` times with a fixed
    ``seed``, the quantile (linear, numpy's default) of each, and the central ``confidence``
    share of those (``scipy.stats.bootstrap(..., method="percentile")`` with the same
    generator gives the same interval). Fewer than 2 values carry no spread: ``(nan, nan)``.

    A tail quantile of a small sample (p99 of 20 streams) is the sample maximum in most
    resamples; its interval is then narrow and says little. Read it with the count.

    >>> bootstrap_quantile_interval([5.0, 5.0, 5.0], 0.5)
    (5.0, 5.0)
    """
    return bootstrap_quantile_intervals(values, [q], confidence, n_boot=n_boot, seed=seed)[0]


def bootstrap_quantile_intervals(
    values: Sequence[float] | np.ndarray,
    qs: Sequence[float],
    confidence: float = DEFAULT_CONFIDENCE,
    *,
    n_boot: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> list[tuple[float, float]]:
    """:func:`bootstrap_quantile_interval` of each of ``qs``, from one set of resamples."""
    return bootstrap_quantile_intervals_of([values], qs, confidence, n_boot=n_boot, seed=seed)[0]


def bootstrap_quantile_intervals_of(
    samples: Sequence[Sequence[float] | np.ndarray],
    qs: Sequence[float],
    confidence: float = DEFAULT_CONFIDENCE,
    *,
    n_boot: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> list[list[tuple[float, float]]]:
    """:func:`bootstrap_quantile_intervals` of each of ``samples``, the same intervals to the
    bit, with the resampled positions drawn once for all samples of one length (after NaN
    is left out): drawing them was most of the cost of a latency table (11 figures of the
    same streams, each resampled 2,000 times with the same seed)."""
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot!r}")
    z_value(confidence)
    cleaned = [_clean(values) for values in samples]
    out: list[list[tuple[float, float]]] = [[(math.nan, math.nan) for _ in qs] for _ in samples]
    by_length: dict[int, list[int]] = {}
    for i, arr in enumerate(cleaned):
        if len(arr) >= 2:
            by_length.setdefault(len(arr), []).append(i)
    tail = (1.0 - confidence) / 2.0
    for members in by_length.values():
        boots = _resampled_quantiles_of(
            [cleaned[i] for i in members], list(qs), n_boot, np.random.default_rng(seed)
        )
        # the interval ends of every quantile of every member: one call, row by row as ever
        ends = np.quantile(np.concatenate(boots), [tail, 1.0 - tail], axis=1).T.tolist()
        for k, i in enumerate(members):
            out[i] = [(lo, hi) for lo, hi in ends[k * len(qs) : (k + 1) * len(qs)]]
    return out


def bootstrap_difference_interval(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    q: float = 0.5,
    confidence: float = DEFAULT_CONFIDENCE,
    *,
    n_boot: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """The percentile-bootstrap interval of ``quantile(b, q) - quantile(a, q)``, each sample
    resampled on its own (fixed ``seed``); ``(nan, nan)`` when either has fewer than 2
    values."""
    xa, xb = _clean(a), _clean(b)
    if len(xa) < 2 or len(xb) < 2:
        return (math.nan, math.nan)
    z_value(confidence)
    rng = np.random.default_rng(seed)
    diff = (
        _resampled_quantiles(xb, [q], n_boot, rng)[0]
        - _resampled_quantiles(xa, [q], n_boot, rng)[0]
    )
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(diff, [tail, 1.0 - tail])
    return (float(low), float(high))


# --------------------------------------------------------------------------- two rates

MIN_EXPECTED_COUNT = 5.0
"""Below this expected count in any cell of the 2x2 table, :func:`proportion_test` uses
Fisher's exact test instead of the normal approximation (Cochran's rule)."""


def _check_counts(k: int, n: int) -> None:
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={k}, n={n}")


def two_proportion_test(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of the pooled two-proportion z test of ``k1/n1`` against ``k2/n2``
    (``statsmodels.stats.proportion.proportions_ztest``). 1.0 when either sample is empty
    or both rates are 0 or both 1 (no variance: no evidence of a difference).

    >>> round(two_proportion_test(10, 100, 25, 100), 4)
    0.0052
    """
    _check_counts(k1, n1)
    _check_counts(k2, n2)
    if n1 == 0 or n2 == 0:
        return 1.0
    pooled = (k1 + k2) / (n1 + n2)
    var = pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2)
    if var <= 0.0:
        return 1.0
    return _normal_two_sided((k1 / n1 - k2 / n2) / math.sqrt(var))


def fisher_exact(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of Fisher's exact test of the 2x2 table ``[[k1, n1-k1], [k2,
    n2-k2]]``: the hypergeometric probability of every table with these margins no more
    likely than the observed one (``scipy.stats.fisher_exact``, its relative tolerance
    1e-7 included).

    >>> round(fisher_exact(1, 1, 3, 61), 4)
    0.0645
    """
    _check_counts(k1, n1)
    _check_counts(k2, n2)
    total, successes = n1 + n2, k1 + k2
    if n1 == 0 or n2 == 0 or successes in (0, total):
        return 1.0
    denominator = math.comb(total, n1)

    def pmf(x: int) -> float:
        return math.comb(successes, x) * math.comb(total - successes, n1 - x) / denominator

    lo, hi = max(0, n1 - (total - successes)), min(n1, successes)
    observed = pmf(k1) * (1.0 + 1e-7)
    return min(1.0, sum(p for p in map(pmf, range(lo, hi + 1)) if p <= observed))


def fisher_greater(k1: int, n1: int, k2: int, n2: int) -> float:
    """One-sided Fisher exact test: the p-value that group 1 (``k1`` events in ``n1``)
    has a *higher* event rate than group 2 (``k2`` in ``n2``): ``P(X >= k1)`` under the
    hypergeometric law of the table's margins, summed exactly (``scipy.stats.fisher_exact
    (..., alternative="greater")``). 1.0 when either group is empty.

    >>> round(fisher_greater(9, 10, 2, 10), 6)
    0.002739
    """
    _check_counts(k1, n1)
    _check_counts(k2, n2)
    if n1 == 0 or n2 == 0:
        return 1.0
    total, events = n1 + n2, k1 + k2
    denom = math.comb(total, n1)
    hi = min(events, n1)
    tail = sum(math.comb(events, x) * math.comb(total - events, n1 - x) for x in range(k1, hi + 1))
    return min(1.0, tail / denom)


def proportion_test(k1: int, n1: int, k2: int, n2: int) -> tuple[float, str]:
    """``(p, method)``: :func:`fisher_exact` (``"fisher"``) when an expected cell count of
    the 2x2 table is under :data:`MIN_EXPECTED_COUNT`, else :func:`two_proportion_test`
    (``"z"``)."""
    _check_counts(k1, n1)
    _check_counts(k2, n2)
    total, successes = n1 + n2, k1 + k2
    if total == 0:
        return (1.0, "fisher")
    expected = [n * s / total for n in (n1, n2) for s in (successes, total - successes)]
    if min(expected) < MIN_EXPECTED_COUNT:
        return (fisher_exact(k1, n1, k2, n2), "fisher")
    return (two_proportion_test(k1, n1, k2, n2), "z")


def newcombe_difference_interval(
    k1: int, n1: int, k2: int, n2: int, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float]:
    """The interval of ``k2/n2 - k1/n1`` by Newcombe's hybrid score method (Newcombe 1998,
    method 10: the two Wilson intervals combined; ``statsmodels``
    ``confint_proportions_2indep(..., method="newcomb")`` with the samples swapped). NaN
    when either sample is empty.

    Newcombe's own example, 56/70 against 48/80 (difference 0.2, interval 0.0524 to 0.3339):

    >>> tuple(round(x, 4) for x in newcombe_difference_interval(48, 80, 56, 70))
    (0.0524, 0.3339)
    """
    if n1 == 0 or n2 == 0:
        return (math.nan, math.nan)
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_interval(k1, n1, confidence)
    l2, u2 = wilson_interval(k2, n2, confidence)
    d = p2 - p1
    return (
        d - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2),
        d + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2),
    )


# --------------------------------------------------------------------------- two samples

_EXACT_MWU_MAX = 8
"""Mann–Whitney U is exact (its permutation distribution) when the smaller sample has at
most this many values and no value is tied, as ``scipy.stats.mannwhitneyu`` does by
default; otherwise the normal approximation with tie and continuity corrections."""


def _u_counts(m: int, n: int) -> list[int]:
    """How many orderings of ``m`` x's among ``n`` y's give each U = 0 .. m*n: the
    coefficients of the Gaussian binomial ``[m+n choose m]_q`` (exact integers)."""
    poly = [1]
    for i in range(1, m + 1):
        times = [0] * (len(poly) + n + i)  # poly * (1 - q^(n+i))
        for k, c in enumerate(poly):
            times[k] += c
            times[k + n + i] -= c
        quotient = [0] * (len(times) - i)  # / (1 - q^i): q[k] = p[k] + q[k-i]
        for k in range(len(quotient)):
            quotient[k] = times[k] + (quotient[k - i] if k >= i else 0)
        poly = quotient
    return poly[: m * n + 1]


def average_ranks(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """The 1-based ranks of ``values``, ties given the mean of their ranks
    (``scipy.stats.rankdata``).

    >>> average_ranks([10.0, 30.0, 20.0, 20.0]).tolist()
    [1.0, 4.0, 2.5, 2.5]
    """
    return _ranks(np.asarray(values, dtype=float))[0]


def _ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Average ranks (1-based) and the sizes of the groups of tied values."""
    order = np.argsort(values, kind="mergesort")
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    sizes = np.diff(np.r_[starts, len(values)])
    average = starts + (sizes + 1) / 2.0  # 1-based mean rank of each group
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(average, sizes)
    return ranks, sizes


def mann_whitney_u(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    *,
    alternative: str = "two-sided",
) -> tuple[float, float]:
    """``(U, p)``: the Mann–Whitney U statistic of ``x`` (how many (x, y) pairs have x > y,
    ties counting half) and its p-value, NaN left out (``scipy.stats.mannwhitneyu`` with its
    defaults: exact for a small sample without ties, else the normal approximation with tie
    and continuity corrections). ``alternative`` is ``"two-sided"`` or ``"greater"`` (the
    one-sided test that ``x`` tends to be larger than ``y``). ``(nan, 1.0)`` when either
    sample is empty.

    >>> mann_whitney_u([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    (0.0, 0.1)
    >>> mann_whitney_u([4.0, 5.0, 6.0], [1.0, 2.0, 3.0], alternative="greater")
    (9.0, 0.05)
    """
    if alternative not in ("two-sided", "greater"):
        raise ValueError(f"alternative must be 'two-sided' or 'greater', not {alternative!r}")
    two_sided = alternative == "two-sided"
    xs, ys = _clean(x), _clean(y)
    n1, n2 = len(xs), len(ys)
    if n1 == 0 or n2 == 0:
        return (math.nan, 1.0)
    ranks, ties = _ranks(np.concatenate([xs, ys]))
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    u2 = n1 * n2 - u1
    big = max(u1, u2) if two_sided else u1
    factor = 2.0 if two_sided else 1.0
    if min(n1, n2) <= _EXACT_MWU_MAX and bool((ties == 1).all()):
        counts = _u_counts(min(n1, n2), max(n1, n2))  # U's law is the same for (m, n), (n, m)
        tail = sum(counts[int(round(big)) :])
        return (u1, min(1.0, factor * tail / sum(counts)))
    n = n1 + n2
    tie_term = float((ties**3 - ties).sum()) / (n * (n - 1))
    sd = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term))
    if sd == 0.0:
        return (u1, 1.0)  # every value equal: nothing to tell them apart
    z = (big - n1 * n2 / 2.0 - 0.5) / sd
    return (u1, min(1.0, factor * 0.5 * math.erfc(z / math.sqrt(2.0))))


# --------------------------------------------------------------------------- many tests


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error rate; ``statsmodels``
    ``multipletests(method="holm")``), in the order given; NaN stays NaN and is not
    counted.

    >>> [round(p, 6) for p in holm([0.01, 0.04, 0.03])]
    [0.03, 0.06, 0.06]
    """
    return _adjust(pvalues, step_down=True)


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (false discovery rate; ``statsmodels``
    ``multipletests(method="fdr_bh")``), in the order given; NaN stays NaN.

    >>> [round(p, 6) for p in benjamini_hochberg([0.01, 0.04, 0.03])]
    [0.03, 0.04, 0.04]
    """
    return _adjust(pvalues, step_down=False)


def _adjust(pvalues: Sequence[float], *, step_down: bool) -> list[float]:
    p = np.asarray(pvalues, dtype=float)
    out = np.full(len(p), math.nan)
    known = np.flatnonzero(~np.isnan(p))
    m = len(known)
    if m == 0:
        return out.tolist()
    order = known[np.argsort(p[known], kind="mergesort")]
    ranked = p[order]
    if step_down:  # Holm: (m - i) p_(i), running max from the smallest
        adjusted = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * ranked))
    else:  # BH: m / (i + 1) p_(i), running min from the largest
        scaled = np.minimum(1.0, m / np.arange(1, m + 1) * ranked)
        adjusted = np.minimum.accumulate(scaled[::-1])[::-1]
    out[order] = adjusted
    return [float(v) for v in out]
