"""OpenRouter adapter: realistic bodies through ``replay_sse`` with exact expected results."""

from __future__ import annotations

import json

from lab.model import FunctionCall, ThoughtLogEntry, Usage
from lab.replay import replay_sse

ENV = {
    "id": "gen-1759420128-LjBsuYJf6lKeyy66nQs9",
    "model": "z-ai/glm-4.5",
    "object": "chat.completion.chunk",
    "created": 1759420128,
}


def chunk(delta=None, finish=None, provider="DeepInfra", **extra) -> str:
    body = {**ENV, "provider": provider, **extra}
    if delta is not None or finish is not None:
        body["choices"] = [
            {
                "index": 0,
                "delta": {"role": "assistant", **(delta or {})},
                "finish_reason": finish,
                "native_finish_reason": finish,
                "logprobs": None,
            }
        ]
    return "data: " + json.dumps(body) + "\n\n"


def usage_chunk(**usage) -> str:
    return (
        "data: "
        + json.dumps({**ENV, "provider": "DeepInfra", "choices": [], "usage": usage})
        + "\n\n"
    )


def body(*parts: str, done: bool = True) -> bytes:
    text = ": OPENROUTER PROCESSING\n\n" + "".join(parts)
    return (text + ("data: [DONE]\n\n" if done else "")).encode()


def test_reasoning_then_answer_with_usage():
    r = replay_sse(
        "openrouter",
        body(
            chunk(
                {
                    "content": "",
                    "reasoning": "Okay",
                    "reasoning_details": [
                        {"type": "reasoning.text", "text": "Okay", "format": "unknown", "index": 0}
                    ],
                }
            ),
            chunk(
                {
                    "content": "",
                    "reasoning": ", the",
                    "reasoning_details": [
                        {"type": "reasoning.text", "text": ", the", "format": "unknown", "index": 0}
                    ],
                }
            ),
            chunk({"content": "Paris", "reasoning": None, "reasoning_details": []}),
            chunk({"content": "", "reasoning": None}, finish="stop"),
            usage_chunk(
                prompt_tokens=12,
                completion_tokens=30,
                total_tokens=42,
                cost=0.0011,
                prompt_tokens_details={"cached_tokens": 4},
                completion_tokens_details={"reasoning_tokens": 20},
            ),
        ),
    )
    assert r.text == "Paris"
    assert r.reasoning == "Okay, the"
    assert r.thoughts == [
        ThoughtLogEntry(kind="raw", content="Okay"),
        ThoughtLogEntry(kind="raw", content=", the"),
    ]
    assert r.serving_provider == "DeepInfra"
    assert r.finish_reason == "stop"
    assert r.error is None
    assert r.usage == Usage(
        input_tokens=12,
        output_tokens=30,
        reasoning_tokens=20,
        cache_read_tokens=4,
        total_tokens=42,
        cost=0.0011,
    )
    assert r.chunks[-2].type == "done"


def test_first_serving_provider_wins():
    r = replay_sse(
        "openrouter",
        body(
            chunk({"content": "a"}, provider="Chutes"),
            chunk({"content": "b"}, provider="Novita"),
            chunk({"content": ""}, finish="stop", provider="Novita"),
        ),
    )
    assert (r.text, r.serving_provider) == ("ab", "Chutes")


def test_tool_call_fragments_accumulate_per_index():
    r = replay_sse(
        "openrouter",
        body(
            chunk(
                {
                    "content": "",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": ""},
                        }
                    ],
                }
            ),
            chunk(
                {
                    "content": "",
                    "tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}],
                }
            ),
            chunk(
                {
                    "content": "",
                    "tool_calls": [{"index": 0, "function": {"arguments": '"Zürich"}'}}],
                }
            ),
            chunk({"content": ""}, finish="tool_calls"),
        ),
    )
    assert r.function_calls == [
        FunctionCall(name="get_weather", args={"city": "Zürich"}, id="call_1")
    ]
    assert r.finish_reason == "tool_calls"
    assert [c.type for c in r.chunks].count("function_call") == 1


def test_cut_tool_arguments_are_repaired_without_fabrication_and_flagged():
    r = replay_sse(
        "openrouter",
        body(
            chunk(
                {
                    "content": "",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c",
                            "function": {
                                "name": "plan",
                                "arguments": '{"city": "Paris", "days": 1',
                            },
                        }
                    ],
                }
            ),
            chunk({"content": ""}, finish="tool_calls"),
        ),
    )
    (call,) = r.function_calls
    assert call.args == {"city": "Paris"}
    assert call.arguments_truncated is True
    assert [e.guard for e in r.guard_events] == ["json_repair"]


def test_finish_length_with_content_is_text_marked_truncated():
    r = replay_sse(
        "openrouter",
        body(
            chunk({"content": "The answer is"}),
            chunk({"content": " cut"}, finish="length"),
        ),
    )
    assert r.text == "The answer is cut"
    assert r.finish_reason == "length"
    assert r.chunks[-1].metadata["outputTruncated"] is True


def test_mid_stream_error_after_content_is_yielded_with_the_reference_mapping():
    err = {
        **ENV,
        "provider": "Together",
        "error": {"code": 502, "message": "Provider returned error"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    r = replay_sse(
        "openrouter",
        body(
            chunk({"content": "Half an ans"}, provider="Together"),
            "data: " + json.dumps(err) + "\n\n",
        ),
    )
    assert r.text == "Half an ans"
    assert r.error.type == "provider_overloaded" and r.error.retryable is True
    assert r.error.code == "502"
    assert r.finish_reason == "error"


USAGE = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10, "cost": 0.001}
ERROR_502 = {
    "code": 502,
    "message": "Upstream down",
    "metadata": {"error_type": "provider_unavailable"},
}


def test_usage_on_the_error_chunk_is_settled_and_the_backend_it_names_kept():
    """Normalization keeps only the error of an error chunk; its envelope's usage and provider
    are evidence."""
    r = replay_sse(
        "openrouter",
        body(
            chunk({"content": "Hello"}, provider="Chutes"),
            chunk(finish="error", provider="Chutes", error=ERROR_502, usage=USAGE),
        ),
        model="fake/clean",
    )
    assert r.error.type == "provider_overloaded"
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.cost) == (7, 3, 0.001)
    assert r.cost == 0.001
    assert r.serving_provider == "Chutes"


def test_usage_after_the_error_chunks_is_settled_as_the_captured_502_sends_it():
    """error chunk with choices [], a finish_reason "error" chunk, then usage (luca test)."""
    r = replay_sse(
        "openrouter",
        body(
            chunk({"content": "Hello"}, provider="Chutes"),
            "data: "
            + json.dumps({**ENV, "provider": "Chutes", "choices": [], "error": ERROR_502})
            + "\n\n",
            chunk(finish="error", provider="Chutes"),
            usage_chunk(**USAGE),
        ),
        model="fake/clean",
    )
    assert r.error.type == "provider_overloaded"
    assert r.cost == 0.001 and r.usage.cost == 0.001


def test_a_precommit_error_chunk_names_the_backend_that_failed():
    err = {
        "id": "gen-1",
        "provider": "Targon",
        "choices": [],
        "error": {"code": 429, "message": "slow down"},
    }
    r = replay_sse("openrouter", body("data: " + json.dumps(err) + "\n\n"), model="fake/clean")
    assert r.error.type == "rate_limit"
    assert r.serving_provider == "Targon"


def test_http_500_code_maps_to_unknown_not_retryable_as_the_reference_does():
    err = {"error": {"code": 500, "message": "Internal Server Error"}}
    r = replay_sse("openrouter", body(chunk({"content": "x"}), "data: " + json.dumps(err) + "\n\n"))
    assert (r.error.type, r.error.retryable) == ("unknown", False)


def test_invalid_json_data_lines_are_skipped_and_counted():
    r = replay_sse(
        "openrouter",
        body(
            chunk({"content": "a"}), "data: {not json\n\n", chunk({"content": "b"}, finish="stop")
        ),
    )
    assert r.text == "ab" and r.error is None
    assert r.facts["invalid_json"] == 1


def test_think_leak_split_across_deltas_moves_to_reasoning_with_events():
    r = replay_sse(
        "openrouter",
        body(
            chunk({"content": "<thi"}),
            chunk({"content": "nk>plan it"}),
            chunk({"content": "</th"}),
            chunk({"content": "ink>Hello!"}),
            chunk({"content": ""}, finish="stop"),
        ),
    )
    assert r.text == "Hello!"
    assert r.reasoning == "plan it"
    assert {e.guard for e in r.guard_events} == {"think_stripper"}
    assert "".join(e.moved for e in r.guard_events) == "plan it"


def test_spill_seam_after_reasoning_is_stripped():
    r = replay_sse(
        "openrouter",
        body(
            chunk({"content": "", "reasoning": "A warm greeting is what I"}),
            chunk({"content": "must do.Hello!"}),
            chunk({"content": " How can I help?"}, finish="stop"),
        ),
    )
    assert r.text == "Hello! How can I help?"
    assert r.reasoning == "A warm greeting is what Imust do."
    (event,) = r.guard_events
    assert (event.guard, event.moved, event.detail["rule"]) == (
        "spill_guard",
        "must do.",
        "answer_start",
    )


def test_speaker_guard_cuts_before_a_generic_label_and_ends_the_stream():
    r = replay_sse(
        "openrouter",
        body(
            chunk({"content": "Sure, here is the plan for today.\nUser: and then"}),
            chunk({"content": " more text that must never appear"}),
            chunk({"content": ""}, finish="stop"),
        ),
        config={"speaker_guard": True},
    )
    assert r.text == "Sure, here is the plan for today."
    assert r.attempts[0].end_reason == "stopped_by_guard"


def test_speaker_tail_is_released_before_the_finish_chunk():
    r = replay_sse(
        "openrouter",
        body(chunk({"content": "A short reply."}), chunk({"content": ""}, finish="stop")),
        config={"speaker_guard": True},
    )
    assert r.text == "A short reply."
    assert [c.type for c in r.chunks[-2:]] == ["text", "done"]


def test_eof_without_done_keeps_the_unterminated_last_event():
    raw = (
        body(chunk({"content": "Hello"}), done=False)
        + b'data: {"choices":[{"index":0,"delta":{"content":" world"}}]}'
    )
    r = replay_sse("openrouter", raw)
    assert r.text == "Hello world"
    assert r.facts["unterminated_tail"] is True and r.facts["done_seen"] is False


def test_text_reasoning_and_tool_call_in_one_chunk_split_text_first_reasoning_once():
    r = replay_sse(
        "openrouter",
        body(
            chunk(
                {
                    "content": "Let me check.",
                    "reasoning": "Weather needs a tool.",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
                        }
                    ],
                },
                finish="tool_calls",
            )
        ),
    )
    assert [c.type for c in r.chunks] == ["text", "function_call"]
    assert r.chunks[0].content == "Let me check."
    assert r.function_calls[0].args == {"city": "Rome"}
    assert r.reasoning == "Weather needs a tool."  # on both pieces, counted once


def test_a_repaired_tool_call_reports_the_same_event_as_every_adapter():
    """The json_repair note of parse_tool_arguments: the dropped tail, its offset and the
    parse step's record fields (tool_name, recovered_keys count, argument_chars)."""
    args = '{"a": 1, "b": "hel'
    call = {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": "gen", "arguments": args},
    }
    routed = replay_sse(
        "openrouter", body(chunk({"tool_calls": [call]}), chunk(finish="tool_calls"))
    )
    openai_chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    direct_body = "".join(
        "data: " + json.dumps({**openai_chunk, "choices": [c]}) + "\n\n"
        for c in (
            {"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": "tool_calls"},
        )
    )
    direct = replay_sse("openai", direct_body + "data: [DONE]\n\n")
    [event] = [e for e in routed.guard_events if e.guard == "json_repair"]
    [same] = [e for e in direct.guard_events if e.guard == "json_repair"]
    assert (event.offset, event.moved) == (7, ', "b": "hel')
    assert event.detail == {
        "rule": "truncated_arguments",
        "tool_name": "gen",
        "recovered_keys": 1,
        "argument_chars": 18,
    }
    assert (event.offset, event.moved, event.detail) == (same.offset, same.moved, same.detail)
    assert (
        routed.function_calls[0].args == {"a": 1} and routed.function_calls[0].arguments_truncated
    )


def test_think_text_is_discarded_on_the_error_path_too_when_thoughts_are_not_captured():
    """With thought capture off, think text is discarded (finish and fail alike)."""
    from lab.config import LabConfig

    err = {**ENV, "provider": "DeepInfra", "choices": [], "error": {"code": 502, "message": "down"}}
    stream = body(chunk({"content": "Hi <think>secret</thi"}), "data: " + json.dumps(err) + "\n\n")
    kept = replay_sse("openrouter", stream)
    dropped = replay_sse(
        "openrouter", stream, config=LabConfig(capture_think_blocks_as_thoughts=False)
    )
    assert (kept.text, kept.reasoning) == ("Hi ", "secret</thi")
    assert (dropped.text, dropped.reasoning) == ("Hi ", "")
    assert dropped.error.type == kept.error.type == "provider_overloaded"


def test_an_openai_model_s_refusal_through_openrouter_is_read_not_an_unhandled_shape():
    from lab import anomalies
    from lab.config import LabConfig
    from lab.replay import replay_sse

    body = (
        b'data: {"id":"g","provider":"OpenAI","model":"openai/gpt-4o","choices":[{"index":0,'
        b'"delta":{"role":"assistant","content":null,"refusal":"I cannot "},'
        b'"finish_reason":null}]}\n\n'
        b'data: {"id":"g","choices":[{"index":0,"delta":{"refusal":"help"},'
        b'"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    r = replay_sse("openrouter", body)
    assert (r.text, r.refusal, r.finish_reason) == ("", "I cannot help", "stop")
    assert r.facts.get("unhandled_shapes") is None
    assert anomalies.detect(r) == ["refusal"]
    complete = replay_sse("openrouter", body, config=LabConfig.complete())
    assert complete.finish_reason == "content_filter"
