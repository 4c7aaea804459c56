"""Scores with intervals, and settings suggested by cross-validation over labelled seams.

Pure: numbers and corpora in, tables out (the clock only bounds how long a search runs, and
only when asked to).

- :func:`score_table`: one config's precision, recall and F1 on several corpora side by
  side (the bundled one, the user's), each rate with its Wilson interval (:mod:`lab.stats`);
- :func:`stratified_folds`: k folds keeping the leak / clean ratio, the folds of
  scikit-learn's ``StratifiedKFold`` exactly (checked against it in the tests);
- :func:`suggest_settings`: a search of the heuristic space (:data:`SEARCH_SPACE`; the whole
  grid when it fits in **max_configs**, else a random sample with a fixed seed) scored by
  k-fold cross-validation; it proposes the config with the best mean held-out F1 and says
  how the current and proposed configs compare (:class:`Suggestion`).

A config has nothing fitted, so a fold's held-out F1 is that config's F1 on the fold. What
cross-validation measures here is the choice: for each fold, the config that does best on
the other folds is scored on the held-out one (``Suggestion.held_out``), an estimate of how
the proposal will do on seams nobody labelled yet, free of the optimism of choosing on the
same labels.
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
    """What :func:`suggest_settings` found.

    ``table`` has rows ``current`` and ``proposed`` (and ``held_out``, when there were
    folds: the proposal procedure scored on folds it did not choose on) with
    :data:`RATE_COLUMNS` plus ``cv_f1`` (mean F1 over the held-out folds). ``ranking`` lists
    the best configs tried (``changes`` from the current, ``cv_f1``, ``f1``).
    """

    current: SpillGuardConfig
    proposed: SpillGuardConfig
    changes: dict[str, tuple[Any, Any]]
    """field -> (current value, proposed value)."""
    table: pd.DataFrame = field(repr=False)
    ranking: pd.DataFrame = field(repr=False)
    k: int
    """Folds used (0: too few labels to cross-validate; the proposal is then the best F1)."""
    stratified: bool
    n_leak: int
    n_clean: int
    method: str
    """``grid`` (every config of the space) or ``random`` (a seeded sample of it)."""
    n_configs: int
    space_size: int
    complete: bool
    """False when the time budget ran out before every planned config was scored."""
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        change = ", ".join(f"{k}={b!r}" for k, (_a, b) in self.changes.items()) or "no change"
        return f"proposed: {change} ({self.n_configs} configs, {self.method}, k={self.k})"


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


def suggest_settings(
    corpus: pd.DataFrame | str | Path | None,
    current: SpillGuardConfig | None = None,
    *,
    space: Mapping[str, Sequence[Any]] | None = None,
    k: int = 5,
    seed: int = 0,
    max_configs: int = 400,
    time_budget_s: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    confidence: float = DEFAULT_CONFIDENCE,
) -> Suggestion:
    """Search the heuristic space for the config with the best held-out F1 on **corpus**.

    **corpus**: the labelled seams (unlabelled rows are ignored). **current**: the config
    to improve on (reference by default); it is always scored, and kept when nothing beats
    it. **space**: field -> values (default :data:`SEARCH_SPACE`). **k**: folds, lowered to
    the smaller class's count when that is smaller (stratified by leak / clean); with fewer
    than 2 of a class there is no cross-validation and the proposal is the best F1 on all the
    labels (``k`` 0). **max_configs**: configs scored at most (the whole grid when it fits,
    else a random sample drawn with **seed**). **time_budget_s**: stop scoring new configs
    after this many seconds of **clock** (None: no limit). **progress(done, total)** is
    called after each config.

    Ties on held-out F1 go to the config with fewer changes from **current**, then to the
    one scored first.
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
            "2 of each): the proposal is the best F1 on all the labels"
        )
    if smaller < FEW_LABELS_PER_CLASS:
        notes.append(
            f"fewer than {FEW_LABELS_PER_CLASS} labels per class ({n_leak} leak, {n_clean} "
            "clean): treat the numbers as a hint, label more seams"
        )
    configs, method, size = _space_configs(cur, space or SEARCH_SPACE, max_configs, seed)
    fold_of = np.full(len(y), -1)
    for i, f in enumerate(folds):
        fold_of[f] = i
    started = clock()
    scored: list[tuple[SpillGuardConfig, np.ndarray, float, tuple[int, int, int, int]]] = []
    # per config: counts per fold (k x 4) to choose on training folds later
    for done, cfg in enumerate(configs, 1):
        if done > 1 and time_budget_s is not None and clock() - started > time_budget_s:
            break
        pred = _predictions(texts, cfg)
        total = _counts(pred, y)
        per_fold = np.array([_counts(pred[f], y[f]) for f in folds]).reshape(len(folds), 4)
        cv_f1 = (
            float(np.mean([_f1(tp, fp, fn) for tp, fp, fn, _tn in per_fold]))
            if folds
            else _f1(*total[:3])
        )
        scored.append((cfg, per_fold, cv_f1, total))
        if progress is not None:
            progress(done, len(configs))
    complete = len(scored) == len(configs)
    if not complete:
        notes.append(f"time budget reached: {len(scored)} of {len(configs)} configs scored")

    def key(i: int) -> tuple[float, int, int]:
        return (-scored[i][2], len(_changes(cur, scored[i][0])), i)

    best = min(range(len(scored)), key=key)
    proposed = scored[best][0]
    rows = {
        "current": {**rates(*scored[0][3], confidence), "cv_f1": scored[0][2]},
        "proposed": {**rates(*scored[best][3], confidence), "cv_f1": scored[best][2]},
    }
    if folds:
        pooled = np.zeros(4, dtype=int)
        for i in range(len(folds)):

            def train_key(j: int, i: int = i) -> tuple[float, int, int]:
                tr = scored[j][1].sum(axis=0) - scored[j][1][i]
                return (
                    -_f1(int(tr[0]), int(tr[1]), int(tr[2])),
                    len(_changes(cur, scored[j][0])),
                    j,
                )

            chosen = min(range(len(scored)), key=train_key)
            pooled += scored[chosen][1][i]
        tp, fp, fn, tn = (int(v) for v in pooled)
        rows["held_out"] = {**rates(tp, fp, fn, tn, confidence), "cv_f1": float("nan")}
    table = pd.DataFrame.from_dict(rows, orient="index", columns=[*RATE_COLUMNS, "cv_f1"])
    order = sorted(range(len(scored)), key=key)[:10]
    ranking = pd.DataFrame(
        [
            {
                "changes": ", ".join(
                    f"{n}={b!r}" for n, (_a, b) in _changes(cur, scored[i][0]).items()
                )
                or "(current)",
                "cv_f1": scored[i][2],
                "f1": _f1(*scored[i][3][:3]),
            }
            for i in order
        ],
        columns=["changes", "cv_f1", "f1"],
    )
    return Suggestion(
        current=cur,
        proposed=proposed,
        changes=_changes(cur, proposed),
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
        notes=notes,
    )
