"""Notebook 01 in a real Jupyter Notebook 7 (``jupyter notebook``), driven by headless
Chromium (Playwright) the way ``tests/test_notebook_live.py`` drives JupyterLab: open, run
all, save, reload the page, run all again, filter and pick a stream, then open a second tab
on the same kernel.

Notebook 7 is built on JupyterLab's components (its notebook panel, output areas and
ipywidgets manager are Lab's), but it is its own application: its own shell, page and
widget-manager plugin. What broke for Lab users (a view that initialized itself once per
kernel, so a reload left a table "Loading" for ever) would break here the same way, and a
view leaning on Lab's page would break only here. The server is 127.0.0.1 only, with a
token and a temp root holding copies of ``notebooks/`` and ``captures/``; Chromium reaches
no host but loopback. Screenshots of the page before the reload and after the pick are
kept under tmp_path; each is checked first for text overflowing its box, stretched images
and script elements in outputs.
"""

from __future__ import annotations

import pytest

from tests.jupyter_live import (
    NB01,
    chromium_or_skip,
    jupyter_server,
    launch_chromium,
    notebook_01_session,
    open_notebook,
    playwright_or_skip,
)

PLOTS = 5  # notebook 01's plots: leak rate, TTFT, errors, TTFT ECDF, gaps


@pytest.fixture(scope="module")
def notebook7_server(tmp_path_factory):
    """Notebook 7 on 127.0.0.1 with a token, its root a temp copy of notebooks/ and captures/."""
    with jupyter_server(tmp_path_factory, "notebook") as server:
        yield server


def test_notebook_01_survives_a_reload_and_a_second_run_in_notebook_7(notebook7_server, tmp_path):
    browser_path = chromium_or_skip()
    sync_api = playwright_or_skip()
    import notebook

    assert int(notebook.__version__.split(".")[0]) >= 7  # the Lab-based Notebook, not 6
    server = notebook7_server
    url = f"{server['base']}/notebooks/{NB01}?token={server['token']}"
    saved = server["root"] / NB01
    with sync_api.sync_playwright() as pw:
        browser = launch_chromium(pw, browser_path)
        try:
            page = open_notebook(browser, url)
            assert page.locator("#main-panel .jp-Notebook").count() == 1  # Notebook 7's shell
            page.close()
            notebook_01_session(browser, url, saved, tmp_path, "notebook7", plots=PLOTS)
        finally:
            browser.close()
