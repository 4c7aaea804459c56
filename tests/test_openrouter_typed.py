"""OpenRouter's typed fast path (msgspec) builds what the general way builds.

``decode_typed_chunk(line, bad)`` decodes a data line of the common shape straight into
typed structs and returns the normalized chunk; for any other line it returns None and the
adapter parses the line as JSON and runs ``normalize_openrouter_chunk``. On generated
chunks (every key the shape check knows, a few it does not; values of the right type, of
the wrong type, hostile) the fast path either declines or returns exactly the normalized
chunk and the same hostile-count paths.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.providers import openrouter
from lab.providers.openai_compat import CHOICE_KEYS, CHUNK_KEYS, DELTA_KEYS
from lab.providers.openrouter import normalize_openrouter_chunk

pytestmark = pytest.mark.skipif(
    openrouter.decode_typed_chunk is None, reason="msgspec is not the lab's JSON parser here"
)

HERE = Path(__file__).parent / "realworld"

ANY = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.integers(min_value=2**63, max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
STR = st.text(max_size=6)


def _chunks(hostile: bool) -> st.SearchStrategy:
    """Chunks with every key the shape check knows, at random. **hostile**: any value may
    be of another type, and now and then a key the typed path does not take is added (an
    error, a wrapper, a key nobody reads); else every value has a type the typed path takes
    (None included)."""

    def maybe(good: st.SearchStrategy) -> st.SearchStrategy:
        return st.one_of(good, st.none(), ANY) if hostile else st.one_of(good, st.none())

    def foreign(base: st.SearchStrategy, keys: list[str]) -> st.SearchStrategy:
        if not hostile:
            return base
        extra = st.one_of(st.just({}), st.builds(lambda k, v: {k: v}, st.sampled_from(keys), ANY))
        return st.builds(lambda b, e: {**b, **e}, base, extra)

    tool_call = st.fixed_dictionaries(
        {},
        optional={
            "index": maybe(st.integers(-2, 3)),
            "id": maybe(STR),
            "type": maybe(st.just("function")),
            "function": maybe(
                st.fixed_dictionaries({}, optional={"name": maybe(STR), "arguments": maybe(STR)})
            ),
        },
    )
    rd_entry = st.fixed_dictionaries({"type": st.just("reasoning.text"), "text": STR})
    delta = st.fixed_dictionaries(
        {},
        optional={
            "role": maybe(st.just("assistant")),
            "content": maybe(STR),
            "reasoning": maybe(STR),
            "reasoning_content": maybe(STR),
            "tool_calls": maybe(st.lists(tool_call, max_size=2)),
            "toolCalls": maybe(st.lists(tool_call, max_size=2)),
            "reasoning_details": maybe(st.lists(rd_entry, max_size=2)),
            "reasoningDetails": maybe(st.lists(rd_entry, max_size=2)),
            "channel": maybe(STR),
        },
    )
    choice = st.fixed_dictionaries(
        {},
        optional={
            "index": maybe(st.integers(-1, 3) | st.integers(2**64, 2**70)),
            "delta": maybe(foreign(delta, ["unknown_delta_key"])),
            "finish_reason": maybe(st.sampled_from(["stop", "length", "tool_calls", "error"])),
            "finishReason": maybe(st.sampled_from(["stop", "tool_calls"])),
            "native_finish_reason": ANY,
            "logprobs": ANY,
            "seed": ANY,
        },
    )
    usage = st.fixed_dictionaries(
        {},
        optional={
            "prompt_tokens": maybe(st.integers(0, 100)),
            "completion_tokens": st.integers(-1, 100) | ANY,  # hostile counts: named in bad
            "total_tokens": maybe(st.integers(0, 300)),
            "cost": maybe(st.floats(0, 1)),
            "completion_tokens_details": maybe(
                st.fixed_dictionaries({}, optional={"reasoning_tokens": maybe(st.integers(0, 9))})
            ),
        },
    )
    chunk = st.fixed_dictionaries(
        {},
        optional={
            "id": maybe(STR),
            "object": maybe(st.just("chat.completion.chunk")),
            "model": maybe(STR),
            "provider": maybe(STR),
            "created": maybe(st.integers(0, 2**40) | st.floats(0, 1e10)),
            "choices": maybe(
                st.lists(foreign(choice, ["usage", "unknown_choice_key"]), max_size=2)
            ),
            "usage": maybe(usage),
            "system_fingerprint": ANY,
        },
    )
    return foreign(chunk, ["error", "data", "message", "code", "type", "unknown_top_key"])


def _general(line: str) -> tuple[Any, list[str]]:
    bad: list[str] = []
    return normalize_openrouter_chunk(json.loads(line), bad), bad


def _check(raw: dict, *, must_take: bool) -> None:
    line = json.dumps(raw)
    bad: list[str] = []
    got = openrouter.decode_typed_chunk(line, bad)
    want, want_bad = _general(line)
    if got is None:
        # declined: only a dropped chunk may be declined when every type is right
        assert not must_take or want is None, line
        return
    assert got == want
    assert list(got) == list(want)  # the same key order
    assert bad == want_bad


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(_chunks(hostile=False))
def test_the_typed_path_takes_every_chunk_of_the_known_shape_and_builds_the_normalized_one(raw):
    _check(raw, must_take=True)


@settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))
@given(_chunks(hostile=True))
def test_the_typed_path_declines_a_foreign_or_hostile_chunk_or_builds_the_normalized_one(raw):
    _check(raw, must_take=False)


@pytest.mark.parametrize(
    "line",
    [
        '{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],"x":null}',
        '{"choices":[{"index":0,"delta":{"content":["a"]},"finish_reason":null}]}',
        '{"choices":[{"index":true,"delta":{"content":"a"}}]}',
        '{"choices":[{"index":0,"delta":{"content":"a"}}],"created":NaN}',
        '{"choices":[{"index":0,"delta":{"content":"a"}}],"created":1e999}',
        '{"choices":[{"index":0,"delta":{"content":"\\ud800"}}]}',
        '{"error":{"code":502,"message":"boom"}}',
        '{"data":"{\\"choices\\":[]}"}',
        '{"choices":[{"index":0,"delta":{},"usage":{"prompt_tokens":1}}]}',
        '{"choices":[{"index":0,"delta":"text"}]}',
        '{"id":"gen-1"}',  # dropped: the general way says so
    ],
)
def test_lines_of_another_shape_or_type_go_the_general_way(line):
    assert openrouter.decode_typed_chunk(line, []) is None


def test_nesting_too_deep_goes_the_general_way_instead_of_raising():
    deep = "[" * 100_000 + "]" * 100_000
    line = '{"choices":[{"delta":{"content":"a"},"logprobs":' + deep + "}]}"
    assert openrouter.decode_typed_chunk(line, []) is None


def test_the_structs_know_exactly_the_keys_the_shape_check_knows():
    fields = openrouter._typed_fields
    assert set(openrouter._TypedChunk.__struct_fields__) == CHUNK_KEYS - {"error"}
    assert set(openrouter._TypedChoice.__struct_fields__) == CHOICE_KEYS | {"finishReason"}
    assert set(openrouter._TypedDelta.__struct_fields__) == DELTA_KEYS | {
        "toolCalls",
        "reasoningDetails",
    }
    assert len(fields) == 3


def test_every_line_of_the_real_openrouter_bodies_goes_either_way_with_the_same_result():
    sources = json.loads((HERE / "sources.json").read_text(encoding="utf-8"))
    typed = general = 0
    for src in sources:
        if src["provider"] != "openrouter" or not src["file"].endswith(".sse"):
            continue
        for raw_line in (HERE / src["file"]).read_bytes().decode("utf-8", "replace").splitlines():
            if not raw_line.startswith("data:"):
                continue
            line = raw_line[5:].strip()
            if not line or line == "[DONE]":
                continue
            got = openrouter.decode_typed_chunk(line, bad := [])
            if got is None:
                general += 1
                continue
            typed += 1
            assert (got, bad) == _general(line), (src["name"], line)
    assert typed > 100 and general > 0, (typed, general)  # both ways are exercised


def test_every_chunk_of_the_benchmark_body_takes_the_typed_path():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_common", Path(__file__).resolve().parent.parent / "bench" / "_common.py"
    )
    assert spec is not None and spec.loader is not None
    bench_common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_common)
    lines = [
        line[6:].decode()
        for line in bench_common.openrouter_body(500).split(b"\n")
        if line.startswith(b"data: {")
    ]
    assert len(lines) == 500
    for line in lines:
        got = openrouter.decode_typed_chunk(line, bad := [])
        assert got is not None and (got, bad) == _general(line)
