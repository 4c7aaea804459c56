"""A chunk that only carries a tool call's argument delta skips the normalized dict.

The chat-completions machine sends such a chunk (``chat.lean_argument_delta`` with msgspec,
``chat.lean_argument_fields`` on the parsed dict without it) straight to
``OpenAICompatibleAdapter._lean_argument_piece``, which must build what the
general way builds. Each key the check reads, at every level of an argument-delta chunk,
is set to values of every JSON type; streams also start with an argument delta (the
commit point, the ids), follow a think block (pending thoughts) or end in an error: the
replay is identical with the fast paths on and off, with each parser, for several
endpoints and configs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from lab import _json
from lab.config import LabConfig
from lab.providers import chat, get_adapter
from lab.providers.chat import OpenAICompatibleAdapter
from lab.replay import replay_sse
from tests.result_parts import everything

TYPED = chat.decode_chat_chunk
"""The typed decoder (None when msgspec is not the lab's parser)."""

CONFIGS = {
    "reference": None,
    "complete": LabConfig.complete(),
    "speaker": LabConfig(speaker_guard=True, persona_name="Ann"),
    "thoughts": LabConfig(capture_think_blocks_as_thoughts=True),
}
ENV = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
HEADER = {"index": 0, "id": "call_1", "type": "function",
          "function": {"name": "write", "arguments": ""}}  # fmt: skip
VALUES = (None, 0, 1, -1, True, 1.5, "", "x", [], ["x"], {}, {"a": 1}, 2**70, [HEADER],
          [{"type": "reasoning.text", "text": "r"}])  # fmt: skip


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {**ENV, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def _args(text: str) -> dict[str, Any]:
    return _chunk({"tool_calls": [{"index": 0, "function": {"arguments": text}}]})


def _body(chunks: list[dict[str, Any]], *, end: bool = True) -> bytes:
    if end:
        chunks = [*chunks, _chunk({}, "tool_calls"),
                  {**ENV, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4,
                                                   "total_tokens": 7}}]  # fmt: skip
    body = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    return body + (b"data: [DONE]\n\n" if end else b"")


WAYS = [("json", False, False), ("json", False, True)]
"""(parser, typed decoder, lean) for each way a stream is replayed; the first is the general
way (every fast path off)."""
if "orjson" in _json.PARSERS:
    WAYS.append(("orjson", False, True))
if TYPED is not None:
    WAYS.append(("msgspec", True, True))


def _same_both_ways(monkeypatch: pytest.MonkeyPatch, provider: str, body: bytes) -> None:
    for name, config in CONFIGS.items():
        got = []
        for parser, typed, lean in WAYS:
            monkeypatch.setattr(_json, "loads", _json.PARSERS[parser])
            monkeypatch.setattr(chat, "decode_chat_chunk", TYPED if typed else None)
            monkeypatch.setattr(OpenAICompatibleAdapter, "lean", lean)
            got.append(everything(replay_sse(provider, body, config=config)))
        for way, result in zip(WAYS[1:], got[1:], strict=True):
            assert result == got[0], (name, way)


def _perturbed(where: str, key: str, value: Any) -> dict[str, Any]:
    chunk = _args('{"a": ')
    choice = chunk["choices"][0]
    delta = choice["delta"]
    call = delta["tool_calls"][0]
    target = {"chunk": chunk, "choice": choice, "delta": delta, "call": call,
              "function": call["function"]}[where]  # fmt: skip
    target[key] = value
    return chunk


PERTURBATIONS = [
    (where, key)
    for where, keys in (
        ("chunk", ["usage", "choices", "error", "id", "model", "newKey"]),
        ("choice", ["index", "finish_reason", "delta", "newKey"]),
        (
            "delta",
            [
                "content",
                "reasoning_content",
                "reasoning",
                "reasoning_details",
                "refusal",
                "role",
                "tool_calls",
                "channel",
                "newKey",
            ],
        ),
        ("call", ["index", "id", "type", "function", "newKey"]),
        ("function", ["name", "arguments", "newKey"]),
    )  # fmt: skip
    for key in keys
]


@pytest.mark.parametrize("where, key", PERTURBATIONS)
def test_an_argument_delta_with_any_key_set_to_any_value_replays_the_same_both_ways(
    monkeypatch, where, key
):
    for value in VALUES:
        chunks = [_chunk({"role": "assistant", "tool_calls": [HEADER]}), _args('{"a"'),
                  _perturbed(where, key, value), _args("1}")]  # fmt: skip
        _same_both_ways(monkeypatch, "openai", _body(chunks))


@pytest.mark.parametrize("provider", ["openai", "deepseek", "vllm", "mistral", "xai", "zai"])
def test_a_stream_that_starts_with_an_argument_delta_then_fails_replays_the_same(
    monkeypatch, provider
):
    error = {**ENV, "error": {"message": "upstream overloaded", "code": 503}}
    _same_both_ways(monkeypatch, provider, _body([_args('{"a": 1}'), error], end=False))
    first = {**_args('{"a": 1}'), "id": "chatcmpl-first", "model": "m-first"}
    _same_both_ways(monkeypatch, provider, _body([first, _args("")]))


@pytest.mark.parametrize("provider", ["openai", "deepseek", "vllm", "zai"])
def test_argument_deltas_after_text_a_think_block_and_markup_replay_the_same(monkeypatch, provider):
    texts = ["<think>", "plan it", "</think>", "Sure.", "\n\nUser: hi", "<tool_call>"]
    chunks = [_chunk({"content": t}) for t in texts]
    chunks += [_chunk({"tool_calls": [HEADER]}), _args('{"a"'), _args(": 1}")]
    _same_both_ways(monkeypatch, provider, _body(chunks))
    # a think block right before an argument delta: its thoughts ride on that piece
    chunks = [_chunk({"content": t}) for t in ["<think>", "plan it", "</think>"]]
    _same_both_ways(monkeypatch, provider, _body([*chunks, _args('{"a": 1}')]))


def test_the_lean_argument_path_is_taken_by_the_machine_only():
    def lean(provider: str, **cfg: Any) -> bool:
        adapter = get_adapter(provider)(config=LabConfig(**cfg))
        adapter.start_attempt(0)
        return adapter._lean_arguments

    assert lean("openai") and lean("deepseek")
    assert not lean("openai", speaker_guard=True, persona_name="Ann")  # a tool delta flushes it
    assert not lean("openrouter") and not lean("custom") and not lean("groq")


@pytest.mark.parametrize("provider", ["openai", "deepseek", "openrouter"])
@pytest.mark.parametrize("parser", [p for p, _, lean in WAYS if lean])
def test_each_argument_delta_of_a_tool_call_takes_the_lean_step(monkeypatch, provider, parser):
    """Not only the same results: the argument deltas do skip the dict (each after the
    header chunk, with each parser), so a check that stopped matching them would fail here."""
    from lab.providers.openrouter import OpenRouterAdapter

    typed = parser == "msgspec"
    monkeypatch.setattr(_json, "loads", _json.PARSERS[parser])
    monkeypatch.setattr(chat, "decode_chat_chunk", TYPED if typed else None)
    if not typed:
        monkeypatch.setattr(OpenRouterAdapter, "_decode_typed", None)
    calls = []
    real = OpenAICompatibleAdapter._lean_argument_piece

    def counting(self, *args):
        calls.append(args[:2])
        return real(self, *args)

    monkeypatch.setattr(OpenAICompatibleAdapter, "_lean_argument_piece", counting)
    pieces = ['{"a"', ": 1", ', "b": "x"', "}"]
    body = _body([_chunk({"role": "assistant", "tool_calls": [HEADER]}), *map(_args, pieces)])
    result = replay_sse(provider, body)
    assert [(c.name, c.args) for c in result.function_calls] == [("write", {"a": 1, "b": "x"})]
    assert calls == [(0, p) for p in pieces]
