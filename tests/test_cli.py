"""The ``lab`` command line, end to end (fake providers on loopback, no network, no keys)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import lab.capture
from lab.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_demo_records_every_scenario_replays_identically_and_writes_plots(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--n", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    from lab.demo import demo_requests

    n = len(demo_requests(1))
    assert f"replay reproduces live: {n}/{n} streams identical" in out
    for name in ("leaks_by_backend", "ttft_by_backend", "classifiers", "timeline"):
        assert (tmp_path / "plots" / f"{name}.png").stat().st_size > 1000
    cap = lab.capture.open(tmp_path / "captures")
    assert len(cap.requests()) == n


def test_record_against_a_base_url_writes_a_capture(fake_server, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    code = main(
        [
            "record",
            "--provider",
            "openrouter",
            "--model",
            "fake/clean",
            "--prompt",
            "hi",
            "--base-url",
            fake_server.base_url + "/api/v1",
            "--out",
            str(tmp_path),
            "--n",
            "2",
        ]
    )
    assert code == 0
    cap = lab.capture.open(tmp_path)
    assert len(cap.requests()) == 2
    assert "capture written to" in capsys.readouterr().out


def test_record_without_a_key_or_base_url_says_which_variable_to_set(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    code = main(
        [
            "record",
            "--provider",
            "openrouter",
            "--model",
            "m",
            "--prompt",
            "hi",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 2
    assert "set OPENROUTER_API_KEY" in capsys.readouterr().err


def test_record_with_an_unknown_provider_exits_2(capsys):
    assert main(["record", "--provider", "nope", "--model", "m", "--prompt", "x"]) == 2
    assert "unknown provider 'nope'" in capsys.readouterr().err


def test_replay_prints_the_stream_table(capsys):
    assert main(["replay", str(ROOT / "captures")]) == 0
    out = capsys.readouterr().out
    assert "== streams (" in out and "fake/think-leak" in out


def test_replay_of_a_missing_path_is_one_clear_line(tmp_path, capsys):
    missing = tmp_path / "nope"
    assert main(["replay", str(missing)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(missing) in err[0]


def test_replay_compare_lists_streams_whose_output_changes(tmp_path, capsys):
    cfg = tmp_path / "no-spill.json"
    cfg.write_text(json.dumps({"spill": {"enabled": False}}))
    assert main(["replay", str(ROOT / "captures"), "--compare", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "streams whose output changed" in out
    assert "must do." in out


def test_replay_with_a_bad_config_file_is_one_clear_line(tmp_path, capsys):
    cfg = tmp_path / "bad.json"
    cfg.write_text("{not json")
    assert main(["replay", str(ROOT / "captures"), "--config", str(cfg)]) == 2
    assert "bad.json: not a JSON config file" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--help"], ["demo", "--help"], ["fixtures", "--help"]])
def test_help_exits_cleanly(argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0


def test_a_glob_of_chunk_parts_brings_their_streams_parts_along():
    whole = lab.capture.open(ROOT / "captures")
    chunks_only = lab.capture.open(str(ROOT / "captures" / "*" / "chunks-*.parquet"))
    assert len(chunks_only.requests()) == len(whole.requests())
    assert len(chunks_only.chunks) == len(whole.chunks)


def test_record_says_when_the_stream_failed(tmp_path, capsys):
    code = main(
        [
            "record",
            "--provider",
            "openrouter",
            "--model",
            "x",
            "--prompt",
            "hi",
            "--base-url",
            "http://127.0.0.1:9/api/v1",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0  # the failure is recorded, which is the job
    assert "stream error (api_error): openrouter connection failed" in capsys.readouterr().err
    (row,) = lab.capture.open(tmp_path).streams.itertuples()
    assert row.end_reason == "read_error" and "ConnectError" in row.error


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["replay", "captures", "--workers", "0"], "must be at least 1, got 0"),
        (["report", "captures", "--workers", "-2"], "must be at least 1, got -2"),
        (
            ["record", "--provider", "openrouter", "--model", "m", "--prompt", "p", "--n", "0"],
            "must be at least 1, got 0",
        ),
        (["demo", "--n", "zero"], "not a whole number: 'zero'"),
    ],
)
def test_a_count_below_one_is_refused_with_one_clear_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(message)


def test_record_help_names_every_provider_and_its_key_variable(capsys):
    with pytest.raises(SystemExit):
        main(["record", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    expected = {
        "anthropic": "ANTHROPIC_API_KEY",
        "custom": "CUSTOM_API_KEY",
        "deepseek": "DEEPSEEK_API_KEY",
        "google": "GEMINI_API_KEY or GOOGLE_API_KEY",
        "nvidia": "NVIDIA_API_KEY",
        "openai": "OPENAI_API_KEY",
        "openrouter": "OPENROUTER_API_KEY",
        "zai": "ZAI_API_KEY",
    }
    assert "; ".join(f"{p}: {env}" for p, env in expected.items()) in out
    assert f"one of: {', '.join(expected)}" in out
