"""Gemini's lean path builds what the general way builds.

An event of the common shape (one candidate of text parts, usageMetadata, modelVersion,
responseId) is read into the fields of a ``_Lean`` (``decode_lean`` straight from the line with
msgspec, ``lean_fields`` from the parsed dict otherwise) and built directly; any other
event goes the general way (``GoogleAdapter._on_raw``). On generated streams (every key the
lean path knows, values of the right type and of the wrong one, unknown keys, calls, blocks,
errors) a replay is identical with the lean path off, with the dict check and with the typed
decoder: every chunk, fact, guard event and table field.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.config import LabConfig
from lab.providers import google
from lab.providers.google import GoogleAdapter, lean_fields
from lab.replay import replay_sse
from tests.result_parts import everything

ANY = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.integers(min_value=2**53, max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
WORDS = st.sampled_from(["", "Hel", "lo", " there", " friend", "User:", "\n\n", "ab ab", "é☕"])
COUNT = st.integers(0, 400)


def _events(hostile: bool) -> st.SearchStrategy:
    """Gemini events with every key the lean path knows. **hostile**: a value may be of
    another type, and now and then a key only the general way reads (a call, a block, an
    error, top-level text) or no one reads is added."""

    def maybe(good: st.SearchStrategy) -> st.SearchStrategy:
        # mostly the good value: a stream of mostly empty events would test little
        return st.one_of(good, good, good, st.none(), *([ANY] if hostile else []))

    def foreign(base: st.SearchStrategy, extra: dict[str, st.SearchStrategy]) -> st.SearchStrategy:
        if not hostile:
            return base
        more = st.one_of(
            st.just({}),
            *(st.builds(lambda v, k=k: {k: v}, strategy) for k, strategy in extra.items()),
        )
        return st.builds(lambda b, e: {**b, **e}, base, more)

    call = st.fixed_dictionaries({"name": st.sampled_from(["f", "g"]), "args": st.just({"a": 1})})
    part = foreign(
        st.fixed_dictionaries(
            {"text": maybe(WORDS)},
            optional={
                "thought": maybe(st.booleans()),
                "thoughtSignature": maybe(st.sampled_from(["", "CikB0e2K"])),
            },
        ),
        {"functionCall": call, "inlineData": ANY},
    )
    content = foreign(
        st.fixed_dictionaries(
            {"parts": maybe(st.lists(part, min_size=1, max_size=3))},
            optional={"role": maybe(st.just("model"))},
        ),
        {"newContentKey": ANY},
    )
    finish = st.sampled_from(["", "STOP", "MAX_TOKENS", "SAFETY", "RECITATION", "LANGUAGE"])
    candidate = foreign(
        st.fixed_dictionaries(
            {"content": maybe(content)},
            optional={
                "finishReason": maybe(finish | st.integers(0, 13)),
                "index": maybe(st.just(0)),
                "safetyRatings": maybe(st.just([{"category": "X", "probability": "LOW"}])),
                "finishMessage": maybe(st.just("done")),
                "avgLogprobs": maybe(st.floats(-3, 0)),
            },
        ),
        {"tokenCount": ANY},
    )
    usage = foreign(
        st.fixed_dictionaries(
            {},
            optional={
                "promptTokenCount": maybe(COUNT),
                "candidatesTokenCount": maybe(COUNT) | st.integers(-3, -1),
                "thoughtsTokenCount": maybe(COUNT),
                "cachedContentTokenCount": maybe(COUNT),
                "totalTokenCount": maybe(COUNT) | st.floats(0, 9),
                "promptTokensDetails": st.just([{"modality": "TEXT", "tokenCount": 9}]),
                "trafficType": st.just("ON_DEMAND"),
            },
        ),
        {"newCount": ANY},
    )
    event = st.fixed_dictionaries(
        {
            "candidates": maybe(
                st.lists(candidate, min_size=1, max_size=1)
                | st.lists(candidate, min_size=2, max_size=2)
                | st.just([])
            ),
            "usageMetadata": maybe(usage),
        },
        optional={
            "modelVersion": maybe(st.sampled_from(["gemini-2.5-flash", "gemini-3-pro"])),
            "responseId": maybe(st.just("dX6LadKVC7SZ28oPr9yJoQs")),
            "createTime": maybe(st.just("2025-01-01T00:00:00Z")),
        },
    )
    return foreign(
        event,
        {
            "promptFeedback": st.just({"blockReason": "SAFETY"}),
            "error": st.just({"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}),
            "text": WORDS,
            "functionCalls": st.lists(call, max_size=2),
            "thoughtSignature": st.just("CikB"),
            "newTopKey": ANY,
        },
    )


def _body(events: list[dict]) -> bytes:
    return b"".join(
        b"data: " + json.dumps(e, ensure_ascii=False).encode() + b"\n\n" for e in events
    )


def _replay(monkeypatch: pytest.MonkeyPatch, way: str, body: bytes, config: Any) -> tuple:
    monkeypatch.setattr(GoogleAdapter, "lean", way != "general")
    monkeypatch.setattr(google, "decode_lean", google_decode if way == "typed" else None)
    return everything(replay_sse("google", body, config=config))


google_decode = google.decode_lean
WAYS = ["general", "dict"] + (["typed"] if google_decode is not None else [])
CONFIGS = {
    "reference": None,
    "complete": LabConfig.complete(),
    "speaker": LabConfig(speaker_guard=True, persona_name="Ann"),
}


def _same_every_way(monkeypatch: pytest.MonkeyPatch, events: list[dict]) -> None:
    body = _body(events)
    for config in CONFIGS.values():
        want = _replay(monkeypatch, "general", body, config)
        for way in WAYS[1:]:
            assert _replay(monkeypatch, way, body, config) == want, way


def _random_event(rng: random.Random, hostile: bool) -> dict:
    """A realistic event (mostly the common shape, as real streams are); **hostile**: now
    and then a value of another type, a key only the general way reads, or an unknown key."""

    def odd() -> bool:
        return hostile and rng.random() < 0.08

    def pick(*values: Any) -> Any:
        return rng.choice(values)

    parts = []
    for _ in range(pick(1, 1, 1, 2, 3)):
        part: dict[str, Any] = {
            "text": pick("Hel", "lo", " there", " friend", "", "\n\nUser:", "lo")
        }
        if rng.random() < 0.4:
            part["thought"] = pick(True, True, False, None)
        if rng.random() < 0.2:
            part["thoughtSignature"] = pick("CikB0e2K", "", "CikBzz")
        if odd():
            part[pick("functionCall", "inlineData", "text")] = pick({"name": "f", "args": {}}, 7)
        parts.append(part)
    cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if rng.random() < 0.2:
        cand["finishReason"] = pick("STOP", "MAX_TOKENS", "SAFETY", "LANGUAGE", "", 1)
    if rng.random() < 0.1:
        cand[pick("safetyRatings", "finishMessage", "avgLogprobs")] = pick([{"c": "X"}], "m", -0.5)
    if odd():
        cand[pick("tokenCount", "content", "finishReason")] = pick(None, 3, {"x": 1})
    event: dict[str, Any] = {"candidates": [cand]}
    if rng.random() < 0.05:
        event["candidates"] = pick([], [cand, cand], None)
    if rng.random() < 0.9:
        usage = {
            "promptTokenCount": 9,
            "candidatesTokenCount": rng.randint(0, 3),
            "totalTokenCount": 20,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 9}],
        }
        if rng.random() < 0.5:
            usage["thoughtsTokenCount"] = rng.randint(0, 3)
        if odd():
            usage[pick("candidatesTokenCount", "newCount", "totalTokenCount")] = pick(-1, 2.0, True)
        event["usageMetadata"] = usage
    event["modelVersion"] = pick("gemini-2.5-flash", "gemini-2.5-flash", None)
    event["responseId"] = "dX6LadKVC7SZ28oPr9yJoQs"
    if odd():
        event[pick("promptFeedback", "error", "text", "functionCalls", "thoughtSignature", "x")] = (
            pick({"blockReason": "SAFETY"}, {"code": 503, "message": "busy"}, "t", [{"name": "f"}])
        )
    return event


@pytest.mark.parametrize("hostile", [False, True], ids=["common", "hostile"])
@pytest.mark.parametrize("seed", range(25))
def test_realistic_random_streams_replay_the_same_every_way(monkeypatch, seed, hostile):
    rng = random.Random(seed)
    _same_every_way(monkeypatch, [_random_event(rng, hostile) for _ in range(12)])


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_events(hostile=False), min_size=1, max_size=4))
def test_streams_of_the_common_shape_replay_the_same_every_way(monkeypatch, events):
    _same_every_way(monkeypatch, events)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_events(hostile=True), min_size=1, max_size=4))
def test_streams_with_foreign_or_hostile_events_replay_the_same_every_way(monkeypatch, events):
    _same_every_way(monkeypatch, events)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(_events(hostile=True))
def test_the_typed_decoder_and_the_dict_check_take_the_same_events(event):
    line = json.dumps(event, ensure_ascii=False)
    got = lean_fields(json.loads(line))
    if google_decode is not None:
        typed = google_decode(line)
        # the same fields; the thoughts a list, or a tuple when the typed decoder read one part
        assert typed is None or type(typed[1]) in (list, tuple)
        assert _listed(typed) == _listed(got)


def _listed(fields):
    return None if fields is None else (fields[0], list(fields[1]), *fields[2:])


def test_a_common_event_takes_the_lean_path():
    line = (
        '{"candidates":[{"content":{"parts":[{"text":"a","thought":true},{"text":"b",'
        '"thoughtSignature":"CikB"}],"role":"model"},"finishReason":"STOP","index":0}],'
        '"usageMetadata":{"promptTokenCount":9,"candidatesTokenCount":1,"totalTokenCount":12,'
        '"thoughtsTokenCount":2},"modelVersion":"gemini-2.5-flash","responseId":"r1"}'
    )
    want = google._Lean(
        answer="b",
        thoughts=["a"],
        signature="CikB",
        native="STOP",
        cand_meta=[],
        has_candidate=True,
        usage=(9, 1, 2, None, 12),
        model_version="gemini-2.5-flash",
        response_id="r1",
    )
    assert lean_fields(json.loads(line)) == want
    if google_decode is not None:
        assert _listed(google_decode(line)) == want


@pytest.mark.parametrize("key", google.CANDIDATE_METADATA_KEYS)
def test_each_candidate_metadata_key_reaches_the_view_on_both_ways(key):
    # the typed decoder reads these fields one by one (no attrgetter per event): a key it
    # forgot would drop that metadata from the chunk on the typed way only
    cand = {"content": {"parts": [{"text": "a"}]}, "index": 0, key: {"k": 1}}
    line = json.dumps({"candidates": [cand]})
    got = lean_fields(json.loads(line))
    assert got is not None and got[4] == [(key, {"k": 1})]
    if google_decode is not None:
        assert _listed(google_decode(line)) == got


def test_the_usage_counts_come_in_their_order_on_both_ways():
    meta = {k: 10 + i for i, k in enumerate(google.USAGE_COUNT_KEYS)}
    line = json.dumps({"usageMetadata": meta})
    want = ("", [], None, None, [], False, (10, 11, 12, 13, 14), None, None)
    assert lean_fields(json.loads(line)) == want
    if google_decode is not None:
        assert _listed(google_decode(line)) == want


@pytest.mark.parametrize(
    "line",
    [
        '{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"newTopKey":1}',
        '{"candidates":[{"content":{"parts":[{"text":"a","newPartKey":true}]}}]}',
        '{"candidates":[{"content":{"parts":[{"text":"a"}],"newContentKey":1}}]}',
        '{"candidates":[{"content":{"parts":[{"text":"a"}]},"tokenCount":3}]}',
        '{"candidates":[{"content":{"parts":[{"text":"a"}]}}],"usageMetadata":{"newCount":1}}',
        '{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{}}}]}}]}',
        '{"candidates":[{"content":{"parts":[{"text":7}]}}]}',
        '{"candidates":[{"finishReason":3}]}',
        '{"candidates":[{},{}]}',
        '{"candidates":[]}',
        '{"usageMetadata":{"promptTokenCount":-1}}',
        '{"usageMetadata":{"promptTokenCount":true}}',
        '{"usageMetadata":{"promptTokenCount":9.0}}',
        '{"promptFeedback":{"blockReason":"SAFETY"}}',
        '{"error":{"code":503,"message":"overloaded"}}',
        "[]",
    ],
)
def test_an_event_of_another_shape_or_type_goes_the_general_way(line):
    assert lean_fields(json.loads(line)) is None
    if google_decode is not None:
        assert google_decode(line) is None


def test_an_unknown_key_is_still_counted_when_the_typed_decoder_declines_it():
    body = _body(
        [
            {"candidates": [{"content": {"parts": [{"text": "Hi", "newPartKey": 1}]}}]},
            {"candidates": [{"content": {"parts": [{"text": "!"}]}, "finishReason": "STOP"}]},
        ]
    )
    r = replay_sse("google", body)
    assert r.text == "Hi!"
    assert r.facts["unhandled_shapes"] == {"candidates.content.parts.newPartKey": 1}


def test_nesting_too_deep_goes_the_general_way_instead_of_raising():
    deep = "[" * 100_000 + "]" * 100_000
    line = '{"candidates":[{"content":{"parts":[{"text":"a"}]},"safetyRatings":' + deep + "}]}"
    if google_decode is not None:
        assert google_decode(line) is None


def test_ids_that_change_while_lean_and_general_events_alternate_end_as_the_last_sent(
    monkeypatch,
):
    # the lean path writes modelVersion/responseId only when they change; an event of the
    # general way (here: two candidates) writes them too, and the lean path must write its
    # next ones again, even when they equal what it wrote before the general event
    def event(version: str, rid: str, general: bool) -> dict:
        cand = {"content": {"parts": [{"text": "hi "}], "role": "model"}, "index": 0}
        cands = [cand, {**cand, "index": 1}] if general else [cand]
        return {"candidates": cands, "modelVersion": version, "responseId": rid}

    events = [
        event("m-1", "r-1", False),
        event("m-2", "r-2", True),  # the general way writes m-2 / r-2
        event("m-1", "r-1", False),  # the lean path's last was m-1: written again all the same
        event("m-1", "r-1", False),
    ]
    facts = replay_sse("google", _body(events)).facts
    assert (facts["served_model"], facts["response_model"], facts["response_id"]) == (
        "m-1",
        "m-1",
        "r-1",
    )
    _same_every_way(monkeypatch, events)
