"""Same model? A two-sample test per backend on its outputs (analysis: pure numpy).

Backends that claim to serve one model can serve another: a quantized or fine-tuned
variant, a different model altogether, wrong sampling settings. Gao, Liang & Guestrin,
"Model Equality Testing: Which Model Is This API Serving?" (ICLR 2025, arXiv:2410.20247),
treat it as a two-sample problem over (prompt, completion) pairs and test it with the
maximum mean discrepancy (MMD) under a simple string kernel: about 10 samples per prompt
gave a median 77 % power against a range of distortions, and 11 of 31 Llama endpoints
differed from Meta's weights. This module does the same on a sweep's outputs (each prompt
sent K times to each backend), per backend against a reference backend or, without one,
against the pooled other backends.

**The kernel.** Over pairs (prompt, output text)::

    k((p, x), (p', y)) = 1[p == p'] * (1/L) * #{ l < L : x[l] == y[l] }

— the paper's Hamming kernel over characters: the first ``L`` characters
(:data:`SAME_MODEL_CHARS`, 100) of both outputs, an output shorter than ``L`` padded with a
symbol no character equals but the padding itself, so two outputs that end at the same place
agree there. Outputs of different prompts are never compared (the prompt indicator), so the
test asks whether, prompt by prompt, the outputs come from one distribution. No model, no
tokenizer, no download.

**The statistic** is the unbiased estimate of MMD² (Gretton et al. 2012):
``mean k(x, x') over pairs of the backend + mean k(y, y') over pairs of the reference -
2 mean k(x, y)``. **The p-value** comes from :data:`SAME_MODEL_PERMUTATIONS` (1000) random
relabellings with a fixed seed, *within each prompt* (stratified: each prompt keeps how many
outputs each side has), ``(1 + #{MMD²_perm >= MMD²}) / (1000 + 1)``: exact under "same
model" whatever the outputs look like, so a clean backend is flagged at most at the stated
level ``alpha`` (checked over 500 seeds in ``tests/test_sameness_calibration.py``).

**Verdicts** (``same_model_verdict``) rest on ``same_model_p_holm``: the p-values of the
backends tested, adjusted with Holm's step-down procedure over those backends (one family:
testing every backend of a sweep is several comparisons; :func:`lab.stats.holm`). They are
``differs with confidence`` (adjusted p < alpha, 0.05), ``no evidence`` (adjusted p >=
alpha: not a proof of sameness; a small K has little power), or
``too few samples``: fewer than :data:`SAME_MODEL_MIN_SAMPLES` outputs on either side over
the prompts both answered, or no prompt answered at least twice on both sides. The power
measured on the lab's fake backends at several K is in ``docs/sameness.md``.

Against the pooled others, a backend is compared with a mixture: when one backend serves a
different model, the others' pooled reference carries part of it. Name a trusted backend
(``reference="DeepInfra"``, the model author's own endpoint) for the cleanest comparison.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from lab.stats import BOOTSTRAP_SEED, holm

__all__ = [
    "SAME_MODEL_ALPHA",
    "SAME_MODEL_CHARS",
    "SAME_MODEL_COLUMNS",
    "SAME_MODEL_MIN_SAMPLES",
    "SAME_MODEL_PERMUTATIONS",
    "VERDICT_DIFFERS",
    "VERDICT_NO_EVIDENCE",
    "VERDICT_TOO_FEW",
    "hamming_gram",
    "mmd_test",
    "outputs_frame",
    "same_model",
]

SAME_MODEL_CHARS = 100
"""L: the characters of each output the Hamming kernel compares."""
SAME_MODEL_PERMUTATIONS = 1000
"""Relabellings behind each p-value (the smallest p-value possible is 1/1001)."""
SAME_MODEL_MIN_SAMPLES = 10
"""Fewer outputs than this on either side (over the prompts both answered): too few."""
SAME_MODEL_ALPHA = 0.05
"""The level below which a backend ``differs with confidence``."""
VERDICT_DIFFERS = "differs with confidence"
VERDICT_NO_EVIDENCE = "no evidence"
VERDICT_TOO_FEW = "too few samples"

SAME_MODEL_COLUMNS = [
    "serving_provider",
    "reference",
    "prompts",
    "samples",
    "reference_samples",
    "mmd2",
    "same_model_p",
    "same_model_p_holm",
    "same_model_verdict",
]
_PAD = -1  # the padding code: equal only to itself


def _codes(texts: Iterable[str], length: int) -> np.ndarray:
    """``(n, length)`` code points of the first ``length`` characters, padded with -1."""
    texts = list(texts)
    out = np.full((len(texts), length), _PAD, dtype=np.int32)
    for i, text in enumerate(texts):
        head = text[:length]
        if head:
            out[i, : len(head)] = np.frombuffer(head.encode("utf-32-le"), dtype=np.uint32)
    return out


def hamming_gram(texts: Iterable[str], *, length: int = SAME_MODEL_CHARS) -> np.ndarray:
    """The Hamming kernel between every two of ``texts``: the share of the first ``length``
    positions where both hold the same character (or both have ended).

    >>> hamming_gram(["abcd", "abXd", "ab"], length=4).tolist()
    [[1.0, 0.75, 0.5], [0.75, 1.0, 0.5], [0.5, 0.5, 1.0]]
    """
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length!r}")
    codes = _codes(texts, length)
    return (codes[:, None, :] == codes[None, :, :]).mean(axis=2)


def _block_sums(gram: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per row of ``labels`` (1 = the backend, 0 = the reference): the kernel sums over
    pairs within the backend, within the reference (diagonal left out) and across."""
    x = labels.astype(float)
    y = 1.0 - x
    gx, gy = x @ gram, y @ gram
    diag = np.diag(gram)
    sxx = (gx * x).sum(axis=1) - x @ diag
    syy = (gy * y).sum(axis=1) - y @ diag
    sxy = (gx * y).sum(axis=1)
    return sxx, syy, sxy


def mmd_test(
    texts: list[str],
    prompts: list[Any],
    is_x: list[bool],
    *,
    length: int = SAME_MODEL_CHARS,
    permutations: int = SAME_MODEL_PERMUTATIONS,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """``(mmd2, p)``: the unbiased MMD² between the outputs marked ``is_x`` and the others
    under the prompt-indicator Hamming kernel, and its stratified permutation p-value
    (labels shuffled within each prompt, fixed ``seed``). Each side needs at least 2
    outputs; ``(nan, 1.0)`` otherwise.
    """
    if not (len(texts) == len(prompts) == len(is_x)):
        raise ValueError("texts, prompts and is_x must have the same length")
    if permutations < 1:
        raise ValueError(f"permutations must be >= 1, got {permutations!r}")
    marks = np.asarray(is_x, dtype=bool)
    m, n = int(marks.sum()), int((~marks).sum())
    if m < 2 or n < 2:
        return (math.nan, 1.0)
    rng = np.random.default_rng(seed)
    observed = np.zeros(3)
    permuted = np.zeros((3, permutations))
    groups = pd.Series(range(len(texts))).groupby(pd.Series(prompts, dtype=object), sort=True)
    for _, where in groups:
        idx = where.to_numpy()
        gram = hamming_gram([texts[i] for i in idx], length=length)
        labels = marks[idx]
        observed += np.array([s[0] for s in _block_sums(gram, labels[None, :])])
        shuffled = rng.permuted(np.broadcast_to(labels, (permutations, len(idx))), axis=1)
        permuted += np.vstack(_block_sums(gram, shuffled))

    # each sum divided by its count, then added: a dot product with the reciprocals may
    # go through BLAS (fused multiply-adds on some CPUs) and leave -4e-17 where the sides
    # are identical; the observed and permuted statistics take the same steps
    def statistic(sums: np.ndarray) -> np.ndarray:
        return sums[0] / (m * (m - 1)) + sums[1] / (n * (n - 1)) - 2.0 * sums[2] / (m * n)

    stat = float(statistic(observed))
    null = statistic(permuted)
    p = (1 + int((null >= stat - 1e-12).sum())) / (permutations + 1)
    return (stat, p)


def outputs_frame(results: Iterable[Any]) -> pd.DataFrame:
    """``serving_provider``, ``prompt``, ``text`` per result of a sweep (the prompt is the
    sweep's prompt line, ``meta["sweep"]["prompt"]``); results that are not part of a
    sweep, and failed ones, are left out."""
    rows = []
    for r in results:
        sweep = (r.meta or {}).get("sweep") if isinstance(r.meta, dict) else None
        if not isinstance(sweep, dict) or sweep.get("prompt") is None or r.error is not None:
            continue
        rows.append(
            {
                "serving_provider": r.serving_provider or sweep.get("target"),
                "prompt": sweep["prompt"],
                "text": r.text,
            }
        )
    return pd.DataFrame(rows, columns=["serving_provider", "prompt", "text"])


def same_model(
    outputs: pd.DataFrame | Iterable[Any],
    *,
    reference: str | None = None,
    alpha: float = SAME_MODEL_ALPHA,
    length: int = SAME_MODEL_CHARS,
    permutations: int = SAME_MODEL_PERMUTATIONS,
    min_samples: int = SAME_MODEL_MIN_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> pd.DataFrame:
    """Per backend: does it serve the same model as ``reference`` (a backend label), or,
    without one, as the other backends pooled? One row per backend (the reference itself
    gets none), columns :data:`SAME_MODEL_COLUMNS`: the prompts both sides answered, the
    outputs of each side on them, the MMD², ``same_model_p`` and ``same_model_verdict``.

    ``outputs`` is a DataFrame with ``serving_provider``, ``prompt`` and ``text`` (one row
    per output), or sweep results (:func:`outputs_frame`).
    """
    frame = outputs if isinstance(outputs, pd.DataFrame) else outputs_frame(outputs)
    missing = [c for c in ("serving_provider", "prompt", "text") if c not in frame]
    if missing:
        raise TypeError(f"same_model() needs the columns serving_provider, prompt, text; "
                        f"missing {', '.join(missing)}")  # fmt: skip
    frame = frame.dropna(subset=["serving_provider", "prompt"])
    backends = sorted(frame["serving_provider"].astype(str).unique())
    if reference is not None and reference not in backends:
        raise ValueError(
            f"reference {reference!r} is not among the backends: {', '.join(backends)}"
        )
    rows = []
    for backend in backends:
        if backend == reference:
            continue
        mine = frame[frame["serving_provider"] == backend]
        theirs = frame[
            (frame["serving_provider"] == reference)
            if reference is not None
            else (frame["serving_provider"] != backend)
        ]
        shared = sorted(set(mine["prompt"]) & set(theirs["prompt"]), key=str)
        mine = mine[mine["prompt"].isin(shared)]
        theirs = theirs[theirs["prompt"].isin(shared)]
        row: dict[str, Any] = {
            "serving_provider": backend,
            "reference": reference if reference is not None else "(the other backends)",
            "prompts": len(shared),
            "samples": len(mine),
            "reference_samples": len(theirs),
            "mmd2": math.nan,
            "same_model_p": math.nan,
            "same_model_p_holm": math.nan,
            "same_model_verdict": VERDICT_TOO_FEW,
        }
        twice = [
            side["prompt"].value_counts().reindex(shared, fill_value=0) >= 2
            for side in (mine, theirs)
        ]
        repeated = bool((twice[0] & twice[1]).any()) if shared else False
        if len(mine) >= min_samples and len(theirs) >= min_samples and repeated:
            both = pd.concat([mine, theirs])
            stat, p = mmd_test(
                both["text"].astype(str).tolist(),
                both["prompt"].tolist(),
                [True] * len(mine) + [False] * len(theirs),
                length=length,
                permutations=permutations,
                seed=seed,
            )
            row["mmd2"], row["same_model_p"] = stat, p
        rows.append(row)
    tested = [row for row in rows if not math.isnan(row["same_model_p"])]
    for row, q in zip(tested, holm([row["same_model_p"] for row in tested]), strict=True):
        row["same_model_p_holm"] = q
        row["same_model_verdict"] = VERDICT_DIFFERS if q < alpha else VERDICT_NO_EVIDENCE
    out = pd.DataFrame(rows, columns=SAME_MODEL_COLUMNS)
    for col in ("prompts", "samples", "reference_samples"):
        out[col] = out[col].astype("int64")
    return out
