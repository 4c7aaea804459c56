"""A replay gives the same result with every installed JSON parser (``lab._json``), and
the same as the general way of every family.

msgspec is an optional speedup (the ``[speed]`` extra); without it the lab parses with
orjson, and without that with the standard library. The real-world corpus, a hostile
stream and the benchmark bodies are replayed with each parser in turn (msgspec with the
families' typed decoders: OpenRouter's ``decode_typed_chunk``, Gemini's ``decode_lean``,
the Responses API's ``decode_text_delta``, Anthropic's ``decode_delta``, the chat
machine's ``decode_chat_chunk``;
the others with the lean dict checks) and once more the general way (the standard parser,
every fast path off): every field of the results, every chunk and every fact must be
identical.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from lab import _json
from lab.config import LabConfig
from lab.providers import anthropic, chat, google, openai_responses, openrouter
from lab.providers.anthropic import AnthropicAdapter
from lab.providers.chat import OpenAICompatibleAdapter
from lab.providers.google import GoogleAdapter
from lab.providers.openai_responses import ResponsesAdapter
from lab.providers.openrouter import OpenRouterAdapter
from lab.replay import replay_sse
from tests.result_parts import everything

HERE = Path(__file__).parent / "realworld"
SOURCES = json.loads((HERE / "sources.json").read_text(encoding="utf-8"))
PARSERS = sorted(_json.PARSERS)

_spec = importlib.util.spec_from_file_location(
    "bench_common", Path(__file__).resolve().parent.parent / "bench" / "_common.py"
)
assert _spec is not None and _spec.loader is not None
bench_common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_common)

HOSTILE = (
    b'data: {"choices":[{"index":1e999,"delta":{"content":"a","reasoning":NaN},'
    b'"finish_reason":null}],"id":12345678901234567890123}\n\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"\\ud800b"},"finish_reason":null}]}\n\n'
    b'data: {"choices":[],"usage":{"prompt_tokens":Infinity,"completion_tokens":'
    + b"9"
    * 30
    + b',"total_tokens":-1}}\n\n'
    b"data: " + b"[" * 1200 + b"]" * 1200 + b"\n\n"
    b'data: {"choices":[{"index":0,"delta":{"content":"c"},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


TYPED = {
    "openrouter": openrouter.decode_typed_chunk,
    "google": google.decode_lean,
    "anthropic": anthropic.decode_delta,
    "chat": chat.decode_chat_chunk,
    "responses": openai_responses.decode_text_delta,
}
"""Each family's typed decoder (None when msgspec is not the lab's parser)."""


def _replay_with(parser: str, monkeypatch, *args, **kwargs):
    """A replay with **parser**: its typed decoders with msgspec, the lean dict checks
    otherwise; ``general`` is the standard parser with every fast path off."""
    msgspec = parser == "msgspec"
    monkeypatch.setattr(_json, "loads", _json.PARSERS["json" if parser == "general" else parser])
    typed = TYPED["openrouter"] if msgspec else None
    monkeypatch.setattr(OpenRouterAdapter, "_decode_typed", staticmethod(typed) if typed else None)
    monkeypatch.setattr(google, "decode_lean", TYPED["google"] if msgspec else None)
    monkeypatch.setattr(GoogleAdapter, "lean", parser != "general")
    monkeypatch.setattr(anthropic, "decode_delta", TYPED["anthropic"] if msgspec else None)
    monkeypatch.setattr(AnthropicAdapter, "lean", parser != "general")
    monkeypatch.setattr(chat, "decode_chat_chunk", TYPED["chat"] if msgspec else None)
    monkeypatch.setattr(OpenAICompatibleAdapter, "lean", parser != "general")
    monkeypatch.setattr(
        openai_responses, "decode_text_delta", TYPED["responses"] if msgspec else None
    )
    monkeypatch.setattr(ResponsesAdapter, "lean", parser != "general")
    return everything(replay_sse(*args, **kwargs))


def _same_with_every_parser(monkeypatch, *args, **kwargs) -> None:
    want = _replay_with("general", monkeypatch, *args, **kwargs)
    for p in PARSERS:
        assert _replay_with(p, monkeypatch, *args, **kwargs) == want, p


@pytest.mark.parametrize("complete", [False, True], ids=["reference", "complete"])
def test_the_real_world_corpus_replays_the_same_with_every_parser(monkeypatch, complete):
    config = LabConfig.complete() if complete else None
    for src in SOURCES:
        if not src["file"].endswith(".sse"):
            continue
        body = (HERE / src["file"]).read_bytes()
        _same_with_every_parser(
            monkeypatch,
            src["provider"],
            body,
            config=config,
            stream_id=src["name"],
            path=src.get("request_path"),
        )


@pytest.mark.parametrize("family", ["openrouter", "openai", "custom"])
def test_a_hostile_stream_replays_the_same_with_every_parser(monkeypatch, family):
    _same_with_every_parser(monkeypatch, family, HOSTILE)


@pytest.mark.parametrize("name", list(bench_common.FAMILY_BODIES))
def test_the_benchmark_bodies_replay_the_same_with_every_parser(monkeypatch, name):
    provider, path, body = bench_common.family_body(name, 600)
    _same_with_every_parser(monkeypatch, provider, body, path=path)
    complete = LabConfig.complete()
    _same_with_every_parser(monkeypatch, provider, body, path=path, config=complete)
