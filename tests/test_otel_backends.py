"""``lab export otlp`` as real backends read it: the ``--out`` file is OTLP/JSON (hex ids,
integer enums) that the OpenTelemetry proto parses, the span joins the app's trace through the
recorded ``traceparent``, and a loopback OTLP/HTTP receiver gets the attributes Phoenix
(OpenInference) and Langfuse read: the conversation (with ``messages=True``), tokens, cost."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import lab
from lab.fakes import FakeServer
from lab.otel import export_otlp, parent_of

pytest.importorskip("opentelemetry.sdk")
openai = pytest.importorskip("openai")
json_format = pytest.importorskip("google.protobuf.json_format")
trace_service = pytest.importorskip("opentelemetry.proto.collector.trace.v1.trace_service_pb2")

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
APP_SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{APP_SPAN_ID}-01"
QUESTION = "What's the weather in Zürich?"
SECRET = "sk-canary-otel-91d2"


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """Two SDK requests: a tool call through OpenRouter sent under the app's traceparent,
    and a reasoning answer with no trace context."""
    root = tmp_path_factory.mktemp("otel-rec")
    with FakeServer(delay_scale=0) as fake:
        for family, model, headers in (
            ("openrouter", "fake/tool-call", {"traceparent": TRACEPARENT}),
            ("openai", "fake/reasoning-content", {}),
        ):
            http = lab.recording_client(root, provider=family)
            client = openai.OpenAI(
                base_url=fake.family_base_url(family), api_key=SECRET, http_client=http
            )
            for _ in client.chat.completions.create(
                model=model,
                messages=[
                    {"role": "system", "content": "Be brief."},
                    {"role": "user", "content": QUESTION},
                ],
                stream=True,
                stream_options={"include_usage": True},
                extra_headers=headers,
            ):
                pass
            client.close()
    return root


def _otlp_message(line: str) -> object:
    """An OTLP/JSON line parsed by the OpenTelemetry proto: the specification's hex trace
    and span ids turned into the bytes the protobuf JSON mapping carries as base64, as an
    OTLP receiver does."""
    doc = json.loads(line)
    for resource in doc["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json_format.ParseDict(doc, trace_service.ExportTraceServiceRequest())


def _attrs(span) -> dict:
    out = {}
    for kv in span.attributes:
        which = kv.value.WhichOneof("value")
        value = getattr(kv.value, which)
        if which == "array_value":
            value = [getattr(v, v.WhichOneof("value")) for v in value.values]
        out[kv.key] = value
    return out


def test_the_jsonl_file_has_hex_ids_and_parses_as_otlp(recording, tmp_path):
    out = tmp_path / "spans.jsonl"
    assert export_otlp(recording, out=out) == 2
    lines = out.read_text(encoding="utf-8").splitlines()
    raw = [json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0] for line in lines]
    for span in raw:
        assert len(span["traceId"]) == 32 and int(span["traceId"], 16)
        assert len(span["spanId"]) == 16 and int(span["spanId"], 16)
        assert span["kind"] == 3  # SPAN_KIND_CLIENT: OTLP/JSON enums are integers
    spans = {}
    for line in lines:
        message = _otlp_message(line)
        (span,) = message.resource_spans[0].scope_spans[0].spans
        spans[_attrs(span)["gen_ai.provider.name"]] = span
    joined, alone = spans["openrouter"], spans["openai"]
    assert joined.trace_id.hex() == TRACE_ID  # the app's trace
    assert joined.parent_span_id.hex() == APP_SPAN_ID  # a child of the app's span
    assert len(joined.span_id) == 8 and joined.span_id.hex() != APP_SPAN_ID
    assert alone.trace_id.hex() != TRACE_ID and alone.parent_span_id == b""
    assert "input.value" not in _attrs(joined)  # the conversation is opt-in


def test_a_loopback_otlp_receiver_gets_what_phoenix_and_langfuse_read(recording):
    received: list[bytes] = []

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
        assert export_otlp(recording, endpoint=url, messages=True, max_chars=40) == 2
    finally:
        server.shutdown()
    spans = {}
    for body in received:
        request = trace_service.ExportTraceServiceRequest.FromString(body)
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    spans[_attrs(span)["gen_ai.provider.name"]] = _attrs(span)
    tool, reasoning = spans["openrouter"], spans["openai"]
    results = {r.provider: r for r in lab.replay.replay(recording)}
    call = results["openrouter"].function_calls[0]

    # input: the request as recorded (the key never was in it), cut to max_chars
    assert tool["input.mime_type"] == "application/json"
    assert tool["input.value"].startswith('{"model":"fake/tool-call",')
    assert tool["input.value"].endswith("more characters]")
    assert SECRET not in json.dumps(tool)
    assert tool["llm.input_messages.0.message.role"] == "system"
    assert tool["llm.input_messages.0.message.content"] == "Be brief."
    assert tool["llm.input_messages.1.message.role"] == "user"
    assert tool["llm.input_messages.1.message.content"] == QUESTION
    # output: the tool call, where OpenInference puts it
    prefix = "llm.output_messages.0.message"
    assert tool[f"{prefix}.role"] == "assistant"
    assert tool[f"{prefix}.tool_calls.0.tool_call.function.name"] == call.name
    assert json.loads(tool[f"{prefix}.tool_calls.0.tool_call.function.arguments"]) == call.args
    assert tool["output.mime_type"] == "application/json"
    # tokens and cost: OpenInference (Phoenix) and gen_ai.usage.cost (Langfuse)
    usage = results["openrouter"].usage
    assert tool["llm.token_count.prompt"] == usage.input_tokens
    assert tool["llm.token_count.completion"] == usage.output_tokens
    assert tool["llm.token_count.total"] == usage.input_tokens + usage.output_tokens
    assert tool["llm.cost.total"] == pytest.approx(results["openrouter"].cost)
    assert tool["gen_ai.usage.cost"] == tool["llm.cost.total"] > 0
    assert tool["llm.model_name"] == "fake/tool-call"
    # the answer and the reasoning, cut to max_chars with the cut said
    answer, thought = results["openai"].text, results["openai"].reasoning
    assert reasoning[f"{prefix}.content"] == answer[:40] + (
        f"… [cut: {len(answer) - 40} more characters]" if len(answer) > 40 else ""
    )
    assert reasoning["lab.reasoning"].startswith(thought[:40])
    assert reasoning["llm.token_count.completion_details.reasoning"] == (
        results["openai"].usage.reasoning_tokens
    )


def test_parent_of_reads_only_a_valid_traceparent():
    assert parent_of({"Traceparent": TRACEPARENT}) == (
        int(TRACE_ID, 16),
        int(APP_SPAN_ID, 16),
        1,
    )
    assert parent_of({}) is None
    assert parent_of({"traceparent": "00-" + "0" * 32 + f"-{APP_SPAN_ID}-01"}) is None
    assert parent_of({"traceparent": "not a traceparent"}) is None


def test_exported_messages_are_redacted_again_whatever_the_capture_holds():
    """A capture written before a secret field was known (or imported from a HAR) may hold
    a key in its request body: ``--messages`` never exports it, in the body or a message."""
    from lab.otel import message_attributes
    from lab.result import StreamResult

    result = StreamResult(stream_id="s", provider="openai")
    result.text = "ok"
    body = json.dumps(
        {
            "model": "m",
            "api_key": SECRET,
            "messages": [{"role": "user", "content": f"my key is {SECRET}, thanks"}],
        }
    ).encode()
    attrs = message_attributes(result, body)
    assert json.loads(attrs["input.value"]) == {
        "model": "m",
        "api_key": "[REDACTED]",
        "messages": [{"role": "user", "content": "my key is [REDACTED], thanks"}],
    }
    assert attrs["llm.input_messages.0.message.content"] == "my key is [REDACTED], thanks"
    assert SECRET not in json.dumps(attrs)
