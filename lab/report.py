"""``lab report``: one self-contained HTML page with the tables and plots for captures.

The page embeds its figures as base64 PNGs and its tables as HTML, so it can be mailed or
attached to an issue as one file. It holds only derived data: request headers are never part
of it, and the captures it reads are already redacted.

Reading it: a table of contents, the summary line and the plots, then one section per table
(per serving backend first, with its 95 % intervals when the table has them). Numbers are
rounded for reading (rates as percentages, times to 0.1 ms, costs to 3 significant digits);
a missing value is always ``—``; every table scrolls inside its own box, with long cells cut
(the whole text in the cell's tooltip), so the page itself never scrolls sideways at 1280 px.

A small inline script (the page's own, never built from data) checks that every figure
decoded, records page errors and measures whether anything overflows the page, on
``<body data-images-ok=... data-errors=... data-overflow=...>``, so a headless browser
test can verify it.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lab.console import DECIMALS, MISSING, format_cost
from lab.result import StreamResult

__all__ = ["build_html", "write_report"]

CELL_CHARS = 60
"""A table cell longer than this is cut (``…``); the whole text is its tooltip."""
TABLE_ROWS = 200
"""Rows each table shows before it says how many more there are."""

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1200px;
       padding: 0 1rem; color: #222; line-height: 1.4; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2.2rem;
     border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; }
nav ol { columns: 2; font-size: 0.9rem; }
.scroll { max-height: 32rem; overflow: auto; border: 1px solid #ddd; max-width: 100%; }
table { border-collapse: collapse; font-size: 0.8rem; }
th, td { border-bottom: 1px solid #eee; padding: 3px 8px; text-align: left;
         vertical-align: top; white-space: nowrap; }
th { background: #f3f3f3; position: sticky; top: 0; z-index: 1; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.missing { color: #999; }
.figs { display: flex; flex-wrap: wrap; gap: 0.5rem; }
.figs img { max-width: calc(50% - 0.5rem); height: auto; border: 1px solid #eee; }
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
  var over = 0;
  document.querySelectorAll('td, th, p, h1, h2, li').forEach(function (el) {
    var box = el.getBoundingClientRect();
    if (box.right > document.documentElement.clientWidth + 1 && !el.closest('.scroll')) {
      over += 1;
    }
  });
  var page = document.documentElement.scrollWidth > document.documentElement.clientWidth;
  document.body.setAttribute('data-images', String(imgs.length));
  document.body.setAttribute('data-images-ok', String(ok));
  document.body.setAttribute('data-errors', String(window.__labErrors.length));
  document.body.setAttribute('data-overflow', String(over + (page ? 1 : 0)));
});
</script>
"""

_PERCENT = {
    "leak_rate",
    "error_rate",
    "rest_leak_rate",
    "rest_error_rate",
    "tool_call_valid_rate",
}


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _missing(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and value != value)


def _value(column: str, value: Any) -> tuple[str, str]:
    """(text, css class) of one cell: rounded, the one missing marker."""
    if _missing(value):
        return MISSING, "missing"
    if column == "cost" or column.endswith("_cost"):
        return format_cost(float(value)), "num"
    if isinstance(value, bool):
        return ("yes" if value else "no"), ""
    if isinstance(value, str):  # already text (a rate with its interval, see _intervals)
        return value, "num" if column in _PERCENT else ""
    if column in _PERCENT:
        return f"{float(value) * 100:.1f} %", "num"
    if isinstance(value, float):
        digits = DECIMALS.get(column)
        if digits is None:
            return (f"{value:.0f}" if value == int(value) else f"{value:.3g}"), "num"
        return f"{value:.{digits}f}", "num"
    if isinstance(value, int) or hasattr(value, "dtype"):
        return str(value), "num"
    text = str(value)
    return text, ""


def _td(column: str, value: Any) -> str:
    text, cls = _value(column, value)
    attrs = f" class='{cls}'" if cls else ""
    if len(text) > CELL_CHARS:
        attrs += f" title='{html.escape(text, quote=True)}'"
        text = text[: CELL_CHARS - 1] + "…"
    return f"<td{attrs}>{html.escape(text)}</td>"


def _intervals(df: pd.DataFrame) -> pd.DataFrame:
    """Rates with their 95 % interval in one cell, when the table has the interval columns."""
    out = df.copy()
    for rate in ("leak_rate", "error_rate", "tool_call_valid_rate"):
        lo, hi = f"{rate}_ci_low", f"{rate}_ci_high"
        if rate in out and lo in out and hi in out:
            out[rate] = [
                MISSING if _missing(r) else f"{r * 100:.1f} % ({low * 100:.0f}–{high * 100:.0f} %)"
                for r, low, high in zip(out[rate], out[lo], out[hi], strict=True)
            ]
            out = out.drop(columns=[lo, hi])
    return out


def _scorecard_cells(card: pd.DataFrame) -> pd.DataFrame:
    """The scorecard as the report shows it: per verdict the rate with its interval and the
    rest's rate (no trial: the missing marker)."""
    view = card[["serving_provider", "streams", "flags"]].copy()
    for v in card.attrs.get("verdicts", []):
        rate: list[str | None] = []
        rest: list[str | None] = []
        for _, row in card.iterrows():
            if not row[f"{v}_n"]:
                rate.append(None)
                rest.append(None)
                continue
            r, low, high = row[f"{v}_rate"], row[f"{v}_ci_low"], row[f"{v}_ci_high"]
            rate.append(f"{r * 100:.1f} % ({low * 100:.0f}–{high * 100:.0f} %)")
            other = row[f"{v}_rest"]
            rest.append(None if _missing(other) else f"{other * 100:.1f} %")
        view[v] = rate
        view[f"{v} (rest)"] = rest  # strings already: "36.1 %"
    return view


def _table(df: pd.DataFrame, limit: int = TABLE_ROWS) -> str:
    if df.empty:
        return "<p class='note'>(none)</p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = "".join(
        "<tr>" + "".join(_td(c, v) for c, v in zip(df.columns, row, strict=True)) + "</tr>"
        for row in df.head(limit).itertuples(index=False)
    )
    more = (
        f"<p class='note'>{len(df) - limit} more rows not shown "
        "(<code>lab replay PATH --format csv</code> prints them all)</p>"
        if len(df) > limit
        else ""
    )
    return f"<div class='scroll'><table><tr>{head}</tr>{rows}</table></div>{more}"


_STREAM_COLUMNS = [
    "stream_id", "serving_provider", "model", "leak_guards", "leak_chars", "error_type",
    "classifier", "degradation_path", "finish_reason", "ttft_ms", "duration_ms",
    "output_tokens", "cost", "anomalies", "provider", "attempts", "n_chunks", "text_chars",
    "reasoning_chars", "tokens_per_s", "outcome",
]  # fmt: skip
"""The streams table as the report shows it: what matters first (the box scrolls)."""


def _verdicts(sentences: list[str], cls: str = "verdicts") -> str:
    """The per-backend verdicts as a list (backend names come from the wire: escaped)."""
    items = "".join(f"<li>{html.escape(s)}</li>" for s in sentences)
    return f"<ul class='{cls}'>{items}</ul>"


def _with_interval(value: Any, low: Any, high: Any) -> str:
    """``12.3 (10.1–15.0)``: a quantile and its bootstrap interval in one cell."""
    if _missing(value):
        return MISSING

    def num(x: Any) -> str:
        return MISSING if _missing(x) else (f"{x:.1f}" if abs(x) < 1000 else f"{x:.0f}")

    if _missing(low):
        return num(value)
    return f"{num(value)} ({num(low)}–{num(high)})"


def _latency_section(results: list[StreamResult], st: pd.DataFrame) -> str:
    """Timing per backend from the recorded reads: the quantiles with their bootstrap
    intervals, the ECDF of TTFT and the gap histogram."""
    from lab import plots, tables

    lt = tables.latency(st)
    shown = pd.DataFrame(
        {
            "serving_provider": lt["serving_provider"],
            "metric": lt["metric"],
            "n": lt["n"],
            "untimed": lt["untimed"],
            **{
                q: [
                    _with_interval(v, lo, hi)
                    for v, lo, hi in zip(lt[q], lt[f"{q}_ci_low"], lt[f"{q}_ci_high"], strict=True)
                ]
                for q in ("p50", "p90", "p99")
            },
        }
    )
    shown = shown[shown["n"] > 0]
    figures = {
        "Time to first token by backend (ECDF)": plots.ttft_ecdf(st),
        "Gaps between reads with visible text": plots.gap_histogram(tables.gaps(results)),
    }
    imgs = "".join(
        f"<img alt='{html.escape(name)}' title='{html.escape(name)}' "
        f"src='data:image/png;base64,{_png(fig)}'>"
        for name, fig in figures.items()
    )
    notes = "".join(f"<p class='note'>{html.escape(n)}</p>" for n in lt.attrs.get("notes", []))
    return (
        "<p class='note'>From the recorded reads: time to first byte, to the first token "
        "(text, reasoning or tool call), to the first visible token and to the first "
        "reasoning; gaps between reads that carried visible text (p50/p99/max per stream); "
        "stalls (gaps over <code>LabConfig.stall_s</code>); characters in the first "
        "content read (a bundled first chunk). Per backend the p50, p90 and p99 over its "
        "streams, each with its 95 % bootstrap interval (2000 resamples, fixed seed); "
        "times in ms.</p>" + notes + f"<div class='figs'>{imgs}</div>" + _table(shown)
    )


def _sameness_section(results: list[StreamResult]) -> str | None:
    """The same-model test per backend when the results are a sweep over several backends
    (each prompt sent several times to each); None otherwise."""
    from lab.sameness import outputs_frame, same_model

    outputs = outputs_frame(results)
    if outputs.empty or outputs["serving_provider"].nunique() < 2:
        return None
    table = same_model(outputs)
    return (
        "<p class='note'>Each backend's outputs against the other backends' pooled, prompt "
        "by prompt: maximum mean discrepancy under a Hamming kernel over the first 100 "
        "characters, p-value from 1000 relabellings within each prompt (Gao et al., ICLR "
        "2025). <i>no evidence</i> is not a proof of sameness.</p>" + _table(table)
    )


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
    att = tables.attempts(results)
    interval_note = (
        " Each rate shows its 95 % Wilson interval in parentheses."
        if "leak_rate_ci_low" in bb
        else ""
    )
    card = tables.scorecard(st)
    sections = [
        (
            "scorecard",
            "Backend scorecard",
            "<p class='note'>Every verdict per serving backend: the rate with its 95 % Wilson "
            "interval against the pooled rest; WORSE where a one-sided Fisher exact test, "
            "Holm-adjusted over the whole card, says so with 95 % confidence.</p>"
            + _verdicts(card.attrs["sentences"], "scorecard")
            + _table(_scorecard_cells(card)),
        ),
        ("plots", "Plots", f"<div class='figs'>{imgs}</div>"),
        (
            "backends",
            "By serving backend",
            f"<p class='note'>One row per backend that served a stream; the leakiest first."
            f"{interval_note}</p>"
            + _verdicts(tables.backend_verdicts(bb))
            + _table(_intervals(bb)),
        ),
        (
            "streams",
            "Streams",
            "<p class='note'>One row per logical request; the table scrolls sideways and "
            "down inside its box.</p>" + _table(st[[c for c in _STREAM_COLUMNS if c in st]]),
        ),
        ("latency", "Latency by serving backend", _latency_section(results, st)),
        ("leaks", "Where reasoning leaked (guard events)", _table(tables.leaks(results))),
        ("classifiers", "Error classifiers", _table(tables.classifiers(st))),
        ("attempts", "Degradation attempts", _table(att)),
    ]
    sameness = _sameness_section(results)
    if sameness is not None:
        sections.insert(3, ("sameness", "Same model? (sweeps)", sameness))
    toc = "".join(f"<li><a href='#{sid}'>{html.escape(name)}</a></li>" for sid, name, _ in sections)
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{len(st)} streams, {n_leaked} with leaked reasoning, {n_err} ended in an error.</p>",
        f"<nav><b>Contents</b><ol>{toc}</ol></nav>",
        *(f"<h2 id='{sid}'>{html.escape(name)}</h2>\n{content}" for sid, name, content in sections),
    ]
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style>{_CHECK}</head>"
        f"<body>{chr(10).join(body)}</body></html>"
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
