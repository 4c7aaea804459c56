"""A recording whose chunks part is gone opens with one clear CaptureError (it raised a
TypeError from building the lookup of found reads, keyed by a list; mypy found it)."""

from __future__ import annotations

import pytest

import lab.capture
from lab.capture import CaptureError


def test_a_missing_chunks_part_is_one_capture_error_naming_it(tmp_path):
    with lab.capture.CaptureWriter(tmp_path, capture_id="c") as w:
        for i in range(2):
            rec = w.exchange(
                stream_id=f"s{i}",
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
            rec.on_read(b"data: x\n\n")
            rec.on_end("eof")
            w.flush()  # one part per exchange
    assert sorted(p.name for p in w.path.iterdir()) == [
        "chunks-00000.parquet",
        "chunks-00001.parquet",
        "streams-00000.parquet",
        "streams-00001.parquet",
    ]
    (w.path / "chunks-00001.parquet").unlink()
    with pytest.raises(CaptureError) as info:
        lab.capture.open(w.path)
    assert str(info.value) == (
        f"{w.path / 'streams-00001.parquet'}: 1 of its 1 exchanges lack recorded reads "
        "(exchange 1, stream 's1' attempt 0: 1 reads recorded, 0 found in the chunks parts "
        "read); chunks-00001.parquet is missing"
    )
