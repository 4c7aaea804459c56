"""The provider-neutral request, its readers and the message-fix primitives (pure, no I/O).

Each wire family's body builder (``build_body`` on its adapter) reads the neutral request
with the helpers here; :func:`lab.providers.build_body` (still importable from here) picks
the adapter by provider name, runs its ``fix_messages`` and its ``build_body``. This module
imports no provider.

The neutral request is OpenAI-shaped, because every family can be reached from it:

- ``system``: a string; ``messages``: ``{"role", "content"}`` with ``content`` a string or a
  list of parts (``{"type": "text", "text"}``, ``{"type": "image_url", "image_url": {"url"}}``
  with an ``https:`` or ``data:<mime>;base64,`` URL); assistant turns may carry ``tool_calls``
  (``{"id", "type": "function", "function": {"name", "arguments": <JSON text>}}``, plus an
  optional ``thought_signature``) and ``reasoning_content``; tool results are
  ``{"role": "tool", "tool_call_id", "content"}``;
- ``prompt`` (+ ``images``, URLs) appends one user turn; ``tools`` are OpenAI function tools;
- options: ``temperature``, ``top_p``, ``top_k``, ``max_tokens``, ``stop``,
  ``frequency_penalty``, ``presence_penalty``, ``repetition_penalty``, ``min_p``,
  ``logit_bias``, ``seed``, ``tool_choice``; reasoning: ``reasoning`` (OpenRouter object),
  ``reasoning_effort``, ``thinking`` (bool, budget int or a native object),
  ``thinking_budget``, ``include_thoughts``; OpenAI-compatible only: ``reference_stops=True``
  merges the reference stop list (the universal stop strings, plus ``persona_name``'s
  ``"\\n<Name>:"`` unless the adapter turns the persona stop off); any other option is passed through as a body key
  (OpenAI-compatible families, OpenRouter and Anthropic, whose API rejects an unknown key
  with a 400 the degradation ladder can act on); Google raises ValueError for an option it
  has no mapping for.

Families::

    openrouter                       the reference OpenRouter body (base + optional keys in
                                     the reference's order)
    openai deepseek zai nvidia custom the reference OpenAI-compatible body; OpenAI sends
                                     max_completion_tokens;
                                     DeepSeek / Z.ai ``thinking: {"type": enabled|disabled}``
    google                           Gemini contents/parts, systemInstruction,
                                     generationConfig, tools[functionDeclarations]; the lab keeps
                                     ``model`` in the body (the URL needs it)
    anthropic                        Messages API: system, messages with content blocks,
                                     tool_use / tool_result, max_tokens (required, default 4096)

Per-provider message fixes (the processor reference's provider message transforms) run
first, on the neutral messages, as each adapter's ``fix_messages`` combines the primitives
below: lone UTF-16 surrogates become U+FFFD; for Anthropic, empty messages and empty text
parts are dropped; tool-call ids are rewritten to ``[a-zA-Z0-9_-]`` for Anthropic and any
``claude`` model, and to 9 alphanumerics for Mistral/Devstral models (which also get an
assistant ``"Done."`` between a tool result and a user turn); DeepSeek assistant turns always
carry ``reasoning_content`` (``""`` when there is none); OpenAI gets no reasoning fields back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "DATA_URL_RE",
    "clean_text",
    "claude_tool_id",
    "drop_empty_messages",
    "drop_reasoning_history",
    "function_tools",
    "image_url",
    "insert_done_before_user",
    "is_claude_model",
    "is_deepseek_model",
    "is_mistral_model",
    "map_tool_ids",
    "mistral_tool_id",
    "parts_of",
    "pop_max_tokens",
    "pop_stops",
    "replay_reasoning_content",
    "text_of",
    "tool_args",
]

_BY_PROVIDER = {
    "build_body": "build_body",
    "request_url": "request_url",
    "normalize_messages": "normalize_messages",
}
"""Names that take a provider name: defined in :mod:`lab.providers.dispatch` (they read the
registry, which this module must not import) and still importable from here."""


def __getattr__(name: str) -> Any:
    import importlib

    if name == "FAMILIES":  # provider -> family, derived from the one registry
        return importlib.import_module("lab.providers.dispatch").provider_families()
    if name in _BY_PROVIDER:
        return getattr(importlib.import_module("lab.providers.dispatch"), _BY_PROVIDER[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_CLAUDE_ID_RE = re.compile(r"[^a-zA-Z0-9_-]")
_ALNUM_RE = re.compile(r"[^a-zA-Z0-9]")
DATA_URL_RE = re.compile(r"^data:(?P<mime>[^;,]+)?(?:;[^,]*)?;base64,(?P<data>.*)$", re.DOTALL)
"""A ``data:<mime>;base64,<data>`` URL: groups ``mime`` and ``data``."""


# --------------------------------------------------------------------------- message fixes
# The primitives each adapter's ``fix_messages`` combines.


def clean_text(value: Any) -> Any:
    """**value** with every lone UTF-16 surrogate replaced by U+FFFD, through lists and dicts."""
    if isinstance(value, str):
        return _SURROGATE_RE.sub("\ufffd", value)
    if isinstance(value, list):
        return [clean_text(v) for v in value]
    if isinstance(value, dict):
        return {k: clean_text(v) for k, v in value.items()}
    return value


def is_claude_model(model: str) -> bool:
    """A Claude model id, whoever serves it (its tool-call ids must be ``[a-zA-Z0-9_-]``)."""
    return "claude" in model.lower()


def is_mistral_model(model: str) -> bool:
    """A Mistral or Devstral model id (9-alphanumeric tool-call ids, no tool -> user turn)."""
    m = model.lower()
    return "mistral" in m or "devstral" in m


def is_deepseek_model(model: str) -> bool:
    """A DeepSeek model id (assistant turns carry ``reasoning_content`` back)."""
    return "deepseek" in model.lower()


def drop_empty_messages(msgs: list[dict]) -> list[dict]:
    """Empty text and reasoning parts removed; a message left with no content and no tool
    calls dropped (Anthropic rejects both)."""
    kept = []
    for m in msgs:
        content = m.get("content")
        if isinstance(content, list):
            content = [
                p
                for p in content
                if not (
                    isinstance(p, dict)
                    and p.get("type") in ("text", "reasoning")
                    and p.get("text") == ""
                )
            ]
            m["content"] = content
        empty = content == "" or content is None or content == []
        if empty and not m.get("tool_calls"):
            continue
        kept.append(m)
    return kept


def map_tool_ids(messages: list[dict], fix: Callable[[str], str]) -> None:
    """Rewrite every tool-call id (assistant ``tool_calls`` and tool results) with **fix**."""
    for m in messages:
        for tc in m.get("tool_calls") or ():
            if isinstance(tc, dict) and isinstance(tc.get("id"), str):
                tc["id"] = fix(tc["id"])
        if m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
            m["tool_call_id"] = fix(m["tool_call_id"])


def claude_tool_id(value: str) -> str:
    """A tool-call id Claude accepts: every character outside ``[a-zA-Z0-9_-]`` as ``_``."""
    return _CLAUDE_ID_RE.sub("_", value)


def mistral_tool_id(value: str) -> str:
    """A tool-call id Mistral accepts: its first 9 alphanumerics, padded with ``0``."""
    return _ALNUM_RE.sub("", value)[:9].ljust(9, "0")


def insert_done_before_user(msgs: list[dict]) -> list[dict]:
    """An assistant ``"Done."`` between a tool result and a user turn (Mistral rejects the
    pair)."""
    fixed: list[dict] = []
    for i, m in enumerate(msgs):
        fixed.append(m)
        nxt = msgs[i + 1] if i + 1 < len(msgs) else None
        if m.get("role") == "tool" and nxt is not None and nxt.get("role") == "user":
            fixed.append({"role": "assistant", "content": "Done."})
    return fixed


def replay_reasoning_content(msgs: list[dict]) -> None:
    """Every assistant turn carries a string ``reasoning_content`` (its ``reasoning``, else
    ``""``), as DeepSeek's thinking mode requires."""
    for m in msgs:
        if m.get("role") == "assistant":
            reasoning = m.pop("reasoning", None)
            if not isinstance(m.get("reasoning_content"), str):
                m["reasoning_content"] = reasoning if isinstance(reasoning, str) else ""


def drop_reasoning_history(msgs: list[dict]) -> None:
    """No reasoning fields sent back (OpenAI rejects them)."""
    for m in msgs:
        m.pop("reasoning_content", None)
        m.pop("reasoning", None)


# --------------------------------------------------------------------------- OpenAI shapes


def function_tools(tools: list[dict] | None) -> list[dict]:
    """The function objects of OpenAI tools (``{"type": "function", "function": {...}}`` or a
    bare ``{"name", ...}``); entries with no string name are left out."""
    out: list[dict] = []
    for t in tools or ():
        if not isinstance(t, dict):
            continue
        inner = t.get("function")
        fn: dict = inner if isinstance(inner, dict) else t
        if isinstance(fn.get("name"), str):
            out.append(fn)
    return out


def text_of(content: Any) -> str:
    """A message's text: the string, or its text parts joined with newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return "" if content is None else str(content)


def parts_of(content: Any) -> list[dict]:
    """A message's content as a list of part dicts (a non-empty string is one text part)."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [p for p in content if isinstance(p, dict)]
    return []


def image_url(part: dict) -> str | None:
    """The URL of an image part (``image_url`` or ``image``), else None."""
    if part.get("type") == "image_url":
        iu = part.get("image_url")
        url = iu.get("url") if isinstance(iu, dict) else iu
        return url if isinstance(url, str) else None
    if part.get("type") == "image" and isinstance(part.get("url"), str):
        return part["url"]
    return None


def tool_args(tc: dict) -> dict:
    """A tool call's arguments as an object: parsed JSON text (``{"_raw_arguments": text}``
    when it is not JSON, ``{"value": v}`` when it is not an object)."""
    inner = tc.get("function")
    fn: dict = inner if isinstance(inner, dict) else {}
    args = fn.get("arguments")
    if isinstance(args, dict):
        return args
    if isinstance(args, str) and args.strip():
        try:
            value = json.loads(args)
        except ValueError:
            return {"_raw_arguments": args}
        return value if isinstance(value, dict) else {"value": value}
    return {}


def pop_max_tokens(options: dict) -> Any:
    """Take the output-token limit out of **options** (any of its three spellings)."""
    for key in ("max_tokens", "max_output_tokens", "max_completion_tokens"):
        if options.get(key) is not None:
            return options.pop(key)
    return None


def pop_stops(options: dict) -> list[str] | None:
    """Take ``stop`` out of **options** as a list (None when absent)."""
    stop = options.pop("stop", None)
    if stop is None:
        return None
    return [stop] if isinstance(stop, str) else list(stop)
