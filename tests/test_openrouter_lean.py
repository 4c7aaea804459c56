"""OpenRouter's plain pieces skip the normalized dict and build what the chat machine builds.

With msgspec a one-line event is decoded into typed structs once; a plain piece (one choice
at index 0, text and reasoning, no finish, usage or tool call: ``openrouter.lean_fields``)
goes straight to ``OpenRouterAdapter._lean_piece``, every other chunk through the chat
machine. On generated OpenRouter streams that exercise every guard a piece meets (think
tags, a spill seam, protocol markup, a speaker line, repeated text) and every field the
shape check reads (``reasoning_details`` with and without ``reasoning``, empty lists,
nulls, camelCase keys, tool calls, finish reasons, usage, odd values), a replay is
identical with the lean path on, off, and with every typed path off (the standard parser):
every chunk, fact, guard event and table field, under four configs.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from lab import _json
from lab.config import LabConfig
from lab.providers import openrouter
from lab.providers.openrouter import OpenRouterAdapter
from lab.replay import replay_sse
from tests.result_parts import everything

needs_msgspec = pytest.mark.skipif(
    openrouter.decode_struct is None, reason="msgspec is not the lab's JSON parser here"
)

CONFIGS = {
    "reference": None,
    "complete": LabConfig.complete(),
    "speaker": LabConfig(speaker_guard=True, persona_name="Ann"),
    "thoughts": LabConfig(capture_think_blocks_as_thoughts=True),
}
TEXTS = (
    "Hel", "lo", " there", "<think>", "a plan", "</think>", "", None, "\n\nUser: hi",
    "we go.Hello", "so...Yes", "<tool_call>", '{"name": "f", "arguments": {}}', "</tool_call>",
    "<|channel|>analy", "sis<|message|>x", "<|end|>", "<", "a < b", "好的",
    "a long repeat, ", "a long repeat, ", "long repeat, and on",  # dedup: 8 characters or more
)  # fmt: skip
SCRIPTS = (
    ["<tool_call>", '{"name": "f", "arguments": {"a": 1}}', "</tool_call>", "done"],
    ["a long repeat, ", "a long repeat, ", "long repeat, and on"],
    ["Hello there friend", "there friend, how are you"],
    ["<think>", "a plan", "</think>", "Answer."],
    ["so we go.Hello", " world"],
    ["<|channel|>analy", "sis<|message|>User asks.<|e", "nd|><|start|>assistant<|chan",
     "nel|>final<|message|>4", ".<|return|>"],
    ["Sure.", "\n\nUser: hi", " there"],
)  # fmt: skip
"""Runs of content pieces that make a guard act (a markup call, dedup, a think block, a
spill seam, a harmony frame, a speaker line)."""
ENV = {"id": "gen-1", "provider": "Fireworks", "model": "z-ai/glm-4.6",
       "object": "chat.completion.chunk", "created": 1}  # fmt: skip


def _random_stream(rng: random.Random, hostile: bool) -> bytes:
    def odd() -> bool:
        return hostile and rng.random() < 0.08

    lines = []
    n_calls = rng.choice([0, 0, 0, 1])
    script: list[str] = []
    for _ in range(rng.randint(2, 16)):
        delta: dict[str, Any] = {"role": "assistant"} if rng.random() < 0.7 else {}
        if not script and rng.random() < 0.2:
            script = list(rng.choice(SCRIPTS))
        roll = rng.random()
        if script:
            delta["content"] = script.pop(0)
        elif roll < 0.45:
            delta["content"] = rng.choice(TEXTS)
            if rng.random() < 0.5:
                delta["reasoning"] = None
        elif roll < 0.8:
            text = rng.choice(TEXTS)
            delta["reasoning"] = text
            delta["content"] = rng.choice(["", None, "x"])
        if rng.random() < 0.7:
            text = delta.get("reasoning")
            delta["reasoning_details"] = (
                [{"type": "reasoning.text", "text": rng.choice(["rd", text or ""])}]
                if rng.random() < 0.6
                else []
            )
        if n_calls and rng.random() < 0.15:
            delta["tool_calls"] = [{"index": 0, "id": "call_0", "type": "function",
                                    "function": {"name": "f", "arguments": "{}"}}]  # fmt: skip
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None,
                                  "native_finish_reason": None, "logprobs": None}  # fmt: skip
        chunk: dict[str, Any] = {**ENV, "choices": [choice]}
        if rng.random() < 0.1:
            del chunk["id"]
        if odd():
            key = rng.choice(["content", "reasoning", "reasoningDetails", "reasoning_content",
                              "role", "reasoning_details", "tool_calls", "refusal"])  # fmt: skip
            delta[key] = rng.choice([7, ["x"], {"text": "obj"}, None, "rc", [], True, 1.5])
        if odd():
            choice[rng.choice(["index", "finish_reason", "finishReason"])] = rng.choice(
                [1, 0, None, "stop", "length", 2**60, "error", True, 0.0, -0, "", 7]
            )
        if odd():
            target = rng.choice([chunk, choice, delta])
            target[rng.choice(["newKey", "usage", "error", "data", "channel"])] = rng.choice(
                [1, {"message": "boom"}, None, {"prompt_tokens": 1}]
            )
        if odd():
            chunk["choices"] = rng.choice([[], None, [choice, choice], [{**choice, "index": 1}]])
        if odd():
            chunk["provider"] = rng.choice(["  ", None, 5, "Other"])
        lines.append(chunk)
    finish = rng.choice(["stop", "length", "tool_calls" if n_calls else "stop"])
    lines.append({**ENV, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    usage = {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}
    lines.append({**ENV, "choices": [], "usage": usage})
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in lines)
    return body + b"data: [DONE]\n\n"


WAYS = [("json", False, False), ("json", False, True)]
"""(parser, typed decoder, lean) for each way a stream is replayed; the first is the general
way (every fast path off)."""
if "orjson" in _json.PARSERS:
    WAYS.append(("orjson", False, True))
if openrouter.decode_struct is not None:
    WAYS += [("msgspec", True, False), ("msgspec", True, True)]


def _replays(monkeypatch: pytest.MonkeyPatch, body: bytes, config: LabConfig | None) -> list:
    got = []
    for parser, typed, lean in WAYS:
        monkeypatch.setattr(_json, "loads", _json.PARSERS[parser])
        monkeypatch.setattr(
            OpenRouterAdapter,
            "_decode_typed",
            staticmethod(openrouter.decode_typed_chunk) if typed else None,
        )
        monkeypatch.setattr(OpenRouterAdapter, "lean", lean)
        got.append(everything(replay_sse("openrouter", body, config=config)))
    return got


def _same_on_every_path(
    monkeypatch: pytest.MonkeyPatch, body: bytes, config: LabConfig | None
) -> None:
    general, *others = _replays(monkeypatch, body, config)
    for way, got in zip(WAYS[1:], others, strict=True):
        assert got == general, way


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("hostile", [False, True], ids=["common", "hostile"])
@pytest.mark.parametrize("seed", range(25))
def test_random_openrouter_streams_replay_the_same_on_every_path(
    monkeypatch, seed, hostile, config
):
    body = _random_stream(random.Random(seed), hostile)
    _same_on_every_path(monkeypatch, body, CONFIGS[config])


def _piece(delta: dict[str, Any], **chunk: Any) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": None}
    return json.dumps({**ENV, "choices": [choice], **chunk})


@pytest.mark.parametrize(
    "line, plain",
    [
        (_piece({"content": "a"}), True),
        (_piece({"role": "assistant", "content": "a", "reasoning": None}), True),
        (_piece({"reasoning": "r", "reasoning_details": [{"type": "reasoning.text"}]}), True),
        (_piece({"content": "a", "reasoning_details": []}), True),
        (_piece({}), True),
        (_piece({"content": "a", "reasoning_details": [{"type": "reasoning.text"}]}), True),
        (_piece({"content": "a", "reasoningDetails": []}), False),
        (_piece({"content": "a", "reasoning_content": "rc"}), False),
        (_piece({"content": "a", "tool_calls": []}), False),
        (_piece({"content": "a"}, usage={"prompt_tokens": 1}), False),
        (json.dumps({**ENV, "choices": [{"index": 1, "delta": {"content": "a"}}]}), False),
        (
            json.dumps({**ENV, "choices": [{"delta": {"content": "a"}, "finishReason": "stop"}]}),
            False,
        ),  # fmt: skip
        (
            json.dumps({**ENV, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            False,
        ),  # fmt: skip
        (json.dumps({**ENV, "choices": []}), False),
    ],
)
def test_a_plain_piece_is_told_from_every_chunk_the_machine_must_see(line, plain):
    assert (openrouter.lean_fields(json.loads(line)) is not None) is plain
    if openrouter.decode_struct is not None:
        raw = openrouter.decode_struct(line)
        assert raw is not None
        d = openrouter.lone_struct_delta(raw)
        assert (d is not None and d.tool_calls is None) is plain


@pytest.mark.parametrize("typed", [False, pytest.param(True, marks=needs_msgspec)])
def test_a_plain_body_takes_the_lean_path(monkeypatch, typed):
    if not typed:
        monkeypatch.setattr(OpenRouterAdapter, "_decode_typed", None)
    calls = []
    real = OpenRouterAdapter._lean_piece

    def counting(self, *args):
        calls.append(1)
        return real(self, *args)

    monkeypatch.setattr(OpenRouterAdapter, "_lean_piece", counting)
    deltas = ["Hel", "lo", " there"]
    body = b"".join(
        b"data: " + _piece({"role": "assistant", "content": d, "reasoning": None,
                            "reasoning_details": []}).encode() + b"\n\n"
        for d in deltas
    )  # fmt: skip
    result = replay_sse("openrouter", body + b"data: [DONE]\n\n")
    assert result.text == "Hello there"
    assert len(calls) == 3


CALLS = [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]


def _every(levels: tuple, values: tuple) -> list[tuple[str, str, Any]]:
    """(where, key, value): each key of each level of a chunk, set to each value."""
    return [(where, key, value) for where, keys in levels for key in keys for value in values]


PERTURBATIONS = _every(
    (
        ("chunk", ["newKey", "usage", "error", "data", "channel", "choices", "provider", "id"]),
        ("choice", ["index", "finish_reason", "finishReason", "delta", "usage", "newKey"]),
        (
            "delta",
            [
                "content",
                "reasoning",
                "role",
                "reasoning_details",
                "reasoningDetails",
                "reasoning_content",
                "tool_calls",
                "toolCalls",
                "refusal",
                "newKey",
            ],
        ),
    ),  # fmt: skip
    (None, 0, 1, True, 1.5, "", "x", [], ["x"], {}, {"text": "t"}, 2**70, CALLS),
)
"""Every key a plain piece's checks read, at each level, set to values of every JSON type."""


@pytest.mark.parametrize("where, key, value", PERTURBATIONS)
def test_a_plain_piece_with_any_key_set_to_any_value_replays_the_same_on_every_path(
    monkeypatch, where, key, value
):
    def piece(text: str, perturb: bool) -> dict[str, Any]:
        delta: dict[str, Any] = {"role": "assistant", "content": text, "reasoning": "r",
                                 "reasoning_details": [{"type": "reasoning.text", "text": "r"}]}  # fmt: skip
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
        chunk: dict[str, Any] = {**ENV, "choices": [choice]}
        if perturb:
            {"chunk": chunk, "choice": choice, "delta": delta}[where][key] = value
        return chunk

    lines = [piece("Hello", False), piece(" there", True), piece(" friend", False)]
    lines.append({**ENV, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in lines)
    for config in (None, LabConfig.complete()):
        _same_on_every_path(monkeypatch, body + b"data: [DONE]\n\n", config)


ARGUMENT_PERTURBATIONS = _every(
    (
        ("chunk", ["usage", "error", "provider", "id", "newKey"]),
        ("choice", ["index", "finish_reason", "finishReason", "newKey"]),
        (
            "delta",
            [
                "content",
                "reasoning",
                "role",
                "reasoning_details",
                "reasoningDetails",
                "reasoning_content",
                "toolCalls",
                "refusal",
                "newKey",
            ],
        ),
        ("call", ["index", "id", "type", "function", "newKey"]),
        ("function", ["name", "arguments", "newKey"]),
    ),  # fmt: skip
    (
        None,
        0,
        1,
        True,
        "",
        "x",
        [],
        ["x"],
        {},
        {"a": 1},
        CALLS,
        [{"type": "reasoning.text", "text": "r"}],
    ),  # fmt: skip
)
"""Every key an argument delta's checks read, at each level, set to values of every type."""


@pytest.mark.parametrize("where, key, value", ARGUMENT_PERTURBATIONS)
def test_an_argument_delta_with_any_key_set_to_any_value_replays_the_same_on_every_path(
    monkeypatch, where, key, value
):
    def arguments(text: str, perturb: bool) -> dict[str, Any]:
        call: dict[str, Any] = {"index": 0, "function": {"arguments": text}}
        delta: dict[str, Any] = {"role": "assistant", "content": "", "reasoning": None,
                                 "reasoning_details": [], "tool_calls": [call]}  # fmt: skip
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": None}
        chunk: dict[str, Any] = {**ENV, "choices": [choice]}
        if perturb:
            targets = {"chunk": chunk, "choice": choice, "delta": delta, "call": call,
                       "function": call["function"]}  # fmt: skip
            targets[where][key] = value
        return chunk

    lines = [{**ENV, "choices": [{"index": 0, "delta": {"tool_calls": CALLS}}]},
             arguments('{"a"', False), arguments(": 1", True), arguments("}", False),
             {**ENV, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]  # fmt: skip
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in lines)
    for config in (None, LabConfig.complete(), CONFIGS["speaker"]):
        _same_on_every_path(monkeypatch, body + b"data: [DONE]\n\n", config)


@pytest.mark.parametrize("typed", [False, pytest.param(True, marks=needs_msgspec)])
def test_a_stream_that_starts_with_argument_deltas_replays_the_same(monkeypatch, typed):
    """The first chunk an argument delta (ids, backend and commit point from it), and a
    think block right before one."""
    first = {"id": "gen-first", "provider": " Other ", "model": "m-first",
             "choices": [{"index": 0, "delta": {"tool_calls": [
                 {"index": 0, "function": {"arguments": '{"a": 1}'}}]}}]}  # fmt: skip
    error = {**ENV, "error": {"message": "upstream overloaded", "code": 503}}
    think = [{**ENV, "choices": [{"index": 0, "delta": {"content": t}}]}
             for t in ("<think>", "plan", "</think>")]  # fmt: skip
    for lines in ([first, error], [first, first], [*think, first]):
        body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in lines)
        for config in CONFIGS.values():
            _same_on_every_path(monkeypatch, body, config)
