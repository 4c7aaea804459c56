"""The working notebooks execute headless, top to bottom, without an error output.

Notebook 02 is executed by ``tests/test_tuning.py``; this module runs every other notebook in
``notebooks/`` (01 and 03 today, and any notebook added later) with nbclient, the way CI
and ``jupyter nbconvert --execute`` would: cwd ``notebooks/``, ``MPLBACKEND=Agg``.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
EXECUTED_ELSEWHERE = {"02-tune-spill-guard.ipynb"}  # tests/test_tuning.py
ALL = sorted(NOTEBOOKS.glob("*.ipynb"))
HERE = [p for p in ALL if p.name not in EXECUTED_ELSEWHERE]
TIME_BUDGET_S = 60


def _tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def test_the_investigation_and_fixture_notebooks_are_here():
    names = {p.name for p in HERE}
    assert {"01-openrouter-backends.ipynb", "03-regression-fixtures.ipynb"} <= names


@pytest.mark.parametrize("path", HERE, ids=[p.name for p in HERE])
def test_notebook_is_committed_without_outputs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None


@pytest.mark.parametrize("path", HERE, ids=[p.name for p in HERE])
def test_notebook_executes_headless_without_errors(path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.source.startswith('CAPTURES = "../captures"')
    client = nbclient.NotebookClient(
        nb,
        timeout=TIME_BUDGET_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    fixtures_before = _tree_digest(NOTEBOOKS.parent / "tests" / "fixtures")
    started = time.monotonic()
    client.execute()
    elapsed = time.monotonic() - started
    errors = [
        f"{out.get('ename')}: {out.get('evalue')}"
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.outputs
        if out.get("output_type") == "error"
    ]
    assert errors == []
    assert elapsed < TIME_BUDGET_S, f"{path.name} took {elapsed:.1f}s"
    # every cell that returns a lab figure shows it as an image, not "<Figure size ...>"
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for out in cell.outputs:
            text = out.get("data", {}).get("text/plain", "")
            if text.startswith("<lab.plots.LabFigure") or text.startswith("<Figure size"):
                assert "image/png" in out["data"], (path.name, cell.source[:60])
    if path.name.startswith("01-"):
        images = sum(
            "image/png" in out.get("data", {})
            for c in nb.cells
            if c.cell_type == "code"
            for out in c.outputs
        )
        assert images >= 4
    # running a notebook never modifies the repository's fixtures (it exports to a temp dir)
    assert _tree_digest(NOTEBOOKS.parent / "tests" / "fixtures") == fixtures_before
    assert not (path.parent / "tests").exists()
