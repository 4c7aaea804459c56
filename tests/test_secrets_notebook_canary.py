"""The notebook canary: an upstream that echoes the key in every form it can take, the
notebooks executed on its capture, and the key in no output and no file written.

The loopback upstream answers each request with the bearer key it was sent, written one way
per model: whole in a gzipped body (against ``Accept-Encoding: identity``), in JSON escapes
(every character ``\\uXXXX``, ``/`` as ``\\/``), split into content tokens, split from the
end of the reasoning into the content, split across OpenRouter's reasoning with its
``reasoning_details`` copy, split under key names written with escapes, after a value longer
than the assembled stage's hold, gzipped and split at once, and in a 401 error body. The
capture (beside the fake providers' demo set, sent the same key) goes to every notebook
under ``notebooks/`` (nbclient, headless); the executed notebooks, the capture and every
file the kernels wrote (their temporary directories point under the test's) are searched for
the key, its halves and its escaped forms.
"""

from __future__ import annotations

import gzip
import http.server
import json
import os
import threading
import time
from pathlib import Path

import pytest

from lab.capture.redact import ASSEMBLED_HOLD_BYTES

KEY = "sk-or-v1-CANARY/NB+7c1e9a3f5b2d4c6e8a0f1b3d5e7a9c2e"
NEEDLES = (
    KEY,
    KEY[:20],
    KEY[-16:],
    KEY.replace("/", "\\/"),
    "".join(f"\\u{ord(c):04x}" for c in KEY[:12]),
)
NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def _line(obj: dict) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def _delta(delta: dict) -> bytes:
    return _line({"id": "g1", "model": "canary", "choices": [{"index": 0, "delta": delta}]})


STOP = _line({"id": "g1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}) + (
    b"data: [DONE]\n\n"
)


def _tokens(key: str, n: int = 5) -> list[str]:
    return [key[i : i + n] for i in range(0, len(key), n)]


def _escaped_name(body: bytes, name: str) -> bytes:
    """Every ``"name":`` key of ``body`` with its first letter written as an escape."""
    return body.replace(f'"{name}":'.encode(), f'"\\u{ord(name[0]):04x}{name[1:]}":'.encode())


def _answer(model: str, key: str) -> tuple[int, dict[str, str], bytes]:
    """(status, headers, body) echoing ``key`` the way ``model`` names."""
    sse = {"content-type": "text/event-stream"}
    form = model.removeprefix("canary/")
    if form == "gzip":
        return (
            200,
            sse | {"content-encoding": "gzip"},
            gzip.compress(_delta({"content": f"k={key}"}) + STOP),
        )
    if form == "escapes":
        every = "".join(f"\\u{ord(c):04x}" for c in key)
        slash = key.replace("/", "\\/")
        raw = (
            b'data: {"choices":[{"index":0,"delta":{"content":"a='
            + every.encode()
            + b" b="
            + slash.encode()
            + b'"}}]}\n\n'
        )
        return 200, sse, raw + STOP
    if form == "tokens":
        return 200, sse, b"".join(_delta({"content": t}) for t in ["k=", *_tokens(key)]) + STOP
    if form == "reasoning-to-content":
        half = len(key) // 2
        body = (
            _delta({"reasoning": "the key is "})
            + b"".join(_delta({"reasoning": t}) for t in _tokens(key[:half]))
            + b"".join(_delta({"content": t}) for t in _tokens(key[half:]))
            + _delta({"content": ". Done."})
        )
        return 200, sse, body + STOP
    if form == "openrouter-details":
        body = b"".join(
            _delta(
                {
                    "reasoning": t,
                    "reasoning_details": [{"type": "reasoning.text", "text": t, "index": 0}],
                }
            )
            for t in ["k=", *_tokens(key, 7)]
        )
        return 200, sse, body + _delta({"content": "ok"}) + STOP
    if form == "escaped-names":
        body = b"".join(_delta({"content": t}) for t in ["k=", *_tokens(key, 4)])
        return 200, sse, _escaped_name(body, "content") + STOP
    if form == "long-value":
        pad = "x" * (ASSEMBLED_HOLD_BYTES + 1000)
        first, rest = key[:10], key[10:]
        body = _delta({"content": pad + first}) + _delta({"content": rest})
        return 200, sse, body + STOP
    if form == "gzip-tokens":
        body = b"".join(_delta({"content": t}) for t in ["k=", *_tokens(key, 3)]) + STOP
        return 200, sse | {"content-encoding": "gzip"}, gzip.compress(body)
    if form == "error-401":
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {key}."}})
        return 401, {"content-type": "application/json"}, body.encode()
    raise AssertionError(f"no such form {form!r}")


FORMS = [
    "gzip",
    "escapes",
    "tokens",
    "reasoning-to-content",
    "openrouter-details",
    "escaped-names",
    "long-value",
    "gzip-tokens",
    "error-401",
]


@pytest.fixture
def echo_upstream():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - the stdlib's name
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
            key = self.headers.get("authorization", "").removeprefix("Bearer ")
            status, headers, data = _answer(body["model"], key)
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def _hits(root: Path) -> list[str]:
    """Where any needle appears: raw bytes of every file and every decoded Parquet value."""
    import pyarrow.parquet as pq

    hits = []
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        data = f.read_bytes()
        hits += [f"{f} (raw bytes: {n[:12]}...)" for n in NEEDLES if n.encode() in data]
        if f.suffix == ".parquet":
            text = repr(pq.read_table(f).to_pylist())
            hits += [f"{f} (decoded: {n[:12]}...)" for n in NEEDLES if n in text]
    return hits


def test_the_upstream_echoes_the_key_in_every_form_unscrubbed():
    """The canary would notice a leak: each form, read as a client reads it, holds the key
    (the result's text or reasoning joins the tokens; the escapes decode to it)."""
    from lab.replay import replay_sse

    for form in FORMS:
        status, headers, data = _answer(f"canary/{form}", KEY)
        if headers.get("content-encoding") == "gzip":
            data = gzip.decompress(data)
        if status != 200:
            assert KEY in json.loads(data)["error"]["message"]
            continue
        result = replay_sse("openrouter", data)
        assert KEY in result.text + result.reasoning or KEY in result.reasoning + result.text, form


@pytest.mark.slow
def test_no_notebook_output_and_no_file_holds_the_key_echoed_in_every_form(tmp_path, echo_upstream):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    import lab.capture
    from lab.demo import demo_requests
    from lab.fakes import FakeServer
    from lab.recorder import Recorder

    root = tmp_path / "captures"
    with FakeServer() as server, Recorder(root, label="canary") as rec:
        for it in demo_requests(2):
            rec.record(
                it["provider"], it["body"], base_url=server.base_url + it["base_path"], api_key=KEY
            )
        for form in FORMS:
            body = {
                "model": f"canary/{form}",
                "messages": [{"role": "user", "content": "say my key"}],
                "stream": True,
            }
            rec.record("openrouter", body, base_url=echo_upstream + "/api/v1", api_key=KEY)
    redacted = [
        ex.meta.get("lab.redacted")
        for ex in lab.capture.open(root).exchanges()
        if (ex.model or "").startswith("canary/")
    ]
    assert len(redacted) == len(FORMS) and all(redacted), redacted  # each echo was found
    assert _hits(root) == []

    notebooks = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert notebooks
    executed = tmp_path / "executed"
    kernel_tmp = tmp_path / "kernel-tmp"
    executed.mkdir()
    kernel_tmp.mkdir()
    names = ("LAB_CAPTURES", "MPLBACKEND", "OPENROUTER_API_KEY", "TMPDIR")
    old = {k: os.environ.get(k) for k in names}
    os.environ.update(
        LAB_CAPTURES=str(root), MPLBACKEND="Agg", OPENROUTER_API_KEY=KEY, TMPDIR=str(kernel_tmp)
    )
    try:
        for nb_path in notebooks:
            nb = nbformat.read(nb_path, as_version=4)
            nbclient.NotebookClient(
                nb, timeout=600, resources={"metadata": {"path": str(nb_path.parent)}}
            ).execute()
            nbformat.write(nb, executed / nb_path.name)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert len(list(executed.glob("*.ipynb"))) == len(notebooks)
    outputs = [
        json.dumps(cell.get("outputs", []))
        for p in executed.glob("*.ipynb")
        for cell in nbformat.read(p, as_version=4).cells
    ]
    assert outputs and not any(n in text for text in outputs for n in NEEDLES)
    assert _hits(tmp_path) == []


@pytest.mark.parametrize("upstream_http", ["wire", "httpx"])
def test_through_lab_proxy_no_client_line_or_command_output_holds_the_key(
    tmp_path, echo_upstream, capsys, upstream_http
):
    """The same upstream behind ``lab proxy``: what each client reads (and the text its SDK
    would assemble), the proxy's lines, and the output and files of ``lab replay``,
    ``lab show --raw --all``, ``lab report`` and ``lab fixtures export`` (lab and vcr) hold
    no needle; each line and each replayed stream names ``secret_redacted``."""
    pytest.importorskip("uvicorn")
    import httpx

    from lab.cli import main
    from lab.proxy import ProxyConfig, ProxyServer

    cap = tmp_path / "cap"
    cfg = ProxyConfig(
        provider="openrouter",
        upstream=echo_upstream + "/api/v1",
        out=cap,
        upstream_http=upstream_http,
    )
    client_text = []
    with ProxyServer(cfg) as p:
        for form in FORMS:
            body = {"model": f"canary/{form}", "messages": [], "stream": True}
            r = httpx.post(
                p.url + "/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {KEY}", "Accept-Encoding": "identity"},
                timeout=30,
            )
            assert r.status_code == (401 if form == "error-401" else 200), form
            client_text.append(r.text)
            for block in r.text.split("\n\n"):  # decoded as the client's JSON parser reads it
                if block.startswith("data: {"):
                    client_text.append(repr(json.loads(block[6:])))
        deadline = time.monotonic() + 20
        while len(p.exchanges) < len(FORMS) and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = [ex.line() for ex in p.exchanges]
    assert len(lines) == len(FORMS)
    assert all(" anomalies=secret_redacted " in line for line in lines), lines
    joined = "".join(client_text)
    assert not [n for n in NEEDLES if n in joined]
    # what an SDK assembles: the reasoning and content tokens joined, in stream order
    assembled = "".join(
        (c["delta"].get("reasoning") or "") + (c["delta"].get("content") or "")
        for text in client_text
        for block in text.split("\n\n")
        if block.startswith("data: {")
        for c in json.loads(block[6:]).get("choices", [])
    )
    assert KEY[:10] not in assembled and KEY[-10:] not in assembled

    outputs = ["\n".join(lines)]

    def run(*args: str) -> None:
        assert main(list(args)) == 0, args
        out, err = capsys.readouterr()
        outputs.append(out + err)

    run("replay", str(cap), "--format", "json")
    replayed = json.loads(outputs[-1])
    assert len(replayed) == len(FORMS)
    assert all("secret_redacted" in row["anomalies"] for row in replayed), replayed
    ids = sorted(row["stream_id"] for row in replayed)
    run("replay", str(cap))
    for sid in ids:
        run("show", str(cap), sid, "--raw", "--all")
    run("report", str(cap), "--out", str(tmp_path / "report"))
    for sid in ids:
        run("fixtures", "export", str(cap), "--stream", sid, "--dest", str(tmp_path / "fx"))
    streams = [a for sid in ids for a in ("--stream", sid)]
    run(
        "fixtures",
        "export",
        str(cap),
        *streams,
        "--format",
        "vcr",
        "--name",
        "all",
        "--dest",
        str(tmp_path / "vcr"),
    )
    assert len(outputs) == 1 + 2 + 2 * len(ids) + 1 + 1
    assert {p.name for p in (tmp_path / "fx").rglob("*")} >= {"expected.json", "stream.sse.txt"}
    assert (tmp_path / "vcr" / "all.yaml").is_file()
    assert (tmp_path / "report" / "report.html").is_file()
    assert [n[:12] for text in outputs for n in NEEDLES if n in text] == []
    assert _hits(tmp_path) == []
