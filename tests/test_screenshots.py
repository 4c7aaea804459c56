"""A Jupyter user's look: the three notebooks (executed, exported to HTML) and the report
open in headless Chromium at 1280 px, and the page says what it saw.

Each page gets a small check script (ours, appended to the exported page) that records on
``<body>``: script errors, whether anything reaches past the window's right edge outside a
box that scrolls (text overflowing its cell), and whether any script planted in *model
text* ran. A hostile stream (``<script>``, an ``onerror`` image and markup in its answer, a
``</think>`` too in its reasoning) is shown in every view the lab has: the stream, the results
summary, the interactive table and the report; none of it may run. A screenshot of each
page is taken too (kept under pytest's tmp_path for a human to look at).

The same executed notebooks are then drawn as VS Code's notebook renderer draws them
(``tests/vscode_render.py``: one webview page, no RequireJS and no Jupyter globals, scripts
in HTML outputs run, a widget shown by its fallbacks) and checked the same way.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from test_notebooks import hostile_capture  # noqa: F401 - the fixture: a capture full of markup

from lab.widgetview import NEEDS
from tests import vscode_render
from tests.jupyter_live import OVERFLOW, SHAPES, launch_chromium, playwright_or_skip

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WIDTH = 1280

HOSTILE = (
    "Sure.<script>window.__labPwned = (window.__labPwned || 0) + 1</script>"
    '<img src=x onerror="window.__labPwned = (window.__labPwned || 0) + 1">'
    "<b>bold?</b> & <i>done</i>"
)

CHECK = """
<script>
window.__labErrors = [];
window.addEventListener('error', function (e) { window.__labErrors.push(String(e.message)); });
window.addEventListener('load', function () { setTimeout(function () {
  var width = document.documentElement.clientWidth;
  function scrolls(el) {
    for (var p = el.parentElement; p; p = p.parentElement) {
      var o = getComputedStyle(p).overflowX;
      if (o === 'auto' || o === 'scroll' || o === 'hidden') { return true; }
    }
    return false;
  }
  var over = [];
  document.querySelectorAll('body *').forEach(function (el) {
    var box = el.getBoundingClientRect();
    if (box.width > 0 && box.right > width + 1 && !scrolls(el)) { over.push(el.tagName); }
  });
  var b = document.body;
  b.setAttribute('data-lab-errors', String(window.__labErrors.length));
  b.setAttribute('data-lab-overflow', String(over.length));
  b.setAttribute('data-lab-overflow-tags', over.slice(0, 5).join(','));
  b.setAttribute('data-lab-pwned', String(window.__labPwned || 0));
}, 500); });
</script>
"""


def _browser() -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs Debian's chromium package")
        pytest.skip("chromium not installed (CI installs it; apt-get install chromium)")
    return browser


def _chromium(page: Path, profile: Path, *args: str) -> str:
    cmd = [
        _browser(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--virtual-time-budget=8000",
        *args,
        page.as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180).stdout


def _look(page: Path, tmp_path: Path) -> dict[str, str]:
    """Open ``page`` (with the check script appended) at 1280 px: body attributes + a shot."""
    checked = tmp_path / f"{page.stem}.checked.html"
    checked.write_text(page.read_text(encoding="utf-8") + CHECK, encoding="utf-8")
    dom = _chromium(checked, tmp_path / "profile", f"--window-size={WIDTH},1000", "--dump-dom")
    body = re.search(r"<body([^>]*)>", dom)
    assert body, dom[:300]
    shot = tmp_path / f"{page.stem}.png"
    _chromium(checked, tmp_path / "profile", f"--window-size={WIDTH},3000", f"--screenshot={shot}")
    png = shot.read_bytes()
    assert png[:4] == b"\x89PNG" and struct.unpack(">I", png[16:20])[0] == WIDTH
    return dict(re.findall(r'(data-lab-[a-z-]+)="([^"]*)"', body.group(1)))


def _execute(nb, cwd: Path) -> None:
    nbclient = pytest.importorskip("nbclient")
    nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}
    ).execute()
    errors = [
        f"{o.get('ename')}: {o.get('evalue')}"
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if o.get("output_type") == "error"
    ]
    assert errors == []


def _to_html(nb, out: Path) -> Path:
    nbconvert = pytest.importorskip("nbconvert")
    html, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    out.write_text(html, encoding="utf-8")
    return out


def _execute_to_html(nb, out: Path, cwd: Path) -> Path:
    _execute(nb, cwd)
    return _to_html(nb, out)


_EXECUTED: dict[str, object] = {}


def _executed(path: Path):
    """``path`` executed on the sample capture (once per session: the exported page and the
    VS Code view read the same run); a copy, free to change."""
    if path.name not in _EXECUTED:
        nbformat = pytest.importorskip("nbformat")
        nb = nbformat.read(path, as_version=4)
        with pytest.MonkeyPatch.context() as env:
            env.setenv("MPLBACKEND", "Agg")
            env.delenv("LAB_CAPTURES", raising=False)
            _execute(nb, path.parent)
        _EXECUTED[path.name] = nb
    return copy.deepcopy(_EXECUTED[path.name])


WIDGET_VIEWS = {  # each notebook's widget views (progress bars aside)
    "01-openrouter-backends.ipynb": 2,  # the stream table and the stream explorer
    "02-tune-spill-guard.ipynb": 1,  # the tuner
    "03-regression-fixtures.ipynb": 0,
}
WIDGET_MARKS = (  # what a drawn widget view shows, counted on the page
    "table.lab-table tbody tr",  # the stream table's rows
    ".lab-stream-picker select",  # the explorer's stream menu
    ".lab-explorer img[alt^='timeline']",  # the picked stream's timeline
    ".widget-tab .lm-TabBar-tab",  # the tuner's tabs
)
WIDGETS_SHOW = {  # notebook -> (rows, stream menus, timelines, tabs) at least
    "01-openrouter-backends.ipynb": (10, 1, 1, 0),
    "02-tune-spill-guard.ipynb": (0, 0, 0, 4),
    "03-regression-fixtures.ipynb": (0, 0, 0, 0),
}
VSCODE_WIDTH = 1000  # px: a notebook editor in a VS Code window beside its side bar


def _embed_or_skip() -> str:
    """The URL of html-manager's embed.js; a skip without it (a failure on CI, where
    ``.ci/run`` fetches it)."""
    embed = vscode_render.embed_js()
    if embed is None:
        msg = (
            f"@jupyter-widgets/html-manager {vscode_render.HTML_MANAGER} not fetched: .ci/run "
            "fetches it with npm pack (or set LAB_WIDGETS_EMBED to its dist/embed.js)"
        )
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return embed.as_uri()


def _widget_outputs(nb) -> int:
    return sum(1 for d in vscode_render.drawn(nb, widgets=True) if d.get("widget"))


def _vscode_look(nb, tmp_path: Path, name: str, embed: str | None = None) -> dict:
    """``nb``'s outputs drawn as VS Code's renderer draws them, in headless Chromium (the
    widgets from their saved state with html-manager's **embed**, else by their HTML
    copies): what the page reports (:data:`vscode_render.CHECKS`), its script errors, the
    text that overflows its box and the images not at their natural aspect; a screenshot
    is kept."""
    sync_api = playwright_or_skip()
    page_file = tmp_path / f"{name}.vscode.html"
    page_file.write_text(vscode_render.page(nb, VSCODE_WIDTH, embed), encoding="utf-8")
    with sync_api.sync_playwright() as pw:
        browser = launch_chromium(pw, _browser())
        try:
            page = browser.new_page(viewport={"width": VSCODE_WIDTH, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri())
            if embed is not None:  # html-manager draws the widgets on load
                page.wait_for_function(vscode_render.WIDGETS_DRAWN, arg=_widget_outputs(nb))
            seen = page.evaluate(vscode_render.CHECKS)
            seen["marks"] = {
                mark: page.locator(f"#container {mark}").count() for mark in WIDGET_MARKS
            }
            seen["errors"] = errors
            seen["overflow"] = page.evaluate(OVERFLOW, "#container")
            seen["shapes"] = page.evaluate(SHAPES, "#container")
            seen["pwned"] = page.evaluate("() => window.__labPwned || 0")
            page.screenshot(path=str(tmp_path / f"{name}.vscode.png"), full_page=True)
        finally:
            browser.close()
    return seen


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_at_1280_px_has_no_error_and_nothing_overflows(path, tmp_path):
    page = _to_html(_executed(path), tmp_path / f"{path.stem}.html")
    seen = _look(page, tmp_path)
    assert seen["data-lab-errors"] == "0"
    assert seen["data-lab-pwned"] == "0"
    assert (seen["data-lab-overflow"], seen["data-lab-overflow-tags"]) == ("0", "")


def test_model_text_never_runs_as_script_in_any_view(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    delta = {"content": HOSTILE, "reasoning": HOSTILE + "</think>"}
    body = f"data: {json.dumps({'choices': [{'delta': delta}]})}\n\ndata: [DONE]\n\n"
    code = [
        "from lab import tables, view\nfrom lab.replay import replay_sse\n"
        "from lab.result import Results\n"
        f"r = replay_sse('openrouter', {body!r}, stream_id='s-hostile')\n"
        "assert '<script>' in r.text and '<script>' in r.reasoning\nr",
        "Results([r])",
        "view.show_table(tables.streams([r]))",
        "from IPython.display import HTML\nfrom lab.report import build_html\n"
        "HTML(build_html([r]).split('<body>')[1].split('</body>')[0])",
    ]
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in code],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )
    page = _execute_to_html(nb, tmp_path / "hostile.html", tmp_path)
    text = page.read_text(encoding="utf-8")
    assert text.count("&lt;script&gt;window.__labPwned") >= 3  # shown, as text
    seen = _look(page, tmp_path)
    assert seen["data-lab-pwned"] == "0"
    assert seen["data-lab-errors"] == "0"


def test_backends_notebook_on_a_hostile_capture_runs_no_script(
    hostile_capture,  # noqa: F811 - the fixture imported from test_notebooks
    tmp_path,
    monkeypatch,
):
    """Notebook 01 on a recording whose backend name, answer, reasoning and error are markup
    (``<img onerror>``, ``<script>``), exported to HTML and opened in Chromium: the markup is
    shown as text and none of it runs."""
    nbformat = pytest.importorskip("nbformat")
    path, stream_id = hostile_capture
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("LAB_CAPTURES", str(path))
    monkeypatch.setenv("LAB_STREAM", stream_id)
    notebook = ROOT / "notebooks" / "01-openrouter-backends.ipynb"
    nb = nbformat.read(notebook, as_version=4)
    page = _execute_to_html(nb, tmp_path / "01-hostile.html", notebook.parent)
    text = page.read_text(encoding="utf-8")
    # the widgets' saved state is JSON data (its "</" written "<\\/"), never parsed as markup
    markup = re.sub(r'<script type="application/vnd\.jupyter\.widget-state\+json">.*?</script>',
                    "", text, flags=re.S)  # fmt: skip
    assert "&lt;img src=x onerror" in markup and "<img src=x onerror" not in markup
    seen = _look(page, tmp_path)
    assert seen["data-lab-pwned"] == "0"
    assert seen["data-lab-errors"] == "0"
    # VS Code's renderer runs the scripts of an HTML output: none is planted in one
    assert vscode_render.static_problems(nb, NEEDS) == []
    in_vscode = _vscode_look(nb, tmp_path, "01-hostile")
    assert (in_vscode["pwned"], in_vscode["scripts"], in_vscode["errors"]) == (0, 0, [])
    # and the widgets drawn from their saved state (html-manager puts an HTML widget's
    # value in with innerHTML: an unescaped <img onerror> there would run)
    drawn = _vscode_look(nb, tmp_path, "01-hostile-widgets", _embed_or_skip())
    assert (drawn["pwned"], drawn["scripts"], drawn["errors"]) == (0, 0, [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_in_vscode_renderer_needs_no_jupyter_script_and_says_what_each_widget_needs(
    path, tmp_path
):
    """Every output has a view VS Code draws without a Jupyter page around it: a rich output
    has text beside it, no output is or holds a script, each widget has a static HTML copy
    and a text saying what it is and what to do, and its models are all from the widget
    modules VS Code's renderer ships. Drawn as that renderer draws them: no error, no empty
    output, no Jupyter global, no text out of its box, every plot at its natural aspect."""
    nb = _executed(path)
    assert vscode_render.static_problems(nb, NEEDS) == []
    seen = _vscode_look(nb, tmp_path, path.stem)
    drawn = vscode_render.drawn(nb)
    assert seen["outputs"] == len(drawn) > 0
    assert seen["errors"] == [] and seen["empty"] == [] and seen["globals"] == []
    assert seen["scripts"] == 0 and seen["pwned"] == 0
    assert seen["overflow"] == []
    plots = sum(1 for d in drawn if d["mime"] == "image/png")
    assert seen["shapes"] == {"seen": plots, "bad": []}
    widgets = [d["mime"] for d in drawn if d.get("widget")]
    assert widgets.count("text/html") == WIDGET_VIEWS[path.name]  # drawn by their HTML copy


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_widgets_drawn_from_their_saved_state_as_vscode_draws_them(path, tmp_path):
    """The widget views drawn from the notebook's saved widget state by
    @jupyter-widgets/html-manager (the ipywidgets 8 controls VS Code's renderer draws), in
    the same emulated webview: each drawn, showing what it is for (the stream table's rows,
    the explorer's menu and timeline, the tuner's tabs), no error, nothing out of its box."""
    embed = _embed_or_skip()
    nb = _executed(path)
    seen = _vscode_look(nb, tmp_path, f"{path.stem}-widgets", embed)
    assert seen["errors"] == [] and seen["empty"] == [] and seen["globals"] == []
    assert seen["scripts"] == 0 and seen["pwned"] == 0
    assert seen["overflow"] == []
    assert seen["shapes"]["bad"] == []
    counts = tuple(seen["marks"][mark] for mark in WIDGET_MARKS)
    least = WIDGETS_SHOW[path.name]
    assert all(n >= m for n, m in zip(counts, least, strict=True)), (counts, least)
    assert all(n == 0 for n, m in zip(counts, least, strict=True) if m == 0), counts
