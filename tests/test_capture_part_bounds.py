"""A crafted part cannot make the reader allocate gigabytes: what a part would decode to is
checked against its size on disk before it is decoded (``MAX_COMPRESSION_RATIO``), the part
is refused with a message naming it and both sizes, and the exchanges beside it still open.

The crafted parts here are small files that decode to 2 GiB: a dictionary page holding one
1 MiB value that 2,048 rows repeat (the footer declares about 1 MiB; the rows expand), and
a column of zeros written without a dictionary (the footer declares 2 GiB of pages). Before
the check, opening the first one peaked at 2.2 GB of RSS and then failed with ``Take
operation overflowed binary array capacity``."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lab.capture
from lab.capture.bounds import MAX_COMPRESSION_RATIO, PART_BYTES_FLOOR
from lab.capture.errors import CaptureWarning, PartTooLarge
from lab.capture.schema import schema_for
from lab.replay import replay

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "captures"
N_EXCHANGES = 160  # in the bundled capture
N_REQUESTS = 132
MIB = 1024 * 1024
ROWS = 2048


def _crafted_recording(directory: Path, *, dictionary: bool) -> Path:
    """``streams-00000`` with one exchange of ``ROWS`` reads of 1 MiB, and its
    ``chunks-00000`` holding them: 2 GiB once decoded, a few MB or KB on disk."""
    directory.mkdir(parents=True)
    info = {"capture_id": "crafted"}
    bundled_streams = sorted(BUNDLED.glob("*/streams-*.parquet"))[0]
    row = pq.read_table(bundled_streams).slice(0, 1).to_pylist()[0]
    row.update(capture_id="crafted", exchange=0, stream_id="s-crafted", attempt=0)
    row.update(n_reads=ROWS, n_bytes=ROWS * MIB)
    streams_schema = schema_for("streams", info, {})
    pq.write_table(
        pa.Table.from_pylist([row], schema=streams_schema), directory / "streams-00000.parquet"
    )
    schema = schema_for("chunks", info, {})
    if dictionary:  # one value the rows repeat: the footer declares ~1 MiB of pages
        value = random.Random(29).randbytes(MIB)
        raw = pa.DictionaryArray.from_arrays(
            pa.array([0] * ROWS, pa.int32()), pa.array([value], pa.binary())
        )
        fields = [pa.field("raw", raw.type, False) if f.name == "raw" else f for f in schema]
        schema = pa.schema(fields, metadata=schema.metadata)
    else:  # zeros that zstd squeezes to nothing: the footer declares 2 GiB of pages
        raw = pa.chunked_array([pa.array([bytes(MIB)] * 64, pa.binary())] * (ROWS // 64))
    chunks = pa.table(
        {
            "capture_id": ["crafted"] * ROWS,
            "exchange": [0] * ROWS,
            "stream_id": ["s-crafted"] * ROWS,
            "attempt": [0] * ROWS,
            "seq": list(range(ROWS)),
            "t_ns": list(range(ROWS)),
            "raw": raw,
            "n_bytes": [MIB] * ROWS,
        },
        schema=schema,
    )
    path = directory / "chunks-00000.parquet"
    pq.write_table(chunks, path, compression="zstd", use_dictionary=dictionary)
    return path


def _refusal(path: Path, verb: str, decoded: int) -> str:
    size = path.stat().st_size
    allowed = max(PART_BYTES_FLOOR, size * MAX_COMPRESSION_RATIO)
    return (
        f"{path}: {verb} {decoded:,} bytes once decoded, more than the {allowed:,} a part of "
        f"{size:,} bytes may hold ({MAX_COMPRESSION_RATIO} times its size, at least "
        f"{PART_BYTES_FLOOR:,}); refused before decoding it (a crafted or damaged part; "
        "lab.capture.open(..., max_compression_ratio=N) reads past the bound)"
    )


@pytest.fixture(params=[True, False], ids=["dictionary", "zstd"])
def crafted_root(tmp_path, request) -> tuple[Path, Path, bool]:
    root = tmp_path / "root"
    shutil.copytree(BUNDLED, root)
    part = _crafted_recording(root / "crafted", dictionary=request.param)
    return root, part.resolve(), request.param


def test_a_crafted_part_alone_is_refused_naming_it_and_both_sizes(crafted_root):
    _root, part, dictionary = crafted_root
    assert part.stat().st_size < 2 * MIB  # small on disk, 2 GiB decoded
    with pytest.raises(PartTooLarge) as caught:
        lab.capture.open(part)
    exc = caught.value
    verb = "expands to" if dictionary else "declares"
    assert str(exc) == _refusal(part, verb, exc.decoded)
    assert exc.path == part
    # the reads, 2,048 small rows and the pages as stored (one 1 MiB dictionary page)
    assert ROWS * MIB <= exc.decoded <= ROWS * (MIB + 128) + MIB
    assert exc.allowed == max(PART_BYTES_FLOOR, part.stat().st_size * MAX_COMPRESSION_RATIO)
    assert isinstance(exc, lab.capture.CaptureError) and isinstance(exc, lab.LabError)


def test_the_root_opens_without_the_crafted_pair_and_the_warning_says_so(crafted_root):
    root, part, _dictionary = crafted_root
    with pytest.warns(CaptureWarning) as caught:
        capture = lab.capture.open(root)
    assert capture.streams_table.num_rows == N_EXCHANGES
    assert "s-crafted" not in capture.streams_table["stream_id"].to_pylist()
    (message,) = capture.metadata["refused_parts"]
    assert message.startswith(f"{part}: ")
    assert message.endswith(
        ". Left out with streams-00000.parquet: 1 exchange(s) of that part are not in this "
        "capture; the other parts are read"
    )
    assert capture.warnings == [message]
    assert [str(w.message) for w in caught] == [message]


def test_replay_into_files_replays_every_other_unit_and_warns(crafted_root, tmp_path):
    root, part, _dictionary = crafted_root
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = replay(root, out=tmp_path / "out")
    assert written.streams == N_REQUESTS
    said = [str(w.message) for w in caught if issubclass(w.category, CaptureWarning)]
    assert len(said) == 1 and said[0].startswith(f"{part}: ")
    assert said[0].endswith(". Left out of this replay; the other units are replayed")


_MEASURE = """
import json, sys, warnings
import pyarrow as pa
import lab.capture
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    capture = lab.capture.open(sys.argv[1])
print(json.dumps({
    "exchanges": capture.streams_table.num_rows,
    "warnings": len(caught),
    "arrow_peak": pa.default_memory_pool().max_memory(),
    # VmHWM: this process image's peak (ru_maxrss keeps the forking parent's across exec)
    "rss_peak": int(next(
        line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")
    )) * 1024,
}))
"""


def test_opening_a_root_with_a_crafted_part_stays_small_in_memory(crafted_root):
    """In a fresh process: the peak of Arrow's allocations and of the process (Python,
    pandas and pyarrow imported: about 150 MB) while the root opens; decoding the part
    would take 2 GiB (2.2 GB of RSS before the check)."""
    root, _part, _dictionary = crafted_root
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(root)],
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(done.stdout)
    assert measured["exchanges"] == N_EXCHANGES and measured["warnings"] == 1
    assert measured["arrow_peak"] < 64 * MIB
    assert measured["rss_peak"] < 250 * MIB


def test_the_page_headers_say_how_many_values_repeat_a_dictionary_of_what_size(tmp_path):
    """The second step of the check reads page headers only: the dictionary page's size
    once decompressed (1 MiB and its 4-byte length) times the values of the
    dictionary-encoded data pages (all 2,048)."""
    from lab.capture.bounds import _expansion, _page_header

    part = _crafted_recording(tmp_path / "crafted", dictionary=True)
    footer = pq.ParquetFile(part).metadata
    raw = footer.row_group(0).column(footer.schema.names.index("raw"))
    with part.open("rb") as f:
        kind, uncompressed, _compressed, _n, _encoding, _length = _page_header(
            f, raw.dictionary_page_offset
        )
        assert (kind, uncompressed) == (2, MIB + 4)
        assert _expansion(f, raw) == ROWS * (MIB + 4)
