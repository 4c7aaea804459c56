"""Scripted fake providers: real loopback sockets, real wire formats, deterministic bytes."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import httpx
import pytest

from lab.fakes import (
    OPENROUTER_SCENARIOS,
    SCENARIOS,
    FakeServer,
    render_body,
    scenario_reads,
)
from lab.fakes.scenarios import backends_for

OR_PATH = "/api/v1/chat/completions"


# --------------------------------------------------------------------------- helpers


def parse_sse(body: bytes) -> list[dict[str, Any]]:
    """Events as {"comments": [...], "event": name|None, "data": str|None}."""
    events = []
    for block in body.decode("utf-8").split("\n\n"):
        if not block.strip():
            continue
        ev: dict[str, Any] = {"comments": [], "event": None, "data": None}
        for line in block.split("\n"):
            if line.startswith(":"):
                ev["comments"].append(line[1:].strip())
            elif line.startswith("event:"):
                ev["event"] = line[6:].strip()
            elif line.startswith("data:"):
                ev["data"] = line[5:].strip()
        events.append(ev)
    return events


def data_chunks(body: bytes) -> list[dict[str, Any]]:
    """Parsed JSON of every data event except [DONE]."""
    return [
        json.loads(ev["data"])
        for ev in parse_sse(body)
        if ev["data"] is not None and ev["data"] != "[DONE]"
    ]


def deltas(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [c["choices"][0]["delta"] for c in chunks if c.get("choices")]


def finishes(chunks: list[dict[str, Any]]) -> list[str]:
    return [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices")]


def content(chunks: list[dict[str, Any]]) -> str:
    return "".join(d.get("content") or "" for d in deltas(chunks))


def tool_args(chunks: list[dict[str, Any]]) -> str:
    return "".join(
        tc["function"].get("arguments", "")
        for d in deltas(chunks)
        for tc in d.get("tool_calls") or []
    )


@pytest.fixture(scope="module")
def server():
    with FakeServer(delay_scale=0) as srv:
        yield srv


def or_body(model: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "Hi! Any café tips?"}],
        "stream": True,
        **extra,
    }


def stream(server: FakeServer, path: str, body: dict[str, Any], **kw: Any):
    """(response, list of raw reads) over a real socket with httpx."""
    with httpx.Client(timeout=5) as client:
        with client.stream("POST", server.base_url + path, json=body, **kw) as resp:
            reads = list(resp.iter_raw())
    return resp, reads


# --------------------------------------------------------------------------- the server


def test_server_binds_loopback_only():
    with FakeServer(delay_scale=0) as srv:
        assert srv.host == "127.0.0.1"
        assert srv.base_url == f"http://127.0.0.1:{srv.port}"
        assert srv._httpd.socket.getsockname()[0] == "127.0.0.1"
        assert srv.port > 0


def test_server_closes_and_frees_the_port():
    srv = FakeServer(delay_scale=0)
    port = srv.port
    srv.close()
    srv.close()  # idempotent
    with pytest.raises(httpx.ConnectError):
        httpx.post(f"http://127.0.0.1:{port}{OR_PATH}", json=or_body("fake/clean"), timeout=1)


@pytest.mark.parametrize("model", OPENROUTER_SCENARIOS)
def test_openrouter_scenario_streams_sse_with_provider_on_every_chunk(server, model):
    resp, reads = stream(server, OR_PATH, or_body(model))
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "text/event-stream"
    assert resp.headers["transfer-encoding"] == "chunked"
    assert resp.headers["cache-control"] == "no-cache"
    assert resp.headers["x-generation-id"].startswith("gen-")
    body = b"".join(reads)
    chunks = data_chunks(body)
    assert chunks
    for chunk in chunks:
        assert chunk["provider"] in backends_for("openrouter", model)
        assert chunk["object"] == "chat.completion.chunk"
        assert chunk["model"] == model
        assert chunk["id"] == resp.headers["x-generation-id"]
        assert isinstance(chunk["created"], int)
    roles = [delta["role"] for delta in deltas(chunks)]
    assert roles and set(roles) == {"assistant"}
    comments = [c for ev in parse_sse(body) for c in ev["comments"]]
    assert set(comments) <= {"OPENROUTER PROCESSING"}
    assert len(comments) <= 3


def test_clean_ends_with_finish_then_usage_then_done():
    body = render_body("openrouter", "fake/clean", seed=1)
    events = parse_sse(body)
    assert events[-1]["data"] == "[DONE]"
    chunks = data_chunks(body)
    finish_at = next(
        i for i, c in enumerate(chunks) if c["choices"] and c["choices"][0]["finish_reason"]
    )
    assert chunks[finish_at]["choices"][0]["finish_reason"] == "stop"
    assert finish_at == len(chunks) - 2 and "usage" not in chunks[finish_at]
    usage = chunks[-1]["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert "reasoning_tokens" in usage["completion_tokens_details"]
    assert "cached_tokens" in usage["prompt_tokens_details"]
    assert usage["cost"] > 0
    assert "café" in content(chunks) and "☕" in content(chunks)


def test_usage_chunk_has_empty_choices_or_a_null_finish_choice():
    for seed in range(8):
        last = data_chunks(render_body("openrouter", "fake/clean", seed=seed))[-1]
        assert "usage" in last
        if last["choices"]:
            assert last["provider"] == "DeepInfra"
            assert last["choices"][0]["finish_reason"] is None


def test_reasoning_streams_reasoning_text_details_then_encrypted_or_summary():
    kinds = set()
    for seed in range(2):
        chunks = data_chunks(render_body("openrouter", "fake/reasoning", seed=seed))
        ds = deltas(chunks)
        text_details = [
            rd
            for d in ds
            for rd in d.get("reasoning_details") or []
            if rd["type"] == "reasoning.text"
        ]
        assert text_details and all(rd["index"] == 0 for rd in text_details)
        reasoning = "".join(d.get("reasoning") or "" for d in ds)
        assert reasoning == "".join(rd["text"] for rd in text_details)
        last_detail = [rd for d in ds for rd in d.get("reasoning_details") or []][-1]
        assert last_detail["type"] in ("reasoning.encrypted", "reasoning.summary")
        kinds.add(last_detail["type"])
        first_content = next(i for i, d in enumerate(ds) if d.get("content"))
        assert all(not d.get("reasoning") for d in ds[first_content:])
        assert chunks[-1]["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
    assert kinds == {"reasoning.encrypted", "reasoning.summary"}


def test_think_leak_splits_tags_across_deltas_on_the_bad_backend():
    chunks = data_chunks(render_body("openrouter", "fake/think-leak", seed=0))
    assert chunks[0]["provider"] == "Chutes"
    pieces = [d.get("content") or "" for d in deltas(chunks)]
    assert "<thi" in pieces and any(p.startswith("nk>") for p in pieces)
    text = content(chunks)
    assert text.startswith("<think>") and "</think>" in text
    assert not any(d.get("reasoning") for d in deltas(chunks))


def test_think_leak_rate_differs_by_backend():
    leaks: dict[str, list[bool]] = {}
    for seed in range(24):
        chunks = data_chunks(render_body("openrouter", "fake/think-leak", seed=seed))
        leaks.setdefault(chunks[0]["provider"], []).append("</think>" in content(chunks))
    rates = {backend: sum(v) / len(v) for backend, v in leaks.items()}
    assert rates["Chutes"] == 1.0
    assert 0.0 < rates["SiliconFlow"] < 1.0
    assert rates["DeepInfra"] == rates["Together"] == 0.0


def test_spill_glues_reasoning_tail_to_the_answer_on_the_bad_backend():
    ds = deltas(data_chunks(render_body("openrouter", "fake/spill", seed=0)))
    first = next(i for i, d in enumerate(ds) if d.get("content"))
    assert ds[first]["content"] == "must do.Hello!"
    assert any(d.get("reasoning") for d in ds[:first])
    assert len([d for d in ds[first + 1 :] if d.get("content")]) >= 2
    good = deltas(data_chunks(render_body("openrouter", "fake/spill", seed=1)))
    assert next(d["content"] for d in good if d.get("content")) == "Hello!"


def test_tool_call_fragments_concatenate_to_valid_json_with_finish_tool_calls():
    chunks = data_chunks(render_body("openrouter", "fake/tool-call"))
    calls = [tc for d in deltas(chunks) for tc in d.get("tool_calls") or []]
    assert calls[0]["id"].startswith("call_") and calls[0]["function"]["name"] == "get_weather"
    assert calls[0]["function"]["arguments"] == ""
    assert len(calls) >= 3
    assert json.loads(tool_args(chunks)) == {"city": "Zürich", "days": 3}
    assert "tool_calls" in finishes(chunks)


def test_truncated_tool_args_end_without_closing_brace_under_finish_tool_calls():
    chunks = data_chunks(
        render_body("openrouter", "fake/truncated-tool-args", body=or_body("x", max_tokens=48))
    )
    assert tool_args(chunks) == '{"city": "Paris", "days": 1'
    finish = next(
        c["choices"][0] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]
    )
    assert finish["finish_reason"] == "tool_calls" and finish["native_finish_reason"] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 48


def test_mid_stream_error_chunk_after_content():
    chunks = data_chunks(render_body("openrouter", "fake/mid-stream-error"))
    err_at = next(i for i, c in enumerate(chunks) if "error" in c)
    assert content(chunks[:err_at])
    err = chunks[err_at]
    assert err["error"]["code"] == 502
    assert err["error"]["metadata"]["error_type"] == "provider_unavailable"
    assert err["provider"] in err["error"]["message"]
    assert err["choices"][0]["finish_reason"] == "error"
    assert err_at == len(chunks) - 1


def test_no_done_ends_without_done_or_finish():
    for seed in range(2):
        body = render_body("openrouter", "fake/no-done", seed=seed)
        assert b"[DONE]" not in body
        assert not any(finishes(data_chunks(body + b"\n\n")))
        assert content(data_chunks(body + b"\n\n"))
    assert render_body("openrouter", "fake/no-done", seed=1).endswith(b"}")


# --------------------------------------------------------------------------- reads & determinism


def test_same_seed_same_bytes_and_reads():
    for model in OPENROUTER_SCENARIOS:
        assert scenario_reads("openrouter", model, seed=5) == scenario_reads(
            "openrouter", model, seed=5
        )
    assert render_body("openrouter", "fake/clean", seed=1) != render_body(
        "openrouter", "fake/clean", seed=2
    )


def test_socket_bytes_equal_rendered_bytes_for_the_request_seed(server):
    body = or_body("fake/think-leak", seed=3)
    resp, reads = stream(server, OR_PATH, body)
    assert b"".join(reads) == render_body("openrouter", "fake/think-leak", seed=3, body=body)


def test_reads_split_events_merge_events_and_split_a_utf8_char():
    for model in OPENROUTER_SCENARIOS:
        reads = scenario_reads("openrouter", model)
        assert len(reads) > 3
        undecodable = 0
        for read in reads:
            try:
                read.decode("utf-8")
            except UnicodeDecodeError:
                undecodable += 1
        assert undecodable >= 1, model
    reads = scenario_reads("openrouter", "fake/reasoning")
    assert any(r.count(b"\n\ndata: ") >= 2 for r in reads)  # several events in one read
    assert any(not r.endswith(b"\n\n") for r in reads)  # an event cut across reads


def test_server_writes_one_chunk_per_scripted_read():
    with FakeServer(delay_scale=0.5) as srv:
        resp, reads = stream(srv, OR_PATH, or_body("fake/clean", seed=2))
    assert b"".join(reads) == render_body(
        "openrouter", "fake/clean", seed=2, body=or_body("fake/clean", seed=2)
    )
    assert len(reads) >= len(scenario_reads("openrouter", "fake/clean", seed=2)) // 2


def test_backends_spread_across_requests_without_seed():
    with FakeServer(delay_scale=0) as srv:
        providers = []
        for _ in range(8):
            resp, reads = stream(srv, OR_PATH, or_body("fake/clean"))
            providers.append(data_chunks(b"".join(reads))[0]["provider"])
        assert [r.seed for r in srv.requests] == list(range(8))
    assert len(set(providers)) == 8
    assert Counter(providers).most_common(1)[0][1] == 1


def test_fake_seed_header_picks_the_scenario_seed(server):
    resp, reads = stream(server, OR_PATH, or_body("fake/spill"), headers={"X-Fake-Seed": "1"})
    assert (
        data_chunks(b"".join(reads))[0]["provider"] == backends_for("openrouter", "fake/spill")[1]
    )


# --------------------------------------------------------------------------- request log


def test_request_log_records_method_path_headers_and_json_body(server):
    body = or_body(
        "fake/tool-call", tools=[{"type": "function", "function": {"name": "get_weather"}}]
    )
    stream(server, OR_PATH, body, headers={"X-Title": "stream-lab", "Authorization": "Bearer k"})
    rec = server.requests[-1]
    assert (rec.method, rec.path, rec.family, rec.model) == (
        "POST",
        OR_PATH,
        "openrouter",
        "fake/tool-call",
    )
    assert rec.headers["x-title"] == "stream-lab"
    assert rec.headers["authorization"] == "Bearer k"
    assert rec.body == body
    assert rec.status == 200


# --------------------------------------------------------------------------- failures


def post(server: FakeServer, body: dict[str, Any], path: str = OR_PATH) -> httpx.Response:
    return httpx.post(server.base_url + path, json=body, timeout=5)


def test_unknown_openrouter_model_is_400_not_a_valid_model_id(server):
    resp = post(server, or_body("vendor/nope"))
    assert resp.status_code == 400
    assert resp.json()["error"] == {"message": "vendor/nope is not a valid model ID", "code": 400}


def test_reject_min_p_only_when_body_has_min_p(server):
    resp = post(server, or_body("fake/reject-min-p", min_p=0.05))
    assert resp.status_code == 400
    err = resp.json()["error"]
    assert err["message"] == "Provider returned error" and err["code"] == 400
    assert err["metadata"]["raw"] == "min_p is not supported by this model"
    assert err["metadata"]["provider_name"] in backends_for("openrouter", "fake/reject-min-p")
    assert post(server, or_body("fake/reject-min-p", top_p=0.9)).status_code == 200


def test_reject_images_only_when_a_message_has_image_parts(server):
    image_msg = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    }
    resp = post(server, {"model": "fake/reject-images", "messages": [image_msg], "stream": True})
    assert resp.status_code == 400
    assert resp.json()["error"]["metadata"]["raw"] == "this model does not support image input"
    assert post(server, or_body("fake/reject-images")).status_code == 200


def test_no_endpoints_only_when_body_has_tools(server):
    resp = post(
        server,
        or_body("fake/no-endpoints", tools=[{"type": "function", "function": {"name": "f"}}]),
    )
    assert resp.status_code == 404
    assert resp.json()["error"]["message"].startswith("No endpoints found that support tool use")
    assert post(server, or_body("fake/no-endpoints")).status_code == 200


def test_overloaded_then_ok_fails_first_request_per_server_only():
    with FakeServer(delay_scale=0) as srv:
        first = post(srv, or_body("fake/overloaded-then-ok"))
        second = post(srv, or_body("fake/overloaded-then-ok"))
    assert first.status_code == 502
    assert first.json()["error"]["code"] == 502
    assert second.status_code == 200 and b"[DONE]" in second.content


def test_sse_error_precommit_sends_keepalive_then_429_error_before_content(server):
    resp = post(server, or_body("fake/sse-error-precommit"))
    assert resp.status_code == 200
    events = parse_sse(resp.content)
    assert events[0]["comments"] == ["OPENROUTER PROCESSING"]
    chunks = data_chunks(resp.content)
    assert chunks[0]["error"]["code"] == 429 and chunks[0]["choices"] == []
    assert not content(chunks)


def test_credit_affordability_is_402_unless_max_tokens_is_affordable(server):
    resp = post(server, or_body("fake/credit-affordability"))
    assert resp.status_code == 402
    msg = resp.json()["error"]["message"]
    assert "requires more credits, or fewer max_tokens" in msg
    assert "You requested up to 16384 tokens, but can only afford 1203" in msg
    assert post(server, or_body("fake/credit-affordability", max_tokens=1000)).status_code == 200


def test_context_length_is_400_with_maximum_context_length_message(server):
    resp = post(server, or_body("fake/context-length"))
    assert resp.status_code == 400
    assert resp.json()["error"]["message"].startswith(
        "This endpoint's maximum context length is 8192 tokens. However, you requested about 9500 tokens"
    )


def test_unknown_route_is_404_and_bad_json_is_400(server):
    assert httpx.post(server.base_url + "/nowhere", json={}).status_code == 404
    resp = httpx.post(
        server.base_url + OR_PATH,
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert resp.status_code == 400


# --------------------------------------------------------------------------- robustness


def test_client_disconnect_mid_stream_is_silent_and_server_keeps_serving(capfd):
    with FakeServer(delay_scale=3) as srv:
        with httpx.Client(timeout=5) as client:
            with client.stream(
                "POST", srv.base_url + OR_PATH, json=or_body("fake/reasoning")
            ) as resp:
                next(resp.iter_raw())
        resp = httpx.post(srv.base_url + OR_PATH, json=or_body("fake/clean"), timeout=5)
        assert resp.status_code == 200
    captured = capfd.readouterr()
    assert captured.err == ""


def test_server_is_quiet_per_request(server, capfd):
    post(server, or_body("fake/clean"))
    post(server, or_body("vendor/nope"))
    assert capfd.readouterr().err == ""


def test_scenarios_lists_every_required_openrouter_id_with_a_description():
    for model in (
        *OPENROUTER_SCENARIOS,
        "fake/reject-min-p",
        "fake/reject-images",
        "fake/no-endpoints",
        "fake/overloaded-then-ok",
        "fake/sse-error-precommit",
        "fake/credit-affordability",
        "fake/context-length",
    ):
        assert SCENARIOS["openrouter"][model]
    assert len(OPENROUTER_SCENARIOS) == 8


# --------------------------------------------------------------------------- other families

OA_PATH = "/v1/chat/completions"


def oa_body(model: str, **extra: Any) -> dict[str, Any]:
    return or_body(model, stream_options={"include_usage": True}, **extra)


def gemini_path(model: str, alt: str = "sse") -> str:
    return f"/v1beta/models/{model}:streamGenerateContent?alt={alt}"


def gemini_body(seed: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "Hi! Any café?"}]}]}
    if seed is not None:
        body["generationConfig"] = {"seed": seed}
    return body


def anthropic_body(model: str) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 1024,
        "stream": True,
        "messages": [{"role": "user", "content": "Hi! Any café tips?"}],
    }


def test_every_family_lists_its_required_scenarios():
    assert {
        "fake/clean",
        "fake/reasoning-content",
        "fake/think-leak",
        "fake/tool-call",
        "fake/invalid-json",
        "fake/length",
        "fake/zai-billing",
        "fake/nvidia-problem",
        "fake/deepseek-insufficient-balance",
        "fake/unknown-model",
        "fake/context-length",
        "fake/nvidia-rate-limit",
        "fake/vllm-multimodal-500",
    } <= set(SCENARIOS["openai"])
    assert {
        "fake/clean",
        "fake/thought-parts",
        "fake/function-call",
        "fake/safety-block",
        "fake/prompt-blocked",
        "fake/text-and-call",
        "fake/overlap-repeat",
    } <= set(SCENARIOS["google"])
    assert {
        "fake/clean",
        "fake/thinking",
        "fake/tool-use",
        "fake/thinking-tool-use",
        "fake/overloaded",
        "fake/http-529",
    } <= set(SCENARIOS["anthropic"])
    assert "fake/unknown-model-404" in SCENARIOS["openrouter"]
    for models in SCENARIOS.values():
        assert all(isinstance(d, str) and d and "\n" not in d for d in models.values())


@pytest.mark.parametrize(
    "path", ["/v1/chat/completions", "/chat/completions", "/v4/chat/completions"]
)
def test_openai_compatible_routes_stream_clean(server, path):
    resp, reads = stream(server, path, oa_body("fake/clean"))
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/event-stream")
    assert resp.headers["x-request-id"].startswith("req_")
    body = b"".join(reads)
    assert parse_sse(body)[-1]["data"] == "[DONE]"
    chunks = data_chunks(body)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    assert all(c["usage"] is None for c in chunks[:-1])
    assert "stop" in finishes(chunks)
    assert server.requests[-1].family == "openai"


def test_openai_usage_chunk_only_with_include_usage():
    chunks = data_chunks(render_body("openai", "fake/clean", body=or_body("fake/clean")))
    assert chunks
    assert all(c["choices"] and "usage" not in c for c in chunks)


def test_openai_reasoning_content_is_deepseek_shaped():
    body = render_body("openai", "fake/reasoning-content")
    assert parse_sse(body)[0]["comments"] == ["keep-alive"]
    chunks = data_chunks(body)
    ds = deltas(chunks)
    assert ds[0] == {"role": "assistant", "content": None, "reasoning_content": ""}
    assert "".join(d.get("reasoning_content") or "" for d in ds).startswith("The user")
    finish = chunks[-1]
    assert finish["choices"][0]["finish_reason"] == "stop"
    assert finish["usage"]["completion_tokens_details"]["reasoning_tokens"] > 0
    assert "prompt_cache_miss_tokens" in finish["usage"]


def test_openai_think_leak_inlines_split_think_tags():
    pieces = [
        d.get("content") or ""
        for d in deltas(data_chunks(render_body("openai", "fake/think-leak")))
    ]
    assert "<th" in pieces and "think>" in pieces
    assert "".join(pieces).startswith("<think>\nThe user")


def test_openai_tool_call_has_two_indexed_calls():
    chunks = data_chunks(render_body("openai", "fake/tool-call"))
    args: dict[int, str] = {}
    for d in deltas(chunks):
        for tc in d.get("tool_calls") or []:
            args[tc["index"]] = args.get(tc["index"], "") + tc["function"]["arguments"]
    assert json.loads(args[0]) == {"city": "Zürich"}
    assert json.loads(args[1]) == {"tz": "Europe/Zurich"}
    assert "tool_calls" in finishes(chunks)


def test_openai_invalid_json_line_mid_stream():
    events = [
        ev["data"] for ev in parse_sse(render_body("openai", "fake/invalid-json")) if ev["data"]
    ]
    bad = []
    for i, data in enumerate(events):
        if data == "[DONE]":
            continue
        try:
            json.loads(data)
        except ValueError:
            bad.append(i)
    assert len(bad) == 1 and 0 < bad[0] < len(events) - 3


def test_openai_length_and_mid_stream_error():
    assert "length" in finishes(data_chunks(render_body("openai", "fake/length")))
    chunks = data_chunks(render_body("openai", "fake/mid-stream-error"))
    assert chunks[-1] == {
        "error": {
            "message": "The server had an error while processing your request. Sorry about that!",
            "type": "server_error",
        }
    }
    assert content(chunks[:-1])


def test_openai_error_bodies(server):
    resp = post(server, oa_body("fake/zai-billing"), OA_PATH)
    assert resp.status_code == 429
    assert resp.json() == {
        "error": {
            "code": "1113",
            "message": "Insufficient balance or no resource package. Please recharge.",
        }
    }
    resp = post(server, oa_body("fake/nvidia-problem", top_k=40), OA_PATH)
    assert resp.status_code == 400
    problem = resp.json()
    assert problem["status"] == 400 and problem["title"] == "Bad Request"
    assert "top_k" in problem["detail"] and "error" not in problem
    assert post(server, oa_body("fake/nvidia-problem"), OA_PATH).status_code == 200
    resp = post(server, oa_body("gpt-9"), OA_PATH)
    assert resp.status_code == 404
    assert resp.json()["error"]["code"] == "model_not_found"


def test_gemini_route_streams_sse_without_done(server):
    resp, reads = stream(
        server,
        gemini_path("fake/clean"),
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    )
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "text/event-stream"
    body = b"".join(reads)
    assert b"[DONE]" not in body and b"event:" not in body
    chunks = data_chunks(body)
    text = "".join(p["text"] for c in chunks for p in c["candidates"][0]["content"]["parts"])
    assert "café" in text
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert all("usageMetadata" in c and c["modelVersion"] == "fake/clean" for c in chunks)
    rec = server.requests[-1]
    assert (rec.family, rec.model, rec.query) == ("google", "fake/clean", "alt=sse")


def test_gemini_without_alt_sse_returns_a_json_array(server):
    resp = post(server, {"contents": []}, gemini_path("fake/clean", alt="json"))
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("application/json")
    assert resp.json()[-1]["candidates"][0]["finishReason"] == "STOP"


def test_gemini_thought_parts_and_function_call():
    chunks = data_chunks(render_body("google", "fake/thought-parts"))
    parts = [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    assert parts[0]["thought"] is True and parts[0]["text"].startswith("**")
    first_answer = next(p for p in parts if not p.get("thought"))
    assert first_answer["thoughtSignature"]
    assert chunks[-1]["usageMetadata"]["thoughtsTokenCount"] > 0
    chunks = data_chunks(render_body("google", "fake/function-call"))
    call_part = chunks[-1]["candidates"][0]["content"]["parts"][0]
    assert call_part["functionCall"] == {
        "name": "get_weather",
        "args": {"city": "Zürich", "days": 3},
    }
    assert call_part["thoughtSignature"]
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


def test_gemini_safety_block_is_a_safety_finish_on_every_seed():
    for seed in range(3):
        chunks = data_chunks(render_body("google", "fake/safety-block", seed=seed))
        assert "candidates" in chunks[0] and chunks[0]["candidates"][0]["content"]["parts"]
        last = chunks[-1]["candidates"][0]
        assert last["finishReason"] == "SAFETY" and "content" not in last
        assert last["safetyRatings"][0]["blocked"] is True
        assert not any("promptFeedback" in c for c in chunks)


def test_gemini_prompt_blocked_is_one_prompt_feedback_chunk_on_every_seed(server):
    for seed in range(3):
        chunks = data_chunks(render_body("google", "fake/prompt-blocked", seed=seed))
        assert len(chunks) == 1 and "candidates" not in chunks[0]
        assert chunks[0]["promptFeedback"] == {"blockReason": "PROHIBITED_CONTENT"}
        usage = chunks[0]["usageMetadata"]
        assert set(usage) == {"promptTokenCount", "totalTokenCount"}
        assert usage["totalTokenCount"] == usage["promptTokenCount"]
    body = gemini_body(seed=2)
    resp, reads = stream(server, gemini_path("fake/prompt-blocked"), body)
    assert resp.status_code == 200 and resp.headers["content-type"] == "text/event-stream"
    assert b"".join(reads) == render_body("google", "fake/prompt-blocked", seed=2, body=body)


def test_gemini_unknown_model_is_404_not_found(server):
    resp = post(server, {"contents": []}, gemini_path("gemini-pro"))
    assert resp.status_code == 404
    assert resp.json()["error"]["status"] == "NOT_FOUND"
    assert resp.json()["error"]["message"].startswith("models/gemini-pro is not found")


def test_anthropic_route_streams_named_events_in_order(server):
    resp, reads = stream(server, "/v1/messages", anthropic_body("fake/thinking"))
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert resp.headers["request-id"].startswith("req_")
    events = parse_sse(b"".join(reads))
    names = [ev["event"] for ev in events]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-2:] == ["message_delta", "message_stop"]
    for ev in events:
        assert json.loads(ev["data"])["type"] == ev["event"]
    delta_types = [
        json.loads(ev["data"])["delta"]["type"]
        for ev in events
        if ev["event"] == "content_block_delta"
    ]
    assert delta_types.index("signature_delta") < delta_types.index("text_delta")
    assert b"[DONE]" not in b"".join(reads)


def test_anthropic_tool_use_and_overloaded():
    events = parse_sse(render_body("anthropic", "fake/tool-use"))
    partial = [
        json.loads(ev["data"])["delta"]["partial_json"]
        for ev in events
        if ev["event"] == "content_block_delta" and "partial_json" in ev["data"]
    ]
    assert partial[0] == "" and json.loads("".join(partial)) == {"city": "Zürich", "days": 3}
    last_delta = json.loads(events[-2]["data"])
    assert last_delta["delta"]["stop_reason"] == "tool_use"
    events = parse_sse(render_body("anthropic", "fake/overloaded"))
    assert events[-1]["event"] == "error"
    assert json.loads(events[-1]["data"])["error"]["type"] == "overloaded_error"
    assert "message_stop" not in [ev["event"] for ev in events]


def test_anthropic_http_errors(server):
    resp = post(server, anthropic_body("fake/http-529"), "/v1/messages")
    assert resp.status_code == 529
    assert resp.json()["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert resp.headers["retry-after"]
    resp = post(server, anthropic_body("claude-x"), "/v1/messages")
    assert resp.status_code == 404
    assert resp.json()["error"] == {"type": "not_found_error", "message": "model: claude-x"}


def _scenario_digests() -> dict[str, str]:
    """sha256 of every scenario's full script (self-contained: also run in a subprocess)."""
    import hashlib

    from lab.fakes import SCENARIOS, script

    out = {}
    for family, models in SCENARIOS.items():
        for model in models:
            for seed in (0, 1, 7):
                for call_index in (0, 1):
                    sc = script(family, model, seed=seed, call_index=call_index)
                    data = repr((sc.status, sc.headers, sc.reads, sc.delays)).encode()
                    key = f"{family}|{model}|{seed}|{call_index}"
                    out[key] = hashlib.sha256(data).hexdigest()
    return out


def test_every_scenario_of_every_family_is_deterministic():
    for family, models in SCENARIOS.items():
        for model in models:
            assert scenario_reads(family, model, seed=4) == scenario_reads(family, model, seed=4)
    assert _scenario_digests() == _scenario_digests()


def test_every_scenario_renders_the_same_bytes_in_a_fresh_process():
    """Status, headers, reads and delays do not depend on hash randomization or state."""
    import inspect
    import os
    import subprocess
    import sys

    code = (
        inspect.getsource(_scenario_digests)
        + "\nprint(__import__('json').dumps(_scenario_digests()))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout
    assert json.loads(out) == _scenario_digests()


def test_first_visit_to_each_faulty_backend_faults_so_small_demos_show_leaks():
    spilled = {}
    for seed in range(len(backends_for("openrouter", "fake/spill"))):
        ds = deltas(data_chunks(render_body("openrouter", "fake/spill", seed=seed)))
        provider = data_chunks(render_body("openrouter", "fake/spill", seed=seed))[0]["provider"]
        spilled[provider] = next(d["content"] for d in ds if d.get("content")) == "must do.Hello!"
    assert {p for p, s in spilled.items() if s} == {"Novita", "Parasail"}


def test_concurrent_streams_are_served_in_parallel_and_all_logged():
    from concurrent.futures import ThreadPoolExecutor

    with FakeServer(delay_scale=0.2) as srv:

        def one(seed: int) -> bytes:
            return b"".join(stream(srv, OR_PATH, or_body("fake/reasoning", seed=seed))[1])

        with ThreadPoolExecutor(8) as pool:
            bodies = list(pool.map(one, range(8)))
        assert sorted(r.seed for r in srv.requests) == list(range(8))
    for seed, body in enumerate(bodies):
        expected = render_body(
            "openrouter", "fake/reasoning", seed=seed, body=or_body("fake/reasoning", seed=seed)
        )
        assert body == expected


def test_serve_forever_prints_url_and_scenarios_and_stops_on_ctrl_c():
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-c", "from lab.fakes import serve_forever; serve_forever(0)"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = proc.stdout.readline()
        assert first.startswith("Stream Lab fake providers on http://127.0.0.1:")
        url = first.split(" on ")[1].strip()
        resp = httpx.post(url + OR_PATH, json=or_body("fake/clean"), timeout=5)
        assert resp.status_code == 200
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        # read through the same buffered reader as readline() (communicate() would skip
        # whatever readline() already pulled into the buffer)
        out = first + proc.stdout.read()
        err = proc.stderr.read()
    finally:
        proc.kill()
    assert "fake/think-leak" in out and "anthropic" in out
    assert proc.returncode == 0
    assert err == ""


# --------------------------------------------------------------------------- failure shapes


def test_deepseek_insufficient_balance_is_402_octet_stream(server):
    resp = post(server, oa_body("fake/deepseek-insufficient-balance"), OA_PATH)
    assert resp.status_code == 402
    assert resp.headers["content-type"] == "application/octet-stream"
    assert resp.headers["server"] == "openresty"
    assert len(resp.headers["x-ds-trace-id"]) == 32
    assert json.loads(resp.content) == {
        "error": {
            "message": "Insufficient Balance",
            "type": "unknown_error",
            "param": None,
            "code": "invalid_request_error",
        }
    }
    from lab.errors import classify_error, normalize_http_error

    error = normalize_http_error("deepseek", 402, resp.text)
    assert classify_error(error) == "balance_exhausted"


def test_unknown_model_404_lists_supported_ids_and_classifies_as_model_error(server):
    from lab.errors import classify_error, is_model_error_message, normalize_http_error

    resp = post(server, oa_body("fake/unknown-model"), OA_PATH)
    assert resp.status_code == 404
    assert resp.headers["x-request-id"].startswith("req_")
    err = resp.json()["error"]
    assert err["message"] == (
        "Model 'fake/unknown-model' not found. Supported models: deepseek-chat, deepseek-reasoner"
    )
    assert (err["type"], err["param"], err["code"]) == (
        "invalid_request_error",
        "model",
        "model_not_found",
    )
    assert is_model_error_message(err["message"])  # the text alone, not only the code
    assert classify_error(err["message"]) == "model_error"
    assert normalize_http_error("openai", 404, resp.text).type == "model_error"


def test_openai_context_length_is_400_context_length_exceeded(server):
    from lab.errors import classify_error

    resp = post(server, oa_body("fake/context-length"), OA_PATH)
    assert resp.status_code == 400
    err = resp.json()["error"]
    assert err["code"] == "context_length_exceeded" and err["param"] == "messages"
    assert err["type"] == "invalid_request_error"
    assert err["message"].startswith("This model's maximum context length is 128000 tokens.")
    assert classify_error(err["message"]) == "context_length"


def test_nvidia_rate_limit_is_problem_json_429(server):
    from lab.errors import normalize_http_error

    resp = post(server, oa_body("fake/nvidia-rate-limit"), OA_PATH)
    assert resp.status_code == 429
    assert resp.headers["content-type"] == "application/problem+json"
    assert resp.headers["nvcf-reqid"]
    problem = resp.json()
    assert set(problem) == {"type", "status", "title", "detail"}
    assert problem["type"] == "about:blank"
    assert (problem["status"], problem["title"]) == (429, "Too Many Requests")
    assert problem["detail"].startswith("ResourceExhausted:")
    error = normalize_http_error("nvidia", 429, resp.text)
    assert (error.type, error.retryable) == ("rate_limit", True)


def test_vllm_multimodal_500_only_when_a_message_has_image_parts(server):
    image_msg = {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        ],
    }
    body = {**oa_body("fake/vllm-multimodal-500"), "messages": [image_msg]}
    resp = post(server, body, OA_PATH)
    assert resp.status_code == 500
    assert resp.headers["server"] == "uvicorn"
    assert resp.json() == {
        "object": "error",
        "message": "fake/vllm-multimodal-500 is not a multimodal model",
        "type": "InternalServerError",
        "param": None,
        "code": 500,
    }
    resp, reads = stream(server, OA_PATH, oa_body("fake/vllm-multimodal-500"))
    assert resp.status_code == 200 and parse_sse(b"".join(reads))[-1]["data"] == "[DONE]"


def test_openrouter_unknown_model_404_is_no_endpoints_for_the_id(server):
    resp = post(server, or_body("fake/unknown-model-404"))
    assert resp.status_code == 404
    assert resp.json() == {
        "error": {"message": "No endpoints found for fake/unknown-model-404.", "code": 404},
        "user_id": "user_2vJpEi3p0l05bI4nogxpSKmlno5",
    }


def test_gemini_text_and_call_share_one_chunk(server):
    body = gemini_body(seed=0)
    resp, reads = stream(server, gemini_path("fake/text-and-call"), body)
    assert resp.status_code == 200
    raw = b"".join(reads)
    assert raw == render_body("google", "fake/text-and-call", seed=0, body=body)
    chunks = data_chunks(raw)
    last = chunks[-1]["candidates"][0]
    parts = last["content"]["parts"]
    assert [sorted(p) for p in parts] == [["text"], ["functionCall", "thoughtSignature"]]
    assert parts[0]["text"] == " the forecast for Zürich."
    assert parts[1]["functionCall"] == {
        "name": "get_weather",
        "args": {"city": "Zürich", "days": 3},
    }
    assert last["finishReason"] == "STOP"
    assert last["finishMessage"] == "Model generated function call(s)."
    assert len(chunks) > 1
    assert all(
        "functionCall" not in p for c in chunks[:-1] for p in c["candidates"][0]["content"]["parts"]
    )


def test_gemini_overlap_repeat_resends_the_tail_and_dedup_removes_it(server):
    from lab.fakes.openrouter import ANSWER
    from lab.guards.text import RecentTextDedup

    body = gemini_body(seed=0)
    resp, reads = stream(server, gemini_path("fake/overlap-repeat"), body)
    assert resp.status_code == 200
    chunks = data_chunks(b"".join(reads))
    texts = [p["text"] for c in chunks for p in c["candidates"][0]["content"]["parts"]]
    # every later chunk starts with (>= 8 chars of) what was already sent
    assert len(texts) > 1
    so_far = texts[0]
    for text in texts[1:]:
        assert any(so_far.endswith(text[:k]) for k in range(8, len(text) + 1))
        so_far += text
    assert "".join(texts) != ANSWER
    dedup = RecentTextDedup()
    assert "".join(dedup.filter(t) for t in texts) == ANSWER
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"


def test_anthropic_thinking_then_tool_use(server):
    resp, reads = stream(server, "/v1/messages", anthropic_body("fake/thinking-tool-use"))
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "text/event-stream; charset=utf-8"
    events = [(ev["event"], json.loads(ev["data"])) for ev in parse_sse(b"".join(reads))]
    assert [name for name, _ in events[:2]] == ["message_start", "ping"]
    assert [name for name, _ in events[-2:]] == ["message_delta", "message_stop"]
    starts = [d["content_block"] for n, d in events if n == "content_block_start"]
    assert [b["type"] for b in starts] == ["thinking", "tool_use"]
    assert starts[1]["name"] == "get_weather" and starts[1]["id"].startswith("toolu_01")
    by_block: dict[int, list[dict[str, Any]]] = {}
    for name, data in events:
        if name == "content_block_delta":
            by_block.setdefault(data["index"], []).append(data["delta"])
    thinking = [d["type"] for d in by_block[0]]
    assert thinking[-1] == "signature_delta" and set(thinking[:-1]) == {"thinking_delta"}
    assert by_block[0][-1]["signature"]
    partial = [d["partial_json"] for d in by_block[1]]
    assert {d["type"] for d in by_block[1]} == {"input_json_delta"}
    assert partial[0] == "" and len(partial) >= 3
    assert json.loads("".join(partial)) == {"city": "Zürich", "days": 3}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_gemini_rejects_an_unknown_body_field_as_the_real_api_does(server):
    resp = post(
        server,
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "stream": True},
        gemini_path("fake/clean"),
    )
    assert resp.status_code == 400
    assert resp.headers["content-type"] == "application/json; charset=UTF-8"
    message = 'Invalid JSON payload received. Unknown name "stream": Cannot find field.'
    assert resp.json() == {
        "error": {
            "code": 400,
            "message": message,
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [{"description": message}],
                }
            ],
        }
    }
    assert server.requests[-1].status == 400


def test_gemini_takes_every_request_field_in_either_spelling(server):
    body = {
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "systemInstruction": {"parts": [{"text": "be brief"}]},
        "generation_config": {"temperature": 0.2},
        "safetySettings": [],
        "tools": [],
        "toolConfig": {},
    }
    resp = post(server, body, gemini_path("fake/clean"))
    assert resp.status_code == 200


class _Writes:
    """A text stream that keeps each write() call apart."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_serve_forever_writes_its_whole_banner_in_one_write(monkeypatch):
    """Run unbuffered (PYTHONUNBUFFERED, as CI runners often are), print() writes a line and
    its newline apart, and a proxy started beside the fake server on the same terminal or
    file landed in the middle of the banner. One write keeps each process's lines whole."""
    from lab.fakes import server as fake_server

    def ctrl_c(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(fake_server.time, "sleep", ctrl_c)
    out = _Writes()
    fake_server.serve_forever(0, out=out)  # type: ignore[arg-type]
    (banner,) = out.writes
    assert banner.startswith("Stream Lab fake providers on http://127.0.0.1:")
    assert banner.endswith("\nCtrl-C to stop.\n")
    assert "\nopenrouter  (" in banner and "\nresponses  (" in banner
