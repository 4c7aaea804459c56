"""The provider layer: one registry, named OpenAI-compatible endpoints as data, a provider
registered the documented way working end to end (HTTP error path included)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

import lab.providers as providers
from lab.anomalies import detect
from lab.config import LabConfig
from lab.errors import normalize_http_error, provider_families
from lab.providers.openai_compat import OpenAICompatibleAdapter
from lab.replay import replay_sse
from lab.request import build_body
from lab.stream import run_stream

REAL = Path(__file__).parent / "realworld"

NAMED = {
    "groq": "https://api.groq.com/openai/v1",
    "xai": "https://api.x.ai/v1",
    "mistral": "https://api.mistral.ai/v1",
    "together": "https://api.together.xyz/v1",
    "fireworks": "https://api.fireworks.ai/inference/v1",
    "vllm": "http://127.0.0.1:8000/v1",
    "ollama": "http://127.0.0.1:11434/v1",
}


@pytest.mark.parametrize("name", sorted(NAMED))
def test_named_endpoint_is_registered_with_its_base_url_and_family(name):
    cls = providers.get_adapter(name)
    assert cls.provider == name
    assert cls.default_base_url == NAMED[name]
    assert cls.family == "openai_compatible"
    assert provider_families()[name] == "openai_compatible"
    assert build_body(name, model="m", prompt="hi")["stream"] is True


def test_groq_endpoint_reads_its_reasoning_field_under_the_reference_config():
    body = (REAL / "custom-groq-qwen3-reasoning.sse").read_bytes()
    as_custom = replay_sse("custom", body)
    as_groq = replay_sse("groq", body)
    assert as_custom.reasoning == ""
    assert "reasoning_field_ignored" in detect(as_custom)
    assert len("".join(as_groq.reasoning.split())) == len(
        "".join(replay_sse("custom", body, config=LabConfig.complete()).reasoning.split())
    )
    assert as_groq.reasoning.startswith("Okay")
    assert "reasoning_field_ignored" not in detect(as_groq)


def test_xai_endpoint_normalizes_usage_so_output_includes_reasoning():
    body = (REAL / "custom-xai-grok-text.sse").read_bytes()
    assert replay_sse("custom", body).usage.output_tokens == 1
    assert "usage_excludes_reasoning" in detect(replay_sse("custom", body))
    usage = replay_sse("xai", body).usage
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (12, 291, 290)


MISTRAL_BODY = (
    b'data: {"id":"a","object":"chat.completion.chunk","model":"magistral-medium",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":[{"type":"thinking",'
    b'"thinking":[{"type":"text","text":"Two plus two"}]}]},"finish_reason":null}]}\n\n'
    b'data: {"id":"a","object":"chat.completion.chunk","model":"magistral-medium",'
    b'"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":[{"type":"text",'
    b'"text":" is four."}]}]},"finish_reason":null}]}\n\n'
    b'data: {"id":"a","object":"chat.completion.chunk","model":"magistral-medium",'
    b'"choices":[{"index":0,"delta":{"content":"The answer is 4."},"finish_reason":"stop"}],'
    b'"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}\n\n'
    b"data: [DONE]\n\n"
)


def test_mistral_typed_content_lists_become_reasoning_and_text():
    r = replay_sse("mistral", MISTRAL_BODY)
    assert (r.reasoning, r.text, r.finish_reason) == (
        "Two plus two is four.",
        "The answer is 4.",
        "stop",
    )
    ref = replay_sse("custom", MISTRAL_BODY)
    assert (ref.reasoning, ref.text) == ("", "The answer is 4.")
    assert "unhandled_shape" in detect(ref)
    assert ref.facts["unhandled_shapes"] == {"choices[].delta.content[]": 2}
    full = replay_sse("custom", MISTRAL_BODY, config=LabConfig.complete())
    assert (full.reasoning, full.text) == ("Two plus two is four.", "The answer is 4.")


class AcmeAdapter(OpenAICompatibleAdapter):
    provider = "acme"
    error_prefix = "Acme"
    default_base_url = "http://127.0.0.1:9/v1"
    api_key_env = "ACME_API_KEY"


@pytest.fixture
def acme():
    providers.register("acme", AcmeAdapter)
    yield AcmeAdapter
    del providers.PROVIDERS["acme"]


def test_registered_provider_maps_its_http_errors(acme):
    err = normalize_http_error("acme", 429, '{"error": {"message": "slow down"}}')
    assert (err.type, err.retryable, err.status) == ("rate_limit", True, 429)
    assert err.message.startswith("Acme: HTTP 429")


def test_registered_provider_runs_end_to_end_through_an_http_error(acme):
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/chat/completions"
        return httpx.Response(400, json={"error": {"message": "model 'x' does not exist"}})

    body = build_body("acme", model="x", prompt="hi")
    result = run_stream(
        "acme",
        body,
        transport=httpx.MockTransport(handler),
        base_url="http://acme.test/v1",
        config=LabConfig(degrade=False),
    )
    assert result.error is not None
    assert result.error.status == 400
    assert result.error.message.startswith("Acme: HTTP 400")
    assert [a.status for a in result.attempts] == [400]


def test_unknown_provider_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown provider 'nope'"):
        normalize_http_error("nope", 500, "")
    with pytest.raises(ValueError, match="unknown provider 'nope'"):
        providers.get_adapter("nope")


def test_docs_providers_example_registers_a_working_provider():
    import re

    text = (Path(__file__).parent.parent / "docs" / "providers.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 1
    try:
        exec(compile(blocks[0], "docs/providers.md", "exec"), {"__name__": "docs_providers"})
        err = normalize_http_error("acme", 503, '{"error": {"message": "busy"}}')
        assert err.message.startswith("Acme: HTTP 503")
    finally:
        providers.PROVIDERS.pop("acme", None)


def test_docs_providers_table_lists_every_registered_provider():
    text = (Path(__file__).parent.parent / "docs" / "providers.md").read_text(encoding="utf-8")
    assert [p for p in providers.PROVIDERS if f"| `{p}` |" not in text] == []


def test_replay_compare_complete_shows_what_the_reference_loses(capsys):
    from lab.cli import main

    assert main(["replay", "captures/", "--compare", "complete"]) == 0
    out = capsys.readouterr().out
    # the parallel get_time calls the reference drops, and a reasoning summary sent only in
    # reasoning_details (no "reasoning" string) that it does not read
    assert "4 streams whose output changed under complete against defaults" in out
    assert "(4 fields: reasoning 1, function_calls 3)" in out
    assert out.count('"name": "get_time"') == 3
    assert "+The user is asking about the café." in out and "**Answering the café question**" in out
    assert "(nan)" not in out


GROQ_TOOL_USE_FAILED = (
    '{"error":{"message":"Failed to call a function. Please adjust your prompt. See '
    '\'failed_generation\' for more details.","type":"invalid_request_error",'
    '"code":"tool_use_failed","failed_generation":"<function=get_weather{\\"city\\": '
    '\\"Bern\\"}</function>"}}'
)


def test_groq_failed_generation_is_carried_on_the_http_error():
    err = normalize_http_error("groq", 400, GROQ_TOOL_USE_FAILED)
    assert (err.type, err.status) == ("api_error", 400)
    assert (
        err.original_error["error"]["failed_generation"]
        == '<function=get_weather{"city": "Bern"}</function>'
    )


def test_groq_failed_generation_is_carried_on_a_stream_error():
    body = f"data: {GROQ_TOOL_USE_FAILED}\n\n".encode()
    r = replay_sse("groq", body)
    assert r.error is not None
    assert r.error.original_error["failed_generation"].startswith("<function=get_weather")


def test_streams_table_names_the_response_id_model_and_unhandled_shapes():
    from lab import tables

    body = (REAL / "custom-xai-grok-text.sse").read_bytes()
    r = replay_sse("xai", body)
    row = tables.streams([r]).iloc[0]
    assert row["response_id"] == r.facts["response_id"] and row["response_id"]
    assert row["response_model"] == "grok-3-mini"
    m = replay_sse("custom", MISTRAL_BODY)
    assert tables.streams([m]).iloc[0]["unhandled_shapes"] == "choices[].delta.content[] (2)"


# --------------------------------------------------------------------------- review findings


def _sse(*chunks: dict) -> bytes:
    import json

    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()


def _call(tc: dict, finish: str | None = None) -> dict:
    return {"choices": [{"index": 0, "delta": {"tool_calls": [tc]}, "finish_reason": finish}]}


END_TOOLS = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}


def test_a_new_endpoint_never_inherits_another_providers_key_or_host():
    class Bare(OpenAICompatibleAdapter):
        provider = "bare-llm"

    assert Bare.api_key_env == "BARE_LLM_API_KEY"
    assert Bare.default_base_url == "" and Bare.requires_base_url
    assert Bare.error_prefix == "bare-llm"
    assert Bare.api_key_from_env({"OPENAI_API_KEY": "sk-openai-secret"}) is None
    with pytest.raises(ValueError, match="needs a base URL"):
        Bare().endpoint(None, "m")

    class Nameless(OpenAICompatibleAdapter):
        pass

    with pytest.raises(ValueError, match="set provider = 'nameless'"):
        providers.register("nameless", Nameless)
    assert "nameless" not in providers.PROVIDERS


def test_parallel_calls_without_an_index_are_kept_apart_under_complete():
    body = _sse(
        _call(
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Bern"}'},
            }
        ),
        _call(
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            }
        ),
        END_TOOLS,
    )
    for provider in ("ollama", "openrouter"):
        ref = replay_sse(provider, body)
        assert [c.name for c in ref.function_calls] == ["get_weatherget_weather"]  # reference
        assert "tool_calls_merged" in detect(ref)
        full = replay_sse(provider, body, config=LabConfig.complete())
        assert [(c.name, c.args, c.id) for c in full.function_calls] == [
            ("get_weather", {"city": "Bern"}, "c1"),
            ("get_weather", {"city": "Oslo"}, "c2"),
        ]
        assert detect(full) == []


def test_a_name_resent_on_every_delta_without_an_id_is_named_and_kept_once_under_complete():
    # MiniMax M2.7 on NVIDIA NIM resends the whole name on every delta, id only on the first
    # (hermes-agent #8259): the reference appends it each time, "read_fileread_file..."
    def piece(args: str) -> dict:
        return {"index": 0, "function": {"name": "read_file", "arguments": args}}

    first = {"index": 0, "id": "c1", "type": "function"}
    first["function"] = {"name": "read_file", "arguments": ""}
    body = _sse(
        _call(first),
        _call(piece('{"path":')),
        _call(piece(' "a.md"}')),
        _call(piece("")),
        END_TOOLS,
    )
    for provider in ("nvidia", "openrouter"):
        ref = replay_sse(provider, body)
        assert [(c.name, c.args) for c in ref.function_calls] == [
            ("read_file" * 4, {"path": "a.md"})
        ]
        assert ref.facts["resent_tool_headers"] == 3
        assert detect(ref) == ["tool_call_header_resent"]
        full = replay_sse(provider, body, config=LabConfig.complete())
        assert [(c.name, c.args, c.id) for c in full.function_calls] == [
            ("read_file", {"path": "a.md"}, "c1")
        ]
        assert detect(full) == []


def test_a_name_streamed_in_pieces_without_an_id_is_one_name():
    def piece(name: str, args: str) -> dict:
        return {"index": 0, "function": {"name": name, "arguments": args}}

    body = _sse(_call(piece("get_", "")), _call(piece("weather", '{"city": "Bern"}')), END_TOOLS)
    for config in (None, LabConfig.complete()):
        r = replay_sse("ollama", body, config=config)
        assert [(c.name, c.args) for c in r.function_calls] == [("get_weather", {"city": "Bern"})]
        assert detect(r) == []


def test_parallel_calls_without_ids_at_one_index_are_kept_apart_under_complete():
    # each call whole in one delta, no id, all at index 0: the next one starts when a name
    # comes after complete arguments, naming another tool or opening another object
    def whole(name: str, args: str) -> dict:
        return {"index": 0, "type": "function", "function": {"name": name, "arguments": args}}

    body = _sse(
        _call(whole("list_dir", "{}")),
        _call(whole("read_file", '{"path": "a.md"}')),
        _call(whole("read_file", '{"path": "b.md"}')),
        END_TOOLS,
    )
    for provider in ("ollama", "openrouter"):
        ref = replay_sse(provider, body)
        assert [c.name for c in ref.function_calls] == ["list_dirread_fileread_file"]
        assert ref.facts["merged_tool_calls"] == 2
        assert "tool_calls_merged" in detect(ref)
        full = replay_sse(provider, body, config=LabConfig.complete())
        assert [(c.name, c.args) for c in full.function_calls] == [
            ("list_dir", {}),
            ("read_file", {"path": "a.md"}),
            ("read_file", {"path": "b.md"}),
        ]
        assert detect(full) == []


def test_reasoning_sent_as_an_object_is_counted_and_read_under_complete():
    # Bedrock's shape through a gateway (envoyproxy/ai-gateway #1222):
    # "reasoning_content": {"text": "..."} where a string belongs
    said = "I need to calculate 27 * 453."
    body = _sse(
        {"choices": [{"index": 0, "delta": {"reasoning_content": {"text": said}}}]},
        {"choices": [{"index": 0, "delta": {"content": "12231"}, "finish_reason": "stop"}]},
    )
    as_reasoning = body.replace(b'"reasoning_content"', b'"reasoning"')
    for provider, sent in (("deepseek", body), ("custom", body), ("openrouter", as_reasoning)):
        ref = replay_sse(provider, sent)
        assert (ref.text, ref.reasoning) == ("12231", "")
        assert ref.facts["ignored_reasoning_chars"] == len(said)
        assert detect(ref) == ["reasoning_field_ignored"]
        full = replay_sse(provider, sent, config=LabConfig.complete())
        assert (full.text, full.reasoning) == ("12231", said)
        assert detect(full) == []


def test_openrouter_counts_reasoning_content_it_does_not_read():
    # the reference reads delta.reasoning alone; the same text in both is not counted
    def chunk(delta: dict) -> dict:
        return {"choices": [{"index": 0, "delta": delta}]}

    stop = {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
    other = replay_sse("openrouter", _sse(chunk({"reasoning_content": "Thinking hard."}), stop))
    assert (other.reasoning, other.facts["ignored_reasoning_chars"]) == ("", 14)
    both = chunk({"reasoning": "Thinking hard.", "reasoning_content": "Thinking hard."})
    same = replay_sse("openrouter", _sse(both, stop))
    assert same.reasoning == "Thinking hard."
    assert "ignored_reasoning_chars" not in same.facts


def test_a_cache_read_at_the_top_level_of_usage_is_read():
    # Moonshot/Kimi: usage.cached_tokens, no prompt_tokens_details (promptfoo PR #10132)
    usage = {"prompt_tokens": 2000, "completion_tokens": 31, "total_tokens": 2031}
    last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    first = {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}
    for provider in ("custom", "openai", "openrouter"):
        r = replay_sse(provider, _sse(first, {**last, "usage": {**usage, "cached_tokens": 1792}}))
        assert r.usage is not None
        assert (r.usage.input_tokens, r.usage.cache_read_tokens) == (2000, 1792)
        # the details object, when there is one, is what counts
        details = {**usage, "cached_tokens": 5, "prompt_tokens_details": {"cached_tokens": 7}}
        r = replay_sse(provider, _sse(first, {**last, "usage": details}))
        assert r.usage is not None and r.usage.cache_read_tokens == 7


def test_arguments_resent_whole_each_delta_are_named_and_read_from_the_last_under_complete():
    # DeepSeek / Baidu Qianfan resend the arguments so far on every delta (hermes-agent
    # PR #35718): the reference appends them into a string that does not parse
    so_far = [
        '{"pattern": "TODO',
        '{"pattern": "TODO", "path": "src',
        '{"pattern": "TODO", "path": "src/"}',
    ]
    header = {"index": 0, "id": "call_1", "type": "function"}
    header["function"] = {"name": "search_files", "arguments": ""}
    body = _sse(
        _call(header),
        *(_call({"index": 0, "function": {"arguments": piece}}) for piece in so_far),
        END_TOOLS,
    )
    for provider in ("deepseek", "openrouter"):
        ref = replay_sse(provider, body)
        (call,) = ref.function_calls
        assert (call.args, call.provider_fields["raw_arguments"]) == ({}, "".join(so_far))
        assert call.provider_fields["arguments_resent"] is True
        assert detect(ref) == ["tool_arguments_resent"]
        full = replay_sse(provider, body, config=LabConfig.complete())
        assert [(c.name, c.args) for c in full.function_calls] == [
            ("search_files", {"pattern": "TODO", "path": "src/"})
        ]
        assert detect(full) == [] and full.guard_events == []
    # pieces that each start with the one before but whose last is cut are not read so
    cut = _sse(
        _call(header),
        *(_call({"index": 0, "function": {"arguments": piece}}) for piece in so_far[:2]),
        END_TOOLS,
    )
    r = replay_sse("deepseek", cut, config=LabConfig.complete())
    assert "arguments_resent" not in r.function_calls[0].provider_fields


def test_an_empty_id_on_a_continuation_delta_keeps_the_calls_id():
    body = _sse(
        _call(
            {
                "index": 0,
                "id": "call_9",
                "type": "function",
                "function": {"name": "f", "arguments": ""},
            }
        ),
        _call({"index": 0, "id": "", "function": {"arguments": '{"a": 1}'}}),
        END_TOOLS,
    )
    for provider in ("deepseek", "openrouter"):
        (call,) = replay_sse(provider, body).function_calls
        assert (call.id, call.args) == ("call_9", {"a": 1})


def test_openrouter_reads_arguments_sent_as_an_object():
    body = _sse(
        _call({"index": 0, "id": "c", "function": {"name": "f", "arguments": {"a": 1}}}), END_TOOLS
    )
    (call,) = replay_sse("openrouter", body).function_calls
    assert call.args == {"a": 1}


def test_text_on_the_length_finish_chunk_is_named_and_kept_under_complete():
    body = _sse(
        {"choices": [{"index": 0, "delta": {"content": "The answer is"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"content": " 42"}, "finish_reason": "length"}]},
    )
    ref = replay_sse("vllm", body)
    assert (ref.text, ref.finish_reason) == ("The answer is", "length")
    assert "length_content_dropped" in detect(ref)
    full = replay_sse("vllm", body, config=LabConfig.complete())
    assert (full.text, full.finish_reason) == ("The answer is 42", "length")
    assert "length_content_dropped" not in detect(full)


def test_a_finish_reason_outside_the_vocabulary_is_named():
    body = _sse({"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "eos"}]})
    r = replay_sse("custom", body)
    assert (r.text, r.finish_reason) == ("Hi", "eos")
    assert "unknown_finish_reason" in detect(r)


def test_server_timing_and_padding_keys_are_not_unhandled_shapes():
    body = _sse(
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": "Hi", "channel": "final"},
                    "finish_reason": None,
                    "text": "Hi",
                    "token_id": 17,
                }
            ],
            "timings": {"predicted_ms": 3},
            "p": "abcd",
        },
        {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "time_info": {"queue_time": 0.1},
        },
    )
    r = replay_sse("custom", body)
    assert r.text == "Hi"
    assert r.facts.get("unhandled_shapes") is None


def test_openrouter_reasoning_only_in_reasoning_details_is_named_and_read_under_complete():
    body = _sse(
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "reasoning_details": [
                            {"type": "reasoning.summary", "summary": "Plan: add."}
                        ]
                    },
                    "finish_reason": None,
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {"reasoning_details": [{"type": "reasoning.text", "text": "2+2=4"}]},
                    "finish_reason": None,
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {"content": "4"}, "finish_reason": "stop"}]},
    )
    ref = replay_sse("openrouter", body)
    assert (ref.text, ref.reasoning) == ("4", "")
    assert "reasoning_field_ignored" in detect(ref)
    full = replay_sse("openrouter", body, config=LabConfig.complete())
    assert [(t.kind, t.content) for t in full.thoughts] == [
        ("summary", "Plan: add."),
        ("raw", "2+2=4"),
    ]
    assert detect(full) == []


def test_a_whole_stream_whose_last_event_lacks_the_blank_line_is_not_truncated():
    whole = _sse({"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]})
    assert whole.endswith(b"data: [DONE]\n\n")
    r = replay_sse("openai", whole[:-2])  # "data: [DONE]" with no blank line after it
    assert r.text == "Hi" and "eof_without_terminator" not in detect(r)
    cut = replay_sse("openai", whole[: whole.index(b'"finish_reason"')])
    assert "eof_without_terminator" in detect(cut)


@pytest.mark.parametrize("provider", ["vllm", "ollama", "custom"])
def test_any_openai_compatible_endpoint_replays_a_responses_stream(provider):
    from lab.providers import adapter_for

    body = (REAL / "openai-responses-gpt4omini-text.sse").read_bytes()
    want = replay_sse("openai", body, path="/v1/responses")
    got = replay_sse(provider, body, path="/v1/responses")
    assert want.text and (got.text, got.finish_reason, got.usage) == (
        want.text,
        want.finish_reason,
        want.usage,
    )
    cls = adapter_for(provider, "/v1/responses")
    assert cls.provider == provider and cls is adapter_for(provider, "/v1/responses")


def test_groq_usage_sent_only_in_x_groq_is_read():
    body = _sse(
        {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]},
        {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "x_groq": {
                "id": "req_1",
                "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
            },
        },
    )
    usage = replay_sse("groq", body).usage
    assert (usage.input_tokens, usage.output_tokens) == (7, 2)


def test_a_provider_declared_as_an_entry_point_is_registered(monkeypatch):
    from importlib.metadata import EntryPoint

    eps = [
        EntryPoint(
            "acme-ep", "lab.providers.openai_compat:OllamaAdapter", providers.ENTRY_POINT_GROUP
        ),
        EntryPoint("openai", "elsewhere:Other", providers.ENTRY_POINT_GROUP),  # built-in wins
    ]
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: eps)
    try:
        providers._load_entry_points()
        assert providers.PROVIDERS["acme-ep"] == "lab.providers.openai_compat:OllamaAdapter"
        assert providers.PROVIDERS["openai"] == "lab.providers.openai_compat:OpenAIAdapter"
        from lab.providers.openai_compat import OllamaAdapter

        assert providers.get_adapter("acme-ep") is OllamaAdapter
    finally:
        providers.PROVIDERS.pop("acme-ep", None)


def test_several_choices_are_named_and_the_first_kept_alone_under_complete():
    def piece(i: int, text: str, finish: str | None = None) -> dict:
        return {"choices": [{"index": i, "delta": {"content": text}, "finish_reason": finish}]}

    body = _sse(
        piece(0, "Alpha"), piece(1, "one"), piece(0, " Beta", "stop"), piece(1, "two", "stop")
    )
    for provider in ("openai", "openrouter"):
        ref = replay_sse(provider, body)
        assert "choices_mixed" in detect(ref) and "one" in ref.text  # the reference mixes them
        full = replay_sse(provider, body, config=LabConfig.complete())
        assert (full.text, full.finish_reason) == ("Alpha Beta", "stop")


def test_idless_calls_that_resend_the_name_on_every_delta_stay_whole_under_complete():
    # two calls of different tools, no ids, all at index 0, the name on every delta: under
    # complete each is one call (not a junk call per delta after the first moved)
    def piece(name: str, args: str) -> dict:
        return {"index": 0, "function": {"name": name, "arguments": args}}

    body = _sse(
        _call(piece("list_dir", '{"path":')),
        _call(piece("list_dir", ' "."}')),
        _call(piece("read_file", '{"path":')),
        _call(piece("read_file", ' "a.md"')),
        _call(piece("read_file", "}")),
        END_TOOLS,
    )
    full = replay_sse("ollama", body, config=LabConfig.complete())
    assert [(c.name, c.args) for c in full.function_calls] == [
        ("list_dir", {"path": "."}),
        ("read_file", {"path": "a.md"}),
    ]
    assert detect(full) == []
    ref = replay_sse("ollama", body)
    assert [c.name for c in ref.function_calls] == ["list_dir" * 2 + "read_file" * 3]
    assert (ref.facts["merged_tool_calls"], ref.facts["resent_tool_headers"]) == (1, 3)


def test_ids_resent_on_every_delta_at_one_index_stay_two_calls_under_complete():
    def piece(call_id: str, name: str, args: str) -> dict:
        return {"index": 0, "id": call_id, "function": {"name": name, "arguments": args}}

    body = _sse(
        _call(piece("a", "f", '{"x":')),
        _call(piece("a", "f", " 1}")),
        _call(piece("b", "g", '{"y":')),
        _call(piece("b", "g", " 2}")),
        END_TOOLS,
    )
    full = replay_sse("custom", body, config=LabConfig.complete())
    assert [(c.name, c.args, c.id) for c in full.function_calls] == [
        ("f", {"x": 1}, "a"),
        ("g", {"y": 2}, "b"),
    ]


def test_same_tool_calls_sent_header_then_arguments_without_ids_are_two_calls():
    # a header (name, no arguments), then its arguments, twice at index 0: the second header
    # begins another call (a new object follows it), it does not repeat the name
    def header(name: str) -> dict:
        return {"index": 0, "type": "function", "function": {"name": name}}

    def args(text: str) -> dict:
        return {"index": 0, "function": {"arguments": text}}

    body = _sse(
        _call(header("read_file")),
        _call(args('{"path": "a.md"}')),
        _call(header("read_file")),
        _call(args('{"path": "b.md"}')),
        END_TOOLS,
    )
    ref = replay_sse("ollama", body)
    assert [c.name for c in ref.function_calls] == ["read_fileread_file"]
    assert ref.facts["merged_tool_calls"] == 1
    assert "resent_tool_headers" not in ref.facts
    assert "tool_calls_merged" in detect(ref)
    full = replay_sse("ollama", body, config=LabConfig.complete())
    assert [(c.name, c.args) for c in full.function_calls] == [
        ("read_file", {"path": "a.md"}),
        ("read_file", {"path": "b.md"}),
    ]
    assert detect(full) == []


def test_a_header_repeated_after_complete_arguments_is_a_resent_header():
    # the same header again, then no new object: the name was only repeated
    header = {"index": 0, "type": "function", "function": {"name": "read_file"}}
    args = {"index": 0, "function": {"arguments": '{"path": "a.md"}'}}
    body = _sse(_call(header), _call(args), _call(header), END_TOOLS)
    ref = replay_sse("ollama", body)
    assert ref.facts["resent_tool_headers"] == 1
    assert "merged_tool_calls" not in ref.facts
    full = replay_sse("ollama", body, config=LabConfig.complete())
    assert [(c.name, c.args) for c in full.function_calls] == [("read_file", {"path": "a.md"})]


def test_a_final_chunk_that_resends_the_whole_call_is_not_a_new_call():
    def piece(name: str | None, args: str) -> dict:
        fn = {"arguments": args} if name is None else {"name": name, "arguments": args}
        return {"index": 0, "function": fn}

    body = _sse(
        _call(piece("read_file", '{"path":')),
        _call(piece(None, ' "a.md"}')),
        _call(piece("read_file", '{"path": "a.md"}')),
        END_TOOLS,
    )
    ref = replay_sse("ollama", body)
    assert "merged_tool_calls" not in ref.facts
    assert ref.function_calls[0].provider_fields["arguments_resent"] is True
    assert "tool_arguments_resent" in detect(ref)
    full = replay_sse("ollama", body, config=LabConfig.complete())
    assert [(c.name, c.args) for c in full.function_calls] == [("read_file", {"path": "a.md"})]
    assert detect(full) == []


def test_cumulative_arguments_with_the_last_snapshot_repeated_are_read_from_the_last():
    def piece(args: str) -> dict:
        return {"index": 0, "function": {"arguments": args}}

    first = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f"}}
    snaps = ['{"a"', '{"a": 1', '{"a": 1}', '{"a": 1}']
    body = _sse(_call(first), *(_call(piece(s)) for s in snaps), END_TOOLS)
    ref = replay_sse("deepseek", body)
    assert ref.function_calls[0].provider_fields["arguments_resent"] is True
    full = replay_sse("deepseek", body, config=LabConfig.complete())
    assert [(c.name, c.args) for c in full.function_calls] == [("f", {"a": 1})]


def test_a_name_resent_on_every_delta_is_not_parsed_per_delta(monkeypatch):
    # the name check comes before any parse: 2,000 deltas that resend the name cost no
    # json.loads each (a join and parse per delta made replay quadratic)
    from lab.providers import wire

    calls = []
    real = wire.json.loads

    def counting(text, *a, **k):
        calls.append(len(text))
        return real(text, *a, **k)

    def piece(args: str) -> dict:
        return {"index": 0, "function": {"name": "f", "arguments": args}}

    pieces = ['{"xs": [', *("1, " for _ in range(2000)), "1]}"]
    body = _sse(*(_call(piece(p)) for p in pieces), END_TOOLS)
    monkeypatch.setattr(wire.json, "loads", counting)
    for config in (None, LabConfig.complete()):
        calls.clear()
        r = replay_sse("nvidia", body, config=config)
        assert len(r.function_calls[0].args["xs"]) == 2001
        assert sum(calls) < 4 * sum(map(len, pieces))


def test_one_reasoning_sent_in_several_unread_fields_is_counted_and_read_once():
    # reasoning as an object, the same text in reasoning_content and in reasoning_details:
    # one reasoning, not three (OpenRouter reads delta.reasoning alone)
    said = "Thinking hard."

    def chunk(delta: dict) -> dict:
        return {"choices": [{"index": 0, "delta": delta}]}

    stop = {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
    details = [{"type": "reasoning.text", "text": said}]
    for delta in (
        {"reasoning": {"text": said}, "reasoning_content": said},
        {"reasoning": {"text": said}, "reasoning_content": said, "reasoning_details": details},
        {"reasoning_content": said, "reasoning_details": details},
    ):
        body = _sse(chunk(delta), stop)
        ref = replay_sse("openrouter", body)
        assert (ref.reasoning, ref.facts["ignored_reasoning_chars"]) == ("", len(said))
        full = replay_sse("openrouter", body, config=LabConfig.complete())
        assert full.reasoning == said
        assert "ignored_reasoning_chars" not in full.facts


def test_a_trailing_usage_of_a_cache_count_alone_does_not_wipe_the_usage():
    usage = {"prompt_tokens": 2000, "completion_tokens": 31, "total_tokens": 2031}
    first = {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}
    last = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage}
    for provider in ("custom", "openai", "openrouter"):
        r = replay_sse(provider, _sse(first, last, {"choices": [], "usage": {"cached_tokens": 0}}))
        assert r.usage is not None
        assert (r.usage.input_tokens, r.usage.output_tokens) == (2000, 31)


# --------------------------------------------------------------------------- calls at one index


def _tc(name: str | None = None, args: str | None = None, call_id: str | None = None) -> dict:
    fn = {k: v for k, v in (("name", name), ("arguments", args)) if v is not None}
    out: dict = {"index": 0, "function": fn}
    if call_id is not None:
        out["id"] = call_id
    return out


CITIES = ("Paris", "Rome", "Oslo")


@pytest.mark.parametrize(
    "style",
    ["whole", "header_then_arguments", "name_on_every_delta"],
)
def test_three_idless_calls_of_one_tool_are_three_calls_and_two_merges(style):
    # get_weather for three cities, ids stripped by a relay, all at index 0
    deltas: list[dict] = []
    for city in CITIES:
        args = json.dumps({"city": city}, separators=(",", ":"))
        if style == "whole":
            deltas.append(_tc("get_weather", args))
        elif style == "header_then_arguments":
            deltas += [_tc("get_weather", ""), _tc(None, args[:8]), _tc(None, args[8:])]
        else:
            deltas += [_tc("get_weather", args[:8]), _tc("get_weather", args[8:])]
    body = _sse(*map(_call, deltas), END_TOOLS)
    ref = replay_sse("ollama", body)
    assert [c.name for c in ref.function_calls] == [
        "get_weather" * (3 if style != "name_on_every_delta" else 6)
    ]
    assert ref.facts["merged_tool_calls"] == 2
    assert ref.facts.get("resent_tool_headers") == (3 if style == "name_on_every_delta" else None)
    full = replay_sse("ollama", body, config=LabConfig.complete())
    assert [(c.name, c.args) for c in full.function_calls] == [
        ("get_weather", {"city": c}) for c in CITIES
    ]
    assert detect(full) == []


def test_an_empty_delta_between_a_held_header_and_its_arguments_tells_nothing():
    # a second header of the same tool after complete arguments is held until a delta
    # says what it was; an empty arguments delta says nothing, the object after it does
    deltas = [_tc("f", ""), _tc(None, '{"x":1}'), _tc("f", ""), _tc(None, ""), _tc(None, '{"x":2}')]
    body = _sse(*map(_call, deltas), END_TOOLS)
    full = replay_sse("custom", body, config=LabConfig.complete())
    assert [(c.name, c.args) for c in full.function_calls] == [("f", {"x": 1}), ("f", {"x": 2})]
    ref = replay_sse("custom", body)
    assert ref.facts["merged_tool_calls"] == 1


@pytest.mark.parametrize("split", [True, False])
def test_a_call_resent_whole_at_the_end_is_read_once_in_one_delta_or_two(split):
    deltas = [_tc("f", ""), _tc(None, '{"x"'), _tc(None, ":1}")]
    deltas += [_tc("f", ""), _tc(None, '{"x":1}')] if split else [_tc("f", '{"x":1}')]
    body = _sse(*map(_call, deltas), END_TOOLS)
    full = replay_sse("custom", body, config=LabConfig.complete())
    assert [(c.name, c.args) for c in full.function_calls] == [("f", {"x": 1})]
    assert detect(full) == []
    ref = replay_sse("custom", body)
    assert ref.facts["resent_tool_headers"] == 1
    assert "tool_arguments_resent" in detect(ref)


@pytest.mark.parametrize("call_id", [None, ""])
def test_the_same_call_sent_whole_twice_is_two_calls_under_complete(call_id):
    # a model rolls a die twice: each call whole in its own delta is a call (a resend is
    # told apart by the call before it having come in pieces)
    one = _tc("roll_dice", '{"sides":6}', call_id)
    body = _sse(_call(one), _call(one), END_TOOLS)
    full = replay_sse("custom", body, config=LabConfig.complete())
    assert [(c.name, c.args) for c in full.function_calls] == [("roll_dice", {"sides": 6})] * 2
    assert detect(full) == []
    ref = replay_sse("custom", body)
    assert ref.facts["merged_tool_calls"] == 1


def test_snapshots_whose_concatenation_closes_a_brace_by_chance_are_still_snapshots():
    # '{"x": 0, "s": "' then '{"x": 0, "s": "\""}': glued, the escaped quote of the
    # second falls outside a string and its brace closes the object; no parse agrees,
    # so the snapshots are read as snapshots, and the next call starts after them
    whole = '{"x": 0, "s": "\\""}'
    deltas = [_tc("f", whole[:15], "call_0"), _tc(None, whole), _tc("f", '{"x": 0, "s": ""}')]
    body = _sse(*map(_call, deltas), END_TOOLS)
    full = replay_sse("ollama", body, config=LabConfig.complete())
    assert [(c.name, c.args, c.id) for c in full.function_calls] == [
        ("f", {"x": 0, "s": '"'}, "call_0"),
        ("f", {"x": 0, "s": ""}, None),
    ]


@pytest.mark.parametrize("call_id", [None, "c1"])
def test_braces_inside_a_string_streamed_a_character_a_time_are_read_once(monkeypatch, call_id):
    # '}' and '{' inside the string: no count of braces alone says the object closed, and
    # asking after every delta must not parse the growing text again each time
    from lab.providers import wire

    sizes: list[int] = []
    real = wire.json.loads

    def counting(text, *a, **k):
        sizes.append(len(text))
        return real(text, *a, **k)

    pieces = ['{"s":"', *(["}", "{"] * 1000), '"}']
    body = _sse(*(_call(_tc("f", p, call_id)) for p in pieces), END_TOOLS)
    monkeypatch.setattr(wire.json, "loads", counting)
    for config in (None, LabConfig.complete()):
        sizes.clear()
        r = replay_sse("nvidia", body, config=config)
        assert r.function_calls[0].args == {"s": "}{" * 1000}
        assert sum(sizes) < 4 * sum(map(len, pieces))
