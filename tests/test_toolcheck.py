"""Tool-call validity: each error kind, the failing path, the drafts providers accept."""

from __future__ import annotations

import jsonschema
import pytest

from lab.model import FunctionCall
from lab.toolcheck import (
    FAILED_CALL_FINISHES,
    FINISH_MESSAGE_CHARS,
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
        "failed_finish",
    )


def test_toolcheck_a_call_recovered_from_markup_is_no_finish_mismatch():
    call = FunctionCall(
        name="weather", args={"city": "x"}, provider_fields={"recovered_from": "xml_tool_call"}
    )
    assert check_stream([call], "stop", SCHEMAS) == [ToolCallCheck(0, "weather", True, None, "")]


# ----------------------------------------------- a finish reason that says the call failed

MALFORMED = (
    "finish reason 'malformed_function_call': " + FAILED_CALL_FINISHES["malformed_function_call"]
)


def test_toolcheck_a_failed_call_finish_with_no_call_is_one_failed_finish_row():
    """Gemini's MALFORMED_FUNCTION_CALL: the model tried to call a tool, the provider
    delivered nothing. Without this row the stream had no tool-call check at all, and the
    backend's tool-call validity never saw the failure."""
    message = "Malformed function call: get_mod_details(mod_id=railways"
    assert check_stream([], "malformed_function_call", SCHEMAS, message) == [
        ToolCallCheck(-1, None, False, "failed_finish", f"{MALFORMED} ({message})")
    ]
    assert check_stream([], "malformed_function_call", None) == [
        ToolCallCheck(-1, None, False, "failed_finish", MALFORMED)
    ]


@pytest.mark.parametrize("finish", sorted(FAILED_CALL_FINISHES))
def test_toolcheck_every_failed_call_finish_fails_a_call_that_came_anyway(finish):
    good = FunctionCall(name="weather", args={"city": "Oslo"})
    bad = FunctionCall(name="nope", args={})
    checks = check_stream([good, bad], finish, SCHEMAS)
    assert [(c.position, c.valid, c.error_kind) for c in checks] == [
        (0, False, "failed_finish"),
        (1, False, "unknown_name"),  # wrong for its own reason first
    ]
    assert checks[0].detail == f"finish reason {finish!r}: {FAILED_CALL_FINISHES[finish]}"


def test_toolcheck_a_finish_message_is_kept_on_one_line_and_cut():
    message = "Malformed function call:\n  f(" + "x" * 500
    (check,) = check_stream([], "malformed_function_call", None, message)
    said = check.detail[len(MALFORMED) + 2 : -1]
    assert len(said) == FINISH_MESSAGE_CHARS
    assert said == ("Malformed function call: f(" + "x" * 500)[: FINISH_MESSAGE_CHARS - 3] + "..."


def test_a_gemini_malformed_call_stream_counts_as_a_failed_tool_call_in_the_tables():
    """The shape Gemini sends (public client fixtures: a candidate with only
    ``finishReason: MALFORMED_FUNCTION_CALL`` and a ``finishMessage`` quoting the call),
    replayed through the whole stack: the streams table counts one checked call, none
    valid, names ``tool_call_failed`` (not ``unknown_finish_reason``) and the tool-call
    table says what the provider said."""
    from lab.anomalies import detect
    from lab.replay import replay_sse
    from lab.tables import streams, tool_calls

    first = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Checking."}]}}],
        "modelVersion": "gemini-2.5-flash",
    }
    last = {
        "candidates": [
            {
                "finishReason": "MALFORMED_FUNCTION_CALL",
                "finishMessage": "Malformed function call: get_mod_details(mod_id=railways",
                "index": 0,
            }
        ],
        "usageMetadata": {"promptTokenCount": 3000, "totalTokenCount": 3000},
        "modelVersion": "gemini-2.5-flash",
    }
    import json

    body = b"".join(b"data: " + json.dumps(e).encode() + b"\r\n\r\n" for e in (first, last))
    r = replay_sse("google", [body])
    assert (r.finish_reason, r.text, r.error) == ("malformed_function_call", "Checking.", None)
    assert detect(r) == ["tool_call_failed"]
    row = streams([r]).iloc[0]
    assert (row["tool_calls_checked"], row["tool_calls_valid"]) == (1, 0)
    assert row["tool_error_kinds"] == "failed_finish"
    assert row["anomalies"] == "tool_call_failed"
    (call,) = tool_calls([r]).to_dict("records")
    assert call["position"] == -1 and call["name"] is None and not call["valid"]
    assert call["error_kind"] == "failed_finish"
    assert call["detail"] == (
        f"{MALFORMED} (Malformed function call: get_mod_details(mod_id=railways)"
    )
