"""The two error paths of ``lab.stream.run_stream`` that end a stream early: a timeout or
read error after the first bytes arrived, and a replay whose ladder asks for an attempt the
capture does not hold. Both end in an error chunk, never in an exception."""

from __future__ import annotations

import httpx
import pytest

import lab.capture
from lab.replay import replay
from lab.stream import run_stream

BODY = {"model": "fake/clean", "messages": [{"role": "user", "content": "hi"}], "stream": True}
FIRST = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}\n\n'


class _CutStream(httpx.SyncByteStream):
    """A response body that yields ``reads`` and then raises ``error``."""

    def __init__(self, reads: list[bytes], error: Exception) -> None:
        self.reads = reads
        self.error = error

    def __iter__(self):
        yield from self.reads
        raise self.error


def _live(error: Exception, provider: str = "openrouter"):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            stream=_CutStream([FIRST], error),
        )

    return run_stream(
        provider, BODY, transport=httpx.MockTransport(handler), base_url="http://127.0.0.1:1"
    )


@pytest.mark.parametrize(
    "error, end_reason, message",
    [
        (httpx.ReadTimeout("timed out"), "timeout", "ReadTimeout: timed out"),
        (
            httpx.RemoteProtocolError("peer closed"),
            "read_error",
            "RemoteProtocolError: peer closed",
        ),
        (httpx.ReadError("connection reset"), "read_error", "ReadError: connection reset"),
    ],
)
def test_an_error_mid_stream_keeps_the_text_so_far_and_ends_in_one_error_chunk(
    error, end_reason, message
):
    r = _live(error)
    assert r.text == "Hel"
    [info] = r.attempts
    assert (info.status, info.end_reason, info.error, info.n_reads) == (
        200,
        end_reason,
        message,
        1,
    )
    assert [c.type for c in r.chunks] == ["text", "error"]
    assert r.error is r.chunks[-1].error
    assert r.divergence == []


@pytest.mark.parametrize(
    "provider, error, expected",
    [
        # the family's own mapping of a transport failure, as for one before any byte came
        # (tests/test_errors.py): OpenRouter's reference maps it to unknown, not retryable
        ("openrouter", httpx.ReadTimeout("timed out"), ("unknown", "unknown", False)),
        ("openai", httpx.ReadTimeout("timed out"), ("timeout", "unknown", True)),
        ("openai", httpx.ReadError("connection reset"), ("unknown", "unknown", False)),
    ],
)
def test_an_error_mid_stream_goes_through_the_familys_error_mapping(provider, error, expected):
    r = _live(error, provider)
    assert r.text == "Hel"
    assert (r.error.type, r.error.code, r.error.retryable) == expected


def _record(tmp_path, *, status: int, reads: list[bytes], end: str, error=None, body=BODY):
    import json

    with lab.capture.CaptureWriter(tmp_path / "cap", capture_id="errors") as writer:
        rec = writer.exchange(
            stream_id="s-1",
            attempt=0,
            attempt_label="default",
            provider="openrouter",
            model=body["model"],
            method="POST",
            url="http://127.0.0.1:1/api/v1/chat/completions",
            request_headers={"content-type": "application/json"},
            request_body=json.dumps(body).encode(),
        )
        rec.on_response(status, {"content-type": "text/event-stream"}, "HTTP/1.1")
        for read in reads:
            rec.on_read(read)
        rec.on_end(end, error)
    return tmp_path / "cap"


def test_a_recorded_timeout_replays_as_the_same_timeout_error(tmp_path):
    live = _live(httpx.ReadTimeout("timed out"))
    path = _record(
        tmp_path, status=200, reads=[FIRST], end="timeout", error=httpx.ReadTimeout("timed out")
    )
    [r] = replay(path)
    assert r.text == live.text == "Hel"
    assert r.error == live.error
    assert (r.attempts[0].end_reason, r.attempts[0].error) == ("timeout", "ReadTimeout: timed out")
    assert r.divergence == []


def test_replay_asking_for_an_attempt_the_capture_lacks_reports_divergence(tmp_path):
    # the recording holds only the rejected first attempt: the ladder's next rung (without
    # min_p) was never recorded, so the replay cannot serve it
    body = {**BODY, "model": "fake/reject-min-p", "min_p": 0.1}
    error = b'{"error":{"message":"min_p is not supported by this model","code":400}}'
    path = _record(tmp_path, status=400, reads=[error], end="eof", body=body)
    [r] = replay(path)
    assert [(a.attempt, a.status, a.end_reason) for a in r.attempts] == [
        (0, 400, "http_error"),
        (1, None, "not_recorded"),
    ]
    label = "targeted_drop_min_p"
    assert r.attempts[1].label == label
    assert r.divergence == [
        f"attempt 1 ({label}): replay has 1 recorded exchange(s); the client sent request #2 "
        "(POST http://replay.invalid/chat/completions)"
    ]
    assert [c.type for c in r.chunks] == ["error"]
    assert (r.error.type, r.error.code, r.error.retryable) == ("unknown", "replay_diverged", False)
    assert r.error.message == (
        f"replay diverged: the ladder asked for attempt 1 ({label}) "
        "but the capture holds no such exchange"
    )
