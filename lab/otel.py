"""``lab export otlp PATH --out FILE.jsonl | --endpoint URL``: the lab's verdicts as spans.

One span per logical request, built with OpenTelemetry's own SDK, so Phoenix, Langfuse or
any OTLP backend shows what the lab found beside the traces users already have:

- OpenTelemetry GenAI attributes: ``gen_ai.operation.name`` (``chat``),
  ``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.response.model`` and
  ``gen_ai.response.id`` (when the result knows them: ``facts["response_model"]`` /
  ``facts["response_id"]``), ``gen_ai.usage.input_tokens`` / ``output_tokens``,
  ``gen_ai.response.finish_reasons``, ``gen_ai.response.time_to_first_chunk`` (seconds),
  ``error.type``;
- ``openinference.span.kind = "LLM"`` (Phoenix files the span as a model call);
- the ``lab.*`` namespace: ``lab.stream_id``, ``lab.capture_id``, ``lab.serving_backend``,
  ``lab.leaked``, ``lab.leak_guards``, ``lab.leak_chars``, ``lab.anomalies``,
  ``lab.classifier``, ``lab.attempts``, ``lab.degradation_path``, ``lab.outcome``;
- every guard event that moved text is a span event ``lab.guard.<guard>`` at the time its
  read arrived (``lab.guard``, ``lab.rule``, ``lab.attempt``, ``lab.seq``, ``lab.offset``,
  ``lab.moved_chars`` and the moved text, cut to :data:`MOVED_CHARS`);
- tokens and cost where Phoenix and Langfuse read them: OpenInference
  ``llm.model_name``, ``llm.provider``, ``llm.token_count.prompt`` / ``completion`` /
  ``total`` / ``completion_details.reasoning`` / ``prompt_details.cache_read``,
  ``llm.cost.total`` (USD), and ``gen_ai.usage.cost`` (Langfuse's ``costDetails.total``).

With ``messages=True`` (``--messages``; off by default: it exports what users and models
wrote) the span also carries the conversation: ``input.value`` (the recorded request body,
JSON, redacted as on disk) and ``llm.input_messages.<i>.message.role`` / ``.content``;
``output.value`` (the answer as a JSON message: ``content``, ``reasoning``,
``tool_calls``) and ``llm.output_messages.0.message.role`` / ``.content`` /
``.tool_calls.<j>.tool_call.id`` / ``.function.name`` / ``.function.arguments``. Every
text value is cut to ``max_chars`` (:data:`MESSAGE_CHARS`), the cut said in the text.

Joining the app's trace: when the recorded request carried a W3C ``traceparent`` header
(the app's instrumentation sends one), the lab's span is its child: the same trace id, the
header's span as parent. Otherwise each span starts a trace of its own.

Span times are the recording's: start at the first attempt's ``started_at``, end at the
last attempt's end. ``--out`` writes OTLP/JSON as the OTLP specification encodes it (trace
and span ids as hex strings, enums as integers), one ``ExportTraceServiceRequest`` holding
one span per line (the OpenTelemetry Collector's ``otlpjsonfile`` receiver reads it);
``--endpoint`` posts OTLP/HTTP protobuf (``http://host:4318/v1/traces``). The capture is
read one unit at a time. OpenTelemetry is the optional extra ``[otel]``.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "MESSAGE_CHARS",
    "MOVED_CHARS",
    "PROVIDER_NAMES",  # noqa: F822 - served by __getattr__ from the adapters
    "export_otlp",
    "message_attributes",
    "otel_provider_name",
    "parent_of",
    "span_attributes",
]

MOVED_CHARS = 2000
"""Moved text kept in a guard event's ``lab.moved`` (the count is ``lab.moved_chars``)."""


def __getattr__(name: str) -> Any:
    if name == "PROVIDER_NAMES":  # derived from each adapter's otel_name
        from lab.providers import PROVIDERS, get_adapter

        return {p: get_adapter(p).otel_name for p in PROVIDERS if get_adapter(p).otel_name}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def otel_provider_name(provider: str) -> str:
    """``gen_ai.provider.name`` of a lab provider: its adapter's ``otel_name`` when the
    well-known value differs (``google`` -> ``gcp.gemini``), else the provider name."""
    from lab.providers import PROVIDERS, get_adapter

    if provider in PROVIDERS:
        try:
            return get_adapter(provider).otel_name or provider
        except (ImportError, AttributeError):  # a broken plugin: its name as recorded
            return provider
    return provider


MESSAGE_CHARS = 20_000
"""``messages=True``: the most characters of one exported text value (a message's
content, ``input.value``, ``output.value``); the rest is cut, and the cut said."""

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def _otel() -> Any:
    try:
        from opentelemetry.sdk import trace as sdk_trace
    except ImportError:
        raise ImportError(
            "lab export otlp needs OpenTelemetry: pip install 'stream-lab[otel]' "
            "(opentelemetry-sdk, opentelemetry-exporter-otlp-proto-http)"
        ) from None
    return sdk_trace


def span_attributes(result: Any, row: Any) -> dict[str, Any]:
    """The span attributes of one result (``row``: its line of ``lab.tables.streams``)."""

    import pandas as pd

    def given(value: Any) -> bool:  # not None / NaN / <NA> / ""
        return not (value is None or value is pd.NA or value != value or value == "")

    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": otel_provider_name(result.provider),
        "openinference.span.kind": "LLM",
        "lab.stream_id": result.stream_id,
        "lab.leaked": bool(row.leaked),
        "lab.leak_chars": int(row.leak_chars),
        "lab.attempts": int(row.attempts),
        "lab.anomalies": [a for a in str(row.anomalies or "").split(",") if a],
    }
    optional = {
        "gen_ai.request.model": result.model,
        "gen_ai.response.model": result.facts.get("response_model"),
        "gen_ai.response.id": result.facts.get("response_id"),
        "gen_ai.usage.input_tokens": row.input_tokens,
        "gen_ai.usage.output_tokens": row.output_tokens,
        "error.type": row.error_type,
        "lab.serving_backend": row.serving_provider,
        "lab.leak_guards": row.leak_guards,
        "lab.classifier": row.classifier,
        "lab.degradation_path": row.degradation_path,
        "lab.outcome": row.outcome,
        "lab.reasoning_tokens": row.reasoning_tokens,
        "lab.cost": row.cost,
    }
    usage = result.usage
    total = None
    if usage is not None and given(row.input_tokens) and given(row.output_tokens):
        total = int(row.input_tokens) + int(row.output_tokens)
    optional.update(
        {
            # OpenInference (Phoenix) and Langfuse read these
            "llm.model_name": result.facts.get("response_model") or result.model,
            "llm.provider": result.provider,
            "llm.token_count.prompt": row.input_tokens,
            "llm.token_count.completion": row.output_tokens,
            "llm.token_count.total": total,
            "llm.token_count.completion_details.reasoning": row.reasoning_tokens,
            "llm.token_count.prompt_details.cache_read": row.cached_tokens,
            "llm.cost.total": row.cost,
            "gen_ai.usage.cost": row.cost,
        }
    )
    for key, value in optional.items():
        if given(value):
            attrs[key] = value.item() if hasattr(value, "item") else value
    if given(row.finish_reason):
        attrs["gen_ai.response.finish_reasons"] = [str(row.finish_reason)]
    if given(row.ttft_ms):
        attrs["gen_ai.response.time_to_first_chunk"] = float(row.ttft_ms) / 1000.0
    return attrs


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [cut: {len(text) - limit} more characters]"


def _content_text(content: Any) -> str:
    """A message's content as text: a string, or the ``text`` of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content if isinstance(part, dict))
    return ""


def _request_messages(body: Any) -> list[tuple[str, str]]:
    """(role, text) of the conversation a request body sends, in order: chat ``messages``
    (with Anthropic's ``system``), Gemini ``contents`` (with ``systemInstruction``), or the
    Responses API's ``instructions`` and ``input``."""
    if not isinstance(body, dict):
        return []
    out: list[tuple[str, str]] = []
    system = body.get("system") or body.get("instructions")
    instruction = body.get("systemInstruction") or body.get("system_instruction")
    if isinstance(instruction, dict):
        system = _content_text(instruction.get("parts"))
    if system:
        out.append(("system", _content_text(system)))
    turns = body.get("messages")
    if turns is None:
        turns = body.get("contents")
    if turns is None:
        turns = body.get("input")
    if isinstance(turns, str):
        return [*out, ("user", turns)]
    for turn in turns if isinstance(turns, list) else []:
        if not isinstance(turn, dict):
            continue
        content = turn["parts"] if "parts" in turn else turn.get("content")
        out.append((str(turn.get("role") or "user"), _content_text(content)))
    return out


def message_attributes(
    result: Any, request_body: bytes | None, max_chars: int = MESSAGE_CHARS
) -> dict[str, Any]:
    """The conversation of one result as OpenInference attributes (``messages=True``):
    the request's messages (``request_body`` as recorded, redacted again here) and the
    answer, reasoning and tool calls; every text value cut to ``max_chars``."""
    from lab.capture.redact import Redactor

    attrs: dict[str, Any] = {}
    if request_body:
        redacted = Redactor().body(request_body)
        text = redacted.decode("utf-8", "replace")
        attrs["input.value"] = _cut(text, max_chars)
        attrs["input.mime_type"] = "application/json"
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        for i, (role, content) in enumerate(_request_messages(body)):
            attrs[f"llm.input_messages.{i}.message.role"] = role
            attrs[f"llm.input_messages.{i}.message.content"] = _cut(content, max_chars)
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {
                "name": call.name,
                "arguments": json.dumps(call.args, ensure_ascii=False),
            },
        }
        for call in result.function_calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": result.text}
    if result.reasoning:
        message["reasoning"] = result.reasoning
    if calls:
        message["tool_calls"] = calls
    attrs["output.value"] = _cut(json.dumps(message, ensure_ascii=False), max_chars)
    attrs["output.mime_type"] = "application/json"
    prefix = "llm.output_messages.0.message"
    attrs[f"{prefix}.role"] = "assistant"
    attrs[f"{prefix}.content"] = _cut(result.text, max_chars)
    if result.reasoning:
        attrs["lab.reasoning"] = _cut(result.reasoning, max_chars)
    for j, call in enumerate(calls):
        where = f"{prefix}.tool_calls.{j}.tool_call"
        if call["id"]:
            attrs[f"{where}.id"] = call["id"]
        attrs[f"{where}.function.name"] = call["function"]["name"]
        attrs[f"{where}.function.arguments"] = _cut(call["function"]["arguments"], max_chars)
    return attrs


def parent_of(headers: dict[str, str]) -> tuple[int, int, int] | None:
    """(trace id, span id, flags) of a recorded request's W3C ``traceparent``, or None
    (absent, malformed, or the all-zero ids the specification calls invalid)."""
    value = next((v for k, v in headers.items() if k.lower() == "traceparent"), None)
    match = _TRACEPARENT.match(value.strip().lower()) if isinstance(value, str) else None
    if match is None or match.group(1) == "0" * 32 or match.group(2) == "0" * 16:
        return None
    return int(match.group(1), 16), int(match.group(2), 16), int(match.group(3), 16)


def _first_requests(capture: Any) -> dict[str, tuple[dict[str, str], bytes]]:
    """stream_id -> (request headers, request body) of its first attempt."""
    st = capture.streams
    out = {}
    for sid, attempt, headers, body, encoding in zip(
        st["stream_id"],
        st["attempt"],
        st["request_headers"],
        st["request_body"],
        st["request_body_encoding"],
        strict=True,
    ):
        if int(attempt) != 0:
            continue
        try:
            parsed = json.loads(headers) if isinstance(headers, str) else {}
        except ValueError:
            parsed = {}
        raw = base64.b64decode(body) if encoding == "base64" else str(body or "").encode()
        out[str(sid)] = (parsed if isinstance(parsed, dict) else {}, raw)
    return out


def _starts(capture: Any) -> dict[tuple[str, int], tuple[int, int | None]]:
    """(stream_id, attempt) -> (started_at in epoch ns, t_end_ns after it)."""
    st = capture.streams
    started = st["started_at"].astype("int64")  # pandas datetime64[us, UTC] -> its unit
    unit = st["started_at"].dtype.unit if hasattr(st["started_at"].dtype, "unit") else "ns"
    scale = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}[unit]
    out = {}
    for sid, attempt, start, end in zip(
        st["stream_id"], st["attempt"], started, st["t_end_ns"], strict=True
    ):
        out[(sid, int(attempt))] = (int(start) * scale, None if end != end else int(end))
    return out


def _spans(
    path: str | Path, config: Any, provider: Any, messages: bool = False, max_chars: int = 0
) -> Iterator[tuple[Any, dict, list, int, int, tuple[int, int, int] | None]]:
    """(result, attributes, [(event name, time ns, attributes)], start ns, end ns, parent)
    per request, unit by unit."""
    import lab.capture
    from lab import tables
    from lab.capture.units import capture_units
    from lab.replay import replay

    kwargs = {"provider": provider} if provider else {}
    for unit in capture_units(path):
        capture = lab.capture.open(list(unit.files), select=unit.select)
        starts = _starts(capture)
        firsts = _first_requests(capture)
        capture_id = capture.metadata.get("capture_id")
        results = replay(capture, config=config, **kwargs)
        st = tables.streams(results)
        for result, row in zip(results, st.itertuples(index=False), strict=True):
            attrs = span_attributes(result, row)
            if capture_id:
                attrs["lab.capture_id"] = capture_id
            headers, request_body = firsts.get(result.stream_id, ({}, b""))
            if messages:
                attrs.update(message_attributes(result, request_body, max_chars))
            first = starts.get((result.stream_id, 0), (0, None))[0]
            last_attempt = len(result.attempts) - 1
            last_start, last_end = starts.get((result.stream_id, last_attempt), (first, None))
            end = last_start + (last_end or 0)
            events = []
            for e in result.guard_events:
                if not e.moved:
                    continue
                _, t_ms = tables._event_read(result, e.attempt, e.seq)
                at = starts.get((result.stream_id, e.attempt), (first, None))[0]
                when = at + int((t_ms or 0.0) * 1e6)
                events.append(
                    (
                        f"lab.guard.{e.guard}",
                        when,
                        {
                            "lab.guard": e.guard,
                            "lab.rule": str(e.detail.get("rule") or ""),
                            "lab.attempt": e.attempt,
                            "lab.seq": e.seq,
                            "lab.offset": e.offset,
                            "lab.moved_chars": len(e.moved),
                            "lab.moved": e.moved[:MOVED_CHARS],
                        },
                    )
                )
            yield result, attrs, events, first, max(end, first), parent_of(headers)
        del capture, results


_ID_FIELDS = ("traceId", "spanId", "parentSpanId")


def _otlp_json(message: dict) -> dict:
    """A protobuf JSON mapping made OTLP/JSON: the specification encodes trace and span ids
    as hex strings, where protobuf's JSON mapping gives bytes as base64."""

    def hexed(obj: dict) -> None:
        for key in _ID_FIELDS:
            if key in obj and isinstance(obj[key], str):
                obj[key] = base64.b64decode(obj[key]).hex()

    for resource in message.get("resourceSpans", ()):
        for scope in resource.get("scopeSpans", ()):
            for span in scope.get("spans", ()):
                hexed(span)
                for link in span.get("links", ()):
                    hexed(link)
    return message


class _JsonLines:
    """An SDK SpanExporter writing one OTLP/JSON ExportTraceServiceRequest per span."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("w", encoding="utf-8")

    def export(self, spans: Sequence[Any]) -> Any:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.trace.export import SpanExportResult

        for span in spans:
            message = _otlp_json(MessageToDict(encode_spans([span]), use_integers_for_enums=True))
            self.file.write(json.dumps(message, ensure_ascii=False, separators=(",", ":")))
            self.file.write("\n")
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.file.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.file.flush()
        return True


def export_otlp(
    path: str | Path,
    *,
    out: str | Path | None = None,
    endpoint: str | None = None,
    config: Any = None,
    provider: str | None = None,
    messages: bool = False,
    max_chars: int = MESSAGE_CHARS,
) -> int:
    """Replay ``path`` and export one span per logical request; returns the span count.

    **messages** adds the conversation (input messages, the answer, reasoning and tool
    calls; redacted, each text cut to **max_chars**): see the module docstring."""
    sdk_trace = _otel()
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON
    from opentelemetry.trace import (
        NonRecordingSpan,
        SpanContext,
        SpanKind,
        Status,
        StatusCode,
        TraceFlags,
        set_span_in_context,
    )

    import lab

    if (out is None) == (endpoint is None):
        raise ValueError("give exactly one of out=FILE.jsonl and endpoint=URL")
    processor: Any  # SimpleSpanProcessor or BatchSpanProcessor
    if out is not None:
        exporter: Any = _JsonLines(Path(out))  # a SpanExporter by shape (export, shutdown)
        processor = SimpleSpanProcessor(exporter)
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ImportError(
                "--endpoint needs opentelemetry-exporter-otlp-proto-http: pip install "
                "'stream-lab[otel]'"
            ) from None
        processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint))
    resource = Resource.create({"service.name": "stream-lab", "service.version": lab.__version__})
    # every span is exported, also under an app parent that was not sampled
    provider_ = sdk_trace.TracerProvider(resource=resource, sampler=ALWAYS_ON)
    provider_.add_span_processor(processor)
    tracer = provider_.get_tracer("lab", lab.__version__)
    n = 0
    try:
        spans = _spans(path, config, provider, messages, max_chars)
        for result, attrs, events, start, end, parent in spans:
            name = f"chat {result.model}" if result.model else "chat"
            context = None
            if parent is not None:  # the app's span that sent this request
                trace_id, span_id, flags = parent
                remote = SpanContext(trace_id, span_id, True, TraceFlags(flags & 0x01))
                context = set_span_in_context(NonRecordingSpan(remote))
            span = tracer.start_span(
                name,
                context=context,
                kind=SpanKind.CLIENT,
                attributes=attrs,
                start_time=start or None,
            )
            for event_name, when, event_attrs in events:
                span.add_event(event_name, event_attrs, timestamp=when)
            if result.error is not None:
                span.set_status(Status(StatusCode.ERROR, result.error.message[:500]))
            span.end(end_time=end or None)
            n += 1
    finally:
        provider_.shutdown()
    return n
