"""Same model? The MMD test with the Hamming kernel, exactly, and on the fake models."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from lab.fakes.model_equality import sample_answer, slot_weights
from lab.sameness import (
    SAME_MODEL_COLUMNS,
    VERDICT_DIFFERS,
    VERDICT_NO_EVIDENCE,
    VERDICT_TOO_FEW,
    hamming_gram,
    mmd_test,
    outputs_frame,
    same_model,
)


def _brute_mmd2(texts, prompts, is_x, length):
    """The unbiased MMD² written out pair by pair."""

    def k(i, j):
        if prompts[i] != prompts[j]:
            return 0.0
        a, b = texts[i][:length], texts[j][:length]
        a, b = a + "\0" * (length - len(a)), b + "\0" * (length - len(b))
        return sum(x == y for x, y in zip(a, b, strict=True)) / length

    xs = [i for i, x in enumerate(is_x) if x]
    ys = [i for i, x in enumerate(is_x) if not x]
    m, n = len(xs), len(ys)
    sxx = sum(k(i, j) for i, j in itertools.permutations(xs, 2))
    syy = sum(k(i, j) for i, j in itertools.permutations(ys, 2))
    sxy = sum(k(i, j) for i in xs for j in ys)
    return sxx / (m * (m - 1)) + syy / (n * (n - 1)) - 2 * sxy / (m * n)


def test_hamming_gram_is_the_share_of_equal_positions_with_padding_equal_to_itself():
    gram = hamming_gram(["café", "cafe", "ca", ""], length=4)
    assert gram.tolist() == [
        [1.0, 0.75, 0.5, 0.0],
        [0.75, 1.0, 0.5, 0.0],
        [0.5, 0.5, 1.0, 0.5],
        [0.0, 0.0, 0.5, 1.0],
    ]
    assert hamming_gram(["abcdef", "abcxyz"], length=3).tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_mmd_statistic_is_the_unbiased_estimate_under_the_prompt_indicator_kernel():
    texts = ["Sure, at 8", "Sure, at 9", "Yes at 8", "Sure", "No idea", "Sure, at 8", "Nope"]
    prompts = ["a", "a", "a", "b", "b", "b", "a"]
    is_x = [True, False, True, True, False, False, False]
    stat, p = mmd_test(texts, prompts, is_x, length=6, permutations=50)
    assert stat == pytest.approx(_brute_mmd2(texts, prompts, is_x, 6), abs=1e-12)
    assert 0 < p <= 1


def test_the_permutation_p_value_of_disjoint_outputs_is_near_its_floor_and_the_same_each_run():
    texts = ["aaaaa"] * 10 + ["bbbbb"] * 10
    prompts = ["p"] * 20
    is_x = [True] * 10 + [False] * 10
    stat, p = mmd_test(texts, prompts, is_x, length=5, permutations=999)
    assert stat == 2.0  # 1 + 1 - 2 * 0: nothing shared between the sides
    # only the observed labelling and its swap reach it: 2 of 184,756; the seed drew one
    assert p == 2 / 1000
    assert mmd_test(texts, prompts, is_x, length=5, permutations=999) == (stat, p)
    # the padding after a 5-character output is shared too: 95 of 100 positions agree
    assert mmd_test(texts, prompts, is_x, permutations=99)[0] == pytest.approx(0.1)
    assert mmd_test(["x"] * 20, prompts, is_x, permutations=999) == (0.0, 1.0)


def test_mmd_needs_two_outputs_on_each_side():
    assert mmd_test(["a", "b", "c"], ["p"] * 3, [True, False, False])[1] == 1.0
    assert math.isnan(mmd_test(["a", "b", "c"], ["p"] * 3, [True, False, False])[0])


def _outputs(models: dict[str, str], prompts: int, k: int, seed: int) -> pd.DataFrame:
    rng = random.Random(seed)
    rows = []
    for backend, model in models.items():
        for i in range(prompts):
            for _ in range(k):
                prompt = f"prompt {i}"
                rows.append(
                    {
                        "serving_provider": backend,
                        "prompt": prompt,
                        "text": sample_answer(model, prompt, rng),
                    }
                )
    return pd.DataFrame(rows)


BACKENDS = {"Ref": "reference", "Clean": "reference", "Sub": "substituted"}


def test_a_substituted_model_differs_with_confidence_and_a_clean_backend_does_not():
    table = same_model(_outputs(BACKENDS, prompts=10, k=5, seed=11), reference="Ref")
    assert list(table.columns) == SAME_MODEL_COLUMNS
    rows = table.set_index("serving_provider")
    assert rows.loc["Sub", "same_model_verdict"] == VERDICT_DIFFERS
    assert rows.loc["Sub", "same_model_p"] == 1 / 1001
    assert rows.loc["Clean", "same_model_verdict"] == VERDICT_NO_EVIDENCE
    assert rows.loc["Clean", "same_model_p"] > 0.05
    assert rows.loc["Clean", ["prompts", "samples", "reference_samples"]].tolist() == [10, 50, 50]
    assert "Ref" not in rows.index


def test_without_a_reference_each_backend_is_compared_with_the_others_pooled():
    table = same_model(_outputs(BACKENDS, prompts=10, k=5, seed=3))
    rows = table.set_index("serving_provider")
    assert set(rows["reference"]) == {"(the other backends)"}
    assert rows.loc["Sub", "reference_samples"] == 100
    assert rows.loc["Sub", "same_model_verdict"] == VERDICT_DIFFERS


def test_too_few_samples_is_said_not_tested():
    few = _outputs(BACKENDS, prompts=3, k=3, seed=1)
    table = same_model(few, reference="Ref")
    assert set(table["same_model_verdict"]) == {VERDICT_TOO_FEW}
    assert table["same_model_p"].isna().all()
    once = _outputs(BACKENDS, prompts=12, k=1, seed=1)  # no prompt answered twice
    assert set(same_model(once, reference="Ref")["same_model_verdict"]) == {VERDICT_TOO_FEW}
    with pytest.raises(ValueError, match="reference 'Nobody' is not among the backends"):
        same_model(few, reference="Nobody")


def test_the_fake_models_weights_are_distributions_and_differ_as_documented():
    for model in ("reference", "substituted", "shifted"):
        for slot in range(8):
            assert sum(slot_weights(model, "p", slot)) == pytest.approx(1.0)
    ref = np.array(slot_weights("reference", "p", 0))
    shifted = np.array(slot_weights("shifted", "p", 0))
    assert np.argsort(ref).tolist() == np.argsort(shifted).tolist()  # same preference order
    assert shifted.max() < ref.max()  # flattened


def test_outputs_frame_reads_the_sweep_prompt_of_each_result():
    from lab.result import StreamResult

    results = [
        StreamResult(
            "a", "openrouter", text="hi", serving_provider="X", meta={"sweep": {"prompt": 2}}
        ),
        StreamResult("b", "openrouter", text="yo", meta={"sweep": {"prompt": 3, "target": "Y"}}),
        StreamResult("c", "openrouter", text="no sweep"),
    ]
    assert outputs_frame(results).to_dict("records") == [
        {"serving_provider": "X", "prompt": 2, "text": "hi"},
        {"serving_provider": "Y", "prompt": 3, "text": "yo"},
    ]


def test_a_sweep_over_the_fake_backends_finds_the_substituted_model(tmp_path):
    """The whole path: a sweep (each prompt K times to each backend) on loopback, replayed,
    its outputs tested per backend against DeepInfra."""
    from lab import sweep
    from lab.fakes import FakeServer
    from lab.replay import replay

    prompts = [{"prompt": f"Question {i}: where is the bakery?"} for i in range(8)]
    with FakeServer(delay_scale=0) as srv:
        base = srv.base_url + "/api/v1"
        backends = sweep.discover_backends("fake/model-equality", base_url=base)
        targets = sweep.openrouter_targets("fake/model-equality", backends, base_url=base)
        plan = sweep.sweep_plan("openrouter", prompts, targets, n=4)
        report = sweep.run_sweep(plan, provider="openrouter", out=tmp_path, progress=False)
    assert (report.sent, report.missing) == (160, 0)
    results = replay(tmp_path)
    table = same_model(results, reference="DeepInfra")
    verdicts = dict(zip(table["serving_provider"], table["same_model_verdict"], strict=True))
    assert verdicts["Novita"] == VERDICT_DIFFERS
    assert verdicts["Together"] == verdicts["Nebius"] == VERDICT_NO_EVIDENCE
    assert set(table["samples"]) == {32}
    # the report of a sweep has the section, each backend against the others pooled
    from lab.report import build_html

    page = build_html(results)
    section = page[page.index("<h2 id='sameness'>") : page.index("<h2 id='plots'>")]
    assert "<td>Novita</td><td>(the other backends)</td>" in section
    assert "differs with confidence" in section
    # its verdicts rest on Holm-adjusted p-values over the backends tested, as the scorecard's
    pooled = same_model(results)
    assert "<th>same_model_p_holm</th>" in section
    assert pooled["same_model_p_holm"].tolist() == pytest.approx(
        multipletests(pooled["same_model_p"], method="holm")[1].tolist()
    )
    for backend, verdict in zip(
        pooled["serving_provider"], pooled["same_model_verdict"], strict=True
    ):
        assert f"<td>{backend}</td><td>(the other backends)</td>" in section
        row = section[section.index(f"<td>{backend}</td><td>(the other backends)</td>") :]
        assert row[: row.index("</tr>")].endswith(f"<td>{verdict}</td>")
