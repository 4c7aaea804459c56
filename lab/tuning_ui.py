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
from lab.numbers import format_rate
from lab.tuning import (
    CORPUS_COLUMNS,
    STREAMING_ONLY_FIELDS,
    STREAMING_ONLY_NOTE,
    CorpusError,
    as_corpus,
    changed_cases,
    corpus_from_captures,
    is_missing,
    score,
    seam_candidates,
)
from lab.tuning_search import Suggestion, score_table, suggest_settings
from lab.tuning_store import (
    default_config_path,
    default_user_corpus_path,
    label_row,
    load_user_corpus,
    save_label,
    write_text_atomic,
)
from lab.widgetview import widget_bundle

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


def _vis(s: str) -> str:
    return html.escape(s.replace("\n", "⏎").replace("\t", "⇥"))


def _marked(text: str, seam: int | None, limit: int) -> str:
    """Escaped text with a neutral ┃ at **seam** (a suggestion, not a cut)."""
    if len(text) > limit:
        text = text[:limit] + "…"
        if seam is not None and seam > limit:
            seam = None
    if seam is None:
        return f"<code>{_vis(text)}</code>"
    return f"<code>{_vis(text[:seam])}<b style='color:#888'>┃</b>{_vis(text[seam:])}</code>"


def _empty_corpus() -> pd.DataFrame:
    return as_corpus(pd.DataFrame(columns=list(CORPUS_COLUMNS)))


def _rate(value: float, low: float | None = None, high: float | None = None) -> str:
    """A precision or recall as every view writes a rate (:func:`lab.numbers.format_rate`:
    ``64.3 % (49.2–77.0 %)``), a narrow column breaking it only before the interval; a rate
    with no evidence is a dash."""
    if is_missing(value) or value != value:
        return _cell(None)
    text = html.escape(format_rate(value, low, high)).replace(" %", "\u00a0%")
    rate, sep, interval = text.partition(" (")
    if not sep:
        return rate
    return f"{rate} <span style='white-space: nowrap'>({interval}</span>"


def _f1(value: float) -> str:
    """An F1 score to 3 decimals; none (no leak, none predicted) is a dash."""
    if is_missing(value) or value != value:
        return _cell(None)
    return f"{value:.3f}"


_SUGGEST_ROWS = {
    "current": "current",
    "best": "best found (on the labels it was chosen on)",
    "held_out": "the search, held out",
}


def _suggestion_html(sug: Suggestion, on: str) -> str:
    """The decision in one sentence, then current, best found and held-out precision /
    recall with intervals; escaped."""
    rows = [
        [
            html.escape(_SUGGEST_ROWS.get(str(name), str(name))),
            _rate(r["precision"], r["precision_low"], r["precision_high"]),
            _rate(r["recall"], r["recall_low"], r["recall_high"]),
            _f1(r["f1"]),
            _f1(r["cv_f1"]),
        ]
        for name, r in sug.table.iterrows()
    ]
    changes = "".join(
        f"<li><code>{html.escape(n)}</code>: {html.escape(repr(a))} → "
        f"<b>{html.escape(repr(b))}</b></li>"
        for n, (a, b) in sug.changes.items()
    )
    how = (
        f"{sug.k}-fold nested stratified cross-validation" if sug.k else "no cross-validation"
    ) + (
        f" over {sug.n_leak} leak and {sug.n_clean} clean seams ({html.escape(on)}); "
        f"{sug.n_configs} configs scored ({sug.method} of {sug.space_size})"
    )
    notes = "".join(
        f"<div style='background:#fff4e5;border-left:4px solid #e8a33d;padding:4px 8px'>"
        f"{html.escape(n)}</div>"
        for n in sug.notes
    )
    return (
        notes
        + f"<p><b>{html.escape(sug.verdict)}</b></p>"
        + (f"<b>proposed changes</b><ul>{changes}</ul>" if changes else "")
        + _table(rows, ["settings", "precision", "recall", "F1", "mean F1 over folds"])
        + f"<small>{how}. <i>The search, held out</i>: for each outer fold, the settings "
        "that did best over inner folds of the other folds, scored on that fold (what to "
        "expect on seams not labelled yet); a change is proposed only when its F1 beats the "
        f"current settings' F1 on the same folds by more than {sug.min_gain:g}.</small>"
    )


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

    **Label captures** (a tab): the candidate seams of the captures
    (:func:`~lab.tuning.seam_candidates`, in ``tuner.candidates``) one at a time, with the
    guard's decision and rule, the reasoning before the seam and the content after it
    (escaped), and buttons *leak* (at the seam in the box, prefilled with the guard's cut or
    the suggested seam) / *no leak* / *skip*. Labels go to **user_corpus** (default
    :func:`~lab.tuning_store.default_user_corpus_path`, outside the repository) with
    :func:`~lab.tuning_store.save_label`; a bad line in that file is shown with its number
    and stops labelling until it is fixed. The scores under the confusion matrix put the
    bundled corpus and the user's side by side, with Wilson intervals.

    **Suggest settings** (a tab): :func:`~lab.tuning_search.suggest_settings` on the chosen
    labels (bundled, yours or both) from the current settings, with a progress bar and a
    time budget (**suggest_budget_s**; ``tuner.suggest_options`` holds its keyword
    arguments), then current vs proposed precision / recall with intervals; "Use proposed
    settings" sets the controls.

    Test without a browser: set ``tuner.controls[name].value`` and read ``tuner.score``;
    ``tuner.save_button.click()`` saves, ``tuner.leak_button.click()`` labels, and so on.
    """

    def __init__(
        self,
        corpus: pd.DataFrame | str | Path | None = None,
        captures: Any = None,
        *,
        baseline: SpillGuardConfig | None = None,
        save_path: str | Path | None = None,
        results: Any = None,
        user_corpus: str | Path | None = None,
        suggest_budget_s: float | None = 20.0,
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
            self.candidates = seam_candidates(results, self.baseline)
        else:
            self.candidates = seam_candidates([])
        self.corpus = frame
        self.user_corpus_path = Path(
            default_user_corpus_path() if user_corpus is None else user_corpus
        ).expanduser()
        self.user_corpus = _empty_corpus()
        self.user_corpus_error = ""
        self.position = 0
        """Index into ``candidates`` of the seam shown for labelling."""
        self.skipped: set[str] = set()
        self.suggest_options: dict[str, Any] = {"time_budget_s": suggest_budget_s}
        """Keyword arguments "Suggest settings" passes to
        :func:`~lab.tuning_search.suggest_settings` (``space``, ``k``, ``max_configs``, ...)."""
        self.suggestion: Suggestion | None = None
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
        self.scores_html = w.HTML()
        self._build_label_pane(w, auto)
        self._build_suggest_pane(w, auto)
        shown = tuple(self.tabs.titles)  # a new child gets an empty title: keep these
        self.tabs.children = (*self.tabs.children, self.label_box, self.suggest_box)
        self.tabs.titles = (*shown, "Label captures", "Suggest settings")
        self._load_user_corpus()
        done = set(self.user_corpus["id"])
        self.position = next(
            (i for i, c in enumerate(self.candidates["id"]) if c not in done), len(self.candidates)
        )  # a labelling session goes on where the last one stopped
        self._render_label()
        results_box = w.VBox(
            [self.summary_html, self.error_html, self.confusion_html, self.scores_html]
        )
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
        self._render_scores()
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

    # -- labelling the seams of the captures ---------------------------------------------

    def _build_label_pane(self, w: Any, auto: dict[str, Any]) -> None:
        self.label_html = w.HTML()
        self.seam_box = w.BoundedIntText(
            value=0, min=0, max=0, description="seam", layout=w.Layout(width="12em")
        )
        self.leak_button = w.Button(description="leak", button_style="danger", **auto)
        self.clean_button = w.Button(description="no leak", button_style="success", **auto)
        self.skip_button = w.Button(description="skip", **auto)
        self.leak_button.on_click(lambda _b: self.label(True))
        self.clean_button.on_click(lambda _b: self.label(False))
        self.skip_button.on_click(lambda _b: self.skip())
        self.label_status = w.HTML()
        self.label_box = w.VBox(
            [
                self.label_html,
                w.HBox([self.seam_box, self.leak_button, self.clean_button, self.skip_button]),
                self.label_status,
            ]
        )

    def _load_user_corpus(self) -> None:
        """Read the user corpus; a bad line stops labelling and is shown with its number."""
        try:
            self.user_corpus = load_user_corpus(self.user_corpus_path)
            self.user_corpus_error = ""
        except CorpusError as exc:
            self.user_corpus = _empty_corpus()
            self.user_corpus_error = str(exc)
        self._render_label()

    @property
    def current_candidate(self) -> dict[str, Any] | None:
        """The candidate seam shown for labelling (a row of ``candidates``), or None."""
        if self.position >= len(self.candidates):
            return None
        return dict(self.candidates.iloc[self.position])

    def label(self, leak: bool, seam: int | None = None) -> Path | None:
        """Label the shown seam (**seam**: the seam box's value for a leak) and show the next.

        The row goes to the user corpus (:func:`~lab.tuning_store.save_label`); returns the
        file written, or None when nothing was (the reason is in ``label_status``).
        """
        cand = self.current_candidate
        if cand is None or self.user_corpus_error:
            return None
        if leak and seam is None:
            seam = int(self.seam_box.value)
        try:
            path = save_label(label_row(cand, leak, seam), self.user_corpus_path)
        except (CorpusError, OSError) as exc:
            self.label_status.value = f"<span style='color:#b00'>{html.escape(str(exc))}</span>"
            return None
        self.label_status.value = (
            f"{html.escape(str(cand['id']))}: {'leak' if leak else 'no leak'}, saved to "
            f"<code>{html.escape(str(path))}</code>"
        )
        self.position += 1
        self._load_user_corpus()
        self._render_scores()
        return path

    def show(self, index: int) -> None:
        """Show candidate seam **index** (0-based) for labelling, e.g. to label one again."""
        self.position = max(0, min(index, len(self.candidates)))
        self._render_label()

    def skip(self) -> None:
        """Leave the shown seam unlabelled and show the next."""
        cand = self.current_candidate
        if cand is None:
            return
        self.skipped.add(str(cand["id"]))
        self.label_status.value = f"{html.escape(str(cand['id']))}: skipped"
        self.position += 1
        self._render_label()

    def _render_label(self) -> None:
        n = len(self.candidates)
        buttons = (self.leak_button, self.clean_button, self.skip_button)
        if self.user_corpus_error:
            self.label_html.value = (
                "<b style='color:#b00'>the user corpus has a bad line; fix or move it to "
                f"label more:</b><pre>{html.escape(self.user_corpus_error)}</pre>"
            )
            for b in buttons:
                b.disabled = True
            return
        cand = self.current_candidate
        if cand is None:
            self.label_html.value = (
                "<i>no candidate seams: pass captures= to label their seams</i>"
                if n == 0
                else f"<i>all {n} candidate seams seen ({len(self.skipped)} skipped)</i>"
            )
            for b in buttons:
                b.disabled = True
            return
        for b in buttons:
            b.disabled = False
        text = str(cand["text"])
        suggested = _seam(cand["suggested_seam"])
        self.seam_box.max = max(len(text), 1)
        self.seam_box.value = suggested if suggested is not None else 0
        labels = self.user_corpus.set_index("id")["leak"] if len(self.user_corpus) else None
        before = ""
        if labels is not None and cand["id"] in labels.index:
            before = f" — labelled before: {'leak' if labels[cand['id']] else 'no leak'}"
        meta = [
            ("stream", cand["stream_id"]),
            ("backend", cand["backend"]),
            ("model", cand["model"]),
            ("guard", f"{cand['decision']} ({cand['rule']})"),
        ]
        self.label_html.value = (
            f"<b>seam {self.position + 1} of {n}</b>{html.escape(before)}<br>"
            + " · ".join(f"{k} <code>{_cell(v)}</code>" for k, v in meta)
            + "<br><small>reasoning before it:</small> "
            + f"<code style='color:#777'>…{_vis(str(cand['reasoning_tail'])[-160:])}</code>"
            + "<br><small>first visible content ("
            + (
                "struck through: what the guard moved to reasoning)</small> "
                + _text_cell(text, _seam(cand["seam"]), 400)
                if _seam(cand["seam"]) is not None
                else "┃: the suggested seam, used when you say leak)</small> "
                + _marked(text, suggested, 400)
            )
        )

    def _render_scores(self) -> None:
        table = score_table(self._config, {"bundled": self.corpus, "yours": self.user_corpus})
        corpora = list(table.itertuples())
        rows = [  # one column per corpus: the panel's right-hand column is narrow
            ["labelled", *(str(int(r.n)) for r in corpora)],
            [
                "precision",
                *(_rate(r.precision, r.precision_low, r.precision_high) for r in corpora),
            ],
            ["recall", *(_rate(r.recall, r.recall_low, r.recall_high) for r in corpora)],
            ["F1", *(_f1(r.f1) for r in corpora)],
        ]
        self.scores_table = table
        self.scores_html.value = (
            "<b>both corpora</b> <small>(95 % Wilson intervals)</small>"
            + "<div style='overflow-x: auto'>"
            + _table(rows, ["", *(str(name) for name in table.index)])
            + "</div>"
            + f"<small>yours: <code>{html.escape(str(self.user_corpus_path))}</code></small>"
        )

    # -- suggesting settings -------------------------------------------------------------

    def _build_suggest_pane(self, w: Any, auto: dict[str, Any]) -> None:
        self.suggest_on = w.Dropdown(
            options=["bundled + yours", "yours", "bundled"],
            value="bundled + yours",
            description="labels",
            layout=w.Layout(width="18em"),
        )
        self.suggest_button = w.Button(description="Suggest settings", icon="search", **auto)
        self.suggest_button.on_click(lambda _b: self.run_suggest())
        self.suggest_progress = w.IntProgress(
            value=0, min=0, max=1, description="scored", layout=w.Layout(width="30em")
        )
        self.suggest_progress.layout.visibility = "hidden"
        self.apply_button = w.Button(description="Use proposed settings", disabled=True, **auto)
        self.apply_button.on_click(lambda _b: self.apply_suggestion())
        self.suggest_html = w.HTML(
            "<i>“Suggest settings” searches the heuristics with cross-validation over the "
            "labelled seams</i>"
        )
        self.suggest_box = w.VBox(
            [
                w.HBox([self.suggest_on, self.suggest_button, self.suggest_progress]),
                self.suggest_html,
                self.apply_button,
            ]
        )

    def suggest_corpus(self, which: str | None = None) -> pd.DataFrame:
        """The labelled seams a suggestion searches on: ``bundled``, ``yours`` or both."""
        which = which or self.suggest_on.value
        bundled = self.corpus[self.corpus["leak"].notna()]
        yours = self.user_corpus.assign(id="yours:" + self.user_corpus["id"].astype(str))
        parts = {"bundled": [bundled], "yours": [yours], "bundled + yours": [bundled, yours]}
        frames = [f[list(CORPUS_COLUMNS)] for f in parts[which] if len(f)]
        if not frames:
            return _empty_corpus()
        return as_corpus(pd.concat(frames, ignore_index=True))

    def run_suggest(self, **kwargs: Any) -> Suggestion | None:
        """Search settings on the chosen labels from the current config; show current vs
        proposed. **kwargs** go to :func:`~lab.tuning_search.suggest_settings`."""
        corpus = self.suggest_corpus()
        if not len(corpus):
            self.suggest_html.value = "<i>no labelled seams to search on</i>"
            return None
        bar = self.suggest_progress

        def advance(done: int, total: int) -> None:
            bar.max, bar.value = total, done

        bar.value, bar.layout.visibility = 0, "visible"
        kwargs = {**self.suggest_options, **kwargs}
        try:
            sug = suggest_settings(corpus, self._config, progress=advance, **kwargs)
        finally:
            bar.layout.visibility = "hidden"
        self.suggestion = sug
        self.apply_button.disabled = not sug.changes
        self.suggest_html.value = _suggestion_html(sug, self.suggest_on.value)
        return sug

    def apply_suggestion(self) -> SpillGuardConfig:
        """Set the controls to the last suggestion's proposed config."""
        if self.suggestion is None:
            raise ValueError("no suggestion yet: run “Suggest settings” first")
        return self.set(**{n: b for n, (_a, b) in self.suggestion.changes.items()})

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

    def _repr_mimebundle_(self, **_kwargs: Any) -> dict[str, Any]:
        """The panel, with its current scores as the static copy (a viewer without widgets
        sees where the settings stand, not the controls)."""
        static = (
            "<p><i>The tuner's controls need a live kernel; its scores at the settings it "
            "was left at:</i></p>"
            + "".join(
                f"<div>{part.value}</div>"
                for part in (self.summary_html, self.confusion_html, self.scores_html)
            )
        )
        what = "The spill-guard tuner (its settings, scores, labelling and suggestions)"
        return widget_bundle(self.widget, what, static)

    def __repr__(self) -> str:
        return f"SpillTuner({len(self.corpus)} cases; {self.score})"
