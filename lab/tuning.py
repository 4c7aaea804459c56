"""Tune the spill-guard heuristics against a labelled corpus of first-content snippets.

The spill guard (:mod:`lab.guards.spill`) decides, for the first visible content after
reasoning, whether it begins with a reasoning tail a backend glued onto the answer
(``"must do.Hello!"``). This module measures that decision against human labels:

- :func:`load_corpus` reads the bundled labelled corpus (``lab/data/seam_corpus.jsonl``) or
  any JSONL file of the same shape, validating every line;
- :func:`corpus_from_captures` turns replayed streams into unlabelled cases, so real first
  contents sit next to the hand-written ones;
- :func:`score` (pure) predicts every case with :func:`~lab.guards.spill.find_spill_seam` and
  reports precision, recall, F1, accuracy, a confusion matrix and the seam exact-match rate;
- :func:`changed_cases` lists the cases a config decides differently from the reference;
- :func:`sweep` and :func:`ablation` score a family of configs (for plots);
- :class:`SpillTuner` is a thin ipywidgets panel over all of that: one control per
  :class:`~lab.guards.spill.SpillGuardConfig` field, live scores, and a button that saves
  the tuned config as a :class:`~lab.config.LabConfig` JSON file that ``replay(...,
  config=path)`` and ``lab replay --config`` read.

Labels are what a human reading the text would say, not what the reference heuristic says;
the interesting rows are where the two disagree.

>>> from lab.tuning import load_corpus, score
>>> s = score(None, load_corpus())
>>> s.prediction("seed-must-do")
8

ipywidgets is imported only when a :class:`SpillTuner` is built.
"""

from __future__ import annotations

import ast
import html
import inspect
import json
import textwrap
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ValidationError

from lab.exceptions import LabError
from lab.guards.spill import SpillGuardConfig, evaluate_spill, find_spill_seam

__all__ = [
    "CORPUS_COLUMNS",
    "STREAMING_ONLY_FIELDS",
    "CorpusError",
    "Score",
    "SpillTuner",
    "ablation",
    "changed_cases",
    "corpus_from_captures",
    "field_docs",
    "load_corpus",
    "mark_seam",
    "predict",
    "score",
    "sweep",
]

CORPUS_COLUMNS = ("id", "text", "leak", "seam", "category", "note")
"""The columns every corpus has, in order (extra columns are kept after them)."""

STREAMING_ONLY_FIELDS = ("hold_limit_chars", "require_reasoning_first")
"""SpillGuardConfig fields that never move a corpus score; they act only on a live stream.

Each corpus case is one complete first content after reasoning: ``hold_limit_chars`` only
decides how long undecided content is held before it is emitted (held or emitted, no seam
either way), and ``require_reasoning_first`` is always met. Replaying captures (the tuner's
Captures tab, :func:`lab.replay.compare`) is where they show.
"""
_STREAMING_ONLY_NOTE = "streaming only: does not move the corpus score (replay captures to see it)"

_REFERENCE = SpillGuardConfig()
_BUNDLED = "seam_corpus.jsonl"


class CorpusError(ValueError, LabError):
    """A corpus file or frame is malformed; the message names the file and line."""


# -- corpus -------------------------------------------------------------------------------


def _check_row(obj: Any) -> str | None:
    """Why ``obj`` is not a valid corpus row, or None."""
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    missing = [k for k in ("id", "text", "leak") if k not in obj]
    if missing:
        return "missing field(s) " + ", ".join(repr(k) for k in missing)
    cid, text, leak = obj["id"], obj["text"], obj["leak"]
    seam = obj.get("seam")
    if not isinstance(cid, str) or not cid:
        return "'id' must be a non-empty string"
    if not isinstance(text, str):
        return "'text' must be a string"
    if leak is not None and not isinstance(leak, bool):
        return f"'leak' must be true, false or null, got {leak!r}"
    if seam is not None and (isinstance(seam, bool) or not isinstance(seam, int)):
        return f"'seam' must be an integer or null, got {seam!r}"
    if leak is True:
        if seam is None:
            return "'seam' is required when 'leak' is true (offset where the answer starts)"
        if not 0 < seam <= len(text):
            return f"'seam' {seam} is outside the text (1..{len(text)})"
        if not text[:seam].strip():
            return f"'seam' {seam} leaves no leaked text before it"
    elif seam is not None:
        return "'seam' must be null unless 'leak' is true"
    for key in ("category", "note"):
        if key in obj and not isinstance(obj[key], str):
            return f"'{key}' must be a string"
    return None


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows -> a corpus DataFrame with the canonical columns and nullable dtypes."""
    extra: list[str] = []
    for r in rows:
        extra.extend(k for k in r if k not in CORPUS_COLUMNS and k not in extra)
    data = {
        "id": [r["id"] for r in rows],
        "text": [r["text"] for r in rows],
        "leak": pd.array([r["leak"] for r in rows], dtype="boolean"),
        "seam": pd.array([r.get("seam") for r in rows], dtype="Int64"),
        "category": [r.get("category") or "" for r in rows],
        "note": [r.get("note") or "" for r in rows],
    }
    for k in extra:
        data[k] = pd.array([r.get(k) for r in rows])
    return pd.DataFrame(data, columns=[*CORPUS_COLUMNS, *extra])


def load_corpus(path: str | Path | None = None) -> pd.DataFrame:
    """Read a labelled seam corpus (JSONL, one case per line); the bundled one by default.

    **path**: a ``.jsonl`` file whose lines are objects with ``id`` (unique string),
    ``text`` (the first visible content after reasoning), ``leak`` (true = the text begins
    with leaked reasoning; null = unlabelled), ``seam`` (offset where the answer starts when
    ``leak``, else null), and optional ``category`` and ``note``. Blank lines are skipped;
    extra keys become extra columns.

    Returns a DataFrame with the columns of :data:`CORPUS_COLUMNS` (``leak`` is a nullable
    boolean, ``seam`` a nullable integer). Raises :class:`CorpusError` naming the file and
    line of the first bad row.
    """
    if path is None:
        ref = resources.files("lab").joinpath("data", _BUNDLED)
        name, raw = f"lab/data/{_BUNDLED}", ref.read_text(encoding="utf-8")
    else:
        p = Path(path)
        name = str(p)
        try:
            raw = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise CorpusError(f"{name}: corpus file does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CorpusError(f"{name}: cannot read the corpus ({exc})") from None
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for lineno, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"{name}:{lineno}: not valid JSON ({exc.msg})") from None
        problem = _check_row(obj)
        if problem is not None:
            raise CorpusError(f"{name}:{lineno}: {problem}")
        if obj["id"] in seen:
            raise CorpusError(
                f"{name}:{lineno}: duplicate id {obj['id']!r} (first on line {seen[obj['id']]})"
            )
        seen[obj["id"]] = lineno
        rows.append(obj)
    if not rows:
        raise CorpusError(f"{name}: the corpus has no cases")
    return _frame(rows)


def _as_corpus(corpus: pd.DataFrame | str | Path | None) -> pd.DataFrame:
    """A corpus given as None (bundled), a path or a DataFrame; frames are checked row by row."""
    if corpus is None or isinstance(corpus, (str, Path)):
        return load_corpus(corpus)
    if not isinstance(corpus, pd.DataFrame):
        raise CorpusError(f"a corpus is a DataFrame or a path, not {type(corpus).__name__}")
    missing = [c for c in ("id", "text", "leak") if c not in corpus.columns]
    if missing:
        raise CorpusError("corpus frame lacks column(s) " + ", ".join(missing))
    rows = []
    for i, rec in enumerate(corpus.to_dict("records")):
        rec = {k: (None if _isna(v) else v) for k, v in rec.items()}
        if rec.get("leak") is not None:
            rec["leak"] = bool(rec["leak"])
        if rec.get("seam") is not None:
            rec["seam"] = int(rec["seam"])
        problem = _check_row(rec)
        if problem is not None:
            raise CorpusError(f"corpus row {i} (id {rec.get('id')!r}): {problem}")
        rows.append(rec)
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        dup = next(x for x in ids if ids.count(x) > 1)
        raise CorpusError(f"corpus has duplicate id {dup!r}")
    return _frame(rows)


def _isna(v: Any) -> bool:
    try:
        return v is None or v is pd.NA or bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def corpus_from_captures(results: Any, *, max_chars: int | None = 2000) -> pd.DataFrame:
    """Unlabelled corpus rows from real streams: their first visible content after reasoning.

    **results**: :class:`~lab.result.StreamResult` objects, or anything
    :func:`lab.replay.replay` accepts (a capture path or Capture), replayed with the
    reference config. A stream qualifies when reasoning arrived before (or with) its first
    visible content, i.e. when the spill guard inspected it. The text is the content as the
    stream sent it: when the spill guard moved a fragment, its :class:`~lab.model.GuardEvent`
    gives the fragment and the seam, and the fragment is put back in front of the visible
    text (leading whitespace the guard dropped comes back as spaces).

    Returns the corpus columns (``leak`` and ``seam`` null, ``category`` ``"capture"``) plus
    ``stream_id``, ``serving_provider`` and ``run_seam`` (the seam the guard applied in that
    run, or null). **max_chars** caps each text (None: no cap).
    """
    if isinstance(results, (str, Path)) or hasattr(results, "requests"):
        from lab.replay import replay

        results = replay(results)
    rows: list[dict[str, Any]] = []
    ids: dict[str, int] = {}
    for r in results:
        row = _first_content(r)
        if row is None:
            continue
        text, run_seam = row
        if max_chars is not None:
            text = text[:max_chars]
        sid = str(r.stream_id)
        n = ids.get(sid, 0) + 1
        ids[sid] = n
        served = r.serving_provider or r.provider
        if run_seam is None:
            note = f"{served}: the guard left it untouched"
        else:
            note = f"{served}: the guard moved {text[:run_seam].strip()!r}"
        rows.append(
            {
                "id": sid if n == 1 else f"{sid}#{n}",
                "text": text,
                "leak": None,
                "seam": None,
                "category": "capture",
                "note": note,
                "stream_id": sid,
                "serving_provider": r.serving_provider,
                "run_seam": run_seam,
            }
        )
    if not rows:
        frame = _frame([])
        for col in ("stream_id", "serving_provider", "run_seam"):
            frame[col] = pd.Series([], dtype=object)
        return frame
    frame = _frame(rows)
    frame["run_seam"] = frame["run_seam"].astype("Int64")
    return frame


def _first_content(r: Any) -> tuple[str, int | None] | None:
    """(first visible content as sent, seam the guard applied) for one StreamResult, or None."""
    chunks = list(r.chunks)
    first = next((i for i, c in enumerate(chunks) if c.content), None)
    if first is None:
        return None
    attempt = None
    if first < len(r.origins):
        attempt = r.origins[first].attempt
    spills = [
        e
        for e in r.guard_events
        if e.guard == "spill_guard" and (attempt is None or e.attempt == attempt)
    ]
    visible = "".join(c.content or "" for c in chunks[first:] if c.type == "text")
    if spills:
        ev = spills[-1]
        lead = " " * max(0, ev.offset)
        leaked = lead + ev.moved
        return leaked + visible, len(leaked)
    if not any(c.thoughts for c in chunks[: first + 1]):
        return None
    if not visible.strip():
        return None
    return visible, None


# -- scoring (pure) ----------------------------------------------------------------------


def predict(text: str, config: SpillGuardConfig | None = None) -> tuple[int | None, str]:
    """(seam, rule) for one text: :func:`find_spill_seam` plus the rule that decided it.

    Unlike ``find_spill_seam``, ``config.enabled = False`` predicts no seam (rule
    ``"disabled"``), as the streaming guard would. The :data:`STREAMING_ONLY_FIELDS` do not
    change the seam: the text is complete, and it is first content after reasoning.
    """
    cfg = config or _REFERENCE
    if not cfg.enabled:
        return None, "disabled"
    seam = find_spill_seam(text, cfg)
    return seam, evaluate_spill(text, cfg).rule


def _seam_ok(text: str, label: int, pred: int | None) -> bool:
    """Does the predicted seam split where the label does (whitespace at the seam ignored)?"""
    if pred is None:
        return False
    lo, hi = sorted((pred, label))
    return not text[lo:hi].strip()


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


@dataclass(frozen=True)
class Score:
    """How one config does on one corpus. Ratios are 0.0 when undefined (no denominator).

    ``cases`` has one row per corpus case: the corpus columns plus ``pred_leak``,
    ``pred_seam``, ``rule`` (what decided), ``outcome`` (TP / FP / FN / TN / unlabelled),
    ``seam_ok`` (true leaks only: the predicted seam matches the label, whitespace at the
    seam ignored) and ``correct`` (decision right and, for a leak, seam right).
    """

    config: SpillGuardConfig
    precision: float
    recall: float
    f1: float
    accuracy: float
    """Decision accuracy (leak or not) over labelled cases."""
    seam_accuracy: float
    """Of the true leaks, the share whose predicted seam matches the label."""
    tp: int
    fp: int
    fn: int
    tn: int
    n_unlabelled: int
    confusion: pd.DataFrame = field(repr=False)
    """2x2 counts: rows ``label`` (leak, clean), columns ``predicted`` (leak, clean)."""
    cases: pd.DataFrame = field(repr=False)

    @property
    def n_labelled(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def misclassified(self) -> pd.DataFrame:
        """Labelled cases the config gets wrong (decision or seam)."""
        return self.cases[self.cases["correct"].eq(False).fillna(False)]

    def prediction(self, case_id: str) -> int | None:
        """The predicted seam of one case (None = emitted untouched)."""
        hit = self.cases.loc[self.cases["id"] == case_id, "pred_seam"]
        if hit.empty:
            raise KeyError(case_id)
        v = hit.iloc[0]
        return None if _isna(v) else int(v)

    def summary(self) -> dict[str, float | int]:
        """The headline numbers as a flat dict (one row of :func:`sweep`)."""
        return {
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "accuracy": self.accuracy,
            "seam_accuracy": self.seam_accuracy,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "tn": self.tn,
            "n_labelled": self.n_labelled,
            "n_unlabelled": self.n_unlabelled,
        }

    def __str__(self) -> str:
        return (
            f"precision {self.precision:.3f}  recall {self.recall:.3f}  f1 {self.f1:.3f}  "
            f"accuracy {self.accuracy:.3f}  seam exact {self.seam_accuracy:.3f}  "
            f"(TP {self.tp}, FP {self.fp}, FN {self.fn}, TN {self.tn}"
            + (f", {self.n_unlabelled} unlabelled)" if self.n_unlabelled else ")")
        )


def score(
    config: SpillGuardConfig | None = None, corpus: pd.DataFrame | str | Path | None = None
) -> Score:
    """Predict every case of **corpus** with **config** (None = reference) and score it.

    Pure: no I/O once the corpus is loaded (None loads the bundled corpus). Unlabelled cases
    are predicted and listed but not counted. A case is a positive when a seam is predicted.

    >>> s = score(None, load_corpus())
    >>> s.prediction("seed-wait-spaced") is None
    True
    """
    cfg = config or _REFERENCE
    frame = _as_corpus(corpus)
    preds = [predict(t, cfg) for t in frame["text"]]
    seams = [p[0] for p in preds]
    outcome: list[str] = []
    seam_ok: list[bool | None] = []
    correct: list[bool | None] = []
    tp = fp = fn = tn = unl = seam_hits = 0
    for text, leak, label, pred in zip(
        frame["text"], frame["leak"], frame["seam"], seams, strict=True
    ):
        if _isna(leak):
            outcome.append("unlabelled")
            seam_ok.append(None)
            correct.append(None)
            unl += 1
            continue
        hit = pred is not None
        if leak:
            ok = _seam_ok(text, int(label), pred)
            seam_hits += ok
            seam_ok.append(ok)
            correct.append(ok)
            if hit:
                tp += 1
                outcome.append("TP")
            else:
                fn += 1
                outcome.append("FN")
        else:
            seam_ok.append(None)
            correct.append(not hit)
            if hit:
                fp += 1
                outcome.append("FP")
            else:
                tn += 1
                outcome.append("TN")
    cases = frame.copy()
    cases.insert(4, "pred_leak", pd.array([s is not None for s in seams], dtype="boolean"))
    cases.insert(5, "pred_seam", pd.array(seams, dtype="Int64"))
    cases.insert(6, "rule", [p[1] for p in preds])
    cases.insert(7, "outcome", outcome)
    cases.insert(8, "seam_ok", pd.array(seam_ok, dtype="boolean"))
    cases.insert(9, "correct", pd.array(correct, dtype="boolean"))
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, tp + fn)
    f1 = _ratio(2 * precision * recall, precision + recall) if precision + recall else 0.0
    axis = ["leak", "clean"]
    confusion = pd.DataFrame(
        [[tp, fn], [fp, tn]],
        index=pd.Index(axis, name="label"),
        columns=pd.Index(axis, name="predicted"),
    )
    return Score(
        config=cfg,
        precision=precision,
        recall=recall,
        f1=f1,
        accuracy=_ratio(tp + tn, tp + fp + fn + tn),
        seam_accuracy=_ratio(seam_hits, tp + fn),
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
        n_unlabelled=unl,
        confusion=confusion,
        cases=cases,
    )


CHANGED_COLUMNS = (
    "id",
    "category",
    "text",
    "leak",
    "seam",
    "baseline_seam",
    "tuned_seam",
    "baseline_rule",
    "tuned_rule",
    "effect",
)


def changed_cases(
    config: SpillGuardConfig | None,
    corpus: pd.DataFrame | str | Path | None = None,
    baseline: SpillGuardConfig | None = None,
) -> pd.DataFrame:
    """Cases whose predicted seam differs between **config** and **baseline** (reference).

    ``effect`` says what the change does: ``fixed`` (wrong under the baseline, right now),
    ``broken`` (right before, wrong now), ``changed`` (right or wrong both times, different
    seam) or ``unlabelled``. Columns: see ``CHANGED_COLUMNS``.
    """
    frame = _as_corpus(corpus)
    a = score(baseline or _REFERENCE, frame).cases
    b = score(config or _REFERENCE, frame).cases
    rows = []
    for (_, ra), (_, rb) in zip(a.iterrows(), b.iterrows(), strict=True):
        sa = None if _isna(ra["pred_seam"]) else int(ra["pred_seam"])
        sb = None if _isna(rb["pred_seam"]) else int(rb["pred_seam"])
        if sa == sb:
            continue
        if _isna(ra["correct"]):
            effect = "unlabelled"
        elif bool(ra["correct"]) == bool(rb["correct"]):
            effect = "changed"
        else:
            effect = "fixed" if rb["correct"] else "broken"
        rows.append(
            {
                "id": ra["id"],
                "category": ra["category"],
                "text": ra["text"],
                "leak": ra["leak"],
                "seam": ra["seam"],
                "baseline_seam": sa,
                "tuned_seam": sb,
                "baseline_rule": ra["rule"],
                "tuned_rule": rb["rule"],
                "effect": effect,
            }
        )
    out = pd.DataFrame(rows, columns=list(CHANGED_COLUMNS))
    for col in ("seam", "baseline_seam", "tuned_seam"):
        out[col] = pd.array(out[col].tolist(), dtype="Int64")
    out["leak"] = pd.array(out["leak"].tolist(), dtype="boolean")
    return out


def sweep(
    field_name: str,
    values: Iterable[Any],
    corpus: pd.DataFrame | str | Path | None = None,
    base: SpillGuardConfig | None = None,
) -> pd.DataFrame:
    """Score **base** with one field set to each of **values**; one row per value."""
    frame = _as_corpus(corpus)
    cfg = base or _REFERENCE
    rows = []
    for v in values:
        s = score(cfg.model_copy(update={field_name: v}), frame)
        rows.append({field_name: v, **s.summary()})
    return pd.DataFrame(rows)


def ablation(
    corpus: pd.DataFrame | str | Path | None = None, base: SpillGuardConfig | None = None
) -> pd.DataFrame:
    """Score **base** and, for every boolean rule field, **base** with that field flipped.

    ``enabled`` (off scores nothing) and the :data:`STREAMING_ONLY_FIELDS` (they never change
    a corpus score) are left out. One row per variant: ``variant`` (``"reference"`` or
    ``"<field>=<value>"``) and the :meth:`Score.summary` numbers.
    """
    frame = _as_corpus(corpus)
    cfg = base or _REFERENCE
    rows = [{"variant": "reference", **score(cfg, frame).summary()}]
    for name, info in SpillGuardConfig.model_fields.items():
        if info.annotation is bool and name != "enabled" and name not in STREAMING_ONLY_FIELDS:
            flipped = not getattr(cfg, name)
            s = score(cfg.model_copy(update={name: flipped}), frame)
            rows.append({"variant": f"{name}={flipped}", **s.summary()})
    return pd.DataFrame(rows)


def mark_seam(text: str, seam: int | None, mark: str = "┃") -> str:
    """``text`` with **mark** inserted at **seam** (unchanged when seam is None)."""
    return text if seam is None else text[:seam] + mark + text[seam:]


# -- widgets (thin shell) ----------------------------------------------------------------


def field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings (the string literal under each field) of a model class, each
    on one line (the tuner's tooltips and ``lab config example`` read them)."""
    docs: dict[str, str] = {}
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return docs
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for node, nxt in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            docs[node.target.id] = " ".join(nxt.value.value.split())
    return docs


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
    if _isna(v):
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
    return None if _isna(v) else int(v)


class SpillTuner:
    """An ipywidgets panel to tune :class:`~lab.guards.spill.SpillGuardConfig` on a corpus.

    One control per config field (generated from the pydantic fields: bool -> Checkbox,
    int -> IntSlider, str -> Text, sequences of str -> comma-separated Text, anything else
    -> JSON Text), so a new field gets a control without code changes. Every change re-scores
    the corpus: ``.score`` (a :class:`Score`) and ``.changed`` (:func:`changed_cases` vs the
    baseline) update and the HTML panes show precision/recall, the confusion matrix, the
    changed cases and the misclassified ones. The :data:`STREAMING_ONLY_FIELDS` controls say
    (tooltip and a note under the controls) that they do not move the corpus score. "Save
    config" writes ``LabConfig(spill=tuner.config)`` as JSON to the path in the text box and
    shows the absolute path it wrote.

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
        save_path: str | Path = "spill-config.json",
        results: Any = None,
    ) -> None:
        import ipywidgets as w

        self.baseline = baseline or _REFERENCE
        frame = _as_corpus(corpus)
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
                frame = _as_corpus(pd.concat([frame, real], ignore_index=True))
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
                doc = f"{doc} ({_STREAMING_ONLY_NOTE})" if doc else _STREAMING_ONLY_NOTE
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
            value=str(save_path),
            description="save to",
            style={"description_width": "5em"},
            layout=w.Layout(width="30em"),
        )
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
        save_box = w.HBox([self.path_text, self.save_button, self.save_status])
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

    def save(self, path: str | Path | None = None) -> Path:
        """Write ``LabConfig(spill=self.config)`` as JSON (readable by ``replay(config=...)``)."""
        from lab.config import LabConfig

        target = Path(path if path is not None else self.path_text.value).expanduser()
        return LabConfig(spill=self._config).save(target)

    def _on_save(self) -> None:
        try:
            p = self.save()
        except OSError as exc:
            self.save_status.value = f"<span style='color:#b00'>{html.escape(str(exc))}</span>"
            return
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
