"""The ``lab`` command line, end to end (fake providers on loopback, no network, no keys)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import lab.capture
from lab.cli import main

ROOT = Path(__file__).resolve().parents[1]


def test_demo_records_every_scenario_replays_identically_and_writes_plots(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--n", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    from lab.demo import demo_requests

    n = len(demo_requests(1))
    assert f"replay reproduces live: {n}/{n} streams identical" in out
    # a footnote suggests only options lab demo takes (it has no --format)
    assert "columns left out to fit" in out and "--format csv" not in out
    # the scenario verdicts are said to describe the script; each sweep says what it planted
    from lab.cli.demo import SCRIPTED_NOTE

    assert out.index(SCRIPTED_NOTE) > out.index("== classifiers")
    assert [ln for ln in out.splitlines() if ln.startswith("Planted by the fake server")] == [
        f"Planted by the fake server in {m} (scripted scenarios, not findings about any real "
        "provider):"
        for m in ("fake/think-leak", "fake/tools", "fake/model-equality")
    ]
    for name in ("leaks_by_backend", "ttft_by_backend", "classifiers", "timeline"):
        assert (tmp_path / "plots" / f"{name}.png").stat().st_size > 1000
    cap = lab.capture.open(tmp_path / "captures")
    assert len(cap.requests()) == n


def test_record_against_a_base_url_writes_a_capture(fake_server, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    code = main(
        [
            "record",
            "--provider",
            "openrouter",
            "--model",
            "fake/clean",
            "--prompt",
            "hi",
            "--base-url",
            fake_server.base_url + "/api/v1",
            "--out",
            str(tmp_path),
            "--n",
            "2",
        ]
    )
    assert code == 0
    cap = lab.capture.open(tmp_path)
    assert len(cap.requests()) == 2
    assert "capture written to" in capsys.readouterr().out


def test_record_without_a_key_or_base_url_says_which_variable_to_set(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    code = main(
        [
            "record",
            "--provider",
            "openrouter",
            "--model",
            "m",
            "--prompt",
            "hi",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 2
    assert "set OPENROUTER_API_KEY" in capsys.readouterr().err


def test_record_with_an_unknown_provider_exits_2(capsys):
    assert main(["record", "--provider", "nope", "--model", "m", "--prompt", "x"]) == 2
    assert "unknown provider 'nope'" in capsys.readouterr().err


def test_replay_prints_the_stream_table(capsys):
    assert main(["replay", str(ROOT / "captures")]) == 0
    out = capsys.readouterr().out
    assert "== streams (" in out and "fake/think-leak" in out


def test_replay_of_a_missing_path_is_one_clear_line(tmp_path, capsys):
    missing = tmp_path / "nope"
    assert main(["replay", str(missing)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(missing) in err[0]


def test_replay_compare_counts_streams_and_names_each_side_by_its_config_file(tmp_path, capsys):
    cfg = tmp_path / "no-spill.json"
    cfg.write_text(json.dumps({"spill": {"enabled": False}}))
    assert main(["replay", str(ROOT / "captures"), "--compare", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert (
        "== 2 streams whose output changed under no-spill.json against defaults "
        "(4 fields: text 2, reasoning 2) ==" in out
    )
    assert "\n--- defaults\n+++ no-spill.json\n" in out
    # each diff printed as lines, not as one escaped table cell
    assert "\n-Hello! How can I help with your café order today? ☕\n" in out
    assert "\n+must do.Hello! How can I help with your café order today? ☕\n" in out
    assert "\\n" not in out


def test_replay_stream_table_fits_100_columns_with_one_missing_marker(capsys):
    assert main(["replay", str(ROOT / "captures"), "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("== streams (132 rows) ==")
    header = lines[at + 1].split()
    assert header[:3] == ["stream_id", "serving_provider", "model"]
    table = lines[at + 1 : at + 134]
    assert max(map(len, table)) <= 100 and max(map(len, lines[at:])) <= 100
    assert not any(m in line for line in lines for m in ("NaN", "None", "<NA>", " - "))
    assert sum("—" in line for line in table) > 50  # missing values: the one marker
    assert lines[at + 134].startswith("(") and "left out to fit 100 columns" in lines[at + 134]


def test_replay_with_a_bad_config_file_is_one_clear_line(tmp_path, capsys):
    cfg = tmp_path / "bad.json"
    cfg.write_text("{not json")
    assert main(["replay", str(ROOT / "captures"), "--config", str(cfg)]) == 2
    assert "bad.json: not a JSON config file" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--help"], ["demo", "--help"], ["fixtures", "--help"]])
def test_help_exits_cleanly(argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0


def test_a_glob_of_chunk_parts_brings_their_streams_parts_along():
    whole = lab.capture.open(ROOT / "captures")
    chunks_only = lab.capture.open(str(ROOT / "captures" / "*" / "chunks-*.parquet"))
    assert len(chunks_only.requests()) == len(whole.requests())
    assert len(chunks_only.chunks) == len(whole.chunks)


def test_record_says_when_the_stream_failed(tmp_path, capsys):
    code = main(
        [
            "record",
            "--provider",
            "openrouter",
            "--model",
            "x",
            "--prompt",
            "hi",
            "--base-url",
            "http://127.0.0.1:9/api/v1",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 1  # recorded, but nothing got an answer: a script must be able to tell
    err = capsys.readouterr().err  # the reference mapping: no code, so "unknown"
    assert "stream error (unknown): OpenRouter API error (unknown): ConnectError: " in err
    (row,) = lab.capture.open(tmp_path).streams.itertuples()
    assert row.end_reason == "read_error" and "ConnectError" in row.error


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["replay", "captures", "--workers", "0"], "must be at least 1, got 0"),
        (["report", "captures", "--workers", "-2"], "must be at least 1, got -2"),
        (
            ["record", "--provider", "openrouter", "--model", "m", "--prompt", "p", "--n", "0"],
            "must be at least 1, got 0",
        ),
        (["demo", "--n", "zero"], "not a whole number: 'zero'"),
    ],
)
def test_a_count_below_one_is_refused_with_one_clear_line(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(message)


def test_record_help_names_every_provider_and_its_key_variable(capsys):
    with pytest.raises(SystemExit):
        main(["record", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    expected = {
        "anthropic": "ANTHROPIC_API_KEY",
        "custom": "CUSTOM_API_KEY",
        "deepseek": "DEEPSEEK_API_KEY",
        "fireworks": "FIREWORKS_API_KEY",
        "google": "GEMINI_API_KEY or GOOGLE_API_KEY",
        "groq": "GROQ_API_KEY",
        "mistral": "MISTRAL_API_KEY",
        "nvidia": "NVIDIA_API_KEY",
        "ollama": "OLLAMA_API_KEY",
        "openai": "OPENAI_API_KEY",
        "openrouter": "OPENROUTER_API_KEY",
        "together": "TOGETHER_API_KEY",
        "vllm": "VLLM_API_KEY",
        "xai": "XAI_API_KEY",
        "zai": "ZAI_API_KEY",
    }
    assert "; ".join(f"{p}: {env}" for p, env in expected.items()) in out
    assert f"one of: {', '.join(expected)}" in out


# -- bad --out, checked before any work ---------------------------------------------------

REFUSED = "http://127.0.0.1:1/v1"  # nothing listens on port 1: connection refused at once


def _record(*extra: str) -> list[str]:
    return ["record", "--provider", "openrouter", "--model", "fake/clean", "--prompt", "hi", *extra]


@pytest.mark.parametrize(
    "argv",
    [
        _record("--base-url", REFUSED, "--out", "{file}"),
        ["report", str(ROOT / "captures"), "--out", "{file}"],
        ["demo", "--out", "{file}", "--n", "1", "--quiet"],
    ],
    ids=["record", "report", "demo"],
)
def test_an_out_that_is_a_regular_file_is_one_clear_line_before_any_work(argv, tmp_path, capsys):
    file = tmp_path / "a-file"
    file.write_text("keep me")
    code = main([a.format(file=file) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2
    assert err == f"lab: error: --out {file}: not a directory\n"
    assert out == ""  # no tables printed, nothing recorded, nothing replayed
    assert file.read_text() == "keep me"


def test_fixtures_dest_that_is_a_regular_file_is_one_clear_line(tmp_path, capsys):
    file = tmp_path / "a-file"
    file.write_text("")
    sid = lab.capture.open(ROOT / "captures").requests()[0].stream_id
    code = main(
        ["fixtures", "export", str(ROOT / "captures"), "--stream", sid, "--dest", str(file)]
    )
    assert code == 2
    assert capsys.readouterr().err == f"lab: error: --dest {file}: not a directory\n"


@pytest.mark.parametrize("command", ["record", "report", "demo"])
def test_an_out_under_a_regular_file_cannot_be_created_and_says_why(command, tmp_path, capsys):
    file = tmp_path / "a-file"
    file.write_text("")
    out_dir = file / "sub"
    argv = {
        "record": _record("--base-url", REFUSED, "--out", str(out_dir)),
        "report": ["report", str(ROOT / "captures"), "--out", str(out_dir)],
        "demo": ["demo", "--out", str(out_dir), "--n", "1", "--quiet"],
    }[command]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err == f"lab: error: --out {out_dir}: cannot create it, {file} is not a directory\n"
    assert out == ""


def test_an_out_in_a_read_only_directory_is_refused_before_recording(tmp_path, capsys, monkeypatch):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    real_access = os.access
    # as root (CI) every directory is writable: answer for `locked` as an ordinary user would
    monkeypatch.setattr(
        "os.access",
        lambda path, mode: False if Path(path) == locked else real_access(path, mode),
    )
    try:
        code = main(_record("--base-url", REFUSED, "--out", str(locked / "caps")))
    finally:
        locked.chmod(0o755)
    assert code == 2
    expected = f"lab: error: --out {locked / 'caps'}: cannot create it, {locked} is not writable\n"
    assert capsys.readouterr().err == expected
    assert not (locked / "caps").exists()


def test_report_to_a_fresh_out_still_writes_the_plots_and_the_html(tmp_path, capsys):
    out = tmp_path / "new" / "report"
    assert main(["report", str(ROOT / "captures"), "--out", str(out)]) == 0
    assert (out / "report.html").is_file() and (out / "plots" / "timeline.png").is_file()
    assert f"HTML report: {out / 'report.html'}" in capsys.readouterr().out


# -- fake-server --port ---------------------------------------------------------------------


@pytest.mark.parametrize("port", ["-1", "70000", "65536"])
def test_fake_server_port_out_of_range_is_one_clear_line(port, capsys):
    assert main(["fake-server", "--port", port]) == 2
    assert (
        capsys.readouterr().err
        == f"lab: error: --port {port}: must be 0-65535 (0 = any free port)\n"
    )


class _SleepInterrupts:
    """``time`` for lab.fakes.server whose sleep is Ctrl-C: a server that did start returns."""

    def __getattr__(self, name: str):
        return getattr(time, name)

    @staticmethod
    def sleep(seconds: float) -> None:
        raise KeyboardInterrupt


def test_fake_server_on_a_port_in_use_is_one_clear_line(monkeypatch, capsys):
    import lab.fakes.server

    monkeypatch.setattr(lab.fakes.server, "time", _SleepInterrupts())
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["fake-server", "--port", str(port)])
    out, err = capsys.readouterr()
    assert code == 2
    assert err == f"lab: error: --port {port}: already in use on 127.0.0.1\n"
    assert out == ""


def test_fake_server_help_states_the_default_port(capsys):
    with pytest.raises(SystemExit):
        main(["fake-server", "--help"])
    assert "(default 0: any free port" in " ".join(capsys.readouterr().out.split())


def _options(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                for where, opt in _options(sub):
                    yield f"{name} {where}".strip(), opt
        elif (
            action.option_strings and not action.required and action.dest not in ("help", "version")
        ):
            yield "", action


def test_every_optional_option_states_its_default_in_its_help():
    from lab.cli import build_parser

    options = list(_options(build_parser()))
    assert len(options) > 20
    missing = [
        f"{where} {opt.option_strings[-1]}" for where, opt in options if "default" not in opt.help
    ]
    assert missing == []


# -- record: failures, bad --base-url, Ctrl-C ------------------------------------------------


def _only_recording(root: Path) -> Path:
    """The one recording directory ``lab record`` made under ``root``."""
    (path,) = [p for p in root.iterdir() if p.is_dir()]
    return path


def test_record_exits_1_when_every_request_failed_and_says_how_many(tmp_path, capsys):
    code = main(_record("--base-url", REFUSED, "--out", str(tmp_path), "--n", "3"))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    path = _only_recording(tmp_path)
    assert err[-1] == f"lab: error: 3 of 3 requests failed; capture written to {path}"
    assert len(lab.capture.open(path).requests()) == 3  # the failures are in the capture


def _on_the_second_record(monkeypatch, change) -> None:
    """Wrap ``Recorder.record`` so that ``change(kw)`` runs before its second call."""
    from lab.recorder import Recorder

    record = Recorder.record
    calls = []

    def wrapped(self, provider, body, **kw):
        calls.append(1)
        if len(calls) == 2:
            change(kw)
        return record(self, provider, body, **kw)

    monkeypatch.setattr(Recorder, "record", wrapped)


def test_record_exits_3_when_some_requests_failed_and_says_how_many(
    fake_server, tmp_path, capsys, monkeypatch
):
    _on_the_second_record(monkeypatch, lambda kw: kw.update(base_url=REFUSED))
    base = fake_server.base_url + "/api/v1"
    code = main(_record("--base-url", base, "--out", str(tmp_path), "--n", "3"))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3
    path = _only_recording(tmp_path)
    assert err[-1] == f"lab: warning: 1 of 3 requests failed; capture written to {path}"


def test_record_that_succeeds_exits_0_without_a_failure_summary(fake_server, tmp_path, capsys):
    base = fake_server.base_url + "/api/v1"
    assert main(_record("--base-url", base, "--out", str(tmp_path))) == 0
    out, err = capsys.readouterr()
    assert "failed" not in err
    assert f"capture written to {_only_recording(tmp_path)}" in out


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("notaurl", "not an http(s) URL with a host (e.g. http://127.0.0.1:8000/v1)"),
        ("ftp://host/v1", "not an http(s) URL with a host (e.g. http://127.0.0.1:8000/v1)"),
        ("http:///v1", "not an http(s) URL with a host (e.g. http://127.0.0.1:8000/v1)"),
        ("http://host:99999/v1", "not a valid URL (Port out of range 0-65535)"),
    ],
)
def test_record_refuses_a_base_url_without_scheme_or_host_before_creating_a_capture(
    url, why, tmp_path, capsys
):
    out = tmp_path / "caps"
    assert main(_record("--base-url", url, "--out", str(out))) == 2
    assert capsys.readouterr().err == f"lab: error: --base-url {url}: {why}\n"
    assert not out.exists()


def test_record_custom_without_a_base_url_is_refused_before_creating_a_capture(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("CUSTOM_API_KEY", "k")
    out = tmp_path / "caps"
    argv = ["record", "--provider", "custom", "--model", "m", "--prompt", "hi", "--out", str(out)]
    assert main(argv) == 2
    expected = "lab: error: provider 'custom' needs a base URL (e.g. --base-url http://host/v1)\n"
    assert capsys.readouterr().err == expected
    assert not out.exists()


def _interrupt(kw) -> None:
    raise KeyboardInterrupt


def test_record_interrupted_says_where_the_partial_capture_is_and_exits_130(
    fake_server, tmp_path, capsys, monkeypatch
):
    _on_the_second_record(monkeypatch, _interrupt)
    base = fake_server.base_url + "/api/v1"
    code = main(_record("--base-url", base, "--out", str(tmp_path), "--n", "3"))
    out, err = capsys.readouterr()
    assert code == 130
    path = _only_recording(tmp_path)
    assert err.strip().splitlines()[-1] == (
        f"lab: interrupted after 1 of 3 requests; partial capture written to {path}"
    )
    assert "== streams" not in out
    assert len(lab.capture.open(path).requests()) == 1  # what finished is readable


def test_record_google_sends_no_stream_key_and_gets_the_answer(
    fake_server, tmp_path, capsys, monkeypatch
):
    # the real Gemini API (and the fake) answer a body with "stream" with a 400
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    fake_server.clear_requests()
    code = main(
        [
            "record",
            "--provider",
            "google",
            "--model",
            "fake/clean",
            "--prompt",
            "hi",
            "--base-url",
            fake_server.base_url + "/v1beta",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    (request,) = fake_server.requests
    assert request.status == 200
    assert set(request.body) == {"contents"}
    assert "café" in capsys.readouterr().out


def test_record_on_sigterm_stops_like_ctrl_c_says_where_the_capture_is_and_exits_143(tmp_path):
    # in a child: SIGTERM's default action would end this test session. The child sends
    # itself SIGTERM just before the second of three requests.
    code = textwrap.dedent(
        """
        import os, signal, sys
        from lab.cli import main
        from lab.fakes import FakeServer
        from lab.recorder import Recorder

        record, calls = Recorder.record, []

        def wrapped(self, *args, **kw):
            calls.append(1)
            if len(calls) == 2:
                os.kill(os.getpid(), signal.SIGTERM)
            return record(self, *args, **kw)

        Recorder.record = wrapped
        with FakeServer(delay_scale=0) as server:
            argv = ["record", "--provider", "openrouter", "--model", "fake/clean"]
            argv += ["--prompt", "hi", "--base-url", server.base_url + "/api/v1"]
            sys.exit(main([*argv, "--out", sys.argv[1], "--n", "3"]))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OPENROUTER_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 143, done.stderr
    path = _only_recording(tmp_path)
    assert done.stderr.strip().splitlines()[-1] == (
        f"lab: terminated (SIGTERM) after 1 of 3 requests; partial capture written to {path}"
    )
    assert "== streams" not in done.stdout
    assert len(lab.capture.open(path).requests()) == 1  # what finished is readable
