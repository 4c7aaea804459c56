"""The package says it is typed, and ships the marker that says so (PEP 561)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_lab_ships_a_py_typed_marker():
    assert (ROOT / "lab" / "py.typed").is_file()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["lab"]


def test_mypy_runs_with_the_pydantic_plugin_and_is_a_dev_tool():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert project["tool"]["mypy"]["plugins"] == ["pydantic.mypy"]
    assert any(d.startswith("mypy") for d in project["project"]["optional-dependencies"]["dev"])
