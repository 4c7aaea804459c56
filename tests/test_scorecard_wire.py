"""The scorecard where users see it: its latency and same-model columns, the compact table
``lab sweep`` prints, ``lab sweep --preset tools`` and ``--reference``, and the demo saying
which of its findings are planted."""

from __future__ import annotations

import random

import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from lab import tables
from lab.cli import main
from lab.fakes import FakeServer
from lab.fakes.model_equality import sample_answer
from lab.result import StreamResult
from lab.sameness import VERDICT_DIFFERS, VERDICT_NO_EVIDENCE, VERDICT_TOO_FEW, same_model
from lab.scorecard import SAME_MODEL_REFERENCE, compact_scorecard

# backend -> the model it serves (None: it answered only twice)
SERVED = {"R": "reference", "A": "reference", "B": "substituted", "C": None}
PROMPTS = [f"Question {i}: where is the bakery?" for i in range(6)]


def _sweep_table() -> pd.DataFrame:
    """A sweep's streams table: 6 prompts x 10 answers from R (the reference), A (the same
    model), B (another model); C answered two prompts once each. B leaked harmony markup
    on 3 of its 60 streams."""
    rng = random.Random(7)
    results, prompt_lines, heads = [], [], []
    for backend, model in SERVED.items():
        for line, prompt in enumerate(PROMPTS, 1):
            for rep in range(10 if model else (1 if line <= 2 else 0)):
                r = StreamResult(
                    stream_id=f"{backend}{line}-{rep}",
                    provider="openrouter",
                    serving_provider=backend,
                )
                r.text = sample_answer(model or "reference", prompt, rng)
                if backend == "B" and line <= 3 and rep == 0:
                    r.text = "<|channel|>final<|message|>" + r.text
                results.append(r)
                prompt_lines.append(line)
                heads.append(r.text[:100])
    st = tables.streams(results)
    st["sweep_prompt"] = pd.array(prompt_lines, dtype="Int64")
    st["output_head"] = heads
    return st


def test_scorecard_tests_each_backend_against_the_reference_with_holm_over_backends():
    st = _sweep_table()
    card = tables.scorecard(st, reference="R").set_index("serving_provider")
    frame = pd.DataFrame(
        {"serving_provider": st["serving_provider"], "prompt": st["sweep_prompt"].astype(int)}
    ).assign(text=st["output_head"])
    direct = same_model(frame, reference="R").set_index("serving_provider")
    tested = ["A", "B"]  # C: too few samples, not counted in the correction
    assert card.loc[tested, "same_model_p"].tolist() == direct.loc[tested, "same_model_p"].tolist()
    expected = multipletests(direct.loc[tested, "same_model_p"], method="holm")[1]
    assert card.loc[tested, "same_model_p_holm"].tolist() == pytest.approx(list(expected))
    assert card["same_model_verdict"].to_dict() == {
        "A": VERDICT_NO_EVIDENCE,
        "B": VERDICT_DIFFERS,
        "C": VERDICT_TOO_FEW,
        "R": SAME_MODEL_REFERENCE,
    }
    assert card["same_model_samples"].to_dict() == {"A": 60, "B": 60, "C": 2, "R": 60}
    assert card["same_model_against"].to_dict() == {"A": "R", "B": "R", "C": "R", "R": ""}
    assert card.loc["B", "flags"] == "same_model"
    sentences = card.attrs["sentences"]
    assert any(
        s
        == (
            "B: answers unlike those of the reference R with confidence: a different model or "
            "different serving (quantization, sampling, post-processing) (MMD two-sample test "
            "on 60 answers, permutation p = 0.001, Holm-adjusted 0.002)."
        )
        for s in sentences
    )
    assert sentences[-3:] == [
        "Same model: no evidence that A serves another model (not a proof of sameness: a "
        "small number of answers per prompt finds only large differences).",
        "Same model: too few samples to test C (each side needs 10 answers and a prompt "
        "answered at least twice: send each prompt several times).",
        "Same model: a maximum-mean-discrepancy two-sample test of each backend's answers "
        "against the reference backend, prompt by prompt (Hamming kernel over the first 100 "
        "characters; p-value from 1000 relabellings within each prompt; Gao et al., ICLR "
        "2025), Holm-adjusted over the 2 backend(s) tested, below 0.05.",
    ]


def test_without_a_reference_each_backend_is_tested_against_the_others_pooled():
    card = tables.scorecard(_sweep_table()).set_index("serving_provider")
    assert set(card["same_model_against"]) == {"the other backends"}
    assert card["same_model_p"].notna().to_dict() == {"A": True, "B": True, "C": False, "R": True}


def test_a_reference_that_answered_nothing_leaves_every_backend_untested():
    st = _sweep_table()
    st.loc[st["serving_provider"] == "R", "error_type"] = "api_error"
    card = tables.scorecard(st, reference="R").set_index("serving_provider")
    assert card["same_model_verdict"].to_dict() == {
        "A": VERDICT_TOO_FEW,
        "B": VERDICT_TOO_FEW,
        "C": VERDICT_TOO_FEW,
        "R": SAME_MODEL_REFERENCE,
    }


def test_the_compact_scorecard_shows_each_rate_with_its_interval_and_star():
    card = tables.scorecard(_sweep_table(), reference="R")
    view = compact_scorecard(card)
    p_b = card.set_index("serving_provider").loc["B", "same_model_p_holm"]
    p_a = card.set_index("serving_provider").loc["A", "same_model_p_holm"]
    # untimed results: no latency columns; errors, think leaks: none anywhere (a sentence)
    assert view.to_dict("records") == [
        {
            "backend": "A",
            "streams": 60,
            "markup": "0 % (0–6 %)",
            "same model": f"no evidence p={p_a:.2g}",
        },
        {
            "backend": "B",
            "streams": 60,
            "markup": "5 % (2–14 %)",
            "same model": f"differs p={p_b:.2g}*",
        },
        {"backend": "C", "streams": 2, "markup": "0 % (0–66 %)", "same model": "too few"},
        {"backend": "R", "streams": 60, "markup": "0 % (0–6 %)", "same model": "reference"},
    ]
    assert (
        "The same on every backend: reasoning leaked into the answer (none of 182); errors "
        "(none of 182); streams that stalled (a gap between content reads over stall_s) (none "
        "of 182)."
    ) in card.attrs["sentences"]


def test_the_scorecard_carries_ttft_median_and_p90_with_bootstrap_intervals():
    from lab.stats import bootstrap_quantile_intervals

    st = _sweep_table()
    st["timed"] = True
    ttft = [10.0 + (i * 7) % 13 for i in range(len(st))]
    st["ttft_ms"] = ttft
    card = tables.scorecard(st).set_index("serving_provider")
    mine = [t for t, b in zip(ttft, st["serving_provider"], strict=True) if b == "A"]
    (lo50, hi50), (lo90, hi90) = bootstrap_quantile_intervals(mine, [0.5, 0.9])
    row = card.loc["A"]
    assert row["ttft_ms_p50"] == pytest.approx(pd.Series(mine).quantile(0.5))
    assert row["ttft_ms_p90"] == pytest.approx(pd.Series(mine).quantile(0.9))
    assert (row["ttft_ms_p50_ci_low"], row["ttft_ms_p50_ci_high"]) == (lo50, hi50)
    assert (row["ttft_ms_p90_ci_low"], row["ttft_ms_p90_ci_high"]) == (lo90, hi90)
    view = compact_scorecard(tables.scorecard(st)).set_index("backend")
    assert view.loc["A", "ttft p50"] == f"{row['ttft_ms_p50']:.0f} ({lo50:.0f}–{hi50:.0f})"
    assert view.loc["A", "ttft p90"] == f"{row['ttft_ms_p90']:.0f} ({lo90:.0f}–{hi90:.0f})"


def test_a_backend_slower_to_first_token_is_flagged_by_mann_whitney_with_holm():
    from scipy.stats import mannwhitneyu

    st = _sweep_table()
    st["timed"] = True
    # B is about 300 ms slower; A, C and R draw from one law (a fixed pattern, no seed)
    st["ttft_ms"] = [
        (400.0 if b == "B" else 100.0) + (i * 37) % 50 for i, b in enumerate(st["serving_provider"])
    ]
    card = tables.scorecard(st).set_index("serving_provider")
    backends = ["A", "B", "C", "R"]
    want = []
    for b in backends:
        mine = st.loc[st["serving_provider"] == b, "ttft_ms"]
        rest = st.loc[st["serving_provider"] != b, "ttft_ms"]
        want.append(mannwhitneyu(mine, rest, alternative="greater").pvalue)
        assert card.loc[b, "ttft_ms_rest_p50"] == rest.median()
    assert card.loc[backends, "ttft_ms_p"].tolist() == pytest.approx(want, rel=1e-9)
    assert card.loc[backends, "ttft_ms_p_holm"].tolist() == pytest.approx(
        list(multipletests(want, method="holm")[1]), rel=1e-9
    )
    assert card["ttft_ms_worse"].to_dict() == {"A": False, "B": True, "C": False, "R": False}
    assert card.loc["B", "flags"].split(",") == ["ttft_ms", "same_model"]
    b = card.loc["B"]
    assert (b["ttft_ms_p50"], b["ttft_ms_p50_ci_low"], b["ttft_ms_p50_ci_high"]) == (425, 419, 431)
    assert (
        "B: slower with confidence on time to first token, median 425.0 ms (419.0–431.0 ms) "
        "against 124.0 ms for the rest (n = 60; one-sided Mann–Whitney p = "
        f"{b['ttft_ms_p']:.2g}, Holm-adjusted over the backends {b['ttft_ms_p_holm']:.2g})."
    ) in card.attrs["sentences"]
    assert any(s.startswith("Slower with confidence: a one-sided Mann–Whitney U test") for s in
               card.attrs["sentences"])  # fmt: skip
    view = compact_scorecard(tables.scorecard(st)).set_index("backend")
    assert view.loc["B", "ttft p50"].endswith("*")
    assert not view.loc["A", "ttft p50"].endswith("*")


# --------------------------------------------------------------------------- lab sweep


def _sweep(srv: FakeServer, tmp_path, *argv: str) -> int:
    return main(
        ["sweep", "--provider", "openrouter", "--base-url", srv.base_url + "/api/v1"]
        + ["--out", str(tmp_path / "o"), "--quiet", *argv]
    )


def test_lab_sweep_preset_tools_sends_the_shipped_prompts_with_their_tools(tmp_path, capsys):
    with FakeServer(delay_scale=0) as srv:
        rc = _sweep(
            srv, tmp_path, "--model", "fake/tools", "--preset", "tools", "--n", "1",
            "--backends", "DeepInfra,Together",
        )  # fmt: skip
        chats = [r for r in srv.requests if r.method == "POST"]
    out = capsys.readouterr().out
    assert rc == 0
    assert len(chats) == 108 and all(len(r.body["tools"]) == 4 for r in chats)
    assert "2 target(s) x 54 prompt(s) x 1 = 108 planned; 0 done before, 108 now" in out
    lines = out.splitlines()
    head = lines.index("== backend scorecard (2 rows) ==") + 1
    # the rate columns (ttft p50 and p90 at the right are timings: not compared here)
    assert [ln[:49].rstrip() for ln in lines[head : head + 3]] == [
        "backend    streams  valid calls       same model",
        "DeepInfra       54  100 % (89–100 %)  too few",
        "Together        54  40 % (25–58 %)*   too few",
    ]
    assert (
        "(rate (95 % interval); * worse with confidence than the other backends, or a "
        "different model (Holm-adjusted p); ttft: time to first token in ms)"
    ) in lines
    assert any(
        ln.startswith(
            "Together: worse with confidence on tool-call validity, 40.0 % (24.6–57.7 %) "
            "against 100.0 % for the rest (n = 30; one-sided Fisher p = "
        )
        for ln in lines
    )
    assert (
        "The same on every backend: reasoning leaked into the answer (none of 108); protocol "
        "markup leaked (none of 108); errors (none of 108); streams that stalled (a gap "
        "between content reads over stall_s) (none of 108); tool-call trigger agreement "
        "(all 108)."
    ) in lines


def test_lab_sweep_lists_the_prompt_lines_where_a_backend_decided_otherwise(tmp_path, capsys):
    """Novita (fake/tools) writes its calls as markup in the content, so it makes no call
    on the 30 prompts that want one: lab sweep says so under the scorecard, by line."""
    with FakeServer(delay_scale=0) as srv:
        rc = _sweep(
            srv, tmp_path, "--model", "fake/tools", "--preset", "tools", "--n", "1",
            "--backends", "DeepInfra,Novita", "--reference", "DeepInfra",
        )  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0
    said = [ln for ln in lines if "tool decision unlike" in ln]
    assert said == [
        "Novita: tool decision unlike the reference DeepInfra's on 30 of 54 streams, "
        "prompt line(s) 1–30."
    ]
    assert lines.index(said[0]) > lines.index("== backend scorecard against DeepInfra (2 rows) ==")


def test_lab_sweep_with_a_reference_ends_with_the_same_model_verdicts(tmp_path, capsys):
    with FakeServer(delay_scale=0) as srv:
        rc = _sweep(
            srv, tmp_path, "--model", "fake/model-equality", "--prompts",
            str(_data("sameness_prompts.jsonl")), "--n", "5", "--concurrency", "1",
            "--backends", "DeepInfra,Together,Novita", "--reference", "DeepInfra",
        )  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    lines = out.splitlines()
    head = lines.index("== backend scorecard against DeepInfra (3 rows) ==") + 1
    assert [ln[:38].rstrip() for ln in lines[head : head + 4]] == [
        "backend    streams  same model",
        "DeepInfra       50  reference",
        "Novita          50  differs p=0.002*",
        "Together        50  no evidence p=0.44",
    ]
    assert (
        "Novita: answers unlike those of the reference DeepInfra with confidence: a different "
        "model or different serving (quantization, sampling, post-processing) (MMD two-sample "
        "test on 50 answers, permutation p = 0.001, Holm-adjusted 0.002)."
    ) in lines
    assert (
        "Same model: no evidence that Together serves another model (not a proof of "
        "sameness: a small number of answers per prompt finds only large differences)."
    ) in lines


def _data(name: str):
    from pathlib import Path

    import lab

    return Path(lab.__file__).parent / "data" / name


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--preset", "nope"], "--preset 'nope': no such prompt set; known: tools"),
        (
            ["--preset", "tools", "--prompts", "x.jsonl"],
            "argument --prompts: not allowed with argument --preset",
        ),
    ],
)
def test_lab_sweep_refuses_a_bad_preset_before_sending(tmp_path, capsys, argv, message):
    argv = ["sweep", "--provider", "openrouter", "--model", "x/y", "--backends", "A", *argv]
    argv += ["--base-url", "http://127.0.0.1:9/api/v1", "--out", str(tmp_path / "o")]
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's own refusals
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and err.strip().splitlines()[-1].endswith(message)
    assert not (tmp_path / "o").exists()


# --------------------------------------------------------------------------- lab demo


def test_the_demo_same_model_sweep_finds_the_substituted_backend_and_says_it_is_planted(
    tmp_path, capsys
):
    from lab.cli.demo import _demo_sweep
    from lab.demo import DEMO_SWEEPS

    (spec,) = [s for s in DEMO_SWEEPS if s.model == "fake/model-equality"]
    card = _demo_sweep(spec, tmp_path / "sweep", quiet=True)
    out = capsys.readouterr().out
    assert card.set_index("serving_provider")["flags"].to_dict() == {
        "DeepInfra": "",
        "Fireworks": "",
        "Nebius": "",
        "Novita": "same_model",
        "Together": "",
    }
    assert out[out.index("Planted by the fake server") :].splitlines() == [
        "Planted by the fake server in fake/model-equality (scripted scenarios, not findings "
        "about any real provider):",
        "- Novita: a substituted model: found (flagged: same_model).",
        "- Fireworks: the reference model with a small shift (flattened sampling): not found "
        "at this size: a small shift needs many answers per prompt (docs/sameness.md: power "
        "at K).",
        "- DeepInfra, Nebius, Together: nothing planted: flagged for nothing.",
    ]


# --------------------------------------------------------------------------- replay --compare


def test_replay_compare_complete_shows_the_calls_recovered_from_leaked_markup(tmp_path, capsys):
    """Novita (fake/tools) writes its call as a Kimi K2 tool section in the content: the
    reference keeps it as text (a markup_leak), complete() recovers it as a real call."""
    import json

    from lab.recorder import Recorder

    (line,) = [
        ln
        for ln in _data("tools_prompts.jsonl").read_text(encoding="utf-8").splitlines()
        if "Lisbon" in ln
    ]
    body = json.loads(line)
    body.update(model="fake/tools", provider={"order": ["Novita"], "allow_fallbacks": False})
    with FakeServer(delay_scale=0) as srv, Recorder(tmp_path / "rec") as rec:
        (result,) = [rec.record("openrouter", body, base_url=srv.base_url + "/api/v1")]
    assert result.function_calls == [] and "<|tool_calls_section_begin|>" in result.text
    assert main(["replay", str(tmp_path / "rec"), "--compare", "complete"]) == 0
    out = capsys.readouterr().out
    section = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
        '<|tool_call_argument_begin|>{"city": "Lisbon"}<|tool_call_end|>'
        "<|tool_calls_section_end|>"
    )
    sid = result.stream_id
    assert out.splitlines()[2:] == [
        "== 1 stream whose output changed under complete against defaults (2 fields: text 1, "
        "function_calls 1) ==",
        "",
        f"--- {sid} (Novita): text",
        "--- defaults",
        "+++ complete",
        "@@ -1 +0,0 @@",
        f"-{section}",
        "",
        f"--- {sid} (Novita): function_calls",
        "defaults: []",
        'complete: [{"name": "get_weather", "args": {"city": "Lisbon"}, "id": '
        '"functions.get_weather:0", "thought_signature": null, "arguments_truncated": false, '
        '"provider_fields": {"recovered_from": "kimi_tool_section"}}]',
    ]


def test_lab_sweep_help_names_the_scorecard_and_prints_percent_once(capsys):
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "print the backend scorecard" in text
    assert "with its Wilson 95 % interval" in text and "%%" not in text
    assert "--preset NAME" in text and "--reference TARGET" in text
