"""No-fabrication JSON repair and the tool-argument parse step (json_repair.py;
docs/reference.md, "7.9 JSON repair")."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from json_props import is_prefix_subset, objects, values

from lab.guards import parse_tool_arguments, repair_truncated_json
from lab.guards.json_repair import JSON_REPAIR_MIN_CAP, ParsedArguments

REPAIR_CASES = [
    # every cut atom is dropped, never completed
    ('{"a": 12', {}),
    ('{"a": 1, "b": 3', {"a": 1}),
    ('{"a": -', {}),
    ('{"a":', {}),
    ('{"a": tr', {}),
    ('{"a": nul', {}),
    ('{"a"', {}),
    ('{"a": "hel', {}),
    # more shapes
    ('{"a": 1, "b": "hel', {"a": 1}),
    ('{"a": 1, ', {"a": 1}),
    ('{"a": 1,', {"a": 1}),
    ('{"a": true, "b": ["x", "y', {"a": True, "b": ["x"]}),
    ('{"a": [1, 2, {"b": "c"}, 3', {"a": [1, 2, {"b": "c"}]}),
    ('{"k": {"a": "b"}, "z": 1', {"k": {"a": "b"}}),
    # issue 18: a nested object whose only content was the cut number goes with it
    ('{"x": 0, "a": {"b": 1', {"x": 0}),
    ('{"a": "x\\"y", "b": "q', {"a": 'x"y'}),
    ('{"a": null, "b": false, "c": t', {"a": None, "b": False}),
    ('{"a": 12 ', {}),  # whitespace does not prove a number complete
    ('{"a": 12, "b": 3', {"a": 12}),  # a comma does
    ('{"a": {"b": "x', {"a": {}}),
    ('{"a": [', {}),
    ('{"a": {', {}),
    ("{", {}),
    ('  {"a": "b", "c": [true, false', {"a": "b", "c": [True, False]}),  # a literal is complete
]


CUT_NUMBER_PREFIXES = ['{"a": 12.', '{"a": 1.5e+', '{"a": 1, "b": 1e', '{"a": 1, "b": 12.']


@pytest.mark.parametrize("text", CUT_NUMBER_PREFIXES)
def test_a_number_prefix_at_the_end_is_refused_as_the_reference_does(text):
    """The number grammar matches "12", then "." (or "e") cannot follow: malformed."""
    assert repair_truncated_json(text) is None


@pytest.mark.parametrize("text", CUT_NUMBER_PREFIXES)
def test_cut_number_prefixes_drops_the_cut_number_with_its_entry(text):
    expected = {"a": 1} if text.startswith('{"a": 1,') else {}
    assert repair_truncated_json(text, cut_number_prefixes=True) == expected


def test_the_lab_config_switch_reaches_the_adapters_repair():
    import json

    from lab.config import LabConfig
    from lab.replay import replay_sse

    call = {
        "index": 0,
        "id": "c",
        "type": "function",
        "function": {"name": "f", "arguments": '{"a": 1, "b": 12.'},
    }
    env = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    body = "".join(
        "data: " + json.dumps({**env, "choices": [c]}) + "\n\n"
        for c in (
            {"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": "tool_calls"},
        )
    )
    reference = replay_sse("openai", body)
    repaired = replay_sse("openai", body, config=LabConfig(repair_cut_number_prefixes=True))
    assert reference.function_calls[0].args == {}
    assert reference.function_calls[0].provider_fields["raw_arguments"] == '{"a": 1, "b": 12.'
    assert repaired.function_calls[0].args == {"a": 1}
    assert repaired.function_calls[0].arguments_truncated


@pytest.mark.parametrize("text, expected", REPAIR_CASES)
def test_repair_drops_incomplete_tail_and_closes_containers(text, expected):
    assert repair_truncated_json(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        '{"a": 1}',  # valid: json.loads owns it
        '{"a": 1 "b": 2}',  # malformed, not truncated
        '{"a": 1}{"b": 2}',
        "[1, 2, 3",  # arrays are refused
        '[{"a": 1',
        '"abc',  # top-level primitives are refused
        "12",
        "tru",
        '{"a": 1, ]',  # malformed closer
        '{"a": x',  # not JSON at all
        '{"a": 0123',  # leading zero is malformed, not truncated
        '{"a" 1',
        '{"a": {"b": 1',  # a nested frame whose only content is a trailing number
        '{"a": [1',
        "   ",
    ],
)
def test_repair_refuses_what_it_cannot_repair_without_guessing(text):
    assert repair_truncated_json(text) is None


def test_repair_refuses_input_over_the_cap():
    text = '{"a": "' + "x" * 2000
    assert repair_truncated_json(text, max_chars=1024) is None
    assert repair_truncated_json('{"a": 1, "b": "' + "x" * 2000) == {"a": 1}


def test_repair_cap_has_a_floor():
    text = '{"a": 1, "b": "' + "x" * 900
    assert repair_truncated_json(text, max_chars=10) == {"a": 1}  # cap clamped to 1024
    assert JSON_REPAIR_MIN_CAP == 1024


def test_repair_retries_when_a_candidate_does_not_parse():
    # the scan accepts a bad escape; JSON does not, so the entry holding it is dropped
    assert repair_truncated_json('{"a": 1, "b": "\\x", "c": "q') == {"a": 1}


# -- parse step ----------------------------------------------------------------------------


def test_parse_tool_arguments_direct_parse_is_never_truncated():
    assert parse_tool_arguments('{"a": 1}') == ParsedArguments({"a": 1}, False, None, True)


def test_parse_tool_arguments_marks_repaired_payload_truncated_and_notes_it():
    notes = []
    got = parse_tool_arguments('{"a": 1, "b": "x', tool_name="gen", notes=notes)
    assert got == ParsedArguments({"a": 1}, True, None, False)
    (note,) = notes
    assert (note.guard, note.rule, note.offset, note.moved) == (
        "json_repair",
        "truncated_arguments",
        7,
        ', "b": "x',
    )
    assert note.detail == {"tool_name": "gen", "recovered_keys": 1, "argument_chars": 16}


def test_parse_tool_arguments_empty_is_empty_args_without_error():
    assert parse_tool_arguments("") == ParsedArguments({}, False, None, False)


def test_parse_tool_arguments_refused_repair_reports_the_parse_error():
    got = parse_tool_arguments('{"a" 1')
    assert got.args == {} and not got.truncated and not got.parsed
    assert got.error is not None and got.error.startswith("invalid JSON arguments")


def test_parse_tool_arguments_non_object_is_an_error():
    got = parse_tool_arguments("[1, 2]")
    assert got == ParsedArguments({}, False, "arguments are JSON list, not an object", True)


def test_parse_tool_arguments_rejects_nan_like_javascript():
    assert parse_tool_arguments('{"a": NaN}').error is not None


# -- properties -----------------------------------------------------------------------------


@st.composite
def cut_objects(draw):
    obj = draw(objects)
    indent = draw(st.sampled_from([None, 1]))
    text = json.dumps(obj, indent=indent, ensure_ascii=draw(st.booleans()))
    cut = draw(st.integers(1, len(text) - 1))
    return obj, text, text[:cut]


@settings(max_examples=300, deadline=None)
@given(cut_objects(), st.booleans())
def test_repair_never_fabricates(case, cut_number_prefixes):
    obj, _, cut = case
    got = repair_truncated_json(cut, cut_number_prefixes=cut_number_prefixes)
    if got is not None:
        assert is_prefix_subset(got, obj), (cut, got)


@settings(max_examples=200, deadline=None)
@given(objects)
def test_uncut_object_parses_unchanged_and_repair_refuses_it(obj):
    text = json.dumps(obj)
    assert parse_tool_arguments(text) == ParsedArguments(obj, False, None, True)
    assert repair_truncated_json(text) is None  # complete JSON: json.loads owns it


@settings(max_examples=150, deadline=None)
@given(cut_objects())
def test_parse_tool_arguments_recovers_every_cut_of_an_object_or_reports_error(case):
    obj, _, cut = case
    got = parse_tool_arguments(cut)
    if got.truncated:
        assert got.error is None and is_prefix_subset(got.args, obj)
    else:
        assert got.args == {} and (got.error is not None or cut.strip() == "")


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=4), values, min_size=1, max_size=5))
def test_repair_keeps_every_entry_completed_before_the_cut(obj):
    items = [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in obj.items()]
    for i in range(len(items)):
        cut = "{" + ", ".join(items[: i + 1]) + ","  # the comma proves entry i complete
        assert repair_truncated_json(cut) == dict(list(obj.items())[: i + 1])


def test_repair_differs_from_oracle_only_by_dropping_more():
    pjp = pytest.importorskip("partial_json_parser")
    allow = pjp.Allow.OBJ | pjp.Allow.ARR

    @settings(max_examples=100, deadline=None)
    @given(cut_objects())
    def check(case):
        _, _, cut = case
        ours = repair_truncated_json(cut)
        try:
            theirs = pjp.loads(cut, allow)
        except Exception:  # the oracle raises on some shapes; nothing to compare
            assume(False)
        if ours is not None:
            # we never keep anything the conservative oracle would not keep
            assert is_prefix_subset(ours, theirs), (cut, ours, theirs)

    check()


def test_nested_object_holding_only_the_cut_number_is_dropped_with_it():
    text = '{"scene": "hallway", "objects": [{"id": 1}, {"id": 2}, {"id": 3'
    assert repair_truncated_json(text) == {"scene": "hallway", "objects": [{"id": 1}, {"id": 2}]}
    assert repair_truncated_json('{"a": 1, "b": {"c": 2') == {"a": 1}
    assert repair_truncated_json('{"a": [1, 2, 3') == {"a": [1, 2]}
    assert repair_truncated_json('{"a": {"b": 1') is None  # no frame has a complete entry
