"""A real loopback HTTP server that plays the scripted fake providers.

Routes (POST; the scenario is chosen by the requested model id):

- OpenRouter: ``/api/v1/chat/completions``
- OpenAI-compatible: ``/v1/chat/completions``, ``/chat/completions``, ``/v4/chat/completions``
  (any path ending in ``/chat/completions`` other than OpenRouter's)
- Gemini: ``/v1beta/models/{model}:streamGenerateContent?alt=sse`` (a body with a field
  ``GenerateContentRequest`` does not have, such as ``"stream"``, gets the real API's 400
  ``INVALID_ARGUMENT`` "Unknown name")
- Anthropic: ``/v1/messages`` (any path ending in ``/messages``)
- OpenRouter's endpoints API (GET): ``/api/v1/models/{author}/{slug}/endpoints`` lists the
  scenario's backend pool; a chat request pinned with ``provider: {order: [backend],
  allow_fallbacks: false}`` is served by that backend (404 when it is not in the pool)
- OpenAI Responses API: ``/v1/responses`` (any path ending in ``/responses``); OpenRouter's
  flavour at ``/api/v1/responses``

The scenario seed is the request's ``seed`` (``generationConfig.seed`` for Gemini), else the
``X-Fake-Seed`` header, else a per-(family, model) request counter on this server, so repeated
recordings spread over backends deterministically; a pinned OpenRouter request counts per
(model, backend), so the k-th visit to a backend behaves the same whatever the other
backends received meanwhile.

``FakeServer(throttle_first=N, retry_after="1")`` answers the first N chat requests with
HTTP 429 and that ``Retry-After`` header (a client's back-off can be tested offline).

Streams are written with ``Transfer-Encoding: chunked``, one write+flush per scripted read,
with the scripted 2–15 ms delay (times ``delay_scale``) before each read.
"""

from __future__ import annotations

import json
import re
import socket
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO
from urllib.parse import parse_qs, unquote, urlsplit

from .base import FAMILY_ALIASES, ROUTES, dumps
from .google import unknown_fields_error
from .openrouter import endpoints_payload, routing
from .scenarios import SCENARIOS, Script, backends_for, script

__all__ = ["FakeServer", "RecordedRequest", "serve_forever"]

HOST = "127.0.0.1"
_DISCONNECT = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
_ENDPOINTS_PATH = re.compile(r"^/api/v1/models/(?P<author>[^/]+)/(?P<slug>[^/]+)/endpoints$")


@dataclass
class RecordedRequest:
    """One request the fake server received."""

    method: str
    path: str  # without the query string
    query: str
    headers: dict[str, str]  # names lower-cased
    body: Any  # parsed JSON (None when empty or not JSON)
    raw_body: bytes
    family: str | None = None
    model: str | None = None
    seed: int | None = None
    status: int | None = None  # status the server answered with
    received_at: float = field(default_factory=time.time)


def route(method: str, path: str) -> tuple[str | None, str | None]:
    """(family, model-from-path) for a request path; (None, None) when not a provider route.

    The routes are the fake modules' own (:data:`lab.fakes.base.ROUTES`), tried by priority."""
    if method != "POST":
        return None, None
    for fake_route in _ROUTE_ORDER:
        matches, model = fake_route.match(path)
        if matches:
            return fake_route.family, model
    return None, None


_ROUTE_ORDER = sorted(ROUTES.values(), key=lambda r: -r.priority)


def _request_seed(family: str, body: Any, headers: dict[str, str]) -> int | None:
    if isinstance(body, dict):
        seed = body.get("seed")
        if family == "google":
            seed = (body.get("generationConfig") or {}).get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool):
            return abs(seed)
    value = headers.get("x-fake-seed", "")
    return abs(int(value)) if value.lstrip("-").isdigit() else None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # each scripted read leaves as its own segment
    server: _HTTPServer
    _server_header = "cloudflare"

    def version_string(self) -> str:
        return self._server_header

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet server
        pass

    # ------------------------------------------------------------------ entry points
    def do_GET(self) -> None:  # noqa: N802
        path = urlsplit(self.path).path
        endpoints = _ENDPOINTS_PATH.match(path)
        if path in ("/", "/scenarios"):
            self._send_json(200, {"scenarios": SCENARIOS})
        elif endpoints:
            model = f"{unquote(endpoints['author'])}/{unquote(endpoints['slug'])}"
            headers = {k.lower(): v for k, v in self.headers.items()}
            record = RecordedRequest("GET", path, "", headers, None, b"", "openrouter", model)
            self.server.fake.record(record)
            if model not in SCENARIOS["openrouter"]:
                record.status = 404
                self._send_json(404, {"error": {"message": "Model not found", "code": 404}})
                return
            record.status = 200
            self._send_json(200, endpoints_payload(model, backends_for("openrouter", model)))
        else:
            self._send_json(404, {"error": {"message": "Not Found", "code": 404}})

    def do_POST(self) -> None:  # noqa: N802
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {k.lower(): v for k, v in self.headers.items()}
        family, path_model = route("POST", parts.path)
        record = RecordedRequest("POST", parts.path, parts.query, headers, body, raw, family)
        self.server.fake.record(record)

        if family is None:
            record.status = 404
            self._send_json(404, {"error": {"message": "Not Found", "code": 404}})
            return
        if not isinstance(body, dict):
            record.status = 400
            self._send_json(400, {"error": {"message": "Invalid JSON body", "code": 400}})
            return
        if family == "google":  # the real API refuses unknown fields before anything else
            rejected = unknown_fields_error(body)
            if rejected is not None:
                record.status = 400
                self._send_json(400, rejected, "application/json; charset=UTF-8")
                return
        model = path_model or str(body.get("model") or "")
        record.model = model
        if self.server.fake.throttled():
            record.status = 429
            self._send_json(
                429,
                {"error": {"message": "Rate limit exceeded: retry shortly", "code": 429}},
                headers=[("Retry-After", self.server.fake.retry_after)],
            )
            return
        pinned = (
            routing(body, backends_for(family, model)).backend if family == "openrouter" else None
        )
        seed, call_index = self.server.fake.next_seed(family, model, body, headers, pinned)
        record.seed = seed
        if family == "responses":
            from .openai_responses import responses_script

            openrouter = parts.path.startswith("/api/")
            plan = responses_script(
                model, body, seed, call_index=call_index, openrouter=openrouter, headers=headers
            )
        else:
            plan = script(family, model, body, seed, call_index=call_index, headers=headers)
        record.status = plan.status
        if (
            family == "google"
            and plan.streaming
            and "sse" not in parse_qs(parts.query).get("alt", [])
        ):
            plan = _gemini_json_array(plan)
        self._play(plan)

    # ------------------------------------------------------------------ writing
    def _send_json(
        self,
        status: int,
        payload: Any,
        content_type: str = "application/json",
        headers: list[tuple[str, str]] | None = None,
    ) -> None:
        data = dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        for name, value in headers or []:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _play(self, plan: Script) -> None:
        scale = self.server.fake.delay_scale
        closing = self.server.fake.closing
        server_header = plan.header("server")
        if server_header:
            self._server_header = server_header
        try:
            self.send_response(plan.status, plan.reason)
            for name, value in plan.headers:
                if name.lower() != "server":
                    self.send_header(name, value)
            if plan.streaming:
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Content-Length", str(len(plan.body)))
            if (plan.header("connection") or "").lower() == "close":
                self.close_connection = True
            self.end_headers()
            if not plan.streaming:
                if scale:
                    time.sleep(plan.delays[0] * scale)
                self.wfile.write(plan.body)
                self.wfile.flush()
                return
            for data, delay in zip(plan.reads, plan.delays, strict=True):
                if closing.is_set():
                    self.close_connection = True
                    return
                if scale:
                    time.sleep(delay * scale)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except _DISCONNECT:
            self.close_connection = True


def _gemini_json_array(plan: Script) -> Script:
    """Gemini without ``alt=sse``: the same chunks as one JSON array."""
    objs = [
        line[6:]
        for line in plan.body.decode().split("\n")
        if line.startswith("data: ") and line[6:].strip()
    ]
    data = ("[" + ",\r\n".join(objs) + "]").encode()
    headers = tuple(
        (k, "application/json; charset=UTF-8" if k.lower() == "content-type" else v)
        for k, v in plan.headers
    )
    return Script(plan.status, headers, (data,), plan.delays[:1], backend=plan.backend)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 256  # http.server's default backlog of 5 resets concurrent clients
    fake: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (*_DISCONNECT, socket.timeout, OSError)):
            return  # client went away: not worth a traceback
        super().handle_error(request, client_address)


class FakeServer:
    """Scripted fake LLM providers on a real loopback socket (127.0.0.1 only).

    Starts serving in a daemon thread on construction::

        with FakeServer(delay_scale=0) as srv:
            httpx.post(f"{srv.base_url}/api/v1/chat/completions", json={...})
            srv.requests[-1].body
    """

    def __init__(
        self,
        port: int = 0,
        *,
        delay_scale: float = 1.0,
        throttle_first: int = 0,
        retry_after: str = "1",
    ) -> None:
        self.delay_scale = float(delay_scale)
        self.retry_after = retry_after
        self._throttle_left = int(throttle_first)
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._counters: dict[tuple[str, ...], int] = defaultdict(int)
        self._httpd = _HTTPServer((HOST, port), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-server-{self.port}",
            daemon=True,
        )
        self._thread.start()

    # ------------------------------------------------------------------ addresses
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def host(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def family_base_url(self, family: str) -> str:
        """The base URL a provider SDK or client expects for each wire family the fakes speak."""
        return self.base_url + ROUTES[FAMILY_ALIASES.get(family, family)].sdk_base

    # ------------------------------------------------------------------ request log
    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def next_seed(
        self,
        family: str,
        model: str,
        body: Any,
        headers: dict[str, str],
        pinned: str | None = None,
    ) -> tuple[int, int]:
        """(seed, call_index) for a request: explicit seed, else the per-model counter (per
        model and backend for a request pinned to ``pinned``)."""
        with self._lock:
            call_index = self._counters[(family, model)]
            self._counters[(family, model)] += 1
            if pinned is not None:
                visit = self._counters[(family, model, pinned)]
                self._counters[(family, model, pinned)] += 1
        seed = _request_seed(family, body, headers)
        if seed is None:
            seed = visit if pinned is not None else call_index
        return seed, call_index

    def throttled(self) -> bool:
        """True (and one fewer left) while the ``throttle_first`` 429s are not all sent."""
        with self._lock:
            if self._throttle_left <= 0:
                return False
            self._throttle_left -= 1
            return True

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        if self.closing.is_set():
            return
        self.closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=2)

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FakeServer({self.base_url!r})"


def serve_forever(port: int = 0, *, delay_scale: float = 1.0, out: TextIO | None = None) -> None:
    """Run the fake server until Ctrl-C (for ``lab fake-server``)."""
    out = out or sys.stdout
    server = FakeServer(port, delay_scale=delay_scale)
    lines = [f"Stream Lab fake providers on {server.base_url}"]
    for family, models in SCENARIOS.items():
        if not models:
            continue
        listing = ROUTES[family].listing
        lines.append(f"\n{family}  ({listing}, base {server.family_base_url(family)})")
        lines.extend(f"  {model:<28} {description}" for model, description in models.items())
    from .openai_responses import RESPONSES_SCENARIOS

    lines.append(
        f"\nresponses  ({ROUTES['responses'].listing}; "
        f"base {server.family_base_url('openai')} or {server.family_base_url('openrouter')})"
    )
    lines.extend(
        f"  {model:<28} {description}" for model, description in RESPONSES_SCENARIOS.items()
    )
    lines.append("\nCtrl-C to stop.")
    # one write: another process sharing this terminal or file (a proxy started beside it)
    # cannot land in the middle of a line, even when Python runs unbuffered
    out.write("\n".join(lines) + "\n")
    out.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
