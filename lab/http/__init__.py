"""The I/O edge: SSE framing and the record/replay httpx transports."""

from lab.http.sse import SSEDecoder, SSEEvent, iter_sse

__all__ = ["SSEDecoder", "SSEEvent", "iter_sse"]
