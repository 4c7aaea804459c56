"""Self-contained capture units, the writer keeping a request's attempts in one part, and
``replay(..., out=DIR)``: result tables as Parquet, unit by unit, equal to the in-memory ones."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lab.capture
import lab.capture.compact
import lab.results
from lab import tables
from lab.capture.units import capture_units
from lab.cli import main
from lab.latency import LATENCY_COLUMNS, LATENCY_METRICS
from lab.recorder import Recorder
from lab.replay import replay
from lab.replay.files import run_state
from lab.resultfiles import read_results

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "captures"


def _part_of_each_stream(recording: Path) -> dict[str, set[str]]:
    where: dict[str, set[str]] = {}
    for part in sorted(recording.glob("streams-*.parquet")):
        for sid in pq.read_table(part, columns=["stream_id"])["stream_id"].to_pylist():
            where.setdefault(sid, set()).add(part.name)
    return where


def test_the_bundled_capture_has_one_request_split_across_two_parts_joined_in_one_unit():
    split = {s: p for s, p in _part_of_each_stream(next(BUNDLED.iterdir())).items() if len(p) > 1}
    assert len(split) == 1  # the bundled sample predates the writer's grouping
    units = capture_units(BUNDLED)
    assert len(units) == 12
    (joined,) = [u for u in units if len(u) == 4]
    assert {f.name for f in joined.files if f.name.startswith("streams-")} == next(
        iter(split.values())
    )
    # every unit is self-contained: together they hold each request once, whole
    counts = [len(lab.capture.open(list(u.files)).requests()) for u in units]
    assert sum(counts) == len(lab.capture.open(BUNDLED).requests()) == 132


def test_the_writer_keeps_every_attempt_of_a_request_in_one_part(fake_server, tmp_path):
    body = {
        "model": "fake/reject-min-p",
        "messages": [{"role": "user", "content": "hi"}],
        "min_p": 0.05,
        "temperature": 0.7,
    }
    with Recorder(tmp_path) as rec:
        rec.writer.flush_interval = 0.0  # write a part as soon as anything may go in one
        for _ in range(4):
            r = rec.record("openrouter", body, base_url=fake_server.base_url + "/api/v1")
            assert len(r.attempts) == 2  # 400 on min_p, then the degraded body
        path = rec.path
    where = _part_of_each_stream(path)
    assert len(where) == 4
    assert all(len(parts) == 1 for parts in where.values()), where
    assert len(capture_units(path)) == len(list(path.glob("streams-*.parquet")))


def _values(df: pd.DataFrame) -> pd.DataFrame:
    """The cells as Python values, every missing one None (a string column that is empty
    in every unit reads back as str with NaN, the in-memory table holds None)."""
    return df.astype(object).where(df.notna(), None)


def test_replay_to_out_writes_each_table_per_unit_and_equals_the_in_memory_tables(tmp_path):
    written = replay(BUNDLED, out=tmp_path / "r")
    assert (written.units, written.streams) == (12, 132)
    names = sorted(p.name for p in (tmp_path / "r").iterdir())
    assert names == sorted(
        [
            "_lab_run.json",
            *(
                f"{t}-{i:05d}.parquet"
                for t in ("streams", "leaks", "attempts", "gaps")
                for i in range(12)
            ),
            "latency.parquet",
        ]
    )
    assert run_state(tmp_path / "r")["status"] == "complete"
    results = replay(BUNDLED)
    for table, build in (
        ("streams", tables.streams),
        ("leaks", tables.leaks),
        ("attempts", tables.attempts),
        ("gaps", tables.gaps),
    ):
        got = read_results(tmp_path / "r", table)
        pd.testing.assert_frame_equal(_values(got), _values(build(results)))
    # one schema per table across units, so any Parquet reader takes the glob as one table
    schemas = {pq.read_schema(p) for p in (tmp_path / "r").glob("leaks-*.parquet")}
    assert len(schemas) == 1


def test_replay_to_out_on_two_processes_writes_the_same_tables(tmp_path):
    replay(BUNDLED, out=tmp_path / "serial")
    replay(BUNDLED, out=tmp_path / "two", workers=2)
    for table in ("streams", "leaks", "attempts", "gaps", "latency"):
        pd.testing.assert_frame_equal(
            read_results(tmp_path / "two", table), read_results(tmp_path / "serial", table)
        )
    _latency_is_the_written_streams_latency(tmp_path / "two")


def _latency_is_the_written_streams_latency(out: Path) -> pd.DataFrame:
    """``out/latency.parquet`` is ``tables.latency`` of the streams files, cell for cell, with
    the same dtypes and attrs, however it is read."""
    expected = tables.latency(read_results(out))
    for got in (
        read_results(out, "latency"),
        lab.results.read(out, "latency"),
        pd.read_parquet(out / "latency.parquet"),  # plain pandas: the same dtypes
    ):
        pd.testing.assert_frame_equal(got, expected, check_exact=True)
        assert list(got.dtypes) == list(expected.dtypes)
    assert read_results(out, "latency").attrs == expected.attrs
    return expected


def test_replay_to_out_writes_latency_parquet_as_the_latency_of_its_streams(tmp_path):
    written = replay(BUNDLED, out=tmp_path / "r")
    assert written.files[-1] == tmp_path / "r" / "latency.parquet"
    expected = _latency_is_the_written_streams_latency(tmp_path / "r")
    pd.testing.assert_frame_equal(written.read("latency"), expected, check_exact=True)
    # the same table as from the in-memory results: every backend, every figure
    pd.testing.assert_frame_equal(expected, tables.latency(replay(BUNDLED)), check_exact=True)
    backends = tables.backend_labels(read_results(tmp_path / "r")).nunique()
    assert len(expected) == backends * len(LATENCY_METRICS)
    assert list(expected.columns) == LATENCY_COLUMNS
    assert pq.read_schema(tmp_path / "r" / "latency.parquet").metadata[b"lab.table"] == (
        b"results.latency"
    )


def test_replay_of_a_loaded_capture_to_out_writes_latency_parquet_too(tmp_path):
    written = replay(lab.capture.open(BUNDLED), out=tmp_path / "r")
    assert (written.units, written.streams) == (1, 132)
    assert [p.name for p in written.files][-1] == "latency.parquet"
    assert run_state(tmp_path / "r")["latency_written"]
    expected = _latency_is_the_written_streams_latency(tmp_path / "r")
    pd.testing.assert_frame_equal(expected, tables.latency(replay(BUNDLED)), check_exact=True)


def test_latency_parquet_is_computed_from_only_the_streams_columns_latency_reads(
    tmp_path, monkeypatch
):
    """Memory bounded by the streams and those columns: the write reads the streams files
    with tables.LATENCY_INPUT_COLUMNS only, never the capture's reads nor another table."""
    import lab.replay.files as files

    replay(BUNDLED, out=tmp_path / "r")
    calls: list[tuple[str, list[str] | None]] = []
    real_read, real_read_table = pq.ParquetFile.read, pq.read_table

    def read(self, columns=None, **kw):  # a ParquetFile's: its file is in ``seen``
        calls.append(("", columns))
        return real_read(self, columns=columns, **kw)

    def read_table(source, columns=None, **kw):
        calls.append((Path(source).name, columns))
        return real_read_table(source, columns=columns, **kw)

    seen: list[str] = []
    real_file = pq.ParquetFile

    def parquet_file(source, *a, **kw):
        seen.append(Path(source).name)
        return real_file(source, *a, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read", read)
    monkeypatch.setattr(pq, "read_table", read_table)
    monkeypatch.setattr(files.pq, "ParquetFile", parquet_file)
    for latency_arrow in (files._latency_arrow, lambda out: None):  # both ways of building it
        monkeypatch.setattr(files, "_latency_arrow", latency_arrow)
        calls.clear()
        seen.clear()
        files._write_latency(tmp_path / "r")
        assert calls and all(cols == list(tables.LATENCY_INPUT_COLUMNS) for _, cols in calls)
        assert all(name.startswith("streams-") for name in seen + [n for n, _ in calls if n])
    assert list(tables.LATENCY_INPUT_COLUMNS) == [
        "stream_id",
        "provider",
        "serving_provider",
        "timed",
        *LATENCY_METRICS,
    ]
    monkeypatch.undo()
    _latency_is_the_written_streams_latency(tmp_path / "r")


def test_replay_to_out_refuses_a_directory_holding_result_tables(tmp_path):
    replay(BUNDLED, out=tmp_path / "r")
    with pytest.raises(ValueError, match="already holds result tables"):
        replay(BUNDLED, out=tmp_path / "r")


def test_lab_replay_out_writes_the_tables_and_prints_the_backend_verdicts(tmp_path, capsys):
    assert main(["replay", str(BUNDLED), "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "lab replay: 132 streams from 12 unit(s); result tables in" in out
    assert (
        f"result tables in {tmp_path / 'r'}: streams-*.parquet, leaks-*.parquet, "
        "attempts-*.parquet, gaps-*.parquet, latency.parquet\n"
    ) in out
    assert (tmp_path / "r" / "latency.parquet").is_file()
    assert "Leaks: no backend is worse than the rest with 95 % confidence." in out
    assert len(list((tmp_path / "r").glob("streams-*.parquet"))) == 12


def test_a_crashed_recording_with_journals_is_one_unit(tmp_path):
    rec = tmp_path / "rec"
    shutil.copytree(next(BUNDLED.iterdir()), rec)
    (rec / "x.journal").write_bytes(b"")
    (unit,) = capture_units(rec)
    assert unit.files[-1].name == "x.journal"
    assert len([f for f in unit.files if f.suffix == ".parquet"]) == 26


# --------------------------------------------------------------------------- compact


def _copy_bundled(tmp_path: Path) -> Path:
    root = tmp_path / "caps"
    shutil.copytree(BUNDLED, root)
    return root


def test_compact_merges_the_parts_and_the_capture_reads_the_same(tmp_path, capsys):
    root = _copy_bundled(tmp_path)
    assert main(["capture", "compact", str(root)]) == 0
    assert "1 recording(s), 26 parts (" in capsys.readouterr().out
    (rec,) = [p for p in root.iterdir() if p.is_dir()]
    assert sorted(p.name for p in rec.iterdir()) == [
        "chunks-00013.parquet",
        "streams-00013.parquet",
    ]
    before, after = lab.capture.open(BUNDLED), lab.capture.open(root)
    key = ["stream_id", "attempt"]
    pd.testing.assert_frame_equal(
        after.streams.sort_values(key).reset_index(drop=True),
        before.streams.sort_values(key).reset_index(drop=True),
    )
    pd.testing.assert_frame_equal(
        tables.streams(replay(root)), tables.streams(replay(BUNDLED)), check_dtype=True
    )


def test_compacted_parts_are_sorted_without_raw_statistics_dictionary_or_arrow_schema(tmp_path):
    root = _copy_bundled(tmp_path)
    lab.capture.compact.compact(root)
    (chunks,) = root.glob("*/chunks-*.parquet")
    meta = pq.ParquetFile(chunks).metadata
    assert sorted(meta.metadata) == [
        b"lab.capture",
        b"lab.redaction",
        b"lab.schema_version",
        b"lab.table",
    ]
    raw = meta.schema.names.index("raw")
    column = meta.row_group(0).column(raw)
    assert column.statistics is None
    assert "PLAIN_DICTIONARY" not in column.encodings and "RLE_DICTIONARY" not in column.encodings
    assert meta.row_group(0).column(0).statistics is not None
    t = pq.read_table(chunks, columns=["stream_id", "attempt", "exchange", "seq"])
    rows = list(zip(*(t[c].to_pylist() for c in t.column_names), strict=True))
    assert rows == sorted(rows)


def test_compact_leaves_a_recording_with_journals_alone(tmp_path):
    root = _copy_bundled(tmp_path)
    (rec,) = [p for p in root.iterdir() if p.is_dir()]
    (rec / "x.journal").write_bytes(b"")
    report = lab.capture.compact.compact(root)
    assert report.recordings == [] and list(report.skipped) == [rec]
    assert len(list(rec.glob("*.parquet"))) == 26


def test_a_compaction_cut_after_its_manifest_is_finished_by_the_next_run(tmp_path, monkeypatch):
    from lab.capture import compact as mod

    root = _copy_bundled(tmp_path)
    monkeypatch.setattr(mod, "_finish", lambda rec: None)  # cut right after the manifest
    mod.compact(root)
    monkeypatch.undo()
    (rec,) = [p for p in root.iterdir() if p.is_dir()]
    assert (rec / ".compact-manifest.json").exists()
    mod.compact(root)  # finishes the first run, then compacts the (already compact) result
    assert not (rec / ".compact-manifest.json").exists()
    assert len(list(rec.glob("*.parquet"))) == 2
    assert len(lab.capture.open(root).requests()) == 132


def _request(writer, sid: str, reads: list[bytes], attempts: int = 1) -> None:
    """One logical request of ``attempts`` exchanges, each answering with ``reads``."""
    with writer.logical_request(sid):
        for attempt in range(attempts):
            rec = writer.exchange(
                stream_id=sid,
                attempt=attempt,
                attempt_label="default",
                provider="openrouter",
                model="m",
                method="POST",
                url="http://127.0.0.1:9/v1/chat/completions",
                request_headers={},
                request_body=b"{}",
            )
            rec.on_response(200, {"content-type": "text/event-stream"}, "HTTP/1.1")
            for read in reads:
                rec.on_read(read)
            rec.on_end("eof")


def test_the_writer_stops_a_part_at_its_target_size_between_whole_requests(tmp_path, monkeypatch):
    import lab.capture.writer as writer_mod

    monkeypatch.setattr(writer_mod, "_PART_TARGET_BYTES", 1000)
    with writer_mod.CaptureWriter(tmp_path, flush_interval=3600) as writer:
        for s in range(10):  # 10 requests of 2 attempts of 300 bytes
            _request(writer, f"s{s}", [b"x" * 300], attempts=2)
        path = writer.path
    where = _part_of_each_stream(path)
    assert all(len(parts) == 1 for parts in where.values())
    sizes = [
        sum(pq.read_table(p, columns=["n_bytes"])["n_bytes"].to_pylist())
        for p in sorted(path.glob("streams-*.parquet"))
    ]
    # a part takes whole requests (600 bytes each) until it reaches 1000 bytes
    assert sizes == [1200] * 5


def test_result_files_are_built_from_the_cells_as_the_dataframes_convert():
    """The result files' tables built straight from each table's cells (no pandas) equal
    the Arrow tables of lab.tables' DataFrames, schema and metadata included: every table
    of the bundled capture and the fixtures under both configs, and an empty replay."""
    from lab.config import LabConfig
    from lab.replay import files

    fixtures = sorted((ROOT / "tests" / "fixtures").glob("*/capture"))
    for cfg in (LabConfig(), LabConfig.complete()):
        results = replay(BUNDLED, config=cfg) + [r for d in fixtures for r in replay(d, config=cfg)]
        for batch in (results, results[:1], []):
            frames = files._builders(2.0)
            with tables.shared_scans():
                for name, build in files._column_builders(2.0).items():
                    direct = files._arrow_columns(name, build(batch))
                    assert direct is not None, name  # every cell takes the direct path
                    assert direct.equals(files._arrow(name, frames[name](batch)), True), name


def test_odd_cells_convert_as_the_dataframe_would_or_go_its_way():
    """Cells the direct conversion takes (None, NaN, ints in a float column, an aware time
    in another zone) give the DataFrame's array; others (a naive time, a bool among ints, a
    number among strings) are refused, so the table takes the DataFrame path."""
    from datetime import datetime, timedelta, timezone

    import pyarrow as pa

    from lab.replay import files

    plain = {
        files._FLOAT: ([1.5, None, float("nan"), 2], pd.Series([1.5, None, float("nan"), 2])),
        files._INT: ([3, None, 4], pd.Series([3, None, 4]).astype("Int64")),
        files._BOOL: ([True, None, False], pd.Series([True, None, False], dtype=object)),
        pa.string(): (["a", None, ""], pd.Series(["a", None, ""])),
    }
    for kind, (cells, series) in plain.items():
        assert files._plain(cells, kind).equals(files._column(series, kind)), kind
    aware = [datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone(timedelta(hours=2))), None]
    frame = pd.to_datetime(pd.Series(aware), utc=True).astype("datetime64[us, UTC]")
    assert files._plain(aware, files._TIME).equals(files._column(frame, files._TIME))
    assert files._plain(aware, files._TIME)[0].as_py().hour == 1  # 03:04 at +02:00
    refused = {
        files._TIME: [datetime(2026, 1, 2, 3, 4, 5)],  # naive: the DataFrame says what it is
        files._INT: [1, True],
        files._FLOAT: [1.0, "x"],
        pa.string(): ["a", 7],
        files._BOOL: [True, 1],
    }
    for kind, cells in refused.items():
        assert files._plain(cells, kind) is None, kind
    assert files._plain([2**70], files._INT) is None  # out of range: refused, not wrapped


def test_a_table_with_an_odd_cell_is_written_as_its_dataframe_converts(tmp_path):
    """A cell the direct conversion refuses (a model id that is a number) sends its table
    down the DataFrame path: the file holds what lab.tables' DataFrame converts to."""
    from lab.config import LabConfig
    from lab.replay import files

    results = replay(BUNDLED)
    results[0].model = 7  # type: ignore[assignment]
    files._write_unit(results, tmp_path, 0, LabConfig())
    written = pq.read_table(tmp_path / "streams-00000.parquet")
    assert written["model"][0].as_py() == "7"
    assert written.equals(files._arrow("streams", tables.streams(results)), True)


def test_result_columns_convert_whole_as_they_would_cell_by_cell():
    """The whole-column conversions of the result files give the arrays the cell-by-cell
    conversion gives, on every table of the bundled capture and the fixtures (errors, tool
    calls, leaks, untimed imports) and on columns of odd dtypes (objects, nulls, NaN)."""
    import pyarrow as pa

    from lab.replay import files

    fixtures = sorted((ROOT / "tests" / "fixtures").glob("*/capture"))
    results = replay(ROOT / "captures") + [r for d in fixtures for r in replay(d)]
    compared = 0
    for name, build in files._builders(2.0).items():
        df = build(results)
        for col in df.columns:
            kind = files._TYPES[name].get(col, pa.string())
            slow = pa.array([files._cell(v, kind) for v in df[col].tolist()], type=kind)
            assert files._column(df[col], kind).equals(slow), (name, col)
            compared += 1
    assert compared > 60
    odd = {
        files._FLOAT: pd.Series([1, None, 2.5], dtype=object),
        files._INT: pd.Series([3.0, float("nan"), 4.0]),
        files._BOOL: pd.Series([True, None, False], dtype=object),
        pa.string(): pd.Series(["a", None, 7, float("nan")], dtype=object),
    }
    for kind, series in odd.items():
        slow = pa.array([files._cell(v, kind) for v in series.tolist()], type=kind)
        assert files._column(series, kind).equals(slow), kind


def test_replay_of_a_path_reads_one_unit_at_a_time_and_equals_replaying_the_whole_capture(
    monkeypatch,
):
    import weakref

    from lab.replay.one import replay_request

    whole = [replay_request(r) for r in lab.capture.open(BUNDLED).requests()]
    alive: list[weakref.ref] = []
    most = [0]
    real_open = lab.capture.open

    def open_one(*args, **kwargs):
        most[0] = max(most[0], sum(ref() is not None for ref in alive))
        capture = real_open(*args, **kwargs)
        alive.append(weakref.ref(capture))
        return capture

    monkeypatch.setattr(lab.capture, "open", open_one)
    results = replay(BUNDLED)
    assert len(alive) == 12  # one open per unit (the bundled capture has 12)
    assert most[0] == 0  # each unit's Capture was let go before the next was read
    # every field of every result, in the capture's order (across units: a request split
    # over two parts sits in a unit of its own, after units whose requests start later)
    assert [r.stream_id for r in results] == [r.stream_id for r in whole]
    assert list(results) == whole
    assert type(results).__name__ == "Results"


def _content(text: str) -> bytes:
    return f'data: {{"choices":[{{"delta":{{"content":"{text}"}}}}]}}\n\n'.encode()


def test_replay_of_a_path_keeps_capture_order_across_units_that_interleave_in_time(tmp_path):
    import lab.capture.writer as writer_mod
    from lab.replay.one import replay_request

    with (
        writer_mod.CaptureWriter(tmp_path, label="a") as a,
        writer_mod.CaptureWriter(tmp_path, label="b") as b,
    ):
        for i in range(3):  # two recordings, their requests alternating in time
            _request(a, f"a{i}", [_content(f"a{i}")])
            _request(b, f"b{i}", [_content(f"b{i}")])
    assert len(capture_units(tmp_path)) == 2
    results = replay(tmp_path)
    assert [r.text for r in results] == ["a0", "b0", "a1", "b1", "a2", "b2"]
    assert list(results) == [replay_request(r) for r in lab.capture.open(tmp_path).requests()]


def test_records_are_the_same_whatever_order_the_reads_table_is_in():
    # the reader takes each exchange's reads where open() sorted them (one run, seq order)
    # and sorts only when they are not: apart, or out of seq order
    import random

    import pyarrow as pa

    from lab.capture.reader import _exchange_ranges, _Rows

    capture = lab.capture.open(BUNDLED)
    streams, chunks = capture.streams_table, capture.chunks_table
    assert _exchange_ranges(chunks) is not None  # as open() leaves it: no second sort
    rows = list(range(chunks.num_rows))
    random.Random(7).shuffle(rows)
    shuffled = chunks.take(pa.array(rows))
    assert _exchange_ranges(shuffled) is None
    swapped = chunks.take(pa.array([1, 0, *range(2, chunks.num_rows)]))  # one seq pair
    assert _exchange_ranges(swapped) is None
    expected = [_Rows(streams, chunks).exchange(i) for i in range(streams.num_rows)]
    for table in (shuffled, swapped):
        assert [_Rows(streams, table).exchange(i) for i in range(streams.num_rows)] == expected


def test_a_copy_of_a_crashed_recording_in_the_root_is_replayed_once(tmp_path, monkeypatch):
    # a recording with journals left by a crash is one unit; a cp -r copy of it (journals
    # too, or its parts only) shares its requests and must join that unit, or replay(path)
    # and replay(out=) give every request twice where open() keeps one copy
    import shutil
    import warnings

    import lab.capture.journal as journal_mod
    import lab.capture.writer as writer_mod
    from lab.replay.one import replay_request

    monkeypatch.setattr(journal_mod.JournalWriter, "_run", lambda self: None)
    writer = writer_mod.CaptureWriter(tmp_path / "live", capture_id="crashed", journal_interval=0)
    for sid in ("s0", "s1"):
        _request(writer, sid, [_content(sid)])
    writer.flush()  # s0, s1 in parts
    _request(writer, "s2", [_content("s2")])  # s2 in the journal only
    writer._journal.sync()
    for name, ignore in (("journals", None), ("parts", shutil.ignore_patterns("*.journal"))):
        root = tmp_path / name
        shutil.copytree(tmp_path / "live", root / "rec")  # the recording as the crash left it
        shutil.copytree(tmp_path / "live", root / "rec-backup", ignore=ignore)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", lab.capture.CaptureWarning)
            units = capture_units(root)
            results = replay(root)
            whole = [replay_request(r) for r in lab.capture.open(root).requests()]
        assert len(units) == 1, name
        assert [r.text for r in results] == ["s0", "s1", "s2"], name
        assert list(results) == whole, name
    writer.close()


def _dataframe_latency_file(out: Path):
    """``latency.parquet``'s Arrow table as the DataFrame path builds it: the reference."""
    import pyarrow as pa

    from lab.replay import files

    streams = files._read_unit_table(out, "streams", list(tables.LATENCY_INPUT_COLUMNS))
    table = tables.latency(streams)
    schema = files._latency_schema(list(table.columns))
    data = pa.Table.from_pandas(table, schema=schema, preserve_index=False)
    return files._with_attrs(data, table.attrs)


def test_latency_parquet_built_without_pandas_equals_the_dataframes_file(tmp_path):
    # streams files of two units with what a fleet holds: backends named and not (an
    # OpenRouter stream that failed first, a direct provider, no provider at all), untimed
    # streams (a cassette's), figures missing, a backend of one stream; the Arrow table
    # (schema, pandas metadata, attrs) equals the one built through the DataFrame
    import numpy as np
    import pyarrow as pa

    from lab.replay import files

    replay(BUNDLED, out=tmp_path / "r")
    base = pq.read_table(sorted((tmp_path / "r").glob("streams-*.parquet"))[0])
    n = base.num_rows
    gen = np.random.default_rng(3)
    out = tmp_path / "mixed"
    out.mkdir()
    for unit in range(2):
        serving = gen.choice(["chutes", "novita", None, None], size=n).tolist()
        provider = gen.choice(["openrouter", "openai", "deepseek", None], size=n).tolist()
        timed = [bool(t) for t in gen.random(n) > 0.2]
        serving[0], provider[0] = "lonely", "openrouter"
        serving[1], provider[1] = None, "openai"
        serving[2], provider[2] = None, None
        table = base.set_column(
            base.schema.get_field_index("serving_provider"),
            "serving_provider",
            pa.array(serving, pa.string()),
        )
        table = table.set_column(
            table.schema.get_field_index("provider"), "provider", pa.array(provider, pa.string())
        )
        table = table.set_column(
            table.schema.get_field_index("timed"), "timed", pa.array(timed, pa.bool_())
        )
        for metric in ("ttft_ms", "stalls"):
            i = table.schema.get_field_index(metric)
            values = table.column(metric).to_pylist()
            values = [None if gen.random() < 0.3 else v for v in values]
            table = table.set_column(i, metric, pa.array(values, table.schema.field(i).type))
        pq.write_table(table, out / f"streams-{unit:05d}.parquet")
    built = files._latency_arrow(out)
    assert built is not None  # the lab's own column types: no DataFrame needed
    reference = _dataframe_latency_file(out)
    assert built.equals(reference, check_metadata=True)
    attrs = json.loads(built.schema.metadata[b"lab.attrs"])
    assert attrs["untimed"] == 2 * n - sum(
        pq.read_table(f, columns=["timed"]).column("timed").to_pylist().count(True)
        for f in sorted(out.glob("streams-*.parquet"))
    )
    assert attrs["notes"] and "without per-read timing" in attrs["notes"][0]
    labels = set(built.column("serving_provider").to_pylist())
    assert {"lonely", "chutes", "(unknown)", "openai (direct)"} <= labels

    # a figure of a type the lab does not write (text): the DataFrame path, the same file
    for path in sorted(out.glob("streams-*.parquet")):
        odd = pq.read_table(path)
        i = odd.schema.get_field_index("gap_p50_ms")
        text = pa.array([None if v is None else str(v) for v in odd.column(i).to_pylist()])
        pq.write_table(odd.set_column(i, "gap_p50_ms", text), path)
    assert files._latency_arrow(out) is None
    files._write_latency(out)
    written = pq.read_table(out / "latency.parquet")
    assert written.equals(_dataframe_latency_file(out), check_metadata=True)


def test_latency_parquet_of_streams_files_whose_columns_hold_only_nulls(tmp_path):
    # a streams file from elsewhere whose columns are all missing (Arrow's null type, which
    # the lab never writes): the file built without pandas is the DataFrame path's, and a
    # null `timed` (every stream untimed there) no longer stops the write
    import pyarrow as pa

    from lab.replay import files

    replay(BUNDLED, out=tmp_path / "r")
    source = sorted((tmp_path / "r").glob("streams-*.parquet"))[0]
    for col in ("timed", "serving_provider", "provider", "ttft_ms", "stalls"):
        out = tmp_path / col
        out.mkdir()
        table = pq.read_table(source)
        i = table.schema.get_field_index(col)
        pq.write_table(table.set_column(i, col, pa.nulls(table.num_rows)), out / source.name)
        files._write_latency(out)
        written = pq.read_table(out / "latency.parquet")
        assert written.equals(_dataframe_latency_file(out), check_metadata=True), col
    attrs = json.loads(
        pq.read_table(tmp_path / "timed" / "latency.parquet").schema.metadata[b"lab.attrs"]
    )
    assert attrs["untimed"] == pq.read_metadata(source).num_rows


def test_result_files_are_snappy_and_read_the_same_as_zstd_ones_of_earlier_runs(tmp_path):
    # the codec only changes the bytes on disk: a result dir of an earlier version (zstd)
    # reads as the same tables
    from lab.replay.files import RESULT_COMPRESSION

    out = tmp_path / "r"
    replay(BUNDLED, out=out)
    for f in sorted(out.glob("*.parquet")):
        meta = pq.ParquetFile(f).metadata
        codecs = {meta.row_group(0).column(i).compression for i in range(meta.num_columns)}
        assert codecs == {RESULT_COMPRESSION.upper()}, f.name
    before = {t: read_results(out, t) for t in ("streams", "gaps", "latency")}
    for f in sorted(out.glob("*.parquet")):  # as an earlier version wrote them
        pq.write_table(pq.read_table(f), f, compression="zstd")
    for t, frame in before.items():
        pd.testing.assert_frame_equal(read_results(out, t), frame, check_exact=True)


def test_latency_parquet_of_an_int_figure_past_2_to_the_53_is_the_dataframes(tmp_path):
    # a hostile streams file: an int figure no float holds exactly rounds as pandas rounds it
    import pyarrow as pa

    from lab.replay import files

    replay(BUNDLED, out=tmp_path / "r")
    path = sorted((tmp_path / "r").glob("streams-*.parquet"))[0]
    table = pq.read_table(path)
    i = table.schema.get_field_index("stalls")
    huge = pa.array([2**53 + 1 + k for k in range(table.num_rows)], pa.int64())
    pq.write_table(table.set_column(i, "stalls", huge), path)
    built = files._latency_arrow(tmp_path / "r")
    assert built is not None
    assert built.equals(_dataframe_latency_file(tmp_path / "r"), check_metadata=True)


def _ranges_by_rows(ids: list, exchanges: list, seqs: list) -> dict | None:
    """The rule of ``_exchange_ranges`` read row by row (the test's oracle): each
    (capture id, exchange) one run of rows, ``seq`` not decreasing inside it."""
    ranges: dict = {}
    start, previous, last_seq = 0, None, -1
    for i, (key, seq) in enumerate(zip(zip(ids, exchanges, strict=True), seqs, strict=True)):
        if i == 0 or key != previous:
            if key in ranges:
                return None
            if i:
                ranges[previous] = (start, i)
            start, previous = i, key
        elif seq < last_seq:
            return None
        last_seq = seq
    if ids:
        ranges[previous] = (start, len(ids))
    return ranges


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["a", "b", None]),
            st.one_of(st.none(), st.integers(0, 3)),
            st.integers(0, 4),
        ),
        max_size=30,
    ),
    cuts=st.lists(st.integers(0, 30), max_size=4),
)
def test_exchange_runs_found_by_arrow_kernels_match_a_row_by_row_reading(rows, cuts):
    # _exchange_ranges finds the runs with Arrow's kernels over tables of any chunking;
    # a null id or exchange equals a null (Python's == on the lists it replaced)
    import pyarrow as pa

    from lab.capture.reader import _exchange_ranges

    ids, exchanges, seqs = ([r[i] for r in rows] for i in range(3))
    bounds = sorted({0, len(rows), *(c for c in cuts if c <= len(rows))})
    pieces = [
        pa.table(
            {
                "capture_id": pa.array(ids[a:b], pa.string()),
                "exchange": pa.array(exchanges[a:b], pa.int32()),
                "seq": pa.array(seqs[a:b], pa.int32()),
            }
        )
        for a, b in zip(bounds, bounds[1:], strict=False)
    ] or [pa.table({"capture_id": pa.array([], pa.string()), "exchange": pa.array([], pa.int32()),
                    "seq": pa.array([], pa.int32())})]  # fmt: skip
    table = pa.concat_tables(pieces)
    assert _exchange_ranges(table) == _ranges_by_rows(ids, exchanges, seqs)


def test_replaying_a_capture_from_its_path_in_memory_never_imports_pandas():
    # pandas is 38 MB of a replay's peak that nothing in it reads; pyarrow imports it
    # whenever pa.array() is handed a list, so the reader must not hand it one
    import subprocess
    import sys

    code = (
        "import sys; from lab.replay import replay; "
        f"results = replay({str(BUNDLED)!r}); "
        "print(len(results), 'pandas' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.split() == ["132", "False"]


def test_a_replay_gives_arrows_freed_memory_back_once_a_unit(monkeypatch, tmp_path):
    import lab.replay.files
    import lab.replay.many

    calls: list[str] = []
    for module in (lab.replay.many, lab.replay.files):
        monkeypatch.setattr(module, "release_freed", lambda m=module.__name__: calls.append(m))
    units = len(capture_units(BUNDLED))
    assert len(replay(BUNDLED)) == 132
    assert calls == ["lab.replay.many"] * units
    calls.clear()
    replay(BUNDLED, out=tmp_path / "out")
    assert calls == ["lab.replay.files"] * units


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40))
def test_the_readers_int64_arrays_equal_pyarrows_own(values):
    import pyarrow as pa

    from lab.capture.reader import _int64_array

    assert _int64_array(values).equals(pa.array(values, pa.int64()))
