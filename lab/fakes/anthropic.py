"""Anthropic Messages scenarios (``POST /v1/messages``).

Shapes follow docs/reference.md, "1.5 Anthropic Messages": named events (``event: <type>`` +
``data:`` with the same ``type``), ``message_start`` → ``ping`` → per block
``content_block_start`` / deltas / ``content_block_stop`` → ``message_delta`` (cumulative
output_tokens) → ``message_stop``; no ``[DONE]``. Mid-stream failures are ``event: error`` and
the stream ends.
"""

from __future__ import annotations

from typing import Any

from .base import (
    Ctx,
    FakeRoute,
    Script,
    approx_tokens_n,
    fragments,
    json_script,
    make_script,
    pieces,
    register_route,
    scenario,
    sse_event,
    suffix_route,
    unknown_model,
)
from .openrouter import ANSWER, REASONING, TOOL_REASONING, WEATHER_TOOL_ARGS

register_route(
    FakeRoute(
        family="anthropic",
        provider="anthropic",
        record_base="/v1",
        sdk_base="",
        listing="POST /v1/messages",
        match=suffix_route("/messages"),
    )
)

FAMILY = "anthropic"
B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


class AStream:
    """Builds one Anthropic Messages SSE stream."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.events: list[bytes] = []
        self.index = -1
        self.output_chars = 0
        self.input_tokens = ctx.prompt_tokens

    def event(self, name: str, payload: dict[str, Any] | str) -> None:
        self.events.append(sse_event(name, payload))

    def start(self) -> None:
        message: dict[str, Any] = {
            "id": f"msg_01{self.ctx.token(22)}",
            "type": "message",
            "role": "assistant",
            "model": self.ctx.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": self.input_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 2,
                "service_tier": "standard",
            },
        }
        self.event("message_start", {"type": "message_start", "message": message})
        self.ping()

    def ping(self) -> None:
        self.event("ping", '{"type": "ping"}')

    def block(self, content_block: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        self.index += 1
        i = self.index
        self.event(
            "content_block_start",
            {"type": "content_block_start", "index": i, "content_block": content_block},
        )
        for delta in deltas:
            for key in ("text", "thinking", "partial_json"):
                self.output_chars += len(delta.get(key, ""))
            self.event(
                "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
            )
        self.event("content_block_stop", {"type": "content_block_stop", "index": i})

    def text(self, text: str) -> None:
        deltas = [{"type": "text_delta", "text": p} for p in pieces(text, self.ctx.rng)]
        self.block({"type": "text", "text": ""}, deltas)

    def thinking(self, text: str) -> None:
        deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(text, self.ctx.rng, 4)]
        deltas.append(
            {"type": "signature_delta", "signature": "EqQBCgIYAh" + self.ctx.token(80, B64)}
        )
        self.block({"type": "thinking", "thinking": "", "signature": ""}, deltas)

    def tool_use(self, name: str, fragments: list[str]) -> None:
        block = {
            "type": "tool_use",
            "id": f"toolu_01{self.ctx.token(22)}",
            "name": name,
            "input": {},
        }
        deltas = [{"type": "input_json_delta", "partial_json": f} for f in ["", *fragments]]
        self.block(block, deltas)

    def stop(self, stop_reason: str) -> None:
        delta = {"stop_reason": stop_reason, "stop_sequence": None}
        usage = {"output_tokens": approx_tokens_n(self.output_chars) + 2}
        self.event("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
        self.event("message_stop", {"type": "message_stop"})

    def script(self) -> Script:
        return make_script(self.ctx, self.events, headers(self.ctx, stream=True))


def headers(ctx: Ctx, *, stream: bool) -> list[tuple[str, str]]:
    hdrs = []
    if stream:
        hdrs += [
            ("Content-Type", "text/event-stream; charset=utf-8"),
            ("Cache-Control", "no-cache"),
        ]
    hdrs += [
        ("request-id", request_id(ctx)),
        ("anthropic-organization-id", ctx.uuid()),
        ("anthropic-ratelimit-requests-limit", "4000"),
        ("anthropic-ratelimit-requests-remaining", "3999"),
        ("anthropic-ratelimit-requests-reset", "2025-10-09T10:15:01Z"),
        ("anthropic-ratelimit-tokens-limit", "2000000"),
        ("anthropic-ratelimit-tokens-remaining", "1999000"),
        ("anthropic-ratelimit-tokens-reset", "2025-10-09T10:15:01Z"),
        ("Server", "cloudflare"),
    ]
    return hdrs


def request_id(ctx: Ctx) -> str:
    return f"req_01{ctx.token(22)}"


def error_body(ctx: Ctx, error_type: str, message: str) -> dict[str, Any]:
    return {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": request_id(ctx),
    }


# --------------------------------------------------------------------------- scenarios


@scenario(FAMILY, "fake/clean", "one text block, message_delta end_turn, message_stop")
def a_clean(ctx: Ctx) -> Script:
    s = AStream(ctx)
    s.start()
    s.text(ANSWER)
    s.stop("end_turn")
    return s.script()


@scenario(
    FAMILY, "fake/thinking", "thinking block with thinking_delta + signature_delta, then text"
)
def a_thinking(ctx: Ctx) -> Script:
    s = AStream(ctx)
    s.start()
    s.thinking(REASONING)
    s.text(ANSWER)
    s.stop("end_turn")
    return s.script()


@scenario(
    FAMILY,
    "fake/tool-use",
    "text, then a tool_use block streamed as input_json_delta fragments (first ''), "
    "stop_reason tool_use",
)
def a_tool_use(ctx: Ctx) -> Script:
    s = AStream(ctx)
    s.start()
    s.text("Let me check the weather in Zürich.")
    s.tool_use("get_weather", ['{"city": "Zü', 'rich", "da', 'ys": 3}'])
    s.stop("tool_use")
    return s.script()


@scenario(
    FAMILY,
    "fake/thinking-tool-use",
    "thinking block (thinking_delta + signature_delta), then a tool_use block streamed as "
    "input_json_delta fragments, stop_reason tool_use",
)
def a_thinking_tool_use(ctx: Ctx) -> Script:
    s = AStream(ctx)
    s.start()
    s.thinking(TOOL_REASONING)
    s.tool_use("get_weather", fragments(WEATHER_TOOL_ARGS, ctx.stream("args")))
    s.stop("tool_use")
    return s.script()


@scenario(
    FAMILY,
    "fake/overloaded",
    "text deltas, then 'event: error' overloaded_error mid-stream; no message_stop",
)
def a_overloaded(ctx: Ctx) -> Script:
    s = AStream(ctx)
    s.start()
    s.event(
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    )
    for piece in pieces(ANSWER[:40], ctx.rng):
        delta = {"type": "text_delta", "text": piece}
        s.event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
    s.event(
        "error", '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
    )
    return s.script()


@scenario(FAMILY, "fake/http-529", "HTTP 529 overloaded_error before any stream")
def a_http_529(ctx: Ctx) -> Script:
    hdrs = [("retry-after", "10"), *headers(ctx, stream=False)]
    body = error_body(ctx, "overloaded_error", "Overloaded")
    return json_script(ctx, 529, body, hdrs, reason="Overloaded")


@scenario(FAMILY, "fake/echo-key", "HTTP 401 whose error message quotes the x-api-key")
def a_echo_key(ctx: Ctx) -> Script:
    body = error_body(ctx, "authentication_error", f"invalid x-api-key: {ctx.credential}")
    return json_script(ctx, 401, body, headers(ctx, stream=False))


@unknown_model(FAMILY)
def a_unknown_model(ctx: Ctx) -> Script:
    body = error_body(ctx, "not_found_error", f"model: {ctx.model}")
    return json_script(ctx, 404, body, headers(ctx, stream=False))
