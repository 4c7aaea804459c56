"""``lab export otlp``: one span per logical request, GenAI attributes, the lab's verdicts,
guard events at their recorded times; OTLP/JSON lines and OTLP/HTTP to a loopback collector."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from lab import tables
from lab.cli import main
from lab.replay import replay

pytest.importorskip("opentelemetry.sdk")

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "captures"


def _attrs(span: dict) -> dict:
    out = {}
    for a in span["attributes"]:
        ((kind, value),) = a["value"].items()
        if kind == "arrayValue":
            value = [next(iter(v.values())) for v in value.get("values", [])]
        elif kind == "intValue":
            value = int(value)
        out[a["key"]] = value
    return out


@pytest.fixture(scope="module")
def spans(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("otel") / "spans.jsonl"
    assert main(["export", "otlp", str(BUNDLED), "--out", str(out)]) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0] for line in lines]


def test_one_span_per_logical_request(spans):
    assert len(spans) == 132
    ids = [_attrs(s)["lab.stream_id"] for s in spans]
    assert sorted(ids) == sorted(r.stream_id for r in replay(BUNDLED))


def test_a_leaked_stream_carries_the_genai_attributes_and_the_lab_verdicts(spans):
    st = tables.streams(replay(BUNDLED)).set_index("stream_id")
    span = next(
        s
        for s in spans
        if _attrs(s)["lab.leaked"] and _attrs(s).get("lab.serving_backend") == "Chutes"
    )
    a = _attrs(span)
    row = st.loc[a["lab.stream_id"]]
    assert span["name"] == f"chat {row.model}" and span["kind"] == 3  # SPAN_KIND_CLIENT
    assert a["gen_ai.operation.name"] == "chat" and a["openinference.span.kind"] == "LLM"
    assert a["gen_ai.provider.name"] == "openrouter"
    assert a["gen_ai.request.model"] == row.model
    assert a["gen_ai.usage.input_tokens"] == row.input_tokens
    assert a["gen_ai.usage.output_tokens"] == row.output_tokens
    assert a["gen_ai.response.finish_reasons"] == [row.finish_reason]
    assert a["gen_ai.response.time_to_first_chunk"] == pytest.approx(row.ttft_ms / 1000)
    assert (a["lab.leak_guards"], a["lab.leak_chars"]) == (row.leak_guards, row.leak_chars)


def test_guard_events_are_span_events_at_their_recorded_times(spans):
    results = {r.stream_id: r for r in replay(BUNDLED)}
    span = next(s for s in spans if _attrs(s)["lab.leaked"])
    r = results[_attrs(span)["lab.stream_id"]]
    moved = [e for e in r.guard_events if e.moved]
    events = span["events"]
    assert [e["name"] for e in events] == [f"lab.guard.{e.guard}" for e in moved]
    start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
    leaks = tables.leaks([r])
    for ev, (_, leak) in zip(events, leaks.iterrows(), strict=True):
        at = int(ev["timeUnixNano"])
        assert start <= at <= end
        assert (at - start) / 1e6 == pytest.approx(leak.t_ms, abs=0.001)  # attempt 0
        assert _attrs(ev)["lab.moved"] == leak.moved


def test_a_failed_request_has_an_error_status_and_type(spans):
    span = next(s for s in spans if "error.type" in _attrs(s))
    assert span["status"]["code"] == 2  # STATUS_CODE_ERROR: OTLP/JSON enums are integers


def test_endpoint_posts_otlp_http_protobuf_to_a_collector(tmp_path):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    received: list[bytes] = []

    class Collector(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            assert self.path == "/v1/traces"
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
        assert main(["export", "otlp", str(BUNDLED), "--endpoint", url]) == 0
    finally:
        server.shutdown()
    n = 0
    for body in received:
        req = ExportTraceServiceRequest.FromString(body)
        n += sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
    assert n == 132


def test_export_needs_exactly_one_destination(capsys):
    assert main(["export", "otlp", str(BUNDLED)]) == 2
    assert "give --out FILE.jsonl or --endpoint URL" in capsys.readouterr().err


def test_lab_export_otlp_messages_adds_the_conversation_cut_to_max_chars(tmp_path, spans):
    out = tmp_path / "spans.jsonl"
    argv = ["export", "otlp", str(BUNDLED), "--out", str(out), "--messages", "--max-chars", "8"]
    assert main(argv) == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    with_messages = [
        _attrs(json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]) for line in lines
    ]
    assert len(with_messages) == 132
    first = next(a for a in with_messages if "llm.output_messages.0.message.content" in a)
    assert first["llm.input_messages.0.message.role"] == "user"
    for key in ("llm.input_messages.0.message.content", "llm.output_messages.0.message.content"):
        head, cut, rest = first[key].partition("… [cut: ")
        assert len(head) == 8 and cut and rest.endswith(" more characters]")
    # without --messages no span carries what users or models said
    assert not any(k.startswith("llm.input_messages") for s in spans for k in _attrs(s))


def test_max_chars_without_messages_is_refused_in_one_line(tmp_path, capsys):
    argv = ["export", "otlp", str(BUNDLED), "--out", str(tmp_path / "x.jsonl"), "--max-chars", "8"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "lab: error: --max-chars cuts the exported messages: give it with --messages\n"
    )
