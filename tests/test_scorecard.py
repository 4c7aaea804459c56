"""The backend scorecard: tool-call rows, trigger agreement, Fisher + Holm flags, sentences."""

from __future__ import annotations

import pandas as pd
import pytest
from scipy.stats import fisher_exact
from statsmodels.stats.multitest import multipletests

from lab import tables
from lab.model import FunctionCall, GuardEvent
from lab.result import StreamResult
from lab.scorecard import trigger_disagreement_lines, trigger_disagreements
from lab.stats import fisher_greater, holm

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


# --------------------------------------------------------------------------- statistics


@pytest.mark.parametrize(
    ("k1", "n1", "k2", "n2"),
    [
        (9, 10, 2, 10),
        (0, 5, 3, 40),
        (12, 40, 3, 120),
        (5, 5, 0, 5),
        (1, 1, 3, 61),
        (30, 50, 30, 50),
    ],
)
def test_fisher_greater_matches_scipy_on_fixed_tables(k1, n1, k2, n2):
    want = fisher_exact([[k1, n1 - k1], [k2, n2 - k2]], alternative="greater")[1]
    assert fisher_greater(k1, n1, k2, n2) == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_holm_matches_statsmodels_on_fixed_pvalues():
    p = [0.001, 0.04, 0.03, 0.5, 0.0002, 0.012, 0.2]
    want = multipletests(p, method="holm")[1]
    assert holm(p) == pytest.approx(list(want), rel=1e-12)


# --------------------------------------------------------------------------- fixtures


def _stream(
    sid: str,
    backend: str,
    *,
    calls: list[FunctionCall] | None = None,
    finish: str = "stop",
    markup: str | None = None,
    think: bool = False,
    error: bool = False,
    tools: list | None = TOOLS,
) -> StreamResult:
    from lab.model import ProviderError

    r = StreamResult(stream_id=sid, provider="openrouter", serving_provider=backend)
    r.function_calls = calls or []
    r.finish_reason = "tool_calls" if calls and finish == "stop" else finish
    if tools is not None:
        r.facts["request_tools"] = tools
    events = []
    if markup:
        events.append(
            GuardEvent(
                guard="markup",
                stream_id=sid,
                attempt=0,
                seq=1,
                offset=0,
                moved="",
                detail={"rule": "markup_detected", "kind": markup, "marker": "<x>"},
            )
        )
    if think:
        events.append(
            GuardEvent(
                guard="think_stripper",
                stream_id=sid,
                attempt=0,
                seq=1,
                offset=0,
                moved="plan",
                detail={"rule": "think_block"},
            )
        )
    r.guard_events = events
    if error:
        r.error = ProviderError(type="api_error", message="boom", retryable=True)
    return r


GOOD = FunctionCall(name="weather", args={"city": "Oslo"})
BAD = FunctionCall(name="weather", args={"city": 3})


# --------------------------------------------------------------------------- tool_calls table


def test_tool_calls_table_has_one_row_per_call_with_its_verdict():
    results = [
        _stream("a", "X", calls=[GOOD, BAD]),
        _stream("b", "Y", calls=[FunctionCall(name="nope", args={})]),
        _stream("c", "Y", finish="tool_calls"),
        _stream("d", "Y"),
    ]
    tc = tables.tool_calls(results)
    tc = tc.astype(object).where(tc.notna(), None)  # missing strings: NaN or None by pandas
    assert tc.drop(columns=["detail"]).to_dict("records") == [
        {
            "stream_id": "a",
            "serving_provider": "X",
            "position": 0,
            "name": "weather",
            "valid": True,
            "error_kind": None,
            "recovered_from": None,
        },
        {
            "stream_id": "a",
            "serving_provider": "X",
            "position": 1,
            "name": "weather",
            "valid": False,
            "error_kind": "schema_violation",
            "recovered_from": None,
        },
        {
            "stream_id": "b",
            "serving_provider": "Y",
            "position": 0,
            "name": "nope",
            "valid": False,
            "error_kind": "unknown_name",
            "recovered_from": None,
        },
        {
            "stream_id": "c",
            "serving_provider": "Y",
            "position": -1,
            "name": None,
            "valid": False,
            "error_kind": "finish_mismatch",
            "recovered_from": None,
        },
    ]
    assert tc["detail"].tolist()[1] == "$.city: 3 is not of type 'string'"


def test_streams_and_by_backend_count_valid_tool_calls_with_intervals():
    results = [_stream(f"x{i}", "X", calls=[GOOD]) for i in range(8)]
    results += [_stream(f"y{i}", "Y", calls=[BAD if i % 2 else GOOD]) for i in range(8)]
    st = tables.streams(results)
    assert st["tool_calls_checked"].tolist() == [1] * 16
    assert st["tool_error_kinds"].tolist()[8:10] == ["", "schema_violation"]
    bb = tables.by_backend(st).set_index("serving_provider")
    assert bb.loc["X", "tool_call_valid_rate"] == 1.0
    assert bb.loc["Y", "tool_call_valid_rate"] == 0.5
    assert bb.loc["Y", "tool_call_valid_rate_ci_low"] == pytest.approx(0.2152, abs=1e-4)
    assert bb.loc["Y", "tool_call_valid_rate_ci_high"] == pytest.approx(0.7848, abs=1e-4)


def test_streams_leak_kind_names_think_and_markup_classes():
    results = [
        _stream("a", "X", think=True),
        _stream("b", "X", markup="harmony"),
        _stream("c", "X"),
    ]
    results[2].text = "done<|im_end|>"  # still in the text, no guard event
    st = tables.streams(results)
    assert st["leak_kind"].tolist() == ["think", "harmony", "special_token"]
    assert st["leaked"].tolist() == [True, True, True]


# --------------------------------------------------------------------------- scorecard


def _sweep_table(rows: list[dict]) -> pd.DataFrame:
    results = [
        _stream(r["sid"], r["backend"], calls=r.get("calls"), markup=r.get("markup")) for r in rows
    ]
    st = tables.streams(results)
    st["sweep_key"] = [f"{r['backend']}|{r['prompt']}|{r['rep']}" for r in rows]
    st["sweep_prompt"] = [r["prompt"] for r in rows]
    return st


def _planted() -> pd.DataFrame:
    """Four backends, 20 prompts x 2 reps: A clean, B leaks harmony on every stream, C
    breaks the schema on every call, D never calls the tool."""
    rows = []
    for b in "ABCD":
        for p in range(20):
            for rep in range(2):
                wants_tool = p % 2 == 0
                calls = None
                if wants_tool and b != "D":
                    calls = [BAD if b == "C" else GOOD]
                rows.append(
                    {
                        "sid": f"{b}{p}-{rep}",
                        "backend": b,
                        "prompt": p + 1,
                        "rep": rep,
                        "calls": calls,
                        "markup": "harmony" if b == "B" else None,
                    }
                )
    return _sweep_table(rows)


def test_scorecard_flags_exactly_the_planted_backends_for_their_faults():
    card = tables.scorecard(_planted()).set_index("serving_provider")
    assert card["flags"].to_dict() == {
        "A": "",
        "B": "markup_leak,markup_harmony",
        "C": "tool_call_valid",
        "D": "trigger_agreement",
    }
    assert card.loc["B", "markup_leak_rate"] == 1.0
    assert card.loc["C", "tool_call_valid_rate"] == 0.0
    assert card.loc["C", "tool_call_valid_rest"] == 1.0
    # D: on the 10 tool prompts it does not call (20 of its 40 streams disagree)
    assert card.loc["D", "trigger_agreement_rate"] == 0.5
    assert card.loc["D", "trigger_agreement_n"] == 40


def test_verdict_plot_draws_each_backends_rate_interval_and_rest_and_marks_the_worse():
    from lab import plots

    card = tables.scorecard(_planted())
    ax = plots.verdict_by_backend(card, "markup_leak").axes[0]
    assert ax.get_title() == "Protocol markup leaked, by serving backend"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["A", "C", "D", "B"]  # by rate
    dots, rest = ax.collections[1], ax.collections[2]  # after the error bars' lines
    assert dots.get_offsets()[:, 0].tolist() == [0.0, 0.0, 0.0, 100.0]
    rows = card.set_index("serving_provider").loc[["A", "C", "D", "B"]]
    assert rest.get_offsets()[:, 0].tolist() == pytest.approx(
        (rows["markup_leak_rest"] * 100).tolist()
    )
    assert [t.get_text() for t in ax.texts] == ["n = 40", "n = 40", "n = 40", "n = 40  worse"]
    # a verdict no backend had a trial of
    empty = card.assign(markup_leak_n=0)
    assert plots.verdict_by_backend(empty, "markup_leak").axes[0].texts[0].get_text() == (
        "no stream to judge"
    )


def test_scorecard_p_values_are_fisher_then_holm_over_the_whole_card():
    card = tables.scorecard(_planted())
    p_cols = [f"{v}_p" for v in card.attrs["verdicts"]]  # the Fisher tests: one family
    raw = [p for c in p_cols for p in card[c] if p == p]
    adjusted = [q for c in p_cols for q in card[c + "_holm"] if q == q]
    assert adjusted == pytest.approx(list(multipletests(raw, method="holm")[1]), rel=1e-12)
    c = card.set_index("serving_provider").loc["C"]
    # C: 20 invalid of 20 calls against 0 of 40 for A and B (D made none)
    assert c["tool_call_valid_p"] == pytest.approx(
        fisher_exact([[20, 0], [0, 40]], alternative="greater")[1]
    )


def test_scorecard_sentences_say_the_flags_in_words():
    card = tables.scorecard(_planted())
    sentences = card.attrs["sentences"]
    assert sentences[0] == "A: not worse with confidence on any verdict (40 streams)."
    assert sentences[3].startswith(
        "C: worse with confidence on tool-call validity, 0.0 % (0.0–16.1 %) against 100.0 % "
        "for the rest (n = 20; one-sided Fisher p = "
    )
    assert sentences[-1].startswith("Worse with confidence: a one-sided Fisher exact test")


def test_scorecard_reference_backend_decides_trigger_agreement():
    st = _planted()
    ta = tables.trigger_agreement(st, reference="D").set_index("serving_provider")
    assert ta["agreement_rate"].to_dict() == {"A": 0.5, "B": 0.5, "C": 0.5, "D": 1.0}
    assert ta.loc["A", "disagreeing_prompts"] == ",".join(str(p + 1) for p in range(0, 20, 2))
    card = tables.scorecard(st, reference="D").set_index("serving_provider")
    assert card.loc["D", "trigger_agreement_worse"] == False  # noqa: E712 - a numpy bool


def test_trigger_disagreements_lists_each_prompt_a_backend_decided_otherwise():
    st = _planted()
    # majority: D alone leaves the tool uncalled on the 10 prompts that want it
    rows = trigger_disagreements(st)
    assert rows.to_dict("records") == [
        {"serving_provider": "D", "prompt": p, "decision": "", "expected": "weather", "streams": 2}
        for p in range(1, 20, 2)
    ]
    # against D, every other backend disagrees on those prompts, and D on none
    rows = trigger_disagreements(st, reference="D")
    assert sorted(set(rows["serving_provider"])) == ["A", "B", "C"]
    for backend, g in rows.groupby("serving_provider"):
        assert g["prompt"].tolist() == list(range(1, 20, 2)), backend
        assert set(g[["decision", "expected", "streams"]].itertuples(index=False)) == {
            ("weather", "", 2)
        }
    # the agreement table names the same prompts
    ta = tables.trigger_agreement(st).set_index("serving_provider")
    assert ta.loc["D", "disagreeing_prompts"] == ",".join(str(p) for p in range(1, 20, 2))
    assert ta.loc["A", "disagreeing_prompts"] == ""


def test_trigger_disagreement_lines_name_each_backend_and_its_prompt_lines():
    st = _planted()
    odd = "1, 3, 5, 7, 9, 11, 13, 15, 17, 19"
    assert trigger_disagreement_lines(st) == [
        f"D: tool decision unlike the majority's on 20 of 40 streams, prompt line(s) {odd}."
    ]
    assert trigger_disagreement_lines(st, reference="D") == [
        f"{b}: tool decision unlike the reference D's on 20 of 40 streams, prompt line(s) {odd}."
        for b in "ABC"
    ]
    # no line when every backend agreed; consecutive lines read as a range
    assert trigger_disagreement_lines(st[st["serving_provider"] != "D"]) == []
    ranged = st.copy()  # the tool prompts (odd lines) renumbered 1..10, the others 101..110
    ranged["sweep_prompt"] = ranged["sweep_prompt"].map(
        lambda p: (p + 1) // 2 if p % 2 else 100 + p // 2
    )
    assert trigger_disagreement_lines(ranged) == [
        "D: tool decision unlike the majority's on 20 of 40 streams, prompt line(s) 1–10."
    ]


def test_scorecard_with_one_backend_has_nothing_to_compare():
    card = tables.scorecard([_stream("a", "X")])
    assert card.attrs["sentences"] == ["1 backend(s) served streams: nothing to compare."]
    assert card["flags"].tolist() == [""]
