"""HAR and VCR in, VCR out: files made by the real tools (vcrpy writes its cassettes here; the
HAR is built by the published 1.2 format) import and replay to what the lab's own capture of
the same exchanges replays to; an exported cassette replays byte for byte under vcrpy."""

from __future__ import annotations

import base64
import json
import time

import httpx
import pytest

import lab
from lab.capture import open as open_capture
from lab.cli import main
from lab.fakes import FakeServer
from lab.interchange import InterchangeError, export_vcr, import_har, import_vcr
from lab.replay import replay
from lab.tables import streams
from tests.capture_scan import places_holding

vcr = pytest.importorskip("vcr")

HI = [{"role": "user", "content": "hi"}]
CANARY = "sk-canary-har-5c2a90d1"
SEED = {"X-Fake-Seed": "7"}  # the same scripted stream every time (no per-call counter)
# (provider, path under the fake server, body): a backend, thinking, thought parts
EXCHANGES = [
    (
        "openrouter",
        "/api/v1/chat/completions",
        {"model": "fake/think-leak", "messages": HI, "stream": True, "seed": 1},
    ),
    (
        "anthropic",
        "/v1/messages",
        {"model": "fake/thinking", "max_tokens": 256, "messages": HI, "stream": True},
    ),
    (
        "google",
        "/v1beta/models/fake/thought-parts:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
]


def _facts(results):
    return [(r.text, r.reasoning, r.serving_provider, r.usage, r.error) for r in results]


@pytest.fixture(scope="module")
def fake():
    with FakeServer(delay_scale=0) as server:
        yield server


@pytest.fixture(scope="module")
def own(fake, tmp_path_factory):
    """The lab's own capture of EXCHANGES (one recording client per family)."""
    root = tmp_path_factory.mktemp("own")
    for provider, path, body in EXCHANGES:
        with lab.recording_client(root, provider=provider) as client:
            client.post(fake.base_url + path, json=body, headers=SEED).read()
    results = replay(root)
    assert [r.error for r in results] == [None, None, None]
    assert results[0].serving_provider and results[1].reasoning and results[2].reasoning
    return root, results


def _sorted(results):  # the own capture is three recordings: order them like EXCHANGES
    order = {p: i for i, (p, _, _) in enumerate(EXCHANGES)}
    return sorted(results, key=lambda r: order[r.provider])


def test_a_vcrpy_cassette_imports_and_replays_like_the_lab_capture(fake, own, tmp_path):
    cassette = tmp_path / "llm.yaml"
    with vcr.use_cassette(str(cassette), record_mode="all"):
        for _, path, body in EXCHANGES:
            httpx.post(fake.base_url + path, json=body, headers=SEED).read()
    report = import_vcr([cassette], tmp_path / "captures")
    assert (report.imported, report.skipped) == (3, [])
    imported = replay(report.capture_path)
    assert _facts(imported) == _facts(_sorted(own[1]))
    exchanges = open_capture(report.capture_path).exchanges()
    assert [e.meta for e in exchanges] == [
        {"source": "vcr", "source_entry": i, "source_file": "llm.yaml", "timing": "none"}
        for i in range(3)
    ]
    assert [len(e.reads) for e in exchanges] == [1, 1, 1]
    table = streams(imported)
    assert list(table["source"]) == ["vcr"] * 3
    assert table["ttft_ms"].isna().all() and table["duration_ms"].isna().all()


def _har(fake, exchanges, *, auth=None, extra_entries=()):
    """A HAR 1.2 log of the exchanges, as a browser or mitmproxy writes one."""
    entries = []
    for k, (_, path, body) in enumerate(exchanges):
        headers = {"content-type": "application/json", **SEED}
        if auth:
            headers["authorization"] = f"Bearer {auth}"
        t0 = time.perf_counter()
        with httpx.stream("POST", fake.base_url + path, json=body, headers=headers) as r:
            wait = (time.perf_counter() - t0) * 1e3
            content = r.read()
            receive = (time.perf_counter() - t0) * 1e3 - wait
        text = (
            {"text": content.decode()}
            if k != 1
            else {
                "text": base64.b64encode(content).decode(),
                "encoding": "base64",
            }
        )
        entries.append(
            {
                "startedDateTime": "2026-12-01T21:00:00.000Z",
                "time": wait + receive,
                "request": {
                    "method": "POST",
                    "url": fake.base_url + path,
                    "httpVersion": "HTTP/1.1",
                    "headers": [{"name": k2, "value": v} for k2, v in headers.items()],
                    "queryString": [],
                    "cookies": [],
                    "headersSize": -1,
                    "bodySize": len(json.dumps(body)),
                    "postData": {"mimeType": "application/json", "text": json.dumps(body)},
                },
                "response": {
                    "status": r.status_code,
                    "statusText": r.reason_phrase,
                    "httpVersion": "HTTP/1.1",
                    "headers": [{"name": k2, "value": v} for k2, v in r.headers.multi_items()],
                    "cookies": [],
                    "content": {
                        "size": len(content),
                        "mimeType": r.headers.get("content-type", ""),
                        **text,
                    },
                    "redirectURL": "",
                    "headersSize": -1,
                    "bodySize": len(content),
                },
                "cache": {},
                "timings": {
                    "blocked": -1,
                    "dns": -1,
                    "connect": -1,
                    "send": 0.05,
                    "wait": wait,
                    "receive": receive,
                    "ssl": -1,
                },
            }
        )
    entries += list(extra_entries)
    return {
        "log": {"version": "1.2", "creator": {"name": "test", "version": "1"}, "entries": entries}
    }


PAGE = {
    "startedDateTime": "2026-12-01T21:00:00.000Z",
    "request": {"method": "GET", "url": "https://example.test/logo.png", "headers": []},
    "response": {"status": 200, "headers": [], "content": {"mimeType": "image/png"}},
    "timings": {"send": 0, "wait": 1, "receive": 1},
}


def test_a_har_imports_and_replays_like_the_lab_capture(fake, own, tmp_path):
    har = tmp_path / "session.har"
    har.write_text(json.dumps(_har(fake, EXCHANGES, extra_entries=[PAGE])))
    report = import_har(har, tmp_path / "captures")
    assert (report.imported, report.skipped) == (3, [(3, "not an LLM API request")])
    assert report.summary() == (
        f"imported 3 streamed LLM exchange(s) into {report.capture_path}; skipped 1: "
        "1 not an LLM API request"
    )
    imported = replay(report.capture_path)
    assert _facts(imported) == _facts(_sorted(own[1]))
    exchanges = open_capture(report.capture_path).exchanges()
    assert [e.meta["timing"] for e in exchanges] == ["headers"] * 3
    assert all(e.t_headers_ns > 0 and e.t_end_ns >= e.t_headers_ns for e in exchanges)
    assert [e.provider for e in exchanges] == ["openrouter", "anthropic", "google"]
    # the HAR body is decoded: no content-encoding or framing header is kept with it
    assert not {"content-length", "transfer-encoding", "content-encoding"} & {
        k.lower() for e in exchanges for k in e.response_headers
    }
    assert streams(imported)["ttft_ms"].isna().all()


def test_a_key_in_a_har_never_reaches_the_capture(fake, tmp_path):
    echo = {  # an upstream that echoes the key in its error body
        "request": {
            "method": "POST",
            "url": "https://api.openai.com/v1/chat/completions",
            "headers": [{"name": "Authorization", "value": f"Bearer {CANARY}"}],
            "postData": {"text": json.dumps({"model": "m", "messages": HI, "stream": True})},
        },
        "response": {
            "status": 401,
            "headers": [{"name": "content-type", "value": "application/json"}],
            "content": {"text": json.dumps({"error": {"message": f"bad key {CANARY}"}})},
        },
    }
    har = tmp_path / "leaky.har"
    har.write_text(json.dumps(_har(fake, EXCHANGES[:1], auth=CANARY, extra_entries=[echo])))
    report = import_har(har, tmp_path / "captures")
    assert report.imported == 2
    assert places_holding(tmp_path / "captures", CANARY) == []
    (_, failed) = replay(report.capture_path)
    assert failed.error is not None and CANARY not in failed.error.message


def test_an_exported_cassette_replays_byte_for_byte_under_vcrpy(own, tmp_path):
    root, _ = own
    capture = open_capture(root)
    cassette, n = export_vcr(capture, None, tmp_path / "found.yaml")
    assert n == 3
    recorded = {e.url.split("//", 1)[1].split("/", 1)[1]: e for e in capture.exchanges()}
    my_vcr = vcr.VCR(record_mode="none", match_on=["method", "path", "body"])
    with my_vcr.use_cassette(str(cassette)):
        for _, path, body in EXCHANGES:
            # another host: vcrpy matches on method, path and body, and never connects
            response = httpx.post("http://127.0.0.1:9" + path, json=body)
            ex = recorded[path.lstrip("/")]
            assert (response.status_code, response.content) == (ex.status, ex.body)
            assert response.headers["content-type"] == ex.response_headers["content-type"]


def test_export_vcr_refuses_an_unknown_stream(own, tmp_path):
    with pytest.raises(InterchangeError, match="no stream 'nope' in the capture"):
        export_vcr(open_capture(own[0]), ["nope"], tmp_path / "x.yaml")


def test_import_refuses_files_that_are_not_the_format(tmp_path, capsys):
    bad = tmp_path / "x.har"
    bad.write_text("{}")
    with pytest.raises(InterchangeError, match=r"x\.har: not a HAR file \(no log\.entries list\)"):
        import_har(bad, tmp_path)
    yaml_bad = tmp_path / "x.yaml"
    yaml_bad.write_text("just: text\n")
    assert main(["import", "vcr", str(yaml_bad), "--out", str(tmp_path / "c")]) == 2
    assert capsys.readouterr().err.startswith(f"lab: error: {yaml_bad}: not a vcrpy cassette: ")
    assert main(["import", "har", str(tmp_path / "missing.har")]) == 2
    assert capsys.readouterr().err == f"lab: error: {tmp_path / 'missing.har'}: no such file\n"


def test_cli_import_and_export_round_trip(fake, own, tmp_path, capsys):
    cassette = tmp_path / "app.yaml"
    with vcr.use_cassette(str(cassette), record_mode="all"):
        _, path, body = EXCHANGES[0]
        httpx.post(fake.base_url + path, json=body, headers=SEED).read()
    assert main(["import", "vcr", str(cassette), "--out", str(tmp_path / "captures")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("imported 1 streamed LLM exchange(s) into ")
    (sid,) = open_capture(tmp_path / "captures").streams["stream_id"]
    dest = tmp_path / "cassettes"
    args = ["fixtures", "export", str(tmp_path / "captures"), "--stream", sid, "--format", "vcr"]
    assert main([*args, "--dest", str(dest), "--name", "leak"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"loaded 1 recording from {tmp_path / 'captures'}: ")  # which ones
    assert out.splitlines()[1:] == [
        f"exported 1 stream(s), 1 interaction(s) -> {dest / 'leak.yaml'}"
    ]
    assert main([*args, "--dest", str(dest), "--name", "leak"]) == 2
    assert capsys.readouterr().err == (
        f"lab: error: {dest / 'leak.yaml'} exists (--force replaces it)\n"
    )
    with vcr.VCR(record_mode="none", match_on=["method", "path", "body"]).use_cassette(
        str(dest / "leak.yaml")
    ):
        response = httpx.post("http://127.0.0.1:9" + path, json=body)
    (original,) = open_capture(tmp_path / "captures").exchanges()
    assert response.content == original.body
