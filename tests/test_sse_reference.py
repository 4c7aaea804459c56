"""The bytes-level SSE framer gives exactly the events of the per-line framer it replaced.

``tests/sse_reference.py`` keeps the framer as it was before the rewrite (the reference).
Here both frame the same reads: every real body (``tests/realworld/``, the shared corpus
when it is on this machine), every exchange of the bundled captures (their recorded reads as
well as random splits), and hostile random bytes. The events, which read each ``decode``
call returned them from, and what ``flush()`` surfaces at EOF must be identical, field by
field (provenance included). The window size of the one-read path is varied so that window
boundaries fall everywhere.
"""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import lab.http.sse as sse_module
from lab.http.sse import SSEDecoder, SSEEvent
from tests.sse_reference import ReferenceSSEDecoder

ROOT = Path(__file__).resolve().parents[1]
CORPORA = [ROOT / "tests" / "realworld", Path("/work/shared/realworld")]


def _real_bodies() -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    seen: set[bytes] = set()
    for corpus in CORPORA:
        for path in sorted(corpus.glob("*.sse")):
            body = path.read_bytes()
            if body not in seen:
                seen.add(body)
                out[f"{corpus.name}/{path.name}"] = body
    return out


def _capture_exchanges() -> dict[str, list[bytes]]:
    import lab.capture

    out: dict[str, list[bytes]] = {}
    roots = [ROOT / "captures", *sorted((ROOT / "tests" / "fixtures").glob("*/capture"))]
    for root in roots:
        for k, ex in enumerate(lab.capture.open(root).exchanges()):
            out[f"{root.relative_to(ROOT)}#{k}"] = list(ex.reads)
    return out


REAL = _real_bodies()
CAPTURED = _capture_exchanges()


def frame(decoder: SSEDecoder | ReferenceSSEDecoder, reads: list[bytes]) -> list:
    """Per call, what it returned: ``(seq, events)`` for each read, then ``("flush", ...)``."""
    calls: list = [(seq, decoder.decode(read, seq)) for seq, read in enumerate(reads)]
    calls.append(("flush", decoder.flush()))
    calls.append(("flush again", decoder.flush()))
    return calls


def assert_same(reads: list[bytes]) -> list[SSEEvent]:
    new = frame(SSEDecoder(), reads)
    old = frame(ReferenceSSEDecoder(), reads)
    assert new == old
    return [ev for _, events in new for ev in events]


def random_split(body: bytes, rng: random.Random, max_read: int) -> list[bytes]:
    reads = []
    i = 0
    while i < len(body):
        n = rng.randint(0, max_read)  # 0: an empty read now and then
        reads.append(body[i : i + n])
        i += n
    return reads


def test_the_corpora_are_here():
    assert len(REAL) >= 70
    assert sum(len(assert_same([body])) for body in REAL.values()) > 5000
    assert len(CAPTURED) >= 170
    assert sum(len(r) for r in CAPTURED.values()) > 1500


@pytest.mark.parametrize("name", sorted(REAL))
def test_every_real_body_frames_identically_whole_and_split_at_random(name):
    body = REAL[name]
    events = assert_same([body])
    assert events or body.lstrip()[:1] == b"["  # a streamed JSON array holds no SSE event
    rng = random.Random(name)
    for max_read in (64, 700):
        assert_same(random_split(body, rng, max_read))
    for max_read in (1, 7):  # tiny reads: over both ends of the body
        assert_same(random_split(body[:3000], rng, max_read))
        assert_same(random_split(body[-3000:], rng, max_read))
    # the body with every line end made CRLF, then lone CR: the same events
    for variant in (body.replace(b"\n", b"\r\n"), body.replace(b"\n", b"\r")):
        assert_same([variant])
        assert_same(random_split(variant, rng, 300))
        assert_same(random_split(variant[:3000], rng, 5))


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_every_captured_exchange_frames_identically_as_recorded_and_split(name):
    reads = CAPTURED[name]
    assert_same(reads)
    body = b"".join(reads)
    assert_same([body])
    rng = random.Random(name)
    for max_read in (50, 400):
        assert_same(random_split(body, rng, max_read))
    for max_read in (1, 3):
        assert_same(random_split(body[:2000], rng, max_read))


@pytest.mark.parametrize("window", [1, 2, 9, 200])
def test_a_read_longer_than_the_window_frames_identically(monkeypatch, window):
    """The one-read path frames a long read a window at a time: boundaries anywhere."""
    monkeypatch.setattr(sse_module, "WINDOW", window)
    bodies = list(REAL.values())[::7]
    assert bodies
    rng = random.Random(window)
    for body in bodies:
        assert_same([body])
        assert_same(random_split(body, rng, 90))
        assert_same([body.replace(b"\n", b"\r\n")])


def test_all_real_bodies_as_one_long_read_beyond_the_default_window():
    body = b"".join(REAL.values())
    assert len(body) > 2 * sse_module.WINDOW
    events = assert_same([body])
    assert len(events) > 2000
    rng = random.Random(0)
    assert_same(random_split(body, rng, 100_000))


# -- hostile bytes ---------------------------------------------------------------------------

TOKENS = st.sampled_from(
    [
        b"\n",
        b"\n",
        b"\r",
        b"\r\n",
        b"\n\n",
        b":",
        b" ",
        b"  ",
        b"data",
        b"data: ",
        b"data:",
        b"event",
        b"event: ",
        b"id",
        b"id: ",
        b"retry",
        b"retry: ",
        b"12",
        b"9" * 19,
        b"\x00",
        b"\xef\xbb\xbf",
        b"\xef\xbb",
        b"\xff",
        b"\xe2\x82",
        b"\xed\xa0\x80",  # an encoded surrogate: strict UTF-8 refuses it, "replace" replaces it
        b"\xc0\xaf",  # an overlong form, the same
        "🧠".encode(),
        "é".encode(),
        b"x",
        b'{"a":1}',
        b"[DONE]",
    ]
)


@st.composite
def hostile_reads(draw):
    pieces = draw(st.lists(st.one_of(TOKENS, st.binary(max_size=6)), max_size=60))
    body = b"".join(pieces)
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=25)))
    bounds = [0, *cuts, len(body)]
    return [body[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@settings(max_examples=600, deadline=None)
@given(hostile_reads(), st.sampled_from([1 << 16, 1, 3, 16]))
@example([b"\n\n"], 1)  # the last window of a read holds nothing after its line end
@example([b"data: a\r", b"\n\n\n\n: c\n\ndata: b\n\nevent: e\ndata: d\n\nid"], 2)
def test_hostile_bytes_in_any_reads_frame_identically(reads, window):
    saved = sse_module.WINDOW
    sse_module.WINDOW = window
    try:
        assert_same(reads)
    finally:
        sse_module.WINDOW = saved


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(1, 9))
def test_random_binary_in_reads_of_any_fixed_size_frames_identically(body, size):
    assert_same([body[i : i + size] for i in range(0, len(body), size)])


@pytest.mark.parametrize("kinds", [3, 64, 65, 300])
def test_streams_of_many_event_kinds_frame_identically(kinds):
    """The fast path keeps a decoder's event names decoded (up to ``_NAMES`` kinds); past
    them, with names of invalid UTF-8 and names that repeat, framing is the reference's."""
    rng = random.Random(kinds)
    names = [b"k%d" % i for i in range(kinds)] + [b"\xff\xfe", b"\xe2\x82", "é".encode()]
    chosen = [rng.choice(names) for _ in range(3 * kinds)]
    body = b"".join(
        b"event: " + name + b'\ndata: {"n":%d}\n\n' % i for i, name in enumerate(chosen)
    )
    events = assert_same([body])
    assert len(events) == 3 * kinds
    assert_same(random_split(body, rng, 40))
    assert len(SSEDecoder()._names) == 0  # a decoder starts with none
    decoder = SSEDecoder()
    decoder.decode(body, 0)
    assert len(decoder._names) == min(len(set(chosen)), sse_module._NAMES)


def test_decoding_after_flush_continues_like_the_reference():
    """A decoder used past its ``flush()`` (the sniffing JSON-array decoder feeds, flushes)."""
    reads = [b"\xef\xbb\xbfdata: a", b"\r", b"\ndata: b\n\n", b"event: e"]

    def run(decoder: SSEDecoder | ReferenceSSEDecoder) -> list:
        calls = frame(decoder, reads)
        return calls + [("after", decoder.decode(b"\n\n: c\r", 9)), ("end", decoder.flush())]

    new = run(SSEDecoder())
    assert new == run(ReferenceSSEDecoder())
    assert [ev.data for _, events in new for ev in events] == ["a\nb", None, None]


# -- linear: a count, not a clock -------------------------------------------------------------


class CountingBytes(bytes):
    """A read that counts the bytes every scan of it would examine (its whole length)."""

    touched = 0

    def _count(self) -> None:
        CountingBytes.touched += len(self)

    def __contains__(self, item):  # type: ignore[override]
        self._count()
        return super().__contains__(item)

    def find(self, *args):  # type: ignore[override]
        self._count()
        return super().find(*args)

    def rfind(self, *args):  # type: ignore[override]
        self._count()
        return super().rfind(*args)

    def index(self, *args):  # type: ignore[override]
        self._count()
        return super().index(*args)

    def count(self, *args):  # type: ignore[override]
        self._count()
        return super().count(*args)

    def split(self, *args, **kwargs):  # type: ignore[override]
        self._count()
        return super().split(*args, **kwargs)

    def replace(self, *args):  # type: ignore[override]
        self._count()
        return super().replace(*args)

    def __getitem__(self, key):  # type: ignore[override]
        self._count()
        return super().__getitem__(key)


def _work_of_one_byte_reads(body: bytes) -> tuple[int, int]:
    """Feed ``body`` one byte per read: (bytes the reads' scans examined, bytes allocated at
    the peak of each ``decode`` call above what was live before it, summed over calls)."""
    decoder = SSEDecoder()
    CountingBytes.touched = 0
    allocated = 0
    tracemalloc.start()
    try:
        for seq in range(len(body)):
            read = CountingBytes(body[seq : seq + 1])
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            decoder.decode(read, seq)
            allocated += tracemalloc.get_traced_memory()[1] - before
        events = decoder.flush()
    finally:
        tracemalloc.stop()
    assert events == [] or events[-1].unterminated
    return CountingBytes.touched, allocated


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param(lambda n: b"data: " + b"x" * n + b"\n\n", id="one-long-data-line"),
        pytest.param(lambda n: b"data: x\n" * (n // 8) + b"\n", id="many-data-lines-one-event"),
        pytest.param(lambda n: b"data: " + b"y" * n, id="a-tail-never-ended"),
        pytest.param(lambda n: b"event: e\r\n" + b"data: z\r" * (n // 8) + b"\r", id="cr-lines"),
    ],
)
def test_one_event_arriving_one_byte_per_read_costs_linear_work(shape):
    small_scan, small_alloc = _work_of_one_byte_reads(shape(1_000))
    big_scan, big_alloc = _work_of_one_byte_reads(shape(8_000))
    # each read is examined a bounded number of times ...
    assert small_scan <= 12 * 1_100 and big_scan <= 12 * 8_100
    # ... and what a read allocates does not grow with what came before it: 8x the input
    # is at most ~8x the work (a growing buffer joined or copied per read would be ~64x)
    assert big_scan <= 8.5 * small_scan
    assert big_alloc <= 10 * small_alloc
