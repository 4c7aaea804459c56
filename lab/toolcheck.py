"""Tool-call validity: every call a stream made, checked against the tools its request offered.

Moonshot's K2 Vendor Verifier showed the same weights giving tool-call schema accuracy from
100 % down to 72 % across serving vendors. This module asks the same question of any
stream the lab replayed, one call at a time, and names the first thing wrong with it
(checked in this order):

- ``truncated``: the arguments were cut short (``arguments_truncated``, or a leaked tool
  block recovered before its closer, ``provider_fields["block_unclosed"]``);
- ``invalid_json``: the arguments did not parse (the adapter kept them in
  ``provider_fields["raw_arguments"]``);
- ``unknown_name``: the request offered no tool of that name;
- ``missing_required``: a ``required`` property is absent (the failing path names the
  object that lacks it);
- ``schema_violation``: any other JSON Schema failure, with the failing path
  (``$.location``, ``$.items[2]``);
- ``finish_mismatch``: the stream's calls and its finish reason disagree: calls with a
  finish reason other than ``tool_calls`` (a cut or failed stream, finish None or
  ``error``, is not counted, nor a call recovered from leaked markup, whose ``stop`` is
  part of that leak and named by the ``markup_leak`` anomaly), or ``tool_calls`` with no
  call at all (one row, no name).

Schemas are validated with ``jsonschema`` (the maintained validator): the draft a schema
names in ``$schema`` (draft-04, -06, -07, 2019-09, 2020-12), else Draft 2020-12, which is
what OpenAI, Anthropic and Gemini document their ``parameters`` against. A schema that is
itself invalid is not held against the backend: its calls are checked for name and JSON
only, and ``detail`` says so.

``jsonschema`` is not a core dependency of the lab (it comes with the core install anyway,
through jupyterlab and nbformat; the ``tools`` extra names it). Without it, checking a call
raises one clear :class:`ImportError`.

Pure: no I/O. The tools of a stream come from the caller, or from the request the lab
replayed (``StreamResult.facts["request_tools"]``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple

from lab.model import FunctionCall

__all__ = [
    "FAILED_CALL_FINISHES",
    "FINISH_MESSAGE_CHARS",
    "TOOL_CALL_ERROR_KINDS",
    "ToolCallCheck",
    "check_call",
    "check_stream",
    "glued_json_objects",
    "tool_schemas",
]

TOOL_CALL_ERROR_KINDS: tuple[str, ...] = (
    "truncated",
    "invalid_json",
    "unknown_name",
    "missing_required",
    "schema_violation",
    "finish_mismatch",
    "failed_finish",
)
"""Every error kind, in the order a call is checked."""

FAILED_CALL_FINISHES: dict[str, str] = {
    "malformed_function_call": "the model's call did not parse and the provider delivered none",
    "unexpected_tool_call": "the model called a tool though the request enabled none",
    "too_many_tool_calls": "the model made more calls than the provider allows",
}
"""Finish reasons (as the lab names them: Gemini's ``MALFORMED_FUNCTION_CALL``,
``UNEXPECTED_TOOL_CALL`` and ``TOO_MANY_TOOL_CALLS`` lowercased) by which the provider says
the model tried to call a tool and the call failed: the stream ends with no call, or with
one the provider gave up on. Each is a ``failed_finish`` row of the tool-call checks, so a
backend whose calls fail this way counts against its tool-call validity."""

FINISH_MESSAGE_CHARS = 200
"""How much of the provider's own word on a failed call (Gemini's ``finishMessage``, which
quotes the call: ``Malformed function call: get_mod_details(mod_id=...``) a check keeps."""


class ToolCallCheck(NamedTuple):
    """The verdict on one call (``position`` in the stream's calls; -1 for the row of a
    ``tool_calls`` finish with no call)."""

    position: int
    name: str | None
    valid: bool
    error_kind: str | None
    detail: str


def tool_schemas(tools: Iterable[Any] | None) -> dict[str, Any]:
    """``{name: parameters schema}`` from OpenAI-format (``{"type": "function",
    "function": {...}}``), bare (``{"name", "parameters"}``), Anthropic (``input_schema``)
    or Gemini (``{"functionDeclarations": [...]}``) tool dicts. A tool with no schema maps
    to ``{}`` (anything goes)."""
    out: dict[str, Any] = {}
    for tool in tools or ():
        if not isinstance(tool, Mapping):
            continue
        decls = tool.get("functionDeclarations") or tool.get("function_declarations")
        if isinstance(decls, list):
            out.update(tool_schemas(decls))
            continue
        fn = tool.get("function") if tool.get("type") == "function" else tool
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            continue
        schema = fn.get("parameters", fn.get("input_schema", fn.get("parametersJsonSchema")))
        out[fn["name"]] = schema if isinstance(schema, Mapping) else {}
    return out


def _jsonschema() -> Any:
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - the core install carries it
        raise ImportError(
            "checking tool calls needs the jsonschema package: pip install 'stream-lab[tools]'"
        ) from None
    return jsonschema


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    """A validator for one schema (cached by its JSON text), or the SchemaError message."""
    js = _jsonschema()
    schema = json.loads(schema_json)
    cls = js.validators.validator_for(schema, default=js.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except js.exceptions.SchemaError as exc:
        return f"tool schema invalid: {exc.message}"
    return cls(schema)


def _path(parts: Iterable[Any]) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


_DECODER = json.JSONDecoder()


def glued_json_objects(raw: str) -> int:
    """How many whole JSON objects ``raw`` is, back to back (``{"q":"A"}{"q":"B"}``: 2), when
    it is two or more and nothing else; 0 otherwise (one object, a cut one, anything else).

    The arguments of several calls sent at one index with no name or id between them: the
    reference appends them into one string that does not parse (GPT-5.4, open-webui #22235).

    >>> glued_json_objects('{"q": "A"} {"q": "B"}'), glued_json_objects('{"q": "A"}')
    (2, 0)
    >>> glued_json_objects('{"q": "A"}{"q": ')
    0
    """
    n = pos = 0
    end = len(raw)
    try:
        while True:
            while pos < end and raw[pos] in " \t\r\n":
                pos += 1
            if pos == end:
                return n if n >= 2 else 0
            if raw[pos] != "{":
                return 0
            _, pos = _DECODER.raw_decode(raw, pos)
            n += 1
    except (ValueError, RecursionError):
        return 0


def check_call(
    call: FunctionCall, schemas: Mapping[str, Any] | None, *, index: int = 0
) -> ToolCallCheck:
    """Check one call against ``schemas`` (:func:`tool_schemas`); ``None`` when the offered
    tools are not known (then name and schema are not checked).

    >>> s = tool_schemas([{"name": "w", "parameters": {"type": "object",
    ...     "properties": {"city": {"type": "string"}}, "required": ["city"]}}])
    >>> print(check_call(FunctionCall(name="w", args={"city": 3}), s).detail)
    $.city: 3 is not of type 'string'
    >>> check_call(FunctionCall(name="w", args={}), s).error_kind
    'missing_required'
    """
    name = call.name
    fields = call.provider_fields or {}
    if call.arguments_truncated or fields.get("block_unclosed"):
        return ToolCallCheck(index, name, False, "truncated", "arguments cut short")
    if "raw_arguments" in fields:
        raw = str(fields["raw_arguments"])
        clip = raw if len(raw) <= 80 else raw[:77] + "..."
        glued = glued_json_objects(raw)
        if fields.get("arguments_resent"):
            what = "the arguments so far resent on every delta, appended"
        elif glued:
            what = f"{glued} JSON objects glued together"
        else:
            what = "arguments not JSON"
        return ToolCallCheck(index, name, False, "invalid_json", f"{what}: {clip}")
    if schemas is None:
        return ToolCallCheck(index, name, True, None, "offered tools unknown: not checked")
    if name not in schemas:
        offered = ", ".join(sorted(schemas)[:5]) or "none"
        return ToolCallCheck(
            index, name, False, "unknown_name", f"not offered (offered: {offered})"
        )
    schema = schemas[name]
    if not schema:
        return ToolCallCheck(index, name, True, None, "")
    try:
        key = json.dumps(schema, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return ToolCallCheck(index, name, True, None, "tool schema not JSON: not checked")
    validator = _validator(key)
    if isinstance(validator, str):
        return ToolCallCheck(index, name, True, None, validator + ": not checked")
    js = _jsonschema()
    error = js.exceptions.best_match(validator.iter_errors(call.args))
    if error is None:
        return ToolCallCheck(index, name, True, None, "")
    kind = "missing_required" if error.validator == "required" else "schema_violation"
    return ToolCallCheck(index, name, False, kind, f"{_path(error.absolute_path)}: {error.message}")


def check_stream(
    calls: list[FunctionCall],
    finish_reason: str | None,
    schemas: Mapping[str, Any] | None,
    finish_message: str | None = None,
) -> list[ToolCallCheck]:
    """Every call of one stream checked (:func:`check_call`), then the finish reason: a call
    that is otherwise valid under a finish other than ``tool_calls`` is a
    ``finish_mismatch``, and a ``tool_calls`` finish with no call is one such row. A finish
    that says a call failed (:data:`FAILED_CALL_FINISHES`) makes every otherwise valid call
    a ``failed_finish``, or is one such row when no call came; ``finish_message`` (the
    provider's own word on it, cut to :data:`FINISH_MESSAGE_CHARS`) ends its detail.

    >>> check_stream([], "tool_calls", None)
    [ToolCallCheck(position=-1, name=None, valid=False, error_kind='finish_mismatch', detail="finish reason 'tool_calls' with no tool call")]
    >>> check_stream([], "malformed_function_call", None, "Malformed function call: f(x=")[0].detail
    "finish reason 'malformed_function_call': the model's call did not parse and the provider delivered none (Malformed function call: f(x=)"
    """
    out = [check_call(c, schemas, index=i) for i, c in enumerate(calls)]
    failed = FAILED_CALL_FINISHES.get(finish_reason or "")
    kind, detail = "finish_mismatch", f"a tool call with finish reason {finish_reason!r}"
    if failed is not None:
        kind, detail = "failed_finish", f"finish reason {finish_reason!r}: {failed}"
        if finish_message:
            said = " ".join(str(finish_message).split())
            if len(said) > FINISH_MESSAGE_CHARS:
                said = said[: FINISH_MESSAGE_CHARS - 3] + "..."
            detail += f" ({said})"
        if not calls:
            return [ToolCallCheck(-1, None, False, kind, detail)]
    mismatch = finish_reason not in (None, "tool_calls", "error")
    if calls and mismatch:
        out = [
            ToolCallCheck(c.position, c.name, False, kind, detail)
            if c.valid and not (calls[c.position].provider_fields or {}).get("recovered_from")
            else c
            for c in out
        ]
    if not calls and finish_reason == "tool_calls":
        out.append(
            ToolCallCheck(
                -1, None, False, "finish_mismatch", "finish reason 'tool_calls' with no tool call"
            )
        )
    return out
