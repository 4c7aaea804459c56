"""lab.tables and lab.plots over hand-built StreamResults (exact timings) and replayed streams."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd
import pytest

from lab import plots, tables
from lab.model import (
    FunctionCall,
    GuardEvent,
    ProcessedChunk,
    ProviderError,
    ThoughtLogEntry,
    Usage,
)
from lab.replay import replay_sse
from lab.result import AttemptInfo, ChunkOrigin, StreamResult

MS = 1_000_000  # ns


def _ok_attempt(n: int = 0, label: str = "default", reads: int = 3) -> AttemptInfo:
    return AttemptInfo(
        attempt=n,
        label=label,
        status=200,
        end_reason="eof",
        committed=True,
        body_keys=["messages", "model", "stream"],
        n_reads=reads,
        n_events=reads,
    )


def leaky() -> StreamResult:
    """DeepInfra stream whose first content carried a think block the stripper moved."""
    chunks = [
        ProcessedChunk(
            type="text",
            content="",
            thoughts=[ThoughtLogEntry(kind="raw", content="plan it")],
            serving_provider="DeepInfra",
        ),
        ProcessedChunk(type="text", content="Answer: 42.", serving_provider="DeepInfra"),
        ProcessedChunk(
            type="done",
            serving_provider="DeepInfra",
            metadata={"finish_reason": "stop", "usage": Usage(input_tokens=12, output_tokens=40)},
        ),
    ]
    return StreamResult(
        stream_id="s-leak",
        provider="openrouter",
        model="z-ai/glm-4.5",
        chunks=chunks,
        text="Answer: 42.",
        reasoning="plan it",
        thoughts=[ThoughtLogEntry(kind="raw", content="plan it")],
        serving_provider="DeepInfra",
        guard_events=[
            GuardEvent(
                guard="think_stripper",
                stream_id="s-leak",
                attempt=0,
                seq=2,
                offset=0,
                moved="plan it",
                detail={"rule": "think_block"},
            ),
            GuardEvent(guard="dedup", stream_id="s-leak", attempt=0, seq=3, moved=""),
        ],
        finish_reason="stop",
        usage=Usage(input_tokens=12, output_tokens=40, reasoning_tokens=7, cache_read_tokens=4),
        attempts=[_ok_attempt()],
        origins=[ChunkOrigin(0, 2, 0), ChunkOrigin(0, 3, 1), ChunkOrigin(0, 5, 2)],
        read_t_ns={0: [100 * MS, 300 * MS, 500 * MS]},
        facts={"done_seen": True, "unterminated_tail": False, "finish_reasons": ["stop"]},
        cost=0.0012,
        outcome="stop",
    )


def errored() -> StreamResult:
    """Chutes stream that failed mid-stream with a 502 after some text."""
    error = ProviderError(
        type="provider_overloaded", message="Network connection lost.", retryable=True, status=502
    )
    chunks = [
        ProcessedChunk(type="text", content="Partial", serving_provider="Chutes"),
        ProcessedChunk(type="error", error=error, serving_provider="Chutes"),
    ]
    return StreamResult(
        stream_id="s-err",
        provider="openrouter",
        model="deepseek/deepseek-r1",
        chunks=chunks,
        text="Partial",
        error=error,
        classifier="model_error",
        serving_provider="Chutes",
        finish_reason="error",
        attempts=[_ok_attempt(reads=2)],
        origins=[ChunkOrigin(0, 1, 0), ChunkOrigin(0, 2, 1)],
        read_t_ns={0: [50 * MS, 80 * MS]},
        facts={"done_seen": False, "finish_reasons": ["error"]},
        outcome="stop",
    )


def degraded_tool_call() -> StreamResult:
    """DeepSeek direct: attempt 0 rejected (400 min_p), attempt 1 made a tool call."""
    call = FunctionCall(name="read_file", args={"path": "a.md"}, id="call_1")
    chunks = [
        ProcessedChunk(
            type="function_call",
            function_call=call,
            metadata={"finish_reason": "tool_calls", "usage": Usage(output_tokens=10)},
        )
    ]
    first = AttemptInfo(
        attempt=0,
        label="default",
        status=400,
        error="min_p is not supported",
        degradable="generic_400",
        end_reason="http_error",
        body_keys=["messages", "min_p", "model", "stream"],
    )
    return StreamResult(
        stream_id="s-tool",
        provider="deepseek",
        model="deepseek-chat",
        chunks=chunks,
        function_calls=[call],
        finish_reason="tool_calls",
        usage=Usage(input_tokens=30, output_tokens=10),
        attempts=[first, _ok_attempt(1, "targeted_drop_min_p", reads=1)],
        origins=[ChunkOrigin(1, 4, 0)],
        read_t_ns={0: [], 1: [200 * MS]},
        facts={"done_seen": True, "finish_reasons": ["tool_calls"]},
        outcome="continue",
    )


@pytest.fixture
def results() -> list[StreamResult]:
    return [leaky(), errored(), degraded_tool_call()]


# --------------------------------------------------------------------------- streams


def test_streams_has_one_row_per_result_with_the_documented_columns(results):
    st = tables.streams(results)
    assert list(st.columns) == tables.STREAM_COLUMNS
    assert st["stream_id"].tolist() == ["s-leak", "s-err", "s-tool"]


def test_streams_row_for_a_leaky_stream(results):
    row = tables.streams(results).iloc[0]
    assert row["serving_provider"] == "DeepInfra"
    assert (row["leaked"], row["leak_guards"], row["leak_chars"]) == (True, "think_stripper", 7)
    assert row["guard_events"] == 2
    assert (row["text_chars"], row["reasoning_chars"], row["n_tool_calls"]) == (11, 7, 0)
    assert row["ttft_ms"] == 100.0 and row["duration_ms"] == 500.0
    assert row["tokens_per_s"] == pytest.approx(40 / 0.4)
    assert (row["input_tokens"], row["output_tokens"]) == (12, 40)
    assert (row["reasoning_tokens"], row["cached_tokens"]) == (7, 4)
    assert row["cost"] == 0.0012 and row["finish_reason"] == "stop"
    assert row["anomalies"] == ""
    assert pd.isna(row["error_type"]) and row["degradation_path"] == "default"


def test_streams_row_for_an_errored_stream(results):
    row = tables.streams(results).iloc[1]
    assert (row["error_type"], row["retryable"], row["classifier"]) == (
        "provider_overloaded",
        True,
        "model_error",
    )
    assert row["error_message"] == "Network connection lost."
    assert row["anomalies"] == "error_in_200_stream"
    assert pd.isna(row["input_tokens"]) and pd.isna(row["tokens_per_s"])


def test_streams_row_for_a_degraded_request(results):
    row = tables.streams(results).iloc[2]
    assert (row["attempts"], row["degradation_path"]) == (2, "default>targeted_drop_min_p")
    assert row["n_tool_calls"] == 1 and row["ttft_ms"] == 200.0
    assert pd.isna(row["serving_provider"])


def test_streams_column_dtypes_are_stable(results):
    st = tables.streams(results)
    for col in ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens"):
        assert st[col].dtype == "Int64"
    for col in ("ttft_ms", "duration_ms", "cost", "tokens_per_s"):
        assert st[col].dtype == "float64"


def test_empty_inputs_give_empty_tables_with_columns():
    st = tables.streams([])
    assert list(st.columns) == tables.STREAM_COLUMNS and st.empty
    assert tables.leaks([]).empty and list(tables.leaks([]).columns) == tables.LEAK_COLUMNS
    assert tables.attempts([]).empty
    assert list(tables.attempts([]).columns) == tables.ATTEMPT_COLUMNS
    assert tables.by_backend(st).empty
    assert list(tables.classifiers(st).columns) == ["classifier", "error_type", "streams"]


def test_duration_and_speed_come_from_the_attempt_that_streamed():
    r = leaky()
    # A pre-commit error made attempt 0 retry after 2.5 s; attempt 1 streamed the answer.
    r.attempts = [
        AttemptInfo(attempt=0, label="default", status=200, end_reason="retried"),
        _ok_attempt(1, "targeted_drop_min_p"),
    ]
    r.read_t_ns = {0: [2500 * MS], 1: [100 * MS, 300 * MS, 500 * MS]}
    r.origins = [ChunkOrigin(1, o.event, o.read_seq) for o in r.origins]
    r.guard_events = []
    row = tables.streams([r]).iloc[0]
    assert (row["ttft_ms"], row["duration_ms"]) == (100.0, 500.0)
    assert row["tokens_per_s"] == pytest.approx(40 / 0.4)


# --------------------------------------------------------------------------- leaks


def test_leaks_lists_every_guard_event_that_moved_text(results):
    lk = tables.leaks(results)
    assert lk.to_dict("records") == [
        {
            "stream_id": "s-leak",
            "serving_provider": "DeepInfra",
            "attempt": 0,
            "seq": 2,
            "read_seq": 0,
            "offset": 0,
            "t_ms": 100.0,
            "guard": "think_stripper",
            "rule": "think_block",
            "leak_kind": "think",
            "moved": "plan it",
            "moved_chars": 7,
        }
    ]


def test_leak_on_an_event_without_its_own_chunk_is_timed_by_the_previous_read():
    r = leaky()
    r.guard_events[0] = r.guard_events[0].model_copy(update={"seq": 4})
    row = tables.leaks([r]).iloc[0]
    assert (row["seq"], row["read_seq"], row["t_ms"]) == (4, 1, 300.0)


# --------------------------------------------------------------------------- by_backend


def test_by_backend_aggregates_per_serving_provider_sorted_by_leak_rate(results):
    bb = tables.by_backend(tables.streams(results))
    # A direct provider has no separate backend: it is its own row.
    assert bb["serving_provider"].tolist() == ["DeepInfra", "Chutes", "deepseek (direct)"]
    first = bb.iloc[0]
    assert (first["streams"], first["leaked"], first["leak_rate"]) == (1, 1, 1.0)
    assert (first["errors"], first["error_rate"]) == (0, 0.0)
    assert first["median_ttft_ms"] == 100.0 and first["output_tokens"] == 40
    chutes = bb.iloc[1]
    assert (chutes["errors"], chutes["error_rate"], chutes["classifier_model_error"]) == (1, 1.0, 1)
    assert bb.iloc[0]["classifier_model_error"] == 0
    assert pd.isna(chutes["cost"]) and bb.iloc[0]["cost"] == 0.0012


def test_by_backend_without_any_classifier_has_no_classifier_columns():
    bb = tables.by_backend(tables.streams([leaky()]))
    assert [c for c in bb.columns if c.startswith("classifier_")] == []


# --------------------------------------------------------------------------- classifiers


def test_classifiers_counts_errored_streams_by_classifier_and_type(results):
    r2 = errored()
    r2.stream_id, r2.classifier = "s-err2", None
    r3 = errored()
    r3.stream_id = "s-err3"
    cl = tables.classifiers(tables.streams([*results, r2, r3]))
    assert cl.to_dict("records") == [
        {"classifier": "model_error", "error_type": "provider_overloaded", "streams": 2},
        {"classifier": "(none)", "error_type": "provider_overloaded", "streams": 1},
    ]


# --------------------------------------------------------------------------- attempts


def test_attempts_has_one_row_per_http_exchange(results):
    at = tables.attempts(results)
    assert list(at.columns) == tables.ATTEMPT_COLUMNS
    tool = at[at["stream_id"] == "s-tool"].to_dict("records")
    assert [(a["attempt"], a["label"], a["status"], a["final"]) for a in tool] == [
        (0, "default", 400, False),
        (1, "targeted_drop_min_p", 200, True),
    ]
    assert tool[0]["body_keys"] == "messages,min_p,model,stream"
    assert (tool[0]["degradable"], tool[0]["error"]) == ("generic_400", "min_p is not supported")
    assert at["status"].dtype == "Int64"


# --------------------------------------------------------------------------- replayed streams


def _or_event(delta: dict, finish: str | None = None, **extra) -> str:
    body = {
        "id": "gen-1",
        "provider": "DeepInfra",
        "model": "z-ai/glm-4.5",
        "object": "chat.completion.chunk",
        "created": 1,
        "choices": [
            {
                "index": 0,
                "delta": {"role": "assistant", "content": "", **delta},
                "finish_reason": finish,
            }
        ],
        **extra,
    }
    return "data: " + json.dumps(body) + "\n\n"


def test_replayed_think_leak_shows_up_in_streams_leaks_and_by_backend():
    body = (
        ": OPENROUTER PROCESSING\n\n"
        + _or_event({"content": "<think>plan it</think>"})
        + _or_event({"content": "Answer: 42."})
        + _or_event({}, finish="stop")
        + _or_event({}, usage={"prompt_tokens": 12, "completion_tokens": 40, "total_tokens": 52})
        + "data: [DONE]\n\n"
    )
    r = replay_sse("openrouter", body)
    st = tables.streams([r])
    assert st.loc[0, ["leaked", "leak_guards", "leak_chars"]].tolist() == [
        True,
        "think_stripper",
        len("plan it"),
    ]
    assert st.loc[0, "output_tokens"] == 40 and st.loc[0, "anomalies"] == ""
    assert tables.leaks([r])["moved"].tolist() == ["plan it"]
    assert tables.by_backend(st)["serving_provider"].tolist() == ["DeepInfra"]


# --------------------------------------------------------------------------- plots


def test_write_all_saves_every_standard_figure(results, tmp_path: Path):
    written = plots.write_all(results, tmp_path)
    assert sorted(written) == [
        "classifiers",
        "gaps",
        "leaks_by_backend",
        "timeline",
        "ttft_by_backend",
        "ttft_ecdf",
    ]
    for path in written.values():
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plots_handle_empty_tables(tmp_path: Path):
    written = plots.write_all([], tmp_path)
    assert sorted(written) == [
        "classifiers",
        "gaps",
        "leaks_by_backend",
        "ttft_by_backend",
        "ttft_ecdf",
    ]


def test_stream_timeline_marks_guard_events(results):
    fig = plots.stream_timeline(results[0])
    ax = fig.axes[0]
    assert ax.get_title() == "z-ai/glm-4.5 via DeepInfra"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:2] == ["content", "reasoning"]
    assert any(label.startswith("think_stripper") for label in labels[2:])


def test_stream_timeline_counts_reasoning_repeated_by_the_text_tool_split_once():
    """OpenRouter's text/tool split keeps reasoning on both pieces; the result counts it
    once (``reasoning_chars``), and so does the plot."""
    env = {"id": "gen-1", "model": "m", "object": "chat.completion.chunk", "created": 1}
    call = {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": "f", "arguments": "{}"},
    }
    delta = {"content": "Let me look.", "reasoning": "I should call f.", "tool_calls": [call]}
    chunk = {**env, "choices": [{"index": 0, "delta": delta, "finish_reason": "tool_calls"}]}
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
    result = replay_sse("openrouter", body)
    assert result.reasoning == "I should call f." and len(result.function_calls) == 1
    ax = plots.stream_timeline(result).axes[0]
    reasoning = next(line for line in ax.lines if line.get_label() == "reasoning")
    assert reasoning.get_ydata()[-1] == len(result.reasoning)


def test_ttft_plot_uses_no_deprecated_matplotlib_api(results):
    st = tables.streams(results)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plots.ttft_by_backend(st)


def test_by_backend_classifier_counts_are_integers(results):
    bb = tables.by_backend(tables.streams(results))
    assert bb["classifier_model_error"].dtype == "int64"


# --------------------------------------------------------------------------- docs


DOCS = Path(__file__).resolve().parents[1] / "docs" / "tables.md"


def _documented(section: str) -> set[str]:
    text = DOCS.read_text(encoding="utf-8")
    start = text.index(f"## `{section}(")
    end = text.find("\n## ", start + 1)
    body = text[start : end if end >= 0 else None]
    return {
        line.split("|")[1].strip().strip("`")
        for line in body.splitlines()
        if line.startswith("| `")
    }


@pytest.mark.parametrize(
    ("section", "columns"),
    [
        ("streams", tables.STREAM_COLUMNS),
        ("leaks", tables.LEAK_COLUMNS),
        ("attempts", tables.ATTEMPT_COLUMNS),
        ("latency", tables.latency([]).columns.tolist()),
        ("gaps", tables.GAP_COLUMNS),
        ("tool_calls", tables.TOOL_CALL_COLUMNS),
    ],
)
def test_docs_describe_every_column(section, columns):
    assert set(columns) <= _documented(section)


def test_docs_describe_every_by_backend_and_classifiers_column(results):
    st = tables.streams(results)
    bb_cols = {c for c in tables.by_backend(st).columns if not c.startswith("classifier_")}
    assert bb_cols <= _documented("by_backend")
    assert set(tables.classifiers(st).columns) <= _documented("classifiers")


def test_docs_list_every_anomaly():
    from lab.anomalies import DETECTORS

    text = DOCS.read_text(encoding="utf-8")
    anomaly_rows = text[text.index("## Anomalies") :]
    assert [n for n in DETECTORS if f"| `{n}` |" not in anomaly_rows] == []


def _drawn(text) -> tuple[str, bool]:
    """What matplotlib draws for a Text: the string shown and whether it is parsed as maths."""
    return text._preprocess_math(text.get_text())


def test_provider_and_model_names_with_dollars_are_drawn_literally(tmp_path: Path):
    """A backend named like mathtext (``$x$``, or bad mathtext such as ``$\\frac{x$``, which
    used to raise ValueError in savefig) is drawn as the literal name in every plot."""
    from dataclasses import replace

    from lab.report import write_report

    bad, maths = r"$\frac{x$", "$x$"
    results = [
        replace(leaky(), serving_provider=bad, model=r"m$^$"),
        replace(errored(), serving_provider=maths),
    ]
    assert write_report(results, tmp_path).is_file()
    st = tables.streams(results)
    leaks = plots.leak_rate_by_backend(tables.by_backend(st))
    for fig in (leaks, plots.ttft_by_backend(st)):
        fig.canvas.draw()
        ax = fig.axes[0]
        ticks = ax.get_yticklabels() if fig is leaks else ax.get_xticklabels()
        assert sorted(_drawn(t) for t in ticks) == [(bad, False), (maths, False)]
    timeline = plots.stream_timeline(results[0]).axes[0]
    assert _drawn(timeline.title) == (r"m$^$ via $\frac{x$", False)
