"""User recordings never land in captures/, the bundled sample the notebooks read."""

from __future__ import annotations

import inspect
from pathlib import Path

from lab.cli import build_parser, main
from lab.interchange import import_har, import_vcr
from lab.proxy import ProxyConfig
from lab.recorder import DEFAULT_OUT, Recorder

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_lab_record_and_the_recorder_default_to_the_recordings_folder():
    args = build_parser().parse_args(
        ["record", "--provider", "openrouter", "--model", "m", "--prompt", "p"]
    )
    assert args.out == DEFAULT_OUT == "recordings"
    assert inspect.signature(Recorder).parameters["out"].default == "recordings"


def test_lab_proxy_and_lab_import_default_to_the_recordings_folder():
    parse = build_parser().parse_args
    assert parse(["proxy", "--provider", "openai"]).out == "recordings"
    assert parse(["import", "har", "x.har"]).out == "recordings"
    assert parse(["import", "vcr", "a.yaml", "b.yaml"]).out == "recordings"
    assert ProxyConfig(provider="openai", upstream="http://127.0.0.1:9").out == "recordings"
    for fn in (import_har, import_vcr):
        assert inspect.signature(fn).parameters["out"].default == "recordings"


def test_lab_import_without_out_writes_under_recordings_and_leaves_captures_alone(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    assert main(["import", "har", str(EXAMPLES / "session.har")]) == 0
    assert main(["import", "vcr", str(EXAMPLES / "llm-tools-streaming.yaml")]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["recordings"]
    assert len([p for p in (tmp_path / "recordings").iterdir() if p.is_dir()]) == 2
