"""The demo's tools sweep: its scorecard flags exactly the planted fake backends, each for
its planted fault (``lab.fakes.tools``), and no clean one."""

from __future__ import annotations

from lab import tables
from lab.demo import DEMO_SWEEPS, DEMO_TOOLS_MODEL, planted_sentences, tools_sweep
from lab.fakes.tools import SCHEMA_BREAK_RATE, TOOLS_BACKENDS
from lab.scorecard import LATENCY_TESTED, trigger_disagreement_lines


def _without_timing(card):
    """The scorecard without its slower-to-first-token flags: those time the fake server on
    this machine (every fake backend answers at the same pace, so on a loaded machine one
    may come out slower by chance), and this test is about the planted faults."""
    card = card.copy()
    card["flags"] = [
        ",".join(f for f in flags.split(",") if f and f not in LATENCY_TESTED)
        for flags in card["flags"]
    ]
    return card


def test_demo_tools_sweep_scorecard_flags_exactly_the_planted_faults(tmp_path):
    report, st = tools_sweep(tmp_path / "sweep")
    assert (report.missing, report.errors) == (0, [])
    assert sorted(st["serving_provider"].unique()) == sorted(TOOLS_BACKENDS)
    card = _without_timing(tables.scorecard(st)).set_index("serving_provider")
    assert card["flags"].to_dict() == {
        "DeepInfra": "",
        "Fireworks": "",
        # harmony channels in content on every answer
        "Parasail": "markup_leak,markup_harmony",
        # calls written as markup in content: leaked, and no tool_calls made
        "Novita": "markup_leak,markup_kimi_tool_section,trigger_agreement",
        "SiliconFlow": "markup_leak,markup_xml_tool_call,trigger_agreement",
        # the schema broken on a share of calls
        "Together": "tool_call_valid",
    }
    # the intervals exclude the clean backends' rates
    together = card.loc["Together"]
    assert together["tool_call_valid_ci_high"] < together["tool_call_valid_rest"] == 1.0
    broken = 1 - together["tool_call_valid_rate"]
    assert abs(broken - SCHEMA_BREAK_RATE) < 0.2
    for backend in ("Novita", "SiliconFlow"):
        row = card.loc[backend]
        assert row["trigger_agreement_ci_high"] < row["trigger_agreement_rest"]
    sentences = card.attrs["sentences"]
    assert any(
        s.startswith("Together: worse with confidence on tool-call validity, ") for s in sentences
    )
    assert any(  # the sentence DeepInfra gets, or, slower by chance here, its timing one
        s == "DeepInfra: not worse with confidence on any verdict (54 streams)."
        or s.startswith("DeepInfra: slower with confidence on time to first token")
        for s in sentences
    )
    # each planted backend's interval lies clear of the clean backends' intervals
    clean = card.loc[["DeepInfra", "Fireworks"]]
    for backend, verdict in (
        ("Parasail", "markup_harmony"),
        ("Novita", "markup_kimi_tool_section"),
        ("SiliconFlow", "markup_xml_tool_call"),
    ):
        assert card.loc[backend, f"{verdict}_ci_low"] > clean[f"{verdict}_ci_high"].max()
        assert card.loc[backend, "markup_leak_ci_low"] > clean["markup_leak_ci_high"].max()
    assert together["tool_call_valid_ci_high"] < clean["tool_call_valid_ci_low"].min()
    # the prompts where the markup writers made no call: the 30 that want a tool
    assert trigger_disagreement_lines(st) == [
        f"{b}: tool decision unlike the majority's on 30 of 54 streams, prompt line(s) 1–30."
        for b in ("Novita", "SiliconFlow")
    ]
    # what lab demo prints under the scorecard: every planted fault found, nothing else
    (spec,) = [s for s in DEMO_SWEEPS if s.model == DEMO_TOOLS_MODEL]
    assert planted_sentences(spec, _without_timing(tables.scorecard(st))) == [
        "Planted by the fake server in fake/tools (scripted scenarios, not findings about any "
        "real provider):",
        "- Parasail: gpt-oss harmony channels in the content of every answer: found (flagged: "
        "markup_harmony, markup_leak).",
        "- Novita: its calls written as Kimi K2 tool sections in the content, no tool_calls: "
        "found (flagged: markup_kimi_tool_section, markup_leak, trigger_agreement).",
        "- SiliconFlow: its calls written as GLM <tool_call> XML in the content, no "
        "tool_calls: found (flagged: markup_leak, markup_xml_tool_call, trigger_agreement).",
        "- Together: the tool schema broken on 40 % of its calls: found (flagged: "
        "tool_call_valid).",
        "- DeepInfra, Fireworks: nothing planted: flagged for nothing.",
    ]
    # the per-call table agrees with the counts
    kinds = st.loc[st["serving_provider"] == "Together", "tool_error_kinds"]
    assert set(",".join(kinds).replace(",", " ").split()) <= {
        "missing_required",
        "schema_violation",
    }
