"""Tables over the bundled capture: stable columns and dtypes, and leak rows that point at
real bytes of the capture."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pandas as pd
import pytest

import lab.capture
from lab import tables
from lab.replay import replay

CAPTURES = Path(__file__).resolve().parents[1] / "captures"


@pytest.fixture(scope="module")
def bundled():
    capture = lab.capture.open(CAPTURES)
    return capture, replay(capture)


def test_streams_columns_and_dtypes_on_the_bundled_capture(bundled):
    capture, results = bundled
    st = tables.streams(results)
    assert list(st.columns) == tables.STREAM_COLUMNS
    assert len(st) == len(capture.requests())
    assert st["leaked"].dtype == bool
    for col in ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens"):
        assert str(st[col].dtype) == "Int64", col
    for col in ("ttft_ms", "duration_ms", "cost", "tokens_per_s"):
        assert st[col].dtype == "float64", col
    assert st["attempts"].dtype == "int64"
    assert st["leaked"].any() and st["error_type"].notna().any()


def test_attempts_table_matches_the_exchanges_in_the_capture(bundled):
    capture, results = bundled
    att = tables.attempts(results)
    assert len(att) == len(capture.streams)
    merged = att.merge(
        capture.streams[["stream_id", "attempt", "attempt_label", "status"]],
        on=["stream_id", "attempt"],
        suffixes=("", "_recorded"),
    )
    assert len(merged) == len(att)
    assert (merged["label"] == merged["attempt_label"]).all()
    assert (merged["status"] == merged["status_recorded"].astype("Int64")).all()


def test_every_leak_row_points_at_a_real_read_of_its_capture(bundled):
    capture, results = bundled
    lk = tables.leaks(results)
    assert len(lk) > 0
    chunks = capture.chunks.set_index(["stream_id", "attempt", "seq"]).sort_index()
    for row in lk.itertuples():
        key = (row.stream_id, row.attempt, int(row.read_seq))
        assert key in chunks.index, key
        # the moved text was on the wire: in the bytes of that attempt up to that read
        reads = capture.chunks[
            (capture.chunks["stream_id"] == row.stream_id)
            & (capture.chunks["attempt"] == row.attempt)
            & (capture.chunks["seq"] <= row.read_seq)
        ].sort_values("seq")
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        wire = "".join(decoder.decode(b) for b in reads["raw"])
        first_line = row.moved.strip().splitlines()[0] if row.moved.strip() else ""
        fragment = first_line[:6]
        if row.guard != "json_repair":
            escaped = json.dumps(fragment, ensure_ascii=False)[1:-1]
            assert fragment in wire or escaped in wire, (row.guard, fragment)
        t = row.t_ms
        assert not pd.isna(t) and t >= 0


def test_a_provider_reported_cost_is_the_stream_cost_on_the_bundled_capture(bundled):
    """OpenAI-format streams report usage (and OpenRouter its cost) in a chunk after the
    finish chunk: the processor settles it with the step, so the table's cost is the
    provider's, never 0 or missing beside a reported one."""
    _capture, results = bundled
    reported = [r for r in results if r.usage is not None and r.usage.cost is not None]
    assert len(reported) > 20
    assert [(r.stream_id, r.cost) for r in reported] == [
        (r.stream_id, r.usage.cost) for r in reported
    ]
    st = tables.streams(results).set_index("stream_id")
    assert [st.at[r.stream_id, "cost"] for r in reported] == [r.usage.cost for r in reported]


def test_a_stream_that_reported_no_usage_has_no_cost_not_a_free_one(bundled):
    _capture, results = bundled
    st = tables.streams(results)
    no_usage = st[st["output_tokens"].isna() & st["input_tokens"].isna()]
    assert len(no_usage) > 5 and no_usage["cost"].isna().all()
    by = tables.by_backend(st).set_index("serving_provider")
    labels = tables.backend_labels(st)
    silent = [b for b in by.index if st.loc[labels == b, "output_tokens"].isna().all()]
    assert silent  # backends none of whose streams reported usage
    assert by.loc[silent, "output_tokens"].isna().all() and by.loc[silent, "cost"].isna().all()


def test_an_http_error_attempt_counts_the_reads_of_its_error_body(bundled):
    capture, results = bundled
    att = tables.attempts(results)
    errors = att[att["end_reason"] == "http_error"]
    assert len(errors) > 10
    recorded = capture.streams.set_index(["stream_id", "attempt"])["n_reads"]
    assert [recorded[(r.stream_id, r.attempt)] for r in errors.itertuples()] == list(
        errors["n_reads"]
    )
    assert (errors["n_reads"] >= 1).all()


def test_an_error_chunk_that_names_its_backend_attributes_the_stream(bundled):
    _capture, results = bundled
    st = tables.streams(results)
    pre = st[st["model"] == "fake/sse-error-precommit"]
    assert len(pre) == 3 and pre["serving_provider"].notna().all()


def test_a_stream_whose_first_output_is_a_tool_call_has_no_generation_speed(bundled):
    _capture, results = bundled
    st = tables.streams(results)
    calls = st[(st["model"] == "fake/tool-call") & (st["provider"] == "openai")]
    assert len(calls) == 3
    assert (calls["text_chars"] == 0).all() and (calls["reasoning_chars"] == 0).all()
    assert calls["tokens_per_s"].isna().all()  # was 279, NaN and 4332 "tokens/s"
    # OpenRouter's tool-call streams reason first: their speed is measured from that
    routed = st[(st["model"] == "fake/tool-call") & (st["provider"] == "openrouter")]
    assert (routed["reasoning_chars"] > 0).all() and routed["tokens_per_s"].notna().all()
