"""Shared fixtures: the fake providers on a real loopback socket, tmp capture roots."""

from __future__ import annotations

import os

import netguard
import pytest

# no test reaches past loopback: a connection or name lookup elsewhere raises at once
netguard.install()

os.environ.setdefault("MPLBACKEND", "Agg")
# every unvalidated chunk the adapters build is validated and compared as well
# (lab.model.CHECK_UNVALIDATED_ENV): the suite proves each call site passes valid values
os.environ.setdefault("LAB_CHECK_UNVALIDATED", "1")


@pytest.fixture(scope="session")
def fake_server():
    """The scripted fake providers on 127.0.0.1 (no delays: tests want speed)."""
    from lab.fakes import FakeServer

    with FakeServer(delay_scale=0) as server:
        yield server


@pytest.fixture(scope="session")
def slow_fake_server():
    """The fake providers with their realistic per-read delays (timing is visible)."""
    from lab.fakes import FakeServer

    with FakeServer(delay_scale=1.0) as server:
        yield server


@pytest.fixture(autouse=True)
def _no_network_beyond_loopback():
    """Fail a test that tried to reach a non-loopback address even if it caught the error."""
    before = len(netguard.BLOCKED)
    yield
    tried = netguard.BLOCKED[before:]
    del netguard.BLOCKED[before:]
    if tried:
        pytest.fail("this test tried to reach the network: " + "; ".join(tried), pytrace=False)


def pytest_addoption(parser):
    """``pytest --update-goldens``: rewrite the golden ``expected.json`` of every fixture."""
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite tests/fixtures/*/expected.json from a fresh replay instead of comparing",
    )


@pytest.fixture
def update_goldens(request) -> bool:
    """True when pytest ran with ``--update-goldens``."""
    return bool(request.config.getoption("--update-goldens"))
