"""``lab report``: one self-contained HTML page with the tables and plots for captures.

The page embeds its figures as base64 PNGs and its tables as HTML, so it can be mailed or
attached to an issue as one file. It holds only derived data: request headers are never part
of it, and the captures it reads are already redacted.

Reading it: a table of contents, the summary line and the plots, then one section per table
(per serving backend first, with its 95 % intervals when the table has them), then
"Streams to read": a collapsible section per stream the tables name (leaked or acted on by a
guard, errored, degraded; the scorecard's flagged backends first; at most
:data:`STREAM_SECTIONS`, the rest counted), each stream id in a table row linking to it.
A section shows the answer beside the reasoning with the moved text marked, tool arguments
as JSON, guard events, attempts, anomalies and timing; model text is escaped, never markup.
Plots keep their natural aspect (``<img>`` sized from the PNG, never stretched by the flex
row). Numbers are rounded for reading (every rate, and its interval, as a percentage to one
decimal: ``12.5 % (8.1–18.3 %)``; times to 0.1 ms, costs to 3 significant digits);
a missing value is always ``—``; every table scrolls inside its own box, with long cells cut
(the whole text in the cell's tooltip), so the page itself never scrolls sideways at 1280 px.

A small inline script (the page's own, never built from data) checks that every figure
decoded and kept its aspect, records page errors, measures whether anything overflows the
page (with every stream section open) and whether every in-page link has its target, on
``<body data-images-ok=... data-stretched=... data-errors=... data-overflow=...
data-broken-links=...>``, so a headless browser test can verify it; it also opens a stream
section that the address's ``#stream-...`` names.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lab.console import DECIMALS, MISSING, format_cost
from lab.numbers import format_interval, format_rate
from lab.result import StreamResult

__all__ = ["STREAM_SECTIONS", "build_html", "stream_anchor", "write_report"]

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
.figs { display: flex; flex-wrap: wrap; gap: 0.5rem; align-items: flex-start; }
.figs img { max-width: calc(50% - 0.5rem); height: auto; border: 1px solid #eee;
            box-sizing: content-box; }
.note { color: #666; font-size: 0.85rem; }
details.stream { border: 1px solid #ddd; margin: 0.4rem 0; padding: 0.2rem 0.6rem; }
details.stream > summary { cursor: pointer; overflow-wrap: anywhere; }
details.stream h3 { font-size: 0.95rem; margin: 0.8rem 0 0.2rem 0; }
.pair { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 0.5rem; }
.pair pre, pre.json { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0;
       max-height: 24rem; overflow: auto; border: 1px solid #ccc; padding: 6px;
       font-size: 0.8rem; }
mark.moved { background: #ffd27a; }
mark.shown { background: none; text-decoration: underline wavy #d9363e; }
.error { background: #fff1f0; border-left: 4px solid #d9363e; padding: 4px 8px;
         overflow-wrap: anywhere; }
"""

_CHECK = """
<script>
window.__labErrors = [];
window.addEventListener('error', function (e) { window.__labErrors.push(String(e.message)); });
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('img');
  var ok = 0;
  imgs.forEach(function (i) { if (i.complete && i.naturalWidth > 0) { ok += 1; } });
  var worst = 0, stretched = 0;
  imgs.forEach(function (i) {
    var box = i.getBoundingClientRect();
    if (!i.naturalWidth || !box.height) { return; }
    var error = Math.abs((box.width / box.height) / (i.naturalWidth / i.naturalHeight) - 1);
    worst = Math.max(worst, error);
    if (error > 0.02) { stretched += 1; }
  });
  var closed = [];
  document.querySelectorAll('details').forEach(function (d) {
    if (!d.open) { d.open = true; closed.push(d); }
  });
  var over = 0;
  document.querySelectorAll('td, th, p, h1, h2, h3, li, pre, summary, div').forEach(function (el) {
    var box = el.getBoundingClientRect();
    if (box.right > document.documentElement.clientWidth + 1 && !el.closest('.scroll')) {
      over += 1;
    }
  });
  var page = document.documentElement.scrollWidth > document.documentElement.clientWidth;
  closed.forEach(function (d) { d.open = false; });
  var ids = {};
  document.querySelectorAll('[id]').forEach(function (el) { ids[el.id] = true; });
  var broken = 0, links = 0;
  document.querySelectorAll('a[href^="#"]').forEach(function (a) {
    links += 1;
    if (!ids[decodeURIComponent(a.getAttribute('href').slice(1))]) { broken += 1; }
  });
  document.body.setAttribute('data-images', String(imgs.length));
  document.body.setAttribute('data-images-ok', String(ok));
  document.body.setAttribute('data-aspect-error', worst.toFixed(4));
  document.body.setAttribute('data-stretched', String(stretched));
  document.body.setAttribute('data-errors', String(window.__labErrors.length));
  document.body.setAttribute('data-overflow', String(over + (page ? 1 : 0)));
  document.body.setAttribute('data-links', String(links));
  document.body.setAttribute('data-broken-links', String(broken));
  document.body.setAttribute('data-details', String(document.querySelectorAll('details').length));
  openTarget();
});
function openTarget() {
  var el = location.hash ? document.getElementById(location.hash.slice(1)) : null;
  if (el && el.tagName === 'DETAILS') { el.open = true; }
}
window.addEventListener('hashchange', openTarget);
</script>
"""

_PERCENT = {
    "leak_rate",
    "error_rate",
    "rest_leak_rate",
    "rest_error_rate",
    "tool_call_valid_rate",
}


def _png(fig) -> tuple[str, int, int]:
    """``fig`` as base64 PNG with its width and height in pixels (read from its header)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    data = buf.getvalue()
    width, height = struct.unpack(">II", data[16:24])
    return base64.b64encode(data).decode("ascii"), width, height


def _imgs(figures: dict[str, Any]) -> str:
    """The figures as ``<img>`` tags sized at their natural width and height (the CSS
    scales them down keeping that aspect)."""
    tags = []
    for name, fig in figures.items():
        data, width, height = _png(fig)
        label = html.escape(name)
        tags.append(
            f"<img alt='{label}' title='{label}' width='{width}' height='{height}' "
            f"src='data:image/png;base64,{data}'>"
        )
    return "".join(tags)


def _rate(value: Any, low: Any = None, high: Any = None) -> str:
    """A rate as every table of the report shows it: :func:`lab.numbers.format_rate`, a
    percentage to one decimal with its interval when given: ``12.5 % (8.1–18.3 %)``."""
    return format_rate(value, low, high)


def _is_rate(column: str) -> bool:
    return column in _PERCENT or column.endswith("_rate")


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
        return value, "num" if _is_rate(column) else ""
    if _is_rate(column):
        return _rate(value), "num"
    if isinstance(value, float):
        digits = DECIMALS.get(column)
        if digits is None:
            return (f"{value:.0f}" if value == int(value) else f"{value:.3g}"), "num"
        return f"{value:.{digits}f}", "num"
    if isinstance(value, int) or hasattr(value, "dtype"):
        return str(value), "num"
    text = str(value)
    return text, ""


def _td(column: str, value: Any, links: dict[str, str] | None = None) -> str:
    text, cls = _value(column, value)
    attrs = f" class='{cls}'" if cls else ""
    if column == "stream_id" and links and isinstance(value, str) and value in links:
        return f"<td{attrs}><a href='#{links[value]}'>{html.escape(text)}</a></td>"
    if len(text) > CELL_CHARS:
        attrs += f" title='{html.escape(text, quote=True)}'"
        text = text[: CELL_CHARS - 1] + "…"
    return f"<td{attrs}>{html.escape(text)}</td>"


def _intervals(df: pd.DataFrame) -> pd.DataFrame:
    """Rates with their 95 % interval in one cell, when the table has the interval columns."""
    out = df.copy()
    for rate in [c for c in out.columns if _is_rate(str(c))]:
        lo, hi = f"{rate}_ci_low", f"{rate}_ci_high"
        if lo in out and hi in out:
            out[rate] = [
                _rate(r, low, high)
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
            rate.append(_rate(row[f"{v}_rate"], row[f"{v}_ci_low"], row[f"{v}_ci_high"]))
            other = row[f"{v}_rest"]
            rest.append(None if _missing(other) else _rate(other))
        view[v] = rate
        view[f"{v} (rest)"] = rest  # strings already: "36.1 %"
    return view


def _table(df: pd.DataFrame, limit: int = TABLE_ROWS, links: dict[str, str] | None = None) -> str:
    """``df`` as a scrolling table; a ``stream_id`` cell that ``links`` names links to
    that stream's section."""
    if df.empty:
        return "<p class='note'>(none)</p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = "".join(
        "<tr>" + "".join(_td(c, v, links) for c, v in zip(df.columns, row, strict=True)) + "</tr>"
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
    """``12.3 (10.1–15.0)``: a quantile and its bootstrap interval in one cell
    (:func:`lab.numbers.format_interval`)."""
    return format_interval(value, low, high)


def _p_cells(values: Any) -> list[str | None]:
    """p-values as the scorecard's sentences write them, two significant digits."""
    return [None if _missing(p) else f"{p:.2g}" for p in values]


def _verdict_sections(card: pd.DataFrame) -> list[tuple[str, str, str]]:
    """One section per verdict of the scorecard: the backends worse than the rest on it,
    its plot (the rate per backend with its Wilson interval against the rest's pooled rate,
    :func:`lab.plots.verdict_by_backend`) and its tests. A verdict every backend did well on
    is said in a sentence, with no plot."""
    from lab import plots
    from lab.scorecard import VERDICT_LABELS, quiet_verdicts

    quiet = set(quiet_verdicts(card))
    sections = []
    for v in card.attrs.get("verdicts", []):
        label = VERDICT_LABELS.get(v, v)
        judged = card[card[f"{v}_n"] > 0]
        trials = int(judged[f"{v}_n"].sum())
        if v in quiet or judged.empty:
            body = (
                f"<p class='note'>The same on every backend ({trials} streams judged): "
                "nothing to compare.</p>"
            )
        else:
            worse = [str(b) for b in judged.loc[judged[f"{v}_worse"], "serving_provider"]]
            said = (
                f"Worse than the rest with confidence: {', '.join(worse)}."
                if worse
                else "No backend is worse than the rest with confidence."
            )
            shown = pd.DataFrame(
                {
                    "serving_provider": judged["serving_provider"],
                    "n": judged[f"{v}_n"],
                    "rate": [
                        _rate(r, lo, hi)
                        for r, lo, hi in zip(
                            judged[f"{v}_rate"],
                            judged[f"{v}_ci_low"],
                            judged[f"{v}_ci_high"],
                            strict=True,
                        )
                    ],
                    "rest": [None if _missing(r) else _rate(r) for r in judged[f"{v}_rest"]],
                    "p": _p_cells(judged[f"{v}_p"]),
                    "p_holm": _p_cells(judged[f"{v}_p_holm"]),
                    "worse": judged[f"{v}_worse"],
                }
            )
            body = (
                f"<p class='note'>{html.escape(said)} Per backend the rate over the "
                "streams it applies to, with its 95 % Wilson interval, against the pooled "
                "rate of the other backends (one-sided Fisher exact test, Holm-adjusted "
                "over the whole card).</p>"
                + f"<div class='figs'>{_imgs({label: plots.verdict_by_backend(card, v)})}</div>"
                + _table(shown)
            )
        sections.append((f"verdict-{v.replace('_', '-')}", f"Verdict: {label}", body))
    return sections


def _slower_than_rest(card: pd.DataFrame) -> str:
    """The latency verdict of the scorecard: per tested timing figure, each backend's median
    with its interval against the rest's, the one-sided Mann–Whitney p-value, its Holm
    adjustment over the backends and the flag."""
    from lab.scorecard import LATENCY_LABELS

    out = []
    for m in card.attrs.get("latency_tested", []):
        judged = card[card[f"{m}_p"].notna()]
        worse = [str(b) for b in judged.loc[judged[f"{m}_worse"].astype(bool), "serving_provider"]]
        label = LATENCY_LABELS.get(m, m)
        said = (
            f"Slower than the rest with confidence on {label}: {', '.join(worse)}."
            if worse
            else f"No backend is slower than the rest with confidence on {label}."
        )
        shown = pd.DataFrame(
            {
                "serving_provider": judged["serving_provider"],
                "n": judged[f"{m}_n"],
                "median": [
                    _with_interval(v, lo, hi)
                    for v, lo, hi in zip(
                        judged[f"{m}_p50"],
                        judged[f"{m}_p50_ci_low"],
                        judged[f"{m}_p50_ci_high"],
                        strict=True,
                    )
                ],
                "rest median": judged[f"{m}_rest_p50"],
                "p": _p_cells(judged[f"{m}_p"]),
                "p_holm": _p_cells(judged[f"{m}_p_holm"]),
                "slower": judged[f"{m}_worse"].astype(bool),
            }
        )
        out.append(
            f"<p class='note'>{html.escape(said)} Each backend's timed streams against the "
            "other backends' pooled: one-sided Mann–Whitney U test, Holm-adjusted over the "
            "backends tested; medians in ms with their bootstrap intervals.</p>" + _table(shown)
        )
    return "".join(out)


def _latency_section(
    results: list[StreamResult], st: pd.DataFrame, card: pd.DataFrame | None = None
) -> str:
    """Timing per backend from the recorded reads: which backends are slower than the rest
    (``card``'s latency verdict), the quantiles with their bootstrap intervals, the ECDF of
    TTFT and the gap histogram."""
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
    imgs = _imgs(figures)
    notes = "".join(f"<p class='note'>{html.escape(n)}</p>" for n in lt.attrs.get("notes", []))
    return (
        "<p class='note'>From the recorded reads: time to first byte, to the first token "
        "(text, reasoning or tool call), to the first visible token and to the first "
        "reasoning; gaps between reads that carried visible text (p50/p99/max per stream); "
        "stalls (gaps over <code>LabConfig.stall_s</code>); characters in the first "
        "content read (a bundled first chunk). Per backend the p50, p90 and p99 over its "
        "streams, each with its 95 % bootstrap interval (2000 resamples, fixed seed); "
        "times in ms.</p>"
        + notes
        + (_slower_than_rest(card) if card is not None else "")
        + f"<div class='figs'>{imgs}</div>"
        + _table(shown)
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
        "2025), adjusted with Holm's procedure over the backends tested, as the scorecard's "
        "same-model column is; the verdict rests on the adjusted p-value. <i>no evidence</i> "
        "is not a proof of sameness.</p>" + _table(table)
    )


_SAFE_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


def stream_anchor(stream_id: str) -> str:
    """The HTML id of a stream's section: ``stream-<id>`` when the id is plain, else
    ``stream-h<hash>`` (an id from the wire never goes into markup as is)."""
    if _SAFE_ID.fullmatch(stream_id):
        return f"stream-{stream_id}"
    import hashlib

    return "stream-h" + hashlib.sha256(stream_id.encode("utf-8", "replace")).hexdigest()[:16]


def _pieces_html(pieces: list[tuple[str, str]]) -> str:
    titles = {"moved": "moved here by a guard", "shown": "shown before its closing tag"}
    return "".join(
        f"<mark class='{m}' title='{titles[m]}'>{html.escape(t)}</mark>" if m else html.escape(t)
        for t, m in pieces
    )


def _stream_section(r: StreamResult, why: list[str], stall_s: float) -> str:
    """One stream as a collapsible section: what it is and why it is here, the answer beside
    the reasoning (moved text marked), tool calls as JSON, guard events, attempts, anomalies
    and timing. Every string from the stream is escaped."""
    from lab.anomalies import detect, explain
    from lab.latency import stream_timing
    from lab.reading import answer_pieces, reasoning_pieces

    backend = r.serving_provider or f"{r.provider} (direct)"
    esc = html.escape
    status = "error" if r.error is not None else (r.finish_reason or MISSING)
    summary = (
        f"<summary><code>{esc(r.stream_id)}</code> · {esc(backend)} · "
        f"{esc(str(r.model or MISSING))} · {esc('; '.join(why))}</summary>"
    )
    parts = [
        f"<p class='note'>{esc(r.provider)} · served by {esc(backend)} · finish {esc(status)}"
        f" · outcome {esc(str(r.outcome or MISSING))} · <code>lab show PATH "
        f"{esc(r.stream_id)}</code> prints it in a terminal</p>"
    ]
    if r.error is not None:
        e = r.error
        cls = f", classifier {r.classifier}" if r.classifier else ""
        parts.append(
            f"<p class='error'>error {esc(e.type)} ({esc(e.code)}{esc(cls)}): {esc(e.message)}</p>"
        )
    answer, reasoning = answer_pieces(r), reasoning_pieces(r)
    marks = []
    if any(m for _, m in reasoning):
        marks.append("<mark class='moved'>moved by a guard</mark>")
    if any(m for _, m in answer):
        marks.append("<mark class='shown'>reasoning shown before its closing tag</mark>")
    parts.append(
        f"<h3>Answer ({len(r.text):,} chars) beside the reasoning ({len(r.reasoning):,} "
        f"chars)</h3>"
        + (f"<p class='note'>{' · '.join(marks)}</p>" if marks else "")
        + f"<div class='pair'><pre>{_pieces_html(answer)}</pre>"
        f"<pre>{_pieces_html(reasoning)}</pre></div>"
    )
    if r.function_calls:
        calls = "".join(
            f"<p><code>{esc(f.name)}</code>"
            + (f" · id <code>{esc(f.id)}</code>" if f.id else "")
            + (" · arguments cut short, repaired" if f.arguments_truncated else "")
            + "</p><pre class='json'>"
            + esc(json.dumps(f.args, ensure_ascii=False, indent=2))
            + "</pre>"
            for f in r.function_calls
        )
        parts.append(f"<h3>Tool calls ({len(r.function_calls)})</h3>{calls}")
    events = pd.DataFrame(
        [
            {
                "guard": e.guard,
                "rule": e.detail.get("rule"),
                "attempt": e.attempt,
                "seq": e.seq,
                "offset": e.offset,
                "moved_chars": len(e.moved),
                "moved": e.moved,
            }
            for e in r.guard_events
        ]
    )
    parts.append(f"<h3>Guard events ({len(r.guard_events)})</h3>" + _table(events))
    attempts = pd.DataFrame(
        [
            {
                "attempt": a.attempt,
                "label": a.label,
                "status": a.status,
                "ended": a.end_reason,
                "degradable": a.degradable,
                "error": a.error,
            }
            for a in r.attempts
        ]
    )
    parts.append(f"<h3>Attempts ({len(r.attempts)})</h3>" + _table(attempts))
    found = detect(r)
    parts.append(
        f"<h3>Anomalies ({len(found)})</h3>"
        + (
            "<ul>" + "".join(f"<li>{esc(n)}: {esc(explain(n))}</li>" for n in found) + "</ul>"
            if found
            else "<p class='note'>(none)</p>"
        )
    )
    t = stream_timing(r, stall_s=stall_s)

    def ms(v: float | None) -> str:
        return MISSING if v is None else f"{v:.1f} ms"

    timing = (
        f"first byte {ms(t.ttfb_ms)} · first token {ms(r.ttft_ms)} · first visible "
        f"{ms(t.ttft_content_ms)} · gaps p50 {ms(t.gap_p50_ms)}, max {ms(t.gap_max_ms)} · "
        f"stalls {t.stalls}"
        if t.timed
        else "untimed (no arrival times recorded)"
    )
    parts.append(f"<h3>Timing</h3><p class='note'>{esc(timing)}</p>")
    return (
        f"<details class='stream' id='{stream_anchor(r.stream_id)}'>{summary}"
        + "".join(parts)
        + "</details>"
    )


def _stream_sections(
    results: list[StreamResult], flagged: list[str], stall_s: float, cap: int
) -> tuple[str, dict[str, str]]:
    """The sections of the streams the tables name (at most ``cap``) and the links to them
    (stream id -> anchor)."""
    from lab.reading import notable_streams

    notable = notable_streams(results, flagged)
    shown = notable[:cap]
    links = {r.stream_id: stream_anchor(r.stream_id) for r, _ in shown}
    intro = (
        f"<p class='note'>The streams the leak, error and degradation tables name "
        f"({len(notable)}), the backends the scorecard flags first; each opens on a click "
        "(a stream id in any table links here). Model text is shown as text, never as "
        "markup.</p>"
    )
    more = (
        f"<p class='note'>{len(notable) - cap} more streams left out (at most {cap} "
        "sections); <code>lab show PATH STREAM_ID</code> prints any stream.</p>"
        if len(notable) > cap
        else ""
    )
    body = "".join(_stream_section(r, why, stall_s) for r, why in shown)
    return intro + body + more, links


STREAM_SECTIONS = 50
"""At most this many stream sections in a report (the rest are counted)."""


def build_html(
    results: Sequence[StreamResult],
    *,
    title: str = "Stream Lab report",
    stream_sections: int = STREAM_SECTIONS,
    stall_s: float | None = None,
) -> str:
    """The report page for ``results`` as one HTML string (at most ``stream_sections``
    stream sections; ``stall_s`` as :attr:`LabConfig.stall_s`, its default when None)."""
    from lab import plots, tables
    from lab.latency import DEFAULT_STALL_S

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
    imgs = _imgs(figures)
    n_leaked = int(st["leaked"].sum()) if len(st) else 0
    n_err = int(st["error_type"].notna().sum()) if len(st) else 0
    att = tables.attempts(results)
    interval_note = (
        " Each rate shows its 95 % Wilson interval in parentheses."
        if "leak_rate_ci_low" in bb
        else ""
    )
    card = tables.scorecard(st)
    flagged = [str(b) for b, f in zip(card["serving_provider"], card["flags"], strict=True) if f]
    streams_html, links = _stream_sections(
        results, flagged, DEFAULT_STALL_S if stall_s is None else stall_s, stream_sections
    )
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
        *_verdict_sections(card),
        ("latency", "Latency by serving backend", _latency_section(results, st, card)),
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
        (
            "leaks",
            "Where reasoning or markup leaked (guard events)",
            _table(tables.leaks(results), links=links),
        ),
        ("classifiers", "Error classifiers", _table(tables.classifiers(st))),
        ("attempts", "Degradation attempts", _table(att, links=links)),
        ("stream-sections", "Streams to read", streams_html),
    ]
    sameness = _sameness_section(results)
    if sameness is not None:  # the last verdict, after latency
        at = next(i for i, (sid, _, _) in enumerate(sections) if sid == "latency") + 1
        sections.insert(at, ("sameness", "Same model? (sweeps)", sameness))
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
