"""lab.stats: the Wilson score interval against published values, and its edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.stats import wilson_interval, z_value


@pytest.mark.parametrize(
    ("successes", "n", "expected"),
    [
        # Newcombe (1998), "Two-sided confidence intervals for the single proportion",
        # Statistics in Medicine 17:857-872, Table I, method 3 (score interval, no correction)
        (81, 263, (0.2553, 0.3662)),
        (15, 148, (0.0624, 0.1605)),
        (0, 20, (0.0, 0.1611)),
        (1, 29, (0.0061, 0.1718)),
        # symmetric around 1/2; 0/10 has the upper bound z^2 / (n + z^2)
        (5, 10, (0.2366, 0.7634)),
        (0, 10, (0.0, 0.2775)),
        (10, 10, (0.7225, 1.0)),
    ],
)
def test_wilson_interval_matches_published_values(successes, n, expected):
    low, high = wilson_interval(successes, n)
    assert (round(low, 4), round(high, 4)) == expected


def test_wilson_bounds_are_exact_at_zero_and_all_successes():
    assert wilson_interval(0, 7)[0] == 0.0
    assert wilson_interval(7, 7)[1] == 1.0


def test_wilson_upper_bound_at_zero_is_z_squared_over_n_plus_z_squared():
    z2 = z_value(0.95) ** 2
    assert wilson_interval(0, 40)[1] == pytest.approx(z2 / (40 + z2), rel=1e-12)


def test_wilson_interval_of_no_trials_is_nan():
    assert all(math.isnan(x) for x in wilson_interval(0, 0))


def test_a_lower_confidence_gives_a_narrower_interval():
    assert wilson_interval(5, 10, 0.90) == pytest.approx((0.2693, 0.7307), abs=1e-4)


def test_z_value_of_95_percent():
    assert z_value(0.95) == pytest.approx(1.959963984540054, rel=1e-12)


@pytest.mark.parametrize(("successes", "n"), [(3, 2), (-1, 4), (0, -1)])
def test_wilson_interval_refuses_impossible_counts(successes, n):
    with pytest.raises(ValueError, match="need 0 <= successes <= n"):
        wilson_interval(successes, n)


def test_z_value_refuses_a_confidence_outside_zero_one():
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        z_value(95)


# ----------------------------------------------------------------------------------------
# The tests and intervals of lab.compare, checked against scipy.stats and statsmodels on
# fixed data (neither is a run-time dependency of the lab).

LATENCY_A = [812.0, 640.5, 955.0, 701.25, 1203.0, 688.0, 740.0, 933.5, 1500.0, 615.0, 702.0]
LATENCY_B = [1012.0, 870.0, 1490.0, 901.0, 1333.0, 1120.5, 990.0, 1720.0, 1005.0]
TIED_A = [1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 7.0]
TIED_B = [2.0, 3.0, 4.0, 4.0, 5.0, 7.0, 7.0, 9.0]


@pytest.mark.parametrize(
    ("x", "y"),
    [
        ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]),  # exact, complete separation
        ([3.1, 0.2, 5.5, 1.4], [2.2, 6.0, 4.1, 7.3, 0.9]),  # exact, interleaved
        (LATENCY_A[:8], LATENCY_B),  # exact at the largest small sample (8)
        (LATENCY_A, LATENCY_B),  # normal approximation (both over 8)
        (TIED_A, TIED_B),  # ties: normal approximation with tie correction
        (LATENCY_A * 5, LATENCY_B * 4),  # ties from repetition, larger samples
    ],
)
@pytest.mark.parametrize("alternative", ["two-sided", "greater"])
def test_mann_whitney_u_matches_scipy(x, y, alternative):
    from scipy.stats import mannwhitneyu

    from lab.stats import mann_whitney_u

    for a, b in ((x, y), (y, x)):  # "greater" both ways: a small and a large p-value
        expected = mannwhitneyu(a, b, alternative=alternative)
        u, p = mann_whitney_u(a, b, alternative=alternative)
        assert u == float(expected.statistic)
        assert p == pytest.approx(float(expected.pvalue), rel=1e-9, abs=1e-15)


def test_mann_whitney_u_names_a_bad_alternative():
    from lab.stats import mann_whitney_u

    with pytest.raises(ValueError, match="alternative must be 'two-sided' or 'greater'"):
        mann_whitney_u([1.0], [2.0], alternative="less-ish")


def test_mann_whitney_u_of_an_empty_sample_or_all_ties_is_no_evidence():
    from lab.stats import mann_whitney_u

    assert mann_whitney_u([], [1.0])[1] == 1.0
    assert mann_whitney_u([2.0] * 10, [2.0] * 12) == (60.0, 1.0)


@pytest.mark.parametrize(
    ("k1", "n1", "k2", "n2"),
    [(1, 1, 3, 61), (2, 50, 20, 49), (0, 10, 5, 10), (7, 12, 2, 15), (3, 40, 3, 40), (0, 5, 0, 9)],
)
def test_fisher_exact_matches_scipy(k1, n1, k2, n2):
    from scipy.stats import fisher_exact as scipy_fisher

    from lab.stats import fisher_exact

    expected = scipy_fisher([[k1, n1 - k1], [k2, n2 - k2]]).pvalue
    assert fisher_exact(k1, n1, k2, n2) == pytest.approx(float(expected), rel=1e-9)


@pytest.mark.parametrize(
    ("k1", "n1", "k2", "n2"), [(10, 100, 25, 100), (1, 50, 20, 49), (30, 60, 33, 60)]
)
def test_two_proportion_test_and_difference_interval_match_statsmodels(k1, n1, k2, n2):
    from statsmodels.stats.proportion import confint_proportions_2indep, proportions_ztest

    from lab.stats import newcombe_difference_interval, two_proportion_test

    assert two_proportion_test(k1, n1, k2, n2) == pytest.approx(
        float(proportions_ztest([k1, k2], [n1, n2])[1]), rel=1e-9
    )
    low, high = confint_proportions_2indep(k2, n2, k1, n1, method="newcomb")
    assert newcombe_difference_interval(k1, n1, k2, n2) == pytest.approx(
        (float(low), float(high)), rel=1e-9
    )


def test_proportion_test_uses_fisher_when_an_expected_count_is_small():
    from lab.stats import fisher_exact, proportion_test, two_proportion_test

    assert proportion_test(1, 50, 20, 49) == (two_proportion_test(1, 50, 20, 49), "z")
    assert proportion_test(0, 10, 5, 10) == (fisher_exact(0, 10, 5, 10), "fisher")


def test_holm_and_benjamini_hochberg_match_statsmodels():
    from statsmodels.stats.multitest import multipletests

    from lab.stats import benjamini_hochberg, holm

    p = [0.0004, 0.31, 0.012, 0.049, 0.9, 0.0031, 0.2, 0.049, 0.6]
    assert holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]), rel=1e-12)
    bh = list(multipletests(p, method="fdr_bh")[1])
    assert benjamini_hochberg(p) == pytest.approx(bh, rel=1e-12)
    with_nan = holm([0.01, math.nan, 0.04])
    assert with_nan[0] == pytest.approx(0.02) and math.isnan(with_nan[1])
    assert with_nan[2] == pytest.approx(0.04)


def test_bootstrap_quantile_interval_matches_scipy_percentile_bootstrap():
    import numpy as np
    from scipy.stats import bootstrap

    from lab.stats import bootstrap_quantile_interval

    x = np.array(LATENCY_A + LATENCY_B)
    for q in (0.5, 0.9):
        expected = bootstrap(
            (x,),
            lambda s, axis, q=q: np.quantile(s, q, axis=axis),
            n_resamples=2000,
            method="percentile",
            rng=np.random.default_rng(0),
            vectorized=True,
        ).confidence_interval
        assert bootstrap_quantile_interval(x, q) == (float(expected.low), float(expected.high))


def test_bootstrap_intervals_are_the_same_run_after_run_and_nan_without_spread():
    from lab.stats import bootstrap_difference_interval, bootstrap_quantile_interval

    assert bootstrap_quantile_interval(LATENCY_A, 0.5) == bootstrap_quantile_interval(
        LATENCY_A, 0.5
    )
    assert all(math.isnan(v) for v in bootstrap_quantile_interval([3.0], 0.5))
    low, high = bootstrap_difference_interval(LATENCY_A, LATENCY_B)
    assert 0 < low < high  # B is slower: its median minus A's is above 0
    assert (low, high) == bootstrap_difference_interval(LATENCY_A, LATENCY_B)


def test_intervals_of_several_samples_equal_each_samples_own_to_the_bit():
    # samples of one length (after NaN is left out) share their resampled positions, as
    # each would draw them from its own generator of the same seed
    from lab.stats import bootstrap_quantile_intervals, bootstrap_quantile_intervals_of

    gen = np.random.default_rng(5)
    samples = [
        gen.exponential(size=40) * 100,
        gen.normal(size=40),
        np.r_[gen.normal(size=38), np.nan, np.nan],  # 38 after NaN: a length of its own
        gen.integers(0, 3, size=38).astype(float),  # ties, the same length as the one above
        np.array([1.0]),  # too few: (nan, nan)
        np.full(40, 7.5),
    ]
    qs = [0.5, 0.9, 0.99]
    together = bootstrap_quantile_intervals_of(samples, qs, n_boot=300, seed=3)
    alone = [bootstrap_quantile_intervals(s, qs, n_boot=300, seed=3) for s in samples]
    assert together[:4] == alone[:4] and together[5] == alone[5] == [(7.5, 7.5)] * 3
    assert all(math.isnan(lo) and math.isnan(hi) for lo, hi in together[4])


def _partitioned(values, qs, n_boot, seed, block):
    """The resample quantiles as numpy's partition gives them: the reference (``seed``: a
    seed or the generator to draw from)."""
    gen = np.random.default_rng(seed)
    n = len(values)
    rows = max(1, block // n)
    out = np.empty((len(qs), n_boot))
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        picks = gen.integers(0, n, size=(stop - start, n))
        out[:, start:stop] = np.quantile(values[picks], qs, axis=1)
    return out


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.floats(allow_nan=False, width=64),
            st.sampled_from([0.0, 1.0, 1.0, 2.5, -0.0, math.inf, -math.inf]),
        ),
        min_size=2,
        max_size=90,
    ),
    qs=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4),
    n_boot=st.integers(1, 60),
    block=st.integers(1, 400),
    sorted_at_once=st.integers(1, 300),
    counted_from=st.sampled_from([1, 10**9]),
    seed=st.integers(0, 2**32 - 1),
)
def test_sorted_rank_resample_quantiles_equal_numpys_partition_of_every_resample(
    values, qs, n_boot, block, sorted_at_once, counted_from, seed
):
    # the bootstrap sorts the ranks of the drawn positions (or, counted_from = 1, counts
    # the draws in rank order) instead of partitioning every resample; ties, infinities,
    # signed zeros, q of 0 and 1, blocks and sub-blocks of any size, a sample equal to
    # another and one of a single value
    from lab import stats

    arr = np.array(values)
    samples = [arr, arr[::-1].copy(), arr.copy(), np.full(len(arr), arr[0])]  # a twin, a constant
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(stats, "_BLOCK", block)
        patch.setattr(stats, "_SORTED", sorted_at_once)
        patch.setattr(stats, "_COUNTED_FROM", counted_from)
        patch.setattr(stats, "_COUNTED_SHARED_FROM", counted_from)
        got = stats._resampled_quantiles_of(samples, qs, n_boot, np.random.default_rng(seed))
    for mine, values in zip(got, samples, strict=True):
        want = _partitioned(values, qs, n_boot, seed, block)
        # the same numbers; only a zero's sign may differ, as numpy's partition puts -0.0
        # and 0.0 (equal) in no fixed order
        np.testing.assert_array_equal(mine, want)
        same_bits = mine.view(np.int64) == want.view(np.int64)
        assert ((mine == 0) | np.isnan(mine) | same_bits).all()


@pytest.mark.parametrize(("n", "k"), [(599, 3), (600, 3), (999, 1), (1000, 1), (2500, 3)])
def test_large_samples_count_their_resamples_to_the_numbers_numpys_partition_gives(n, k):
    # from stats._COUNTED_FROM values on (_COUNTED_SHARED_FROM for samples sharing their
    # draws), the order statistics are counted, not sorted: a latency table's six figures
    # of 4,000 streams took a third of the time. Here on both sides of each default
    # switch-over, one sample or several sharing their draws (one with ties), as a latency
    # table's figures do, against numpy's quantile of every resample
    from lab import stats

    gen = np.random.default_rng(n)
    samples = [
        gen.lognormal(size=n) * 1000,
        gen.integers(0, 40, size=n).astype(float),  # many ties
        gen.normal(size=n),
    ][:k]
    qs = [0.0, 0.5, 0.9, 0.99, 1.0]
    got = stats._resampled_quantiles_of(samples, qs, 300, np.random.default_rng(7))
    for mine, values in zip(got, samples, strict=True):
        np.testing.assert_array_equal(mine, _partitioned(values, qs, 300, 7, stats._BLOCK))
    switch = stats._COUNTED_FROM if k == 1 else stats._COUNTED_SHARED_FROM
    assert switch in (n, n + 1) or n == 2500  # each default switch-over tried from both sides


@pytest.mark.parametrize(
    ("n", "k", "counts"), [(599, 2, False), (600, 2, True), (999, 1, False), (1000, 1, True)]
)
def test_the_bootstrap_counts_from_its_switch_over_on_and_sorts_below_it(monkeypatch, n, k, counts):
    # the switch-over decides the path (a speed matter only: both give the same numbers,
    # which the tests above check); _sorted_quantiles also checks the first resample
    # against numpy on either path, so the counted path is the one counted here
    from lab import stats

    calls = []
    counted = stats._counted_quantiles
    monkeypatch.setattr(stats, "_counted_quantiles", lambda *a: calls.append(1) or counted(*a))
    gen = np.random.default_rng(n)
    samples = [gen.lognormal(size=n) for _ in range(k)]
    stats._resampled_quantiles_of(samples, [0.5, 0.9], 40, np.random.default_rng(1))
    assert bool(calls) is counts
    assert not calls or len(calls) == k  # one block of 40 resamples, once per sample


def test_whole_number_qs_are_counted_to_the_values_at_their_ranks_without_interpolating():
    # q = 0 and 1 fall on whole positions: no interpolation, whose 0 weight next to an
    # overflowing difference (-1e308 to 1e308) would give NaN; on the counted path too
    from lab import stats
    from lab.stats import bootstrap_quantile_intervals

    values = np.r_[-1e308, np.full(999, 1e308)]
    assert len(values) >= stats._COUNTED_FROM
    assert bootstrap_quantile_intervals(values, [0, 1], n_boot=50) == [
        (-1e308, 1e308),
        (1e308, 1e308),
    ]
    got = stats._resampled_quantiles_of([values], [0, 1], 50, np.random.default_rng(3))
    np.testing.assert_array_equal(got[0], _partitioned(values, [0, 1], 50, 3, stats._BLOCK))


def test_resample_quantiles_fall_back_to_numpys_partition_when_its_rule_is_not_the_copied_one(
    monkeypatch,
):
    # the interpolation copied from numpy is checked on the first resample: a numpy whose
    # rule differs gets its own quantile of every resample, so the intervals never change
    from lab import stats

    gen = np.random.default_rng(11)
    values = gen.exponential(size=50) * 100
    qs = [0.5, 0.9, 0.99]
    want = _partitioned(values, qs, 200, 4, 60 * 50)
    plan = stats._quantile_plan
    skewed = lambda n, qs: (*plan(n, qs)[:2], plan(n, qs)[2] * 0.5)  # noqa: E731
    picks = np.random.default_rng(4).integers(0, 50, size=(1, 50))
    ranks, sorted_values = stats._ranked(values)
    caught = stats._sorted_quantiles(np.take(ranks, picks), sorted_values, skewed(50, qs))
    assert not np.array_equal(caught[:, 0], want[:, 0])  # the skewed rule gives other numbers
    monkeypatch.setattr(stats, "_quantile_plan", skewed)
    monkeypatch.setattr(stats, "_BLOCK", 60 * 50)  # several blocks: the rest drawn as before
    got = stats._resampled_quantiles_of([values], qs, 200, np.random.default_rng(4))
    np.testing.assert_array_equal(got[0], want)


def test_difference_interval_after_a_constant_sample_draws_the_other_as_ever():
    # a constant sample (stalls all 0 in one run) needs no resample, but its draws still
    # come first from the generator the other sample then draws from: skipping them moved
    # the other's resamples and changed the interval of lab.changes' difference
    from lab.stats import bootstrap_difference_interval

    a = np.random.default_rng(2).lognormal(size=143)
    for b in (np.zeros(16), np.zeros(1500)):  # one block of draws, several
        rng = np.random.default_rng(0)
        b_first = _drawn_quantiles(b, [0.5], 2000, rng)  # b's resamples are drawn first
        diff = b_first - _drawn_quantiles(a, [0.5], 2000, rng)
        want = tuple(float(x) for x in np.quantile(diff[0], [0.025, 0.975]))
        assert bootstrap_difference_interval(a, b) == want


def _drawn_quantiles(values, qs, n_boot, gen):
    """numpy's quantiles of ``n_boot`` resamples drawn from ``gen`` in the lab's blocks."""
    from lab.stats import _BLOCK

    return _partitioned(values, qs, n_boot, gen, _BLOCK)


def test_quantiles_of_another_numeric_type_are_taken_as_numpy_takes_them():
    # np.quantile interpolates a float32 q with a float32 fraction and takes integer qs (0
    # and 1) without interpolating; the first resample (ties: its two order statistics
    # equal) does not show the difference, later ones do
    from lab import stats

    values = np.array([0.0, 1.0, 1.0, 2.0, 3.0, 3.0, 4.0, 5.0] * 3 + [5.0])
    for qs in ([np.float32(0.7)], [np.float32(0.1), np.float32(0.9)], [np.float16(0.9)]):
        got = stats._resampled_quantiles_of([values], qs, 200, np.random.default_rng(0))
        np.testing.assert_array_equal(got[0], _partitioned(values, qs, 200, 0, stats._BLOCK))
    spread = np.array([1e308, -1e308, 1.0, 1e308, -1e308, 1e308, 1e308, 1e308, 2.0, 3.0, 4.0])
    got = stats._resampled_quantiles_of([spread], [0, 1], 50, np.random.default_rng(3))
    np.testing.assert_array_equal(got[0], _partitioned(spread, [0, 1], 50, 3, stats._BLOCK))
    assert not np.isnan(got[0]).any()
    for bad in ([math.nan], [1.5], [-0.1]):  # refused as numpy refuses them
        with pytest.raises(ValueError, match=r"Quantiles must be in the range \[0, 1\]"):
            stats.bootstrap_quantile_intervals_of([values], bad)
