"""Anthropic Messages (``POST {base}/messages``, named SSE events).

The reference pipeline has no Anthropic stream adapter; this one follows the wire format
(``wire-formats.md`` §4) and the shared rules the other adapters use::

    message_start        usage (input, cache read/write) remembered
    content_block_start  text | thinking | redacted_thinking | tool_use (id, name)
    content_block_delta  text_delta      -> think strip -> spill guard -> speaker guard -> text
                         thinking_delta  -> raw ThoughtLogEntry (the spill guard observes it)
                         signature_delta -> the thinking block's signature
                         input_json_delta-> arguments accumulated per block index
    content_block_stop   thinking: kept (with its signature) for replay; tool_use: the
                         arguments parsed (a cut payload repaired, never fabricated:
                         arguments_truncated + a json_repair GuardEvent) -> function_call
    message_delta        cumulative usage; stop_reason end_turn/stop_sequence -> stop,
                         max_tokens -> length, tool_use -> tool_calls, refusal ->
                         content_filter -> done
    message_stop         noted;  ping: ignored, counted;  unknown events: ignored, counted
    error                lab.errors.anthropic_stream_error (overloaded_error ->
                         provider_overloaded, retryable); the stream ends

Lab choices: no parameter-degradation ladder (seed 02 gives it to OpenRouter and the
OpenAI-compatible adapters only; the Gemini adapter has none either), so a failure is the
stream's error; the attempt commits at the first content (not at ``message_start``, which
every stream opens with); a stream cut inside a ``tool_use`` block at EOF yields the
repaired call (truncated), while on the error path the partial calls go into the error
chunk's ``metadata["incomplete_tool_calls"]`` so the error stays the outcome;
``Usage.input_tokens`` is input + cache read + cache write (the contract: input includes
cached tokens).
"""

from __future__ import annotations

from typing import Any

from lab import _json
from lab.errors import anthropic_stream_error, parse_error_message, parse_status_code
from lab.guards import SpeakerBoundaryGuard, SpillGuard, ThinkBlockStripper
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

__all__ = ["STOP_REASON_MAP", "AnthropicAdapter"]

ANTHROPIC_VERSION = "2023-06-01"

STOP_REASON_MAP: dict[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}
"""Anthropic stop_reason -> the lab's cross-provider finish reason (others kept as is)."""


class AnthropicAdapter(StreamAdapter):
    """Anthropic Messages API streaming."""

    provider = "anthropic"
    family = "anthropic"
    sends_done_sentinel = False
    degrades = False  # seed 02 names OpenRouter and the OpenAI-compatible family only
    default_base_url = "https://api.anthropic.com/v1"
    api_key_env = "ANTHROPIC_API_KEY"
    mandatory_keys = ("model", "messages", "stream", "max_tokens")
    """``max_tokens`` is required by the Messages API, so the ladder never drops it."""

    # -- request side -------------------------------------------------------------------

    def endpoint(self, base_url: str | None, model: str | None) -> str:
        return join_url(base_url or self.default_base_url, "/messages")

    def request_headers(self, api_key: str | None) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        if api_key and api_key.strip():
            headers["x-api-key"] = api_key
        return headers

    def failure_message(self, status: int, body_text: str) -> str:
        return parse_error_message("anthropic", body_text, status) or f"HTTP {status}"

    # http_error: the base class calls lab.errors.normalize_http_error (529 -> overloaded)

    # -- per-attempt state --------------------------------------------------------------

    def reset(self) -> None:
        cfg = self.config
        self.think = (
            ThinkBlockStripper(
                persona_name=cfg.persona_name,
                capture_thoughts=cfg.capture_think_blocks_as_thoughts,
            )
            if cfg.strip_think_blocks
            else None
        )
        self.spill = SpillGuard(cfg.spill)
        self.speaker = (
            SpeakerBoundaryGuard(
                holdback_chars=cfg.speaker_holdback_chars, persona_name=cfg.persona_name
            )
            if cfg.speaker_guard
            else None
        )
        self.blocks: dict[int, dict[str, Any]] = {}
        self.thinking_blocks: list[dict[str, Any]] = []
        self.last_signature: str | None = None
        self.usage_raw: dict[str, int] = {}
        self.message_id: str | None = None
        self.ended = False

    # -- stage 02 + 03 ------------------------------------------------------------------

    def feed(self, event: SSEEvent) -> list[ProcessedChunk]:
        self._note_event(event)
        out: list[ProcessedChunk] = []
        data = event.data
        if data is None or event.is_comment or self.ended:
            return out
        text = data.strip()
        try:
            payload = _json.loads(text)
        except (ValueError, RecursionError) as exc:
            self.facts["invalid_json"] += 1
            what = "empty data line" if not text else f"invalid JSON in event data: {exc}"
            error = ProviderError(
                type="unknown",
                message=f"Anthropic stream error: {what}",
                retryable=False,
                code="invalid_json",
                original_error={"event": event.event, "data": text[:2000]},
            )
            out.extend(self.fail(error))
            self.stopped = True
            return out
        if not isinstance(payload, dict):
            self._count("unknown_events")
            return out
        kind = payload.get("type") if isinstance(payload.get("type"), str) else event.event
        handler = getattr(self, f"_on_{kind}", None) if kind else None
        if handler is None:
            self._count("unknown_events")
            return out
        handler(payload, out)
        return out

    def _count(self, key: str) -> None:
        self.facts[key] = self.facts.get(key, 0) + 1

    def _on_ping(self, payload: dict, out: list[ProcessedChunk]) -> None:
        self._count("pings")

    def _on_message_start(self, payload: dict, out: list[ProcessedChunk]) -> None:
        message = payload.get("message") if isinstance(payload.get("message"), dict) else {}
        if isinstance(message.get("id"), str):
            self.message_id = message["id"]
        if isinstance(message.get("model"), str):
            self.facts["served_model"] = message["model"]
        self._update_usage(message.get("usage"))

    def _on_message_stop(self, payload: dict, out: list[ProcessedChunk]) -> None:
        self.facts["message_stop"] = True

    def _update_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ):
            if is_number(usage.get(key)):
                self.usage_raw[key] = int(usage[key])

    def _usage(self) -> Usage | None:
        u = self.usage_raw
        if not u:
            return None
        cache_read = u.get("cache_read_input_tokens", 0)
        cache_write = u.get("cache_creation_input_tokens", 0)
        return Usage(
            input_tokens=u.get("input_tokens", 0) + cache_read + cache_write,
            output_tokens=u.get("output_tokens", 0),
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
        )

    def _on_content_block_start(self, payload: dict, out: list[ProcessedChunk]) -> None:
        index = payload.get("index")
        index = int(index) if is_number(index) else len(self.blocks)
        cb = payload.get("content_block") if isinstance(payload.get("content_block"), dict) else {}
        btype = cb.get("type") if isinstance(cb.get("type"), str) else "unknown"
        block: dict[str, Any] = {"type": btype, "parts": [], "signature": "", "open": True}
        self.blocks[index] = block
        if btype == "tool_use":
            block["id"] = cb.get("id") if isinstance(cb.get("id"), str) else None
            block["name"] = cb.get("name") if isinstance(cb.get("name"), str) else ""
            block["input"] = cb.get("input") if isinstance(cb.get("input"), dict) else {}
            self.committed = True
        elif btype == "redacted_thinking":
            data = cb.get("data") if isinstance(cb.get("data"), str) else ""
            self.thinking_blocks.append({"type": "redacted_thinking", "data": data})
            self._count("redacted_thinking")
            self.committed = True
        elif btype == "thinking":
            if isinstance(cb.get("thinking"), str) and cb["thinking"]:
                self._thinking(block, cb["thinking"], out)
            if isinstance(cb.get("signature"), str):
                block["signature"] = cb["signature"]
        elif btype == "text":
            if isinstance(cb.get("text"), str) and cb["text"]:
                self._text(cb["text"], out)
        else:
            self._count("unknown_blocks")

    def _on_content_block_delta(self, payload: dict, out: list[ProcessedChunk]) -> None:
        index = payload.get("index")
        block = self.blocks.get(int(index)) if is_number(index) else None
        delta = payload.get("delta") if isinstance(payload.get("delta"), dict) else {}
        dtype = delta.get("type")
        if dtype == "text_delta" and isinstance(delta.get("text"), str):
            self._text(delta["text"], out)
        elif dtype == "thinking_delta" and isinstance(delta.get("thinking"), str):
            self._thinking(block, delta["thinking"], out)
        elif dtype == "signature_delta" and isinstance(delta.get("signature"), str):
            if block is not None:
                block["signature"] += delta["signature"]
        elif dtype == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            if block is not None:
                block["parts"].append(delta["partial_json"])
        else:
            self._count("unknown_deltas")

    def _on_content_block_stop(self, payload: dict, out: list[ProcessedChunk]) -> None:
        index = payload.get("index")
        block = self.blocks.get(int(index)) if is_number(index) else None
        if block is None or not block["open"]:
            return
        block["open"] = False
        if block["type"] == "thinking":
            sig = block["signature"] or None
            self.thinking_blocks.append(
                {"type": "thinking", "thinking": "".join(block["parts"]), "signature": sig or ""}
            )
            if sig:
                self.last_signature = sig
                out.append(
                    ProcessedChunk(type="text", content="", metadata={"thoughtSignature": sig})
                )
        elif block["type"] == "tool_use":
            self._flush_speaker(out)
            out.append(self._call_chunk(block))

    def _on_message_delta(self, payload: dict, out: list[ProcessedChunk]) -> None:
        self._update_usage(payload.get("usage"))
        delta = payload.get("delta") if isinstance(payload.get("delta"), dict) else {}
        stop = delta.get("stop_reason")
        metadata: dict[str, Any] = {}
        usage = self._usage()
        if usage is not None:
            metadata["usage"] = usage
        if isinstance(stop, str) and stop:
            finish = STOP_REASON_MAP.get(stop, stop)
            self._record_finish(finish)
            metadata["finish_reason"] = finish
            metadata["native_finish_reason"] = stop
            if isinstance(delta.get("stop_sequence"), str):
                metadata["stop_sequence"] = delta["stop_sequence"]
            self._flush_speaker(out)
            out.append(ProcessedChunk(type="done", metadata=metadata))
        elif metadata:
            out.append(ProcessedChunk(type="text", content="", metadata=metadata))

    def _on_error(self, payload: dict, out: list[ProcessedChunk]) -> None:
        error = anthropic_stream_error(payload)
        if not self.committed:
            status = parse_status_code(error.status)
            inner = payload.get("error") if isinstance(payload.get("error"), dict) else payload
            message = inner.get("message") if isinstance(inner.get("message"), str) else ""
            if self.on_precommit_error(status, message or error.message):
                raise RetryAttempt(status, message or error.message)
        out.extend(self.fail(error))

    # -- text and thinking --------------------------------------------------------------

    def _thinking(self, block: dict | None, text: str, out: list[ProcessedChunk]) -> None:
        if not text:
            return
        if block is not None:
            block["parts"].append(text)
        self.spill.observe_reasoning(text)
        self.committed = True
        out.append(new_chunk(type="text", content="", thoughts=[_raw(text)]))

    def _text(self, text: str, out: list[ProcessedChunk]) -> None:
        reasoning = ""
        if self.think is not None and text:
            g = self.think.feed(text)
            text = g.content
            reasoning = g.reasoning if self.config.capture_think_blocks_as_thoughts else ""
            if self.think.notes:
                self._drain(self.think)
        if reasoning:
            self.spill.observe_reasoning(reasoning)
        if text:
            g = self.spill.filter(text)
            text = g.content
            if g.reasoning:
                reasoning += g.reasoning
            if self.spill.notes:
                self._drain(self.spill)
        fired = False
        if self.speaker is not None and text:
            text = self.speaker.feed(text)
            if self.speaker.notes:
                self._drain(self.speaker)
            fired = self.speaker.fired
        if text or reasoning:
            self.committed = True
            thoughts = [_raw(reasoning)] if reasoning else []
            out.append(new_chunk(type="text", content=text, thoughts=thoughts))
        if fired:
            self.stopped = True

    def _flush_speaker(self, out: list[ProcessedChunk]) -> None:
        if self.speaker is not None:
            tail = self.speaker.flush()
            if tail:
                out.append(ProcessedChunk(type="text", content=tail))

    # -- tool calls ---------------------------------------------------------------------

    def _build_call(self, block: dict) -> FunctionCall:
        raw = "".join(block["parts"])
        if raw:
            parsed = self._parse_arguments(raw, block["name"])
            args, truncated, error = parsed.args, parsed.truncated, parsed.error
        else:  # no input_json_delta (or only ""): the start event's input, normally {}
            args, truncated, error = dict(block.get("input") or {}), False, None
        provider_fields: dict[str, Any] = {}
        if self.thinking_blocks:
            provider_fields["thinking_blocks"] = list(self.thinking_blocks)
        if error is not None:
            provider_fields["raw_arguments"] = raw
            provider_fields["arguments_error"] = error
        return FunctionCall(
            name=block["name"],
            args=args,
            id=block.get("id"),
            thought_signature=self.last_signature,
            arguments_truncated=truncated,
            provider_fields=provider_fields,
        )

    def _call_chunk(self, block: dict) -> ProcessedChunk:
        metadata: dict[str, Any] = {}
        usage = self._usage()
        if usage is not None:
            metadata["usage"] = usage
        return ProcessedChunk(
            type="function_call", function_call=self._build_call(block), metadata=metadata
        )

    def _open_tool_blocks(self) -> list[dict]:
        return [b for _, b in sorted(self.blocks.items()) if b["open"] and b["type"] == "tool_use"]

    # -- end of stream ------------------------------------------------------------------

    def _flush_guards(self, out: list[ProcessedChunk], *, error_path: bool) -> None:
        g = self.spill.flush()
        if self.spill.notes:
            self._drain(self.spill)
        if g.content:
            out.append(ProcessedChunk(type="text", content=g.content))

        def think_flush() -> None:
            if self.think is None:
                return
            g = self.think.flush()
            if self.think.notes:
                self._drain(self.think)
            reasoning = g.reasoning if self.config.capture_think_blocks_as_thoughts else ""
            if g.content or reasoning:
                thoughts = [_raw(reasoning)] if reasoning else []
                out.append(ProcessedChunk(type="text", content=g.content, thoughts=thoughts))

        if error_path:
            self._flush_speaker(out)
            think_flush()
        else:
            think_flush()
            self._flush_speaker(out)

    def finish(self) -> list[ProcessedChunk]:
        """Natural end (EOF): guard flushes; a tool_use block the stream cut becomes its
        repaired (truncated) call."""
        out: list[ProcessedChunk] = []
        if self.stopped or self.ended:
            return out
        self.ended = True
        self._flush_guards(out, error_path=False)
        for block in self._open_tool_blocks():
            block["open"] = False
            self.facts["cut_tool_use"] = True
            out.append(self._call_chunk(block))
        return out

    def fail(self, error: ProviderError) -> list[ProcessedChunk]:
        """Error path: guard flushes, then the error (partial tool calls in its metadata)."""
        out: list[ProcessedChunk] = []
        if self.ended:
            return out
        self.ended = True
        self._flush_guards(out, error_path=True)
        metadata: dict[str, Any] = {"finish_reason": "error"}
        usage = self._usage()
        if usage is not None:
            metadata["usage"] = usage
        partial = []
        for block in self._open_tool_blocks():
            block["open"] = False
            partial.append(self._build_call(block).model_dump())
        if partial:
            metadata["incomplete_tool_calls"] = partial
        self._record_finish("error")
        out.append(ProcessedChunk(type="error", error=error, metadata=metadata))
        return out


def _raw(text: str) -> ThoughtLogEntry:
    return new_thought(kind="raw", content=text)
