"""The classes of leaked protocol markup, and how a leaked tool block of each is parsed.

:mod:`lab.guards.markup` (the guard) finds the blocks; this module names the classes and
turns one block's text into :class:`~lab.model.FunctionCall` values. Each format is cited
where the guard's module docstring lists the classes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple

from lab.model import FunctionCall

from .json_repair import parse_tool_arguments, repair_truncated_json

__all__ = [
    "DEEPSEEK",
    "HARMONY",
    "HARMONY_STRIPPED",
    "KIMI",
    "MARKUP_CLASSES",
    "MINIMAX",
    "SPECIAL",
    "XML",
    "MarkupClass",
    "MarkupDetection",
    "make_call",
    "parse_tool_block",
    "tool_properties",
]

MarkupClass = Literal[
    "harmony",
    "harmony_stripped",
    "kimi_tool_section",
    "deepseek_tool_calls",
    "xml_tool_call",
    "minimax_tool_call",
    "special_token",
]
HARMONY: MarkupClass = "harmony"
HARMONY_STRIPPED: MarkupClass = "harmony_stripped"
KIMI: MarkupClass = "kimi_tool_section"
DEEPSEEK: MarkupClass = "deepseek_tool_calls"
XML: MarkupClass = "xml_tool_call"
MINIMAX: MarkupClass = "minimax_tool_call"
SPECIAL: MarkupClass = "special_token"

MARKUP_CLASSES: tuple[MarkupClass, ...] = (
    HARMONY,
    HARMONY_STRIPPED,
    KIMI,
    DEEPSEEK,
    XML,
    MINIMAX,
    SPECIAL,
)
"""Every class the guard knows, in the order tables list them."""


class MarkupDetection(NamedTuple):
    """One marker recognized: its class, the marker and its offset in the guard's input."""

    kind: str
    marker: str
    offset: int


# -- parsing one tool block ---------------------------------------------------------------


def tool_properties(tools: Iterable[Any] | None) -> dict[str, dict[str, Any]]:
    """``{tool name: {parameter: schema}}`` from OpenAI-format or bare tool dicts."""
    out: dict[str, dict[str, Any]] = {}
    for tool in tools or ():
        if not isinstance(tool, Mapping):
            continue
        fn = tool.get("function") if tool.get("type") == "function" else tool
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            continue
        params = fn.get("parameters")
        props = params.get("properties") if isinstance(params, Mapping) else None
        out[fn["name"]] = dict(props) if isinstance(props, Mapping) else {}
    return out


def make_call(
    name: str,
    raw: str,
    kind: str,
    *,
    closed: bool,
    call_id: str | None = None,
    **extra: Any,
) -> FunctionCall:
    """A recovered call from its JSON argument text."""
    fields: dict[str, Any] = {"recovered_from": kind, **extra}
    if not closed:
        fields["block_unclosed"] = True
    parsed = parse_tool_arguments(raw.strip())
    if parsed.error is not None:
        fields["raw_arguments"] = raw
    return FunctionCall(
        name=name.strip(),
        args=parsed.args,
        id=call_id,
        arguments_truncated=parsed.truncated,
        provider_fields=fields,
    )


def _value(raw: str, schema: Any) -> Any:
    """An XML parameter value: a declared string stays text; otherwise JSON if it parses
    (vLLM's GLM rule), else the text."""
    if isinstance(schema, Mapping) and schema.get("type") == "string":
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _trim_nl(v: str) -> str:
    if v.startswith("\n"):
        v = v[1:]
    if v.endswith("\n"):
        v = v[:-1]
    return v


def _xml_call(
    name: str,
    pairs: list[tuple[str, str]],
    kind: str,
    tools: Mapping[str, Mapping[str, Any]],
    *,
    closed: bool,
) -> FunctionCall:
    name = name.strip()
    props = tools.get(name, {})
    args = {k.strip(): _value(v, props.get(k.strip())) for k, v in pairs}
    fields: dict[str, Any] = {"recovered_from": kind}
    if not closed:
        fields["block_unclosed"] = True
    return FunctionCall(name=name, args=args, provider_fields=fields)


_KIMI_CALL_RE = re.compile(
    r"<\|tool_call_begin\|>\s*(?P<id>[^<]+?:\d+)\s*<\|tool_call_argument_begin\|>"
    r"(?P<args>.*?)(?:<\|tool_call_end\|>|\Z)",
    re.DOTALL,
)
_DS_CALL_RE = re.compile(r"<｜tool▁call▁begin｜>(.*?)(?:<｜tool▁call▁end｜>|\Z)", re.DOTALL)
_DS_SEP = "<｜tool▁sep｜>"
_DS_FENCE_RE = re.compile(r"\A(?P<name>[^\n]*)\n```(?:json)?\n(?P<args>.*?)(?:\n```|\Z)", re.DOTALL)
_XML_INNER_RE = re.compile(r"\A<tool_call>(.*?)(?:</tool_call>)?\Z", re.DOTALL)
_QWEN_FN_RE = re.compile(r"<function=([^>\n]*)>(.*?)(?:</function>|\Z)", re.DOTALL)
_QWEN_PARAM_RE = re.compile(
    r"<parameter=([^>\n]*)>(.*?)(?:</parameter>|(?=<parameter=)|(?=</function>)|\Z)", re.DOTALL
)
# the ``<arg_value>`` opener is optional: GLM-4.7/5 sometimes drops it while the value and
# its closer are whole (vllm-project/vllm issue 49248, raw sampled tokens)
_GLM_PAIR_RE = re.compile(
    r"<arg_key>(.*?)</arg_key>\s*(?:<arg_value>)?(.*?)(?:</arg_value>|\Z)", re.DOTALL
)
_MM_INVOKE_RE = re.compile(r"<invoke name=([^>]*)>(.*?)(?:</invoke>|\Z)", re.DOTALL)
_MM_PARAM_RE = re.compile(r"<parameter name=([^>]*)>(.*?)(?:</parameter>|\Z)", re.DOTALL)


def _unquote(s: str) -> str:
    s = s.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        return s[1:-1]
    return s


def parse_tool_block(
    kind: str,
    block: str,
    *,
    tools: Mapping[str, Mapping[str, Any]] | None = None,
    closed: bool = True,
) -> list[FunctionCall]:
    """The calls in one leaked tool block of class ``kind`` (opener and closer included;
    ``closed=False`` when the stream ended before the closer). Empty when the block holds
    no call in the class's format. Each call's ``provider_fields["recovered_from"]`` is
    ``kind``.

    >>> parse_tool_block("kimi_tool_section", '<|tool_call_begin|>functions.f:0'
    ...     '<|tool_call_argument_begin|>{"a": 1}<|tool_call_end|>')[0].args
    {'a': 1}
    """
    tools = tools or {}
    calls: list[FunctionCall] = []
    if kind == KIMI:
        for m in _KIMI_CALL_RE.finditer(block):
            call_id = m.group("id").strip()
            name = call_id.split(":")[0].split(".")[-1]
            calls.append(make_call(name, m.group("args"), kind, closed=closed, call_id=call_id))
    elif kind == DEEPSEEK:
        for m in _DS_CALL_RE.finditer(block):
            left, sep, right = m.group(1).partition(_DS_SEP)
            if not sep:
                continue
            fence = _DS_FENCE_RE.match(right)
            if fence is not None:  # V3: type<sep>name\n```json\n{...}\n```
                name, raw = fence.group("name"), fence.group("args")
            else:  # V3.1: name<sep>{...}
                name, raw = left, right
            if name.strip():
                calls.append(make_call(name, raw, kind, closed=closed))
    elif kind == XML:
        xm = _XML_INNER_RE.match(block)
        inner = xm.group(1) if xm else block
        stripped = inner.strip()
        if "<function=" in inner:  # Qwen3-Coder
            for fm in _QWEN_FN_RE.finditer(inner):
                pairs = [
                    (p.group(1), _trim_nl(p.group(2))) for p in _QWEN_PARAM_RE.finditer(fm.group(2))
                ]
                if fm.group(1).strip():
                    calls.append(_xml_call(fm.group(1), pairs, kind, tools, closed=closed))
        elif stripped.startswith("{"):  # Hermes / Qwen2.5 JSON
            cut = False
            try:
                obj = json.loads(stripped)
            except ValueError:  # a block the stream cut: repaired, never fabricated
                obj = None if closed else repair_truncated_json(stripped)
                cut = obj is not None
            if isinstance(obj, dict) and isinstance(obj.get("name"), str):
                args = obj.get("arguments", obj.get("parameters", {}))
                raw = args if isinstance(args, str) else json.dumps(args)
                call = make_call(obj["name"], raw, kind, closed=closed)
                if cut:
                    call = call.model_copy(update={"arguments_truncated": True})
                calls.append(call)
        else:  # GLM-4.5: NAME\n<arg_key>k</arg_key><arg_value>v</arg_value>...
            head = inner.split("<arg_key>", 1)[0]
            name = head.strip().split("\n", 1)[0].strip()
            pairs = [(p.group(1), p.group(2).strip()) for p in _GLM_PAIR_RE.finditer(inner)]
            # a call that would silently lose an argument is not recovered
            whole = len(pairs) == inner.count("<arg_key>")
            if name and "<" not in name and " " not in name and whole:
                calls.append(_xml_call(name, pairs, kind, tools, closed=closed))
    elif kind == MINIMAX:
        for im in _MM_INVOKE_RE.finditer(block):
            name = _unquote(im.group(1))
            pairs = [
                (_unquote(p.group(1)), _trim_nl(p.group(2).strip()))
                for p in _MM_PARAM_RE.finditer(im.group(2))
            ]
            if name:
                calls.append(_xml_call(name, pairs, kind, tools, closed=closed))
    return calls
