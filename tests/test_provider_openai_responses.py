"""OpenAI Responses API streams (openai, openrouter, deepseek) through the full stack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

import lab.capture
from lab.anomalies import detect
from lab.cli import main
from lab.config import LabConfig
from lab.model import ThoughtLogEntry, Usage
from lab.providers import adapter_for, get_adapter
from lab.providers.openai_compat import DeepSeekAdapter, OpenAIAdapter
from lab.providers.openai_responses import (
    DeepSeekResponsesAdapter,
    OpenAIResponsesAdapter,
    OpenRouterResponsesAdapter,
    responses_body,
    responses_usage,
)
from lab.providers.openrouter import OpenRouterAdapter
from lab.replay import replay, replay_sse
from lab.stream import run_stream

USAGE = {
    "input_tokens": 30,
    "input_tokens_details": {"cached_tokens": 12},
    "output_tokens": 20,
    "output_tokens_details": {"reasoning_tokens": 8},
    "total_tokens": 50,
}


def sse(*events: dict | str, named: bool = True) -> bytes:
    """A Responses body: each dict one event (``event: <type>`` line when ``named``)."""
    out = []
    for e in events:
        if isinstance(e, str):
            out.append(e)
        elif named:
            out.append(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n")
        else:
            out.append(f"data: {json.dumps(e)}\n\n")
    return "".join(out).encode()


def created() -> dict:
    return {"type": "response.created", "response": {"id": "resp_1", "model": "m"}}


def message(index: int, *deltas: str) -> list[dict]:
    where = {"item_id": f"msg_{index}", "output_index": index, "content_index": 0}
    return [
        {"type": "response.output_item.added", "output_index": index, "item": {"type": "message"}},
        *({"type": "response.output_text.delta", **where, "delta": d} for d in deltas),
        {"type": "response.output_text.done", **where, "text": "".join(deltas)},
    ]


def call(index: int, name: str, *pieces: str, done: bool = True) -> list[dict]:
    item = {"type": "function_call", "id": f"fc_{index}", "call_id": f"call_{index}", "name": name}
    events = [
        {"type": "response.output_item.added", "output_index": index, "item": {**item}},
        *(
            {
                "type": "response.function_call_arguments.delta",
                "item_id": f"fc_{index}",
                "output_index": index,
                "delta": p,
            }
            for p in pieces
        ),
    ]
    if done:
        whole = "".join(pieces)
        events.append(
            {
                "type": "response.output_item.done",
                "output_index": index,
                "item": {**item, "arguments": whole},
            }
        )
    return events


def completed(usage: Any = USAGE) -> dict:
    return {"type": "response.completed", "response": {"id": "resp_1", "usage": usage}}


def play(body: bytes, provider: str = "openai", config: Any = None):
    return replay_sse(provider, body, path="/responses", config=config)


# --------------------------------------------------------------------------- choosing it


def test_a_responses_path_picks_the_providers_responses_adapter():
    assert adapter_for("openai", "/v1/responses") is OpenAIResponsesAdapter
    assert adapter_for("openrouter", "https://openrouter.ai/api/v1/responses") is (
        OpenRouterResponsesAdapter
    )
    assert adapter_for("deepseek", "/responses?x=1") is DeepSeekResponsesAdapter
    assert adapter_for("openai", "/v1/chat/completions") is OpenAIAdapter
    assert adapter_for("openai") is get_adapter("openai")


def test_a_responses_path_of_a_provider_without_that_api_is_a_clear_error():
    with pytest.raises(ValueError, match="provider 'google' has no Responses API adapter"):
        adapter_for("google", "/v1beta/responses")
    with pytest.raises(ValueError, match="unknown provider 'nope'"):
        adapter_for("nope", "/responses")


@pytest.mark.parametrize(
    ("responses", "chat"),
    [
        (OpenAIResponsesAdapter, OpenAIAdapter),
        (OpenRouterResponsesAdapter, OpenRouterAdapter),
        (DeepSeekResponsesAdapter, DeepSeekAdapter),
    ],
)
def test_the_responses_adapters_take_their_request_defaults_from_the_chat_adapter(responses, chat):
    for name in ("provider", "family", "default_base_url", "api_key_env", "degrade_on_502"):
        assert getattr(responses, name) == getattr(chat, name)
    adapter = responses()
    assert adapter.endpoint(None, "m") == chat.default_base_url + "/responses"
    assert adapter.request_headers("k") == chat().request_headers("k")
    assert "input" in adapter.mandatory_keys_for({})
    assert "messages" not in adapter.mandatory_keys_for({})


# --------------------------------------------------------------------------- normalization


def test_text_deltas_become_text_chunks_with_usage_and_finish_stop():
    r = play(sse(created(), *message(0, "Hel", "lo ", "world"), completed()))
    assert r.text == "Hello world"
    assert [c.content for c in r.chunks if c.type == "text" and c.content] == [
        "Hel",
        "lo ",
        "world",
    ]
    assert r.finish_reason == "stop"
    assert r.usage == Usage(
        input_tokens=30,
        output_tokens=20,
        reasoning_tokens=8,
        cache_read_tokens=12,
        total_tokens=50,
    )
    assert r.error is None and detect(r) == []
    assert r.chunks[-1].type == "done"
    assert r.chunks[-1].metadata["response_id"] == "resp_1"


def test_every_parallel_function_call_is_kept_even_with_interleaved_argument_deltas():
    a = call(0, "get_weather", '{"city": ', '"Bern"}')
    b = call(1, "get_time", '{"tz": ', '"UTC"}')
    # the argument deltas of the two calls interleave: added, added, a1, b1, a2, b2, done, done
    events = [a[0], b[0], a[1], b[1], a[2], b[2], a[3], b[3]]
    r = play(sse(created(), *events, completed()))
    assert [(c.name, c.args, c.id) for c in r.function_calls] == [
        ("get_weather", {"city": "Bern"}, "call_0"),
        ("get_time", {"tz": "UTC"}, "call_1"),
    ]
    assert not any(c.arguments_truncated for c in r.function_calls)
    assert r.finish_reason == "tool_calls"


def test_reasoning_summary_parts_are_summary_thoughts_kept_apart():
    rs = {"item_id": "rs_0", "output_index": 0}
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning"}},
        {"type": "response.reasoning_summary_part.added", **rs, "summary_index": 0,
         "part": {"type": "summary_text", "text": ""}},
        {"type": "response.reasoning_summary_text.delta", **rs, "summary_index": 0,
         "delta": "**Plan**"},
        {"type": "response.reasoning_summary_text.done", **rs, "summary_index": 0,
         "text": "**Plan**"},
        {"type": "response.reasoning_summary_part.added", **rs, "summary_index": 1,
         "part": {"type": "summary_text", "text": ""}},
        {"type": "response.reasoning_summary_text.delta", **rs, "summary_index": 1,
         "delta": "**Check**"},
    ]  # fmt: skip
    r = play(sse(created(), *events, *message(1, "Hi"), completed()))
    assert r.thoughts == [
        ThoughtLogEntry(kind="summary", content="**Plan**"),
        ThoughtLogEntry(kind="summary", content="\n\n**Check**"),
    ]
    assert r.reasoning == "**Plan**\n\n**Check**"
    assert "glued_reasoning_summaries" not in detect(r)
    assert r.text == "Hi"


def test_reasoning_text_deltas_are_raw_thoughts():
    where = {"item_id": "rs_0", "output_index": 0, "content_index": 0}
    events = [
        {"type": "response.reasoning_text.delta", **where, "delta": "The user"},
        {"type": "response.reasoning_text.delta", **where, "delta": " asks."},
        {"type": "response.reasoning_text.done", **where, "text": "The user asks."},
    ]
    r = play(sse(created(), *events, *message(1, "4"), completed()), provider="deepseek")
    assert [t.kind for t in r.thoughts] == ["raw", "raw"]
    assert r.reasoning == "The user asks."
    assert r.facts.get("done_text_mismatch") is None


def test_a_done_text_is_used_only_for_a_part_that_streamed_no_delta():
    done_only = {
        "type": "response.output_text.done",
        "item_id": "m",
        "output_index": 0,
        "content_index": 0,
        "text": "whole answer",
    }
    r = play(sse(created(), done_only, completed()))
    assert r.text == "whole answer"
    # a delta arrived for the part: its (different) done text is counted, not emitted
    r = play(
        sse(created(), *message(0, "Hello,")[:2], {**done_only, "text": "Hello,!"}, completed())
    )
    assert r.text == "Hello,"
    assert r.facts["done_text_mismatch"] == {"text": 1}


@pytest.mark.parametrize(
    ("reason", "finish"),
    [("max_output_tokens", "length"), ("content_filter", "content_filter")],
)
def test_an_incomplete_response_maps_its_reason_to_the_finish_reason(reason, finish):
    incomplete = {
        "type": "response.incomplete",
        "response": {"incomplete_details": {"reason": reason}, "usage": USAGE},
    }
    r = play(sse(created(), *message(0, "Hello,"), incomplete))
    assert r.finish_reason == finish
    assert r.text == "Hello,"
    assert r.usage.output_tokens == 20
    assert r.facts.get("unhandled_shapes") is None


def test_an_incomplete_reason_the_adapter_does_not_know_is_kept_and_counted():
    incomplete = {
        "type": "response.incomplete",
        "response": {"incomplete_details": {"reason": "x"}},
    }
    r = play(sse(created(), *message(0, "a"), incomplete))
    assert r.finish_reason == "x"
    assert r.facts["unhandled_shapes"] == {"response.incomplete.incomplete_details.reason:x": 1}


def test_an_error_event_then_response_failed_is_one_error_chunk_and_the_usage_is_kept():
    error = {"type": "error", "code": "server_error", "message": "boom", "param": None}
    failed = {
        "type": "response.failed",
        "response": {"error": {"code": "server_error", "message": "boom"}, "usage": USAGE},
    }
    r = play(sse(created(), *message(0, "par", "tial"), error, failed))
    assert [c.type for c in r.chunks].count("error") == 1
    assert r.error.message.startswith("boom")
    assert r.finish_reason == "error"
    assert r.text == "partial"
    assert r.usage.input_tokens == 30  # billed before the failure: never dropped


def test_response_failed_alone_is_the_error_of_the_openrouter_family():
    failed = {
        "type": "response.failed",
        "response": {"error": {"code": 429, "message": "Rate limit exceeded"}},
    }
    r = play(sse(created(), failed, named=False), provider="openrouter")
    assert r.error is not None
    assert (r.error.type, r.error.code, r.error.retryable) == ("rate_limit", "429", True)
    assert r.finish_reason == "error"


def test_a_stream_cut_inside_a_call_keeps_it_truncated_and_claims_no_finish():
    body = sse(
        created(), *message(0, "Let me check."), *call(1, "get_weather", '{"city": "Be', done=False)
    )
    r = play(body)
    assert r.text == "Let me check."
    assert [(c.name, c.arguments_truncated) for c in r.function_calls] == [("get_weather", True)]
    assert r.function_calls[0].provider_fields["raw_arguments"] == '{"city": "Be'
    assert r.finish_reason is None
    assert {"eof_without_terminator", "truncated_tool_arguments"} <= set(detect(r))
    assert r.facts["cut_tool_calls"] == ["get_weather"]


def test_event_types_item_types_and_fields_the_adapter_does_not_read_are_counted():
    events = [
        {"type": "response.output_item.added", "output_index": 0,
         "item": {"type": "web_search_call", "id": "ws_1"}},
        {"type": "response.web_search_call.searching", "output_index": 0, "item_id": "ws_1"},
        {"type": "response.web_search_call.searching", "output_index": 0, "item_id": "ws_1"},
        {"type": "response.output_text.delta", "output_index": 1, "content_index": 0,
         "delta": "hi", "brand_new": 1},
    ]  # fmt: skip
    r = play(sse(created(), *events, completed()))
    assert r.text == "hi"
    assert r.facts["unhandled_shapes"] == {
        "response.output_item.added.item.type:web_search_call": 1,
        "response.web_search_call.searching": 2,
        "response.output_text.delta.brand_new": 1,
    }
    assert "unhandled_shape" in detect(r)


def test_hostile_usage_numbers_are_left_out_and_counted_never_raised():
    usage = {"input_tokens": 1e999, "output_tokens": -3, "total_tokens": "7"}
    r = play(sse(created(), *message(0, "a"), completed(usage)))
    assert r.error is None
    assert r.usage is None
    assert r.facts["hostile_values"] == [
        "response.usage.input_tokens",
        "response.usage.output_tokens",
        "response.usage.total_tokens",
    ]
    assert "hostile_value" in detect(r)
    assert r.facts.get("unhandled_shapes") is None


def test_an_item_part_or_reason_that_is_a_list_is_counted_by_its_kind_never_raised():
    # found by the hostile-value fuzz (tests/test_hostile_values.py): a list or an object
    # as item.type / part.type raised TypeError (unhashable) out of replay_sse
    body = sse(
        created(),
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": []}},
        {"type": "response.content_part.added", "output_index": 0, "content_index": 0,
         "part": {"type": {"a": 1}}},
        {"type": "response.reasoning_summary_part.added", "output_index": 0,
         "summary_index": 0, "part": {"type": [1, 2]}},
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
         "delta": "hi"},
        {"type": "response.output_item.done", "output_index": 0, "item": {"type": [[]]}},
        {"type": "response.incomplete", "response": {"incomplete_details": {"reason": ["x"]}}},
    )  # fmt: skip
    r = play(body)
    assert (r.text, r.finish_reason, r.error) == ("hi", "length", None)
    assert r.facts["unhandled_shapes"] == {
        "response.output_item.added.item.type:<list>": 1,
        "response.content_part.added.part.type:<dict>": 1,
        "response.reasoning_summary_part.added.part.type:<list>": 1,
        "response.output_item.done.item.type:<list>": 1,
        "response.incomplete.incomplete_details.reason:<list>": 1,
    }


def test_a_hostile_index_is_named_and_the_item_id_still_finds_the_call():
    body = sse(
        created(),
        *call(0, "get_weather")[:1],
        'data: {"type": "response.function_call_arguments.delta", "item_id": "fc_0", '
        '"output_index": 1e999, "delta": "{\\"city\\": \\"Bern\\"}"}\n\n',
        'data: {"type": "response.output_text.delta", "output_index": 1, "content_index": NaN, '
        '"delta": "hi"}\n\n',
        'data: {"type": "response.reasoning_summary_text.delta", "output_index": 2, '
        '"summary_index": -1, "delta": "why"}\n\n',
        {"type": "response.output_item.done", "output_index": "0", "item_id": "fc_0",
         "item": {"type": "function_call", "id": "fc_0", "call_id": "call_0",
                  "name": "get_weather"}},
        completed(),
    )  # fmt: skip
    r = play(body)
    assert (r.text, r.reasoning, r.finish_reason, r.error) == ("hi", "why", "tool_calls", None)
    (fc,) = r.function_calls
    assert (fc.name, fc.args, fc.id) == ("get_weather", {"city": "Bern"}, "call_0")
    assert r.facts["hostile_values"] == [
        "output_index",
        "content_index",
        "summary_index",
        "output_index",
    ]
    assert detect(r) == ["hostile_value"]


def test_responses_usage_counts_cached_input_and_reasoning_output_inside_the_totals():
    assert responses_usage({**USAGE, "cost": 0.0012}) == Usage(
        input_tokens=30,
        output_tokens=20,
        reasoning_tokens=8,
        cache_read_tokens=12,
        total_tokens=50,
        cost=0.0012,
    )
    assert responses_usage({}) is None
    assert responses_usage(None) is None


def test_a_terminal_event_carrying_the_whole_output_is_read_when_nothing_streamed():
    output = [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Plan**"}]},
        {"type": "message", "content": [{"type": "output_text", "text": "Answer."}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'},
    ]
    done = {"type": "response.completed", "response": {"output": output, "usage": USAGE}}
    r = play(sse(created(), done))
    assert (r.text, r.reasoning) == ("Answer.", "**Plan**")
    assert [(c.name, c.args) for c in r.function_calls] == [("f", {"a": 1})]
    assert r.finish_reason == "tool_calls"
    assert r.facts["output_from_terminal"] == 3


def test_the_think_guard_runs_on_output_text_as_in_the_chat_adapters():
    r = play(sse(created(), *message(0, "<think>plan</think>", "Answer"), completed()))
    assert r.text == "Answer"
    assert r.reasoning == "plan"
    assert [e.guard for e in r.guard_events] == ["think_stripper"]


def test_the_speaker_guard_cuts_output_text_at_a_speaker_line_and_ends_the_stream():
    # the per-piece guards of the chat adapters (dedup, then the speaker guard): text after
    # a generic speaker label never reaches the answer, and the stream ends there
    body = sse(
        created(),
        *message(0, "Sure, here is the plan for today.\nUser: and then", " more text"),
        completed(),
    )
    r = play(body, config=LabConfig(speaker_guard=True))
    assert r.text == "Sure, here is the plan for today."
    assert r.attempts[0].end_reason == "stopped_by_guard"
    assert [e.guard for e in r.guard_events] == ["speaker_guard"]


def test_invalid_json_lines_are_skipped_and_counted():
    r = play(sse(created(), "data: {not json\n\n", *message(0, "ok"), completed()))
    assert r.text == "ok"
    assert r.facts["invalid_json"] == 1
    assert r.finish_reason == "stop"


# --------------------------------------------------------------------------- request body


def test_a_chat_body_becomes_a_responses_body():
    chat = {
        "model": "gpt-5",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "w", "arguments": '{"c": 1}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_completion_tokens": 64,
        "tools": [{"type": "function", "function": {"name": "w", "parameters": {}}}],
        "reasoning_effort": "low",
        "temperature": 0.2,
    }  # fmt: skip
    assert responses_body(chat) == {
        "model": "gpt-5",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": "Weather?"},
            {"type": "function_call", "call_id": "c1", "name": "w", "arguments": '{"c": 1}'},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ],
        "stream": True,
        "max_output_tokens": 64,
        "tools": [{"type": "function", "name": "w", "parameters": {}}],
        "reasoning": {"effort": "low"},
        "temperature": 0.2,
    }


# --------------------------------------------------------------------------- end to end


@pytest.mark.parametrize(
    ("provider", "base", "text"),
    [
        ("openai", "/v1", "Hello! The café on the corner opens at 8:00"),
        ("openrouter", "/api/v1", "Hello! The café on the corner opens at 8:00"),
        ("deepseek", "/v1", "Hello! The café on the corner opens at 8:00"),
    ],
)
def test_lab_record_api_responses_records_and_replays_the_stream(
    fake_server, tmp_path, capsys, provider, base, text
):
    code = main(
        [
            "record",
            "--provider",
            provider,
            "--api",
            "responses",
            "--model",
            "fake/reasoning-summary",
            "--prompt",
            "hi",
            "--base-url",
            fake_server.base_url + base,
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    assert text in capsys.readouterr().out
    sent = [r for r in fake_server.requests if r.path == base + "/responses"][-1]
    assert sent.body["input"] == [{"role": "user", "content": "hi"}]
    assert "messages" not in sent.body and "stream_options" not in sent.body
    cap = lab.capture.open(tmp_path)
    (request,) = cap.requests()
    assert request.exchanges[0].url.endswith("/responses")
    (result,) = replay(tmp_path)  # the recorded URL picks the Responses adapter alone
    assert result.text.startswith(text)
    assert [t.kind for t in result.thoughts] == ["summary"] * len(result.thoughts)
    assert result.reasoning.startswith("**Answering the café question**")
    assert "\n\n**Checking**" in result.reasoning
    assert result.finish_reason == "stop"
    assert result.usage is not None and result.usage.reasoning_tokens > 0
    assert result.divergence == []


@pytest.mark.parametrize(
    ("model", "finish", "calls", "error"),
    [
        ("fake/clean", "stop", [], None),
        ("fake/reasoning-text", "stop", [], None),
        ("fake/tool-call", "tool_calls", ["get_weather", "get_time"], None),
        ("fake/length", "length", [], None),
        ("fake/mid-stream-error", "error", [], "server_error"),
        ("fake/cut", None, ["get_weather"], None),
    ],
)
@pytest.mark.parametrize("base", ["/v1", "/api/v1"])
def test_the_fake_responses_scenarios_normalize_over_a_loopback_socket(
    fake_server, model, finish, calls, error, base
):
    provider = "openrouter" if base == "/api/v1" else "openai"
    body = responses_body({"model": model, "messages": [{"role": "user", "content": "hi"}]})
    r = run_stream(
        provider,
        body,
        base_url=fake_server.base_url + base,
        path="/responses",
        config=LabConfig(),
    )
    assert r.finish_reason == finish
    assert [c.name for c in r.function_calls] == calls
    assert (r.error.code if r.error else None) == error
    assert r.facts.get("unhandled_shapes") is None
    if model == "fake/tool-call":
        assert [c.args for c in r.function_calls] == [
            {"city": "Zürich", "days": 3},
            {"tz": "Europe/Zurich"},
        ]
    if model == "fake/cut":
        assert r.function_calls[0].arguments_truncated
    if provider == "openrouter" and finish == "stop":
        assert r.usage.cost is not None and r.facts["done_line"] is True


def test_an_unknown_model_on_the_fake_responses_endpoint_is_openais_404(fake_server):
    r = run_stream(
        "openai",
        {"model": "nope", "input": [], "stream": True},
        base_url=fake_server.base_url + "/v1",
        path="/responses",
    )
    assert r.error is not None and r.error.status == 404
    assert r.attempts[0].status == 404


def test_the_recorder_sends_a_responses_body_to_responses_without_being_told(fake_server, tmp_path):
    from lab.recorder import Recorder

    with Recorder(tmp_path) as rec:
        r = rec.record(
            "openai",
            {"model": "fake/clean", "input": "hi"},
            base_url=fake_server.base_url + "/v1",
        )
    assert r.text.startswith("Hello!")
    assert r.finish_reason == "stop"


def test_lab_record_api_responses_for_a_provider_without_it_is_a_usage_error(capsys):
    code = main(
        ["record", "--provider", "google", "--api", "responses", "--model", "m", "--prompt", "x"]
    )
    assert code == 2
    assert "--api responses: provider 'google' has no Responses API adapter" in (
        capsys.readouterr().err
    )


def test_an_http_error_on_responses_uses_the_families_error_mapping():
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/responses"
        return httpx.Response(429, json={"error": {"message": "Rate limit exceeded", "code": 429}})

    r = run_stream(
        "openrouter",
        {"model": "m", "input": [], "stream": True},
        transport=httpx.MockTransport(handler),
        path="/responses",
        config=LabConfig(degrade=False),
    )
    assert r.error.message.startswith("OpenRouter API error (429)")
    assert r.error.type == "rate_limit"


REAL_BODIES = sorted(
    (Path(__file__).parent / "realworld").glob("*responses*.sse"), key=lambda p: p.name
)


@pytest.mark.parametrize("path", REAL_BODIES, ids=lambda p: p.stem)
def test_a_real_responses_body_cut_anywhere_raises_nothing_and_claims_no_finish(path):
    body = path.read_bytes()
    provider = "openrouter" if path.name.startswith("openrouter-") else "openai"
    whole = play(body, provider)
    step = max(1, len(body) // 40)
    for cut in range(0, len(body), step):
        r = play(body[:cut], provider)
        if r.finish_reason in ("stop", "length", "tool_calls", "content_filter"):
            assert r.facts["done_seen"], f"{path.name} cut at {cut} claims {r.finish_reason}"
        # what arrived whole is a prefix of the whole body's text
        assert whole.text.startswith(r.text), f"{path.name} cut at {cut}"


def test_the_real_responses_bodies_are_all_cut_above():
    assert len(REAL_BODIES) == 10


def test_a_bare_recording_of_a_responses_call_replays_through_the_responses_adapter(
    fake_server, tmp_path
):
    from lab.capture import CaptureWriter
    from lab.http.transports import RecordingTransport

    with CaptureWriter(tmp_path) as writer:  # no family recorded: replay infers it
        client = httpx.Client(transport=RecordingTransport(writer))
        body = {"model": "fake/tool-call", "input": "hi", "stream": True}
        client.post(f"{fake_server.base_url}/v1/responses", json=body).read()
        client.close()
    (result,) = replay(tmp_path)
    assert [c.name for c in result.function_calls] == ["get_weather", "get_time"]
    assert result.finish_reason == "tool_calls"


def test_the_spill_guard_strips_the_first_text_after_reasoning_and_passes_the_rest():
    # the guard runs on the first text delta (a glued seam moves to reasoning); after the
    # answer started the adapter skips it (SpillGuard.inspecting), and later text is kept
    where = {"item_id": "rs_0", "output_index": 0, "content_index": 0}
    thinking = {
        "type": "response.reasoning_text.delta",
        **where,
        "delta": "Let me think what I must do",
    }
    r = play(
        sse(created(), thinking, *message(1, "must do.Hello!", " We must go.Hey"), completed()),
        provider="deepseek",
    )
    assert r.text == "Hello! We must go.Hey"
    assert r.reasoning == "Let me think what I must domust do."
    assert [(e.guard, e.moved) for e in r.guard_events] == [("spill_guard", "must do.")]
