"""Providers and their wire families: one module per wire family, all implementing
:class:`StreamAdapter`.

Words: a *provider* is a registry name (``openrouter``, ``deepseek``, ``google``, ...); a *wire
family* is the shape of the stream an adapter reads (``StreamAdapter.family``); many providers
share one wire family (every OpenAI-compatible endpoint reads ``openai_compatible``).

:data:`PROVIDERS` is the one registry: ``get_adapter(name)`` maps a provider name to its
adapter class, and everything else (error normalization, request bodies, the anomaly
detectors' end-of-stream rules, the tables' backend column) reads the adapter's class
attributes (``family``, ``sends_done_sentinel``, ``names_backend``, ...). OpenAI-compatible
endpoints (openai, deepseek, zai, nvidia, groq, xai, mistral, together, fireworks, vllm,
ollama, custom) are a few lines of data each in ``openai_compat``; OpenRouter, Google and
Anthropic have their own modules.

The entry points that take a provider name (``build_body``, ``request_url``,
``normalize_messages``, ``normalize_http_error``, ``parse_error_message``,
``provider_families``) are in :mod:`lab.providers.dispatch` and importable from here.

A new provider is one adapter class (its module) plus one line here::

    PROVIDERS["acme"] = "mypkg.acme:AcmeAdapter"   # or register("acme", AcmeAdapter)

A package outside this repository registers its providers for every process (``lab replay``
in a new shell included) with an entry point in the ``stream_lab.providers`` group::

    [project.entry-points."stream_lab.providers"]
    acme = "mypkg.acme:AcmeAdapter"
"""

from __future__ import annotations

import importlib

from lab.providers.base import RetryAttempt, StreamAdapter

__all__ = [
    "PROVIDERS",
    "RetryAttempt",
    "StreamAdapter",
    "adapter_for",
    "build_body",
    "get_adapter",
    "normalize_http_error",
    "normalize_messages",
    "parse_error_message",
    "provider_families",
    "register",
    "request_url",
]

# provider name -> "module:Class"; a new provider is one line here plus its class.
PROVIDERS: dict[str, str] = {
    "openrouter": "lab.providers.openrouter:OpenRouterAdapter",
    "openai": "lab.providers.openai_compat:OpenAIAdapter",
    "deepseek": "lab.providers.openai_compat:DeepSeekAdapter",
    "zai": "lab.providers.openai_compat:ZaiAdapter",
    "nvidia": "lab.providers.openai_compat:NvidiaAdapter",
    "groq": "lab.providers.openai_compat:GroqAdapter",
    "xai": "lab.providers.openai_compat:XaiAdapter",
    "mistral": "lab.providers.openai_compat:MistralAdapter",
    "together": "lab.providers.openai_compat:TogetherAdapter",
    "fireworks": "lab.providers.openai_compat:FireworksAdapter",
    "vllm": "lab.providers.openai_compat:VllmAdapter",
    "ollama": "lab.providers.openai_compat:OllamaAdapter",
    "custom": "lab.providers.openai_compat:CustomAdapter",
    "google": "lab.providers.google:GoogleAdapter",
    "anthropic": "lab.providers.anthropic:AnthropicAdapter",
}


ENTRY_POINT_GROUP = "stream_lab.providers"


def _load_entry_points() -> None:
    """Add the providers installed packages declare (``stream_lab.providers`` entry
    points); a name already registered here wins, and a broken plugin is skipped with a
    warning rather than breaking every command."""
    import warnings
    from importlib.metadata import entry_points

    try:
        found = entry_points(group=ENTRY_POINT_GROUP)
    except Exception as exc:  # pragma: no cover - a broken environment
        warnings.warn(f"stream-lab: cannot read provider entry points: {exc}", stacklevel=2)
        return
    for ep in found:
        if ep.name in PROVIDERS:
            continue
        if ":" not in ep.value:
            warnings.warn(
                f"stream-lab: provider entry point {ep.name}={ep.value!r} is not 'module:Class'",
                stacklevel=2,
            )
            continue
        PROVIDERS[ep.name] = ep.value


def register(name: str, adapter: type[StreamAdapter] | str) -> None:
    """Register **adapter** (a class, or ``"module:Class"``) under provider **name**.

    The class's ``provider`` attribute should be **name**; record, replay, error mapping and
    request bodies then work for it end to end.
    """
    if not isinstance(adapter, str):
        if getattr(adapter, "provider", None) != name:
            raise ValueError(
                f"register({name!r}, {adapter.__qualname__}): the class's provider is "
                f"{getattr(adapter, 'provider', None)!r}; set provider = {name!r} on it, so it "
                "cannot run under another provider's key and base URL"
            )
        target = f"{adapter.__module__}:{adapter.__qualname__}"
        _CLASSES[target] = adapter
        adapter = target
    PROVIDERS[name] = adapter


_CLASSES: dict[str, type[StreamAdapter]] = {}


def get_adapter(provider: str) -> type[StreamAdapter]:
    """The adapter class for ``provider``; ValueError naming the known ones otherwise."""
    try:
        target = PROVIDERS[provider]
    except KeyError:
        known = ", ".join(sorted(PROVIDERS))
        raise ValueError(f"unknown provider {provider!r}; known providers: {known}") from None
    cls = _CLASSES.get(target)
    if cls is not None:
        return cls
    module, _, name = target.partition(":")
    cls = getattr(importlib.import_module(module), name)
    _CLASSES[target] = cls
    return cls


def _responses_path(path: str) -> bool:
    """A Responses API stream's path: ``.../responses`` (create), or ``.../responses/<id>``
    (a background response streamed again, ``?stream=true&starting_after=N``)."""
    head, _, last = path.partition("?")[0].rstrip("/").rpartition("/")
    return last == "responses" or (bool(last) and head.endswith("/responses"))


def adapter_for(provider: str, path: str | None = None) -> type[StreamAdapter]:
    """The adapter for a request of ``provider`` to ``path`` (a URL path, or a whole URL).

    A path ending in ``/responses`` (or ``/responses/<id>``, a background response
    streamed again) gets a Responses adapter
    (:mod:`lab.providers.openai_responses`): the named one of openai, openrouter and
    deepseek, and for any other OpenAI-compatible endpoint (vLLM, Ollama, custom, a
    registered one: servers that implement ``/v1/responses`` too) one built from its chat
    adapter. A Gemini request to Vertex AI (``.../publishers/google/models/...``, an
    ``aiplatform.googleapis.com`` URL) gets :class:`~lab.providers.google.VertexAdapter`
    (Vertex AI's integer-enum numbering). Any other path gets the provider's own adapter,
    as :func:`get_adapter`. A ``/responses`` path of a Gemini or Anthropic provider is a
    ValueError.
    """
    if path is not None and _responses_path(path):
        chat = get_adapter(provider)  # an unknown provider fails the usual way
        from lab.providers.openai_responses import RESPONSES_ADAPTERS, responses_adapter_for

        if provider in RESPONSES_ADAPTERS:
            return RESPONSES_ADAPTERS[provider]
        if chat.family == "openai_compatible":
            return responses_adapter_for(chat)
        raise ValueError(
            f"provider {provider!r} has no Responses API adapter (its family is {chat.family}); "
            "OpenAI-compatible providers have one"
        )
    cls = get_adapter(provider)
    if path is not None and cls.family == "google":
        from lab.providers.google import VERTEX_PATH, GoogleAdapter, VertexAdapter

        if cls is GoogleAdapter and VERTEX_PATH.search(path.partition("?")[0]):
            return VertexAdapter
    return cls


_load_entry_points()

from lab.providers.dispatch import (  # noqa: E402 - they read the registry defined above
    build_body,
    normalize_http_error,
    normalize_messages,
    parse_error_message,
    provider_families,
    request_url,
)
