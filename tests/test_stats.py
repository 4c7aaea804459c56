"""lab.stats: the Wilson score interval against published values, and its edge cases."""

from __future__ import annotations

import math

import pytest

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
