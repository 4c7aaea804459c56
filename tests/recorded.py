"""A recorded exchange built by hand, for tests that serve one back without recording it."""

from __future__ import annotations

from typing import Any

from lab.capture.records import RecordedExchange


def recorded_exchange(**fields: Any) -> RecordedExchange:
    """A recorded 200 exchange of two SSE reads; ``fields`` override any of its values."""
    values: dict[str, Any] = {
        "stream_id": "t",
        "attempt": 0,
        "attempt_label": "default",
        "provider": "p",
        "model": None,
        "method": "POST",
        "url": "http://x",
        "request_headers": {},
        "request_body": b"",
        "status": 200,
        "http_version": "HTTP/1.1",
        "response_headers": {},
        "reads": [b"data: a\n\n", b"data: b"],
        "read_t_ns": [10, 20],
        "end_reason": "eof",
        "error": None,
    }
    return RecordedExchange(**(values | fields))
