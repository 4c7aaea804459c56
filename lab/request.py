"""Request bodies: one provider-neutral request -> each family's JSON body.

The OpenRouter body follows ``pipeline-reference.md`` §2.1: the base
``{model, messages, stream: true, stream_options: {include_usage: true}}`` plus optional keys in
the reference order.
"""

from __future__ import annotations

from typing import Any

__all__ = ["build_body"]

_OPTIONAL_ORDER = (
    "reasoning",
    "temperature",
    "max_tokens",
    "tools",
    "top_p",
    "top_k",
    "frequency_penalty",
    "presence_penalty",
    "repetition_penalty",
    "min_p",
    "logit_bias",
    "stop",
)


def build_body(
    provider: str,
    *,
    model: str,
    prompt: str | None = None,
    messages: list[dict] | None = None,
    system: str | None = None,
    **options: Any,
) -> dict[str, Any]:
    """A streaming request body for ``provider`` from a prompt (or messages) and options."""
    if not model:
        raise ValueError("a model id is required")
    msgs: list[dict] = []
    if system:
        msgs.append({"role": "system", "content": system})
    if messages:
        msgs.extend(messages)
    if prompt is not None:
        msgs.append({"role": "user", "content": prompt})
    if not msgs:
        raise ValueError("give a prompt or messages")
    body: dict[str, Any] = {
        "model": model,
        "messages": msgs,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    for key in _OPTIONAL_ORDER:
        if options.get(key) is not None:
            body[key] = options.pop(key)
    for key, value in options.items():
        if value is not None:
            body[key] = value
    return body
