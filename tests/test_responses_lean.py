"""The Responses API's lean text-delta path builds what the general way builds.

A ``response.output_text.delta`` line whose keys are the ones the general way knows, whose
indexes are plain counts and whose delta is a string is decoded straight into a typed
struct with msgspec (``decode_text_delta``), or checked as a dict otherwise, and sent to
the guards; any other line goes the general way. On generated streams (reasoning, text,
refusals, function calls, odd indexes and deltas, unknown keys, mismatched event names) a
replay is identical with the lean path off, on with the dict check, and on with the typed
decoder: every chunk, fact, guard event and table field.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from lab.config import LabConfig
from lab.providers import openai_responses
from lab.providers.openai_responses import TEXT_DELTA, ResponsesAdapter
from lab.replay import replay_sse
from tests.result_parts import everything

CONFIGS = {
    "reference": None,
    "complete": LabConfig.complete(),
    "speaker": LabConfig(speaker_guard=True, persona_name="Ann"),
}
TEXTS = ("Hel", "lo", " there", "<think>", "a plan", "</think>", "", "\n\nUser: hi", "lo", "<|")
ODD_INDEXES = (None, -1, 1.0, 0.5, True, "0", 2**60, 2**53, [0])


def _event(payload: dict, name: str | None = None) -> bytes:
    data = json.dumps(payload, ensure_ascii=False)
    head = f"event: {name if name is not None else payload['type']}\n"
    return f"{head}data: {data}\n\n".encode()


def _random_stream(rng: random.Random, hostile: bool) -> bytes:
    def odd() -> bool:
        return hostile and rng.random() < 0.12

    resp = {"id": "resp_1", "object": "response", "model": "gpt-4.1"}
    parts = [_event({"type": "response.created", "sequence_number": 0, "response": resp})]
    seq = 1
    streamed: dict[tuple[int, int], str] = {}  # the text deltas of each part, as sent
    for out_index, kind in enumerate(rng.sample(["reasoning", "message", "function_call"], 2)):
        item: dict[str, Any] = {"type": kind, "id": f"it_{out_index}"}
        if kind == "function_call":
            item.update(call_id="call_1", name="f", arguments="")
        parts.append(_event({"type": "response.output_item.added", "sequence_number": seq,
                             "output_index": out_index, "item": item}))  # fmt: skip
        seq += 1
        for _ in range(rng.randint(1, 8)):
            where: dict[str, Any] = {"sequence_number": seq, "item_id": f"it_{out_index}",
                                     "output_index": out_index}  # fmt: skip
            if kind == "message":
                kind_name = TEXT_DELTA if rng.random() < 0.85 else "response.refusal.delta"
                # two parts, their deltas interleaved now and then (0, 1, 0)
                payload: dict[str, Any] = {"type": kind_name, **where,
                                           "content_index": rng.choice([0, 0, 0, 1]),
                                           "delta": rng.choice(TEXTS)}  # fmt: skip
                if kind_name == TEXT_DELTA:
                    payload.update(logprobs=[], obfuscation="kQ2x")
                    key = (out_index, payload["content_index"])
                    streamed[key] = streamed.get(key, "") + payload["delta"]
            elif kind == "reasoning":
                payload = {"type": "response.reasoning_summary_text.delta", **where,
                           "summary_index": 0, "delta": rng.choice(TEXTS)}  # fmt: skip
            else:
                payload = {"type": "response.function_call_arguments.delta", **where,
                           "delta": rng.choice(['{"a"', ":1}"])}  # fmt: skip
            if odd():
                payload[rng.choice(["output_index", "content_index"])] = rng.choice(ODD_INDEXES)
            if odd():
                payload.pop(rng.choice(["output_index", "content_index", "item_id"]), None)
            if odd():
                payload["delta"] = rng.choice([None, 7, ["x"], {"t": 1}])
            if odd():
                payload[rng.choice(["extra", "logprobs", "obfuscation"])] = rng.choice(
                    [1, "s", None, {}, [], [{"token": "a"}]]
                )
            name = None if not odd() else rng.choice(["response.refusal.delta", "x"])
            parts.append(_event(payload, name))
            seq += 1
        if kind == "message":  # its text again: used only for a part that streamed none
            for part_index in rng.sample([0, 1], rng.randint(1, 2)):
                # the streamed text (as long as what came) or another (a mismatch, counted)
                text = rng.choice([streamed.get((out_index, part_index), ""), "whole text"])
                parts.append(_event({"type": "response.output_text.done", "sequence_number": seq,
                                     "item_id": f"it_{out_index}", "output_index": out_index,
                                     "content_index": part_index, "text": text}))  # fmt: skip
                seq += 1
        done = {"type": "response.output_item.done", "sequence_number": seq,
                "output_index": out_index, "item": item}  # fmt: skip
        parts.append(_event(done))
        seq += 1
    usage = {"input_tokens": 5, "output_tokens": 9, "total_tokens": 14}
    parts.append(_event({"type": "response.completed", "sequence_number": seq,
                         "response": {**resp, "status": "completed", "usage": usage}}))  # fmt: skip
    return b"".join(parts)


def _replays(monkeypatch: pytest.MonkeyPatch, body: bytes, config: Any) -> dict[str, Any]:
    typed = openai_responses.decode_text_delta
    got = {}
    for way, lean, decoder in (
        ("general", False, None),
        ("dict check", True, None),
        ("typed", True, typed),
    ):
        if way == "typed" and typed is None:
            continue  # msgspec is not the lab's parser here
        monkeypatch.setattr(ResponsesAdapter, "lean", lean)
        monkeypatch.setattr(openai_responses, "decode_text_delta", decoder)
        got[way] = everything(replay_sse("openai", body, path="/responses", config=config))
    return got


@pytest.mark.parametrize("hostile", [False, True], ids=["common", "hostile"])
@pytest.mark.parametrize("seed", range(30))
def test_realistic_random_streams_replay_the_same_every_way(monkeypatch, seed, hostile):
    body = _random_stream(random.Random(seed), hostile)
    for config in CONFIGS.values():
        got = _replays(monkeypatch, body, config)
        for way, parts in got.items():
            assert parts == got["general"], way


LEAN = (
    '{"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1",'
    '"output_index":0,"content_index":0,"delta":"Hi","logprobs":[],"obfuscation":"k"}'
)


@pytest.mark.skipif(openai_responses.decode_text_delta is None, reason="msgspec not the parser")
def test_a_text_delta_decodes_to_its_typed_event():
    ev = openai_responses.decode_text_delta(LEAN)
    assert (ev.type, ev.delta, ev.output_index, ev.content_index) == (TEXT_DELTA, "Hi", 0, 0)


@pytest.mark.skipif(openai_responses.decode_text_delta is None, reason="msgspec not the parser")
@pytest.mark.parametrize(
    "change",
    [
        ('"output_index":0', '"output_index":-1'),
        ('"output_index":0', '"output_index":true'),
        ('"output_index":0', '"output_index":9007199254740993'),
        ('"output_index":0,', ""),
        ('"content_index":0', '"content_index":"0"'),
        ('"delta":"Hi"', '"delta":null'),
        ('"obfuscation":"k"', '"obfuscation":"k","extra":1'),
        ('"response.output_text.delta"', '"response.refusal.delta"'),
    ],
)
def test_a_line_of_another_shape_is_not_decoded(change):
    line = LEAN.replace(*change)
    assert line != LEAN
    with pytest.raises(ValueError):
        openai_responses.decode_text_delta(line)


def test_an_unknown_key_on_a_text_delta_is_still_counted():
    body = b"".join(
        [
            _event({"type": TEXT_DELTA, "output_index": 0, "content_index": 0, "delta": "Hi"}),
            _event(
                {
                    "type": TEXT_DELTA,
                    "output_index": 0,
                    "content_index": 0,
                    "delta": "!",
                    "shiny": 1,
                }
            ),  # fmt: skip
            _event({"type": "response.completed", "response": {"status": "completed"}}),
        ]
    )
    r = replay_sse("openai", body, path="/responses")
    assert r.text == "Hi!"
    assert r.facts["unhandled_shapes"] == {f"{TEXT_DELTA}.shiny": 1}
