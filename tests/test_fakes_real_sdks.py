"""The fake providers speak like the real APIs: every scenario, at every seed tried, is read
by the real SDK (openai chat and Responses, anthropic, google-genai) without a validation
error, and every event's JSON validates against the SDK's own pydantic types.

Where a real API sends what its SDK's types do not declare, the fake follows the API and
the exemption is named here with the real body that shows it (``tests/realworld/``).
"""

from __future__ import annotations

import json
import typing

import httpx
import pydantic
import pytest

from lab.fakes.openai_responses import RESPONSES_SCENARIOS
from lab.fakes.scenarios import SCENARIOS

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")

SEEDS = range(5)
HI = [{"role": "user", "content": "hi"}]

NOT_JSON = {("openai", "fake/invalid-json")}
"""The scenario whose point is a malformed JSON line mid-stream."""

WIRE_ONLY_EVENTS = {
    "anthropic": {"ping"},  # sent by the API; the SDK skips it, so its union has no type
    # a Responses ``error`` event nests its fields under "error" on the wire
    # (tests/realworld/openai-responses-error-quota.sse); the SDK type reads them flat
    "responses": {"error"},
}

OPENROUTER_ERROR_FINISH = "error"
"""OpenRouter ends a mid-stream error's chunk with ``finish_reason: "error"`` (its own
vocabulary, not in openai's Literal)."""


def _event_classes(union: object) -> dict[str, type[pydantic.BaseModel]]:
    args = typing.get_args(union)
    if typing.get_origin(union) is typing.Annotated:
        return _event_classes(args[0])
    out = {}
    for cls in args:
        for literal in typing.get_args(cls.model_fields["type"].annotation):
            out[literal] = cls
    return out


def _data_lines(body: bytes) -> list[str]:
    return [
        line[len("data: ") :]
        for line in body.decode("utf-8").splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def _validate_chat(family: str, model: str, body: bytes) -> int:
    from openai.types.chat import ChatCompletionChunk

    n = 0
    for line in _data_lines(body):
        if (family, model) in NOT_JSON and not _is_json(line):
            continue
        chunk = json.loads(line)
        if "choices" not in chunk:  # an error object alone (HTTP error body as SSE)
            continue
        if family == "openrouter":
            for choice in chunk["choices"]:
                if choice.get("finish_reason") == OPENROUTER_ERROR_FINISH:
                    choice = dict(choice, finish_reason=None)
                    chunk = dict(chunk, choices=[choice])
        ChatCompletionChunk.model_validate(chunk)
        n += 1
    return n


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _validate_typed(kind: str, body: bytes, classes: dict) -> int:
    n = 0
    for line in _data_lines(body):
        event = json.loads(line)
        if event["type"] in WIRE_ONLY_EVENTS[kind]:
            continue
        classes[event["type"]].model_validate(event)
        n += 1
    return n


@pytest.fixture(scope="module")
def raw(fake_server):
    client = httpx.Client(base_url=fake_server.base_url)
    yield client
    client.close()


@pytest.mark.parametrize("family", ["openai", "openrouter"])
def test_every_chat_scenario_validates_as_openai_chat_chunks(raw, fake_server, family):
    path = "/v1/chat/completions" if family == "openai" else "/api/v1/chat/completions"
    sdk = openai.OpenAI(base_url=fake_server.family_base_url(family), api_key="sk-x", max_retries=0)
    validated = 0
    for model in SCENARIOS[family]:
        for seed in SEEDS:
            body = {"model": model, "messages": HI, "stream": True, "seed": seed}
            validated += _validate_chat(family, model, raw.post(path, json=body).content)
            if (family, model) in NOT_JSON:
                continue
            try:
                for _ in sdk.chat.completions.create(
                    model=model, messages=HI, stream=True, seed=seed
                ):
                    pass
            except openai.APIError:  # the scenario is an API error: the SDK's own type
                pass
    sdk.close()
    assert validated > len(SCENARIOS[family]) * len(SEEDS)


@pytest.mark.parametrize("flavour", ["/v1", "/api/v1"])
def test_every_responses_scenario_validates_as_openai_stream_events(raw, fake_server, flavour):
    from openai.types.responses import ResponseStreamEvent

    classes = _event_classes(ResponseStreamEvent)
    sdk = openai.OpenAI(base_url=fake_server.base_url + flavour, api_key="sk-x", max_retries=0)
    validated = 0
    for model in RESPONSES_SCENARIOS:
        for seed in SEEDS:
            seeded = {"X-Fake-Seed": str(seed)}
            body = {"model": model, "input": "hi", "stream": True}
            content = raw.post(flavour + "/responses", json=body, headers=seeded).content
            validated += _validate_typed("responses", content, classes)
            try:
                for _ in sdk.responses.create(
                    model=model, input="hi", stream=True, extra_headers=seeded
                ):
                    pass
            except openai.APIError:
                pass
    sdk.close()
    assert validated > len(RESPONSES_SCENARIOS) * len(SEEDS)


def test_every_anthropic_scenario_validates_as_anthropic_stream_events(raw, fake_server):
    from anthropic.types import ErrorResponse, RawMessageStreamEvent

    classes = {**_event_classes(RawMessageStreamEvent), "error": ErrorResponse}
    sdk = anthropic.Anthropic(base_url=fake_server.base_url, api_key="sk-x", max_retries=0)
    validated = 0
    for model in SCENARIOS["anthropic"]:
        for seed in SEEDS:
            seeded = {"X-Fake-Seed": str(seed)}
            body = {"model": model, "messages": HI, "max_tokens": 64, "stream": True}
            content = raw.post("/v1/messages", json=body, headers=seeded).content
            validated += _validate_typed("anthropic", content, classes)
            try:
                for _ in sdk.messages.create(
                    model=model, max_tokens=64, messages=HI, stream=True, extra_headers=seeded
                ):
                    pass
            except anthropic.APIError:
                pass
    sdk.close()
    assert validated > len(SCENARIOS["anthropic"]) * len(SEEDS)


def test_google_genai_reads_every_gemini_scenario_at_every_seed(fake_server):
    genai = pytest.importorskip("google.genai")
    from google.genai import errors

    client = genai.Client(
        api_key="AIza-x", http_options=genai.types.HttpOptions(base_url=fake_server.base_url)
    )
    read, api_errors = 0, []
    for model in SCENARIOS["google"]:
        for seed in SEEDS:
            config = genai.types.GenerateContentConfig(seed=seed)
            try:
                for response in client.models.generate_content_stream(
                    model=model, contents="hi", config=config
                ):
                    read += 1
                    for candidate in response.candidates or ():
                        for part in candidate.content.parts if candidate.content else ():
                            if part.thought_signature is not None:  # decoded base64 bytes
                                assert isinstance(part.thought_signature, bytes)
            except errors.APIError as exc:  # an error the scenario sends, as the API would
                api_errors.append((model, exc.code))
    assert read > len(SCENARIOS["google"]) * len(SEEDS)
    assert sorted(set(api_errors)) == [("fake/mid-stream-error", 503)]
