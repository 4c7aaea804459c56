"""Captures with known read offsets, written through the capture format's one writer
(:func:`lab.capture.writer.write_part`), for the exact timing tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

MS = 1_000_000  # ns per ms
CAPTURE_ID = "20261201T120000-0a0b0c0d"
STARTED = datetime(2026, 12, 1, 12, 0, 0, 250000, tzinfo=UTC)


def sse(delta: dict[str, Any]) -> bytes:
    """One OpenAI chat-completions SSE event with this delta."""
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": delta}]}).encode() + b"\n\n"


def content(text: str) -> bytes:
    return sse({"content": text})


def reasoning(text: str) -> bytes:
    return sse({"reasoning_content": text})


DONE = b"data: [DONE]\n\n"


def exchange_row(
    stream_id: str,
    reads: Sequence[bytes],
    *,
    k: int = 0,
    timing: str | None = None,
    started_at: datetime = STARTED,
    capture_id: str = CAPTURE_ID,
    model: str = "m",
    provider: str = "openai",
    extra_meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``streams`` row of one streamed 200 exchange."""
    meta: dict[str, Any] = dict(extra_meta or {})
    if timing is not None:
        meta["timing"] = timing
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    return {
        "capture_id": capture_id,
        "exchange": k,
        "stream_id": stream_id,
        "attempt": 0,
        "attempt_label": "default",
        "provider": provider,
        "model": model,
        "method": "POST",
        "url": "https://api.example.test/v1/chat/completions",
        "request_headers": "{}",
        "request_body": json.dumps(body),
        "request_body_encoding": "utf-8",
        "started_at": int(started_at.timestamp() * 1e6),
        "status": 200,
        "http_version": "HTTP/1.1",
        "response_headers": "{}",
        "t_headers_ns": None,
        "t_first_read_ns": None,
        "t_last_read_ns": None,
        "t_end_ns": None,
        "end_reason": "eof",
        "error": None,
        "n_reads": len(reads),
        "n_bytes": sum(map(len, reads)),
        "meta": json.dumps(meta),
    }


def write_capture(
    root: Path,
    exchanges: Sequence[tuple[dict[str, Any], Sequence[bytes], Sequence[int]]],
    *,
    capture_id: str = CAPTURE_ID,
) -> Path:
    """``(row, reads, read_t_ns)`` per exchange as one part of a new recording under root."""
    from lab.capture.redact import REDACTION_POLICY
    from lab.capture.schema import capture_info, schema_for
    from lab.capture.writer import write_part

    directory = Path(root) / capture_id
    directory.mkdir(parents=True)
    info = capture_info(capture_id, "latency test", "2026-12-01T12:00:00+00:00")
    rows = []
    for row, reads, times in exchanges:
        assert len(reads) == len(times)
        row = dict(row)
        row["t_first_read_ns"] = times[0] if times else None
        row["t_last_read_ns"] = times[-1] if times else None
        row["t_end_ns"] = times[-1] if times else None
        rows.append((row, list(reads), list(times)))
    write_part(
        directory,
        0,
        rows,
        streams_schema=schema_for("streams", info, REDACTION_POLICY),
        chunks_schema=schema_for("chunks", info, REDACTION_POLICY),
    )
    return directory
