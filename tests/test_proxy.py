"""``lab proxy`` over real sockets: the fake providers behind the proxy, real clients in
front of it (the openai SDK, raw httpx), captures checked byte for byte."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from lab.capture import open as open_capture
from lab.fakes import FakeServer
from lab.fakes.scenarios import render_body
from lab.replay import replay
from lab.tables import streams
from tests.capture_scan import places_holding

pytest.importorskip("uvicorn")
from lab.proxy import ProxyConfig, ProxyServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HI = [{"role": "user", "content": "hi"}]
CANARY = "sk-canary-proxy-4b1d77e0"


def _wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


def _proxy(fake, tmp_path, family_path="/v1", provider="openai", **kw) -> ProxyServer:
    cfg = ProxyConfig(provider=provider, upstream=fake.base_url + family_path, out=tmp_path, **kw)
    return ProxyServer(cfg)


def test_openai_sdk_through_the_proxy_gets_the_bytes_the_capture_holds(tmp_path):
    openai = pytest.importorskip("openai")
    with FakeServer(delay_scale=0) as fake, _proxy(fake, tmp_path) as proxy:
        client = openai.OpenAI(
            base_url=proxy.url, api_key=CANARY, default_headers={"X-Lab-Session": "checkout-42"}
        )
        with client.chat.completions.with_streaming_response.create(
            model="fake/think-leak", messages=HI, stream=True
        ) as response:
            received = b"".join(response.iter_bytes())
        seen = "".join(
            e.choices[0].delta.content or ""
            for e in client.chat.completions.create(
                model="fake/think-leak", messages=HI, stream=True
            )
            if e.choices
        )
        client.close()
        _wait_for(lambda: len(proxy.exchanges) == 2)
        upstream = fake.requests
    # the key reached the upstream, the session header did not
    assert [r.headers.get("authorization") for r in upstream] == [f"Bearer {CANARY}"] * 2
    assert [r.headers.get("x-lab-session") for r in upstream] == [None, None]
    assert [r.path for r in upstream] == ["/v1/chat/completions"] * 2
    first, second = open_capture(tmp_path).exchanges()
    assert first.body == received
    assert (first.provider, first.model, first.status, first.end_reason) == (
        "openai",
        "fake/think-leak",
        200,
        "eof",
    )
    assert first.meta == {"session": "checkout-42", "via": "proxy"}
    results = replay(tmp_path)
    assert [r.error for r in results] == [None, None]
    # the SDK shows the raw content; replay reproduces it: answer after the guards plus
    # the think block they moved
    assert seen.endswith(results[1].text) and results[1].reasoning in seen
    table = streams(results)
    assert list(table["session"]) == ["checkout-42", "checkout-42"]
    assert places_holding(tmp_path, CANARY) == []
    # reported as each one finishes (the order two finish in is the scheduler's)
    assert "openai fake/think-leak 200 eof backend=- leak=think_stripper anomalies=- " + (
        f"session=checkout-42 {len(received)}B"
    ) in [e.line() for e in proxy.exchanges]


def _body(seed: int) -> dict:
    return {"model": "fake/think-leak", "messages": HI, "stream": True, "seed": seed}


def test_two_hundred_concurrent_streams_are_each_recorded_whole_and_apart(tmp_path):
    n = 200
    with (
        FakeServer(delay_scale=1) as fake,
        _proxy(fake, tmp_path, family_path="/api/v1", provider="openrouter") as proxy,
    ):

        async def one(client: httpx.AsyncClient, i: int) -> tuple[int, bytes]:
            body = _body(i)
            async with client.stream(
                "POST",
                proxy.url + "/chat/completions",
                json=body,
                headers={"X-Lab-Session": f"s{i:03d}"},
            ) as response:
                return i, b"".join([chunk async for chunk in response.aiter_raw()])

        async def run() -> list[tuple[int, bytes]]:
            limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
            async with httpx.AsyncClient(limits=limits, timeout=60) as client:
                return await asyncio.gather(*(one(client, i) for i in range(n)))

        received = dict(asyncio.run(run()))
        _wait_for(lambda: len(proxy.exchanges) == n, timeout=60)
        peak = proxy.app.peak_active
    by_session = {e.meta["session"]: e for e in open_capture(tmp_path).exchanges()}
    assert len(by_session) == n
    for i in range(n):
        expected = render_body("openrouter", "fake/think-leak", seed=i, body=_body(i))
        assert received[i] == expected, i
        assert by_session[f"s{i:03d}"].body == expected, i
        assert by_session[f"s{i:03d}"].end_reason == "eof"
    # they were in flight together, not one after another (each stream takes ~0.35 s at
    # the fake's real per-read delays; on a quiet host all 200 overlap)
    assert peak >= 100


@pytest.mark.parametrize("upstream_http", ["wire", "httpx"])
def test_an_echoed_key_is_scrubbed_alike_for_the_client_and_in_capture_with_record_reads(
    tmp_path, upstream_http
):
    # fake/echo-key quotes the client's key in a header and in an event split across two
    # reads; at the fake's real delays each event is its own read, so the proxy's capture
    # must hold exactly the reads `lab record`'s transport records for the same request
    from lab.capture import CaptureWriter
    from lab.http.transports import RecordingTransport

    body = {"model": "fake/echo-key", "messages": HI, "stream": True, "seed": 0}
    headers = {"Authorization": f"Bearer {CANARY}"}
    with (
        FakeServer(delay_scale=1) as fake,
        _proxy(
            fake,
            tmp_path / "proxy",
            family_path="/api/v1",
            provider="openrouter",
            upstream_http=upstream_http,
        ) as proxy,
    ):
        with httpx.stream(
            "POST", proxy.url + "/chat/completions", json=body, headers=headers
        ) as response:
            received = [data for data in response.iter_raw()]
            echo_header = response.headers["x-debug-echo"]
        _wait_for(lambda: len(proxy.exchanges) == 1)
        with CaptureWriter(tmp_path / "record") as writer:
            url = fake.family_base_url("openrouter") + "/chat/completions"
            with httpx.Client(transport=RecordingTransport(writer)) as client:
                client.post(url, json=body, headers=headers)
    (proxied,) = open_capture(tmp_path / "proxy").exchanges()
    (recorded,) = open_capture(tmp_path / "record").exchanges()
    assert proxied.reads == recorded.reads
    assert b"".join(received) == proxied.body and CANARY.encode() not in proxied.body
    assert proxied.meta["lab.redacted"] == recorded.meta["lab.redacted"]
    assert proxied.meta["lab.redacted"]["response_body"] == 1
    assert CANARY not in echo_header
    assert places_holding(tmp_path, CANARY) == []


def test_a_client_that_disconnects_cancels_the_upstream_and_is_recorded_cancelled(tmp_path):
    body = {"model": "fake/clean", "messages": HI, "stream": True, "seed": 0}
    full = render_body("openai", "fake/clean", seed=0, body=body)
    with FakeServer(delay_scale=5) as fake, _proxy(fake, tmp_path) as proxy:
        with httpx.stream("POST", proxy.url + "/chat/completions", json=body) as response:
            first = next(response.iter_raw())
        _wait_for(lambda: len(proxy.exchanges) == 1)
        report = proxy.exchanges[0]
    (exchange,) = open_capture(tmp_path).exchanges()
    assert (report.end_reason, exchange.end_reason) == ("cancelled", "cancelled")
    assert full.startswith(exchange.body) and first and len(exchange.body) < len(full)
    assert exchange.error == "CancelledError"


def test_an_upstream_failure_reaches_the_client_as_sent_and_is_recorded(tmp_path):
    with (
        FakeServer(delay_scale=0) as fake,
        _proxy(fake, tmp_path, family_path="", provider="anthropic") as proxy,
    ):
        body = {"model": "fake/http-529", "max_tokens": 8, "messages": HI, "stream": True}
        direct = httpx.post(fake.base_url + "/v1/messages", json=body)
        proxied = httpx.post(proxy.url + "/v1/messages", json=body)
        _wait_for(lambda: len(proxy.exchanges) == 1)
    assert (proxied.status_code, proxied.headers["content-type"]) == (
        direct.status_code,
        direct.headers["content-type"],
    )
    assert proxied.status_code == 529
    (exchange,) = open_capture(tmp_path).exchanges()
    assert (exchange.status, exchange.body) == (529, proxied.content)
    assert json.loads(proxied.content)["error"]["type"] == "overloaded_error"
    (result,) = replay(tmp_path)
    assert result.error.type == "provider_overloaded"


def test_an_unreachable_upstream_is_a_502_json_error_and_recorded(tmp_path):
    cfg = ProxyConfig(provider="openai", upstream="http://127.0.0.1:9/v1", out=tmp_path)
    with ProxyServer(cfg) as proxy:
        response = httpx.post(proxy.url + "/chat/completions", json={"model": "m", "messages": HI})
        _wait_for(lambda: len(proxy.exchanges) == 1)
    assert response.status_code == 502
    assert response.json() == {
        "error": {
            "type": "lab_proxy_upstream_error",
            "message": "lab proxy: upstream http://127.0.0.1:9/v1: ConnectError: cannot connect "
            "to 127.0.0.1:9: Connection refused",
            "code": 502,
        }
    }
    (exchange,) = open_capture(tmp_path).exchanges()
    assert (exchange.status, exchange.end_reason) == (None, "read_error")
    assert exchange.url == "http://127.0.0.1:9/v1/chat/completions"


class _Clock:
    """``time`` for :mod:`lab.proxy` with a monotonic clock the test moves forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def __getattr__(self, name: str):
        return getattr(time, name)


def test_captures_roll_over_by_size_and_by_time(tmp_path, monkeypatch):
    body = {"model": "fake/clean", "messages": HI, "stream": True}
    clock = _Clock()
    monkeypatch.setattr("lab.proxy.time", clock)
    with FakeServer(delay_scale=0) as fake:
        with _proxy(fake, tmp_path / "size", roll_bytes=1) as proxy:
            for _ in range(3):
                httpx.post(proxy.url + "/chat/completions", json=body)
            _wait_for(lambda: len(proxy.exchanges) == 3)
            by_size = proxy.recordings
        with _proxy(fake, tmp_path / "time", roll_seconds=60) as proxy:
            httpx.post(proxy.url + "/chat/completions", json=body)
            httpx.post(proxy.url + "/chat/completions", json=body)
            _wait_for(lambda: len(proxy.exchanges) == 2)
            clock.offset += 61  # a minute later by the proxy's clock: the recording rolls
            httpx.post(proxy.url + "/chat/completions", json=body)
            _wait_for(lambda: len(proxy.exchanges) == 3)
            by_time = proxy.recordings
    assert [len(open_capture(p).exchanges()) for p in by_size] == [1, 1, 1]
    assert [len(open_capture(p).exchanges()) for p in by_time] == [2, 1]
    for path in by_size + by_time:  # every recording closed: parts written, no journal left
        assert sorted(f.name for f in path.iterdir()) == [
            "chunks-00000.parquet",
            "streams-00000.parquet",
        ]


def test_any_path_and_query_are_forwarded_under_the_upstream_base(tmp_path):
    with (
        FakeServer(delay_scale=0) as fake,
        _proxy(fake, tmp_path, family_path="/v1beta", provider="google") as proxy,
    ):
        body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
        url = proxy.url + "/models/fake/clean:streamGenerateContent?alt=sse"
        response = httpx.post(url, json=body, headers={"x-goog-api-key": CANARY})
        _wait_for(lambda: len(proxy.exchanges) == 1)
        (upstream,) = fake.requests
    assert (upstream.path, upstream.query) == (
        "/v1beta/models/fake/clean:streamGenerateContent",
        "alt=sse",
    )
    assert upstream.headers["x-goog-api-key"] == CANARY
    (result,) = replay(tmp_path)
    assert (result.provider, result.model, result.error) == ("google", "fake/clean", None)
    assert response.content == open_capture(tmp_path).exchanges()[0].body
    assert places_holding(tmp_path, CANARY) == []


def test_lab_proxy_prints_its_url_first_then_one_line_per_exchange(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with FakeServer(delay_scale=0) as fake:
        cmd = [sys.executable, "-m", "lab.cli", "proxy", "--provider", "openai", "--port", "0"]
        cmd += ["--upstream", fake.base_url + "/v1", "--out", str(tmp_path)]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
        )
        try:
            url = proc.stdout.readline().strip()
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url), url
            body = {"model": "fake/clean", "messages": HI, "stream": True}
            size = len(httpx.post(url + "/chat/completions", json=body).content)
            line = proc.stdout.readline()
        finally:
            proc.send_signal(signal.SIGINT)
            rest, err = proc.communicate(timeout=30)
    assert line == f"openai fake/clean 200 eof backend=- leak=no anomalies=- {size}B\n"
    assert rest == ""
    assert proc.returncode in (0, 130), err
    (exchange,) = open_capture(tmp_path).exchanges()
    assert exchange.end_reason == "eof"


def test_lab_proxy_without_uvicorn_says_which_extra_to_install(monkeypatch, capsys, tmp_path):
    from lab.cli import main

    monkeypatch.setitem(sys.modules, "uvicorn", None)
    code = main(["proxy", "--provider", "openai", "--out", str(tmp_path)])
    assert code == 2
    assert capsys.readouterr().err == (
        "lab: error: lab proxy needs uvicorn: python -m pip install 'stream-lab[proxy]' "
        "(or python -m pip install uvicorn)\n"
    )


def test_lab_proxy_without_httptools_says_which_extra_to_install(monkeypatch, capsys, tmp_path):
    from lab.cli import main

    monkeypatch.setitem(sys.modules, "httptools", None)
    code = main(["proxy", "--provider", "openai", "--out", str(tmp_path)])
    assert code == 2
    assert capsys.readouterr().err == (
        "lab: error: lab proxy needs httptools for its upstream client: python -m pip install "
        "'stream-lab[proxy]' (or python -m pip install httptools; --upstream-http httpx does "
        "without)\n"
    )


def test_the_proxy_writes_each_line_in_one_write():
    """Its URL line and its exchange lines go out as one write each (print() writes the text
    and the newline apart when Python is unbuffered), so the fake server or anything else
    sharing the terminal cannot split them."""
    from lab.proxy import say

    class Writes:
        def __init__(self) -> None:
            self.writes: list[str] = []
            self.flushes = 0

        def write(self, text: str) -> int:
            self.writes.append(text)
            return len(text)

        def flush(self) -> None:
            self.flushes += 1

    out = Writes()
    say("http://127.0.0.1:18787", out)  # type: ignore[arg-type]
    say("openai fake/clean 200 eof", out)  # type: ignore[arg-type]
    assert out.writes == ["http://127.0.0.1:18787\n", "openai fake/clean 200 eof\n"]
    assert out.flushes == 2
