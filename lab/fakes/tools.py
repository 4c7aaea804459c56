"""``fake/tools``: one OpenRouter model whose backends differ in how they handle tools.

The scenario the scorecard demo sweeps (``lab sweep --preset tools``, ``lab demo``). A
request that offers tools and asks for something one of them does (a trigger phrase:
"weather in", "convert", "what time", "search", ...) gets a call with schema-valid
arguments read off the prompt; any other request gets a plain answer. Each backend of the
pool has one planted fault, decided per request by a hash of the prompt (the same every run,
whatever the order or concurrency of the sweep):

- ``Parasail`` leaks gpt-oss harmony channels into content
  (``<|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>``) on
  every answer; its tool calls are real ones;
- ``Novita`` writes its calls as Kimi K2 tool sections in content
  (``<|tool_calls_section_begin|>…``), finish ``stop``, no ``tool_calls``;
- ``SiliconFlow`` writes its calls as GLM ``<tool_call>NAME<arg_key>…`` in content, finish
  ``stop``;
- ``Together`` breaks the tool schema on :data:`SCHEMA_BREAK_RATE` of its calls (a required
  argument dropped, a number sent as a string, or an argument the schema forbids);
- ``DeepInfra`` and ``Fireworks`` are clean.

Markup is cut into deltas of :data:`MARKUP_DELTA_CHARS` characters, so markers arrive split.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

from .base import Ctx, Script, fragments, scenario
from .openrouter import FAMILY, ORStream, call_id

__all__ = ["MARKUP_DELTA_CHARS", "SCHEMA_BREAK_RATE", "TOOLS_BACKENDS", "decide_call"]

TOOLS_BACKENDS = ("Parasail", "Novita", "SiliconFlow", "Together", "DeepInfra", "Fireworks")
"""The pool; the first four each have one planted fault, the last two none."""

SCHEMA_BREAK_RATE = 0.4
"""Share of ``Together``'s calls whose arguments break the tool's schema."""

MARKUP_DELTA_CHARS = 7
"""Leaked markup is streamed in deltas this long (markers split across them)."""

_TRIGGERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "get_weather",
        (
            "weather in",
            "weather like",
            "weather for",
            "the weather",
            "forecast",
            "temperature in",
        ),
    ),
    ("convert_currency", ("convert", "exchange ")),
    ("get_time", ("what time", "current time", "local time")),
    ("search_web", ("search", "look up")),
)


def _prompt(body: dict[str, Any]) -> str:
    for msg in reversed(body.get("messages") or []):
        if isinstance(msg, dict) and msg.get("role") == "user":
            content = msg.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def _offered(body: dict[str, Any]) -> set[str]:
    names = set()
    for tool in body.get("tools") or []:
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.add(fn["name"])
    return names


def _city(prompt: str) -> str:
    words = re.findall(r"[A-Za-z][\w']*", prompt)
    for w in words[1:]:
        if w[0].isupper() and w != "I":
            return w
    return "Paris"


def decide_call(body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The call a clean backend makes for ``body`` (tool name, schema-valid arguments), or
    None when the prompt asks for no offered tool."""
    prompt = _prompt(body)
    low = prompt.lower()
    offered = _offered(body)
    for name, phrases in _TRIGGERS:
        if name in offered and any(p in low for p in phrases):
            break
    else:
        return None
    if name == "get_weather":
        args: dict[str, Any] = {"city": _city(prompt)}
        if "fahrenheit" in low:
            args["unit"] = "fahrenheit"
        return name, args
    if name == "convert_currency":
        number = re.search(r"\d+(?:\.\d+)?", prompt)
        amount = float(number.group()) if number else 1.0
        after = prompt[number.end() :] if number else prompt
        codes = re.findall(r"\b[A-Z]{3}\b", after) + re.findall(r"\b[A-Z]{3}\b", prompt)
        src = codes[0] if codes else "USD"
        dst = next((c for c in codes if c != src), "EUR")
        return name, {"amount": amount, "from_currency": src, "to_currency": dst}
    if name == "get_time":
        zone = re.search(r"\b[A-Z][a-z]+/[A-Za-z_]+\b", prompt)
        return name, {"timezone": zone.group() if zone else _city(prompt)}
    query = re.sub(r"^(search the web for|search for|look up)\s+", "", prompt, flags=re.I)
    return name, {"query": query.rstrip(".?!")}


def _draw(ctx: Ctx, what: str) -> float:
    """A fixed draw in [0, 1) for this prompt, backend and purpose."""
    key = f"{what}|{ctx.backend}|{_prompt(ctx.body)}".encode()
    return zlib.crc32(key) / 2**32


def _break_schema(ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
    broken = dict(args)
    how = int(_draw(ctx, "how") * 3)
    first = next(iter(broken))
    if how == 0:  # a required argument dropped
        del broken[first]
    elif how == 1:  # a number as a string, a string as a number
        value = broken[first]
        broken[first] = str(value) if isinstance(value, (int, float)) else 42
    else:  # an argument the schema forbids (additionalProperties: false)
        broken["note"] = "as requested"
    return broken


def _markup(s: ORStream, text: str) -> None:
    for i in range(0, len(text), MARKUP_DELTA_CHARS):
        s.content(text[i : i + MARKUP_DELTA_CHARS])


def _answer_for(prompt: str) -> str:
    return f"Here is a short answer to “{prompt.strip()}”: it depends, but usually yes."


@scenario(
    FAMILY,
    "fake/tools",
    "tools sweep: harmony leak (Parasail), Kimi markup (Novita), GLM markup (SiliconFlow), "
    f"schema broken on {SCHEMA_BREAK_RATE:.0%} of calls (Together), clean (DeepInfra, Fireworks)",
    backends=TOOLS_BACKENDS,
)
def or_tools(ctx: Ctx) -> Script:
    s = ORStream(ctx)
    s.keepalives()
    call = decide_call(ctx.body)
    backend = ctx.backend
    prompt = _prompt(ctx.body)
    if backend == "Parasail":
        plan = f"Need to use function {call[0]}." if call else "Answer briefly and politely."
        _markup(s, f"<|channel|>analysis<|message|>{plan}<|end|>")
        if call is None:
            _markup(s, "<|start|>assistant<|channel|>final<|message|>")
            s.answer(_answer_for(prompt))
    elif call is not None and backend == "Novita":
        name, args = call
        _markup(
            s,
            f"<|tool_calls_section_begin|><|tool_call_begin|>functions.{name}:0"
            f"<|tool_call_argument_begin|>{json.dumps(args)}<|tool_call_end|>"
            "<|tool_calls_section_end|>",
        )
        call = None
    elif call is not None and backend == "SiliconFlow":
        name, args = call
        pairs = "".join(
            f"<arg_key>{k}</arg_key>\n<arg_value>{v if isinstance(v, str) else json.dumps(v)}"
            "</arg_value>\n"
            for k, v in args.items()
        )
        _markup(s, f"<tool_call>{name}\n{pairs}</tool_call>")
        call = None
    elif call is None:
        s.answer(_answer_for(prompt))
    if call is not None:
        name, args = call
        if backend == "Together" and _draw(ctx, "break") < SCHEMA_BREAK_RATE:
            args = _break_schema(ctx, args)
        s.tool_call(call_id(ctx), name, fragments(json.dumps(args), ctx.stream("args")))
        s.finish("tool_calls")
    else:
        s.finish("stop")
    s.usage()
    s.done()
    return s.script()
