"""A replay gives the same result with every installed JSON parser (``lab._json``).

msgspec is an optional speedup (the ``[speed]`` extra); without it the lab parses with
orjson, and without that with the standard library. The real-world corpus, a hostile
stream and the benchmark's body are replayed with each parser in turn (msgspec with
OpenRouter's typed fast path, ``decode_typed_chunk``; the others without it): every field
of the results, every chunk and every fact must be identical.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from lab import _json
from lab.config import LabConfig
from lab.providers import openrouter
from lab.providers.openrouter import OpenRouterAdapter
from lab.replay import replay_sse

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


def _everything(result) -> tuple:
    return (
        result.to_dict(),
        result.chunks,
        result.origins,
        result.facts,
        result.guard_events,
        result.thoughts,
        result.function_calls,
    )


def _replay_with(parser: str, monkeypatch, *args, **kwargs):
    monkeypatch.setattr(_json, "loads", _json.PARSERS[parser])
    typed = openrouter.decode_typed_chunk if parser == "msgspec" else None
    monkeypatch.setattr(OpenRouterAdapter, "_decode_typed", staticmethod(typed) if typed else None)
    return _everything(replay_sse(*args, **kwargs))


def _same_with_every_parser(monkeypatch, *args, **kwargs) -> None:
    got = {p: _replay_with(p, monkeypatch, *args, **kwargs) for p in PARSERS}
    for p in PARSERS:
        assert got[p] == got["json"], p


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


def test_the_benchmark_body_replays_the_same_with_every_parser(monkeypatch):
    _same_with_every_parser(monkeypatch, "openrouter", bench_common.openrouter_body(2000))
