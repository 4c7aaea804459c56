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

__all__ = [
    "ASSEMBLED_FIELDS",
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

ASSEMBLED_FIELDS = frozenset(
    {
        "content",
        "text",
        "reasoning",
        "reasoning_content",
        "thinking",
        "summary",
        "refusal",
        "arguments",
        "partial_json",
        "delta",
        "message",
        "error",
        "stringValue",
        "thoughtSummary",
        "reasoning_summary",
    }
)
"""The JSON fields whose string values a result assembles from consecutive events (visible
text, reasoning, tool-call arguments (Gemini's ``partialArgs`` ``stringValue`` too),
refusals, thought summaries, error messages, in every wire family): an echoed secret split
into model tokens across them is readable only once they are joined."""

ASSEMBLED_INTERLEAVE = 8
"""How many string values of other assembled fields may stand between two tokens of one
field's text and still join them (OpenRouter repeats each reasoning token in
``reasoning_details[].text``; parallel tool calls interleave their arguments). A field's
carry-over settles after that many; consecutive values of any fields always join (the spill
guard moves the start of the content onto the end of the reasoning)."""

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


def marker(n: int) -> str:
    """The same-length stand-in for an ``n``-character secret found in response bytes:
    ``[REDACTED]`` padded with ``*`` (``*`` alone below 10 characters)."""
    if n < len(REDACTED):
        return "*" * n
    return "[REDACTED" + "*" * (n - len(REDACTED)) + "]"


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


ASSEMBLED_HOLD_BYTES = 256 * 1024
"""The most response bytes the assembled-text stage holds back for a value still open or
a carry-over (not a heuristic: any size bounds memory and delay). A value still open past
it is looked at in pieces as its bytes come (each piece as one more token of its field),
holding only a carry-over; a value's end that could start a secret is settled as no secret
once this much follows it."""

_FIELD_NAMES = b"|".join(sorted(f.encode() for f in ASSEMBLED_FIELDS))
_FIELDS = frozenset(f.encode() for f in ASSEMBLED_FIELDS)
_VALUE = b'(?:[^"\\\\\r\n]|\\\\[^\r\n])*'
# the string value of an assembled field: its key, then the value (a raw line break cannot be
# inside a JSON string). A quote inside a JSON string is escaped, so this never matches
# inside one, wherever a scan starts.
_FIELD_VALUE = re.compile(b'"(' + _FIELD_NAMES + b')"[ \t]*:[ \t]*"(' + _VALUE + b')"')
# the start of one that the bytes so far end inside: a key begun (a quote and any name so
# far; also a closing quote, which the next read settles), a key whole and its colon to
# come, or a value opened and not closed (group v: its bytes so far)
_FIELD_OPEN = re.compile(
    b'"(?:[a-zA-Z_]{0,24}|(?P<f>'
    + _FIELD_NAMES
    + b')"[ \t]*(?::[ \t]*(?:"(?P<v>'
    + _VALUE
    + b"\\\\?))?)?)\\Z"
)
# the same where a key may be written with JSON escapes (``"\u0063ontent"``): any key, its
# name decoded and looked up; used only for bytes that hold an escape of an ASCII letter
_KEY = b"(?:[a-zA-Z_]|\\\\u00[4-7][0-9a-fA-F]){1,48}"
_ESCAPED_KEY = re.compile(b"\\\\u00[4-7][0-9a-fA-F]|\\\\(?:u(?:0(?:0[4-7]?)?)?)?\\Z")
_FIELD_VALUE_ESCAPED = re.compile(b'"(' + _KEY + b')"[ \t]*:[ \t]*"(' + _VALUE + b')"')
_FIELD_OPEN_ESCAPED = re.compile(
    b'"(?:(?:[a-zA-Z_]|\\\\u00[0-9a-fA-F]{2}){0,48}(?:\\\\(?:u[0-9a-fA-F]{0,3})?)?|(?P<f>'
    + _KEY
    + b')"[ \t]*(?::[ \t]*(?:"(?P<v>'
    + _VALUE
    + b"\\\\?))?)?)\\Z"
)
_VALUE_BYTES = re.compile(_VALUE)
_ANY = b""  # the carry-over of consecutive values, whatever their field


def _field(name: bytes) -> bytes | None:
    """The assembled field a key names, its JSON escapes decoded (None: no such field)."""
    if name in _FIELDS:
        return name
    if b"\\" not in name:
        return None
    try:
        decoded = json.loads(b'"' + name + b'"').encode()
    except ValueError:
        return None
    return decoded if decoded in _FIELDS else None


class _AssembledScrubber:
    """The second stage of a :class:`ResponseScrubber`: an echo the assembled text spells
    out although no read holds it whole.

    A model that repeats the key writes it as tokens, one per event
    (``"content":"sk-ab"`` ... ``"content":"cd12"``), so the bytes never hold it and the
    result's text does. The stage finds the string values of :data:`ASSEMBLED_FIELDS` (one
    regex pass over the bytes each read adds, SSE or a JSON-array stream alike; a key
    written with JSON escapes is decoded) and matches each secret, in any JSON escape mix,
    across the values a result can join: consecutive values of one field, also with up to
    :data:`ASSEMBLED_INTERLEAVE` values of other fields between them, and consecutive
    values whatever their field (the end of the reasoning and the start of the content, as
    the spill guard joins them). A match is overwritten where its pieces stand in the held
    bytes by one :func:`marker` spread over them (each piece keeps its length, the JSON
    stays valid), so the capture, the client and every replay see the marker.

    Linear: each value is looked at once, with carry-overs (one per field and one for
    consecutive values, each at most the longest form of a secret less one byte: the end of
    the values before that could start one); no text grows. Bytes are held only from the
    key of a value still open at the end of a read, or from the start of the oldest open
    carry-over (up to :data:`ASSEMBLED_HOLD_BYTES`); a value open past that is looked at in
    pieces as its bytes come."""

    __slots__ = ("_s", "_buf", "_lens", "_base", "_scan", "_carries", "_n", "_open", "count")

    def __init__(self, scrubber: ResponseScrubber) -> None:
        self._s = scrubber  # its patterns (each secret as sent, percent- and JSON-escaped)
        self._buf = bytearray()  # the held bytes: reads not handed on yet
        self._lens: list[int] = []  # their lengths (boundaries kept)
        self._base = 0  # the stream offset of _buf[0]
        self._scan = 0  # where in _buf the bytes not looked into start
        # the open carry-overs: field (or _ANY) -> ([(start, end)] stream offsets, the value
        # number that set it)
        self._carries: dict[bytes, tuple[list[tuple[int, int]], int]] = {}
        self._n = 0  # values looked at so far
        self._open: bytes | None = None  # the field of a long value being read in pieces
        self.count = 0

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        buf.extend(data)
        self._lens.append(len(data))
        scan = self._scan
        if self._open is not None:  # a long value goes on: its next piece
            scan, closed = self._continue(scan)
            if not closed:
                self._scan = scan
                return self._release(self._base + scan)
        escaped = _ESCAPED_KEY.search(buf, scan) is not None
        scan = self._values(scan, len(buf), escaped)
        # a value (or its key) the bytes end inside: held from its key on, to be looked at
        # whole; bytes before it are handed on (a line is never held for being open)
        # (none when the bytes end a line, as an SSE read mostly does: no key or value of
        # one spans a line break)
        m = None
        if not buf.endswith((b"\n", b"\r")):
            m = (_FIELD_OPEN_ESCAPED if escaped else _FIELD_OPEN).search(buf, scan)
        hold = len(buf) if m is None else m.start()
        if m is not None and len(buf) - hold > ASSEMBLED_HOLD_BYTES:
            field = None if m.group("v") is None else _field(m.group("f"))
            if field is not None:  # a long value: from now on in pieces, as its bytes come
                self._open = field
                scan, _ = self._continue(m.start("v"))
                self._scan = scan
                return self._release(self._base + scan)
            hold = len(buf)  # a long key-like run, no value of an assembled field
        self._scan = hold
        return self._release(self._base + hold)

    def flush(self) -> list[bytes]:
        self._carries.clear()
        self._open = None
        self._scan = len(self._buf)
        return self._release(self._base + len(self._buf))

    def _continue(self, at: int) -> tuple[int, bool]:
        """The next piece of the long value open at ``buf[at]``, as a token of its field;
        returns where the scan goes on and whether the value ended."""
        buf, field = self._buf, self._open
        if field is None:  # pragma: no cover - only called with a value open
            return at, True
        m = _VALUE_BYTES.match(buf, at)
        end = m.end() if m is not None else at
        if end > at:
            self._value(field, self._base + at, self._base + end)
        if end < len(buf) and buf[end] not in b"\\":  # its closing quote (or a bad line)
            self._open = None
            return end + (buf[end] == 0x22), True
        return end, False  # at the end of the bytes, or before a lone backslash

    def _release(self, safe: int) -> list[bytes]:
        """Hand on every held read that ends at or before ``safe`` and before every open
        carry-over (one older than the hold is settled: no token of it follows)."""
        carries = self._carries
        if carries:
            limit = self._base + len(self._buf) - ASSEMBLED_HOLD_BYTES
            for key in [k for k, (pieces, _) in carries.items() if pieces[0][0] < limit]:
                del carries[key]
            for pieces, _ in carries.values():
                safe = min(safe, pieces[0][0])
        lens, pos, n = self._lens, self._base, 0
        while n < len(lens) and pos + lens[n] <= safe:
            pos += lens[n]
            n += 1
        if not n:
            return []
        buf = self._buf
        cut = pos - self._base
        out, at = [], 0
        for size in lens[:n]:
            out.append(bytes(buf[at : at + size]))
            at += size
        del buf[:cut], lens[:n]
        self._base = pos
        self._scan -= cut
        return out

    def _values(self, a: int, b: int, escaped: bool) -> int:
        """Every string value of an assembled field in ``buf[a:b]``, in order; returns where
        the last one ended (``a`` when there was none)."""
        base, at = self._base, a
        if not escaped:
            for m in _FIELD_VALUE.finditer(self._buf, a, b):
                start, end = m.span(2)
                if end > start:
                    self._value(m.group(1), base + start, base + end)
                at = m.end()
            return at
        for m in _FIELD_VALUE_ESCAPED.finditer(self._buf, a, b):
            field = _field(m.group(1))
            if field is None:
                continue
            start, end = m.span(2)
            if end > start:
                self._value(field, base + start, base + end)
            at = m.end()
        return at

    def _value(self, field: bytes, start: int, end: int) -> None:
        """One string value of an assembled field, at stream offsets [start, end)."""
        s, buf, base = self._s, self._buf, self._base
        self._n += 1
        n, carries = self._n, self._carries
        if carries:  # a field's carry-over settles after ASSEMBLED_INTERLEAVE other values
            for key in [
                k for k, (_, i) in carries.items() if k != _ANY and n - i > ASSEMBLED_INTERLEAVE + 1
            ]:
                del carries[key]
        if not carries and buf.find(b"\\", start - base, end - base) < 0:
            # the common case: no carry, no escape; a carry can only start in this value
            w = s._literal_window
            found = s._literal_tail.search(buf, max(start - base, end - base - w), end - base)
            if found is not None:
                spans = [(base + found.start(), end)]
                carries[field] = (spans, n)
                carries[_ANY] = (list(spans), n)
            return
        own = carries.get(field)
        joined = carries.get(_ANY)
        keys = (
            [field]
            if joined is None or (own is not None and own[0] == joined[0])
            else [
                field,
                _ANY,
            ]
        )
        for key in keys:  # a match can only start in a carry (the byte stage took the rest)
            carry = carries.get(key)
            if carry is None:
                continue
            head = carry[0] + [(start, min(end, start + s._window + 1))]
            text = b"".join(buf[x - base : y - base] for x, y in head)
            pattern = s._pattern if s._escaped(text) else s._literal
            for m in pattern.finditer(text):
                if m.start() >= len(text) - (head[-1][1] - head[-1][0]):
                    break  # inside this value alone: the byte stage's
                spans = _spans(head, m.start(), m.end())
                self._overwrite(spans)
                # another field's carry-over over these bytes is settled: they are a marker
                for other in [k for k in carries if k not in (field, _ANY)]:
                    if any(x < b and a < y for x, y in carries[other][0] for a, b in spans):
                        del carries[other]
        for key in (field, _ANY):  # the new carries: the longest end that could start one
            carry = carries.get(key)
            found_spans = self._carry(carry[0] if carry is not None else [], start, end)
            if found_spans is None:
                carries.pop(key, None)
            else:
                carries[key] = (found_spans, n)

    def _carry(
        self, pieces: list[tuple[int, int]], start: int, end: int
    ) -> list[tuple[int, int]] | None:
        """The longest end of ``pieces`` + [start, end) that could start a secret."""
        s, buf, base = self._s, self._buf, self._base
        window = s._window
        tail_pieces = pieces + [(start, end)] if end - start < window else [(start, end)]
        rest = sum(y - x for x, y in tail_pieces)
        while len(tail_pieces) > 1 and rest - (tail_pieces[0][1] - tail_pieces[0][0]) >= window:
            rest -= tail_pieces[0][1] - tail_pieces[0][0]
            tail_pieces.pop(0)
        text = b"".join(buf[x - base : y - base] for x, y in tail_pieces)
        escaped = s._escaped(text)
        tail, w = (s._tail, window) if escaped else (s._literal_tail, s._literal_window)
        found = tail.search(text, max(0, len(text) - w))
        return None if found is None else _spans(tail_pieces, found.start(), len(text))

    def _overwrite(self, spans: list[tuple[int, int]]) -> None:
        """One :func:`marker` over the pieces of a match, in order; its fill is ``*`` in the
        first piece, ``#`` in the second, and so on alternately, so that no piece repeats the
        end of the one before (the dedup guard drops a delta that does, as a resent one)."""
        stamp = marker(sum(y - x for x, y in spans)).encode("ascii")
        buf, base, at = self._buf, self._base, 0
        for i, (x, y) in enumerate(spans):
            part = stamp[at : at + y - x]
            buf[x - base : y - base] = part.replace(b"*", b"#") if i % 2 else part
            at += y - x
        self.count += 1


def _spans(pieces: list[tuple[int, int]], i: int, j: int) -> list[tuple[int, int]]:
    """The stream offsets of bytes [i, j) of the text the pieces make, joined in order."""
    out, pos = [], 0
    for x, y in pieces:
        lo, hi = max(i, pos), min(j, pos + y - x)
        if lo < hi:
            out.append((x + lo - pos, x + hi - pos))
        pos += y - x
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
