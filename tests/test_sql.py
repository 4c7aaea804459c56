"""``lab.sql`` / ``lab sql``: DuckDB views over the bundled capture and replay result files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import lab
import lab.capture
from lab.cli import main
from lab.replay import replay
from lab.resultfiles import read_results

pytest.importorskip("duckdb")

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "captures"


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("results") / "r"
    replay(BUNDLED, out=out)
    return out


def test_streams_and_chunks_views_count_the_capture_tables():
    cap = lab.capture.open(BUNDLED)
    df = lab.sql(
        "SELECT (SELECT count(*) FROM streams) AS exchanges, "
        "(SELECT count(*) FROM chunks) AS reads, (SELECT sum(n_bytes) FROM chunks) AS bytes",
        captures=BUNDLED,
    )
    assert df.to_dict("records") == [
        {"exchanges": len(cap.streams), "reads": len(cap.chunks), "bytes": cap.chunks.n_bytes.sum()}
    ]


def test_one_streams_body_from_its_reads_is_the_recorded_bytes():
    cap = lab.capture.open(BUNDLED)
    row = cap.streams[cap.streams.status == 200].iloc[0]
    df = lab.sql(
        "SELECT list(raw ORDER BY seq) AS reads FROM chunks "
        f"WHERE stream_id = '{row.stream_id}' AND attempt = {row.attempt}",
        captures=BUNDLED,
    )
    one = cap.chunks[(cap.chunks.stream_id == row.stream_id) & (cap.chunks.attempt == row.attempt)]
    assert b"".join(df.reads[0]) == b"".join(one.sort_values("seq").raw)
    # the trap the docs warn about: string_agg makes text with escapes, not the bytes
    bad = lab.sql(
        "SELECT string_agg(raw, '' ORDER BY seq) AS body FROM chunks "
        f"WHERE stream_id = '{row.stream_id}' AND attempt = {row.attempt}",
        captures=BUNDLED,
    )
    assert "\\x0A" in bad.body[0] and bad.body[0].encode() != b"".join(df.reads[0])


def test_results_and_leaks_views_read_the_replay_result_files(results_dir):
    df = lab.sql(
        "SELECT (SELECT count(*) FROM results) AS streams, "
        "(SELECT count(*) FROM results WHERE leaked) AS leaked, "
        "(SELECT count(*) FROM leaks) AS events, (SELECT count(*) FROM attempts) AS attempts",
        results=results_dir,
    )
    st = read_results(results_dir, "streams")
    assert df.to_dict("records") == [
        {
            "streams": 132,
            "leaked": int(st.leaked.sum()),
            "events": len(read_results(results_dir, "leaks")),
            "attempts": len(read_results(results_dir, "attempts")),
        }
    ]


def test_latency_view_reads_latency_parquet_of_the_replay(results_dir):
    lt = read_results(results_dir, "latency")
    df = lab.sql(
        "SELECT serving_provider, metric, streams, n, p50, p99_ci_high FROM latency "
        "ORDER BY serving_provider, metric",
        results=results_dir,
    )
    want = lt.sort_values(["serving_provider", "metric"])[list(df.columns)]
    assert len(df) == len(lt) > 0
    pd.testing.assert_frame_equal(
        df, want.reset_index(drop=True), check_dtype=False, check_exact=True
    )


def test_lab_sql_over_results_lists_the_latency_view(results_dir, capsys):
    query = "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY view_name"
    names = lab.sql(query, results=results_dir).view_name.tolist()
    assert names == ["attempts", "gaps", "latency", "leaks", "results"]
    import duckdb

    with pytest.raises(duckdb.CatalogException, match=r"latency is a table of replay results"):
        lab.sql("SELECT * FROM latency", captures=BUNDLED)


def test_results_join_streams_by_stream_id(results_dir):
    df = lab.sql(
        "SELECT count(DISTINCT s.stream_id) AS n FROM streams s JOIN results r USING (stream_id)",
        captures=BUNDLED,
        results=results_dir,
    )
    assert df.n[0] == 132


def test_lab_sql_prints_the_answer(capsys):
    rc = main(["sql", "SELECT count(*) AS exchanges FROM streams", "--captures", str(BUNDLED)])
    out = capsys.readouterr().out
    assert rc == 0 and "exchanges" in out and "160" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["SELECT 1", "--captures", "/nonexistent/x"], "/nonexistent/x: no such file"),
        (
            ["SELECT * FROM nope", "--captures", str(BUNDLED)],
            "sql: Catalog Error: Table with name nope does not exist! "
            "(the views here are chunks, streams)\n",
        ),
        (
            ["SELECT * FROM leaks", "--captures", str(BUNDLED)],
            "sql: Catalog Error: Table with name leaks does not exist! (leaks is a table of "
            "replay results: write them with lab replay CAPTURE --out DIR, then give "
            "--results DIR (results=DIR))\n",
        ),
    ],
)
def test_lab_sql_refuses_bad_input_in_one_line(capsys, argv, message):
    rc = main(["sql", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and err.count("\n") == 1


def test_a_capture_table_queried_over_results_only_says_which_option_gives_it(results_dir):
    import duckdb

    with pytest.raises(duckdb.CatalogException) as info:
        lab.sql("SELECT count(*) FROM chunks", results=results_dir)
    assert str(info.value).splitlines()[0] == (
        "Catalog Error: Table with name chunks does not exist! "
        "(chunks is a capture table: give --captures PATH (captures=PATH))"
    )


def test_the_docs_body_recipe_gives_attempt_0_of_a_retried_stream():
    import re

    doc = (ROOT / "docs" / "capture-schema.md").read_text(encoding="utf-8")
    query = re.search(r'df = lab\.sql\("""(.*?)""", captures="captures"\)', doc, re.S).group(1)
    assert "ORDER BY attempt" in query
    cap = lab.capture.open(BUNDLED)
    counts = cap.streams.groupby("stream_id").attempt.nunique()
    sid = counts[counts > 1].index[0]  # a stream with several attempts
    df = lab.sql(query.replace("s18ed...", sid), captures=BUNDLED)
    assert list(df.attempt) == sorted(set(cap.streams[cap.streams.stream_id == sid].attempt))
    first = cap.chunks[(cap.chunks.stream_id == sid) & (cap.chunks.attempt == 0)]
    assert b"".join(df.reads[0]) == b"".join(first.sort_values("seq").raw)


def test_lab_results_reads_one_table_where_read_parquet_of_the_dir_mixes_them(results_dir):
    import pandas as pd

    import lab.results

    st = lab.results.read(results_dir, "streams")
    assert len(st) == 132 and list(st.columns) == list(read_results(results_dir).columns)
    assert sorted(lab.results.TABLE_GLOBS) == sorted(lab.results.TABLES)
    for table, pattern in lab.results.TABLE_GLOBS.items():
        names = [f.name for f in sorted(results_dir.glob(pattern))]
        if table == "latency":  # one file, written after the units
            assert names == ["latency.parquet"]
        else:
            assert names and all(n.startswith(f"{table}-") for n in names)
    mixed = pd.read_parquet(results_dir)  # the trap the module docstring names
    assert len(mixed) == sum(len(lab.results.read(results_dir, t)) for t in lab.results.TABLES)
    with pytest.raises(ValueError, match="unknown result table 'chunks'"):
        lab.results.read(results_dir, "chunks")


def test_plain_pandas_reads_token_columns_of_a_result_file_as_nullable_integers(results_dir):
    import pandas as pd

    for path in sorted(results_dir.glob("streams-*.parquet")):
        df = pd.read_parquet(path)
        for col in ("input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens"):
            assert str(df[col].dtype) == "Int64", (path.name, col)
    attempts = pd.read_parquet(sorted(results_dir.glob("attempts-*.parquet"))[0])
    assert str(attempts["status"].dtype) == "Int64"
