"""SSE framer: splits, line endings, fields, comments, truncation, arbitrary partitions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.http.sse import SSEDecoder, SSEEvent, iter_sse


def decode_reads(reads: list[bytes]) -> list[SSEEvent]:
    return list(iter_sse(reads))


def summary(events: list[SSEEvent]) -> list[tuple]:
    """Everything but the seq provenance."""
    return [(e.index, e.data, e.event, e.id, e.retry, e.comment, e.unterminated) for e in events]


def test_single_data_event():
    [ev] = decode_reads([b"data: hello\n\n"])
    assert ev == SSEEvent(0, "hello", None, None, None, None, 0, 0, False)
    assert not ev.is_comment


def test_multi_line_data_joined_with_newline():
    [ev] = decode_reads([b"data: a\ndata:b\ndata:  c\ndata\n\n"])
    assert ev.data == "a\nb\n c\n"


def test_event_id_retry_fields():
    [ev] = decode_reads([b"event: message_start\nid: 42\nretry: 3000\ndata: {}\n\n"])
    assert (ev.event, ev.id, ev.retry, ev.data) == ("message_start", "42", 3000, "{}")


def test_invalid_retry_and_nul_id_are_ignored():
    [ev] = decode_reads([b"retry: 12a\nid: a\x00b\ndata: x\n\n"])
    assert (ev.retry, ev.id, ev.data) == (None, None, "x")


def test_a_retry_of_5000_digits_is_ignored_never_raised():
    digits = b"1" * 5000  # past Python's 4,300-digit int() limit
    [ev] = decode_reads([b"retry: " + digits + b"\ndata: x\n\n"])
    assert (ev.retry, ev.data) == (None, "x")
    [ev] = decode_reads([b"retry: " + b"9" * 18 + b"\ndata: x\n\n"])
    assert ev.retry == 999_999_999_999_999_999


def test_event_without_data_is_surfaced_with_data_none():
    [ev] = decode_reads([b"event: ping\n\n"])
    assert (ev.event, ev.data) == ("ping", None)


def test_unknown_fields_and_extra_blank_lines_produce_nothing():
    assert decode_reads([b"\n\nfoo: bar\nbaz\n\n\n"]) == []


def test_comments_are_their_own_events_immediately():
    dec = SSEDecoder()
    out = dec.decode(b": OPENROUTER PROCESSING\n\n:keep-alive\n:\ndata: x\n", 0)
    assert [(e.index, e.comment) for e in out] == [
        (0, "OPENROUTER PROCESSING"),
        (1, "keep-alive"),
        (2, ""),
    ]
    assert all(e.is_comment and e.data is None for e in out)
    [ev] = dec.decode(b"\n", 1)
    assert (ev.index, ev.data, ev.first_seq, ev.last_seq) == (3, "x", 0, 1)
    assert dec.flush() == []


def test_comment_inside_an_event_does_not_break_it():
    events = decode_reads([b"data: a\n: ping\ndata: b\n\n"])
    assert [(e.comment, e.data) for e in events] == [("ping", None), (None, "a\nb")]
    assert [e.index for e in events] == [0, 1]


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b"\r"])
def test_line_endings(ending):
    body = ending.join([b"data: a", b"event: e", b"", b": c", b"data: b", b"", b""])
    events = decode_reads([body])
    assert summary(events) == [
        (0, "a", "e", None, None, None, False),
        (1, None, None, None, None, "c", False),
        (2, "b", None, None, None, None, False),
    ]


def test_lone_cr_line_endings_split_across_reads():
    events = decode_reads([b"data: a\r", b"\r", b"data: b\r\r"])
    assert [(e.data, e.first_seq, e.last_seq) for e in events] == [("a", 0, 1), ("b", 2, 2)]


@pytest.mark.parametrize("cut", range(1, len(b"data: x\r\n\r\ndata: y\r\n\r\n")))
def test_crlf_split_across_reads_at_every_position(cut):
    body = b"data: x\r\n\r\ndata: y\r\n\r\n"
    events = decode_reads([body[:cut], body[cut:]])
    assert summary(events) == [
        (0, "x", None, None, None, None, False),
        (1, "y", None, None, None, None, False),
    ]


def test_crlf_split_does_not_make_an_extra_blank_line():
    # "\r" | "\n" must be one line break, not two (which would dispatch early)
    events = decode_reads([b"data: a\r", b"\ndata: b\r\n\r\n"])
    assert [e.data for e in events] == ["a\nb"]


@pytest.mark.parametrize("cut", range(0, 5))
def test_four_byte_emoji_split_at_every_byte(cut):
    emoji = "🧠".encode()
    assert len(emoji) == 4
    body = b"data: <" + emoji + b">\n\n"
    start = len(b"data: <")
    reads = [body[: start + cut], body[start + cut :]]
    [ev] = decode_reads(reads)
    assert ev.data == "<🧠>"


def test_emoji_split_one_byte_per_read():
    body = "data: 🧠é\n\n".encode()
    reads = [body[i : i + 1] for i in range(len(body))]
    [ev] = decode_reads(reads)
    assert ev.data == "🧠é"
    assert (ev.first_seq, ev.last_seq) == (0, len(body) - 1)


def test_invalid_utf8_is_replaced_never_raises():
    [ev] = decode_reads([b"data: a\xff\xfeb\xe2\x82\n\n"])
    assert ev.data == "a\ufffd\ufffdb\ufffd"


def test_empty_reads_are_ignored():
    events = decode_reads([b"", b"data: a", b"", b"\n", b"", b"\n", b""])
    assert [(e.data, e.first_seq, e.last_seq) for e in events] == [("a", 1, 5)]


def test_first_seq_and_last_seq_track_reads():
    events = decode_reads([b"da", b"ta: x\n", b"\ndata: y\n\n: c"])
    assert [(e.data, e.comment, e.first_seq, e.last_seq, e.unterminated) for e in events] == [
        ("x", None, 0, 2, False),
        ("y", None, 2, 2, False),
        (None, "c", 2, 2, True),
    ]


def test_unterminated_final_event_is_surfaced_with_flag():
    events = decode_reads([b"data: a\n\n", b'data: {"partial": tr'])
    assert summary(events) == [
        (0, "a", None, None, None, None, False),
        (1, '{"partial": tr', None, None, None, None, True),
    ]
    assert (events[1].first_seq, events[1].last_seq) == (1, 1)


def test_complete_line_without_blank_line_at_eof_is_unterminated():
    [ev] = decode_reads([b"data: [DONE]\n"])
    assert (ev.data, ev.unterminated) == ("[DONE]", True)


def test_partial_line_appends_to_pending_event_at_eof():
    [ev] = decode_reads([b"event: delta\ndata: a\ndata: b"])
    assert (ev.event, ev.data, ev.unterminated) == ("delta", "a\nb", True)


def test_flush_with_nothing_pending_returns_nothing():
    dec = SSEDecoder()
    assert dec.decode(b"data: a\n\n", 0)[0].data == "a"
    assert dec.flush() == []


def test_utf8_bom_at_stream_start_is_stripped():
    [ev] = decode_reads([b"\xef\xbb", b"\xbfdata: a\n\n"])
    assert ev.data == "a"


def test_flush_releases_partial_line_split_inside_emoji():
    # cut mid-character at EOF: the tail is replaced, never raised, never dropped
    [ev] = decode_reads([b"data: a\xf0\x9f"])
    assert (ev.data, ev.unterminated) == ("a\ufffd", True)


# -- any partition of a body into reads gives the same events ------------------------------

LINES = st.sampled_from(
    [
        b'data: {"a": 1}',
        b"data:x",
        b"data",
        "data: héllo 🧠 wörld".encode(),
        b"event: message_delta",
        b"id: 7",
        b"retry: 100",
        b": OPENROUTER PROCESSING",
        b":",
        b"",
        b"",
        b"junk line",
        b"data: \xff\xfe",
        b"data: [DONE]",
    ]
)
ENDINGS = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def bodies(draw):
    n = draw(st.integers(0, 12))
    parts = []
    for _ in range(n):
        parts.append(draw(LINES) + draw(ENDINGS))
    tail = draw(st.sampled_from([b"", b"data: cut", b"da", b": c"]))
    return b"".join(parts) + tail


@st.composite
def body_and_partition(draw):
    body = draw(bodies())
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=20)))
    bounds = [0, *cuts, len(body)]
    return body, [body[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@settings(max_examples=400, deadline=None)
@given(body_and_partition())
def test_any_partition_gives_identical_events(case):
    body, reads = case
    assert b"".join(reads) == body
    whole = summary(decode_reads([body]))
    split = decode_reads(reads)
    assert summary(split) == whole
    for ev in split:
        assert 0 <= ev.first_seq <= ev.last_seq < max(len(reads), 1)


@settings(max_examples=200, deadline=None)
@given(bodies())
def test_one_byte_reads_match_whole_body(body):
    reads = [body[i : i + 1] for i in range(len(body))]
    assert summary(decode_reads(reads)) == summary(decode_reads([body]))


def test_matches_httpx_sse_on_terminated_events():
    httpx_sse = pytest.importorskip("httpx_sse._decoders")
    body = "event: a\r\ndata: 1\r\ndata: 2\r\n\r\n: c\n\nid: 3\ndata: é\n\n".encode()
    line_decoder = httpx_sse.SSELineDecoder()
    sse_decoder = httpx_sse.SSEDecoder()
    oracle = []
    for line in line_decoder.decode(body.decode()):
        ev = sse_decoder.decode(line)
        if ev is not None:
            oracle.append((ev.data, ev.event, ev.id))
    # httpx-sse reports the last-event-id buffer ("" before any id:); we report the event's own
    ours = [
        (e.data, e.event or "message", e.id or "") for e in decode_reads([body]) if not e.is_comment
    ]
    assert ours == oracle


def test_decoder_is_linear_on_a_long_line_in_tiny_reads():
    """A 2 MB line in 64-byte reads: until its newline arrives, each read is kept as it came
    (the very object, nothing joined or rescanned), and the line is joined once at the end.
    Per read the work is bounded by the read's own length, so the whole is linear (the
    wall-clock side is ``bench/bench_linearity.py``'s)."""
    body = b"data: " + b"x" * 2_000_000 + b"\n\n"
    reads = [body[i : i + 64] for i in range(0, len(body), 64)]
    decoder = SSEDecoder()
    for seq, read in enumerate(reads[:-1]):
        assert decoder.decode(read, seq) == []
        assert decoder._parts[-1] is read and len(decoder._parts) == seq + 1
    [ev] = decoder.decode(reads[-1], len(reads) - 1)
    assert len(ev.data) == 2_000_000 and decoder._parts == []
    assert summary(decode_reads(reads)) == summary([ev])


# -- a streamed JSON array (Gemini without alt=sse) ---------------------------------------------

TRICKY_ARRAY = (
    '\ufeff [{"a": "x\\"]},{[", "b": [1, {"c": "]"}]},\r\n'
    '{"d": "caf\u00e9 \\\\"},\n 7 ,{"e": {}}]  trailing'
).encode()


def _array_events(reads: list[bytes]) -> list[tuple]:
    from lab.http.jsonarray import SniffingDecoder

    d = SniffingDecoder()
    out = []
    for seq, r in enumerate(reads):
        out.extend(d.decode(r, seq))
    out.extend(d.flush())
    return [(e.index, e.data, e.unterminated) for e in out]


def test_a_streamed_json_array_is_framed_element_by_element():
    assert _array_events([TRICKY_ARRAY]) == [
        (0, '{"a": "x\\"]},{[", "b": [1, {"c": "]"}]}', False),
        (1, '{"d": "caf\u00e9 \\\\"}', False),
        (2, "7", False),
        (3, '{"e": {}}', False),
    ]


def test_json_array_framing_does_not_depend_on_read_boundaries():
    want = _array_events([TRICKY_ARRAY])
    for i in range(1, len(TRICKY_ARRAY)):
        assert _array_events([TRICKY_ARRAY[:i], TRICKY_ARRAY[i:]]) == want, i
    assert _array_events([TRICKY_ARRAY[i : i + 1] for i in range(len(TRICKY_ARRAY))]) == want


def test_a_json_array_cut_short_surfaces_its_cut_element_or_the_missing_bracket():
    cut = b'[{"a": 1},\n{"b": "tw'
    assert _array_events([cut]) == [(0, '{"a": 1}', False), (1, '{"b": "tw', True)]
    assert _array_events([b'[{"a": 1},\n']) == [(0, '{"a": 1}', False), (1, None, True)]


def test_a_body_not_opening_with_a_bracket_is_sse():
    assert _array_events([b"\n\ndata: [1]\n\n"]) == [(0, "[1]", False)]
