"""A unit holds one exchange at most when it is large: a logical request with an exchange
over ``LARGE_EXCHANGE_BYTES`` is a unit of its own, the rest of its part another, and each
unit reads only its own requests from the part, batch by batch; a replay into files over
such units writes what the in-memory replay gives. Thresholds are made small here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import lab.capture
import lab.capture.compact
import lab.capture.reader
import lab.capture.units
from lab import tables
from lab.capture.units import capture_units
from lab.capture.writer import CaptureWriter
from lab.replay import replay

THRESHOLD = 100_000


def _chat(i: int, n_reads: int, width: int = 1000) -> list[bytes]:
    """``n_reads`` SSE reads of about ``width`` bytes each, each different."""
    out = []
    for k in range(n_reads):
        text = f"{i}-{k} " + "word " * ((width - 80) // 5)
        obj = {"id": f"c{i}", "choices": [{"index": 0, "delta": {"content": text}}]}
        out.append(f"data: {json.dumps(obj)}\n\n".encode())
    done = {"id": f"c{i}", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return [*out, f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode()]


def _record(root: Path, plan: list[tuple[str, list[int]]]) -> Path:
    """One recording, compacted into one part: for each (stream id, reads per attempt),
    its attempts."""
    writer = CaptureWriter(root, flush_interval=3600)
    for stream_id, attempts in plan:
        for attempt, n_reads in enumerate(attempts):
            rec = writer.exchange(
                stream_id=stream_id,
                attempt=attempt,
                attempt_label="default" if attempt == 0 else f"retry-{attempt}",
                provider="openai",
                model="fake/big",
                method="POST",
                url="https://api.openai.com/v1/chat/completions",
                request_headers={"content-type": "application/json"},
                request_body=b'{"model": "fake/big", "messages": [], "stream": true}',
            )
            rec.on_response(200, {"content-type": "text/event-stream"}, "HTTP/1.1")
            for read in _chat(len(stream_id) + attempt, n_reads):
                rec.on_read(read)
            rec.on_end("eof")
    writer.close()
    lab.capture.compact.compact(root)  # one part, as compaction leaves a recording
    assert len(list(writer.path.glob("streams-*.parquet"))) == 1
    return writer.path


PLAN = [("s-small-a", [5]), ("s-large", [300]), ("s-small-b", [3]), ("s-retry", [4, 200])]


@pytest.fixture
def recording(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(lab.capture.units, "LARGE_EXCHANGE_BYTES", THRESHOLD)
    return _record(tmp_path / "root", PLAN)


def _requests(unit) -> tuple[bool, list[str]]:
    return unit.select.keep, sorted(sid for _, sid in unit.select.requests)


def test_each_request_with_a_large_exchange_is_a_unit_of_its_own(recording):
    units = capture_units(recording)
    assert [_requests(u) for u in units] == [
        (False, ["s-large", "s-retry"]),
        (True, ["s-large"]),
        (True, ["s-retry"]),
    ]
    assert len({u.files for u in units}) == 1  # the same part, three selections
    # compaction rewrites whole files: it asks for them unsplit
    assert [u.select for u in capture_units(recording, split_large=False)] == [None]


def test_a_unit_opens_only_its_requests_and_none_of_the_others_reads(recording):
    rest, large, retry = capture_units(recording)
    opened = {}
    for name, unit in (("rest", rest), ("large", large), ("retry", retry)):
        capture = lab.capture.open(list(unit.files), select=unit.select)
        opened[name] = capture
    assert sorted(opened["rest"].streams["stream_id"]) == ["s-small-a", "s-small-b"]
    assert set(opened["rest"].chunks["stream_id"]) == {"s-small-a", "s-small-b"}
    assert len(opened["rest"].chunks) == 6 + 4  # their reads only (and each [DONE] read)
    assert [(r.stream_id, len(r.exchanges)) for r in opened["retry"].requests()] == [
        ("s-retry", 2)  # every attempt of the request
    ]
    assert [len(ex.reads) for ex in opened["retry"].exchanges()] == [5, 201]
    assert [len(ex.reads) for ex in opened["large"].exchanges()] == [301]
    whole = lab.capture.open(recording)
    assert sum(c.chunks_table.num_rows for c in opened.values()) == whole.chunks_table.num_rows


@pytest.mark.parametrize("workers", [None, 2], ids=["this-process", "two-processes"])
def test_replay_into_files_over_split_units_writes_what_the_in_memory_replay_gives(
    recording, tmp_path, workers
):
    written = replay(recording, out=tmp_path / "out", workers=workers)
    assert (written.units, written.streams) == (3, 4)
    from_files = written.read("streams").sort_values("stream_id").reset_index(drop=True)
    in_memory = tables.streams(replay(recording)).sort_values("stream_id").reset_index(drop=True)
    columns = ["stream_id", "n_chunks", "text_chars", "finish_reason", "outcome", "attempts"]
    assert from_files[columns].to_dict("records") == in_memory[columns].to_dict("records")


_MEASURE = """
import json, sys
import pyarrow as pa
import lab.capture, lab.capture.reader, lab.capture.units
lab.capture.units.LARGE_EXCHANGE_BYTES = int(sys.argv[2])
lab.capture.units.SELECT_BATCH_BYTES = int(sys.argv[3])
rest = lab.capture.units.capture_units(sys.argv[1])[0]
capture = lab.capture.open(list(rest.files), select=rest.select)
print(json.dumps({"reads": capture.chunks_table.num_rows,
                  "arrow_peak": pa.default_memory_pool().max_memory()}))
"""


def test_the_rest_of_a_part_opens_without_ever_holding_its_large_exchange(tmp_path):
    """In a fresh process: the part holds a 48 MB exchange beside two small requests; the
    unit of the small ones reads the part in 1 MiB batches and Arrow's peak stays far
    below the large exchange."""
    path = _record(tmp_path / "root", [("s-small-a", [5]), ("s-huge", [48_000]), ("s-b", [3])])
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), str(THRESHOLD), str(1 << 20)],
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(done.stdout)
    assert measured["reads"] == 6 + 4
    assert measured["arrow_peak"] < 16 * 1024 * 1024  # the exchange is 48 MB
