"""The chat-completions machine's typed path builds what the general way builds.

With msgspec a data line of the common shape is decoded straight into typed structs
(``decode_chat_chunk``) and ``OpenAICompatibleAdapter._typed_normalize`` builds the chunk
``normalize_chunk`` builds; any other line (an unknown key, an error, a content list, a
choice that is not an object ...) goes the general way. On generated streams (text,
reasoning in each field, tool calls, refusals, usage, finish reasons; values of the wrong
type and unknown keys mixed in) a replay is identical with the typed path on and off, for
several endpoints and configs: every chunk, fact, guard event and table field.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from lab.config import LabConfig
from lab.providers import chat
from lab.providers.chat import OpenAICompatibleAdapter
from lab.replay import replay_sse
from tests.result_parts import everything

pytestmark = pytest.mark.skipif(
    chat.decode_chat_chunk is None, reason="msgspec is not the lab's JSON parser here"
)

CONFIGS = {
    "reference": None,
    "complete": LabConfig.complete(),
    "speaker": LabConfig(speaker_guard=True, persona_name="Ann"),
    "thoughts": LabConfig(capture_think_blocks_as_thoughts=True),
}
TEXTS = ("Hel", "lo", " there", "<think>", "a plan", "</think>", "", "\n\nUser: hi", None)
ENV = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def _random_stream(rng: random.Random, hostile: bool) -> bytes:
    def odd() -> bool:
        return hostile and rng.random() < 0.08

    lines = []
    n_calls = rng.choice([0, 0, 1, 2])
    for i in range(rng.randint(2, 14)):
        delta: dict[str, Any] = {}
        if i == 0 or rng.random() < 0.2:
            delta["role"] = "assistant"
        roll = rng.random()
        if roll < 0.5:
            delta["content"] = rng.choice(TEXTS)
        elif roll < 0.7:
            delta[rng.choice(["reasoning_content", "reasoning"])] = rng.choice(TEXTS)
            if rng.random() < 0.5:
                delta["content"] = None
        elif roll < 0.75:
            delta["reasoning_details"] = [{"type": "reasoning.text", "text": "rd"}]
        elif roll < 0.78:
            delta["refusal"] = rng.choice(["I can't", ""])
        elif n_calls:
            tc: dict[str, Any] = {"index": rng.randrange(n_calls)}
            if rng.random() < 0.3:
                tc.update(id=f"call_{tc['index']}", type="function")
                tc["function"] = {"name": "f", "arguments": ""}
            else:
                tc["function"] = {"arguments": rng.choice(['{"a"', ": 1", "}", ""])}
            if odd():  # an argument delta of another shape: the general way decides
                tc["index"] = rng.choice([-1, None, 1.5, True, 2**60, "0"])
            if odd():
                tc["function"] = rng.choice(
                    [None, "x", {"arguments": {"a": 1}}, {"name": "", "arguments": "x"},
                     {"name": 5, "arguments": "y"}, {"arguments": 7}, {"arguments": "z", "k": 1}]
                )  # fmt: skip
            delta["tool_calls"] = [tc]
        choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None,
                                  "finish_reason": None}  # fmt: skip
        chunk: dict[str, Any] = {**ENV, "choices": [choice]}
        if rng.random() < 0.1:
            chunk["usage"] = None
        if odd():
            delta[rng.choice(["content", "role", "tool_calls", "refusal"])] = rng.choice(
                [7, ["x"], {"type": "text", "text": "t"}, None, True]
            )
        if odd():
            choice[rng.choice(["index", "delta", "finish_reason"])] = rng.choice(
                [-1, 1.5, None, "x", 2**60, True]
            )
        if odd():
            target = rng.choice([chunk, choice, delta])
            target[rng.choice(["newKey", "error", "usage", "extra_content"])] = rng.choice(
                [1, {"message": "boom"}, None, {}]
            )
        if odd():
            chunk["choices"] = rng.choice([[], None, [choice, choice], ["x"], {"0": choice}])
        lines.append(chunk)
    finish = rng.choice(["stop", "length", "tool_calls" if n_calls else "stop", "content_filter"])
    lines.append({**ENV, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    usage = {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}
    if rng.random() < 0.3:
        usage["completion_tokens_details"] = {"reasoning_tokens": 3}
    lines.append({**ENV, "choices": [], "usage": usage})
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in lines)
    return body + (b"data: [DONE]\n\n" if rng.random() < 0.8 else b"")


def _same_both_ways(monkeypatch: pytest.MonkeyPatch, provider: str, body: bytes) -> None:
    for config in CONFIGS.values():
        got = {}
        for lean in (False, True):
            monkeypatch.setattr(OpenAICompatibleAdapter, "lean", lean)
            got[lean] = everything(replay_sse(provider, body, config=config))
        assert got[True] == got[False]


@pytest.mark.parametrize("provider", ["openai", "deepseek", "vllm", "mistral", "xai", "custom"])
@pytest.mark.parametrize("hostile", [False, True], ids=["common", "hostile"])
@pytest.mark.parametrize("seed", range(12))
def test_realistic_random_streams_replay_the_same_both_ways(monkeypatch, provider, seed, hostile):
    _same_both_ways(monkeypatch, provider, _random_stream(random.Random(seed), hostile))


def test_the_typed_path_is_taken_by_the_machine_and_not_by_a_family_with_its_own():
    from lab.providers import get_adapter

    def typed(provider: str, **cfg: Any) -> bool:
        adapter = get_adapter(provider)(config=LabConfig(**cfg))
        adapter.start_attempt(0)
        return adapter._typed_chat

    assert typed("openai") and typed("deepseek") and typed("mistral")
    assert not typed("openrouter")  # its own typed path
    assert not typed("groq")  # usage in x_groq.usage: the general way reads it
    assert not typed("custom")  # usage wherever another endpoint puts it
    assert not typed("openai", usage_in_choices=True)


@pytest.mark.parametrize(
    "line",
    [
        '{"choices":[{"index":0,"delta":{"content":"a"}}],"newKey":1}',
        '{"choices":[{"index":0,"delta":{"content":"a","newKey":null}}]}',
        '{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"a"}]}}]}',
        '{"choices":[{"index":0,"delta":{"content":7}}]}',
        '{"choices":[{"index":0,"delta":"text"}]}',
        '{"choices":["x"]}',
        '{"error":{"message":"boom"}}',
        '{"choices":[{"index":0,"delta":{"content":"a"},"usage":{}}]}',
        "[]",
    ],
)
def test_a_line_of_another_shape_is_declined(line):
    with pytest.raises(ValueError):
        chat.decode_chat_chunk(line)


def test_an_unknown_delta_key_is_still_counted():
    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"Hi","shiny":"x"}}]}\n\n'
        b'data: {"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}]}\n\n'
    )
    r = replay_sse("openai", body)
    assert r.text == "Hi!"
    assert r.facts["unhandled_shapes"] == {"choices[].delta.shiny": 1}


@pytest.mark.parametrize(
    "choice",
    [
        '{"index":-1,"delta":{"content":"a"}}',
        '{"index":1.5,"delta":{"content":"a"}}',
        '{"index":true,"delta":{"content":"a"}}',
        '{"index":"0","delta":{"content":"a"}}',
        '{"index":18446744073709551616,"delta":{"content":"a"}}',
        '{"delta":{"content":"a"},"finish_reason":7}',
        '{"delta":null}',
        '{"index":0,"delta":{"role":7,"content":null,"reasoning":"r","reasoning_content":"c"}}',
        '{"index":0,"delta":{"refusal":"no","tool_calls":[1,{"index":0}]}}',
        '{"index":0,"delta":{"reasoning_details":[{"type":"reasoning.summary","summary":"s"}]}}',
    ],
)
@pytest.mark.parametrize("provider", ["openai", "deepseek", "vllm"])
def test_odd_values_the_typed_path_takes_replay_the_same_both_ways(monkeypatch, choice, provider):
    body = (
        b'data: {"id":"c1","model":"m","choices":[' + choice.encode() + b"]}\n\n"
        b'data: {"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}]}\n\n'
    )
    _same_both_ways(monkeypatch, provider, body)
