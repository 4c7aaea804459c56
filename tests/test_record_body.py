"""``lab record --body FILE.json`` and ``--param key=value``: a whole request from a file,
parameters set over it, clear refusals before anything is written, and a credential in the
body sent as given but never written (the fake providers on loopback)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

import lab.capture
from lab.cli import main
from lab.cli.record import parse_param
from tests.capture_scan import places_holding
from tests.test_readme_record_your_app import (
    README,
    _free_ports,
    _lab_on_path,
    _on_ports,
    _wait_gone,
)

BODY_SECRET = "sk-body-secret-0123456789"
NESTED_SECRET = "tok-nested-secret-9876"


def _write(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def _record(base_url: str, out: Path, *argv: str) -> list[str]:
    return ["record", "--provider", "openrouter", "--base-url", base_url, "--out", str(out), *argv]


def test_a_body_file_with_params_over_it_is_sent_and_its_credentials_are_never_written(
    fake_server, tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    body = _write(
        tmp_path / "body.json",
        {
            "model": "fake/clean",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Any café tips?"},
            ],
            "max_tokens": 200,
            "api_key": BODY_SECRET,
            "provider": {"order": ["Chutes"], "auth": {"token": NESTED_SECRET}},
        },
    )
    fake_server.clear_requests()
    out = tmp_path / "o"
    argv = ["--body", str(body), "--param", "temperature=0.2", "--param", "reasoning.effort=low"]
    argv += ["--param", "provider.allow_fallbacks=false", "--param", "max_tokens=50"]
    code = main(_record(fake_server.base_url + "/api/v1", out, *argv))
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    (request,) = fake_server.requests
    # the builder's keys first (stream with usage), the body's, each --param set over them
    assert request.body == {
        "model": "fake/clean",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Any café tips?"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "reasoning": {"effort": "low"},
        "temperature": 0.2,
        "max_tokens": 50,
        "api_key": BODY_SECRET,
        "provider": {
            "order": ["Chutes"],
            "auth": {"token": NESTED_SECRET},
            "allow_fallbacks": False,
        },
    }
    assert stdout.splitlines()[:2] == [
        "Hello! The café on the corner opens at 8:00 — their crème brûlée is worth the trip ☕.",
        "Chutes · stop: Hello! The café on the corner opens at 8:00 — their crème brûlée is "
        "worth… · no flags",
    ]
    (exchange,) = lab.capture.open(out).exchanges()
    recorded = json.loads(exchange.request_body)
    assert (recorded["api_key"], recorded["provider"]["auth"]) == (
        "[REDACTED]",
        {"token": "[REDACTED]"},
    )
    assert recorded["temperature"] == 0.2 and recorded["messages"] == request.body["messages"]
    assert places_holding(out, BODY_SECRET) == [] and places_holding(out, NESTED_SECRET) == []
    assert BODY_SECRET not in stdout + stderr and NESTED_SECRET not in stdout + stderr


def test_params_over_a_prompt_are_read_as_json_when_they_are_json(fake_server, tmp_path, capsys):
    fake_server.clear_requests()
    argv = ["--model", "fake/clean", "--prompt", "hi", "--param", "max_tokens=50"]
    argv += ["--param", 'stop=["END"]', "--param", "user=alice", "--param", 'seed="7"']
    code = main(_record(fake_server.base_url + "/api/v1", tmp_path / "o", *argv))
    assert code == 0, capsys.readouterr().err
    (request,) = fake_server.requests
    assert request.body == {
        "model": "fake/clean",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 50,
        "stop": ["END"],
        "user": "alice",
        "seed": "7",
    }


def test_a_body_goes_through_the_providers_builder_like_a_prompt(fake_server, tmp_path, capsys):
    # Gemini: the messages become contents, the system turn systemInstruction, the
    # temperature generationConfig; the model goes into the URL
    body = _write(
        tmp_path / "body.json",
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "hi"},
            ],
            "temperature": 0.3,
        },
    )
    fake_server.clear_requests()
    argv = ["record", "--provider", "google", "--model", "fake/clean", "--body", str(body)]
    argv += ["--base-url", fake_server.base_url + "/v1beta", "--out", str(tmp_path / "o")]
    assert main(argv) == 0, capsys.readouterr().err
    (request,) = fake_server.requests
    assert request.body == {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "generationConfig": {"temperature": 0.3},
    }


def _bad_bodies(tmp: Path) -> list[tuple[list[str], str]]:
    (tmp / "list.json").write_text("[1, 2]", encoding="utf-8")
    (tmp / "broken.json").write_text('{"messages": [}', encoding="utf-8")
    (tmp / "empty.json").write_text("", encoding="utf-8")
    _write(tmp / "nomsg.json", {"model": "fake/clean", "temperature": 0.2})
    _write(tmp / "nomodel.json", {"messages": [{"role": "user", "content": "hi"}]})
    _write(tmp / "nostream.json", {"model": "m", "prompt": "hi", "stream": False})
    _write(tmp / "ok.json", {"model": "m", "prompt": "hi", "temperature": 0.2})
    (tmp / "dir.json").mkdir()
    t = str(tmp)
    return [
        (["--body", f"{t}/missing.json"], f"--body {t}/missing.json: no such file"),
        (["--body", f"{t}/dir.json"], f"--body {t}/dir.json: a directory, not a JSON file"),
        (
            ["--body", f"{t}/broken.json"],
            f"--body {t}/broken.json: not JSON (Expecting value at line 1 column 15); a body "
            'is a JSON object ({"messages": [...]})',
        ),
        (
            ["--body", f"{t}/empty.json"],
            f"--body {t}/empty.json: not JSON (Expecting value at line 1 column 1); a body "
            'is a JSON object ({"messages": [...]})',
        ),
        (
            ["--body", f"{t}/list.json"],
            f'--body {t}/list.json: a body is a JSON object ({{"messages": [...]}}), not an array',
        ),
        (
            ["--body", f"{t}/nomsg.json"],
            f"--body {t}/nomsg.json: a body needs 'messages' (a list) or 'prompt' (a string)",
        ),
        (
            ["--body", f"{t}/nomodel.json"],
            f'no model: give --model or a "model" (a string) in --body {t}/nomodel.json',
        ),
        (
            ["--body", f"{t}/nostream.json"],
            "'stream' is false: lab record always streams (leave 'stream' out, or true)",
        ),
        (
            ["--body", f"{t}/ok.json", "--prompt", "hi"],
            "--prompt and --body both give the request: give one (put the prompt in the "
            "body's messages)",
        ),
        (["--model", "m"], "no request: give --prompt TEXT or --body FILE.json"),
        (
            ["--body", f"{t}/ok.json", "--param", "=5"],
            "--param =5: the key before '=' is empty (give --param key=value)",
        ),
        (
            ["--body", f"{t}/ok.json", "--param", "temperature"],
            "--param temperature: no '=' (give --param key=value)",
        ),
        (
            ["--body", f"{t}/ok.json", "--param", "reasoning..effort=high"],
            "--param reasoning..effort=high: an empty part in the key 'reasoning..effort'",
        ),
        (
            ["--body", f"{t}/ok.json", "--param", "temperature.x=1"],
            "--param temperature.x=1: temperature is a number, not an object to set 'x' in",
        ),
        (
            ["--model", "m", "--prompt", "hi", "--param", "stream=false"],
            "'stream' is false: lab record always streams (leave 'stream' out, or true)",
        ),
    ]


def test_a_bad_body_or_param_is_refused_with_one_line_before_anything_is_written(tmp_path, capsys):
    cases = _bad_bodies(tmp_path)
    assert cases
    for argv, message in cases:
        out = tmp_path / "o"
        assert main(_record("http://127.0.0.1:9/v1", out, *argv)) == 2, argv
        assert capsys.readouterr().err == f"lab: error: {message}\n", argv
        assert not out.exists()


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("temperature=0.2", (["temperature"], 0.2)),
        ("max_tokens=50", (["max_tokens"], 50)),
        ("reasoning.effort=high", (["reasoning", "effort"], "high")),
        ('stream_options={"include_usage": true}', (["stream_options"], {"include_usage": True})),
        ('seed="7"', (["seed"], "7")),
        ("logprobs=true", (["logprobs"], True)),
        ("user=", (["user"], "")),
        ("stop=a=b", (["stop"], "a=b")),
        ("tool_choice=null", (["tool_choice"], None)),
    ],
)
def test_a_param_value_is_json_when_it_parses_else_a_string(text, parsed):
    assert parse_param(text) == parsed


def test_the_readme_body_block_runs_as_written_and_prints_what_it_says(tmp_path):
    section = README[README.index("## Command line") : README.index("## In Python")]
    (block,) = [b for b in re.findall(r"```bash\n(.*?)```", section, flags=re.S) if "--body" in b]
    (port,) = {int(p) for p in re.findall(r"--port (\d+)", block)}
    # on a port free on this machine: only the port changes (mapping it back gives the block)
    (free,) = _free_ports(1)
    block = _on_ports(block, {port: free})
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.Popen(
        ["bash", "-c", block],
        cwd=work,
        env=_lab_on_path(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):  # the fake server, in the background
            os.killpg(proc.pid, signal.SIGTERM)
        _wait_gone(proc.pid)
    assert proc.returncode == 0, stderr
    said = [ln[2:] for ln in block.splitlines() if ln.startswith("# ")]
    assert said
    lines = stdout.splitlines()
    assert lines[: len(said) - 1] == said[:-1]
    assert said[-1].endswith("...") and lines[len(said) - 1].startswith(said[-1][:-3])
    (exchange,) = lab.capture.open(work / "recordings").exchanges()
    sent = json.loads(exchange.request_body)
    assert {
        k: sent[k] for k in ("model", "temperature", "reasoning", "provider", "max_tokens")
    } == {
        "model": "fake/clean",
        "temperature": 0.2,
        "reasoning": {"effort": "low"},
        "provider": {"order": ["Chutes"]},
        "max_tokens": 200,
    }
