"""Gemini scenarios (``POST /v1beta/models/{model}:streamGenerateContent?alt=sse``).

Shapes follow docs/reference.md, "1.4 Gemini": ``data:`` frames only (no ``event:``, no
comments, no ``[DONE]``), a running ``usageMetadata`` on every chunk, ``modelVersion`` and
``responseId``, the last chunk carries ``finishReason``. Function calls arrive whole in one
part, except in ``fake/streamed-function-args`` (Gemini 3 ``partialArgs`` with
``willContinue``).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

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
    sse_data,
    unknown_model,
)
from .openrouter import ANSWER

_GEMINI_PATH = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>.+):(?P<method>\w+)$")


def _gemini_route(path: str) -> tuple[bool, str | None]:
    m = _GEMINI_PATH.match(path)
    if m and m.group("method") in ("streamGenerateContent", "generateContent"):
        return True, unquote(m.group("model"))
    return False, None


register_route(
    FakeRoute(
        family="google",
        provider="google",
        record_base="/v1beta",
        sdk_base="/v1beta",
        listing="POST /v1beta/models/{model}:streamGenerateContent?alt=sse",
        match=_gemini_route,
    )
)

FAMILY = "google"

THOUGHTS = (
    "**Analyzing the request**\n\nThe user wants café tips; I'll keep the answer short.",
    "**Choosing a recommendation**\n\nThe corner café opens early and is known for dessert.",
)


class GStream:
    """Builds one Gemini SSE stream of GenerateContentResponse chunks."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.response_id = ctx.token(23)
        self.events: list[bytes] = []
        self.prompt = ctx.prompt_tokens
        self.candidates_tokens = 0
        self.thoughts_tokens = 0

    def usage(self) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "promptTokenCount": self.prompt,
            "candidatesTokenCount": self.candidates_tokens,
            "totalTokenCount": self.prompt + self.candidates_tokens + self.thoughts_tokens,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": self.prompt}],
        }
        if self.thoughts_tokens:
            usage["thoughtsTokenCount"] = self.thoughts_tokens
        return usage

    def emit(self, candidate: dict[str, Any] | None, **extra: Any) -> None:
        obj: dict[str, Any] = {}
        if candidate is not None:
            obj["candidates"] = [candidate]
        obj.update(extra)  # may carry its own usageMetadata
        obj.setdefault("usageMetadata", self.usage())
        obj["modelVersion"] = self.ctx.model
        obj["responseId"] = self.response_id
        self.events.append(sse_data(obj))

    def parts(self, parts: list[dict[str, Any]], finish: str | None = None, **extra: Any) -> None:
        for part in parts:
            n = approx_tokens_n(len(part.get("text", "")) or 8)
            if part.get("thought"):
                self.thoughts_tokens += n
            else:
                self.candidates_tokens += n
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
        if finish:
            candidate["finishReason"] = finish
        candidate["index"] = 0
        candidate.update(extra)
        self.emit(candidate)

    def answer(self, text: str, finish: str = "STOP", first_part: dict[str, Any] | None = None):
        chunks = pieces(text, self.ctx.rng, max_words=4)
        for i, piece in enumerate(chunks):
            part = {"text": piece}
            if i == 0 and first_part:
                part.update(first_part)
            self.parts([part], finish if i == len(chunks) - 1 else None)

    def signature(self) -> str:
        """An opaque ``thoughtSignature``: valid base64 (64 symbols, no padding needed), as
        the real API's bytes field is, so an SDK that decodes it (google-genai) accepts it."""
        token = self.ctx.token(
            64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        )
        return ("Cik" + token)[:64]

    def script(self) -> Script:
        headers = [
            ("Content-Type", "text/event-stream"),
            ("Vary", "Origin, X-Origin, Referer"),
            ("X-Content-Type-Options", "nosniff"),
            ("X-Frame-Options", "SAMEORIGIN"),
            ("Server-Timing", f"gfet4t7; dur={300 + self.ctx.stream('ms').randint(0, 900)}"),
            ("Server", "scaffolding on HTTPServer2"),
        ]
        return make_script(self.ctx, self.events, headers)


@scenario(FAMILY, "fake/clean", "text parts over several chunks, finishReason STOP on the last")
def g_clean(ctx: Ctx) -> Script:
    s = GStream(ctx)
    s.answer(ANSWER)
    return s.script()


@scenario(
    FAMILY,
    "fake/thought-parts",
    "thought summaries as parts with thought:true (glued headings), thoughtSignature on the "
    "first answer part",
)
def g_thought_parts(ctx: Ctx) -> Script:
    s = GStream(ctx)
    for thought in THOUGHTS:
        s.parts([{"text": thought, "thought": True}])
    s.answer(ANSWER, first_part={"thoughtSignature": s.signature()})
    return s.script()


@scenario(
    FAMILY,
    "fake/function-call",
    "a whole functionCall part (args object) with thoughtSignature, finishReason STOP",
)
def g_function_call(ctx: Ctx) -> Script:
    s = GStream(ctx)
    s.parts([{"text": THOUGHTS[0], "thought": True}])
    call: dict[str, Any] = {
        "functionCall": {"name": "get_weather", "args": {"city": "Zürich", "days": 3}}
    }
    call["thoughtSignature"] = s.signature()
    s.parts([call], "STOP", finishMessage="Model generated function call(s).")
    return s.script()


@scenario(
    FAMILY,
    "fake/safety-block",
    "some text, then a candidate with finishReason SAFETY, empty content and safetyRatings",
)
def g_safety_block(ctx: Ctx) -> Script:
    s = GStream(ctx)
    s.answer("Voilà, here is how the café", finish="")
    rating = {
        "category": "HARM_CATEGORY_DANGEROUS_CONTENT",
        "probability": "HIGH",
        "blocked": True,
    }
    s.emit({"finishReason": "SAFETY", "index": 0, "safetyRatings": [rating]})
    return s.script()


@scenario(
    FAMILY,
    "fake/prompt-blocked",
    "a single chunk with promptFeedback.blockReason PROHIBITED_CONTENT and no candidates",
)
def g_prompt_blocked(ctx: Ctx) -> Script:
    s = GStream(ctx)
    usage = {"promptTokenCount": s.prompt, "totalTokenCount": s.prompt}  # nothing generated
    s.emit(None, promptFeedback={"blockReason": "PROHIBITED_CONTENT"}, usageMetadata=usage)
    return s.script()


@scenario(
    FAMILY,
    "fake/text-and-call",
    "text, then one chunk whose parts hold text AND a functionCall (with thoughtSignature), "
    "finishReason STOP",
)
def g_text_and_call(ctx: Ctx) -> Script:
    s = GStream(ctx)
    s.parts([{"text": "Sure — let me look up"}])
    call: dict[str, Any] = {
        "functionCall": {"name": "get_weather", "args": {"city": "Zürich", "days": 3}}
    }
    call["thoughtSignature"] = s.signature()
    s.parts(
        [{"text": " the forecast for Zürich."}, call],
        "STOP",
        finishMessage="Model generated function call(s).",
    )
    return s.script()


@scenario(
    FAMILY,
    "fake/streamed-function-args",
    "Gemini 3 streamed function-call arguments: the name (with thoughtSignature, "
    "willContinue), partialArgs pieces into a nested object and an array (a string in "
    "pieces, a number, a bool), an empty functionCall ending the call, STOP in a later chunk",
)
def g_streamed_function_args(ctx: Ctx) -> Script:
    s = GStream(ctx)

    def call(fc: dict[str, Any], **part: Any) -> None:
        s.parts([{"functionCall": fc, **part}])

    call({"name": "plan_trip", "willContinue": True}, thoughtSignature=s.signature())
    pieces_: list[tuple[str, dict[str, Any]]] = [("$.trip.city", {"stringValue": "Zü", "willContinue": True}),
               ("$.trip.city", {"stringValue": "rich"}),
               ("$.trip.days[0].date", {"stringValue": "2026-12-02"}),
               ("$.trip.days[0].hours", {"numberValue": 6}),
               ("$.trip.days[1].date", {"stringValue": "2026-12-03"}),
               ("$.trip.days[1].hours", {"numberValue": 4.5}),
               ("$.trip.museum_pass", {"boolValue": True})]  # fmt: skip
    for path, value in pieces_:
        call({"partialArgs": [{"jsonPath": path, **value}], "willContinue": True})
    call({})
    s.parts([{"text": ""}], "STOP")
    return s.script()


# Each later chunk starts by repeating the tail of the text already sent (>= 8 chars, the
# dedup minimum); the last one repeats a whole earlier chunk.
OVERLAP_CHUNKS = (
    "Hello! The café on the corner opens at 8:00",
    " opens at 8:00 — their crème brûlée",
    "their crème brûlée is worth the trip ☕.",
    " is worth the trip ☕.",
)


@scenario(
    FAMILY,
    "fake/overlap-repeat",
    "text chunks that re-send the tail of the text already streamed (and one whole-chunk "
    "repeat); dedup recovers the answer",
)
def g_overlap_repeat(ctx: Ctx) -> Script:
    s = GStream(ctx)
    for i, text in enumerate(OVERLAP_CHUNKS):
        s.parts([{"text": text}], "STOP" if i == len(OVERLAP_CHUNKS) - 1 else None)
    return s.script()


@scenario(
    FAMILY,
    "fake/mid-stream-error",
    "text, then an in-stream {'error': {code 503, status UNAVAILABLE}} chunk, no finishReason",
)
def g_mid_stream_error(ctx: Ctx) -> Script:
    s = GStream(ctx)
    s.answer(ANSWER[:40], finish="")
    err = {
        "code": 503,
        "message": "This model is currently experiencing high demand. Spikes in demand are "
        "usually temporary. Please try again later.",
        "status": "UNAVAILABLE",
    }
    s.events.append(sse_data({"error": err}))
    return s.script()


REQUEST_FIELDS = frozenset(
    {
        "model",
        "contents",
        "tools",
        "toolConfig",
        "safetySettings",
        "systemInstruction",
        "generationConfig",
        "cachedContent",
        "labels",
        # proto JSON parsing takes the original snake_case names as well
        "tool_config",
        "safety_settings",
        "system_instruction",
        "generation_config",
        "cached_content",
    }
)
"""Top-level ``GenerateContentRequest`` fields; the real API rejects any other with a 400."""


def unknown_fields_error(body: dict[str, Any]) -> dict[str, Any] | None:
    """The real Gemini API's 400 for a body with unknown top-level fields (``"stream"``,
    ``"messages"``, ...), or None when every field is known."""
    unknown = [k for k in body if k not in REQUEST_FIELDS]
    if not unknown:
        return None
    lines = [
        f'Invalid JSON payload received. Unknown name "{k}": Cannot find field.' for k in unknown
    ]
    return {
        "error": {
            "code": 400,
            "message": "\n".join(lines),
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [{"description": line} for line in lines],
                }
            ],
        }
    }


@unknown_model(FAMILY)
def g_unknown_model(ctx: Ctx) -> Script:
    err = {
        "code": 404,
        "message": f"models/{ctx.model} is not found for API version v1beta, or is not "
        "supported for generateContent. Call ListModels to see the list of available models "
        "and their supported methods.",
        "status": "NOT_FOUND",
    }
    headers = [("Vary", "Origin, X-Origin, Referer"), ("Server", "scaffolding on HTTPServer2")]
    return json_script(
        ctx, 404, {"error": err}, headers, content_type="application/json; charset=UTF-8"
    )
