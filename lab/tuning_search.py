"""Scores with intervals, and settings suggested by cross-validation over labelled seams.

Pure: numbers and corpora in, tables out (the clock only bounds how long a search runs, and
only when asked to).

- :func:`score_table`: one config's precision, recall and F1 on several corpora side by
  side (the bundled one, the user's), each rate with its Wilson interval (:mod:`lab.stats`);
- :func:`stratified_folds`: k folds keeping the leak / clean ratio, the folds of
  scikit-learn's ``StratifiedKFold`` exactly (checked against it in the tests);
- :func:`suggest_settings`: a search of the heuristic space (:data:`SEARCH_SPACE`; the whole
  grid when it fits in **max_configs**, else a random sample with a fixed seed), judged by
  nested cross-validation; it proposes a change only when the search's held-out F1 beats
  the current settings' by more than :data:`MIN_HELD_OUT_GAIN`, and otherwise says to keep
  the current settings, with both figures (:class:`Suggestion`).

A config has nothing fitted, so a config's F1 on a fold is its held-out F1 there; what can
overfit is the *choice* among hundreds of configs on a few dozen labels. Nested
cross-validation measures the choice: for each outer fold, the config with the best mean F1
over inner folds of the other outer folds is chosen, then scored on the outer fold it never
saw (``Suggestion.held_out_f1``, pooled over the outer folds). The current settings are
scored on the same outer folds (``Suggestion.current_f1``: no choice, no optimism). Only a
search that beats them there, by more than the margin, proposes its best config.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lab.guards.spill import SpillGuardConfig
from lab.stats import DEFAULT_CONFIDENCE, wilson_interval
from lab.tuning import as_corpus, is_missing, predict

__all__ = [
    "FEW_LABELS_PER_CLASS",
    "MIN_HELD_OUT_GAIN",
    "RATE_COLUMNS",
    "SEARCH_SPACE",
    "Suggestion",
    "rates",
    "score_table",
    "stratified_folds",
    "suggest_settings",
]

SEARCH_SPACE: dict[str, tuple[Any, ...]] = {
    "require_lowercase_start": (True, False),
    "require_glued_boundary": (True, False),
    "strip_on_answer_start": (True, False),
    "strip_on_multi_word_clause": (True, False),
    "min_clause_words": (1, 2, 3, 4, 5, 6),
    "skip_decimal_points": (True, False),
    "extend_boundary_run": (True, False),
    "protect_open_inline_code": (True, False),
    "answer_start_uppercase": (True, False),
    "answer_start_caseless": (True, False),
    "answer_start_emoji": (True, False),
    "boundary_chars": (".!?。！？", ".!?。！？…"),
}
"""The SpillGuardConfig fields :func:`suggest_settings` searches, with the values it tries.

Left out: ``enabled`` (off finds nothing), the streaming-only fields
(:data:`lab.tuning.STREAMING_ONLY_FIELDS`: they never move a corpus score) and
``answer_start_chars`` (a set of characters; tune it by hand in the panel)."""

MIN_HELD_OUT_GAIN = 0.02
"""How much the search's held-out F1 (nested cross-validation) must beat the current
settings' held-out F1 by before :func:`suggest_settings` proposes a change (``min_gain``);
at or below it, the suggestion is to keep the current settings. A pooled F1 over a few
dozen labels moves by more than 0.02 when one seam changes side, so a gain the size of one
seam is not taken for an improvement."""

FEW_LABELS_PER_CLASS = 10
"""Below this many labelled leaks or clean seams, a suggestion says its numbers are shaky."""

RATE_COLUMNS = (
    "n",
    "tp",
    "fp",
    "fn",
    "tn",
    "precision",
    "precision_low",
    "precision_high",
    "recall",
    "recall_low",
    "recall_high",
    "f1",
)
"""The columns of :func:`rates` / :func:`score_table` (after the row's name)."""


def _f1(tp: int, fp: int, fn: int) -> float:
    return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def rates(
    tp: int, fp: int, fn: int, tn: int, confidence: float = DEFAULT_CONFIDENCE
) -> dict[str, float | int]:
    """Precision and recall with Wilson intervals, and F1, from a confusion's counts.

    A rate with no denominator is NaN with a NaN interval (no evidence), not 0; so is F1
    when there is no leak and no predicted one.

    >>> r = rates(8, 2, 2, 8)
    >>> (r["precision"], round(r["precision_low"], 4), round(r["recall_high"], 4), r["f1"])
    (0.8, 0.4902, 0.9433, 0.8)
    """
    p_lo, p_hi = wilson_interval(tp, tp + fp, confidence)
    r_lo, r_hi = wilson_interval(tp, tp + fn, confidence)
    nan = float("nan")
    return {
        "n": tp + fp + fn + tn,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": tp / (tp + fp) if tp + fp else nan,
        "precision_low": p_lo,
        "precision_high": p_hi,
        "recall": tp / (tp + fn) if tp + fn else nan,
        "recall_low": r_lo,
        "recall_high": r_hi,
        "f1": _f1(tp, fp, fn) if tp + fp + fn else nan,
    }


def _labelled(corpus: pd.DataFrame) -> tuple[list[str], np.ndarray]:
    """(texts, labels) of the labelled cases of a corpus frame."""
    keep = [not is_missing(v) for v in corpus["leak"]]
    texts = [t for t, k in zip(corpus["text"], keep, strict=True) if k]
    labels = np.array([bool(v) for v, k in zip(corpus["leak"], keep, strict=True) if k], bool)
    return texts, labels


def _counts(pred: np.ndarray, y: np.ndarray) -> tuple[int, int, int, int]:
    return (
        int(np.sum(pred & y)),
        int(np.sum(pred & ~y)),
        int(np.sum(~pred & y)),
        int(np.sum(~pred & ~y)),
    )


def _predictions(texts: Sequence[str], cfg: SpillGuardConfig) -> np.ndarray:
    return np.array([predict(t, cfg)[0] is not None for t in texts], dtype=bool)


def score_table(
    config: SpillGuardConfig | None,
    corpora: Mapping[str, pd.DataFrame | str | Path | None],
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """One row per corpus (index: its name): :data:`RATE_COLUMNS` for **config** on it.

    A positive is a predicted seam, as in :func:`lab.tuning.score`; unlabelled cases are
    not counted. An empty corpus gives ``n`` 0 and NaN rates.
    """
    cfg = config or SpillGuardConfig()
    rows = {}
    for name, corpus in corpora.items():
        texts, y = _labelled(as_corpus(corpus) if corpus is not None else as_corpus(None))
        rows[name] = rates(*_counts(_predictions(texts, cfg), y), confidence)
    return pd.DataFrame.from_dict(rows, orient="index", columns=list(RATE_COLUMNS))


def stratified_folds(
    labels: Sequence[bool] | np.ndarray, k: int, *, seed: int | None = 0
) -> list[np.ndarray]:
    """The test indices of each of **k** folds, each class spread evenly over the folds.

    The folds of ``sklearn.model_selection.StratifiedKFold(n_splits=k, shuffle=seed is not
    None, random_state=seed)`` exactly: classes are numbered in order of first appearance,
    the i-th case of a class in sorted order goes to the fold its position picks
    round-robin, and with a seed each class's fold assignment is shuffled by
    ``numpy.random.RandomState(seed)``. Raises ValueError when **k** < 2 or when a class has
    fewer than **k** cases.

    >>> [f.tolist() for f in stratified_folds([1, 1, 0, 0, 1, 0], 3, seed=None)]
    [[0, 2], [1, 3], [4, 5]]
    """
    y = np.asarray(labels)
    if k < 2:
        raise ValueError(f"k-fold cross-validation needs k >= 2, got {k}")
    _, first_at, inverse = np.unique(y, return_index=True, return_inverse=True)
    _, perm = np.unique(first_at, return_inverse=True)
    encoded = perm[inverse]
    n_classes = len(first_at)
    counts = np.bincount(encoded, minlength=n_classes)
    if counts.min() < k:
        raise ValueError(f"a class has {counts.min()} cases, fewer than the {k} folds")
    order = np.sort(encoded)
    allocation = np.asarray([np.bincount(order[i::k], minlength=n_classes) for i in range(k)])
    rng = np.random.RandomState(seed) if seed is not None else None
    test_fold = np.empty(len(y), dtype=int)
    for c in range(n_classes):
        folds_for_class = np.arange(k).repeat(allocation[:, c])
        if rng is not None:
            rng.shuffle(folds_for_class)
        test_fold[encoded == c] = folds_for_class
    return [np.flatnonzero(test_fold == i) for i in range(k)]


@dataclass(frozen=True)
class Suggestion:
    """What :func:`suggest_settings` found, and whether it is worth a change.

    ``table`` has the rows ``current`` (the current settings on all the labels), ``best``
    (the best config found, on all the labels: optimistic, it was chosen on them) and, when
    there were folds, ``held_out`` (the search under nested cross-validation: what to expect
    of it on seams nobody labelled yet), with :data:`RATE_COLUMNS` plus ``cv_f1`` (mean F1
    over the folds). ``ranking`` lists the best configs tried (``changes`` from the current,
    ``cv_f1``, ``f1``).
    """

    current: SpillGuardConfig
    proposed: SpillGuardConfig
    """``best`` when the search beat the current settings by more than ``min_gain`` on
    held-out folds, else ``current``."""
    changes: dict[str, tuple[Any, Any]]
    """field -> (current value, proposed value); empty when keeping the current settings."""
    table: pd.DataFrame = field(repr=False)
    ranking: pd.DataFrame = field(repr=False)
    k: int
    """Outer folds used (0: too few labels to cross-validate; nothing is then proposed)."""
    stratified: bool
    n_leak: int
    n_clean: int
    method: str
    """``grid`` (every config of the space) or ``random`` (a seeded sample of it)."""
    n_configs: int
    space_size: int
    complete: bool
    """False when the time budget ran out before every planned config was scored."""
    best: SpillGuardConfig | None = None
    """The config with the best mean cross-validated F1 on all the labels (proposed or not)."""
    best_changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    held_out_f1: float = float("nan")
    """The search's F1 under nested cross-validation (NaN without folds)."""
    current_f1: float = float("nan")
    """The current settings' F1 on the same outer folds (NaN without folds)."""
    min_gain: float = MIN_HELD_OUT_GAIN
    verdict: str = ""
    """The decision in one sentence, with both held-out figures."""
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return self.verdict


def _space_configs(
    current: SpillGuardConfig, space: Mapping[str, Sequence[Any]], max_configs: int, seed: int
) -> tuple[list[SpillGuardConfig], str, int]:
    """(configs to score, current first; method; size of the space)."""
    names = list(space)
    values = [list(dict.fromkeys(space[n])) for n in names]
    size = 1
    for v in values:
        size *= len(v)
    base = tuple(getattr(current, n) for n in names)
    if size <= max_configs:
        combos = [c for c in itertools.product(*values) if c != base]
        method = "grid"
    else:
        rng = random.Random(seed)
        picked: dict[tuple[Any, ...], None] = {}
        while len(picked) < max_configs - 1:
            c = tuple(rng.choice(v) for v in values)
            if c != base:
                picked[c] = None
        combos = list(picked)
        method = "random"
    configs = [current] + [
        current.model_copy(update=dict(zip(names, c, strict=True))) for c in combos
    ]
    return configs, method, size


def _changes(a: SpillGuardConfig, b: SpillGuardConfig) -> dict[str, tuple[Any, Any]]:
    return {
        n: (getattr(a, n), getattr(b, n))
        for n in SpillGuardConfig.model_fields
        if getattr(a, n) != getattr(b, n)
    }


def _fold_f1(pred: np.ndarray, y: np.ndarray, folds: Sequence[np.ndarray]) -> float:
    """Mean F1 of a config's predictions over **folds**."""
    return float(np.mean([_f1(*_counts(pred[f], y[f])[:3]) for f in folds]))


def _choose(
    preds: Sequence[np.ndarray],
    y: np.ndarray,
    idx: np.ndarray,
    changed: Sequence[int],
    k: int,
    seed: int,
) -> int:
    """The config chosen on the cases **idx** alone: the best mean F1 over stratified inner
    folds of them (the best F1 on them when a class has fewer than 2 cases); ties to fewer
    **changed** fields, then to the config scored first."""
    yi = y[idx]
    smaller = min(int(yi.sum()), int((~yi).sum()))
    inner = stratified_folds(yi, min(k, smaller), seed=seed) if smaller >= 2 else []

    def score(j: int) -> float:
        pred = preds[j][idx]
        return _fold_f1(pred, yi, inner) if inner else _f1(*_counts(pred, yi)[:3])

    return min(range(len(preds)), key=lambda j: (-score(j), changed[j], j))


def suggest_settings(
    corpus: pd.DataFrame | str | Path | None,
    current: SpillGuardConfig | None = None,
    *,
    space: Mapping[str, Sequence[Any]] | None = None,
    k: int = 5,
    seed: int = 0,
    max_configs: int = 400,
    min_gain: float = MIN_HELD_OUT_GAIN,
    time_budget_s: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Suggestion:
    """Search the heuristic space on **corpus**; propose a change only when it holds up on
    seams the search did not choose on.

    **corpus**: the labelled seams (unlabelled rows are ignored). **current**: the config
    to improve on (reference by default); it is always scored. **space**: field -> values
    (default :data:`SEARCH_SPACE`). **k**: outer folds, and inner folds within each outer
    training part, lowered to the smaller class's count when that is smaller (stratified by
    leak / clean). **max_configs**: configs scored at most (the whole grid when it fits, else
    a random sample drawn with **seed**). **min_gain**: how much the search's held-out F1 must
    beat the current settings' by (:data:`MIN_HELD_OUT_GAIN`). **time_budget_s**: stop
    scoring new configs after this many seconds of **clock** (None: no limit).
    **progress(done, total)** is called after each config.

    The best config is the one with the best mean F1 over the k folds of all the labels
    (ties to fewer changes from **current**, then to the one scored first). Nested
    cross-validation scores the search itself: for each outer fold, the config chosen on
    inner folds of the other outer folds is scored on that fold; the pooled counts give
    ``held_out_f1``, and the current settings' counts on the same folds ``current_f1``. The
    best config is proposed only when ``held_out_f1 - current_f1 > min_gain``; otherwise,
    and with fewer than 2 labels of a class (no folds), the current settings are kept.
    """
    cur = current or SpillGuardConfig()
    texts, y = _labelled(as_corpus(corpus))
    n_leak, n_clean = int(y.sum()), int((~y).sum())
    notes: list[str] = []
    smaller = min(n_leak, n_clean)
    folds: list[np.ndarray] = []
    if smaller >= 2:
        kk = min(k, smaller)
        if kk < k:
            notes.append(f"{n_leak} leak and {n_clean} clean labels: {kk} folds instead of {k}")
        folds = stratified_folds(y, kk, seed=seed)
    else:
        notes.append(
            f"too few labels to cross-validate ({n_leak} leak, {n_clean} clean; need at least "
            "2 of each): nothing is proposed"
        )
    if smaller < FEW_LABELS_PER_CLASS:
        notes.append(
            f"fewer than {FEW_LABELS_PER_CLASS} labels per class ({n_leak} leak, {n_clean} "
            "clean): treat the numbers as a hint, label more seams"
        )
    configs, method, size = _space_configs(cur, space or SEARCH_SPACE, max_configs, seed)
    started = clock()
    preds: list[np.ndarray] = []
    for done, cfg in enumerate(configs, 1):
        if done > 1 and time_budget_s is not None and clock() - started > time_budget_s:
            break
        preds.append(_predictions(texts, cfg))
        if progress is not None:
            progress(done, len(configs))
    scored = configs[: len(preds)]
    complete = len(scored) == len(configs)
    if not complete:
        notes.append(f"time budget reached: {len(scored)} of {len(configs)} configs scored")
    totals = [_counts(p, y) for p in preds]
    cv = [
        _fold_f1(p, y, folds) if folds else _f1(*t[:3]) for p, t in zip(preds, totals, strict=True)
    ]
    changed = [len(_changes(cur, c)) for c in scored]

    def key(i: int) -> tuple[float, int, int]:
        return (-cv[i], changed[i], i)

    best = min(range(len(scored)), key=key)
    rows = {
        "current": {**rates(*totals[0], confidence), "cv_f1": cv[0]},
        "best": {**rates(*totals[best], confidence), "cv_f1": cv[best]},
    }
    held_out_f1 = current_f1 = float("nan")
    if folds:
        pooled = np.zeros(4, dtype=int)
        fold_f1 = []
        everyone = np.arange(len(y))
        for outer in folds:
            train = np.setdiff1d(everyone, outer)
            chosen = _choose(preds, y, train, changed, len(folds), seed)
            got = np.array(_counts(preds[chosen][outer], y[outer]))
            pooled += got
            fold_f1.append(_f1(*(int(v) for v in got[:3])))
        tp, fp, fn, tn = (int(v) for v in pooled)
        rows["held_out"] = {**rates(tp, fp, fn, tn, confidence), "cv_f1": float(np.mean(fold_f1))}
        held_out_f1 = _f1(tp, fp, fn)
        current_f1 = _f1(*totals[0][:3])  # nothing chosen: its outer folds pool to all labels
    table = pd.DataFrame.from_dict(rows, orient="index", columns=[*RATE_COLUMNS, "cv_f1"])
    best_changes = _changes(cur, scored[best])
    adopt = bool(folds) and bool(best_changes) and held_out_f1 - current_f1 > min_gain
    best_f1 = _f1(*totals[best][:3])
    verdict = _verdict(adopt, best_changes, held_out_f1, current_f1, best_f1, min_gain, bool(folds))
    order = sorted(range(len(scored)), key=key)[:10]
    ranking = pd.DataFrame(
        [
            {
                "changes": ", ".join(
                    f"{n}={b!r}" for n, (_a, b) in _changes(cur, scored[i]).items()
                )
                or "(current)",
                "cv_f1": cv[i],
                "f1": _f1(*totals[i][:3]),
            }
            for i in order
        ],
        columns=["changes", "cv_f1", "f1"],
    )
    return Suggestion(
        current=cur,
        proposed=scored[best] if adopt else cur,
        changes=best_changes if adopt else {},
        table=table,
        ranking=ranking,
        k=len(folds),
        stratified=bool(folds),
        n_leak=n_leak,
        n_clean=n_clean,
        method=method,
        n_configs=len(scored),
        space_size=size,
        complete=complete,
        best=scored[best],
        best_changes=best_changes,
        held_out_f1=held_out_f1,
        current_f1=current_f1,
        min_gain=min_gain,
        verdict=verdict,
        notes=notes,
    )


def _verdict(
    adopt: bool,
    best_changes: Mapping[str, tuple[Any, Any]],
    held_out: float,
    current: float,
    best_f1: float,
    min_gain: float,
    folds: bool,
) -> str:
    """The decision in one sentence, with both held-out F1 figures."""
    if not folds:
        return "keep the current settings: too few labels to cross-validate a change"
    change = ", ".join(f"{n}={b!r}" for n, (_a, b) in best_changes.items())
    figures = (
        f"held-out F1 {held_out:.3f} for the search against {current:.3f} for the current settings"
    )
    if adopt:
        return f"change {change}: {figures}, a gain over {min_gain:g}"
    if not best_changes:
        return f"keep the current settings: no config tried beats them ({figures})"
    return (
        f"keep the current settings: {figures}, not a gain over {min_gain:g} (the best "
        f"config found, {change}, has F1 {best_f1:.3f} on the labels it was chosen on)"
    )
