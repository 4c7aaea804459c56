"""Calibration by simulation: under no difference, lab.compare and the same-model test flag
no more than their stated level over 500 seeds (slow: about two minutes).

Recorded figures (``python -m pytest -q -m slow tests/test_calibration.py``) are in
``docs/compare.md`` and ``docs/sameness.md``.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pandas as pd
import pytest

from lab.changes import compare_runs
from lab.fakes.model_equality import sample_answer
from lab.sameness import VERDICT_DIFFERS, same_model

SEEDS = 500
ALPHA = 0.05
# the level plus two standard errors of a rate estimated from SEEDS runs
ALLOWED = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / SEEDS)


def _run(rng: np.random.Generator, backend: str, n: int) -> pd.DataFrame:
    """One run of one backend with fixed rates and a fixed latency distribution."""
    return pd.DataFrame(
        {
            "stream_id": [f"{backend}-{i}" for i in range(n)],
            "provider": "openrouter",
            "serving_provider": backend,
            "leaked": rng.random(n) < 0.15,
            "error_type": np.where(rng.random(n) < 0.08, "api_error", None),
            "timed": True,
            "stalls": (rng.random(n) < 0.1).astype(int),
            "ttfb_ms": rng.lognormal(5.0, 0.4, n),
            "ttft_ms": rng.lognormal(6.0, 0.5, n),
            "ttft_content_ms": rng.lognormal(6.5, 0.5, n),
            "gap_p99_ms": rng.lognormal(4.0, 0.8, n),
            "tokens_per_s": rng.normal(60.0, 12.0, n),
        }
    )


@pytest.mark.slow
def test_compare_flags_no_more_runs_than_its_level_when_nothing_changed():
    flagged = 0
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        a = pd.concat([_run(rng, b, n) for b, n in (("A", 40), ("B", 60), ("C", 25))])
        b = pd.concat([_run(rng, b, n) for b, n in (("A", 45), ("B", 50), ("C", 30))])
        table = compare_runs(a, b, n_boot=1)  # the intervals play no part in the verdict
        assert len(table) == 24
        flagged += bool(table["changed"].any())
    rate = flagged / SEEDS
    print(f"compare: {flagged}/{SEEDS} = {rate:.3f} of null runs had any change (Holm, 0.05)")
    assert rate <= ALLOWED


@pytest.mark.slow
def test_the_same_model_test_flags_a_clean_backend_no_more_than_its_level():
    flagged = 0
    prompts = [f"prompt {i}" for i in range(6)]
    for seed in range(SEEDS):
        rng = random.Random(seed)
        rows = [
            {"serving_provider": b, "prompt": p, "text": sample_answer("reference", p, rng)}
            for b in ("Ref", "Clean")
            for p in prompts
            for _ in range(5)
        ]
        table = same_model(pd.DataFrame(rows), reference="Ref", permutations=200, seed=seed)
        flagged += table["same_model_verdict"].iloc[0] == VERDICT_DIFFERS
    rate = flagged / SEEDS
    print(f"same model: {flagged}/{SEEDS} = {rate:.3f} clean backends flagged (alpha 0.05)")
    assert rate <= ALLOWED


@pytest.mark.slow
def test_the_slower_than_rest_flag_fires_no_more_than_its_level_when_backends_are_alike():
    from lab.scorecard import slower_than_rest

    flagged = 0
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        streams = pd.concat([_run(rng, b, n) for b, n in (("A", 40), ("B", 60), ("C", 25))])
        flagged += bool(slower_than_rest(streams, "ttft_ms")["worse"].any())
    rate = flagged / SEEDS
    print(f"slower than rest: {flagged}/{SEEDS} = {rate:.3f} null cards flagged (Holm, 0.05)")
    assert rate <= ALLOWED


def test_the_slower_than_rest_flag_finds_a_backend_a_third_slower():
    from lab.scorecard import slower_than_rest

    found = 0
    for seed in range(50):
        rng = np.random.default_rng(seed)
        runs = [_run(rng, b, n) for b, n in (("A", 40), ("B", 60), ("C", 25))]
        runs[2]["ttft_ms"] *= 1.5
        table = slower_than_rest(pd.concat(runs), "ttft_ms")
        found += table["worse"].to_dict() == {"A": False, "B": False, "C": True}
    assert found >= 40  # power at n = 25 against 100 others, one-sided, Holm over three
