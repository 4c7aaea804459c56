"""README "Record your own app": its three blocks run as written (proxy, SDK client, import)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.capture import open as open_capture
from tests.capture_scan import places_holding

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
SECTION = README[README.index("## Record your own app") : README.index("## Capture format")]


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", SECTION, flags=re.S)


def _free_ports(n: int) -> list[int]:
    """``n`` loopback ports nothing listens on now (the kernel's picks, all distinct)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _on_ports(block: str, ports: dict[int, int]) -> str:
    """``block`` with each README port replaced by the free one it maps to; nothing else of
    the text changes (mapping the ports back gives the README's block again)."""
    for readme_port in ports:
        assert re.search(rf"\b{readme_port}\b", block), f"the README no longer uses {readme_port}"
    text = re.sub(
        r"\b(" + "|".join(map(str, ports)) + r")\b", lambda m: str(ports[int(m.group())]), block
    )
    back = {new: old for old, new in ports.items()}
    assert (
        re.sub(
            r"\b(" + "|".join(map(str, back)) + r")\b", lambda m: str(back[int(m.group())]), text
        )
        == block
    )
    return text


def _wait_gone(pgid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.killpg(pgid, signal.SIGKILL)


def _lab_on_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose ``lab`` is this checkout's (the README says ``lab``)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "lab"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m lab.cli "$@"\n')
    shim.chmod(0o755)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    env["COLUMNS"] = "200"
    # unbuffered, as CI runners often run Python: each print() is then several writes, the
    # condition under which two background processes could split each other's lines
    env["PYTHONUNBUFFERED"] = "1"
    return env


def test_the_proxy_block_records_what_curl_sent_through_it(tmp_path):
    """The README's block, run verbatim except for its two port numbers (the fake server's
    18901 and the proxy's 18787), which become ports free on this machine, so that two
    runs at once (or anything else on those ports) cannot make it fail or skip."""
    (readme_block,) = _blocks("bash")
    assert [int(p) for p in re.findall(r"--port (\d+)", readme_block)] == [18901, 18787]
    fake_port, proxy_port = _free_ports(2)
    block = _on_ports(readme_block, {18901: fake_port, 18787: proxy_port})
    work = tmp_path / "app"
    work.mkdir()
    log, errors = tmp_path / "out.txt", tmp_path / "err.txt"
    with log.open("w") as stdout, errors.open("w") as stderr:
        proc = subprocess.Popen(
            ["bash", "-c", block],
            cwd=work,
            env=_lab_on_path(tmp_path),
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=120)
        finally:  # the fake server and the proxy are still running in the background
            os.killpg(proc.pid, signal.SIGTERM)  # (background jobs ignore SIGINT)
            _wait_gone(proc.pid)  # the proxy closes its recording on the way out
    out, err = log.read_text(), errors.read_text()
    assert proc.returncode == 0, err
    # the proxy prints its URL alone on its first line; the fake server's banner may come
    # before or after it (two background processes)
    assert f"http://127.0.0.1:{proxy_port}" in out.splitlines()
    assert "data: [DONE]" in out
    line = re.search(r"^openai fake/think-leak 200 eof .*$", out, flags=re.M).group(0)
    assert re.fullmatch(
        r"openai fake/think-leak 200 eof backend=- leak=think_stripper anomalies=- "
        r"session=checkout \d+B",
        line,
    )
    assert "== streams (1 rows) ==" in out or "streams (1 row" in out
    (exchange,) = open_capture(work / "recordings").exchanges()
    assert exchange.meta["session"] == "checkout"
    assert exchange.request_headers["authorization"] == "[REDACTED]"
    assert places_holding(work / "recordings", "sk-your-key") == []


def test_the_sdk_client_block_records_both_sdks(tmp_path, monkeypatch):
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    block = next(b for b in _blocks("python") if "recording_client" in b)
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 - our own README
    results = scope["results"]
    assert [(r.provider, r.model, r.error) for r in results] == [
        ("openai", "fake/think-leak", None),
        ("anthropic", "fake/thinking", None),
    ]
    assert results[0].guard_events and results[1].reasoning
    # the openai SDK closes right after data: [DONE]: complete, not a recording cut
    from lab.anomalies import detect

    assert [detect(r) for r in results] == [[], []]
    assert [[a.end_reason for a in r.attempts] for r in results] == [["eof"], ["eof"]]
    assert places_holding(tmp_path / "recordings", "sk-your-key") == []
    assert places_holding(tmp_path / "recordings", "sk-ant-your-key") == []


def test_the_import_block_imports_the_shipped_cassette_and_exports_one(
    tmp_path, monkeypatch, capsys
):
    pytest.importorskip("vcr")
    import shutil

    block = next(b for b in _blocks("python") if "import_vcr" in b)
    shutil.copytree(ROOT / "examples", tmp_path / "examples")  # a fresh checkout's files
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)  # noqa: S102 - our own README
    assert capsys.readouterr().out.startswith("imported 2 streamed LLM exchange(s) into ")
    first, second = scope["results"]
    assert (first.provider, first.error, first.text) == ("openai", None, "")
    assert second.text == "The current version of *llm* is **0.fixed-version**."
    assert Path("recordings/found.yaml").is_file()
