"""Tool-call validity: each error kind, the failing path, the drafts providers accept."""

from __future__ import annotations

import jsonschema
import pytest

from lab.model import FunctionCall
from lab.toolcheck import (
    TOOL_CALL_ERROR_KINDS,
    ToolCallCheck,
    check_call,
    check_stream,
    tool_schemas,
)

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1},
        "units": {"enum": ["c", "f"]},
        "stops": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["city"],
    "additionalProperties": False,
}
OPENAI_TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": WEATHER}}]
SCHEMAS = tool_schemas(OPENAI_TOOLS)


def _check(name: str = "weather", **kw) -> tuple:
    c = check_call(FunctionCall(name=name, **kw), SCHEMAS)
    return c.valid, c.error_kind, c.detail


def test_toolcheck_valid_call_has_no_error():
    assert _check(args={"city": "Oslo", "days": 2}) == (True, None, "")


def test_toolcheck_unknown_name_lists_the_offered_tools():
    assert _check("wether", args={}) == (
        False,
        "unknown_name",
        "not offered (offered: weather)",
    )


def test_toolcheck_missing_required_names_the_property():
    assert _check(args={"days": 2}) == (
        False,
        "missing_required",
        "$: 'city' is a required property",
    )


@pytest.mark.parametrize(
    ("args", "detail"),
    [
        ({"city": 5}, "$.city: 5 is not of type 'string'"),
        ({"city": "x", "days": 0}, "$.days: 0 is less than the minimum of 1"),
        ({"city": "x", "units": "k"}, "$.units: 'k' is not one of ['c', 'f']"),
        ({"city": "x", "stops": ["a", 2]}, "$.stops[1]: 2 is not of type 'string'"),
        (
            {"city": "x", "zip": 1},
            "$: Additional properties are not allowed ('zip' was unexpected)",
        ),
    ],
)
def test_toolcheck_schema_violation_gives_the_failing_path(args, detail):
    assert _check(args=args) == (False, "schema_violation", detail)


def test_toolcheck_invalid_json_keeps_a_clip_of_the_raw_arguments():
    got = _check(args={}, provider_fields={"raw_arguments": '{"city": Oslo}'})
    assert got == (False, "invalid_json", 'arguments not JSON: {"city": Oslo}')


def test_toolcheck_truncated_comes_first():
    assert _check(args={"city": "O"}, arguments_truncated=True) == (
        False,
        "truncated",
        "arguments cut short",
    )
    assert _check(args={}, provider_fields={"block_unclosed": True})[1] == "truncated"


def test_toolcheck_unknown_tools_check_name_and_schema_not_at_all():
    got = check_call(FunctionCall(name="anything", args={"x": 1}), None)
    assert got == ToolCallCheck(0, "anything", True, None, "offered tools unknown: not checked")


def test_toolcheck_draft_named_in_the_schema_is_used():
    # draft-04: exclusiveMinimum is a boolean modifier of minimum
    d4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": True}},
    }
    # draft-07: exclusiveMinimum is a number
    d7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"n": {"type": "number", "exclusiveMinimum": 0}},
    }
    schemas = tool_schemas([{"name": "a", "parameters": d4}, {"name": "b", "parameters": d7}])
    assert check_call(FunctionCall(name="a", args={"n": 0}), schemas).detail == (
        "$.n: 0 is less than or equal to the minimum of 0"
    )
    assert check_call(FunctionCall(name="b", args={"n": 0}), schemas).detail == (
        "$.n: 0 is less than or equal to the minimum of 0"
    )
    assert check_call(FunctionCall(name="a", args={"n": 1}), schemas).valid


def test_toolcheck_default_draft_is_2020_12():
    # prefixItems exists only from 2020-12 on
    schema = {
        "type": "object",
        "properties": {"p": {"type": "array", "prefixItems": [{"type": "integer"}]}},
    }
    schemas = tool_schemas([{"name": "a", "parameters": schema}])
    got = check_call(FunctionCall(name="a", args={"p": ["x"]}), schemas)
    assert (got.error_kind, got.detail) == (
        "schema_violation",
        "$.p[0]: 'x' is not of type 'integer'",
    )
    assert jsonschema.validators.validator_for(schema) is jsonschema.Draft202012Validator


def test_toolcheck_invalid_schema_is_not_held_against_the_backend():
    schemas = tool_schemas([{"name": "a", "parameters": {"type": "objekt"}}])
    got = check_call(FunctionCall(name="a", args={}), schemas)
    assert got.valid and got.error_kind is None
    assert got.detail.startswith("tool schema invalid: ")


def test_toolcheck_tool_schemas_reads_every_family_shape():
    tools = [
        {"type": "function", "function": {"name": "o", "parameters": {"type": "object"}}},
        {"name": "a", "input_schema": {"type": "object"}},
        {"functionDeclarations": [{"name": "g", "parameters": {"type": "object"}}]},
        {"name": "bare"},
        "junk",
    ]
    assert tool_schemas(tools) == {
        "o": {"type": "object"},
        "a": {"type": "object"},
        "g": {"type": "object"},
        "bare": {},
    }


def test_toolcheck_finish_mismatch_both_ways():
    call = FunctionCall(name="weather", args={"city": "x"})
    assert check_stream([call], "stop", SCHEMAS) == [
        ToolCallCheck(
            0, "weather", False, "finish_mismatch", "a tool call with finish reason 'stop'"
        )
    ]
    assert check_stream([call], "tool_calls", SCHEMAS) == [
        ToolCallCheck(0, "weather", True, None, "")
    ]
    # a cut or failed stream is not a mismatch
    assert check_stream([call], None, SCHEMAS)[0].valid
    assert check_stream([call], "error", SCHEMAS)[0].valid
    assert check_stream([], "stop", SCHEMAS) == []
    assert [c.error_kind for c in check_stream([], "tool_calls", SCHEMAS)] == ["finish_mismatch"]


def test_toolcheck_a_call_wrong_for_another_reason_keeps_that_reason_under_a_mismatch():
    bad = FunctionCall(name="nope", args={})
    assert [c.error_kind for c in check_stream([bad], "stop", SCHEMAS)] == ["unknown_name"]


def test_toolcheck_error_kinds_are_listed_in_check_order():
    assert TOOL_CALL_ERROR_KINDS == (
        "truncated",
        "invalid_json",
        "unknown_name",
        "missing_required",
        "schema_violation",
        "finish_mismatch",
    )


def test_toolcheck_a_call_recovered_from_markup_is_no_finish_mismatch():
    call = FunctionCall(
        name="weather", args={"city": "x"}, provider_fields={"recovered_from": "xml_tool_call"}
    )
    assert check_stream([call], "stop", SCHEMAS) == [ToolCallCheck(0, "weather", True, None, "")]
