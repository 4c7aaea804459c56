"""Reliability: crash safety, secrets, concurrent load, bad capture files.

- **Crash safety**: a recorder subprocess is SIGKILLed at random points (5 in the default
  run, 50 with ``-m slow``); every capture file still opens, every exchange that ended is
  byte-exact with what the server sent, every exchange the child had *finished* before the
  kill is complete, and an exchange cut by the kill is marked ``end_reason="incomplete"``
  with a prefix of the server's bytes.
- **Secrets**: a canary API key passed to ``Recorder.record(api_key=...)`` and through the
  provider's environment variable appears in no output: capture files (raw bytes and decoded
  Parquet values), exported fixtures, the HTML report, executed notebooks (slow).
- **Load**: 100 concurrent recordings (threads) through one Recorder: every exchange
  byte-exact with the server's scripted body, none lost, none interleaved.
- **Bad files**: a missing, truncated, corrupt or foreign Parquet file gives one
  ``CaptureError`` naming the file and the problem; ``lab replay BADPATH`` exits 2 with one
  line on stderr.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import lab.capture
from lab import anomalies
from lab.capture import CaptureError
from lab.fakes import render_body
from lab.replay import replay

CANARY = "sk-or-v1-CANARY-7f3a9c2e5b1d4f60a8e2c9b7d1f3e5a7"
CANARY_ENV = "sk-ant-CANARY-ENV-0c4e8a2f6b1d3e5f7a9c0b2d4e6f8a1c"

# -- helpers -----------------------------------------------------------------------------------


def _request_body(ex) -> dict:
    return json.loads(ex.request_body)


def _family(ex) -> str:
    return {"deepseek": "openai", "zai": "openai", "nvidia": "openai", "custom": "openai"}.get(
        ex.provider, ex.provider
    )


def server_bodies(ex, server) -> set[bytes]:
    """What the fake server may have sent for this exchange: its scripts are pure functions
    of (request, seed); the seed is the body's, else the one the server's log shows for a
    request with these exact bytes (a degraded attempt may have dropped ``seed``)."""
    body = _request_body(ex)
    family = _family(ex)
    if family == "google":
        seed = (body.get("generationConfig") or {}).get("seed")
        model = ex.model
    else:
        seed, model = body.get("seed"), body.get("model")
    if isinstance(seed, int):
        seeds = {abs(seed)}
    else:
        seeds = {r.seed for r in server.requests if r.raw_body == ex.request_body}
    assert seeds, f"the server never saw {ex}"
    return {render_body(family, model, seed=s, body=body) for s in seeds}


def _stateless_demo_items(n: int) -> list[dict]:
    from lab.demo import demo_requests

    return [it for it in demo_requests(n) if "overloaded-then-ok" not in str(it["body"])]


# -- crash safety -------------------------------------------------------------------------------

_CHILD = r"""
import sys, json
from lab.recorder import Recorder
from lab.demo import demo_requests
base_url, root, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
import random
items = [it for it in demo_requests(4) if "overloaded-then-ok" not in str(it["body"])]
random.Random(seed).shuffle(items)
rec = Recorder(root, label="crash")
print("READY", rec.path, flush=True)
for it in items * 10:
    r = rec.record(it["provider"], it["body"], base_url=base_url + it["base_path"])
    print("DONE", r.stream_id, flush=True)
rec.close()
print("CLOSED", flush=True)
"""


def _kill_run(srv, root: Path, seed: int) -> tuple[Path, set[str]]:
    rng = random.Random(seed)
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, srv.base_url, str(root), str(seed)],
        stdout=subprocess.PIPE,
        text=True,
    )
    done: set[str] = set()
    try:
        first = proc.stdout.readline().split()
        assert first and first[0] == "READY", first
        path = Path(first[1])
        if rng.random() < 0.5:  # right after the k-th finished stream
            k = rng.randint(1, 12)
            while len(done) < k:
                line = proc.stdout.readline()
                if not line:
                    break
                _note_done(line, done)
        else:  # at a random moment (usually mid-stream)
            deadline = time.monotonic() + rng.uniform(0.0, 1.5)
            reader = threading.Thread(target=lambda: _drain(proc, done), daemon=True)
            reader.start()
            time.sleep(max(0.0, deadline - time.monotonic()))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        time.sleep(0.05)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
    return path, set(done)


def _drain(proc, done: set[str]) -> None:
    try:
        for line in proc.stdout:
            _note_done(line, done)
    except (ValueError, OSError):  # closed by the main thread
        pass


def _note_done(line: str, done: set[str]) -> None:
    parts = line.split()
    if line.endswith("\n") and len(parts) == 2 and parts[0] == "DONE":  # not cut by the kill
        done.add(parts[1])


def check_crash(n_kills: int) -> None:
    import tempfile

    from lab.fakes import FakeServer

    with FakeServer(delay_scale=0.3) as srv, tempfile.TemporaryDirectory() as tmp:
        for i in range(n_kills):
            root = Path(tmp) / f"run{i}"
            path, done = _kill_run(srv, root, seed=1000 + i)
            if not path.exists():
                continue  # killed before anything was written
            for f in sorted(path.iterdir()):  # every file opens on its own
                if f.suffix in (".parquet", ".journal"):
                    lab.capture.open(f)
            cap = lab.capture.open(path)
            exchanges = cap.exchanges()
            incomplete = [ex for ex in exchanges if ex.end_reason == "incomplete"]
            for ex in exchanges:
                wants = server_bodies(ex, srv)
                got = b"".join(ex.reads)
                if ex.end_reason == "incomplete":
                    assert any(w.startswith(got) for w in wants), (i, ex)
                    assert ex.stream_id not in done, f"finished stream {ex.stream_id} marked cut"
                else:
                    assert ex.end_reason in ("eof", "cancelled"), (i, ex)
                    if ex.end_reason == "eof":
                        assert got in wants, (i, ex)
            # replay blames the cut on the recording, not on the provider
            results = {r.stream_id: r for r in replay(cap)}
            for ex in incomplete:
                result = results[ex.stream_id]
                found = anomalies.detect(result)
                if result.attempts[-1].end_reason == "eof":
                    # killed after the terminator arrived, before the end record: the replay
                    # calls it whole (stream.protocol_ended) only when every byte is there
                    assert b"".join(ex.reads) in server_bodies(ex, srv), (i, ex)
                    assert "recording_cut" not in found
                    continue
                assert result.attempts[-1].end_reason == "incomplete", (i, result.attempts)
                assert "recording_cut" in found and "eof_without_terminator" not in found
            recorded = {ex.stream_id for ex in exchanges}
            assert done <= recorded, f"run {i}: finished streams missing {done - recorded}"
            assert len(incomplete) <= 2, (i, incomplete)


def test_recorder_killed_at_random_points_leaves_readable_capture():
    check_crash(5)


@pytest.mark.slow
def test_recorder_killed_at_50_random_points_leaves_readable_capture():
    check_crash(50)


# -- secrets -------------------------------------------------------------------------------------


def _files_contain(root: Path, needles: tuple[str, ...]) -> list[str]:
    """Paths (and where) any needle appears: raw bytes of every file, and every decoded
    Parquet value and footer."""
    import pyarrow.parquet as pq

    hits = []
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        data = f.read_bytes()
        for n in needles:
            if n.encode() in data:
                hits.append(f"{f} (raw bytes)")
        if f.suffix == ".parquet":
            pf = pq.ParquetFile(f)
            text = repr(pf.schema_arrow.metadata) + repr(pf.read().to_pylist())
            hits += [f"{f} (decoded)" for n in needles if n in text]
    return hits


def test_a_key_in_the_base_urls_query_reaches_no_output_and_the_path_stays_right(
    tmp_path, fake_server
):
    """Some gateways take the key as a query parameter (``?api-key=``, ``?token=``)."""
    from lab.recorder import Recorder

    base = f"{fake_server.base_url}/v1?api-key={CANARY}&token={CANARY_ENV}&tier=free"
    with Recorder(tmp_path / "captures") as rec:
        result = rec.record("openai", {"model": "fake/clean", "messages": []}, base_url=base)
        path = rec.path
    assert result.error is None and result.text  # the path went before the query: not a 404
    [url] = lab.capture.open(path).streams["url"]
    assert url == (
        f"{fake_server.base_url}/v1/chat/completions?api-key=[REDACTED]&token=[REDACTED]&tier=free"
    )
    assert _files_contain(path, (CANARY, CANARY_ENV, CANARY[-16:], CANARY_ENV[-16:])) == []


def test_canary_api_key_reaches_no_output(tmp_path, fake_server, monkeypatch):
    from lab.fixtures import export_fixture
    from lab.recorder import Recorder
    from lab.replay import replay
    from lab.report import write_report

    monkeypatch.setenv("OPENROUTER_API_KEY", CANARY_ENV)
    monkeypatch.setenv("ANTHROPIC_API_KEY", CANARY_ENV)
    monkeypatch.setenv("GEMINI_API_KEY", CANARY_ENV)
    monkeypatch.setenv("OPENAI_API_KEY", CANARY_ENV)
    items = _stateless_demo_items(1)
    with Recorder(tmp_path / "captures") as rec:
        for i, it in enumerate(items):
            url = fake_server.base_url + it["base_path"]
            key = CANARY if i % 2 == 0 else None  # explicit, or from the environment
            rec.record(it["provider"], it["body"], base_url=url, api_key=key)
        path = rec.path
    # the server did receive the keys (so the test would notice a leak)
    seen = json.dumps([r.headers for r in fake_server.requests])
    assert CANARY in seen and CANARY_ENV in seen

    needles = (CANARY, CANARY_ENV, CANARY[-16:], CANARY_ENV[-16:])
    assert _files_contain(path, needles) == []
    cap = lab.capture.open(path)
    for sid in list(dict.fromkeys(cap.streams["stream_id"]))[:6]:
        export_fixture(path, sid, dest=tmp_path / "fixtures")
    results = replay(path)
    write_report(results, tmp_path / "report")
    for d in ("fixtures", "report"):
        assert _files_contain(tmp_path / d, needles) == [], d
    assert not any(n in repr([r.to_dict() for r in results]) for n in needles)


@pytest.mark.slow
def test_canary_api_key_absent_from_executed_notebooks(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    root = Path(__file__).resolve().parent.parent
    env = {"OPENROUTER_API_KEY": CANARY, "ANTHROPIC_API_KEY": CANARY_ENV}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        notebooks = sorted((root / "notebooks").glob("*.ipynb"))
        assert notebooks
        for nb_path in notebooks:
            nb = nbformat.read(nb_path, as_version=4)
            nbclient.NotebookClient(
                nb, timeout=600, resources={"metadata": {"path": str(nb_path.parent)}}
            ).execute()
            out = tmp_path / nb_path.name
            nbformat.write(nb, out)
            text = out.read_text()
            assert CANARY not in text and CANARY_ENV not in text, nb_path.name
        assert _files_contain(tmp_path, (CANARY, CANARY_ENV)) == []
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


# -- load -------------------------------------------------------------------------------------


def test_100_concurrent_recordings_are_byte_exact(tmp_path):
    from lab.fakes import FakeServer
    from lab.recorder import Recorder

    items = (_stateless_demo_items(3) * 2)[:100]
    assert len(items) == 100
    fake_server = FakeServer(delay_scale=0)
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(items))
    with Recorder(tmp_path) as rec:

        def one(it: dict) -> None:
            try:
                barrier.wait(timeout=60)
                rec.record(
                    it["provider"], it["body"], base_url=fake_server.base_url + it["base_path"]
                )
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=one, args=(it,)) for it in items]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        path = rec.path
        results = list(rec.results)
    fake_server.close()
    assert errors == []
    assert len(results) == 100
    exchanges = lab.capture.open(path).exchanges()
    # nothing lost: every exchange the server answered, and every attempt the client made
    assert len(exchanges) == len(fake_server.requests)
    assert len(exchanges) == sum(len(r.attempts) for r in results)
    assert {ex.stream_id for ex in exchanges} == {r.stream_id for r in results}
    for ex in exchanges:
        got = b"".join(ex.reads)
        wants = server_bodies(ex, fake_server)
        if ex.end_reason == "cancelled":  # the adapter stopped reading (a guard or bad JSON)
            assert any(w.startswith(got) for w in wants), ex
        else:  # nothing interleaved: the exact bytes the server sent this request
            assert ex.end_reason == "eof", ex
            assert got in wants, ex
        assert list(ex.read_t_ns) == sorted(ex.read_t_ns), ex


# -- bad files ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_capture(tmp_path_factory, fake_server) -> Path:
    from lab.recorder import Recorder

    root = tmp_path_factory.mktemp("good")
    with Recorder(root) as rec:
        for it in _stateless_demo_items(1)[:6]:
            rec.record(it["provider"], it["body"], base_url=fake_server.base_url + it["base_path"])
        return rec.path


def _bad_files(tmp: Path, good: Path) -> dict[str, tuple[Path, str]]:
    import pandas as pd

    part = sorted(good.glob("streams-*.parquet"))[0]
    data = part.read_bytes()
    cases: dict[str, tuple[Path, str]] = {}
    cases["missing"] = (tmp / "nope" / "streams-00000.parquet", "no such file")
    trunc = tmp / "truncated" / "streams-00000.parquet"
    trunc.parent.mkdir()
    trunc.write_bytes(data[: len(data) // 2])
    cases["truncated"] = (trunc, "corrupt or truncated")
    corrupt = tmp / "corrupt" / "streams-00000.parquet"
    corrupt.parent.mkdir()
    corrupt.write_bytes(random.Random(0).randbytes(len(data)))
    cases["corrupt"] = (corrupt, "corrupt or truncated")
    flipped = tmp / "flipped" / "streams-00000.parquet"
    flipped.parent.mkdir()
    mid = bytearray(data)
    for i in range(len(mid) // 3, len(mid) // 3 + 64):
        mid[i] ^= 0xFF
    flipped.write_bytes(bytes(mid))
    cases["flipped"] = (flipped, "corrupt or truncated")
    foreign = tmp / "foreign" / "data.parquet"
    foreign.parent.mkdir()
    pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}).to_parquet(foreign)
    cases["foreign"] = (foreign, "not a Stream Lab capture")
    empty = tmp / "empty"
    empty.mkdir()
    cases["empty_dir"] = (empty, "no capture files")
    text = tmp / "text" / "streams-00000.parquet"
    text.parent.mkdir()
    text.write_text("hello, I am not parquet\n")
    cases["text"] = (text, "corrupt or truncated")
    no_chunks = tmp / "no_chunks"
    no_chunks.mkdir()
    (no_chunks / part.name).write_bytes(data)  # its chunks part left behind
    cases["no_chunks"] = (no_chunks / part.name, "lack recorded reads")
    # footers a lab never wrote: these raised KeyError, UnicodeDecodeError and TypeError
    import pyarrow.parquet as pq

    footer_cases = {
        "version_0": ({b"lab.schema_version": b"0"}, "schema version 0 is not one this lab"),
        "table_bytes": ({b"lab.table": b"\xffstreams"}, "not a Stream Lab capture table"),
        "capture_id_list": (
            {b"lab.capture": b'{"capture_id": ["c"]}'},
            "capture_id is not a string",
        ),
    }
    table = pq.read_table(part)
    for name, (keys, problem) in footer_cases.items():
        bad = tmp / name / part.name
        bad.parent.mkdir()
        pq.write_table(table.replace_schema_metadata({**table.schema.metadata, **keys}), bad)
        cases[name] = (bad, problem)
    return cases


def test_bad_capture_files_raise_one_clear_capture_error(tmp_path, good_capture):
    from lab.replay import replay

    for name, (path, problem) in _bad_files(tmp_path, good_capture).items():
        for fn in (lab.capture.open, replay):
            with pytest.raises(CaptureError) as info:
                fn(path)
            msg = str(info.value)
            assert "\n" not in msg, (name, msg)
            assert str(path.name) in msg, (name, msg)
            if name != "flipped":  # a flipped byte can hit the footer or the data pages
                assert problem in msg, (name, msg)


def test_cli_replay_of_bad_path_exits_2_with_one_line(tmp_path, good_capture, capsys):
    from lab.cli import main

    for name, (path, _problem) in _bad_files(tmp_path, good_capture).items():
        assert main(["replay", str(path)]) == 2, name
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(path.name) in err, (name, err)
        assert err.startswith("lab: error: "), err


def test_cli_replay_of_bad_path_in_a_subprocess(tmp_path):
    bad = tmp_path / "streams-00000.parquet"
    bad.write_bytes(b"PAR1 garbage")
    proc = subprocess.run(
        [sys.executable, "-m", "lab.cli", "replay", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert bad.name in proc.stderr
