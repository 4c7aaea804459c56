"""What changed between two runs, and when a long run changed (analysis: tables in, tables out).

:func:`compare_runs` (``lab.compare(a, b)``, ``lab compare A B``) takes two runs — each a
streams table, results, a capture directory, a result directory of ``replay(out=...)`` or a
sweep's ``--out`` — and tests, per serving backend present in both and per verdict:

- **rates** (:data:`lab.trends.RATE_VERDICTS`: leak rate, error rate, stall rate): the two-proportion z
  test, or Fisher's exact test when an expected cell count is under 5
  (:func:`lab.stats.proportion_test`); each rate with its Wilson interval and the difference
  with Newcombe's interval;
- **latency** (:data:`lab.trends.LATENCY_VERDICTS`: TTFB, TTFT, first visible token, p99 gap,
  tokens/s): the Mann–Whitney U test on the per-stream values; each median with its
  bootstrap interval and the difference of the medians with a bootstrap interval (fixed
  seed).

The p-values of all the tests of one comparison are adjusted together, by Holm's method
(family-wise error, the default) or Benjamini–Hochberg (``correction="bh"``: false discovery
rate); the table names the method in ``correction``. A row is ``changed`` when its adjusted
p-value is under ``alpha``, and :func:`change_sentences` says each one in words::

    SiliconFlow: leak rate up from 2 % [0, 9] to 41 % [28, 55], p < 0.001

:func:`lab.tables.trends` follows one long run instead (:mod:`lab.trends`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lab.numbers import format_interval, format_rate
from lab.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    DEFAULT_CONFIDENCE,
    benjamini_hochberg,
    bootstrap_difference_interval,
    bootstrap_quantile_interval,
    holm,
    mann_whitney_u,
    newcombe_difference_interval,
    proportion_test,
    wilson_interval,
)
from lab.trends import VERDICTS, Verdict

__all__ = [
    "COMPARE_COLUMNS",
    "CORRECTIONS",
    "change_sentences",
    "compare",
    "compare_runs",
    "load_streams",
]


CORRECTIONS = {"holm": ("Holm", holm), "bh": ("Benjamini-Hochberg", benjamini_hochberg)}
"""The p-value adjustments :func:`compare_runs` offers: name -> (words, function)."""

COMPARE_COLUMNS = [
    "serving_provider",
    "verdict",
    "kind",
    "a_n",
    "a_value",
    "a_ci_low",
    "a_ci_high",
    "b_n",
    "b_value",
    "b_ci_low",
    "b_ci_high",
    "difference",
    "difference_ci_low",
    "difference_ci_high",
    "test",
    "p",
    "p_adjusted",
    "correction",
    "changed",
    "sentence",
]


# --------------------------------------------------------------------------- loading


def load_streams(run: Any, *, config: Any = None) -> pd.DataFrame:
    """The streams table of one run: a streams table (returned as is), results, a result
    directory (``streams-*.parquet`` written by ``replay(out=...)``), a sweep's ``--out``
    (the last request of each key, :func:`lab.sweep.sweep_streams`) or a capture."""
    from lab import tables

    if isinstance(run, pd.DataFrame):
        return tables.streams(run)
    if isinstance(run, (str, Path)):
        path = Path(run)
        if path.is_dir() and _is_result_dir(path):
            from lab.resultfiles import read_results

            return read_results(path, "streams")
        if path.is_dir() and _is_sweep(path):
            from lab.sweep import sweep_streams

            return sweep_streams(path, config=config)
        from lab.replay import replay

        return tables.streams(replay(path, config=config))
    return tables.streams(run)


def _is_result_dir(path: Path) -> bool:
    import pyarrow.parquet as pq

    files = sorted(path.glob("streams-*.parquet"))
    if not files:
        return False
    metadata = pq.read_schema(files[0]).metadata or {}
    return metadata.get(b"lab.table") == b"results.streams"


def _is_sweep(path: Path) -> bool:
    from lab.sweep import _sweep_exchanges

    try:
        exchanges = _sweep_exchanges(path)
    except Exception:  # noqa: BLE001 - not a readable sweep: read it as a capture
        return False
    return not exchanges.empty and bool(exchanges["key"].notna().any())


# --------------------------------------------------------------------------- comparing


def compare_runs(
    a: Any,
    b: Any,
    *,
    correction: str = "holm",
    alpha: float = 0.05,
    confidence: float = DEFAULT_CONFIDENCE,
    n_boot: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    names: tuple[str, str] = ("a", "b"),
    config: Any = None,
) -> pd.DataFrame:
    """Per backend present in both runs and per verdict: run ``a`` against run ``b``.

    Columns :data:`COMPARE_COLUMNS`: each side's streams with the figure (``a_n``), its
    value (a rate, or the median of a latency figure) and interval (Wilson; bootstrap for
    a median), the difference ``b - a`` with its interval (Newcombe; bootstrap of the
    medians' difference), the ``test`` (``z``, ``fisher``, ``mann-whitney``), its ``p``,
    ``p_adjusted`` for every test of the table (``correction``: ``"holm"`` or ``"bh"``,
    named in the column) and ``changed`` (``p_adjusted < alpha``), with its ``sentence``.
    A verdict with no stream on one side is left out. ``table.attrs["notes"]`` names the
    backends only one run has and the correction used.
    """
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}, not {correction!r}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be between 0 and 1, got {alpha!r}")
    from lab import tables

    sa, sb = load_streams(a, config=config), load_streams(b, config=config)
    la, lb = tables.backend_labels(sa), tables.backend_labels(sb)
    rows: list[dict[str, Any]] = []
    for backend in sorted(set(la) & set(lb)):
        ga, gb = sa[la == backend], sb[lb == backend]
        for verdict in VERDICTS:
            row = _compare_one(verdict, ga, gb, confidence, n_boot, seed)
            if row is not None:
                rows.append({"serving_provider": backend, **row})
    out = pd.DataFrame(rows, columns=COMPARE_COLUMNS)
    words, adjust = CORRECTIONS[correction]
    out["p_adjusted"] = adjust(out["p"].tolist()) if len(out) else []
    out["correction"] = words
    out["changed"] = (out["p_adjusted"] < alpha).fillna(False).astype(bool)
    out["sentence"] = [_sentence(r) for r in out.to_dict("records")]
    for col in ("a_n", "b_n"):
        out[col] = out[col].astype("int64")
    only_a = sorted(set(la) - set(lb))
    only_b = sorted(set(lb) - set(la))
    tested = int(out["p"].notna().sum())
    notes = [f"p-values adjusted for {tested} comparisons by the {words} method."]
    if only_a:
        notes.append(f"Only in {names[0]}: {', '.join(only_a)} (not compared).")
    if only_b:
        notes.append(f"Only in {names[1]}: {', '.join(only_b)} (not compared).")
    untimed = [int((~s["timed"].astype(bool)).sum()) if "timed" in s else 0 for s in (sa, sb)]
    if any(untimed):
        notes.append(
            f"Streams without per-read timing left out of the latency verdicts: "
            f"{untimed[0]} in {names[0]}, {untimed[1]} in {names[1]}."
        )
    out.attrs["notes"] = notes
    return out


def _compare_one(
    verdict: Verdict,
    ga: pd.DataFrame,
    gb: pd.DataFrame,
    confidence: float,
    n_boot: int,
    seed: int,
) -> dict[str, Any] | None:
    va = verdict.values(ga).dropna().to_numpy(float)
    vb = verdict.values(gb).dropna().to_numpy(float)
    if len(va) == 0 or len(vb) == 0:
        return None
    row: dict[str, Any] = {
        "verdict": verdict.name,
        "kind": verdict.kind,
        "a_n": len(va),
        "b_n": len(vb),
    }
    if verdict.kind == "rate":
        ka, kb = int(va.sum()), int(vb.sum())
        p, test = proportion_test(ka, len(va), kb, len(vb))
        if ka + kb in (0, len(va) + len(vb)):  # 0 % or 100 % on both sides: nothing to test
            p, test = math.nan, "none"
        row["a_value"], row["b_value"] = ka / len(va), kb / len(vb)
        row["a_ci_low"], row["a_ci_high"] = wilson_interval(ka, len(va), confidence)
        row["b_ci_low"], row["b_ci_high"] = wilson_interval(kb, len(vb), confidence)
        low, high = newcombe_difference_interval(ka, len(va), kb, len(vb), confidence)
    else:
        _, p = mann_whitney_u(va, vb)
        test = "mann-whitney"
        row["a_value"], row["b_value"] = float(np.median(va)), float(np.median(vb))
        kw = {"n_boot": n_boot, "seed": seed}
        row["a_ci_low"], row["a_ci_high"] = bootstrap_quantile_interval(va, 0.5, confidence, **kw)
        row["b_ci_low"], row["b_ci_high"] = bootstrap_quantile_interval(vb, 0.5, confidence, **kw)
        low, high = bootstrap_difference_interval(va, vb, 0.5, confidence, **kw)
    row["difference"] = row["b_value"] - row["a_value"]
    row["difference_ci_low"], row["difference_ci_high"] = low, high
    row["test"], row["p"] = test, p
    return row


def _p_text(p: float) -> str:
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.3f}"


def _value_text(kind: str, value: float, low: Any = None, high: Any = None, unit: str = "") -> str:
    """A run's figure as every sentence writes it (:mod:`lab.numbers`): a rate
    ``2.0 % (0.4–10.5 %)``, a time ``850.0 ms (800.0–910.0 ms)``."""
    if kind == "rate":
        return format_rate(value, low, high)
    return format_interval(value, low, high, unit=unit)


def _sentence(row: dict[str, Any]) -> str:
    """``SiliconFlow: leak rate up from 2.0 % (0.4–10.5 %) to 41.0 % (27.5–55.1 %),
    p < 0.001``."""
    verdict = next(v for v in VERDICTS if v.name == row["verdict"])
    a = _value_text(row["kind"], row["a_value"], row["a_ci_low"], row["a_ci_high"], verdict.unit)
    b = _value_text(row["kind"], row["b_value"], row["b_ci_low"], row["b_ci_high"], verdict.unit)
    name = f"{row['serving_provider']}: {verdict.label}"
    if row["test"] == "none":
        both = _value_text(row["kind"], row["a_value"], unit=verdict.unit)
        return f"{name} {both} in both runs (nothing to test)"
    direction = "up" if row["b_value"] > row["a_value"] else "down"
    if row["b_value"] == row["a_value"]:
        direction = "unchanged"
    return f"{name} {direction} from {a} to {b}, {_p_text(row['p_adjusted'])}"


def change_sentences(table: pd.DataFrame) -> list[str]:
    """The sentences of the rows that ``changed`` (adjusted p under alpha), the largest
    evidence first, then the table's notes; one sentence saying nothing changed otherwise."""
    changed = table[table["changed"]].sort_values(["p_adjusted", "serving_provider", "verdict"])
    lines = changed["sentence"].tolist()
    if not lines:
        tested = int(table["p"].notna().sum())
        lines = [f"No change with confidence in {tested} comparison{'s' if tested != 1 else ''}."]
    return [*lines, *table.attrs.get("notes", [])]


def compare(a: Any, b: Any, *more: Any, **options: Any) -> pd.DataFrame:
    """``lab.compare``: what changed between two runs, or the A/B replay of one capture under
    two configs.

    - ``lab.compare(a, b, ...)`` – two runs: :func:`compare_runs`.
    - ``lab.compare(captures, config_a, config_b, ...)`` – three arguments: the streams
      whose output changed between two configs (:func:`lab.replay.compare`).
    """
    if more:
        from lab.replay import compare as compare_configs

        return compare_configs(a, b, *more, **options)
    return compare_runs(a, b, **options)
