"""Provider families: one module per wire API, all implementing :class:`StreamAdapter`.

``get_adapter(name)`` maps a provider name to its adapter class. OpenAI-compatible providers
(openai, deepseek, zai, nvidia, custom) share one module; OpenRouter, Google and Anthropic
have their own.
"""

from __future__ import annotations

import importlib

from lab.providers.base import RetryAttempt, StreamAdapter

__all__ = ["PROVIDERS", "RetryAttempt", "StreamAdapter", "get_adapter"]

# provider name -> "module:Class"; a new family is one line here plus its module.
PROVIDERS: dict[str, str] = {
    "openrouter": "lab.providers.openrouter:OpenRouterAdapter",
    "openai": "lab.providers.openai_compat:OpenAIAdapter",
    "deepseek": "lab.providers.openai_compat:DeepSeekAdapter",
    "zai": "lab.providers.openai_compat:ZaiAdapter",
    "nvidia": "lab.providers.openai_compat:NvidiaAdapter",
    "custom": "lab.providers.openai_compat:CustomAdapter",
    "google": "lab.providers.google:GoogleAdapter",
    "anthropic": "lab.providers.anthropic:AnthropicAdapter",
}


def get_adapter(provider: str) -> type[StreamAdapter]:
    """The adapter class for ``provider``; ValueError naming the known ones otherwise."""
    try:
        target = PROVIDERS[provider]
    except KeyError:
        known = ", ".join(sorted(PROVIDERS))
        raise ValueError(f"unknown provider {provider!r}; known providers: {known}") from None
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)
