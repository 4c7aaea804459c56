"""pandas tables over :class:`~lab.result.StreamResult` lists.

Column names are stable (notebooks and users rely on them); see ``docs/tables.md`` for the
meaning of each and its OpenTelemetry GenAI equivalent where one exists.

- :func:`streams` – one row per logical request.
- :func:`leaks` – one row per guard event that moved or dropped text.
- :func:`by_backend` – one row per serving backend.
- :func:`classifiers` – error classifier counts.
- :func:`attempts` – one row per degradation attempt (HTTP exchange).

What each takes: :func:`streams`, :func:`by_backend`, :func:`classifiers` and
:func:`backend_labels` take the results (a ``list`` of ``StreamResult`` or the
:class:`~lab.result.Results` ``replay()`` returns) **or** the streams table, so a filtered
table works too (``by_backend(st[st.model == m])``). :func:`leaks` and :func:`attempts` need
the results themselves (guard events and attempts are not in the streams table); given a
DataFrame or anything else that is not results, they raise a ``TypeError`` saying so.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from lab.result import StreamResult

__all__ = [
    "LEAK_GUARDS",
    "STREAM_COLUMNS",
    "attempts",
    "backend_labels",
    "by_backend",
    "classifiers",
    "leaks",
    "streams",
]

LEAK_GUARDS = frozenset({"think_stripper", "spill_guard", "cleanup"})
"""Guards whose events mean reasoning leaked into visible content."""

STREAM_COLUMNS = [
    "stream_id",
    "provider",
    "model",
    "serving_provider",
    "leaked",
    "leak_guards",
    "leak_chars",
    "guard_events",
    "classifier",
    "error_type",
    "error_message",
    "retryable",
    "attempts",
    "degradation_path",
    "finish_reason",
    "ttft_ms",
    "duration_ms",
    "n_chunks",
    "text_chars",
    "reasoning_chars",
    "n_tool_calls",
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cached_tokens",
    "cost",
    "tokens_per_s",
    "outcome",
    "anomalies",
    "divergence",
    "session",
    "source",
]


def _need_results(results: object, fn: str) -> Iterable[StreamResult]:
    """``results`` checked to be StreamResults (a clear TypeError instead of an
    AttributeError deep inside when a table, a path or a single result is passed)."""
    if isinstance(results, StreamResult):
        raise TypeError(f"tables.{fn}() takes a list of results; for one result: {fn}([result])")
    if isinstance(results, pd.DataFrame):
        raise TypeError(
            f"tables.{fn}() needs the replay results (a list of StreamResult, e.g. "
            f"replay(...)), not a table: the streams table holds no "
            f"{'guard events' if fn == 'leaks' else 'per-attempt rows'}"
        )
    if isinstance(results, (str, bytes)) or not isinstance(results, Iterable):
        raise TypeError(
            f"tables.{fn}() needs a list of StreamResult (e.g. replay(...)), "
            f"not {type(results).__name__}"
        )
    items = results if isinstance(results, list) else list(results)
    for item in items:
        if not isinstance(item, StreamResult):
            raise TypeError(
                f"tables.{fn}() needs a list of StreamResult (e.g. replay(...)); "
                f"it got a list holding {type(item).__name__}"
            )
    return items


def _stream_table(data: object, fn: str) -> pd.DataFrame:
    """The streams table: ``data`` itself, or :func:`streams` of results."""
    if isinstance(data, pd.DataFrame):
        missing = [c for c in ("stream_id", "provider", "serving_provider") if c not in data]
        if missing:
            raise TypeError(
                f"tables.{fn}() takes the streams table (tables.streams(results)) or the "
                f"results; this DataFrame has no {', '.join(missing)} column"
            )
        return data
    return streams(_need_results(data, fn))


def _meta_text(r: StreamResult, key: str) -> str | None:
    """A text field of the recorded request's metadata (``session``, ``source``), if any."""
    value = r.meta.get(key) if r.meta else None
    return None if value is None else str(value)


def _duration_ms(r: StreamResult) -> float | None:
    """Last read of the final attempt (read offsets are per attempt, like ``ttft_ms``)."""
    if not r.attempts:
        return None
    times = r.read_t_ns.get(r.attempts[-1].attempt) or []
    return times[-1] / 1e6 if times else None


def _anomalies(r: StreamResult) -> list[str]:
    try:
        from lab.anomalies import detect
    except ImportError:  # pragma: no cover - anomalies module is optional while building
        return []
    return detect(r)


def _call_first(r: StreamResult, first: int | None) -> bool:
    """Is the first output chunk (``first``, the one ``ttft_ms`` times) a tool call alone?

    Adapters emit a call once its argument deltas are assembled, so its time is the call's
    completion, not the first generated token: ``duration - ttft`` would be the last few ms
    of the stream and ``tokens_per_s`` thousands.
    """
    if first is None:
        return False
    chunk = r.chunks[first]
    return not (chunk.content or chunk.thoughts)


def streams(results: Iterable[StreamResult] | pd.DataFrame) -> pd.DataFrame:
    """One row per logical request (columns: :data:`STREAM_COLUMNS`).

    Given the streams table itself (a DataFrame with these columns), returns it unchanged.
    """
    if isinstance(results, pd.DataFrame):
        return _stream_table(results, "streams")
    rows = []
    for r in _need_results(results, "streams"):
        leak_events = [e for e in r.guard_events if e.guard in LEAK_GUARDS and e.moved]
        usage = r.usage
        first = r.first_output()
        ttft = r.ttft_ms
        duration = _duration_ms(r)
        out_tokens = usage.output_tokens if usage else None
        tps = None
        if (
            out_tokens
            and duration
            and ttft is not None
            and duration > ttft
            and not _call_first(r, first)  # an assembled call arrives last: no generation time
        ):
            tps = out_tokens / ((duration - ttft) / 1000.0)
        rows.append(
            {
                "stream_id": r.stream_id,
                "provider": r.provider,
                "model": r.model,
                "serving_provider": r.serving_provider,
                "leaked": bool(leak_events),
                "leak_guards": ",".join(sorted({e.guard for e in leak_events})),
                "leak_chars": sum(len(e.moved) for e in leak_events),
                "guard_events": len(r.guard_events),
                "classifier": r.classifier,
                "error_type": r.error.type if r.error else None,
                "error_message": r.error.message if r.error else None,
                "retryable": r.error.retryable if r.error else None,
                "attempts": len(r.attempts),
                "degradation_path": r.degradation_path,
                "finish_reason": r.finish_reason,
                "ttft_ms": ttft,
                "duration_ms": duration,
                "n_chunks": len(r.chunks),
                "text_chars": len(r.text),
                "reasoning_chars": len(r.reasoning),
                "n_tool_calls": len(r.function_calls),
                "input_tokens": usage.input_tokens if usage else None,
                "output_tokens": out_tokens,
                "reasoning_tokens": usage.reasoning_tokens if usage else None,
                "cached_tokens": usage.cache_read_tokens if usage else None,
                # a priced model's cost over no usage at all is 0.0: no usage, no cost known
                "cost": r.cost if usage is not None else None,
                "tokens_per_s": tps,
                "outcome": r.outcome,
                "anomalies": ",".join(_anomalies(r)),
                "divergence": "; ".join(r.divergence),
                "session": _meta_text(r, "session"),
                "source": _meta_text(r, "source"),
            }
        )
    df = pd.DataFrame(rows, columns=STREAM_COLUMNS)
    for col in ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens"):
        df[col] = df[col].astype("Int64")
    for col in ("ttft_ms", "duration_ms", "cost", "tokens_per_s"):
        df[col] = df[col].astype("float64")
    return df


LEAK_COLUMNS = [
    "stream_id",
    "serving_provider",
    "attempt",
    "seq",
    "read_seq",
    "offset",
    "t_ms",
    "guard",
    "rule",
    "moved",
    "moved_chars",
]


def leaks(results: Iterable[StreamResult]) -> pd.DataFrame:
    """One row per guard event that moved or dropped text (where reasoning leaked, etc.).

    Needs the results (guard events are not in the streams table).
    """
    rows = []
    for r in _need_results(results, "leaks"):
        for e in r.guard_events:
            if not e.moved:
                continue
            read_seq, t_ms = _event_read(r, e.attempt, e.seq)
            rows.append(
                {
                    "stream_id": r.stream_id,
                    "serving_provider": r.serving_provider,
                    "attempt": e.attempt,
                    "seq": e.seq,
                    "read_seq": read_seq,
                    "offset": e.offset,
                    "t_ms": t_ms,
                    "guard": e.guard,
                    "rule": e.detail.get("rule"),
                    "moved": e.moved,
                    "moved_chars": len(e.moved),
                }
            )
    return pd.DataFrame(rows, columns=LEAK_COLUMNS)


def _event_read(r: StreamResult, attempt: int, seq: int) -> tuple[int | None, float | None]:
    """The read that completed SSE event ``seq`` of ``attempt`` and its arrival time."""
    best = None
    for o in r.origins:
        if o.attempt == attempt and o.event <= seq:
            best = o
        elif o.attempt == attempt and o.event > seq:
            break
    if best is None:
        return None, None
    times = r.read_t_ns.get(attempt) or []
    t = times[best.read_seq] / 1e6 if 0 <= best.read_seq < len(times) else None
    return best.read_seq, t


def _unnamed_backend(provider: object) -> str | None:
    """Label for streams with no serving backend in the stream."""
    if not isinstance(provider, str):
        return None
    if _names_backend(provider):  # OpenRouter names a backend on every chunk
        return f"{provider} (no backend: failed before streaming)"
    return f"{provider} (direct)"


def _names_backend(provider: str) -> bool:
    """Does this provider's stream name its serving backend (the adapter's ``names_backend``)?"""
    from lab.providers import PROVIDERS, get_adapter

    return provider in PROVIDERS and get_adapter(provider).names_backend


def backend_labels(stream_table: pd.DataFrame | Iterable[StreamResult]) -> pd.Series:
    """The serving backend of each stream row, labelled where the stream named none.

    Takes the streams table or the results.

    Direct providers have no separate backend: the provider itself served the stream
    (``"openai (direct)"``). Used by :func:`by_backend` and the per-backend plots alike.
    """
    stream_table = _stream_table(stream_table, "backend_labels")
    return (
        stream_table["serving_provider"]
        .fillna(stream_table["provider"].astype("object").map(_unnamed_backend))
        .fillna("(unknown)")
    )


def by_backend(stream_table: pd.DataFrame | Iterable[StreamResult]) -> pd.DataFrame:
    """One row per serving backend: streams, leak rate, error rate, classifiers, TTFT, speed.

    Takes the streams table (filter it first to narrow the view) or the results.
    """
    df = _stream_table(stream_table, "by_backend").copy()
    df["serving_provider"] = backend_labels(df)
    df["errored"] = df["error_type"].notna()
    g = df.groupby("serving_provider", sort=True)
    out = pd.DataFrame(
        {
            "streams": g.size(),
            "leaked": g["leaked"].sum(),
            "leak_rate": g["leaked"].mean(),
            "errors": g["errored"].sum(),
            "error_rate": g["errored"].mean(),
            "median_ttft_ms": g["ttft_ms"].median(),
            "median_tokens_per_s": g["tokens_per_s"].median(),
            "output_tokens": g["output_tokens"].sum(min_count=1),
            "cost": g["cost"].sum(min_count=1),
        }
    )
    cls = df.dropna(subset=["classifier"])
    if len(cls):
        counts = cls.groupby(["serving_provider", "classifier"]).size().unstack(fill_value=0)
        counts.columns = [f"classifier_{c}" for c in counts.columns]
        out = out.join(counts).fillna({c: 0 for c in counts.columns})
        out = out.astype({c: "int64" for c in counts.columns})
    out = out.reset_index().sort_values(["leak_rate", "streams"], ascending=[False, False])
    return out.reset_index(drop=True)


def classifiers(stream_table: pd.DataFrame | Iterable[StreamResult]) -> pd.DataFrame:
    """Counts of each error classifier (and error type) over the streams.

    Takes the streams table or the results.
    """
    stream_table = _stream_table(stream_table, "classifiers")
    df = stream_table[stream_table["error_type"].notna()]
    if df.empty:
        return pd.DataFrame(columns=["classifier", "error_type", "streams"])
    out = (
        df.assign(classifier=df["classifier"].fillna("(none)"))
        .groupby(["classifier", "error_type"])
        .size()
        .rename("streams")
        .reset_index()
        .sort_values(["streams", "classifier", "error_type"], ascending=[False, True, True])
    )
    return out.reset_index(drop=True)


ATTEMPT_COLUMNS = [
    "stream_id",
    "provider",
    "model",
    "attempt",
    "label",
    "status",
    "end_reason",
    "committed",
    "degradable",
    "error",
    "body_keys",
    "n_reads",
    "final",
]


def attempts(results: Iterable[StreamResult]) -> pd.DataFrame:
    """One row per degradation attempt (HTTP exchange) of every logical request.

    Needs the results (the streams table has one row per request, not per attempt).
    """
    rows = []
    for r in _need_results(results, "attempts"):
        for a in r.attempts:
            rows.append(
                {
                    "stream_id": r.stream_id,
                    "provider": r.provider,
                    "model": r.model,
                    "attempt": a.attempt,
                    "label": a.label,
                    "status": a.status,
                    "end_reason": a.end_reason,
                    "committed": a.committed,
                    "degradable": a.degradable,
                    "error": a.error,
                    "body_keys": ",".join(a.body_keys),
                    "n_reads": a.n_reads,
                    "final": a.attempt == len(r.attempts) - 1,
                }
            )
    df = pd.DataFrame(rows, columns=ATTEMPT_COLUMNS)
    df["status"] = df["status"].astype("Int64")
    return df
