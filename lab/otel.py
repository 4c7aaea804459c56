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
  ``lab.moved_chars`` and the moved text, cut to :data:`MOVED_CHARS`).

Span times are the recording's: start at the first attempt's ``started_at``, end at the
last attempt's end. ``--out`` writes OTLP/JSON, one ``ExportTraceServiceRequest`` holding
one span per line (the OpenTelemetry Collector's ``otlpjsonfile`` receiver reads it);
``--endpoint`` posts OTLP/HTTP protobuf (``http://host:4318/v1/traces``). The capture is
read one unit at a time. OpenTelemetry is the optional extra ``[otel]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "MOVED_CHARS",
    "PROVIDER_NAMES",  # noqa: F822 - served by __getattr__ from the adapters
    "export_otlp",
    "otel_provider_name",
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
    for key, value in optional.items():
        if given(value):
            attrs[key] = value.item() if hasattr(value, "item") else value
    if given(row.finish_reason):
        attrs["gen_ai.response.finish_reasons"] = [str(row.finish_reason)]
    if given(row.ttft_ms):
        attrs["gen_ai.response.time_to_first_chunk"] = float(row.ttft_ms) / 1000.0
    return attrs


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
    path: str | Path, config: Any, provider: Any
) -> Iterator[tuple[Any, dict, list, int, int]]:
    """(result, attributes, [(event name, time ns, attributes)], start ns, end ns) per
    request, unit by unit."""
    import lab.capture
    from lab import tables
    from lab.capture.units import capture_units
    from lab.replay import replay

    kwargs = {"provider": provider} if provider else {}
    for unit in capture_units(path):
        capture = lab.capture.open(list(unit.files))
        starts = _starts(capture)
        capture_id = capture.metadata.get("capture_id")
        results = replay(capture, config=config, **kwargs)
        st = tables.streams(results)
        for result, row in zip(results, st.itertuples(index=False), strict=True):
            attrs = span_attributes(result, row)
            if capture_id:
                attrs["lab.capture_id"] = capture_id
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
            yield result, attrs, events, first, max(end, first)
        del capture, results


class _JsonLines:
    """An SDK SpanExporter writing one OTLP/JSON ExportTraceServiceRequest per span."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("w", encoding="utf-8")

    def export(self, spans: Sequence[Any]) -> Any:
        from google.protobuf.json_format import MessageToDict
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.trace.export import SpanExportResult

        for span in spans:
            message = MessageToDict(encode_spans([span]))
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
) -> int:
    """Replay ``path`` and export one span per logical request; returns the span count."""
    sdk_trace = _otel()
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.trace import SpanKind, Status, StatusCode

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
    provider_ = sdk_trace.TracerProvider(resource=resource)
    provider_.add_span_processor(processor)
    tracer = provider_.get_tracer("lab", lab.__version__)
    n = 0
    try:
        for result, attrs, events, start, end in _spans(path, config, provider):
            name = f"chat {result.model}" if result.model else "chat"
            span = tracer.start_span(
                name, kind=SpanKind.CLIENT, attributes=attrs, start_time=start or None
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
