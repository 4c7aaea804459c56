"""Issue 29 item 1: an echoed key that only the assembled text spells out.

A model that repeats the key it was sent writes it as tokens, one per SSE event
(``"content":"sk-or"`` ... ``"content":"-v1-..."``): no read and no event holds it whole,
the result's text does. The response scrubber's second stage
(:class:`lab.capture.redact.ResponseScrubber`, ``assembled``) matches each secret across
consecutive values of one assembled field (text, reasoning, tool arguments, errors) with a
carry-over of at most the secret's longest form less one byte, and overwrites the pieces
where they stand with one marker spread over them: the capture, the client, replay results,
fixtures and ``lab record``'s output all see the marker, and ``meta["lab.redacted"]`` and
the anomaly ``secret_redacted`` say it happened. A body in a ``Content-Encoding`` the lab
cannot decode is not looked into, and says so (``meta["lab.undecoded"]``, the anomaly
``secret_unchecked``, a warning from ``lab record``).
"""

from __future__ import annotations

import gzip
import json
import re
import time
import zlib
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import lab.capture
from lab.capture.redact import ASSEMBLED_HOLD_BYTES, ResponseScrubber
from lab.http.decoding import decoder_for

KEY = "sk-or-v1-SPLIT-ECHO-5e1f0c9d8b7a6f5e4d3c2b1a"
NEEDLES = (KEY, KEY[-16:], KEY[:20], "SPLIT-ECHO-5e1f")


def _event(obj: dict) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def _content(tok: str) -> bytes:
    return _event({"id": "c1", "choices": [{"index": 0, "delta": {"content": tok}}]})


STOP = (
    _event({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    + b"data: [DONE]\n\n"
)


def _scrub(reads: list[bytes], secrets=(KEY,)) -> tuple[list[bytes], ResponseScrubber]:
    s = ResponseScrubber(secrets)
    out: list[bytes] = []
    for r in reads:
        out += s.feed(r)
    out += s.flush()
    return out, s


def _marked(n: int) -> str:
    """A pattern for the marker of an ``n``-byte echo spread over pieces."""
    return rf"\[REDACTED[*#]{{{n - 10}}}\]"


def _texts(body: bytes) -> str:
    """The content a chat result assembles from an OpenAI-shaped body."""
    out = []
    for block in body.decode().split("\n\n"):
        if block.startswith("data: {"):
            for c in json.loads(block[6:])["choices"]:
                out.append(c["delta"].get("content") or "")
    return "".join(out)


# -- exact outputs -------------------------------------------------------------------------------


def test_a_key_split_into_tokens_is_overwritten_where_its_pieces_stand():
    toks = ["Your key is ", "sk-or-", "v1-SPLIT", "-ECHO-5e1f", "0c9d8b7a6f5e4d3c2b1a", "."]
    reads = [_content(t) for t in toks] + [STOP]
    out, s = _scrub(reads)
    assert [len(r) for r in out] == [len(r) for r in reads]  # boundaries and lengths kept
    # one marker spread over the pieces, its fill alternating * and # from piece to piece
    assert [json.loads(r[6:])["choices"][0]["delta"]["content"] for r in out[:6]] == [
        "Your key is ",
        "[REDAC",
        "TED#####",
        "**********",
        "###################]",
        ".",
    ]
    assert _texts(b"".join(out)) == ("Your key is [REDACTED#####**********###################].")
    assert (s.count, s.assembled) == (0, 1)  # no read held it: the assembled text did


def test_a_value_whose_end_could_start_the_key_is_held_until_the_next_value_of_its_field():
    s = ResponseScrubber([KEY])
    assert s.feed(_content("hello")) == [_content("hello")]
    assert s.feed(_content("ask")) == []  # "sk" could start the key
    usage = _event({"id": "c1", "choices": [], "usage": {"total_tokens": 3}})
    assert s.feed(usage) == []  # no assembled field: nothing settled
    assert s.feed(_content("ed")) == [_content("ask"), usage, _content("ed")]  # it did not
    assert s.assembled == 0


def test_an_open_line_is_handed_on_and_an_open_value_is_held_from_its_key():
    s = ResponseScrubber([KEY])
    head = b'data: {"id":"c1","choices":[{"index":0,"delta":{"n":1'
    assert s.feed(head) == [head]  # an open line, no assembled value open: handed on
    opened = b',"content":"Your key is sk-o'
    assert s.feed(opened) == []  # the value is open: looked at when it closes
    rest = b'r-v1-SPLIT-ECHO-5e1f0c9d8b7a6f5e4d3c2b1a"}}]}\n\n'
    out = s.feed(rest) + s.flush()
    assert [len(r) for r in out] == [len(opened), len(rest)]
    assert json.loads(b"".join([head, *out])[6:])["choices"][0]["delta"]["content"] == (
        "Your key is " + "[REDACTED" + "*" * (len(KEY) - 10) + "]"
    )
    assert (s.count, s.assembled) == (1, 0)  # one value held it: the byte stage's


def test_a_key_name_split_across_reads_is_still_found():
    """The property test's find: a read ending at ``{`` then ``"cont`` then ``ent"...``."""
    body = (
        _content("s")
        + b'data: {"choices":[{"index":0,"delta":{"content":"k-or-v1-SPLIT-ECHO-5e1f'
        + b'0c9d8b7a6f5e4d3c2b1a"}}]}\n\n'
    )
    at = body.index(b'"content":"k-or')
    reads = [body[:at], body[at : at + 5], body[at + 5 :]]
    out, s = _scrub(reads)
    assert [len(r) for r in out] == [len(r) for r in reads]
    assert re.fullmatch(_marked(len(KEY)), _texts(b"".join(out))) and s.assembled == 1


def test_a_key_from_the_end_of_the_reasoning_into_the_content_is_overwritten():
    """The spill guard moves the start of the content onto the end of the reasoning, so
    consecutive values join whatever their fields (they used to settle each other)."""
    s = ResponseScrubber([KEY])
    reasoning = _event({"choices": [{"delta": {"reasoning": "sk-or-"}}]})
    assert s.feed(reasoning) == []
    content = _content("v1-SPLIT-ECHO-5e1f0c9d8b7a6f5e4d3c2b1a")
    out = s.feed(content)
    assert [len(r) for r in out] == [len(reasoning), len(content)]
    assert json.loads(out[0][6:])["choices"][0]["delta"]["reasoning"] == "[REDAC"
    assert (
        json.loads(out[1][6:])["choices"][0]["delta"]["content"]
        == "TED" + "#" * (len(KEY) - 10) + "]"
    )
    assert s.flush() == [] and s.assembled == 1


def test_the_hold_is_bounded_a_carry_over_settles_past_the_hold():
    s = ResponseScrubber([KEY])
    assert s.feed(_content("sk-or")) == []
    filler = b": " + b"k" * ASSEMBLED_HOLD_BYTES + b"\n"  # a comment line: no field
    out = s.feed(filler)
    assert out == [_content("sk-or"), filler]


def test_the_hold_is_the_read_where_the_open_value_starts_plus_at_most_the_hold_bytes():
    """Reads are handed on whole: a value opened at the end of a 1 MiB read holds that whole
    read, and the reads after it while fewer than ``ASSEMBLED_HOLD_BYTES`` follow the value's
    key; the read that takes it past that hands on all of them (the value is then read in
    pieces). So what is held is at most the read where it starts plus the hold bytes."""
    s = ResponseScrubber([KEY])
    first = b": " + b"y" * (1 << 20) + b"\n" + b'data: {"choices":[{"delta":{"content":"sk-or'
    opened_at = first.rindex(b'"content"')
    after = len(first) - opened_at
    assert s.feed(first) == []
    more = b"z" * (100 * 1024)
    reads = [first]
    while after + len(more) <= ASSEMBLED_HOLD_BYTES:
        reads.append(more)
        after += len(more)
        assert s.feed(more) == []
    assert len(reads) == 3 and sum(map(len, reads)) <= len(first) + ASSEMBLED_HOLD_BYTES
    assert s.feed(more) == [*reads, more]  # past the hold: every held read handed on
    assert s.feed(more) == [more]


def test_a_line_longer_than_the_hold_is_handed_on_before_it_ends():
    s = ResponseScrubber([KEY])
    big = b'data: {"content": "' + b"x" * (ASSEMBLED_HOLD_BYTES + 10)
    assert s.feed(big) == [big]  # not held to its end: the byte stage alone covers it
    assert s.feed(b'"}\n\n') == [b'"}\n\n']


def test_an_escaped_key_split_across_tool_argument_tokens_is_overwritten():
    from lab.replay import replay_sse

    def call(args: str, head: bool = False) -> bytes:
        fn: dict = {"arguments": args}
        tc: dict = {"index": 0, "function": fn}
        if head:
            tc.update(id="call_1", type="function")
            fn["name"] = "save"
        return _event({"choices": [{"index": 0, "delta": {"tool_calls": [tc]}}]})

    escaped = "".join(f"\\u{ord(c):04x}" for c in KEY[:9]) + KEY[9:]
    body = (
        call("", head=True)
        + call('{"key": "' + escaped[:20])
        + call(escaped[20:41])
        + call(escaped[41:] + '"}')
        + _event({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
        + b"data: [DONE]\n\n"
    )
    out, s = _scrub([body])
    assert s.assembled == 1
    result = replay_sse("openai", b"".join(out), tools=[_SAVE])
    [fc] = result.function_calls
    # the marker covers the key's bytes on the wire: each escape's backslash escaped again
    assert re.fullmatch(_marked(len(json.dumps(escaped)) - 2), fc.args["key"])
    assert not any(n in json.dumps(result.to_dict()) for n in NEEDLES)


_SAVE = {
    "type": "function",
    "function": {"name": "save", "parameters": {"type": "object", "properties": {}}},
}


def _anthropic(tokens: list[str], kind: str) -> bytes:
    block = {"text": {"type": "text", "text": ""}, "thinking": {"type": "thinking", "thinking": ""}}
    delta = {"text": "text_delta", "thinking": "thinking_delta"}[kind]
    events = [
        (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "m",
                    "role": "assistant",
                    "content": [],
                    "model": "c",
                    "usage": {"input_tokens": 1, "output_tokens": 0},
                },
            },
        ),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block[kind]},
        ),
    ]
    for t in tokens:
        events.append(
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": delta, kind: t}},
            )
        )
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 5},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)


@pytest.mark.parametrize(
    "provider, body, field",
    [
        (
            "openai",
            b"".join(_content(t) for t in ["k=", KEY[:7], KEY[7:30], KEY[30:]]) + STOP,
            "text",
        ),
        (
            "openai",
            b"".join(
                _event({"choices": [{"index": 0, "delta": {"reasoning_content": t}}]})
                for t in ["k=", KEY[:12], KEY[12:]]
            )
            + _content("ok")
            + STOP,
            "reasoning",
        ),
        ("anthropic", _anthropic(["k=", KEY[:3], KEY[3:25], KEY[25:]], "text"), "text"),
        ("anthropic", _anthropic(["k=", KEY[:20], KEY[20:]], "thinking"), "reasoning"),
        (
            "google",
            b"".join(
                _event({"candidates": [{"content": {"role": "model", "parts": [{"text": t}]}}]})
                for t in ["k=", KEY[:5], KEY[5:]]
            )
            + _event(
                {
                    "candidates": [
                        {
                            "content": {"role": "model", "parts": [{"text": ""}]},
                            "finishReason": "STOP",
                        }
                    ]
                }
            ),
            "text",
        ),
    ],
    ids=["openai-content", "openai-reasoning", "anthropic-text", "anthropic-thinking", "gemini"],
)
def test_every_family_assembles_the_marker_never_the_key(provider, body, field):
    from lab.replay import replay_sse

    assert KEY in getattr(replay_sse(provider, body), field)  # unscrubbed, it leaks
    out, s = _scrub([body])
    result = replay_sse(provider, b"".join(out))
    assert re.fullmatch("(?s).*k=" + _marked(len(KEY)), getattr(result, field))
    assert result.guard_events == []  # no piece of the marker repeats the one before
    assert s.assembled == 1
    assert not any(n in json.dumps(result.to_dict()) for n in NEEDLES)


# -- property: any split, any escape mix, any read boundaries, any decodable encoding ---------


def _forms(ch: str) -> list[str]:
    code = f"{ord(ch):04x}"
    forms = [ch, "\\u" + code, "\\u" + code.upper()]
    return forms + (["\\/"] if ch == "/" else [])


SLASHED = "sk-proj/A1b2C3d4/E5f6G7h8"


@st.composite
def _split_echo(draw):
    """A chat stream whose content tokens spell a secret, each character in one of its JSON
    forms, cut into tokens anywhere; the body cut into reads anywhere; an encoding."""
    secret = draw(st.sampled_from([KEY, SLASHED]))
    raw = [draw(st.sampled_from(_forms(c))) for c in secret]
    cuts = sorted(draw(st.sets(st.integers(1, len(raw) - 1), max_size=8)))
    toks = ["".join(raw[a:b]) for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    before = draw(st.sampled_from(["", "key: ", "the key "]))
    after = draw(st.sampled_from(["", ".", " ok"]))
    if before and draw(st.booleans()):
        toks[0] = before + toks[0]  # the key starts inside a token
    elif before:
        toks.insert(0, before)
    if after and draw(st.booleans()):
        toks[-1] += after  # and ends inside one
    elif after:
        toks.append(after)
    body = (
        b"".join(
            b'data: {"choices":[{"index":0,"delta":{"content":"' + t.encode() + b'"}}]}\n\n'
            for t in toks
        )
        + STOP
    )
    read_cuts = sorted(draw(st.sets(st.integers(1, len(body) - 1), max_size=12)))
    encoding = draw(st.sampled_from(["identity", "gzip", "deflate"]))
    return secret, "".join(raw), before, after, body, read_cuts, encoding


def _encode(body: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(body)
    if encoding == "deflate":
        return zlib.compress(body)
    return body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_split_echo())
def test_property_a_split_escaped_key_in_any_reads_and_encoding_never_assembles(case):
    secret, raw, before, after, body, read_cuts, encoding = case
    wire = _encode(body, encoding)
    cuts = [c * len(wire) // len(body) for c in read_cuts]
    reads = [wire[a:b] for a, b in zip([0, *cuts], [*cuts, len(wire)], strict=True) if b > a]
    decoder = decoder_for(encoding)  # what the recording transport does before scrubbing
    decoded = reads
    if decoder is not None:
        decoded = [p for r in reads for p in decoder.feed(r)] + list(decoder.flush())
    out, s = _scrub([d for d in decoded if d], secrets=(secret,))
    assert [len(r) for r in out] == [len(d) for d in decoded if d]
    joined = b"".join(out)
    text = _texts(joined)
    assert re.fullmatch(re.escape(before) + _marked(len(raw)) + re.escape(after), text), text
    assert secret.encode() not in joined and s.count + s.assembled == 1


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_property_text_that_never_spells_the_key_passes_unchanged(data):
    near = KEY[:-1] + ("b" if KEY[-1] != "b" else "c")  # one character off
    cuts = sorted(data.draw(st.sets(st.integers(1, len(near) - 1), max_size=8)))
    toks = [near[a:b] for a, b in zip([0, *cuts], [*cuts, len(near)], strict=True)]
    body = b"".join(_content(t) for t in toks) + STOP
    out, s = _scrub([body[i : i + 7] for i in range(0, len(body), 7)])
    assert b"".join(out) == body and (s.count, s.assembled) == (0, 0)


# -- every output, over a loopback server ------------------------------------------------------


@pytest.fixture
def token_echo_server():
    """``start(encoding)``: a server on 127.0.0.1 whose chat stream repeats the request's
    bearer key as model tokens (5 characters an event) and sends the body in
    ``encoding`` (``gzip``, ``identity``, or ``x-lab-opaque``: zlib bytes under a name no
    client knows) whatever ``Accept-Encoding`` says."""
    import http.server
    import threading

    servers = []

    def start(encoding: str) -> str:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the stdlib's name
                self.rfile.read(int(self.headers.get("content-length", 0)))
                key = self.headers.get("authorization", "").removeprefix("Bearer ")
                toks = ["Your key: ", *(key[i : i + 5] for i in range(0, len(key), 5)), "."]
                body = b"".join(_content(t) for t in toks) + STOP
                data = {"gzip": gzip.compress, "x-lab-opaque": zlib.compress}.get(
                    encoding, lambda b: b
                )(body)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                if encoding != "identity":
                    self.send_header("content-encoding", encoding)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _files_contain(root: Path) -> list[str]:
    import pyarrow.parquet as pq

    hits = []
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        data = f.read_bytes()
        hits += [f"{f} (raw bytes)" for n in NEEDLES if n.encode() in data]
        if f.suffix == ".parquet":
            pf = pq.ParquetFile(f)
            text = repr(pf.schema_arrow.metadata) + repr(pf.read().to_pylist())
            hits += [f"{f} (decoded)" for n in NEEDLES if n in text]
    return hits


def _record(base: str, out: Path, monkeypatch, capsys) -> tuple[int, str, str]:
    from lab.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    code = main(
        ["record", "--provider", "openai", "--model", "m", "--prompt", "hi"]
        + ["--base-url", base + "/v1", "--n", "1", "--out", str(out)]
    )
    out_text, err = capsys.readouterr()
    return code, out_text, err


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_a_key_echoed_as_tokens_reaches_no_output(
    tmp_path, token_echo_server, monkeypatch, capsys, encoding
):
    from lab.anomalies import detect
    from lab.fixtures import export_fixture
    from lab.replay import replay
    from lab.report import write_report

    base = token_echo_server(encoding)
    with httpx.Client() as client:  # unscrubbed, the text spells the key
        r = client.post(base + "/v1/chat/completions", headers={"Authorization": f"Bearer {KEY}"})
    assert KEY in _texts(r.content) and KEY.encode() not in r.content

    code, out, err = _record(base, tmp_path / "c", monkeypatch, capsys)
    assert code == 0, err
    assert not any(n in out + err for n in NEEDLES), (out, err)
    assert re.fullmatch(r"Your key: " + _marked(len(KEY)) + r"\.\n", out.splitlines(True)[0])
    assert "lab: note: the responses echoed the key sent 1 time(s)" in err
    [ex] = lab.capture.open(tmp_path / "c").exchanges()
    assert ex.meta["lab.redacted"] == {"response_assembled": 1}
    assert ex.meta.get("lab.decoded") == (None if encoding == "identity" else "gzip")
    assert _files_contain(tmp_path / "c") == []

    [result] = replay(tmp_path / "c")
    assert re.fullmatch("Your key: " + _marked(len(KEY)) + r"\.", result.text)
    assert result.facts["secrets_redacted"] == 1
    assert "secret_redacted" in detect(result)
    assert not any(n in json.dumps(result.to_dict()) for n in NEEDLES)
    export_fixture(tmp_path / "c", result.stream_id, dest=tmp_path / "fixtures")
    names = {p.name for p in (tmp_path / "fixtures").rglob("*") if p.is_file()}
    assert {"expected.json", "stream.sse.txt"} <= names
    write_report([result], tmp_path / "report")
    assert _files_contain(tmp_path / "fixtures") == []
    assert _files_contain(tmp_path / "report") == []


def test_a_body_in_an_encoding_the_lab_cannot_decode_says_the_key_went_unchecked(
    tmp_path, token_echo_server, monkeypatch, capsys
):
    from lab.anomalies import detect
    from lab.replay import replay

    code, out, err = _record(token_echo_server("x-lab-opaque"), tmp_path / "c", monkeypatch, capsys)
    assert (
        "lab: warning: 1 response(s) came in a Content-Encoding the lab cannot decode "
        "(x-lab-opaque): recorded as they came, an echo of the key in them could not be "
        "looked for"
    ) in err
    [ex] = lab.capture.open(tmp_path / "c").exchanges()
    assert ex.meta["lab.undecoded"] == "x-lab-opaque" and "lab.redacted" not in ex.meta
    assert ex.response_headers["content-encoding"] == "x-lab-opaque"  # as it came
    [result] = replay(tmp_path / "c")
    assert result.facts["secret_unchecked"] == "x-lab-opaque"
    assert "secret_unchecked" in detect(result)


@pytest.mark.parametrize("encoding", ["identity", "gzip"])
def test_lab_proxy_hands_on_and_records_the_marker_never_the_key(
    tmp_path, token_echo_server, encoding
):
    pytest.importorskip("uvicorn")
    from lab.proxy import ProxyConfig, ProxyServer

    cfg = ProxyConfig(provider="openai", upstream=token_echo_server(encoding) + "/v1", out=tmp_path)
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with ProxyServer(cfg) as p:
        r = httpx.post(
            p.url + "/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"}
        )
        deadline = 200
        while not p.exchanges and deadline:
            time.sleep(0.05)
            deadline -= 1
        line = p.exchanges[0].line()
    assert r.status_code == 200
    assert re.fullmatch("Your key: " + _marked(len(KEY)) + r"\.", _texts(r.content))
    assert not any(n in line for n in NEEDLES)
    [ex] = lab.capture.open(tmp_path).exchanges()
    assert ex.meta["lab.redacted"] == {"response_assembled": 1}
    assert ex.body == r.content  # the client got what the capture holds
    assert _files_contain(tmp_path) == []


# -- the values a result can join: across fields, interleaved, escaped names, long values ------


def _values(body: bytes) -> list[tuple[str, str]]:
    """(field, value) of every string value of an assembled field, in stream order (keys
    decoded, as an adapter's JSON parser sees them)."""
    from lab.capture.redact import ASSEMBLED_FIELDS

    found: list[tuple[str, str]] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ASSEMBLED_FIELDS and isinstance(v, str):
                    found.append((k, v))
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for block in body.decode().split("\n\n"):
        if block.startswith("data: {"):
            walk(json.loads(block[6:]))
    return found


def _joins(body: bytes) -> list[str]:
    """Every text a result or an output can join from the values: each field's values in
    order, and all of them in stream order."""
    values = _values(body)
    fields = {f for f, _ in values}
    return ["".join(v for f, v in values if f == field) for field in fields] + [
        "".join(v for _, v in values)
    ]


def _escaped_name(name: str, i: int) -> str:
    return name[:i] + f"\\u{ord(name[i]):04x}" + name[i + 1 :]


@st.composite
def _joined_echo(draw):
    """A stream whose values spell the key in tokens: each token in a field of its own
    choosing (reasoning with OpenRouter's ``reasoning_details`` copy, content, tool
    arguments), other fields' tokens between them, key names written with escapes, the
    body cut into reads anywhere."""
    cuts = sorted(draw(st.sets(st.integers(1, len(KEY) - 1), min_size=1, max_size=6)))
    toks = [KEY[a:b] for a, b in zip([0, *cuts], [*cuts, len(KEY)], strict=True)]
    fields = ["content", "reasoning", "reasoning_content", "text"]
    one_field = draw(st.booleans())
    first = draw(st.sampled_from(fields))
    events = []
    for i, tok in enumerate(toks):
        field = first if one_field else draw(st.sampled_from(fields))
        if one_field and i and draw(st.booleans()):  # other fields' tokens in between
            for _ in range(draw(st.integers(1, 3))):
                other = draw(st.sampled_from([f for f in fields if f != field]))
                events.append(((other, "so"), None))
        copy = field == "reasoning" and draw(st.booleans())  # OpenRouter's duplicate
        events.append(((field, tok), copy))
    lines = []
    for (field, tok), copy in events:
        name = field
        if draw(st.booleans()):
            name = _escaped_name(field, draw(st.integers(0, len(field) - 1)))
        delta = f'"{name}":{json.dumps(tok)}'
        if copy:
            delta += (
                ',"reasoning_details":[{"type":"reasoning.text","text":' + json.dumps(tok) + "}]"
            )
        lines.append(f'data: {{"choices":[{{"index":0,"delta":{{{delta}}}}}]}}\n\n'.encode())
    body = b"".join(lines) + STOP
    read_cuts = sorted(draw(st.sets(st.integers(1, len(body) - 1), max_size=10)))
    reads = [body[a:b] for a, b in zip([0, *read_cuts], [*read_cuts, len(body)], strict=True)]
    return body, reads


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_joined_echo())
def test_property_no_join_of_the_values_spells_the_key_across_fields_and_escaped_names(case):
    body, reads = case
    assume(any(KEY in j for j in _joins(body)))  # unscrubbed, some join spells it
    out, s = _scrub(reads)
    assert [len(r) for r in out] == [len(r) for r in reads]
    joined = b"".join(out)
    assert not any(KEY in j for j in _joins(joined)), _joins(joined)
    assert s.assembled + s.count >= 1


def test_openrouter_reasoning_with_its_details_copy_assembles_the_marker():
    """Each reasoning token is repeated in ``reasoning_details[].text``: the two fields
    alternate, and each joins its own tokens across the other's."""
    from lab.replay import replay_sse

    def ev(tok: str) -> bytes:
        return _event(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "reasoning": tok,
                            "reasoning_details": [{"type": "reasoning.text", "text": tok}],
                        },
                    }
                ]
            }
        )

    body = b"".join(ev(t) for t in ["k=", KEY[:11], KEY[11:30], KEY[30:]]) + _content("ok") + STOP
    assert KEY in replay_sse("openrouter", body).reasoning  # unscrubbed, it leaks
    out, s = _scrub([body])
    result = replay_sse("openrouter", b"".join(out))
    assert re.fullmatch("k=" + _marked(len(KEY)), result.reasoning)
    assert s.assembled == 2  # the reasoning and its copy
    assert not any(n in json.dumps(result.to_dict()) for n in NEEDLES)


def test_a_key_name_written_with_escapes_is_read_as_its_field():
    toks = ["k=", KEY[:9], KEY[9:]]
    body = (
        b"".join(
            b'data: {"choices":[{"index":0,"delta":{"\\u0063ontent":'
            + json.dumps(t).encode()
            + b"}}]}\n\n"
            for t in toks
        )
        + STOP
    )
    out, s = _scrub([body])
    assert _texts(b"".join(out)) == "k=[REDACTED" + "#" * (len(KEY) - 10) + "]"
    assert s.assembled == 1


def test_a_value_open_past_the_hold_is_read_in_pieces_and_its_end_still_joins():
    """A value longer than ``ASSEMBLED_HOLD_BYTES`` whose end starts the key, sent in
    reads of 100 KiB: its bytes are handed on as they come but for the carry-over, and the
    next token completes the key over both."""
    pad = "x" * (ASSEMBLED_HOLD_BYTES + 50_000)
    first = _content(pad + KEY[:12])
    reads = [first[i : i + 100_000] for i in range(0, len(first), 100_000)]
    s = ResponseScrubber([KEY])
    out: list[bytes] = []
    for r in reads[:-1]:
        out += s.feed(r)
    assert len(out) >= 2  # handed on before the value ended, not held to its end
    out += s.feed(reads[-1]) + s.feed(_content(KEY[12:] + ".")) + s.feed(STOP) + s.flush()
    assert [len(r) for r in out] == [len(r) for r in [*reads, _content(KEY[12:] + "."), STOP]]
    text = _texts(b"".join(out))
    assert text == pad + "[REDACTED***" + "#" * (len(KEY) - 13) + "]."
    assert s.assembled == 1


def test_a_long_value_cut_by_a_line_break_after_a_backslash_is_not_held_for_ever():
    """A hostile value: open past the hold, then a backslash and a line break (no JSON
    string goes on there); what follows is handed on, not held to the end of the stream."""
    s = ResponseScrubber([KEY])
    opened = b'data: {"content": "' + b"x" * (ASSEMBLED_HOLD_BYTES + 10)
    assert s.feed(opened) == [opened]
    cut = b"\\\n"
    assert s.feed(cut) == [cut]
    after = b"data: more\n\n"
    assert s.feed(after) == [after]
