"""Secrets never reach any output, also when a provider echoes them back.

- request body fields are redacted by the one name policy headers use (camelCase, Azure
  ``sig``, ``client_secret``...), with no fast path that skips a field;
- the recorder replaces each secret it sent wherever the response echoes it (body, headers),
  also split across reads, by a same-length marker, and records that it did
  (``meta["lab.redacted"]``); the client sees the same scrubbed bytes, so live equals replay;
- the canary: a key echoed by the fake providers (``fake/echo-key``) reaches none of the
  capture files, ``report.html``, a fixture's ``expected.json`` / ``stream.sse.txt``, replay
  results, ``lab record``'s output, or (slow) the executed notebooks.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import httpx
import pytest

import lab.capture
from lab.capture import CaptureWriter
from lab.capture.redact import ResponseScrubber, marker, redact_body, redact_url, secret_name

CANARY = "sk-or-v1-CANARY-ECHO-3b9d1f7a2c4e6a8b0d2f4a6c8e0b2d4f"
NEEDLES = (CANARY, CANARY[-16:], CANARY[:20])
MARKED = marker(len(CANARY))


def _files_contain(root: Path, needles: tuple[str, ...] = NEEDLES) -> list[str]:
    """Where any needle appears: raw bytes of every file and every decoded Parquet value."""
    import pyarrow.parquet as pq

    hits = []
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        data = f.read_bytes()
        hits += [f"{f} (raw bytes)" for n in needles if n.encode() in data]
        if f.suffix == ".parquet":
            pf = pq.ParquetFile(f)
            text = repr(pf.schema_arrow.metadata) + repr(pf.read().to_pylist())
            hits += [f"{f} (decoded)" for n in needles if n in text]
    return hits


# -- the name policy for body fields -----------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "token",
        "password",
        "client_secret",
        "openai_api_key",
        "accessToken",
        "refreshToken",
        "clientSecret",
        "accesstoken",
        "sig",
        "x-api-key",
        "api_key",
        "Authorization",
    ],
)
def test_secret_names_follow_one_policy_for_headers_params_and_body_fields(name):
    assert secret_name(name)
    assert redact_body(json.dumps({"model": "m", name: "v4lue-x"}).encode()) == (
        json.dumps({"model": "m", name: "[REDACTED]"}).encode()
    )
    assert redact_url(f"https://h.test/p?{name}=v4lue-x&a=1") == (
        f"https://h.test/p?{name}=[REDACTED]&a=1"
    )


@pytest.mark.parametrize(
    "name", ["max_tokens", "budget_tokens", "maxOutputTokens", "keep-alive", "model", "monkey"]
)
def test_ordinary_names_stay_readable(name):
    assert not secret_name(name)
    body = json.dumps({name: "v4lue-x"}).encode()
    assert redact_body(body) is body


def test_body_fields_are_redacted_at_any_depth_with_no_fast_path():
    # none of the old hint words (api_key, authorization...) is in this body, and one key is
    # written with a JSON escape: every field is still looked at
    body = (
        b'{"model": "m", "auth": {"password": "hunter2!", "tok\\u0065n": "t0ken-value"}, '
        b'"messages": [{"role": "user", "content": "my password is hunter2!"}], "pin": 7}'
    )
    assert redact_body(body) == (
        b'{"model": "m", "auth": {"password": "[REDACTED]", "tok\\u0065n": "[REDACTED]"}, '
        b'"messages": [{"role": "user", "content": "my password is [REDACTED]"}], "pin": 7}'
    )


def test_a_short_secret_field_value_is_redacted_where_it_was_sent():
    assert redact_body(b'{"password": "abc", "note": "abc"}') == (
        b'{"password": "[REDACTED]", "note": "abc"}'  # too short to hunt for elsewhere
    )


def test_an_azure_sas_signature_in_the_url_is_redacted():
    url = "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig=AbC%2Bdef%3D&se=2030"
    assert redact_url(url) == (
        "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sig=[REDACTED]&se=2030"
    )


def test_a_form_encoded_body_gets_the_query_parameter_policy():
    body = b"grant_type=client_credentials&client_id=app&client_secret=s3cr3t-value"
    assert redact_body(body) == (
        b"grant_type=client_credentials&client_id=app&client_secret=[REDACTED]"
    )


# -- the response scrubber ------------------------------------------------------------------------

ECHO_BODY = f'{{"error": {{"message": "Incorrect API key provided: {CANARY}."}}}}'.encode()
SCRUBBED_BODY = f'{{"error": {{"message": "Incorrect API key provided: {MARKED}."}}}}'.encode()


def _scrub_reads(reads: list[bytes], secrets=(CANARY,)) -> tuple[list[bytes], int]:
    scrubber = ResponseScrubber(secrets)
    out = []
    for r in reads:
        out += scrubber.feed(r)
    out += scrubber.flush()
    return out, scrubber.count


def test_the_marker_is_as_long_as_the_secret():
    assert MARKED == "[REDACTED" + "*" * (len(CANARY) - 10) + "]"
    assert len(MARKED) == len(CANARY) and marker(6) == "******"


@pytest.mark.parametrize("cut", range(1, len(ECHO_BODY)))
def test_an_echoed_key_split_at_any_read_boundary_is_replaced_boundaries_kept(cut):
    reads = [ECHO_BODY[:cut], ECHO_BODY[cut:]]
    out, count = _scrub_reads(reads)
    assert b"".join(out) == SCRUBBED_BODY and count == 1
    assert [len(r) for r in out] == [len(r) for r in reads]


def test_a_key_split_over_many_one_byte_reads_is_replaced():
    reads = [bytes([b]) for b in ECHO_BODY]
    out, count = _scrub_reads(reads)
    assert out == [bytes([b]) for b in SCRUBBED_BODY] and count == 1


def test_json_escaped_and_percent_encoded_echoes_are_replaced():
    secret = 'p/ss w"rd-1234'
    body = json.dumps({"m": secret}).encode() + b" " + b"p%2Fss%20w%22rd-1234"
    out, count = _scrub_reads([body], secrets=(secret,))
    assert count == 2 and secret.encode() not in b"".join(out)
    assert b"".join(out) == b'{"m": "[REDACTED*****]"} [REDACTED**********]'


def test_a_read_is_held_only_while_its_end_could_start_the_secret():
    scrubber = ResponseScrubber([CANARY])
    assert scrubber.feed(b"data: hello\n\n") == [b"data: hello\n\n"]
    assert scrubber.feed(b"data: sk-or") == []  # could be the key: held
    assert scrubber.feed(b"-v2\n\n") == [b"data: sk-or", b"-v2\n\n"]  # it was not
    assert scrubber.count == 0


# -- the recorder ----------------------------------------------------------------------------------


def _exchange(writer: CaptureWriter):
    return writer.exchange(
        stream_id="s",
        attempt=0,
        attempt_label="default",
        provider="openrouter",
        model="m",
        method="POST",
        url="https://o.test/api/v1/chat/completions",
        request_headers={"Authorization": f"Bearer {CANARY}"},
        request_body=b'{"model": "m"}',
    )


def test_the_recorder_scrubs_an_echo_split_across_reads_and_says_so(tmp_path):
    cut = ECHO_BODY.index(CANARY.encode()) + 5
    with CaptureWriter(tmp_path, flush_interval=3600) as writer:
        rec = _exchange(writer)
        rec.on_response(401, {"content-type": "application/json", "x-echo": CANARY}, "HTTP/1.1")
        rec.on_read(ECHO_BODY[:cut])
        rec.on_read(ECHO_BODY[cut:])
        rec.on_end("eof")
        # still in the journal: recovered with the same bytes and the same note
        [journaled] = lab.capture.open(writer.path).exchanges()
    [ex] = lab.capture.open(writer.path).exchanges()
    for got in (journaled, ex):
        assert got.reads == [SCRUBBED_BODY[:cut], SCRUBBED_BODY[cut:]]
        assert got.meta["lab.redacted"] == {"response_body": 1, "response_headers": 1}
        assert got.response_headers["x-echo"] == "[REDACTED]"
        assert got.error == f"HTTP 401: {SCRUBBED_BODY.decode()}"
    assert _files_contain(tmp_path) == []


def test_an_exchange_that_sent_no_secret_is_recorded_untouched(tmp_path):
    with CaptureWriter(tmp_path) as writer:
        rec = writer.exchange(
            stream_id="s",
            attempt=0,
            attempt_label="default",
            provider="openai",
            model="m",
            method="POST",
            url="http://127.0.0.1/v1/chat/completions",
            request_headers={},
            request_body=b"{}",
        )
        rec.on_response(200, {}, "HTTP/1.1")
        rec.on_read(ECHO_BODY)
        rec.on_end("eof")
    [ex] = lab.capture.open(writer.path).exchanges()
    assert ex.reads == [ECHO_BODY] and "lab.redacted" not in ex.meta


# -- the canary through every output -----------------------------------------------------------

ECHOING = [
    ("openrouter", "fake/echo-key", "/api/v1"),
    ("openrouter", "fake/echo-key-401", "/api/v1"),
    ("anthropic", "fake/echo-key", "/anthropic/v1"),
]


def _body(provider: str, model: str) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    if provider == "anthropic":
        body["max_tokens"] = 64
    return body


def _record_echoes(root: Path, base_url: str):
    from lab.recorder import Recorder

    with Recorder(root) as rec:
        for provider, model, path in ECHOING:
            rec.record(provider, _body(provider, model), base_url=base_url + path, api_key=CANARY)
        return rec.path, rec.results


def test_fake_providers_echo_the_key_they_were_sent(fake_server):
    """The canary would notice a leak: unscrubbed, the key is in every echoing response."""
    with httpx.Client() as client:
        r = client.post(
            fake_server.base_url + "/api/v1/chat/completions",
            json=_body("openrouter", "fake/echo-key"),
            headers={"Authorization": f"Bearer {CANARY}"},
        )
    assert CANARY in r.text and r.headers["x-debug-echo"] == f"key={CANARY}"


def test_an_echoed_canary_reaches_no_output(tmp_path, fake_server):
    from lab.fixtures import export_fixture
    from lab.replay import replay
    from lab.report import write_report

    path, live = _record_echoes(tmp_path / "captures", fake_server.base_url)
    cap = lab.capture.open(path)
    counts = [ex.meta.get("lab.redacted") for ex in cap.exchanges()]
    assert counts == [
        {"response_body": 1, "response_headers": 1},
        {"response_body": 1},
        {"response_body": 1},
    ]
    assert all(MARKED.encode() in ex.body for ex in cap.exchanges())
    assert _files_contain(path) == []

    results = replay(path)
    assert [r.to_dict() for r in results] == [r.to_dict() for r in live]  # live saw the same
    assert not any(n in repr([r.to_dict() for r in results]) for n in NEEDLES)
    assert all(r.error is not None and MARKED in r.error.message for r in results)
    write_report(results, tmp_path / "report")
    for sid in cap.streams["stream_id"]:
        export_fixture(path, sid, dest=tmp_path / "fixtures")
    fixture_files = {p.name for p in (tmp_path / "fixtures").rglob("*") if p.is_file()}
    assert {"expected.json", "stream.sse.txt"} <= fixture_files
    assert (tmp_path / "report" / "report.html").is_file()
    assert _files_contain(tmp_path / "report") == []
    assert _files_contain(tmp_path / "fixtures") == []


def test_lab_record_output_holds_no_echoed_key(tmp_path, fake_server, monkeypatch, capsys):
    from lab.cli import main

    monkeypatch.setenv("OPENROUTER_API_KEY", CANARY)
    for model in ("fake/echo-key", "fake/echo-key-401"):
        code = main(
            [
                "record",
                "--provider",
                "openrouter",
                "--model",
                model,
                "--prompt",
                "hi",
                "--base-url",
                fake_server.base_url + "/api/v1",
                "--n",
                "2",
                "--out",
                str(tmp_path / "captures"),
            ]
        )
        out, err = capsys.readouterr()
        assert code == 1, err  # every request failed (the provider refused the key)
        assert MARKED in err
        assert not any(n in out + err for n in NEEDLES), (out, err)
    assert _files_contain(tmp_path) == []


def test_async_recording_transport_hands_the_exchange_to_the_response(tmp_path, fake_server):
    from lab.http.transports import AsyncRecordingTransport

    async def main(writer: CaptureWriter):
        async with httpx.AsyncClient(transport=AsyncRecordingTransport(writer)) as client:
            async with client.stream(
                "POST",
                fake_server.base_url + "/api/v1/chat/completions",
                json=_body("openrouter", "fake/echo-key-401"),
                headers={"Authorization": f"Bearer {CANARY}"},
            ) as r:
                r.extensions["lab.exchange"].note_error("refused: the key was not accepted")
                await r.aread()
            return r

    with CaptureWriter(tmp_path) as writer:
        r = asyncio.run(main(writer))
    assert MARKED in r.text and CANARY not in r.text
    [ex] = lab.capture.open(writer.path).exchanges()
    assert ex.error == "refused: the key was not accepted"
    assert ex.body == r.content


@pytest.mark.slow
def test_an_echoed_canary_is_absent_from_notebooks_executed_on_its_capture(tmp_path):
    """The notebooks run on a capture of the demo set plus the echoing providers, all sent
    the canary key."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from lab.demo import demo_requests
    from lab.fakes import FakeServer
    from lab.recorder import Recorder

    root = tmp_path / "captures"
    with FakeServer() as server, Recorder(root, label="canary") as rec:
        for it in demo_requests(2):
            url = server.base_url + it["base_path"]
            rec.record(it["provider"], it["body"], base_url=url, api_key=CANARY)
        for provider, model, path in ECHOING:
            rec.record(
                provider, _body(provider, model), base_url=server.base_url + path, api_key=CANARY
            )
    notebooks = Path(__file__).resolve().parent.parent / "notebooks"
    executed = tmp_path / "executed"
    executed.mkdir()
    old = {k: os.environ.get(k) for k in ("LAB_CAPTURES", "MPLBACKEND", "OPENROUTER_API_KEY")}
    os.environ.update(LAB_CAPTURES=str(root), MPLBACKEND="Agg", OPENROUTER_API_KEY=CANARY)
    try:
        for nb_path in sorted(notebooks.glob("*.ipynb")):
            nb = nbformat.read(nb_path, as_version=4)
            nbclient.NotebookClient(
                nb, timeout=600, resources={"metadata": {"path": str(nb_path.parent)}}
            ).execute()
            nbformat.write(nb, executed / nb_path.name)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert len(list(executed.glob("*.ipynb"))) == 3
    assert _files_contain(tmp_path) == []


# -- issue 29 item 1: the key echoed in JSON escapes ----------------------------------------------

SLASHED = "sk-proj-CANARY/ESCAPED+9f8e7d6c5b4a39281706"
"""A key with ``/``: JSON writers may send it as ``\\/``."""


def _escape_all(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


ESCAPED_FORMS = {
    "every character as \\uXXXX": _escape_all(SLASHED),
    "upper-case hex, some characters escaped": SLASHED[:5]
    + _escape_all(SLASHED[5:12]).upper().replace("\\U", "\\u")
    + SLASHED[12:],
    "slash as \\/": SLASHED.replace("/", "\\/"),
}


def _escaped_stream() -> bytes:
    """A chat stream whose text and error echo the key in each escaped form."""
    events = []
    for form in ESCAPED_FORMS.values():
        events.append(
            '{"choices":[{"index":0,"delta":{"content":"key: '
            + form
            + ' "},"finish_reason":null}]}'
        )
    events.append(
        '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
        '"usage":{"prompt_tokens":1,"completion_tokens":3,"total_tokens":4}}'
    )
    return "".join(f"data: {e}\n\n" for e in events).encode() + b"data: [DONE]\n\n"


def test_a_key_echoed_in_json_escapes_reaches_no_output(
    tmp_path, canned_server, monkeypatch, capsys
):
    from lab.cli import main
    from lab.fixtures import export_fixture
    from lab.replay import replay

    base = canned_server(lambda path: (200, "text/event-stream", _escaped_stream()))
    monkeypatch.setenv("OPENAI_API_KEY", SLASHED)
    code = main(
        ["record", "--provider", "openai", "--model", "m", "--prompt", "hi"]
        + ["--base-url", base + "/v1", "--n", "1", "--out", str(tmp_path / "captures")]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    needles = (SLASHED, SLASHED[-16:], *ESCAPED_FORMS.values())
    assert not any(n in out + err for n in needles), (out, err)
    [ex] = lab.capture.open(tmp_path / "captures").exchanges()
    assert ex.meta["lab.redacted"] == {"response_body": 3}
    assert _files_contain(tmp_path / "captures", needles) == []
    [result] = replay(tmp_path / "captures")
    assert result.text == "".join(f"key: {marker(len(form))} " for form in ESCAPED_FORMS.values())
    assert not any(n in json.dumps(result.to_dict()) for n in needles)
    export_fixture(tmp_path / "captures", result.stream_id, dest=tmp_path / "fixtures")
    assert _files_contain(tmp_path / "fixtures", needles) == []


@pytest.mark.parametrize("cut", range(0, 60, 3))
def test_an_escaped_key_split_at_any_read_boundary_is_replaced_boundaries_kept(cut):
    body = ('{"error":"bad key ' + ESCAPED_FORMS["every character as \\uXXXX"] + '"}').encode()
    cut = 18 + cut * 4  # inside the escaped key
    s = ResponseScrubber([SLASHED])
    reads = s.feed(body[:cut]) + s.feed(body[cut:]) + s.flush()
    assert [len(r) for r in reads] == [cut, len(body) - cut]
    assert json.loads(b"".join(reads))["error"] == "bad key " + marker(len(body) - 20)
    assert s.count == 1


@pytest.fixture
def gzip_echo_server():
    """A server on 127.0.0.1 that gzips its stream whatever ``Accept-Encoding`` says, and
    echoes the request's bearer key in the stream's text."""
    import gzip
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the stdlib's name
            self.rfile.read(int(self.headers.get("content-length", 0)))
            key = self.headers.get("authorization", "").removeprefix("Bearer ")
            text = json.dumps({"choices": [{"index": 0, "delta": {"content": f"k={key}"}}]})
            body = f"data: {text}\n\n".encode() + (
                b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
                b"data: [DONE]\n\n"
            )
            data = gzip.compress(body)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-encoding", "gzip")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_a_key_echoed_in_a_gzipped_body_reaches_no_output(
    tmp_path, gzip_echo_server, monkeypatch, capsys
):
    from lab.cli import main
    from lab.fixtures import export_fixture
    from lab.replay import replay

    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    code = main(
        ["record", "--provider", "openai", "--model", "m", "--prompt", "hi"]
        + ["--base-url", gzip_echo_server + "/v1", "--n", "1", "--out", str(tmp_path / "c")]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert not any(n in out + err for n in NEEDLES), (out, err)
    [ex] = lab.capture.open(tmp_path / "c").exchanges()
    assert ex.meta["lab.redacted"] == {"response_body": 1}
    assert ex.meta["lab.decoded"] == "gzip"
    assert "content-encoding" not in {k.lower() for k in ex.response_headers}
    assert _files_contain(tmp_path / "c") == []
    [result] = replay(tmp_path / "c")
    assert result.text == f"k={MARKED}"
    export_fixture(tmp_path / "c", result.stream_id, dest=tmp_path / "fixtures")
    assert _files_contain(tmp_path / "fixtures") == []
