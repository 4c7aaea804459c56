"""What changed between two runs (lab.compare) and when a long run changed (trends)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import lab
from lab import tables
from lab.changes import COMPARE_COLUMNS, change_sentences, compare_runs
from lab.stats import holm, mann_whitney_u, proportion_test
from lab.trends import TREND_COLUMNS, cusum_change_point


def _run(backend: str, n: int, leaks: int, ttft: list[float], *, errors: int = 0) -> pd.DataFrame:
    """A streams table of ``n`` streams of one backend: the first ``leaks`` leaked, the
    first ``errors`` failed, ``ttft`` their TTFTs (cycled)."""
    return pd.DataFrame(
        {
            "stream_id": [f"{backend}-{i}" for i in range(n)],
            "provider": "openrouter",
            "serving_provider": backend,
            "leaked": [i < leaks for i in range(n)],
            "error_type": ["api_error" if i < errors else None for i in range(n)],
            "timed": True,
            "stalls": 0,
            "ttft_ms": [ttft[i % len(ttft)] for i in range(n)],
        }
    )


TTFT_A = [410.0, 380.0, 455.0, 390.0, 520.0, 401.0, 433.0]
TTFT_B = [980.0, 1010.0, 870.0, 1450.0, 920.0]


def test_a_leak_rate_that_went_up_is_said_in_one_sentence():
    a = _run("SiliconFlow", 50, 1, TTFT_A)
    b = _run("SiliconFlow", 49, 20, TTFT_A)
    table = compare_runs(a, b, n_boot=200)
    assert list(table.columns) == COMPARE_COLUMNS
    row = table.set_index("verdict").loc["leak_rate"]
    assert (row["a_n"], row["b_n"], row["a_value"], row["b_value"]) == (50, 49, 0.02, 20 / 49)
    assert (row["test"], row["p"]) == ("z", proportion_test(1, 50, 20, 49)[0])
    assert row["correction"] == "Holm" and bool(row["changed"])
    assert row["sentence"] == (
        "SiliconFlow: leak rate up from 2.0 % (0.4–10.5 %) to 40.8 % (28.2–54.8 %), p < 0.001"
    )
    # the same TTFTs on both sides: nothing changed there
    ttft = table.set_index("verdict").loc["ttft_ms"]
    assert ttft["test"] == "mann-whitney" and not bool(ttft["changed"])
    assert change_sentences(table) == [
        "SiliconFlow: leak rate up from 2.0 % (0.4–10.5 %) to 40.8 % (28.2–54.8 %), p < 0.001",
        "p-values adjusted for 2 comparisons by the Holm method.",
    ]


def test_rates_at_zero_in_both_runs_are_not_tested_nor_counted_in_the_correction():
    table = compare_runs(_run("X", 20, 0, TTFT_A), _run("X", 20, 0, TTFT_A), n_boot=10)
    rows = table.set_index("verdict")
    assert rows.loc["error_rate", "test"] == "none" and math.isnan(rows.loc["error_rate", "p"])
    assert rows.loc["error_rate", "sentence"] == (
        "X: error rate 0.0 % in both runs (nothing to test)"
    )
    assert table.attrs["notes"][0] == "p-values adjusted for 1 comparisons by the Holm method."


def test_latency_is_compared_by_mann_whitney_on_the_per_stream_values():
    a, b = _run("Chutes", 21, 0, TTFT_A), _run("Chutes", 20, 0, TTFT_B)
    table = compare_runs(a, b, n_boot=200)
    row = table.set_index("verdict").loc["ttft_ms"]
    assert row["p"] == mann_whitney_u(a["ttft_ms"], b["ttft_ms"])[1]
    assert (row["a_value"], row["b_value"]) == (np.median(a["ttft_ms"]), np.median(b["ttft_ms"]))
    assert row["difference"] == row["b_value"] - row["a_value"]
    assert row["difference_ci_low"] > 0 and bool(row["changed"])
    assert row["sentence"] == (
        "Chutes: median TTFT up from 410.0 ms (401.0–433.0 ms) to 980 ms (920–1,010 ms), p < 0.001"
    )


def test_p_values_are_adjusted_over_every_test_of_the_comparison():
    a = pd.concat([_run("A", 30, 3, TTFT_A, errors=2), _run("B", 30, 1, TTFT_A, errors=4)])
    b = pd.concat([_run("A", 30, 9, TTFT_B, errors=1), _run("B", 30, 2, TTFT_A, errors=8)])
    table = compare_runs(a, b, n_boot=50)
    tested = table[table["p"].notna()]
    assert tested["p_adjusted"].tolist() == holm(tested["p"].tolist())
    bh = compare_runs(a, b, n_boot=50, correction="bh")
    assert set(bh["correction"]) == {"Benjamini-Hochberg"}
    assert "Benjamini-Hochberg" in bh.attrs["notes"][0]
    with pytest.raises(ValueError, match="correction must be one of holm, bh"):
        compare_runs(a, b, correction="bonferroni")


def test_backends_in_one_run_only_are_named_and_not_compared():
    a = pd.concat([_run("A", 10, 0, TTFT_A), _run("Gone", 10, 1, TTFT_A)])
    b = pd.concat([_run("A", 10, 0, TTFT_A), _run("New", 10, 1, TTFT_A)])
    table = compare_runs(a, b, n_boot=10, names=("last week", "today"))
    assert set(table["serving_provider"]) == {"A"}
    assert table.attrs["notes"][1:] == [
        "Only in last week: Gone (not compared).",
        "Only in today: New (not compared).",
    ]


def test_nothing_changed_says_so():
    a = _run("A", 30, 3, TTFT_A)
    table = compare_runs(a, a, n_boot=10)
    assert not table["changed"].any()
    assert change_sentences(table)[0] == "No change with confidence in 2 comparisons."


def test_lab_compare_takes_two_runs_or_a_capture_and_two_configs(tmp_path):
    a = _run("A", 12, 1, TTFT_A)
    pd.testing.assert_frame_equal(lab.compare(a, a, n_boot=10), compare_runs(a, a, n_boot=10))
    from tests.latency_captures import DONE, content, exchange_row, write_capture

    reads = [content("<think>x</think>hi"), DONE]
    write_capture(tmp_path, [(exchange_row("s", reads), reads, [1, 2])])
    diff = lab.compare(tmp_path, lab.LabConfig(), lab.LabConfig(strip_think_blocks=False))
    assert diff["stream_id"].unique().tolist() == ["s"]


def test_runs_are_read_from_a_capture_or_a_result_directory(tmp_path):
    from tests.latency_captures import DONE, content, exchange_row, write_capture

    reads = [content("hello"), DONE]
    write_capture(tmp_path / "cap", [(exchange_row("s", reads), reads, [5_000_000, 6_000_000])])
    from lab.replay import replay

    replay(tmp_path / "cap", out=tmp_path / "out")
    from_capture = compare_runs(tmp_path / "cap", tmp_path / "cap", n_boot=10)
    from_results = compare_runs(tmp_path / "cap", tmp_path / "out", n_boot=10)
    pd.testing.assert_frame_equal(from_capture, from_results)
    assert from_capture["serving_provider"].unique().tolist() == ["openai (direct)"]
    assert from_capture.set_index("verdict").loc["ttft_ms", "a_value"] == 5.0


# --------------------------------------------------------------------------- trends


def test_cusum_finds_the_step_of_a_series_and_not_one_in_noise():
    assert cusum_change_point([0.0] * 40 + [1.0] * 40) == (40, 0.001)
    rng = np.random.default_rng(3)
    k, p = cusum_change_point(rng.normal(size=200))
    assert p > 0.05
    k, p = cusum_change_point(np.r_[rng.normal(size=100), rng.normal(size=100) + 1.5])
    assert abs(k - 100) <= 5 and p == 0.001
    assert cusum_change_point([1.0, 1.0, 1.0, 1.0, 1.0]) == (None, 1.0)
    assert cusum_change_point([1.0, 2.0]) == (None, 1.0)


def test_cusum_on_ranks_is_not_moved_by_one_outlier():
    series = [100.0] * 30 + [1e9] + [100.0] * 29
    assert cusum_change_point(series, ranks=True)[1] > 0.05


def _days(backend: str, rates: list[float], per_day: int = 40) -> pd.DataFrame:
    rows = []
    for day, rate in enumerate(rates):
        for i in range(per_day):
            rows.append(
                {
                    "stream_id": f"{backend}-{day}-{i}",
                    "provider": "openrouter",
                    "serving_provider": backend,
                    "leaked": i < round(rate * per_day),
                    "error_type": None,
                    "timed": True,
                    "stalls": 0,
                    "ttft_ms": 400.0 + (i % 7),
                    "started_at": pd.Timestamp("2026-11-01", tz="UTC")
                    + pd.Timedelta(days=day, minutes=30 * i),
                }
            )
    return pd.DataFrame(rows)


def test_trends_give_each_period_its_rate_and_mark_where_a_backend_changed():
    st = pd.concat([_days("Worse", [0.05] * 5 + [0.5] * 5), _days("Same", [0.1] * 10)])
    tr = tables.trends(st, every="1D")
    assert list(tr.columns) == TREND_COLUMNS
    worse = tr[(tr["serving_provider"] == "Worse") & (tr["verdict"] == "leak_rate")]
    assert worse["n"].tolist() == [40] * 10
    assert worse["value"].tolist() == [0.05] * 5 + [0.5] * 5
    assert worse.loc[worse["change_point"], "period"].tolist() == [
        pd.Timestamp("2026-11-06", tz="UTC")
    ]
    assert worse["change_p"].iloc[0] == 0.001
    same = tr[(tr["serving_provider"] == "Same") & (tr["verdict"] == "leak_rate")]
    assert not same["change_point"].any()
    assert not tr[tr["verdict"] == "ttft_ms"]["change_point"].any()
    weekly = tables.trends(st, every="7D")
    # 7-day periods start at multiples of 7 days since the epoch (a Thursday): 4 + 6 days
    leak = weekly[weekly["verdict"] == "leak_rate"]
    assert leak.groupby("serving_provider")["n"].apply(list).tolist() == [[160, 240]] * 2


def test_trend_plot_draws_each_backend_and_marks_the_day_it_changed():
    from matplotlib.collections import LineCollection

    from lab import plots

    st = pd.concat([_days("Worse $x$", [0.05] * 5 + [0.5] * 5), _days("Same", [0.1] * 10)])
    fig = plots.trend(tables.trends(st, every="1D"), "leak_rate")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["Worse \\$x\\$: changed here (p = 0.001)", "Same", "Worse \\$x\\$"]
    # one vertical line, on 2026-11-06, the day Worse's leak rate went up
    marks = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
    assert len(marks) == 1
    assert pd.Timestamp(marks[0].get_xdata()[0]) == pd.Timestamp("2026-11-06")
    assert sum(isinstance(c, LineCollection) for c in ax.collections) == 2  # error bars
    empty = plots.trend(tables.trends(st, every="1D"), "nope")
    assert empty.axes[0].texts[0].get_text() == (
        "no nope trend (verdicts: error_rate, leak_rate, stall_rate, ttft_ms)"
    )
