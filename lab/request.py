"""Request bodies: one provider-neutral request -> each family's JSON body.

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
  merges the reference stop list (§7.4: universal stop, ``persona_name``'s ``"\\n<Name>:"``
  unless the adapter turns the persona stop off); any other option is passed through as a body key
  (OpenAI-compatible families, OpenRouter and Anthropic, whose API rejects an unknown key
  with a 400 the degradation ladder can act on); Google raises ValueError for an option it
  has no mapping for.

Families::

    openrouter                       reference §2.1 body (base + optional keys in order)
    openai deepseek zai nvidia custom reference §3 body; OpenAI sends max_completion_tokens;
                                     DeepSeek / Z.ai ``thinking: {"type": enabled|disabled}``
    google                           Gemini contents/parts, systemInstruction,
                                     generationConfig, tools[functionDeclarations]; the lab keeps
                                     ``model`` in the body (the URL needs it)
    anthropic                        Messages API: system, messages with content blocks,
                                     tool_use / tool_result, max_tokens (required, default 4096)

Per-provider message fixes (``processor-reference.md`` §10.2) run first, on the neutral
messages: lone UTF-16 surrogates become U+FFFD; for Anthropic, empty messages and empty text
parts are dropped; tool-call ids are rewritten to ``[a-zA-Z0-9_-]`` for Anthropic and any
``claude`` model, and to 9 alphanumerics for Mistral/Devstral models (which also get an
assistant ``"Done."`` between a tool result and a user turn); DeepSeek assistant turns always
carry ``reasoning_content`` (``""`` when there is none); OpenAI gets no reasoning fields back.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

__all__ = ["build_body", "normalize_messages", "request_url"]


def __getattr__(name: str) -> Any:
    if name == "FAMILIES":  # provider -> family, derived from the one registry
        from lab.errors import provider_families

        return provider_families()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _family(provider: str) -> str:
    from lab.providers import PROVIDERS, get_adapter

    if provider not in PROVIDERS:
        known = ", ".join(PROVIDERS)
        raise ValueError(f"unknown provider {provider!r}; known providers: {known}")
    return get_adapter(provider).family


_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_CLAUDE_ID_RE = re.compile(r"[^a-zA-Z0-9_-]")
_ALNUM_RE = re.compile(r"[^a-zA-Z0-9]")
_DATA_URL_RE = re.compile(r"^data:(?P<mime>[^;,]+)?(?:;[^,]*)?;base64,(?P<data>.*)$", re.DOTALL)


def request_url(provider: str, base_url: str | None, model: str | None) -> str:
    """The streaming endpoint of ``provider`` (``base_url`` overrides the default)."""
    from lab.providers import get_adapter

    return get_adapter(provider)().endpoint(base_url, model)


def build_body(
    provider: str,
    *,
    model: str,
    prompt: str | None = None,
    messages: list[dict] | None = None,
    system: str | None = None,
    tools: list[dict] | None = None,
    images: list[str] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """A streaming request body for ``provider`` from a prompt (or messages) and options.

    >>> build_body("anthropic", model="claude-x", prompt="hi", max_tokens=64)["messages"]
    [{'role': 'user', 'content': [{'type': 'text', 'text': 'hi'}]}]
    """
    if not model:
        raise ValueError("a model id is required")
    _family(provider)  # a clear error for an unknown provider, before any work
    msgs: list[dict] = []
    if system:
        msgs.append({"role": "system", "content": system})
    if messages:
        msgs.extend(copy.deepcopy(messages))
    if prompt is not None or images:
        if images:
            parts: list[dict] = [{"type": "text", "text": prompt}] if prompt else []
            parts.extend({"type": "image_url", "image_url": {"url": u}} for u in images)
            msgs.append({"role": "user", "content": parts})
        else:
            msgs.append({"role": "user", "content": prompt})
    if not msgs:
        raise ValueError("give a prompt or messages")
    msgs = normalize_messages(provider, model, msgs)
    from lab.providers import get_adapter

    return get_adapter(provider).build_body(model, msgs, tools, options)


def build_body_for_family(
    family: str, model: str, msgs: list[dict], tools: list[dict] | None, options: dict
) -> dict[str, Any]:
    """The default ``build_body`` hook: a family with no body rules of its own (every
    registered family defines them, in its module) cannot build a request."""
    raise ValueError(f"no request-body rules for family {family!r}")


# --------------------------------------------------------------------------- message fixes


def _clean_text(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE_RE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_clean_text(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean_text(v) for k, v in value.items()}
    return value


def _is_claude(provider: str, model: str) -> bool:
    return provider == "anthropic" or "claude" in model.lower()


def _is_mistral(provider: str, model: str) -> bool:
    m = model.lower()
    return provider == "mistral" or "mistral" in m or "devstral" in m


def _map_tool_ids(messages: list[dict], fix: Any) -> None:
    for m in messages:
        for tc in m.get("tool_calls") or ():
            if isinstance(tc, dict) and isinstance(tc.get("id"), str):
                tc["id"] = fix(tc["id"])
        if m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str):
            m["tool_call_id"] = fix(m["tool_call_id"])


def _mistral_id(value: str) -> str:
    return _ALNUM_RE.sub("", value)[:9].ljust(9, "0")


def normalize_messages(provider: str, model: str, messages: list[dict]) -> list[dict]:
    """The §10.2 per-provider message fixes, on neutral (OpenAI-shaped) messages."""
    msgs = [_clean_text(m) for m in messages if isinstance(m, dict)]
    if provider == "anthropic":
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
        msgs = kept
    if _is_claude(provider, model):
        _map_tool_ids(msgs, lambda s: _CLAUDE_ID_RE.sub("_", s))
    elif _is_mistral(provider, model):
        _map_tool_ids(msgs, _mistral_id)
        fixed: list[dict] = []
        for i, m in enumerate(msgs):
            fixed.append(m)
            nxt = msgs[i + 1] if i + 1 < len(msgs) else None
            if m.get("role") == "tool" and nxt is not None and nxt.get("role") == "user":
                fixed.append({"role": "assistant", "content": "Done."})
        msgs = fixed
    if provider == "deepseek" or (
        _family(provider) == "openai_compatible" and "deepseek" in model.lower()
    ):
        for m in msgs:
            if m.get("role") == "assistant":
                reasoning = m.pop("reasoning", None)
                if not isinstance(m.get("reasoning_content"), str):
                    m["reasoning_content"] = reasoning if isinstance(reasoning, str) else ""
    elif provider == "openai":
        for m in msgs:
            m.pop("reasoning_content", None)
            m.pop("reasoning", None)
    return msgs


# --------------------------------------------------------------------------- OpenAI shapes


def _function_tools(tools: list[dict] | None) -> list[dict]:
    out: list[dict] = []
    for t in tools or ():
        if not isinstance(t, dict):
            continue
        inner = t.get("function")
        fn: dict = inner if isinstance(inner, dict) else t
        if isinstance(fn.get("name"), str):
            out.append(fn)
    return out


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return "" if content is None else str(content)


def _parts_of(content: Any) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, list):
        return [p for p in content if isinstance(p, dict)]
    return []


def _image_url(part: dict) -> str | None:
    if part.get("type") == "image_url":
        iu = part.get("image_url")
        url = iu.get("url") if isinstance(iu, dict) else iu
        return url if isinstance(url, str) else None
    if part.get("type") == "image" and isinstance(part.get("url"), str):
        return part["url"]
    return None


def _tool_args(tc: dict) -> dict:
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


def _max_tokens(options: dict) -> Any:
    for key in ("max_tokens", "max_output_tokens", "max_completion_tokens"):
        if options.get(key) is not None:
            return options.pop(key)
    return None


def _stops(options: dict) -> list[str] | None:
    stop = options.pop("stop", None)
    if stop is None:
        return None
    return [stop] if isinstance(stop, str) else list(stop)
