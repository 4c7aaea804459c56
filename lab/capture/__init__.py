"""The capture format: schema, crash-safe writer, reader, redaction.

>>> import lab.capture
>>> with lab.capture.CaptureWriter("captures") as writer:   # doctest: +SKIP
...     rec = writer.exchange(stream_id="s1", attempt=0, ...)
>>> cap = lab.capture.open("captures")                      # doctest: +SKIP
>>> cap.streams, cap.chunks, cap.requests()                 # doctest: +SKIP

Names are loaded lazily so that importing ``lab.capture.records`` (the replay transport
does) does not import pandas and pyarrow.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lab.capture.errors import CaptureError, CaptureWarning, CaptureWriteError
    from lab.capture.reader import Capture, open
    from lab.capture.records import RecordedExchange, RecordedRequest
    from lab.capture.redact import (
        REDACTED_HEADERS,
        redact_body,
        redact_headers,
        redact_url,
    )
    from lab.capture.schema import CHUNKS_SCHEMA, SCHEMA_VERSION, STREAMS_SCHEMA
    from lab.capture.writer import CaptureWriter, ExchangeRecorder, new_capture_id

__all__ = [
    "CHUNKS_SCHEMA",
    "Capture",
    "CaptureError",
    "CaptureWarning",
    "CaptureWriteError",
    "CaptureWriter",
    "ExchangeRecorder",
    "REDACTED_HEADERS",
    "RecordedExchange",
    "RecordedRequest",
    "SCHEMA_VERSION",
    "STREAMS_SCHEMA",
    "new_capture_id",
    "open",
    "redact_body",
    "redact_headers",
    "redact_url",
]

_HOME = {
    "CHUNKS_SCHEMA": "schema",
    "Capture": "reader",
    "CaptureError": "errors",
    "CaptureWarning": "errors",
    "CaptureWriteError": "errors",
    "CaptureWriter": "writer",
    "ExchangeRecorder": "writer",
    "REDACTED_HEADERS": "redact",
    "RecordedExchange": "records",
    "RecordedRequest": "records",
    "SCHEMA_VERSION": "schema",
    "STREAMS_SCHEMA": "schema",
    "new_capture_id": "writer",
    "open": "reader",
    "redact_body": "redact",
    "redact_headers": "redact",
    "redact_url": "redact",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'lab.capture' has no attribute {name!r}")
    value = getattr(import_module(f"lab.capture.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
