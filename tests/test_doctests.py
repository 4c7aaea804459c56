"""Every ``>>>`` example in a docstring of ``lab`` runs, from the repository root (where the
examples find ``captures/`` and ``tests/fixtures/``), and shows what it says it shows."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "lab"


def _modules_with_examples() -> list[str]:
    """Dotted names of the lab modules whose source holds a ``>>>`` example (read as text,
    so a module needing an optional extra is imported only when it has examples)."""
    names = []
    for path in sorted(LAB.rglob("*.py")):
        if ">>>" not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = _modules_with_examples()
# modules whose only examples are marked ``+SKIP``, and why they cannot run offline
ONLY_SKIPPED = {"lab.recorder": "records from a live provider endpoint"}


def _doctests(module_name: str) -> list[doctest.DocTest]:
    module = importlib.import_module(module_name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [t for t in finder.find(module, module_name) if t.examples]


def test_the_docstring_examples_are_found():
    # the modules the guide and the README point readers at carry examples
    assert {"lab.degrade", "lab.guards.think", "lab.replay", "lab.fixtures"} <= set(MODULES)


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples_run(module_name, monkeypatch):
    monkeypatch.chdir(ROOT)
    tests = _doctests(module_name)
    assert tests, f"{module_name} has '>>>' in its source but no doctest was found"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    failed = attempted = 0
    for test in tests:
        result = runner.run(test, out=report.append)
        failed += result.failed
        attempted += result.attempted
    assert failed == 0, "".join(report)
    # an example that runs nothing (all +SKIP) is allowed only where listed, with its reason
    assert (attempted == 0) == (module_name in ONLY_SKIPPED), (module_name, attempted)
