"""Shared fixtures: the fake providers on a real loopback socket, tmp capture roots."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import netguard
import pytest

# no test reaches past loopback: a connection or name lookup elsewhere raises at once
netguard.install()

os.environ.setdefault("MPLBACKEND", "Agg")
# every unvalidated chunk the adapters build is validated and compared as well
# (lab.model.CHECK_UNVALIDATED_ENV): the suite proves each call site passes valid values
os.environ.setdefault("LAB_CHECK_UNVALIDATED", "1")
# what the tuner saves (labels, configs) goes to a directory of this run, never to the
# user's ~/.local/share/stream-lab: notebooks executed by the tests inherit it too
_DATA_DIR = tempfile.mkdtemp(prefix="lab-test-data-")
os.environ["LAB_DATA_DIR"] = _DATA_DIR
atexit.register(shutil.rmtree, _DATA_DIR, ignore_errors=True)


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


@pytest.fixture
def canned_server():
    """``start(answer)``: an HTTP server on 127.0.0.1 whose every POST gets
    ``answer(path) -> (status, content type, body bytes)``; returns its base URL. Every
    server started is stopped when the test ends."""
    import http.server
    import threading

    servers = []

    def start(answer) -> str:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the stdlib's name
                self.rfile.read(int(self.headers.get("content-length", 0)))
                status, ctype, data = answer(self.path)
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


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
