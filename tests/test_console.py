"""What the command line prints: tables fitted to a width, every row on request, one
missing-value marker, a commented example config, the version, one line on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from lab import __version__
from lab.cli import main
from lab.config import LabConfig
from lab.console import config_example, load_config, render
from lab.guards import SpillGuardConfig

ROOT = Path(__file__).resolve().parents[1]


def _frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "stream_id": ["s-one", "s-two"],
            "serving_provider": ["DeepInfra", None],
            "model": ["z-ai/glm-4.6-a-long-model-name", "m"],
            "ttft_ms": [12.3456, float("nan")],
            "output_tokens": pd.array([40, None], dtype="Int64"),
            "cost": [4.05e-05, None],
        }
    )


def test_table_cuts_long_cells_and_leaves_out_columns_that_do_not_fit():
    text, left_out = render(_frame(), width=50)
    assert text.splitlines() == [
        "stream_id  serving_provider  model         ttft_ms",
        "s-one      DeepInfra         z-ai/glm-4.…     12.3",
        "s-two      —                 m                   —",
    ]
    assert left_out == ["output_tokens", "cost"]


def test_table_at_full_width_rounds_and_shows_missing_one_way():
    text, left_out = render(_frame(), width=120)
    assert left_out == []
    assert text.splitlines()[1:] == [
        "s-one      DeepInfra         z-ai/glm-4.6-a-long-model-name     12.3             40  $0.0000405",
        "s-two      —                 m                                     —              —           —",
    ]


def test_csv_and_json_leave_missing_values_empty_and_null():
    csv, _ = render(_frame(), fmt="csv")
    assert csv.splitlines()[2] == "s-two,,m,,,"
    rows = json.loads(render(_frame(), fmt="json")[0])
    assert rows[1] == {"stream_id": "s-two", "serving_provider": None, "model": "m",
                       "ttft_ms": None, "output_tokens": None, "cost": None}  # fmt: skip
    md, _ = render(_frame(), fmt="markdown")
    assert md.splitlines()[1] == "|---|---|---|---:|---:|---:|"
    assert md.splitlines()[3] == "| s-two | — | m | — | — | — |"


def _replay_lines(capsys, *extra: str) -> list[str]:
    assert main(["replay", str(ROOT / "captures"), *extra]) == 0
    return capsys.readouterr().out.splitlines()


def test_replay_shows_40_rows_then_says_how_to_see_the_rest(capsys):
    lines = _replay_lines(capsys)
    assert "== streams (132 rows; the first 40 shown, --all for every row) ==" in lines
    assert "... 92 more rows (--all or --limit N shows them)" in lines
    lines = _replay_lines(capsys, "--limit", "5", "--columns", "300")
    at = lines.index("== streams (132 rows; the first 5 shown, --all for every row) ==")
    assert lines[at + 7] == "... 127 more rows (--all or --limit N shows them)"
    assert not any("left out" in ln for ln in lines)


def test_replay_csv_prints_every_row_and_column_for_programs(capsys):
    from lab.tables import STREAM_COLUMNS

    lines = _replay_lines(capsys, "--format", "csv")
    assert len(lines) == 133 and lines[0] == ",".join(STREAM_COLUMNS)  # session included
    assert len(_replay_lines(capsys, "--format", "json", "--limit", "2")) == 1


def test_replay_says_which_recordings_it_loaded(capsys):
    lines = _replay_lines(capsys, "--limit", "1")
    assert lines[0] == f"loaded 1 recording from {ROOT / 'captures'}: 20261129T201827-5ed78725"


def test_config_example_names_every_field_under_a_comment_and_loads_back(tmp_path, capsys):
    assert main(["config", "example"]) == 0
    text = capsys.readouterr().out
    assert text == config_example() + "\n"
    lines = text.splitlines()
    for name in [*LabConfig.model_fields, *SpillGuardConfig.model_fields]:
        (at,) = [i for i, ln in enumerate(lines) if ln.lstrip().startswith(f'"{name}":')]
        assert lines[at - 1].lstrip().startswith("// "), name
    path = tmp_path / "example.json"
    path.write_text(text)
    assert load_config(path) == LabConfig()
    path.write_text(text.replace('"min_clause_words": 2', '"min_clause_words": 3'))
    assert load_config(path).spill.min_clause_words == 3


def test_a_commented_config_with_a_bad_value_is_one_clear_line(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(config_example().replace('"min_clause_words": 2', '"min_clause_words": 0'))
    assert main(["replay", str(ROOT / "captures"), "--config", str(path)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"lab: error: {path}: invalid config: ") and "min_clause_words" in line


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"lab (stream-lab) {__version__}\n"


@pytest.mark.parametrize("command", ["replay", "report"])
def test_ctrl_c_exits_130_with_one_line(command, monkeypatch, tmp_path, capsys):
    import lab.replay

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(lab.replay, "replay", interrupted)
    argv = [command, str(ROOT / "captures")]
    if command == "report":
        argv += ["--out", str(tmp_path / "out")]
    assert main(argv) == 130
    assert capsys.readouterr().err == f"lab {command}: interrupted (Ctrl-C)\n"


def test_ctrl_c_in_a_running_demo_exits_130_with_one_line(tmp_path):
    # unbuffered: the line that says recording started arrives when it is printed
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "lab.cli", "demo", "--out", str(tmp_path), "--quiet"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    while line and not line.startswith("fake server on"):
        line = proc.stdout.readline()
    assert line.startswith("fake server on")
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert err == "lab demo: interrupted (Ctrl-C)\n"
    # 130, or (now and then, when the interrupt lands while the capture threads are being
    # joined) killed by SIGINT at interpreter exit: a shell reports both as $? = 130
    assert proc.returncode in (130, -signal.SIGINT)


# -- control characters from model text -------------------------------------------------

HOSTILE = "hi \x1b]0;pwned\x07\x1b[2J\x9b31m\r\x7fend"
HOSTILE_SHOWN = "hi \\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\x0d\\x7fend"


def test_displayable_shows_every_control_character_but_newline_and_tab():
    from lab.console import displayable

    assert displayable(HOSTILE + "\n\tok") == HOSTILE_SHOWN + "\n\tok"


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
def test_rendered_tables_carry_no_control_characters(fmt):
    import re

    df = pd.DataFrame({"stream_id": ["s"], "moved": [HOSTILE]})
    text = render(df, fmt=fmt, width=200)[0]
    assert re.findall(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text) == []
    if fmt == "json":  # still the same value for programs
        assert json.loads(text) == [{"stream_id": "s", "moved": HOSTILE}]
    else:
        assert "\\x1b]0;pwned\\x07" in text


def _escape_payload() -> bytes:
    """An OpenRouter stream whose answer and backend name carry terminal escape sequences."""

    def chunk(delta: dict, finish: str | None = None) -> str:
        body = {
            "id": "gen-1",
            "model": "m",
            "object": "chat.completion.chunk",
            "created": 1,
            "provider": "Evil\x1b[31m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(body)}\n\n"

    return (chunk({"content": HOSTILE}) + chunk({}, "stop") + "data: [DONE]\n\n").encode()


def test_record_and_replay_never_print_escape_sequences_from_the_model(
    tmp_path, capsys, monkeypatch, canned_server
):
    import re

    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    payload = _escape_payload()
    base = canned_server(lambda path: (200, "text/event-stream", payload)) + "/api/v1"
    argv = ["record", "--provider", "openrouter", "--model", "m", "--prompt", "p"]
    code = main([*argv, "--base-url", base, "--out", str(tmp_path)])
    recorded = capsys.readouterr()
    assert code == 0, recorded.err
    assert recorded.out.splitlines()[0] == HOSTILE_SHOWN
    assert main(["replay", str(tmp_path), "--columns", "300"]) == 0
    replayed = capsys.readouterr()
    assert "Evil\\x1b[31m" in replayed.out
    for text in (recorded.out, replayed.out):
        assert re.findall(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text) == []
    for text in (recorded.err, replayed.err):  # the progress bar's own \r aside
        assert re.findall(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", text) == []
