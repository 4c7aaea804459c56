"""Plain records of what was recorded: everything replay needs to serve an exchange back.

Kept free of pyarrow/pandas so the replay transport imports fast.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["RecordedExchange", "RecordedRequest"]


@dataclass
class RecordedExchange:
    """One HTTP exchange (attempt) as recorded: request, response line, reads, ending."""

    stream_id: str
    attempt: int
    attempt_label: str
    provider: str
    model: str | None
    method: str
    url: str
    request_headers: dict[str, str]
    request_body: bytes
    status: int | None
    http_version: str | None
    response_headers: dict[str, str]
    reads: list[bytes]
    read_t_ns: list[int]
    end_reason: str
    error: str | None
    meta: dict[str, Any] = field(default_factory=dict)
    t_headers_ns: int | None = None
    t_first_read_ns: int | None = None
    t_last_read_ns: int | None = None
    t_end_ns: int | None = None
    capture_id: str | None = None
    exchange: int | None = None
    started_at: datetime | None = None
    """Wall clock (UTC) when the request was sent (``streams.started_at``)."""

    @property
    def body(self) -> bytes:
        """The whole response body as received (reads joined)."""
        return b"".join(self.reads)

    def __repr__(self) -> str:
        return (
            f"RecordedExchange(stream_id={self.stream_id!r}, attempt={self.attempt}, "
            f"label={self.attempt_label!r}, status={self.status}, reads={len(self.reads)}, "
            f"bytes={sum(map(len, self.reads))}, end_reason={self.end_reason!r})"
        )


@dataclass
class RecordedRequest:
    """One logical request: all its attempts, in attempt order."""

    stream_id: str
    provider: str
    model: str | None
    exchanges: list[RecordedExchange]
    meta: dict[str, Any] = field(default_factory=dict)
    capture_id: str | None = None

    @property
    def final(self) -> RecordedExchange:
        """The last attempt."""
        return self.exchanges[-1]

    def __repr__(self) -> str:
        return (
            f"RecordedRequest(stream_id={self.stream_id!r}, provider={self.provider!r}, "
            f"model={self.model!r}, attempts={len(self.exchanges)})"
        )
