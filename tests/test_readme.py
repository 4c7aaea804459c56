"""The README stays true: its test command is what CI runs, its recipes run as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _code_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_quick_start_has_two_commands_and_ci_runs_the_test_command():
    quick = _code_blocks("bash")[0]
    commands = [ln for ln in quick.splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(commands) == 2
    assert commands[0].endswith("lab demo")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert commands[1] in ci.splitlines()


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
