"""``lab report``: one self-contained HTML page with the tables and plots for captures.

The page embeds its figures as base64 PNGs and its tables as HTML, so it can be mailed or
attached to an issue as one file. It holds only derived data: request headers are never part
of it, and the captures it reads are already redacted.

A small inline script checks that every figure decoded and records page errors on
``<body data-images-ok=... data-errors=...>`` so a headless browser test can verify it.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from lab.result import StreamResult

__all__ = ["build_html", "write_report"]

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
table { border-collapse: collapse; font-size: 0.8rem; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.figs img { max-width: 48%; margin: 0.5rem; border: 1px solid #eee; }
.note { color: #666; font-size: 0.85rem; }
"""

_CHECK = """
<script>
window.__labErrors = [];
window.addEventListener('error', function (e) { window.__labErrors.push(String(e.message)); });
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('img');
  var ok = 0;
  imgs.forEach(function (i) { if (i.complete && i.naturalWidth > 0) { ok += 1; } });
  document.body.setAttribute('data-images', String(imgs.length));
  document.body.setAttribute('data-images-ok', String(ok));
  document.body.setAttribute('data-errors', String(window.__labErrors.length));
});
</script>
"""


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _table(df: pd.DataFrame, limit: int = 200) -> str:
    if df.empty:
        return "<p class='note'>(none)</p>"
    more = f"<p class='note'>{len(df) - limit} more rows not shown</p>" if len(df) > limit else ""
    # pandas' default prints 6 decimals: a $3.6e-06 cost would show as 0.000004
    formatters = {c: _cost for c in df.columns if c == "cost" or c.endswith("_cost")}
    html = df.head(limit).to_html(
        index=False, na_rep="", escape=True, border=0, formatters=formatters
    )
    return html + more


def _cost(value: float) -> str:
    """USD with 3 significant digits of a small cost (``$0.0000405``), at least 4 decimals;
    empty when unknown."""
    if pd.isna(value):
        return ""
    digits = 4 if value <= 0 else max(4, 2 - math.floor(math.log10(value)))
    return f"${value:.{digits}f}"


def build_html(results: Sequence[StreamResult], *, title: str = "Stream Lab report") -> str:
    """The report page for ``results`` as one HTML string."""
    from lab import plots, tables

    results = list(results)
    st = tables.streams(results)
    bb = tables.by_backend(st)
    figures = {
        "Reasoning leaks by serving backend": plots.leak_rate_by_backend(bb),
        "Time to first token by backend": plots.ttft_by_backend(st),
        "Error classifiers": plots.classifier_distribution(st),
    }
    leaked = [r for r in results if any(e.guard in tables.LEAK_GUARDS for e in r.guard_events)]
    if leaked:
        figures["Timeline of the first leaked stream"] = plots.stream_timeline(leaked[0])
    imgs = "".join(
        f"<img alt='{html.escape(name)}' title='{html.escape(name)}' "
        f"src='data:image/png;base64,{_png(fig)}'>"
        for name, fig in figures.items()
    )
    n_leaked = int(st["leaked"].sum()) if len(st) else 0
    n_err = int(st["error_type"].notna().sum()) if len(st) else 0
    sections = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{len(st)} streams, {n_leaked} with leaked reasoning, {n_err} ended in an error.</p>",
        f"<div class='figs'>{imgs}</div>",
        "<h2>By serving backend</h2>",
        _table(bb),
        "<h2>Streams</h2>",
        _table(st.drop(columns=["error_message"])),
        "<h2>Where reasoning leaked (guard events)</h2>",
        _table(tables.leaks(results)),
        "<h2>Error classifiers</h2>",
        _table(tables.classifiers(st)),
        "<h2>Degradation attempts</h2>",
        _table(tables.attempts(results)),
    ]
    body = "\n".join(sections)
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style>{_CHECK}</head>"
        f"<body>{body}</body></html>"
    )


def write_report(
    results: Sequence[StreamResult], out: str | Path, *, title: str = "Stream Lab report"
) -> Path:
    """Write ``report.html`` into ``out`` (created if needed) and return its path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.html"
    path.write_text(build_html(results, title=title), encoding="utf-8")
    return path
