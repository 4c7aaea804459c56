"""by_backend's Wilson intervals, the "worse than the rest" flag, the verdicts in words,
and the leak plot's error bars, on stream tables with known counts."""

from __future__ import annotations

import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer

from lab import plots, report, tables

NO_BACKEND = "openrouter (no backend: failed before streaming)"


def stream_table(counts: dict[str | None, tuple[int, int, int]]) -> pd.DataFrame:
    """A streams table: per backend (None = failed before streaming), ``(streams, leaked,
    errored)``; the first streams leak, the last ones error."""
    rows = []
    for backend, (n, leaked, errored) in counts.items():
        for i in range(n):
            row = dict.fromkeys(tables.STREAM_COLUMNS)
            row.update(
                stream_id=f"{backend}-{i}",
                provider="openrouter",
                serving_provider=backend,
                leaked=i < leaked,
                error_type="api_error" if i >= n - errored else None,
            )
            rows.append(row)
    df = pd.DataFrame(rows, columns=tables.STREAM_COLUMNS)
    df["output_tokens"] = df["output_tokens"].astype("Int64")
    for col in ("ttft_ms", "tokens_per_s", "cost"):
        df[col] = df[col].astype("float64")
    return df


@pytest.fixture
def fleet() -> pd.DataFrame:
    return tables.by_backend(
        stream_table(
            {
                "Leaky": (40, 12, 0),
                "Clean": (60, 2, 6),
                "Tiny": (3, 1, 0),
                "Spotless": (100, 0, 1),
                None: (5, 0, 5),
            }
        )
    ).set_index("serving_provider")


def test_by_backend_has_wilson_intervals_of_leak_and_error_rates(fleet):
    got = fleet[["leak_rate_ci_low", "leak_rate_ci_high"]].round(4)
    assert got.loc["Leaky"].tolist() == [0.1807, 0.4543]  # 12/40
    assert got.loc["Clean"].tolist() == [0.0092, 0.1136]  # 2/60
    assert got.loc["Tiny"].tolist() == [0.0615, 0.7923]  # 1/3
    assert got.loc["Spotless"].tolist() == [0.0, 0.037]  # 0/100
    err = fleet[["error_rate_ci_low", "error_rate_ci_high"]].round(4)
    assert err.loc["Clean"].tolist() == [0.0466, 0.2015]  # 6/60
    assert err.loc[NO_BACKEND].tolist() == [0.5655, 1.0]  # 5/5


def test_rest_rate_pools_the_other_backends_and_leaves_out_unserved_requests(fleet):
    # Leaky's rest: Clean + Tiny + Spotless = 3 leaks in 163 streams; the 5 requests no
    # backend served are not in anyone's rest
    assert fleet.loc["Leaky", "rest_leak_rate"] == 3 / 163
    assert fleet.loc["Spotless", "rest_leak_rate"] == 15 / 103
    assert fleet.loc["Clean", "rest_error_rate"] == 1 / 143
    assert pd.isna(fleet.loc[NO_BACKEND, "rest_leak_rate"])


def test_only_a_backend_whose_whole_interval_is_above_the_rest_is_flagged_worse(fleet):
    assert fleet.index[fleet["leak_worse"]].tolist() == ["Leaky"]
    # Clean's 6/60 errors: interval 4.7 %-20.1 %, above the rest's 1/143 = 0.7 %
    assert fleet.index[fleet["error_worse"]].tolist() == ["Clean"]
    # Tiny leaked 1 in 3 (33 %, more than Leaky's 30 %) but its interval reaches down to 6 %
    assert fleet.loc["Tiny", "leak_rate"] > fleet.loc["Leaky", "leak_rate"]
    assert not fleet.loc["Tiny", "leak_worse"]
    assert fleet["leak_worse"].dtype == bool


def test_interval_columns_sit_beside_their_rate():
    cols = tables.by_backend(stream_table({"A": (2, 1, 0), "B": (2, 0, 0)})).columns.tolist()
    assert cols[:14] == [
        "serving_provider",
        "streams",
        "leaked",
        "leak_rate",
        "leak_rate_ci_low",
        "leak_rate_ci_high",
        "rest_leak_rate",
        "leak_worse",
        "errors",
        "error_rate",
        "error_rate_ci_low",
        "error_rate_ci_high",
        "rest_error_rate",
        "error_worse",
    ]


def test_a_backend_with_fewer_than_min_streams_is_never_flagged():
    # 1 leak in 1 stream: interval 20.7 %-100 %, above the rest's 3/61, but Fisher's exact
    # test of these counts gives p = 4/62
    st = stream_table({"One": (1, 1, 0), "Many": (61, 3, 0)})
    bb = tables.by_backend(st).set_index("serving_provider")
    assert bb.loc["One", "leak_rate_ci_low"] > bb.loc["One", "rest_leak_rate"]
    assert not bb.loc["One", "leak_worse"]
    assert tables.backend_verdicts(bb.reset_index())[:2] == [
        "Leaks: no backend is worse than the rest with 95 % confidence.",
        "Leaks: too few streams to tell: One (1 stream), Many (61 streams).",
    ]
    loose = tables.by_backend(st, min_streams=1).set_index("serving_provider")
    assert loose.loc["One", "leak_worse"]


def test_a_lone_backend_has_no_rest_and_no_flag():
    bb = tables.by_backend(stream_table({"Only": (50, 50, 0)}))
    assert pd.isna(bb.loc[0, "rest_leak_rate"]) and not bb.loc[0, "leak_worse"]
    assert tables.backend_verdicts(bb) == [
        "Leaks: 1 backend(s) in the table, nothing to compare them with.",
        "Errors: 1 backend(s) in the table, nothing to compare them with.",
    ]


def test_backend_verdicts_say_who_is_worse_better_and_too_small_to_tell(fleet):
    assert tables.backend_verdicts(fleet.reset_index()) == [
        "Leaks: worse than the rest with 95 % confidence: "
        "Leaky 12/40, 30.0 % (18.1–45.4 %) vs 1.8 % for the rest.",
        "Leaks: better than the rest with 95 % confidence: "
        "Spotless 0/100, 0.0 % (0.0–3.7 %) vs 14.6 % for the rest.",
        "Leaks: too few streams to tell: Tiny (3 streams), Clean (60 streams).",
        "Errors: worse than the rest with 95 % confidence: "
        "Clean 6/60, 10.0 % (4.7–20.1 %) vs 0.7 % for the rest.",
        # 1/100 reaches up to 5.4 %, the rest (6/103) failed 5.8 % of the time
        "Errors: better than the rest with 95 % confidence: "
        "Spotless 1/100, 1.0 % (0.2–5.4 %) vs 5.8 % for the rest.",
        "Errors: too few streams to tell: Tiny (3 streams), Leaky (40 streams).",
        f"Not compared: 5 streams that no backend served ({NO_BACKEND}).",
    ]


def test_backend_verdicts_when_nothing_leaked_or_failed():
    bb = tables.by_backend(stream_table({"A": (4, 0, 0), "B": (1, 0, 0)}))
    assert tables.backend_verdicts(bb) == [
        "Leaks: no backend had a single leak in 5 streams.",
        "Errors: no backend had a single error in 5 streams.",
    ]


def test_a_lower_confidence_narrows_the_intervals():
    st = stream_table({"A": (10, 5, 0), "B": (10, 0, 0)})
    bb = tables.by_backend(st, confidence=0.90).set_index("serving_provider")
    assert bb.loc["A", ["leak_rate_ci_low", "leak_rate_ci_high"]].round(4).tolist() == [
        0.2693,
        0.7307,
    ]


def test_leak_plot_draws_each_backends_interval_as_an_error_bar(fleet):
    bb = fleet.reset_index()
    fig = plots.leak_rate_by_backend(bb)
    ax = fig.axes[0]
    (bars,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    segments = bars.lines[2][0].get_segments()
    order = bb.sort_values("leak_rate")  # the plot draws the lowest rate at the bottom
    spans = [(round(s[0][0], 2), round(s[1][0], 2)) for s in segments]
    expected = [
        (round(lo * 100, 2), round(hi * 100, 2))
        for lo, hi in zip(order["leak_rate_ci_low"], order["leak_rate_ci_high"], strict=True)
    ]
    assert spans == expected
    labels = [t.get_text() for t in ax.texts]
    assert "12/40  worse" in labels and "1/3" in labels


def test_report_says_in_words_which_backends_are_worse():
    bb = tables.by_backend(stream_table({"<b>Leaky</b>": (40, 12, 0), "Clean": (60, 2, 0)}))
    page = report._verdicts(tables.backend_verdicts(bb))
    assert "Leaks: worse than the rest with 95 % confidence: &lt;b&gt;Leaky&lt;/b&gt;" in page
    assert "<b>" not in page


def test_leak_plot_of_a_lone_backend_draws_its_interval_and_no_rest_marker():
    bb = tables.by_backend(stream_table({"Only": (4, 1, 0)}))
    ax = plots.leak_rate_by_backend(bb).axes[0]
    (bars,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars.lines[2][0].get_segments()) == 1
    assert [c.get_label() for c in ax.collections if "rest" in str(c.get_label())] == []
    assert [t.get_text() for t in ax.get_yticklabels()] == ["Only"]
