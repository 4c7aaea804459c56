"""Google Gemini ``streamGenerateContent?alt=sse``: stage 02 and stage 03 (reference §11).

Per SSE event (one ``GenerateContentResponse`` JSON)::

    json (invalid: the stream ends as an error chunk, as the SDK would throw)
      -> usageMetadata remembered as the pending usage (latest wins)
      -> normalize_google_chunk: text (non-thought parts joined), function calls,
         promptFeedback, candidates, thoughtSignature, thoughtSummary, error
      -> split text + function calls (text first; the text piece carries nothing else)
      -> per piece: overlap dedup -> speaker guard -> speaker tail flush before a non-text
         terminal piece -> process_chunk (§11.2) -> ProcessedChunk (no meaningful filter)

``process_chunk`` order: error; ``promptFeedback.blockReason`` -> content_blocked;
blocking candidate ``finishReason`` (SAFETY, RECITATION, ...) -> content_blocked; metadata
(usage, thoughtSignature, thoughtSummary); ``thought: true`` parts -> raw thoughts; the
first function call; text; ``STOP`` -> done; otherwise text "".

The Gemini body carries no model (it is in the URL); the lab keeps ``"model"`` in the body
as its routing key and :meth:`GoogleAdapter.wire_body` drops it before sending.
"""

from __future__ import annotations

import base64
from typing import Any

from lab import _json
from lab.errors import (
    GOOGLE_BLOCKING_FINISH_REASONS,
    google_block_error,
    google_provider_error,
    google_stream_error,
    parse_error_message,
    parse_status_code,
)
from lab.guards import RecentTextDedup, SpeakerBoundaryGuard
from lab.http.sse import SSEEvent
from lab.model import (
    FunctionCall,
    ProcessedChunk,
    ProviderError,
    ThoughtLogEntry,
    Usage,
    new_chunk,
    new_thought,
)
from lab.providers.base import RetryAttempt, StreamAdapter, is_number, join_url

__all__ = ["GoogleAdapter", "google_usage", "normalize_google_chunk"]

UNBLOCKED = "BLOCKED_REASON_UNSPECIFIED"

FINISH_REASON_MAP: dict[str, str] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    **{r: "content_filter" for r in GOOGLE_BLOCKING_FINISH_REASONS},
}
"""Gemini finishReason -> the lab's cross-provider finish reason (others: lowercased)."""


def google_usage(meta: Any) -> Usage | None:
    """``usageMetadata`` -> :class:`Usage`; output includes ``thoughtsTokenCount``."""
    if not isinstance(meta, dict):
        return None

    def n(key: str) -> int | None:
        v = meta.get(key)
        return int(v) if is_number(v) else None

    prompt = n("promptTokenCount")
    candidates = n("candidatesTokenCount")
    thoughts = n("thoughtsTokenCount")
    cached = n("cachedContentTokenCount")
    total = n("totalTokenCount")
    if all(v is None for v in (prompt, candidates, thoughts, cached, total)):
        return None
    return Usage(
        input_tokens=prompt or 0,
        output_tokens=(candidates or 0) + (thoughts or 0),
        reasoning_tokens=thoughts or 0,
        cache_read_tokens=cached or 0,
        total_tokens=total,
    )


def _signature(value: Any) -> str | None:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, (bytes, bytearray)) and value:
        return base64.b64encode(bytes(value)).decode("ascii")
    return None


def _parts(chunk: dict) -> list[dict]:
    cands = chunk.get("candidates")
    if not isinstance(cands, list) or not cands or not isinstance(cands[0], dict):
        return []
    content = cands[0].get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def normalize_google_chunk(raw: Any) -> dict | None:
    """``normalizeGoogleStreamChunk`` (§11.1): the flat shape the pipeline works on."""
    if not isinstance(raw, dict):
        return None
    calls: list[dict] = []
    for key in ("functionCalls", "function_calls"):
        if isinstance(raw.get(key), list):
            calls.extend(c for c in raw[key] if isinstance(c, dict))
    for key in ("functionCall", "function_call"):
        if isinstance(raw.get(key), dict):
            calls.append(raw[key])
    parts = _parts(raw)
    if not calls:
        for p in parts:
            fc = p.get("functionCall", p.get("function_call"))
            if isinstance(fc, dict):
                calls.append(fc)
    if parts:
        text = "".join(
            p["text"]
            for p in parts
            if isinstance(p.get("text"), str) and p.get("thought") is not True
        )
    else:
        text = raw.get("text") if isinstance(raw.get("text"), str) else ""
    out: dict[str, Any] = {
        "text": text or None,
        "functionCalls": calls or None,
        "promptFeedback": raw.get("promptFeedback"),
        "candidates": raw.get("candidates"),
        "thoughtSignature": raw.get("thoughtSignature"),
        "thoughtSummary": raw.get("thoughtSummary"),
    }
    if raw.get("error"):
        out["error"] = raw["error"]
    return out


def _block_reason(chunk: dict) -> str | None:
    pf = chunk.get("promptFeedback")
    reason = pf.get("blockReason") if isinstance(pf, dict) else None
    return reason if isinstance(reason, str) and reason and reason != UNBLOCKED else None


def _finish_reason(chunk: dict) -> str | None:
    cands = chunk.get("candidates")
    if isinstance(cands, list) and cands and isinstance(cands[0], dict):
        fr = cands[0].get("finishReason")
        return fr if isinstance(fr, str) and fr else None
    return None


def _any_finish(chunk: dict) -> bool:
    cands = chunk.get("candidates")
    return isinstance(cands, list) and any(
        isinstance(c, dict) and c.get("finishReason") for c in cands
    )


class GoogleAdapter(StreamAdapter):
    """Gemini API (``generativelanguage.googleapis.com``), reproduced per reference §11."""

    provider = "google"
    family = "google"
    sends_done_sentinel = False
    degrades = False  # §11: errors go to createProviderErrorChunk; there is no ladder
    default_base_url = "https://generativelanguage.googleapis.com/v1beta"
    api_key_env = "GEMINI_API_KEY"
    api_key_envs = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    """Checked in order; the first set one is used."""
    mandatory_keys = ("model", "contents")
    """``contents`` is Gemini's only required key; ``model`` is the lab's routing key."""

    # -- request side -------------------------------------------------------------------

    def endpoint(self, base_url: str | None, model: str | None) -> str:
        if not model:
            raise ValueError("the Gemini endpoint needs a model id (body['model'])")
        name = model[len("models/") :] if model.startswith("models/") else model
        base = base_url or self.default_base_url
        return join_url(base, f"/models/{name}:streamGenerateContent", "alt=sse")

    def request_headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if api_key and api_key.strip():
            headers["x-goog-api-key"] = api_key
        return headers

    @staticmethod
    def wire_body(body: dict) -> dict:
        """The body as Gemini takes it: without the lab's ``model`` routing key."""
        return {k: v for k, v in body.items() if k != "model"}

    def failure_message(self, status: int, body_text: str) -> str:
        return parse_error_message("google", body_text, status) or f"HTTP {status}"

    # http_error: the base class calls lab.errors.normalize_http_error (-> google_provider_error)

    def transport_error(self, exc: BaseException) -> ProviderError:
        """§11.1 errors: ``handleProviderError`` over the thrown message (no code: the text
        heuristics of §11.3 decide, api_error not retryable when none matches)."""
        return google_provider_error(self.transport_message(exc))

    # -- per-attempt state --------------------------------------------------------------

    def reset(self) -> None:
        cfg = self.config
        self.dedup = RecentTextDedup(tail_chars=cfg.dedup_tail_chars, min_chars=cfg.dedup_min_chars)
        self.speaker = (
            SpeakerBoundaryGuard(
                holdback_chars=cfg.speaker_holdback_chars, persona_name=cfg.persona_name
            )
            if cfg.speaker_guard
            else None
        )
        self.pending_usage: Usage | None = None
        self.raw_usage: dict | None = None
        self.ended = False

    # -- stage 02 -----------------------------------------------------------------------

    def feed(self, event: SSEEvent) -> list[ProcessedChunk]:
        self._note_event(event)
        out: list[ProcessedChunk] = []
        data = event.data
        if data is None or event.is_comment or self.ended:
            return out
        text = data.strip()
        if text == "[DONE]":
            self.facts["done_seen"] = True
            return out
        try:
            raw = _json.loads(text)
        except (ValueError, RecursionError) as exc:
            self.facts["invalid_json"] += 1
            what = "empty data line" if not text else f"invalid JSON in stream: {exc}"
            out.extend(self.fail(google_provider_error(what, original_error={"data": text[:2000]})))
            self.stopped = True
            return out
        if isinstance(raw, list):  # alt=json framing: one array of responses
            for item in raw:
                self._on_raw(item, out)
                if self.stopped:
                    break
        else:
            self._on_raw(raw, out)
        return out

    def _on_raw(self, raw: Any, out: list[ProcessedChunk]) -> None:
        if isinstance(raw, dict) and isinstance(raw.get("usageMetadata"), dict):
            usage = google_usage(raw["usageMetadata"])
            if usage is not None:
                self.pending_usage = usage
                self.raw_usage = raw["usageMetadata"]
        chunk = normalize_google_chunk(raw)
        if chunk is None:
            self.facts["dropped_chunks"] = self.facts.get("dropped_chunks", 0) + 1
            return
        err = chunk.get("error")
        if err is not None and not self.committed:
            inner = err if isinstance(err, dict) else {"message": str(err)}
            status = parse_status_code(inner.get("code"))
            message = inner.get("message") if isinstance(inner.get("message"), str) else ""
            if self.on_precommit_error(status, message or "Google API error"):
                raise RetryAttempt(status, message)
        for piece in self._split(chunk):
            self._pipeline(piece, out)
            if self.stopped:
                return

    @staticmethod
    def _split(chunk: dict) -> list[dict]:
        """``splitChunkWithTextAndFunctionCalls``: text first, then the calls."""
        if not (chunk.get("text") and chunk.get("functionCalls")):
            return [chunk]
        rest = {k: v for k, v in chunk.items() if k != "text"}
        rest["text"] = None
        return [{"text": chunk["text"]}, rest]

    def _pipeline(self, chunk: dict, out: list[ProcessedChunk]) -> None:
        text = chunk.get("text")
        fired = False
        if isinstance(text, str) and text:
            text = self.dedup.filter(text)
            if self.dedup.notes:
                self._drain(self.dedup)
            if self.speaker is not None and text:
                text = self.speaker.feed(text)
                if self.speaker.notes:
                    self._drain(self.speaker)
                fired = self.speaker.fired
            # cloneChunkWithText: the dedup/guard clone keeps everything except ``error``
            chunk = {k: v for k, v in chunk.items() if k != "error"}
            chunk["text"] = text

        if not self.committed and (
            text or chunk.get("functionCalls") or chunk.get("candidates") or self.pending_usage
        ):
            self.committed = True

        if (
            self.speaker is not None
            and not text
            and (
                chunk.get("error")
                or chunk.get("functionCalls")
                or _block_reason(chunk)
                or _any_finish(chunk)
            )
        ):
            tail = self.speaker.flush()
            if tail:
                out.append(self.process_chunk({"text": tail}))
        out.append(self.process_chunk(chunk))
        if fired:
            self.stopped = True

    # -- stage 03 -----------------------------------------------------------------------

    def process_chunk(self, chunk: dict) -> ProcessedChunk:
        """§11.2, in order."""
        err = chunk.get("error")
        if err is not None:
            self._record_finish("error")
            inner = err if isinstance(err, dict) else {"message": str(err)}
            return ProcessedChunk(
                type="error", error=google_stream_error(inner), metadata={"finish_reason": "error"}
            )
        reason = _block_reason(chunk)
        if reason is not None:
            self._record_finish("content_filter")
            return ProcessedChunk(
                type="error",
                error=google_block_error(
                    reason, prompt=True, original_error=chunk["promptFeedback"]
                ),
                metadata=self._metadata(chunk, finish="content_filter", native=reason),
            )
        native = _finish_reason(chunk)
        if native in GOOGLE_BLOCKING_FINISH_REASONS:
            self._record_finish("content_filter")
            return ProcessedChunk(
                type="error",
                error=google_block_error(
                    native, prompt=False, original_error=chunk.get("candidates")
                ),
                metadata=self._metadata(chunk, finish="content_filter", native=native),
            )

        calls = chunk.get("functionCalls") or []
        finish = None
        if native:
            finish = (
                "tool_calls"
                if calls and native == "STOP"
                else FINISH_REASON_MAP.get(native, native.lower())
            )
            self._record_finish(finish)
        metadata = self._metadata(chunk, finish=finish, native=native)
        thoughts: list[ThoughtLogEntry] = []
        summary = chunk.get("thoughtSummary")
        if isinstance(summary, str) and summary:
            metadata["thoughtSummary"] = summary
            thoughts.append(new_thought(kind="summary", content=summary))
        parts = _parts(chunk)
        for p in parts:
            if p.get("thought") is True and isinstance(p.get("text"), str) and p["text"]:
                thoughts.append(new_thought(kind="raw", content=p["text"]))

        if calls:
            first = calls[0]
            name = first.get("name") if isinstance(first.get("name"), str) else ""
            args = first.get("args") if isinstance(first.get("args"), dict) else {}
            if len(calls) > 1:
                metadata["ignored_function_calls"] = calls[1:]
            call = FunctionCall(
                name=name,
                args=args,
                id=first.get("id") if isinstance(first.get("id"), str) else None,
                thought_signature=metadata.get("thoughtSignature"),
            )
            return new_chunk(
                type="function_call", function_call=call, thoughts=thoughts, metadata=metadata
            )
        text = chunk.get("text")
        if text is None:
            text = "".join(
                p["text"]
                for p in parts
                if isinstance(p.get("text"), str) and p.get("thought") is not True
            )
        if text:
            return new_chunk(type="text", content=text, thoughts=thoughts, metadata=metadata)
        if native == "STOP":
            return new_chunk(type="done", thoughts=thoughts, metadata=metadata)
        return new_chunk(type="text", content="", thoughts=thoughts, metadata=metadata)

    def _metadata(self, chunk: dict, *, finish: str | None, native: str | None) -> dict[str, Any]:
        metadata: dict[str, Any] = {}
        if self.pending_usage is not None:
            metadata["usage"] = self.pending_usage
        sig = _signature(chunk.get("thoughtSignature"))
        if sig is None:
            parts = _parts(chunk)
            for p in parts:
                if "functionCall" in p or "function_call" in p:
                    sig = _signature(p.get("thoughtSignature"))
                    if sig:
                        break
            if sig is None:
                for p in parts:
                    sig = _signature(p.get("thoughtSignature"))
                    if sig:
                        break
        if sig:
            metadata["thoughtSignature"] = sig
        if finish:
            metadata["finish_reason"] = finish
        if native:
            metadata["native_finish_reason"] = native
        return metadata

    # -- end of stream ------------------------------------------------------------------

    def finish(self) -> list[ProcessedChunk]:
        """Natural end: the speaker tail as a text chunk."""
        out: list[ProcessedChunk] = []
        if self.stopped or self.ended:
            return out
        self.ended = True
        if self.speaker is not None:
            tail = self.speaker.flush()
            if tail:
                out.append(self.process_chunk({"text": tail}))
        return out

    def fail(self, error: ProviderError) -> list[ProcessedChunk]:
        """Error path: the speaker tail, then the error chunk."""
        out: list[ProcessedChunk] = []
        if self.ended:
            return out
        self.ended = True
        if self.speaker is not None:
            tail = self.speaker.flush()
            if tail:
                out.append(self.process_chunk({"text": tail}))
        self._record_finish("error")
        out.append(ProcessedChunk(type="error", error=error, metadata={"finish_reason": "error"}))
        return out
