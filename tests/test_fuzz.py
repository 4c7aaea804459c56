"""Fuzzing every provider family through the whole stack (``replay_sse``).

Inputs start from the fake providers' real bodies (every scenario of the family, a few
seeds) and are mutated the ways networks and backends break streams: truncation anywhere,
CRLF / CR line endings, reads split at any byte (inside UTF-8 characters and CRLF pairs),
garbage and binary lines, JSON that is not an object, duplicated and swapped events,
duplicate JSON keys (either one winning), very long lines.

Properties, for every input:

- no exception escapes ``replay_sse``; a failure is an error result (``result.error``);
- nothing is fabricated: every character of the visible text and the reasoning comes from
  a string value in the input's JSON payloads (as a multiset: never more copies than sent);
- the result does not depend on how the bytes were split into reads, nor on the line
  ending style (LF, CRLF, CR);
- memory stays bounded: a 1 MB (10 MB in the slow run) line costs at most
  ``PEAK_BYTES_PER_INPUT_BYTE`` times its size in traced allocations.

And ``lab.guards.repair_truncated_json`` over random truncations of valid JSON: the result
is None or the original with trailing entries dropped, never a changed or invented value.

And hostile values (``1e999``, ``NaN``, negative, huge, wrong types, 2,000-deep nesting) in
every field the Gemini and Anthropic adapters read, under the default and the complete
config: no exception, nothing fabricated, the result serializes.

Default run: ~200 examples per family. ``pytest -m slow tests/test_fuzz.py``: 10,000 per
family, every split position, 10 MB lines, 10,000 JSON truncations.
"""

from __future__ import annotations

import json
import random
import tracemalloc
from collections import Counter
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from json_props import is_prefix_subset, objects

from lab.http.sse import iter_sse
from lab.model import ProviderError
from lab.replay import replay_sse
from lab.result import StreamResult

FAMILIES = ("openrouter", "openai", "google", "anthropic")
DEFAULT_EXAMPLES = 200
SLOW_EXAMPLES = 10_000
PEAK_BYTES_PER_INPUT_BYTE = 12
"""Memory bound: tracemalloc peak of one replay <= this x input size (+ a fixed 4 MB)."""
PEAK_FIXED_BYTES = 4 * 1024 * 1024

_SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)

GARBAGE_LINES = (
    b"data: {",
    b"data: not json at all",
    b"data: [1, 2, 3]",
    b"data: null",
    b'data: "a string"',
    b"data: 42",
    b'data: {"choices": 5}',
    b'data: {"choices": [null, 1, "x"]}',
    b'data: {"choices": [{"delta": null}]}',
    b'data: {"choices": [{"delta": {"content": 7, "reasoning": []}}]}',
    b'data: {"error": 3}',
    b'data: {"error": {"message": null}}',
    b'data: {"candidates": "x"}',
    b'data: {"type": "content_block_delta", "index": "z", "delta": 5}',
    b'data: {"type": "message_delta"}',
    b"data: \xff\xfe\x00\x01 binary \xc3",
    b"\x00\x00\x00",
    b"event: error",
    b"event: \xff",
    b"id: \x00bad",
    b"retry: soon",
    b": keep-alive",
    b"data:",
    b"data",
    b"\xef\xbb\xbfdata: {}",
)


# -- inputs -----------------------------------------------------------------------------------


@cache
def base_bodies(family: str) -> tuple[bytes, ...]:
    from lab.fakes import SCENARIOS, render_body

    return tuple(render_body(family, m, seed=s) for m in SCENARIOS[family] for s in range(3))


def _lines(body: bytes) -> list[bytes]:
    return body.split(b"\n")


def _dup_key(rng: random.Random, body: bytes) -> bytes:
    """Give one JSON payload a duplicate key: the junk value first (the real one wins) or
    last (the junk wins)."""
    lines = _lines(body)
    idx = [i for i, ln in enumerate(lines) if ln.startswith(b"data: {") and ln.endswith(b"}")]
    if not idx:
        return body
    i = rng.choice(idx)
    try:
        obj = json.loads(lines[i][6:])
    except ValueError:
        return body
    if not isinstance(obj, dict) or not obj:
        return body
    key = json.dumps(rng.choice(list(obj))).encode()
    junk = rng.choice([b"null", b"1", b'"junk"', b"[]", b"{}", b'{"content": "x"}'])
    payload = lines[i][6:]
    if rng.random() < 0.5:
        lines[i] = b"data: {" + key + b":" + junk + b"," + payload[1:]
    else:
        lines[i] = b"data: " + payload[:-1] + b"," + key + b":" + junk + b"}"
    return b"\n".join(lines)


def mutate(rng: random.Random, body: bytes, ops: list[str], long_line: int) -> bytes:
    for op in ops:
        if op == "truncate" and body:
            body = body[: rng.randrange(len(body) + 1)]
        elif op == "crlf":
            body = body.replace(b"\n", b"\r\n")
        elif op == "cr":
            body = body.replace(b"\n", b"\r")
        elif op == "garbage":
            lines = _lines(body)
            junk = rng.choice(GARBAGE_LINES) if rng.random() < 0.8 else rng.randbytes(40)
            lines.insert(
                rng.randrange(len(lines) + 1), junk + (b"\n" if rng.random() < 0.5 else b"")
            )
            body = b"\n".join(lines)
        elif op == "dup_line":
            lines = _lines(body)
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            body = b"\n".join(lines)
        elif op == "swap":
            events = body.split(b"\n\n")
            if len(events) > 2:
                i, j = rng.randrange(len(events)), rng.randrange(len(events))
                events[i], events[j] = events[j], events[i]
                body = b"\n\n".join(events)
        elif op == "dup_event":
            events = body.split(b"\n\n")
            i = rng.randrange(len(events))
            events.insert(i, events[i])
            body = b"\n\n".join(events)
        elif op == "dup_key":
            body = _dup_key(rng, body)
        elif op == "long_line":
            text = ("é" * (long_line // 2)).encode()
            line = rng.choice(
                [
                    b'data: {"choices":[{"delta":{"content":"' + text + b'"}}]}',
                    b"data: " + text,
                    b": " + text,
                    b'data: {"x":"' + text,  # cut inside the string
                ]
            )
            lines = _lines(body)
            lines.insert(rng.randrange(len(lines) + 1), line)
            body = b"\n".join(lines)
    return body


def split_reads(rng: random.Random, body: bytes, n: int) -> list[bytes]:
    if n <= 1 or len(body) < 2:
        return [body]
    cuts = sorted(rng.sample(range(1, len(body)), min(n - 1, len(body) - 1)))
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]


OPS = ("truncate", "crlf", "cr", "garbage", "dup_line", "swap", "dup_event", "dup_key", "long_line")


# -- properties -------------------------------------------------------------------------------


def json_strings(body: bytes) -> Counter:
    """Multiset of characters of every string value in every JSON payload of ``body``,
    taking each data line alone and each event's joined data (either may be what a family
    parses)."""
    pool: Counter = Counter()
    payloads: list[str] = []
    for ev in iter_sse([body]):
        if ev.data is None:
            continue
        payloads.append(ev.data)
        if "\n" in ev.data:
            payloads.extend(ev.data.split("\n"))
    for p in payloads:
        try:
            obj = json.loads(p)
        except (ValueError, RecursionError):  # hostile nesting holds no string to count
            continue
        _walk(obj, pool)
    return pool


def _walk(obj: Any, pool: Counter) -> None:
    if isinstance(obj, str):
        pool.update(obj)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            pool.update(k)
            _walk(v, pool)
    elif isinstance(obj, list):
        for v in obj:
            _walk(v, pool)


def check_result(r: StreamResult, body: bytes) -> None:
    assert isinstance(r, StreamResult)
    assert r.error is None or isinstance(r.error, ProviderError)
    for c in r.chunks:
        assert c.type in ("text", "function_call", "error", "done")
    produced = Counter(r.text) + Counter(r.reasoning)
    if produced:
        missing = produced - json_strings(body)
        assert not missing, f"fabricated characters: {dict(missing)!r}"


def comparable(r: StreamResult) -> dict:
    """The result without what legitimately depends on read boundaries."""
    d = r.to_dict()
    for a in d["attempts"]:
        a.pop("n_reads", None)
    return d


def fuzz_family(family: str, examples: int, long_line: int) -> None:
    bodies = base_bodies(family)

    @settings(max_examples=examples, **_SETTINGS)
    @given(
        base=st.sampled_from(bodies),
        ops=st.lists(st.sampled_from(OPS), max_size=4),
        seed=st.integers(0, 2**32 - 1),
        n_reads=st.integers(1, 40),
    )
    def check(base: bytes, ops: list[str], seed: int, n_reads: int) -> None:
        rng = random.Random(seed)
        body = mutate(rng, base, ops, long_line)
        reads = split_reads(rng, body, n_reads)
        r = replay_sse(family, reads)
        check_result(r, body)
        # read boundaries never change the result
        assert comparable(r) == comparable(replay_sse(family, body))

    check()


@pytest.mark.parametrize("family", FAMILIES)
def test_fuzzed_streams_never_raise_and_never_fabricate(family):
    fuzz_family(family, DEFAULT_EXAMPLES, long_line=2_000)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_fuzzed_streams_never_raise_and_never_fabricate_10k(family):
    fuzz_family(family, SLOW_EXAMPLES, long_line=20_000)


@pytest.mark.parametrize("family", FAMILIES)
def test_pure_garbage_yields_no_text(family):
    rng = random.Random(family)
    for _ in range(50):
        lines = [rng.choice(GARBAGE_LINES) if rng.random() < 0.7 else rng.randbytes(30)]
        lines += [rng.choice(GARBAGE_LINES) for _ in range(rng.randrange(6))]
        body = b"\n\n".join(lines)
        r = replay_sse(family, body)
        check_result(r, body)
        assert r.function_calls == [] or family == "anthropic"


_NOT_YET_FIXED: set[str] = set()  # every family catches RecursionError now


@pytest.mark.parametrize(
    "family",
    [
        pytest.param(
            f,
            marks=pytest.mark.xfail(
                f in _NOT_YET_FIXED,
                raises=RecursionError,
                strict=True,
                reason="json.loads raises RecursionError (not ValueError) on deep nesting; "
                "the adapter catches only ValueError",
            ),
        )
        for f in FAMILIES
    ],
)
def test_deeply_nested_json_line_is_garbage_not_a_crash(family):
    for body in (
        b"data: " + b"[" * 100_000 + b"\n\n",
        b'data: {"a":' * 5_000 + b"\n\n",
    ):
        check_result(replay_sse(family, body), body)


# -- split invariance at every position --------------------------------------------------------


def _split_positions(body: bytes, every: bool) -> list[int]:
    if every:
        return list(range(1, len(body)))
    interesting = {i for i, b in enumerate(body) if b >= 0x80 or b in (0x0D, 0x0A)}
    near = {j for i in interesting for j in (i, i + 1) if 0 < j < len(body)}
    return sorted(near | set(range(1, len(body), 97)))


def split_invariance(family: str, every: bool) -> None:
    from lab.fakes import SCENARIOS, render_body

    for model in SCENARIOS[family]:
        base = render_body(family, model, seed=1)
        for body in (base, base.replace(b"\n", b"\r\n")):
            want = comparable(replay_sse(family, body))
            for pos in _split_positions(body, every):
                got = comparable(replay_sse(family, [body[:pos], body[pos:]]))
                assert got == want, (model, pos, body[max(0, pos - 20) : pos + 20])
        # every line ending style gives the same result
        assert comparable(replay_sse(family, base.replace(b"\n", b"\r"))) == comparable(
            replay_sse(family, base)
        ), model


@pytest.mark.parametrize("family", FAMILIES)
def test_two_read_split_at_utf8_and_crlf_positions_changes_nothing(family):
    split_invariance(family, every=False)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_two_read_split_at_every_position_changes_nothing(family):
    split_invariance(family, every=True)


def test_one_byte_reads_change_nothing():
    from lab.fakes import render_body

    for family, model in (
        ("openrouter", "fake/think-leak"),
        ("openai", "fake/reasoning-content"),
        ("google", "fake/thought-parts"),
        ("anthropic", "fake/thinking"),
    ):
        body = render_body(family, model, seed=2).replace(b"\n", b"\r\n")
        one = [body[i : i + 1] for i in range(len(body))]
        assert comparable(replay_sse(family, one)) == comparable(replay_sse(family, body))


# -- memory ------------------------------------------------------------------------------------


def peak_of(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def long_line_memory(family: str, size: int) -> None:
    from lab.fakes import render_body

    base = render_body(family, "fake/clean", seed=0)
    text = b"x" * size
    cases = [
        b'data: {"choices":[{"delta":{"content":"' + text + b'"}}]}\n\n' + base,
        b"data: " + text + b"\n\n" + base,
        base + b'data: {"x":"' + text,  # cut at EOF inside a string, no newline
        b": " + text + b"\n\n" + base,
    ]
    for body in cases:
        reads = [body[i : i + 65536] for i in range(0, len(body), 65536)]
        peak = peak_of(lambda body=body, reads=reads: check_result(replay_sse(family, reads), body))
        bound = PEAK_BYTES_PER_INPUT_BYTE * len(body) + PEAK_FIXED_BYTES
        assert peak <= bound, f"{family}: peak {peak:,} B > bound {bound:,} B for {len(body):,} B"


@pytest.mark.parametrize("family", FAMILIES)
def test_a_1mb_line_replays_in_bounded_memory(family):
    long_line_memory(family, 1_000_000)


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_a_10mb_line_replays_in_bounded_memory(family):
    long_line_memory(family, 10_000_000)


# -- JSON repair over random truncations ------------------------------------------------------


def repair_truncations(examples: int) -> None:
    from lab.guards import repair_truncated_json

    @settings(max_examples=examples, **_SETTINGS)
    @given(
        obj=objects.filter(bool),
        indent=st.sampled_from([None, 0, 2]),
        ascii_only=st.booleans(),
        frac=st.floats(0, 1),
    )
    def check(obj: dict, indent: int | None, ascii_only: bool, frac: float) -> None:
        text = json.dumps(obj, indent=indent, ensure_ascii=ascii_only)
        cut = text[: min(len(text) - 1, int(frac * len(text)))]
        got = repair_truncated_json(cut)
        assert got is None or (isinstance(got, dict) and is_prefix_subset(got, obj)), (cut, got)

    check()


@pytest.mark.slow
def test_json_repair_never_fabricates_on_10k_random_truncations():
    repair_truncations(10_000)


# -- hostile values in every field an adapter reads (Gemini, Anthropic) ------------------------

_DEEP = "__DEEP__"
_BIG = "__BIG__"
HOSTILE = st.sampled_from(
    [
        float("inf"),  # serialized as Infinity; 1e999 parses to the same
        float("-inf"),
        float("nan"),
        _BIG,  # the literal 1e999
        -1,
        2**64,
        10**30,
        10**400,  # an exact integer past the float range: float() raises OverflowError
        -(10**400),
        3.5,
        "7",
        "",
        None,
        True,
        [],
        {},
        [1, "x"],
        {"a": {"b": None}},
        _DEEP,  # 2,000 nested arrays: past the JSON parser's recursion limit
    ]
)
"""Wire values a hostile or broken endpoint may put in any field."""
SMALL = st.one_of(st.integers(0, 50), st.sampled_from(["", "x", "Zürich", "$.a", "STOP"]))
VALUE = st.one_of(HOSTILE, SMALL)


def _render(obj: Any) -> str:
    text = json.dumps(obj, ensure_ascii=False)  # inf/nan as Infinity/NaN, as some servers do
    return text.replace(f'"{_DEEP}"', "[" * 2000 + "]" * 2000).replace(f'"{_BIG}"', "1e999")


def _maybe(d: dict, draw: Any) -> dict:
    """Each key kept or dropped, so absent, well-typed and hostile all occur."""
    return {k: v for k, v in d.items() if draw(st.booleans())}


@st.composite
def gemini_chunks(draw: Any) -> str:
    partial = _maybe(
        {
            "jsonPath": draw(
                st.one_of(VALUE, st.sampled_from(["$.a", "$.a[0].b", "$.a[1e9]", "$"]))
            ),
            "stringValue": draw(VALUE),
            "numberValue": draw(VALUE),
            "boolValue": draw(VALUE),
            "nullValue": draw(VALUE),
            "willContinue": draw(VALUE),
        },
        draw,
    )
    call = _maybe(
        {
            "name": draw(VALUE),
            "args": draw(st.one_of(VALUE, st.just({"k": float("inf")}))),
            "id": draw(VALUE),
            "partialArgs": draw(st.one_of(VALUE, st.just([partial]), st.just(partial))),
            "willContinue": draw(VALUE),
        },
        draw,
    )
    part = _maybe(
        {
            "text": draw(VALUE),
            "thought": draw(VALUE),
            "thoughtSignature": draw(VALUE),
            "functionCall": draw(st.one_of(VALUE, st.just(call))),
        },
        draw,
    )
    candidate = _maybe(
        {
            "content": draw(
                st.one_of(VALUE, st.just({"parts": [part, part]}), st.just({"parts": draw(VALUE)}))
            ),
            "finishReason": draw(
                st.one_of(VALUE, st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY"]))
            ),
            "index": draw(VALUE),
            "groundingMetadata": draw(VALUE),
            "safetyRatings": draw(VALUE),
        },
        draw,
    )
    usage = {
        k: draw(VALUE)
        for k in (
            "promptTokenCount",
            "candidatesTokenCount",
            "thoughtsTokenCount",
            "cachedContentTokenCount",
            "totalTokenCount",
        )
    }
    chunk = _maybe(
        {
            "candidates": draw(
                st.one_of(VALUE, st.just([candidate]), st.just([candidate, candidate]))
            ),
            "usageMetadata": draw(st.one_of(VALUE, st.just(usage))),
            "promptFeedback": draw(st.one_of(VALUE, st.just({"blockReason": draw(VALUE)}))),
            "error": draw(st.one_of(VALUE, st.just({"code": draw(VALUE), "message": draw(VALUE)}))),
            "thoughtSummary": draw(VALUE),
            "thoughtSignature": draw(VALUE),
            "modelVersion": draw(VALUE),
            "functionCalls": draw(st.one_of(VALUE, st.just([call]))),
            "text": draw(VALUE),
        },
        draw,
    )
    return "data: " + _render(chunk) + "\n\n"


@st.composite
def anthropic_events(draw: Any) -> str:
    usage = {
        k: draw(VALUE)
        for k in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        )
    }
    usage["server_tool_use"] = draw(st.one_of(VALUE, st.just({"web_search_requests": draw(VALUE)})))
    block = _maybe(
        {
            "type": draw(
                st.one_of(
                    VALUE,
                    st.sampled_from(
                        [
                            "text",
                            "thinking",
                            "tool_use",
                            "server_tool_use",
                            "web_search_tool_result",
                            "redacted_thinking",
                        ]
                    ),
                )
            ),
            "id": draw(VALUE),
            "name": draw(VALUE),
            "input": draw(VALUE),
            "text": draw(VALUE),
            "thinking": draw(VALUE),
            "signature": draw(VALUE),
            "data": draw(VALUE),
            "citations": draw(VALUE),
        },
        draw,
    )
    delta = _maybe(
        {
            "type": draw(
                st.one_of(
                    VALUE,
                    st.sampled_from(
                        [
                            "text_delta",
                            "thinking_delta",
                            "signature_delta",
                            "input_json_delta",
                            "citations_delta",
                        ]
                    ),
                )
            ),
            "text": draw(VALUE),
            "thinking": draw(VALUE),
            "signature": draw(VALUE),
            "partial_json": draw(
                st.one_of(VALUE, st.sampled_from(['{"a": ', "1}", '{"x": 1e999}']))
            ),
            "citation": draw(VALUE),
            "stop_reason": draw(
                st.one_of(VALUE, st.sampled_from(["end_turn", "tool_use", "max_tokens"]))
            ),
            "stop_sequence": draw(VALUE),
        },
        draw,
    )
    kind = draw(
        st.sampled_from(
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
                "error",
                "ping",
            ]
        )
    )
    payload = _maybe(
        {
            "type": draw(st.one_of(st.just(kind), VALUE)),
            "index": draw(st.one_of(VALUE, st.integers(0, 3))),
            "message": draw(
                st.one_of(VALUE, st.just({"id": draw(VALUE), "model": draw(VALUE), "usage": usage}))
            ),
            "content_block": draw(st.one_of(VALUE, st.just(block))),
            "delta": draw(st.one_of(VALUE, st.just(delta))),
            "usage": draw(st.one_of(VALUE, st.just(usage))),
            "error": draw(st.one_of(VALUE, st.just({"type": draw(VALUE), "message": draw(VALUE)}))),
        },
        draw,
    )
    return f"event: {kind}\ndata: {_render(payload)}\n\n"


HOSTILE_STREAMS = {"google": gemini_chunks(), "anthropic": anthropic_events()}


def hostile_values(family: str, examples: int) -> None:
    from lab.config import LabConfig

    @settings(max_examples=examples, **_SETTINGS)
    @given(events=st.lists(HOSTILE_STREAMS[family], min_size=1, max_size=8))
    def check(events: list[str]) -> None:
        body = "".join(events).encode()
        for config in (None, LabConfig.complete()):
            r = replay_sse(family, body, config=config)
            check_result(r, body)
            json.dumps(r.to_dict())  # the result serializes whatever the wire held

    check()


@pytest.mark.parametrize("family", sorted(HOSTILE_STREAMS))
def test_hostile_values_in_every_read_field_never_raise(family):
    hostile_values(family, DEFAULT_EXAMPLES // 2)  # each example replays twice


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(HOSTILE_STREAMS))
def test_hostile_values_in_every_read_field_never_raise_10k(family):
    hostile_values(family, SLOW_EXAMPLES)
