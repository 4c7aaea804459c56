"""How results look in a notebook: :class:`~lab.result.StreamResult` and
:class:`~lab.result.Results` as escaped HTML and as short text.

Model text is data, never markup: every string that came from a stream (answer, reasoning,
moved text, error messages, backend names) goes through :func:`html.escape` before it is
placed in a tag, so a ``<script>`` or a ``<think>`` in an answer shows as those characters.
The page pieces here use inline styles only (a notebook output has no stylesheet of ours)
and no script.

- :func:`stream_html` – one stream: a header line, the answer beside the reasoning with the
  text the guards moved highlighted, the guard events, the attempts (label, status, how it
  ended), usage and cost, the anomalies and what each means, replay divergence.
- :func:`results_html` / :func:`results_text` – the summary table of many streams.
- :func:`~lab.anomalies.shown_before_close` (re-exported here) – the text a guard could no
  longer take back (a closing reasoning tag that arrived after the text before it was
  already shown as the answer); the anomaly detectors own it, this view renders it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lab import tables
from lab.anomalies import detect, explain, shown_before_close
from lab.console import DECIMALS, MISSING, format_cost, table_text
from lab.tables import LEAK_GUARDS

if TYPE_CHECKING:
    import pandas as pd

    from lab.result import StreamResult

__all__ = [
    "DECIMALS",
    "KEY_COLUMNS",
    "MISSING",
    "SUMMARY_COLUMNS",
    "format_cost",
    "results_html",
    "results_text",
    "StreamPicker",
    "show_table",
    "shown_before_close",
    "stream_html",
]

KEY_COLUMNS = [  # what matters first, in every stream table (summary, CLI, report)
    "stream_id",
    "serving_provider",
    "model",
    "leak_guards",
    "error_type",
    "classifier",
    "degradation_path",
    "finish_reason",
    "ttft_ms",
    "anomalies",
]
"""The columns every stream view shows first; each view appends its own."""

SUMMARY_COLUMNS = [*KEY_COLUMNS, "provider", "leaked"]
"""The columns of the summary table a :class:`~lab.result.Results` shows (the full table is
``lab.tables.streams(results)``)."""

SUMMARY_ROWS = 50
"""Rows the summary table shows before it says how many more there are."""

_BOX = (
    "white-space: pre-wrap; word-break: break-word; font-family: monospace; text-align: left; "
    "padding: 6px; border: 1px solid #ccc; max-height: 24em; overflow: auto; margin: 0"
)
_MARK = "background: #ffd27a; color: inherit"
_WARN = "background: #fff1f0; border-left: 4px solid #d9363e; padding: 4px 8px; margin: 4px 0"
_TABLE = "border-collapse: collapse; font-size: 0.85em; margin: 2px 0 8px 0"
_CELL = "border: 1px solid #ddd; padding: 2px 6px; text-align: left; vertical-align: top"


def _esc(value: Any) -> str:
    return MISSING if value is None else html.escape(str(value))


def _mark_moved(text: str, pieces: Sequence[str]) -> str:
    """``text`` escaped, each moved piece (found in order) wrapped in ``<mark>``."""
    out, pos = [], 0
    for piece in pieces:
        at = text.find(piece, pos) if piece else -1
        if at < 0:
            continue
        out.append(html.escape(text[pos:at]))
        out.append(
            f"<mark style='{_MARK}' title='moved here by a guard'>{html.escape(piece)}</mark>"
        )
        pos = at + len(piece)
    out.append(html.escape(text[pos:]))
    return "".join(out)


def _mark_shown(text: str, shown: Sequence[str]) -> str:
    """The answer escaped, with the prefix a guard could no longer take back underlined."""
    if not shown:
        return html.escape(text)
    lead = shown[0]
    if not text.startswith(lead):
        return html.escape(text)
    return (
        f"<span style='text-decoration: underline wavy #d9363e' "
        f"title='reasoning shown before its closing tag arrived'>{html.escape(lead)}</span>"
        + html.escape(text[len(lead) :])
    )


def _rows(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(
        f"<th style='{_CELL}; background: #f3f3f3'>{html.escape(h)}</th>" for h in header
    )
    body = "".join(
        "<tr>" + "".join(f"<td style='{_CELL}'>{_esc(v)}</td>" for v in row) + "</tr>"
        for row in rows
    )
    return f"<table style='{_TABLE}'><tr>{head}</tr>{body}</table>"


def _chars(n: int) -> str:
    return "1 char" if n == 1 else f"{n:,} chars"


def stream_html(result: StreamResult) -> str:
    """One stream as a self-contained, escaped HTML fragment (``StreamResult._repr_html_``)."""
    r = result
    backend = r.serving_provider or f"{r.provider} (direct)"
    status = "error" if r.error is not None else (r.finish_reason or MISSING)
    head = (
        f"<b>{_esc(r.stream_id)}</b> · {_esc(r.provider)} · model {_esc(r.model)} · "
        f"served by <b>{_esc(backend)}</b> · finish {_esc(status)} · outcome {_esc(r.outcome)}"
    )
    parts = [f"<div style='margin-bottom: 4px'>{head}</div>"]
    if r.error is not None:
        cls = f", classifier {_esc(r.classifier)}" if r.classifier else ""
        parts.append(
            f"<div style='{_WARN}'>error {_esc(r.error.type)} ({_esc(r.error.code)}"
            f"{', retryable' if r.error.retryable else ''}{cls}): {_esc(r.error.message)}</div>"
        )
    partial = shown_before_close(r)
    for shown, tail in partial:
        parts.append(
            f"<div style='{_WARN}'><b>cleaned only in part:</b> the closing reasoning tag "
            f"arrived after {_chars(len(shown))} of reasoning had been shown as the answer "
            f"(underlined); the guard moved only what followed ({_chars(len(tail))}).</div>"
        )
    moved = [e.moved for e in r.guard_events if e.moved]
    parts.append(
        "<table style='width: 100%; table-layout: fixed; border-collapse: collapse'><tr>"
        f"<th style='text-align: left; width: 50%'>answer ({_chars(len(r.text))})</th>"
        f"<th style='text-align: left'>reasoning ({_chars(len(r.reasoning))}; "
        "<mark style='" + _MARK + "'>moved by a guard</mark>)</th></tr><tr>"
        f"<td style='vertical-align: top; text-align: left'><pre style='{_BOX}'>"
        f"{_mark_shown(r.text, [s for s, _ in partial])}</pre></td>"
        f"<td style='vertical-align: top; text-align: left'><pre style='{_BOX}'>"
        f"{_mark_moved(r.reasoning, moved)}</pre></td></tr></table>"
    )
    if r.function_calls:
        calls = [
            (f.name, f.id, _short(str(f.args)), f.arguments_truncated) for f in r.function_calls
        ]
        parts.append("<b>tool calls</b>" + _rows(["name", "id", "args", "truncated"], calls))
    events = [
        (e.guard, e.detail.get("rule"), e.attempt, e.seq, e.offset, _short(e.moved))
        for e in r.guard_events
    ]
    parts.append(
        f"<b>guard events ({len(events)})</b>"
        + (
            _rows(["guard", "rule", "attempt", "seq", "offset", "moved"], events)
            if events
            else " none"
        )
    )
    attempts = [
        (a.attempt, a.label, a.status, a.end_reason, a.degradable, a.error) for a in r.attempts
    ]
    parts.append(
        f"<b>attempts ({len(attempts)})</b>"
        + _rows(["attempt", "label", "status", "ended", "degradable", "error"], attempts)
    )
    if r.usage is not None:
        u = r.usage
        cost = format_cost(r.cost)
        parts.append(
            "<b>usage</b>"
            + _rows(
                ["input", "output", "reasoning", "cache read", "cache write", "cost"],
                [
                    (
                        u.input_tokens,
                        u.output_tokens,
                        u.reasoning_tokens,
                        u.cache_read_tokens,
                        u.cache_write_tokens,
                        cost,
                    )
                ],
            )
        )
    else:
        parts.append(f"<div><b>usage</b> {MISSING} (the stream reported none)</div>")
    found = detect(r)
    parts.append(
        f"<b>anomalies ({len(found)})</b>"
        + (
            _rows(["anomaly", "what it means"], [(n, explain(n)) for n in found])
            if found
            else " none"
        )
    )
    if r.divergence:
        parts.append(
            f"<div style='{_WARN}'><b>replay divergence:</b> "
            + _esc("; ".join(r.divergence))
            + "</div>"
        )
    return (
        "<div style='font-family: system-ui, sans-serif; font-size: 0.9em'>"
        + "".join(parts)
        + "</div>"
    )


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _summary(results: Sequence[StreamResult]) -> tuple[str, pd.DataFrame]:
    """The one-line summary and the summary table of ``results``."""
    st = tables.streams(results)
    n = len(st)
    leaked = int(st["leaked"].sum()) if n else 0
    errors = int(st["error_type"].notna().sum()) if n else 0
    backends = tables.backend_labels(st).nunique() if n else 0
    line = (
        f"{n} stream{'' if n == 1 else 's'} · {backends} serving backend"
        f"{'' if backends == 1 else 's'} · {leaked} leaked reasoning · {errors} ended in an error"
    )
    view = st[SUMMARY_COLUMNS].copy()
    view["ttft_ms"] = view["ttft_ms"].round(1)
    return line, view


def results_text(results: Sequence[StreamResult], limit: int = 20, width: int = 100) -> str:
    """The summary as text (``repr(Results)``): one line, then the first ``limit`` rows in
    a table fitted to ``width`` columns (:func:`lab.console.table_text`, as the CLI prints)."""
    line, view = _summary(results)
    if view.empty:
        return f"Results: {line}"
    more = len(view) - limit
    table, left_out = table_text(view.head(limit), width)
    tail = f"\n... {more} more (lab.tables.streams(results) has every row)" if more > 0 else ""
    if left_out:
        tail += f"\n(not shown to fit {width} columns: {', '.join(left_out)})"
    return f"Results: {line}\n{table}{tail}"


def results_html(results: Sequence[StreamResult], limit: int = SUMMARY_ROWS) -> str:
    """The summary as escaped HTML (``Results._repr_html_``), its table in a scrolling box."""
    line, view = _summary(results)
    if view.empty:
        return f"<p>{_esc(line)}</p>"
    more = len(view) - limit
    table = view.head(limit).to_html(index=False, na_rep=MISSING, escape=True, border=0)
    tail = (
        f"<p style='color: #666'>{more:,} more rows: <code>lab.tables.streams(results)</code> "
        "has them all; <code>results[i]</code> shows one stream.</p>"
        if more > 0
        else "<p style='color: #666'><code>results[i]</code> shows one stream.</p>"
    )
    return (
        f"<p><b>{_esc(line)}</b></p>"
        f"<div style='max-height: 28em; overflow: auto'>{table}</div>{tail}"
    )


TABLE_ROWS = 2000
_itables_ready = False
"""Rows :func:`show_table` puts in its plain-HTML fallback before it says how many more."""


def show_table(df: pd.DataFrame, *, caption: str | None = None) -> None:
    """Display ``df`` in a notebook as an interactive table (sort, search, pages) when the
    optional ``itables`` package is installed (``pip install 'stream-lab[notebook]'``),
    otherwise as plain escaped HTML in a box that scrolls (the first :data:`TABLE_ROWS`
    rows). Cells are text either way: ``itables`` runs with ``allow_html=False``."""
    from IPython.display import HTML, display

    try:
        import itables
    except ImportError:
        more = len(df) - TABLE_ROWS
        table = df.head(TABLE_ROWS).to_html(index=False, na_rep=MISSING, escape=True, border=0)
        head = f"<p><b>{_esc(caption)}</b></p>" if caption else ""
        tail = (
            f"<p style='color: #666'>{more:,} more rows not shown; install itables "
            "(<code>pip install 'stream-lab[notebook]'</code>) for an interactive table "
            "of every row.</p>"
            if more > 0
            else ""
        )
        display(HTML(f"{head}<div style='max-height: 28em; overflow: auto'>{table}</div>{tail}"))
        return
    global _itables_ready
    if not _itables_ready:  # the DataTables bundle goes into the notebook: works offline
        itables.init_notebook_mode(all_interactive=False, connected=False)
        _itables_ready = True
    shown = df.copy()
    for col in shown.columns:  # the one missing marker, not NaN / None / <NA>
        if shown[col].isna().any():
            shown[col] = shown[col].astype(object).where(shown[col].notna(), MISSING)
    itables.show(
        shown,
        caption=caption,
        allow_html=False,
        showIndex=False,
        maxBytes=0,  # every row: the table pages and searches them in the browser
        classes="display compact nowrap",
        scrollX=True,
    )


def _pick_label(r: StreamResult) -> tuple[int, str]:
    """(sort key, menu label) of one stream: leaked first, then failed, then the rest."""
    leaked = any(e.moved for e in r.guard_events if e.guard in LEAK_GUARDS)
    state, rank = ("leaked", 0) if leaked else ("error", 1) if r.error else ("ok", 2)
    if shown_before_close(r):
        state += ", cleaned only in part"
    return rank, f"{r.stream_id} · {r.serving_provider or r.provider} · {r.model} · {state}"


class StreamPicker:
    """A menu of streams (leaked first, then failed) and the picked stream's view below it.

    ``picker.value`` is the picked stream id, ``picker.result`` its result; displaying the
    picker shows the menu and :func:`stream_html` of the picked stream, redrawn on change.
    """

    def __init__(self, results: Sequence[StreamResult], value: str | None = None) -> None:
        import ipywidgets as w

        if not results:
            raise ValueError("no stream to pick from: the results are empty")
        self._by_id = {r.stream_id: r for r in results}
        if value is not None and value not in self._by_id:
            raise KeyError(f"no stream {value!r} among {len(results)} results")
        ranked = sorted((_pick_label(r) + (r.stream_id,) for r in results), key=lambda t: t[0])
        self.dropdown = w.Dropdown(
            options=[(label, sid) for _, label, sid in ranked],
            value=value if value is not None else ranked[0][2],
            description="stream",
            layout=w.Layout(width="64em"),
        )
        self.output = w.Output()
        self.dropdown.observe(lambda _change: self._draw(), names="value")
        self.widget = w.VBox([self.dropdown, self.output])
        self._draw()

    @property
    def value(self) -> str:
        return self.dropdown.value

    @property
    def result(self) -> StreamResult:
        return self._by_id[self.dropdown.value]

    def _draw(self) -> None:
        from IPython.display import HTML, display

        self.output.clear_output()
        with self.output:
            display(HTML(stream_html(self.result)))

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
