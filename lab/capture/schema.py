"""The on-disk capture format: two Parquet tables with explicit Arrow types.

``streams``: one row per HTTP exchange (attempt). ``chunks``: one row per network read, the
source of truth (exact bytes). Every file carries footer key-value metadata:

- ``lab.table``: ``"streams"`` or ``"chunks"``
- ``lab.schema_version``: ``SCHEMA_VERSION`` as a decimal string
- ``lab.capture``: JSON ``{capture_id, label, created_at, tool_version, python, httpx,
  pyarrow, platform}``
- ``lab.redaction``: JSON of ``redact.REDACTION_POLICY``

See ``docs/capture-schema.md`` for the column meanings and how to read the files without
this package.
"""

from __future__ import annotations

import json
import platform
import sys
from typing import Any

import pyarrow as pa

from lab._version import __version__

__all__ = [
    "CHUNKS_SCHEMA",
    "CUT_END_REASONS",
    "END_REASONS",
    "FOOTER_CAPTURE",
    "FOOTER_REDACTION",
    "FOOTER_SCHEMA_VERSION",
    "FOOTER_TABLE",
    "LIMIT_END_REASONS",
    "SCHEMA_VERSION",
    "STREAMS_SCHEMA",
    "UPGRADERS",
    "capture_info",
    "footer_metadata",
    "schema_for",
]

SCHEMA_VERSION = 1

FOOTER_TABLE = b"lab.table"
FOOTER_SCHEMA_VERSION = b"lab.schema_version"
FOOTER_CAPTURE = b"lab.capture"
FOOTER_REDACTION = b"lab.redaction"

END_REASONS = (
    "eof",
    "cancelled",
    "timeout",
    "read_error",
    "incomplete",
    "time_limit",
    "byte_limit",
)
"""Every ``end_reason`` an exchange is recorded with (the ``streams`` table's column)."""

CUT_END_REASONS = frozenset({"incomplete", "cancelled"})
"""Recorded end reasons that say the *recorder's* side stopped, not the provider's:
``incomplete`` (the recording process died; the exchange was rebuilt from its journal) and
``cancelled`` (the client stopped reading: interrupted, or a guard stopped the stream). A
replay that reads past the last read of such an exchange ends the attempt with that reason
(:class:`lab.http.transports.RecordingCut`)."""

LIMIT_END_REASONS = frozenset({"time_limit", "byte_limit"})
"""End reasons that say the lab's own limit ended the exchange (``LabConfig.max_exchange_s``
/ ``max_exchange_bytes``): recorded so, and the end reason of the attempt it ended."""

_TS = pa.timestamp("us", tz="UTC")

STREAMS_SCHEMA = pa.schema(
    [
        pa.field("capture_id", pa.string(), nullable=False),
        pa.field("exchange", pa.int32(), nullable=False),  # start order within the capture
        pa.field("stream_id", pa.string(), nullable=False),
        pa.field("attempt", pa.int32(), nullable=False),
        pa.field("attempt_label", pa.string(), nullable=False),
        pa.field("provider", pa.string(), nullable=False),
        pa.field("model", pa.string()),
        pa.field("method", pa.string(), nullable=False),
        pa.field("url", pa.string(), nullable=False),
        pa.field("request_headers", pa.string(), nullable=False),  # JSON object, redacted
        pa.field("request_body", pa.large_string(), nullable=False),
        pa.field("request_body_encoding", pa.string(), nullable=False),  # "utf-8" | "base64"
        pa.field("started_at", _TS, nullable=False),
        pa.field("status", pa.int16()),
        pa.field("http_version", pa.string()),
        pa.field("response_headers", pa.string()),  # JSON object, redacted
        pa.field("t_headers_ns", pa.int64()),
        pa.field("t_first_read_ns", pa.int64()),
        pa.field("t_last_read_ns", pa.int64()),
        pa.field("t_end_ns", pa.int64()),
        pa.field("end_reason", pa.string(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("n_reads", pa.int32(), nullable=False),
        pa.field("n_bytes", pa.int64(), nullable=False),
        pa.field("meta", pa.string(), nullable=False),  # JSON object from the caller
    ]
)

CHUNKS_SCHEMA = pa.schema(
    [
        pa.field("capture_id", pa.string(), nullable=False),
        pa.field("exchange", pa.int32(), nullable=False),
        pa.field("stream_id", pa.string(), nullable=False),
        pa.field("attempt", pa.int32(), nullable=False),
        pa.field("seq", pa.int32(), nullable=False),
        pa.field("t_ns", pa.int64(), nullable=False),
        pa.field("raw", pa.binary(), nullable=False),
        pa.field("n_bytes", pa.int32(), nullable=False),
    ]
)

_SCHEMAS = {"streams": STREAMS_SCHEMA, "chunks": CHUNKS_SCHEMA}

# Named upgraders in the style of llm/migrations.py: UPGRADERS[(table, v)] turns a table
# written with schema version v into version v + 1. Empty while there is only version 1.
UPGRADERS: dict[tuple[str, int], Any] = {}


def capture_info(capture_id: str, label: str | None, created_at: str) -> dict[str, Any]:
    """The ``lab.capture`` footer value for a new recording."""
    import httpx  # its version only; reading a capture never needs the HTTP client

    return {
        "capture_id": capture_id,
        "label": label,
        "created_at": created_at,
        "tool_version": __version__,
        "python": sys.version.split()[0],
        "httpx": httpx.__version__,
        "pyarrow": pa.__version__,
        "platform": platform.platform(),
    }


def footer_metadata(
    table: str, info: dict[str, Any], redaction: dict[str, Any]
) -> dict[bytes, bytes]:
    return {
        FOOTER_TABLE: table.encode(),
        FOOTER_SCHEMA_VERSION: str(SCHEMA_VERSION).encode(),
        FOOTER_CAPTURE: json.dumps(info, sort_keys=True).encode(),
        FOOTER_REDACTION: json.dumps(redaction, sort_keys=True).encode(),
    }


def schema_for(table: str, info: dict[str, Any], redaction: dict[str, Any]) -> pa.Schema:
    """The table's schema with this recording's footer metadata attached."""
    return _SCHEMAS[table].with_metadata(footer_metadata(table, info, redaction))
