"""Regression fixtures: captured streams frozen as small captures with a golden result.

A fixture is one logical request (every degradation attempt) exported from a capture into
its own directory::

    tests/fixtures/<name>/
        capture/            a small capture (streams-00000.parquet, chunks-00000.parquet)
                            holding only this stream's exchanges and reads; lab.capture.open
                            reads it; headers stay redacted exactly as in the source
        stream.sse.txt      a readable rendering of every read, for code review and diffs
        expected.json       the golden: StreamResult.to_dict() of the replay (sorted keys)
        fixture.json        metadata: source capture, stream id, provider, model, config
                            fingerprint, predicate and shrink stats when shrunk, created by
        config.json         only when the fixture was exported under a non-default LabConfig

>>> import tempfile
>>> import lab.capture
>>> from lab import fixtures
>>> cap = lab.capture.open("captures")  # the bundled capture (run from the repository root)
>>> spill = next(r for r in cap.requests() if r.model == "fake/spill")
>>> path = fixtures.export_fixture(cap, spill.stream_id, tempfile.mkdtemp(), "spill")
>>> sorted(p.name for p in path.iterdir())
['capture', 'expected.json', 'fixture.json', 'stream.sse.txt']
>>> fixtures.compare_to_golden(path)
[]

:func:`shrink` reduces a misbehaving stream to the smallest one that still shows the
behaviour (delta debugging), so a 4,000-read stream becomes a five-event fixture.
:func:`cli` backs ``lab fixtures export`` and ``lab fixtures shrink``.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import json
import os
import re
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lab import anomalies
from lab import capture as capture_mod
from lab._version import __version__
from lab.capture import CaptureError
from lab.capture.records import RecordedExchange, RecordedRequest
from lab.capture.redact import REDACTION_POLICY, redact_headers, redact_url
from lab.capture.schema import capture_info, schema_for
from lab.config import ConfigError, LabConfig
from lab.exceptions import LabError
from lab.http.sse import SSEDecoder
from lab.replay import replay_request
from lab.result import StreamResult

__all__ = [
    "Fixture",
    "FixtureError",
    "ShrinkResult",
    "cli",
    "compare_to_golden",
    "ddmin",
    "discover",
    "export_fixture",
    "load_fixture",
    "pin_rule",
    "predicate_from_spec",
    "render_sse",
    "replay_fixture",
    "shrink",
    "shrink_fixture",
    "shrink_request",
    "split_events",
    "update_golden",
]

CAPTURE_DIR = "capture"
SSE_FILE = "stream.sse.txt"
EXPECTED_FILE = "expected.json"
META_FILE = "fixture.json"
CONFIG_FILE = "config.json"
FIXTURE_FORMAT = 1

Predicate = Callable[[StreamResult], bool]


class FixtureError(ValueError, LabError):
    """Bad input for a fixture operation; the message is one line saying what was wrong."""


# -- loading -----------------------------------------------------------------------------------


@dataclass
class Fixture:
    """An exported fixture, loaded: its recorded request, golden, metadata and config."""

    path: Path
    name: str
    request: RecordedRequest
    expected: dict[str, Any]
    meta: dict[str, Any]
    config: LabConfig = field(default_factory=LabConfig)

    def replay(self, config: Any = None) -> StreamResult:
        """Replay the fixture's capture (under ``config``, default: the fixture's own)."""
        cfg = self.config if config is None else LabConfig.coerce(config)
        return replay_request(self.request, config=cfg)


def load_fixture(path: str | Path) -> Fixture:
    """Read a fixture directory (``capture/``, ``expected.json``, ``fixture.json``)."""
    p = Path(path)
    if not (p / META_FILE).is_file():
        raise FixtureError(f"{p}: not a fixture directory ({META_FILE} missing)")
    meta = json.loads((p / META_FILE).read_text(encoding="utf-8"))
    cap = capture_mod.open(p / CAPTURE_DIR)
    requests = cap.requests()
    if len(requests) != 1:
        raise FixtureError(f"{p}: the fixture capture holds {len(requests)} streams, expected 1")
    expected_path = p / EXPECTED_FILE
    expected = (
        json.loads(expected_path.read_text(encoding="utf-8")) if expected_path.is_file() else {}
    )
    config = LabConfig.load(p / CONFIG_FILE) if (p / CONFIG_FILE).is_file() else LabConfig()
    return Fixture(
        path=p,
        name=meta.get("name", p.name),
        request=requests[0],
        expected=expected,
        meta=meta,
        config=config,
    )


def discover(root: str | Path = "tests/fixtures") -> list[Path]:
    """Every fixture directory directly under ``root`` (those holding a ``fixture.json``;
    hidden ones, such as an export still being built, are not fixtures)."""
    r = Path(root)
    if not r.is_dir():
        return []
    return sorted(
        d
        for d in r.iterdir()
        if d.is_dir() and not d.name.startswith(".") and (d / META_FILE).is_file()
    )


def replay_fixture(path: str | Path, config: Any = None) -> StreamResult:
    """Replay a fixture through the full stack (``config`` overrides the fixture's own)."""
    return load_fixture(path).replay(config)


def golden_text(result: StreamResult) -> str:
    """The golden form of a result: pretty JSON of ``to_dict()``, sorted keys, final newline."""
    return json.dumps(result.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def compare_to_golden(path: str | Path, config: Any = None) -> list[str]:
    """Replay the fixture and diff against its golden: unified diff lines, [] when equal.

    A replay that diverged from its recording (the ladder asked for other attempts or
    bodies than were recorded, see ``StreamResult.divergence``) fails too, even when its
    result equals the golden: one ``! <fixture>: replay diverged: ...`` line per divergence
    comes before the diff.
    """
    p = Path(path)
    expected_path = p / EXPECTED_FILE
    expected = expected_path.read_text(encoding="utf-8") if expected_path.is_file() else ""
    result = replay_fixture(p, config)
    diverged = [f"! {p.name}: replay diverged: {d}" for d in result.divergence]
    actual = golden_text(result)
    if expected == actual:
        return diverged
    return diverged + list(
        difflib.unified_diff(
            expected.splitlines(),
            actual.splitlines(),
            f"{p.name}/{EXPECTED_FILE}",
            f"{p.name} (replayed now)",
            lineterm="",
            n=2,
        )
    )


def update_golden(path: str | Path) -> list[str]:
    """Rewrite ``expected.json`` (and ``stream.sse.txt``) from a fresh replay.

    Returns the diff that was applied ([] when the golden was already current). A replay
    that diverged from its recording is never made a golden: :class:`FixtureError`.
    """
    p = Path(path)
    fx = load_fixture(p)
    result = fx.replay()
    if result.divergence:
        raise FixtureError(
            f"{p.name}: the replay diverged from its recording, not updating its golden: "
            + "; ".join(result.divergence)
        )
    diff = compare_to_golden(p)
    _replace_text(p / EXPECTED_FILE, golden_text(result))
    _replace_text(p / SSE_FILE, render_sse(fx.request, name=fx.name))
    return diff


def _replace_text(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all (a hidden temporary file, then ``os.replace``)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# -- the readable rendering --------------------------------------------------------------------

_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_text(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ch == "\x7f":
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def _escape_read(raw: bytes) -> str:
    """Bytes as readable text: valid UTF-8 as itself (controls and backslash escaped),
    invalid bytes (a character split across reads) as ``\\xNN``."""
    pieces = []
    i = 0
    while i < len(raw):
        try:
            pieces.append(_escape_text(raw[i:].decode("utf-8")))
            break
        except UnicodeDecodeError as exc:
            pieces.append(_escape_text(raw[i : i + exc.start].decode("utf-8")))
            pieces.append("".join(f"\\x{b:02x}" for b in raw[i + exc.start : i + exc.end]))
            i += exc.end
    return "".join(pieces)


def render_sse(request: RecordedRequest, *, name: str | None = None) -> str:
    """A human-readable, deterministic rendering of every read of every attempt.

    One header line per attempt (label, status, end reason, reads, bytes, error), then one
    line per SSE line of each read: ``[seq t=12.3ms] <escaped bytes>``; a read holding several
    lines continues on indented lines, and a line split across reads shows where it broke
    (its tail starts the next read). Bytes are shown as UTF-8 with ``\\n``/``\\r``/``\\t``
    escaped, invalid bytes (a character split between reads) as ``\\xNN``, and a literal
    backslash as ``\\\\``.
    """
    lines = [
        f"# fixture {name or request.stream_id}: stream {request.stream_id}",
        f"# provider={request.provider} model={request.model} capture={request.capture_id}",
    ]
    for ex in request.exchanges:
        lines.append("")
        lines.append(
            f"== attempt {ex.attempt} {ex.attempt_label}: status={ex.status} "
            f"end_reason={ex.end_reason} reads={len(ex.reads)} "
            f"bytes={sum(map(len, ex.reads))}"
            + (f" error={ex.error!r}" if ex.error else "")
            + " =="
        )
        lines.append(f"request: {_escape_read(ex.request_body)}")
        for seq, (raw, t) in enumerate(zip(ex.reads, ex.read_t_ns, strict=False)):
            prefix = f"[{seq:>3} t={t / 1e6:8.1f}ms] "
            pad = " " * len(prefix)
            parts = _LINE.findall(raw) or [b""]
            for k, part in enumerate(parts):
                lines.append((prefix if k == 0 else pad) + _escape_read(part))
    return "\n".join(lines) + "\n"


# -- writing a fixture capture -----------------------------------------------------------------


def _redacted(ex: RecordedExchange) -> RecordedExchange:
    """Belt and braces: re-apply the recorder's redaction (idempotent on a redacted capture)."""
    return replace(
        ex,
        request_headers=dict(redact_headers(ex.request_headers)),
        response_headers=dict(redact_headers(ex.response_headers)),
        url=redact_url(ex.url),
    )


def _write_capture(
    request: RecordedRequest,
    out: Path,
    *,
    info: dict[str, Any],
    started_at: dict[int, Any],
) -> None:
    """The request's exchanges as a one-part capture in ``out``, through the capture
    writer's :func:`~lab.capture.writer.write_part` (the one writer of the format)."""
    from lab.capture.writer import encode_body, write_part

    out.mkdir(parents=True, exist_ok=True)
    capture_id = info["capture_id"]
    exchanges: list[tuple[dict[str, Any], list[bytes], list[int]]] = []
    for k, ex in enumerate(request.exchanges):
        ex = _redacted(ex)
        body, encoding = encode_body(ex.request_body)
        ts = list(ex.read_t_ns)
        exchanges.append(
            (
                {
                    "capture_id": capture_id,
                    # the recording's own number: fixtures of one recording, side by side,
                    # are then different exchanges of it, not copies of one
                    "exchange": ex.exchange if ex.exchange is not None else k,
                    "stream_id": ex.stream_id,
                    "attempt": ex.attempt,
                    "attempt_label": ex.attempt_label,
                    "provider": ex.provider,
                    "model": ex.model,
                    "method": ex.method,
                    "url": ex.url,
                    "request_headers": json.dumps(ex.request_headers, ensure_ascii=False),
                    "request_body": body,
                    "request_body_encoding": encoding,
                    "started_at": started_at.get(ex.attempt, k),
                    "status": ex.status,
                    "http_version": ex.http_version,
                    "response_headers": (
                        json.dumps(ex.response_headers, ensure_ascii=False)
                        if ex.status is not None
                        else None
                    ),
                    "t_headers_ns": ex.t_headers_ns,
                    "t_first_read_ns": ts[0] if ts else None,
                    "t_last_read_ns": ts[-1] if ts else None,
                    "t_end_ns": ex.t_end_ns,
                    "end_reason": ex.end_reason,
                    "error": ex.error,
                    "n_reads": len(ex.reads),
                    "n_bytes": sum(map(len, ex.reads)),
                    "meta": json.dumps(ex.meta or {}, ensure_ascii=False, sort_keys=True),
                },
                list(ex.reads),
                ts,
            )
        )
    write_part(
        out,
        0,
        exchanges,
        streams_schema=schema_for("streams", info, REDACTION_POLICY),
        chunks_schema=schema_for("chunks", info, REDACTION_POLICY),
    )


def _source_info(cap: Any, request: RecordedRequest, name: str) -> dict[str, Any]:
    info: dict[str, Any] = {}
    if cap is not None:
        info = dict((cap.metadata.get("captures") or {}).get(request.capture_id) or {})
    if not info:
        info = capture_info(request.capture_id or "fixture", None, "")
        # keep fixture files reproducible: no per-machine facts
        for key in ("platform", "python", "httpx", "pyarrow"):
            info.pop(key, None)
    info["capture_id"] = request.capture_id or "fixture"
    source_label = info.get("label")
    info["label"] = f"fixture {name}" + (f" (from {source_label})" if source_label else "")
    return info


def _started_at(cap: Any, request: RecordedRequest) -> dict[int, Any]:
    if cap is None:
        return {}
    df = cap.streams
    rows = df[(df["stream_id"] == request.stream_id) & (df["capture_id"] == request.capture_id)]
    return {
        int(a): t.to_pydatetime() for a, t in zip(rows["attempt"], rows["started_at"], strict=True)
    }


# -- exporting ---------------------------------------------------------------------------------


def _open(source: Any) -> Any:
    if isinstance(source, (str, Path)):
        return capture_mod.open(source)
    return source


def _find_request(cap: Any, stream_id: str, where: str = "the capture") -> RecordedRequest:
    requests = cap.requests() if hasattr(cap, "requests") else list(cap)
    exact = [r for r in requests if r.stream_id == stream_id]
    if not exact and stream_id:
        exact = [r for r in requests if r.stream_id.startswith(stream_id)]
        if len(exact) > 1:
            some = ", ".join(r.stream_id for r in exact[:5])
            raise FixtureError(f"stream id prefix {stream_id!r} is ambiguous in {where}: {some}")
    if not exact:
        ids = [r.stream_id for r in requests]
        sample = ", ".join(ids[:5]) + (f", ... ({len(ids)} in all)" if len(ids) > 5 else "")
        raise FixtureError(
            f"unknown stream id {stream_id!r} in {where}; available: {sample or '(none)'}"
        )
    if len(exact) > 1:
        caps = ", ".join(str(r.capture_id) for r in exact)
        raise FixtureError(
            f"stream id {stream_id!r} is in several recordings ({caps}); open one recording"
        )
    return exact[0]


def _slug(text: str | None) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", (text or "").lower()).strip("-")
    return s or "x"


def default_name(request: RecordedRequest, result: StreamResult | None = None) -> str:
    """``<model>-<backend>-<last 6 of stream id>`` (``spill-novita-225392``)."""
    model = (request.model or "stream").split("/")[-1]
    backend = (result.serving_provider if result else None) or request.provider
    return f"{_slug(model)}-{_slug(backend)}-{request.stream_id[-6:]}"


FIXTURE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""What a fixture or cassette name may be: one file name inside ``--dest`` (no separator, no
leading dot, so never ``..`` nor a path out of it)."""


def check_name(name: str) -> str:
    """``name`` when :data:`FIXTURE_NAME` takes it, else :class:`FixtureError`."""
    if not FIXTURE_NAME.fullmatch(name):
        raise FixtureError(f"fixture name {name!r}: use letters, digits, '.', '_' and '-'")
    return name


def export_fixture(
    capture_or_path: Any,
    stream_id: str | None = None,
    dest: str | Path = "tests/fixtures",
    name: str | None = None,
    config: Any = None,
    *,
    request: RecordedRequest | None = None,
    predicate: str | None = None,
    shrink_info: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Export one stream, with all its attempts, as ``<dest>/<name>/``; returns that path.

    **capture_or_path** is a capture path, a :class:`~lab.capture.Capture`, a list of
    ``RecordedRequest`` or one ``RecordedRequest``. **stream_id** picks the stream (a unique
    prefix is enough). **request** replaces the stream's recorded exchanges (a shrunk copy
    of it) while the capture still supplies provenance. **config** (anything
    :meth:`LabConfig.coerce` takes) is stored as ``config.json`` when not the default, and
    the golden is produced under it. An existing fixture directory is an error unless
    **overwrite**.
    """
    cap = None
    if isinstance(capture_or_path, RecordedRequest):
        source = capture_or_path
    else:
        cap = _open(capture_or_path)
        if stream_id is None:
            raise FixtureError("export_fixture needs a stream_id")
        source = _find_request(
            cap, stream_id, str(capture_or_path) if cap is not capture_or_path else "the capture"
        )
        if not hasattr(cap, "streams"):
            cap = None
    req = copy.deepcopy(request if request is not None else source)
    cfg = LabConfig.coerce(config)
    result = replay_request(req, config=cfg)
    name = check_name(name or default_name(req, result))
    final = Path(dest) / name
    if final.exists() and not overwrite:
        raise FixtureError(f"{final} already exists; remove it or choose another --name")
    if final.exists() and not _is_fixture_dir(final):
        raise FixtureError(
            f"{final} exists and is not a fixture (no {META_FILE} and {EXPECTED_FILE});"
            " not replacing it"
        )
    final.parent.mkdir(parents=True, exist_ok=True)
    # built whole in a hidden sibling directory and renamed into place: a failed export
    # leaves nothing behind, and an overwritten fixture stays intact until the new one is
    # complete
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=final.parent))
    try:
        _fill_fixture(staging, req, cap, cfg, result, name, predicate, shrink_info)
        if final.exists():
            old = staging.with_name(staging.name + ".old")
            final.rename(old)
            staging.rename(final)
            shutil.rmtree(old)
        else:
            staging.rename(final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def _is_fixture_dir(path: Path) -> bool:
    """Whether ``path`` is an exported fixture (a directory with its marker files): the only
    kind of directory ``overwrite`` may replace."""
    return path.is_dir() and all((path / f).is_file() for f in (META_FILE, EXPECTED_FILE))


def _fill_fixture(
    out: Path,
    req: RecordedRequest,
    cap: Any,
    cfg: LabConfig,
    result: StreamResult,
    name: str,
    predicate: str | None,
    shrink_info: dict[str, Any] | None,
) -> None:
    """Write every file of a fixture into the (empty, staging) directory ``out``."""
    _write_capture(
        req, out / CAPTURE_DIR, info=_source_info(cap, req, name), started_at=_started_at(cap, req)
    )
    if cfg != LabConfig():
        cfg.save(out / CONFIG_FILE)

    meta: dict[str, Any] = {
        "format": FIXTURE_FORMAT,
        "name": name,
        "source_capture_id": req.capture_id,
        "stream_id": req.stream_id,
        "provider": req.provider,
        "model": req.model,
        "serving_provider": result.serving_provider,
        "attempts": [ex.attempt_label for ex in req.exchanges],
        "config_fingerprint": cfg.fingerprint(),
        "predicate": predicate,
        "shrink": shrink_info,
        "created_by": f"lab.fixtures (stream-lab {__version__})",
    }
    (out / META_FILE).write_text(
        json.dumps(meta, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (out / SSE_FILE).write_text(render_sse(req, name=name), encoding="utf-8")
    # the golden comes from the fixture as written, read back: what the tests will replay
    written = load_fixture(out).replay()
    (out / EXPECTED_FILE).write_text(golden_text(written), encoding="utf-8")


# -- predicates --------------------------------------------------------------------------------

PREDICATE_FORMS = (
    "spill_guard",
    "guard=NAME",
    "guard=NAME:rule=RULE",
    "classifier=NAME",
    "anomaly=NAME",
    "error_type=TYPE",
)

ANY_RULE = "*"
"""``guard=NAME:rule=*``: any rule of the guard (shrinking does not pin the first one)."""


def _named(fn: Predicate, spec: str) -> Predicate:
    fn.__name__ = fn.__qualname__ = f"predicate({spec})"
    fn.spec = spec  # type: ignore[attr-defined]
    return fn


def _guard_fired(guard: str, rule: str | None) -> Predicate:
    """Guard ``guard`` moved or dropped text (by rule ``rule``, when one is given)."""

    def fired(r: StreamResult) -> bool:
        return any(
            e.guard == guard and e.moved and (rule is None or e.detail.get("rule") == rule)
            for e in r.guard_events
        )

    return fired


def _guard_spec(text: str) -> tuple[str, str | None] | None:
    """``(guard, rule)`` of a guard spec (``spill_guard``, ``guard=NAME``,
    ``guard=NAME:rule=RULE``; rule ``None`` when unnamed or ``*``), else ``None``."""
    head, _, tail = text.partition(":")
    key, sep, value = (x.strip() for x in head.partition("="))
    if not sep and key in ("spill_guard", "spill"):
        guard = "spill_guard"
    elif key == "guard" and sep and value:
        guard = value
    else:
        return None
    if not tail:
        return guard, None
    rkey, rsep, rule = (x.strip() for x in tail.partition("="))
    if rkey != "rule" or not rsep or not rule:
        raise FixtureError(f"bad predicate {text!r}; a guard's rule is written {guard}:rule=RULE")
    return guard, None if rule == ANY_RULE else rule


def predicate_from_spec(spec: str | Predicate) -> Predicate:
    """A predicate over a :class:`StreamResult` from a short spec (a callable passes through).

    - ``spill_guard``: a ``spill_guard`` GuardEvent moved text;
    - ``guard=NAME``: a GuardEvent of guard NAME moved or dropped text;
    - ``guard=NAME:rule=RULE``: ... by rule RULE (its ``detail["rule"]``; ``rule=*`` any);
    - ``classifier=NAME``: the error classifier NAME fired;
    - ``anomaly=NAME``: :func:`lab.anomalies.detect` reports NAME;
    - ``error_type=TYPE``: the stream ended with a ProviderError of that type.

    :func:`shrink` pins the rule of a guard spec that names none (see :func:`pin_rule`).
    """
    if callable(spec):
        return spec
    text = str(spec).strip()
    guard = _guard_spec(text)
    if guard is not None:
        return _named(_guard_fired(*guard), text)
    key, sep, value = text.partition("=")
    key, value = key.strip(), value.strip()
    if sep and value:
        if key == "classifier":
            return _named(lambda r: r.classifier == value, text)
        if key == "error_type":
            return _named(lambda r: r.error is not None and r.error.type == value, text)
        if key == "anomaly":
            if value not in anomalies.DETECTORS:
                raise FixtureError(
                    f"unknown anomaly {value!r}; known: {', '.join(anomalies.DETECTORS)}"
                )
            return _named(lambda r: value in anomalies.detect(r), text)
    raise FixtureError(f"bad predicate {text!r}; use one of: {', '.join(PREDICATE_FORMS)}")


def pin_rule(spec: str | Predicate, result: StreamResult) -> str | Predicate:
    """``spec`` with the guard's rule pinned to the one that fired first in ``result``.

    Shrinking by ``guard=think_stripper`` alone may end at a stream where the same guard
    fires by another rule (a 69-character think block shrunk to a ``"<thi"`` event that the
    guard drops as a partial tag): "same guard, same rule" keeps the behaviour the stream
    was picked for. A spec that names its rule (``rule=*`` for any), and any other spec or
    callable, comes back as it was."""
    if callable(spec) or ":" in str(spec):
        return spec
    parsed = _guard_spec(str(spec).strip())
    if parsed is None:
        return spec
    guard, _ = parsed
    for e in result.guard_events:
        if e.guard == guard and e.moved and e.detail.get("rule"):
            return f"guard={guard}:rule={e.detail['rule']}"
    return spec


# -- shrinking ---------------------------------------------------------------------------------


def split_events(body: bytes) -> list[bytes]:
    """Split a response body into the raw bytes of its SSE events, in order.

    Framing is :class:`~lab.http.sse.SSEDecoder`'s (CRLF/CR/LF, comments as their own
    events): the body is fed one line at a time and cut right after each line that dispatched
    an event, so each piece holds one event's lines *and* its terminating blank line (blank or
    ignored lines before an event travel with it; a trailing unterminated event is the last
    piece). ``b"".join(split_events(body)) == body`` always holds; a body that is not SSE
    (an HTTP error's JSON) is one piece.
    """
    decoder = SSEDecoder()
    pieces: list[bytes] = []
    start = 0
    pos = 0
    for k, m in enumerate(_LINE.finditer(body)):
        line = m.group()
        pos = m.end()
        if decoder.decode(line, k) and line[-1:] in (b"\n", b"\r"):
            pieces.append(body[start:pos])
            start = pos
    if start < len(body):
        pieces.append(body[start:])
    return pieces


def _pieces(ex: RecordedExchange, granularity: str) -> tuple[list[bytes], list[int]]:
    """The shrinkable pieces of an exchange and the arrival time of each (its last byte)."""
    if granularity == "reads":
        return list(ex.reads), list(ex.read_t_ns)
    if granularity != "events":
        raise FixtureError(f"granularity must be 'events' or 'reads', not {granularity!r}")
    pieces = split_events(ex.body)
    ends, total = [], 0
    for r in ex.reads:
        total += len(r)
        ends.append(total)
    times, offset, i = [], 0, 0
    for p in pieces:
        offset += len(p)
        while i < len(ends) - 1 and ends[i] < offset:
            i += 1
        times.append(ex.read_t_ns[i] if ex.read_t_ns else 0)
    return pieces, times


def _with_pieces(
    request: RecordedRequest, attempt: int, pieces: list[bytes], times: list[int]
) -> RecordedRequest:
    exchanges = list(request.exchanges)
    ex = exchanges[attempt]
    exchanges[attempt] = replace(
        ex,
        reads=list(pieces),
        read_t_ns=list(times),
        t_first_read_ns=times[0] if times else None,
        t_last_read_ns=times[-1] if times else None,
    )
    return replace(request, exchanges=exchanges)


def ddmin(
    items: Sequence[Any],
    test: Callable[[list[Any]], bool],
    *,
    max_tests: int | None = None,
    on_test: Callable[[int, int], None] | None = None,
) -> tuple[list[Any], int, bool]:
    """Zeller & Hildebrandt's ddmin: a 1-minimal subsequence of ``items`` passing ``test``.

    ``test(items)`` must hold. With ``n = 2``: split the current sequence into ``n`` chunks;
    if some chunk alone passes, continue from it with ``n = 2``; else if some complement
    (everything but one chunk) passes, continue from it with ``n = max(n - 1, 2)``; else, if
    ``n`` already equals the length, stop (no single element can be removed: 1-minimal),
    otherwise double ``n`` (at most the length). The empty sequence is tried first. Results
    are cached, so no subset is tested twice.

    Returns ``(kept, tests_run, capped)``; ``capped`` is True when ``max_tests`` stopped the
    search early (the result still passes but may not be 1-minimal).
    """
    cache: dict[tuple[int, ...], bool] = {}
    tests = 0
    capped = False
    indices = list(range(len(items)))

    class _Cap(LabError):
        pass

    def run(subset: list[int]) -> bool:
        nonlocal tests
        key = tuple(subset)
        if key in cache:
            return cache[key]
        if max_tests is not None and tests >= max_tests:
            raise _Cap
        tests += 1
        ok = bool(test([items[i] for i in subset]))
        cache[key] = ok
        if on_test is not None:
            on_test(tests, len(current))
        return ok

    current = indices
    try:
        if run([]):
            return [], tests, False
        n = 2
        while len(current) >= 2:
            n = min(n, len(current))
            size, extra = divmod(len(current), n)
            chunks, at = [], 0
            for k in range(n):
                step = size + (1 if k < extra else 0)
                chunks.append(current[at : at + step])
                at += step
            for chunk in chunks:
                if run(chunk):
                    current, n = chunk, 2
                    break
            else:
                for k in range(n):
                    complement = [i for j, c in enumerate(chunks) if j != k for i in c]
                    if run(complement):
                        current, n = complement, max(n - 1, 2)
                        break
                else:
                    if n >= len(current):
                        break
                    n = min(2 * n, len(current))
    except _Cap:
        capped = True
    return [items[i] for i in current], tests, capped


@dataclass
class ShrinkResult:
    """What :func:`shrink_request` did: the shrunk request and how it got there."""

    request: RecordedRequest
    attempt: int
    granularity: str
    before: int
    after: int
    replays: int
    capped: bool
    predicate: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "granularity": self.granularity,
            "before": self.before,
            "after": self.after,
            "replays": self.replays,
            "capped": self.capped,
            "predicate": self.predicate,
        }

    def __str__(self) -> str:
        return (
            f"shrunk attempt {self.attempt}: {self.before} {self.granularity} -> {self.after} "
            f"in {self.replays} replays" + (" (replay cap hit: not minimal)" if self.capped else "")
        )


def shrink_request(
    recorded_request: RecordedRequest,
    predicate: str | Predicate,
    *,
    granularity: str = "events",
    attempt: int | None = None,
    config: Any = None,
    max_replays: int = 2000,
    progress: bool | None = None,
) -> ShrinkResult:
    """:func:`shrink` with its statistics (pieces before/after, replays, cap hit)."""
    cfg = LabConfig.coerce(config)
    predicate_from_spec(predicate)  # a bad spec fails before any replay
    if not recorded_request.exchanges:
        raise FixtureError(f"stream {recorded_request.stream_id!r} has no exchanges")
    index = len(recorded_request.exchanges) - 1 if attempt is None else attempt
    if not 0 <= index < len(recorded_request.exchanges):
        raise FixtureError(
            f"stream {recorded_request.stream_id!r} has no attempt {attempt} "
            f"({len(recorded_request.exchanges)} recorded)"
        )
    pieces, times = _pieces(recorded_request.exchanges[index], granularity)
    timed = list(zip(pieces, times, strict=True))

    def build(kept: list[tuple[bytes, int]]) -> RecordedRequest:
        return _with_pieces(recorded_request, index, [p for p, _ in kept], [t for _, t in kept])

    if isinstance(predicate, str) and ":" not in predicate:  # same guard, same rule
        try:
            predicate = pin_rule(predicate, replay_request(build(timed), config=cfg))
        except Exception:  # noqa: BLE001 - the stream does not replay: the check below says so
            pass
    pred = predicate_from_spec(predicate)
    spec = getattr(pred, "spec", getattr(pred, "__name__", repr(pred)))

    def test(kept: list[tuple[bytes, int]]) -> bool:
        try:
            return bool(pred(replay_request(build(kept), config=cfg)))
        except Exception:  # a subset that breaks the stack does not show the behaviour
            return False

    if not test(timed):
        raise FixtureError(
            f"predicate {spec} does not hold on stream {recorded_request.stream_id!r}; "
            "nothing to shrink"
        )
    bar = None
    if progress or (progress is None and len(timed) >= 200):
        from tqdm.auto import tqdm

        bar = tqdm(total=max_replays, desc=f"shrink {len(timed)} {granularity}", unit="replay")
        bar.update(1)  # the check that the predicate holds on the whole stream

    def on_test(n: int, size: int) -> None:
        if bar is not None:
            bar.update(1)
            bar.set_postfix(size=size)

    try:
        kept, replays, capped = ddmin(
            timed, test, max_tests=max(0, max_replays - 1), on_test=on_test
        )
    finally:
        if bar is not None:
            bar.close()
    if capped:
        warnings.warn(
            f"shrink stopped after {max_replays} replays; the result may not be 1-minimal",
            stacklevel=2,
        )
    return ShrinkResult(
        request=build(kept),
        attempt=index,
        granularity=granularity,
        before=len(timed),
        after=len(kept),
        replays=replays + 1,
        capped=capped,
        predicate=str(spec),
    )


def shrink(
    recorded_request: RecordedRequest,
    predicate: str | Predicate,
    *,
    granularity: str = "events",
    attempt: int | None = None,
    config: Any = None,
    max_replays: int = 2000,
    progress: bool | None = None,
) -> RecordedRequest:
    """The smallest version of a stream that still satisfies ``predicate`` (delta debugging).

    **What is shrunk.** One attempt's response body — by default the final one, where the
    committed stream and its guards live. Earlier attempts are kept intact: they are usually
    one small HTTP error body each, and they are what drives the degradation ladder, so
    removing them would change which request the final attempt answers. Pass **attempt** to
    shrink another one.

    **Pieces.** With ``granularity="events"`` the body is split into SSE events
    (:func:`split_events`: each piece is an event's raw bytes including its terminating blank
    line, comments are their own pieces); with ``"reads"`` the pieces are the recorded
    network reads. A candidate keeps a subset of pieces in order and is rebuilt with one read
    per kept piece (each timed like the original read that completed it), then replayed
    through the full stack with :func:`lab.replay.replay_request` under **config**.

    **Algorithm: ddmin** (Zeller & Hildebrandt, "Simplifying and Isolating Failure-Inducing
    Input", 2002), see :func:`ddmin`: split the pieces into ``n`` chunks (start ``n = 2``);
    test each chunk, then each complement; on success continue from the smaller sequence
    (``n = 2`` after a chunk, ``n - 1`` after a complement); otherwise double ``n``; stop when
    ``n`` equals the number of pieces and nothing could be removed. The result is
    **1-minimal**: removing any single remaining piece makes the predicate fail.

    **predicate** is a callable on the :class:`StreamResult` or a spec for
    :func:`predicate_from_spec` (``spill_guard``, ``guard=NAME``, ``classifier=NAME``,
    ``anomaly=NAME``, ``error_type=TYPE``). It must hold on the original stream. At most
    **max_replays** replays run (then the best stream so far is returned, with a warning);
    **progress** shows a tqdm bar (default: for 200 pieces or more).
    """
    return shrink_request(
        recorded_request,
        predicate,
        granularity=granularity,
        attempt=attempt,
        config=config,
        max_replays=max_replays,
        progress=progress,
    ).request


def shrink_fixture(
    capture_or_path: Any,
    stream_id: str,
    predicate: str | Predicate,
    dest: str | Path = "tests/fixtures",
    name: str | None = None,
    config: Any = None,
    *,
    granularity: str = "events",
    max_replays: int = 2000,
    progress: bool | None = None,
    overwrite: bool = False,
) -> tuple[Path, ShrinkResult]:
    """Shrink a captured stream with :func:`shrink_request` and export the result as a fixture."""
    cap = _open(capture_or_path)
    where = str(capture_or_path) if cap is not capture_or_path else "the capture"
    source = _find_request(cap, stream_id, where)
    res = shrink_request(
        source,
        predicate,
        granularity=granularity,
        config=config,
        max_replays=max_replays,
        progress=progress,
    )
    if name is None:
        name = default_name(source, replay_request(source, config=config)) + "-shrunk"
    path = export_fixture(
        cap,
        source.stream_id,
        dest,
        name,
        config,
        request=res.request,
        predicate=res.predicate,
        shrink_info=res.to_dict(),
        overwrite=overwrite,
    )
    return path, res


# -- command line ------------------------------------------------------------------------------


def cli(args: argparse.Namespace) -> int:
    """``lab fixtures export`` / ``lab fixtures shrink``; 0 on success, 2 on bad input."""
    command = getattr(args, "fixtures_command", None)
    try:
        cap = _open(getattr(args, "capture", None) or args.path)
        if command == "export":
            streams = args.stream if isinstance(args.stream, list) else [args.stream]
            for k, sid in enumerate(streams):
                name = args.name
                if name and len(streams) > 1:
                    name = f"{args.name}-{k + 1}"
                path = export_fixture(
                    cap, sid, args.dest, name, overwrite=getattr(args, "force", False)
                )
                print(f"exported {_find_request(cap, sid).stream_id} -> {path}")
            return 0
        if command == "shrink":
            predicate = predicate_from_spec(args.predicate)
            path, res = shrink_fixture(
                cap,
                args.stream,
                predicate,
                args.dest,
                args.name,
                granularity=getattr(args, "granularity", "events"),
                max_replays=getattr(args, "max_replays", 2000),
                overwrite=getattr(args, "force", False),
                progress=None,
            )
            print(f"{res}; exported -> {path}")
            return 0
        print(f"lab: error: unknown fixtures command {command!r}", file=sys.stderr)
        return 2
    except (FixtureError, CaptureError, ConfigError, FileNotFoundError) as exc:
        print(f"lab: error: {exc}", file=sys.stderr)
        return 2
