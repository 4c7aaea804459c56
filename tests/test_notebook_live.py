"""Notebook 01 in a real JupyterLab, driven by headless Chromium (Playwright), the way a user
lives with it: open, run all, save, reload the page, run all again, filter and pick a
stream, then open a second tab on the same kernel.

The exported-HTML screenshots (``tests/test_screenshots.py``) see one static page; what broke
for users was the live session: a view that initialized itself once per kernel left the
stream table at "Loading ITables..." after a reload, and the saved notebook carried a
megabyte of JavaScript. Here the server is JupyterLab itself (127.0.0.1 only, a token, a temp
root holding copies of ``notebooks/`` and ``captures/``); Chromium may resolve no name and
reach no host but loopback. Every wait is on a condition of the page or of JupyterLab's
notebook model, never a fixed sleep. ``tests/test_notebook7_live.py`` does the same in Notebook 7;
the server, the browser and the page checks are in ``tests/jupyter_live.py``.
"""

from __future__ import annotations

import pytest

from tests.jupyter_live import (
    NB01,
    chromium_or_skip,
    jupyter_server,
    launch_chromium,
    notebook_01_session,
    playwright_or_skip,
)


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    """JupyterLab on 127.0.0.1 with a token, its root a temp copy of notebooks/ and captures/."""
    with jupyter_server(tmp_path_factory, "lab") as server:
        yield server


def test_notebook_01_survives_a_reload_and_a_second_run_in_jupyterlab(lab_server, tmp_path):
    browser_path = chromium_or_skip()
    sync_api = playwright_or_skip()
    url = f"{lab_server['base']}/lab/tree/{NB01}?token={lab_server['token']}"
    saved = lab_server["root"] / NB01
    with sync_api.sync_playwright() as pw:
        browser = launch_chromium(pw, browser_path)
        try:
            notebook_01_session(browser, url, saved, tmp_path, "notebook")
        finally:
            browser.close()
