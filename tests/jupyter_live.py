"""What the live notebook tests share: a Jupyter server on loopback (JupyterLab or Notebook 7,
both built on the same Lab components, so one page model serves both), headless Chromium
that can reach nothing but loopback, and the checks of a notebook page.

Every wait is on a condition of the page or of the notebook model, never a fixed sleep.
``window.jupyterapp`` (``expose_app_in_browser``) runs all, saves and reads the outputs the
same way in both front ends: their shells' ``currentWidget`` is the notebook panel.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NB01 = "notebooks/01-openrouter-backends.ipynb"
PARTIAL = "s18ec9d7c919ad13206eb17"  # the sample's stream the think stripper cleaned in part
RUN_ALL_TIMEOUT_MS = 240_000  # a hung run fails; how long it takes is not a pass/fail matter
SAVED_LIMIT = 1_000_000  # bytes: the plots' PNGs and the tables (~0.5 MB); itables' HTML
# mode put its 1 MB JavaScript bundle in every saved notebook (1.35 MB for this one)
OUTPUT_LIMIT = 100_000  # bytes of one output's one format: a plot, never a script bundle


def chromium_or_skip() -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs Debian's chromium package")
        pytest.skip("chromium not installed (CI installs it; apt-get install chromium)")
    return browser


def playwright_or_skip():
    """``playwright.sync_api``, or a skip (a failure on CI, where the dev extra has it)."""
    try:
        from playwright import sync_api
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("playwright is not installed: .ci/run installs the [dev] extra")
        pytest.skip("playwright not installed (python -m pip install -e '.[dev]')")
    return sync_api


def launch_chromium(pw, browser_path: str):
    """Headless Chromium (Debian's) that reaches loopback only: every other name fails to
    resolve."""
    return pw.chromium.launch(
        executable_path=browser_path,
        headless=True,
        args=[
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        ],
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# the server module and the trait class of each front end's settings
FRONT_ENDS = {
    "lab": ("jupyterlab", "LabApp", "jupyterlab"),
    "notebook": ("notebook", "JupyterNotebookApp", "notebook"),
}


@contextlib.contextmanager
def jupyter_server(tmp_path_factory, app: str = "lab", extra_env: dict[str, str] | None = None):
    """Start JupyterLab (``app="lab"``) or Notebook 7 (``app="notebook"``) on 127.0.0.1 with
    a token, its root a temp copy of notebooks/ and captures/ (**extra_env** added to its and
    its kernels' environment); yields ``{"base", "token", "root"}`` and stops it on the way
    out."""
    module, traits, package = FRONT_ENDS[app]
    pytest.importorskip(package)
    root = tmp_path_factory.mktemp(f"{app}root")
    shutil.copytree(ROOT / "notebooks", root / "notebooks")
    shutil.copytree(ROOT / "captures", root / "captures")
    state = tmp_path_factory.mktemp(f"{app}state")
    port, token = _free_port(), secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAB_", "JUPYTER_"))}
    env.update(
        JUPYTER_RUNTIME_DIR=str(state / "runtime"),
        JUPYTER_CONFIG_DIR=str(state / "config"),
        JUPYTER_DATA_DIR=str(state / "data"),
        MPLBACKEND="module://matplotlib_inline.backend_inline",
    )
    if "PYTHONPATH" not in env:  # the kernel imports this checkout's lab
        env["PYTHONPATH"] = str(ROOT)
    env.update(extra_env or {})
    args = [
        f"--{traits}.expose_app_in_browser=True",  # window.jupyterapp: run all, save, outputs
        f"--{traits}.user_settings_dir={state / 'settings'}",
        f"--{traits}.workspaces_dir={state / 'workspaces'}",
    ]
    if app == "lab":
        args += [
            "--LabApp.news_url=",
            "--LabApp.extension_manager=readonly",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ]
    log = (state / "server.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            module,
            "--no-browser",
            "--allow-root",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--port-retries=0",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            *args,
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:  # ready when the API answers (polling a condition, not a timed wait)
            if proc.poll() is not None:
                raise RuntimeError(f"jupyter {app} exited: {(state / 'server.log').read_text()}")
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield {"base": base, "token": token, "root": root, "log": state / "server.log"}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


RUN_ALL = """async () => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  await panel.context.ready;
  await panel.sessionContext.ready;
  await app.commands.execute('notebook:run-all-cells');
  return panel.content.widgets.length;
}"""

ERRORS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const errors = [];
  for (const cell of panel.content.widgets) {
    const outputs = cell.model.outputs;
    if (!outputs) continue;
    for (let i = 0; i < outputs.length; i++) {
      const out = outputs.get(i).toJSON();
      if (out.output_type === 'error') errors.push(out.ename + ': ' + out.evalue);
    }
  }
  return errors;
}"""

SAVE = """async () => {
  const panel = window.jupyterapp.shell.currentWidget;
  await panel.context.save();
  return panel.context.path;
}"""

NOTEBOOK_READY = """() => {
  const app = window.jupyterapp;
  const panel = app && app.shell.currentWidget;
  return !!(panel && panel.content && panel.context && panel.context.isReady
            && panel.sessionContext.session && panel.sessionContext.session.kernel
            && panel.sessionContext.session.kernel.status === 'idle');
}"""


OVERFLOW = """(selector) => {
  // text overflowing its box inside the tuner: an element past the output area's right edge
  // with no box between them that scrolls or clips, or an element whose own text is wider
  // than it is (overflow visible: the text spills out) or cut (a clipped button label)
  const root = document.querySelector(selector);
  if (!root) return ['no ' + selector];
  const edge = root.getBoundingClientRect().right;
  const within = (el) => {
    for (let p = el.parentElement; p && p !== root; p = p.parentElement) {
      const o = getComputedStyle(p).overflowX;
      if (o === 'auto' || o === 'scroll' || o === 'hidden' || o === 'clip') return true;
    }
    return false;
  };
  const hasText = (el) => [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
  const found = [];
  for (const el of root.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0 || el.offsetParent === null) continue;  // hidden tabs
    const name = el.tagName + '.' + [...el.classList].slice(0, 2).join('.');
    if (box.right > edge + 1 && !within(el)) found.push('past the edge: ' + name);
    if (hasText(el) && el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0) {
      const o = getComputedStyle(el).overflowX;
      if (o === 'visible' || el.tagName === 'BUTTON') {
        found.push('text wider than its box: ' + name + ' "' + el.textContent.trim() + '"');
      }
    }
  }
  return found;
}"""

SHAPES = """(selector) => {
  // every image under the selector drawn at its natural aspect (within 2 %): how many were
  // measured, and [alt, error] of each one that is not (one not decoded counts as broken)
  const bad = [];
  let seen = 0;
  for (const img of document.querySelectorAll(selector + ' img')) {
    const box = img.getBoundingClientRect();
    if (box.width === 0 || img.offsetParent === null) continue;  // a hidden tab
    seen += 1;
    if (!img.complete || img.naturalWidth === 0) { bad.push([img.alt, 'broken']); continue; }
    const natural = img.naturalWidth / img.naturalHeight;
    const error = Math.abs(box.width / box.height - natural) / natural;
    if (error > 0.02) bad.push([img.alt, error.toFixed(3)]);
  }
  return {seen, bad};
}"""

SCRIPTS = """() => document.querySelectorAll('.jp-OutputArea-output script').length"""


def look_checks(page, selector: str = ".jp-Notebook", *, images: int = 0) -> None:
    """What a screenshot must show: no text overflowing its box, no stretched or broken
    image (at least **images** of them measured), no script element in any output (the
    views are script-free HTML)."""
    assert page.evaluate(OVERFLOW, selector) == []
    shapes = page.evaluate(SHAPES, selector)
    assert shapes["bad"] == []
    assert shapes["seen"] >= images
    assert page.evaluate(SCRIPTS) == 0


def largest_outputs(path: Path) -> list[tuple[int, str, int]]:
    """(cell, format, bytes) of every saved output over OUTPUT_LIMIT or holding a script."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    found = []
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            for fmt, value in out.get("data", {}).items():
                text = value if isinstance(value, str) else json.dumps(value)
                if len(text) > OUTPUT_LIMIT or "<script" in text:
                    found.append((i, fmt, len(text)))
    return found


def options(select) -> list[str]:
    """The option labels of a menu (ipywidgets shows a label's spaces as no-break spaces)."""
    texts = select.locator("option").evaluate_all("os => os.map(o => o.textContent)")
    return [t.replace("\xa0", " ") for t in texts]


def page_checks(page, *, picked: str | None) -> None:
    """The stream table rendered with rows, no error output, no widget that failed."""
    errors = page.evaluate(ERRORS)
    assert errors == []
    table = page.locator(".jp-OutputArea-output table.lab-table tbody tr")
    table.first.wait_for(state="visible", timeout=60_000)
    assert table.count() >= 10  # a page of the stream table (the sample has 90 OpenRouter rows)
    text = page.locator(".jp-Notebook").text_content() or ""  # cells off screen too
    assert "Loading ITables" not in text
    assert "Error displaying widget" not in text
    assert "Traceback" not in text
    if picked is not None:
        assert picked in text


def open_notebook(browser, url: str):
    """A 1280 px page on **url**, waited for until the notebook and its kernel are ready."""
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    page.set_default_timeout(RUN_ALL_TIMEOUT_MS)
    page.goto(url)
    page.wait_for_function(NOTEBOOK_READY)
    return page


def pick_partial(page) -> None:
    """Filter the explorer to the streams cleaned only in part, and wait for the one stream
    it keeps (:data:`PARTIAL`) to be drawn below the menu."""
    verdict = page.locator(".lab-filter-verdict select")
    (partial,) = [o for o in options(verdict) if o.startswith("cleaned only in part")]
    verdict.select_option(label=partial)
    menu = page.locator(".lab-stream-picker select")
    page.wait_for_function(
        "() => document.querySelectorAll('.lab-stream-picker select option').length == 1"
    )
    (label,) = options(menu)
    assert label.startswith(PARTIAL + " ")
    page.locator(".jp-OutputArea-output b", has_text=PARTIAL).first.wait_for()


def explorer_checks(page) -> None:
    """After :func:`pick_partial`: the picked stream drawn once, every section below the
    menu on it (the verdict, the raw reads capped, the timeline)."""
    page_checks(page, picked=PARTIAL)
    assert page.locator(f".jp-OutputArea-output b:text-is('{PARTIAL}')").count() == 1
    assert "cleaned only in part:" in page.locator(".lab-explorer").text_content()
    assert page.locator(".lab-explorer .lab-reads tr").count() >= 2
    assert page.locator(".lab-explorer img[alt^='timeline']").count() == 1


def notebook_01_session(
    browser, url: str, saved: Path, tmp_path: Path, name: str, *, plots: int | None = None
) -> None:
    """Notebook 01 as a user lives with it, in whichever front end serves **url**: run all,
    save, reload the page, run all again (the saved file small and not growing), filter and
    pick a stream (every section below the menu follows, each drawn once), then a second tab
    on the same kernel with nothing re-run. **plots**: also check the look (no overflow,
    **plots** images at their natural aspect, one more after the pick). Screenshots are kept
    under **tmp_path**, named after **name**."""
    page = open_notebook(browser, url)
    page.evaluate(RUN_ALL)
    page_checks(page, picked=None)
    if plots is not None:
        look_checks(page, images=plots)
        page.locator(".jp-OutputArea-output").first.scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / f"{name}-01-first-run.png"))
    page.evaluate(SAVE)
    first_size = saved.stat().st_size

    # the same kernel, a fresh page: what a reload or a second tab sees
    page.reload()
    page.wait_for_function(NOTEBOOK_READY)
    page.evaluate(RUN_ALL)
    page_checks(page, picked=None)
    page.evaluate(SAVE)
    second_size = saved.stat().st_size
    assert first_size < SAVED_LIMIT and second_size < SAVED_LIMIT
    assert abs(second_size - first_size) < 20_000  # run-all twice does not grow it
    assert largest_outputs(saved) == []

    # filter, then pick: every section below the menu follows, each drawn once
    pick_partial(page)
    explorer_checks(page)
    if plots is not None:
        look_checks(page, images=plots + 1)  # and the picked stream's timeline
    page.locator(".lab-explorer").screenshot(path=str(tmp_path / "explorer.png"))
    page.screenshot(path=str(tmp_path / f"{name}-01-after-reload-and-pick.png"))

    # a second tab on the same kernel, nothing re-run: the views come from the kernel
    page.evaluate(SAVE)
    second = open_notebook(browser, url)
    second.locator(".jp-OutputArea-output b", has_text=PARTIAL).first.wait_for()
    page_checks(second, picked=PARTIAL)
    if plots is not None:
        look_checks(second, images=plots + 1)
