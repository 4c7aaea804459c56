"""Which provider family an HTTP exchange belongs to, read from its request alone.

A capture made by ``lab record`` or ``Recorder`` names each exchange's family. One made by
another path (an SDK client over a bare ``RecordingTransport``, an imported HAR or VCR
cassette) may not: its ``provider`` column then holds a host name or ``"unknown"``. Replay
asks :func:`infer_family` instead of failing, in this order:

1. the host, when it is the host of a registered provider's public base URL
   (``openrouter.ai``, ``api.openai.com``, ``api.anthropic.com``, ... read from each
   adapter's ``default_base_url``; ``open.bigmodel.cn`` is Z.ai too); then the path shape:
   ``...:streamGenerateContent`` / ``...:generateContent`` is Gemini, ``.../messages`` is
   Anthropic, ``.../api/v1/chat/completions`` OpenRouter and any other
   ``.../chat/completions`` an OpenAI-compatible server of unknown vendor (``custom``);
   ``.../api/v1/responses`` OpenRouter's and any other ``.../responses`` OpenAI's Responses
   API (replay then picks the Responses adapter from the same path);
2. the headers only one family sends: ``anthropic-version``, ``x-goog-api-key``;
3. the body shape: ``contents`` (Gemini), ``anthropic_version`` (Anthropic),
   ``messages`` (OpenAI-compatible, ``custom``).

Nothing here does I/O; a name is returned only when :data:`lab.providers.PROVIDERS` has it,
so a path whose family has no adapter gives None and replay reports that stream as one row
with an error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["FamilyGuess", "infer_family", "model_from_path", "resolve_family"]

# hosts that serve a registered provider besides the host of its default base URL
_HOST_ALIASES: tuple[tuple[str, str], ...] = (("open.bigmodel.cn", "zai"),)
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})


def _registry_hosts() -> list[tuple[str, str]]:
    """(host, provider) for every registered provider with a public default base URL
    (a loopback default such as vLLM's or Ollama's names no vendor), then the aliases."""
    from lab.providers import PROVIDERS, get_adapter

    hosts = []
    for name in sorted(PROVIDERS):
        try:
            base = get_adapter(name).default_base_url
        except (ImportError, AttributeError, ValueError):
            continue
        host = (urlsplit(base).hostname or "").lower() if base else ""
        if host and host not in _LOOPBACK:
            hosts.append((host, name))
    return hosts + list(_HOST_ALIASES)


@dataclass(frozen=True)
class FamilyGuess:
    """An inferred family and the evidence it came from (``"path"``, ``"header"``, ...)."""

    family: str
    evidence: str


def _known(name: str) -> bool:
    from lab.providers import PROVIDERS

    return name in PROVIDERS


def _host_matches(host: str, pattern: str) -> bool:
    return host == pattern or host.endswith("." + pattern)


def model_from_path(url_or_path: str) -> str | None:
    """The model id a Gemini-shaped path names (``/models/{model}:method``), else None.

    >>> model_from_path("http://h/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse")
    'gemini-2.5-flash'
    """
    try:
        path = urlsplit(str(url_or_path)).path
    except ValueError:
        return None
    head, sep, method = path.rpartition(":")
    if not sep or "/" in method or "/models/" not in head:
        return None
    return unquote(head.split("/models/", 1)[1]) or None


def _by_path(host: str, path: str) -> FamilyGuess | None:
    for pattern, family in _registry_hosts():
        if _host_matches(host, pattern):
            return FamilyGuess(family, f"host {host!r}")
    last = path.rsplit("/", 1)[-1]
    if ":" in last and last.split(":", 1)[1] in ("streamGenerateContent", "generateContent"):
        return FamilyGuess("google", f"path {path!r}")
    if path.endswith("/messages"):
        return FamilyGuess("anthropic", f"path {path!r}")
    if path.endswith("/api/v1/chat/completions"):
        return FamilyGuess("openrouter", f"path {path!r} (OpenRouter's /api/v1/)")
    if path.endswith("/chat/completions"):
        return FamilyGuess("custom", f"path {path!r} (OpenAI-compatible, host {host!r})")
    if path.endswith("/api/v1/responses"):
        return FamilyGuess("openrouter", f"path {path!r} (OpenRouter's Responses API)")
    if path.endswith("/responses"):
        return FamilyGuess("openai", f"path {path!r} (the OpenAI Responses API, host {host!r})")
    return None


def _by_headers(headers: Mapping[str, str]) -> FamilyGuess | None:
    names = {str(k).lower() for k in headers}
    if "anthropic-version" in names:
        return FamilyGuess("anthropic", "header 'anthropic-version'")
    if "x-goog-api-key" in names:
        return FamilyGuess("google", "header 'x-goog-api-key'")
    return None


def _by_body(body: Any) -> FamilyGuess | None:
    if isinstance(body, bytes | bytearray | str):
        try:
            body = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None
    if not isinstance(body, dict):
        return None
    if isinstance(body.get("contents"), list):
        return FamilyGuess("google", "body field 'contents'")
    if "anthropic_version" in body:
        return FamilyGuess("anthropic", "body field 'anthropic_version'")
    if isinstance(body.get("messages"), list):
        return FamilyGuess("custom", "body field 'messages' (OpenAI-compatible)")
    return None


def infer_family(
    method: str,
    url: str,
    headers: Mapping[str, str] | None = None,
    body: bytes | str | dict | None = None,
) -> FamilyGuess | None:
    """The provider family of one request, or None when nothing in it says.

    >>> infer_family("POST", "http://127.0.0.1:8000/v1/messages").family
    'anthropic'
    >>> infer_family("POST", "https://openrouter.ai/api/v1/chat/completions").evidence
    "host 'openrouter.ai'"
    >>> infer_family("POST", "http://h/x", body=b'{"contents": []}').evidence
    "body field 'contents'"
    """
    try:
        parts = urlsplit(str(url))
        host, path = (parts.hostname or "").lower(), parts.path
    except ValueError:
        host, path = "", ""
    for guess in (_by_path(host, path), _by_headers(headers or {}), _by_body(body)):
        if guess is not None and _known(guess.family):
            return guess
    return None


def resolve_family(recorded: str | None, exchange: Any) -> FamilyGuess | None:
    """The family to replay a recorded exchange with: the recorded one when it names an
    adapter, else :func:`infer_family` over the exchange's request."""
    if recorded and _known(recorded):
        return FamilyGuess(recorded, "recorded")
    return infer_family(
        getattr(exchange, "method", "POST"),
        getattr(exchange, "url", ""),
        getattr(exchange, "request_headers", None) or {},
        getattr(exchange, "request_body", None),
    )
