"""OpenRouter scenarios (``POST /api/v1/chat/completions``).

Shapes follow docs/reference.md, "1.2 OpenRouter": keepalive comments,
``provider``/``id``/``object``/``created``/``model`` on every chunk, ``role`` on every delta
with both reasoning fields, a finish chunk, a usage chunk after it, then ``data: [DONE]``.

The serving backend is ``backends[seed % len(backends)]``; the first backend of each pool is
the one that shows the scenario's fault, so seed 0 always demonstrates it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
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
    split_inside,
    sse_comment,
    sse_data,
    unknown_model,
)

register_route(
    FakeRoute(
        family="openrouter",
        provider="openrouter",
        record_base="/api/v1",
        sdk_base="/api/v1",
        listing="POST /api/v1/chat/completions",
        match=lambda path: (path == "/api/v1/chat/completions", None),
        priority=10,  # before the OpenAI-compatible suffix it also ends with
    )
)

FAMILY = "openrouter"

ALL_BACKENDS = (
    "DeepInfra",
    "Together",
    "Fireworks",
    "Chutes",
    "Novita",
    "SiliconFlow",
    "Parasail",
    "Nebius",
)

OPENROUTER_SCENARIOS: tuple[str, ...] = (
    "fake/clean",
    "fake/reasoning",
    "fake/think-leak",
    "fake/spill",
    "fake/tool-call",
    "fake/truncated-tool-args",
    "fake/mid-stream-error",
    "fake/no-done",
)

USER_ID = "user_2vJpEi3p0l05bI4nogxpSKmlno5"

ANSWER = "Hello! The café on the corner opens at 8:00 — their crème brûlée is worth the trip ☕."
REASONING = (
    "The user is asking about the café. I should mention the opening time "
    "and recommend the dessert, keeping it short."
)

WEATHER_TOOL_ARGS = '{"city": "Zürich", "days": 3}'
TOOL_REASONING = "The user wants the weather in Zürich. I will call get_weather."


# --------------------------------------------------------------------------- chunk builder


class ORStream:
    """Builds one OpenRouter SSE stream for a context."""

    def __init__(self, ctx: Ctx, *, reasoning_format: str = "unknown") -> None:
        self.ctx = ctx
        self.fmt = reasoning_format
        self.gen_id = f"gen-{ctx.created}-{ctx.token(20)}"
        self.events: list[bytes] = []
        self.completion_chars = 0
        self.reasoning_chars = 0

    # envelope and deltas ---------------------------------------------------------------
    def envelope(self, **extra: Any) -> dict[str, Any]:
        return {
            "id": self.gen_id,
            "provider": self.ctx.backend,
            "model": self.ctx.model,
            "object": "chat.completion.chunk",
            "created": self.ctx.created,
            **extra,
        }

    def chunk(
        self,
        delta: dict[str, Any],
        finish: str | None = None,
        native: str | None = None,
        **extra: Any,
    ) -> None:
        choice = {
            "index": 0,
            "delta": delta,
            "finish_reason": finish,
            "native_finish_reason": native if native is not None else finish,
            "logprobs": None,
        }
        self.events.append(sse_data(self.envelope(choices=[choice], **extra)))

    def keepalives(self, n: int | None = None) -> None:
        count = self.ctx.stream("keepalive").randint(0, 3) if n is None else n
        self.events.extend(sse_comment("OPENROUTER PROCESSING") for _ in range(count))

    def content(self, text: str) -> None:
        self.completion_chars += len(text)
        self.chunk(
            {"role": "assistant", "content": text, "reasoning": None, "reasoning_details": []}
        )

    def answer(self, text: str) -> None:
        for piece in pieces(text, self.ctx.rng):
            self.content(piece)

    def reasoning(self, text: str) -> None:
        self.reasoning_chars += len(text)
        detail = {"type": "reasoning.text", "text": text, "format": self.fmt, "index": 0}
        self.chunk(
            {
                "role": "assistant",
                "content": "",
                "reasoning": text,
                "reasoning_details": [detail],
            }
        )

    def think(self, text: str) -> None:
        for piece in pieces(text, self.ctx.rng):
            self.reasoning(piece)

    def reasoning_detail(self, detail: dict[str, Any]) -> None:
        self.chunk(
            {"role": "assistant", "content": "", "reasoning": None, "reasoning_details": [detail]}
        )

    def tool_call(self, call_id: str, name: str, fragments: list[str], index: int = 0) -> None:
        first = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        self.chunk({"role": "assistant", "content": None, "tool_calls": [first]})
        for frag in fragments:
            self.completion_chars += len(frag)
            call = {"index": index, "function": {"arguments": frag}}
            self.chunk({"role": "assistant", "content": None, "tool_calls": [call]})

    def finish(self, reason: str, native: str | None = None) -> None:
        delta: dict[str, Any] = {
            "role": "assistant",
            "content": "",
            "reasoning": None,
            "reasoning_details": [],
        }
        self.chunk(delta, finish=reason, native=native)

    def usage(self, *, completion_tokens: int | None = None, reasoning_tokens: int | None = None):
        ctx = self.ctx
        rng = ctx.stream("usage")
        prompt = ctx.prompt_tokens
        cached = rng.choice((0, 0, prompt // 2, prompt - prompt % 64))
        if reasoning_tokens is None:
            reasoning_tokens = approx_tokens_n(self.reasoning_chars) if self.reasoning_chars else 0
        if completion_tokens is None:
            completion_tokens = approx_tokens_n(self.completion_chars) + reasoning_tokens
        prompt_cost = round(prompt * 3e-7, 9)
        completion_cost = round(completion_tokens * 1.2e-6, 9)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
            "cost": round(prompt_cost + completion_cost, 9),
            "is_byok": False,
            "prompt_tokens_details": {
                "cached_tokens": cached,
                "cache_write_tokens": 0,
                "audio_tokens": 0,
                "video_tokens": 0,
            },
            "cost_details": {
                "upstream_inference_cost": round(prompt_cost + completion_cost, 9),
                "upstream_inference_prompt_cost": prompt_cost,
                "upstream_inference_completions_cost": completion_cost,
            },
            "completion_tokens_details": {
                "reasoning_tokens": reasoning_tokens,
                "image_tokens": 0,
                "audio_tokens": 0,
            },
        }
        if ctx.backend == "DeepInfra":  # the captured shape: a null-finish choice, not []
            self.chunk({"role": "assistant", "content": ""}, usage=usage)
        else:
            self.events.append(sse_data(self.envelope(choices=[], usage=usage)))

    def error(self, code: int | str, message: str, error_type: str, *, finish: bool) -> None:
        err = {"code": code, "message": message, "metadata": {"error_type": error_type}}
        if finish:
            choice = {
                "index": 0,
                "delta": {"role": "assistant", "content": ""},
                "finish_reason": "error",
                "native_finish_reason": "error",
                "logprobs": None,
            }
            self.events.append(sse_data(self.envelope(error=err, choices=[choice])))
        else:
            self.events.append(sse_data(self.envelope(choices=[], error=err)))

    def done(self) -> None:
        self.events.append(sse_data("[DONE]"))

    def script(self) -> Script:
        return make_script(self.ctx, self.events, stream_headers(self.ctx, self.gen_id))


def stream_headers(ctx: Ctx, gen_id: str) -> list[tuple[str, str]]:
    return [
        ("Content-Type", "text/event-stream"),
        ("Cache-Control", "no-cache"),
        ("Connection", "close"),
        ("X-Generation-Id", gen_id),
        ("Access-Control-Allow-Origin", "*"),
        ("Vary", "Accept-Encoding"),
        ("Server", "cloudflare"),
        ("CF-RAY", f"{ctx.token(16, '0123456789abcdef')}-CDG"),
    ]


def error_script(ctx: Ctx, status: int, error: dict[str, Any]) -> Script:
    headers = [("Server", "cloudflare"), ("CF-RAY", f"{ctx.token(16, '0123456789abcdef')}-CDG")]
    if status in (429, 503):
        headers.append(("Retry-After", "2"))
    return json_script(ctx, status, {"error": error, "user_id": USER_ID}, headers)


def provider_error(ctx: Ctx, status: int, raw: str) -> Script:
    meta = {"raw": raw, "provider_name": ctx.backend}
    return error_script(
        ctx, status, {"message": "Provider returned error", "code": status, "metadata": meta}
    )


def call_id(ctx: Ctx) -> str:
    return f"call_{ctx.token(24)}"


# --------------------------------------------------------------------------- happy paths


def clean_stream(ctx: Ctx, answer: str = ANSWER) -> Script:
    s = ORStream(ctx)
    s.keepalives()
    if ctx.draw("opener") < 0.4:  # some backends open with an empty-content chunk
        s.content("")
    s.answer(answer)
    s.finish("stop")
    s.usage()
    s.done()
    return s.script()


@scenario(FAMILY, "fake/clean", "plain answer, finish stop, usage, [DONE]", backends=ALL_BACKENDS)
def or_clean(ctx: Ctx) -> Script:
    return clean_stream(ctx)


@scenario(
    FAMILY,
    "fake/reasoning",
    "delta.reasoning + reasoning.text details, then an encrypted/summary detail, then answer",
    backends=("Fireworks", "Together", "Nebius", "Parasail", "DeepInfra"),
)
def or_reasoning(ctx: Ctx) -> Script:
    s = ORStream(ctx)
    s.keepalives()
    s.think(REASONING)
    if ctx.backend_index % 2 == 0:
        blob = base64.b64encode(ctx.stream("blob").randbytes(48)).decode()
        s.reasoning_detail(
            {
                "type": "reasoning.encrypted",
                "data": blob,
                "id": f"rs_{ctx.token(24)}",
                "format": "openai-responses-v1",
                "index": 1,
            }
        )
    else:
        s.reasoning_detail(
            {
                "type": "reasoning.summary",
                "summary": "**Answering the café question**",
                "format": "openai-responses-v1",
                "index": 1,
            }
        )
    s.answer(ANSWER)
    s.finish("stop")
    s.usage()
    s.done()
    return s.script()


# leak rates per backend: 1.0 always leaks, 0.5 leaks on half the seeds, absent never.
THINK_LEAK_RATES = {"Chutes": 1.0, "SiliconFlow": 0.5}
SPILL_RATES = {"Novita": 1.0, "Parasail": 0.5}


@scenario(
    FAMILY,
    "fake/think-leak",
    "<think>…</think> inside content with tags split across deltas (Chutes always, "
    "SiliconFlow half the time, other backends send delta.reasoning)",
    backends=("Chutes", "DeepInfra", "SiliconFlow", "Together", "Fireworks", "Nebius"),
)
def or_think_leak(ctx: Ctx) -> Script:
    s = ORStream(ctx)
    s.keepalives()
    if not ctx.backend_misbehaves(THINK_LEAK_RATES):
        s.think(REASONING)
        s.answer(ANSWER)
    elif ctx.backend == "Chutes":  # full tags, both split across deltas
        for piece in ("<thi", "nk>The user is asking", " about the café. I should", " mention"):
            s.content(piece)
        for piece in (" the opening time.</th", "ink>\n\n"):
            s.content(piece)
        s.answer(ANSWER)
    else:  # no opener, reasoning glued to the answer (opencode #43770)
        for piece in ("The user is asking about", " the café. Keep it", " short.</", "think>"):
            s.content(piece)
        s.answer(ANSWER)
    s.finish("stop")
    s.usage(reasoning_tokens=0 if ctx.backend_misbehaves(THINK_LEAK_RATES) else None)
    s.done()
    return s.script()


@scenario(
    FAMILY,
    "fake/spill",
    "reasoning deltas, then the tail of the reasoning glued to the answer in content "
    "('must do.Hello!'; Novita always, Parasail half the time)",
    backends=("Novita", "DeepInfra", "Parasail", "Nebius", "Together"),
)
def or_spill(ctx: Ctx) -> Script:
    s = ORStream(ctx)
    s.keepalives()
    s.think("The user greets me. A warm, short greeting is what I")
    answer_rest = " How can I help with your café order today? ☕"
    if ctx.backend_misbehaves(SPILL_RATES):
        s.content("must do.Hello!")
    else:
        s.reasoning(" must do.")
        s.content("Hello!")
    s.answer(answer_rest)
    s.finish("stop")
    s.usage()
    s.done()
    return s.script()


@scenario(
    FAMILY,
    "fake/tool-call",
    "tool_calls deltas with argument fragments across chunks, finish tool_calls",
    backends=("Fireworks", "Together", "DeepInfra", "Novita", "Chutes"),
)
def or_tool_call(ctx: Ctx) -> Script:
    s = ORStream(ctx)
    s.keepalives()
    s.think(TOOL_REASONING)
    s.tool_call(call_id(ctx), "get_weather", fragments(WEATHER_TOOL_ARGS, ctx.stream("args")))
    s.finish("tool_calls")
    s.usage()
    s.done()
    return s.script()


@scenario(
    FAMILY,
    "fake/truncated-tool-args",
    "finish_reason tool_calls (router-rewritten from length) over cut JSON arguments",
    backends=("Chutes", "DeepInfra", "Together", "SiliconFlow"),
)
def or_truncated_tool_args(ctx: Ctx) -> Script:
    s = ORStream(ctx)
    s.keepalives()
    s.answer("Let me check the forecast — un instant…")
    s.tool_call(call_id(ctx), "get_weather", ['{"city', '": "Paris', '", "days', '": 1'])
    s.finish("tool_calls", native="length")
    s.usage(completion_tokens=int(ctx.body.get("max_tokens") or 32))
    s.done()
    return s.script()


@scenario(
    FAMILY,
    "fake/mid-stream-error",
    "content, then an error chunk {code: 502, provider_unavailable} with finish_reason error",
    backends=("Together", "AtlasCloud", "Novita", "DeepInfra", "Chutes"),
)
def or_mid_stream_error(ctx: Ctx) -> Script:
    s = ORStream(ctx)
    s.keepalives()
    s.answer(ANSWER[:40])
    s.error(
        502,
        f"Upstream error from {ctx.backend}: Service temporarily overloaded",
        "provider_unavailable",
        finish=True,
    )
    s.done()
    return s.script()


@scenario(
    FAMILY,
    "fake/no-done",
    "content, then EOF: no finish chunk, no usage, no [DONE] (the last event may be cut)",
    backends=("DeepInfra", "Chutes", "Nebius", "Fireworks"),
)
def or_no_done(ctx: Ctx) -> Script:
    s = ORStream(ctx)
    s.keepalives()
    s.answer(ANSWER[:60])
    if ctx.backend_index % 2 == 1:  # connection cut before the event terminator
        s.events[-1] = s.events[-1].rstrip(b"\n")
    return s.script()


# --------------------------------------------------------------------------- pre-commit faults


@scenario(
    FAMILY,
    "fake/reject-min-p",
    "HTTP 400 'min_p is not supported by this model' when the body has min_p, else clean",
    backends=("Together", "Fireworks", "Nebius"),
)
def or_reject_min_p(ctx: Ctx) -> Script:
    if "min_p" in ctx.body:
        return provider_error(ctx, 400, "min_p is not supported by this model")
    return clean_stream(ctx)


@scenario(
    FAMILY,
    "fake/reject-images",
    "HTTP 400 'this model does not support image input' when a message has image_url "
    "parts, else clean",
    backends=("DeepInfra", "Novita", "Together"),
)
def or_reject_images(ctx: Ctx) -> Script:
    if ctx.messages_have_images():
        return provider_error(ctx, 400, "this model does not support image input")
    return clean_stream(ctx)


@scenario(
    FAMILY,
    "fake/no-endpoints",
    "HTTP 404 'No endpoints found that support tool use' when the body has tools, else clean",
    backends=("Chutes", "SiliconFlow"),
)
def or_no_endpoints(ctx: Ctx) -> Script:
    if ctx.body.get("tools"):
        msg = (
            "No endpoints found that support tool use. To learn more about provider "
            "routing, visit: https://openrouter.ai/docs/provider-routing"
        )
        return error_script(ctx, 404, {"message": msg, "code": 404})
    return clean_stream(ctx)


@scenario(
    FAMILY,
    "fake/overloaded-then-ok",
    "first request to this model on a server -> HTTP 502 Provider returned error; later -> clean",
    backends=("Together", "DeepInfra", "Fireworks"),
)
def or_overloaded_then_ok(ctx: Ctx) -> Script:
    if ctx.call_index == 0:
        return provider_error(ctx, 502, "upstream connect error: overloaded")
    return clean_stream(ctx)


@scenario(
    FAMILY,
    "fake/sse-error-precommit",
    "HTTP 200, keepalive, then an SSE error chunk (code 429, choices []) before any content",
    backends=("Chutes", "Targon"),
)
def or_sse_error_precommit(ctx: Ctx) -> Script:
    s = ORStream(ctx)
    s.keepalives(1)
    s.error(
        429,
        f"{ctx.model} is temporarily rate-limited upstream. Please retry shortly.",
        "rate_limit_exceeded",
        finish=False,
    )
    s.done()
    return s.script()


@scenario(
    FAMILY,
    "fake/credit-affordability",
    "HTTP 402 'requires more credits, or fewer max_tokens … can only afford 1203' "
    "(clean when max_tokens <= 1203)",
)
def or_credit_affordability(ctx: Ctx) -> Script:
    afford = 1203
    requested = int(ctx.body.get("max_tokens") or 16384)
    if requested <= afford:
        return clean_stream(ctx)
    msg = (
        f"This request requires more credits, or fewer max_tokens. You requested up to "
        f"{requested} tokens, but can only afford {afford}. To increase, visit "
        "https://openrouter.ai/settings/credits and upgrade to a paid account"
    )
    return error_script(
        ctx, 402, {"message": msg, "code": 402, "metadata": {"provider_name": None}}
    )


@scenario(
    FAMILY,
    "fake/context-length",
    "HTTP 400 'This endpoint's maximum context length is 8192 tokens…'",
)
def or_context_length(ctx: Ctx) -> Script:
    msg = (
        "This endpoint's maximum context length is 8192 tokens. However, you requested about "
        "9500 tokens (1308 of text input, 8192 in the output). Please reduce the length of "
        'either one, or use the "middle-out" transform to compress your prompt automatically.'
    )
    return error_script(ctx, 400, {"message": msg, "code": 400})


@scenario(
    FAMILY,
    "fake/unknown-model-404",
    "HTTP 404 'No endpoints found for <id>.' (a retired model id; ids that never existed "
    "get the 400 'is not a valid model ID')",
)
def or_unknown_model_404(ctx: Ctx) -> Script:
    return error_script(ctx, 404, {"message": f"No endpoints found for {ctx.model}.", "code": 404})


@scenario(
    FAMILY,
    "fake/echo-key",
    "echoes the request's API key: in a response header, and in an error chunk where the "
    "key is split across two reads",
    backends=("DeepInfra",),
)
def or_echo_key(ctx: Ctx) -> Script:
    key = ctx.credential
    s = ORStream(ctx)
    s.answer(ANSWER[:24])
    s.error(401, f"Invalid credentials: {key} was rejected upstream", "auth_error", finish=True)
    s.done()
    plan = s.script()
    headers = (*plan.headers, ("X-Debug-Echo", f"key={key}"))
    reads = split_inside(plan.reads, key.encode())
    delays = tuple(plan.delays[min(i, len(plan.delays) - 1)] for i in range(len(reads)))
    return Script(plan.status, headers, reads, delays, backend=plan.backend)


@scenario(FAMILY, "fake/echo-key-401", "HTTP 401 whose error message quotes the API key")
def or_echo_key_401(ctx: Ctx) -> Script:
    key = ctx.credential
    return error_script(ctx, 401, {"message": f"Incorrect API key provided: {key}", "code": 401})


@unknown_model(FAMILY)
def or_unknown_model(ctx: Ctx) -> Script:
    return error_script(ctx, 400, {"message": f"{ctx.model} is not a valid model ID", "code": 400})


# --------------------------------------------------------------------------- provider routing


@dataclass(frozen=True)
class Route:
    """Where a request's ``provider`` routing preferences send it within a scenario's pool."""

    backend: str | None = None  # the pinned backend (None: the seed picks one)
    unavailable: bool = False  # no allowed backend serves the model and fallbacks are off


def _slug(name: object) -> str:
    """``"DeepInfra"``, ``"deepinfra"`` and ``"deepinfra/fp8"`` name the same backend."""
    return str(name).split("/", 1)[0].strip().lower()


def routing(body: dict[str, Any], backends: tuple[str, ...]) -> Route:
    """Honour OpenRouter's ``provider: {order, only, ignore, allow_fallbacks}`` on a pool.

    The first backend of ``order`` that serves the model (and is allowed by ``only`` and
    ``ignore``) serves the request. When none does, ``allow_fallbacks: false`` fails the
    request (404, as OpenRouter does); otherwise the usual seed-based choice applies.
    """
    prefs = body.get("provider") if isinstance(body, dict) else None
    if not isinstance(prefs, dict):
        return Route()
    by_slug = {_slug(b): b for b in backends}
    only = {_slug(x) for x in prefs.get("only") or []}
    ignore = {_slug(x) for x in prefs.get("ignore") or []}

    def allowed(slug: str) -> bool:
        return slug in by_slug and (not only or slug in only) and slug not in ignore

    for name in prefs.get("order") or []:
        if allowed(_slug(name)):
            return Route(backend=by_slug[_slug(name)])
    if prefs.get("allow_fallbacks", True) is False or (
        only and not any(allowed(s) for s in by_slug)
    ):
        return Route(unavailable=True)
    return Route()


def no_allowed_providers(ctx: Ctx) -> Script:
    """OpenRouter's answer when routing preferences exclude every endpoint of the model."""
    msg = "No allowed providers are available for the selected model."
    return error_script(ctx, 404, {"message": msg, "code": 404})


# --------------------------------------------------------------------------- endpoints API


def endpoints_payload(model: str, backends: tuple[str, ...]) -> dict[str, Any]:
    """``GET /api/v1/models/{author}/{slug}/endpoints``: one endpoint per backend of the pool,
    in the shape OpenRouter documents (prices as decimal strings, per token)."""
    name = f"Fake: {model.split('/', 1)[-1]}"
    endpoints = [
        {
            "name": f"{backend} | {model}",
            "model_name": name,
            "context_length": 131072,
            "pricing": {
                "prompt": "0.0000003",
                "completion": "0.0000012",
                "request": "0",
                "image": "0",
            },
            "provider_name": backend,
            "tag": backend.lower(),
            "quantization": "fp8" if i % 2 else "bf16",
            "max_completion_tokens": 32768,
            "max_prompt_tokens": None,
            "supported_parameters": [
                "include_reasoning",
                "max_tokens",
                "reasoning",
                "seed",
                "temperature",
                "tool_choice",
                "tools",
            ],
            "status": 0,
            "uptime_last_30m": 99.5 - i,
            "supports_implicit_caching": False,
        }
        for i, backend in enumerate(backends)
    ]
    return {
        "data": {
            "id": model,
            "name": name,
            "created": _EPOCH_CREATED,
            "description": "A scripted fake model of the Stream Lab fake server.",
            "architecture": {
                "tokenizer": "Other",
                "instruct_type": None,
                "modality": "text->text",
                "input_modalities": ["text"],
                "output_modalities": ["text"],
            },
            "endpoints": endpoints,
        }
    }


_EPOCH_CREATED = 1_760_000_000
