"""Spill-guard tuner: the labelled corpus, the pure scorer, the widget panel, the notebook."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd
import pytest
from pydantic import BaseModel, Field

from lab.config import LabConfig
from lab.guards.spill import SpillGuardConfig, find_spill_seam
from lab.replay import replay_sse
from lab.tuning import (
    CORPUS_COLUMNS,
    STREAMING_ONLY_FIELDS,
    CorpusError,
    SpillTuner,
    ablation,
    changed_cases,
    corpus_from_captures,
    load_corpus,
    mark_seam,
    predict,
    score,
    sweep,
)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "02-tune-spill-guard.ipynb"

# The reference config's misclassifications on the bundled corpus (human label != guard).
REFERENCE_FALSE_POSITIVES = {
    "code-os-path-prose",
    "code-try-obj-Method",
    "code-json-loads",
    "code-filename-quoted",
    "code-filename-bare",
    "abbrev-fig",
    "abbrev-mr",
    "emoji-ok-here",
    "casual-hey-glued",
    "casual-sure-Here",
    "url-check-example",
    "url-github",
    "url-https",
    "url-www-Google",
    "exclaim-no-way",
}
REFERENCE_FALSE_NEGATIVES = {
    "cjk-reasoning-tail",
    "cjk-japanese-tail",
    "korean-tail",
    "spaced-reasoning-tail",
    "single-done-lower",
    "ellipsis-unicode",
    "other-uppercase-tail",
    "other-digit-tail",
}


@pytest.fixture(scope="module")
def corpus() -> pd.DataFrame:
    return load_corpus()


def _sse(*deltas: dict) -> str:
    events = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


# -- corpus ---------------------------------------------------------------------------------


def test_bundled_corpus_has_at_least_60_valid_labelled_cases(corpus):
    assert len(corpus) == 89
    assert tuple(corpus.columns) == CORPUS_COLUMNS
    assert corpus["id"].is_unique
    assert corpus["leak"].notna().all()
    assert int(corpus["leak"].sum()) == 35
    leaks = corpus[corpus["leak"]]
    assert leaks["seam"].notna().all()
    assert corpus[~corpus["leak"]]["seam"].isna().all()
    # every leak label points at the first visible character of the answer
    for text, seam in zip(leaks["text"], leaks["seam"], strict=True):
        assert text[:seam].strip() and not text[seam].isspace()


def test_bundled_corpus_covers_the_required_categories(corpus):
    assert set(corpus["category"]) == {
        "seed_example",
        "code_identifier",
        "decimal",
        "abbreviation",
        "cjk_emoji",
        "casual_lowercase",
        "spaced",
        "single_word",
        "url_domain",
        "ellipsis",
        "punctuation_run",
        "long_text",
        "leading_whitespace",
        "markdown",
        "quote",
        "other",
    }
    texts = set(corpus["text"])
    for needed in (
        "must do.Hello!",
        "wait.Actually",
        "g it out.hey master 👋",
        "wait. Actually",
        "好的。你好",
        "嗯。好的！",
        "hey there!",
        "hmm.Yes",
        "**Answer**: 42",
    ):
        assert needed in texts
    assert any(len(t) > 180 for t in texts)


def test_every_reference_disagreement_is_noted_in_the_corpus(corpus):
    s = score(None, corpus)
    wrong = set(s.misclassified["id"])
    noted = set(corpus[corpus["note"].str.contains("Reference disagrees")]["id"])
    assert wrong == noted == REFERENCE_FALSE_POSITIVES | REFERENCE_FALSE_NEGATIVES


def _write(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "corpus.jsonl"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


GOOD = json.dumps({"id": "a", "text": "must do.Hello!", "leak": True, "seam": 8})
CLEAN = json.dumps({"id": "b", "text": "hey there!", "leak": False, "seam": None})


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "corpus.jsonl:3: not valid JSON"),
        ("[1, 2]", "corpus.jsonl:3: expected a JSON object, got list"),
        (json.dumps({"id": "c", "text": "x"}), "corpus.jsonl:3: missing field(s) 'leak'"),
        (
            json.dumps({"id": "c", "text": "x", "leak": "yes", "seam": None}),
            "corpus.jsonl:3: 'leak' must be true, false or null, got 'yes'",
        ),
        (
            json.dumps({"id": "c", "text": "ab.Cd", "leak": True, "seam": None}),
            "corpus.jsonl:3: 'seam' is required when 'leak' is true",
        ),
        (
            json.dumps({"id": "c", "text": "ab.Cd", "leak": True, "seam": 9}),
            "corpus.jsonl:3: 'seam' 9 is outside the text (1..5)",
        ),
        (
            json.dumps({"id": "c", "text": "ab.Cd", "leak": False, "seam": 3}),
            "corpus.jsonl:3: 'seam' must be null unless 'leak' is true",
        ),
        (
            json.dumps({"id": "a", "text": "x", "leak": False, "seam": None}),
            "corpus.jsonl:3: duplicate id 'a' (first on line 1)",
        ),
    ],
)
def test_bad_corpus_line_raises_a_clear_error_naming_the_line(tmp_path, bad, message):
    p = _write(tmp_path, [GOOD, CLEAN, bad])
    with pytest.raises(CorpusError) as exc:
        load_corpus(p)
    assert message in str(exc.value)


def test_corpus_file_with_blank_lines_and_unlabelled_rows_loads(tmp_path):
    unl = json.dumps({"id": "u", "text": "lol.Yeah", "leak": None, "seam": None, "x": 1})
    df = load_corpus(_write(tmp_path, [GOOD, "", CLEAN, unl]))
    assert list(df["id"]) == ["a", "b", "u"]
    assert list(df.columns) == [*CORPUS_COLUMNS, "x"]
    s = score(None, df)
    assert (s.tp, s.fp, s.fn, s.tn, s.n_unlabelled) == (1, 0, 0, 1, 1)
    assert list(s.cases["outcome"]) == ["TP", "TN", "unlabelled"]


def test_missing_or_empty_corpus_file_is_a_corpus_error(tmp_path):
    with pytest.raises(CorpusError, match="does not exist"):
        load_corpus(tmp_path / "nope.jsonl")
    with pytest.raises(CorpusError, match="has no cases"):
        load_corpus(_write(tmp_path, [""]))


# -- scoring ----------------------------------------------------------------------------------


def test_reference_config_scores_exactly_on_the_bundled_corpus(corpus):
    s = score(None, corpus)
    assert (s.tp, s.fp, s.fn, s.tn, s.n_unlabelled) == (27, 15, 8, 39, 0)
    assert s.precision == 27 / 42
    assert s.recall == 27 / 35
    assert s.accuracy == 66 / 89
    assert s.seam_accuracy == 27 / 35
    assert s.f1 == pytest.approx(2 * (27 / 42) * (27 / 35) / (27 / 42 + 27 / 35))
    assert s.confusion.index.name == "label"
    assert s.confusion.columns.name == "predicted"
    assert s.confusion.loc["leak", "leak"] == 27
    assert s.confusion.loc["leak", "clean"] == 8
    assert s.confusion.loc["clean", "leak"] == 15
    assert s.confusion.loc["clean", "clean"] == 39
    fp = set(s.cases.loc[s.cases["outcome"] == "FP", "id"])
    fn = set(s.cases.loc[s.cases["outcome"] == "FN", "id"])
    assert fp == REFERENCE_FALSE_POSITIVES
    assert fn == REFERENCE_FALSE_NEGATIVES


def test_named_cases_get_the_reference_predictions(corpus):
    s = score(None, corpus)
    assert s.prediction("seed-must-do") == 8
    assert s.prediction("seed-wait-actually") == 5
    assert s.prediction("seed-casual-reply") == 9
    assert s.prediction("seed-wait-spaced") is None
    assert s.prediction("code-obj-method-bare") is None
    assert s.prediction("single-hmm-Yes") == 4
    assert s.prediction("ws-newlines-must-do") == 10
    rule = s.cases.set_index("id")["rule"]
    assert rule["seed-wait-spaced"] == "spaced_boundary"
    assert rule["code-inline-open-span"] == "inline_code"
    assert rule["seed-casual-reply"] == "multi_word_clause"
    with pytest.raises(KeyError):
        s.prediction("no-such-case")


def test_score_predictions_are_find_spill_seam(corpus):
    cfg = SpillGuardConfig(min_clause_words=3, answer_start_emoji=False)
    s = score(cfg, corpus)
    assert len(s.cases) == len(corpus) > 0
    for text, pred in zip(s.cases["text"], s.cases["pred_seam"], strict=True):
        expected = find_spill_seam(text, cfg)
        assert (None if pd.isna(pred) else int(pred)) == expected


def test_disabled_guard_predicts_no_seam(corpus):
    s = score(SpillGuardConfig(enabled=False), corpus)
    assert (s.tp, s.fp, s.fn, s.tn) == (0, 0, 35, 54)
    assert (s.precision, s.recall, s.f1) == (0.0, 0.0, 0.0)
    assert predict("must do.Hello!", SpillGuardConfig(enabled=False)) == (None, "disabled")


def test_seam_match_ignores_whitespace_at_the_seam(corpus):
    s = score(SpillGuardConfig(require_glued_boundary=False), corpus)
    row = s.cases.set_index("id").loc["spaced-reasoning-tail"]
    assert (row["outcome"], int(row["pred_seam"]), int(row["seam"])) == ("TP", 25, 26)
    assert bool(row["seam_ok"]) is True


def test_turning_off_the_multi_word_clause_rule_changes_exactly_these_cases(corpus):
    cfg = SpillGuardConfig(strip_on_multi_word_clause=False)
    df = changed_cases(cfg, corpus)
    effects = dict(zip(df["id"], df["effect"], strict=True))
    assert effects == {
        "seed-casual-reply": "broken",
        "code-os-path-prose": "fixed",
        "code-json-loads": "fixed",
        "code-filename-quoted": "fixed",
        "code-filename-bare": "fixed",
        "abbrev-fig": "fixed",
        "casual-hey-glued": "fixed",
        "casual-user-says-hi": "broken",
        "casual-reply-in-kind": "broken",
        "url-check-example": "fixed",
        "url-github": "fixed",
        "url-https": "fixed",
        "md-list-after-tail": "broken",
        "md-fence-after-tail": "broken",
        "other-numbered-list": "broken",
        "other-one-word-answer": "broken",
    }
    assert df["tuned_seam"].isna().all()
    assert list(df.set_index("id").loc["seed-casual-reply", ["baseline_seam", "seam"]]) == [9, 9]
    s = score(cfg, corpus)
    assert (s.tp, s.fp, s.fn, s.tn) == (20, 6, 15, 48)


def test_inline_code_protection_and_unicode_ellipsis_toggles(corpus):
    df = changed_cases(SpillGuardConfig(protect_open_inline_code=False), corpus)
    assert dict(zip(df["id"], df["effect"], strict=True)) == {
        "code-inline-open-span": "broken",
        "code-os-path-backticked": "broken",
    }
    df = changed_cases(SpillGuardConfig(boundary_chars=".!?。！？…"), corpus)
    assert dict(zip(df["id"], df["effect"], strict=True)) == {"ellipsis-unicode": "fixed"}


def test_changed_cases_is_empty_for_the_baseline_itself(corpus):
    df = changed_cases(None, corpus)
    assert df.empty
    assert tuple(df.columns)[-1] == "effect"


def test_sweep_and_ablation_score_one_row_per_variant(corpus):
    sw = sweep("min_clause_words", [1, 2, 3], corpus)
    assert list(sw["min_clause_words"]) == [1, 2, 3]
    assert sw.loc[1, "precision"] == 27 / 42
    ab = ablation(corpus).set_index("variant")
    assert ab.loc["reference", "recall"] == 27 / 35
    assert "strip_on_multi_word_clause=False" in ab.index
    assert "enabled=False" not in ab.index
    assert "require_reasoning_first=False" not in ab.index
    assert len(ab) == 11
    assert ab.loc["strip_on_multi_word_clause=False", "fn"] == 15


def test_streaming_only_fields_never_move_the_corpus_score(corpus):
    assert set(STREAMING_ONLY_FIELDS) <= set(SpillGuardConfig.model_fields)
    ref = score(None, corpus).summary()
    for cfg in (
        SpillGuardConfig(hold_limit_chars=0),
        SpillGuardConfig(hold_limit_chars=100_000),
        SpillGuardConfig(require_reasoning_first=False),
    ):
        assert changed_cases(cfg, corpus).empty
        assert score(cfg, corpus).summary() == ref
    variants = set(ablation(corpus)["variant"])
    assert not any(v.startswith(STREAMING_ONLY_FIELDS) for v in variants)


def test_mark_seam():
    assert mark_seam("must do.Hello!", 8) == "must do.┃Hello!"
    assert mark_seam("hey", None) == "hey"


# -- captures ---------------------------------------------------------------------------------


def test_corpus_from_captures_reconstructs_first_content_as_sent():
    spilled = replay_sse(
        "openrouter",
        _sse(
            {"reasoning": "The user greets me. I"}, {"content": "  must do.Hel"}, {"content": "lo!"}
        ),
    )
    assert spilled.text == "Hello!"
    clean = replay_sse("openrouter", _sse({"reasoning": "hmm"}, {"content": "wait. Actually"}))
    no_reasoning = replay_sse("openrouter", _sse({"content": "must do.Hello!"}))
    df = corpus_from_captures([spilled, clean, no_reasoning])
    assert list(df["text"]) == ["  must do.Hello!", "wait. Actually"]
    assert list(df["id"]) == ["replay", "replay#2"]
    assert df["leak"].isna().all() and set(df["category"]) == {"capture"}
    assert [None if pd.isna(v) else int(v) for v in df["run_seam"]] == [10, None]
    assert find_spill_seam(df["text"].iloc[0]) == 10
    s = score(None, df)
    assert s.n_unlabelled == 2 and s.n_labelled == 0
    assert [None if pd.isna(v) else int(v) for v in s.cases["pred_seam"]] == [10, None]


def test_corpus_from_captures_with_no_qualifying_stream_is_empty():
    df = corpus_from_captures([replay_sse("openrouter", _sse({"content": "hi"}))])
    assert df.empty and tuple(df.columns)[: len(CORPUS_COLUMNS)] == CORPUS_COLUMNS


# -- widget -----------------------------------------------------------------------------------


def test_tuner_has_a_control_for_every_config_field():
    import ipywidgets as w

    tuner = SpillTuner()
    assert list(tuner.controls) == list(SpillGuardConfig.model_fields)
    assert isinstance(tuner.controls["enabled"], w.Checkbox)
    assert isinstance(tuner.controls["hold_limit_chars"], w.IntSlider)
    assert tuner.controls["min_clause_words"].min == 1
    assert isinstance(tuner.controls["boundary_chars"], w.Text)
    assert tuner.controls["boundary_chars"].value == ".!?。！？"
    assert "Master switch" in tuner.controls["enabled"].tooltip
    assert tuner.config == SpillGuardConfig()
    assert isinstance(tuner.widget, w.VBox)
    # the controls that only act on a live stream say so, in their tooltip and in the panel
    assert STREAMING_ONLY_FIELDS
    for name in STREAMING_ONLY_FIELDS:
        assert "does not move the corpus score" in tuner.controls[name].tooltip
        assert name in tuner.streaming_note.value
    assert "does not move" not in tuner.controls["min_clause_words"].tooltip
    assert "do not move the corpus score" in tuner.streaming_note.value


def test_tuner_generates_controls_from_the_model_fields_generically():
    from typing import Literal

    import ipywidgets as w

    from lab.tuning_ui import _make_control

    class Extra(BaseModel):
        words: tuple[str, ...] = ("um", "uh")
        mode: Literal["a", "b"] = "a"
        ratio: float = 0.5
        limit: int = Field(3, ge=2, le=9)
        other: dict = {"k": 1}

    made = {
        n: _make_control(w, n, info, getattr(Extra(), n), "")
        for n, info in Extra.model_fields.items()
    }
    ctl, parse, fmt = made["words"]
    assert isinstance(ctl, w.Text) and ctl.value == "um, uh"
    assert parse("a, b ,c") == ("a", "b", "c")
    assert isinstance(made["mode"][0], w.Dropdown)
    assert isinstance(made["ratio"][0], w.FloatText)
    assert (made["limit"][0].min, made["limit"][0].max) == (2, 9)
    assert made["other"][1](made["other"][0].value) == {"k": 1}


def test_tuner_rescores_when_a_control_changes(corpus):
    tuner = SpillTuner(corpus)
    assert tuner.changed.empty
    assert "no case changes" in tuner.changed_html.value
    assert "0.643" in tuner.summary_html.value

    tuner.controls["strip_on_multi_word_clause"].value = False
    assert tuner.config.strip_on_multi_word_clause is False
    assert (tuner.score.tp, tuner.score.fp) == (20, 6)
    assert len(tuner.changed) == 16
    assert "code-os-path-prose" in tuner.changed_html.value
    assert "0.769" in tuner.summary_html.value
    assert "(+0.126)" in tuner.summary_html.value

    tuner.controls["boundary_chars"].value = ".!?。！？…"
    assert "ellipsis-unicode" in set(tuner.changed["id"])

    tuner.controls["min_clause_words"].value = 3
    assert tuner.config.min_clause_words == 3

    tuner.reset()
    assert tuner.config == SpillGuardConfig()
    assert tuner.changed.empty


def test_tuner_keeps_the_last_valid_config_on_bad_input(corpus):
    tuner = SpillTuner(corpus, baseline=SpillGuardConfig())
    tuner.set(min_clause_words=3)
    tuner.controls["answer_start_chars"].value = "*"
    good = tuner.config
    # a value the model rejects (min_clause_words >= 1) is reported, not applied
    tuner.controls["min_clause_words"].min = 0
    tuner.controls["min_clause_words"].value = 0
    assert "invalid config" in tuner.error_html.value
    assert tuner.config == good
    tuner.controls["min_clause_words"].value = 2
    assert tuner.error_html.value == ""
    with pytest.raises(KeyError):
        tuner.set(no_such_field=1)


def test_save_status_shows_the_absolute_path_of_a_relative_save_path(tmp_path, corpus, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tuner = SpillTuner(corpus, save_path="spill-config.json")
    assert tuner.path_text.value == "spill-config.json"
    tuner.save_button.click()
    assert f"<code>{tmp_path.resolve() / 'spill-config.json'}</code>" in tuner.save_status.value


def test_save_config_goes_outside_the_repository_by_default_and_never_overwrites_silently(
    tmp_path, corpus, monkeypatch
):
    monkeypatch.delenv("LAB_DATA_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(ROOT / "notebooks")  # where the notebook's kernel runs
    tracked = sorted(p for p in ROOT.rglob("*.json") if ".git" not in p.parts)
    tuner = SpillTuner(corpus)
    default = Path(tuner.path_text.value)
    assert default.is_absolute() and ROOT not in default.parents
    tuner.set(min_clause_words=3)
    tuner.save_button.click()
    assert tuner.saved_path == default.resolve()
    assert LabConfig.load(default).spill == SpillGuardConfig(min_clause_words=3)
    assert sorted(p for p in ROOT.rglob("*.json") if ".git" not in p.parts) == tracked
    # a second save to the same path refuses and leaves the file as it was
    tuner.set(min_clause_words=4)
    tuner.save_button.click()
    assert "already exists (not overwritten): tick overwrite" in tuner.save_status.value
    assert LabConfig.load(default).spill.min_clause_words == 3
    with pytest.raises(FileExistsError):
        tuner.save()
    # ticking "overwrite" replaces it, once
    tuner.overwrite_box.value = True
    tuner.save_button.click()
    assert LabConfig.load(default).spill.min_clause_words == 4
    assert tuner.overwrite_box.value is False
    assert sorted(p.name for p in default.parent.iterdir()) == ["spill-config.json"]


def test_save_button_writes_a_config_lab_config_load_accepts(tmp_path, corpus):
    tuner = SpillTuner(corpus, save_path=tmp_path / "tuned.json")
    tuner.controls["answer_start_emoji"].value = False
    tuner.controls["hold_limit_chars"].value = 240
    tuner.save_button.click()
    assert "saved" in tuner.save_status.value
    assert tuner.saved_path.is_absolute()
    assert str((tmp_path / "tuned.json").resolve()) in tuner.save_status.value
    loaded = LabConfig.load(tmp_path / "tuned.json")
    assert loaded.spill == tuner.config
    assert loaded.spill == SpillGuardConfig(answer_start_emoji=False, hold_limit_chars=240)
    assert loaded == LabConfig(spill=tuner.config)
    # the saved file drives a replay
    r = replay_sse(
        "openrouter",
        _sse({"reasoning": "r"}, {"content": "ok.😀 here"}),
        config=tmp_path / "tuned.json",
    )
    assert r.text == "ok.😀 here"
    tuner.path_text.value = str(tmp_path / "missing-dir" / "x.json")  # made on the way
    tuner.save_button.click()
    assert LabConfig.load(tmp_path / "missing-dir" / "x.json") == loaded
    tuner.path_text.value = str(tmp_path / "tuned.json" / "x.json")  # under a file: refused
    tuner.save_button.click()
    assert f"{(tmp_path / 'tuned.json').absolute()}: not a directory" in tuner.save_status.value


def test_tuner_adds_results_as_unlabelled_cases():
    results = [
        replay_sse(
            "openrouter",
            _sse({"reasoning": "The user greets me. I"}, {"content": "must do.Hello!"}),
        )
    ]
    tuner = SpillTuner(captures=results)
    assert tuner.score.n_unlabelled == 1
    assert tuner.compare_button is None
    with pytest.raises(ValueError, match="no capture path"):
        tuner.run_compare()
    tuner.set(enabled=False)
    row = tuner.changed.set_index("id").loc["replay"]
    assert row["effect"] == "unlabelled"


def test_tuner_shows_model_text_and_stream_ids_as_text_never_markup():
    markup = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
    shown = "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&lt;script&gt;alert(2)&lt;/script&gt;"
    sse = _sse({"reasoning": "The user greets me. I"}, {"content": f"must do.Hello {markup}!"})
    tuner = SpillTuner(captures=[replay_sse("openrouter", sse, stream_id=f"s{markup}")])
    tuner.set(enabled=False)
    page = tuner.changed_html.value
    assert "<img" not in page and "<script" not in page
    assert (
        f'<tr><td>s{shown}</td><td>unlabelled</td><td><span style="color:#999">—</span></td>'
        f'<td><code><s style="color:#b00">must do.</s><b style="color:#06c">┃</b>Hello {shown}!'
        f"</code></td><td><code>must do.Hello {shown}!</code></td><td>disabled</td></tr>"
    ) in page


def test_tuner_on_a_recorded_capture_compares_baseline_and_tuned(tmp_path, fake_server):
    from lab.recorder import Recorder
    from lab.request import build_body

    with Recorder(tmp_path, label="tuner") as rec:
        for seed in range(3):  # backends Novita (spills), DeepInfra, Parasail (spills)
            body = build_body("openrouter", model="fake/spill", prompt="hi")
            body["seed"] = seed
            rec.record("openrouter", body, base_url=fake_server.base_url + "/api/v1")
    tuner = SpillTuner(captures=tmp_path)
    real = tuner.score.cases[tuner.score.cases["category"] == "capture"]
    assert list(real["text"]) == [
        "must do.Hello! How can I help with your café order today? ☕",
        "Hello! How can I help with your café order today? ☕",
        "must do.Hello! How can I help with your café order today? ☕",
    ]
    assert [None if pd.isna(v) else int(v) for v in real["pred_seam"]] == [8, None, 8]
    tuner.set(enabled=False)
    tuner.compare_button.click()
    df = tuner.compare_result
    assert sorted(df["serving_provider"].unique()) == ["Novita", "Parasail"]
    assert set(df["field"]) == {"text", "reasoning"}
    assert "must do.Hello!" in tuner.compare_html.value


# -- notebook ---------------------------------------------------------------------------------


def test_notebook_is_committed_without_outputs():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = [cell for cell in nb["cells"] if cell["cell_type"] == "code"]
    assert code
    for cell in code:
        assert cell["outputs"] == [] and cell["execution_count"] is None


def _execute_notebook(monkeypatch, captures: str | None) -> tuple[object, list, str]:
    """Run notebook 02 headless (cwd notebooks/); LAB_CAPTURES unset when captures is None."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    # the tuner reads the user's labels from the data dir: an empty one, not the real one
    monkeypatch.setenv("LAB_DATA_DIR", tempfile.mkdtemp(prefix="lab-data-"))
    if captures is None:
        monkeypatch.delenv("LAB_CAPTURES", raising=False)
    else:
        monkeypatch.setenv("LAB_CAPTURES", captures)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=60,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()
    errors = [
        out
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.get("output_type") == "error"
    ]
    text = "".join(
        out.get("text", "") for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs
    )
    return nb, errors, text


def test_notebook_first_code_cell_is_the_parameters_cell():
    nbformat = pytest.importorskip("nbformat")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert "parameters" in first.metadata.get("tags", [])
    assert 'CAPTURES = os.environ.get("LAB_CAPTURES", "../captures")' in first.source
    later = "".join(c.source for c in nb.cells if c.cell_type == "code" and c is not first)
    assert "CAPTURES =" not in later


def test_notebook_executes_headless_without_errors(monkeypatch):
    before = sorted(NOTEBOOK.parent.iterdir())  # a config a user saved here earlier is fine
    _nb, errors, text = _execute_notebook(monkeypatch, None)
    assert errors == []
    assert "precision 0.643" in text
    assert "streams replayed with the tuned config" in text
    assert "20 candidate seams; labels go to " in text
    assert (
        "keep the current settings: held-out F1 0.609 for the search against 0.701 for the "
        "current settings, not a gain over 0.02" in text
    )
    assert sorted(NOTEBOOK.parent.iterdir()) == before  # the run wrote nothing beside it


def test_notebook_runs_on_the_corpus_alone_when_lab_captures_is_empty(monkeypatch):
    _nb, errors, text = _execute_notebook(monkeypatch, "")
    assert errors == []
    assert "tuning on the labelled corpus alone" in text
    assert "no captures to replay" in text
    assert "0 candidate seams; labels go to " in text
    assert "precision 0.643" in text


def test_notebook_stops_with_a_capture_error_on_a_path_that_does_not_exist(tmp_path, monkeypatch):
    nbclient = pytest.importorskip("nbclient")
    missing = tmp_path / "no-such-captures"
    with pytest.raises(nbclient.exceptions.CellExecutionError) as exc:
        _execute_notebook(monkeypatch, str(missing))
    assert "CaptureError" in str(exc.value)
    assert f"{missing}: no such file or directory" in str(exc.value)


# -- usability: widths, refusals, a stale comparison -----------------------------------------


def test_tuner_controls_are_wide_enough_and_buttons_fit_their_labels(corpus):
    from lab.tuning_ui import CONTROL_LABEL_WIDTH, CONTROL_WIDTH

    tuner = SpillTuner(corpus)
    assert {c.layout.width for c in tuner.controls.values()} == {CONTROL_WIDTH}
    assert {c.style.description_width for c in tuner.controls.values()} == {CONTROL_LABEL_WIDTH}
    # the slider track gets the control's width less its label's: 38em - 16em = 22em
    assert (CONTROL_WIDTH, CONTROL_LABEL_WIDTH) == ("38em", "16em")
    longest = max(map(len, tuner.controls))
    assert longest <= 2 * float(CONTROL_LABEL_WIDTH.removesuffix("em"))  # ~0.5em a char
    assert tuner.reset_button.layout.width == tuner.save_button.layout.width == "auto"


def test_tuner_refuses_empty_boundary_chars_and_says_why(corpus):
    tuner = SpillTuner(corpus)
    good = tuner.config
    tuner.controls["boundary_chars"].value = ""
    assert "boundary_chars cannot be empty: an empty set of boundary characters" in (
        tuner.error_html.value
    )
    assert tuner.config == good
    tuner.controls["boundary_chars"].value = "."
    assert tuner.error_html.value == "" and tuner.config.boundary_chars == "."


def test_captures_comparison_shows_progress_and_is_marked_stale_after_a_change(corpus):
    root = Path(__file__).resolve().parents[1] / "captures"
    from lab.replay import replay

    results = replay(root)
    tuner = SpillTuner(corpus, captures=root, results=results)
    assert tuner.compare_html.value.startswith("<i>click")
    tuner.set(enabled=False)
    tuner.compare_button.click()
    bar = tuner.compare_progress
    assert (bar.value, bar.max, bar.layout.visibility) == (132, 132, "hidden")
    assert tuner.compare_html.value.startswith("<b>2 streams changed (4 fields)</b>")
    assert not tuner.compare_stale
    tuner.set(enabled=True)
    assert tuner.compare_stale
    assert tuner.compare_html.value.startswith("<div") and "<b>stale:</b>" in (
        tuner.compare_html.value
    )
    assert "2 streams changed (4 fields)" in tuner.compare_html.value  # the old one, marked
    tuner.compare_button.click()
    assert not tuner.compare_stale
    assert tuner.compare_html.value == "<i>no stream output changes</i>"


def test_tuner_given_results_does_not_replay_the_captures_again(corpus, monkeypatch):
    import lab.replay

    root = Path(__file__).resolve().parents[1] / "captures"
    results = lab.replay.replay(root)

    def no_replay(*args, **kwargs):
        raise AssertionError("replayed again")

    monkeypatch.setattr(lab.replay, "replay", no_replay)
    tuner = SpillTuner(corpus, captures=root, results=results)
    assert tuner.compare_source == root
    assert (tuner.score.cases["category"] == "capture").sum() > 0


def test_tuner_shows_its_scores_and_what_to_do_to_a_viewer_without_widgets(corpus):
    from lab.widgetview import NEEDS

    tuner = SpillTuner(corpus)
    tuner.controls["strip_on_multi_word_clause"].value = False
    bundle = tuner._repr_mimebundle_()
    assert bundle["text/plain"] == (
        "The spill-guard tuner (its settings, scores, labelling and suggestions) "
        f"(interactive, ipywidgets): {NEEDS}; a static copy is in its HTML output."
    )
    page = bundle["text/html"]
    assert page.startswith("<p><i>The tuner's controls need a live kernel; its scores at ")
    assert "0.769" in page and "(+0.126)" in page  # the scores of the settings it was left at
    assert "<script" not in page
    assert "application/vnd.jupyter.widget-view+json" in bundle
