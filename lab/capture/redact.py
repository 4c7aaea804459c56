"""Redaction: secrets are removed before anything is written (journal or Parquet).

- headers named in ``REDACTED_HEADERS`` (case-insensitive) keep their key and get the value
  ``"[REDACTED]"``, so a reader sees that the header was sent; any other header whose value
  is a ``Bearer``/``Basic`` credential is redacted too;
- a header or URL query parameter whose name, split at ``-``, ``_`` and ``.``, has a part in
  ``SECRET_NAME_PARTS`` (``x-auth-token``, ``openai-api-key``, ``?api-key=``, ``?token=``;
  not ``x-ratelimit-remaining-tokens``), whatever its value;
- URL query parameters named in ``REDACTED_QUERY_PARAMS`` and URL user-info passwords;
- JSON request bodies: string values of fields named in ``REDACTED_BODY_FIELDS`` are
  replaced in place at the byte level (the rest of the body keeps its exact bytes).

``Redactor`` does the same and remembers every secret value it removed, so free text that
might echo one (exception messages, caller metadata, response headers) can be scrubbed with
``Redactor.scrub``. Response *bodies* are recorded untouched: they are the evidence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

__all__ = [
    "REDACTED",
    "REDACTED_BODY_FIELDS",
    "REDACTED_HEADERS",
    "REDACTED_QUERY_PARAMS",
    "REDACTION_POLICY",
    "SECRET_NAME_PARTS",
    "Redactor",
    "redact_body",
    "redact_headers",
    "redact_url",
]

REDACTED = "[REDACTED]"
REDACTED_HEADERS = {
    "authorization",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
    "cookie",
    "set-cookie",
}
_ALSO_REDACTED_HEADERS = {"proxy-authorization"}
REDACTED_QUERY_PARAMS = {"key", "api_key", "apikey", "access_token"}
REDACTED_BODY_FIELDS = {"api_key", "apikey", "x_api_key", "authorization", "access_token"}
SECRET_NAME_PARTS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "auth", "credential", "signature"}
)
"""Name parts that make a header or query parameter secret. Only whole parts count, so
``x-ratelimit-remaining-tokens`` and ``keep-alive`` stay readable."""

REDACTION_POLICY: dict[str, Any] = {
    "policy_version": 2,
    "headers": sorted(REDACTED_HEADERS | _ALSO_REDACTED_HEADERS),
    "name_parts": sorted(SECRET_NAME_PARTS),
    "header_values": ["Bearer *", "Basic *"],
    "query_params": sorted(REDACTED_QUERY_PARAMS),
    "url_userinfo_password": True,
    "body_fields": sorted(REDACTED_BODY_FIELDS),
    "replacement": REDACTED,
    "response_body": "recorded verbatim",
}

_CREDENTIAL_VALUE = re.compile(r"^\s*(bearer|basic)\s+\S", re.IGNORECASE)
_BODY_HINTS = (b"api_key", b"apikey", b"authorization", b"access_token")


_NAME_SPLIT = re.compile(r"[-_.]")


def _secret_name(lower: str) -> bool:
    return any(part in SECRET_NAME_PARTS for part in _NAME_SPLIT.split(lower))


def _secret_header(name: str, value: str) -> bool:
    lower = name.lower()
    return (
        lower in REDACTED_HEADERS
        or lower in _ALSO_REDACTED_HEADERS
        or _secret_name(lower)
        or bool(_CREDENTIAL_VALUE.match(value))
    )


def _items(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> Iterable[tuple[str, str]]:
    multi = getattr(headers, "multi_items", None)
    if multi is not None:  # httpx.Headers: keep repeated headers
        return multi()
    if isinstance(headers, Mapping):
        return headers.items()
    return headers


class Redactor:
    """Redacts one exchange's request and remembers the secrets it removed."""

    def __init__(self) -> None:
        self.secrets: set[str] = set()

    def _remember(self, value: str) -> None:
        value = value.strip()
        if len(value) >= 4:
            self.secrets.add(value)
            # "Bearer sk-..." -> also the bare token
            parts = value.split(None, 1)
            if len(parts) == 2 and len(parts[1]) >= 4:
                self.secrets.add(parts[1].strip())

    def headers(self, headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, value in _items(headers):
            if isinstance(name, bytes):
                name = name.decode("latin-1")
            if isinstance(value, bytes):
                value = value.decode("latin-1")
            if _secret_header(name, value):
                self._remember(value)
                value = REDACTED
            elif self.secrets:
                value = self.scrub(value)
            out[name] = value if name not in out else f"{out[name]}, {value}"
        return out

    def url(self, url: str) -> str:
        url = str(url)
        head, sep, fragment = url.partition("#")
        base, q, query = head.partition("?")
        base = self._userinfo(base)
        if q:
            params = []
            for param in query.split("&"):
                name, eq, value = param.partition("=")
                lower = unquote(name).lower()
                if eq and (lower in REDACTED_QUERY_PARAMS or _secret_name(lower)):
                    self._remember(unquote(value))
                    self._remember(value)
                    param = f"{name}={REDACTED}"
                params.append(param)
            query = "&".join(params)
        return base + q + query + sep + fragment

    def _userinfo(self, base: str) -> str:
        scheme, sep, rest = base.partition("://")
        if not sep:
            return base
        authority, slash, path = rest.partition("/")
        if "@" not in authority:
            return base
        userinfo, _, host = authority.rpartition("@")
        user, colon, password = userinfo.partition(":")
        if not colon:
            return base
        self._remember(unquote(password))
        self._remember(password)
        return f"{scheme}://{user}:{REDACTED}@{host}{slash}{path}"

    def body(self, body: bytes) -> bytes:
        if not body or not any(h in body.lower() for h in _BODY_HINTS):
            return body
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return body
        found: list[str] = []
        _collect_secret_fields(doc, found)
        for value in found:
            self._remember(value)
        for value in sorted(set(found), key=len, reverse=True):
            if len(value) < 4:
                continue
            for form in {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}:
                body = body.replace(form.encode("utf-8"), REDACTED.encode())
        return body

    def scrub(self, text: str) -> str:
        """Replace every remembered secret in free text."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text


def _collect_secret_fields(doc: Any, found: list[str]) -> None:
    if isinstance(doc, dict):
        for key, value in doc.items():
            if isinstance(key, str) and key.lower().replace("-", "_") in REDACTED_BODY_FIELDS:
                if isinstance(value, str):
                    found.append(value)
            else:
                _collect_secret_fields(value, found)
    elif isinstance(doc, list):
        for item in doc:
            _collect_secret_fields(item, found)


def redact_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """Copy of ``headers`` with secret values replaced by ``"[REDACTED]"`` (keys kept)."""
    return Redactor().headers(headers)


def redact_url(url: str) -> str:
    """``url`` with secret query parameters (``?key=``) and a user-info password redacted."""
    return Redactor().url(url)


def redact_body(body: bytes) -> bytes:
    """A JSON body with string values of secret fields (``"api_key"``) redacted in place."""
    return Redactor().body(body)
