"""Real bodies (``tests/realworld/``, provenance in ``sources.json``) of four shapes the lab
misread: Gemini's integer enums, OpenAI refusals, Groq's usage under ``custom``, and a
Responses API body replayed without ``path=``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.anomalies import detect
from lab.config import LabConfig
from lab.replay import replay_sse

HERE = Path(__file__).parent / "realworld"
SOURCES = {s["name"]: s for s in json.loads((HERE / "sources.json").read_text("utf-8"))}
REFUSAL = "I'm sorry, I can't assist with that request."


def _body(name: str) -> bytes:
    return (HERE / SOURCES[name]["file"]).read_bytes()


def test_gemini_integer_enums_give_the_finish_reason_and_no_false_cut():
    body = _body("google-vertex-int-enums-stream-json-array")
    assert b'"finishReason": 1' in body
    for config in (None, LabConfig.complete()):
        r = replay_sse("google", body, config=config)
        assert (r.finish_reason, r.error) == ("stop", None)
        assert r.text == "Okay, I understand.  I'm ready for your test.  Please proceed.\n"
        assert detect(r) == []


def test_an_openai_chat_refusal_is_kept_and_named_under_the_reference():
    r = replay_sse("openai", _body("openai-gpt4o-structured-output-refusal"))
    assert (r.text, r.refusal, r.finish_reason) == ("", REFUSAL, "stop")
    assert detect(r) == ["refusal"]  # no unhandled_shape: delta.refusal is read
    assert "unhandled_shapes" not in r.facts


def test_an_openai_chat_refusal_finishes_content_filter_under_complete():
    r = replay_sse(
        "openai", _body("openai-gpt4o-structured-output-refusal"), config=LabConfig.complete()
    )
    assert (r.text, r.refusal, r.finish_reason) == ("", REFUSAL, "content_filter")
    finishes = [c.metadata["finish_reason"] for c in r.chunks if c.metadata.get("finish_reason")]
    assert finishes == ["content_filter"]  # the chunk the processor reads says it too
    assert (r.usage.input_tokens, r.usage.output_tokens) == (79, 11)


# The Responses API reference's example events (platform.openai.com/docs/api-reference/
# responses-streaming: response.refusal.delta "refusal text so far", response.refusal.done
# "final refusal text"), framed as the API streams them between response.created and
# response.completed. No recorded Responses refusal was found in a public project.
RESPONSES_REFUSAL = "".join(
    f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n"
    for e in [
        {
            "type": "response.created",
            "sequence_number": 0,
            "response": {"id": "resp_1", "object": "response", "status": "in_progress"},
        },
        {
            "type": "response.content_part.added",
            "item_id": "msg_123",
            "output_index": 0,
            "content_index": 0,
            "part": {"type": "refusal", "refusal": ""},
            "sequence_number": 1,
        },
        {
            "type": "response.refusal.delta",
            "item_id": "msg_123",
            "output_index": 0,
            "content_index": 0,
            "delta": "refusal text so far",
            "sequence_number": 2,
        },
        {
            "type": "response.refusal.done",
            "item_id": "msg_123",
            "output_index": 0,
            "content_index": 0,
            "refusal": "refusal text so far",
            "sequence_number": 3,
        },
        {
            "type": "response.completed",
            "sequence_number": 4,
            "response": {
                "id": "resp_1",
                "object": "response",
                "status": "completed",
                "output": [
                    {
                        "id": "msg_123",
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "refusal", "refusal": "refusal text so far"}],
                    }
                ],
                "usage": {"input_tokens": 12, "output_tokens": 4, "total_tokens": 16},
            },
        },
    ]
)


@pytest.mark.parametrize(
    ("config", "finish"), [(None, "stop"), (LabConfig.complete(), "content_filter")]
)
def test_a_responses_refusal_is_kept_once_and_finishes_by_the_switch(config, finish):
    r = replay_sse("openai", RESPONSES_REFUSAL, config=config)  # no path=: known by events
    assert (r.text, r.refusal, r.finish_reason, r.error) == (
        "",
        "refusal text so far",
        finish,
        None,
    )
    assert detect(r) == ["refusal"]


def test_custom_names_groq_usage_under_the_reference_and_reads_it_under_complete():
    body = _body("custom-groq-llama-x-groq-usage-only")
    reference = replay_sse("custom", body)
    assert reference.usage is None
    assert reference.facts["unhandled_shapes"] == {"x_groq.usage": 1}
    assert "unhandled_shape" in detect(reference)
    complete = replay_sse("custom", body, config=LabConfig.complete())
    assert (complete.usage.input_tokens, complete.usage.output_tokens) == (244, 15)
    groq = replay_sse("groq", body)  # the named endpoint reads its own place as before
    assert (groq.usage.input_tokens, groq.usage.output_tokens) == (244, 15)


RESPONSES_BODIES = sorted(
    n
    for n, s in SOURCES.items()
    if s.get("request_path") == "/responses"
    and b"response.created" in (HERE / s["file"]).read_bytes()
)


@pytest.mark.parametrize("name", RESPONSES_BODIES)
def test_a_bare_responses_body_replays_as_with_its_path(name):
    provider, body = SOURCES[name]["provider"], _body(name)
    bare = replay_sse(provider, body, stream_id=name)
    with_path = replay_sse(provider, body, stream_id=name, path="/responses")
    assert (bare.text, bare.reasoning, bare.finish_reason, bare.usage) == (
        with_path.text,
        with_path.reasoning,
        with_path.finish_reason,
        with_path.usage,
    )
    assert bare.error == with_path.error and detect(bare) == detect(with_path)
    # given as reads (of 7 bytes: the first 4 KiB span hundreds), it is known the same way
    reads = [body[i : i + 7] for i in range(0, len(body), 7)]
    split = replay_sse(provider, reads, stream_id=name)
    assert split.attempts[0].body_keys == bare.attempts[0].body_keys == ["input", "model", "stream"]
    whole, parts = bare.to_dict(), split.to_dict()
    del whole["attempts"], parts["attempts"]  # the count of reads differs, as it should
    assert parts == whole
