"""``lab record`` prints every answer's first line and its flags, terminal-safe and fitted."""

from __future__ import annotations

import json

from lab.cli import main
from lab.cli.show import cells


def _body(content: str, provider: str = "Chutes") -> bytes:
    def chunk(delta: dict, finish: str | None = None) -> str:
        body = {
            "id": "gen-1",
            "model": "m",
            "object": "chat.completion.chunk",
            "created": 1,
            "provider": provider,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    return (chunk({"content": content}) + chunk({}, "stop") + "data: [DONE]\n\n").encode()


def _record(canned_server, monkeypatch, tmp_path, body: bytes, *extra: str) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    base = canned_server(lambda path: (200, "text/event-stream", body)) + "/api/v1"
    argv = ["record", "--provider", "openrouter", "--model", "m", "--prompt", "p"]
    assert main([*argv, "--base-url", base, "--out", str(tmp_path), *extra]) == 0


LEAK = "<think>The user greets me.</think>Hello! The café opens at 8.\nSecond line."


def test_record_prints_each_answers_first_line_and_its_flags(
    canned_server, monkeypatch, tmp_path, capsys
):
    _record(canned_server, monkeypatch, tmp_path, _body(LEAK), "--n", "3", "--columns", "100")
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [
        f"[{i}/3] Chutes · stop: Hello! The café opens at 8. · flags: leaked (think_stripper)"
        for i in (1, 2, 3)
    ]
    assert lines[3].startswith("capture written to ")


def test_record_with_one_request_prints_the_whole_answer_then_its_line(
    canned_server, monkeypatch, tmp_path, capsys
):
    _record(canned_server, monkeypatch, tmp_path, _body("Hi.\nBye.", "Together"))
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["Hi.", "Bye.", "Together · stop: Hi. · no flags"]


def test_record_lines_fit_the_width_and_show_escapes(canned_server, monkeypatch, tmp_path, capsys):
    hostile = "\x1b]0;pwned\x07\x1b[2J" + "界" * 80
    body = _body(hostile, "Evil\x1b[31m")
    _record(canned_server, monkeypatch, tmp_path, body, "--n", "2", "--columns", "60")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "[1/2] Evil\\x1b[31m · stop: \\x1b]0;pwned\\x07\\x1b[… · no flags"
    assert all(cells(line) <= 60 for line in lines[:2])
    assert "\x1b" not in "".join(lines)
