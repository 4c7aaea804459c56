"""lab.recording_client / lab.async_recording_client under the real openai and anthropic
SDKs, against the fake providers on a loopback socket: what the SDK saw is what replays."""

from __future__ import annotations

import asyncio

import httpx
import pytest

import lab
from lab.capture import open as open_capture
from lab.replay import replay
from tests.capture_scan import places_holding

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

HI = [{"role": "user", "content": "hi"}]
CANARY = "sk-canary-7f3e9a1c5b"


def test_openai_sdk_stream_is_recorded_byte_for_byte_and_replays_to_what_it_saw(
    tmp_path, fake_server
):
    http = lab.recording_client(tmp_path, provider="openai")
    client = openai.OpenAI(
        base_url=fake_server.family_base_url("openai"), api_key=CANARY, http_client=http
    )
    with client.chat.completions.with_streaming_response.create(
        model="fake/reasoning-content", messages=HI, stream=True
    ) as response:
        received = b"".join(response.iter_bytes())
    text = "".join(
        event.choices[0].delta.content or ""
        for event in client.chat.completions.create(
            model="fake/think-leak", messages=HI, stream=True
        )
        if event.choices
    )
    client.close()
    assert http.is_closed
    exchanges = open_capture(http.capture_path).exchanges()
    assert [(e.provider, e.model) for e in exchanges] == [
        ("openai", "fake/reasoning-content"),
        ("openai", "fake/think-leak"),
    ]
    assert exchanges[0].body == received
    first, second = replay(http.capture_path)
    assert first.reasoning.startswith("The user is asking about the café.")
    # the SDK shows the raw content; the lab's think stripper moved the <think> block
    assert text.startswith("<think>") and text.endswith(second.text)
    assert second.text and second.reasoning and second.reasoning in text
    assert places_holding(tmp_path, CANARY) == []
    assert exchanges[0].request_headers["authorization"] == "[REDACTED]"


def test_anthropic_sdk_through_an_httpx2_recording_client(tmp_path, fake_server):
    http = lab.recording_client(tmp_path, provider="anthropic", http="httpx2")
    client = anthropic.Anthropic(
        base_url=fake_server.family_base_url("anthropic"), api_key=CANARY, http_client=http
    )
    thinking, text = [], []
    with client.messages.stream(model="fake/thinking", max_tokens=256, messages=HI) as stream:
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "thinking_delta":
                thinking.append(event.delta.thinking)
            elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                text.append(event.delta.text)
        final = stream.get_final_message()
    client.close()
    (result,) = replay(http.capture_path)
    assert result.provider == "anthropic" and result.model == "fake/thinking"
    assert result.text == "".join(text) and result.reasoning == "".join(thinking)
    assert result.usage.output_tokens == final.usage.output_tokens
    assert places_holding(tmp_path, CANARY) == []


def test_anthropic_sdk_refuses_a_plain_httpx_client_which_is_why_http_httpx2_exists(tmp_path):
    http = lab.recording_client(tmp_path, provider="anthropic")
    with pytest.raises(TypeError, match="httpx2"):
        anthropic.Anthropic(base_url="http://127.0.0.1:9", api_key="x", http_client=http)
    http.close()


def test_async_openai_sdk_through_async_recording_client(tmp_path, fake_server):
    async def run() -> tuple[str, object]:
        http = lab.async_recording_client(tmp_path, provider="openai")
        client = openai.AsyncOpenAI(
            base_url=fake_server.family_base_url("openai"), api_key=CANARY, http_client=http
        )
        pieces = []
        async for event in await client.chat.completions.create(
            model="fake/clean", messages=HI, stream=True
        ):
            if event.choices and event.choices[0].delta.content:
                pieces.append(event.choices[0].delta.content)
        await client.close()
        return "".join(pieces), http

    text, http = asyncio.run(run())
    (result,) = replay(http.capture_path)
    assert (result.provider, result.text, result.error) == ("openai", text, None)
    assert places_holding(tmp_path, CANARY) == []


def test_async_anthropic_sdk_through_an_async_httpx2_recording_client(tmp_path, fake_server):
    async def run() -> tuple[str, object]:
        http = lab.async_recording_client(tmp_path, provider="anthropic", http="httpx2")
        client = anthropic.AsyncAnthropic(
            base_url=fake_server.family_base_url("anthropic"), api_key=CANARY, http_client=http
        )
        async with client.messages.stream(model="fake/clean", max_tokens=64, messages=HI) as stream:
            text = await stream.get_final_text()
        await client.close()
        return text, http

    text, http = asyncio.run(run())
    (result,) = replay(http.capture_path)
    assert (result.provider, result.text) == ("anthropic", text)


def test_the_issue_recipe_a_bare_recording_transport_now_replays(tmp_path, fake_server):
    from lab.capture import CaptureWriter
    from lab.http.transports import RecordingTransport

    with CaptureWriter(tmp_path) as writer:
        client = openai.OpenAI(
            base_url=fake_server.family_base_url("openai"),
            api_key=CANARY,
            http_client=httpx.Client(transport=RecordingTransport(writer)),
        )
        text = "".join(
            e.choices[0].delta.content or ""
            for e in client.chat.completions.create(model="fake/clean", messages=HI, stream=True)
            if e.choices
        )
        client.close()
    (result,) = replay(writer.path)
    assert (result.provider, result.text, result.error) == ("custom", text, None)


def test_recording_client_refuses_an_unknown_provider_or_http_library(tmp_path):
    with pytest.raises(ValueError, match=r"unknown provider 'nope'; known providers: anthropic"):
        lab.recording_client(tmp_path, provider="nope")
    with pytest.raises(ValueError, match=r'http must be "httpx" or "httpx2", not \'requests\''):
        lab.recording_client(tmp_path, provider="openai", http="requests")
    assert list(tmp_path.iterdir()) == []  # refused before any recording directory


def test_a_transport_error_reaches_the_sdk_as_its_own_connection_error(tmp_path):
    http = lab.recording_client(tmp_path, provider="anthropic", http="httpx2")
    client = anthropic.Anthropic(
        base_url="http://127.0.0.1:9", api_key=CANARY, http_client=http, max_retries=0
    )
    with pytest.raises(anthropic.APIConnectionError):
        client.messages.create(model="m", max_tokens=1, messages=HI)
    client.close()
    (exchange,) = open_capture(http.capture_path).exchanges()
    assert (exchange.status, exchange.end_reason) == (None, "read_error")
    assert exchange.error.startswith("ConnectError")
