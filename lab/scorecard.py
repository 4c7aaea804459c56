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

:func:`scorecard_sentences` says the flags in words ("Together: worse with confidence on
tool-call validity, 61 % [52 %, 70 %] against 97 % for the rest ..."); the card carries
them in ``card.attrs["sentences"]``.

Pure: tables in, tables out.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from lab.guards.markup import MARKUP_CLASSES
from lab.stats import DEFAULT_CONFIDENCE, fisher_greater, holm, wilson_interval

__all__ = [
    "VERDICT_LABELS",
    "scorecard",
    "scorecard_sentences",
    "trigger_agreement",
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

_GOOD = frozenset({"tool_call_valid", "trigger_agreement"})  # a high rate is good


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
    if len(agreement):
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
    **reference** is the backend trigger agreement compares with (else the majority).
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
    card["flags"] = [
        ",".join(v for v in verdicts if card.at[i, f"{v}_worse"]) for i in range(len(card))
    ]
    for v in verdicts:
        card[f"{v}_n"] = card[f"{v}_n"].astype("int64")
        card[f"{v}_worse"] = card[f"{v}_worse"].astype(bool)
    card.attrs["verdicts"] = verdicts
    card.attrs["confidence"] = confidence
    card.attrs["reference"] = reference
    card.attrs["sentences"] = scorecard_sentences(card)
    return card


def _pct(x: float) -> str:
    return f"{x * 100:.0f} %"


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
    for _, row in card.iterrows():
        flagged = [v for v in verdicts if bool(row[f"{v}_worse"])]
        name = row["serving_provider"]
        if not flagged:
            out.append(
                f"{name}: not worse with confidence on any verdict ({row['streams']} streams)."
            )
            continue
        for v in flagged:
            label = VERDICT_LABELS.get(v, v)
            out.append(
                f"{name}: worse with confidence on {label}, {_pct(row[f'{v}_rate'])} "
                f"[{_pct(row[f'{v}_ci_low'])}, {_pct(row[f'{v}_ci_high'])}] against "
                f"{_pct(row[f'{v}_rest'])} for the rest "
                f"(n = {row[f'{v}_n']}; one-sided Fisher p = {row[f'{v}_p']:.2g}, "
                f"Holm-adjusted {row[f'{v}_p_holm']:.2g})."
            )
    level = f"{confidence:.0%}".replace("%", " %")
    out.append(
        f"Worse with confidence: a one-sided Fisher exact test of the backend against the "
        f"pooled other backends, Holm-adjusted over every test of the card, below "
        f"{1 - confidence:.2g} ({level} family-wise); intervals are Wilson {level}."
    )
    return out
