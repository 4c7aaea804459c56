"""OpenAI-compatible scenarios (``POST /v1/chat/completions``, ``/chat/completions``,
``/v4/chat/completions``).

Shapes follow docs/reference.md, "1.3 OpenAI-compatible chat completions": ``data:`` lines only,
``usage: null`` on every chunk plus a final ``choices: []`` usage chunk when
``stream_options.include_usage`` is set (the default body sets it), an ``obfuscation`` padding
field, ``data: [DONE]``. ``fake/reasoning-content`` is DeepSeek-flavoured (``: keep-alive``,
UUID id, ``reasoning_content``, usage on the finish chunk).
"""

from __future__ import annotations

from typing import Any

from .base import (
    Ctx,
    FakeRoute,
    Script,
    approx_tokens_n,
    json_script,
    make_script,
    pieces,
    register_route,
    scenario,
    sse_comment,
    sse_data,
    suffix_route,
    unknown_model,
)
from .openrouter import ANSWER, REASONING

register_route(
    FakeRoute(
        family="openai",
        provider="openai",
        record_base="/v1",
        sdk_base="/v1",
        listing="POST /v1/chat/completions",
        match=suffix_route("/chat/completions"),
    )
)

FAMILY = "openai"


class OAStream:
    """Builds one OpenAI-style chat.completion.chunk SSE stream."""

    def __init__(self, ctx: Ctx, *, deepseek: bool = False) -> None:
        self.ctx = ctx
        self.deepseek = deepseek
        if deepseek:
            self.id = ctx.uuid()
            self.fingerprint = "fp_eaab8d114b_prod0820_fp8_kvcache"
        else:
            self.id = f"chatcmpl-{ctx.token(29)}"
            self.fingerprint = f"fp_{ctx.token(10, '0123456789abcdef')}"
        opts = ctx.body.get("stream_options") or {}
        self.include_usage = bool(opts.get("include_usage"))
        self.events: list[bytes] = []
        self.completion_chars = 0
        self.reasoning_chars = 0

    def envelope(self, **extra: Any) -> dict[str, Any]:
        env: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.ctx.created,
            "model": self.ctx.model,
        }
        if not self.deepseek:
            env["service_tier"] = "default"
        env["system_fingerprint"] = self.fingerprint
        if self.include_usage and not self.deepseek:
            env["usage"] = None
        env.update(extra)
        return env

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        env = self.envelope(choices=[choice], **extra)
        if not self.deepseek:
            env["obfuscation"] = self.ctx.token(4 + len(self.events) % 9)
        self.events.append(sse_data(env))

    def role(self) -> None:
        if self.deepseek:
            self.chunk({"role": "assistant", "content": None, "reasoning_content": ""})
        else:
            self.chunk({"role": "assistant", "content": "", "refusal": None})

    def content(self, text: str) -> None:
        self.completion_chars += len(text)
        delta: dict[str, Any] = {"content": text}
        if self.deepseek:
            delta["reasoning_content"] = None
        self.chunk(delta)

    def answer(self, text: str) -> None:
        for piece in pieces(text, self.ctx.rng):
            self.content(piece)

    def reasoning_content(self, text: str) -> None:
        for piece in pieces(text, self.ctx.rng):
            self.reasoning_chars += len(piece)
            self.chunk({"content": None, "reasoning_content": piece})

    def tool_call(self, index: int, call_id: str, name: str, fragments: list[str]) -> None:
        first = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        self.chunk({"tool_calls": [first]})
        for frag in fragments:
            self.completion_chars += len(frag)
            self.chunk({"tool_calls": [{"index": index, "function": {"arguments": frag}}]})

    def usage_block(self) -> dict[str, Any]:
        prompt = self.ctx.prompt_tokens
        reasoning = approx_tokens_n(self.reasoning_chars) if self.reasoning_chars else 0
        completion = approx_tokens_n(self.completion_chars) + reasoning
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": reasoning,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }
        if self.deepseek:
            usage["prompt_tokens_details"] = {"cached_tokens": 0}
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
            usage["prompt_cache_hit_tokens"] = 0
            usage["prompt_cache_miss_tokens"] = prompt
        return usage

    def finish(self, reason: str) -> None:
        if self.deepseek:  # DeepSeek: usage rides on the finish chunk
            self.chunk({"content": "", "reasoning_content": None}, reason, usage=self.usage_block())
            return
        self.chunk({}, reason)
        if self.include_usage:
            env = self.envelope(choices=[], usage=self.usage_block())
            self.events.append(sse_data(env))

    def done(self) -> None:
        self.events.append(sse_data("[DONE]"))

    def script(self) -> Script:
        return make_script(self.ctx, self.events, stream_headers(self.ctx))


def stream_headers(ctx: Ctx) -> list[tuple[str, str]]:
    return [
        ("Content-Type", "text/event-stream; charset=utf-8"),
        ("Cache-Control", "no-cache, must-revalidate"),
        ("X-Request-Id", f"req_{ctx.token(32, '0123456789abcdef')}"),
        ("OpenAI-Processing-Ms", str(120 + ctx.stream("ms").randint(0, 400))),
        ("OpenAI-Version", "2020-10-01"),
        ("X-RateLimit-Limit-Requests", "10000"),
        ("X-RateLimit-Remaining-Requests", "9999"),
        ("X-RateLimit-Reset-Requests", "6ms"),
        ("Server", "cloudflare"),
    ]


def error_script(
    ctx: Ctx, status: int, payload: Any, *, content_type: str = "application/json"
) -> Script:
    headers = [
        ("X-Request-Id", f"req_{ctx.token(32, '0123456789abcdef')}"),
        ("Server", "cloudflare"),
    ]
    return json_script(ctx, status, payload, headers, content_type=content_type)


# --------------------------------------------------------------------------- scenarios


@scenario(FAMILY, "fake/clean", "plain answer, finish stop, choices:[] usage chunk, [DONE]")
def oa_clean(ctx: Ctx) -> Script:
    s = OAStream(ctx)
    s.role()
    s.answer(ANSWER)
    s.finish("stop")
    s.done()
    return s.script()


@scenario(
    FAMILY,
    "fake/reasoning-content",
    "DeepSeek style: ': keep-alive', reasoning_content deltas, then content, usage on finish",
)
def oa_reasoning_content(ctx: Ctx) -> Script:
    s = OAStream(ctx, deepseek=True)
    s.events.append(sse_comment("keep-alive"))
    s.role()
    s.reasoning_content(REASONING)
    s.answer(ANSWER)
    s.finish("stop")
    s.done()
    return s.script()


@scenario(
    FAMILY,
    "fake/think-leak",
    "MiniMax style: <think>…</think> inline in content, tags split across deltas",
)
def oa_think_leak(ctx: Ctx) -> Script:
    s = OAStream(ctx)
    s.role()
    for piece in (
        "<th",
        "ink>\nThe user is asking about",
        " the café. Keep it short.\n</",
        "think>",
    ):
        s.content(piece)
    s.content("\n\n")
    s.answer(ANSWER)
    s.finish("stop")
    s.done()
    return s.script()


@scenario(
    FAMILY,
    "fake/tool-call",
    "two parallel tool calls (index 0 and 1) with argument fragments, finish tool_calls",
)
def oa_tool_call(ctx: Ctx) -> Script:
    s = OAStream(ctx)
    s.chunk({"role": "assistant", "content": None})
    s.tool_call(0, f"call_{ctx.token(24)}", "get_weather", ['{"ci', 'ty": "Zü', 'rich"}'])
    s.tool_call(1, f"call_{ctx.token(23)}", "get_time", ['{"tz', '": "Europe/Zurich"}'])
    s.finish("tool_calls")
    s.done()
    return s.script()


@scenario(
    FAMILY,
    "fake/invalid-json",
    "a garbage (truncated JSON) data line mid-stream, then the stream continues",
)
def oa_invalid_json(ctx: Ctx) -> Script:
    s = OAStream(ctx)
    s.role()
    s.answer(ANSWER[:30])
    s.events.append(sse_data('{"id":"' + s.id + '","choices":[{"index":0,"delta":{"content":"ca'))
    s.answer(ANSWER[30:])
    s.finish("stop")
    s.done()
    return s.script()


@scenario(FAMILY, "fake/length", "answer cut mid-sentence, finish_reason length")
def oa_length(ctx: Ctx) -> Script:
    s = OAStream(ctx)
    s.role()
    s.answer(ANSWER[:52])
    s.finish("length")
    s.done()
    return s.script()


@scenario(
    FAMILY,
    "fake/mid-stream-error",
    "content, then a flat {'error': {... server_error}} line and the stream closes",
)
def oa_mid_stream_error(ctx: Ctx) -> Script:
    s = OAStream(ctx)
    s.role()
    s.answer(ANSWER[:40])
    err = {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
    }
    s.events.append(sse_data({"error": err}))
    return s.script()


@scenario(
    FAMILY,
    "fake/zai-billing",
    "Z.ai: HTTP 429 with business code 1113 'Insufficient balance or no resource package'",
)
def oa_zai_billing(ctx: Ctx) -> Script:
    err = {
        "code": "1113",
        "message": "Insufficient balance or no resource package. Please recharge.",
    }
    return error_script(ctx, 429, {"error": err})


NIM_UNSUPPORTED = ("top_k", "min_p", "repetition_penalty")


@scenario(
    FAMILY,
    "fake/nvidia-problem",
    "NVIDIA NIM: RFC-7807 problem JSON 400 with 'detail' naming an unsupported sampling "
    "param (top_k/min_p/repetition_penalty) when the body has one, else clean",
)
def oa_nvidia_problem(ctx: Ctx) -> Script:
    rejected = [p for p in NIM_UNSUPPORTED if p in ctx.body]
    if not rejected:
        return oa_clean(ctx)
    problem = {
        "type": "about:blank",
        "status": 400,
        "title": "Bad Request",
        "detail": f"Inference error: unsupported parameter: {rejected[0]}",
    }
    return error_script(ctx, 400, problem, content_type="application/problem+json")


@scenario(
    FAMILY,
    "fake/deepseek-insufficient-balance",
    "DeepSeek: HTTP 402 'Insufficient Balance' (type unknown_error), openresty, octet-stream",
)
def oa_deepseek_insufficient_balance(ctx: Ctx) -> Script:
    err = {
        "message": "Insufficient Balance",
        "type": "unknown_error",
        "param": None,
        "code": "invalid_request_error",
    }
    headers = [
        ("x-ds-trace-id", ctx.token(32, "0123456789abcdef")),
        ("Server", "openresty"),
    ]
    # the captured DeepSeek error response is served as application/octet-stream
    return json_script(ctx, 402, {"error": err}, headers, content_type="application/octet-stream")


SUPPORTED_MODELS = ("deepseek-chat", "deepseek-reasoner")


@scenario(
    FAMILY,
    "fake/unknown-model",
    "HTTP 404 'Model '<id>' not found. Supported models: deepseek-chat, deepseek-reasoner'",
)
def oa_listed_unknown_model(ctx: Ctx) -> Script:
    err = {
        "message": f"Model '{ctx.model}' not found. Supported models: "
        + ", ".join(SUPPORTED_MODELS),
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }
    return error_script(ctx, 404, {"error": err})


@scenario(
    FAMILY,
    "fake/context-length",
    "HTTP 400 'This model's maximum context length is 128000 tokens…', "
    "code context_length_exceeded",
)
def oa_context_length(ctx: Ctx) -> Script:
    err = {
        "message": "This model's maximum context length is 128000 tokens. However, your "
        "messages resulted in 131072 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    return error_script(ctx, 400, {"error": err})


@scenario(
    FAMILY,
    "fake/nvidia-rate-limit",
    "NVIDIA NIM: HTTP 429 problem JSON (application/problem+json) 'Too Many Requests'",
)
def oa_nvidia_rate_limit(ctx: Ctx) -> Script:
    problem = {
        "type": "about:blank",
        "status": 429,
        "title": "Too Many Requests",
        "detail": "ResourceExhausted: Worker local total request limit reached (33/32)",
    }
    headers = [("Nvcf-Reqid", ctx.uuid()), ("Server", "cloudflare")]
    return json_script(ctx, 429, problem, headers, content_type="application/problem+json")


@scenario(
    FAMILY,
    "fake/vllm-multimodal-500",
    "vLLM: HTTP 500 flat error '<model> is not a multimodal model' when a message has "
    "image parts, else clean",
)
def oa_vllm_multimodal_500(ctx: Ctx) -> Script:
    if not ctx.messages_have_images():
        return oa_clean(ctx)
    err = {
        "object": "error",
        "message": f"{ctx.model} is not a multimodal model",
        "type": "InternalServerError",
        "param": None,
        "code": 500,
    }
    return json_script(ctx, 500, err, [("Server", "uvicorn")])


@unknown_model(FAMILY)
def oa_unknown_model(ctx: Ctx) -> Script:
    err = {
        "message": f"The model `{ctx.model}` does not exist or you do not have access to it.",
        "type": "invalid_request_error",
        "param": None,
        "code": "model_not_found",
    }
    return error_script(ctx, 404, {"error": err})
