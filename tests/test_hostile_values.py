"""Hostile values in every field the chat adapters read (issue 19, deliverable 1).

Valid JSON can carry ``1e999`` (parses to ``inf``), the stdlib fallback parser accepts
``NaN``/``Infinity``, and a proxy can send a string where a count belongs or arguments
nested a thousand deep. Properties, for the OpenAI-compatible and OpenRouter families:

- no exception escapes ``replay_sse``, ``StreamResult.to_dict`` or ``lab.tables.streams``;
- a hostile count never becomes a number in the usage: it is left out and its path is
  named in ``facts["hostile_values"]`` (anomaly ``hostile_value``);
- one poisoned stream does not change the result of a good stream replayed beside it.

The long form (2,000 examples per family) runs with ``-m slow``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab import tables
from lab.anomalies import detect
from lab.config import LabConfig
from lab.replay import replay_sse

FAMILIES = ("openai", "openrouter", "custom", "deepseek", "xai")
INF_MARK = "__INF_LITERAL__"
"""Replaced by the literal ``1e999`` in the body text (json.dumps cannot write it)."""

HOSTILE_NUMBERS = st.sampled_from(
    [float("inf"), float("-inf"), float("nan"), INF_MARK, -1, -(10**12), 10**30, 2**53 + 1]
)
HOSTILE_OTHER = st.sampled_from(["12", "", True, False, None, [], {}, [1, 2], {"a": 1}])
HOSTILE = st.one_of(HOSTILE_NUMBERS, HOSTILE_OTHER)


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


ARGUMENTS = st.one_of(
    st.just('{"city": "Bern"}'),
    st.builds(lambda d: '{"a": ' + _deep(d) + "}", st.integers(100, 3000)),
    st.builds(lambda d: '{"a": ' + "[" * d, st.integers(100, 3000)),  # deep and cut
    HOSTILE,
)


@st.composite
def hostile_chunks(draw: Any) -> list[dict]:
    """A short chat stream whose read fields are replaced by hostile values at random."""

    def maybe(good: Any) -> Any:
        return draw(HOSTILE) if draw(st.booleans()) else good

    call = {
        "index": maybe(0),
        "id": maybe("call_1"),
        "type": maybe("function"),
        "function": {"name": maybe("get_weather"), "arguments": draw(ARGUMENTS)},
    }
    usage = {
        "prompt_tokens": maybe(12),
        "completion_tokens": maybe(30),
        "total_tokens": maybe(42),
        "cost": maybe(0.001),
        "prompt_tokens_details": maybe({"cached_tokens": maybe(2)}),
        "completion_tokens_details": maybe({"reasoning_tokens": maybe(10)}),
    }
    delta = {
        "role": maybe("assistant"),
        "content": maybe("Hello"),
        "reasoning_content": maybe("thinking"),
        "reasoning": maybe("thinking"),
        "reasoning_details": maybe([{"type": "reasoning.text", "text": maybe("x")}]),
        "tool_calls": maybe([call]),
    }
    chunks = [
        {
            "id": maybe("a"),
            "provider": maybe("Chutes"),
            "choices": [{"index": maybe(0), "delta": delta, "finish_reason": None}],
        },
        {
            "choices": [{"index": maybe(0), "delta": {}, "finish_reason": maybe("tool_calls")}],
            "usage": usage,
        },
    ]
    if draw(st.booleans()):
        chunks.append({"error": {"code": maybe(502), "message": maybe("boom")}})
    return chunks


def _body(chunks: list[dict]) -> bytes:
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return text.replace(f'"{INF_MARK}"', "1e999").encode()


GOOD = _body(
    [
        {"choices": [{"index": 0, "delta": {"content": "Fine."}, "finish_reason": None}]},
        {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        },
    ]
)


def _check(family: str, chunks: list[dict], config: LabConfig | None) -> None:
    r = replay_sse(family, _body(chunks), config=config, stream_id="poisoned")
    r.to_dict()
    good = replay_sse(family, GOOD, config=config, stream_id="good")
    table = tables.streams([r, good])
    assert list(table["stream_id"]) == ["poisoned", "good"]
    assert good.text == "Fine." and good.usage is not None and good.usage.output_tokens == 2
    if r.usage is not None:
        for name in ("input_tokens", "output_tokens", "reasoning_tokens", "cache_read_tokens"):
            value = getattr(r.usage, name)
            assert isinstance(value, int) and 0 <= value <= 2**53, (name, value)
        assert r.usage.cost is None or 0 <= r.usage.cost < float("inf")
    if r.facts.get("hostile_values"):
        assert "hostile_value" in detect(r)


@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(chunks=hostile_chunks(), complete=st.booleans())
def test_hostile_values_never_escape_a_stream(family, chunks, complete):
    _check(family, chunks, LabConfig.complete() if complete else None)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=2000, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(chunks=hostile_chunks(), complete=st.booleans())
def test_hostile_values_never_escape_a_stream_long(family, chunks, complete):
    _check(family, chunks, LabConfig.complete() if complete else None)


def test_infinite_and_nan_counts_are_left_out_and_named():
    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}],'
        b'"usage":{"prompt_tokens":1e999,"completion_tokens":NaN,"total_tokens":7}}\n\n'
        b"data: [DONE]\n\n"
    )
    for family in ("openai", "openrouter"):
        r = replay_sse(family, body)
        assert (r.text, r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (
            "hi",
            0,
            0,
            7,
        )
        assert r.facts["hostile_values"] == ["usage.prompt_tokens", "usage.completion_tokens"]
        assert "hostile_value" in detect(r)


def test_arguments_nested_past_the_limit_are_kept_raw_with_an_error():
    args = '{"a": ' + _deep(1000) + "}"
    chunks = [
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [{"index": 0, "function": {"name": "f", "arguments": args}}]
                    },
                    "finish_reason": None,
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    for family in ("openai", "openrouter"):
        r = replay_sse(family, _body(chunks))
        (call,) = r.function_calls
        assert call.args == {}
        assert call.provider_fields["raw_arguments"] == args
        assert call.provider_fields["arguments_error"] == (
            "invalid JSON arguments: nested deeper than 128"
        )
