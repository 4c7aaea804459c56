"""Provider name -> its adapter's rule: the entry points that take a provider name.

Each function looks the provider up in the registry (:func:`lab.providers.get_adapter`) and
calls the adapter's own method, so a provider registered from outside this repository maps
its errors and builds its bodies the same way. They live here, above the registry, so the
core modules they used to live in (:mod:`lab.errors`, :mod:`lab.request`) import no
provider: those modules keep the names importable (``from lab.errors import
normalize_http_error`` still works) through a module ``__getattr__`` resolved at first use.
"""

from __future__ import annotations

import copy
from typing import Any

from lab.model import ProviderError
from lab.providers import PROVIDERS, StreamAdapter, get_adapter

__all__ = [
    "build_body",
    "normalize_http_error",
    "normalize_messages",
    "parse_error_message",
    "provider_families",
    "registered_adapter",
    "request_url",
]


def registered_adapter(provider: str) -> type[StreamAdapter]:
    """The registered adapter class of **provider**; ValueError naming the known providers
    otherwise (in registry order, as the error and request entry points always said)."""
    if provider not in PROVIDERS:
        known = ", ".join(PROVIDERS)
        raise ValueError(f"unknown provider {provider!r}; expected one of: {known}")
    return get_adapter(provider)


def provider_families() -> dict[str, str]:
    """Provider name -> wire family, read from each registered adapter's ``family``."""
    return {name: get_adapter(name).family for name in PROVIDERS}


# --------------------------------------------------------------------------- errors


def parse_error_message(provider: str, body_text: str, status: int | None = None) -> str:
    """The provider's own message in an HTTP error body, by its adapter's
    ``error_message`` (each family's rules live in its module):

    * openrouter: ``error.metadata.raw`` (an object as compact JSON), ``error.message``,
      ``message``, the raw text, the status phrase.
    * OpenAI-compatible: ``error.message``, a string ``error``, ``message``, ``detail`` (a
      non-string as JSON), ``title`` (problem JSON), the raw text, the status phrase,
      "Unknown error".
    * google: the (possibly JSON-in-JSON) ``error.message``, else the raw text.
    * anthropic: ``error.message``, ``message``, the raw text, the status phrase.
    """
    return registered_adapter(provider).error_message(body_text, status)


def normalize_http_error(
    provider: str, status: int, body_text: str, *, body_error_codes: bool = False
) -> ProviderError:
    """A non-OK HTTP response as a :class:`ProviderError`, by the provider's family rules.

    **body_error_codes** (``LabConfig.body_error_codes``, off: the reference reads the message
    only) lets an OpenAI-compatible body's ``error.code`` decide too: OpenAI's 404
    ``model_not_found`` is a model_error, and Z.ai's business codes under HTTP 429 re-code as
    billing whatever the text's language.

    ``original_error`` is ``{"provider", "status", "body"}`` (the raw body text), so the
    classifiers can read the provider's own message out of it.

    >>> body = '{"error":{"message":"Internal Server Error","code":500}}'
    >>> normalize_http_error("openrouter", 500, body).type  # the reference quirk
    'unknown'

    It dispatches to the registered adapter's ``normalize_http_error`` (looked up at call
    time), so a provider registered in :data:`lab.providers.PROVIDERS` maps its own errors.
    """
    return registered_adapter(provider).normalize_http_error(
        status, body_text, body_error_codes=body_error_codes
    )


# --------------------------------------------------------------------------- requests


def request_url(provider: str, base_url: str | None, model: str | None) -> str:
    """The streaming endpoint of ``provider`` (``base_url`` overrides the default)."""
    return get_adapter(provider)().endpoint(base_url, model)


def normalize_messages(provider: str, model: str, messages: list[dict]) -> list[dict]:
    """The per-provider message fixes on neutral (OpenAI-shaped) messages: the adapter's
    :meth:`~lab.providers.base.StreamAdapter.fix_messages` (see :mod:`lab.request`)."""
    return _known(provider).fix_messages(model, messages)


def build_body(
    provider: str,
    /,
    *,
    model: str,
    prompt: str | None = None,
    messages: list[dict] | None = None,
    system: str | None = None,
    tools: list[dict] | None = None,
    images: list[str] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """A streaming request body for ``provider`` from a prompt (or messages) and options
    (``provider`` is positional-only, so OpenRouter's ``provider`` routing object is an
    option like any other).

    >>> build_body("anthropic", model="claude-x", prompt="hi", max_tokens=64)["messages"]
    [{'role': 'user', 'content': [{'type': 'text', 'text': 'hi'}]}]
    """
    if not model:
        raise ValueError("a model id is required")
    adapter = _known(provider)  # a clear error for an unknown provider, before any work
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
    msgs = adapter.fix_messages(model, msgs)
    return adapter.build_body(model, msgs, tools, options)


def _known(provider: str) -> type[StreamAdapter]:
    if provider not in PROVIDERS:
        known = ", ".join(PROVIDERS)
        raise ValueError(f"unknown provider {provider!r}; known providers: {known}")
    return get_adapter(provider)
