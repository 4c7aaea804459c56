"""A notebook's outputs drawn the way VS Code's notebook renderer draws them, in headless
Chromium: the closest check of VS Code this machine can run (VS Code itself cannot).

What is emulated, from VS Code's sources (``notebookCommon.ts``, the built-in
``notebook-renderers`` extension) and the Jupyter extension's behaviour:

- every output is drawn in one webview page, with no RequireJS (``require``/``define``) and
  no ``Jupyter`` or ``IPython`` global;
- one mime type per output: ``application/vnd.jupyter.widget-view+json`` when the bundle
  has it (the Jupyter extension's ipywidgets renderer), otherwise the first of VS Code's
  display order (:data:`DISPLAY_ORDER`) the bundle holds;
- ``text/html`` goes in through ``innerHTML`` and its ``<script>`` elements are then
  re-created so that they run (the renderer's ``domEval``): a script in an output, ours or
  planted in model text, would run here as it would in VS Code;
- images are ``<img>`` from the bytes; text and streams are preformatted text;
- an output wider than the pane scrolls sideways in its own box (VS Code's outputs do, with
  word wrap off, its default), so what is checked is text spilling out of its own element,
  never the width of a wide table.

Widgets are drawn two ways: by their fallbacks (the ``text/html`` copy VS Code shows under
"change presentation"; the ``text/plain`` must say what the view is and what to do, see
:func:`static_problems`), and from the notebook's saved widget state by
``@jupyter-widgets/html-manager`` (:func:`embed_js`: its standalone ``dist/embed.js``, the
ipywidgets 8 controls VS Code's renderer also draws; fetched by ``.ci/run`` from the npm
registry, never shipped here). What is not emulated: a live kernel behind the widgets
(a pick redrawing the sections is checked live in JupyterLab and Notebook 7), VS Code's own
styles, fonts and cell chrome.
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from typing import Any

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
DISPLAY_ORDER = (  # VS Code's NOTEBOOK_DISPLAY_ORDER (src/vs/workbench/contrib/notebook/common)
    "application/json",
    "application/javascript",
    "text/html",
    "image/svg+xml",
    "text/latex",
    "text/markdown",
    "image/png",
    "image/jpeg",
    "text/plain",
)
CORE_WIDGETS = {"@jupyter-widgets/base", "@jupyter-widgets/controls", "@jupyter-widgets/output"}
# the widget modules VS Code's renderer ships; any other is fetched from a CDN, if allowed


HTML_MANAGER = "1.0.15"  # @jupyter-widgets/html-manager for ipywidgets 8 (.ci/run fetches it)


def embed_js() -> Path | None:
    """html-manager's ``dist/embed.js``: ``LAB_WIDGETS_EMBED`` if set, else where
    ``.ci/run`` puts it (``~/.cache/lab-npm/html-manager-VERSION/package/dist/embed.js``);
    ``None`` when it is not there."""
    default = Path.home() / ".cache" / "lab-npm" / f"html-manager-{HTML_MANAGER}"
    path = Path(os.environ.get("LAB_WIDGETS_EMBED") or default / "package" / "dist" / "embed.js")
    return path if path.is_file() else None


def chosen(data: dict[str, Any]) -> str:
    """The mime type VS Code draws of a bundle."""
    if WIDGET_VIEW in data:
        return WIDGET_VIEW
    return next((m for m in DISPLAY_ORDER if m in data), next(iter(data)))


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else value


def widget_models(nb) -> dict[str, dict[str, Any]]:
    """The widget state saved in the notebook's metadata (model id -> model)."""
    saved = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {})
    return saved.get("state", {})


def _is_progress_bar(models: dict[str, dict[str, Any]], model_id: str) -> bool:
    """tqdm's notebook bar: a box holding a FloatProgress (its text/plain is the bar's line)."""
    children = models.get(model_id, {}).get("state", {}).get("children", [])
    names = [models.get(c.removeprefix("IPY_MODEL_"), {}).get("model_name") for c in children]
    return "FloatProgressModel" in names


def static_problems(nb, needs: str) -> list[str]:
    """What VS Code could not show well, read from the saved outputs: a rich output without
    a ``text/plain``, a script or JavaScript output, a widget whose ``text/plain`` is a bare
    repr or says nothing of what to do (**needs**), a widget without a static ``text/html``,
    a widget model from outside the modules VS Code ships."""
    models = widget_models(nb)
    found = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") not in ("display_data", "execute_result"):
                continue
            data = out.get("data", {})
            if "text/plain" not in data:
                found.append(f"cell {i}: no text/plain beside {sorted(data)}")
            if "application/javascript" in data:
                found.append(f"cell {i}: a JavaScript output")
            if re.search(r"<script\b", _text(data.get("text/html", "")), re.I):
                found.append(f"cell {i}: a <script> in text/html")
            if WIDGET_VIEW not in data:
                continue
            model_id = data[WIDGET_VIEW]["model_id"]
            if model_id not in models:
                found.append(f"cell {i}: widget {model_id} has no saved state")
            if _is_progress_bar(models, model_id):
                continue  # the bar's own line ("replay: ...|...| 132/132") is its text
            plain = _text(data.get("text/plain", ""))
            if needs not in plain or re.match(r"^[A-Z]\w*\(", plain):
                found.append(f"cell {i}: widget text/plain says nothing to do: {plain[:60]!r}")
            if "text/html" not in data:
                found.append(f"cell {i}: widget without a static text/html copy")
    for model_id, model in models.items():
        if model.get("model_module") not in CORE_WIDGETS:
            found.append(f"widget {model_id}: module {model.get('model_module')} not shipped")
    return found


RENDER = """
(() => {
  // VS Code's built-in renderers, as far as a page can be: innerHTML, then every <script>
  // re-created so that it runs (domEval); an image from its bytes; text preformatted
  const outputs = JSON.parse(document.getElementById('lab-outputs').textContent);
  const container = document.getElementById('container');
  for (const o of outputs) {
    const box = document.createElement('div');
    box.className = 'output';
    box.dataset.cell = String(o.cell);
    box.dataset.mime = o.mime;
    container.appendChild(box);
    if (o.mime === 'application/vnd.jupyter.widget-view+json') {
      // drawn from the saved widget state by @jupyter-widgets/html-manager, on load
      const view = document.createElement('script');
      view.type = o.mime;
      view.text = o.value;
      box.appendChild(view);
    } else if (o.mime === 'text/html') {
      const element = document.createElement('div');
      element.innerHTML = o.value;
      box.appendChild(element);
      for (const old of element.querySelectorAll('script')) {
        const script = document.createElement('script');
        for (const a of old.attributes) script.setAttribute(a.name, a.value);
        script.text = old.text;
        old.replaceWith(script);
      }
    } else if (o.mime.startsWith('image/')) {
      const img = document.createElement('img');
      img.alt = 'cell ' + o.cell;
      img.src = 'data:' + o.mime + ';base64,' + o.value;
      box.appendChild(img);
    } else {
      const pre = document.createElement('pre');
      pre.textContent = o.value;
      box.appendChild(pre);
    }
  }
})();
"""


def drawn(nb, widgets: bool = False) -> list[dict[str, Any]]:
    """Every output as VS Code draws it: ``{"cell", "mime", "value", "widget"}``; a widget
    output is drawn as the widget (**widgets**, from its saved state) or as its ``text/html``
    copy (VS Code's "change presentation")."""
    shown = []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "stream":  # consecutive writes to one stream are one output (as in
                # VS Code and Lab: a print's text and its newline may arrive apart)
                last = shown[-1] if shown else {}
                if last.get("cell") == i and last.get("stream") == out["name"]:
                    last["value"] += _text(out["text"])
                    continue
                shown.append(
                    {
                        "cell": i,
                        "mime": "text/plain",
                        "value": _text(out["text"]),
                        "stream": out["name"],
                    }
                )
            elif kind == "error":
                shown.append({"cell": i, "mime": "text/plain", "value": out["ename"]})
            elif kind in ("display_data", "execute_result"):
                data = dict(out["data"])
                mime = chosen(data)
                widget = mime == WIDGET_VIEW
                if widget and not widgets:
                    data.pop(WIDGET_VIEW)
                    mime = chosen(data)
                value = data[mime]
                if not isinstance(value, str | list):
                    value = json.dumps(value)
                shown.append({"cell": i, "mime": mime, "value": _text(value), "widget": widget})
    return shown


def page(nb, width: int, embed: str | None = None) -> str:
    """The webview page of **nb**'s outputs at **width** px (the data as JSON, ``</``
    written ``<\\/`` so that no output can close the data's script element). With
    **embed** (the URL of ``@jupyter-widgets/html-manager``'s ``dist/embed.js``) the widgets
    are drawn from the notebook's saved widget state; without it, by their HTML copies."""
    data = json.dumps(drawn(nb, widgets=embed is not None)).replace("</", "<\\/")
    state = ""
    if embed is not None:
        saved = json.dumps(nb.metadata["widgets"][WIDGET_STATE]).replace("</", "<\\/")
        state = (
            f"<script type='{WIDGET_STATE}'>{saved}</script>"
            f"<script src='{html.escape(embed, quote=True)}'></script>"
        )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><style>"
        f"body {{ margin: 0; width: {width}px; font-family: sans-serif; font-size: 13px }}"
        ".output { padding: 4px 8px; box-sizing: border-box; overflow-x: auto }"
        ".output pre { overflow-x: auto; margin: 0 }"
        "</style></head><body><div id='container'></div>"
        f"<script type='application/json' id='lab-outputs'>{data}</script>"
        f"<script>{RENDER}</script>{state}</body></html>"
    )


CHECKS = """() => {
  // what the page shows: boxes with nothing in them, script elements in outputs, and
  // whether any JavaScript global of a Jupyter page exists (none may: nothing defines them)
  const boxes = [...document.querySelectorAll('#container .output')];
  const empty = boxes.filter(b => !b.querySelector('img') && !(b.textContent || '').trim())
    .map(b => b.dataset.cell);
  return {
    outputs: boxes.length,
    empty,
    // scripts a browser runs (not the widget views' JSON, which html-manager reads)
    scripts: [...document.querySelectorAll('#container script')]
      .filter(s => !s.type || /javascript|ecmascript|module/i.test(s.type)).length,
    globals: ['require', 'define', 'Jupyter', 'IPython'].filter(g => g in window),
  };
}"""


WIDGETS_DRAWN = """(n) => {
  // every widget output drawn by html-manager: n subareas, each holding a widget
  const areas = [...document.querySelectorAll('#container .widget-subarea')];
  return areas.length === n && areas.every(a => a.querySelector('.jupyter-widgets'));
}"""


__all__ = ["CHECKS", "WIDGETS_DRAWN", "chosen", "drawn", "embed_js", "page", "static_problems"]
