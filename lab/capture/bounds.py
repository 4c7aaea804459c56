"""What a capture part may decode to, checked before a page of it is decoded.

A Parquet file says in its footer how large its pages are once decompressed, and each page
says it again in its header (the size the reader allocates for it). A crafted part can
still make a reader allocate far more than the file: ``zstd`` packs a column of zeros a
hundred thousand times, and a dictionary page of one 1 MiB value that 2,048 rows repeat
expands to 2 GiB (a 476 KB crafted capture made the reader allocate 4.3 GB). So before the
reader decodes a part, :func:`check_part` adds up what the part can expand to and refuses
it (:class:`~lab.capture.errors.PartTooLarge`) when that is more than
:data:`MAX_COMPRESSION_RATIO` times its size on disk (and more than
:data:`PART_BYTES_FLOOR`):

- from the footer: every column chunk's pages decompressed (``total_uncompressed_size``),
  and 8 bytes per value of every column (a fixed-width value or an offset is at most that);
- for a text or bytes column chunk stored with a dictionary, where each row may repeat the
  longest value, three steps, each only when the one before could pass the limit: the
  cheap bound (every value as long as the whole column chunk); the page headers (a few
  bytes each, never a page's data): the dictionary page's size once decompressed, times
  how many values the dictionary-encoded data pages hold (values of ``PLAIN`` pages, what
  a writer falls back to once its dictionary is full, are counted at their own size);
  and last the exact count, those columns read as dictionaries (the values once, the
  indices) and never expanded.

A header that cannot be read is left to the reader, whose error names the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lab.capture.errors import PartTooLarge
from lab.exceptions import LabError

__all__ = ["MAX_COMPRESSION_RATIO", "PART_BYTES_FLOOR", "check_part"]

MAX_COMPRESSION_RATIO = 1000
"""How many times its size on disk a part may decode to, at most (a ``zstd`` SSE stream
compresses 5 to 50 times; a 2.9 GB exchange of repeated text took 3 MB, about 970 times).
``lab.capture.open(..., max_compression_ratio=N)`` reads past it."""

PART_BYTES_FLOOR = 64 * 1024 * 1024
"""Decoded bytes any part may hold whatever its size on disk."""

_DICTIONARY_PAGE = 2
_DATA_PAGE, _DATA_PAGE_V2 = 0, 3
_PLAIN_DICTIONARY, _RLE_DICTIONARY = 2, 8


def check_part(path: Path, metadata: pq.FileMetaData, max_ratio: float) -> None:
    """Raise :class:`PartTooLarge` when the part at ``path`` (``metadata``: its footer) may
    decode to more than ``max_ratio`` times its size (see the module's docstring)."""
    size = path.stat().st_size
    allowed = max(PART_BYTES_FLOOR, int(size * max_ratio))
    declared = metadata.num_rows * 8 * metadata.num_columns
    repeating = []  # dictionary-encoded text or bytes chunks: (chunk, worst expansion)
    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        for c in range(group.num_columns):
            column = group.column(c)
            declared += column.total_uncompressed_size
            if column.physical_type == "BYTE_ARRAY" and column.has_dictionary_page:
                repeating.append(column)
    if declared > allowed:
        raise _refusal(path, "declares", declared, allowed, size, max_ratio)
    worst = declared + sum(c.num_values * c.total_uncompressed_size for c in repeating)
    if worst <= allowed:  # a small part, the common case: no header is read
        return
    with path.open("rb") as f:
        worst = declared + sum(_expansion(f, c) for c in repeating)
    if worst <= allowed:
        return
    expanded = declared + _exact_expansion(path, metadata, [c.path_in_schema for c in repeating])
    if expanded > allowed:
        raise _refusal(path, "expands to", expanded, allowed, size, max_ratio)


def _refusal(
    path: Path, verb: str, decoded: int, allowed: int, size: int, max_ratio: float
) -> PartTooLarge:
    return PartTooLarge(
        path,
        f"{path}: {verb} {decoded:,} bytes once decoded, more than the {allowed:,} a part of "
        f"{size:,} bytes may hold ({max_ratio:g} times its size, at least "
        f"{PART_BYTES_FLOOR:,}); refused before decoding it (a crafted or damaged part; "
        "lab.capture.open(..., max_compression_ratio=N) reads past the bound)",
        decoded=decoded,
        allowed=allowed,
    )


def _expansion(f: BinaryIO, column: pq.ColumnChunkMetaData) -> int:
    """Bytes the rows of a dictionary-encoded chunk may expand to beyond its pages: each
    dictionary-encoded value as long as the dictionary page (from the page headers)."""
    start = column.dictionary_page_offset
    end = start + column.total_compressed_size
    longest = 0
    repeated = 0
    offset = start
    while offset < end:
        header = _page_header(f, offset)
        if header is None:  # unreadable: the reader says so when it decodes the part
            return column.num_values * column.total_uncompressed_size
        kind, uncompressed, compressed, n_values, encoding, length = header
        if kind == _DICTIONARY_PAGE:
            longest = max(longest, uncompressed)
        elif kind in (_DATA_PAGE, _DATA_PAGE_V2) and encoding in (
            _PLAIN_DICTIONARY,
            _RLE_DICTIONARY,
        ):
            repeated += n_values
        offset += length + max(compressed, 0)
    return repeated * longest


def _exact_expansion(path: Path, metadata: pq.FileMetaData, columns: list[str]) -> int:
    """What ``columns`` expand to beyond their pages, counted from their dictionaries and
    indices (read row group by row group as dictionaries: nothing is expanded)."""
    names = list(dict.fromkeys(columns))
    pf = pq.ParquetFile(path, read_dictionary=names)
    total = 0
    for g in range(metadata.num_row_groups):
        table = pf.read_row_group(g, columns=names)
        for column in table.columns:
            for chunk in column.chunks:
                if not pa.types.is_dictionary(chunk.type):
                    continue
                lengths = pc.binary_length(chunk.dictionary).cast(pa.int64())
                total += pc.sum(pc.take(lengths, chunk.indices)).as_py() or 0
        del table
    return total


_HEADER_READ = 256
_MAX_HEADER = 1 << 20  # page statistics can make a header long; never read more than this


def _page_header(f: BinaryIO, offset: int) -> tuple[int, int, int, int, int, int] | None:
    """(page type, uncompressed size, compressed size, values, encoding, header length) of
    the page header at ``offset`` (Thrift compact protocol), or None when unreadable."""
    want = _HEADER_READ
    while want <= _MAX_HEADER:
        f.seek(offset)
        data = f.read(want)
        try:
            return _parse_page_header(data)
        except _Short:
            if len(data) < want:  # the file ends inside the header
                return None
            want *= 4
        except ValueError:
            return None
    return None


class _Short(LabError):  # an internal signal, never raised out of this module
    """The bytes read end inside the header: read more."""


def _parse_page_header(data: bytes) -> tuple[int, int, int, int, int, int]:
    r = _Reader(data)
    kind = uncompressed = compressed = n_values = encoding = -1
    for field, ftype in r.fields():
        if field in (1, 2, 3) and ftype == 5:
            value = r.varint_zigzag()
            if field == 1:
                kind = value
            elif field == 2:
                uncompressed = value
            else:
                compressed = value
        elif field in (5, 8) and ftype == 12:  # DataPageHeader / DataPageHeaderV2
            for sub, stype in r.fields():
                if sub == 1 and stype == 5:
                    n_values = r.varint_zigzag()
                elif sub == (2 if field == 5 else 4) and stype == 5:
                    encoding = r.varint_zigzag()
                else:
                    r.skip(stype)
        else:
            r.skip(ftype)
    if min(kind, uncompressed, compressed) < 0:
        raise ValueError("page header without its type or sizes")
    return kind, uncompressed, compressed, n_values, encoding, r.pos


class _Reader:
    """Just enough of Thrift's compact protocol to read a page header and skip the rest."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise _Short
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ValueError("varint too long")

    def varint_zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def fields(self) -> Iterator[tuple[int, int]]:
        """(field id, type) of each field of a struct, up to its stop byte."""
        last = 0
        while True:
            b = self.byte()
            if b == 0:  # stop
                return
            ftype, delta = b & 0x0F, b >> 4
            last = last + delta if delta else self.varint_zigzag()
            yield last, ftype

    def skip(self, ftype: int) -> None:
        if ftype in (1, 2):  # booleans carry their value in the type
            return
        if ftype == 3:
            self.byte()
        elif ftype in (4, 5, 6):
            self.varint()
        elif ftype == 7:
            self.take(8)
        elif ftype == 8:
            self.take(self.varint())
        elif ftype in (9, 10):
            head = self.byte()
            size, etype = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            for _ in range(size):
                if etype in (1, 2):  # a boolean in a list takes a byte
                    self.byte()
                else:
                    self.skip(etype)
        elif ftype == 11:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.skip(types >> 4)
                    self.skip(types & 0x0F)
        elif ftype == 12:
            for _, sub in self.fields():
                self.skip(sub)
        else:
            raise ValueError(f"unknown Thrift type {ftype}")

    def take(self, n: int) -> None:
        if n < 0:
            raise ValueError("negative length")
        if self.pos + n > len(self.data):
            raise _Short
        self.pos += n
