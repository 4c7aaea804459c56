"""Regression fixtures: every tests/fixtures/*/ replays to its golden; export, shrink, CLI.

``pytest tests/test_fixtures.py --update-goldens`` rewrites the goldens from a fresh replay
(review the diff of ``expected.json`` before committing it).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import lab.capture
import lab.guards.spill as spill_mod
from lab import fixtures
from lab.config import LabConfig
from lab.guards import SpillGuardConfig
from lab.replay import replay, replay_request

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
CAPTURES = ROOT / "captures"
FIXTURE_DIRS = fixtures.discover(FIXTURES)


def _bundled_stream(model: str, backend: str | None = None, attempts: int = 1) -> str:
    """The first bundled stream of ``model`` (served by ``backend``) with that many attempts.

    Looked up by content, not by id, so re-recording the bundled capture keeps these tests.
    """
    for req in lab.capture.open(CAPTURES).requests():
        if req.model != model or len(req.exchanges) != attempts:
            continue
        if backend is None or f'"provider":"{backend}"'.encode() in req.exchanges[-1].body:
            return req.stream_id
    raise LookupError(f"no bundled stream of {model} via {backend} with {attempts} attempts")


SPILL = _bundled_stream("fake/spill", "Novita")  # "must do.Hello!"
THINK_LEAK = _bundled_stream("fake/think-leak", "Chutes")
TRUNCATED = _bundled_stream("fake/truncated-tool-args", "Chutes")
LADDER = _bundled_stream("fake/reject-min-p", attempts=2)  # default>targeted_drop_min_p

REQUIRED = {
    "think-leak-chutes",
    "spill-novita",
    "truncated-tool-args-chutes",
    "reject-min-p-ladder-together",
    "mid-stream-error-together",
    "no-done-deepinfra",
    "spill-novita-shrunk",
}


@pytest.fixture(scope="module")
def capture():
    return lab.capture.open(CAPTURES)


def _copy(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copytree(FIXTURES / name, dst)
    return dst


def _without(request, index: int, attempt: int = -1):
    """The request with piece ``index`` (one event) of one attempt removed."""
    ex = request.exchanges[attempt]
    pieces, times = fixtures._pieces(ex, "events")
    keep = [k for k in range(len(pieces)) if k != index]
    return fixtures._with_pieces(
        request,
        attempt % len(request.exchanges),
        [pieces[k] for k in keep],
        [times[k] for k in keep],
    )


# -- the goldens -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", FIXTURE_DIRS, ids=[p.name for p in FIXTURE_DIRS])
def test_fixture_replays_to_its_golden(path, update_goldens):
    if update_goldens:
        applied = fixtures.update_golden(path)
        if applied:
            print(f"updated {path.name}:\n" + "\n".join(applied))
    diff = fixtures.compare_to_golden(path)
    assert diff == [], "\n".join(diff)


def test_the_required_fixtures_are_bundled():
    assert REQUIRED <= {p.name for p in FIXTURE_DIRS}


@pytest.mark.parametrize("path", FIXTURE_DIRS, ids=[p.name for p in FIXTURE_DIRS])
def test_fixture_directory_layout_and_metadata(path):
    assert sorted(f.name for f in (path / "capture").iterdir()) == [
        "chunks-00000.parquet",
        "streams-00000.parquet",
    ]
    meta = json.loads((path / "fixture.json").read_text(encoding="utf-8"))
    fx = fixtures.load_fixture(path)
    assert meta["name"] == path.name
    assert meta["stream_id"] == fx.request.stream_id == fx.expected["stream_id"]
    assert meta["provider"] == fx.request.provider
    assert meta["model"] == fx.request.model
    assert meta["source_capture_id"] == fx.request.capture_id
    assert meta["config_fingerprint"] == fx.config.fingerprint()
    assert meta["created_by"].startswith("lab.fixtures")
    assert meta["attempts"] == [ex.attempt_label for ex in fx.request.exchanges]
    assert (path / "stream.sse.txt").read_text(encoding="utf-8") == fixtures.render_sse(
        fx.request, name=path.name
    )


def test_fixture_goldens_show_what_each_stream_is_about():
    def golden(name):
        return fixtures.load_fixture(FIXTURES / name).expected

    think = golden("think-leak-chutes")
    assert think["serving_provider"] == "Chutes"
    assert {e["guard"] for e in think["guard_events"]} == {"think_stripper"}
    spill = golden("spill-novita")
    assert [e["moved"] for e in spill["guard_events"]] == ["must do."]
    assert spill["text"].startswith("Hello!")
    ladder = golden("reject-min-p-ladder-together")
    assert [a["label"] for a in ladder["attempts"]] == ["default", "targeted_drop_min_p"]
    assert ladder["attempts"][0]["status"] == 400
    assert golden("mid-stream-error-together")["error"]["type"] == "provider_overloaded"
    assert golden("no-done-deepinfra")["finish_reason"] is None
    truncated = golden("truncated-tool-args-chutes")
    assert truncated["function_calls"][0]["arguments_truncated"] is True


def test_the_degradation_fixture_replays_without_divergence():
    result = fixtures.replay_fixture(FIXTURES / "reject-min-p-ladder-together")
    assert result.divergence == []
    assert result.degradation_path == "default>targeted_drop_min_p"


# -- a deliberate change shows as a readable diff ----------------------------------------------


def test_switching_the_spill_guard_off_fails_the_comparison_with_a_readable_diff():
    off = LabConfig(spill=SpillGuardConfig(enabled=False))
    diff = fixtures.compare_to_golden(FIXTURES / "spill-novita", config=off)
    assert diff[0].startswith("--- spill-novita/expected.json")
    assert diff[1].startswith("+++ spill-novita (replayed now)")
    removed = "\n".join(line for line in diff if line.startswith("-"))
    added = "\n".join(line for line in diff if line.startswith("+"))
    assert '"moved": "must do."' in removed  # the guard event is gone
    assert '"text": "must do.Hello!' in added  # the leaked reasoning is back in the answer
    assert '"text": "Hello!' in removed


def test_a_monkeypatched_guard_rule_fails_the_comparison(monkeypatch):
    original = spill_mod.evaluate_spill

    def without_strip_rules(text, config=None):
        rules_off = {"strip_on_answer_start": False, "strip_on_multi_word_clause": False}
        return original(text, (config or SpillGuardConfig()).model_copy(update=rules_off))

    monkeypatch.setattr(spill_mod, "evaluate_spill", without_strip_rules)
    diff = fixtures.compare_to_golden(FIXTURES / "spill-novita-shrunk")
    assert any(line.startswith("-") and "must do." in line for line in diff)
    assert any(line.startswith("+") and '"text": "must do.Hello!"' in line for line in diff)


def test_update_golden_makes_a_changed_fixture_pass_again(tmp_path):
    path = _copy("spill-novita", tmp_path)
    LabConfig(spill=SpillGuardConfig(enabled=False)).save(path / "config.json")
    before = fixtures.compare_to_golden(path)
    assert before and any("must do." in line for line in before)
    applied = fixtures.update_golden(path)
    assert applied == before
    assert fixtures.compare_to_golden(path) == []
    expected = json.loads((path / "expected.json").read_text(encoding="utf-8"))
    assert expected["guard_events"] == []
    # the repository's copy is untouched
    assert fixtures.compare_to_golden(FIXTURES / "spill-novita") == []


def _diverged_ladder(tmp_path: Path) -> Path:
    """The ladder fixture replayed with the ladder off: it uses 1 of its 2 recorded
    attempts. Its golden is rewritten to that very result, so only the divergence differs."""
    path = _copy("reject-min-p-ladder-together", tmp_path)
    LabConfig(degrade=False).save(path / "config.json")
    (path / "expected.json").write_text(
        fixtures.golden_text(fixtures.replay_fixture(path)), encoding="utf-8"
    )
    return path


def test_a_replay_that_diverged_fails_the_comparison_even_when_the_result_matches(tmp_path):
    path = _diverged_ladder(tmp_path)
    assert fixtures.compare_to_golden(path) == [
        "! reject-min-p-ladder-together: replay diverged: replay used 1 of 2 recorded attempts"
    ]


def test_update_golden_refuses_a_replay_that_diverged(tmp_path):
    path = _diverged_ladder(tmp_path)
    before = (path / "expected.json").read_bytes()
    with pytest.raises(fixtures.FixtureError) as info:
        fixtures.update_golden(path)
    assert str(info.value) == (
        "reject-min-p-ladder-together: the replay diverged from its recording, not updating "
        "its golden: replay used 1 of 2 recorded attempts"
    )
    assert (path / "expected.json").read_bytes() == before


def test_update_golden_on_a_current_golden_changes_nothing(tmp_path):
    path = _copy("think-leak-chutes", tmp_path)
    before = (path / "expected.json").read_bytes()
    assert fixtures.update_golden(path) == []
    assert (path / "expected.json").read_bytes() == before


# -- export ------------------------------------------------------------------------------------


def test_export_is_deterministic_and_matches_the_committed_fixture(capture, tmp_path):
    committed = fixtures.load_fixture(FIXTURES / "spill-novita")
    source = lab.capture.open(FIXTURES / "spill-novita" / "capture")
    path = fixtures.export_fixture(
        source, committed.request.stream_id, tmp_path / "committed", "spill-novita"
    )
    for name in ("stream.sse.txt", "expected.json", "fixture.json"):
        assert (path / name).read_bytes() == (FIXTURES / "spill-novita" / name).read_bytes()
    first = fixtures.export_fixture(capture, SPILL, tmp_path / "first", "spill-novita")
    again = fixtures.export_fixture(capture, SPILL, tmp_path / "again", "spill-novita")
    for name in ("stream.sse.txt", "expected.json", "fixture.json"):
        assert (again / name).read_bytes() == (first / name).read_bytes()
    assert fixtures.render_sse(capture.request(SPILL), name="x") == fixtures.render_sse(
        capture.request(SPILL), name="x"
    )


def test_exported_capture_holds_exactly_the_streams_exchanges_and_reads(capture, tmp_path):
    path = fixtures.export_fixture(capture, LADDER, tmp_path, "ladder")
    small = lab.capture.open(path / "capture")
    (req,) = small.requests()
    src = capture.request(LADDER)
    assert len(req.exchanges) == len(src.exchanges) == 2
    for a, b in zip(req.exchanges, src.exchanges, strict=True):
        assert (a.attempt, a.attempt_label, a.status, a.end_reason) == (
            b.attempt,
            b.attempt_label,
            b.status,
            b.end_reason,
        )
        assert a.reads == b.reads and a.read_t_ns == b.read_t_ns
        assert a.request_body == b.request_body
        assert a.request_headers == b.request_headers
    assert set(small.streams["stream_id"]) == {LADDER}
    assert small.metadata["capture_ids"] == [src.capture_id]
    # replaying the small capture gives what replaying the big one gives
    assert replay_request(req).to_dict() == replay_request(src).to_dict()


def test_export_with_a_config_stores_it_and_goldens_under_it(capture, tmp_path):
    off = LabConfig(spill=SpillGuardConfig(enabled=False))
    path = fixtures.export_fixture(capture, SPILL, tmp_path, "spill-off", config=off)
    assert LabConfig.load(path / "config.json") == off
    meta = json.loads((path / "fixture.json").read_text(encoding="utf-8"))
    assert meta["config_fingerprint"] == off.fingerprint()
    assert fixtures.load_fixture(path).expected["guard_events"] == []
    assert fixtures.compare_to_golden(path) == []


def test_export_refuses_an_existing_directory_unless_overwrite(capture, tmp_path):
    fixtures.export_fixture(capture, SPILL, tmp_path, "twice")
    with pytest.raises(fixtures.FixtureError, match="already exists"):
        fixtures.export_fixture(capture, SPILL, tmp_path, "twice")
    fixtures.export_fixture(capture, SPILL, tmp_path, "twice", overwrite=True)


def test_unknown_stream_id_lists_some_available_ids(capture):
    with pytest.raises(fixtures.FixtureError) as info:
        fixtures.export_fixture(capture, "nope", "/nonexistent")
    message = str(info.value)
    assert "unknown stream id 'nope'" in message
    first = capture.requests()[0].stream_id
    assert first in message and f"({len(capture.requests())} in all)" in message


def test_a_unique_stream_id_prefix_is_enough(capture, tmp_path):
    path = fixtures.export_fixture(capture, SPILL[:-4], tmp_path, "prefix")
    assert fixtures.load_fixture(path).request.stream_id == SPILL


# -- secrets -----------------------------------------------------------------------------------


def _header_values(path: Path) -> list[tuple[str, str]]:
    table = pq.read_table(path / "capture" / "streams-00000.parquet")
    out = []
    for column in ("request_headers", "response_headers"):
        for text in table[column].to_pylist():
            out += [(k.lower(), v) for k, v in json.loads(text or "{}").items()]
    return out


@pytest.mark.parametrize("path", FIXTURE_DIRS, ids=[p.name for p in FIXTURE_DIRS])
def test_bundled_fixture_captures_hold_no_authorization_value(path):
    headers = _header_values(path)
    assert headers  # the fixture recorded its headers: the check below has something to read
    secret = ("authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie")
    assert {value for key, value in headers if key in secret} <= {"[REDACTED]"}


def test_exporting_a_capture_with_keys_keeps_them_redacted(tmp_path):
    secret = "sk-or-v1-0123456789abcdef"
    with lab.capture.CaptureWriter(tmp_path / "cap", capture_id="keys") as writer:
        rec = writer.exchange(
            stream_id="s-keys",
            attempt=0,
            attempt_label="default",
            provider="openrouter",
            model="fake/clean",
            method="POST",
            url="http://127.0.0.1:1/api/v1/chat/completions?key=" + secret,
            request_headers={"Authorization": f"Bearer {secret}", "x-api-key": secret},
            request_body=b'{"model":"fake/clean","messages":[],"stream":true}',
        )
        rec.on_response(200, {"content-type": "text/event-stream"}, "HTTP/1.1")
        rec.on_read(b'data: {"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n')
        rec.on_read(b"data: [DONE]\n\n")
        rec.on_end("eof")
    path = fixtures.export_fixture(tmp_path / "cap", "s-keys", tmp_path / "fx", "keys")
    values = dict(_header_values(path))
    assert values["authorization"] == "[REDACTED]"
    assert values["x-api-key"] == "[REDACTED]"
    files = [f for f in path.rglob("*") if f.is_file()]
    assert files
    for f in files:
        assert secret.encode() not in f.read_bytes(), f
    assert fixtures.load_fixture(path).expected["text"] == "hi"


# -- shrinking ---------------------------------------------------------------------------------


def test_split_events_reassembles_every_recorded_body(capture):
    exchanges = [ex for request in capture.requests() for ex in request.exchanges]
    assert exchanges
    for ex in exchanges:
        assert b"".join(fixtures.split_events(ex.body)) == ex.body


def test_split_events_keeps_each_events_blank_line_and_comments_apart():
    body = b": ping\r\n\r\ndata: a\r\ndata: b\r\n\r\nevent: x\ndata: c\n\ndata: cut"
    assert fixtures.split_events(body) == [
        b": ping\r\n",
        b"\r\ndata: a\r\ndata: b\r\n\r\n",
        b"event: x\ndata: c\n\n",
        b"data: cut",
    ]
    assert fixtures.split_events(b'{"error": "not sse"}') == [b'{"error": "not sse"}']


def test_ddmin_finds_the_one_minimal_subset():
    needed = {3, 17, 42}
    kept, tests, capped = fixtures.ddmin(list(range(100)), lambda xs: needed <= set(xs))
    assert kept == [3, 17, 42] and not capped
    assert tests < 200


def test_ddmin_stops_at_the_test_cap_with_a_passing_result():
    needed = set(range(0, 100, 7))
    kept, tests, capped = fixtures.ddmin(
        list(range(100)), lambda xs: needed <= set(xs), max_tests=10
    )
    assert capped and tests == 10
    assert needed <= set(kept)


def test_shrinking_the_spill_stream_keeps_the_spill_and_is_one_minimal(capture):
    pred = fixtures.predicate_from_spec("spill_guard")
    res = fixtures.shrink_request(capture.request(SPILL), "spill_guard")
    assert (res.before, res.after) == (21, 2)
    assert not res.capped and res.replays <= 30
    shrunk = res.request
    result = replay_request(shrunk)
    assert pred(result)
    assert result.text == "Hello!"
    assert [e.moved for e in result.guard_events] == ["must do."]
    for k in range(res.after):
        assert not pred(replay_request(_without(shrunk, k))), f"piece {k} is not needed"


def test_shrinking_by_anomaly_is_one_minimal(capture):
    pred = fixtures.predicate_from_spec("anomaly=truncated_tool_arguments")
    shrunk = fixtures.shrink(capture.request(TRUNCATED), pred)
    n = len(shrunk.final.reads)
    assert 0 < n < len(fixtures.split_events(capture.request(TRUNCATED).final.body))
    assert pred(replay_request(shrunk))
    for k in range(n):
        assert not pred(replay_request(_without(shrunk, k)))


def test_shrinking_over_reads_keeps_the_recorded_read_boundaries(capture):
    source = capture.request(THINK_LEAK)
    shrunk = fixtures.shrink(source, "guard=think_stripper", granularity="reads")
    assert set(shrunk.final.reads) <= set(source.final.reads)
    assert len(shrunk.final.reads) < len(source.final.reads)
    assert fixtures.predicate_from_spec("guard=think_stripper")(replay_request(shrunk))


def test_shrinking_by_a_guard_keeps_the_rule_that_fired_so_a_leak_stays_that_leak(capture):
    """A think block shrunk by ``guard=think_stripper`` alone could end at one ``"<thi"``
    event the guard drops by another rule (``dropped_partial_tag``); the rule is pinned."""
    res = fixtures.shrink_request(capture.request(THINK_LEAK), "guard=think_stripper")
    assert res.predicate == "guard=think_stripper:rule=think_block"
    events = replay_request(res.request).guard_events
    assert [(e.guard, e.detail["rule"], e.moved) for e in events] == [
        ("think_stripper", "think_block", "The user is asking")
    ]


def test_rule_star_lets_shrinking_reach_any_rule_of_the_guard(capture):
    res = fixtures.shrink_request(capture.request(THINK_LEAK), "guard=think_stripper:rule=*")
    events = replay_request(res.request).guard_events
    assert res.after == 1
    assert [(e.detail["rule"], e.moved) for e in events] == [("dropped_partial_tag", "<thi")]


def _long_spill_stream(capture, n: int):
    """The Novita spill stream blown up to ``2 n + 3`` events (n reasoning, n content)."""
    source = capture.request(SPILL)

    def event(delta):
        chunk = {"provider": "Novita", "choices": [{"index": 0, "delta": delta}]}
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    reads = [b": OPENROUTER PROCESSING\n\n"]
    reads += [event({"content": "", "reasoning": f" r{i}"}) for i in range(n)]
    reads += [event({"content": "must do.Hello!"})]
    reads += [event({"content": f" c{i}"}) for i in range(n)]
    reads += [b"data: [DONE]\n\n"]
    final = replace(source.final, reads=reads, read_t_ns=[1000 * i for i in range(len(reads))])
    return replace(source, exchanges=[final])


def test_a_4000_event_stream_shrinks_to_a_handful_with_few_replays(capture, capsys):
    res = fixtures.shrink_request(_long_spill_stream(capture, 2000), "spill_guard")
    assert res.before == 4003 and res.after == 2 and not res.capped
    assert res.replays < 60
    assert "shrink 4003 events" in capsys.readouterr().err  # the tqdm progress bar


def test_the_replay_cap_stops_early_with_a_warning_and_a_passing_stream(capture):
    with pytest.warns(UserWarning, match="stopped after 5 replays"):
        res = fixtures.shrink_request(
            _long_spill_stream(capture, 200), "spill_guard", max_replays=5, progress=False
        )
    assert res.capped and res.after < res.before
    assert fixtures.predicate_from_spec("spill_guard")(replay_request(res.request))


def test_shrink_keeps_earlier_attempts_intact(capture):
    source = capture.request(LADDER)
    shrunk = fixtures.shrink(source, lambda r: "brûlée" in r.text)
    assert shrunk.exchanges[0] == source.exchanges[0]
    result = replay_request(shrunk)
    assert result.degradation_path == "default>targeted_drop_min_p" and "brûlée" in result.text


def test_shrink_refuses_a_predicate_the_stream_does_not_satisfy(capture):
    with pytest.raises(fixtures.FixtureError, match="does not hold"):
        fixtures.shrink(capture.request(THINK_LEAK), "spill_guard")


def test_the_bundled_shrunk_fixture_records_how_it_was_made():
    meta = json.loads((FIXTURES / "spill-novita-shrunk" / "fixture.json").read_text())
    assert meta["predicate"] == "spill_guard"
    assert meta["shrink"]["before"] == 21 and meta["shrink"]["after"] == 2
    fx = fixtures.load_fixture(FIXTURES / "spill-novita-shrunk")
    assert len(fx.request.final.reads) == 2
    assert fixtures.predicate_from_spec(meta["predicate"])(fx.replay())


# -- predicates --------------------------------------------------------------------------------


def test_predicate_specs():
    err = fixtures.replay_fixture(FIXTURES / "mid-stream-error-together")
    spill = fixtures.replay_fixture(FIXTURES / "spill-novita")
    credit = fixtures.replay_fixture(FIXTURES / "credit-affordability-ladder")
    P = fixtures.predicate_from_spec
    assert P("error_type=provider_overloaded")(err) and not P("error_type=rate_limit")(err)
    assert P("anomaly=error_in_200_stream")(err) and not P("anomaly=error_in_200_stream")(spill)
    assert P("spill_guard")(spill) and P("guard=spill_guard")(spill) and not P("spill_guard")(err)
    assert P("guard=spill_guard:rule=answer_start")(spill)
    assert not P("guard=spill_guard:rule=think_block")(spill)
    assert P("spill_guard:rule=*")(spill)
    assert P("classifier=credit_affordability")(credit)
    assert not P("classifier=context_length")(credit)
    fn = lambda r: True  # noqa: E731
    assert P(fn) is fn


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "nonsense",
        "guard=",
        "anomaly=not_a_detector",
        "x=y",
        "guard=think_stripper:rule=",
        "guard=think_stripper:rul=x",
    ],
)
def test_bad_predicate_specs_raise_one_line_errors(spec):
    with pytest.raises(fixtures.FixtureError) as info:
        fixtures.predicate_from_spec(spec)
    assert "\n" not in str(info.value)


# -- command line ------------------------------------------------------------------------------


def test_cli_export_end_to_end(tmp_path, capsys):
    from lab.cli import main

    rc = main(
        ["fixtures", "export", str(CAPTURES), "--stream", SPILL, "--stream", THINK_LEAK,
         "--name", "pair", "--dest", str(tmp_path)]
    )  # fmt: skip
    assert rc == 0
    assert sorted(p.name for p in fixtures.discover(tmp_path)) == ["pair-1", "pair-2"]
    for p in fixtures.discover(tmp_path):
        assert fixtures.compare_to_golden(p) == []
    assert "exported" in capsys.readouterr().out
    rc = main(["fixtures", "export", str(CAPTURES), "--stream", SPILL, "--dest", str(tmp_path)])
    assert rc == 0
    assert (tmp_path / f"spill-novita-{SPILL[-6:]}").is_dir()


def test_cli_shrink_end_to_end(tmp_path, capsys):
    from lab.cli import main

    rc = main(
        ["fixtures", "shrink", str(CAPTURES), "--stream", SPILL, "--predicate", "spill_guard",
         "--dest", str(tmp_path)]
    )  # fmt: skip
    assert rc == 0
    out = capsys.readouterr().out
    assert "21 events -> 2" in out
    (path,) = fixtures.discover(tmp_path)
    assert path.name == f"spill-novita-{SPILL[-6:]}-shrunk"
    assert fixtures.compare_to_golden(path) == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["export", "CAP", "--stream", "nope"], "unknown stream id 'nope'"),
        (["shrink", "CAP", "--stream", SPILL, "--predicate", "bogus"], "bad predicate 'bogus'"),
        (["shrink", "CAP", "--stream", SPILL, "--predicate", "error_type=x"], "does not hold"),
        (["export", "/no/such/capture", "--stream", SPILL], "no such file"),
        (["export", "CAP", "--stream", SPILL, "--name", "a/b"], "fixture name"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(argv, message, tmp_path, capsys):
    from lab.cli import main

    argv = [str(CAPTURES) if a == "CAP" else a for a in argv]
    rc = main(["fixtures", *argv, "--dest", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("lab: error:") and err.count("\n") == 1
    assert message in err


def test_fixtures_of_one_recording_side_by_side_open_as_all_their_requests(capture, tmp_path):
    # a fixture keeps its recording's capture id and exchange numbers: a directory of
    # fixtures exported from one capture opens (and replays) as every fixture's request,
    # with no "copies" dropped or warned about
    import warnings

    fixtures.export_fixture(capture, SPILL, tmp_path, "spill")
    fixtures.export_fixture(capture, LADDER, tmp_path, "ladder")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a CaptureWarning about copies fails the test
        both = lab.capture.open(tmp_path)
        assert sorted(r.stream_id for r in both.requests()) == sorted([SPILL, LADDER])
        replayed = replay(tmp_path)
    assert sorted(r.stream_id for r in replayed) == sorted([SPILL, LADDER])
    assert both.metadata["capture_ids"] == [capture.request(SPILL).capture_id]
    for stream in (SPILL, LADDER):  # each keeps its recording's exchange numbers
        got = [ex.exchange for ex in both.request(stream).exchanges]
        assert got == [ex.exchange for ex in capture.request(stream).exchanges]
