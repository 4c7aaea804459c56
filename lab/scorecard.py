"""The backend scorecard: every verdict the lab has on each serving backend, with intervals.

One OpenRouter model is served by many backends, and they fail users in different ways:
reasoning leaked into the answer, protocol markup leaked (harmony channels, tool-call
blocks, special tokens), errors, tool calls that break the request's schema, and a
different decision whether to call a tool at all. :func:`scorecard` puts every such
verdict on one row per backend:

- ``{verdict}_rate`` with its Wilson interval (``_ci_low``/``_ci_high``,
  :func:`lab.stats.wilson_interval`) over ``{verdict}_n`` trials (streams, tool calls or
  compared streams), and ``{verdict}_rest`` the pooled rate of every other backend;
- ``{verdict}_p``: the one-sided Fisher exact test (:func:`lab.stats.fisher_greater`) that
  this backend's rate of the bad outcome (a leak, an error, an invalid call, a
  disagreement) is higher than the pooled rest's; ``{verdict}_p_holm`` the same p-value
  after Holm's step-down correction over every test of the card (:func:`lab.stats.holm`);
- ``{verdict}_worse``: True when the Holm-adjusted p-value is below ``1 - confidence``.
  The exact test needs no minimum number of streams; the correction keeps the chance of
  flagging any clean backend in the whole card at most ``1 - confidence``.

Verdicts (a verdict with no trial anywhere is left out): ``think_leak``, ``markup_leak``
(any class) and ``markup_<class>`` for each class seen, ``error``, ``stall`` (the timed
streams with a stall, from the latency columns of :mod:`lab.latency`), ``tool_call_valid``
(a good rate: flagged when *lower*), ``trigger_agreement`` (sweeps: :func:`trigger_agreement`).
Latency quantiles per backend with their intervals are :func:`lab.tables.latency`.

Two groups of columns ride along without entering the Fisher tests:

- **latency** (streams with per-read timing): for each of
  :data:`lab.latency.SCORECARD_METRICS` the median and the p90 over the backend's timed
  streams, each with its percentile-bootstrap interval (:func:`lab.latency.latency_columns`,
  fixed seed): ``ttft_ms_p50``, ``ttft_ms_p50_ci_low``, ... ``ttft_ms_p90_ci_high``; and
  for each of :data:`LATENCY_TESTED` (time to first token) a flag for a backend slower than
  the rest: the one-sided Mann–Whitney U test of its timed streams against the other
  backends' pooled (``ttft_ms_p``, ``ttft_ms_rest_p50``), Holm-adjusted over the backends
  tested (``ttft_ms_p_holm``: a family of its own), ``ttft_ms_worse`` below
  ``1 - confidence``; a slower backend gets ``ttft_ms`` in ``flags``;
- **same model** (a sweep's streams table, with ``sweep_prompt`` and ``output_head``): the
  MMD two-sample test of :func:`lab.sameness.same_model` of each backend against the
  ``reference`` backend (or, without one, the other backends pooled): ``same_model_p``, its
  Holm adjustment over the backends tested (``same_model_p_holm``: a family of its own, one
  test per backend), ``same_model_verdict`` (``differs with confidence`` when the adjusted
  p-value is below ``1 - confidence``, ``no evidence``, ``too few samples``, or
  ``reference``), ``same_model_samples`` and ``same_model_against``. A backend that differs
  gets ``same_model`` in ``flags``.

:func:`scorecard_sentences` says the flags in words ("Together: worse with confidence on
tool-call validity, 61.0 % (51.2–70.0 %) against 97.0 % for the rest ..."); the card carries
them in ``card.attrs["sentences"]``.

Pure: tables in, tables out.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from lab.guards.markup import MARKUP_CLASSES
from lab.latency import backend_latency, latency_columns
from lab.numbers import format_interval, format_percent, format_rate
from lab.sameness import (
    SAME_MODEL_CHARS,
    SAME_MODEL_MIN_SAMPLES,
    SAME_MODEL_PERMUTATIONS,
    VERDICT_DIFFERS,
    VERDICT_NO_EVIDENCE,
    VERDICT_TOO_FEW,
    same_model,
)
from lab.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    DEFAULT_CONFIDENCE,
    fisher_greater,
    holm,
    mann_whitney_u,
    wilson_interval,
)

__all__ = [
    "SAME_MODEL_REFERENCE",
    "VERDICT_LABELS",
    "VERDICT_SHORT",
    "compact_scorecard",
    "quiet_verdicts",
    "scorecard",
    "scorecard_sentences",
    "slower_than_rest",
    "trigger_agreement",
    "trigger_disagreement_lines",
    "trigger_disagreements",
]

VERDICT_LABELS: dict[str, str] = {
    "think_leak": "reasoning leaked into the answer",
    "markup_leak": "protocol markup leaked",
    **{f"markup_{k}": f"{k.replace('_', ' ')} markup leaked" for k in MARKUP_CLASSES},
    "error": "errors",
    "stall": "streams that stalled (a gap between content reads over stall_s)",
    "tool_call_valid": "tool-call validity",
    "trigger_agreement": "tool-call trigger agreement",
}
"""Each verdict in words (the sentences use them)."""

VERDICT_SHORT: dict[str, str] = {
    "think_leak": "think",
    "markup_leak": "markup",
    "error": "errors",
    "stall": "stalled",
    "tool_call_valid": "valid calls",
    "trigger_agreement": "trigger",
}
"""The column of each verdict in :func:`compact_scorecard` (the markup classes are said in
the sentences, not given a column each)."""

_GOOD = frozenset({"tool_call_valid", "trigger_agreement"})  # a high rate is good

LATENCY_TESTED: tuple[str, ...] = ("ttft_ms",)
"""The timing figures tested for a backend slower than the rest (``{metric}_worse``): a
one-sided Mann–Whitney U test of its timed streams against the other backends' pooled,
Holm-adjusted over the backends tested (a family per figure, as the same-model test)."""
LATENCY_LABELS: dict[str, str] = {"ttft_ms": "time to first token"}
"""Each tested timing figure in words."""

SAME_MODEL_REFERENCE = "reference"
"""``same_model_verdict`` of the reference backend itself (nothing to test it against)."""
_POOLED = "the other backends"


def _served(st: pd.DataFrame) -> pd.DataFrame:
    from lab.tables import backend_labels, unserved

    st = st.copy()
    st["serving_provider"] = backend_labels(st)
    return st[~unserved(st["serving_provider"])]


def _kinds(st: pd.DataFrame) -> pd.Series:
    col = st["leak_kind"] if "leak_kind" in st else pd.Series("", index=st.index)
    return col.fillna("").astype(str).map(lambda s: set(filter(None, s.split(","))))


def _decision(names: object) -> str:
    """A stream's tool decision: the sorted set of tools it called (``""``: no call)."""
    if not isinstance(names, str) or not names:
        return ""
    return ",".join(sorted(set(names.split(","))))


def _majority(decisions: list[str]) -> str:
    counts = Counter(decisions)
    top = max(counts.values())
    return sorted(d for d, c in counts.items() if c == top)[0]


def _agreement_rows(st: pd.DataFrame, reference: str | None) -> pd.DataFrame:
    """One row per compared stream: backend, prompt, its decision, the reference one."""
    st = _served(st)
    if "sweep_prompt" not in st or "tool_names" not in st:
        return pd.DataFrame(columns=["serving_provider", "prompt", "decision", "expected"])
    st = st[st["error_type"].isna() & st["sweep_prompt"].notna()]
    st = st.assign(
        prompt=st["sweep_prompt"].astype("int64"), decision=st["tool_names"].map(_decision)
    )
    rows: list[dict[str, Any]] = []
    for prompt, group in st.groupby("prompt", sort=True):
        modal = {b: _majority(list(g["decision"])) for b, g in group.groupby("serving_provider")}
        for backend, g in group.groupby("serving_provider", sort=True):
            if reference is not None:
                if reference not in modal:
                    continue
                expected = modal[reference]
            else:
                others = [d for b, d in modal.items() if b != backend]
                if not others:
                    continue
                expected = _majority(others)
            for d in g["decision"]:
                rows.append(
                    {
                        "serving_provider": backend,
                        "prompt": prompt,
                        "decision": d,
                        "expected": expected,
                    }
                )
    return pd.DataFrame(rows, columns=["serving_provider", "prompt", "decision", "expected"])


def trigger_agreement(
    streams: pd.DataFrame,
    *,
    reference: str | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """Per backend, how often its decision to call a tool (and which tools) agrees with the
    ``reference`` backend's usual decision on the same prompt, or without one with the
    majority of the other backends' usual decisions (K2 Vendor Verifier style).

    Needs a sweep's streams table (``lab.sweep.sweep_streams``: the prompt is
    ``sweep_prompt``, its line in the prompts file). A backend's usual decision on a prompt is its most frequent one over its
    repetitions; streams that ended in an error are not compared. Columns: ``compared``,
    ``agreed``, ``agreement_rate`` with its Wilson interval, ``reference`` and
    ``disagreeing_prompts`` (the prompt lines where a stream disagreed).
    """
    rows = _agreement_rows(streams, reference)
    out = []
    for backend, g in rows.groupby("serving_provider", sort=True):
        agree = g["decision"] == g["expected"]
        k, n = int(agree.sum()), len(g)
        low, high = wilson_interval(k, n, confidence)
        out.append(
            {
                "serving_provider": backend,
                "compared": n,
                "agreed": k,
                "agreement_rate": k / n,
                "agreement_rate_ci_low": low,
                "agreement_rate_ci_high": high,
                "reference": reference or "majority",
                "disagreeing_prompts": ",".join(
                    str(p) for p in sorted(set(g.loc[~agree, "prompt"]))
                ),
            }
        )
    cols = [
        "serving_provider",
        "compared",
        "agreed",
        "agreement_rate",
        "agreement_rate_ci_low",
        "agreement_rate_ci_high",
        "reference",
        "disagreeing_prompts",
    ]
    return pd.DataFrame(out, columns=cols)


def trigger_disagreements(streams: pd.DataFrame, *, reference: str | None = None) -> pd.DataFrame:
    """The prompts where a backend's tool decision differed from the reference (or the
    majority): one row per (backend, prompt, decision) with how many streams made it."""
    rows = _agreement_rows(streams, reference)
    rows = rows[rows["decision"] != rows["expected"]]
    cols = ["serving_provider", "prompt", "decision", "expected"]
    return rows.groupby(cols, sort=True).size().rename("streams").reset_index()


def _line_ranges(lines: list[int]) -> str:
    """``[1, 2, 3, 7, 9, 10]`` -> ``"1–3, 7, 9–10"``."""
    runs: list[list[int]] = []
    for n in sorted(set(lines)):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in runs)


def trigger_disagreement_lines(streams: pd.DataFrame, *, reference: str | None = None) -> list[str]:
    """One sentence per backend whose tool decision (call or not, and which tools) differed
    from the ``reference`` backend's (or the majority's) on some prompt: how many of its
    compared streams and the prompt lines where it did (``lab sweep`` prints them under
    the scorecard). Empty when every backend agreed or the table is not a sweep's."""
    whom = f"the reference {reference}'s" if reference else "the majority's"
    out = []
    for row in trigger_agreement(streams, reference=reference).itertuples(index=False):
        if not row.disagreeing_prompts:
            continue
        prompts = [int(p) for p in str(row.disagreeing_prompts).split(",")]
        out.append(
            f"{row.serving_provider}: tool decision unlike {whom} on "
            f"{row.compared - row.agreed} of {row.compared} streams, prompt line(s) "
            f"{_line_ranges(prompts)}."
        )
    return out


def _verdict_counts(
    st: pd.DataFrame, reference: str | None
) -> dict[str, tuple[pd.Series, pd.Series]]:
    """``{verdict: (bad outcomes, trials)}`` per backend (Series indexed by backend)."""
    g = st.groupby("serving_provider", sort=True)
    streams = g.size()
    kinds = _kinds(st)
    out: dict[str, tuple[pd.Series, pd.Series]] = {}
    think = kinds.map(lambda k: "think" in k)
    out["think_leak"] = (think.groupby(st["serving_provider"]).sum(), streams)
    markup = kinds.map(lambda k: bool(k & set(MARKUP_CLASSES)))
    out["markup_leak"] = (markup.groupby(st["serving_provider"]).sum(), streams)
    for cls in MARKUP_CLASSES:
        hit = kinds.map(lambda k, c=cls: c in k)
        if hit.any():
            out[f"markup_{cls}"] = (hit.groupby(st["serving_provider"]).sum(), streams)
    errored = st["error_type"].notna()
    out["error"] = (errored.groupby(st["serving_provider"]).sum(), streams)
    if "stalls" in st and st["stalls"].notna().any():  # the latency columns (lab.latency)
        timed = st["stalls"].notna()
        stalled = (st["stalls"].fillna(0) > 0) & timed
        out["stall"] = (
            stalled.groupby(st["serving_provider"]).sum(),
            timed.groupby(st["serving_provider"]).sum(),
        )
    if "tool_calls_checked" in st and st["tool_calls_checked"].sum() > 0:
        checked = g["tool_calls_checked"].sum()
        valid = g["tool_calls_valid"].sum()
        out["tool_call_valid"] = (checked - valid, checked)
    agreement = _agreement_rows(st, reference)
    if (agreement["decision"] != "").any():  # no call anywhere: every decision agrees
        ag = agreement.groupby("serving_provider")
        n = ag.size().reindex(streams.index, fill_value=0)
        bad = (
            (agreement["decision"] != agreement["expected"])
            .groupby(agreement["serving_provider"])
            .sum()
            .reindex(streams.index, fill_value=0)
        )
        out["trigger_agreement"] = (bad, n)
    return out


def _latency_part(st: pd.DataFrame, confidence: float) -> pd.DataFrame | None:
    """The latency columns per backend (:func:`lab.latency.latency_columns`) and, for each
    of :data:`LATENCY_TESTED`, the slower-than-the-rest test (``{metric}_p``, ``_p_holm``,
    ``_worse``, ``_rest_p50``), or None when no stream has per-read timing."""
    if "timed" not in st or not st["timed"].fillna(False).astype(bool).any():
        return None
    table = backend_latency(
        st, confidence=confidence, n_boot=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED
    )
    out = latency_columns(table)
    timed = st[st["timed"].fillna(False).astype(bool)]
    for metric in LATENCY_TESTED:
        if metric in timed:
            slow = slower_than_rest(timed, metric, out.index, confidence=confidence)
            out = out.join(slow.add_prefix(f"{metric}_"))
    return out


def slower_than_rest(
    streams: pd.DataFrame,
    metric: str,
    backends: Any = None,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """Per backend (indexed by ``serving_provider``; ``backends`` sets the rows): is its
    ``metric`` (a per-stream timing column of ``streams``) larger than the other backends'
    pooled? ``p``: the one-sided Mann–Whitney U test (:func:`lab.stats.mann_whitney_u`,
    ``alternative="greater"``); ``p_holm``: Holm-adjusted over the backends tested;
    ``worse``: ``p_holm`` below ``1 - confidence``; ``rest_p50``: the others' median.
    Streams without the figure are left out; a backend without one is not tested (NaN)."""
    values = streams[["serving_provider", metric]].dropna()
    index = pd.Index(
        sorted(values["serving_provider"].unique()) if backends is None else list(backends),
        name="serving_provider",
    )
    out = pd.DataFrame(index=index, columns=["p", "p_holm", "rest_p50"], dtype="float64")
    for backend in index:
        mine = values.loc[values["serving_provider"] == backend, metric].to_numpy(float)
        rest = values.loc[values["serving_provider"] != backend, metric].to_numpy(float)
        if len(rest):
            out.loc[backend, "rest_p50"] = float(pd.Series(rest).median())
        if len(mine) and len(rest):
            out.loc[backend, "p"] = mann_whitney_u(mine, rest, alternative="greater")[1]
    tested = out["p"].dropna()
    out.loc[tested.index, "p_holm"] = holm(tested.tolist())
    out["worse"] = (out["p_holm"] < 1.0 - confidence).astype(bool)
    return out


def _same_model_part(
    st: pd.DataFrame, backends: list[str], reference: str | None, alpha: float
) -> pd.DataFrame | None:
    """The same-model columns per backend (indexed by backend), or None when the streams
    table is not a sweep's (no ``sweep_prompt`` / ``output_head``)."""
    if "output_head" not in st or "sweep_prompt" not in st:
        return None
    ok = st[st["error_type"].isna() & st["sweep_prompt"].notna() & st["output_head"].notna()]
    frame = pd.DataFrame(
        {
            "serving_provider": ok["serving_provider"].astype(str),
            "prompt": ok["sweep_prompt"].astype("int64"),
            "text": ok["output_head"].astype(str),
        }
    )
    against = reference if reference is not None else _POOLED
    out = pd.DataFrame(index=pd.Index(backends, name="serving_provider"))
    out["same_model_p"] = float("nan")
    out["same_model_p_holm"] = float("nan")
    out["same_model_verdict"] = VERDICT_TOO_FEW
    out["same_model_samples"] = (
        frame["serving_provider"].value_counts().reindex(out.index, fill_value=0).astype("int64")
    )
    out["same_model_against"] = against
    if reference in out.index:
        out.loc[reference, "same_model_verdict"] = SAME_MODEL_REFERENCE
        out.loc[reference, "same_model_against"] = ""
    if reference is not None and reference not in set(frame["serving_provider"]):
        return out  # the reference answered nothing: nothing to test against
    table = same_model(frame, reference=reference, alpha=alpha, length=SAME_MODEL_CHARS).set_index(
        "serving_provider"
    )
    tested = table[table["same_model_p"].notna()]  # Holm over these: same_model() adjusts
    for col in ("same_model_p", "same_model_p_holm", "same_model_verdict"):
        out.loc[tested.index, col] = tested[col]
    return out


def scorecard(
    streams: pd.DataFrame,
    *,
    reference: str | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """One row per serving backend with every verdict, its interval, the rest's rate, the
    one-sided Fisher exact p-value, its Holm adjustment over the whole card and the flag
    ``{verdict}_worse`` (see the module docstring). ``flags`` lists the flagged verdicts;
    ``card.attrs["sentences"]`` says them in words.

    ``streams`` is the streams table (``lab.tables.streams``, ``sweep_streams``);
    **reference** is the backend trigger agreement and the same-model test compare with
    (else the majority, and the other backends pooled). The latency and same-model columns
    (module docstring) are added when the table has what they need.
    Backends that served nothing (failed before streaming) are left out.
    """
    st = _served(streams)
    backends = sorted(st["serving_provider"].unique())
    card = pd.DataFrame({"serving_provider": backends})
    card["streams"] = [int((st["serving_provider"] == b).sum()) for b in backends]
    counts = _verdict_counts(st, reference) if backends else {}
    tests: list[tuple[str, int, float]] = []
    columns: dict[str, list[Any]] = {}
    for verdict, (bad, trials) in counts.items():
        bad = bad.reindex(backends, fill_value=0).astype("int64")
        trials = trials.reindex(backends, fill_value=0).astype("int64")
        total_bad, total_n = int(bad.sum()), int(trials.sum())
        good = verdict in _GOOD
        cols: dict[str, list[Any]] = {
            k: [] for k in ("rate", "ci_low", "ci_high", "n", "rest", "p", "p_holm", "worse")
        }
        for i, b in enumerate(backends):
            k, n = int(bad[b]), int(trials[b])
            rest_k, rest_n = total_bad - k, total_n - n
            shown = n - k if good else k
            low, high = wilson_interval(shown, n, confidence)
            rest_shown = rest_n - rest_k if good else rest_k
            cols["rate"].append(shown / n if n else float("nan"))
            cols["ci_low"].append(low)
            cols["ci_high"].append(high)
            cols["n"].append(n)
            cols["rest"].append(rest_shown / rest_n if rest_n else float("nan"))
            p = fisher_greater(k, n, rest_k, rest_n) if n and rest_n else float("nan")
            cols["p"].append(p)
            cols["p_holm"].append(float("nan"))
            cols["worse"].append(False)
            if n and rest_n:
                tests.append((verdict, i, p))
        for key, values in cols.items():
            columns[f"{verdict}_{key}"] = values
    adjusted = holm([p for _, _, p in tests])
    alpha = 1.0 - confidence
    for (verdict, i, _), q in zip(tests, adjusted, strict=True):
        columns[f"{verdict}_p_holm"][i] = q
        columns[f"{verdict}_worse"][i] = q < alpha
    for name, values in columns.items():
        card[name] = values
    verdicts = list(counts)
    sameness = _same_model_part(st, backends, reference, alpha) if backends else None
    latency = _latency_part(st, confidence) if backends else None
    timed = latency if latency is not None else pd.DataFrame()
    slow = [  # the timing figures tested on at least one backend
        m for m in LATENCY_TESTED if f"{m}_p" in timed and timed[f"{m}_p"].notna().any()
    ]
    flags = []
    for i in range(len(card)):
        flagged = [v for v in verdicts if card.at[i, f"{v}_worse"]]
        flagged += [m for m in slow if bool(timed.at[backends[i], f"{m}_worse"])]
        if sameness is not None and sameness["same_model_verdict"].iat[i] == VERDICT_DIFFERS:
            flagged.append("same_model")
        flags.append(",".join(flagged))
    card["flags"] = flags
    for v in verdicts:
        card[f"{v}_n"] = card[f"{v}_n"].astype("int64")
        card[f"{v}_worse"] = card[f"{v}_worse"].astype(bool)
    for part in (latency, sameness):
        if part is not None:
            card = card.join(part, on="serving_provider")
    card.attrs["verdicts"] = verdicts
    card.attrs["latency"] = latency is not None
    card.attrs["latency_tested"] = slow
    card.attrs["same_model"] = sameness is not None
    card.attrs["confidence"] = confidence
    card.attrs["reference"] = reference
    card.attrs["sentences"] = scorecard_sentences(card)
    return card


def quiet_verdicts(card: pd.DataFrame) -> list[str]:
    """The verdicts of the card on which every backend did well: none leaked, erred or
    stalled, every call was valid, every decision agreed. Nothing to compare there;
    :func:`compact_scorecard` leaves them out and the sentences name them."""
    quiet = []
    for v in card.attrs.get("verdicts", []):
        rate = card[f"{v}_rate"].dropna()
        if len(rate) and bool((rate == (1.0 if v in _GOOD else 0.0)).all()):
            quiet.append(v)
    return quiet


def _rate_cell(row: Any, v: str) -> str | None:
    if not row[f"{v}_n"]:
        return None
    mark = "*" if bool(row[f"{v}_worse"]) else ""
    return format_rate(row[f"{v}_rate"], row[f"{v}_ci_low"], row[f"{v}_ci_high"], decimals=0) + mark


def _ms_cell(value: float, low: float, high: float) -> str | None:
    if pd.isna(value):
        return None
    return format_interval(value, low, high, decimals=0)


_SAME_MODEL_SHORT = {
    VERDICT_DIFFERS: "differs",
    VERDICT_NO_EVIDENCE: "no evidence",
    VERDICT_TOO_FEW: "too few",
    SAME_MODEL_REFERENCE: "reference",
}


def compact_scorecard(card: pd.DataFrame) -> pd.DataFrame:
    """The card as a terminal shows it: one row per backend, one text cell per verdict
    (``"61 % (52–70 %)*"``: :func:`lab.numbers.format_rate` to whole percents, ``*`` when
    worse with confidence; :data:`VERDICT_SHORT` names the columns), the
    same-model verdict with its Holm-adjusted p-value, and the median and p90 time to first
    token in ms with their bootstrap intervals. Verdicts on which every backend did well
    (:func:`quiet_verdicts`) and the per-class markup verdicts are left out; the sentences
    say them."""
    quiet = set(quiet_verdicts(card))
    shown = [
        v
        for v in card.attrs.get("verdicts", [])
        if v not in quiet and not (v.startswith("markup_") and v != "markup_leak")
    ]
    view = pd.DataFrame({"backend": card["serving_provider"], "streams": card["streams"]})
    for v in shown:
        view[VERDICT_SHORT.get(v, v)] = [_rate_cell(row, v) for _, row in card.iterrows()]
    if "same_model_verdict" in card:
        view["same model"] = [
            _SAME_MODEL_SHORT.get(row["same_model_verdict"], row["same_model_verdict"])
            + ("" if pd.isna(row["same_model_p_holm"]) else f" p={row['same_model_p_holm']:.2g}")
            + ("*" if row["same_model_verdict"] == VERDICT_DIFFERS else "")
            for _, row in card.iterrows()
        ]
    if "ttft_ms_p50" in card and card["ttft_ms_p50"].notna().any():
        for q in ("p50", "p90"):
            view[f"ttft {q}"] = [
                _ms_cell(
                    row[f"ttft_ms_{q}"], row[f"ttft_ms_{q}_ci_low"], row[f"ttft_ms_{q}_ci_high"]
                )
                for _, row in card.iterrows()
            ]
        if "ttft_ms_worse" in card:  # the median is what the test compares: mark it
            view["ttft p50"] = [
                cell + "*" if cell is not None and bool(worse) else cell
                for cell, worse in zip(view["ttft p50"], card["ttft_ms_worse"], strict=True)
            ]
    return view


def scorecard_sentences(card: pd.DataFrame) -> list[str]:
    """The card in words: one sentence per flagged (backend, verdict), one per backend with
    no flag, and one naming the test, the correction and the confidence."""
    verdicts: list[str] = card.attrs.get("verdicts") or [
        c[: -len("_worse")] for c in card.columns if c.endswith("_worse")
    ]
    confidence = float(card.attrs.get("confidence", DEFAULT_CONFIDENCE))
    out: list[str] = []
    if len(card) < 2:
        return [f"{len(card)} backend(s) served streams: nothing to compare."]
    sameness = "same_model_verdict" in card
    slow_tested = [m for m in card.attrs.get("latency_tested", []) if f"{m}_worse" in card]
    for _, row in card.iterrows():
        flagged = [v for v in verdicts if bool(row[f"{v}_worse"])]
        name = row["serving_provider"]
        differs = sameness and row["same_model_verdict"] == VERDICT_DIFFERS
        slow = [m for m in slow_tested if bool(row[f"{m}_worse"])]
        if not flagged and not differs and not slow:
            out.append(
                f"{name}: not worse with confidence on any verdict ({row['streams']} streams)."
            )
            continue
        for v in flagged:
            label = VERDICT_LABELS.get(v, v)
            out.append(
                f"{name}: worse with confidence on {label}, "
                f"{format_rate(row[f'{v}_rate'], row[f'{v}_ci_low'], row[f'{v}_ci_high'])} "
                f"against {format_percent(row[f'{v}_rest'])} for the rest "
                f"(n = {row[f'{v}_n']}; one-sided Fisher p = {row[f'{v}_p']:.2g}, "
                f"Holm-adjusted {row[f'{v}_p_holm']:.2g})."
            )
        for m in slow:
            out.append(
                f"{name}: slower with confidence on {LATENCY_LABELS.get(m, m)}, median "
                f"{format_interval(row[f'{m}_p50'], row[f'{m}_p50_ci_low'], row[f'{m}_p50_ci_high'], unit='ms')}"
                f" against {format_interval(row[f'{m}_rest_p50'], unit='ms')} for the "
                f"rest (n = {row[f'{m}_n']}; one-sided Mann–Whitney p = {row[f'{m}_p']:.2g}, "
                f"Holm-adjusted over the backends {row[f'{m}_p_holm']:.2g})."
            )
        if differs:
            out.append(
                f"{name}: answers unlike those of {_against(row)} with confidence: a different model "
                f"or different serving (quantization, sampling, post-processing) (MMD "
                f"two-sample test on {row['same_model_samples']} answers, permutation "
                f"p = {row['same_model_p']:.2g}, Holm-adjusted {row['same_model_p_holm']:.2g})."
            )
    quiet = quiet_verdicts(card)
    if quiet:
        said = [
            f"{VERDICT_LABELS.get(v, v)} ({'all' if v in _GOOD else 'none of'} "
            f"{int(card[f'{v}_n'].sum())})"
            for v in quiet
        ]
        out.append(f"The same on every backend: {'; '.join(said)}.")
    level = format_percent(confidence, 0)
    out.append(
        f"Worse with confidence: a one-sided Fisher exact test of the backend against the "
        f"pooled other backends, Holm-adjusted over every test of the card, below "
        f"{1 - confidence:.2g} ({level} family-wise); intervals are Wilson {level}."
    )
    if slow_tested:
        figures = " and ".join(LATENCY_LABELS.get(m, m) for m in slow_tested)
        out.append(
            f"Slower with confidence: a one-sided Mann–Whitney U test of the backend's timed "
            f"streams against the other backends' pooled, on {figures}, Holm-adjusted over the "
            f"backends tested, below {1 - confidence:.2g}; medians with bootstrap intervals."
        )
    if sameness:
        out.extend(_same_model_sentences(card, confidence))
    return out


def _against(row: Any) -> str:
    against = row["same_model_against"]
    return against if against == _POOLED else f"the reference {against}"


def _names(card: pd.DataFrame, verdict: str) -> list[str]:
    return card.loc[card["same_model_verdict"] == verdict, "serving_provider"].astype(str).tolist()


def _same_model_sentences(card: pd.DataFrame, confidence: float) -> list[str]:
    """The same-model test in words: who showed no evidence, who had too few samples, and
    the method."""
    tested = int(card["same_model_p"].notna().sum())
    out = []
    quiet = _names(card, VERDICT_NO_EVIDENCE)
    if quiet:
        out.append(
            f"Same model: no evidence that {', '.join(quiet)} serve{'s' if len(quiet) == 1 else ''}"
            " another model (not a proof of sameness: a small number of answers per prompt "
            "finds only large differences)."
        )
    few = _names(card, VERDICT_TOO_FEW)
    if few and tested == 0:
        return [
            f"Same model: too few samples to test any backend (each side needs "
            f"{SAME_MODEL_MIN_SAMPLES} answers and a prompt answered at least twice: send each "
            "prompt several times)."
        ]
    if few:
        out.append(
            f"Same model: too few samples to test {', '.join(few)} (each side needs "
            f"{SAME_MODEL_MIN_SAMPLES} answers and a prompt answered at least twice: send each "
            "prompt several times)."
        )
    against = card.loc[card["same_model_against"] != "", "same_model_against"]
    whom = (
        "the reference backend"
        if len(against) and against.iat[0] != _POOLED
        else ("the other backends pooled")
    )
    out.append(
        f"Same model: a maximum-mean-discrepancy two-sample test of each backend's answers "
        f"against {whom}, prompt by prompt (Hamming kernel over the first "
        f"{SAME_MODEL_CHARS} characters; p-value from {SAME_MODEL_PERMUTATIONS} relabellings "
        f"within each prompt; Gao et al., ICLR 2025), Holm-adjusted over the {tested} "
        f"backend(s) tested, below {1 - confidence:.2g}."
    )
    return out
