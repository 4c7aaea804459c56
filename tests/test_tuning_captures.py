"""The tuner learns from captures: candidate seams, where it writes, labels, suggestions."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lab.config import LabConfig
from lab.guards.spill import SpillGuardConfig
from lab.replay import replay, replay_sse
from lab.stats import wilson_interval
from lab.tuning import (
    CANDIDATE_COLUMNS,
    CORPUS_COLUMNS,
    CorpusError,
    as_corpus,
    load_corpus,
    load_seam_candidates,
    seam_candidates,
    suggest_seam,
)
from lab.tuning_search import (
    RATE_COLUMNS,
    rates,
    score_table,
    stratified_folds,
    suggest_settings,
)
from lab.tuning_store import (
    LABEL_EXTRA_COLUMNS,
    default_config_path,
    default_user_corpus_path,
    label_row,
    load_user_corpus,
    save_label,
    user_data_dir,
    write_text_atomic,
)

ROOT = Path(__file__).resolve().parents[1]


def _sse(*deltas: dict) -> str:
    events = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


def _stream(sid: str, *deltas: dict, config=None):
    return replay_sse("openrouter", _sse(*deltas), stream_id=sid, model="m/one", config=config)


@pytest.fixture(scope="module")
def hand_made():
    """Five small streams, one per decision the spill guard can take (and one it never sees)."""
    return [
        _stream("strip", {"reasoning": "The user greets me. I"}, {"content": "must do.Hello!"}),
        _stream("spaced", {"reasoning": "hm"}, {"content": "wait. Actually yes"}),
        _stream("held", {"reasoning": "hm"}, {"content": "ok"}),
        _stream("upper", {"reasoning": "hm"}, {"content": "Sure."}, {"content": " Done"}),
        _stream("no-reasoning", {"content": "must do.Hello!"}),
    ]


@pytest.fixture(scope="module")
def bundled_results():
    return replay(ROOT / "captures")


# -- candidate seams ------------------------------------------------------------------------------


def test_seam_candidates_give_the_guard_decision_and_rule_per_stream(hand_made):
    df = seam_candidates(hand_made)
    assert tuple(df.columns) == CANDIDATE_COLUMNS
    got = [
        (r["id"], r["text"], r["decision"], r["rule"], r["seam"], r["suggested_seam"])
        for r in df.astype(object).where(df.notna(), None).to_dict("records")
    ]
    assert got == [
        ("strip", "must do.Hello!", "strip", "answer_start", 8, 8),
        ("spaced", "wait. Actually yes", "emit", "spaced_boundary", None, 5),
        ("held", "ok", "hold", "no_boundary", None, None),
        ("upper", "Sure. Done", "emit", "not_lowercase", None, 5),
    ]
    first = df.iloc[0]
    assert (first["backend"], first["provider"], first["model"]) == (
        "openrouter",
        "openrouter",
        "m/one",
    )
    assert first["reasoning_tail"] == "The user greets me. I"
    assert int(first["attempt"]) == 0


def test_seam_candidates_cap_the_context_and_the_text(hand_made):
    df = seam_candidates(hand_made[:1], max_chars=5, context_chars=4)
    assert df.loc[0, "reasoning_tail"] == "e. I"
    assert df.loc[0, "text"] == "must "
    assert pd.isna(df.loc[0, "seam"])  # the cut at 8 is past the capped text


def test_seam_candidates_flag_results_replayed_with_another_config():
    off = LabConfig(spill=SpillGuardConfig(enabled=False))
    r = _stream("x", {"reasoning": "r r"}, {"content": "must do.Hello!"}, config=off)
    df = seam_candidates([r])  # judged with the reference config, replayed without the guard
    assert (df.loc[0, "decision"], df.loc[0, "rule"]) == ("mismatch", "would strip (answer_start)")
    assert seam_candidates([r], off.spill).loc[0, ["decision", "rule"]].tolist() == [
        "pass",
        "disabled",
    ]


def test_seam_candidates_on_the_bundled_capture(bundled_results):
    df = seam_candidates(bundled_results)
    assert len(df) == 20
    assert df["id"].is_unique
    assert df.groupby(["decision", "rule"]).size().to_dict() == {
        ("emit", "not_lowercase"): 15,
        ("pass", "not_inspected"): 3,
        ("strip", "answer_start"): 2,
    }
    strips = df[df["decision"] == "strip"]
    assert list(strips["backend"]) == ["Novita", "Parasail"]
    assert set(strips["text"]) == {"must do.Hello! How can I help with your café order today? ☕"}
    assert list(strips["seam"]) == [8, 8]
    assert set(strips["reasoning_tail"]) == {"The user greets me. A warm, short greeting is what I"}
    # think-tag reasoning reaches the answer before the guard could look at it
    passed = df[df["decision"] == "pass"]
    assert set(passed["model"]) == {"fake/think-leak"} and set(passed["backend"]) == {"openai"}
    assert df["backend"].value_counts().to_dict() == {
        "openai": 6,
        "google": 3,
        "anthropic": 3,
        "DeepInfra": 2,
        "Fireworks": 1,
        "Together": 1,
        "Nebius": 1,
        "Chutes": 1,
        "Novita": 1,
        "Parasail": 1,
    }


def test_load_seam_candidates_replays_the_capture_it_is_given(bundled_results):
    pd.testing.assert_frame_equal(
        load_seam_candidates(ROOT / "captures"), seam_candidates(bundled_results)
    )


def test_suggest_seam_opens_the_guard_gates():
    assert suggest_seam("2 options exist, pick the first.Sure!") == 32
    assert suggest_seam("Done. Now the answer") == 5
    assert suggest_seam("no boundary") is None
    assert suggest_seam("ends with a boundary.") is None


# -- where the tuner writes ----------------------------------------------------------------------


def test_user_data_dir_is_outside_the_repository_and_follows_the_environment(tmp_path, monkeypatch):
    assert user_data_dir({"LAB_DATA_DIR": str(tmp_path)}) == tmp_path
    assert (
        default_user_corpus_path({"LAB_DATA_DIR": str(tmp_path)}) == tmp_path / "seam_corpus.jsonl"
    )
    assert default_config_path({"LAB_DATA_DIR": str(tmp_path)}) == tmp_path / "spill-config.json"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg")}
    if os.name == "posix" and os.uname().sysname == "Linux":
        assert user_data_dir(env) == tmp_path / "xdg" / "stream-lab"
        assert user_data_dir({}) == tmp_path / "home" / ".local" / "share" / "stream-lab"
    assert ROOT not in default_config_path({}).parents


def test_write_text_atomic_never_replaces_a_file_unless_told(tmp_path):
    target = tmp_path / "new" / "x.json"
    assert write_text_atomic(target, "one\n") == target
    with pytest.raises(FileExistsError, match="already exists"):
        write_text_atomic(target, "two\n")
    assert target.read_text() == "one\n"
    write_text_atomic(target, "two\n", overwrite=True)
    assert target.read_text() == "two\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["x.json"]  # no temporary left


# -- the user's corpus ----------------------------------------------------------------------------


def test_label_rows_go_to_the_user_corpus_and_a_new_label_replaces_the_old(hand_made, tmp_path):
    cands = seam_candidates(hand_made)
    path = tmp_path / "labels" / "mine.jsonl"
    first = cands.iloc[0].to_dict()
    assert save_label(label_row(first, True), path) == path
    save_label(label_row(cands.iloc[1].to_dict(), False, note="the model's own prose"), path)
    assert [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] == [
        {
            "id": "strip",
            "text": "must do.Hello!",
            "leak": True,
            "seam": 8,
            "category": "capture",
            "note": "openrouter: the guard's decision strip (answer_start)",
            "stream_id": "strip",
            "capture_id": None,
            "backend": "openrouter",
            "model": "m/one",
            "guard_decision": "strip",
            "guard_rule": "answer_start",
        },
        {
            "id": "spaced",
            "text": "wait. Actually yes",
            "leak": False,
            "seam": None,
            "category": "capture",
            "note": "the model's own prose",
            "stream_id": "spaced",
            "capture_id": None,
            "backend": "openrouter",
            "model": "m/one",
            "guard_decision": "emit",
            "guard_rule": "spaced_boundary",
        },
    ]
    save_label(label_row(first, False), path)  # labelled again: replaced in place
    frame = load_user_corpus(path)
    assert list(frame["id"]) == ["strip", "spaced"]
    assert frame["leak"].tolist() == [False, False]
    assert tuple(frame.columns) == (*CORPUS_COLUMNS, *LABEL_EXTRA_COLUMNS)
    assert load_corpus(path)["id"].tolist() == ["strip", "spaced"]  # the bundled corpus's shape
    # no temporary file left behind; the lock file stays (tuning_store.LOCK_SUFFIX)
    assert sorted(p.name for p in path.parent.iterdir()) == ["mine.jsonl", "mine.jsonl.lock"]


def test_a_leak_needs_a_seam_inside_the_text(hand_made):
    held = seam_candidates(hand_made).iloc[2].to_dict()  # "ok": no boundary, no suggestion
    with pytest.raises(CorpusError, match="held: a leak needs a seam"):
        label_row(held, True)
    with pytest.raises(CorpusError, match="'seam' 9 is outside the text"):
        label_row(held, True, seam=9)
    assert label_row(held, True, seam=1)["seam"] == 1


def test_a_corrupt_user_corpus_line_is_reported_with_its_number_and_never_written_over(
    hand_made, tmp_path
):
    path = tmp_path / "mine.jsonl"
    good = json.dumps(label_row(seam_candidates(hand_made).iloc[0].to_dict(), True))
    path.write_text(good + "\n{not json\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"mine.jsonl:2: not valid JSON"):
        load_user_corpus(path)
    row = label_row(seam_candidates(hand_made).iloc[1].to_dict(), False)
    with pytest.raises(CorpusError, match=r"mine.jsonl:2: not valid JSON"):
        save_label(row, path)
    assert path.read_text(encoding="utf-8") == good + "\n{not json\n"
    assert len(load_user_corpus(tmp_path / "none-yet.jsonl")) == 0


# -- scores on both corpora, suggestions ------------------------------------------------------------

HAND_LABELLED = [
    ("spaced-1", "they need a short answer. Hello!", True, 26),
    ("spaced-2", "i should greet them. Hi there", True, 20),
    ("spaced-3", "keep it brief. Sure, here it is", True, 15),
    ("glued-1", "must do.Hello!", True, 8),
    ("glued-2", "ok let me think.Yes", True, 16),
    ("prose-wait", "wait. actually no", False, None),
    ("code-path", "use os.path.join", False, None),
    ("plain", "hello there", False, None),
    ("upper", "Sure! Here", False, None),
    ("word", "done", False, None),
    ("fig", "see fig.3 for details", False, None),
    ("obj", "call obj.method now", False, None),
]
SMALL_SPACE = {"require_glued_boundary": (True, False), "min_clause_words": (2, 3)}


@pytest.fixture
def labelled() -> pd.DataFrame:
    rows = [
        {"id": i, "text": t, "leak": leak, "seam": s, "category": "hand", "note": ""}
        for i, t, leak, s in HAND_LABELLED
    ]
    return as_corpus(pd.DataFrame(rows))


def test_rates_carry_wilson_intervals_and_nan_without_evidence():
    r = rates(27, 15, 8, 39)
    assert (r["precision"], r["recall"]) == (27 / 42, 27 / 35)
    assert (r["precision_low"], r["precision_high"]) == wilson_interval(27, 42)
    assert (r["recall_low"], r["recall_high"]) == wilson_interval(27, 35)
    assert r["f1"] == 54 / 77
    empty = rates(0, 0, 0, 3)
    assert all(
        math.isnan(empty[k]) for k in ("precision", "precision_low", "recall", "recall_high")
    )
    assert math.isnan(empty["f1"])
    assert rates(0, 2, 3, 1)["f1"] == 0.0


def test_score_table_puts_both_corpora_side_by_side(labelled):
    table = score_table(None, {"bundled": None, "yours": labelled})
    assert list(table.index) == ["bundled", "yours"]
    assert tuple(table.columns) == RATE_COLUMNS
    assert table.loc["bundled", ["n", "tp", "fp", "fn", "tn"]].tolist() == [89, 27, 15, 8, 39]
    assert table.loc["yours", ["n", "tp", "fp", "fn", "tn"]].tolist() == [12, 2, 3, 3, 4]
    assert table.loc["yours", "precision"] == 0.4
    assert table.loc["yours", "precision_low"] == wilson_interval(2, 5)[0]


def test_stratified_folds_are_hand_checked_on_fixed_data():
    y = [True, True, False, False, True, False, True, True, True, False, False, True, False, True]
    assert [f.tolist() for f in stratified_folds(y, 3, seed=None)] == [
        [0, 1, 2, 3, 4],
        [5, 6, 7, 8, 9],
        [10, 11, 12, 13],
    ]
    assert [f.tolist() for f in stratified_folds(y, 3, seed=0)] == [
        [1, 2, 4, 8, 9],
        [3, 7, 10, 11, 13],
        [0, 5, 6, 12],
    ]
    with pytest.raises(ValueError, match="a class has 6 cases, fewer than the 7 folds"):
        stratified_folds(y, 7)


@pytest.mark.parametrize("seed", [None, 0, 1, 42])
@pytest.mark.parametrize("k", [2, 3, 5])
def test_stratified_folds_match_scikit_learn(seed, k):
    sklearn = pytest.importorskip("sklearn.model_selection")
    rng = np.random.RandomState(7)
    for n in (10, 23, 89):
        y = rng.rand(n) < 0.4
        y[:k] = True
        y[k : 2 * k] = False  # at least k of each class
        want = sklearn.StratifiedKFold(k, shuffle=seed is not None, random_state=seed)
        expected = [t.tolist() for _tr, t in want.split(np.zeros(n), y)]
        assert [f.tolist() for f in stratified_folds(y, k, seed=seed)] == expected


def test_suggest_settings_proposes_the_best_held_out_f1_on_a_small_labelled_set(labelled):
    calls = []
    sug = suggest_settings(
        labelled, space=SMALL_SPACE, k=3, progress=lambda d, t: calls.append((d, t))
    )
    assert sug.changes == {"require_glued_boundary": (True, False), "min_clause_words": (2, 3)}
    assert sug.proposed == SpillGuardConfig(require_glued_boundary=False, min_clause_words=3)
    assert (sug.method, sug.space_size, sug.n_configs, sug.complete) == ("grid", 4, 4, True)
    assert (sug.k, sug.stratified, sug.n_leak, sug.n_clean) == (3, True, 5, 7)
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]
    t = sug.table
    assert list(t.index) == ["current", "best", "held_out"]
    assert t.loc["current", ["tp", "fp", "fn", "tn"]].tolist() == [2, 3, 3, 4]
    assert t.loc["best", ["tp", "fp", "fn", "tn"]].tolist() == [5, 0, 0, 7]
    assert t.loc["held_out", ["tp", "fp", "fn", "tn"]].tolist() == [5, 0, 0, 7]
    assert t.loc["best", "precision_low"] == wilson_interval(5, 5)[0]
    assert (sug.held_out_f1, sug.current_f1, sug.best_changes) == (1.0, 0.4, sug.changes)
    assert sug.verdict == (
        "change require_glued_boundary=False, min_clause_words=3: held-out F1 1.000 for the "
        "search against 0.400 for the current settings, a gain over 0.02"
    )
    assert sug.ranking["changes"].tolist() == [
        "require_glued_boundary=False, min_clause_words=3",
        "require_glued_boundary=False",
        "min_clause_words=3",
        "(current)",
    ]
    assert sug.ranking["f1"].tolist() == [1.0, 10 / 13, 4 / 7, 0.4]
    assert sug.notes == [
        "fewer than 10 labels per class (5 leak, 7 clean): treat the numbers as a hint, "
        "label more seams"
    ]


def test_suggest_settings_keeps_the_current_settings_when_the_search_overfits_the_bundled_corpus():
    # notebook 02's run: the best of 200 configs has F1 0.769 on the 89 labels it was chosen
    # on, but chosen on inner folds and scored on outer ones the search gets 0.609, below
    # the current settings' 0.701 on the same folds: keep them
    sug = suggest_settings(None, SpillGuardConfig(), max_configs=200, seed=0)
    t = sug.table
    assert t.loc["current", ["tp", "fp", "fn", "tn"]].tolist() == [27, 15, 8, 39]
    assert t.loc["best", ["tp", "fp", "fn", "tn"]].tolist() == [30, 13, 5, 41]
    assert t.loc["held_out", ["tp", "fp", "fn", "tn"]].tolist() == [21, 13, 14, 41]
    assert (sug.held_out_f1, sug.current_f1) == (42 / 69, 54 / 77)
    assert (sug.proposed, sug.changes, sug.k, sug.min_gain) == (SpillGuardConfig(), {}, 5, 0.02)
    assert sug.best_changes == {
        "require_lowercase_start": (True, False),
        "skip_decimal_points": (True, False),
        "require_glued_boundary": (True, False),
        "min_clause_words": (2, 4),
        "answer_start_emoji": (True, False),
    }
    assert sug.verdict == (
        "keep the current settings: held-out F1 0.609 for the search against 0.701 for the "
        "current settings, not a gain over 0.02 (the best config found, "
        "require_lowercase_start=False, skip_decimal_points=False, "
        "require_glued_boundary=False, min_clause_words=4, answer_start_emoji=False, has F1 "
        "0.769 on the labels it was chosen on)"
    )


def test_suggest_settings_proposes_nothing_unless_the_gain_is_over_the_margin(labelled):
    at = suggest_settings(labelled, space=SMALL_SPACE, k=3, min_gain=0.6)  # 1.0 - 0.4: not over
    assert (at.held_out_f1, at.current_f1, at.changes) == (1.0, 0.4, {})
    assert at.proposed == SpillGuardConfig() and at.best == SpillGuardConfig(
        require_glued_boundary=False, min_clause_words=3
    )
    assert at.verdict == (
        "keep the current settings: held-out F1 1.000 for the search against 0.400 for the "
        "current settings, not a gain over 0.6 (the best config found, "
        "require_glued_boundary=False, min_clause_words=3, has F1 1.000 on the labels it was "
        "chosen on)"
    )
    under = suggest_settings(labelled, space=SMALL_SPACE, k=3, min_gain=0.59)
    assert under.proposed == at.best


def test_suggest_settings_held_out_is_nested_cross_validation_as_scikit_learn_folds_it():
    """An independent nested loop over scikit-learn's folds: choose on inner folds of each
    outer training part by mean F1 (ties to fewer changes, then order), score on the outer
    fold, pool the counts."""
    sklearn = pytest.importorskip("sklearn.model_selection")
    from lab.tuning import as_corpus, predict

    corpus = as_corpus(None)
    space = {"require_glued_boundary": (True, False), "min_clause_words": (1, 2, 4, 6)}
    sug = suggest_settings(corpus, space=space, k=4, seed=1)
    texts = corpus["text"].tolist()
    y = np.array([bool(v) for v in corpus["leak"]])
    base = SpillGuardConfig()
    configs = [base] + [
        base.model_copy(update={"require_glued_boundary": g, "min_clause_words": m})
        for g in (True, False)
        for m in (1, 2, 4, 6)
        if (g, m) != (True, 2)
    ]
    pred = np.array([[predict(t, c)[0] is not None for t in texts] for c in configs])
    n_changed = [sum(getattr(c, f) != getattr(base, f) for f in space) for c in configs]

    def f1(p, yy):
        tp, fp, fn = int(np.sum(p & yy)), int(np.sum(p & ~yy)), int(np.sum(~p & yy))
        return 2 * tp / (2 * tp + fp + fn) if tp else 0.0

    pooled = np.zeros(4, dtype=int)
    outer = sklearn.StratifiedKFold(4, shuffle=True, random_state=1)
    for train, test in outer.split(np.zeros(len(y)), y):
        inner = sklearn.StratifiedKFold(4, shuffle=True, random_state=1)
        splits = [t for _tr, t in inner.split(np.zeros(len(train)), y[train])]
        mean = [
            np.mean([f1(pred[j][train][t], y[train][t]) for t in splits])
            for j in range(len(configs))
        ]
        chosen = min(range(len(configs)), key=lambda j: (-mean[j], n_changed[j], j))
        p, yy = pred[chosen][test], y[test]
        pooled += [np.sum(p & yy), np.sum(p & ~yy), np.sum(~p & yy), np.sum(~p & ~yy)]
    assert sug.table.loc["held_out", ["tp", "fp", "fn", "tn"]].tolist() == pooled.tolist()


def test_suggest_settings_says_when_there_are_too_few_labels_to_cross_validate(labelled):
    few = labelled[labelled["id"].isin(["glued-1", "spaced-1", "plain", "fig"])]
    sug = suggest_settings(few, space=SMALL_SPACE, k=5)
    assert sug.k == 2 and sug.notes[0] == "2 leak and 2 clean labels: 2 folds instead of 5"
    one = labelled[labelled["id"].isin(["glued-1", "plain", "fig"])]
    sug = suggest_settings(one, space=SMALL_SPACE)
    assert sug.k == 0 and not sug.stratified
    assert sug.notes[0] == (
        "too few labels to cross-validate (1 leak, 2 clean; need at least 2 of each): "
        "nothing is proposed"
    )
    assert list(sug.table.index) == ["current", "best"]
    assert (sug.proposed, sug.changes) == (SpillGuardConfig(), {})
    assert sug.verdict == "keep the current settings: too few labels to cross-validate a change"


def test_suggest_settings_samples_with_a_fixed_seed_and_stops_at_its_time_budget(labelled):
    a = suggest_settings(labelled, max_configs=30, seed=3)
    b = suggest_settings(labelled, max_configs=30, seed=3)
    assert (a.method, a.n_configs, a.space_size) == ("random", 30, 12288)
    assert a.proposed == b.proposed and a.ranking.equals(b.ranking)
    ticks = iter(range(100))
    c = suggest_settings(labelled, max_configs=30, time_budget_s=4.5, clock=lambda: next(ticks))
    assert (c.n_configs, c.complete) == (5, False)
    assert c.notes[-1] == "time budget reached: 5 of 30 configs scored"


# -- the panel: labelling and suggesting, driven by its buttons ----------------------------------


def _tuner(results, tmp_path, **kw):
    from lab.tuning_ui import SpillTuner

    return SpillTuner(
        captures=results,
        user_corpus=tmp_path / "mine.jsonl",
        save_path=tmp_path / "cfg.json",
        **kw,
    )


def test_label_buttons_write_the_user_corpus_and_show_the_next_seam(hand_made, tmp_path):
    tuner = _tuner(hand_made, tmp_path)
    assert tuner.label_html.value.startswith("<b>seam 1 of 4</b><br>stream <code>strip</code>")
    assert "guard <code>strip (answer_start)</code>" in tuner.label_html.value
    assert tuner.seam_box.value == 8
    tuner.leak_button.click()
    assert tuner.label_status.value == (
        f"strip: leak, saved to <code>{tmp_path / 'mine.jsonl'}</code>"
    )
    assert tuner.label_html.value.startswith("<b>seam 2 of 4</b>")
    tuner.clean_button.click()
    tuner.skip_button.click()
    assert tuner.label_status.value == "held: skipped"
    assert tuner.seam_box.value == 5  # "Sure. Done": the suggested seam
    tuner.seam_box.value = 5
    tuner.leak_button.click()
    assert tuner.label_html.value == "<i>all 4 candidate seams seen (1 skipped)</i>"
    assert tuner.leak_button.disabled and tuner.clean_button.disabled
    rows = load_user_corpus(tmp_path / "mine.jsonl")
    assert rows[["id", "leak", "seam"]].astype(object).where(
        rows[["id", "leak", "seam"]].notna(), None
    ).values.tolist() == [
        ["strip", True, 8],
        ["spaced", False, None],
        ["upper", True, 5],
    ]
    again = _tuner(hand_made, tmp_path)  # a new session starts at the first unlabelled seam
    assert again.label_html.value.startswith("<b>seam 3 of 4</b><br>stream <code>held</code>")
    again.show(0)
    assert again.label_html.value.startswith("<b>seam 1 of 4</b> — labelled before: leak<br>")
    # the user's corpus is scored beside the bundled one: strip TP, spaced TN, upper FN
    yours = tuner.scores_table.loc["yours"]
    assert yours[["n", "tp", "fp", "fn", "tn"]].tolist() == [3, 1, 0, 1, 1]
    nowrap = "<span style='white-space: nowrap'>"  # the interval breaks as a whole
    assert tuner.scores_html.value.split("<tbody>")[1].split("</tbody>")[0] == (
        "<tr><td>labelled</td><td>89</td><td>3</td></tr>"
        f"<tr><td>precision</td><td>64.3\u00a0% {nowrap}(49.2–77.0\u00a0%)</span></td>"
        f"<td>100.0\u00a0% {nowrap}(20.7–100.0\u00a0%)</span></td></tr>"
        f"<tr><td>recall</td><td>77.1\u00a0% {nowrap}(61.0–87.9\u00a0%)</span></td>"
        f"<td>50.0\u00a0% {nowrap}(9.5–90.5\u00a0%)</span></td></tr>"
        "<tr><td>F1</td><td>0.701</td><td>0.667</td></tr>"
    )


def test_labelling_shows_model_text_as_text_never_markup(tmp_path):
    markup = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    r = _stream(
        f"s{markup}", {"reasoning": f"think {markup}"}, {"content": f"must do.Hello {markup}!"}
    )
    tuner = _tuner([r], tmp_path)
    page = tuner.label_html.value
    assert "<img" not in page and "<script" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    tuner.leak_button.click()
    assert "<img" not in tuner.label_status.value


def test_a_corrupt_user_corpus_stops_labelling_and_names_the_line(hand_made, tmp_path):
    (tmp_path / "mine.jsonl").write_text('{"id": "a", "text": "x", "leak": false}\n[1]\n')
    tuner = _tuner(hand_made, tmp_path)
    assert (
        f"{tmp_path / 'mine.jsonl'}:2: expected a JSON object, got list" in tuner.label_html.value
    )
    assert tuner.leak_button.disabled
    assert tuner.label(True) is None
    assert (tmp_path / "mine.jsonl").read_text() == '{"id": "a", "text": "x", "leak": false}\n[1]\n'


def test_suggest_button_shows_current_and_proposed_and_applies_the_proposal(labelled, tmp_path):
    from lab.tuning_ui import SpillTuner

    tuner = SpillTuner(labelled, user_corpus=tmp_path / "mine.jsonl", save_path=tmp_path / "c.json")
    tuner.suggest_options.update(space=SMALL_SPACE, k=3)
    tuner.suggest_on.value = "bundled"  # here: the hand-made labelled set
    assert tuner.apply_button.disabled
    tuner.suggest_button.click()
    bar = tuner.suggest_progress
    assert (bar.value, bar.max, bar.layout.visibility) == (4, 4, "hidden")
    page = tuner.suggest_html.value
    assert "fewer than 10 labels per class (5 leak, 7 clean)" in page
    assert "<li><code>min_clause_words</code>: 2 → <b>3</b></li>" in page
    assert (
        "<p><b>change require_glued_boundary=False, min_clause_words=3: held-out F1 1.000 "
        "for the search against 0.400 for the current settings, a gain over 0.02</b></p>"
    ) in page
    assert (
        "<tr><td>current</td><td>40.0\u00a0% <span style='white-space: nowrap'>(11.8–76.9\u00a0%)"
        "</span></td><td>40.0\u00a0% <span style='white-space: nowrap'>(11.8–76.9\u00a0%)</span>"
        "</td><td>0.400</td><td>0.356</td></tr>"
    ) in page
    full = "100.0\u00a0% <span style='white-space: nowrap'>(56.6–100.0\u00a0%)</span>"
    assert (
        f"<tr><td>best found (on the labels it was chosen on)</td><td>{full}</td><td>{full}</td>"
        "<td>1.000</td><td>1.000</td></tr>"
    ) in page
    assert (
        f"<tr><td>the search, held out</td><td>{full}</td><td>{full}</td><td>1.000</td>"
        "<td>1.000</td></tr>"
    ) in page
    assert (
        "3-fold nested stratified cross-validation over 5 leak and 7 clean seams (bundled)" in page
    )
    tuner.apply_button.click()
    assert tuner.config == SpillGuardConfig(require_glued_boundary=False, min_clause_words=3)
    assert tuner.score.f1 == 1.0
    tuner.suggest_on.value = "yours"  # nothing labelled yet
    tuner.suggest_button.click()
    assert tuner.suggest_html.value == "<i>no labelled seams to search on</i>"


def test_every_tab_of_the_panel_has_its_title(labelled, tmp_path):
    from lab.tuning_ui import SpillTuner

    tuner = SpillTuner(labelled, user_corpus=tmp_path / "mine.jsonl")
    # the two tabs added after the first ones once came up with empty titles
    assert tuner.tabs.titles == (
        "Changed vs baseline",
        "Misclassified",
        "Label captures",
        "Suggest settings",
    )
    assert len(tuner.tabs.children) == len(tuner.tabs.titles)
