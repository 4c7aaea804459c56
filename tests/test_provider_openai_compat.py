"""OpenAI-compatible adapters (openai, deepseek, zai, nvidia, custom) through the full stack."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from lab.config import LabConfig
from lab.fakes import render_body
from lab.providers import get_adapter
from lab.providers.openai_compat import (
    CustomAdapter,
    DeepSeekAdapter,
    NvidiaAdapter,
    OpenAIAdapter,
    ZaiAdapter,
)
from lab.replay import replay_sse
from lab.stream import run_stream

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


def sse(*items: Any) -> bytes:
    """SSE body: dicts become ``data: <json>`` events, strings are sent as given."""
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        else:
            out.append("data: " + json.dumps(item, ensure_ascii=False) + "\n\n")
    return "".join(out).encode()


def chunk(
    delta: dict | None = None, finish: str | None = None, usage: Any = None, **extra: Any
) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1764680501,
        "model": "gpt-4.1-nano-2025-04-14",
        "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
        **extra,
    }


USAGE = {
    "prompt_tokens": 172,
    "completion_tokens": 57,
    "total_tokens": 229,
    "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 12, "audio_tokens": 0},
}
USAGE_CHUNK = {"id": "chatcmpl-1", "choices": [], "usage": USAGE}
DONE = "data: [DONE]\n\n"


def streamed(body: bytes) -> httpx.Response:
    """An HTTP 200 SSE response for a MockTransport handler."""
    return httpx.Response(
        200, headers={"content-type": "text/event-stream"}, stream=httpx.ByteStream(body)
    )


def run_http(provider: str, body: dict, handler: Any, **kw: Any):
    return run_stream(
        provider,
        body,
        transport=httpx.MockTransport(handler),
        base_url="http://fake.test/v1",
        **kw,
    )


# --------------------------------------------------------------------------- registry


@pytest.mark.parametrize(
    ("name", "cls", "env", "url"),
    [
        ("openai", OpenAIAdapter, "OPENAI_API_KEY", "https://api.openai.com/v1/chat/completions"),
        (
            "deepseek",
            DeepSeekAdapter,
            "DEEPSEEK_API_KEY",
            "https://api.deepseek.com/chat/completions",
        ),
        ("zai", ZaiAdapter, "ZAI_API_KEY", "https://api.z.ai/api/paas/v4/chat/completions"),
        (
            "nvidia",
            NvidiaAdapter,
            "NVIDIA_API_KEY",
            "https://integrate.api.nvidia.com/v1/chat/completions",
        ),
    ],
)
def test_registry_names_env_vars_and_endpoints(name, cls, env, url):
    assert get_adapter(name) is cls
    assert cls.provider == name
    assert cls.api_key_env == env
    assert cls().endpoint(None, "m") == url


def test_custom_adapter_requires_a_base_url():
    assert get_adapter("custom") is CustomAdapter
    assert CustomAdapter.api_key_env == "CUSTOM_API_KEY"
    with pytest.raises(ValueError, match="base URL"):
        CustomAdapter().endpoint(None, "m")
    assert CustomAdapter().endpoint("http://gpu:8000/v1/", "m") == (
        "http://gpu:8000/v1/chat/completions"
    )


def test_bearer_header_only_for_a_real_key():
    assert OpenAIAdapter().request_headers("sk-1")["authorization"] == "Bearer sk-1"
    assert "authorization" not in OpenAIAdapter().request_headers("  ")


def test_degradation_options_per_provider():
    body = {"model": "m", "messages": [], "stream": True, "thinking": {"type": "enabled"}}
    assert DeepSeekAdapter().mandatory_keys_for(body) == ("model", "messages", "stream", "thinking")
    assert OpenAIAdapter().mandatory_keys_for(body) == ("model", "messages", "stream")
    nv = NvidiaAdapter()
    assert nv.degrade_on_opaque_5xx is True
    assert nv.priority_keys == ("reasoning_budget",)
    assert "chat_template_kwargs" in nv.mandatory_keys_for(body)
    for cls in (OpenAIAdapter, DeepSeekAdapter, ZaiAdapter, NvidiaAdapter, CustomAdapter):
        assert cls.degrade_on_502 is False
    assert CustomAdapter.include_persona_speaker_stop is False
    assert OpenAIAdapter.include_persona_speaker_stop is True


def test_stop_rejection_classifier_only_for_custom_with_stop_in_body():
    with_stop = {"model": "m", "messages": [], "stream": True, "stop": ["x"]}
    assert len(CustomAdapter().extra_classifiers(with_stop)) == 2
    assert len(CustomAdapter().extra_classifiers({"model": "m"})) == 1
    assert len(OpenAIAdapter().extra_classifiers(with_stop)) == 1
    stop_clf = CustomAdapter().extra_classifiers(with_stop)[1]
    assert stop_clf(400, "Unsupported parameter: stop", with_stop) is True
    assert stop_clf(400, "bad temperature", with_stop) is False


# --------------------------------------------------------------------------- text, usage


def test_openai_stream_text_usage_and_finish():
    body = sse(
        chunk({"role": "assistant", "content": None}),
        chunk({"content": "Hello"}),
        chunk({"content": " world"}),
        chunk({}, "stop"),
        USAGE_CHUNK,
        DONE,
    )
    r = replay_sse("openai", body)
    assert r.error is None
    assert r.text == "Hello world"
    assert r.reasoning == ""
    assert r.finish_reason == "stop"
    assert r.usage.model_dump() == {
        "input_tokens": 172,
        "output_tokens": 57,
        "reasoning_tokens": 12,
        "cache_read_tokens": 64,
        "cache_write_tokens": 0,
        "total_tokens": 229,
        "cost": None,
    }
    assert [c.type for c in r.chunks] == ["text", "text", "text", "done", "text"]
    assert r.chunks[3].metadata == {"finish_reason": "stop"}
    assert r.facts["done_seen"] is True


def test_fake_clean_scenario_replays_to_the_answer():
    r = replay_sse("openai", render_body("openai", "fake/clean"))
    assert r.error is None
    assert r.text.startswith("Hello! The café on the corner opens at 8:00")
    assert r.finish_reason == "stop"
    assert r.usage is not None and r.usage.input_tokens > 0


def test_zai_chunks_without_object_field_and_keepalive_comments():
    body = sse(
        ": keep-alive\n\n",
        {"id": "1", "created": 1, "model": "glm-4.6",
         "choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": "\n"}}]},
        {"id": "1", "created": 1, "model": "glm-4.6",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]},
        {"id": "1", "created": 1, "model": "glm-4.6",
         "choices": [{"index": 0, "finish_reason": "stop",
                      "delta": {"role": "assistant", "content": ""}}],
         "usage": {"prompt_tokens": 8, "completion_tokens": 262, "total_tokens": 270,
                   "prompt_tokens_details": {"cached_tokens": 0}}},
        DONE,
    )  # fmt: skip
    r = replay_sse("zai", body)
    assert r.text == "Hi"
    assert r.reasoning == "\n"
    assert r.usage.output_tokens == 262
    assert r.finish_reason == "stop"
    assert r.facts["comments"] == 1


def test_deepseek_cache_hit_tokens_map_to_cache_read():
    usage = {"prompt_tokens": 491, "completion_tokens": 11, "total_tokens": 502,
             "prompt_cache_hit_tokens": 448, "prompt_cache_miss_tokens": 43}  # fmt: skip
    body = sse(chunk({"content": "ok"}), chunk({"content": ""}, "stop", usage), DONE)
    r = replay_sse("deepseek", body)
    assert r.usage.cache_read_tokens == 448
    assert r.usage.input_tokens == 491
    assert r.text == "ok"


# --------------------------------------------------------------------------- on-purpose deviations


def test_invalid_json_ends_the_stream_as_an_error_unlike_openrouter():
    body = sse(
        chunk({"content": "Hello"}),
        'data: {"id":"chatcmpl-1","choices":[{"delta":{"content":"wor\n\n',
        chunk({"content": " after"}),
        chunk({}, "stop"),
        DONE,
    )
    r = replay_sse("openai", body)
    assert r.text == "Hello"
    assert r.error is not None
    assert r.error.type == "unknown"
    assert r.error.retryable is False
    assert r.error.message.startswith("OpenAI: invalid JSON in data line")
    assert r.chunks[-1].type == "error"
    assert r.facts["invalid_json"] == 1
    assert r.finish_reason == "error"

    skipped = replay_sse("openrouter", body)
    assert skipped.error is None
    assert skipped.text == "Hello after"
    assert skipped.facts["invalid_json"] == 1


def test_empty_data_line_is_an_error():
    r = replay_sse("deepseek", sse(chunk({"content": "a"}), "data:\n\n", chunk({"content": "b"})))
    assert r.text == "a"
    assert r.error is not None and r.error.message == "DeepSeek: empty data line"


def test_fake_invalid_json_scenario_ends_as_error():
    r = replay_sse("openai", render_body("openai", "fake/invalid-json"))
    assert r.error is not None and r.error.type == "unknown"
    assert r.chunks[-1].type == "error"


def test_length_returns_done_and_does_not_emit_that_chunks_content():
    body = sse(
        chunk({"content": "The answer is"}),
        chunk({"content": " forty"}, "length"),
        USAGE_CHUNK,
        DONE,
    )
    r = replay_sse("openai", body)
    assert r.text == "The answer is"
    assert r.finish_reason == "length"
    done = [c for c in r.chunks if c.type == "done"]
    assert len(done) == 1
    assert done[0].content is None
    assert done[0].metadata == {"finish_reason": "length", "dropped_content": " forty"}

    # OpenRouter emits the same content as text
    assert replay_sse("openrouter", body).text == "The answer is forty"


def test_think_block_text_attaches_to_the_next_processed_chunk_as_one_raw_thought():
    body = sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "<thi"}),
        chunk({"content": "nk>plan the"}),
        chunk({"content": " answer</think>Hi"}),
        chunk({}, "stop"),
        DONE,
    )
    r = replay_sse("openai", body)
    assert r.text == "Hi"
    assert r.reasoning == "plan the answer"
    thoughts = [(i, [(t.kind, t.content) for t in c.thoughts]) for i, c in enumerate(r.chunks)]
    assert thoughts == [
        (0, []),
        (1, []),
        (2, [("raw", "plan the")]),
        (3, [("raw", " answer")]),
        (4, []),
    ]
    leaks = [e for e in r.guard_events if e.guard == "think_stripper"]
    assert "".join(e.moved for e in leaks) == "plan the answer"
    assert all(e.stream_id == "replay" and e.attempt == 0 for e in leaks)


def test_think_thought_comes_after_the_chunks_own_reasoning_content():
    body = sse(
        chunk({"reasoning_content": "R1", "content": "<think>T1</think>Hello"}),
        chunk({}, "stop"),
        DONE,
    )
    r = replay_sse("deepseek", body)
    first = r.chunks[0]
    assert [(t.kind, t.content) for t in first.thoughts] == [("raw", "R1"), ("raw", "T1")]
    assert first.content == "Hello"


def test_unclosed_think_block_flushes_into_a_final_thought():
    body = sse(chunk({"content": "Sure. <think>half a"}), chunk({"content": " thought"}), DONE)
    r = replay_sse("openai", body)
    assert r.text == "Sure. "
    assert r.reasoning == "half a thought"
    assert [[t.content for t in c.thoughts] for c in r.chunks] == [["half a"], [" thought"]]
    assert any(e.guard == "think_stripper" for e in r.guard_events)


def test_fake_think_leak_scenario_moves_reasoning_out_of_text():
    r = replay_sse("openai", render_body("openai", "fake/think-leak"))
    assert "<think>" not in r.text and "</think>" not in r.text
    assert r.reasoning.strip().startswith("The user is asking about the café")
    assert r.guard_events


def test_think_stripping_off_by_config_keeps_the_tags():
    body = sse(chunk({"content": "<think>x</think>y"}), chunk({}, "stop"))
    r = replay_sse("openai", body, config=LabConfig(strip_think_blocks=False))
    assert r.text == "<think>x</think>y"
    assert r.reasoning == ""


def test_spill_guard_moves_glued_reasoning_tail_into_reasoning():
    body = sse(
        chunk({"reasoning_content": "Let me think what I must do"}),
        chunk({"content": "must do.Hello!"}),
        chunk({}, "stop"),
        DONE,
    )
    r = replay_sse("deepseek", body)
    assert r.text == "Hello!"
    assert r.reasoning == "Let me think what I must domust do."
    spill = [e for e in r.guard_events if e.guard == "spill_guard"]
    assert len(spill) == 1 and spill[0].moved == "must do."


# --------------------------------------------------------------------------- tool calls


def tool_stream(fragments: list[str], *, reasoning: list[str] = (), finish_usage=None) -> bytes:
    items: list[Any] = [chunk({"role": "assistant", "content": None})]
    for r in reasoning:
        items.append(chunk({"content": None, "reasoning_content": r}))
    items.append(
        chunk({"tool_calls": [{"index": 0, "id": "call_00_abc", "type": "function",
                               "function": {"name": "get_weather", "arguments": ""}}]})
    )  # fmt: skip
    for f in fragments:
        items.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": f}}]}))
    items.append(chunk({"content": ""}, "tool_calls", finish_usage))
    items.append(DONE)
    return sse(*items)


def test_tool_call_fragments_are_assembled_by_index():
    r = replay_sse("openai", tool_stream(['{"ci', 'ty": "Zü', 'rich", "days": 3}']))
    assert r.error is None
    assert len(r.function_calls) == 1
    call = r.function_calls[0]
    assert call.name == "get_weather"
    assert call.id == "call_00_abc"
    assert call.args == {"city": "Zürich", "days": 3}
    assert call.arguments_truncated is False
    assert call.provider_fields == {}
    assert r.finish_reason == "tool_calls"
    assert r.chunks[-1].type == "function_call"


def test_cut_tool_arguments_are_repaired_and_marked_truncated():
    r = replay_sse("openai", tool_stream(['{"city": "Bern", "da', 'ys": 1']))
    call = r.function_calls[0]
    assert call.args == {"city": "Bern"}
    assert call.arguments_truncated is True
    repair = [e for e in r.guard_events if e.guard == "json_repair"]
    assert len(repair) == 1
    assert repair[0].detail["rule"] == "truncated_arguments"


def test_deepseek_reasoning_content_is_kept_on_the_function_call():
    body = tool_stream(['{"city": "Oslo"}'], reasoning=["I need ", "the weather."])
    r = replay_sse("deepseek", body)
    call = r.function_calls[0]
    assert call.provider_fields == {"reasoning_content": "I need the weather."}
    assert r.reasoning == "I need the weather."
    # the plain OpenAI adapter does not preserve it
    assert replay_sse("openai", body).function_calls[0].provider_fields == {}


def test_text_and_tool_signal_in_one_chunk_split_text_first():
    body = sse(
        chunk({"content": "Let me check.",
               "tool_calls": [{"index": 0, "id": "c1", "type": "function",
                               "function": {"name": "get_weather",
                                            "arguments": '{"city": "Rome"}'}}]},
              "tool_calls"),
        DONE,
    )  # fmt: skip
    r = replay_sse("openai", body)
    assert [c.type for c in r.chunks] == ["text", "function_call"]
    assert r.chunks[0].content == "Let me check."
    assert r.function_calls[0].args == {"city": "Rome"}


def test_parallel_calls_beyond_index_zero_are_reported_not_dropped_silently():
    r = replay_sse("openai", render_body("openai", "fake/tool-call"))
    assert len(r.function_calls) == 1
    ignored = r.chunks[-2].metadata.get("ignored_tool_calls") or r.chunks[-1].metadata.get(
        "ignored_tool_calls"
    )
    assert ignored and ignored[0]["index"] == 1


# --------------------------------------------------------------------------- errors


def test_mid_stream_server_error_without_code_is_unknown_and_final():
    body = sse(
        chunk({"content": "Partial"}),
        {"error": {"message": "The server had an error while processing your request. "
                   "Sorry about that!", "type": "server_error"}},
    )  # fmt: skip
    r = replay_sse("openai", body)
    assert r.text == "Partial"
    assert r.error.type == "unknown"
    assert r.error.retryable is False
    assert r.error.message.endswith("Sorry about that! (server_error)")
    assert r.finish_reason == "error"


def test_mid_stream_error_with_status_code_is_classified():
    body = sse({"error": {"message": "Rate limit reached", "code": 429}})
    r = replay_sse("nvidia", body)
    assert r.error.type == "rate_limit"
    assert r.error.retryable is True
    assert r.error.code == "429"


def test_zai_http_429_billing_code_is_a_rate_limit_unless_body_error_codes_is_on():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            429,
            json={"error": {"code": "1113", "message": "余额不足或无可用资源包,请充值。"}},
        )

    body = {"model": "glm-4.6", "messages": [], "stream": True}
    reference = run_http("zai", body, handler)
    assert (reference.error.type, reference.error.code) == ("rate_limit", "429")
    r = run_http("zai", body, handler, config=LabConfig(body_error_codes=True))
    assert r.error.type == "api_error"
    assert r.error.code == "429_balance"
    assert r.error.retryable is False
    assert r.error.message.startswith("Z.ai: HTTP 429: ")


def test_direct_provider_502_fails_fast_without_degrading():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(json.loads(request.content))
        return httpx.Response(502, text="Bad Gateway")

    body = {"model": "m", "messages": [], "stream": True, "top_p": 0.9, "temperature": 0.3}
    r = run_http("openai", body, handler)
    assert len(calls) == 1
    assert r.error.type == "provider_overloaded" and r.error.retryable is True


def test_nvidia_opaque_500_walks_the_ladder():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(json.loads(request.content))
        if len(calls) == 1:
            return httpx.Response(500, text="Internal Server Error")
        return streamed(sse(chunk({"content": "ok"}), chunk({}, "stop")))

    body = {"model": "m", "messages": [], "stream": True,
            "stream_options": {"include_usage": True}, "reasoning_budget": 128}  # fmt: skip
    r = run_http("nvidia", body, handler)
    assert r.text == "ok"
    assert len(calls) == 2
    assert "stream_options" not in calls[1]


def test_stream_options_rejection_is_degradable_on_the_raw_body_text():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(json.loads(request.content))
        if "stream_options" in calls[-1]:
            return httpx.Response(
                422, json={"detail": [{"msg": "Extra inputs are not permitted",
                                       "loc": ["body", "stream_options"]}]}
            )  # fmt: skip
        return streamed(sse(chunk({"content": "fine"}), chunk({}, "stop")))

    body = {"model": "m", "messages": [], "stream": True,
            "stream_options": {"include_usage": True}}  # fmt: skip
    r = run_http("custom", body, handler)
    assert r.text == "fine"
    assert len(calls) == 2 and "stream_options" not in calls[1]
    assert r.attempts[0].status == 422


def test_stream_options_classifier_reads_the_failing_body():
    (clf,) = OpenAIAdapter().extra_classifiers({"model": "m"})
    with_opts = {"model": "m", "stream_options": {"include_usage": True}}
    assert clf(400, "Unknown field stream_options.include_usage", with_opts) is True
    assert clf(422, "STREAM_OPTIONS not allowed", with_opts) is True
    assert clf(500, "stream_options", with_opts) is False
    assert clf(400, "stream_options", {"model": "m"}) is False


def test_precommit_sse_error_retries_with_the_named_param_dropped():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(json.loads(request.content))
        if "min_p" in calls[-1]:
            return streamed(
                sse(
                    ": keep-alive\n\n",
                    {"error": {"message": "min_p is not supported", "code": 400}},
                )
            )
        return streamed(sse(chunk({"content": "ok"}), chunk({}, "stop")))

    body = {"model": "m", "messages": [], "stream": True, "min_p": 0.1}
    r = run_http("deepseek", body, handler)
    assert r.error is None and r.text == "ok"
    assert [a.label for a in r.attempts] == ["default", "targeted_drop_min_p"]


# --------------------------------------------------------------------------- custom extras


def verbatim_body() -> bytes:
    return sse(
        chunk({"content": "Checking. get_weather("}),
        chunk({"content": '{"city": "Bern"})'}),
        chunk({}, "stop"),
        DONE,
    )


def test_custom_verbatim_parser_recovers_a_call_written_as_text():
    cfg = LabConfig(verbatim_tool_calls=True)
    r = replay_sse("custom", verbatim_body(), tools=[WEATHER_TOOL], config=cfg)
    assert r.text == "Checking. "
    assert len(r.function_calls) == 1
    assert r.function_calls[0].name == "get_weather"
    assert r.function_calls[0].args == {"city": "Bern"}


def test_custom_verbatim_parser_is_off_by_default_and_without_tools():
    on = LabConfig(verbatim_tool_calls=True)
    text = 'Checking. get_weather({"city": "Bern"})'
    assert replay_sse("custom", verbatim_body(), tools=[WEATHER_TOOL]).text == text
    assert replay_sse("custom", verbatim_body(), config=on).text == text
    # other OpenAI-compatible providers never run it
    assert replay_sse("openai", verbatim_body(), tools=[WEATHER_TOOL], config=on).text == text


def test_speaker_guard_cuts_at_a_generic_speaker_line():
    body = sse(
        chunk({"content": "Sure, here you go.\nUser: and then"}),
        chunk({"content": " more text that must not appear"}),
        chunk({}, "stop"),
    )
    r = replay_sse("openai", body, config=LabConfig(speaker_guard=True))
    assert r.text == "Sure, here you go."
    assert any(e.guard == "speaker_guard" for e in r.guard_events)
