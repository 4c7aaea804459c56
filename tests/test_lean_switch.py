"""Each family's ``lean`` switch takes effect: off, the lean path is never taken; on, it is.

The lean tests of each family compare a replay with the switch on and off and find them
equal, which they would also do if the switch were read nowhere (both replays lean). Here
the lean path's entry is counted: each adapter reads the switch, and its typed decoder,
when an attempt starts, so setting them on the class before the stream is made is what
counts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from lab.providers import anthropic, chat, google, openai_responses
from lab.providers.anthropic import AnthropicAdapter
from lab.providers.chat import OpenAICompatibleAdapter
from lab.providers.google import GoogleAdapter
from lab.providers.openai_responses import ResponsesAdapter
from lab.providers.openrouter import OpenRouterAdapter
from lab.replay import replay_sse

pytestmark = pytest.mark.skipif(
    anthropic.decode_delta is None, reason="msgspec is not the lab's parser here"
)


def _sse(payload: dict, name: str | None = None) -> bytes:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(payload)}\n\n".encode()


def _anthropic() -> bytes:
    return b"".join([
        _sse({"type": "message_start", "message": {"id": "m", "model": "c"}}, "message_start"),
        _sse({"type": "content_block_start", "index": 0,
              "content_block": {"type": "text", "text": ""}}, "content_block_start"),
        _sse({"type": "content_block_delta", "index": 0,
              "delta": {"type": "text_delta", "text": "Hi there"}}, "content_block_delta"),
        _sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        _sse({"type": "message_stop"}, "message_stop"),
    ])  # fmt: skip


def _google() -> bytes:
    cand = {"content": {"parts": [{"text": "Hi there"}], "role": "model"}, "index": 0}
    return _sse({"candidates": [cand], "modelVersion": "g", "responseId": "r"})


def _responses() -> bytes:
    delta = {"type": openai_responses.TEXT_DELTA, "item_id": "m", "output_index": 0,
             "content_index": 0, "delta": "Hi there", "sequence_number": 1}  # fmt: skip
    return _sse(delta, openai_responses.TEXT_DELTA)


def _chat(provider: str | None = None) -> bytes:
    chunk: dict[str, Any] = {"id": "c", "object": "chat.completion.chunk", "model": "m",
                             "choices": [{"index": 0, "delta": {"content": "Hi there"}}]}  # fmt: skip
    if provider:
        chunk["provider"] = provider
    return _sse(chunk) + b"data: [DONE]\n\n"


def _counting(calls: list[int], fn: Callable) -> Callable:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return fn(*args, **kwargs)

    return counted


# family: (adapter class, module and name of what the lean path calls, body, provider, path)
FAMILIES: dict[str, tuple[type, Any, str, Callable[[], bytes], str, str | None]] = {
    "anthropic": (AnthropicAdapter, anthropic, "decode_delta", _anthropic, "anthropic", None),
    "google": (GoogleAdapter, google, "decode_lean", _google, "google", None),
    "responses": (
        ResponsesAdapter,
        openai_responses,
        "decode_text_delta",
        _responses,
        "openai",
        "/responses",
    ),  # fmt: skip
    "chat": (OpenAICompatibleAdapter, chat, "decode_chat_chunk", _chat, "openai", None),
    "openrouter": (
        OpenRouterAdapter,
        OpenRouterAdapter,
        "_lean_piece",
        lambda: _chat("Chutes"),
        "openrouter",
        None,
    ),  # fmt: skip
}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("lean", [True, False], ids=["on", "off"])
def test_the_lean_switch_decides_whether_the_lean_path_is_taken(monkeypatch, family, lean):
    cls, owner, name, body, provider, path = FAMILIES[family]
    calls: list[int] = []
    monkeypatch.setattr(owner, name, _counting(calls, getattr(owner, name)))
    monkeypatch.setattr(cls, "lean", lean)
    result = replay_sse(provider, body(), path=path)
    assert result.text == "Hi there"
    assert bool(calls) is lean, (family, len(calls))
