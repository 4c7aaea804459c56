"""Tune the spill-guard heuristics against a labelled corpus of first-content snippets.

The spill guard (:mod:`lab.guards.spill`) decides, for the first visible content after
reasoning, whether it begins with a reasoning tail a backend glued onto the answer
(``"must do.Hello!"``). This module measures that decision against human labels:

- :func:`load_corpus` reads the bundled labelled corpus (``lab/data/seam_corpus.jsonl``) or
  any JSONL file of the same shape, validating every line;
- :func:`corpus_from_captures` turns replayed streams into unlabelled cases, so real first
  contents sit next to the hand-written ones;
- :func:`seam_candidates` (pure; :func:`load_seam_candidates` replays a capture for it) lists,
  per stream, the seam where visible content first follows reasoning, with the spill guard's
  decision and rule there: what a user labels to build their own corpus;
- :mod:`lab.tuning_store` says where the tuner writes (outside any repository), and keeps
  the user's labels of those seams (the same JSONL shape as the bundled corpus);
  :mod:`lab.tuning_search` scores both corpora with Wilson intervals and suggests settings
  by cross-validation over the labelled seams;
- :func:`score` (pure) predicts every case with :func:`~lab.guards.spill.find_spill_seam` and
  reports precision, recall, F1, accuracy, a confusion matrix and the seam exact-match rate;
- :func:`changed_cases` lists the cases a config decides differently from the reference;
- :func:`sweep` and :func:`ablation` score a family of configs (for plots);
- :class:`~lab.tuning_ui.SpillTuner` (importable from here too) is a thin ipywidgets panel
  over all of that: one control per :class:`~lab.guards.spill.SpillGuardConfig` field, live
  scores, and a button that saves the tuned config as a :class:`~lab.config.LabConfig` JSON
  file that ``replay(..., config=path)`` and ``lab replay --config`` read.

Labels are what a human reading the text would say, not what the reference heuristic says;
the interesting rows are where the two disagree.

>>> from lab.tuning import load_corpus, score
>>> s = score(None, load_corpus())
>>> s.prediction("seed-must-do")
8

This module is the pure part (pandas, no widgets); the panel lives in :mod:`lab.tuning_ui`,
and ipywidgets is imported only when a :class:`~lab.tuning_ui.SpillTuner` is built.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from lab.config import LabConfig, field_docs
from lab.exceptions import LabError
from lab.guards.spill import GUARD, SpillGuardConfig, evaluate_spill, find_spill_seam

if TYPE_CHECKING:
    from lab.tuning_ui import SpillTuner

__all__ = [
    "CANDIDATE_COLUMNS",
    "CORPUS_COLUMNS",
    "STREAMING_ONLY_FIELDS",
    "CorpusError",
    "STREAMING_ONLY_NOTE",
    "Score",
    "SpillTuner",
    "ablation",
    "as_corpus",
    "changed_cases",
    "corpus_from_captures",
    "is_missing",
    "field_docs",
    "load_corpus",
    "load_seam_candidates",
    "mark_seam",
    "predict",
    "row_problem",
    "score",
    "seam_candidates",
    "suggest_seam",
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
STREAMING_ONLY_NOTE = "streaming only: does not move the corpus score (replay captures to see it)"

_REFERENCE = SpillGuardConfig()
_BUNDLED = "seam_corpus.jsonl"


class CorpusError(ValueError, LabError):
    """A corpus file or frame is malformed; the message names the file and line."""


# -- corpus -------------------------------------------------------------------------------


def row_problem(obj: Any) -> str | None:
    """Why ``obj`` is not a valid corpus row, or None (the one check of a row's shape)."""
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
        problem = row_problem(obj)
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


def as_corpus(corpus: pd.DataFrame | str | Path | None) -> pd.DataFrame:
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
        rec = {k: (None if is_missing(v) else v) for k, v in rec.items()}
        if rec.get("leak") is not None:
            rec["leak"] = bool(rec["leak"])
        if rec.get("seam") is not None:
            rec["seam"] = int(rec["seam"])
        problem = row_problem(rec)
        if problem is not None:
            raise CorpusError(f"corpus row {i} (id {rec.get('id')!r}): {problem}")
        rows.append(rec)
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        dup = next(x for x in ids if ids.count(x) > 1)
        raise CorpusError(f"corpus has duplicate id {dup!r}")
    return _frame(rows)


def is_missing(v: Any) -> bool:
    """A cell with no value: None, ``pd.NA`` or NaN (a list or a string is a value)."""
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


# -- candidate seams from the user's own captures ----------------------------------------

CANDIDATE_COLUMNS = (
    "id",
    "stream_id",
    "capture_id",
    "backend",
    "provider",
    "model",
    "attempt",
    "reasoning_tail",
    "text",
    "decision",
    "rule",
    "seam",
    "suggested_seam",
)
"""The columns of :func:`seam_candidates`, in order."""

_PERMISSIVE = SpillGuardConfig(
    require_lowercase_start=False,
    require_glued_boundary=False,
    min_clause_words=1,
    hold_limit_chars=0,
)


def suggest_seam(text: str) -> int | None:
    """Where a leak in **text** most likely ends when a human says it leaks: the guard's seam
    with its gates open (any first letter, spaced boundaries, one-word fragments), or None
    when the text has no sentence boundary followed by more text.

    >>> suggest_seam("2 options exist, pick the first.Sure!")
    32
    >>> suggest_seam("no boundary at all") is None
    True
    """
    return find_spill_seam(text, _PERMISSIVE)


def seam_candidates(
    results: Iterable[Any],
    config: SpillGuardConfig | None = None,
    *,
    max_chars: int | None = 2000,
    context_chars: int = 120,
) -> pd.DataFrame:
    """The seams where each stream's visible content first follows reasoning (pure).

    **results**: :class:`~lab.result.StreamResult` objects replayed with **config** (the
    spill config of that replay; None = reference). A stream is a candidate when reasoning
    arrived before (or with) its first visible content in the attempt that produced it; one
    row per candidate, columns :data:`CANDIDATE_COLUMNS`:

    - ``id`` (the stream id, ``#2``... for a stream id seen again), ``stream_id``,
      ``capture_id``, ``backend`` (the serving backend, else the provider), ``provider``,
      ``model``, ``attempt``;
    - ``reasoning_tail``: the last **context_chars** of reasoning before the seam;
    - ``text``: the first visible content as the stream sent it (a fragment the guard moved
      is put back in front, from its :class:`~lab.model.GuardEvent`), capped at
      **max_chars**;
    - ``decision`` and ``rule``: what the spill guard did there. ``strip`` with the rule of
      its event; otherwise the guard's decision on the content it decided on (the first
      visible chunk): ``emit`` (its rule: ``not_lowercase``, ``spaced_boundary``,
      ``no_seam``, ``inline_code``, ``hold_limit``) or ``hold`` (held to the end of the
      stream and released unchanged: ``no_boundary``, ``boundary_at_end``, ...); ``pass``
      (rule ``not_inspected``) when the content went out before the guard could decide, as
      when the reasoning came in think tags the guard does not observe (rule ``disabled``
      when **config** switches the guard off); ``mismatch`` when that chunk would be stripped under **config** but was not (the
      results were replayed with another config);
    - ``seam``: the offset in ``text`` where the guard cut (strip only), and
      ``suggested_seam``: the guard's seam, else :func:`suggest_seam` (where a human who says
      "leak" most likely means the answer starts).

    Model text is returned as data; views must escape it (the tuner's panel does).
    """
    cfg = config or _REFERENCE
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for r in results:
        row = _candidate(r, cfg, context_chars)
        if row is None:
            continue
        if max_chars is not None:
            row["text"] = row["text"][:max_chars]
            for key in ("seam", "suggested_seam"):
                if row[key] is not None and row[key] > len(row["text"]):
                    row[key] = None
        sid = row["stream_id"]
        n = seen.get(sid, 0) + 1
        seen[sid] = n
        row["id"] = sid if n == 1 else f"{sid}#{n}"
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(CANDIDATE_COLUMNS))
    for col in ("attempt", "seam", "suggested_seam"):
        frame[col] = pd.array(frame[col].tolist(), dtype="Int64")
    return frame


def _candidate(r: Any, cfg: SpillGuardConfig, context_chars: int) -> dict[str, Any] | None:
    """One candidate row (without ``id``) for one StreamResult, or None."""
    chunks = list(r.chunks)
    origins = list(r.origins)
    first = next((i for i, c in enumerate(chunks) if c.content), None)
    if first is None:
        return None
    attempt = origins[first].attempt if first < len(origins) else None

    def same(i: int) -> bool:
        return attempt is None or i >= len(origins) or origins[i].attempt == attempt

    spills = [
        e for e in r.guard_events if e.guard == GUARD and (attempt is None or e.attempt == attempt)
    ]
    before = [t.content for i in range(first) if same(i) for t in chunks[i].thoughts]
    if not spills:
        before += [t.content for t in chunks[first].thoughts]
    if not "".join(before).strip():
        return None  # no reasoning before the first content: the guard never looked
    visible = "".join(
        c.content or "" for i, c in enumerate(chunks) if i >= first and same(i) and c.type == "text"
    )
    if spills:
        ev = spills[-1]
        leaked = " " * max(0, ev.offset) + ev.moved
        text = leaked + visible
        decision, rule = "strip", str(ev.detail.get("rule", ""))
        seam: int | None = len(leaked)
    else:
        if not visible.strip():
            return None
        text = visible
        d = evaluate_spill(chunks[first].content or "", cfg)
        decision, rule, seam = d.action, d.rule, None
        later = any(c.content for i, c in enumerate(chunks) if i > first and same(i))
        if not cfg.enabled:
            decision, rule = "pass", "disabled"
        elif d.action == "hold" and later:
            # a held candidate goes out whole at the end; out alone with more after it, the
            # guard never held it: it saw no reasoning (think-tag reasoning, for one)
            decision, rule = "pass", "not_inspected"
        elif d.action == "strip":
            decision, rule = "mismatch", f"would strip ({d.rule})"
    tail = "".join(before)
    return {
        "stream_id": str(r.stream_id),
        "capture_id": r.capture_id,
        "backend": r.serving_provider or r.provider,
        "provider": r.provider,
        "model": r.model,
        "attempt": attempt,
        "reasoning_tail": tail[-context_chars:] if context_chars > 0 else "",
        "text": text,
        "decision": decision,
        "rule": rule,
        "seam": seam,
        "suggested_seam": seam if seam is not None else suggest_seam(text),
    }


def load_seam_candidates(
    source: Any, config: SpillGuardConfig | str | Path | None = None, **kwargs: Any
) -> pd.DataFrame:
    """Replay **source** (a capture path, glob or Capture) and return :func:`seam_candidates`.

    The one loader of the candidates (it reads the capture); **config** is the spill config
    the replay runs with (a :class:`SpillGuardConfig`, or a LabConfig JSON path; None =
    reference); **kwargs** go to :func:`seam_candidates`.
    """
    from lab.replay import replay  # the analysis layer reads captures through replay

    if isinstance(config, (str, Path)):
        lab_config = LabConfig.load(config)
    else:
        lab_config = LabConfig(spill=config or _REFERENCE)
    return seam_candidates(replay(source, config=lab_config), lab_config.spill, **kwargs)


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
        return None if is_missing(v) else int(v)

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
    frame = as_corpus(corpus)
    preds = [predict(t, cfg) for t in frame["text"]]
    seams = [p[0] for p in preds]
    outcome: list[str] = []
    seam_ok: list[bool | None] = []
    correct: list[bool | None] = []
    tp = fp = fn = tn = unl = seam_hits = 0
    for text, leak, label, pred in zip(
        frame["text"], frame["leak"], frame["seam"], seams, strict=True
    ):
        if is_missing(leak):
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
    frame = as_corpus(corpus)
    a = score(baseline or _REFERENCE, frame).cases
    b = score(config or _REFERENCE, frame).cases
    rows = []
    for (_, ra), (_, rb) in zip(a.iterrows(), b.iterrows(), strict=True):
        sa = None if is_missing(ra["pred_seam"]) else int(ra["pred_seam"])
        sb = None if is_missing(rb["pred_seam"]) else int(rb["pred_seam"])
        if sa == sb:
            continue
        if is_missing(ra["correct"]):
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
    frame = as_corpus(corpus)
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
    frame = as_corpus(corpus)
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


def __getattr__(name: str) -> Any:
    """``lab.tuning.SpillTuner``: the panel, from :mod:`lab.tuning_ui` (imported on first use,
    so the scoring never loads the widget code)."""
    if name == "SpillTuner":
        from lab.tuning_ui import SpillTuner

        return SpillTuner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
