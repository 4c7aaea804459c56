"""OpenAI Responses API scenarios (``POST .../responses``), OpenAI and OpenRouter flavoured.

Shapes follow the real streams in ``tests/realworld/`` (``*-responses-*.sse``): typed events
``response.created`` / ``in_progress`` / ``output_item.added`` / ``content_part.added`` /
``output_text.delta`` ... ``response.completed`` with ``sequence_number`` on every event and
an ``obfuscation`` padding field on deltas. The OpenAI flavour (any path but OpenRouter's)
writes an ``event: <type>`` line before each ``data:`` line and sends no ``[DONE]``; the
OpenRouter flavour (``/api/v1/responses``) writes ``data:`` lines only, opens with a
``: OPENROUTER PROCESSING`` comment, ends with ``data: [DONE]`` and reports ``usage.cost``.

The scenario is chosen by the requested model id, as for the chat fakes
(:data:`RESPONSES_SCENARIOS`); an unknown model gets OpenAI's 404 error JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import (
    Ctx,
    FakeRoute,
    Script,
    approx_tokens_n,
    fragments,
    make_script,
    pieces,
    register_route,
    sse_comment,
    sse_data,
    sse_event,
    suffix_route,
)
from .openai_compat import error_script, stream_headers
from .openrouter import ANSWER, REASONING, WEATHER_TOOL_ARGS

register_route(
    FakeRoute(
        family="responses",
        provider="openai",
        record_base="/v1",
        sdk_base="/v1",
        listing="POST /v1/responses, OpenRouter flavour POST /api/v1/responses",
        match=suffix_route("/responses"),
    )
)

__all__ = ["FAMILY", "RESPONSES_SCENARIOS", "responses_script"]

FAMILY = "responses"
SUMMARY = ("**Answering the café question**\n\n" + REASONING, "**Checking**\n\nKeep it short.")
TIME_TOOL_ARGS = '{"tz": "Europe/Zurich"}'


class RStream:
    """Builds one Responses API SSE stream."""

    def __init__(self, ctx: Ctx, *, openrouter: bool) -> None:
        self.ctx = ctx
        self.openrouter = openrouter
        self.id = f"gen-{ctx.created}-{ctx.token(20)}" if openrouter else f"resp_{ctx.token(48)}"
        self.events: list[bytes] = []
        self.seq = 0
        self.output: list[dict[str, Any]] = []
        self.text_chars = 0
        self.reasoning_chars = 0
        if openrouter:
            self.events.append(sse_comment("OPENROUTER PROCESSING"))

    def emit(self, kind: str, **fields: Any) -> None:
        payload = {"type": kind, **fields, "sequence_number": self.seq}
        self.seq += 1
        if self.openrouter:
            self.events.append(sse_data(payload))
        else:
            self.events.append(sse_event(kind, payload))

    def envelope(self, status: str, **extra: Any) -> dict[str, Any]:
        env: dict[str, Any] = {
            "id": self.id,
            "object": "response",
            "created_at": self.ctx.created,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": self.ctx.model,
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": None,
        }
        env.update(extra)
        return env

    def start(self) -> None:
        self.emit("response.created", response=self.envelope("in_progress"))
        self.emit("response.in_progress", response=self.envelope("in_progress"))

    def pad(self) -> dict[str, str]:
        return {} if self.openrouter else {"obfuscation": self.ctx.token(4 + self.seq % 9)}

    def summary(self, parts: tuple[str, ...]) -> None:
        index = len(self.output)
        item_id = f"rs_{self.ctx.token(40)}"
        self.emit(
            "response.output_item.added",
            output_index=index,
            item={"id": item_id, "type": "reasoning", "summary": []},
        )
        for n, text in enumerate(parts):
            where = {"item_id": item_id, "output_index": index, "summary_index": n}
            self.emit(
                "response.reasoning_summary_part.added",
                **where,
                part={"type": "summary_text", "text": ""},
            )
            for piece in pieces(text, self.ctx.rng):
                self.reasoning_chars += len(piece)
                self.emit(
                    "response.reasoning_summary_text.delta", **where, delta=piece, **self.pad()
                )
            self.emit("response.reasoning_summary_text.done", **where, text=text)
            self.emit(
                "response.reasoning_summary_part.done",
                **where,
                part={"type": "summary_text", "text": text},
            )
        item = {
            "id": item_id,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": t} for t in parts],
        }
        self.emit("response.output_item.done", output_index=index, item=item)
        self.output.append(item)

    def reasoning_text(self, text: str) -> None:
        """DeepSeek / gpt-oss style: reasoning in clear, ``reasoning_text`` part."""
        index = len(self.output)
        item_id = f"rs_{self.ctx.token(40)}"
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        self.emit(
            "response.output_item.added",
            output_index=index,
            item={"id": item_id, "type": "reasoning", "summary": []},
        )
        self.emit(
            "response.content_part.added", **where, part={"type": "reasoning_text", "text": ""}
        )
        for piece in pieces(text, self.ctx.rng):
            self.reasoning_chars += len(piece)
            self.emit("response.reasoning_text.delta", **where, delta=piece)
        self.emit("response.reasoning_text.done", **where, text=text)
        self.emit(
            "response.content_part.done", **where, part={"type": "reasoning_text", "text": text}
        )
        item = {
            "id": item_id,
            "type": "reasoning",
            "summary": [],
            "content": [{"type": "reasoning_text", "text": text}],
        }
        self.emit("response.output_item.done", output_index=index, item=item)
        self.output.append(item)

    def message(self, text: str, *, status: str = "completed") -> None:
        index = len(self.output)
        item_id = f"msg_{self.ctx.token(40)}"
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        self.emit(
            "response.output_item.added",
            output_index=index,
            item={
                "id": item_id,
                "type": "message",
                "status": "in_progress",
                "content": [],
                "role": "assistant",
            },
        )
        empty = {"type": "output_text", "annotations": [], "text": ""}
        self.emit("response.content_part.added", **where, part=empty)
        for piece in pieces(text, self.ctx.rng):
            self.text_chars += len(piece)
            self.emit("response.output_text.delta", **where, delta=piece, logprobs=[], **self.pad())
        self.emit("response.output_text.done", **where, text=text, logprobs=[])
        part = {"type": "output_text", "annotations": [], "text": text}
        self.emit("response.content_part.done", **where, part=part)
        item = {
            "id": item_id,
            "type": "message",
            "status": status,
            "content": [part],
            "role": "assistant",
        }
        self.emit("response.output_item.done", output_index=index, item=item)
        self.output.append(item)

    def call_open(self, name: str) -> dict[str, Any]:
        index = len(self.output)
        item = {
            "id": f"fc_{self.ctx.token(40)}",
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": f"call_{self.ctx.token(24)}",
            "name": name,
        }
        self.emit("response.output_item.added", output_index=index, item=dict(item))
        self.output.append(item)
        return item

    def call_args(self, item: dict[str, Any], piece: str) -> None:
        self.text_chars += len(piece)
        item["arguments"] += piece
        index = self.output.index(item)
        self.emit(
            "response.function_call_arguments.delta",
            item_id=item["id"],
            output_index=index,
            delta=piece,
            **self.pad(),
        )

    def call_done(self, item: dict[str, Any]) -> None:
        index = self.output.index(item)
        self.emit(
            "response.function_call_arguments.done",
            item_id=item["id"],
            output_index=index,
            arguments=item["arguments"],
        )
        item["status"] = "completed"
        self.emit("response.output_item.done", output_index=index, item=dict(item))

    def usage(self) -> dict[str, Any]:
        prompt = self.ctx.prompt_tokens
        reasoning = approx_tokens_n(self.reasoning_chars) if self.reasoning_chars else 0
        output = approx_tokens_n(self.text_chars) + reasoning
        usage: dict[str, Any] = {
            "input_tokens": prompt,
            "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 0},
            "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": prompt + output,
        }
        if self.openrouter:
            usage["cost"] = round((prompt * 0.15 + output * 0.6) / 1e6, 10)
        return usage

    def end(self, status: str = "completed", **extra: Any) -> None:
        kind = {"completed": "response.completed", "incomplete": "response.incomplete"}[status]
        env = self.envelope(status, output=self.output, usage=self.usage(), **extra)
        self.emit(kind, response=env)
        if self.openrouter:
            self.events.append(sse_data("[DONE]"))

    def script(self) -> Script:
        return make_script(self.ctx, self.events, stream_headers(self.ctx))


def _clean(s: RStream) -> None:
    s.start()
    s.message(ANSWER)
    s.end()


def _reasoning_summary(s: RStream) -> None:
    s.start()
    s.summary(SUMMARY)
    s.message(ANSWER)
    s.end()


def _reasoning_text(s: RStream) -> None:
    s.start()
    s.reasoning_text(REASONING)
    s.message(ANSWER)
    s.end()


def _tool_call(s: RStream) -> None:
    """Two parallel calls whose argument deltas interleave."""
    s.start()
    weather = s.call_open("get_weather")
    clock = s.call_open("get_time")
    a = fragments(WEATHER_TOOL_ARGS, s.ctx.rng, 3)
    b = fragments(TIME_TOOL_ARGS, s.ctx.rng, 2)
    s.call_args(weather, a[0])
    s.call_args(clock, b[0])
    s.call_args(weather, a[1])
    s.call_args(clock, b[1])
    s.call_args(weather, a[2])
    s.call_done(weather)
    s.call_done(clock)
    s.end()


def _length(s: RStream) -> None:
    s.start()
    s.message(ANSWER[:52], status="incomplete")
    s.end("incomplete", incomplete_details={"reason": "max_output_tokens"})


def _mid_stream_error(s: RStream) -> None:
    s.start()
    s.message(ANSWER[:40])
    err = {"type": "server_error", "code": "server_error", "message": "The server had an error."}
    s.emit("error", error=err, param=None)
    env = s.envelope("failed", error={"code": "server_error", "message": err["message"]})
    s.emit("response.failed", response=env)


def _cut(s: RStream) -> None:
    """The connection drops inside a call's arguments: no output_item.done, no terminal."""
    s.start()
    s.message("Let me check.")
    weather = s.call_open("get_weather")
    s.call_args(weather, WEATHER_TOOL_ARGS[:14])


_SCENARIOS: dict[str, tuple[str, Callable[[RStream], None]]] = {
    "fake/clean": ("one message, response.completed with usage", _clean),
    "fake/reasoning-summary": (
        "a reasoning item with two summary parts, then the answer",
        _reasoning_summary,
    ),
    "fake/reasoning-text": (
        "reasoning in clear (reasoning_text deltas), then the answer",
        _reasoning_text,
    ),
    "fake/tool-call": ("two parallel function calls, argument deltas interleaved", _tool_call),
    "fake/length": ("answer cut, response.incomplete reason max_output_tokens", _length),
    "fake/mid-stream-error": ("text, then an error event and response.failed", _mid_stream_error),
    "fake/cut": ("the connection drops inside a function call's arguments", _cut),
}

RESPONSES_SCENARIOS: dict[str, str] = {model: desc for model, (desc, _) in _SCENARIOS.items()}
"""Responses API scenario model id -> one-line description."""


def responses_script(
    model: str,
    body: dict[str, Any],
    seed: int = 0,
    *,
    call_index: int = 0,
    openrouter: bool = False,
    headers: dict[str, str] | None = None,
) -> Script:
    """The response the fake server sends to ``POST .../responses`` for ``model``."""
    ctx = Ctx(FAMILY, model, body, int(seed), call_index=call_index, headers=dict(headers or {}))
    entry = _SCENARIOS.get(model)
    if entry is None:
        err = {
            "message": f"The model `{model}` does not exist or you do not have access to it.",
            "type": "invalid_request_error",
            "param": None,
            "code": "model_not_found",
        }
        return error_script(ctx, 404, {"error": err})
    stream = RStream(ctx, openrouter=openrouter)
    entry[1](stream)
    return stream.script()
