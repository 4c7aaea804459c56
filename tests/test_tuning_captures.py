"""The tuner learns from captures: candidate seams, where it writes, labels, suggestions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pytest

from lab.config import LabConfig
from lab.guards.spill import SpillGuardConfig
from lab.replay import replay, replay_sse
from lab.tuning import CANDIDATE_COLUMNS, seam_candidates, suggest_seam
from lab.tuning_store import (
    default_config_path,
    default_user_corpus_path,
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
