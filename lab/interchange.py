"""Captures in and out of the formats other tools write: HAR and VCR cassettes.

- :func:`import_har` — a HAR 1.2 file (browser DevTools, mitmproxy, Charles): every
  streamed LLM exchange in it becomes one logical request in a new capture.
- :func:`import_vcr` — vcrpy / pytest-recording YAML cassettes: the same, one exchange per
  interaction.
- :func:`export_vcr` — captured streams as a cassette vcrpy replays byte for byte (match on
  method, path and body), so a finding becomes a test in an app's own pytest-recording suite.

What counts as a streamed LLM exchange: the provider can be told from the request
(:func:`lab.infer.infer_family`) and the exchange streamed: its response is
``text/event-stream``, or its request asked for a stream (``"stream": true``, Gemini's
``:streamGenerateContent``). Every other entry is counted in the report's ``skipped``, with
the reason, never dropped silently.

The body in these formats is whole, so an imported exchange is **one read**. What timing the
source has is kept: a HAR entry's ``timings`` give the response-headers offset
(``blocked + dns + connect + send + wait``) and the end (``+ receive``); a cassette has none.
Neither has the arrival time of each read, so every imported exchange says
``meta.timing = "headers"`` (HAR with timings) or ``"none"``, and replay gives it no read
offsets: ``ttft_ms`` and ``duration_ms`` are missing and the timing tables leave it out.
Each exchange also carries ``meta.source`` (``"har"`` / ``"vcr"``), ``meta.source_file``
and ``meta.source_entry`` (its index there).

Bodies as sent: a HAR stores a text body as decoded text, and its writer chose the charset.
mitmproxy decodes a body whose ``Content-Type`` names no charset as latin-1 (its
``infer_content_encoding`` fallback), which an SSE stream, UTF-8 by definition, never is;
such a ``text/event-stream`` body whose latin-1 encoding is valid UTF-8 is taken as those
bytes (``café`` comes back as ``café``, not ``cafÃ©``). Every imported exchange whose body
was not taken as written says so in ``meta.source_body`` and in the report's ``notes``:
``latin-1`` (re-encoded so), or ``lossy`` when the text holds U+FFFD, the mark a writer
leaves where it replaced bytes it could not decode (the anomaly ``body_not_as_sent``).

Secrets: imported requests go through the capture's redaction like a recorded one (headers,
URL, body), with the import policy on top (``Redactor(imported=True)``: ``?code=`` and
session ids, session and CSRF headers, ``https://TOKEN@host``), and a secret the request
sent that the response echoes is masked in the response bytes, also when only the text the
events assemble spells it (:class:`~lab.capture.redact.ResponseScrubber`). A HAR stores the
response body decoded, so its ``Content-Encoding`` (and the framing headers) are not kept.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from typing import Any

from lab.exceptions import LabError

__all__ = ["ImportReport", "export_vcr", "import_har", "import_vcr"]

_FRAMING = frozenset({"content-length", "transfer-encoding"})
_DECODED_BODY = _FRAMING | {"content-encoding"}


class InterchangeError(ValueError, LabError):
    """A file that is not the format it was given as (one line saying what is wrong)."""


@dataclass
class ImportReport:
    """What an import wrote and what it left out (and why)."""

    capture_path: Path | None
    imported: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)
    """(entry index, reason) for every entry not imported."""
    notes: list[tuple[int, str]] = field(default_factory=list)
    """(entry index, what was done) for every imported body not taken as written."""

    def summary(self) -> str:
        where = f" into {self.capture_path}" if self.capture_path else ""
        line = f"imported {self.imported} streamed LLM exchange(s){where}"
        if self.skipped:
            reasons: dict[str, int] = {}
            for _, reason in self.skipped:
                reasons[reason] = reasons.get(reason, 0) + 1
            left = "; ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
            line += f"; skipped {len(self.skipped)}: {left}"
        for text in _BODY_NOTES.values():
            n = sum(1 for _, note in self.notes if note == text)
            if n:
                line += f"; {n} body(ies) {text}"
        return line


@dataclass
class _Entry:
    """One exchange read from a foreign file, before redaction."""

    method: str
    url: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    status: int | None
    http_version: str | None
    response_headers: list[tuple[str, str]]
    body: bytes
    started_at_us: int | None = None
    t_headers_ns: int | None = None
    t_end_ns: int | None = None
    body_fix: str | None = None  # SOURCE_BODY key: how the body was recovered, if it was


SOURCE_BODY_LATIN1 = "latin-1"
"""``meta.source_body``: the file held the UTF-8 body decoded as latin-1; re-encoded as
latin-1, the text gives back the bytes sent."""

SOURCE_BODY_LOSSY = "lossy"
"""``meta.source_body``: the text holds U+FFFD, where the file's writer replaced bytes it
could not decode; the bytes sent there are lost."""

_BODY_NOTES = {
    SOURCE_BODY_LATIN1: (
        "re-encoded as latin-1 (stored as latin-1 text; these are the UTF-8 bytes sent)"
    ),
    SOURCE_BODY_LOSSY: "not recoverable (U+FFFD: the file's writer replaced undecodable bytes)",
}
"""What the import report's ``notes`` say for each ``meta.source_body``."""


# -- what is a streamed LLM exchange -------------------------------------------------------


def _header(headers: Sequence[tuple[str, str]], name: str) -> str:
    for k, v in headers:
        if k.lower() == name:
            return v
    return ""


def _streamed(entry: _Entry) -> bool:
    if "text/event-stream" in _header(entry.response_headers, "content-type").lower():
        return True
    if ":streamGenerateContent" in entry.url:
        return True
    try:
        body = json.loads(entry.request_body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False
    return isinstance(body, dict) and body.get("stream") is True


def _why_not(entry: _Entry) -> tuple[str | None, str | None]:
    """(provider, None) for a streamed LLM exchange, else (None, the reason it is skipped)."""
    from lab.infer import infer_family

    guess = infer_family(entry.method, entry.url, dict(entry.request_headers), entry.request_body)
    if guess is None:
        return None, "not an LLM API request"
    if not _streamed(entry):
        return None, "not streamed"
    if entry.status is None:
        return None, "no response recorded"
    return guess.family, None


# -- writing a capture ---------------------------------------------------------------------


def _write(
    entries: list[tuple[int, _Entry, str]],
    out: str | Path,
    *,
    source: str,
    source_file: str,
    label: str | None,
    timing: Any,
) -> Path:
    """The entries as a new one-part capture under ``out``, through the capture format's
    one writer (:func:`lab.capture.writer.write_part`)."""
    from lab.capture.redact import REDACTION_POLICY, Redactor
    from lab.capture.schema import capture_info, schema_for
    from lab.capture.writer import encode_body, new_capture_id, write_part
    from lab.clients import _model_of

    capture_id = new_capture_id()
    directory = Path(out) / capture_id
    directory.mkdir(parents=True, exist_ok=False)
    info = capture_info(capture_id, label, datetime.now(UTC).isoformat())
    digest = hashlib.sha256(f"{source}:{source_file}".encode()).hexdigest()[:8]
    rows = []
    now_us = int(datetime.now(UTC).timestamp() * 1e6)
    for k, (index, entry, provider) in enumerate(entries):
        import httpx

        redactor = Redactor(imported=True)
        headers = redactor.headers(entry.request_headers)
        url = redactor.url(entry.url)
        body = redactor.body(entry.request_body)
        reads = [entry.body] if entry.body else []
        scrubber = redactor.response_scrubber()
        if scrubber is not None and reads:
            reads = [b"".join([*scrubber.feed(entry.body), *scrubber.flush()])]
        keep = _DECODED_BODY if source == "har" else _FRAMING
        response_headers = redactor.headers(
            [(k2, v) for k2, v in entry.response_headers if k2.lower() not in keep]
        )
        entry_timing = timing(entry)
        meta: dict[str, Any] = {
            "source": source,
            "source_file": source_file,
            "source_entry": index,
            "timing": entry_timing,
        }
        if entry.body_fix is not None:
            meta["source_body"] = entry.body_fix
        if scrubber is not None and (scrubber.count or scrubber.assembled):  # as recorded
            counts = {"response_body": scrubber.count, "response_assembled": scrubber.assembled}
            meta["lab.redacted"] = {k: v for k, v in counts.items() if v}
        t_read = entry.t_end_ns if entry.t_end_ns is not None else 0
        body_text, encoding = encode_body(body)
        model = _model_of(httpx.Request(entry.method, entry.url, content=entry.request_body))
        rows.append(
            (
                {
                    "capture_id": capture_id,
                    "exchange": k,
                    "stream_id": f"{source}-{digest}-{index}",
                    "attempt": 0,
                    "attempt_label": "default",
                    "provider": provider,
                    "model": model,
                    "method": entry.method.upper(),
                    "url": url,
                    "request_headers": json.dumps(headers, ensure_ascii=False),
                    "request_body": body_text,
                    "request_body_encoding": encoding,
                    "started_at": entry.started_at_us
                    if entry.started_at_us is not None
                    else now_us,
                    "status": entry.status,
                    "http_version": entry.http_version,
                    "response_headers": json.dumps(response_headers, ensure_ascii=False),
                    "t_headers_ns": entry.t_headers_ns,
                    "t_first_read_ns": t_read if reads and entry_timing != "none" else None,
                    "t_last_read_ns": t_read if reads and entry_timing != "none" else None,
                    "t_end_ns": entry.t_end_ns,
                    "end_reason": "eof",
                    "error": None,
                    "n_reads": len(reads),
                    "n_bytes": sum(map(len, reads)),
                    "meta": redactor.scrub(json.dumps(meta, ensure_ascii=False, sort_keys=True)),
                },
                reads,
                [t_read] * len(reads),
            )
        )
    write_part(
        directory,
        0,
        rows,
        streams_schema=schema_for("streams", info, REDACTION_POLICY),
        chunks_schema=schema_for("chunks", info, REDACTION_POLICY),
    )
    return directory


def _keep(
    candidates: Iterable[tuple[int, _Entry]], report: ImportReport
) -> list[tuple[int, _Entry, str]]:
    kept = []
    for index, entry in candidates:
        provider, why = _why_not(entry)
        if why is not None:
            report.skipped.append((index, why))
        elif provider is not None:  # always, when why is None
            kept.append((index, entry, provider))
    return kept


# -- HAR -----------------------------------------------------------------------------------


MAX_HAR_MS = 7 * 24 * 3600 * 1000.0
"""The largest HAR timing taken (a week, in ms); a larger one is an error, not a number."""


class _Bad(InterchangeError):
    """One field of an entry is not what HAR 1.2 (or a cassette) says: its path and what it
    holds. Internal: the importer re-raises it as an :class:`InterchangeError` naming the
    file and the entry."""


def _shown(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _object(parent: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    """``parent[key]`` when it is an object; missing or null is an empty one."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _Bad(f"{path} is {_shown(value)}, not an object")
    return value


def _ms(timings: Mapping[str, Any], key: str) -> float:
    """A HAR timing in ms; -1 (not applicable) and missing count as 0; anything else that
    is not a finite number from 0 to :data:`MAX_HAR_MS` is an error."""
    value = timings.get(key)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad(f"timings.{key} is {_shown(value)}, not a number")
    if value == -1:
        return 0.0
    if not 0 <= value <= MAX_HAR_MS:  # exact for ints: 10**400 and inf are refused here
        raise _Bad(f"timings.{key} is {_shown(value)}, not a time in ms (0 to {MAX_HAR_MS:.0f})")
    return float(value)


def _har_text(obj: Mapping[str, Any], path: str) -> bytes:
    text = obj.get("text")
    if text is None:
        return b""
    if not isinstance(text, str):
        raise _Bad(f"{path}.text is {_shown(text)}, not a string")
    encoding = obj.get("encoding")
    if encoding is not None and not isinstance(encoding, str):
        raise _Bad(f"{path}.encoding is {_shown(encoding)}, not a string")
    if (encoding or "").lower() == "base64":
        try:
            return base64.b64decode(text, validate=True)
        except ValueError:
            raise _Bad(f"{path}.text is not valid base64 (encoding: base64)") from None
    return text.encode("utf-8", "surrogatepass")


def _har_body(obj: Mapping[str, Any], content_type: str, path: str) -> tuple[bytes, str | None]:
    """A HAR response body as sent, and how it was recovered (None: taken as written).

    An SSE body (``text/event-stream``, UTF-8 by definition) with no charset in its
    ``Content-Type`` that a writer decoded as latin-1 (mitmproxy's fallback) holds only
    code points below 256; when those, as latin-1 bytes, are valid UTF-8 with at least one
    byte above 127, they are the bytes sent. Text a writer decoded right (``café`` as
    U+00E9) is not valid UTF-8 so, and stays UTF-8. Text with U+FFFD lost bytes.
    A field of the wrong type or invalid base64 is :class:`_Bad` (from :func:`_har_text`)."""
    body = _har_text(obj, path)
    text = obj.get("text")
    if not isinstance(text, str) or (obj.get("encoding") or "").lower() == "base64":
        return body, None
    if "\ufffd" in text:
        return body, SOURCE_BODY_LOSSY
    kind = content_type.lower()
    if "text/event-stream" in kind and "charset=" not in kind and not text.isascii():
        try:
            raw = text.encode("latin-1")
            raw.decode("utf-8")
        except UnicodeError:
            pass
        else:
            return raw, SOURCE_BODY_LATIN1
    return body, None


def _har_headers(items: Any, path: str) -> list[tuple[str, str]]:
    if items is None:
        return []
    if not isinstance(items, list):
        raise _Bad(f"{path} is {_shown(items)}, not a list")
    out = []
    for item in items:
        if isinstance(item, Mapping) and "name" in item:
            out.append((str(item["name"]), str(item.get("value", ""))))
    return [(k, v) for k, v in out if not k.startswith(":")]  # HTTP/2 pseudo-headers


def _har_started(text: Any) -> int | None:
    try:
        when = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return int(when.timestamp() * 1e6)
    except (ValueError, OverflowError):  # not a date, or one no clock reaches
        return None


def _har_entry(raw: Mapping[str, Any]) -> _Entry:
    """One HAR entry; :class:`_Bad` names the first field that is not what HAR says."""
    request = _object(raw, "request", "request")
    response = _object(raw, "response", "response")
    timings = _object(raw, "timings", "timings")
    status = response.get("status")
    if status is not None and (
        isinstance(status, bool) or not isinstance(status, int) or not 0 <= status <= 999
    ):
        raise _Bad(f"response.status is {_shown(status)}, not an HTTP status (0 to 999)")
    for key in ("method", "url"):
        if request.get(key) is not None and not isinstance(request[key], str):
            raise _Bad(f"request.{key} is {_shown(request[key])}, not a string")
    ms = {k: _ms(timings, k) for k in ("blocked", "dns", "connect", "send", "wait", "receive")}
    before = sum(ms[k] for k in ("blocked", "dns", "connect", "send", "wait"))
    timed = any(ms[k] for k in ("send", "wait", "receive"))
    response_headers = _har_headers(response.get("headers"), "response.headers")
    content = _object(response, "content", "response.content")
    mime = content.get("mimeType")
    content_type = _header(response_headers, "content-type") or (
        mime if isinstance(mime, str) else ""
    )
    body, body_fix = _har_body(content, content_type, "response.content")
    return _Entry(
        method=str(request.get("method") or "GET"),
        url=str(request.get("url") or ""),
        request_headers=_har_headers(request.get("headers"), "request.headers"),
        request_body=_har_text(
            _object(request, "postData", "request.postData"), "request.postData"
        ),
        status=status or None,  # 0: no response
        http_version=str(response.get("httpVersion") or "") or None,
        response_headers=response_headers,
        body=body,
        started_at_us=_har_started(raw.get("startedDateTime")),
        t_headers_ns=int(before * 1e6) if timed else None,
        t_end_ns=int((before + ms["receive"]) * 1e6) if timed else None,
        body_fix=body_fix,
    )


def import_har(
    path: str | Path, out: str | Path = "recordings", *, label: str | None = None
) -> ImportReport:
    """Import every streamed LLM exchange of a HAR file into a new capture under **out**.

    Raises :class:`InterchangeError` (one line) for a file that is not a HAR; a HAR with no
    streamed LLM exchange writes nothing (``report.capture_path`` is None).
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise InterchangeError(f"{path}: not a HAR file (JSON): {exc}") from None
    log = doc.get("log") if isinstance(doc, dict) else None
    entries = log.get("entries") if isinstance(log, dict) else None
    if not isinstance(entries, list):
        raise InterchangeError(f"{path}: not a HAR file (no log.entries list)")
    report = ImportReport(capture_path=None)
    candidates = []
    for index, raw in enumerate(entries):
        if not isinstance(raw, Mapping):
            report.skipped.append((index, "not a HAR entry"))
            continue
        try:
            candidates.append((index, _har_entry(raw)))
        except _Bad as exc:
            raise InterchangeError(f"{path}: entry {index}: {exc}") from None
    kept = _keep(candidates, report)
    report.notes = [(i, _BODY_NOTES[e.body_fix]) for i, e, _ in kept if e.body_fix is not None]
    if kept:

        def timing(entry: _Entry) -> str:
            return "headers" if entry.t_headers_ns is not None else "none"

        report.capture_path = _write(
            kept, out, source="har", source_file=path.name, label=label, timing=timing
        )
        report.imported = len(kept)
    return report


# -- VCR -----------------------------------------------------------------------------------


def _vcr() -> Any:
    try:
        import vcr.serialize
        import vcr.serializers.yamlserializer
    except ImportError:
        raise ImportError(
            "VCR cassettes need vcrpy: python -m pip install vcrpy (it brings pyyaml)"
        ) from None
    return vcr


MAX_YAML_ALIASES = 100
"""Aliases (``*name``) a cassette may use. vcrpy writes none; a document of nested aliases
(a "billion laughs") expands to exponentially many values, so past this it is refused."""


def _cassette_loader() -> type:
    """The YAML loader for cassettes: PyYAML's ``SafeLoader`` (plain data only: a
    ``!!python/...`` tag is an error, never code run, whatever vcrpy version is installed),
    counting aliases up to :data:`MAX_YAML_ALIASES`."""
    import yaml

    class CassetteLoader(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_YAML_ALIASES:
                    raise InterchangeError(
                        f"more than {MAX_YAML_ALIASES} YAML aliases (vcrpy writes none; "
                        "nested aliases expand without bound)"
                    )
            return super().compose_node(parent, index)

    return CassetteLoader


def _load_cassette(text: str) -> tuple[list[Any], list[dict]]:
    """A cassette's (requests, responses), loaded with :func:`_cassette_loader` and built
    as vcrpy builds them (``vcr.serialize.deserialize`` would use vcrpy's own loader)."""
    import yaml
    from vcr.request import Request
    from vcr.serializers import compat

    data = yaml.load(text, Loader=_cassette_loader())  # noqa: S506 - a SafeLoader subclass
    if not isinstance(data, dict) or not isinstance(data.get("interactions"), list):
        raise ValueError("no interactions list (old cassette format, or not a cassette)")
    requests, responses = [], []
    for i, item in enumerate(data["interactions"]):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("request"), dict)
            and isinstance(item.get("response"), dict)
        ):
            raise ValueError(f"interaction {i} is not a request and a response")
        requests.append(Request._from_dict(item["request"]))
        responses.append(compat.convert_to_bytes(item["response"]))
    return requests, responses


def _as_bytes(value: Any) -> bytes:
    if value is None:
        return b""
    if isinstance(value, bytes):
        return value
    read = getattr(value, "read", None)  # old cassettes: a BytesIO body
    if callable(read):
        return bytes(read())
    return str(value).encode("utf-8")


def _vcr_headers(headers: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    for name, values in (headers or {}).items():
        for value in values if isinstance(values, list | tuple) else [values]:
            out.append((str(name), str(value)))
    return out


def _vcr_entry(request: Any, response: Mapping[str, Any]) -> _Entry:
    status_obj = _object(response, "status", "response.status")
    status = status_obj.get("code")
    if status is not None and (
        isinstance(status, bool) or not isinstance(status, int) or not 0 <= status <= 999
    ):
        raise _Bad(f"response.status.code is {_shown(status)}, not an HTTP status (0 to 999)")
    headers = response.get("headers") or {}
    if not isinstance(headers, Mapping):
        raise _Bad(f"response.headers is {_shown(headers)}, not an object")
    return _Entry(
        method=str(request.method),
        url=str(request.uri),
        request_headers=_vcr_headers(request.headers),
        request_body=_as_bytes(request.body),
        status=status or None,
        http_version=None,
        response_headers=_vcr_headers(headers),
        body=_as_bytes(_object(response, "body", "response.body").get("string")),
    )


def import_vcr(
    paths: str | Path | Sequence[str | Path],
    out: str | Path = "recordings",
    *,
    label: str | None = None,
) -> ImportReport:
    """Import every streamed LLM exchange of vcrpy cassettes into one new capture.

    Each interaction's body is one read with no timing (``meta.timing = "none"``).
    """
    _vcr()  # vcrpy builds the requests (and says so when it is missing)
    files = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    report = ImportReport(capture_path=None)
    candidates: list[tuple[int, _Entry]] = []
    names = []
    index = 0
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
            requests, responses = _load_cassette(text)
        except InterchangeError as exc:
            raise InterchangeError(f"{path}: refused: {exc}") from None
        except (OSError, ValueError, UnicodeDecodeError, KeyError, TypeError) as exc:
            raise InterchangeError(f"{path}: not a vcrpy cassette: {_one_line(exc)}") from None
        except Exception as exc:  # a YAML parse or constructor error
            raise InterchangeError(f"{path}: not a vcrpy cassette: {_one_line(exc)}") from None
        names.append(path.name)
        for i, (request, response) in enumerate(zip(requests, responses, strict=True)):
            try:
                candidates.append((index, _vcr_entry(request, response)))
            except _Bad as exc:
                raise InterchangeError(f"{path}: interaction {i}: {exc}") from None
            index += 1
    kept = _keep(candidates, report)
    if kept:
        report.capture_path = _write(
            kept,
            out,
            source="vcr",
            source_file=", ".join(names),
            label=label,
            timing=lambda entry: "none",
        )
        report.imported = len(kept)
    return report


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


# -- VCR export ----------------------------------------------------------------------------


def export_vcr(
    capture_or_path: Any, stream_ids: Sequence[str] | None, dest: str | Path
) -> tuple[Path, int]:
    """Write the exchanges of **stream_ids** (every stream when None) as one vcrpy cassette
    at **dest**; returns (path, interactions written).

    Each attempt is one interaction: the recorded (redacted) request, and the response's
    status, headers and whole body (the reads joined: vcrpy serves a body as one piece). The
    framing headers (``Content-Length``, ``Transfer-Encoding``) are left out, as replay
    leaves them out; ``Content-Encoding`` is kept with the body as received, so vcrpy's httpx
    stub decodes it exactly as the live client did. An exchange that got no response is
    refused (a cassette cannot say "the connection failed").
    """
    vcr = _vcr()
    from vcr.request import Request

    from lab.capture import open as open_capture

    capture = (
        open_capture(capture_or_path)
        if isinstance(capture_or_path, str | Path)
        else capture_or_path
    )
    requests = capture.requests()
    if stream_ids is not None:
        wanted = list(dict.fromkeys(stream_ids))
        by_id = {r.stream_id: r for r in requests}
        missing = [s for s in wanted if s not in by_id]
        if missing:
            raise InterchangeError(f"no stream {missing[0]!r} in the capture")
        requests = [by_id[s] for s in wanted]
    vcr_requests, vcr_responses = [], []
    for request in requests:
        for ex in request.exchanges:
            if ex.status is None:
                raise InterchangeError(
                    f"stream {ex.stream_id!r} attempt {ex.attempt} got no response "
                    f"({ex.end_reason}: {ex.error}); a cassette cannot hold it"
                )
            headers: dict[str, list[str]] = {}
            for name, value in ex.response_headers.items():
                if name.lower() not in _FRAMING:
                    headers.setdefault(name, []).append(value)
            try:
                message = HTTPStatus(ex.status).phrase
            except ValueError:
                message = ""
            vcr_requests.append(
                Request(ex.method, ex.url, ex.request_body or None, dict(ex.request_headers))
            )
            vcr_responses.append(
                {
                    "status": {"code": ex.status, "message": message},
                    "headers": headers,
                    "body": {"string": ex.body},
                }
            )
    text = vcr.serialize.serialize(
        {"requests": vcr_requests, "responses": vcr_responses}, vcr.serializers.yamlserializer
    )
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(dest)
    return dest, len(vcr_requests)
