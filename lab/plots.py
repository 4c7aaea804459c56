"""matplotlib figures over results and tables. Every function returns a ``Figure``.

Nothing here calls ``plt.show()``; notebooks display the returned figure, :func:`write_all`
saves them as PNG files. Importing this module never chooses a matplotlib backend: the
figures do not go through pyplot (``Figure.savefig`` renders PNG itself whatever backend
is set), so the user's backend stays theirs; only the CLI and the tests pick one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from lab import tables
from lab.result import StreamResult, counted_thoughts
from lab.tables import backend_labels

__all__ = [
    "LabFigure",
    "classifier_distribution",
    "gap_histogram",
    "leak_rate_by_backend",
    "stream_timeline",
    "trend",
    "ttft_by_backend",
    "ttft_ecdf",
    "verdict_by_backend",
    "write_all",
]


class LabFigure(Figure):
    """A Figure that shows itself in a notebook without pyplot (``_repr_png_``).

    The figures here are not registered with pyplot (no global state, no leaks in loops), so
    IPython's inline backend does not know them; this hook renders them as PNG.
    """

    def _repr_png_(self) -> bytes:
        import io

        buf = io.BytesIO()
        self.savefig(buf, format="png", dpi=100)
        return buf.getvalue()


def _literal(text: object) -> str:
    """``text`` as matplotlib draws it literally: every ``$`` escaped, so provider and model
    names (``$x$``, ``$\\frac{``) are never parsed as mathtext (which draws them as maths or
    raises on bad syntax). matplotlib shows ``\\$`` as ``$`` outside maths."""
    return str(text).replace("$", r"\$")


def _figure(width: float = 7.0, height: float = 3.6) -> tuple[Figure, Axes]:
    fig = LabFigure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def leak_rate_by_backend(by_backend_table: pd.DataFrame) -> Figure:
    """Horizontal bars: share of streams where reasoning leaked, per serving backend, with
    the Wilson 95 % interval of each rate as an error bar.

    A backend whose interval lies wholly above the rest's pooled rate (``leak_worse``) is
    drawn dark and labelled "worse"; the rest's rate is a tick on its bar.
    """
    df = by_backend_table.sort_values("leak_rate")
    fig, ax = _figure(7.0, max(2.4, 0.45 * len(df) + 1.2))
    if df.empty:
        ax.text(0.5, 0.5, "no streams", ha="center", va="center")
        return fig
    worse = df["leak_worse"].to_numpy(bool) if "leak_worse" in df else [False] * len(df)
    colors = ["#8b0000" if w else "#f08080" for w in worse]
    rate = df["leak_rate"].to_numpy(float) * 100
    ys = list(range(len(df)))  # numeric positions: error bars and ticks share one axis
    bars = ax.barh(ys, rate, color=colors)
    ax.set_yticks(ys, [_literal(b) for b in df["serving_provider"]])
    has_ci = {"leak_rate_ci_low", "leak_rate_ci_high"} <= set(df.columns)
    if has_ci:
        low = df["leak_rate_ci_low"].to_numpy(float) * 100
        high = df["leak_rate_ci_high"].to_numpy(float) * 100
        _wilson_bars(ax, ys, rate, low, high)
    if "rest_leak_rate" in df:
        _rest_marks(ax, ys, df["rest_leak_rate"].to_numpy(float) * 100)
    ends = [h if h == h else r for h, r in zip(high, rate, strict=True)] if has_ci else rate
    for i, (bar, leaked, total) in enumerate(zip(bars, df["leaked"], df["streams"], strict=True)):
        note = f"{int(leaked)}/{int(total)}" + ("  worse" if worse[i] else "")
        ax.annotate(
            note,
            (ends[i], bar.get_y() + bar.get_height() / 2),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    ax.set_xlabel("streams with leaked reasoning (%)")
    ax.set_xlim(0, 125)
    ax.set_title("Reasoning leaks by serving backend")
    if has_ci or "rest_leak_rate" in df:
        ax.legend(loc="lower right", fontsize=7)
    return fig


def _wilson_bars(
    ax: Axes, ys: list[int], rate: np.ndarray, low: np.ndarray, high: np.ndarray
) -> None:
    """Each backend's rate (percent) with its Wilson interval as an error bar."""
    ax.errorbar(
        rate,
        ys,
        xerr=[rate - low, high - rate],
        fmt="none",
        ecolor="#333333",
        elinewidth=1,
        capsize=3,
        label="Wilson 95 % interval",
    )


def _rest_marks(ax: Axes, ys: list[int], rest: np.ndarray) -> None:
    """A mark at each backend's pooled rate of the other backends (percent; NaN: none)."""
    known = [i for i in ys if rest[i] == rest[i]]  # NaN: no rest to compare with
    if known:
        ax.scatter(
            [rest[i] for i in known],
            known,
            marker="|",
            s=160,
            color="#1f77b4",
            zorder=3,
            label="rest of the backends (pooled)",
        )


def verdict_by_backend(card: pd.DataFrame, verdict: str) -> Figure:
    """One verdict of the backend scorecard (:func:`lab.tables.scorecard`): the rate per
    serving backend as a dot with its Wilson interval, the rest's pooled rate as a tick, and
    the backends worse than the rest with confidence (``{verdict}_worse``) drawn dark red
    and labelled "worse". Backends with no trial of the verdict are left out."""
    from lab.scorecard import VERDICT_LABELS

    label = VERDICT_LABELS.get(verdict, verdict).split(" (")[0]  # stall's gloss left out
    df = card[card[f"{verdict}_n"] > 0].sort_values(f"{verdict}_rate", kind="mergesort")
    fig, ax = _figure(7.0, max(2.4, 0.45 * len(df) + 1.2))
    ax.set_title(_literal(f"{label[:1].upper()}{label[1:]}, by serving backend"))
    if df.empty:
        ax.text(0.5, 0.5, "no stream to judge", ha="center", va="center")
        return fig
    ys = list(range(len(df)))
    rate = df[f"{verdict}_rate"].to_numpy(float) * 100
    low = df[f"{verdict}_ci_low"].to_numpy(float) * 100
    high = df[f"{verdict}_ci_high"].to_numpy(float) * 100
    worse = df[f"{verdict}_worse"].to_numpy(bool)
    _wilson_bars(ax, ys, rate, low, high)
    ax.scatter(rate, ys, color=["#8b0000" if w else "#f08080" for w in worse], zorder=3)
    _rest_marks(ax, ys, df[f"{verdict}_rest"].to_numpy(float) * 100)
    ax.set_yticks(ys, [_literal(b) for b in df["serving_provider"]])
    for i, n in enumerate(df[f"{verdict}_n"]):
        ax.annotate(
            f"n = {int(n)}" + ("  worse" if worse[i] else ""),
            (high[i], i),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    ax.set_xlabel(f"{label} (%)")
    ax.set_xlim(0, 125)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, fontsize=7)
    return fig


def ttft_by_backend(stream_table: pd.DataFrame) -> Figure:
    """Box plot of time to first token (ms) per serving backend."""
    df = stream_table.dropna(subset=["ttft_ms"]).copy()
    df["serving_provider"] = backend_labels(df)
    groups = sorted(df["serving_provider"].unique())
    fig, ax = _figure(7.0, 3.6)
    if not groups:
        ax.text(0.5, 0.5, "no timing data", ha="center", va="center")
        return fig
    data = [df.loc[df["serving_provider"] == g, "ttft_ms"].to_numpy() for g in groups]
    ax.boxplot(data, tick_labels=[_literal(g) for g in groups])
    ax.set_ylabel("TTFT (ms)")
    ax.set_title("Time to first token by serving backend")
    ax.tick_params(axis="x", rotation=30)
    return fig


def ttft_ecdf(stream_table: pd.DataFrame, column: str = "ttft_ms") -> Figure:
    """The empirical distribution (ECDF) of time to first token per serving backend: for
    each backend the share of its streams whose first token came by time *t*.

    ``column`` picks the figure: ``ttft_ms`` (first text, reasoning or tool call),
    ``ttft_content_ms`` (first visible text) or ``ttfb_ms`` (first byte). Streams without
    per-read timing have none and are left out (the legend counts the streams drawn).
    """
    from lab.tables import backend_labels

    df = stream_table.dropna(subset=[column]).copy()
    df["serving_provider"] = backend_labels(df)
    fig, ax = _figure(7.0, 3.8)
    groups = sorted(df["serving_provider"].unique())
    if not groups:
        ax.text(0.5, 0.5, "no timing data", ha="center", va="center")
        return fig
    for g in groups:
        values = np.sort(df.loc[df["serving_provider"] == g, column].to_numpy(float))
        shares = np.arange(1, len(values) + 1) / len(values)
        ax.step(values, shares, where="post", label=_literal(f"{g} ({len(values)})"))
    ax.set_xscale("log")
    ax.set_xlabel(f"{column.removesuffix('_ms')} (ms, log scale)")
    ax.set_ylabel("share of streams")
    ax.set_ylim(0, 1.02)
    ax.set_title("Time to first token by serving backend (ECDF)")
    ax.legend(loc="lower right", fontsize=7)
    return fig


def gap_histogram(gaps: pd.DataFrame, *, stall_s: float | None = None) -> Figure:
    """Histogram of the gaps between reads carrying visible text (:func:`lab.tables.gaps`),
    one outline per serving backend, on log-spaced bins; ``stall_s`` (seconds) draws the
    stall threshold. Each backend's counts are shares of its own gaps, so a backend with
    many streams does not drown the others.
    """
    fig, ax = _figure(7.0, 3.8)
    df = gaps[gaps["gap_ms"] > 0]
    if df.empty:
        ax.text(0.5, 0.5, "no gaps (no stream had two reads with visible text)", ha="center")
        return fig
    labels = df["serving_provider"].astype("object").fillna("(direct)")
    low, high = float(df["gap_ms"].min()), float(df["gap_ms"].max())
    bins = np.geomspace(low, high * 1.0001, 40) if high > low else np.array([low * 0.9, low * 1.1])
    for g in sorted(labels.unique()):
        values = df.loc[labels == g, "gap_ms"].to_numpy(float)
        weights = np.full(len(values), 1.0 / len(values))
        ax.hist(
            values,
            bins=bins.tolist(),
            weights=weights,
            histtype="step",
            linewidth=1.4,
            label=_literal(f"{g} ({len(values)} gaps)"),
        )
    if stall_s is not None:
        ax.axvline(stall_s * 1000.0, color="#d62728", linestyle="--", linewidth=1)
        ax.annotate(
            f"stall > {stall_s:g} s",
            (stall_s * 1000.0, 1),
            xycoords=("data", "axes fraction"),
            xytext=(-3, -12),
            textcoords="offset points",
            ha="right",
            fontsize=7,
            color="#d62728",
        )
    ax.set_xscale("log")
    ax.set_xlabel("gap between reads with visible text (ms, log scale)")
    ax.set_ylabel("share of the backend's gaps")
    ax.set_title("Inter-chunk gaps by serving backend")
    ax.legend(loc="upper right", fontsize=7)
    return fig


def trend(trend_table: pd.DataFrame, verdict: str = "leak_rate") -> Figure:
    """One verdict of :func:`lab.tables.trends` over time: per backend the value of each
    period with its interval (error bars), and a dashed line at the period where the series
    changed level (``change_point``, with its permutation p-value in the legend)."""
    df = trend_table[trend_table["verdict"] == verdict]
    fig, ax = _figure(7.0, 3.6)
    if df.empty:
        known = ", ".join(sorted(trend_table["verdict"].unique())) or "none"
        ax.text(0.5, 0.5, f"no {verdict} trend (verdicts: {known})", ha="center", va="center")
        return fig
    for backend, part in df.groupby("serving_provider", sort=True):
        part = part.sort_values("period")
        x = part["period"].dt.tz_convert(None).to_numpy()
        y = part["value"].to_numpy(float)
        low = np.clip(y - part["ci_low"].to_numpy(float), 0, None)
        high = np.clip(part["ci_high"].to_numpy(float) - y, 0, None)
        line = ax.errorbar(
            x, y, yerr=[np.nan_to_num(low), np.nan_to_num(high)], marker="o", capsize=3,
            label=_literal(backend),
        )  # fmt: skip
        for _, row in part[part["change_point"]].iterrows():
            ax.axvline(
                row["period"].tz_convert(None),
                color=line[0].get_color(),
                linestyle="--",
                label=_literal(f"{backend}: changed here (p = {row['change_p']:.2g})"),
            )
    rate = verdict.endswith("_rate")
    ax.set_ylabel("share of streams" if rate else verdict)
    if rate:
        ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"{verdict.replace('_', ' ')} per period, by backend")
    ax.legend(loc="best", fontsize=7)
    fig.autofmt_xdate()
    return fig


def classifier_distribution(stream_table: pd.DataFrame) -> Figure:
    """Bar chart of error outcomes: classifier (or error type when no classifier fired)."""
    df = stream_table[stream_table["error_type"].notna()]
    labels = df["classifier"].fillna("type:" + df["error_type"].astype(str))
    counts = labels.value_counts().sort_values()
    fig, ax = _figure(7.0, max(2.4, 0.45 * len(counts) + 1.2))
    if counts.empty:
        ax.text(0.5, 0.5, "no errors", ha="center", va="center")
        ax.set_axis_off()
        return fig
    ax.barh([_literal(c) for c in counts.index], counts.to_numpy(), color="#1f77b4")
    ax.set_xlabel("streams")
    ax.set_title("Error classifiers")
    return fig


def stream_timeline(result: StreamResult) -> Figure:
    """Arrival time vs cumulative characters: content, reasoning, and text moved by guards.

    Guard events are marked with vertical lines at the time their raw chunk arrived.
    """
    fig, ax = _figure(8.0, 3.8)
    t_text, y_text, t_reason, y_reason = [], [], [], []
    n_text = n_reason = 0
    for i, chunk in enumerate(result.chunks):
        t = result.chunk_time_ns(i)
        if t is None:
            continue
        t_ms = t / 1e6
        if chunk.content:
            n_text += len(chunk.content)
            t_text.append(t_ms)
            y_text.append(n_text)
        r = sum(len(th.content) for th in counted_thoughts(chunk))
        if r:
            n_reason += r
            t_reason.append(t_ms)
            y_reason.append(n_reason)
    if t_text:
        ax.step(t_text, y_text, where="post", label="content", color="#2ca02c")
    if t_reason:
        ax.step(t_reason, y_reason, where="post", label="reasoning", color="#9467bd")
    from lab.tables import _event_read

    by_guard: dict[str, list[tuple[float, str]]] = {}
    for e in result.guard_events:
        _, t_event = _event_read(result, e.attempt, e.seq)
        if t_event is not None:
            by_guard.setdefault(e.guard, []).append((t_event, e.moved))
    markers = iter(["v", "^", "D", "s", "o", "P"])
    for guard, points in by_guard.items():
        xs = [t for t, _ in points]
        for x in xs:
            ax.axvline(x, color="#d62728", linestyle=":", linewidth=0.8, alpha=0.6)
        moved = sum(len(m) for _, m in points)
        ax.plot(
            xs,
            [0] * len(xs),
            linestyle="none",
            marker=next(markers, "o"),
            color="#d62728",
            markersize=7,
            clip_on=False,
            label=_literal(f"{guard}: {len(points)} event(s), {moved} chars moved"),
        )
    moved_labelled = bool(by_guard)
    ax.set_xlabel("arrival (ms since request)")
    ax.set_ylabel("cumulative characters")
    title = f"{result.model or result.provider} via {result.serving_provider or '?'}"
    ax.set_title(_literal(title))
    ax.set_ylim(bottom=0)
    if t_text or t_reason or moved_labelled:
        ax.legend(loc="upper left", fontsize=8)
    return fig


def write_all(
    results: Sequence[StreamResult] | Iterable[StreamResult], out: str | Path
) -> dict[str, Path]:
    """Save the standard figures as PNG files under ``out``; returns name -> path."""
    results = list(results)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    st = tables.streams(results)
    figures = {
        "leaks_by_backend": leak_rate_by_backend(tables.by_backend(st)),
        "ttft_by_backend": ttft_by_backend(st),
        "ttft_ecdf": ttft_ecdf(st),
        "gaps": gap_histogram(tables.gaps(results)),
        "classifiers": classifier_distribution(st),
    }
    leaked = [r for r in results if any(e.guard in tables.LEAK_GUARDS for e in r.guard_events)]
    if leaked or results:
        figures["timeline"] = stream_timeline((leaked or results)[0])
    written = {}
    for name, fig in figures.items():
        path = out / f"{name}.png"
        fig.savefig(path, dpi=110)
        written[name] = path
    return written
