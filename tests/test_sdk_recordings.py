"""Real SDKs recording through ``lab.recording_client`` over loopback (the fake providers):

- an SDK that closes the response right after the protocol terminator (the openai SDK after
  ``data: [DONE]``) leaves a complete recording: no ``recording_cut``; a stream the client
  abandons before its terminator keeps the anomaly;
- an SDK's automatic retry is an attempt of the same logical request (``client_retry``).

Each recording replays to what the client saw.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

import lab
from lab import tables
from lab.anomalies import detect
from lab.capture import open as open_capture
from lab.clients import CLIENT_RETRY_LABEL, RetryChains
from lab.fakes import FakeServer
from lab.replay import replay

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

HI = [{"role": "user", "content": "hi"}]
KEY = "sk-canary-sdk-recordings"


def _chat_text(events) -> str:
    return "".join(e.choices[0].delta.content or "" for e in events if e.choices)


def _openai_chat(fake, tmp_path, http: str) -> tuple[str, lab.RecordingClient]:
    client_http = lab.recording_client(tmp_path, provider="openai", http=http)
    client = openai.OpenAI(
        base_url=fake.family_base_url("openai"), api_key=KEY, http_client=client_http
    )
    text = _chat_text(
        client.chat.completions.create(model="fake/reasoning-content", messages=HI, stream=True)
    )
    client.close()
    return text, client_http


def _openai_chat_async(fake, tmp_path, http: str) -> tuple[str, object]:
    async def run() -> tuple[str, object]:
        client_http = lab.async_recording_client(tmp_path, provider="openai", http=http)
        client = openai.AsyncOpenAI(
            base_url=fake.family_base_url("openai"), api_key=KEY, http_client=client_http
        )
        pieces = []
        async for e in await client.chat.completions.create(
            model="fake/clean", messages=HI, stream=True
        ):
            if e.choices and e.choices[0].delta.content:
                pieces.append(e.choices[0].delta.content)
        await client.close()
        return "".join(pieces), client_http

    return asyncio.run(run())


def _openai_responses(fake, tmp_path, http: str) -> tuple[str, object]:
    client_http = lab.recording_client(tmp_path, provider="openai", http=http)
    client = openai.OpenAI(
        base_url=fake.family_base_url("openai"), api_key=KEY, http_client=client_http
    )
    text = "".join(
        e.delta
        for e in client.responses.create(model="fake/clean", input="hi", stream=True)
        if e.type == "response.output_text.delta"
    )
    client.close()
    return text, client_http


def _anthropic(fake, tmp_path, http: str) -> tuple[str, object]:
    client_http = lab.recording_client(tmp_path, provider="anthropic", http=http)
    client = anthropic.Anthropic(
        base_url=fake.family_base_url("anthropic"), api_key=KEY, http_client=client_http
    )
    with client.messages.stream(model="fake/thinking", max_tokens=256, messages=HI) as stream:
        text = stream.get_final_text()
    client.close()
    return text, client_http


def _anthropic_async(fake, tmp_path, http: str) -> tuple[str, object]:
    async def run() -> tuple[str, object]:
        client_http = lab.async_recording_client(tmp_path, provider="anthropic", http=http)
        client = anthropic.AsyncAnthropic(
            base_url=fake.family_base_url("anthropic"), api_key=KEY, http_client=client_http
        )
        async with client.messages.stream(model="fake/clean", max_tokens=64, messages=HI) as s:
            text = await s.get_final_text()
        await client.close()
        return text, client_http

    return asyncio.run(run())


def _google(fake, tmp_path, http: str) -> tuple[str, object]:
    genai = pytest.importorskip("google.genai")
    client_http = lab.recording_client(tmp_path, provider="google", http=http)
    client = genai.Client(
        api_key="AIza-canary",
        http_options=genai.types.HttpOptions(base_url=fake.base_url, httpx_client=client_http),
    )
    text = "".join(
        c.text or ""
        for c in client.models.generate_content_stream(model="fake/clean", contents="hi")
    )
    client_http.close()
    return text, client_http


SDK_RUNS = {
    "openai-chat-sync-httpx": (_openai_chat, "httpx"),
    "openai-chat-sync-httpx2": (_openai_chat, "httpx2"),
    "openai-chat-async-httpx": (_openai_chat_async, "httpx"),
    "openai-chat-async-httpx2": (_openai_chat_async, "httpx2"),
    "openai-responses-httpx2": (_openai_responses, "httpx2"),
    "anthropic-sync-httpx2": (_anthropic, "httpx2"),
    "anthropic-async-httpx2": (_anthropic_async, "httpx2"),
    "google-genai-httpx": (_google, "httpx"),
}


@pytest.mark.parametrize("run", sorted(SDK_RUNS))
def test_a_stream_the_sdk_read_to_its_terminator_replays_whole_with_no_recording_cut(
    tmp_path, fake_server, run
):
    fn, http = SDK_RUNS[run]
    text, client_http = fn(fake_server, tmp_path, http)
    (result,) = replay(client_http.capture_path)
    assert text and result.text == text
    assert result.error is None
    assert [a.end_reason for a in result.attempts] == ["eof"]
    assert "recording_cut" not in detect(result)
    assert "eof_without_terminator" not in detect(result)


def test_the_openai_sdk_closes_after_done_and_the_recording_still_ends_cancelled(
    tmp_path, fake_server
):
    # the recorder records what happened (the client closed the response); replay reads
    # the terminator in the recorded bytes and calls the exchange complete
    text, client_http = _openai_chat(fake_server, tmp_path, "httpx")
    (exchange,) = open_capture(client_http.capture_path).exchanges()
    assert exchange.end_reason == "cancelled"
    assert exchange.body.endswith(b"data: [DONE]\n\n")
    (result,) = replay(client_http.capture_path)
    assert (result.finish_reason, result.attempts[0].end_reason) == ("stop", "eof")


def test_a_chat_stream_abandoned_before_done_keeps_recording_cut(tmp_path, fake_server):
    client_http = lab.recording_client(tmp_path, provider="openai")
    client = openai.OpenAI(
        base_url=fake_server.family_base_url("openai"), api_key=KEY, http_client=client_http
    )
    stream = client.chat.completions.create(model="fake/clean", messages=HI, stream=True)
    first = next(iter(stream))
    stream.close()
    client.close()
    (exchange,) = open_capture(client_http.capture_path).exchanges()
    assert exchange.end_reason == "cancelled" and b"[DONE]" not in exchange.body
    (result,) = replay(client_http.capture_path)
    assert first.choices[0].delta.role == "assistant"
    assert result.attempts[0].end_reason == "cancelled"
    assert result.finish_reason is None
    assert "recording_cut" in detect(result)


def test_an_anthropic_stream_abandoned_before_message_stop_keeps_recording_cut(
    tmp_path, fake_server
):
    client_http = lab.recording_client(tmp_path, provider="anthropic", http="httpx2")
    client = anthropic.Anthropic(
        base_url=fake_server.family_base_url("anthropic"), api_key=KEY, http_client=client_http
    )
    with client.messages.stream(model="fake/thinking", max_tokens=256, messages=HI) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                break  # leaves the block: the SDK closes the response here
    client.close()
    (result,) = replay(client_http.capture_path)
    assert result.attempts[0].end_reason == "cancelled"
    assert "message_stop" not in result.facts
    assert "recording_cut" in detect(result)


def test_a_responses_stream_abandoned_before_its_terminal_event_keeps_recording_cut(
    tmp_path, fake_server
):
    client_http = lab.recording_client(tmp_path, provider="openai")
    client = openai.OpenAI(
        base_url=fake_server.family_base_url("openai"), api_key=KEY, http_client=client_http
    )
    stream = client.responses.create(model="fake/clean", input="hi", stream=True)
    for event in stream:
        if event.type == "response.output_text.delta":
            break
    stream.close()
    client.close()
    (result,) = replay(client_http.capture_path)
    assert result.attempts[0].end_reason == "cancelled"
    assert "recording_cut" in detect(result)


# -- SDK retries -----------------------------------------------------------------------------


def _retrying_openai(tmp_path, fake: FakeServer, http: str = "httpx"):
    client_http = lab.recording_client(tmp_path, provider="openai", http=http)
    client = openai.OpenAI(
        base_url=fake.family_base_url("openai"), api_key=KEY, http_client=client_http
    )
    text = _chat_text(client.chat.completions.create(model="fake/clean", messages=HI, stream=True))
    client.close()
    return text, client_http


@pytest.mark.parametrize("http", ["httpx", "httpx2"])
def test_openai_sdk_retries_after_429_are_attempts_of_one_logical_request(tmp_path, http):
    with FakeServer(delay_scale=0, throttle_first=2, retry_after="0.01") as fake:
        text, client_http = _retrying_openai(tmp_path, fake, http)
        sent = [(r.status, r.headers.get("x-stainless-retry-count")) for r in fake.requests]
    assert sent == [(429, "0"), (429, "1"), (200, "2")]
    exchanges = open_capture(client_http.capture_path).exchanges()
    assert len({e.stream_id for e in exchanges}) == 1
    assert [(e.attempt, e.attempt_label, e.status) for e in exchanges] == [
        (0, "default", 429),
        (1, CLIENT_RETRY_LABEL, 429),
        (2, CLIENT_RETRY_LABEL, 200),
    ]
    (result,) = replay(client_http.capture_path)
    assert (result.text, result.error, result.divergence) == (text, None, [])
    assert result.degradation_path == "default>client_retry>client_retry"
    assert "recording_cut" not in detect(result)
    row = tables.streams([result]).iloc[0]
    assert (row.attempts, row.degradation_path, row.error_type) == (
        3,
        "default>client_retry>client_retry",
        None,
    )
    per_attempt = tables.attempts([result])
    assert list(per_attempt.label) == ["default", CLIENT_RETRY_LABEL, CLIENT_RETRY_LABEL]
    assert list(per_attempt.status) == [429, 429, 200]


def test_anthropic_sdk_retry_after_429_is_an_attempt_of_the_same_request(tmp_path):
    with FakeServer(delay_scale=0, throttle_first=1, retry_after="0.01") as fake:
        client_http = lab.recording_client(tmp_path, provider="anthropic", http="httpx2")
        client = anthropic.Anthropic(
            base_url=fake.family_base_url("anthropic"), api_key=KEY, http_client=client_http
        )
        with client.messages.stream(model="fake/clean", max_tokens=64, messages=HI) as stream:
            text = stream.get_final_text()
        client.close()
    (result,) = replay(client_http.capture_path)
    assert (result.text, result.error) == (text, None)
    assert result.degradation_path == f"default>{CLIENT_RETRY_LABEL}"


def test_async_openai_sdk_retry_is_an_attempt_of_the_same_request(tmp_path):
    async def run(fake) -> tuple[str, object]:
        client_http = lab.async_recording_client(tmp_path, provider="openai", http="httpx2")
        client = openai.AsyncOpenAI(
            base_url=fake.family_base_url("openai"), api_key=KEY, http_client=client_http
        )
        pieces = []
        async for e in await client.chat.completions.create(
            model="fake/clean", messages=HI, stream=True
        ):
            if e.choices and e.choices[0].delta.content:
                pieces.append(e.choices[0].delta.content)
        await client.close()
        return "".join(pieces), client_http

    with FakeServer(delay_scale=0, throttle_first=1, retry_after="0.01") as fake:
        text, client_http = asyncio.run(run(fake))
    (result,) = replay(client_http.capture_path)
    assert (result.text, result.error, result.degradation_path) == (
        text,
        None,
        f"default>{CLIENT_RETRY_LABEL}",
    )


def test_an_equal_request_sent_again_after_a_failure_without_the_header_is_a_retry(tmp_path):
    body = {"model": "fake/clean", "messages": HI, "stream": True}
    with FakeServer(delay_scale=0, throttle_first=1, retry_after="0") as fake:
        with lab.recording_client(tmp_path, provider="openai") as client_http:
            url = fake.family_base_url("openai") + "/chat/completions"
            assert client_http.post(url, json=body).status_code == 429
            assert client_http.post(url, json=body).status_code == 200  # the app's retry
            assert client_http.post(url, json=body).status_code == 200  # a new request
    exchanges = open_capture(client_http.capture_path).exchanges()
    assert [(e.attempt, e.attempt_label, e.status) for e in exchanges] == [
        (0, "default", 429),
        (1, CLIENT_RETRY_LABEL, 200),
        (0, "default", 200),
    ]
    assert exchanges[0].stream_id == exchanges[1].stream_id != exchanges[2].stream_id


def test_retry_chains_follow_the_header_and_the_window():
    def request(count: str | None = None, content: bytes = b'{"a":1}') -> httpx.Request:
        headers = {} if count is None else {"x-stainless-retry-count": count}
        return httpx.Request("POST", "http://127.0.0.1/v1/x", headers=headers, content=content)

    chains = RetryChains(window_s=60.0)
    first = {"stream_id": "s1"}
    key = chains.name(request("0"), first)
    chains.ended(key, 503)
    retry = {"stream_id": "s2"}
    chains.name(request("1"), retry)
    assert retry == {"stream_id": "s1", "attempt": 1, "attempt_label": CLIENT_RETRY_LABEL}
    # count 0 is a new request even right after a failure of an equal one
    fresh = {"stream_id": "s3"}
    chains.ended(chains.name(request("0"), fresh), 200)
    assert fresh == {"stream_id": "s3"}
    # a 400 is not retried by SDKs: an equal request after it is a new one
    chains.ended(chains.name(request(), {"stream_id": "s4"}), 400)
    again = {"stream_id": "s5"}
    chains.name(request(), again)
    assert again == {"stream_id": "s5"}
    # window 0: without the header nothing is a retry
    none = RetryChains(window_s=0.0)
    none.ended(none.name(request(), {"stream_id": "s6"}), 429)
    time.sleep(0.001)
    later = {"stream_id": "s7"}
    none.name(request(), later)
    assert later == {"stream_id": "s7"}


def test_sdk_retries_through_lab_proxy_are_attempts_of_one_logical_request(tmp_path):
    pytest.importorskip("uvicorn")
    from lab.proxy import ProxyConfig, ProxyServer

    with FakeServer(delay_scale=0, throttle_first=1, retry_after="0.01") as fake:
        config = ProxyConfig(
            provider="openai", upstream=fake.family_base_url("openai"), out=tmp_path
        )
        with ProxyServer(config) as proxy:
            client = openai.OpenAI(base_url=proxy.url, api_key=KEY)
            text = _chat_text(
                client.chat.completions.create(model="fake/clean", messages=HI, stream=True)
            )
            client.close()
    (recording,) = proxy.recordings
    exchanges = open_capture(recording).exchanges()
    assert [(e.attempt, e.attempt_label, e.status) for e in exchanges] == [
        (0, "default", 429),
        (1, CLIENT_RETRY_LABEL, 200),
    ]
    (result,) = replay(recording)
    assert (result.text, result.error, result.degradation_path) == (
        text,
        None,
        f"default>{CLIENT_RETRY_LABEL}",
    )
