"""Every timing figure of a stream, exactly, from captures with known read offsets."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab import tables
from lab.latency import TIMING_COLUMNS, StreamTiming, content_gaps, quantile, stream_timing
from lab.replay import replay
from tests.latency_captures import (
    CAPTURE_ID,
    DONE,
    MS,
    STARTED,
    content,
    exchange_row,
    reasoning,
    write_capture,
)

# reasoning at 100 and 150 ms; two content events in one read at 400 ms (11 characters:
# the bundled first chunk); "!" at 450 ms; " Bye" at 2950 ms (a 2.5 s gap: a stall)
STALLED_READS = [
    reasoning("think"),
    reasoning(" more"),
    content("Hello") + content(" world"),
    content("!"),
    content(" Bye"),
    DONE,
]
STALLED_TIMES = [100 * MS, 150 * MS, 400 * MS, 450 * MS, 2950 * MS, 3000 * MS]


def _replay_one(tmp_path, reads, times, **row):
    write_capture(tmp_path, [(exchange_row("s", reads, **row), reads, times)])
    (result,) = replay(tmp_path)
    assert result.error is None, result.error
    return result


def test_every_figure_of_a_stream_with_reasoning_a_bundled_first_chunk_and_a_stall(tmp_path):
    result = _replay_one(tmp_path, STALLED_READS, STALLED_TIMES)
    assert result.text == "Hello world! Bye"
    assert stream_timing(result) == StreamTiming(
        timed=True,
        ttfb_ms=100.0,
        ttft_content_ms=400.0,
        ttft_reasoning_ms=100.0,
        gap_p50_ms=1275.0,  # gaps 50 and 2500 ms
        gap_p90_ms=2255.0,
        gap_p99_ms=2475.5,
        gap_max_ms=2500.0,
        content_reads=3,
        stalls=1,
        stall_ms=2500.0,
        first_chunk_chars=11,
    )
    assert content_gaps(result) == [(0, 3, 450 * MS, 50 * MS), (0, 4, 2950 * MS, 2500 * MS)]


def test_gap_quantiles_are_numpys_linear_quantiles():
    values = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0]
    ordered = sorted(values)
    for q in (0.0, 0.1, 0.5, 0.9, 0.99, 1.0):
        assert quantile(ordered, q) == float(np.quantile(values, q))


def test_the_stall_threshold_is_the_stall_s_given(tmp_path):
    result = _replay_one(tmp_path, STALLED_READS, STALLED_TIMES)
    assert stream_timing(result, stall_s=2.5).stalls == 0  # 2.5 s is not over 2.5 s
    assert stream_timing(result, stall_s=0.04).stalls == 2
    assert stream_timing(result, stall_s=0.04).stall_ms == 2550.0
    with pytest.raises(ValueError, match="stall_s must be > 0"):
        stream_timing(result, stall_s=0)


def test_an_event_split_across_reads_is_timed_by_the_read_that_completed_it(tmp_path):
    event = content("late")
    reads = [event[:10], event[10:], content("er"), DONE]
    times = [200 * MS, 700 * MS, 900 * MS, 950 * MS]
    timing = stream_timing(_replay_one(tmp_path, reads, times))
    assert (timing.ttfb_ms, timing.ttft_content_ms, timing.first_chunk_chars) == (200.0, 700.0, 4)
    assert (timing.gap_p50_ms, timing.gap_max_ms, timing.content_reads) == (200.0, 200.0, 2)
    assert timing.ttft_reasoning_ms is None and timing.stalls == 0 and timing.stall_ms == 0.0


def test_a_stream_with_one_content_read_has_no_gaps(tmp_path):
    reads = [content("all at once"), DONE]
    timing = stream_timing(_replay_one(tmp_path, reads, [300 * MS, 310 * MS]))
    assert timing == StreamTiming(
        timed=True,
        ttfb_ms=300.0,
        ttft_content_ms=300.0,
        content_reads=1,
        stalls=0,
        stall_ms=0.0,
        first_chunk_chars=11,
    )


@pytest.mark.parametrize("timing", ["none", "headers"])
def test_an_imported_exchange_without_read_timing_has_no_timing_figures(tmp_path, timing):
    reads = [b"".join(STALLED_READS)]  # an imported body is one read
    result = _replay_one(tmp_path, reads, [0], timing=timing)
    assert result.text == "Hello world! Bye"
    assert stream_timing(result) == StreamTiming(timed=False)
    assert content_gaps(result) == []
    row = tables.streams([result]).iloc[0]
    assert not row["timed"]
    for col in TIMING_COLUMNS[1:]:
        if col == "content_reads":
            assert row[col] == 0
        else:
            assert pd.isna(row[col]), col
    assert math.isnan(row["ttft_ms"])


def test_the_streams_table_carries_timing_start_time_and_capture_id(tmp_path):
    write_capture(
        tmp_path,
        [
            (exchange_row("a", STALLED_READS, k=0), STALLED_READS, STALLED_TIMES),
            (
                exchange_row("b", [b"".join(STALLED_READS)], k=1, timing="none"),
                [b"".join(STALLED_READS)],
                [0],
            ),
        ],
    )
    st = tables.streams(replay(tmp_path))
    assert list(st.columns) == tables.STREAM_COLUMNS
    a = st.set_index("stream_id").loc["a"]
    assert a["started_at"] == pd.Timestamp(STARTED)
    assert str(st["started_at"].dtype) == "datetime64[us, UTC]"
    assert a["capture_id"] == CAPTURE_ID
    assert a[TIMING_COLUMNS].tolist() == [
        True,
        100.0,
        400.0,
        100.0,
        1275.0,
        2255.0,
        2475.5,
        2500.0,
        3,
        1,
        2500.0,
        11,
    ]
    assert a["ttft_ms"] == 100.0 and a["duration_ms"] == 3000.0
    assert st["timed"].tolist() == [True, False]
    assert tables.streams(replay(tmp_path), stall_s=3.0)["stalls"].tolist()[0] == 0


def test_replay_out_writes_the_timing_columns_with_their_types(tmp_path):
    write_capture(
        tmp_path / "cap", [(exchange_row("a", STALLED_READS), STALLED_READS, STALLED_TIMES)]
    )
    written = replay(tmp_path / "cap", out=tmp_path / "out")
    st = written.read("streams")
    direct = tables.streams(replay(tmp_path / "cap"))
    pd.testing.assert_frame_equal(
        st[["stream_id", *TIMING_COLUMNS, "started_at", "capture_id"]],
        direct[["stream_id", *TIMING_COLUMNS, "started_at", "capture_id"]],
        check_dtype=False,
    )
    assert str(st["started_at"].dtype) == "datetime64[us, UTC]"
    # the latency table per backend comes from the written streams as from the results
    pd.testing.assert_frame_equal(tables.latency(st), tables.latency(direct))


USAGE = (
    b"data: "
    + json.dumps({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 50}}).encode()
    + b"\n\n"
)
# reasoning at 100 ms, content at 250 and 300 ms, usage (50 output tokens) at 550, [DONE] at 600
USAGE_READS = [reasoning("plan"), content("Hello"), content(" world"), USAGE, DONE]
USAGE_TIMES = [100 * MS, 250 * MS, 300 * MS, 550 * MS, 600 * MS]


def test_tokens_per_second_are_the_output_tokens_over_the_time_after_the_first_token(tmp_path):
    write_capture(tmp_path, [(exchange_row("s", USAGE_READS), USAGE_READS, USAGE_TIMES)])
    row = tables.streams(replay(tmp_path)).iloc[0]
    # the first token (reasoning) at 100 ms, the last read at 600 ms: 50 tokens in 0.5 s
    assert (row["ttft_ms"], row["duration_ms"], row["output_tokens"]) == (100.0, 600.0, 50)
    assert row["tokens_per_s"] == 100.0
    assert (row["ttft_content_ms"], row["ttft_reasoning_ms"], row["ttfb_ms"]) == (
        250.0,
        100.0,
        100.0,
    )
    assert (row["first_chunk_chars"], row["gap_max_ms"], row["content_reads"]) == (5, 50.0, 2)


def test_an_imported_exchange_without_read_timing_has_no_duration_nor_speed(tmp_path):
    body = [b"".join(USAGE_READS)]
    write_capture(tmp_path, [(exchange_row("s", body, timing="none"), body, [0])])
    row = tables.streams(replay(tmp_path)).iloc[0]
    assert row["output_tokens"] == 50 and not row["timed"]  # the usage is still read
    assert row[["ttft_ms", "duration_ms", "tokens_per_s"]].isna().all()


def _two_backends(tmp_path):
    """Backend "openai (direct)" with three timed streams and one imported without timing."""
    exchanges = []
    for k, first in enumerate((100, 300, 200)):
        reads = [content("ab"), content("c"), DONE]
        times = [first * MS, (first + 40) * MS, (first + 41) * MS]
        exchanges.append((exchange_row(f"t{k}", reads, k=k), reads, times))
    body = [content("imported"), DONE]
    exchanges.append(
        (exchange_row("u", [b"".join(body)], k=3, timing="none"), [b"".join(body)], [0])
    )
    write_capture(tmp_path, exchanges)
    return replay(tmp_path)


def test_latency_table_gives_quantiles_with_bootstrap_intervals_and_counts_untimed(tmp_path):
    from lab.latency import LATENCY_COLUMNS, LATENCY_METRICS
    from lab.stats import bootstrap_quantile_intervals

    results = _two_backends(tmp_path)
    lt = tables.latency(results)
    assert list(lt.columns) == LATENCY_COLUMNS
    assert lt["metric"].tolist() == list(LATENCY_METRICS)
    ttfb = lt.set_index("metric").loc["ttfb_ms"]
    assert ttfb["serving_provider"] == "openai (direct)"
    assert (ttfb["streams"], ttfb["untimed"], ttfb["n"]) == (4, 1, 3)
    assert (ttfb["p50"], ttfb["p90"], ttfb["mean"]) == (200.0, 280.0, 200.0)
    (p50, p90, p99) = bootstrap_quantile_intervals([100.0, 300.0, 200.0], [0.5, 0.9, 0.99])
    assert (ttfb["p50_ci_low"], ttfb["p50_ci_high"]) == p50
    assert (ttfb["p99_ci_low"], ttfb["p99_ci_high"]) == p99
    gap = lt.set_index("metric").loc["gap_max_ms"]
    assert (gap["n"], gap["p50"], gap["p50_ci_low"], gap["p50_ci_high"]) == (3, 40.0, 40.0, 40.0)
    chars = lt.set_index("metric").loc["first_chunk_chars"]
    assert (chars["n"], chars["p50"]) == (3, 2.0)
    assert lt.set_index("metric").loc["ttft_reasoning_ms", "n"] == 0
    assert lt.attrs["untimed"] == 1
    assert lt.attrs["notes"] == [
        "1 stream without per-read timing (imported from a cassette or a HAR) left out of "
        "every timing figure (openai (direct): 1)."
    ]
    # the streams table gives the same table as the results
    pd.testing.assert_frame_equal(tables.latency(tables.streams(results)), lt)


def test_gaps_table_has_one_row_per_gap_between_content_reads(tmp_path):
    write_capture(tmp_path, [(exchange_row("s", STALLED_READS), STALLED_READS, STALLED_TIMES)])
    g = tables.gaps(replay(tmp_path))
    assert g.to_dict("records") == [
        {
            "stream_id": "s",
            "serving_provider": None,
            "attempt": 0,
            "read_seq": 3,
            "t_ms": 450.0,
            "gap_ms": 50.0,
            "stall": False,
        },
        {
            "stream_id": "s",
            "serving_provider": None,
            "attempt": 0,
            "read_seq": 4,
            "t_ms": 2950.0,
            "gap_ms": 2500.0,
            "stall": True,
        },
    ]
    with pytest.raises(TypeError, match="per-read gaps"):
        tables.gaps(tables.streams(replay(tmp_path)))


def test_replay_out_writes_the_gaps_table_and_uses_the_configs_stall_s(tmp_path):
    from lab.config import LabConfig

    write_capture(
        tmp_path / "cap", [(exchange_row("s", STALLED_READS), STALLED_READS, STALLED_TIMES)]
    )
    written = replay(tmp_path / "cap", out=tmp_path / "out", config=LabConfig(stall_s=3.0))
    assert written.read("gaps")["gap_ms"].tolist() == [50.0, 2500.0]
    assert written.read("gaps")["stall"].tolist() == [False, False]
    assert written.read("streams")["stalls"].tolist() == [0]


def test_ttft_ecdf_draws_one_step_line_per_backend_of_its_timed_streams(tmp_path):
    from lab import plots

    st = tables.streams(_two_backends(tmp_path))
    ax = plots.ttft_ecdf(st).axes[0]
    (line,) = ax.lines
    assert line.get_label() == "openai (direct) (3)"  # the untimed stream is not drawn
    assert line.get_xdata().tolist() == [100.0, 200.0, 300.0]
    assert line.get_ydata().tolist() == [1 / 3, 2 / 3, 1.0]


def test_gap_histogram_gives_each_backend_the_shares_of_its_own_gaps(tmp_path):
    from lab import plots

    write_capture(tmp_path, [(exchange_row("s", STALLED_READS), STALLED_READS, STALLED_TIMES)])
    ax = plots.gap_histogram(tables.gaps(replay(tmp_path)), stall_s=2.0).axes[0]
    (patch,) = ax.patches
    assert patch.get_label() == "(direct) (2 gaps)"
    assert [line.get_xdata()[0] for line in ax.lines] == [2000.0]
    empty = plots.gap_histogram(tables.gaps([])).axes[0]
    assert empty.texts[0].get_text().startswith("no gaps")


def _har_entry(body: bytes) -> dict:
    request = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    return {
        "startedDateTime": "2026-12-01T21:00:00.125Z",
        "time": 950.0,
        "request": {
            "method": "POST",
            "url": "https://api.openai.com/v1/chat/completions",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "application/json"}],
            "queryString": [],
            "postData": {"mimeType": "application/json", "text": json.dumps(request)},
        },
        "response": {
            "status": 200,
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "content-type", "value": "text/event-stream"}],
            "content": {"mimeType": "text/event-stream", "text": body.decode()},
        },
        "timings": {"send": 0.5, "wait": 400.0, "receive": 549.5},
    }


def test_a_har_import_has_its_start_time_but_no_timing_figures_and_is_counted(tmp_path):
    from lab.interchange import import_har

    har = tmp_path / "session.har"
    body = b"".join(STALLED_READS)
    har.write_text(json.dumps({"log": {"version": "1.2", "entries": [_har_entry(body)]}}))
    report = import_har(har, tmp_path / "captures")
    st = tables.streams(replay(report.capture_path))
    row = st.iloc[0]
    assert row["source"] == "har" and not row["timed"]
    assert row["started_at"] == pd.Timestamp("2026-12-01T21:00:00.125Z")
    assert row[["ttft_ms", "ttfb_ms", "gap_max_ms", "first_chunk_chars"]].isna().all()
    lt = tables.latency(st)
    assert set(lt["untimed"]) == {1} and set(lt["n"]) == {0}
    assert lt.attrs["notes"] == [
        "1 stream without per-read timing (imported from a cassette or a HAR) left out of "
        "every timing figure (openai (direct): 1)."
    ]


def test_a_degraded_request_is_timed_on_the_attempt_that_streamed(tmp_path):
    """400 on min_p, then the degraded body streams: the figures are the second attempt's
    reads, exactly as recorded."""
    from lab.capture import open as open_capture
    from lab.fakes import FakeServer
    from lab.recorder import Recorder

    body = {
        "model": "fake/reject-min-p",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "min_p": 0.05,
    }
    # the scripted 2-15 ms before each read keeps the reads apart (gaps to measure)
    with FakeServer() as fake, Recorder(tmp_path) as rec:
        live = rec.record("openrouter", body, base_url=fake.base_url + "/api/v1")
    assert len(live.attempts) == 2
    (result,) = replay(tmp_path)
    chunks = open_capture(tmp_path).chunks
    second = chunks[chunks["attempt"] == 1].sort_values("seq")["t_ns"].tolist()
    timing = stream_timing(result)
    assert timing.ttfb_ms == second[0] / 1e6
    first = result.first_output()
    origin = result.origins[first]
    assert origin.attempt == 1
    assert timing.ttft_content_ms == second[origin.read_seq] / 1e6
    content = zip(result.chunks, result.origins, strict=True)
    reads = sorted({o.read_seq for c, o in content if c.content})
    assert timing.content_reads == len(reads) > 2
    gaps = sorted(second[b] - second[a] for a, b in zip(reads, reads[1:], strict=False))
    assert timing.gap_max_ms == gaps[-1] / 1e6
    assert timing.gap_p50_ms == quantile(gaps, 0.5) / 1e6


def test_a_live_recording_has_its_start_time_and_capture_id_like_its_replay(tmp_path):
    from lab.fakes import FakeServer
    from lab.recorder import Recorder

    body = {"model": "fake/clean", "messages": [{"role": "user", "content": "hi"}]}
    with FakeServer(delay_scale=0) as fake, Recorder(tmp_path) as rec:
        live = rec.record("openrouter", body, base_url=fake.base_url + "/api/v1")
        capture_id = rec.capture_id
    (replayed,) = replay(tmp_path)
    assert live.capture_id == replayed.capture_id == capture_id
    assert abs((live.started_at - replayed.started_at).total_seconds()) < 1.0
    assert str(tables.streams([live])["started_at"].dtype) == "datetime64[us, UTC]"


def test_latency_columns_give_the_scorecard_one_row_per_backend(tmp_path):
    from lab.latency import SCORECARD_METRICS, latency_columns

    lt = tables.latency(_two_backends(tmp_path))
    wide = latency_columns(lt)
    assert wide.index.tolist() == ["openai (direct)"]
    quantiles = ("p50", "p50_ci_low", "p50_ci_high", "p90", "p90_ci_low", "p90_ci_high")
    assert list(wide.columns) == [f"{m}_{c}" for m in SCORECARD_METRICS for c in (*quantiles, "n")]
    row = wide.loc["openai (direct)"]
    ttfb = lt.set_index("metric").loc["ttfb_ms"]
    assert row[[f"ttfb_ms_{c}" for c in quantiles]].tolist() == [ttfb[c] for c in quantiles]
    assert row["ttfb_ms_n"] == ttfb["n"]


def test_shared_scans_read_each_results_chunks_once_and_change_no_figure(monkeypatch, tmp_path):
    import lab.latency as latency

    results = _two_backends(tmp_path)
    plain_streams, plain_gaps = tables.streams(results), tables.gaps(results)
    timed = [r for r in results if latency.stream_timing(r).timed]
    calls = []
    real = latency._scan_chunks
    monkeypatch.setattr(latency, "_scan_chunks", lambda r: calls.append(r) or real(r))
    with latency.shared_scans():
        shared_streams, shared_gaps = tables.streams(results), tables.gaps(results)
    assert len(calls) == len(timed) > 0  # once each, not once per table
    pd.testing.assert_frame_equal(shared_streams, plain_streams)
    pd.testing.assert_frame_equal(shared_gaps, plain_gaps)
    calls.clear()
    tables.gaps(results)  # outside the block: scanned again
    assert len(calls) == len(timed)


def _written_latency_is_the_latency_of_the_written_streams(out) -> pd.DataFrame:
    from lab.resultfiles import read_results

    got, expected = read_results(out, "latency"), tables.latency(read_results(out))
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    assert list(got.dtypes) == list(expected.dtypes) and got.attrs == expected.attrs
    return got


def test_replay_out_without_streams_writes_an_empty_latency_table_with_its_columns(tmp_path):
    from lab.latency import LATENCY_COLUMNS

    write_capture(tmp_path / "cap", [])
    written = replay(tmp_path / "cap", out=tmp_path / "out")
    assert (written.units, written.streams) == (1, 0)
    lt = _written_latency_is_the_latency_of_the_written_streams(tmp_path / "out")
    assert len(lt) == 0 and list(lt.columns) == LATENCY_COLUMNS
    assert [str(t) for t in lt.dtypes] == [
        *(str(pd.Series(["x"]).dtype),) * 2,  # the string dtype pandas infers
        *("int64",) * 3,
        *("float64",) * 10,
    ]
    assert lt.attrs == {"untimed": 0, "notes": []}


def test_replay_out_of_untimed_streams_only_writes_latency_counting_them_untimed(tmp_path):
    """Imported exchanges without per-read timing: no figure, every stream ``untimed``, the
    note in ``attrs`` read back from the file."""
    body = [content("imported"), DONE]
    exchanges = [
        (exchange_row(f"u{k}", [b"".join(body)], k=k, timing="none"), [b"".join(body)], [0])
        for k in range(2)
    ]
    write_capture(tmp_path / "cap", exchanges)
    replay(tmp_path / "cap", out=tmp_path / "out")
    lt = _written_latency_is_the_latency_of_the_written_streams(tmp_path / "out")
    assert set(lt["n"]) == {0} and set(lt["untimed"]) == {2} and set(lt["streams"]) == {2}
    assert lt[["p50", "p90", "p99", "mean"]].isna().all().all()
    assert lt.attrs["notes"] == [
        "2 streams without per-read timing (imported from a cassette or a HAR) left out of "
        "every timing figure (openai (direct): 2)."
    ]


def test_replay_out_latency_parquet_has_the_figures_of_known_read_offsets(tmp_path):
    """Three timed streams and one untimed (:func:`_two_backends`), through the file."""
    _two_backends(tmp_path / "cap")
    replay(tmp_path / "cap", out=tmp_path / "out")
    lt = _written_latency_is_the_latency_of_the_written_streams(tmp_path / "out")
    ttfb = lt.set_index("metric").loc["ttfb_ms"]
    assert (ttfb["streams"], ttfb["untimed"], ttfb["n"]) == (4, 1, 3)
    assert (ttfb["p50"], ttfb["p90"], ttfb["mean"]) == (200.0, 280.0, 200.0)
    assert lt.attrs["untimed"] == 1


def _scan_by_definition(chunks, origins, read_t_ns):
    """The timing scan as the module docstring defines it, chunk by chunk with nothing
    hoisted: the reference the one-pass scan must equal."""
    from lab.result import counted_thoughts

    first_reasoning_t = first_content_t = None
    first = prev = None
    first_chars = content_reads = 0
    previous_t = 0
    gaps = []
    for chunk, origin in zip(chunks, origins, strict=False):
        times = read_t_ns.get(origin.attempt)
        if origin.read_seq < 0 or not times or origin.read_seq >= len(times):
            continue  # no read completed this chunk: no time
        key, t = (origin.attempt, origin.read_seq), times[origin.read_seq]
        if first_reasoning_t is None and counted_thoughts(chunk):
            first_reasoning_t = t
        if not chunk.content:
            continue
        if first_content_t is None:
            first, first_content_t = key, t
        if key == first:
            first_chars += len(chunk.content)
        if key != prev:
            content_reads += 1
            if prev is not None and prev[0] == key[0]:
                gaps.append((*key, t, t - previous_t))
            prev, previous_t = key, t
    return first_reasoning_t, first_content_t, first_chars, content_reads, gaps


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "", "ab", "xyz"]),
            st.booleans(),  # thoughts
            st.booleans(),  # repeated_thoughts
            st.integers(0, 1),  # attempt
            st.integers(-1, 4),  # read_seq
        ),
        max_size=14,
    ),
    st.dictionaries(st.integers(0, 1), st.lists(st.integers(0, 100), max_size=4).map(sorted)),
)
def test_the_one_pass_timing_scan_equals_its_definition_on_any_chunks_and_reads(spec, read_t_ns):
    # chunks of any order of reads and attempts, reads with no time, repeated thoughts
    from types import SimpleNamespace as NS

    from lab.latency import _scan_chunks

    chunks = [
        NS(
            content=content,
            thoughts=[NS(content="t")] if thoughts else [],
            metadata={"repeated_thoughts": True} if repeated else {},
        )
        for content, thoughts, repeated, _, _ in spec
    ]
    origins = [NS(attempt=a, read_seq=s) for *_, a, s in spec]
    scan = _scan_chunks(NS(chunks=chunks, origins=origins, read_t_ns=read_t_ns))
    got = (scan.first_reasoning_t, scan.first_content_t, scan.first_chars, scan.content_reads)
    assert (*got, scan.gaps) == _scan_by_definition(chunks, origins, read_t_ns)


def test_latency_cells_group_labels_numpy_would_confuse_as_the_dataframe_does():
    # backend labels are the wire's: one with a trailing NUL is its own backend, as the
    # DataFrame's groupby has it (numpy compares a str scalar as a fixed-width string,
    # which drops trailing NULs: "a\x00" == "a" there), with its own streams and untimed
    gen = np.random.default_rng(7)
    labels = ["a", "a\x00", "b", "a\x00\x00", "é", "e\u0301", ""] * 6
    n = len(labels)
    timed = gen.random(n) > 0.3
    figures = {m: np.round(gen.lognormal(5, 1, n), 1) for m in tables.LATENCY_METRICS}
    frame = pd.DataFrame(
        {"stream_id": [f"s{i}" for i in range(n)], "provider": "openrouter"}
        | {"serving_provider": labels, "timed": timed}
        | figures
    )
    want = tables.latency(frame, n_boot=50)
    cells, attrs = tables.latency_cells(labels, ["openrouter"] * n, timed, figures, n_boot=50)
    got = pd.DataFrame(cells).astype(want.dtypes.to_dict())
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert attrs == want.attrs
    assert set(want["serving_provider"]) == set(labels)
