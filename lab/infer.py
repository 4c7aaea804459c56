"""Which provider an HTTP exchange belongs to, read from its request alone.

A capture made by ``lab record`` or ``Recorder`` names each exchange's provider (a name in
:data:`lab.providers.PROVIDERS`; its adapter knows the provider's *wire family*, the shape
of the stream). One made by another path (an SDK client over a bare
``RecordingTransport``, an imported HAR or VCR cassette) may not: its ``provider`` column
then holds a host name or ``"unknown"``. Replay asks :func:`infer_provider` instead of
failing, in this order:

1. the host, when it is the host of a registered provider's public base URL
   (``openrouter.ai``, ``api.openai.com``, ``api.anthropic.com``, ... read from each
   adapter's ``default_base_url``, then its ``host_aliases``: ``open.bigmodel.cn`` is Z.ai
   too); then the path ending, the longest of the adapters' ``request_paths`` that matches:
   ``...:streamGenerateContent`` / ``...:generateContent`` is Gemini, ``.../messages`` is
   Anthropic, ``.../api/v1/chat/completions`` OpenRouter and any other
   ``.../chat/completions`` an OpenAI-compatible server of unknown vendor (``custom``);
   ``.../api/v1/responses`` OpenRouter's and any other ``.../responses`` OpenAI's Responses
   API (replay then picks the Responses adapter from the same path);
2. the headers only one provider's clients send (``request_header_markers``):
   ``anthropic-version``, ``x-goog-api-key``;
3. the body shape (``request_body_markers``): ``contents`` (Gemini), ``anthropic_version``
   (Anthropic), ``messages`` (OpenAI-compatible, ``custom``).

Every marker is data on the provider's adapter class (:mod:`lab.providers`), so a new wire
family says how its requests look in its own module. A provider's own markers are checked
before the catch-all ones (``generic_markers``: Custom's), in registry order.

Nothing here does I/O; a name is returned only when :data:`lab.providers.PROVIDERS` has it,
so a path whose provider has no adapter gives None and replay reports that stream as one
row with an error.

The old names, from when "family" meant the provider here, still work: ``infer_family``,
``resolve_family`` and ``FamilyGuess`` (whose ``.family`` is ``.provider``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = [
    "FamilyGuess",
    "ProviderGuess",
    "infer_family",
    "infer_provider",
    "model_from_path",
    "resolve_family",
    "resolve_provider",
]

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})


def _adapters() -> list[tuple[str, Any]]:
    """(provider, adapter class) of every registered provider that imports, in registry
    order."""
    from lab.providers import PROVIDERS, get_adapter

    found = []
    for name in PROVIDERS:
        try:
            found.append((name, get_adapter(name)))
        except (ImportError, AttributeError, ValueError):
            continue
    return found


def _registry_hosts() -> list[tuple[str, str]]:
    """(host, provider) for every registered provider with a public default base URL
    (a loopback default such as vLLM's or Ollama's names no vendor), then each adapter's
    ``host_aliases``."""
    adapters = sorted(_adapters())
    hosts = []
    for name, cls in adapters:
        base = cls.default_base_url
        host = (urlsplit(base).hostname or "").lower() if base else ""
        if host and host not in _LOOPBACK:
            hosts.append((host, name))
    return hosts + [(alias, name) for name, cls in adapters for alias in cls.host_aliases]


def _markers(kind: str) -> list[tuple[str, str, str]]:
    """(marker, note, provider) of one kind of adapter data (``request_paths``,
    ``request_body_markers``; header markers have no note), each provider's own before the
    catch-all ones (``generic_markers``), in registry order."""
    found: list[tuple[bool, int, str, str, str]] = []
    for pos, (name, cls) in enumerate(_adapters()):
        data = getattr(cls, kind)
        items = data.items() if isinstance(data, dict) else ((m, "") for m in data)
        found.extend((cls.generic_markers, pos, m, note, name) for m, note in items)
    return [(m, note, name) for _, _, m, note, name in sorted(found, key=lambda f: f[:2])]


@dataclass(frozen=True)
class ProviderGuess:
    """An inferred provider (a :data:`lab.providers.PROVIDERS` name) and the evidence it
    came from (``"host 'openrouter.ai'"``, ``"path '/v1/messages'"``, ``"recorded"``, ...)."""

    provider: str
    evidence: str

    @property
    def family(self) -> str:
        """The old name of :attr:`provider`."""
        return self.provider


FamilyGuess = ProviderGuess
"""The old name of :class:`ProviderGuess`."""


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


def _by_path(host: str, path: str) -> ProviderGuess | None:
    for pattern, provider in _registry_hosts():
        if _host_matches(host, pattern):
            return ProviderGuess(provider, f"host {host!r}")
    last = path.rsplit("/", 1)[-1]
    method = last.split(":", 1)[1] if ":" in last else None
    best: tuple[str, str, str] | None = None
    for ending, note, name in _markers("request_paths"):
        if ending.startswith(":"):
            hit = method == ending[1:]
        else:
            hit = path.endswith(ending)
        if hit and (best is None or len(ending) > len(best[0])):
            best = (ending, note, name)
    if best is None:
        return None
    note = best[1].format(host=host)
    return ProviderGuess(best[2], f"path {path!r}" + (f" ({note})" if note else ""))


def _by_headers(headers: Mapping[str, str]) -> ProviderGuess | None:
    names = {str(k).lower() for k in headers}
    for marker, _, name in _markers("request_header_markers"):
        if marker in names:
            return ProviderGuess(name, f"header {marker!r}")
    return None


def _by_body(body: Any) -> ProviderGuess | None:
    if isinstance(body, bytes | bytearray | str):
        try:
            body = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return None
    if not isinstance(body, dict):
        return None
    for marker, note, name in _markers("request_body_markers"):
        field = marker.removesuffix("[]")
        hit = isinstance(body.get(field), list) if marker.endswith("[]") else field in body
        if hit:
            return ProviderGuess(name, f"body field {field!r}" + (f" ({note})" if note else ""))
    return None


def infer_provider(
    method: str,
    url: str,
    headers: Mapping[str, str] | None = None,
    body: bytes | str | dict | None = None,
) -> ProviderGuess | None:
    """The provider of one request, or None when nothing in it says.

    >>> infer_provider("POST", "http://127.0.0.1:8000/v1/messages").provider
    'anthropic'
    >>> infer_provider("POST", "https://openrouter.ai/api/v1/chat/completions").evidence
    "host 'openrouter.ai'"
    >>> infer_provider("POST", "http://h/x", body=b'{"contents": []}').evidence
    "body field 'contents'"
    """
    try:
        parts = urlsplit(str(url))
        host, path = (parts.hostname or "").lower(), parts.path
    except ValueError:
        host, path = "", ""
    for guess in (_by_path(host, path), _by_headers(headers or {}), _by_body(body)):
        if guess is not None and _known(guess.provider):
            return guess
    return None


def resolve_provider(recorded: str | None, exchange: Any) -> ProviderGuess | None:
    """The provider to replay a recorded exchange with: the recorded one when it names an
    adapter, else :func:`infer_provider` over the exchange's request."""
    if recorded and _known(recorded):
        return ProviderGuess(recorded, "recorded")
    return infer_provider(
        getattr(exchange, "method", "POST"),
        getattr(exchange, "url", ""),
        getattr(exchange, "request_headers", None) or {},
        getattr(exchange, "request_body", None),
    )


infer_family = infer_provider
"""The old name of :func:`infer_provider`."""
resolve_family = resolve_provider
"""The old name of :func:`resolve_provider`."""
