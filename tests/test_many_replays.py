"""``lab.replay.one.many_replays``: a fleet replay shares one httpx client and one config
fingerprint across its streams, and its results are those of replays made one by one."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from recorded import recorded_exchange
from result_parts import everything

import lab.capture
import lab.replay.one
from lab.capture.records import RecordedRequest
from lab.config import LabConfig
from lab.replay import replay, replay_request
from lab.replay.one import many_replays

CAPTURES = Path(__file__).resolve().parents[1] / "captures"


def _full(result) -> tuple:
    """Everything a replay result holds, its recorded read times and divergence too."""
    return (*everything(result), result.read_t_ns, result.divergence)


def _clients() -> dict:
    """The clients of the many_replays block this thread is in (by read timeout)."""
    held = lab.replay.one._CLIENTS.get()
    assert held is not None and held.open
    return held.clients


def _clients_built(monkeypatch) -> list[int]:
    built: list[int] = []
    real = httpx.Client.__init__

    def init(self, *args, **kwargs):
        built.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(httpx.Client, "__init__", init)
    return built


def test_a_fleet_replay_builds_one_client_and_gives_the_results_of_one_by_one_replays(
    monkeypatch,
):
    requests = lab.capture.open(CAPTURES).requests()
    alone = [_full(replay_request(r)) for r in requests]  # a client each
    built = _clients_built(monkeypatch)
    assert [_full(r) for r in replay(lab.capture.open(CAPTURES))] == alone
    assert len(built) == 1
    built.clear()
    assert [_full(r) for r in replay(CAPTURES)] == alone  # unit by unit: still one
    assert len(built) == 1


def test_the_shared_clients_are_one_per_read_timeout_and_closed_when_the_block_ends():
    requests = lab.capture.open(CAPTURES).requests()[:2]
    slow = LabConfig(inactivity_timeout_s=7.5)
    with many_replays():
        for r in requests:
            replay_request(r)
            replay_request(r, config=slow)
        clients = _clients()
        assert sorted(clients) == sorted({LabConfig().inactivity_timeout_s, 7.5})
        assert clients[7.5][0].timeout == httpx.Timeout(30.0, read=7.5)
        with many_replays():  # nested: the outer block's clients
            assert _clients() is clients
        shared = [client for client, _ in clients.values()]
    assert lab.replay.one._CLIENTS.get() is None
    assert all(client.is_closed for client in shared)


def _cookie_exchange(stream_id: str, cookie: str | None) -> RecordedRequest:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    headers = {"content-type": "text/event-stream"}
    if cookie is not None:
        headers["set-cookie"] = cookie
    event = b'data: {"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
    exchange = recorded_exchange(
        stream_id=stream_id,
        provider="openrouter",
        model="m",
        url="https://openrouter.ai/api/v1/chat/completions",
        request_headers={"content-type": "application/json"},
        request_body=body.encode(),
        response_headers=headers,
        reads=[event, b"data: [DONE]\n\n"],
        read_t_ns=[1_000_000, 2_000_000],
    )
    return RecordedRequest(
        stream_id=stream_id, provider="openrouter", model="m", exchanges=[exchange]
    )


def test_a_cookie_a_recorded_response_set_does_not_follow_into_the_next_replay(monkeypatch):
    # a fresh client per replay never sent one; the shared client is cleared before each
    sent: list[httpx.Request] = []

    class Seeing(lab.replay.one.ReplayTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            sent.append(request)
            return super().handle_request(request)

    monkeypatch.setattr(lab.replay.one, "ReplayTransport", Seeing)
    first = _cookie_exchange("a", "__cf_bm=abc; Path=/; Domain=replay.invalid")
    second = _cookie_exchange("b", None)
    with many_replays():
        results = [replay_request(first)]
        ((client, _),) = _clients().values()
        assert client.cookies.get("__cf_bm") == "abc"  # stored, as httpx stores it
        results.append(replay_request(second))
    assert [r.text for r in results] == ["hi", "hi"]
    assert len(sent) == 2
    assert "cookie" not in sent[1].headers


def test_a_response_without_set_cookie_builds_no_urllib_views_in_the_block(monkeypatch):
    # httpx hands every response to the standard library's cookie jar through urllib
    # views of the request and response (~60 us a stream); without Set-Cookie they find
    # nothing, and the shared client's cookies skip them
    views: list[int] = []

    class Counted(httpx.Cookies._CookieCompatRequest):
        def __init__(self, request):
            views.append(1)
            super().__init__(request)

    monkeypatch.setattr(httpx.Cookies, "_CookieCompatRequest", Counted)
    requests = lab.capture.open(CAPTURES).requests()
    assert not any("set-cookie" in ex.response_headers for r in requests for ex in r.exchanges)
    alone = [_full(replay_request(r)) for r in requests]
    assert len(views) == sum(len(r.exchanges) for r in requests)  # one per response alone
    views.clear()
    with many_replays():
        assert [_full(replay_request(r)) for r in requests] == alone
    assert views == []
    views.clear()
    with many_replays():
        replay_request(_cookie_exchange("c", "k=v; Path=/"))
    assert views == [1]  # a Set-Cookie header: the jar reads it


def test_a_replay_outside_the_block_gets_a_client_of_its_own(monkeypatch):
    built = _clients_built(monkeypatch)
    request = lab.capture.open(CAPTURES).requests()[0]
    replay_request(request)
    replay_request(request)
    assert len(built) == 2
    assert lab.replay.one._CLIENTS.get() is None


def test_the_shared_client_refuses_a_request_when_no_replay_is_in_progress():
    with many_replays():
        replay_request(lab.capture.open(CAPTURES).requests()[0])
        ((client, _),) = _clients().values()
        with pytest.raises(RuntimeError, match="no replay in progress"):
            client.get("http://replay.invalid/")


def test_every_stream_to_one_endpoint_shares_one_parsed_url():
    # httpx parses a URL given as a string for every request (~50 us of a stream's cost)
    import lab.stream
    from lab.replay import replay_sse

    body = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'
    replay_sse("openrouter", body)
    hits = lab.stream._parsed_url.cache_info().hits
    assert replay_sse("openrouter", body, stream_id="again").text == "hi"
    assert lab.stream._parsed_url.cache_info().hits == hits + 1
    url = lab.stream._parsed_url("http://replay.invalid/api/v1/chat/completions")
    assert isinstance(url, httpx.URL)
    assert url is lab.stream._parsed_url("http://replay.invalid/api/v1/chat/completions")


def test_a_replayed_body_byte_equal_to_the_recording_is_not_parsed_again(monkeypatch):
    # the divergence check parses both bodies only when their bytes differ
    parsed: list[bytes] = []
    real = lab.replay.one._canonical

    def canonical(body):
        parsed.append(body)
        return real(body)

    monkeypatch.setattr(lab.replay.one, "_canonical", canonical)
    request = lab.capture.open(CAPTURES).requests()[0]
    assert replay_request(request).divergence == []
    assert parsed == []
    spaced = _cookie_exchange("d", None)  # recorded with json.dumps' default spacing
    assert b", " in spaced.exchanges[0].request_body
    assert replay_request(spaced).divergence == []  # the same body, other bytes: parsed
    assert len(parsed) == 2


@pytest.mark.parametrize(
    ("recorded", "sent"),
    [
        (b"not json", {"model": "m", "messages": [], "stream": True}),  # the stand-in body
        (b'{"model":"m","messages":[],"top_p":NaN}', None),  # what json.loads reads
        (b'{"model":"m","messages":[],"seed":123456789012345678901234567890}', None),
    ],
)
def test_a_recorded_request_body_is_read_as_the_standard_parser_reads_it(recorded, sent):
    request = _cookie_exchange("e", None)
    request.exchanges[0].request_body = recorded
    seen: list[bytes] = []

    class Seeing(lab.replay.one.ReplayTransport):
        def handle_request(self, req: httpx.Request) -> httpx.Response:
            seen.append(req.content)
            return super().handle_request(req)

    import unittest.mock

    with unittest.mock.patch.object(lab.replay.one, "ReplayTransport", Seeing):
        assert replay_request(request).text == "hi"
    expected = sent if sent is not None else json.loads(recorded)
    got = json.loads(seen[0])
    assert got.keys() == expected.keys() | {"stream"} or got.keys() == expected.keys()
    for key, value in expected.items():
        assert repr(got[key]) == repr(value)


def test_a_thread_running_in_a_copy_of_the_blocks_context_gets_clients_of_its_own(
    monkeypatch,
):
    # asyncio.to_thread copies the caller's context: the block's clients stay its thread's
    import asyncio

    request = lab.capture.open(CAPTURES).requests()[0]
    alone = _full(replay_request(request))
    built = _clients_built(monkeypatch)

    def in_thread() -> tuple:
        before = len(built)
        result = _full(replay_request(request))  # a client of its own, closed by run_stream
        assert len(built) == before + 1
        with many_replays():  # a block of this thread's own
            again = _full(replay_request(request))
            mine = _clients()
        return result, again, mine

    async def run() -> tuple:
        return await asyncio.to_thread(in_thread)

    with many_replays():
        replay_request(request)
        outer = dict(_clients())
        result, again, inner = asyncio.run(run())
        assert _clients() == outer  # the thread used none of these
    assert result == again == alone
    assert inner is not outer and not set(map(id, inner.values())) & set(map(id, outer.values()))


@pytest.mark.parametrize("parser", ["orjson", "json"])
def test_a_fleet_replays_the_same_with_every_installed_parser_in_a_process_of_its_own(parser):
    # a parser picked when lab is imported (LAB_JSON_PARSER): a module that bound
    # lab._json.loads at import time runs with it, which patching lab._json cannot reach
    import os
    import subprocess
    import sys

    script = (
        "import hashlib, lab.replay\n"
        f"rs = lab.replay.replay({str(CAPTURES)!r})\n"
        "print(hashlib.sha256(repr([(r.text, r.reasoning, r.finish_reason, r.divergence)"
        " for r in rs]).encode()).hexdigest())\n"
    )
    env = {**os.environ, "LAB_JSON_PARSER": parser}
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    import hashlib

    rs = replay(CAPTURES)
    mine = [(r.text, r.reasoning, r.finish_reason, r.divergence) for r in rs]
    assert done.stdout.strip() == hashlib.sha256(repr(mine).encode()).hexdigest()


def test_a_task_created_in_the_block_and_run_after_it_replays_on_a_client_of_its_own():
    import asyncio

    request = lab.capture.open(CAPTURES).requests()[0]
    alone = _full(replay_request(request))

    async def run() -> tuple:
        with many_replays():
            replay_request(request)
            late = asyncio.ensure_future(asyncio.sleep(0, result=None))
            task = asyncio.get_running_loop().create_task(_later(request))
        await late
        return await task  # runs in a copy of the block's context, after the block

    async def _later(req) -> tuple:
        await asyncio.sleep(0)
        return _full(replay_request(req))

    assert asyncio.run(run()) == alone


def test_a_block_remembers_a_bounded_number_of_config_fingerprints():
    # a caller that passes a dict per replay makes a new config each time
    import lab.config
    from lab.config import fingerprints_held

    with fingerprints_held():
        prints = {LabConfig(inactivity_timeout_s=1.0 + i).fingerprint() for i in range(100)}
        held = lab.config._HELD.get()
        assert held is not None and len(held) <= lab.config._HELD_MAX
    assert len(prints) == 100
