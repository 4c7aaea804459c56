"""Compaction is crash-safe and atomic from a reader's point of view (issue 29 item 4).

A compaction killed at any file operation leaves a capture that opens, whole and unit by
unit, with exactly the bytes it had (never both the old and the new parts, never neither),
and the next compaction finishes it. Parts of another schema version or foreign Parquet
files are never compacted. A reader that finds a part gone because a compaction moved on
reads again. The whole walk: ``-m slow`` here, or ``python tests/compact_kill_walk.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from compact_kill_walk import BUNDLED, TARGET_BYTES, Killed, dying_at, exchanges, operations, run

import lab.capture
import lab.capture.compact
import lab.capture.reader
from lab.capture import CaptureError
from lab.cli import main


@pytest.fixture(scope="module")
def original() -> dict:
    return exchanges(BUNDLED)


def _positions(ops: list[str]) -> list[int]:
    """One kill at each kind of place: before the first new part, while the new parts are
    written, at the commit (the manifest's rename), between the new parts' renames, between
    the old parts' removals, before the manifest's removal."""
    first_rename = next(i for i, op in enumerate(ops) if ".parquet.compact ->" in op)
    return [
        0,
        1,
        next(i for i, op in enumerate(ops) if op.startswith("rename .compact-manifest")),
        first_rename,
        first_rename + 1,  # one new part in place, its sibling not yet: the doubling of main
        next(i for i, op in enumerate(ops) if op.startswith("remove ")) + 1,
        len(ops) - 1,
    ]


@pytest.mark.parametrize("mode", ["kill", "torn"])
def test_a_compaction_killed_at_a_file_operation_leaves_the_same_bytes_readable(
    tmp_path, original, mode
):
    ops = operations(tmp_path)
    assert ops[-1] == "remove .compact-manifest.json"
    for position in _positions(ops):
        got = run(tmp_path, position, mode, original)
        assert got["killed_at"] is not None
        assert (got["unopenable"], got["wrong_bytes"], got["error"]) == (0, 0, ""), got
        assert (got["after_recompact_unopenable"], got["after_recompact_wrong_bytes"]) == (0, 0)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["kill", "torn"])
def test_a_compaction_killed_at_every_file_operation_leaves_the_same_bytes_readable(
    tmp_path, original, mode
):
    ops = operations(tmp_path)
    bad = [
        r
        for r in (run(tmp_path, p, mode, original) for p in range(len(ops)))
        if r["unopenable"]
        or r["wrong_bytes"]
        or r["after_recompact_unopenable"]
        or r["after_recompact_wrong_bytes"]
    ]
    assert bad == []


def test_between_the_renames_a_reader_sees_the_old_parts_and_after_them_the_new(tmp_path, original):
    root = tmp_path / "caps"
    shutil.copytree(BUNDLED, root)
    (rec,) = [p for p in root.iterdir() if p.is_dir()]
    ops = operations(tmp_path)
    first_rename = next(i for i, op in enumerate(ops) if ".parquet.compact ->" in op)
    with dying_at(first_rename + 1, "kill"), pytest.raises(Killed):
        lab.capture.compact.compact(root, target_bytes=TARGET_BYTES)
    cap = lab.capture.open(root)
    assert sorted(p.name for p in cap.paths if p.name.startswith("streams-"))[-1] == (
        "streams-00012.parquet"
    )
    assert exchanges(root) == original
    last_rename = max(i for i, op in enumerate(ops) if ".parquet.compact ->" in op)
    shutil.rmtree(root)
    shutil.copytree(BUNDLED, root)
    with dying_at(last_rename + 2, "kill"), pytest.raises(Killed):  # one old part removed
        lab.capture.compact.compact(root, target_bytes=TARGET_BYTES)
    cap = lab.capture.open(root)
    assert min(p.name for p in cap.paths if p.name.startswith("streams-")) == (
        "streams-00013.parquet"
    )
    assert exchanges(root) == original
    assert (rec / ".compact-manifest.json").exists()


def test_a_reader_reads_again_when_a_compaction_removes_a_part_it_listed(
    tmp_path, original, monkeypatch
):
    root = tmp_path / "caps"
    shutil.copytree(BUNDLED, root)
    real = lab.capture.reader._read_parts
    calls = []

    def compact_first(parts, *rest):
        calls.append(len(parts))
        if len(calls) == 1:  # the listing is done: a compaction runs to its end now
            lab.capture.compact.compact(root)
        return real(parts, *rest)

    monkeypatch.setattr(lab.capture.reader, "_read_parts", compact_first)
    assert exchanges(root) == original
    assert calls == [26, 2]


def _compact_cli(root: Path, capsys) -> tuple[int, str, str]:
    code = main(["capture", "compact", str(root)])
    out, err = capsys.readouterr()
    return code, out, err


def test_compact_refuses_a_part_of_another_schema_version(tmp_path, capsys):
    root = tmp_path / "caps"
    shutil.copytree(BUNDLED, root)
    (rec,) = [p for p in root.iterdir() if p.is_dir()]
    part = rec / "streams-00003.parquet"
    table = pq.read_table(part)
    meta = dict(table.schema.metadata)
    meta[b"lab.schema_version"] = b"2"
    pq.write_table(table.replace_schema_metadata(meta), part)
    before = sorted((p.name, p.read_bytes()) for p in rec.iterdir())
    code, out, err = _compact_cli(root, capsys)
    assert code == 0
    assert err == (
        f"lab capture compact: skipped {rec}: streams-00003.parquet: capture schema version 2, "
        "not this lab's 1 (compaction would relabel its rows)\n"
    )
    assert out == "lab capture compact: 0 recording(s), 0 parts (0 bytes) -> 0 parts (0 bytes)\n"
    assert sorted((p.name, p.read_bytes()) for p in rec.iterdir()) == before


def test_compact_refuses_foreign_parquet_among_the_parts(tmp_path, capsys):
    root = tmp_path / "caps"
    shutil.copytree(BUNDLED, root)
    (rec,) = [p for p in root.iterdir() if p.is_dir()]
    table = pq.read_table(rec / "chunks-00001.parquet").replace_schema_metadata(None)
    pq.write_table(table, rec / "chunks-00001.parquet")  # a chunks part without its footer
    code, _out, err = _compact_cli(root, capsys)
    assert code == 0
    assert err == (
        f"lab capture compact: skipped {rec}: chunks-00001.parquet: not a Stream Lab capture "
        "part (no lab.table / lab.schema_version)\n"
    )
    assert len(list(rec.glob("*.parquet"))) == 26
    pq.write_table(table, rec / "notes.parquet")
    shutil.copy(BUNDLED / rec.name / "chunks-00001.parquet", rec / "chunks-00001.parquet")
    code, _out, err = _compact_cli(root, capsys)
    assert err == (
        f"lab capture compact: skipped {rec}: holds Parquet files that are not capture parts "
        "(notes.parquet)\n"
    )
    assert len(list(rec.glob("*.parquet"))) == 27


def test_an_unreadable_manifest_says_what_it_is(tmp_path):
    root = tmp_path / "caps"
    shutil.copytree(BUNDLED, root)
    (rec,) = [p for p in root.iterdir() if p.is_dir()]
    (rec / ".compact-manifest.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(CaptureError) as info:
        lab.capture.open(root)
    assert str(info.value) == (
        f"{rec}/.compact-manifest.json: unreadable compaction manifest (JSONDecodeError); "
        f"`lab capture compact {rec}` cannot finish it either: restore the recording from a copy"
    )
