"""The bundle an ipywidgets view of the lab travels in, with what a viewer without widgets
shows instead.

A notebook output of a widget holds ``application/vnd.jupyter.widget-view+json`` (a
reference to models that live in the kernel) beside fallbacks. A front end draws the widget
when it can (JupyterLab, Notebook 7, VS Code's Jupyter renderer, with a kernel); otherwise
it shows the richest fallback it knows: ``text/html`` in a notebook exported to HTML, on a
repository browser, or by VS Code's "change presentation"; ``text/plain`` where nothing
richer is drawn (a terminal, ``nbconvert --to markdown``, a text diff of the notebook).
ipywidgets' own ``text/plain`` is the widget's Python repr
(``VBox(children=(...``), which says nothing to a reader; :func:`widget_bundle` replaces it
with a sentence naming the view and what to do to use it, and adds a static ``text/html``
copy the view provides (escaped, script-free HTML).
"""

from __future__ import annotations

from typing import Any

__all__ = ["NEEDS", "widget_bundle"]

NEEDS = (
    "run this cell with a live kernel in JupyterLab, Notebook 7 or VS Code (Jupyter "
    "extension) to use it"
)
"""What every widget view's ``text/plain`` says a reader needs to do to use it."""


def widget_bundle(widget: Any, what: str, html: str | None = None) -> dict[str, Any]:
    """The mime bundle of ``widget`` (an ipywidgets widget) with ``text/plain`` saying
    "**what** (interactive, ipywidgets): :data:`NEEDS`" and, when given, ``html`` as its
    ``text/html``: the static copy a viewer without widgets shows."""
    bundle = widget._repr_mimebundle_()
    data = dict(bundle[0] if isinstance(bundle, tuple) else bundle or {})
    static = "; a static copy is in its HTML output" if html is not None else ""
    data["text/plain"] = f"{what} (interactive, ipywidgets): {NEEDS}{static}."
    if html is not None:
        data["text/html"] = html
    return data
