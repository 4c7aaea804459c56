"""How an adapter hands its chunks to the runner: ``StreamAdapter.take`` appends each
event's chunks to ``adapter.emitted`` and their origins to ``adapter.origins`` itself, and
the runner's ``on_chunk`` sees every chunk of the result, in order, once."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from lab.config import LabConfig
from lab.http.sse import SSEEvent
from lab.model import ProcessedChunk
from lab.providers import get_adapter
from lab.providers.base import RetryAttempt
from lab.result import ChunkOrigin
from lab.stream import run_stream


def _data(index: int, payload: dict, last_seq: int = 0, unterminated: bool = False) -> SSEEvent:
    return SSEEvent(index, json.dumps(payload), None, None, None, None, 0, last_seq, unterminated)


def _chunk(delta: dict, finish: str | None = None) -> dict:
    return {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _sse(*items: Any) -> bytes:
    return b"".join(
        (i if isinstance(i, bytes) else b"data: " + json.dumps(i).encode() + b"\n\n") for i in items
    )


def test_take_appends_the_chunks_and_one_origin_each_and_feed_returns_them():
    adapter = get_adapter("openai")()
    adapter.start_attempt(0)
    assert adapter.take(_data(0, _chunk({"role": "assistant", "content": "Hel"}), 3)) == 1
    got = adapter.feed(_data(1, _chunk({"content": "lo"}), 4))
    assert [c.content for c in got] == ["lo"]
    assert [c.content for c in adapter.emitted] == ["Hel", "lo"]
    assert adapter.origins == [ChunkOrigin(0, 0, 3), ChunkOrigin(0, 1, 4)]
    comment = SSEEvent(2, None, None, None, None, "ping", 5, 5)
    assert adapter.take(comment) == 0 and adapter.feed(comment) == []
    assert len(adapter.origins) == len(adapter.emitted) == 2


def test_an_event_that_asks_for_a_retry_keeps_none_of_its_chunks(monkeypatch):
    adapter = get_adapter("openai")()
    adapter.start_attempt(0)
    adapter.take(_data(0, _chunk({"content": "kept"}), 1))

    def half_then_retry(data: str, event: SSEEvent, out: list[ProcessedChunk]) -> None:
        out.append(ProcessedChunk(type="text", content="half"))
        raise RetryAttempt(429, "busy")

    monkeypatch.setattr(adapter, "feed_data", half_then_retry)
    with pytest.raises(RetryAttempt):
        adapter.take(_data(1, _chunk({"content": "x"}), 2))
    assert [c.content for c in adapter.emitted] == ["kept"]
    assert adapter.origins == [ChunkOrigin(0, 0, 1)]


def test_on_chunk_sees_every_chunk_of_every_attempt_in_order_once():
    """Two attempts (a pre-commit error retried with the named parameter dropped), the
    second ending in an event without its blank line (the decoder's flush): what
    ``on_chunk`` saw is the result's chunks, the same objects, each with its origin."""
    calls: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(json.loads(request.content))
        if "min_p" in calls[-1]:
            body = _sse(b": keep-alive\n\n", {"error": {"message": "min_p is not supported"}})
        else:
            tail = b"data: " + json.dumps(_chunk({}, "stop")).encode()  # no blank line
            body = _sse(_chunk({"content": "o"}), _chunk({"content": "k"}), tail)
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=httpx.ByteStream(body)
        )

    seen: list[ProcessedChunk] = []
    result = run_stream(
        "deepseek",
        {"model": "m", "messages": [], "stream": True, "min_p": 0.1},
        transport=httpx.MockTransport(handler),
        base_url="http://fake.test/v1",
        on_chunk=seen.append,
    )
    assert result.text == "ok" and len(calls) == 2
    assert [id(c) for c in seen] == [id(c) for c in result.chunks]
    assert len(result.origins) == len(result.chunks)
    assert [c.content for c in seen if c.content] == ["o", "k"]
    assert seen[-1].metadata.get("finish_reason") == "stop"
    assert {o.attempt for o in result.origins} == {1}  # attempt 0 emitted nothing
    assert result.origins[-1].event == 2  # the flushed event, the second attempt's third


@pytest.mark.parametrize("status", [200, 500])
def test_on_chunk_sees_the_chunks_made_at_the_end_too(status):
    """Chunks that no event made (the speaker guard's held tail released by ``finish``,
    the error chunk of ``fail`` for an HTTP error) reach ``on_chunk`` as well."""

    def handler(request: httpx.Request) -> httpx.Response:
        if status != 200:
            return httpx.Response(status, json={"error": {"message": "boom"}})
        body = _sse(_chunk({"content": "ok"}), _chunk({"content": "\n\nUs"}))  # held at EOF
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=httpx.ByteStream(body)
        )

    seen: list[ProcessedChunk] = []
    result = run_stream(
        "deepseek",
        {"model": "m", "messages": [], "stream": True},
        transport=httpx.MockTransport(handler),
        base_url="http://fake.test/v1",
        config=LabConfig(speaker_guard=True, persona_name="Ann"),
        on_chunk=seen.append,
    )
    assert [id(c) for c in seen] == [id(c) for c in result.chunks]
    assert len(result.origins) == len(result.chunks)
    if status == 200:
        assert result.text == "ok\n\nUs"
        assert seen[-1].content == "ok\n\nUs"  # released by finish(), not by an event
    else:
        assert result.error is not None and seen[-1].type == "error"
