"""The stream explorer of notebook 01: filters, a stream menu, and every section of the
picked stream below it, redrawn when the choice changes.

:class:`StreamExplorer` is made of ipywidgets only: each section is an escaped HTML page
built here (or a PNG), so the browser runs no code of ours and the explorer works after a
page reload, in a second tab, in JupyterLab, Notebook 7 and VS Code alike (the widgets' state
lives in the kernel). It sits above the presentation layer because it draws with both
:mod:`lab.view` (the stream, escaped) and :mod:`lab.plots` (the timeline).

Sections, each drawn once per pick: the request body of the first attempt; the stream as
:func:`lab.view.stream_html` shows it (the answer beside the reasoning with the moved text
marked, guard events, attempts, usage, anomalies, a partial clean); the raw network reads of
the final attempt, the first :data:`READ_ROWS` of them until "show all" is pressed, the reads
that completed a guard's event highlighted; and the timeline.
"""

from __future__ import annotations

import base64
import codecs
import html
import io
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lab import plots, tables
from lab.anomalies import detect
from lab.view import _pick_label, stream_html
from lab.widgetview import widget_bundle

if TYPE_CHECKING:
    import pandas as pd

    from lab.capture import Capture
    from lab.result import StreamResult

__all__ = ["READ_ROWS", "StreamExplorer", "decoded_reads", "VERDICTS"]

READ_ROWS = 20
"""Raw reads the explorer lists before its "show all" button."""

VERDICTS = ("leaked", "cleaned only in part", "error", "ok")
"""The verdict filter's choices, in the menu's order (a stream can be leaked and cleaned
only in part)."""

ANY = "(any)"

_BOX = "max-height: 28em; overflow: auto; margin: 2px 0 8px 0"
_CELL = "border: 1px solid #ddd; padding: 2px 6px; text-align: left; vertical-align: top"
_TEXT = "white-space: pre-wrap; word-break: break-all; font-family: monospace"
_HIT = "background: #ffe0e0"


def decoded_reads(capture: Capture, result: StreamResult) -> pd.DataFrame:
    """The network reads of ``result``'s final attempt as they arrived: ``seq``, ``t_ms``,
    ``n_bytes``, ``text`` (UTF-8 decoded incrementally: a character split across two reads
    shows in the read that completes it) and ``guard`` (True where the read completed an
    SSE event in which a guard moved text or the markup guard saw a leaked marker, from
    ``lab.tables.leaks``)."""
    import pandas as pd

    final = len(result.attempts) - 1
    chunks = capture.chunks
    reads = chunks[(chunks["stream_id"] == result.stream_id) & (chunks["attempt"] == final)]
    reads = reads.sort_values("seq")
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    leaks = tables.leaks([result])
    hit = set(leaks.loc[leaks["attempt"] == final, "read_seq"].dropna().astype(int))
    seqs = reads["seq"].to_numpy()
    return pd.DataFrame(
        {
            "seq": seqs,
            "t_ms": (reads["t_ns"] / 1e6).round(1).to_numpy(),
            "n_bytes": reads["n_bytes"].to_numpy(),
            "text": [decoder.decode(raw) for raw in reads["raw"]],
            "guard": [int(s) in hit for s in seqs],
        }
    )


def _reads_html(reads: pd.DataFrame, limit: int | None) -> str:
    shown = reads if limit is None else reads.head(limit)
    head = "".join(f"<th style='{_CELL}'>{h}</th>" for h in ("seq", "t_ms", "bytes", "text"))
    rows = "".join(
        f"<tr style='{_HIT if r.guard else ''}'>"
        f"<td style='{_CELL}'>{int(r.seq)}</td><td style='{_CELL}'>{r.t_ms:.1f}</td>"
        f"<td style='{_CELL}'>{int(r.n_bytes)}</td>"
        f"<td style='{_CELL}; {_TEXT}'>{html.escape(r.text)}</td></tr>"
        for r in shown.itertuples()
    )
    guard = int(reads["guard"].sum())
    note = (
        f"{len(reads):,} read(s) of the final attempt"
        + (
            f", {guard} highlighted: a guard moved text from the event it completed"
            if guard
            else ""
        )
        + (f"; the first {len(shown):,} shown" if len(shown) < len(reads) else "")
    )
    return (
        f"<div style='color: #555'>{note}</div>"
        f"<div style='{_BOX}'><table class='lab-reads' style='border-collapse: collapse; "
        f"font-size: 0.85em'><tr>{head}</tr>{rows}</table></div>"
    )


def _section(title: str) -> str:
    return f"<h4 style='margin: 12px 0 4px 0'>{html.escape(title)}</h4>"


def _options(counts: dict[str, int]) -> list[tuple[str, str | None]]:
    return [(ANY, None)] + [(f"{k} ({n})", k) for k, n in sorted(counts.items())]


class StreamExplorer:
    """Filters (backend, model, verdict, anomaly), a menu of the streams they keep (leaked
    first, then failed), and the picked stream's sections below, redrawn on every change.

    ``explorer.value`` is the picked stream id, ``explorer.result`` its result;
    ``explorer.backend`` / ``model`` / ``verdict`` / ``anomaly`` are the filter menus (value
    ``None``: any). ``capture`` (``lab.capture.open(...)``) gives the request body and the
    raw reads; without it those sections say so.
    """

    def __init__(
        self,
        results: Sequence[StreamResult],
        capture: Capture | None = None,
        *,
        value: str | None = None,
        read_rows: int = READ_ROWS,
    ) -> None:
        import ipywidgets as w

        if not results:
            raise ValueError("no stream to explore: the results are empty")
        self.results = list(results)
        self.capture = capture
        self.read_rows = read_rows
        self._by_id = {r.stream_id: r for r in self.results}
        if value is not None and value not in self._by_id:
            raise KeyError(f"no stream {value!r} among {len(self.results)} results")
        labels = tables.backend_labels(tables.streams(self.results))
        self._facts: dict[str, dict[str, Any]] = {}
        for r, backend in zip(self.results, labels, strict=True):
            rank, label = _pick_label(r)
            state = label.rsplit(" · ", 1)[1]
            self._facts[r.stream_id] = {
                "rank": rank,
                "label": label,
                "backend": str(backend),
                "model": str(r.model),
                "verdicts": {v for v in VERDICTS if v in state.split(", ")},
                "anomalies": set(detect(r)),
            }

        def counts(key: str) -> dict[str, int]:
            out: dict[str, int] = {}
            for f in self._facts.values():
                names = f[key] if isinstance(f[key], set) else {f[key]}
                for name in names:
                    out[name] = out.get(name, 0) + 1
            return out

        layout = w.Layout(width="24em")
        self.backend = w.Dropdown(options=_options(counts("backend")), description="backend")
        self.model = w.Dropdown(options=_options(counts("model")), description="model")
        verdicts = counts("verdicts")
        self.verdict = w.Dropdown(
            options=[(ANY, None)]
            + [(f"{v} ({verdicts[v]})", v) for v in VERDICTS if v in verdicts],
            description="verdict",
        )
        self.anomaly = w.Dropdown(options=_options(counts("anomalies")), description="anomaly")
        for name, menu in (
            ("backend", self.backend),
            ("model", self.model),
            ("verdict", self.verdict),
            ("anomaly", self.anomaly),
        ):
            menu.layout = layout
            menu.add_class(f"lab-filter-{name}")
            menu.observe(self._refilter, names="value")
        self.stream = w.Dropdown(description="stream", layout=w.Layout(width="64em"))
        self.stream.add_class("lab-stream-picker")  # a name for a page (and a test) to find
        self.matches = w.HTML()
        self.request = w.HTML()
        self.view = w.HTML()
        self.reads = w.HTML()
        self.show_all = w.Button(description="show all reads", layout=w.Layout(width="14em"))
        self.show_all.on_click(self._toggle_reads)
        self.timeline = w.HTML()
        self._all_reads = False
        self._reads: pd.DataFrame | None = None
        self.widget = w.VBox(
            [
                w.HBox([self.backend, self.model]),
                w.HBox([self.verdict, self.anomaly]),
                self.matches,
                self.stream,
                self.request,
                self.view,
                self.reads,
                self.show_all,
                self.timeline,
            ]
        )
        self.widget.add_class("lab-explorer")
        self._quiet = False
        self._drawn: str | None = ""  # the stream the sections show ("": none drawn yet)
        self._refilter(prefer=value)
        self.stream.observe(self._picked, names="value")

    @property
    def value(self) -> str | None:
        return self.stream.value

    @property
    def result(self) -> StreamResult | None:
        return None if self.stream.value is None else self._by_id[self.stream.value]

    def kept(self) -> list[str]:
        """The stream ids the filters keep, in the menu's order (leaked first, then failed)."""
        want = {
            "backend": self.backend.value,
            "model": self.model.value,
            "verdicts": self.verdict.value,
            "anomalies": self.anomaly.value,
        }
        out = []
        for sid, f in self._facts.items():
            ok = all(
                v is None or (v in f[k] if isinstance(f[k], set) else f[k] == v)
                for k, v in want.items()
            )
            if ok:
                out.append(sid)
        return sorted(out, key=lambda sid: self._facts[sid]["rank"])

    def _refilter(self, _change: object = None, *, prefer: str | None = None) -> None:
        kept = self.kept()
        current = prefer if prefer is not None else self.stream.value
        self._quiet = True  # the menu passes through other values on its way: draw once
        try:
            self.stream.options = [(self._facts[sid]["label"], sid) for sid in kept]
            self.stream.value = (current if current in kept else kept[0]) if kept else None
        finally:
            self._quiet = False
        self.matches.value = (
            f"<span style='color: #555'>{len(kept)} of {len(self.results)} streams match</span>"
        )
        if self.stream.value != self._drawn:
            self._draw()

    def _picked(self, _change: object = None) -> None:
        if not self._quiet:
            self._draw()

    def _toggle_reads(self, _button: object = None) -> None:
        self._all_reads = not self._all_reads
        self._draw_reads()

    def _draw_reads(self) -> None:
        reads = self._reads
        if reads is None:
            self.reads.value = (
                _section("Raw reads") + "<p>no capture given: StreamExplorer(results, capture)</p>"
            )
            self.show_all.layout.display = "none"
            return
        limit = None if self._all_reads else self.read_rows
        self.reads.value = _section("Raw reads") + _reads_html(reads, limit)
        more = len(reads) > self.read_rows
        self.show_all.layout.display = None if more else "none"
        self.show_all.description = (
            f"show the first {self.read_rows}"
            if self._all_reads
            else f"show all {len(reads):,} reads"
        )

    def _draw(self) -> None:
        r = self.result
        self._drawn = self.stream.value
        self._all_reads = False
        if r is None:
            self.request.value = "<p>no stream matches these filters</p>"
            for section in (self.view, self.reads, self.timeline):
                section.value = ""
            self._reads = None
            self.show_all.layout.display = "none"
            return
        self.request.value = _section("Request (first attempt)") + self._request_html(r)
        self.view.value = _section("The stream") + stream_html(r)
        self._reads = None if self.capture is None else decoded_reads(self.capture, r)
        self._draw_reads()
        figure = plots.stream_timeline(r)
        buf = io.BytesIO()
        figure.savefig(buf, format="png", dpi=100)  # as LabFigure shows itself
        png = buf.getvalue()
        self.timeline.value = (
            _section("Timeline")
            + "<img alt='timeline: arrival time against cumulative characters' "
            + "style='max-width: 100%; height: auto' src='data:image/png;base64,"
            + base64.b64encode(png).decode("ascii")
            + "'>"
        )

    def _request_html(self, r: StreamResult) -> str:
        if self.capture is None:
            return "<p>no capture given: StreamExplorer(results, capture)</p>"
        request = self.capture.request(r.stream_id)
        raw = request.exchanges[0].request_body
        try:
            body = json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
        except (TypeError, ValueError):
            body = raw if isinstance(raw, str) else repr(raw)
        return (
            f"<pre style='{_BOX}; {_TEXT}; border: 1px solid #ccc; padding: 6px'>"
            f"{html.escape(body)}</pre>"
        )

    def _repr_mimebundle_(self, **_kwargs: Any) -> dict[str, Any]:
        r = self.result  # a viewer without widgets still sees the picked stream
        what = (
            f"A stream explorer of {len(self.results):,} streams (filters, a stream menu, "
            "the picked stream's sections)"
        )
        return widget_bundle(self.widget, what, stream_html(r) if r is not None else None)
