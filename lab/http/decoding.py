"""Content decoding in bounded pieces: a response body is never inflated in one go.

httpx decodes ``Content-Encoding`` one network read at a time, and a read inflates in one
call: 17 KB of gzip can become 1.6 GB in a single ``bytes``. :class:`BoundedDecoder` hands
out the decoded body in pieces of at most :data:`PIECE_BYTES`, lazily, so whoever consumes
them (the SSE decoder, and the byte limit ``LabConfig.max_exchange_bytes`` in
:func:`lab.stream.run_stream`) holds one piece at a time and can stop early.

``gzip``/``x-gzip`` (every member, where httpx 0.28 keeps the first and knows no
``x-gzip``) and ``deflate`` (zlib-wrapped or raw) are decoded here, ``identity`` passes
through. ``br`` and ``zstd`` go through httpx's own decoders when their libraries are
installed (bounded by the read, not by :data:`PIECE_BYTES`); an encoding httpx does not
know is passed through undecoded, as httpx does. Several encodings (``gzip, br``) are
undone last-applied first. Bytes after the end of a compressed body are ignored, as httpx
and ``gzip -d`` ignore them. A body that does not decode raises
:class:`httpx.DecodingError` (a ``read_error`` for the stream). A body that stops inside
its compressed stream gives what it held, as httpx does: the tail the server never sent
is not made up.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import httpx

__all__ = ["PIECE_BYTES", "BoundedDecoder", "decoder_for", "undecodable"]

PIECE_BYTES = 64 * 1024
"""The largest decoded piece handed out at once (not a heuristic: any size bounds memory)."""


_GZIP_MAGIC = b"\x1f\x8b"


class _Zlib:
    """gzip or deflate through ``zlib.decompressobj`` with ``max_length``.

    Deflate is zlib-wrapped per the RFC, raw from some servers: the first two bytes decide.
    gzip members one after another are all decoded; bytes after the last member that do not
    start another (a stray CRLF, padding) are ignored, as ``gzip -d`` and httpx do."""

    def __init__(self, gzip: bool) -> None:
        self._gzip = gzip
        self._head: bytes | None = None if gzip else b""  # deflate: bytes before deciding
        self._done = False  # the body ended: what follows is not part of it
        self._z = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._head is not None:
            data = self._head + data
            if len(data) < 2:
                self._head = data
                return iter(())
            self._head = None
            try:  # a zlib header checks itself: two bytes tell zlib-wrapped from raw
                zlib.decompressobj().decompress(data[:2])
            except zlib.error:
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
        return self._drain(data)

    def _drain(self, data: bytes) -> Iterator[bytes]:
        z = self._z
        while not self._done:
            try:
                out = z.decompress(data, PIECE_BYTES)
            except zlib.error as exc:
                raise httpx.DecodingError(f"the body does not decode: {exc}") from exc
            data = z.unconsumed_tail
            if out:
                yield out
            if z.eof:
                rest = z.unused_data + data
                if self._gzip and rest and rest[:2] == _GZIP_MAGIC[: len(rest)]:
                    self._z = z = zlib.decompressobj(zlib.MAX_WBITS | 16)  # the next member
                    data = rest
                    continue
                self._done = True  # trailing bytes after the body: ignored
                return
            if not data and len(out) < PIECE_BYTES:
                return  # all input used and nothing held back

    def flush(self) -> Iterator[bytes]:
        if self._head:  # a deflate body of one byte: decode what there is
            head, self._head = self._head, None
            return self._drain(head)
        return self._drain(b"")


class _Httpx:
    """An httpx decoder (``br``, ``zstd``): one read in, its output in pieces out."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def feed(self, data: bytes) -> Iterator[bytes]:
        yield from _split(self._inner.decode(data))

    def flush(self) -> Iterator[bytes]:
        yield from _split(self._inner.flush())


def _split(data: bytes) -> Iterator[bytes]:
    for i in range(0, len(data), PIECE_BYTES):
        yield data[i : i + PIECE_BYTES]


def _stage(encoding: str) -> Any | None:
    if encoding in ("gzip", "x-gzip"):
        return _Zlib(gzip=True)
    if encoding == "deflate":
        return _Zlib(gzip=False)
    if encoding in ("br", "zstd"):
        from httpx._decoders import SUPPORTED_DECODERS

        cls = SUPPORTED_DECODERS.get(encoding)
        return _Httpx(cls()) if cls is not None else None
    return None  # identity, or one httpx does not know either: passed through


class BoundedDecoder:
    """Decode a body read by read; every piece it yields is at most :data:`PIECE_BYTES`.

    ``feed(read)`` and, at the end, ``flush()`` are generators: nothing is decoded before
    the consumer asks for the next piece.
    """

    def __init__(self, stages: list[Any]) -> None:
        self._stages = stages  # in the order to undo them: last applied first

    def feed(self, data: bytes) -> Iterator[bytes]:
        return self._through(0, self._stages[0].feed(data))

    def flush(self) -> Iterator[bytes]:
        return self._flush(0)

    def _through(self, i: int, pieces: Iterator[bytes]) -> Iterator[bytes]:
        if i + 1 == len(self._stages):
            yield from pieces
            return
        nxt = self._stages[i + 1]
        for piece in pieces:
            yield from self._through(i + 1, nxt.feed(piece))

    def _flush(self, i: int) -> Iterator[bytes]:
        if i == len(self._stages):
            return
        yield from self._through(i, self._stages[i].flush())
        yield from self._flush(i + 1)


def decoder_for(content_encoding: str | None) -> BoundedDecoder | None:
    """The decoder for a ``Content-Encoding`` header value, or None when the body is used as
    it came (no header, ``identity``, or only encodings httpx does not decode either)."""
    if not content_encoding:
        return None
    names = [v.strip().lower() for v in content_encoding.split(",")]
    stages = [s for s in (_stage(n) for n in reversed(names) if n) if s is not None]
    return BoundedDecoder(stages) if stages else None


def undecodable(content_encoding: str | None) -> list[str]:
    """The encodings a ``Content-Encoding`` value names that the lab cannot undo here
    (``br`` or ``zstd`` without their libraries, ``compress``, unknown names); ``identity``
    is none. A body in one of them is bytes the lab cannot read."""
    names = [v.strip().lower() for v in (content_encoding or "").split(",")]
    return [n for n in names if n and n != "identity" and _stage(n) is None]
