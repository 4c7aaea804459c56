"""A hand-driven upstream on 127.0.0.1 for the proxy's limit tests: each connection's
request head is read whole, remembered, and handed to ``respond(head, sock, stop)`` on a
thread of its own, which writes whatever it likes (an endless stream, a trickle, a huge
error body) until it returns or ``stop`` is set.

    with RawUpstream(respond) as up:
        ProxyConfig(provider="openai", upstream=up.url + "/v1", ...)
        up.heads    # every request head received, as bytes
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable

__all__ = ["RawUpstream", "endless_sse", "sse_headers"]


def sse_headers(status: int = 200, extra: bytes = b"") -> bytes:
    """A chunked ``text/event-stream`` response head."""
    return (
        b"HTTP/1.1 %d X\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\n%s\r\n" % (status, extra)
    )


CHUNK = b'data: {"choices":[{"index":0,"delta":{"content":"endless "}}]}\n\n'


def endless_sse(head: bytes, sock: socket.socket, stop: threading.Event) -> None:
    """200 and SSE chunks for ever (50 events per write), until the peer goes."""
    sock.sendall(sse_headers())
    body = CHUNK * 50
    frame = b"%x\r\n%s\r\n" % (len(body), body)
    while not stop.is_set():
        sock.sendall(frame)


class RawUpstream:
    def __init__(self, respond: Callable[[bytes, socket.socket, threading.Event], None]):
        self.respond = respond
        self.heads: list[bytes] = []
        self.stop = threading.Event()
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                more = conn.recv(65536)
                if not more:
                    return
                data += more
            head = data.partition(b"\r\n\r\n")[0]
            self.heads.append(head)
            self.respond(head, conn, self.stop)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self._sock.close()
        for conn in self._conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> RawUpstream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
