"""Gemini streamGenerateContent adapter through the full stack."""

from __future__ import annotations

import json
from typing import Any

import httpx

from lab.config import LabConfig
from lab.fakes import render_body
from lab.providers import get_adapter
from lab.providers.google import GoogleAdapter
from lab.replay import replay_sse
from lab.stream import run_stream


def sse(*items: Any) -> bytes:
    return "".join(
        item if isinstance(item, str) else "data: " + json.dumps(item, ensure_ascii=False) + "\n\n"
        for item in items
    ).encode()


def resp(parts: list[dict] | None, finish: str | None = None, usage: dict | None = None, **kw):
    obj: dict[str, Any] = {}
    if parts is not None:
        cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            cand["finishReason"] = finish
        obj["candidates"] = [cand]
    obj.update(kw)
    obj["usageMetadata"] = usage or {
        "promptTokenCount": 138,
        "candidatesTokenCount": 4,
        "totalTokenCount": 142,
    }
    obj["modelVersion"] = "gemini-2.5-flash"
    obj["responseId"] = "45I2aaWZBumm2roPm8HR0Ao"
    return obj


def test_registry_endpoint_and_headers():
    assert get_adapter("google") is GoogleAdapter
    a = GoogleAdapter()
    assert a.api_key_env == "GEMINI_API_KEY"
    assert a.api_key_envs == ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    assert a.endpoint(None, "gemini-2.5-flash") == (
        "https://generativelanguage.googleapis.com/v1beta/models/"
        "gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert a.endpoint("http://127.0.0.1:9/v1beta/", "models/g") == (
        "http://127.0.0.1:9/v1beta/models/g:streamGenerateContent?alt=sse"
    )
    headers = a.request_headers("AIza-key")
    assert headers["x-goog-api-key"] == "AIza-key"
    assert "authorization" not in headers
    assert a.mandatory_keys_for({"contents": []}) == ("model", "contents")
    assert GoogleAdapter.wire_body({"model": "g", "contents": []}) == {"contents": []}


def test_text_chunks_usage_and_stop():
    body = sse(
        resp([{"text": "今日の東京の天気"}]),
        resp(
            [{"text": "は曇りで、気温は22度です。\n"}],
            "STOP",
            {"promptTokenCount": 138, "candidatesTokenCount": 15, "totalTokenCount": 153},
        ),
    )
    r = replay_sse("google", body)
    assert r.error is None
    assert r.text == "今日の東京の天気は曇りで、気温は22度です。\n"
    assert r.finish_reason == "stop"
    assert [c.type for c in r.chunks] == ["text", "text"]
    assert r.chunks[-1].metadata["native_finish_reason"] == "STOP"
    assert r.usage.model_dump() == {
        "input_tokens": 138,
        "output_tokens": 15,
        "reasoning_tokens": 0,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "total_tokens": 153,
        "cost": None,
    }


def test_stop_with_empty_text_is_done():
    r = replay_sse("google", sse(resp([{"text": "Hi"}]), resp([{"text": ""}], "STOP")))
    assert r.text == "Hi"
    assert r.chunks[-1].type == "done"


def test_thought_parts_become_raw_thoughts_and_signature_goes_to_metadata():
    body = sse(
        resp([{"text": "**Analyzing**\n\nThe user wants tips.", "thought": True}]),
        resp([{"text": "**Choosing**\n\nCorner café.", "thought": True}]),
        resp([{"text": "Try the corner café.", "thoughtSignature": "CikBsig"}], "STOP"),
    )
    r = replay_sse("google", body)
    assert r.text == "Try the corner café."
    assert [(t.kind, t.content) for t in r.thoughts] == [
        ("raw", "**Analyzing**\n\nThe user wants tips."),
        ("raw", "**Choosing**\n\nCorner café."),
    ]
    assert r.chunks[-1].metadata["thoughtSignature"] == "CikBsig"


def test_thought_summary_field_is_a_summary_thought():
    r = replay_sse("google", sse(resp([{"text": "ok"}], "STOP", thoughtSummary="**Plan**")))
    assert [(t.kind, t.content) for t in r.thoughts] == [("summary", "**Plan**")]
    assert r.chunks[0].metadata["thoughtSummary"] == "**Plan**"


def test_function_call_with_signature_and_thought_token_usage():
    usage = {
        "promptTokenCount": 83,
        "candidatesTokenCount": 14,
        "totalTokenCount": 201,
        "thoughtsTokenCount": 104,
        "cachedContentTokenCount": 40,
    }
    call = {
        "functionCall": {"name": "getWeather", "args": {"location": "Tokyo"}},
        "thoughtSignature": "CikBcsjafFK168",
    }
    r = replay_sse(
        "google",
        sse(
            resp(
                [call],
                "STOP",
                usage,
            )
        ),
    )
    assert r.error is None
    assert len(r.function_calls) == 1
    fc = r.function_calls[0]
    assert (fc.name, fc.args, fc.thought_signature) == (
        "getWeather",
        {"location": "Tokyo"},
        "CikBcsjafFK168",
    )
    assert fc.arguments_truncated is False
    assert r.finish_reason == "tool_calls"
    assert r.usage.model_dump() == {
        "input_tokens": 83,
        "output_tokens": 118,
        "reasoning_tokens": 104,
        "cache_read_tokens": 40,
        "cache_write_tokens": 0,
        "total_tokens": 201,
        "cost": None,
    }


def test_text_and_function_call_in_one_chunk_split_text_first():
    parts = [
        {"text": "Checking the weather."},
        {"functionCall": {"name": "getWeather", "args": {"location": "Oslo"}}},
    ]
    r = replay_sse("google", sse(resp(parts, "STOP")))
    assert [c.type for c in r.chunks] == ["text", "function_call"]
    assert r.chunks[0].content == "Checking the weather."
    assert r.chunks[0].metadata.get("thoughtSignature") is None
    assert r.function_calls[0].args == {"location": "Oslo"}


def test_fake_function_call_scenario():
    r = replay_sse("google", render_body("google", "fake/function-call"))
    fc = r.function_calls[0]
    assert (fc.name, fc.args) == ("get_weather", {"city": "Zürich", "days": 3})
    assert fc.thought_signature and fc.thought_signature.startswith("Cik")
    assert r.reasoning.startswith("**Analyzing the request**")


def test_prompt_block_reason_is_content_blocked_and_final():
    body = sse(
        {
            "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
            "usageMetadata": {"promptTokenCount": 12, "totalTokenCount": 12},
        }
    )
    r = replay_sse("google", body)
    assert r.error.type == "content_blocked"
    assert r.error.retryable is False
    assert r.error.code == "PROHIBITED_CONTENT"
    assert r.error.message == "Prompt blocked by API. Reason: PROHIBITED_CONTENT"
    assert r.usage.input_tokens == 12


def test_unspecified_block_reason_is_not_a_block():
    body = sse(
        resp(
            [{"text": "fine"}], "STOP", promptFeedback={"blockReason": "BLOCKED_REASON_UNSPECIFIED"}
        )
    )
    r = replay_sse("google", body)
    assert r.error is None and r.text == "fine"


def test_safety_finish_reason_is_content_blocked():
    body = sse(
        resp([{"text": "Here is how the"}]),
        {"candidates": [{"finishReason": "SAFETY", "index": 0}]},
    )
    r = replay_sse("google", body)
    assert r.text == "Here is how the"
    assert r.error.type == "content_blocked"
    assert r.error.retryable is False
    assert r.error.message == "Response stopped/blocked. Reason: SAFETY"
    assert r.finish_reason == "content_filter"


def test_fake_safety_block_both_variants():
    for seed in (0, 1):
        r = replay_sse("google", render_body("google", "fake/safety-block", seed=seed))
        assert r.error.type == "content_blocked"


def test_mid_stream_error_chunk_is_surfaced_not_swallowed():
    body = sse(
        resp([{"text": "Partial answer"}]),
        {
            "error": {
                "code": 503,
                "message": "This model is currently experiencing high demand.",
                "status": "UNAVAILABLE",
            }
        },
    )
    r = replay_sse("google", body)
    assert r.text == "Partial answer"
    assert r.error.type == "provider_overloaded"
    assert r.error.retryable is True
    assert r.finish_reason == "error"


def test_max_tokens_is_an_empty_text_chunk_with_length():
    r = replay_sse("google", sse(resp([{"text": "Cut"}]), resp([{"text": ""}], "MAX_TOKENS")))
    assert r.text == "Cut"
    assert r.finish_reason == "length"
    assert r.chunks[-1].type == "text" and r.chunks[-1].content == ""


def test_overlapping_repeat_is_deduplicated():
    body = sse(
        resp([{"text": "The café opens at eight"}]),
        resp([{"text": "opens at eight and closes late."}], "STOP"),
    )
    r = replay_sse("google", body)
    assert r.text == "The café opens at eight and closes late."
    dedup = [e for e in r.guard_events if e.guard == "dedup"]
    assert [(e.moved, e.detail["rule"], e.seq) for e in dedup] == [("opens at eight", "overlap", 1)]


def test_speaker_guard_cuts_at_a_speaker_line():
    body = sse(
        resp([{"text": "Sure thing, see below.\nAlice: hi there, how"}]),
        resp([{"text": " are you"}], "STOP"),
    )
    r = replay_sse("google", body, config=LabConfig(speaker_guard=True))
    assert r.text == "Sure thing, see below."


def test_http_500_is_a_retryable_api_error():
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path.endswith("/models/gemini-2.5-flash:streamGenerateContent")
        return httpx.Response(
            500,
            json={
                "error": {
                    "code": 500,
                    "message": "Internal error encountered.",
                    "status": "INTERNAL",
                }
            },
        )

    r = run_stream(
        "google",
        {"model": "gemini-2.5-flash", "contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        transport=httpx.MockTransport(handler),
        base_url="http://fake.test/v1beta",
    )
    assert r.error.type == "api_error"
    assert r.error.retryable is True
    assert r.error.message == "Google API error (500): Internal error encountered."


def test_invalid_json_ends_the_stream_as_an_error():
    r = replay_sse(
        "google", sse(resp([{"text": "a"}]), 'data: {"candidates": [\n\n', resp([{"text": "b"}]))
    )
    assert r.text == "a"
    assert r.error is not None and r.chunks[-1].type == "error"
