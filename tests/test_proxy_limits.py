"""``lab proxy`` fit to leave running (issue 29): the limits of ``lab record`` on the
upstream side, limits on what clients send, safe exposure, and a full disk said out loud.
Every test runs over real loopback sockets: a hand-driven upstream (``tests.raw_upstream``)
or the fake providers behind the proxy, raw sockets or httpx in front of it."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from lab.capture import open as open_capture
from lab.config import LabConfig
from lab.fakes import FakeServer
from tests.capture_scan import places_holding
from tests.raw_upstream import CHUNK, RawUpstream, endless_sse, sse_headers
from tests.test_disk_full import Disk

pytest.importorskip("uvicorn")
from lab.proxy import ProxyConfig, ProxyServer  # noqa: E402

HI = [{"role": "user", "content": "hi"}]
BODY = {"model": "fake/clean", "messages": HI, "stream": True}
SERVERS = ["httptools", "h11"]


def _wait_for(predicate, timeout=20.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


def _proxy(upstream: str, tmp_path, http: str | None = None, **kw) -> ProxyServer:
    cfg = ProxyConfig(provider="openai", upstream=upstream, out=tmp_path, **kw)
    return ProxyServer(cfg, **({"http": http} if http else {}))


def _raw(url: str, data: bytes, timeout: float = 20.0) -> bytes:
    """Send ``data`` on a new connection; everything the proxy answers until it closes."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            try:
                more = s.recv(65536)
            except ConnectionResetError:
                break
            if not more:
                break
            out += more
    return out


def _status_and_json(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)


def _error(status: int, message: str, kind: str = "lab_proxy_bad_request") -> dict:
    return {"error": {"type": kind, "message": message, "code": status}}


# -- the upstream side: lab record's limits ---------------------------------------------------


def test_an_endless_upstream_ends_at_the_byte_limit_cut_exactly_there(tmp_path):
    limits = LabConfig(max_exchange_bytes=100_000)
    with RawUpstream(endless_sse) as up, _proxy(up.url + "/v1", tmp_path, lab_config=limits) as p:
        got = b""
        with pytest.raises(httpx.RemoteProtocolError):  # the stream is cut, not ended
            with httpx.stream("POST", p.url + "/chat/completions", json=BODY) as r:
                for data in r.iter_raw():
                    got += data
        _wait_for(lambda: len(p.exchanges) == 1)
    assert len(got) == 100_000
    assert got == ((CHUNK * 50) * 100)[:100_000]
    message = (
        "the response went past the byte limit of 100000 decoded bytes "
        "(LabConfig.max_exchange_bytes); the lab stopped reading"
    )
    (ex,) = p.exchanges
    assert (ex.status, ex.end_reason, ex.error, ex.n_bytes) == (200, "byte_limit", message, 100_000)
    (recorded,) = open_capture(tmp_path).exchanges()
    assert (recorded.end_reason, recorded.error) == ("byte_limit", message)
    assert recorded.body[:100_000] == got  # the read that crossed it is recorded whole


def test_an_upstream_that_trickles_its_body_ends_at_the_time_limit(tmp_path):
    def trickle(head, sock, stop):
        sock.sendall(sse_headers())
        while not stop.wait(0.05):
            sock.sendall(b"1\r\n.\r\n")

    limits = LabConfig(max_exchange_s=1.0)
    with RawUpstream(trickle) as up, _proxy(up.url + "/v1", tmp_path, lab_config=limits) as p:
        with pytest.raises(httpx.RemoteProtocolError):
            with httpx.stream("POST", p.url + "/chat/completions", json=BODY) as r:
                assert r.status_code == 200
                for _ in r.iter_raw():
                    pass
        _wait_for(lambda: len(p.exchanges) == 1)
    message = (
        "the exchange went past its total time limit of 1 s (LabConfig.max_exchange_s); "
        "the lab stopped it"
    )
    (ex,) = p.exchanges
    assert (ex.status, ex.end_reason, ex.error) == (200, "time_limit", message)
    (recorded,) = open_capture(tmp_path).exchanges()
    assert (recorded.end_reason, recorded.error) == ("time_limit", message)


def test_an_upstream_that_trickles_its_headers_is_a_504_at_the_time_limit(tmp_path):
    def slow_head(head, sock, stop):
        sock.sendall(b"HTTP/1.1 200 OK\r\n")
        while not stop.wait(0.05):
            sock.sendall(b"x-slow: 1\r\n")

    limits = LabConfig(max_exchange_s=1.0)
    with RawUpstream(slow_head) as up, _proxy(up.url + "/v1", tmp_path, lab_config=limits) as p:
        r = httpx.post(p.url + "/chat/completions", json=BODY)
        _wait_for(lambda: len(p.exchanges) == 1)
    message = (
        "the exchange went past its total time limit of 1 s (LabConfig.max_exchange_s); "
        "the lab stopped it"
    )
    assert (r.status_code, r.json()) == (
        504,
        _error(504, f"lab proxy: {message}", "lab_proxy_limit"),
    )
    (recorded,) = open_capture(tmp_path).exchanges()
    assert (recorded.status, recorded.end_reason, recorded.error) == (None, "time_limit", message)


def test_an_error_body_is_read_only_up_to_max_error_body_bytes(tmp_path):
    def huge_error(head, sock, stop):
        sock.sendall(
            b"HTTP/1.1 500 X\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        frame = b"%x\r\n%s\r\n" % (4096, b"e" * 4096)
        while not stop.is_set():
            sock.sendall(frame)

    limits = LabConfig(max_error_body_bytes=10_000)
    with RawUpstream(huge_error) as up, _proxy(up.url + "/v1", tmp_path, lab_config=limits) as p:
        got = b""
        with pytest.raises(httpx.RemoteProtocolError):
            with httpx.stream("POST", p.url + "/chat/completions", json=BODY) as r:
                assert r.status_code == 500
                for data in r.iter_raw():
                    got += data
        _wait_for(lambda: len(p.exchanges) == 1)
    assert got == b"e" * 10_000
    message = (
        "the error body went past 10000 decoded bytes (LabConfig.max_error_body_bytes); "
        "the lab read no further"
    )
    (recorded,) = open_capture(tmp_path).exchanges()
    assert (recorded.status, recorded.end_reason, recorded.error) == (500, "byte_limit", message)


def test_an_exchange_past_the_summary_window_is_not_held_for_its_line(tmp_path):
    with FakeServer(delay_scale=0) as fake:
        with _proxy(fake.base_url + "/v1", tmp_path, window_bytes=1000) as p:
            size = len(httpx.post(p.url + "/chat/completions", json=BODY).content)
            _wait_for(lambda: len(p.exchanges) == 1)
    assert size > 1000
    assert p.exchanges[0].line() == f"openai fake/clean 200 eof summary=skipped {size}B"
    (recorded,) = open_capture(tmp_path).exchanges()
    assert (recorded.end_reason, len(recorded.body)) == ("eof", size)  # all of it recorded


# -- the 502 never shows the upstream's userinfo ---------------------------------------------


def test_the_502_body_never_shows_the_userinfo_of_upstream(tmp_path):
    upstream = "http://lab-user:s3cret-pass-7f2a@127.0.0.1:9/v1"
    with _proxy(upstream, tmp_path) as p:
        r = httpx.post(p.url + "/chat/completions", json=BODY)
        _wait_for(lambda: len(p.exchanges) == 1)
    assert r.status_code == 502
    assert r.json() == _error(
        502,
        "lab proxy: upstream http://127.0.0.1:9/v1: ConnectError: cannot connect to "
        "127.0.0.1:9: Connection refused",
        "lab_proxy_upstream_error",
    )
    assert b"s3cret" not in r.content and b"lab-user" not in r.content


@pytest.mark.parametrize("upstream_http", ["wire", "httpx"])
def test_no_output_of_a_refused_upstream_shows_its_userinfo(tmp_path, upstream_http):
    """Neither the 502 body nor the line the proxy prints, with either upstream client."""
    upstream = "http://lab-user:s3cret-pass-7f2a@127.0.0.1:9/v1"
    with _proxy(upstream, tmp_path, upstream_http=upstream_http) as p:
        r = httpx.post(p.url + "/chat/completions", json=BODY)
        _wait_for(lambda: len(p.exchanges) == 1)
        line = p.exchanges[0].line()
    assert r.status_code == 502
    message = r.json()["error"]["message"]
    assert message.startswith("lab proxy: upstream http://127.0.0.1:9/v1: ConnectError: ")
    for secret in ("s3cret-pass-7f2a", "lab-user"):
        assert secret.encode() not in r.content and secret not in line
    # the capture keeps the URL's user, never its password (REDACTION_POLICY)
    assert places_holding(tmp_path, "s3cret-pass-7f2a") == []


# -- what clients send -----------------------------------------------------------------------


@pytest.mark.parametrize("http", SERVERS)
def test_a_request_body_past_the_limit_is_a_413_by_length_or_as_it_streams(tmp_path, http):
    message = (
        "lab proxy: the request body is larger than 1000 bytes (ProxyConfig.max_request_body_bytes)"
    )
    with FakeServer(delay_scale=0) as fake:
        with _proxy(fake.base_url + "/v1", tmp_path, http, max_request_body_bytes=1000) as p:
            by_length = httpx.post(p.url + "/chat/completions", content=b"x" * 1001)
            chunked = httpx.post(
                p.url + "/chat/completions", content=iter([b"x" * 600, b"x" * 600])
            )
            fits = httpx.post(p.url + "/chat/completions", json=BODY)
            _wait_for(lambda: len(p.exchanges) == 1)
        assert len(fake.requests) == 1
    for r in (by_length, chunked):
        assert (r.status_code, r.json()) == (413, _error(413, message))
    assert fits.status_code == 200


@pytest.mark.parametrize("http", SERVERS)
def test_headers_past_their_size_or_count_are_a_431(tmp_path, http):
    message = (
        "lab proxy: the request line and headers are larger than 4096 bytes "
        "(ProxyConfig.max_header_bytes) or hold more than 20 fields (ProxyConfig.max_headers)"
    )
    with FakeServer(delay_scale=0) as fake:
        with _proxy(
            fake.base_url + "/v1", tmp_path, http, max_header_bytes=4096, max_headers=20
        ) as p:
            big = _raw(
                p.url, b"GET /models HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 8000 + b"\r\n\r\n"
            )
            many = b"".join(b"x-h%d: 1\r\n" % i for i in range(24))
            head = b"GET /models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
            counted = _raw(p.url, head + many + b"\r\n")
        assert fake.requests == []
    assert _status_and_json(big) == (431, _error(431, message))
    assert _status_and_json(counted) == (431, _error(431, message))


@pytest.mark.parametrize("http", SERVERS)
def test_a_client_too_slow_with_its_headers_gets_a_408_and_is_closed(tmp_path, http):
    with FakeServer(delay_scale=0) as fake:
        with _proxy(fake.base_url + "/v1", tmp_path, http, header_timeout_s=0.5) as p:
            host, port = p.url.removeprefix("http://").split(":")
            with socket.create_connection((host, int(port)), timeout=20) as s:
                s.sendall(b"POST /chat/completions HTTP/1.1\r\nhost: x\r\n")  # never ends
                answer = b""
                while more := s.recv(65536):
                    answer += more
            served = httpx.post(p.url + "/chat/completions", json=BODY)
    message = (
        "lab proxy: the request line and headers did not arrive within 0.5 s "
        "(ProxyConfig.header_timeout_s)"
    )
    assert _status_and_json(answer) == (408, _error(408, message))
    assert served.status_code == 200


@pytest.mark.parametrize("http", SERVERS)
def test_a_client_too_slow_with_its_body_gets_a_408(tmp_path, http):
    with FakeServer(delay_scale=0) as fake:
        with _proxy(fake.base_url + "/v1", tmp_path, http, body_timeout_s=0.5) as p:
            head = b"POST /chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n"
            answer = _raw(p.url, head + b"{")  # 99 bytes never come
        assert fake.requests == []
    message = "lab proxy: the request body did not arrive within 0.5 s (ProxyConfig.body_timeout_s)"
    assert _status_and_json(answer) == (408, _error(408, message))


# -- safe exposure ---------------------------------------------------------------------------


def _recording_upstream():
    def answer(head, sock, stop):
        sock.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
        )

    return RawUpstream(answer)


@pytest.mark.parametrize("http", SERVERS)
@pytest.mark.parametrize(
    "target",
    [
        b"*",
        b"http://evil.example/x",
        b"/../x",
        b"/v2/../../x",
        b"/%2e%2e/x",
        b"/%2E./x",
        b"/%252e%252e/x",
        b"/a/..%2fx",
        b"/a%5c..%5cx",
        b"/./x",
    ],
)
def test_no_request_target_leaves_the_upstream_base_path(tmp_path, http, target):
    with _recording_upstream() as up, _proxy(up.url + "/v1", tmp_path, http) as p:
        method = b"OPTIONS" if target == b"*" else b"GET"
        answer = _raw(
            p.url, method + b" " + target + b" HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        )
    assert up.heads == []  # nothing reached the upstream
    status, body = _status_and_json(answer)
    assert status == 400
    shown = target.decode()
    assert body == _error(
        400,
        f"lab proxy: the request target must be a path starting with / (origin-form), not {shown!r}"
        if not target.startswith(b"/")
        else f"lab proxy: the request path {shown!r} holds a dot segment (. or .., raw or "
        "percent-encoded): it could leave the upstream base path",
    )


@pytest.mark.parametrize("http", SERVERS)
def test_at_host_or_double_slash_never_change_the_upstream_host(tmp_path, http):
    with _recording_upstream() as up, _proxy(up.url + "/v1", tmp_path, http) as p:
        port = up.url.rsplit(":", 1)[1].encode()
        for target in (b"//evil.example/x", b"/@evil.example/x", b"/models@evil.example"):
            answer = _raw(
                p.url, b"GET " + target + b" HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
            )
            assert answer.startswith(b"HTTP/1.1 200 ")
        at_host = _raw(
            p.url, b"GET @evil.example/x HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        )
    assert [h.split(b"\r\n")[0] for h in up.heads] == [
        b"GET /v1//evil.example/x HTTP/1.1",
        b"GET /v1/@evil.example/x HTTP/1.1",
        b"GET /v1/models@evil.example HTTP/1.1",
    ]
    assert all(b"\r\nhost: 127.0.0.1:" + port in h.lower() for h in up.heads)
    assert at_host.startswith(b"HTTP/1.1 400 ")


@pytest.mark.parametrize("http", SERVERS)
@pytest.mark.parametrize("target", [b"/x#@evil.example", b"/models?a=1#b"])
def test_a_fragment_in_the_request_target_is_a_clean_400(tmp_path, http, target):
    """``#`` never belongs in a request target; httptools keeps it in the target, h11 in the
    query. Before, httpx refused the upstream URL and the client got a 500 (a traceback in
    the proxy's log)."""
    with _recording_upstream() as up, _proxy(up.url + "/v1", tmp_path, http) as p:
        answer = _raw(
            p.url, b"GET " + target + b" HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        )
    assert up.heads == []
    assert _status_and_json(answer) == (
        400,
        _error(
            400,
            "lab proxy: the request target holds '#': a fragment is never part of a request "
            "target, so nothing was forwarded",
        ),
    )


@pytest.mark.parametrize("http", SERVERS)
def test_a_target_that_makes_an_upstream_url_httpx_refuses_is_a_clean_400(tmp_path, http):
    """A path within the header limit under a long upstream base path: past httpx's URL
    length (65,536) the URL cannot be built; the client gets a 400 saying so, not a 500."""
    base = "/v1/" + "b" * 1000
    target = b"/" + b"a" * 65_300
    with _recording_upstream() as up, _proxy(up.url + base, tmp_path, http) as p:
        answer = _raw(
            p.url, b"GET " + target + b" HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        )
    assert up.heads == []
    assert _status_and_json(answer) == (
        400,
        _error(
            400,
            "lab proxy: the request target makes no upstream URL httpx takes: "
            "URL component 'path' too long",
        ),
    )


@pytest.mark.parametrize("http", SERVERS)
def test_a_header_value_that_is_not_ascii_is_a_clean_400(tmp_path, http):
    with _recording_upstream() as up, _proxy(up.url + "/v1", tmp_path, http) as p:
        answer = _raw(
            p.url,
            "GET /models HTTP/1.1\r\nhost: x\r\nX-Title: caf\u00e9\r\nconnection: close\r\n\r\n".encode(),
        )
    assert up.heads == []
    assert _status_and_json(answer) == (
        400,
        _error(
            400,
            "lab proxy: the value of header x-title is not ASCII; encode it "
            "(percent-encoding, RFC 8187) or leave it out",
        ),
    )


def test_upstream_path_keeps_a_plain_path_as_it_came():
    from lab.proxy import upstream_path

    assert upstream_path(b"/models/fake/clean:streamGenerateContent") == (
        "/models/fake/clean:streamGenerateContent"
    )
    assert upstream_path(b"/a..b/.x/x.") == "/a..b/.x/x."


TOKEN = "lab-proxy-token-91c0"


def test_with_a_token_only_requests_that_carry_it_are_forwarded_and_it_is_never_recorded(
    tmp_path,
):
    with (
        FakeServer(delay_scale=0) as fake,
        _proxy(fake.base_url + "/v1", tmp_path, auth_token=TOKEN) as p,
    ):
        without = httpx.post(p.url + "/chat/completions", json=BODY)
        wrong = httpx.post(
            p.url + "/chat/completions", json=BODY, headers={"X-Lab-Proxy-Token": "nope"}
        )
        by_header = httpx.post(
            p.url + "/chat/completions", json=BODY, headers={"X-Lab-Proxy-Token": TOKEN}
        )
        by_path = httpx.post(p.url + f"/lab-token/{TOKEN}/chat/completions", json=BODY)
        _wait_for(lambda: len(p.exchanges) == 2)
        upstream = list(fake.requests)
    message = (
        "lab proxy: this proxy needs its token: send the header X-Lab-Proxy-Token: TOKEN, "
        "or start the path with /lab-token/TOKEN/"
    )
    for r in (without, wrong):
        assert (r.status_code, r.json()) == (401, _error(401, message, "lab_proxy_unauthorized"))
    assert (by_header.status_code, by_path.status_code) == (200, 200)
    assert [u.path for u in upstream] == ["/v1/chat/completions", "/v1/chat/completions"]
    assert all("x-lab-proxy-token" not in {k.lower() for k in u.headers} for u in upstream)
    assert places_holding(tmp_path, TOKEN) == []
    assert len(open_capture(tmp_path).exchanges()) == 2


def test_the_health_path_answers_without_the_token_and_is_never_forwarded_or_recorded(
    tmp_path,
):
    with (
        FakeServer(delay_scale=0) as fake,
        _proxy(fake.base_url + "/v1", tmp_path, auth_token=TOKEN) as p,
    ):
        before = httpx.get(p.url + "/lab-proxy/health")
        httpx.post(p.url + "/chat/completions", json=BODY, headers={"X-Lab-Proxy-Token": TOKEN})
        _wait_for(lambda: len(p.exchanges) == 1)
        after = httpx.get(p.url + "/lab-proxy/health")
        head = httpx.head(p.url + "/lab-proxy/health")
        upstream = [u.path for u in fake.requests]
    assert (before.status_code, before.json()) == (
        200,
        {"status": "ok", "in_flight": 0, "finished": 0, "unrecorded": 0, "recordings": 0},
    )
    assert after.json() == {
        "status": "ok",
        "in_flight": 0,
        "finished": 1,
        "unrecorded": 0,
        "recordings": 1,
    }
    assert (head.status_code, head.content) == (200, b"")
    assert after.headers["cache-control"] == "no-store"
    assert upstream == ["/v1/chat/completions"]
    assert len(open_capture(tmp_path).exchanges()) == 1


def test_lab_proxy_refuses_a_host_beyond_loopback_without_allow_remote(capsys, tmp_path):
    from lab.cli import main

    code = main(["proxy", "--provider", "openai", "--host", "0.0.0.0", "--out", str(tmp_path)])
    assert code == 2
    assert capsys.readouterr().err == (
        "lab: error: --host 0.0.0.0 is beyond loopback: anyone who reaches it could send "
        "requests through the proxy and fill --out; pass --allow-remote (and set "
        "--auth-token) to do it anyway\n"
    )


def test_lab_proxy_with_allow_remote_warns_before_it_listens(monkeypatch, capsys, tmp_path):
    import lab.proxy
    from lab.cli import main

    class Stopped:
        def run(self, sockets):  # serving is not what this test is about
            pass

    real_bind = lab.proxy._bind
    monkeypatch.setattr(lab.proxy, "_bind", lambda host, port: real_bind("127.0.0.1", 0))
    monkeypatch.setattr(lab.proxy, "_server", lambda app, sock: Stopped())
    code = main(
        ["proxy", "--provider", "openai", "--host", "0.0.0.0", "--allow-remote"]
        + ["--upstream", "http://127.0.0.1:9/v1", "--out", str(tmp_path)]
    )
    assert code == 0
    assert capsys.readouterr().err == (
        "lab proxy: warning: listening on 0.0.0.0, beyond loopback: whoever reaches it can "
        "send requests through it to http://127.0.0.1:9/v1 (with any key they hold, or the "
        f"one in --upstream) and fill the disk under {tmp_path}; no --auth-token is set, so "
        "anyone can\n"
    )


@pytest.mark.parametrize(("argv", "window"), [([], 60.0), (["--client-retry-window", "0"], 0.0)])
def test_lab_proxy_client_retry_window_sets_how_retries_are_told(
    monkeypatch, tmp_path, argv, window
):
    import lab.proxy
    from lab.cli import main

    served = []

    class Stopped:
        def run(self, sockets):
            pass

    monkeypatch.setattr(lab.proxy, "_server", lambda app, sock: served.append(app) or Stopped())
    base = ["proxy", "--provider", "openai", "--port", "0", "--out", str(tmp_path)]
    assert main(base + ["--upstream", "http://127.0.0.1:9/v1", *argv]) == 0
    (app,) = served
    assert app.config.lab_config.client_retry_window_s == window


@pytest.mark.parametrize(
    ("env", "argv", "token"),
    [
        ("from-env", [], "from-env"),
        ("from-env", ["--auth-token", "from-flag"], "from-flag"),
        (None, [], None),
        ("", [], None),
    ],
)
def test_lab_proxy_takes_its_token_from_lab_proxy_token_unless_auth_token_is_given(
    monkeypatch, tmp_path, env, argv, token
):
    import lab.proxy
    from lab.cli import main

    served = []

    class Stopped:
        def run(self, sockets):
            pass

    if env is None:
        monkeypatch.delenv("LAB_PROXY_TOKEN", raising=False)
    else:
        monkeypatch.setenv("LAB_PROXY_TOKEN", env)
    monkeypatch.setattr(lab.proxy, "_server", lambda app, sock: served.append(app) or Stopped())
    base = ["proxy", "--provider", "openai", "--port", "0", "--out", str(tmp_path)]
    assert main(base + ["--upstream", "http://127.0.0.1:9/v1", *argv]) == 0
    (app,) = served
    assert app.config.auth_token == token


def test_lab_proxy_refuses_a_negative_client_retry_window(capsys, tmp_path):
    from lab.cli import main

    with pytest.raises(SystemExit) as info:
        main(["proxy", "--provider", "openai", "--client-retry-window", "-1"])
    assert info.value.code == 2
    assert "argument --client-retry-window: must be 0 or more, got -1" in capsys.readouterr().err


# -- a full disk is loud ---------------------------------------------------------------------


@pytest.fixture
def disk(monkeypatch) -> Disk:
    return Disk(monkeypatch)


def _fill_after_two(p, fake, disk) -> None:
    for _ in range(2):
        assert httpx.post(p.url + "/chat/completions", json=BODY).status_code == 200
    _wait_for(lambda: len(p.exchanges) == 2)
    p.app._current.writer.flush()  # the first two are in a Parquet part
    disk.full = True


def test_a_full_disk_is_said_at_once_and_later_requests_are_forwarded_unrecorded(tmp_path, disk):
    said: list[str] = []
    with FakeServer(delay_scale=0) as fake:
        cfg = ProxyConfig(provider="openai", upstream=fake.base_url + "/v1", out=tmp_path)
        with ProxyServer(cfg, on_capture_error=said.append) as p:
            _fill_after_two(p, fake, disk)
            third = httpx.post(p.url + "/chat/completions", json=BODY)  # its journal fails
            _wait_for(lambda: len(p.exchanges) == 3)
            assert said == [
                f"lab proxy: error: cannot write the capture under {tmp_path} (No space left "
                "on device); recording stopped: new requests are forwarded unrecorded; stop the "
                "proxy to learn what is safe on disk"
            ]
            later = [httpx.post(p.url + "/chat/completions", json=BODY) for _ in range(2)]
            _wait_for(lambda: len(p.exchanges) == 5)
            health = httpx.get(p.url + "/lab-proxy/health")
        report = p.app.close_report()
    assert (health.status_code, health.json()) == (
        503,
        {
            "status": "not_recording",
            "in_flight": 0,
            "finished": 5,
            "unrecorded": 2,
            "recordings": 1,
        },
    )
    assert [r.status_code for r in [third, *later]] == [200, 200, 200]
    assert [ex.line().split()[-2] for ex in p.exchanges] == [
        "anomalies=-",
        "anomalies=-",
        "anomalies=-",
        "UNRECORDED",
        "UNRECORDED",
    ]
    assert report == (
        "lab proxy: error: cannot write the capture (No space left on device); 2 of 3 "
        f"recorded exchange(s) are safe on disk in 1 recording(s) under {tmp_path} (2 in "
        "Parquet parts, 0 in journals that lab.capture.open() recovers); 1 are cut or lost; "
        "2 request(s) after the failure were forwarded unrecorded"
    )
    disk.full = False
    assert [ex.end_reason for ex in open_capture(tmp_path).exchanges()] == ["eof", "eof"]


def test_with_require_recording_a_full_disk_refuses_new_requests_with_503(tmp_path, disk):
    with FakeServer(delay_scale=0) as fake:
        cfg = ProxyConfig(
            provider="openai",
            upstream=fake.base_url + "/v1",
            out=tmp_path,
            require_recording=True,
        )
        with ProxyServer(cfg, on_capture_error=lambda text: None) as p:
            _fill_after_two(p, fake, disk)
            httpx.post(p.url + "/chat/completions", json=BODY)
            _wait_for(lambda: len(p.exchanges) == 3)
            sent = len(fake.requests)
            refused = httpx.post(p.url + "/chat/completions", json=BODY)
            assert len(fake.requests) == sent  # never forwarded
    assert (refused.status_code, refused.json()) == (
        503,
        _error(
            503,
            "lab proxy: the capture cannot be written (see the proxy's stderr); "
            "--require-recording refuses requests it cannot record",
            "lab_proxy_not_recording",
        ),
    )
    assert p.app.close_report().endswith(
        "; 1 are cut or lost; 1 request(s) after the failure were refused with 503"
    )


def _rows_in_parts(root) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(f).num_rows for f in root.glob("*/streams-*.parquet"))


def test_lab_proxy_on_a_full_disk_exits_4_saying_what_is_safe_and_where(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    flag = tmp_path / "full"
    out = tmp_path / "captures"
    env = {**os.environ, "PYTHONPATH": str(root)}
    with FakeServer(delay_scale=0) as fake:
        cmd = [sys.executable, "-m", "tests.proxy_full_disk", str(flag), "proxy"]
        cmd += ["--provider", "openai", "--port", "0", "--upstream", fake.base_url + "/v1"]
        cmd += ["--out", str(out)]
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True, cwd=root
        )
        try:
            url = proc.stdout.readline().strip()
            for _ in range(2):
                httpx.post(url + "/chat/completions", json=BODY)
                proc.stdout.readline()
            _wait_for(lambda: _rows_in_parts(out) == 2)
            flag.touch()
            for _ in range(3):
                assert httpx.post(url + "/chat/completions", json=BODY).status_code == 200
                proc.stdout.readline()
        finally:
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
    assert proc.returncode == 4, err
    (recording,) = out.iterdir()
    assert err.splitlines() == [
        f"lab proxy: error: cannot write the capture under {out} (No space left on device); "
        "recording stopped: new requests are forwarded unrecorded; stop the proxy to learn "
        "what is safe on disk",
        "lab proxy: error: cannot write the capture (No space left on device); 2 of 3 "
        f"recorded exchange(s) are safe on disk in 1 recording(s) under {out} (2 in Parquet "
        "parts, 0 in journals that lab.capture.open() recovers); 1 are cut or lost; 2 "
        "request(s) after the failure were forwarded unrecorded",
    ]
    flag.unlink()
    assert len(open_capture(recording).exchanges()) == 2


# -- memory per exchange: a fixed window -----------------------------------------------------


def test_reads_past_spill_bytes_leave_memory_once_journaled_and_stay_in_the_journal(tmp_path):
    from lab.capture import CaptureWriter

    reads = [bytes([65 + i]) * 1000 for i in range(5)]
    writer = CaptureWriter(tmp_path, capture_id="spill", journal_interval=0, spill_bytes=2500)
    rec = writer.exchange(
        stream_id="s0",
        attempt=0,
        attempt_label="default",
        provider="openai",
        model="m",
        method="POST",
        url="http://127.0.0.1/v1/chat/completions",
        request_headers={},
        request_body=b"{}",
    )
    rec.on_response(200, {"content-type": "text/event-stream"}, "HTTP/1.1")
    held = []
    for r in reads:
        rec.on_read(r)
        held.append(sum(map(len, rec._reads)))
    assert held == [1000, 2000, 0, 0, 0]  # past 2,500 on disk, none is held
    rec.on_end("eof")
    writer.close()
    assert writer.in_journal_only == 1
    assert sorted(p.name for p in writer.path.iterdir()) == ["journal-00000.journal"]
    (ex,) = open_capture(writer.path).exchanges()
    assert (ex.reads, ex.end_reason) == (reads, "eof")


def test_a_long_proxied_exchange_is_held_only_up_to_the_window(tmp_path):
    def paced(head, sock, stop):
        sock.sendall(sse_headers())
        for _ in range(10):  # the journal is written between reads (every 50 ms at most)
            sock.sendall(b"%x\r\n%s\r\n" % (len(CHUNK * 10), CHUNK * 10))
            if stop.wait(0.1):
                return
        sock.sendall(b"0\r\n\r\n")

    with RawUpstream(paced) as up, _proxy(up.url + "/v1", tmp_path, window_bytes=1500) as p:
        got = httpx.post(p.url + "/chat/completions", json=BODY).content
        _wait_for(lambda: len(p.exchanges) == 1)
        (recording,) = p.recordings
    assert got == CHUNK * 100
    assert p.exchanges[0].line() == f"openai fake/clean 200 eof summary=skipped {len(got)}B"
    assert sorted(f.name for f in recording.iterdir()) == ["journal-00000.journal"]
    (ex,) = open_capture(recording).exchanges()
    assert (ex.body, ex.end_reason) == (got, "eof")
