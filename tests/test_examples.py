"""The sample files in ``examples/`` (real provider bytes the README's import blocks read):
they import and replay to exact results, and ``session.har`` is what its script writes."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import lab.capture
from lab import tables
from lab.interchange import import_har, import_vcr
from lab.replay import replay
from tests.capture_scan import places_holding

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def test_the_shipped_har_is_what_its_script_writes():
    spec = importlib.util.spec_from_file_location(
        "make_session_har", EXAMPLES / "make_session_har.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (EXAMPLES / "session.har").read_text(encoding="utf-8") == module.render()


def test_the_har_imports_two_real_streams_skips_the_script_and_redacts_the_keys(tmp_path):
    report = import_har(EXAMPLES / "session.har", tmp_path)
    assert report.summary().endswith("; skipped 1: 1 not an LLM API request")
    df = tables.streams(replay(report.capture_path))
    assert df[["provider", "serving_provider", "model", "error_type"]].fillna("-").to_dict(
        "records"
    ) == [
        {
            "provider": "openrouter",
            "serving_provider": "Minimax",
            "model": "minimax/minimax-m2:free",
            "error_type": "api_error",
        },
        {"provider": "xai", "serving_provider": "-", "model": "grok-3-mini", "error_type": "-"},
    ]
    for key in ("sk-or-v1-example-key-redacted-on-import", "xai-example-key-redacted-on-import"):
        assert places_holding(tmp_path, key) == []


def test_the_cassette_from_simonw_llm_replays_its_tool_chain(tmp_path):
    pytest.importorskip("yaml")
    report = import_vcr([EXAMPLES / "llm-tools-streaming.yaml"], tmp_path)
    results = replay(report.capture_path)
    df = tables.streams(results)
    assert df["anomalies"].tolist() == ["parallel_tool_calls_dropped,tool_call_header_resent", ""]
    assert [r.text for r in results] == ["", "The current version of *llm* is **0.fixed-version**."]
    assert [e.url for e in lab.capture.open(report.capture_path).exchanges()] == [
        "https://api.openai.com/v1/chat/completions"
    ] * 2
