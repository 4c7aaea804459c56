"""The framer keeps a one-line event's data bytes (``SSEEvent.raw``), and the typed decoders
read them instead of ``data``: the same results either way.

``raw`` is set by the framer's common shapes only (a whole read of ``data:`` + blank lines,
or ``event:`` + ``data:`` + blank); the general line machine leaves it None. A body read one
byte per read never takes the common shapes, so replaying it that way runs every typed
decoder on the decoded string: each family's result must be the one its whole-body replay
(typed decoders on the bytes) gives, for text with multi-byte characters, escapes and
invalid UTF-8 (which msgspec refuses in bytes, so that event goes the general way).
"""

from __future__ import annotations

import json
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.http.sse import SSEDecoder, SSEEvent
from lab.replay import replay_sse


def _events(body: bytes, reads: list[int] | None = None) -> list[SSEEvent]:
    d = SSEDecoder()
    out: list[SSEEvent] = []
    if reads is None:
        out += d.decode(body, 0)
    else:
        at = 0
        for seq, n in enumerate(reads):
            out += d.decode(body[at : at + n], seq)
            at += n
        out += d.decode(body[at:], len(reads))
    return out + d.flush()


def test_a_one_line_event_of_the_common_shapes_keeps_its_bytes():
    d = SSEDecoder()
    reads = [
        b'data: {"a":"\xc3\xa9"}\n\ndata: [DONE]\n\n',  # data + blank
        b"event: x\ndata: b\n\nevent: y\ndata: c\n\n",  # event + data + blank
        b": ping\n\n",  # a comment
        b"data: c\ndata: d\n\n",  # two data lines: the general machine
        b"data: e\n\nevent: z\ndata: f\n\n",  # the shapes mixed: the general machine
    ]
    got = [(e.data, e.event, e.raw) for seq, r in enumerate(reads) for e in d.decode(r, seq)]
    assert got == [
        ('{"a":"é"}', None, b'{"a":"\xc3\xa9"}'),
        ("[DONE]", None, b"[DONE]"),
        ("b", "x", b"b"),
        ("c", "y", b"c"),
        (None, None, None),
        ("c\nd", None, None),
        ("e", None, None),
        ("f", "z", None),
    ]


def test_raw_is_neither_compared_nor_shown():
    a = SSEEvent(0, "x", None, None, None, None, 0, 0)
    b = _events(b"data: x\n\n")[0]
    assert b.raw == b"x" and a.raw is None
    assert a == b and repr(a) == repr(b)


LINE = st.one_of(
    st.builds(
        lambda t: b"data: " + t,
        st.binary(max_size=12).filter(lambda b: b"\n" not in b and b"\r" not in b),
    ),
    st.sampled_from([b"event: a", b": c", b"id: 1", b"", b"data:x", b"data: \xc3\xa9\xff"]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE, max_size=12), st.lists(st.integers(1, 9), max_size=12))
def test_raw_when_kept_decodes_to_data(lines, reads):
    body = b"\n".join(lines) + b"\n\n"
    for e in _events(body) + _events(body, reads):
        if e.raw is not None:
            assert e.raw.decode("utf-8", "replace") == e.data


TEXTS = ["plain", " é☕ ", "\\u00e9 \\ud83d\\ude00", "bad \xff byte", "\\n<think>x</think>y"]


def _line(obj: dict, text: str) -> bytes:
    # text is put in as it is (escapes stay escapes; a lone \xff becomes an invalid byte)
    return json.dumps(obj).replace("@T@", text).encode("utf-8", "surrogateescape")


def _body(family: str) -> tuple[str, str | None, bytes]:
    texts = [t.replace("\xff", "\udcff") for t in TEXTS]
    if family == "anthropic":
        parts = [
            b'event: message_start\ndata: {"type":"message_start","message":{"id":"m","type":'
            b'"message","role":"assistant","model":"c","content":[],"usage":{"input_tokens":1,'
            b'"output_tokens":1}}}\n\n'
            b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
            b'"content_block":{"type":"text","text":""}}\n\n'
        ]
        for t in texts:
            ev = {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "@T@"},
            }
            parts.append(b"event: content_block_delta\ndata: " + _line(ev, t) + b"\n\n")
        parts.append(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
        return "anthropic", None, b"".join(parts)
    if family == "responses":
        parts = []
        for i, t in enumerate(texts):
            ev = {"type": "response.output_text.delta", "sequence_number": i, "item_id": "m",
                  "output_index": 0, "content_index": 0, "delta": "@T@"}  # fmt: skip
            parts.append(b"event: response.output_text.delta\ndata: " + _line(ev, t) + b"\n\n")
        return "openai", "/responses", b"".join(parts)
    if family == "google":
        parts = [
            b"data: " + _line({"candidates": [{"content": {"parts": [{"text": "@T@"}]}}]}, t)
            + b"\n\n"
            for t in texts
        ]  # fmt: skip
        return "google", None, b"".join(parts)
    parts = []
    for t in texts:
        chunk = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": "@T@"}}]}
        if family == "openrouter":
            chunk["provider"] = "P"
        parts.append(b"data: " + _line(chunk, t) + b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    return family, None, b"".join(parts)


@pytest.mark.parametrize("family", ["openrouter", "openai", "anthropic", "responses", "google"])
def test_typed_decoders_on_the_bytes_and_on_the_string_agree(family):
    provider, path, body = _body(family)
    whole = replay_sse(provider, body, path=path)  # the common shapes: raw kept
    bytewise = replay_sse(provider, [body[i : i + 1] for i in range(len(body))], path=path)
    assert whole.error is None and "é☕" in whole.text
    assert "\ufffd" in whole.text  # the invalid byte, replaced, went the general way
    assert whole.chunks == bytewise.chunks
    assert (whole.text, whole.reasoning, whole.usage) == (
        bytewise.text,
        bytewise.reasoning,
        bytewise.usage,
    )
    assert whole.facts == bytewise.facts  # (the facts name no read)


def test_a_body_replayed_as_one_read_does_not_hold_all_its_events_at_once():
    # the runner drops each event (its data and raw bytes) from the read's list as it takes
    # it; holding them all until the read's last one made the peak 5.2x this body before
    # raw was kept and 5.3x with it; now 3.1x, most of it the result itself (1.9x)
    parts = []
    for i in range(20_000):
        delta = {"role": "assistant", "content": f" w{i}é", "reasoning": None}
        chunk = {"id": "gen-1", "provider": "P", "model": "m", "object": "chat.completion.chunk",
                 "created": 1, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}  # fmt: skip
        parts.append(b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n")
    body = b"".join(parts) + b"data: [DONE]\n\n"
    replay_sse("openrouter", body[:3000])  # the lazy imports, outside the count
    tracemalloc.start()
    try:
        result = replay_sse("openrouter", body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(result.chunks) == 20_000 and result.text.startswith(" w0é w1é")
    assert peak < 4 * len(body), peak / len(body)
