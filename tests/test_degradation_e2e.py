"""The degradation ladder end to end over loopback: what the server received is the plan,
the capture holds every attempt, replay reproduces it, a changed ladder config diverges."""

from __future__ import annotations

import json

import pytest

import lab.capture
from lab.degrade import DegradationPlan
from lab.demo import demo_requests
from lab.providers import get_adapter
from lab.recorder import Recorder
from lab.replay import replay

CANARY = "sk-or-v1-DEGRADE-CANARY-0d4c1a"
LADDER_SCENARIOS = [
    "fake/reject-min-p",
    "fake/reject-images",
    "fake/no-endpoints",
    "fake/overloaded-then-ok",
    "fake/sse-error-precommit",
    "fake/credit-affordability",
]


@pytest.fixture(scope="module")
def ladder_run(tmp_path_factory):
    from lab.fakes import FakeServer

    items = [
        i
        for i in demo_requests(1, families=("openrouter",))
        if i["body"]["model"] in LADDER_SCENARIOS
    ]
    out = tmp_path_factory.mktemp("ladder")
    with FakeServer(delay_scale=0) as server, Recorder(out) as rec:
        for item in items:
            rec.record(
                "openrouter", item["body"], base_url=server.base_url + "/api/v1", api_key=CANARY
            )
        received = [(r.model, r.body, r.status) for r in server.requests]
        return rec.path, list(rec.results), received


def _planned_bodies(result, received_for_model):
    """Re-run the pure planner on the failures the server answered with."""
    adapter = get_adapter("openrouter")()
    first_body = received_for_model[0][1]
    plan = DegradationPlan(
        first_body,
        mandatory_keys=adapter.mandatory_keys,
        degrade_on_502=adapter.degrade_on_502,
    )
    bodies = [plan.current.body]
    for info in result.attempts[:-1]:
        nxt = plan.on_failure(info.status, info.error)
        assert nxt is not None
        bodies.append(nxt.body)
    return bodies


@pytest.mark.parametrize("model", LADDER_SCENARIOS)
def test_server_received_exactly_the_planned_ladder(ladder_run, model):
    _, results, received = ladder_run
    result = next(r for r in results if r.model == model)
    mine = [x for x in received if x[0] == model]
    assert [b for _, b, _ in mine] == _planned_bodies(result, mine)
    assert len(mine) == len(result.attempts)


def test_targeted_drop_and_image_strip_paths(ladder_run):
    _, results, _ = ladder_run
    paths = {r.model: r.degradation_path for r in results}
    assert paths["fake/reject-min-p"] == "default>targeted_drop_min_p"
    assert paths["fake/reject-images"] == "default>targeted_strip_images"
    assert paths["fake/overloaded-then-ok"].startswith("default>")


def test_image_strip_leaves_the_reference_notice(ladder_run):
    _, _, received = ladder_run
    bodies = [b for m, b, _ in received if m == "fake/reject-images"]
    last = json.dumps(bodies[-1])
    assert "image_url" not in last
    assert "[System:" in last


def test_capture_holds_every_attempt_with_its_label(ladder_run):
    path, results, _ = ladder_run
    cap = lab.capture.open(path)
    assert results
    for r in results:
        rows = cap.streams[cap.streams["stream_id"] == r.stream_id].sort_values("attempt")
        assert list(rows["attempt_label"]) == [a.label for a in r.attempts]
        assert list(rows["status"].astype(int)) == [a.status for a in r.attempts]


def test_replay_reproduces_every_ladder(ladder_run):
    path, results, _ = ladder_run
    replayed = replay(path)
    assert results
    for a, b in zip(results, replayed, strict=True):
        assert b.to_dict() == a.to_dict()
        assert b.divergence == []


def test_replay_with_the_ladder_switched_off_reports_divergence(ladder_run):
    path, results, _ = ladder_run
    replayed = replay(path, config={"degrade": False})
    by_model = {r.model: r for r in replayed}
    diverged = by_model["fake/reject-min-p"]
    assert diverged.divergence == ["replay used 1 of 2 recorded attempts"]
    assert diverged.error is not None
    clean = [r for r in replayed if len(r.attempts) == 1 and r.model == "fake/sse-error-precommit"]
    assert clean
    assert all(r.divergence == [] for r in clean)


def test_no_attempt_leaves_the_api_key_in_the_capture(ladder_run):
    path, _, _ = ladder_run
    files = [f for f in path.rglob("*") if f.is_file()]
    assert files
    for f in files:
        assert CANARY.encode() not in f.read_bytes(), f


def _mock_run(provider: str, body: dict, responses: list):
    import httpx

    from lab.stream import run_stream

    sent: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return responses.pop(0)

    result = run_stream(
        provider, body, transport=httpx.MockTransport(handler), base_url="http://x/v1"
    )
    return result, sent


def test_a_gemini_failure_is_its_error_chunk_not_a_degradation_ladder():
    """Gemini has no degradation ladder: every error becomes its error chunk
    (docs/reference.md, "5.3 Gemini errors"); only OpenRouter and the OpenAI-compatible
    adapters degrade."""
    import httpx

    body = {
        "model": "gemini-2.5-flash",
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"temperature": 1},
    }
    ok = "data: " + json.dumps({"candidates": [{"content": {"parts": [{"text": "hello"}]}}]})
    bad = {"error": {"code": 400, "message": "Bad Request", "status": "INVALID_ARGUMENT"}}
    result, sent = _mock_run(
        "google", body, [httpx.Response(400, json=bad), httpx.Response(200, text=ok)]
    )
    assert [a.label for a in result.attempts] == ["default"]
    assert len(sent) == 1 and "generationConfig" in sent[0]
    assert result.error is not None and result.error.status == 400


def test_an_anthropic_rejected_parameter_is_the_error_not_a_targeted_drop():
    import httpx

    body = {"model": "claude-x", "messages": [], "max_tokens": 64, "min_p": 0.1}
    bad = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "min_p: Extra inputs are not permitted",
        },
    }
    result, sent = _mock_run("anthropic", body, [httpx.Response(400, json=bad)])
    assert [a.label for a in result.attempts] == ["default"] and len(sent) == 1
    assert result.error is not None and "min_p" in result.error.message
