"""``lab show``: one stream read in a terminal, whole, marked and terminal-safe."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from lab.cli import main
from lab.cli.common import UsageError
from lab.cli.show import cells, pick_stream, render_stream, replay_body, use_colour
from lab.console import displayable

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = Path(__file__).resolve().parent / "show"
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""What must never reach the terminal from model text (tab included: it is expanded)."""


def _show(capsys, *argv: str) -> str:
    assert main(["show", str(ROOT / "captures"), *argv]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("name", "argv"),
    [
        # reasoning in <think> tags moved out of the answer, marked where it went
        ("think-leak-chutes", ["s18ec9d7c751", "--columns", "100"]),
        # an orphan closing tag: the part already shown as the answer is marked there
        ("think-leak-partial-siliconflow", ["s18ec9d7c919ad", "--columns", "80"]),
        # a tool call: its arguments as indented JSON, never a Python repr
        ("tool-call-fireworks", ["s18ec9d7cc02", "--columns", "80"]),
        # an error inside an HTTP 200 stream, with every recorded read
        ("mid-stream-error-together-raw", ["s18ec9d7cf544", "--columns", "80", "--raw"]),
        # a degradation ladder: what the second attempt sent differently, two reads each
        ("reject-min-p-ladder-raw", ["s18ec9d7d1477", "--columns", "80", "--raw", "--limit", "2"]),
    ],
)
def test_show_prints_the_bundled_stream_exactly(capsys, name, argv):
    out = _show(capsys, *argv)
    assert out == (EXPECTED / f"{name}.txt").read_text(encoding="utf-8")
    width = int(argv[argv.index("--columns") + 1])
    assert max(cells(line) for line in out.splitlines()) <= width
    assert CONTROL.findall(out) == []


def test_show_tool_arguments_are_json(capsys):
    out = _show(capsys, "s18ec9d7cc02", "--columns", "80")
    block = out[out.index("-- tool calls (1) --") : out.index("-- guard events")]
    args = block[block.index("{") : block.rindex("}") + 1]
    assert json.loads(args) == {"city": "Zürich", "days": 3}
    assert "{'city'" not in out


def test_show_a_prefix_only_one_stream_has_is_that_stream(capsys):
    assert _show(capsys, "s18ec9d7c75110").startswith("stream s18ec9d7c751103b5364d3e\n")


def test_show_unknown_or_ambiguous_id_is_one_line_naming_close_ids(capsys):
    assert main(["show", str(ROOT / "captures"), "s18ec9d7c75x"]) == 2
    assert capsys.readouterr().err == (
        "lab: error: no stream 's18ec9d7c75x' among 132 streams; close matches: "
        "s18ec9d7c751103b5364d3e, s18ec9d7c999c23b67532a2, s18ec9d7cc7ef3041281445, "
        "s18ec9d7ce3122c703b975e, s18ec9d7c2413dd5a5612ba\n"
    )
    assert main(["show", str(ROOT / "captures"), "s18ec9d7c9"]) == 2
    assert capsys.readouterr().err == (
        "lab: error: stream id 's18ec9d7c9' is ambiguous: 2 streams start with it: "
        "s18ec9d7c919ad13206eb17, s18ec9d7c999c23b67532a2\n"
    )


def test_pick_stream_names_an_escaped_id_and_examples_when_nothing_is_close():
    with pytest.raises(UsageError) as err:
        pick_stream(["abc123", "abd456"], "\x1b[2Jzz")
    assert str(err.value) == "no stream '\\x1b[2Jzz' among 2 streams; e.g. abc123, abd456"


def test_show_a_fixture_directory_shows_its_stream(capsys):
    assert main(["show", str(ROOT / "tests/fixtures/spill-novita"), "--columns", "80"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("stream s18ec9ce3a2aaea0d1df219\n")
    assert "greeting is what I[[must do.]]" in out


def _chunk(delta: dict, finish: str | None = None, provider: str = "Evil\x1b[31m") -> str:
    body = {
        "id": "gen-1",
        "model": "m",
        "object": "chat.completion.chunk",
        "created": 1,
        "provider": provider,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


HOSTILE_ANSWER = "ok \x1b[2J\x1b[31mred\x1b]0;pwned\x07\r\n\rover\u202eevil\u2066x\tend \x9b31m"


def _hostile_body(long: int = 0) -> bytes:
    content = "<think>plan \x1b]52;c;aGk=\x07</think>" + HOSTILE_ANSWER + "界" * 30 + "y" * long
    comment = ": \x1b]0;pwned-raw\x07\x1b[2J\r\n\n"  # a raw read may carry anything
    done = "data: [DONE]\n\n"
    return (comment + _chunk({"content": content}) + _chunk({}, "stop") + done).encode()


def test_hostile_model_text_renders_as_visible_escapes():
    r, request = replay_body("openrouter", _hostile_body())
    out = render_stream(r, request, width=80, raw=True)
    assert out == (
        "stream body\n"
        "openrouter · model — · served by Evil\\x1b[31m · finish stop · outcome continue\n"
        "\n"
        "-- request --\n"
        "(a raw response body: no request was recorded)\n"
        "\n"
        "-- answer | reasoning --\n"
        "answer (78 chars)                      | reasoning (17 chars); [[ ]]: moved by\n"
        "                                       | a guard\n"
        "---------------------------------------+---------------------------------------\n"
        "ok \\x1b[2J\\x1b[31mred\\x1b]0;pwned\\x07  | [[plan \\x1b]52;c;aGk=\\x07]]\n"
        "\\x0dover\\u202eevil\\u2066x    end       |\n"
        "\\x9b31m界界界界界界界界界界界界界界界  |\n"
        "界界界界界界界界界界界界界界界         |\n"
        "\n"
        "-- guard events (1) --\n"
        "guard           rule         attempt  seq  offset  moved_chars  moved\n"
        "think_stripper  think_block        0    1       7           17  plan \\x1b]52;c;…\n"
        "\n"
        "-- attempts (1) --\n"
        "attempt  label    status  ended  reads  degradable  error\n"
        "      0  default     200  eof        1  —           —\n"
        "\n"
        "-- usage --\n"
        "none (the stream reported none)\n"
        "\n"
        "-- anomalies (0) --\n"
        "none\n"
        "\n"
        "-- timing (ms after the request of the final attempt was sent) --\n"
        "untimed: no arrival times were recorded for its reads\n"
        "\n"
        "-- reads of attempt 0 (body): 1 read, 619 bytes, status —, ended eof --\n"
        '0         — ms    619 B  : \\x1b]0;pwned-raw\\x07\\x1b[2J\\r\\n\\ndata: {"id": "gen-1"\n'
        '                         , "model": "m", "object": "chat.completion.chunk", "cre\n'
        '                         ated": 1, "provider": "Evil\\u001b[31m", "choices": [{"i\n'
        '                         ndex": 0, "delta": {"content": "<think>plan \\u001b]52;c\n'
        "                         ;aGk=\\u0007</think>ok \\u001b[2J\\u001b[31mred\\u001b]0;pw\n"
        "                         ned\\u0007\\r\\n\\rover\\u202eevil\\u2066x\\tend \\x9b31m界界界\n"
        '                         界界界界界界界界界界界界界界界界界界界界界界界界界界界"\n'
        '                         }, "finish_reason": null}]}\\n\\ndata: {"id": "gen-1", "m\n'
        '                         odel": "m", "object": "chat.completion.chunk", "created\n'
        '                         ": 1, "provider": "Evil\\u001b[31m", "choices": [{"index\n'
        '                         ": 0, "delta": {}, "finish_reason": "stop"}]}\\n\\ndata: \n'
        "                         [DONE]\\n\\n\n"
    )


def test_a_10k_character_line_is_wrapped_to_the_width_and_kept_whole():
    r, _ = replay_body("openrouter", _hostile_body(long=10_000))
    out = render_stream(r, width=80)
    lines = out.splitlines()
    assert max(cells(line) for line in lines) <= 80
    assert CONTROL.findall(out) == []
    start = lines.index("-" * 38 + "-+-" + "-" * 38) + 1
    answer = "".join(line.split(" | ")[0] for line in lines[start : lines.index("", start)])
    assert answer.count("y") == 10_000


def test_raw_reads_are_escaped_and_wrapped(capsys, tmp_path):
    body = tmp_path / "body.sse"
    body.write_bytes(_hostile_body())
    assert main(["show", str(body), "--provider", "openrouter", "--columns", "60"]) == 0
    out = capsys.readouterr().out
    assert max(cells(line) for line in out.splitlines()) <= 60
    assert CONTROL.findall(out) == []
    assert "[[plan \\x1b]52;c;aGk=\\x07]]" in out


def test_a_raw_body_file_needs_its_provider(capsys, tmp_path):
    body = tmp_path / "body.sse"
    body.write_bytes(_hostile_body())
    assert main(["show", str(body)]) == 2
    assert capsys.readouterr().err.startswith(
        f"lab: error: {body} is a raw response body: say whose with --provider (one of: "
    )


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    class Tty:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_colour("auto", Tty(True)) is True
    assert use_colour("auto", Tty(False)) is False
    assert use_colour("always", Tty(False)) is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_colour("auto", Tty(True)) is False
    assert use_colour("never", Tty(True)) is False


def test_colour_marks_with_sgr_only_and_keeps_model_escapes_visible():
    r, _ = replay_body("openrouter", _hostile_body())
    out = render_stream(r, width=80, colour=True)
    sequences = set(re.findall(r"\x1b\[[0-9;]*[A-Za-z]", out))
    assert sequences == {"\x1b[1m", "\x1b[0m", "\x1b[30;43m"}
    assert "\x1b[30;43mplan \\x1b]52;c;aGk=\\x07\x1b[0m" in out
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    assert CONTROL.findall(plain) == []
    assert max(cells(line) for line in plain.splitlines()) <= 80


def test_displayable_escapes_bidirectional_controls():
    assert displayable("a\u202eb\u2066c\u2069d\u200f") == "a\\u202eb\\u2066c\\u2069d\\u200f"


# -- in a real terminal --------------------------------------------------------------------


def _tmux_or_skip() -> str:
    tmux = shutil.which("tmux")
    if tmux is None:
        if os.environ.get("CI"):
            pytest.fail("tmux is not installed: apt-get install tmux")
        pytest.skip("tmux not installed (apt-get install tmux)")
    return tmux


def _in_tmux(tmp_path: Path, argv: list[str], env: dict[str, str]) -> tuple[str, str, str]:
    """Run ``argv`` in a detached 80x60 tmux pane; (joined text, text with attributes,
    pane title) once it has exited."""
    tmux = _tmux_or_skip()
    sock = f"labshow-{uuid.uuid4().hex[:8]}"
    conf = tmp_path / "tmux.conf"
    conf.write_text("set -g remain-on-exit on\nset -g history-limit 5000\n")
    base = [tmux, "-L", sock, "-f", str(conf)]
    setenv = [x for k, v in env.items() for x in ("-e", f"{k}={v}")]
    cmd = " ".join(_quote(a) for a in argv)
    subprocess.run(
        [*base, "new-session", "-d", "-x", "80", "-y", "60", *setenv, cmd],
        check=True,
        timeout=30,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            dead = subprocess.run(
                [*base, "display", "-p", "#{pane_dead}"], capture_output=True, text=True
            ).stdout.strip()
            if dead == "1":
                break
            time.sleep(0.1)
        else:
            pytest.fail("lab show did not finish in tmux within 60 s")

        def capture(*flags: str) -> str:
            return subprocess.run(
                [*base, "capture-pane", "-p", "-S", "-", "-E", "-", *flags],
                capture_output=True,
                text=True,
                check=True,
            ).stdout

        title = subprocess.run(
            [*base, "display", "-p", "#{pane_title}"], capture_output=True, text=True
        ).stdout.strip()
        return capture("-J"), capture("-e"), title
    finally:
        subprocess.run([*base, "kill-server"], capture_output=True)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def test_show_in_an_80_column_tmux_pane_fits_and_lets_no_escape_through(tmp_path):
    body = tmp_path / "hostile.sse"
    body.write_bytes(_hostile_body(long=500))
    env = {"PYTHONPATH": str(ROOT), "NO_COLOR": "1", "LANG": "C.UTF-8", "TERM": "xterm"}
    argv = [sys.executable, "-m", "lab.cli", "show", str(body), "--provider", "openrouter"]
    joined, attributed, title = _in_tmux(tmp_path, [*argv, "--raw"], env)
    lines = [line for line in joined.splitlines() if line.strip()]
    assert lines[0] == "stream hostile.sse"  # no clear-screen wiped what came before
    # -J joins the rows the terminal wrapped itself: none is wider than the pane
    assert max(cells(line) for line in lines) <= 80
    assert "ok \\x1b[2J\\x1b[31mred\\x1b]0;pwned\\x07" in joined
    assert "\x1b" not in attributed  # NO_COLOR: not even our own attributes
    assert "pwned" not in title  # the OSC title sequence reached the terminal as text
    # the leaked reasoning, marked, and the recorded read escaped
    assert "[[plan \\x1b]52;c;aGk=\\x07]]" in joined
    assert "-- reads of attempt 0 (body): 1 read, " in joined


def test_show_in_tmux_colours_with_attributes_only(tmp_path):
    env = {"PYTHONPATH": str(ROOT), "LANG": "C.UTF-8", "TERM": "xterm-256color"}
    argv = [sys.executable, "-m", "lab.cli", "show", str(ROOT / "captures"), "s18ec9d7c751"]
    joined, attributed, _ = _in_tmux(tmp_path, argv, env)
    assert max(cells(line) for line in joined.splitlines()) <= 80
    assert "[[" not in joined  # on a terminal the moved text is highlighted, not bracketed
    assert re.findall(r"\x1b\[[0-9;]*[^0-9;m]", attributed) == []  # SGR only
    assert "\x1b[" in attributed


def test_request_turns_and_tools_read_every_familys_shape():
    from lab.reading import request_turns, tool_names

    anthropic = {
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "tools": [{"name": "get_weather", "input_schema": {}}],
    }
    gemini = {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [{"role": "user", "parts": [{"text": "Hi"}, {"inlineData": {}}]}],
        "tools": [{"functionDeclarations": [{"name": "a"}, {"name": "b"}]}],
    }
    responses = {"instructions": "Be brief.", "input": "Hi", "tools": [{"type": "web_search"}]}
    chat = {
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f"}}]},
        ],
        "tools": [{"type": "function", "function": {"name": "f"}}],
    }
    assert request_turns(anthropic) == [("system", "Be brief."), ("user", "Hi")]
    assert request_turns(gemini) == [("system", "Be brief."), ("user", "Hi\n[inlineData]")]
    assert request_turns(responses) == [("system", "Be brief."), ("user", "Hi")]
    assert request_turns(chat) == [("user", "Hi"), ("assistant", "[tool calls: f]")]
    assert [tool_names(b) for b in (anthropic, gemini, responses, chat)] == [
        ["get_weather"],
        ["a", "b"],
        ["web_search"],
        ["f"],
    ]


def test_a_long_conversation_shows_its_first_and_last_turns_each_cut():
    from lab.cli.show import MESSAGE_CHARS, Page, _request

    turns = [{"role": "user", "content": f"turn {i} " + "x" * 400} for i in range(10)]
    page = Page(width=100, colour=False)
    _request(page, json.dumps({"model": "m", "messages": turns}).encode(), None)
    text = "\n".join(page.lines)
    assert "messages (10):" in text
    assert "  … 4 more messages …" in text
    shown = re.findall(r"^  user: turn (\d+)", text, re.M)
    assert shown == ["0", "5", "6", "7", "8", "9"]
    assert text.count("x…") == 6 and text.count("(407 chars)") == 6  # each cut to 300
    assert MESSAGE_CHARS == 300 and "x" * 301 not in text.replace("\n  ", "")


def test_show_a_gemini_safety_block_names_the_rating_that_blocked(capsys):
    body = ROOT / "tests/realworld/google-vertex-safety-block-ratings.sse"
    assert main(["show", str(body), "--provider", "google", "--columns", "100"]) == 0
    out = capsys.readouterr().out
    assert (
        "content_blocked (SAFETY): Response stopped/blocked. Reason: SAFETY\n"
        "safety: HARM_CATEGORY_DANGEROUS_CONTENT HIGH (p 0.95, HARM_SEVERITY_MEDIUM 0.43) "
        "blocked\n"
    ) in out
