"""An exchange past 2 GiB opens, replays and does not hide the exchanges beside it.

``chunks.raw`` is a 32-bit-offset ``binary`` column on disk; sorting or joining the reads
of a capture whose reads pass 2 GiB in one table used to fail with ``offset overflow`` for
every replay of the root. The reader holds ``raw`` as ``large_binary``."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import lab.capture
from lab.capture.writer import CaptureWriter
from lab.replay import replay

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "captures"


def test_the_reader_holds_reads_with_64_bit_offsets():
    capture = lab.capture.open(BUNDLED)
    assert capture.chunks_table.schema.field("raw").type == pa.large_binary()


@pytest.mark.slow
def test_a_2_point_1_gib_exchange_opens_and_replays_beside_the_bundled_ones(tmp_path):
    root = tmp_path / "root"
    shutil.copytree(BUNDLED, root)
    # SSE comments of 1 MiB, each its own (8 KiB of hex text repeated: zstd packs the part
    # about 250 times; a part packed past lab.capture.bounds.MAX_COMPRESSION_RATIO is
    # refused as crafted, and 1 MiB of one letter packs 140,000 times)
    block = random.Random(3).randbytes(4096).hex().encode() * 128
    n_reads = 2150  # 2.1 GiB of reads in one exchange
    writer = CaptureWriter(root)
    recorder = writer.exchange(
        stream_id="s-huge",
        attempt=0,
        attempt_label="default",
        provider="openai",
        model="fake/huge",
        method="POST",
        url="https://api.openai.com/v1/chat/completions",
        request_headers={"content-type": "application/json"},
        request_body=b'{"model": "fake/huge", "messages": [], "stream": true}',
    )
    recorder.on_response(200, {"content-type": "text/event-stream"}, "HTTP/1.1")
    for i in range(n_reads):
        recorder.on_read(b": %05d " % i + block + b"\n\n")
    recorder.on_read(b"data: [DONE]\n\n")
    recorder.on_end("eof")
    writer.close()
    del recorder, writer

    capture = lab.capture.open(root)
    huge = capture.request("s-huge").final
    assert len(huge.reads) == n_reads + 1
    assert sum(map(len, huge.reads)) == n_reads * (len(block) + 10) + 14
    assert len(capture.requests()) == 133
    del capture, huge

    written = replay(root, out=tmp_path / "out")
    assert written.streams == 133
    streams = written.read("streams").set_index("stream_id")
    assert len(streams) == 133 and streams.loc["s-huge", "text_chars"] == 0
