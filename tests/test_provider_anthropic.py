"""Anthropic Messages adapter through the full stack."""

from __future__ import annotations

import json

import httpx

from lab.anomalies import detect
from lab.config import LabConfig
from lab.fakes import render_body
from lab.providers import get_adapter
from lab.providers.anthropic import AnthropicAdapter
from lab.replay import replay_sse
from lab.stream import run_stream

SIG = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"


def ev(name: str, payload: dict | str) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"event: {name}\ndata: {data}\n\n"


def body(*events: str) -> bytes:
    return "".join(events).encode()


MESSAGE_START = ev(
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 472,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 900,
                "output_tokens": 2,
                "service_tier": "standard",
            },
        },
    },
)
PING = ev("ping", '{"type": "ping"}')


def block_start(i: int, block: dict) -> str:
    return ev(
        "content_block_start", {"type": "content_block_start", "index": i, "content_block": block}
    )


def delta(i: int, d: dict) -> str:
    return ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})


def block_stop(i: int) -> str:
    return ev("content_block_stop", {"type": "content_block_stop", "index": i})


def message_delta(stop: str, output_tokens: int = 89) -> str:
    return ev(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
    )


MESSAGE_STOP = ev("message_stop", {"type": "message_stop"})


def text_block(i: int, *pieces: str) -> list[str]:
    return [
        block_start(i, {"type": "text", "text": ""}),
        *(delta(i, {"type": "text_delta", "text": p}) for p in pieces),
        block_stop(i),
    ]


def tool_block(i: int, *fragments: str, stop: bool = True) -> list[str]:
    out = [
        block_start(
            i,
            {
                "type": "tool_use",
                "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                "name": "read_file",
                "input": {},
            },
        ),
        *(delta(i, {"type": "input_json_delta", "partial_json": f}) for f in fragments),
    ]
    if stop:
        out.append(block_stop(i))
    return out


def full_sequence() -> bytes:
    return body(
        MESSAGE_START,
        PING,
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "Let me check the file first."}),
        delta(0, {"type": "signature_delta", "signature": SIG}),
        block_stop(0),
        *text_block(1, "Looking."),
        *tool_block(2, "", '{"path": "RE', 'ADME.md"}'),
        message_delta("tool_use"),
        MESSAGE_STOP,
    )


def test_registry_endpoint_and_headers():
    assert get_adapter("anthropic") is AnthropicAdapter
    a = AnthropicAdapter()
    assert a.api_key_env == "ANTHROPIC_API_KEY"
    assert a.endpoint(None, "claude") == "https://api.anthropic.com/v1/messages"
    h = a.request_headers("sk-ant-1")
    assert h["x-api-key"] == "sk-ant-1"
    assert h["anthropic-version"] == "2023-06-01"
    assert "authorization" not in h
    assert "max_tokens" in a.mandatory_keys_for({})


def test_thinking_text_and_tool_use_sequence():
    r = replay_sse("anthropic", full_sequence())
    assert r.error is None
    assert r.text == "Looking."
    assert r.reasoning == "Let me check the file first."
    assert [(t.kind, t.content) for t in r.thoughts] == [("raw", "Let me check the file first.")]
    assert len(r.function_calls) == 1
    call = r.function_calls[0]
    assert call.name == "read_file"
    assert call.id == "toolu_01T1x1fJ34qAmk2tNTrN7Up6"
    assert call.args == {"path": "README.md"}
    assert call.arguments_truncated is False
    assert call.thought_signature == SIG
    assert call.provider_fields["thinking_blocks"] == [
        {"type": "thinking", "thinking": "Let me check the file first.", "signature": SIG}
    ]
    assert r.finish_reason == "tool_calls"
    assert r.usage.model_dump() == {
        "input_tokens": 1372,
        "output_tokens": 89,
        "reasoning_tokens": 0,
        "cache_read_tokens": 900,
        "cache_write_tokens": 0,
        "total_tokens": None,
        "cost": None,
    }
    assert r.facts["pings"] == 1
    assert r.facts["message_stop"] is True
    assert [c.type for c in r.chunks][-2:] == ["function_call", "done"]


def test_stop_reasons_map_to_lab_finish_reasons():
    for native, expected in [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
    ]:
        r = replay_sse(
            "anthropic",
            body(MESSAGE_START, *text_block(0, "Hi"), message_delta(native), MESSAGE_STOP),
        )
        assert r.text == "Hi"
        assert r.finish_reason == expected
        assert r.chunks[-1].type == "done"
        assert r.chunks[-1].metadata["native_finish_reason"] == native


def test_redacted_thinking_is_kept_for_replay_not_logged_as_text():
    r = replay_sse(
        "anthropic",
        body(
            MESSAGE_START,
            block_start(0, {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}),
            block_stop(0),
            *tool_block(1, '{"path": "a"}'),
            message_delta("tool_use"),
        ),
    )
    assert r.reasoning == ""
    assert r.facts["redacted_thinking"] == 1
    assert r.function_calls[0].provider_fields["thinking_blocks"] == [
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}
    ]


def test_overloaded_error_event_is_retryable_provider_overloaded():
    r = replay_sse(
        "anthropic",
        body(
            MESSAGE_START,
            block_start(0, {"type": "text", "text": ""}),
            delta(0, {"type": "text_delta", "text": "Partial"}),
            ev(
                "error",
                '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
            ),
        ),
    )
    assert r.text == "Partial"
    assert r.error.type == "provider_overloaded"
    assert r.error.retryable is True
    assert r.finish_reason == "error"
    assert r.chunks[-1].type == "error"
    assert r.chunks[-1].metadata["usage"].input_tokens == 1372


def test_fake_overloaded_scenario():
    r = replay_sse("anthropic", render_body("anthropic", "fake/overloaded"))
    assert r.error.type == "provider_overloaded" and r.error.retryable is True


def test_stream_cut_inside_input_json_yields_truncated_repaired_call():
    r = replay_sse(
        "anthropic",
        body(
            MESSAGE_START, *tool_block(0, "", '{"path": "README.md", "limit": 10, "mo', stop=False)
        ),
    )
    assert len(r.function_calls) == 1
    call = r.function_calls[0]
    assert call.args == {"path": "README.md", "limit": 10}
    assert call.arguments_truncated is True
    repair = [e for e in r.guard_events if e.guard == "json_repair"]
    assert len(repair) == 1
    assert repair[0].detail["rule"] == "truncated_arguments"
    assert r.facts["cut_tool_use"] is True


def test_max_tokens_inside_tool_input_is_repaired_at_block_stop():
    r = replay_sse(
        "anthropic",
        body(
            MESSAGE_START,
            *tool_block(0, '{"path": "x", "content": "long te'),
            message_delta("max_tokens"),
        ),
    )
    call = r.function_calls[0]
    assert call.args == {"path": "x"}
    assert call.arguments_truncated is True
    assert r.finish_reason == "length"


def test_empty_input_json_means_no_arguments():
    r = replay_sse("anthropic", body(MESSAGE_START, *tool_block(0, ""), message_delta("tool_use")))
    call = r.function_calls[0]
    assert call.args == {}
    assert call.arguments_truncated is False


def test_think_tags_in_text_deltas_move_to_reasoning():
    r = replay_sse(
        "anthropic",
        body(
            MESSAGE_START,
            *text_block(0, "<think>secret pl", "an</think>Answer"),
            message_delta("end_turn"),
        ),
    )
    assert r.text == "Answer"
    assert r.reasoning == "secret plan"
    assert any(e.guard == "think_stripper" for e in r.guard_events)
    off = replay_sse(
        "anthropic",
        body(MESSAGE_START, *text_block(0, "<think>x</think>y"), message_delta("end_turn")),
        config=LabConfig(strip_think_blocks=False),
    )
    assert off.text == "<think>x</think>y"


def test_fake_thinking_and_tool_use_scenarios():
    r = replay_sse("anthropic", render_body("anthropic", "fake/thinking"))
    assert r.reasoning and r.text.startswith("Hello!")
    t = replay_sse("anthropic", render_body("anthropic", "fake/tool-use"))
    assert t.function_calls[0].args == {"city": "Zürich", "days": 3}
    assert t.text == "Let me check the weather in Zürich."


def test_unknown_events_are_ignored_and_counted():
    r = replay_sse(
        "anthropic",
        body(
            MESSAGE_START,
            ev("future_event", {"type": "future_event"}),
            *text_block(0, "ok"),
            message_delta("end_turn"),
        ),
    )
    assert r.text == "ok" and r.error is None
    assert r.facts["unknown_events"] == 1


def test_http_529_is_retryable_overloaded():
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["anthropic-version"] == "2023-06-01"
        return httpx.Response(
            529,
            json={
                "type": "error",
                "error": {"type": "overloaded_error", "message": "Overloaded"},
                "request_id": "req_1",
            },
        )

    r = run_stream(
        "anthropic",
        {"model": "claude-x", "messages": [], "stream": True, "max_tokens": 100},
        transport=httpx.MockTransport(handler),
        base_url="http://fake.test/v1",
        api_key="sk-ant-test",
    )
    assert r.error.type == "provider_overloaded"
    assert r.error.retryable is True
    assert r.error.status == 529
    assert len(r.attempts) == 1


# -- cuts, server tools, unknown shapes, usage (issue 18) --------------------------------------


def test_a_stream_cut_inside_an_event_is_a_truncation_not_invalid_json():
    whole = body(MESSAGE_START, *tool_block(0, "", stop=False))
    cut = whole + b'event: content_block_delta\ndata: {"type": "content_block_delta", "ind'
    r = replay_sse("anthropic", cut)
    assert r.error is None and r.facts["invalid_json"] == 0
    assert r.facts["cut_event_chars"] > 0
    (call,) = r.function_calls
    assert (call.name, call.args, call.arguments_truncated) == ("read_file", {}, True)
    assert detect(r) == ["eof_without_terminator", "truncated_tool_arguments", "usage_not_final"]


def test_invalid_json_in_a_whole_event_still_ends_the_stream_as_an_error():
    r = replay_sse("anthropic", body(MESSAGE_START, ev("content_block_delta", "{not json"), PING))
    assert r.error is not None and r.error.code == "invalid_json"


SERVER_TOOL_EVENTS = (
    block_start(
        0,
        {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {}},
    ),
    delta(0, {"type": "input_json_delta", "partial_json": '{"query": "ti'}),
    delta(0, {"type": "input_json_delta", "partial_json": 'des"}'}),
    block_stop(0),
    block_start(
        1,
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_01",
            "content": [
                {"type": "web_search_result", "title": "Tides", "url": "https://t.example"}
            ],
        },
    ),
    block_stop(1),
    block_start(2, {"type": "text", "text": "", "citations": []}),
    delta(
        2,
        {
            "type": "citations_delta",
            "citation": {"type": "web_search_result_location", "cited_text": "High at 6."},
        },
    ),
    delta(2, {"type": "text_delta", "text": "High tide is at 6."}),
    block_stop(2),
)


def test_server_tools_and_citations_go_to_metadata_never_client_calls():
    end = ev(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 40, "server_tool_use": {"web_search_requests": 1}},
        },
    )
    r = replay_sse("anthropic", body(MESSAGE_START, *SERVER_TOOL_EVENTS, end, MESSAGE_STOP))
    assert (r.text, r.finish_reason, r.error) == ("High tide is at 6.", "stop", None)
    assert r.function_calls == []
    server = [e for c in r.chunks for e in c.metadata.get("server_tools", [])]
    assert server == [
        {
            "type": "server_tool_use",
            "id": "srvtoolu_01",
            "name": "web_search",
            "input": {"query": "tides"},
        },
        {
            "type": "web_search_tool_result",
            "tool_use_id": "srvtoolu_01",
            "content": [
                {"type": "web_search_result", "title": "Tides", "url": "https://t.example"}
            ],
        },
    ]
    citations = [e for c in r.chunks for e in c.metadata.get("citations", [])]
    assert citations == [{"type": "web_search_result_location", "cited_text": "High at 6."}]
    assert r.chunks[-1].metadata["server_tool_use"] == {"web_search_requests": 1}
    assert "unknown_blocks" not in r.facts and "unknown_deltas" not in r.facts
    assert "unhandled_shapes" not in r.facts
    assert detect(r) == []


def test_unknown_events_blocks_and_deltas_are_counted_as_unhandled_shapes():
    r = replay_sse(
        "anthropic",
        body(
            MESSAGE_START,
            ev("future_event", {"type": "future_event"}),
            block_start(0, {"type": "hologram", "data": "x"}),
            delta(0, {"type": "hologram_delta", "x": 1}),
            block_stop(0),
            *text_block(1, "ok"),
            message_delta("end_turn"),
        ),
    )
    assert r.text == "ok" and r.error is None
    assert r.facts["unhandled_shapes"] == {
        "event:future_event": 1,
        "content_block:hologram": 1,
        "delta:hologram_delta": 1,
    }


def test_final_usage_only_reports_no_usage_for_a_stream_cut_before_message_delta():
    cut = body(MESSAGE_START, *text_block(0, "Looking"), *tool_block(1, '{"path": "a"}'))
    running = replay_sse("anthropic", cut).usage  # the call chunk carries the count so far
    assert (running.input_tokens, running.output_tokens) == (472 + 900, 2)
    r = replay_sse("anthropic", cut, config=LabConfig(final_usage_only=True))
    assert r.usage is None
    assert r.facts["provisional_usage"]["input_tokens"] == 472 + 900
    assert "usage_not_final" in detect(r)
    whole = replay_sse(
        "anthropic",
        body(MESSAGE_START, *text_block(0, "Looking"), message_delta("end_turn"), MESSAGE_STOP),
        config=LabConfig(final_usage_only=True),
    )
    assert (whole.usage.input_tokens, whole.usage.output_tokens) == (472 + 900, 89)
    assert "provisional_usage" not in whole.facts


def test_hostile_numbers_never_raise_and_are_counted():
    start = ev(
        "message_start",
        '{"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 1e999, '
        '"output_tokens": -3, "cache_read_input_tokens": NaN, "cache_creation_input_tokens": "7"}}}',
    )
    r = replay_sse(
        "anthropic",
        body(
            start,
            ev(
                "content_block_start",
                '{"type": "content_block_start", "index": 1e999, '
                '"content_block": {"type": "text", "text": ""}}',
            ),
            ev(
                "content_block_delta",
                '{"type": "content_block_delta", "index": -1, '
                '"delta": {"type": "text_delta", "text": "hi"}}',
            ),
            message_delta("end_turn", output_tokens=5),
        ),
    )
    assert (r.text, r.error) == ("hi", None)
    assert (r.usage.input_tokens, r.usage.output_tokens) == (0, 5)
    assert r.facts["hostile_values"] == [
        "usage.input_tokens",
        "usage.output_tokens",
        "usage.cache_read_input_tokens",
        "usage.cache_creation_input_tokens",
        "index",
        "index",
    ]
    assert "hostile_value" in detect(r)


def test_a_delta_sent_to_another_kind_of_block_is_counted_not_lost_silently():
    # openllmetry #4050 / sglang PR #25876: input_json_delta addressed to the text block
    # (index 0) while the tool_use block (index 1) is open; the arguments never reach it
    moved = body(
        MESSAGE_START,
        *text_block(0, "Let me check."),
        block_start(1, {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}),
        delta(0, {"type": "input_json_delta", "partial_json": '{"path": "a.md"}'}),
        delta(1, {"type": "text_delta", "text": "\n"}),  # sglang #24293: text on a tool block
        block_stop(1),
        message_delta("tool_use"),
        MESSAGE_STOP,
    )
    for config in (None, LabConfig.complete()):
        r = replay_sse("anthropic", moved, config=config)
        assert [(c.name, c.args) for c in r.function_calls] == [("read_file", {})]
        assert r.facts["unhandled_shapes"] == {
            "input_json_delta on a text block": 1,
            "text_delta on a tool_use block": 1,
        }
        assert detect(r) == ["unhandled_shape"]
    # the same deltas where they belong: nothing counted
    (call,) = replay_sse("anthropic", full_sequence()).function_calls
    assert call.args == {"path": "README.md"}
    assert "unhandled_shapes" not in replay_sse("anthropic", full_sequence()).facts


def test_a_message_start_that_holds_the_whole_message_is_counted_or_read_under_the_switch():
    # vercel/ai programmatic tool calling, message 2: the message_start already holds the
    # tool_use block and its stop_reason; no block events follow, only message_stop
    from pathlib import Path

    body = Path(__file__).parent / "realworld" / "anthropic-ptc-message-start-content.sse"
    sent = body.read_bytes()
    ref = replay_sse("anthropic", sent)
    assert ref.function_calls == []
    assert ref.facts["unhandled_shapes"] == {"message.content[]": 1, "message.stop_reason": 1}
    assert "unhandled_shape" in detect(ref)
    read = replay_sse("anthropic", sent, config=LabConfig(read_message_start_content=True))
    assert [(c.name, c.args) for c in read.function_calls] == [("rollDie", {"player": "player2"})]
    assert read.finish_reason == "tool_calls"
    assert "unhandled_shapes" not in read.facts


def test_the_spill_guard_strips_the_first_text_after_thinking_and_passes_the_rest():
    # the guard runs on the first text delta (a glued seam moves to reasoning); after the
    # answer started the adapter skips it (SpillGuard.inspecting), and later text is kept
    b = body(
        MESSAGE_START,
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "Let me think what I must do"}),
        block_stop(0),
        *text_block(1, "must do.Hello!", " We must go.Hey"),
        message_delta("end_turn"),
        MESSAGE_STOP,
    )
    r = replay_sse("anthropic", b)
    assert r.text == "Hello! We must go.Hey"
    assert r.reasoning == "Let me think what I must domust do."
    assert [(e.guard, e.moved) for e in r.guard_events] == [("spill_guard", "must do.")]
