"""Anthropic's typed delta path builds what the general way builds.

With msgspec a ``content_block_delta`` line carrying a ``text_delta`` or a
``thinking_delta`` is decoded straight into typed structs (``decode_delta``) and sent to
the text or thinking step; any other line goes the general way (JSON, the handler by event
name). On generated streams (every event type, deltas of every type, indexes and texts of
the wrong type, unknown keys and events) a replay is identical with the typed path on and
off: every chunk, fact, guard event and table field.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from lab.config import LabConfig
from lab.providers import anthropic
from lab.providers.anthropic import AnthropicAdapter
from lab.replay import replay_sse
from tests.result_parts import everything

pytestmark = pytest.mark.skipif(
    anthropic.decode_delta is None, reason="msgspec is not the lab's JSON parser here"
)

CONFIGS = {
    "reference": None,
    "complete": LabConfig.complete(),
    "speaker": LabConfig(speaker_guard=True, persona_name="Ann"),
}
TEXTS = ("Hel", "lo", " there", "<think>", "a plan", "</think>", "", "\n\nUser: hi", "lo")


def _event(name: str, payload: dict, pad: tuple[str, str] = ("", "")) -> bytes:
    data = pad[0] + json.dumps(payload, ensure_ascii=False) + pad[1]
    return f"event: {name}\ndata: {data}\n\n".encode()


PADS = [" ", "\t", "\u00a0", "\u2003", "\x1f", ""]
"""Around a data line's JSON: JSON's own whitespace, and Unicode whitespace that only
``str.strip`` removes (the typed path decodes the line unstripped)."""


def _random_stream(rng: random.Random, hostile: bool) -> bytes:
    """A realistic stream: message_start, a thinking block, a text block (maybe a tool_use
    block), message_delta, message_stop; **hostile**: odd deltas mixed in."""

    def odd() -> bool:
        return hostile and rng.random() < 0.1

    start = {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {
        "input_tokens": 9, "output_tokens": 1}}}  # fmt: skip
    parts = [_event("message_start", start)]
    index = 0
    for kind in rng.sample(["thinking", "text", "text", "tool_use"], rng.randint(1, 3)):
        block: dict[str, Any] = {"type": kind}
        if kind == "tool_use":
            block.update(id="toolu_1", name="f", input={})
        parts.append(
            _event("content_block_start", {"type": "content_block_start", "index": index,
                                           "content_block": block})
        )  # fmt: skip
        for _ in range(rng.randint(1, 6)):
            if kind == "text":
                delta: dict[str, Any] = {"type": "text_delta", "text": rng.choice(TEXTS)}
            elif kind == "thinking":
                delta = {"type": "thinking_delta", "thinking": rng.choice(TEXTS)}
            else:
                delta = {"type": "input_json_delta", "partial_json": rng.choice(['{"a"', ":1}"])}
            payload: dict[str, Any] = {"type": "content_block_delta", "index": index,
                                       "delta": delta}  # fmt: skip
            if odd():
                payload["index"] = rng.choice([None, -1, 1.0, True, "0", 2**60])
            if odd():
                delta[rng.choice(["text", "thinking", "type"])] = rng.choice(
                    [None, 7, ["x"], "signature_delta", "citations_delta"]
                )
            if odd():
                payload[rng.choice(["extra", "delta"])] = rng.choice([1, "s", None, {}])
            if odd():
                delta["extra"] = 1
            name = "content_block_delta" if not odd() else rng.choice(["ping", "x"])
            pad = (rng.choice(PADS), rng.choice(PADS)) if odd() else ("", "")
            parts.append(_event(name, payload, pad))
        if kind == "thinking":
            parts.append(
                _event("content_block_delta", {"type": "content_block_delta", "index": index,
                       "delta": {"type": "signature_delta", "signature": "EvQB"}})
            )  # fmt: skip
        parts.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1
    parts.append(
        _event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
               "usage": {"output_tokens": 12}})
    )  # fmt: skip
    parts.append(_event("message_stop", {"type": "message_stop"}))
    return b"".join(parts)


def _same_both_ways(monkeypatch: pytest.MonkeyPatch, body: bytes) -> None:
    for config in CONFIGS.values():
        got = {}
        for lean in (False, True):
            monkeypatch.setattr(AnthropicAdapter, "lean", lean)
            got[lean] = everything(replay_sse("anthropic", body, config=config))
        assert got[True] == got[False]


@pytest.mark.parametrize("hostile", [False, True], ids=["common", "hostile"])
@pytest.mark.parametrize("seed", range(30))
def test_realistic_random_streams_replay_the_same_both_ways(monkeypatch, seed, hostile):
    _same_both_ways(monkeypatch, _random_stream(random.Random(seed), hostile))


def test_a_text_delta_decodes_to_its_typed_event():
    ev = anthropic.decode_delta(
        '{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"hi"}}'
    )
    assert (ev.index, ev.delta.type, ev.delta.text) == (1, "text_delta", "hi")


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"message_start","message":{"id":"m"}}',
        '{"type":"message_delta","index":0,"delta":{"type":"text_delta","text":"a"}}',
        '{"index":0,"delta":{"type":"text_delta","text":"a"}}',
        '{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"a"}}',
        '{"type":"content_block_delta","index":true,"delta":{"type":"text_delta","text":"a"}}',
        '{"type":"content_block_delta","index":0,"delta":"text"}',
        '{"type":"content_block_delta","index":0}',
        '{"type":"content_block_delta","index":0,"delta":{"text":"a"},"x":NaN}',
        "[]",
    ],
)
def test_a_line_of_another_shape_is_not_decoded(line):
    with pytest.raises(ValueError):
        anthropic.decode_delta(line)


def test_an_unknown_delta_type_is_still_counted():
    body = b"".join(
        [
            _event("content_block_start", {"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
            _event("content_block_delta", {"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": "Hi"}}),
            _event("content_block_delta", {"type": "content_block_delta", "index": 0,
                   "delta": {"type": "shiny_delta", "text": "!"}}),
        ]
    )  # fmt: skip
    r = replay_sse("anthropic", body)
    assert r.text == "Hi"
    assert r.facts["unknown_deltas"] == 1
    assert r.facts["unhandled_shapes"] == {"delta:shiny_delta": 1}
