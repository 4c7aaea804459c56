"""Duplicated or missing data is noticed (issue 19 item 6): a ``cp -r`` backup of a recording
inside the captures root doubled every exchange (reads interleaved, replays changed); a part
deleted from the middle of a recording went unsaid."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lab.capture
from lab import tables
from lab.capture import CaptureWarning, CaptureWriter
from lab.capture.units import capture_units
from lab.cli import main
from lab.replay import replay
from lab.resultfiles import read_results

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = next((ROOT / "captures").iterdir())  # the one bundled recording
CAPTURE_ID = BUNDLED.name


def _root_with_a_backup(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = tmp_path / "captures"
    original = root / CAPTURE_ID
    shutil.copytree(BUNDLED, original)
    backup = root / f"{CAPTURE_ID}-backup"  # sorts after the original
    shutil.copytree(original, backup)
    return root, original, backup


def _duplicate_message(original: Path, backup: Path, n: int, identical: int, example: str) -> str:
    return (
        f"{n} exchange(s) of recording {CAPTURE_ID} are in both {original} and {backup}: "
        f"{identical} byte-identical, {n - identical} differing (e.g. stream {example!r} "
        f"attempt 0); kept the copies in {original}, ignored those in {backup}"
    )


def _values(df: pd.DataFrame) -> pd.DataFrame:
    return df.astype(object).where(df.notna(), None).reset_index(drop=True)


def _record(w: CaptureWriter, stream_id: str, reads: list[bytes]) -> None:
    rec = w.exchange(
        stream_id=stream_id,
        attempt=0,
        attempt_label="default",
        provider="openrouter",
        model="m",
        method="POST",
        url="http://127.0.0.1:1/",
        request_headers={},
        request_body=b"{}",
    )
    rec.on_response(200, {}, "HTTP/1.1")
    for read in reads:
        rec.on_read(read)
    rec.on_end("eof")
    w.flush()  # one part per exchange


def test_a_copied_recording_in_the_root_replays_exactly_the_original_and_warns_once(tmp_path):
    root, original, backup = _root_with_a_backup(tmp_path)
    alone = lab.capture.open(original)
    assert alone.warnings == [] and alone.metadata["duplicate_exchanges"] == 0
    with pytest.warns(CaptureWarning) as caught:
        both = lab.capture.open(root)
    (message,) = [str(w.message) for w in caught]
    assert message == both.warnings[0]
    assert both.warnings == [_duplicate_message(original, backup, 160, 160, _first_dup())]
    assert both.metadata["duplicate_exchanges"] == 160
    # exactly the original's rows and reads, nothing doubled or interleaved
    assert both.streams_table.equals(alone.streams_table)
    assert both.chunks_table.equals(alone.chunks_table)
    assert both.paths == [*sorted(original.iterdir()), *sorted(backup.iterdir())]
    got = tables.streams(replay(both))
    want = tables.streams(replay(alone))
    assert len(got) == len(want) == 132
    pd.testing.assert_frame_equal(_values(got), _values(want))


def _first_dup() -> str:
    """The stream of the first row of the first part (the first copy the reader meets)."""
    table = pq.read_table(BUNDLED / "streams-00000.parquet", columns=["stream_id"])
    return table["stream_id"][0].as_py()


def test_replay_to_out_over_units_skips_the_copy_and_warns_once(tmp_path):
    root, original, backup = _root_with_a_backup(tmp_path)
    with pytest.warns(CaptureWarning) as caught:
        units = capture_units(root)
    assert [str(w.message) for w in caught] == [
        f"160 exchange(s) of recording {CAPTURE_ID} are in both {original} and {backup}; "
        f"replay keeps the copies in {original}, ignores those in {backup}"
    ]
    assert len(units) == 12  # each copied part joined its original's unit
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        written = replay(root, out=tmp_path / "r")
    assert len([w for w in again if issubclass(w.category, CaptureWarning)]) == 1
    assert (written.units, written.streams) == (12, 132)
    want = tables.streams(replay(lab.capture.open(original)))
    got = read_results(tmp_path / "r", "streams")
    pd.testing.assert_frame_equal(_values(got), _values(want))


def test_lab_replay_prints_one_line_about_the_copy(tmp_path, capsys):
    root, original, backup = _root_with_a_backup(tmp_path)
    assert main(["replay", str(root), "--format", "csv"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "byte-identical" in line]
    assert lines == [
        "lab: warning: " + _duplicate_message(original, backup, 160, 160, _first_dup())
    ]


def test_a_differing_copy_keeps_the_first_and_counts_it_as_differing(tmp_path):
    root = tmp_path / "captures"
    with CaptureWriter(root, capture_id="c") as w:
        _record(w, "s0", [b"data: a\n\n", b"data: b\n\n"])
        _record(w, "s1", [b"data: c\n\n"])
    copy = root / "c-copy"
    shutil.copytree(w.path, copy)
    part = copy / "chunks-00000.parquet"
    table = pq.read_table(part)
    raw = table["raw"].to_pylist()
    assert raw == [b"data: a\n\n", b"data: b\n\n"]
    changed = table.set_column(
        table.schema.get_field_index("raw"),
        table.schema.field("raw"),
        pa.array([b"data: X\n\n", b"data: b\n\n"], pa.binary()),
    )
    pq.write_table(changed, part)
    with pytest.warns(CaptureWarning):
        cap = lab.capture.open(root)
    assert cap.warnings == [
        f"2 exchange(s) of recording c are in both {w.path} and {copy}: 1 byte-identical, "
        f"1 differing (e.g. stream 's0' attempt 0); kept the copies in {w.path}, ignored "
        f"those in {copy}"
    ]
    assert [ex.reads for ex in cap.exchanges()] == [
        [b"data: a\n\n", b"data: b\n\n"],
        [b"data: c\n\n"],
    ]


def test_a_deleted_middle_part_is_reported_and_the_rest_opens(tmp_path):
    with CaptureWriter(tmp_path, capture_id="c") as w:
        for i in range(3):
            _record(w, f"s{i}", [f"data: {i}\n\n".encode()])
    assert lab.capture.open(w.path).warnings == []
    (w.path / "streams-00001.parquet").unlink()
    (w.path / "chunks-00001.parquet").unlink()
    with pytest.warns(CaptureWarning) as caught:
        cap = lab.capture.open(w.path)
    expected = (
        f"{w.path}: part(s) missing from the sequence 00000..00002: streams-00001.parquet, "
        "chunks-00001.parquet; their exchanges are not in this capture"
    )
    assert [str(x.message) for x in caught] == [expected]
    assert cap.warnings == [expected]
    assert [r.stream_id for r in cap.requests()] == ["s0", "s2"]
    with pytest.warns(CaptureWarning) as from_units:
        capture_units(w.path)
    assert [str(x.message) for x in from_units] == [expected]


def test_a_lone_orphan_chunks_part_in_the_middle_is_reported_as_its_missing_streams_part(tmp_path):
    with CaptureWriter(tmp_path, capture_id="c") as w:
        for i in range(3):
            _record(w, f"s{i}", [f"data: {i}\n\n".encode()])
    (w.path / "streams-00001.parquet").unlink()
    with pytest.warns(CaptureWarning):
        cap = lab.capture.open(w.path)
    assert cap.warnings == [
        f"{w.path}: part(s) missing from the sequence 00000..00002: streams-00001.parquet; "
        "their exchanges are not in this capture"
    ]


def test_the_files_of_one_unit_named_outright_are_no_gap(tmp_path):
    with CaptureWriter(tmp_path, capture_id="c") as w:
        for i in range(3):
            _record(w, f"s{i}", [f"data: {i}\n\n".encode()])
    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureWarning)
        cap = lab.capture.open([w.path / "streams-00000.parquet", w.path / "chunks-00000.parquet"])
        whole = lab.capture.open(w.path)
    assert cap.warnings == [] and whole.warnings == []
    assert [r.stream_id for r in cap.requests()] == ["s0"]
