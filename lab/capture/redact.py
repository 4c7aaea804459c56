"""Redaction: secrets are removed before anything is written (journal or Parquet).

One name policy (:func:`secret_name`) for headers, URL query parameters and JSON body fields:
a name is secret when it is one of the named ones (``REDACTED_HEADERS``,
``REDACTED_QUERY_PARAMS``, ``REDACTED_BODY_FIELDS``), or when one of its parts, split at
``-``, ``_``, ``.`` and camelCase humps, is in ``SECRET_NAME_PARTS`` (``x-auth-token``,
``openai_api_key``, ``client_secret``, ``accessToken``, Azure's ``?sig=``; not
``x-ratelimit-remaining-tokens`` nor ``max_tokens``), or when it ends in one of
``SECRET_NAME_SUFFIXES`` glued on (``accesstoken``, ``clientsecret``).

- a secret header keeps its key and gets the value ``"[REDACTED]"``, so a reader sees that
  the header was sent; any other header whose value is a ``Bearer``/``Basic`` credential is
  redacted too;
- a secret URL query parameter gets the value ``[REDACTED]``, and so does a URL user-info
  password;
- JSON request bodies: every string value of a secret field (at any depth, keys decoded, no
  fast path) is replaced in place at the byte level (the rest of the body keeps its exact
  bytes); a form-encoded body gets the query-parameter policy.

``Redactor`` does the same and remembers every secret value it removed, so free text that
might echo one (exception messages, caller metadata, response headers) can be scrubbed with
``Redactor.scrub``, and response *bytes* with a :class:`ResponseScrubber`: a provider that
echoes the key (in an error body, say) has each occurrence replaced by :func:`marker`, a
run of the same length, so offsets and read lengths stay those of the wire.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote

from lab.capture.assembled import (
    ASSEMBLED_FIELDS,
    ASSEMBLED_HOLD_BYTES,
    ASSEMBLED_INTERLEAVE,
    REDACTED,
    _AssembledScrubber,
    marker,
)

__all__ = [
    "ASSEMBLED_FIELDS",
    "ASSEMBLED_HOLD_BYTES",
    "ASSEMBLED_INTERLEAVE",
    "REDACTED",
    "REDACTED_BODY_FIELDS",
    "REDACTED_HEADERS",
    "REDACTED_QUERY_PARAMS",
    "REDACTION_POLICY",
    "SECRET_NAME_PARTS",
    "SECRET_NAME_SUFFIXES",
    "Redactor",
    "ResponseScrubber",
    "marker",
    "redact_body",
    "redact_headers",
    "redact_url",
    "secret_name",
]

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
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "auth",
        "authorization",
        "credential",
        "credentials",
        "signature",
        "sig",
        "cookie",
    }
)
"""Name parts that make a header, query parameter or body field secret. Only whole parts
count, so ``x-ratelimit-remaining-tokens``, ``max_tokens`` and ``keep-alive`` stay readable."""
SECRET_NAME_SUFFIXES = ("apikey", "token", "secret", "password", "passwd")
"""Endings that make a name secret even glued on without a separator (``accesstoken``)."""

SECRET_MIN_CHARS = 4
"""A secret value shorter than this is still redacted where it was sent, but not searched
for in free text and response bytes (where it would hit ordinary words)."""

REDACTION_POLICY: dict[str, Any] = {
    "policy_version": 5,
    "headers": sorted(REDACTED_HEADERS | _ALSO_REDACTED_HEADERS),
    "name_parts": sorted(SECRET_NAME_PARTS),
    "name_suffixes": list(SECRET_NAME_SUFFIXES),
    "name_split": "-, _, . and camelCase",
    "header_values": ["Bearer *", "Basic *"],
    "query_params": sorted(REDACTED_QUERY_PARAMS),
    "url_userinfo_password": True,
    "body_fields": sorted(REDACTED_BODY_FIELDS),
    "body_field_policy": "the name policy, every JSON string value at any depth",
    "replacement": REDACTED,
    "response_body": "recorded verbatim except each secret value sent, replaced by a "
    "same-length marker (counted in meta['lab.redacted'])",
    "response_assembled": "a secret spelled across string values of the assembled "
    "fields (consecutive values of any of them, or one field's values with up to "
    f"{ASSEMBLED_INTERLEAVE} others between; key names in any JSON escape; values of any "
    "length) is overwritten where its pieces stand",
    "assembled_fields": sorted(ASSEMBLED_FIELDS),
}

_CREDENTIAL_VALUE = re.compile(r"^\s*(bearer|basic)\s+\S", re.IGNORECASE)
_NAME_SPLIT = re.compile(r"[-_.\s]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def secret_name(name: str) -> bool:
    """The one name policy: is a header, query parameter or body field named ``name``
    secret? (``x-auth-token``, ``openai_api_key``, ``accessToken``, ``sig``: yes;
    ``max_tokens``, ``x-ratelimit-remaining-tokens``: no.)"""
    lower = name.lower()
    if (
        lower in REDACTED_HEADERS
        or lower in _ALSO_REDACTED_HEADERS
        or lower.replace("-", "_") in REDACTED_BODY_FIELDS
        or lower in REDACTED_QUERY_PARAMS
    ):
        return True
    for chunk in _NAME_SPLIT.split(name):
        for part in _CAMEL.split(chunk):
            if part.lower() in SECRET_NAME_PARTS:
                return True
    squashed = _NAME_SPLIT.sub("", lower)
    return squashed.endswith(SECRET_NAME_SUFFIXES)


def _session_name(name: str) -> bool:
    """A header name with a part in :data:`IMPORTED_HEADER_PARTS` (split as
    :func:`secret_name` splits)."""
    return any(
        part.lower() in IMPORTED_HEADER_PARTS
        for chunk in _NAME_SPLIT.split(name)
        for part in _CAMEL.split(chunk)
    )


def _secret_header(name: str, value: str) -> bool:
    return secret_name(name) or bool(_CREDENTIAL_VALUE.match(value))


def _items(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> Iterable[tuple[str, str]]:
    multi = getattr(headers, "multi_items", None)
    if multi is not None:  # httpx.Headers: keep repeated headers
        return multi()
    if isinstance(headers, Mapping):
        return headers.items()
    return headers


# a JSON string token: the scanner walks a body's strings in order (nothing else in JSON
# holds a quote), so the position of every key and string value is known exactly
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_COLON = re.compile(rb"\s*:\s*")


IMPORTED_QUERY_PARAMS = frozenset({"code", "session", "session_id", "sessionid", "sid"})
"""Query parameters also redacted in traffic imported from a browser or proxy file (a HAR
holds OAuth redirects, ``?code=``, and session ids that a call to an API never sends)."""
IMPORTED_HEADER_PARTS = frozenset({"session", "sessionid", "csrf", "xsrf"})
"""Header name parts also redacted in imported traffic (``x-session-id``, ``x-csrf-token``)."""


class Redactor:
    """Redacts one exchange's request and remembers the secrets it removed.

    **imported**: the exchange comes from a HAR or a cassette, so the broader import policy
    applies as well: :data:`IMPORTED_QUERY_PARAMS`, headers named with a part in
    :data:`IMPORTED_HEADER_PARTS`, and a URL's user-info user without a password
    (``https://TOKEN@host``)."""

    def __init__(self, *, imported: bool = False) -> None:
        self.secrets: set[str] = set()
        self.imported = imported

    def _remember(self, value: str) -> None:
        value = value.strip()
        if len(value) >= SECRET_MIN_CHARS:
            self.secrets.add(value)
            # "Bearer sk-..." -> also the bare token
            parts = value.split(None, 1)
            if len(parts) == 2 and len(parts[1].strip()) >= SECRET_MIN_CHARS:
                self.secrets.add(parts[1].strip())

    def headers(self, headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, value in _items(headers):
            if isinstance(name, bytes):
                name = name.decode("latin-1")
            if isinstance(value, bytes):
                value = value.decode("latin-1")
            if _secret_header(name, value) or (self.imported and _session_name(name)):
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
            query = self._params(query)
        return base + q + query + sep + fragment

    def _params(self, query: str) -> str:
        """``a=1&key=s``: secret parameters' values redacted (a query or a form body)."""
        params = []
        for param in query.split("&"):
            name, eq, value = param.partition("=")
            plain = unquote(name.replace("+", " "))
            if eq and (
                secret_name(plain) or (self.imported and plain.lower() in IMPORTED_QUERY_PARAMS)
            ):
                self._remember(unquote(value))
                self._remember(value)
                param = f"{name}={REDACTED}"
            params.append(param)
        return "&".join(params)

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
            if not self.imported:
                return base
            self._remember(unquote(user))  # https://TOKEN@host: the user is the credential
            self._remember(user)
            return f"{scheme}://{REDACTED}@{host}{slash}{path}"
        self._remember(unquote(password))
        self._remember(password)
        return f"{scheme}://{user}:{REDACTED}@{host}{slash}{path}"

    def body(self, body: bytes) -> bytes:
        """The request body with every secret field's string value redacted (``body``
        itself when nothing was). JSON: in place, at the byte level; a form-encoded body:
        the query-parameter policy; anything else: unchanged."""
        if not body:
            return body
        try:
            doc = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            return self._form_body(body)
        found: list[str] = []
        _collect_secret_fields(doc, found)
        if not found:
            return body
        for value in found:
            self._remember(value)
        out = _redact_json_values(body)
        # every other occurrence of a secret (a key pasted into a message, say)
        for value in sorted(set(found), key=len, reverse=True):
            if len(value) < SECRET_MIN_CHARS:
                continue
            for form in {json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}:
                out = out.replace(form.encode("utf-8"), REDACTED.encode())
        if _still_secret(out):  # a layout the byte-level pass missed: give up exact bytes
            out = json.dumps(_redacted_doc(doc), ensure_ascii=False).encode("utf-8")
        return out if out != body else body

    def _form_body(self, body: bytes) -> bytes:
        try:
            text = body.decode("ascii")
        except UnicodeDecodeError:
            return body
        if "=" not in text or any(c.isspace() for c in text) or text.startswith(("{", "[")):
            return body
        out = self._params(text).encode("ascii")
        return out if out != body else body

    def scrub(self, text: str) -> str:
        """Replace every remembered secret in free text."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def count_in_headers(self, headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> int:
        """How many remembered secrets the values of headers not redacted by name hold
        (what :meth:`headers` will scrub)."""
        count = 0
        for name, value in _items(headers):
            if isinstance(name, bytes):
                name = name.decode("latin-1")
            if isinstance(value, bytes):
                value = value.decode("latin-1")
            if not _secret_header(name, value):
                count += self.scrub_same_length(value)[1]
        return count

    def scrub_same_length(self, text: str) -> tuple[str, int]:
        """Replace every remembered secret in ``text`` by its :func:`marker`; returns the
        text and how many occurrences were replaced."""
        count = 0
        for secret in sorted(self.secrets, key=len, reverse=True):
            n = text.count(secret)
            if n:
                count += n
                text = text.replace(secret, marker(len(secret)))
        return text, count

    def response_scrubber(self) -> ResponseScrubber | None:
        """A scrubber for this exchange's response bytes, or None when nothing was sent that
        could be echoed."""
        return ResponseScrubber(self.secrets) if self.secrets else None


def _collect_secret_fields(doc: Any, found: list[str]) -> None:
    if isinstance(doc, dict):
        for key, value in doc.items():
            if isinstance(key, str) and secret_name(key) and isinstance(value, str):
                found.append(value)
            else:
                _collect_secret_fields(value, found)
    elif isinstance(doc, list):
        for item in doc:
            _collect_secret_fields(item, found)


def _still_secret(body: bytes) -> bool:
    """Does a JSON body still hold a secret field's string value (not ``[REDACTED]``)?"""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return True
    found: list[str] = []
    _collect_secret_fields(doc, found)
    return any(v != REDACTED for v in found)


def _redacted_doc(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {
            k: REDACTED
            if isinstance(k, str) and secret_name(k) and isinstance(v, str)
            else _redacted_doc(v)
            for k, v in doc.items()
        }
    if isinstance(doc, list):
        return [_redacted_doc(v) for v in doc]
    return doc


def _redact_json_values(body: bytes) -> bytes:
    """Replace the string value of every secret-named key, where it stands in the bytes."""
    out: list[bytes] = []
    pos = 0
    secret_key_end = -1  # where the value of the last secret key must start
    for m in _JSON_STRING.finditer(body):
        if m.start() == secret_key_end:  # this string is that key's value
            out.append(body[pos : m.start()])
            out.append(b'"' + REDACTED.encode() + b'"')
            pos = m.end()
            secret_key_end = -1
            continue
        colon = _COLON.match(body, m.end())
        if colon is None:
            continue
        try:
            name = json.loads(m.group())
        except ValueError:
            continue
        secret_key_end = colon.end() if secret_name(name) else -1
    out.append(body[pos:])
    return b"".join(out)


class ResponseScrubber:
    """Replaces each occurrence of the secrets sent in one exchange by a same-length marker
    in its response bytes, also when an occurrence is split across reads.

    ``feed(data)`` takes one read and returns the reads that are final now, each with its
    original length (boundaries kept): a read whose end could be the start of a secret is
    held until the next read (or ``flush()``) settles it, so a held read reaches the client
    one read late. ``count`` says how many occurrences were replaced. Each secret is looked
    for as sent, percent-encoded, and JSON-escaped in any mix: every character as itself or
    as ``\\uXXXX`` (hex digits of either case), ``/`` also as ``\\/`` (a JSON writer may
    escape any character; a JSON reader then gives the key back whole).
    """

    __slots__ = (
        "_literal",
        "_literal_tail",
        "_gate",
        "_pattern",
        "_tail",
        "_window",
        "_literal_window",
        "_held",
        "_text",
        "count",
    )

    def __init__(self, secrets: Iterable[str]) -> None:
        wanted: set[str] = set()
        for secret in secrets:
            for text in (secret, quote(secret, safe="")):
                if len(text) >= SECRET_MIN_CHARS:
                    wanted.add(text)
        ordered = sorted(wanted, key=len, reverse=True)
        literal = [t.encode("utf-8") for t in ordered]
        # the fast pair for a buffer holding no backslash (no escape can be in it), and the
        # one that takes every JSON escape (~1 us a byte) for a buffer that holds one
        self._literal = re.compile(b"|".join(re.escape(f) for f in literal))
        self._literal_tail = re.compile(
            b"(?:" + b"|".join(_prefix_pattern(f) for f in literal) + b")\\Z"
        )
        # the escapes that can stand for a character of a secret, in every case of their
        # hex digits: a read holding none of them (``\n`` or ``\u00fc`` in model text)
        # takes the fast pair
        gates = sorted({g[1:] for ch in set("".join(ordered)) for g in _escapes_of(ch)})
        self._gate = re.compile(b"\\\\(?:" + b"|".join(map(re.escape, gates)) + b")")
        self._pattern = re.compile(b"|".join(_escaped_pattern(t) for t in ordered))
        self._tail = re.compile(b"(?:" + b"|".join(_escaped_prefix(t) for t in ordered) + b")\\Z")
        self._window = max(len(_escaped_longest(t)) for t in ordered) - 1
        self._literal_window = max(map(len, literal)) - 1
        self._held: list[bytes] = []
        self.count = 0
        self._text = _AssembledScrubber(self)

    def _escaped(self, buf: bytes) -> bool:
        """Whether ``buf`` may hold an escaped character of a secret (or end in the start
        of one)."""
        return b"\\" in buf[-5:] or self._gate.search(buf) is not None

    def _replace(self, m: re.Match) -> bytes:
        self.count += 1
        return marker(len(m.group())).encode("ascii")

    def feed(self, data: bytes) -> list[bytes]:
        """One read in; the reads that are final now out (possibly none, possibly several)."""
        pieces = self._feed_bytes(data)
        if not pieces:
            return pieces
        text = self._text
        if len(pieces) == 1:
            return text.feed(pieces[0])
        out: list[bytes] = []
        for piece in pieces:
            out.extend(text.feed(piece))
        return out

    def flush(self) -> list[bytes]:
        """The reads still held (the stream ended: what was held is no secret)."""
        out: list[bytes] = []
        for piece in self._flush_bytes():
            out.extend(self._text.feed(piece))
        out.extend(self._text.flush())
        return out

    @property
    def assembled(self) -> int:
        """How many echoes were replaced that only the assembled text spelled out (a secret
        split across the values of one field in consecutive events: model tokens)."""
        return self._text.count

    def _feed_bytes(self, data: bytes) -> list[bytes]:
        """The byte stage: one read in, the reads it no longer holds out."""
        held = self._held
        if not held and not self._escaped(data):
            if self._literal.search(data) is None and (
                self._literal_tail.search(data, max(0, len(data) - self._literal_window)) is None
            ):
                return [data]  # the common case: nothing to replace, nothing to hold
        held.append(data)
        buf = b"".join(held)
        escapes = self._escaped(buf)
        buf = (self._pattern if escapes else self._literal).sub(self._replace, buf)
        tail, window = (
            (self._tail, self._window) if escapes else (self._literal_tail, self._literal_window)
        )
        m = tail.search(buf, max(0, len(buf) - window))
        safe = len(buf) if m is None else m.start()
        out: list[bytes] = []
        pos = 0
        for n in map(len, held):
            if pos + n > safe:
                break
            out.append(buf[pos : pos + n])
            pos += n
        rest = []
        for n in map(len, held[len(out) :]):
            rest.append(buf[pos : pos + n])
            pos += n
        self._held = rest
        return out

    def _flush_bytes(self) -> list[bytes]:
        out, self._held = self._held, []
        return out


def _prefix_pattern(form: bytes) -> bytes:
    """A regex matching any non-empty proper prefix of ``form``."""
    pattern = b""
    for byte in reversed(form[:-1]):
        pattern = re.escape(bytes([byte])) + (b"(?:" + pattern + b")?" if pattern else b"")
    return pattern


def _escapes_of(ch: str) -> set[bytes]:
    """Every escape that stands for ``ch`` in a JSON string (each case of the hex digits;
    the high surrogate alone for a character past the BMP)."""
    code = ord(ch)
    if code >= 0x10000:
        code = 0xD800 + ((code - 0x10000) >> 10)
    forms = {b"\\u"}
    for d in f"{code:04x}".encode():
        forms = {f + bytes([d]) for f in forms} | (
            {f + bytes([d ^ 0x20]) for f in forms} if d in b"abcdef" else set()
        )
    if ch in '/"\\':
        forms.add(b"\\" + ch.encode())
    return forms


def _hex(n: int) -> bytes:
    """``\\uXXXX`` for code unit ``n`` as a pattern, hex digits of either case."""
    return b"\\\\u" + b"".join(
        bytes([d]) if d in b"0123456789" else b"[" + bytes([d, d ^ 0x20]) + b"]"
        for d in f"{n:04x}".encode()
    )


def _units(ch: str) -> list[bytes]:
    """The whole forms of one character in a JSON string, as patterns: also escaped twice
    (``\\\\u0073``, ``\\\\/``), as a tool call's JSON arguments hold an escape inside the
    event's JSON string."""
    forms = [re.escape(ch.encode("utf-8"))]
    code = ord(ch)
    if code < 0x10000:
        forms.append(_hex(code))
        forms.append(b"\\\\" + _hex(code))  # the backslash itself escaped
    else:  # a surrogate pair
        code -= 0x10000
        forms.append(_hex(0xD800 + (code >> 10)) + _hex(0xDC00 + (code & 0x3FF)))
    if ch == "/":
        forms.append(b"\\\\/")
        forms.append(b"\\\\\\\\/")
    if ch in '"\\':
        forms.append(b"\\\\" + re.escape(ch.encode()))
    return forms


def _unit(ch: str) -> bytes:
    return b"(?:" + b"|".join(_units(ch)) + b")"


def _partials(ch: str) -> bytes:
    """Any non-empty proper prefix of one of the character's forms, as a pattern."""
    own = ch.encode("utf-8")
    alts = [re.escape(own[:i]) for i in range(1, len(own))]
    alts.append(b"\\\\(?:\\\\)?(?:u(?:[0-9a-fA-F]{1,3})?)?")  # \ \\ \u \\u0 ... \u00X
    if ord(ch) >= 0x10000:
        alts.append(_hex(0xD800 + ((ord(ch) - 0x10000) >> 10)) + b"(?:\\\\(?:u[0-9a-fA-F]{0,3})?)?")
    return b"(?:" + b"|".join(alts) + b")"


def _escaped_pattern(text: str) -> bytes:
    """``text`` with each character in any of its JSON forms."""
    return b"".join(_unit(ch) for ch in text)


def _escaped_prefix(text: str) -> bytes:
    """Any non-empty proper prefix of a match of :func:`_escaped_pattern`."""
    pattern = _partials(text[-1])
    for ch in reversed(text[:-1]):
        pattern = b"(?:" + _partials(ch) + b"|" + _unit(ch) + b"(?:" + pattern + b")?)"
    return pattern


def _escaped_longest(text: str) -> str:
    return "".join("\\ud800\\udc00" if ord(ch) >= 0x10000 else "\\\\u0000" for ch in text)


def redact_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """Copy of ``headers`` with secret values replaced by ``"[REDACTED]"`` (keys kept)."""
    return Redactor().headers(headers)


def redact_url(url: str) -> str:
    """``url`` with secret query parameters (``?key=``) and a user-info password redacted."""
    return Redactor().url(url)


def redact_body(body: bytes) -> bytes:
    """A JSON body with string values of secret fields (``"api_key"``) redacted in place."""
    return Redactor().body(body)
