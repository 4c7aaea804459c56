"""``lab sweep`` against the fake OpenRouter: per-backend pinning, intervals that tell the
leaky backends from the clean ones, 429 back-off, the request budget, resume and Ctrl-C."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from lab import sweep, tables
from lab.cli import main
from lab.fakes import FakeServer

ROOT = Path(__file__).resolve().parents[1]
MODEL = "fake/think-leak"
POOL = ["Chutes", "DeepInfra", "SiliconFlow", "Together", "Fireworks", "Nebius"]
LEAKY = {"Chutes", "SiliconFlow"}  # Chutes always, SiliconFlow half its visits


@pytest.fixture
def prompts(tmp_path: Path) -> Path:
    path = tmp_path / "prompts.jsonl"
    path.write_text(
        '"Hi! Any café tips?"\n'
        "\n"
        '{"messages": [{"role": "user", "content": "Where is the bakery?"}], "max_tokens": 256}\n',
        encoding="utf-8",
    )
    return path


def _plan(prompts: Path, base: str, n: int = 10, backends=POOL) -> list[sweep.SweepItem]:
    targets = sweep.openrouter_targets(MODEL, backends, base_url=base)
    return sweep.sweep_plan("openrouter", sweep.load_prompts(prompts), targets, n=n)


def _chat(server: FakeServer) -> list:
    return [r for r in server.requests if r.method == "POST"]


def _sent_per_cell(server: FakeServer) -> collections.Counter:
    """Requests the server received per (pinned backend, user message), 429s left out."""
    return collections.Counter(
        (r.body["provider"]["order"][0], r.body["messages"][-1]["content"])
        for r in _chat(server)
        if r.status != 429
    )


# --------------------------------------------------------------------------- input


def test_load_prompts_reads_strings_and_bodies_and_skips_blank_lines(prompts):
    assert sweep.load_prompts(prompts) == [
        {"prompt": "Hi! Any café tips?", "_line": 1},
        {
            "messages": [{"role": "user", "content": "Where is the bakery?"}],
            "max_tokens": 256,
            "_line": 3,
        },
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("hello\n", "p.jsonl:1: not JSON (Expecting value); a line is a JSON string"),
        ('"ok"\n{"tools": []}\n', "p.jsonl:2: a request body needs 'messages' (a list) or"),
        ("[1, 2]\n", "p.jsonl:1: a line is a JSON string or object, not list"),
        ('"  "\n', "p.jsonl:1: an empty prompt"),
        ("\n\n", "p.jsonl: no prompt in the file"),
    ],
)
def test_load_prompts_says_which_line_is_wrong(tmp_path, text, message):
    path = tmp_path / "p.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(sweep.SweepError) as err:
        sweep.load_prompts(path)
    assert message in str(err.value)


def test_plan_pins_each_backend_and_interleaves_targets(prompts):
    plan = _plan(prompts, "http://127.0.0.1:9/api/v1", n=2, backends=["Chutes", "Nebius"])
    assert [(i.target.label, i.prompt, i.rep) for i in plan] == [
        ("Chutes", 1, 0),
        ("Nebius", 1, 0),
        ("Chutes", 3, 0),
        ("Nebius", 3, 0),
        ("Chutes", 1, 1),
        ("Nebius", 1, 1),
        ("Chutes", 3, 1),
        ("Nebius", 3, 1),
    ]
    body = plan[2].body
    assert body["provider"] == {"order": ["Chutes"], "allow_fallbacks": False}
    assert (body["model"], body["stream"], body["max_tokens"]) == (MODEL, True, 256)
    assert len({i.key for i in plan}) == len(plan)
    # keys do not depend on the plan's order or size: a rerun finds the same ones
    again = _plan(prompts, "http://127.0.0.1:9/api/v1", n=3, backends=["Nebius", "Chutes"])
    assert {i.key for i in plan} <= {i.key for i in again}


def test_discover_backends_asks_the_endpoints_api(fake_server):
    base = fake_server.base_url + "/api/v1"
    assert sweep.discover_backends(MODEL, base_url=base) == POOL
    with pytest.raises(sweep.SweepError, match="answered HTTP 404"):
        sweep.discover_backends("fake/nope", base_url=base)
    with pytest.raises(sweep.SweepError, match="OpenRouter ids are author/slug"):
        sweep.discover_backends("nope", base_url=base)


# --------------------------------------------------------------------------- running


def test_sweep_finds_the_leaky_backends_with_intervals_that_exclude_the_clean_ones(
    prompts, tmp_path
):
    with FakeServer(delay_scale=0) as srv:
        plan = _plan(prompts, srv.base_url + "/api/v1")  # the CLI's default K = 10
        report = sweep.run_sweep(plan, provider="openrouter", out=tmp_path / "o", progress=False)
        assert (report.planned, report.sent, report.finished, report.missing) == (120, 120, 120, 0)
        assert set(_sent_per_cell(srv).values()) == {10}
    st = sweep.sweep_streams(tmp_path / "o")
    assert len(st) == 120 and not st["pinned_elsewhere"].any()
    bb = tables.by_backend(st).set_index("serving_provider")
    assert sorted(bb.index[bb["leak_worse"]]) == sorted(LEAKY)
    assert bb.loc["Chutes", ["leaked", "streams"]].tolist() == [20, 20]
    assert bb.loc["SiliconFlow", ["leaked", "streams"]].tolist() == [10, 20]
    clean = bb.drop(index=list(LEAKY))
    assert clean["leaked"].sum() == 0
    for backend in LEAKY:  # each leaky interval lies above every clean backend's interval
        assert bb.loc[backend, "leak_rate_ci_low"] > clean["leak_rate_ci_high"].max()
    assert (clean["leak_rate_ci_high"] < bb.loc[list(LEAKY), "leak_rate"].min()).all()


def test_a_rerun_into_the_same_out_sends_only_what_is_missing(prompts, tmp_path):
    out = tmp_path / "o"
    with FakeServer(delay_scale=0) as srv:
        plan = _plan(prompts, srv.base_url + "/api/v1", n=3)
        first = sweep.run_sweep(
            plan, provider="openrouter", out=out, max_requests=7, concurrency=3, progress=False
        )
        assert (first.sent, first.finished, first.capped, first.missing) == (7, 7, True, 29)
        assert len(_chat(srv)) == 7
        second = sweep.run_sweep(plan, provider="openrouter", out=out, progress=False)
        assert (second.already, second.sent, second.missing) == (7, 29, 0)
        third = sweep.run_sweep(plan, provider="openrouter", out=out, progress=False)
        assert (third.already, third.sent, third.path) == (36, 0, None)
        assert len(_chat(srv)) == 36
        assert set(_sent_per_cell(srv).values()) == {3}
    assert sweep.finished_keys(out) == {i.key for i in plan}
    assert len(sweep.sweep_streams(out)) == 36


def test_429_pauses_every_worker_for_its_retry_after_and_sends_again(prompts, tmp_path):
    with FakeServer(delay_scale=0, throttle_first=2, retry_after="1") as srv:
        plan = _plan(prompts, srv.base_url + "/api/v1", n=1, backends=["Chutes", "Nebius"])
        report = sweep.run_sweep(
            plan, provider="openrouter", out=tmp_path / "o", concurrency=2, progress=False
        )
        chat = _chat(srv)
    assert (report.sent, report.throttled, report.finished, report.missing) == (6, 2, 4, 0)
    assert [r.status for r in chat[:2]] == [429, 429]
    # nothing went out before the Retry-After had passed
    assert min(r.received_at for r in chat[2:]) - chat[0].received_at >= 1.0
    assert report.waited_s >= 1.0
    # the throttled requests stay in the capture; the table counts each key's last request
    exchanges = sweep._sweep_exchanges(tmp_path / "o")
    assert (exchanges["status"] == 429).sum() == 2
    st = sweep.sweep_streams(tmp_path / "o")
    assert len(st) == 4 and st["error_type"].isna().all()


def test_an_item_still_throttled_after_the_retries_is_left_for_a_rerun(
    prompts, tmp_path, monkeypatch
):
    monkeypatch.setattr(sweep, "MAX_THROTTLE_RETRIES", 1)
    monkeypatch.setattr(sweep, "_BACKOFF_S", 0.01)
    with FakeServer(delay_scale=0, throttle_first=2, retry_after="") as srv:
        plan = _plan(prompts, srv.base_url + "/api/v1", n=1, backends=["Chutes"])[:1]
        report = sweep.run_sweep(plan, provider="openrouter", out=tmp_path / "o", progress=False)
        assert (report.sent, report.throttled, report.gave_up, report.missing) == (2, 2, 1, 1)
        assert sweep.finished_keys(tmp_path / "o") == set()
        again = sweep.run_sweep(plan, provider="openrouter", out=tmp_path / "o", progress=False)
        assert (again.sent, again.finished, again.missing) == (1, 1, 0)


class _CountingTransport(httpx.BaseTransport):
    """Counts responses open at once (from the request until its body is closed)."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.open = 0
        self.peak = 0
        self.lock = threading.Lock()

    def handle_request(self, request):
        with self.lock:
            self.open += 1
            self.peak = max(self.peak, self.open)
        response = self.inner.handle_request(request)
        stream, counter = response.stream, self

        class Closing(httpx.SyncByteStream):
            def __iter__(self):
                yield from stream

            def close(self):
                stream.close()
                with counter.lock:
                    counter.open -= 1

        response.stream = Closing()
        return response


def test_at_most_concurrency_requests_are_in_flight(prompts, tmp_path):
    counting = _CountingTransport()
    with FakeServer(delay_scale=0.5) as srv:
        plan = _plan(prompts, srv.base_url + "/api/v1", n=2)
        sweep.run_sweep(
            plan,
            provider="openrouter",
            out=tmp_path / "o",
            concurrency=3,
            progress=False,
            transport=counting,
        )
    assert counting.peak == 3


def test_a_backend_outside_the_pool_fails_before_streaming_and_keeps_its_row(prompts, tmp_path):
    with FakeServer(delay_scale=0) as srv:
        plan = _plan(prompts, srv.base_url + "/api/v1", n=1, backends=["Parasail", "Chutes"])
        sweep.run_sweep(plan, provider="openrouter", out=tmp_path / "o", progress=False)
    bb = tables.by_backend(sweep.sweep_streams(tmp_path / "o")).set_index("serving_provider")
    assert bb.loc["Parasail", ["streams", "errors"]].tolist() == [2, 2]
    assert bb.loc["Chutes", ["streams", "errors", "leaked"]].tolist() == [2, 0, 2]


# --------------------------------------------------------------------------- the command


def test_lab_sweep_prints_the_per_backend_table_with_its_verdicts(prompts, tmp_path, capsys):
    with FakeServer(delay_scale=0) as srv:
        rc = main(
            [
                "sweep",
                "--provider",
                "openrouter",
                "--model",
                MODEL,
                "--prompts",
                str(prompts),
                "--base-url",
                srv.base_url + "/api/v1",
                "--out",
                str(tmp_path / "o"),
                "--n",
                "5",
                "--quiet",
            ]
        )
    out = capsys.readouterr().out
    assert rc == 0
    assert f"{MODEL}: 6 backend(s): {', '.join(POOL)}" in out
    assert "6 target(s) x 2 prompt(s) x 5 = 60 planned; 0 done before, 60 now, 0 missing" in out
    assert "== backend scorecard (6 rows) ==" in out
    lines = out.splitlines()
    head = lines.index("== backend scorecard (6 rows) ==") + 1
    # the rate columns (the ttft columns at the right are timings: not compared here)
    assert [ln[:39].rstrip() for ln in lines[head : head + 7]] == [
        "backend      streams  think",
        "Chutes            10  100 % (72–100 %)*",
        "DeepInfra         10  0 % (0–28 %)",
        "Fireworks         10  0 % (0–28 %)",
        "Nebius            10  0 % (0–28 %)",
        "SiliconFlow       10  50 % (24–76 %)",
        "Together          10  0 % (0–28 %)",
    ]
    assert (
        "Chutes: worse with confidence on reasoning leaked into the answer, 100.0 % "
        "(72.2–100.0 %) against 10.0 % for the rest (n = 10; one-sided Fisher p = 4e-08, "
        "Holm-adjusted "
    ) in out
    # DeepInfra leaks nothing: no rate verdict names it. Its time to first token is the
    # machine's timing (delay_scale=0), which a loaded machine may make slower with
    # confidence by chance: that sentence is allowed, no other.
    deepinfra = [ln for ln in lines if ln.startswith("DeepInfra: ")]
    assert deepinfra, out
    assert all(
        ln == "DeepInfra: not worse with confidence on any verdict (10 streams)."
        or ln.startswith("DeepInfra: slower with confidence on time to first token")
        for ln in deepinfra
    ), deepinfra


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--provider", "openai", "--model", "m"], "--provider openai has no backends to sweep"),
        (["--provider", "openrouter"], "--model is required (or --models a,b"),
        (["--provider", "openrouter", "--model", "x/y", "--backends", " , "], "--backends:"),
        (["--provider", "nope", "--model", "m"], "unknown provider"),
        (
            ["--provider", "openrouter", "--model", "x/y", "--backends", "A,B", "--reference", "C"],
            "--reference C: not one of the targets (A, B)",
        ),
    ],
)
def test_lab_sweep_refuses_bad_input_in_one_line(prompts, tmp_path, capsys, argv, message):
    rc = main(
        ["sweep", *argv, "--prompts", str(prompts), "--base-url", "http://127.0.0.1:9/api/v1"]
        + ["--out", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert rc == 2 and message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_ctrl_c_lets_the_requests_in_flight_finish_and_a_rerun_sends_none_twice(prompts, tmp_path):
    out = tmp_path / "o"
    argv = [sys.executable, "-m", "lab.cli", "sweep", "--provider", "openrouter"]
    with FakeServer(delay_scale=1.0) as srv:
        argv += ["--model", MODEL, "--prompts", str(prompts), "--n", "3", "--concurrency", "2"]
        argv += ["--base-url", srv.base_url + "/api/v1", "--out", str(out), "--quiet"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while len(_chat(srv)) < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
        assert proc.returncode == 130, stderr.decode()
        assert "lab sweep: stopping; waiting for" in stderr.decode()
        assert "interrupted: " in stderr.decode()
        first = len(_chat(srv))
        assert 6 <= first < 36
        assert len(sweep.finished_keys(out)) == first  # every request sent was finished
        done = subprocess.run(argv, env=env, capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr.decode()
        assert f"{first} done before, {36 - first} now, 0 missing" in done.stdout.decode()
        assert len(_chat(srv)) == 36
        assert set(_sent_per_cell(srv).values()) == {3}
    exchanges = sweep._sweep_exchanges(out)
    assert set(exchanges["end_reason"]) == {"eof"}
    assert len(exchanges) == 36


def test_lab_demo_ends_with_a_sweep_that_names_the_leaky_backends_as_planted(tmp_path, capsys):
    from lab.cli.demo import _demo_sweep
    from lab.demo import DEMO_SWEEPS

    (spec,) = [s for s in DEMO_SWEEPS if s.model == MODEL]
    card = _demo_sweep(spec, tmp_path / "sweep", quiet=True)
    out = capsys.readouterr().out
    assert (
        "lab demo: sweep of fake/think-leak over its backends, which backend leaks its "
        "reasoning into the answer (like `lab sweep`)"
    ) in out
    assert "6 target(s) x 2 prompt(s) x 5 = 60 planned; 0 done before, 60 now, 0 missing" in out
    assert card.set_index("serving_provider")["think_leak_worse"].to_dict() == {
        "Chutes": True,
        "DeepInfra": False,
        "Fireworks": False,
        "Nebius": False,
        "SiliconFlow": False,  # 5 of 10: too few for Fisher + Holm over the card
        "Together": False,
    }
    tail = out[out.index("Planted by the fake server") :].splitlines()
    assert tail[0] == (
        "Planted by the fake server in fake/think-leak (scripted scenarios, not findings about "
        "any real provider):"
    )
    assert tail[1] == (
        "- Chutes: reasoning in <think> tags inside every answer (so its answers also differ "
        "from the others'): found (flagged: same_model, think_leak)."
    )
    assert tail[2].startswith("- SiliconFlow: reasoning inside half of its answers ")
    assert "not flagged: think_leak: 10 streams cannot tell a 50 % leak rate" in tail[2]
    assert (
        tail[3] == "- DeepInfra, Fireworks, Nebius, Together: nothing planted: flagged for nothing."
    )


def test_a_sweep_over_models_of_another_family_compares_the_models(prompts, tmp_path, capsys):
    with FakeServer(delay_scale=0) as srv:
        rc = main(
            ["sweep", "--provider", "openai", "--models", "fake/clean,fake/think-leak"]
            + ["--prompts", str(prompts), "--base-url", srv.base_url + "/v1", "--n", "5"]
            + ["--out", str(tmp_path / "o"), "--quiet"]
        )
        assert rc == 0
        assert {r.body["model"] for r in _chat(srv)} == {"fake/clean", "fake/think-leak"}
        assert all("provider" not in r.body for r in _chat(srv))  # nothing to pin
    bb = tables.by_backend(sweep.sweep_streams(tmp_path / "o")).set_index("serving_provider")
    assert sorted(bb.index) == ["fake/clean", "fake/think-leak"]
    assert bb.loc["fake/clean", ["streams", "leaked"]].tolist() == [10, 0]
    assert bb.loc["fake/think-leak", ["streams", "leaked"]].tolist() == [10, 10]
    assert "2 target(s) x 2 prompt(s) x 5 = 20 planned" in capsys.readouterr().out


def test_a_sweep_killed_hard_resumes_from_its_journals_and_resends_only_the_unfinished(
    prompts, tmp_path
):
    out = tmp_path / "o"
    argv = [sys.executable, "-m", "lab.cli", "sweep", "--provider", "openrouter"]
    with FakeServer(delay_scale=1.0) as srv:
        argv += ["--model", MODEL, "--prompts", str(prompts), "--n", "3", "--concurrency", "3"]
        argv += ["--base-url", srv.base_url + "/api/v1", "--out", str(out), "--quiet"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while len(_chat(srv)) < 8 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.kill()  # SIGKILL: no drain, no close; the journals hold what was recorded
        proc.communicate(timeout=60)
        sent_before = len(_chat(srv))
        finished = sweep.finished_keys(out)  # read through the journals' recovery
        assert 0 < len(finished) < 36
        done = subprocess.run(argv, env=env, capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr.decode()
        # the rerun sent exactly the keys without a finished request, once each
        assert len(_chat(srv)) - sent_before == 36 - len(finished)
        assert f"{len(finished)} done before, {36 - len(finished)} now, 0 missing" in (
            done.stdout.decode()
        )
    assert sweep.finished_keys(out) == {i.key for i in _plan(prompts, "x", n=3)}


def test_lab_sweep_runs_under_the_limits_it_is_given(prompts, tmp_path, capsys):
    from lab.capture import open as open_capture

    with FakeServer(delay_scale=0) as srv:
        main(
            ["sweep", "--provider", "openrouter", "--model", MODEL, "--prompts", str(prompts)]
            + ["--base-url", srv.base_url + "/api/v1", "--out", str(tmp_path / "o")]
            + ["--n", "1", "--quiet", "--max-bytes", "64"]
        )
    capsys.readouterr()
    ends = {ex.end_reason for ex in open_capture(tmp_path / "o").exchanges() if ex.status == 200}
    assert ends == {"byte_limit"}


def test_lab_sweep_refuses_a_config_file_that_does_not_exist(prompts, tmp_path, capsys):
    rc = main(
        ["sweep", "--provider", "openrouter", "--model", MODEL, "--prompts", str(prompts)]
        + ["--base-url", "http://127.0.0.1:9/api/v1", "--out", str(tmp_path / "o")]
        + ["--config", str(tmp_path / "missing.json")]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "config file does not exist" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()
