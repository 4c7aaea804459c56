"""End to end over a real loopback socket: record the fake scenarios, replay, compare."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from lab.demo import demo_requests
from lab.fakes import OPENROUTER_SCENARIOS
from lab.recorder import Recorder
from lab.replay import replay
from lab.request import build_body

CANARY = "sk-or-v1-CANARY-7f3a9c2e1b5d4f60"


@pytest.fixture(scope="module")
def recorded(fake_server, tmp_path_factory):
    out = tmp_path_factory.mktemp("captures")
    with Recorder(out, label="e2e") as rec:
        for item in demo_requests(2):
            rec.record(
                item["provider"],
                item["body"],
                base_url=fake_server.base_url + item["base_path"],
                api_key=CANARY,
            )
        return rec.path, list(rec.results)


def test_every_scenario_is_recorded_twice(recorded):
    _, live = recorded
    models = [r.model for r in live if r.provider == "openrouter"]
    assert [m for m in models if m in OPENROUTER_SCENARIOS] == [
        m for m in OPENROUTER_SCENARIOS for _ in range(2)
    ]
    assert len(live) == len(demo_requests(2))


@pytest.mark.parametrize(
    "field",
    [
        "text",
        "reasoning",
        "serving_provider",
        "usage",
        "finish_reason",
        "function_calls",
        "error",
        "guard_events",
    ],
)
def test_replay_equals_live_for_every_scenario(recorded, field):
    path, live = recorded
    replayed = replay(path)
    assert live
    assert [r.stream_id for r in replayed] == [r.stream_id for r in live]
    for a, b in zip(live, replayed, strict=True):
        assert getattr(b, field) == getattr(a, field), (a.model, field)
        assert b.chunks == a.chunks, a.model


def test_replay_reports_no_divergence_for_a_faithful_capture(recorded):
    path, _ = recorded
    replayed = replay(path)
    assert replayed
    assert all(r.divergence == [] for r in replayed)


def test_canary_api_key_never_reaches_disk(recorded):
    path, _ = recorded
    files = [p for p in Path(path).rglob("*") if p.is_file()]
    assert files
    for p in files:
        data = p.read_bytes()
        assert CANARY.encode() not in data, p
        assert b"CANARY-7f3a9c2e" not in data, p


def test_fake_server_received_the_canary_so_the_redaction_test_means_something(fake_server):
    assert any(r.headers.get("authorization") == f"Bearer {CANARY}" for r in fake_server.requests)


def test_think_leak_scenario_moves_tags_out_of_content(recorded):
    _, live = recorded
    leaks = [r for r in live if r.model == "fake/think-leak"]
    assert leaks
    for r in leaks:
        assert "<think" not in r.text.lower()
        assert "</think" not in r.text.lower()


def test_spill_scenario_strips_glued_reasoning_on_leaky_backends(recorded):
    _, live = recorded
    spills = [r for r in live if r.model == "fake/spill"]
    assert spills
    for r in spills:
        assert not r.text.startswith("must do.")


def test_live_result_has_recorded_read_timings(recorded):
    _, live = recorded
    assert live
    for r in live:
        times = r.read_t_ns[0]
        assert times == sorted(times)
        assert len(times) == r.attempts[0].n_reads


def test_build_body_for_openrouter_has_the_reference_base():
    body = build_body("openrouter", model="m", prompt="hi")
    assert body == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


# -- a recording cut on the recorder's side ------------------------------------------------


def _cut(request, reads: int | None, end_reason: str):
    """``request`` as a recorder that stopped after ``reads`` reads would have left it."""
    import dataclasses

    final = request.final
    if reads is None:  # stopped before the response came: no status, no reads
        cut = dataclasses.replace(final, status=None, reads=[], read_t_ns=[], end_reason=end_reason)
    else:
        cut = dataclasses.replace(
            final,
            reads=final.reads[:reads],
            read_t_ns=final.read_t_ns[:reads],
            end_reason=end_reason,
            error=None,
        )
    return dataclasses.replace(request, exchanges=[*request.exchanges[:-1], cut])


@pytest.fixture(scope="module")
def clean_request():
    import lab.capture

    cap = lab.capture.open(Path(__file__).resolve().parents[1] / "captures")
    return next(
        r
        for r in cap.requests()
        if r.provider == "openrouter" and r.model == "fake/clean" and len(r.final.reads) >= 4
    )


@pytest.mark.parametrize("end_reason", ["incomplete", "cancelled"])
def test_replay_of_a_cut_recording_keeps_its_end_reason_and_blames_no_provider(
    clean_request, end_reason
):
    from lab import anomalies
    from lab.replay import replay_request

    whole = replay_request(clean_request)
    result = replay_request(_cut(clean_request, 2, end_reason))
    assert result.attempts[-1].end_reason == end_reason
    assert result.attempts[-1].n_reads == 2
    assert "the recording ends here" in result.attempts[-1].error
    assert result.error is None and result.classifier is None
    assert whole.text.startswith(result.text) and len(result.text) < len(whole.text)
    found = anomalies.detect(result)
    assert "recording_cut" in found and "eof_without_terminator" not in found
    assert "recording_cut" not in anomalies.detect(whole)


def test_the_same_cut_recorded_as_an_eof_is_the_providers_truncation(clean_request):
    from lab import anomalies
    from lab.replay import replay_request

    result = replay_request(_cut(clean_request, 2, "eof"))
    assert result.attempts[-1].end_reason == "eof"
    assert "eof_without_terminator" in anomalies.detect(result)
    assert "recording_cut" not in anomalies.detect(result)


def test_replay_of_a_recording_cut_before_the_response_makes_up_no_error(clean_request):
    from lab import anomalies, tables
    from lab.replay import replay_request

    result = replay_request(_cut(clean_request, None, "incomplete"))
    assert result.attempts[-1].end_reason == "incomplete"
    assert result.error is None and result.text == ""
    assert anomalies.detect(result) == ["recording_cut"]
    row = tables.streams([result]).iloc[0]
    assert pd.isna(row["error_type"]) and pd.isna(row["classifier"])
