"""Fixtures are written through the capture writer's one part writer, and atomically: a
failed export (fault-injected) leaves no half file and no half fixture."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import lab.capture
import lab.capture.writer as writer_mod
from lab import fixtures

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "tests" / "fixtures" / "spill-novita"


def _stream_id() -> str:
    return fixtures.load_fixture(SOURCE).request.stream_id


def _export(dest: Path, **kwargs) -> Path:
    return fixtures.export_fixture(
        lab.capture.open(SOURCE / "capture"), _stream_id(), dest, "spill", **kwargs
    )


def _fail_on_call(monkeypatch, module, name: str, call: int, error: Exception) -> list[str]:
    """Make ``module.name`` raise ``error`` on its ``call``-th call (1-based); the calls
    before it go through. Returns the list of first arguments seen."""
    real = getattr(module, name)
    seen: list[str] = []

    def fake(*args, **kwargs):
        seen.append(str(args[1] if name == "write_table" else args[0]))
        if len(seen) == call:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, fake)
    return seen


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_an_export_writes_its_capture_through_the_writers_part_writer(tmp_path, monkeypatch):
    calls = []
    real = writer_mod.write_part

    def spy(directory, n, exchanges, **kwargs):
        exchanges = list(exchanges)
        calls.append((Path(directory).name, n, len(exchanges)))
        return real(directory, n, exchanges, **kwargs)

    monkeypatch.setattr(writer_mod, "write_part", spy)
    path = _export(tmp_path)
    assert calls == [("capture", 0, 1)]
    assert sorted(p.name for p in (path / "capture").iterdir()) == [
        "chunks-00000.parquet",
        "streams-00000.parquet",
    ]
    assert fixtures.compare_to_golden(path) == []


def test_fixture_and_recording_parts_have_the_same_columns_and_types(tmp_path):
    with lab.capture.CaptureWriter(tmp_path / "rec", capture_id="c") as w:
        rec = w.exchange(
            stream_id="s",
            attempt=0,
            attempt_label="default",
            provider="openrouter",
            model="m",
            method="POST",
            url="http://127.0.0.1:1/v1/chat/completions",
            request_headers={},
            request_body=b"{}",
        )
        rec.on_response(200, {"content-type": "text/event-stream"}, "HTTP/1.1")
        rec.on_read(b"data: [DONE]\n\n")
        rec.on_end("eof")
    path = _export(tmp_path / "fx")
    for name in ("streams-00000.parquet", "chunks-00000.parquet"):
        recorded = pq.read_schema(w.path / name)
        exported = pq.read_schema(path / "capture" / name)
        assert [(f.name, f.type) for f in exported] == [(f.name, f.type) for f in recorded]


@pytest.mark.parametrize("call", [1, 2], ids=["chunks-file", "streams-file"])
def test_a_failed_parquet_write_leaves_no_fixture_and_no_temporary_file(
    tmp_path, monkeypatch, call
):
    dest = tmp_path / "fx"
    seen = _fail_on_call(monkeypatch, pq, "write_table", call, OSError("No space left on device"))
    with pytest.raises(OSError, match="No space left on device"):
        _export(dest)
    assert [Path(s).name for s in seen] == [
        ".chunks-00000.parquet.tmp",
        ".streams-00000.parquet.tmp",
    ][:call]
    assert list(dest.iterdir()) == []  # no fixture, no staging directory, no .tmp
    assert fixtures.discover(dest) == []


def test_a_failure_after_the_capture_is_written_leaves_nothing_either(tmp_path, monkeypatch):
    dest = tmp_path / "fx"

    def broken(result):
        raise RuntimeError("golden failed")

    monkeypatch.setattr(fixtures, "golden_text", broken)
    with pytest.raises(RuntimeError, match="golden failed"):
        _export(dest)
    assert list(dest.iterdir()) == []


def test_a_failed_overwrite_keeps_the_old_fixture_intact(tmp_path, monkeypatch):
    dest = tmp_path / "fx"
    path = _export(dest)
    before = _tree(path)
    assert "capture/streams-00000.parquet" in before
    _fail_on_call(monkeypatch, pq, "write_table", 2, OSError("No space left on device"))
    with pytest.raises(OSError):
        _export(dest, overwrite=True)
    assert [p.name for p in dest.iterdir()] == ["spill"]
    assert _tree(path) == before
    assert fixtures.compare_to_golden(path) == []


def test_an_overwrite_replaces_the_fixture_whole(tmp_path):
    dest = tmp_path / "fx"
    path = _export(dest)
    (path / "stray.txt").write_text("from before", encoding="utf-8")
    again = _export(dest, overwrite=True)
    assert again == path
    assert [p.name for p in dest.iterdir()] == ["spill"]
    assert not (path / "stray.txt").exists()
    assert fixtures.compare_to_golden(path) == []


def test_the_part_writer_removes_its_temporary_file_when_a_write_fails(tmp_path, monkeypatch):
    from lab.capture.redact import REDACTION_POLICY
    from lab.capture.schema import capture_info, schema_for

    info = capture_info("c", None, "")
    request = fixtures.load_fixture(SOURCE).request
    ex = request.exchanges[0]
    row = {name: None for name in schema_for("streams", info, REDACTION_POLICY).names}
    row.update(
        capture_id="c",
        exchange=0,
        stream_id=ex.stream_id,
        attempt=0,
        attempt_label="default",
        provider="openrouter",
        method="POST",
        url="http://127.0.0.1:1/",
        request_headers="{}",
        request_body="{}",
        request_body_encoding="utf-8",
        started_at=0,
        end_reason="eof",
        n_reads=len(ex.reads),
        n_bytes=sum(map(len, ex.reads)),
        meta="{}",
    )
    _fail_on_call(monkeypatch, pq, "write_table", 2, OSError("No space left on device"))
    with pytest.raises(OSError):
        writer_mod.write_part(
            tmp_path,
            0,
            [(row, list(ex.reads), list(ex.read_t_ns))],
            streams_schema=schema_for("streams", info, REDACTION_POLICY),
            chunks_schema=schema_for("chunks", info, REDACTION_POLICY),
        )
    # the chunks part came first and is whole; the streams part never appeared, torn or not
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chunks-00000.parquet"]
    assert pq.read_table(tmp_path / "chunks-00000.parquet").num_rows == len(ex.reads)


def test_update_golden_writes_each_file_whole(tmp_path, monkeypatch):
    import shutil

    path = tmp_path / "spill"
    shutil.copytree(SOURCE, path)
    (path / "expected.json").write_text("{}\n", encoding="utf-8")
    real = Path.write_text

    def torn(self, text, *args, **kwargs):
        real(self, text[: len(text) // 2], *args, **kwargs)
        raise OSError("No space left on device")

    monkeypatch.setattr(Path, "write_text", torn)
    with pytest.raises(OSError):
        fixtures.update_golden(path)
    monkeypatch.undo()
    assert (path / "expected.json").read_text(encoding="utf-8") == "{}\n"
    assert sorted(p.name for p in path.iterdir()) == sorted(p.name for p in SOURCE.iterdir())


def test_overwrite_refuses_a_directory_that_is_not_a_fixture(tmp_path):
    dest = tmp_path / "fx"
    mine = dest / "spill"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(fixtures.FixtureError) as info:
        _export(dest, overwrite=True)
    assert str(info.value) == (
        f"{mine} exists and is not a fixture (no fixture.json and expected.json); not replacing it"
    )
    assert sorted(p.name for p in dest.iterdir()) == ["spill"]
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "mine"


def test_cli_export_force_on_a_directory_that_is_not_a_fixture_exits_2(tmp_path, capsys):
    from lab.cli import main

    mine = tmp_path / "spill"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine", encoding="utf-8")
    argv = ["fixtures", "export", str(SOURCE / "capture"), "--stream", _stream_id()]
    code = main([*argv, "--dest", str(tmp_path), "--name", "spill", "--force"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        f"lab: error: {mine} exists and is not a fixture (no fixture.json and expected.json);"
        " not replacing it\n"
    )
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "mine"
