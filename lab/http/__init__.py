"""The I/O edge: SSE framing and the record/replay httpx transports."""

from lab.http.sse import SSEDecoder, SSEEvent, iter_sse
from lab.http.transports import (
    AsyncRecordingTransport,
    RecordingTransport,
    ReplayExhausted,
    ReplayMismatch,
    ReplayTransport,
    replay_transport_for_body,
)

__all__ = [
    "AsyncRecordingTransport",
    "RecordingTransport",
    "ReplayExhausted",
    "ReplayMismatch",
    "ReplayTransport",
    "SSEDecoder",
    "SSEEvent",
    "iter_sse",
    "replay_transport_for_body",
]
