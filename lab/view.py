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
- :func:`overview` – the dashboard's head: the summary line, the backend scorecard, the
  rates per backend with their intervals, and what needs attention.
- :class:`TableView` / :func:`show_table` – a table that searches, sorts and pages.
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
from lab.numbers import format_rate
from lab.reading import answer_pieces, arguments_json, reasoning_pieces
from lab.tables import LEAK_GUARDS
from lab.widgetview import widget_bundle

if TYPE_CHECKING:
    import pandas as pd

    from lab.result import StreamResult

__all__ = [
    "DECIMALS",
    "KEY_COLUMNS",
    "MISSING",
    "Overview",
    "SUMMARY_COLUMNS",
    "format_cost",
    "format_rate",
    "overview",
    "results_html",
    "results_text",
    "StreamPicker",
    "TableView",
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


_PIECE_TAGS = {
    "moved": (f"<mark style='{_MARK}' title='moved here by a guard'>", "</mark>"),
    "shown": (
        "<span style='text-decoration: underline wavy #d9363e' "
        "title='reasoning shown before its closing tag arrived'>",
        "</span>",
    ),
}
"""How a marked piece of :mod:`lab.reading` looks in a notebook (``moved``: text a leak
guard moved into the reasoning; ``shown``: reasoning shown as the answer before its closing
tag arrived)."""


def _pieces_html(pieces: Sequence[tuple[str, str]]) -> str:
    """:func:`lab.reading.answer_pieces` / :func:`~lab.reading.reasoning_pieces` as HTML:
    every piece escaped, a marked one inside its tag."""
    out = []
    for text, mark in pieces:
        open_tag, close_tag = _PIECE_TAGS.get(mark, ("", ""))
        out.append(f"{open_tag}{html.escape(text)}{close_tag}")
    return "".join(out)


def _calls_html(calls: Sequence[Any]) -> str:
    """Tool calls: name, id, whether the arguments were cut short, and the arguments as
    JSON (:func:`lab.reading.arguments_json`) in a box that scrolls; all escaped."""
    rows = "".join(
        "<tr>"
        f"<td style='{_CELL}'>{_esc(f.name)}</td><td style='{_CELL}'>{_esc(f.id)}</td>"
        f"<td style='{_CELL}'>{'yes' if f.arguments_truncated else 'no'}</td>"
        f"<td style='{_CELL}'><pre style='{_BOX}; max-height: 12em'>"
        f"{html.escape(arguments_json(f.args))}</pre></td></tr>"
        for f in calls
    )
    head = "".join(
        f"<th style='{_CELL}; background: #f3f3f3'>{h}</th>"
        for h in ("name", "id", "cut short", "arguments (JSON)")
    )
    return f"<table style='{_TABLE}'><tr>{head}</tr>{rows}</table>"


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
    parts.append(
        "<table style='width: 100%; table-layout: fixed; border-collapse: collapse'><tr>"
        f"<th style='text-align: left; width: 50%'>answer ({_chars(len(r.text))})</th>"
        f"<th style='text-align: left'>reasoning ({_chars(len(r.reasoning))}; "
        "<mark style='" + _MARK + "'>moved by a guard</mark>)</th></tr><tr>"
        f"<td style='vertical-align: top; text-align: left'><pre style='{_BOX}'>"
        f"{_pieces_html(answer_pieces(r))}</pre></td>"
        f"<td style='vertical-align: top; text-align: left'><pre style='{_BOX}'>"
        f"{_pieces_html(reasoning_pieces(r))}</pre></td></tr></table>"
    )
    if r.function_calls:
        parts.append(
            f"<div><b>tool calls ({len(r.function_calls)})</b>{_calls_html(r.function_calls)}</div>"
        )
    events = [
        (e.guard, e.detail.get("rule"), e.attempt, e.seq, e.offset, _short(e.moved))
        for e in r.guard_events
    ]
    parts.append(
        f"<div><b>guard events ({len(events)})</b>"
        + (
            _rows(["guard", "rule", "attempt", "seq", "offset", "moved"], events)
            if events
            else " none"
        )
        + "</div>"
    )
    attempts = [
        (a.attempt, a.label, a.status, a.end_reason, a.degradable, a.error) for a in r.attempts
    ]
    parts.append(
        f"<div><b>attempts ({len(attempts)})</b>"
        + _rows(["attempt", "label", "status", "ended", "degradable", "error"], attempts)
        + "</div>"
    )
    if r.usage is not None:
        u = r.usage
        cost = format_cost(r.cost)
        parts.append(
            "<div><b>usage</b>"
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
            + "</div>"
        )
    else:
        parts.append(f"<div><b>usage</b> {MISSING} (the stream reported none)</div>")
    found = detect(r)
    parts.append(
        f"<div><b>anomalies ({len(found)})</b>"
        + (
            _rows(["anomaly", "what it means"], [(n, explain(n)) for n in found])
            if found
            else " none"
        )
        + "</div>"
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


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table of cells that are already HTML (escaped by the caller), in a box that scrolls."""
    head = "".join(f"<th style='{_CELL}; background: #f3f3f3'>{h}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td style='{_CELL}'>{v}</td>" for v in row) + "</tr>" for row in rows
    )
    return (
        f"<div style='max-height: 28em; overflow: auto'><table style='{_TABLE}'>"
        f"<tr>{head}</tr>{body}</table></div>"
    )


def _scorecard_html(card: pd.DataFrame) -> str:
    verdicts = list(card.attrs.get("verdicts", []))
    header = ["backend", "streams", *[html.escape(v) for v in verdicts], "flags"]
    rows = []
    for _, row in card.iterrows():
        cells = [_esc(row["serving_provider"]), f"{int(row['streams']):,}"]
        for v in verdicts:
            text = format_rate(row[f"{v}_rate"], row[f"{v}_ci_low"], row[f"{v}_ci_high"])
            flagged = bool(row.get(f"{v}_worse", False))
            cells.append(f"<b style='color: #b0262c'>{text} worse</b>" if flagged else text)
        cells.append(_esc(row.get("flags") or ""))
        rows.append(cells)
    sentences = list(card.attrs.get("sentences", []))
    worse = [  # the flags: worse on a verdict, slower on a timing
        s
        for s in sentences
        if ("worse with confidence on" in s and " not worse" not in s)
        or ": slower with confidence on " in s
    ]
    rest = [s for s in sentences if s not in worse]
    said = "".join(f"<div style='{_WARN}'>{_esc(s)}</div>" for s in worse) or (
        "<p>No backend is worse than the rest with confidence on any verdict.</p>"
    )
    more = (
        f"<details><summary>the other sentences ({len(rest)})</summary><ul>"
        + "".join(f"<li>{_esc(s)}</li>" for s in rest)
        + "</ul></details>"
        if rest
        else ""
    )
    return _html_table(header, rows) + said + more


def _rates_html(backends: pd.DataFrame) -> str:
    header = ["backend", "streams", "leaked", "leak rate", "errors", "error rate", "median TTFT"]
    rows = []
    for _, b in backends.iterrows():
        ttft = b.get("median_ttft_ms")
        rows.append(
            [
                _esc(b["serving_provider"]),
                f"{int(b['streams']):,}",
                f"{int(b['leaked']):,}",
                format_rate(b["leak_rate"], b.get("leak_rate_ci_low"), b.get("leak_rate_ci_high")),
                f"{int(b['errors']):,}",
                format_rate(
                    b["error_rate"], b.get("error_rate_ci_low"), b.get("error_rate_ci_high")
                ),
                MISSING if ttft is None or ttft != ttft else f"{ttft:,.1f} ms",
            ]
        )
    said = "".join(f"<li>{_esc(s)}</li>" for s in tables.backend_verdicts(backends))
    return _html_table(header, rows) + f"<ul>{said}</ul>"


def _attention_html(results: Sequence[StreamResult], labels: Sequence[str]) -> str:
    by_anomaly: dict[str, dict[str, int]] = {}
    flagged: set[str] = set()
    for r, label in zip(results, labels, strict=True):
        for name in detect(r):
            flagged.add(r.stream_id)
            per = by_anomaly.setdefault(name, {})
            per[label] = per.get(label, 0) + 1
    parts = []
    if not by_anomaly:
        parts.append("<p>No anomaly in any stream: the guards left every stream clean.</p>")
    else:
        parts.append(
            f"<p><b>{len(flagged)} of {len(results)} streams need attention</b> "
            "(what is still wrong after the guards ran):</p>"
        )
        ranked = sorted(by_anomaly.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
        rows = [
            [
                _esc(name),
                f"{sum(per.values()):,}",
                ", ".join(
                    f"{_esc(b)} ({n})"
                    for b, n in sorted(per.items(), key=lambda kv: (-kv[1], kv[0]))
                ),
                _esc(explain(name)),
            ]
            for name, per in ranked
        ]
        parts.append(_html_table(["anomaly", "streams", "backends", "what it means"], rows))
    partial = [(r, shown_before_close(r)) for r in results]
    partial = [(r, pairs) for r, pairs in partial if pairs]
    if partial:
        label_of = dict(zip([r.stream_id for r in results], labels, strict=True))
        rows = [
            [
                _esc(r.stream_id),
                _esc(label_of[r.stream_id]),
                _chars(len(pairs[0][0])),
                _chars(len(pairs[0][1])),
            ]
            for r, pairs in partial
        ]
        parts.append(
            f"<p><b>{len(partial)} stream(s) cleaned only in part</b>: reasoning was shown as "
            "the answer before its closing tag arrived; the guard could move only what "
            "followed.</p>"
            + _html_table(["stream", "backend", "stayed in the answer", "moved"], rows)
        )
    else:
        parts.append("<p>No stream was cleaned only in part.</p>")
    return "".join(parts)


class Overview:
    """The dashboard's head (:func:`overview`): shows itself as escaped HTML in a notebook;
    ``str()`` is the same HTML."""

    def __init__(self, page: str) -> None:
        self.html = page

    def _repr_html_(self) -> str:
        return self.html

    def __str__(self) -> str:
        return self.html


def overview(results: Sequence[StreamResult]) -> Overview:
    """What a capture says, in one view: the one-line summary, the backend scorecard (every
    verdict's rate with its Wilson interval, the backends worse than the rest with
    confidence, :func:`lab.tables.scorecard`), the leak and error rates per backend with
    their intervals and what they let you say (:func:`lab.tables.by_backend`,
    :func:`lab.tables.backend_verdicts`), and what needs attention: the anomalies the guards
    did not fix, per backend, with what each means, and the streams cleaned only in part.
    Every name and message from a stream is escaped."""
    results = list(results)
    line, _ = _summary(results)
    if not results:
        return Overview(f"<p>{_esc(line)}</p>")
    st = tables.streams(results)
    labels = [str(x) for x in tables.backend_labels(st)]
    page = (
        "<div style='font-family: system-ui, sans-serif; font-size: 0.9em'>"
        f"<p style='font-size: 1.1em'><b>{_esc(line)}</b></p>"
        "<h3>Backend scorecard</h3>"
        "<p style='color: #555'>Each verdict's rate with its Wilson 95 % interval; "
        "<b>worse</b>: a one-sided Fisher exact test against the other backends, "
        "Holm-adjusted over the card, at 95 %.</p>"
        + _scorecard_html(tables.scorecard(results))
        + "<h3>Leak and error rates per backend</h3>"
        + _rates_html(tables.by_backend(st))
        + "<h3>What needs attention</h3>"
        + _attention_html(results, labels)
        + "</div>"
    )
    return Overview(page)


TABLE_ROWS = 2000
"""Rows :func:`show_table` puts in its plain-HTML table (no ipywidgets) before it says how
many more there are."""

TABLE_PAGE_ROWS = 25
"""Rows one page of a :class:`TableView` shows."""

TABLE_PREVIEW_ROWS = 20
"""Rows of the static, escaped copy that travels beside a :class:`TableView`, for a viewer
that cannot run widgets (a notebook exported to HTML, a repository browser)."""


def _missing_marked(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the one missing marker (:data:`MISSING`) instead of NaN / None / <NA>."""
    shown = df.copy()
    for col in shown.columns:
        if shown[col].isna().any():
            shown[col] = shown[col].astype(object).where(shown[col].notna(), MISSING)
    return shown


def _plain_table(df: pd.DataFrame, caption: str | None, limit: int, more_note: str) -> str:
    """The first ``limit`` rows of ``df`` as escaped HTML in a box that scrolls."""
    more = len(df) - limit
    table = df.head(limit).to_html(
        index=False, na_rep=MISSING, escape=True, border=0, classes="lab-table"
    )
    head = f"<p><b>{_esc(caption)}</b></p>" if caption else ""
    tail = f"<p style='color: #666'>{more:,} more rows {more_note}</p>" if more > 0 else ""
    return f"{head}<div style='max-height: 28em; overflow: auto'>{table}</div>{tail}"


class TableView:
    """A table that searches, sorts and pages in the kernel, made of ipywidgets only.

    The page is escaped HTML built here (``DataFrame.to_html(escape=True)``); the browser
    runs no code of ours. Its state lives in the kernel's widget models, which every page
    showing the notebook fetches for itself: it works after a page reload, in a second tab,
    in JupyterLab, Notebook 7 and VS Code alike, and the saved notebook holds only a
    reference to it plus a static copy of the first :data:`TABLE_PREVIEW_ROWS` rows for
    viewers without widgets. (itables' HTML mode, used before, loaded its JavaScript once per
    kernel into one page: a reloaded page showed "Loading ITables..." for ever and the saved
    notebook carried a megabyte of script; its widget carries that megabyte in the widget
    state, which breaks a notebook exported to HTML.)

    ``view.search`` (text, any column, case-insensitive), ``view.sort`` (a column or
    ``None``), ``view.descending`` and the page buttons drive it; :meth:`rows` is what they
    select, :meth:`page_frame` the page shown.
    """

    def __init__(
        self, df: pd.DataFrame, *, caption: str | None = None, page_rows: int = TABLE_PAGE_ROWS
    ) -> None:
        import ipywidgets as w

        self.frame = df.reset_index(drop=True)
        self.shown = _missing_marked(self.frame)
        self.caption = caption
        self.per_page = max(1, page_rows)
        self._haystack = (
            self.shown.astype(str).agg(" ".join, axis=1).str.lower()
            if len(self.shown.columns)
            else self.shown.index.to_series().astype(str)
        )
        self.search = w.Text(
            placeholder="search every column", description="search", continuous_update=True
        )
        self.sort = w.Dropdown(
            options=[("(as given)", None)] + [(str(c), c) for c in self.frame.columns],
            value=None,
            description="sort by",
        )
        self.descending = w.Checkbox(value=False, description="descending", indent=False)
        self.previous = w.Button(description="◀ previous", layout=w.Layout(width="8em"))
        self.next = w.Button(description="next ▶", layout=w.Layout(width="8em"))
        self.status = w.HTML()
        self.body = w.HTML()
        self.page = 0
        for control in (self.search, self.sort, self.descending):
            control.observe(self._restart, names="value")
        self.previous.on_click(lambda _b: self._turn(-1))
        self.next.on_click(lambda _b: self._turn(1))
        head = [w.HTML(f"<b>{_esc(caption)}</b>")] if caption else []
        self.widget = w.VBox(
            [
                *head,
                w.HBox([self.search, self.sort, self.descending]),
                self.body,
                w.HBox([self.previous, self.next, self.status]),
            ]
        )
        self._draw()

    def rows(self) -> pd.DataFrame:
        """The rows the search keeps, in the chosen order (missing values marked)."""
        keep = self._haystack.str.contains(self.search.value.strip().lower(), regex=False)
        picked = self.frame[keep.to_numpy()]
        if self.sort.value is not None:
            picked = picked.sort_values(
                self.sort.value,
                ascending=not self.descending.value,
                kind="mergesort",  # stable: ties keep the order given
                na_position="last",
                key=_sort_key,
            )
        return self.shown.loc[picked.index]

    def page_frame(self) -> pd.DataFrame:
        """The rows of the page shown."""
        start = self.page * self.per_page
        return self.rows().iloc[start : start + self.per_page]

    def _pages(self, n: int) -> int:
        return max(1, -(-n // self.per_page))

    def _restart(self, _change: object = None) -> None:
        self.page = 0
        self._draw()

    def _turn(self, step: int) -> None:
        self.page = min(max(0, self.page + step), self._pages(len(self.rows())) - 1)
        self._draw()

    def _draw(self) -> None:
        rows = self.rows()
        pages = self._pages(len(rows))
        self.page = min(self.page, pages - 1)
        start = self.page * self.per_page
        shown = rows.iloc[start : start + self.per_page]
        self.body.value = (
            "<div style='max-height: 32em; overflow: auto'>"
            + shown.to_html(index=False, na_rep=MISSING, escape=True, border=0, classes="lab-table")
            + "</div>"
        )
        kept = len(rows) != len(self.frame)
        of = f" (of {len(self.frame):,}; search: {_esc(self.search.value)})" if kept else ""
        self.status.value = (
            f"rows {start + 1 if len(rows) else 0:,}–{start + len(shown):,} of "
            f"{len(rows):,}{of} · page {self.page + 1} of {pages}"
        )
        self.previous.disabled = self.page == 0
        self.next.disabled = self.page >= pages - 1

    def _repr_mimebundle_(self, **_kwargs: Any) -> dict[str, Any]:
        note = "in the interactive table (run the notebook)."
        static = _plain_table(self.shown, self.caption, TABLE_PREVIEW_ROWS, note)
        named = f" {self.caption!r}" if self.caption else ""
        what = f"A table{named} of {len(self.frame):,} rows that searches, sorts and pages"
        return widget_bundle(self.widget, what, static)


def _sort_key(col: pd.Series) -> pd.Series:
    """Text columns (object: strings, lists, mixed) sort by their text; others as they are;
    missing values last either way."""
    if col.dtype == object:
        return col.map(lambda v: str(v), na_action="ignore")
    return col


def show_table(df: pd.DataFrame, *, caption: str | None = None) -> None:
    """Display ``df`` in a notebook as a :class:`TableView` (search, sort, pages; ipywidgets),
    or as plain escaped HTML in a box that scrolls (the first :data:`TABLE_ROWS` rows) where
    ipywidgets cannot be imported. Cells are text either way, never markup."""
    from IPython.display import HTML, display

    try:
        import ipywidgets  # noqa: F401 - the interactive table is made of its widgets
    except ImportError:
        note = "not shown; install ipywidgets for a table that searches, sorts and pages."
        display(HTML(_plain_table(_missing_marked(df), caption, TABLE_ROWS, note)))
        return
    display(TableView(df, caption=caption))


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
        self.dropdown.add_class("lab-stream-picker")  # a name for a page (and a test) to find
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

    def _repr_mimebundle_(self, **_kwargs: Any) -> dict[str, Any]:
        what = f"A menu of {len(self._by_id):,} streams and the picked stream below it"
        return widget_bundle(self.widget, what, stream_html(self.result))
