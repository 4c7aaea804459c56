"""The README stays true: its test command is what CI runs, its recipes run as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from lab import tables

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _code_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_quick_start_makes_a_venv_first_and_ci_runs_the_test_command():
    quick = _code_blocks("bash")[0]
    commands = [ln for ln in quick.splitlines() if ln.strip() and not ln.startswith("#")]
    assert commands == [
        "python3 -m venv .venv && . .venv/bin/activate",
        "python -m pip install -e . && lab demo",
        'python -m pip install -q -e ".[dev]" && python -m ruff check . '
        "&& python -m ruff format --check lab tests && python -m mypy lab && lint-imports "
        "&& python -m pytest -q",
    ]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[-1] in ci.splitlines()
    # every command says how long it takes
    comments = [ln for ln in quick.splitlines() if ln.startswith("#")]
    assert all(re.search(r"\d+ (s|minutes?)\b|seconds", c) for c in comments if c[2].isdigit())


def _python_section() -> list[str]:
    section = README[README.index("## In Python") : README.index("## Capture format")]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_readme_python_section_runs_verbatim_on_the_bundled_sample(monkeypatch):
    import lab.result

    replay_block = _python_section()[0]
    monkeypatch.chdir(ROOT)
    scope: dict = {}
    exec(compile(replay_block, "README.md", "exec"), scope)  # noqa: S102 - our own README
    assert isinstance(scope["results"], lab.result.Results) and len(scope["results"]) == 132
    assert len(scope["streams"]) == 132
    card = scope["card"]  # one row per backend that served a stream
    labels = tables.backend_labels(scope["streams"])
    served = labels[~tables.unserved(labels)]
    assert card.set_index("serving_provider")["streams"].to_dict() == (
        served.value_counts().sort_index().to_dict()
    )
    # the card ends with its methods: the Fisher test of the verdicts, Mann–Whitney of TTFT
    assert [s.split(":")[0] for s in card.attrs["sentences"][-2:]] == [
        "Worse with confidence",
        "Slower with confidence",
    ]
    r, again = scope["r"], scope["again"]
    assert r.guard_events and r.stream_id in set(scope["leaked"])
    assert scope["body"].startswith((b":", b"data:", b"event:"))
    # the raw bytes of the last attempt replay to the same answer
    assert (again.text, again.reasoning) == (r.text, r.reasoning)


def test_readme_recorder_block_refuses_to_send_without_a_key(monkeypatch, tmp_path):
    import httpx

    from lab.recorder import NoAPIKeyError

    recorder_block = _python_section()[1]
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    sent: list = []

    def refuse(request: httpx.Request) -> httpx.Response:  # pragma: no cover - must not run
        sent.append(request)
        return httpx.Response(500)

    monkeypatch.setattr(httpx, "HTTPTransport", lambda *a, **k: httpx.MockTransport(refuse))
    with pytest.raises(NoAPIKeyError, match=r"^no API key for openrouter: set OPENROUTER_API_KEY"):
        exec(compile(recorder_block, "README.md", "exec"), {})  # noqa: S102 - our own README
    assert sent == []
    # a recorder that refused leaves nothing behind: no empty recording folder to replay
    assert list(tmp_path.iterdir()) == []


def test_readme_pandas_recipe_reads_a_capture_without_the_package(monkeypatch):
    recipe = next(b for b in _code_blocks("python") if "read_parquet" in b)
    assert "import lab" not in recipe
    monkeypatch.chdir(ROOT)
    scope: dict = {}
    exec(compile(recipe, "README.md", "exec"), scope)  # noqa: S102 - our own README
    assert len(scope["streams"]) >= len(set(scope["streams"]["stream_id"])) > 0
    assert scope["body"].startswith((b":", b"data:", b"event:"))


def test_readme_duckdb_recipe_runs():
    import duckdb

    (sql,) = _code_blocks("sql")
    sql = "\n".join(ln for ln in sql.splitlines() if not ln.startswith("--"))
    cwd = os.getcwd()
    try:
        os.chdir(ROOT)
        rows = duckdb.sql(sql).fetchall()
    finally:
        os.chdir(cwd)
    assert rows and rows[0][2] == "default"
