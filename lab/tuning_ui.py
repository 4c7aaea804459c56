"""The spill-guard tuner's ipywidgets panel, :class:`SpillTuner`, over the pure scoring of
:mod:`lab.tuning` (``lab.tuning.SpillTuner`` is this class too).

Every string that came from a corpus or a stream is escaped before it is placed in a tag.
ipywidgets is imported only when a :class:`SpillTuner` is built.
"""

from __future__ import annotations

import html
import json
import typing
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ValidationError

from lab.config import LabConfig, field_docs
from lab.guards.spill import SpillGuardConfig
from lab.tuning import (
    STREAMING_ONLY_FIELDS,
    STREAMING_ONLY_NOTE,
    as_corpus,
    changed_cases,
    corpus_from_captures,
    is_missing,
    score,
)
from lab.tuning_store import default_config_path, write_text_atomic

__all__ = ["CONTROL_LABEL_WIDTH", "CONTROL_WIDTH", "NON_EMPTY_FIELDS", "SpillTuner"]


def _int_bounds(info: Any, default: int) -> tuple[int, int]:
    lo = 0
    for m in info.metadata:
        if getattr(m, "ge", None) is not None:
            lo = int(m.ge)
        elif getattr(m, "gt", None) is not None:
            lo = int(m.gt) + 1
    hi = None
    for m in info.metadata:
        if getattr(m, "le", None) is not None:
            hi = int(m.le)
        elif getattr(m, "lt", None) is not None:
            hi = int(m.lt) - 1
    if hi is None:
        hi = max(lo + 10, default * 5)
    return lo, hi


def _str_seq(ann: Any) -> bool:
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    return origin in (list, tuple, set, frozenset) and bool(args) and args[0] is str


CONTROL_WIDTH = "38em"
"""Width of every tuner control, its label included: the slider track gets what the label
leaves (about 22em), so a drag moves by a step instead of jumping to the end."""
CONTROL_LABEL_WIDTH = "16em"
"""Width of a control's label (the longest field name fits)."""

NON_EMPTY_FIELDS = {
    "boundary_chars": "an empty set of boundary characters means the guard can never find "
    "a seam (it would be switched off silently; untick enabled for that)",
}
"""Text fields the tuner refuses to leave empty, and why (the refusal names the reason)."""


def _non_empty(name: str) -> Any:
    def parse(value: str) -> str:
        if not value:
            raise ValueError(f"{name} cannot be empty: {NON_EMPTY_FIELDS[name]}")
        return value

    return parse


def _make_control(w: Any, name: str, info: Any, value: Any, doc: str) -> tuple[Any, Any, Any]:
    """(widget, parse: widget value -> field value, format: field value -> widget value)."""
    ann = info.annotation
    common = {
        "description": name,
        "style": {"description_width": CONTROL_LABEL_WIDTH},
        "tooltip": doc,
        "layout": w.Layout(width=CONTROL_WIDTH),
    }
    ident = lambda v: v  # noqa: E731
    if ann is bool:
        return w.Checkbox(value=bool(value), indent=False, **common), bool, bool
    if ann is int:
        lo, hi = _int_bounds(info, int(value))
        ctl = w.IntSlider(value=int(value), min=lo, max=hi, continuous_update=False, **common)
        return ctl, int, int
    if ann is float:
        return w.FloatText(value=float(value), **common), float, float
    if ann is str:
        if name in NON_EMPTY_FIELDS:
            return w.Text(value=value, **common), _non_empty(name), ident
        return w.Text(value=value, **common), str, ident
    if _str_seq(ann):
        container = typing.get_origin(ann)

        def parse_seq(v: str) -> Any:
            return container(s.strip() for s in v.split(",") if s.strip())

        return w.Text(value=", ".join(value), **common), parse_seq, lambda v: ", ".join(v)
    if typing.get_origin(ann) is typing.Literal:
        return w.Dropdown(options=list(typing.get_args(ann)), value=value, **common), ident, ident
    # Anything else (optional, nested, unions): edit it as JSON.
    return w.Text(value=json.dumps(value), **common), json.loads, json.dumps


def _cell(v: Any) -> str:
    if is_missing(v):
        return '<span style="color:#999">—</span>'
    return html.escape(str(v))


def _text_cell(text: str, seam: int | None, limit: int = 160) -> str:
    """Escaped text with the leaked part struck through and the seam marked; whitespace shown."""

    def vis(s: str) -> str:
        return html.escape(s.replace("\n", "⏎").replace("\t", "⇥"))

    if len(text) > limit:
        text = text[:limit] + "…"
        if seam is not None and seam > limit:
            seam = None
    if seam is None:
        return f"<code>{vis(text)}</code>"
    return (
        f'<code><s style="color:#b00">{vis(text[:seam])}</s>'
        f'<b style="color:#06c">┃</b>{vis(text[seam:])}</code>'
    )


def _table(rows: list[list[str]], header: list[str]) -> str:
    head = "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _seam(v: Any) -> int | None:
    return None if is_missing(v) else int(v)


class SpillTuner:
    """An ipywidgets panel to tune :class:`~lab.guards.spill.SpillGuardConfig` on a corpus.

    One control per config field (generated from the pydantic fields: bool -> Checkbox,
    int -> IntSlider, str -> Text, sequences of str -> comma-separated Text, anything else
    -> JSON Text), so a new field gets a control without code changes. Every change re-scores
    the corpus: ``.score`` (a :class:`Score`) and ``.changed`` (:func:`changed_cases` vs the
    baseline) update and the HTML panes show precision/recall, the confusion matrix, the
    changed cases and the misclassified ones. The :data:`STREAMING_ONLY_FIELDS` controls say
    (tooltip and a note under the controls) that they do not move the corpus score. "Save
    config" writes ``LabConfig(spill=tuner.config)`` as JSON to the path in the text box
    (**save_path**; default :func:`~lab.tuning_store.default_config_path`, in the user's data
    directory, outside any repository) and shows the absolute path it wrote; an existing
    file is never replaced unless the "overwrite" box is ticked (it unticks after a save).

    **corpus**: a DataFrame, a JSONL path or None (bundled). **captures**: StreamResults, or
    a capture path / Capture (replayed with the reference config); their first contents are
    added as unlabelled cases, and for a path or Capture a "Compare on captures" button runs
    :func:`lab.replay.compare` (baseline vs tuned). **baseline**: the config changes are
    measured against (reference by default).

    Test without a browser: set ``tuner.controls[name].value`` and read ``tuner.score``;
    ``tuner.save_button.click()`` saves.
    """

    def __init__(
        self,
        corpus: pd.DataFrame | str | Path | None = None,
        captures: Any = None,
        *,
        baseline: SpillGuardConfig | None = None,
        save_path: str | Path | None = None,
        results: Any = None,
    ) -> None:
        import ipywidgets as w

        self.baseline = baseline or SpillGuardConfig()
        frame = as_corpus(corpus)
        self.compare_source: Any = None
        if captures is not None:
            if isinstance(captures, (str, Path)) or hasattr(captures, "requests"):
                from lab.replay import replay

                self.compare_source = captures
                if results is None:  # given: the notebook's own replay, not a second one
                    results = replay(captures, config=self.baseline, progress=True)
                else:
                    results = list(results)
            else:
                results = list(captures)
            real = corpus_from_captures(results)
            if len(real):
                frame = as_corpus(pd.concat([frame, real], ignore_index=True))
        self.corpus = frame
        self._config = self.baseline
        self._muted = False
        self.compare_result: pd.DataFrame | None = None
        self.compare_config: SpillGuardConfig | None = None
        """The config the last Captures comparison ran with (stale once it differs)."""
        self._compare_table = ""

        docs = field_docs(SpillGuardConfig)
        self.controls: dict[str, Any] = {}
        self._parse: dict[str, Any] = {}
        self._format: dict[str, Any] = {}
        for name, info in SpillGuardConfig.model_fields.items():
            doc = docs.get(name) or info.description or ""
            if name in STREAMING_ONLY_FIELDS:
                doc = f"{doc} ({STREAMING_ONLY_NOTE})" if doc else STREAMING_ONLY_NOTE
            ctl, parse, fmt = _make_control(w, name, info, getattr(self.baseline, name), doc)
            ctl.observe(self._on_change, names="value")
            self.controls[name] = ctl
            self._parse[name] = parse
            self._format[name] = fmt

        self.summary_html = w.HTML()
        self.error_html = w.HTML()
        self.confusion_html = w.HTML()
        self.changed_html = w.HTML()
        self.misclassified_html = w.HTML()
        auto = {"layout": w.Layout(width="auto")}  # a button as wide as its label
        self.reset_button = w.Button(description="Reset to baseline", icon="undo", **auto)
        self.reset_button.on_click(lambda _b: self.reset())
        self.path_text = w.Text(
            value=str(default_config_path() if save_path is None else save_path),
            description="save to",
            style={"description_width": "5em"},
            layout=w.Layout(width="30em"),
        )
        self.overwrite_box = w.Checkbox(value=False, description="overwrite", indent=False, **auto)
        self.save_button = w.Button(
            description="Save config", icon="save", button_style="primary", **auto
        )
        self.save_button.on_click(lambda _b: self._on_save())
        self.save_status = w.HTML()

        tabs = [self.changed_html, self.misclassified_html]
        titles = ["Changed vs baseline", "Misclassified"]
        self.compare_button = None
        self.compare_progress = None
        self.compare_html = None
        if self.compare_source is not None:
            self.compare_button = w.Button(description="Compare on captures", icon="play", **auto)
            self.compare_button.on_click(lambda _b: self.run_compare())
            self.compare_progress = w.IntProgress(
                value=0, min=0, max=1, description="replayed", layout=w.Layout(width="30em")
            )
            self.compare_progress.layout.visibility = "hidden"
            self.compare_html = w.HTML("<i>click “Compare on captures” to replay them</i>")
            tabs.append(
                w.VBox([w.HBox([self.compare_button, self.compare_progress]), self.compare_html])
            )
            titles.append("Captures")
        self.tabs = w.Tab(children=tabs, titles=titles)

        where = (
            "the Captures tab replays the streams"
            if self.compare_source is not None
            else "pass a capture as captures= to replay streams"
        )
        self.streaming_note = w.HTML(
            "<small><i>"
            + ", ".join(f"<code>{n}</code>" for n in STREAMING_ONLY_FIELDS)
            + f" act only on a live stream: they do not move the corpus score ({where}).</i>"
            "</small>"
        )
        controls_box = w.VBox(
            [
                w.HTML("<b>SpillGuardConfig</b>"),
                *self.controls.values(),
                self.streaming_note,
                self.reset_button,
            ]
        )
        results_box = w.VBox([self.summary_html, self.error_html, self.confusion_html])
        save_box = w.HBox([self.path_text, self.overwrite_box, self.save_button, self.save_status])
        self.widget = w.VBox([w.HBox([controls_box, results_box]), save_box, self.tabs])
        self._refresh()

    # -- state ----------------------------------------------------------------------------

    @property
    def config(self) -> SpillGuardConfig:
        """The config the controls currently describe (the last valid one)."""
        return self._config

    def set(self, **fields: Any) -> SpillGuardConfig:
        """Set controls from config values (``tuner.set(min_clause_words=3)``); re-scores once."""
        unknown = set(fields) - set(self.controls)
        if unknown:
            raise KeyError(f"not SpillGuardConfig fields: {', '.join(sorted(unknown))}")
        self._muted = True
        try:
            for name, value in fields.items():
                self.controls[name].value = self._format[name](value)
        finally:
            self._muted = False
        self._on_change(None)
        return self._config

    def reset(self) -> SpillGuardConfig:
        """Put every control back to the baseline config."""
        return self.set(**{n: getattr(self.baseline, n) for n in self.controls})

    def _read_controls(self) -> SpillGuardConfig:
        values = {n: self._parse[n](c.value) for n, c in self.controls.items()}
        return SpillGuardConfig(**values)

    def _on_change(self, _change: Any) -> None:
        if self._muted:
            return
        try:
            cfg = self._read_controls()
        except (ValidationError, ValueError, TypeError) as exc:
            self.error_html.value = (
                f"<pre style='color:#b00'>invalid config, keeping the last valid one:\n"
                f"{html.escape(str(exc))}</pre>"
            )
            return
        self.error_html.value = ""
        self._config = cfg
        self._refresh()
        self._mark_compare()

    def _refresh(self) -> None:
        cfg = self._config
        self.score = score(cfg, self.corpus)
        self.baseline_score = score(self.baseline, self.corpus)
        self.changed = changed_cases(cfg, self.corpus, self.baseline)
        s, b = self.score, self.baseline_score

        def metric(label: str, now: float, before: float) -> str:
            d = now - before
            delta = "" if abs(d) < 1e-12 else f" <small>({d:+.3f})</small>"
            return f"<tr><td>{label}</td><td><b>{now:.3f}</b>{delta}</td></tr>"

        self.summary_html.value = (
            "<table>"
            + metric("precision", s.precision, b.precision)
            + metric("recall", s.recall, b.recall)
            + metric("F1", s.f1, b.f1)
            + metric("accuracy", s.accuracy, b.accuracy)
            + metric("seam exact", s.seam_accuracy, b.seam_accuracy)
            + f"</table><small>{s.n_labelled} labelled cases"
            + (f", {s.n_unlabelled} unlabelled" if s.n_unlabelled else "")
            + "; deltas vs baseline</small>"
        )
        self.confusion_html.value = "<b>confusion</b>" + s.confusion.to_html()
        self._render_changed()
        self._render_misclassified()

    def _render_changed(self) -> None:
        df = self.changed
        if df.empty:
            self.changed_html.value = "<i>no case changes vs the baseline config</i>"
            return
        counts = df["effect"].value_counts()
        head = ", ".join(f"{k}: {v}" for k, v in counts.items())
        rows = [
            [
                _cell(r["id"]),
                _cell(r["effect"]),
                _cell("leak" if r["leak"] is True else "clean" if r["leak"] is False else None),
                _text_cell(r["text"], _seam(r["baseline_seam"])),
                _text_cell(r["text"], _seam(r["tuned_seam"])),
                _cell(r["tuned_rule"]),
            ]
            for r in df.to_dict("records")
        ]
        self.changed_html.value = f"<b>{len(df)} changed</b> ({html.escape(head)})" + _table(
            rows, ["id", "effect", "label", "baseline", "tuned", "tuned rule"]
        )

    def _render_misclassified(self) -> None:
        df = self.score.misclassified
        if df.empty:
            self.misclassified_html.value = "<i>every labelled case is right</i>"
            return
        rows = [
            [
                _cell(r["id"]),
                _cell(r["outcome"]),
                _text_cell(r["text"], _seam(r["seam"])),
                _text_cell(r["text"], _seam(r["pred_seam"])),
                _cell(r["rule"]),
                _cell(r["note"]),
            ]
            for r in df.to_dict("records")
        ]
        self.misclassified_html.value = f"<b>{len(df)} misclassified</b>" + _table(
            rows, ["id", "outcome", "label", "predicted", "rule", "note"]
        )

    # -- actions --------------------------------------------------------------------------

    def save(self, path: str | Path | None = None, *, overwrite: bool = False) -> Path:
        """Write ``LabConfig(spill=self.config)`` as JSON (readable by ``replay(config=...)``).

        **path**: the text box's path by default. The file is written whole or not at all
        (:func:`~lab.tuning_store.write_text_atomic`); an existing one raises
        :class:`FileExistsError` unless **overwrite**. Returns the path written.
        """
        target = Path(path if path is not None else self.path_text.value).expanduser()
        text = LabConfig(spill=self._config).model_dump_json(indent=2) + "\n"
        return write_text_atomic(target, text, overwrite=overwrite)

    def _on_save(self) -> None:
        try:
            p = self.save(overwrite=bool(self.overwrite_box.value))
        except FileExistsError as exc:
            self.save_status.value = (
                f"<span style='color:#b00'>{html.escape(str(exc))}: tick overwrite to replace "
                "it, or choose another path</span>"
            )
            return
        except OSError as exc:
            self.save_status.value = f"<span style='color:#b00'>{html.escape(str(exc))}</span>"
            return
        self.overwrite_box.value = False
        self.saved_path = p.resolve()
        self.save_status.value = f"saved <code>{html.escape(str(self.saved_path))}</code>"

    def run_compare(self) -> pd.DataFrame:
        """Replay the captures under baseline and tuned configs; the streams whose output changes."""
        if self.compare_source is None:
            raise ValueError("no capture path or Capture was given to compare on")
        from lab.replay import compare

        bar: Any = self.compare_progress  # set whenever compare_source is

        def advance(done: int, total: int) -> None:
            bar.max, bar.value = total, done

        bar.value, bar.layout.visibility = 0, "visible"
        try:
            df = compare(self.compare_source, self.baseline, self._config, progress=advance)
        finally:
            bar.layout.visibility = "hidden"
        self.compare_result = df
        self.compare_config = self._config
        if self.compare_html is not None:
            if df.empty:
                self._compare_table = "<i>no stream output changes</i>"
            else:
                rows = [
                    [_cell(r["stream_id"]), _cell(r["serving_provider"]), _cell(r["field"]),
                     _text_cell(str(r["a"]), None), _text_cell(str(r["b"]), None)]
                    for r in df.to_dict("records")
                ]  # fmt: skip
                n = df["stream_id"].nunique()
                self._compare_table = (
                    f"<b>{n} stream{'' if n == 1 else 's'} changed ({len(df)} fields)</b>"
                    + _table(rows, ["stream", "backend", "field", "baseline", "tuned"])
                )
            self._mark_compare()
        return df

    @property
    def compare_stale(self) -> bool:
        """True when the settings changed after the last Captures comparison."""
        return self.compare_config is not None and self.compare_config != self._config

    def _mark_compare(self) -> None:
        """Show the last comparison, marked stale when the settings changed since."""
        if self.compare_html is None or self.compare_config is None:
            return
        stale = (
            "<div style='background:#fff4e5;border-left:4px solid #e8a33d;padding:4px 8px'>"
            "<b>stale:</b> the settings changed after this comparison; click “Compare on "
            "captures” to replay with the current ones</div>"
            if self.compare_stale
            else ""
        )
        self.compare_html.value = stale + self._compare_table

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)

    def __repr__(self) -> str:
        return f"SpillTuner({len(self.corpus)} cases; {self.score})"
