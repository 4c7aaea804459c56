"""Gemini streamGenerateContent adapter through the full stack."""

from __future__ import annotations

import json
from typing import Any

import httpx

from lab.anomalies import detect
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


# -- streamed function calls, JSON-array framing, cuts, shapes (issue 18) ----------------------

ASSEMBLE = LabConfig(assemble_function_calls=True)


def call_part(**fc: Any) -> dict:
    return {"functionCall": fc}


def pa(path: str, **value: Any) -> dict:
    return {"jsonPath": path, **value}


def streamed_call_body() -> bytes:
    """One call streamed as partialArgs (nested objects, arrays, a string in three pieces,
    number, bool, null), ended by an empty functionCall; STOP comes in a later chunk."""
    return sse(
        resp([{**call_part(name="plan", willContinue=True), "thoughtSignature": "CikSig"}]),
        resp(
            [
                call_part(
                    partialArgs=[pa("$.trip.city", stringValue="Zür", willContinue=True)],
                    willContinue=True,
                )
            ]
        ),
        resp(
            [
                call_part(
                    partialArgs=[pa("$.trip.city", stringValue="ich", willContinue=True)],
                    willContinue=True,
                )
            ]
        ),
        resp([call_part(partialArgs=[pa("$.trip.city", stringValue="")], willContinue=True)]),
        resp(
            [
                call_part(
                    partialArgs=[
                        pa("$.trip.days[0].n", numberValue=1),
                        pa("$.trip.days[0].rain", boolValue=False),
                    ],
                    willContinue=True,
                )
            ]
        ),
        resp(
            [
                call_part(
                    partialArgs=[
                        pa("$.trip.days[1].n", numberValue=2.5),
                        pa("$.note", nullValue=None),
                    ],
                    willContinue=True,
                )
            ]
        ),
        resp([call_part(willContinue=True)]),
        resp([call_part()]),
        resp([call_part(name="read_theme")]),
        resp([{"text": ""}], "STOP"),
    )


def test_streamed_function_call_arguments_assemble_into_whole_calls():
    r = replay_sse("google", streamed_call_body(), config=ASSEMBLE)
    assert r.error is None and r.finish_reason == "tool_calls"
    assert [(c.name, c.args, c.arguments_truncated) for c in r.function_calls] == [
        (
            "plan",
            {
                "trip": {"city": "Zürich", "days": [{"n": 1, "rain": False}, {"n": 2.5}]},
                "note": None,
            },
            False,
        ),
        ("read_theme", {}, False),
    ]
    assert r.function_calls[0].thought_signature == "CikSig"
    assert detect(r) == []


def test_under_the_reference_rule_streamed_fragments_are_named_tool_calls_dropped():
    r = replay_sse("google", streamed_call_body())
    assert [c.name for c in r.function_calls] == ["plan", "", "", "", "", "", "", "", "read_theme"]
    assert r.facts["tool_calls_dropped"] == 8
    assert detect(r) == ["tool_calls_dropped"]


def test_every_function_call_part_of_a_chunk_is_built():
    parts = [
        call_part(name="a", args={"x": 1}),
        call_part(name="b", args={"y": 2}),
    ]
    r = replay_sse("google", sse(resp(parts, "STOP")), config=ASSEMBLE)
    assert [(c.name, c.args) for c in r.function_calls] == [("a", {"x": 1}), ("b", {"y": 2})]
    assert r.finish_reason == "tool_calls"
    ref = replay_sse("google", sse(resp(parts, "STOP")))
    assert [c.name for c in ref.function_calls] == ["a"]
    assert ref.chunks[-1].metadata["ignored_function_calls"] == [{"name": "b", "args": {"y": 2}}]
    assert "tool_calls_dropped" in detect(ref)


def test_a_streamed_call_cut_by_the_connection_is_kept_truncated():
    body = sse(
        resp([call_part(name="plan", willContinue=True)]),
        resp(
            [
                call_part(
                    partialArgs=[pa("$.city", stringValue="Zü", willContinue=True)],
                    willContinue=True,
                )
            ]
        ),
    )
    r = replay_sse("google", body, config=ASSEMBLE)
    (call,) = r.function_calls
    assert (call.name, call.args, call.arguments_truncated) == ("plan", {"city": "Zü"}, True)
    assert r.finish_reason is None and r.error is None
    assert {"eof_without_terminator", "truncated_tool_arguments"} <= set(detect(r))


def test_hostile_argument_paths_are_kept_aside_never_built():
    bad = [
        pa("$.x[999999999]", stringValue="far"),
        pa("$" + ".a" * 100, stringValue="deep"),
        pa("no-dollar", numberValue=1),
        pa("$.n", numberValue=float("inf")),
        pa("$.ok", stringValue="yes"),
        pa("$.ok.inner", stringValue="not an object"),
    ]
    r = replay_sse(
        "google", sse(resp([call_part(name="f", partialArgs=bad)], "STOP")), config=ASSEMBLE
    )
    (call,) = r.function_calls
    assert call.args == {"ok": "yes"}
    assert len(call.provider_fields["unread_arguments"]) == 5


def test_a_body_without_alt_sse_is_a_streamed_json_array_and_replays_the_same():
    chunks = [
        json.loads(line[6:])
        for line in streamed_call_body().decode().split("\n")
        if line.startswith("data: ")
    ]
    array = (
        "[" + ",\r\n".join(json.dumps(c, indent=2, ensure_ascii=False) for c in chunks) + "]"
    ).encode()
    want = replay_sse("google", streamed_call_body(), config=ASSEMBLE)
    for reads in ([array], [array[i : i + 5] for i in range(0, len(array), 5)]):
        got = replay_sse("google", reads, config=ASSEMBLE)
        assert [(c.name, c.args) for c in got.function_calls] == [
            (c.name, c.args) for c in want.function_calls
        ]
        assert (got.finish_reason, got.usage, got.error) == (want.finish_reason, want.usage, None)
        assert got.facts["unterminated_tail"] is False


def test_a_json_array_cut_inside_an_element_is_a_truncation():
    array = b'[{"candidates": [{"content": {"parts": [{"text": "Hel"}]}}]},\n{"candidates": [{"content": {"parts": [{"text": "lo'
    r = replay_sse("google", array)
    assert (r.text, r.error, r.finish_reason) == ("Hel", None, None)
    assert r.facts["cut_event_chars"] > 0
    assert "eof_without_terminator" in detect(r)


def test_an_sse_stream_cut_inside_an_event_is_a_truncation_not_invalid_json():
    r = replay_sse("google", sse(resp([{"text": "Hel"}])) + b'data: {"candidates": [{"cont')
    assert (r.text, r.error) == ("Hel", None)
    assert r.facts["invalid_json"] == 0 and r.facts["cut_event_chars"] > 0


def test_final_usage_only_reports_no_usage_before_the_finish_chunk():
    cut = sse(resp([{"text": "Hel"}]))
    assert replay_sse("google", cut).usage.input_tokens == 138  # the reference: running count
    r = replay_sse("google", cut, config=LabConfig(final_usage_only=True))
    assert r.usage is None and r.facts["provisional_usage"]["input_tokens"] == 138
    assert detect(r) == ["eof_without_terminator", "usage_not_final"]
    whole = replay_sse(
        "google", cut + sse(resp([{"text": "lo"}], "STOP")), config=LabConfig(final_usage_only=True)
    )
    assert whole.usage.input_tokens == 138 and "provisional_usage" not in whole.facts


def test_unread_fields_are_counted_per_path_and_candidate_extras_kept():
    grounding = {"webSearchQueries": ["tides"]}
    chunk = resp(
        [{"text": "ok"}, {"executableCode": {"code": "print(1)"}}],
        "STOP",
        usage={"promptTokenCount": 3, "candidatesTokenCount": 1, "futureCount": 2},
        sdkExtra={"x": 1},
    )
    chunk["candidates"][0]["groundingMetadata"] = grounding
    r = replay_sse("google", sse(chunk))
    assert r.text == "ok"
    assert r.facts["unhandled_shapes"] == {
        "sdkExtra": 1,
        "candidates.content.parts.executableCode": 1,
        "usageMetadata.futureCount": 1,
    }
    assert r.chunks[-1].metadata["groundingMetadata"] == grounding


def test_hostile_usage_numbers_never_raise():
    usage = {
        "promptTokenCount": 1e999,
        "candidatesTokenCount": -4,
        "totalTokenCount": "9",
        "thoughtsTokenCount": 3,
    }
    r = replay_sse("google", sse(resp([{"text": "ok"}], "STOP", usage=usage)))
    assert r.text == "ok" and r.error is None
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (0, 3, None)
    assert r.facts["hostile_values"] == [
        "usageMetadata.promptTokenCount",
        "usageMetadata.candidatesTokenCount",
        "usageMetadata.totalTokenCount",
    ]
    assert "hostile_value" in detect(r)


def test_every_real_gemini_body_reads_every_field_it_carries():
    import pathlib

    for path in sorted(pathlib.Path(__file__).parent.glob("realworld/google-*.sse")):
        r = replay_sse("google", path.read_bytes(), config=LabConfig.complete())
        assert "unhandled_shapes" not in r.facts, (path.name, r.facts.get("unhandled_shapes"))


def test_streamed_function_args_scenario_records_live_and_replays_assembled(fake_server, tmp_path):
    from lab.recorder import Recorder
    from lab.replay import replay
    from lab.request import build_body

    body = build_body("google", model="fake/streamed-function-args", prompt="plan my trip")
    assert "stream" not in body
    with Recorder(tmp_path, config=LabConfig.complete()) as rec:
        live = rec.record("google", body, base_url=fake_server.base_url + "/v1beta", api_key="k")
    want = {
        "trip": {
            "city": "Zürich",
            "days": [{"date": "2026-12-02", "hours": 6}, {"date": "2026-12-03", "hours": 4.5}],
            "museum_pass": True,
        }
    }
    assert [(c.name, c.args, c.arguments_truncated) for c in live.function_calls] == [
        ("plan_trip", want, False)
    ]
    assert live.finish_reason == "tool_calls" and live.function_calls[0].thought_signature
    (again,) = replay(tmp_path, config=LabConfig.complete())
    assert again.function_calls == live.function_calls
    (reference,) = replay(tmp_path)
    assert "tool_calls_dropped" in detect(reference)


# -- integer enums: the Gemini API and Vertex AI number them differently -------------------

VERTEX_PATH = "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro"


def _finish_only(finish: Any, **cand: Any) -> bytes:
    return sse(resp([{"text": "Some text"}]), {"candidates": [{"finishReason": finish, **cand}]})


def test_adapter_for_picks_vertex_numbering_by_the_request_path_or_host():
    from lab.providers import adapter_for
    from lab.providers.google import VertexAdapter

    assert adapter_for("google", VERTEX_PATH + ":streamGenerateContent") is VertexAdapter
    assert adapter_for("google", "https://us-central1-aiplatform.googleapis.com/v1") is (
        VertexAdapter
    )
    assert adapter_for("google", "/v1beta/models/gemini-2.5-pro:streamGenerateContent") is (
        GoogleAdapter
    )
    assert adapter_for("google", None) is GoogleAdapter
    assert adapter_for("openai", VERTEX_PATH) is get_adapter("openai")  # only Gemini's family


def test_finish_reason_6_is_language_on_the_gemini_api_and_blocklist_on_vertex():
    body = _finish_only(6)
    gemini = replay_sse("google", body)
    assert gemini.error is None and gemini.finish_reason == "language"
    vertex = replay_sse("google", body, path=VERTEX_PATH + ":streamGenerateContent")
    assert vertex.finish_reason == "content_filter"
    assert (vertex.error.type, vertex.error.code) == ("content_blocked", "BLOCKLIST")
    assert vertex.error.message == "Response stopped/blocked. Reason: BLOCKLIST"


def test_prompt_block_reason_5_is_image_safety_on_the_gemini_api_and_model_armor_on_vertex():
    body = sse({"promptFeedback": {"blockReason": 5, "safetyRatings": []}})
    assert replay_sse("google", body).error.code == "IMAGE_SAFETY"
    vertex = replay_sse("google", body, path=VERTEX_PATH + ":streamGenerateContent")
    assert vertex.error.message == "Prompt blocked by API. Reason: MODEL_ARMOR"


def test_an_unknown_enum_number_keeps_its_digits():
    r = replay_sse("google", _finish_only(99))
    assert r.finish_reason == "99"


def test_safety_ratings_of_the_blocking_chunk_are_read_by_name_with_scores():
    ratings = [
        {"category": 2, "probability": 4, "blocked": True, "probabilityScore": 0.9, "severity": 3},
        {"category": 1, "probability": 1, "probabilityScore": 0.1, "severityScore": 0.05},
        "not a rating",
    ]
    r = replay_sse(
        "google",
        _finish_only(3, safetyRatings=ratings),
        path=VERTEX_PATH + ":streamGenerateContent",
    )
    assert r.facts["safety_ratings"] == [
        {
            "category": "HARM_CATEGORY_DANGEROUS_CONTENT",
            "probability": "HIGH",
            "probability_score": 0.9,
            "severity": "HARM_SEVERITY_MEDIUM",
            "severity_score": None,
            "blocked": True,
        },
        {
            "category": "HARM_CATEGORY_HATE_SPEECH",
            "probability": "NEGLIGIBLE",
            "probability_score": 0.1,
            "severity": None,
            "severity_score": 0.05,
            "blocked": False,
        },
    ]
    from lab import tables

    assert tables.streams([r])["safety"].tolist() == [
        "HARM_CATEGORY_DANGEROUS_CONTENT HIGH (p 0.90, HARM_SEVERITY_MEDIUM) blocked"
    ]
    # the Gemini API numbers categories otherwise: 2 is TOXICITY there
    gemini = replay_sse("google", _finish_only(3, safetyRatings=ratings))
    assert gemini.facts["safety_ratings"][0]["category"] == "HARM_CATEGORY_TOXICITY"


def test_a_prompt_block_names_its_ratings_and_an_unblocked_stream_has_no_safety():
    body = sse(
        {
            "promptFeedback": {
                "blockReason": "SAFETY",
                "safetyRatings": [
                    {"category": "HARM_CATEGORY_HARASSMENT", "probability": "MEDIUM"},
                    {"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "LOW"},
                ],
            }
        }
    )
    from lab import tables

    st = tables.streams([replay_sse("google", body), replay_sse("google", _finish_only("STOP"))])
    assert st["safety"].iloc[0] == "HARM_CATEGORY_HARASSMENT MEDIUM"
    assert st["safety"].isna().tolist() == [False, True]


def test_hostile_safety_rating_values_never_raise():
    from lab.providers.google import google_safety_ratings

    got = google_safety_ratings(
        [
            {"category": True, "probability": 10**400, "probabilityScore": 10**400},
            {"probabilityScore": float("nan"), "severityScore": "0.5", "blocked": "yes"},
        ]
    )
    assert got == [
        {
            "category": None,
            "probability": str(10**400),
            "probability_score": None,
            "severity": None,
            "severity_score": None,
            "blocked": False,
        },
        {
            "category": None,
            "probability": None,
            "probability_score": None,
            "severity": None,
            "severity_score": None,
            "blocked": False,
        },
    ]
    assert google_safety_ratings({"not": "a list"}) == []


def test_live_request_to_a_vertex_base_url_reads_vertex_numbering():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(
            200, content=_finish_only(6), headers={"content-type": "text/event-stream"}
        )

    r = run_stream(
        "google",
        {"model": "gemini-2.5-pro", "contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
        transport=httpx.MockTransport(handler),
        base_url="https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/"
        "us-central1/publishers/google",
        api_key="k",
    )
    assert seen == [
        "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/"
        "publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
    ]
    assert r.error.code == "BLOCKLIST"
