"""HAR bodies come back as the bytes sent, whatever charset the HAR's writer decoded them with.

The HAR here is built the way mitmproxy's ``savehar`` addon writes one
(``mitmproxy/addons/savehar.py`` ``flow_entry``: ``content.text`` is
``response.get_text(strict=False)``, or base64 when ``strutils.is_mostly_bin``). With no
charset in ``Content-Type``, ``get_text`` decodes with ``infer_content_encoding``
(``mitmproxy/net/http/headers.py``), whose fallback for ``text/event-stream`` is latin-1.
"""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from lab.anomalies import detect
from lab.capture import open as open_capture
from lab.fakes import FakeServer
from lab.interchange import import_har
from lab.replay import replay

HI = [{"role": "user", "content": "hi"}]
STREAMS = [  # (path, body): OpenRouter and Gemini both send text/event-stream, no charset
    (
        "/api/v1/chat/completions",
        {"model": "fake/clean", "messages": HI, "stream": True, "seed": 3},
    ),
    (
        "/v1beta/models/fake/clean:streamGenerateContent?alt=sse",
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
    ),
]


def _is_mostly_bin(data: bytes) -> bool:
    """mitmproxy ``strutils.is_mostly_bin``: over 30 % of the first 100 bytes non-text."""
    head = data[:100]
    return sum(b < 9 or 13 < b < 32 or 126 < b for b in head) / len(head) > 0.3


def _mitmproxy_text(content_type: str, body: bytes) -> dict:
    """``content`` text as mitmproxy writes it: the header's charset, else latin-1 for SSE."""
    if _is_mostly_bin(body):
        return {"text": base64.b64encode(body).decode(), "encoding": "base64"}
    charset = None
    for param in content_type.split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip()
    return {"text": body.decode(charset or "latin-1", "replace")}


def _entry(url: str, body: dict, response: httpx.Response, content: dict) -> dict:
    headers = [{"name": k, "value": v} for k, v in response.headers.multi_items()]
    return {
        "startedDateTime": "2026-12-01T21:00:00+00:00",
        "time": 12.0,
        "request": {
            "method": "POST",
            "url": url,
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": [{"name": "content-type", "value": "application/json"}],
            "queryString": [],
            "headersSize": 64,
            "bodySize": len(json.dumps(body)),
            "postData": {
                "mimeType": "application/json",
                "text": json.dumps(body),
                "params": [],
            },
        },
        "response": {
            "status": response.status_code,
            "statusText": response.reason_phrase,
            "httpVersion": "HTTP/1.1",
            "cookies": [],
            "headers": headers,
            "content": {
                "size": len(response.content),
                "compression": 0,
                "mimeType": response.headers.get("content-type", ""),
                **content,
            },
            "redirectURL": "",
            "headersSize": 128,
            "bodySize": len(response.content),
        },
        "cache": {},
        "timings": {"connect": -1.0, "ssl": None, "send": 0.1, "receive": 5.0, "wait": 6.0},
    }


def _har(entries: list[dict], creator: str = "mitmproxy exporthar") -> dict:
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": creator, "version": "0.1", "comment": "mitmproxy version 11"},
            "pages": [],
            "entries": entries,
        }
    }


@pytest.fixture(scope="module")
def sent():
    """What the fake providers sent for STREAMS: (url, request body, response)."""
    with FakeServer(delay_scale=0) as fake:
        out = []
        for path, body in STREAMS:
            url = fake.base_url + path
            response = httpx.post(url, json=body)
            out.append((url, body, response))
    for _, _, response in out:
        assert response.headers["content-type"] == "text/event-stream"
        assert "café" in response.text  # non-ASCII text in the stream
    return out


def test_a_mitmproxy_har_of_charsetless_sse_imports_to_the_exact_bytes(sent, tmp_path):
    entries = [
        _entry(url, body, r, _mitmproxy_text(r.headers["content-type"], r.content))
        for url, body, r in sent
    ]
    assert all("cafÃ©" in e["response"]["content"]["text"] for e in entries)  # the mojibake
    har = tmp_path / "mitm.har"
    har.write_text(json.dumps(_har(entries), indent=4))
    report = import_har(har, tmp_path / "recordings")
    exchanges = open_capture(report.capture_path).exchanges()
    assert [e.body for e in exchanges] == [r.content for _, _, r in sent]
    assert [e.meta["source_body"] for e in exchanges] == ["latin-1", "latin-1"]
    note = "re-encoded as latin-1 (stored as latin-1 text; these are the UTF-8 bytes sent)"
    assert report.notes == [(0, note), (1, note)]
    assert report.summary().endswith(f"; 2 body(ies) {note}")
    results = replay(report.capture_path)
    assert [("café" in r.text, "cafÃ©" in r.text) for r in results] == [(True, False)] * 2
    assert ["body_not_as_sent" in detect(r) for r in results] == [False, False]


def test_a_har_whose_writer_decoded_utf8_imports_unchanged(sent, tmp_path):
    # a browser's HAR (DevTools) holds the text decoded right: café is U+00E9 there
    entries = [_entry(url, body, r, {"text": r.content.decode("utf-8")}) for url, body, r in sent]
    har = tmp_path / "devtools.har"
    har.write_text(json.dumps(_har(entries, creator="WebInspector")))
    report = import_har(har, tmp_path / "recordings")
    exchanges = open_capture(report.capture_path).exchanges()
    assert [e.body for e in exchanges] == [r.content for _, _, r in sent]
    assert ["source_body" in e.meta for e in exchanges] == [False, False]
    assert report.notes == []


def test_a_declared_charset_is_trusted_and_lost_bytes_are_flagged(sent, tmp_path):
    url, body, response = sent[0]
    # the body as sent, but with one byte that is no UTF-8: a writer decoding with
    # replacement leaves U+FFFD there, and the byte is gone
    bad = response.content.replace("café".encode(), b"caf\xe9", 1)
    lossy = _entry(url, body, response, {"text": bad.decode("utf-8", "replace")})
    declared = _entry(url, body, response, {"text": response.content.decode("utf-8")})
    for item in declared["response"]["headers"]:
        if item["name"].lower() == "content-type":
            item["value"] = "text/event-stream; charset=utf-8"
    har = tmp_path / "mixed.har"
    har.write_text(json.dumps(_har([lossy, declared])))
    report = import_har(har, tmp_path / "recordings")
    exchanges = open_capture(report.capture_path).exchanges()
    assert exchanges[0].body == bad.decode("utf-8", "replace").encode("utf-8")
    assert exchanges[0].meta["source_body"] == "lossy"
    assert exchanges[1].body == response.content and "source_body" not in exchanges[1].meta
    assert report.notes == [
        (0, "not recoverable (U+FFFD: the file's writer replaced undecodable bytes)")
    ]
    lossy_result, declared_result = replay(report.capture_path)
    assert "body_not_as_sent" in detect(lossy_result)
    assert "body_not_as_sent" not in detect(declared_result)
