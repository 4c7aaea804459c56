"""One exception root: every exception class of ``lab`` derives from ``lab.LabError`` and keeps
the base it had before, and ``lab.exceptions`` documents the tree as it is."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import httpx
import pytest

import lab
from lab.capture.errors import CaptureError
from lab.exceptions import LabError

LAB = Path(lab.__file__).parent


# Exceptions that are deliberately not errors of the lab (lab.exceptions says why).
OUTSIDE_THE_TREE = {
    "lab.capture.errors.CaptureWarning",  # a warning category
    "lab.replay.files.IncompleteResults",  # a warning category
    "lab.cli.common.Terminated",  # a KeyboardInterrupt: SIGTERM taken the way Ctrl-C is
}


def _module_names() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(lab.__path__, "lab."))


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined at module level anywhere in the package."""
    found: dict[str, type[BaseException]] = {}
    for name in _module_names():
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == name
            ):
                found[f"{name}.{attr}"] = value
    return found


def test_lab_error_is_exported_from_the_package():
    assert lab.LabError is LabError
    assert "LabError" in lab.__all__


def test_every_exception_class_of_the_package_derives_from_lab_error():
    classes = _exception_classes()
    assert len(classes) > 15  # the walk found the package's exceptions, not nothing
    outside = {name for name, cls in classes.items() if not issubclass(cls, LabError)}
    assert outside == OUTSIDE_THE_TREE


def test_exceptions_defined_inside_functions_derive_from_lab_error_too():
    """The walk cannot see a class written inside a function; the source can."""
    nested: list[tuple[str, str, list[str]]] = []
    for path in sorted(LAB.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.ClassDef):
                    bases = [ast.unparse(b) for b in node.bases]
                    if any(re.search(r"(Error|Exception)$", b) for b in bases):
                        nested.append((path.name, node.name, bases))
    assert nested  # fixtures.ddmin's budget signal is one
    assert [(f, n) for f, n, bases in nested if "LabError" not in bases] == []


@pytest.mark.parametrize(
    ("qualname", "kept_base"),
    [
        ("lab.config.ConfigError", ValueError),
        ("lab.fixtures.FixtureError", ValueError),
        ("lab.interchange.InterchangeError", ValueError),
        ("lab.recorder.NoAPIKeyError", ValueError),
        ("lab.sweep.SweepError", ValueError),
        ("lab.replay.dask_engine.WorkerCannotSee", FileNotFoundError),
        ("lab.http.limits.LimitExceeded", httpx.TransportError),
        ("lab.http.transports.RecordingCut", httpx.TransportError),
        ("lab.http.transports.ReplayExhausted", httpx.TransportError),
        ("lab.http.transports.ReplayMismatch", httpx.TransportError),
        ("lab.capture.errors.CaptureWriteError", CaptureError),
    ],
)
def test_each_exception_keeps_the_base_it_had_so_old_handlers_still_catch_it(qualname, kept_base):
    module, _, name = qualname.rpartition(".")
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, kept_base)
    assert issubclass(cls, LabError)


def test_a_config_error_is_caught_by_except_value_error_and_by_except_lab_error():
    from lab.config import ConfigError

    for handler in (ValueError, LabError):
        with pytest.raises(handler, match="^bad value$"):
            raise ConfigError("bad value")


def test_the_documented_tree_names_exactly_the_public_exception_classes():
    """The tree in ``lab.exceptions``' docstring lists every public LabError subclass, each
    under its module, and nothing else."""
    doc = importlib.import_module("lab.exceptions").__doc__
    assert doc is not None
    documented = set(re.findall(r"[├└]── (\w+)[^\n]*?\s(lab(?:\.\w+)+)", doc))
    public = {
        (name.rpartition(".")[2], name.rpartition(".")[0])
        for name, cls in _exception_classes().items()
        if issubclass(cls, LabError)
        and cls is not LabError
        and not name.rpartition(".")[2].startswith("_")
    }
    assert documented == public
