"""Hostile import files (issue 29 item 5): a cassette never runs code nor expands without
bound, a malformed HAR is one clear error naming the entry and the field, and an exported
cassette never lands outside ``--dest``."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path

import pytest

from lab.cli import main

pytest.importorskip("vcr")

CHAT = "https://api.openai.com/v1/chat/completions"
ENTRY = {
    "startedDateTime": "2024-01-01T00:00:00Z",
    "request": {
        "method": "POST",
        "url": CHAT,
        "headers": [{"name": "content-type", "value": "application/json"}],
        "postData": {"mimeType": "application/json", "text": '{"model":"m","stream":true}'},
    },
    "response": {
        "status": 200,
        "httpVersion": "HTTP/1.1",
        "headers": [{"name": "content-type", "value": "text/event-stream"}],
        "content": {"mimeType": "text/event-stream", "text": "data: [DONE]\n\n"},
    },
    "timings": {"send": 1, "wait": 2, "receive": 3},
}
BIG = "1" + "0" * 400


def _har(tmp_path: Path, path: tuple, value: object) -> Path:
    entry = copy.deepcopy(ENTRY)
    where = entry
    for key in path[:-1]:
        where = where[key]
    where[path[-1]] = "__BIG__" if value == "__BIG__" else value
    text = json.dumps({"log": {"entries": [ENTRY, entry]}}).replace('"__BIG__"', BIG)
    file = tmp_path / "x.har"
    file.write_text(text, encoding="utf-8")
    return file


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        (("timings",), "x", 'timings is "x", not an object'),
        (("timings",), [1], "timings is [1], not an object"),
        (("timings", "wait"), "__BIG__", f"timings.wait is {BIG[:37]}..., not a time in ms"),
        (("timings", "wait"), "12", 'timings.wait is "12", not a number'),
        (("timings", "receive"), True, "timings.receive is true, not a number"),
        (("response", "status"), "200", 'response.status is "200", not an HTTP status'),
        (("response", "status"), "__BIG__", f"response.status is {BIG[:37]}..., not an HTTP"),
        (("response",), "x", 'response is "x", not an object'),
        (("response", "headers"), 5, "response.headers is 5, not a list"),
        (("request", "postData"), [1], "request.postData is [1], not an object"),
        (("response", "content"), "x", 'response.content is "x", not an object'),
        (("response", "content", "text"), 5, "response.content.text is 5, not a string"),
        (
            ("response", "content"),
            {"text": "!!!not base64", "encoding": "base64"},
            "response.content.text is not valid base64 (encoding: base64)",
        ),
    ],
)
def test_a_malformed_har_entry_is_one_clear_error_naming_it(tmp_path, capsys, path, value, says):
    har = _har(tmp_path, path, value)
    assert main(["import", "har", str(har), "--out", str(tmp_path / "out")]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"lab: error: {har}: entry 1: {says}")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_valid_base64_still_imports(tmp_path, capsys):
    body = base64.b64encode(b"data: [DONE]\n\n").decode()
    har = _har(tmp_path, ("response", "content"), {"text": body, "encoding": "base64"})
    assert main(["import", "har", str(har), "--out", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.startswith("imported 2 streamed LLM exchange(s) into ")


def _cassette(tmp_path: Path, text: str) -> Path:
    file = tmp_path / "c.yaml"
    file.write_text(text, encoding="utf-8")
    return file


def test_a_cassette_with_a_python_tag_runs_no_code(tmp_path, capsys):
    flag = tmp_path / "pwned"
    cassette = _cassette(
        tmp_path,
        "interactions:\n- request: !!python/object/apply:builtins.exec\n"
        f"  - \"open({str(flag)!r}, 'w').write('x')\"\n  response: {{}}\nversion: 1\n",
    )
    assert main(["import", "vcr", str(cassette), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"lab: error: {cassette}: not a vcrpy cassette: could not determine a constructor for "
        "the tag 'tag:yaml.org,2002:python/object/apply:builtins.exec'"
    )
    assert not flag.exists()


def test_a_billion_laughs_cassette_is_refused_at_the_alias_limit(tmp_path, capsys):
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 13):  # 12 levels of 9 aliases: 9**13 values once expanded
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    lines.append("interactions: [*m]")
    cassette = _cassette(tmp_path, "\n".join(lines) + "\n")
    assert main(["import", "vcr", str(cassette), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"lab: error: {cassette}: refused: more than 100 YAML aliases (vcrpy writes none; "
        "nested aliases expand without bound)\n"
    )


@pytest.mark.parametrize("name", ["../../x", "../x", "a/b", ".hidden", "..", "/tmp/x"])
def test_a_cassette_name_that_leaves_dest_is_refused(tmp_path, capsys, name):
    dest = tmp_path / "a" / "b" / "dest"
    root = Path(__file__).resolve().parents[1] / "captures"
    sid = next(iter(json.loads(json.dumps(_one_stream(root)))))
    code = main(
        ["fixtures", "export", str(root), "--stream", sid, "--format", "vcr"]
        + ["--dest", str(dest), "--name", name]
    )
    assert code == 2
    assert capsys.readouterr().err == (
        f"lab: error: fixture name {name!r}: use letters, digits, '.', '_' and '-'\n"
    )
    assert not any(tmp_path.rglob("*.yaml"))


def _one_stream(root: Path) -> list[str]:
    import lab.capture

    return [lab.capture.open(root).requests()[0].stream_id]


def test_har_import_redacts_oauth_codes_session_ids_and_url_tokens(tmp_path, capsys):
    from test_secrets import _files_contain

    token, code, session = "tok-URLUSER-5f1e2d3c", "oauth-CODE-77a1b2c3", "sess-ID-0c9b8a7f"
    entry = copy.deepcopy(ENTRY)
    entry["request"]["url"] = f"https://{token}@api.openai.com/v1/chat/completions?code={code}"
    entry["request"]["headers"].append({"name": "x-session-id", "value": session})
    entry["response"]["content"]["text"] = (
        'data: {"choices":[{"index":0,"delta":{"content":"your session ' + session + '"}}]}\n\n'
        "data: [DONE]\n\n"
    )
    har = tmp_path / "x.har"
    har.write_text(json.dumps({"log": {"entries": [entry]}}), encoding="utf-8")
    assert main(["import", "har", str(har), "--out", str(tmp_path / "out")]) == 0
    capsys.readouterr()
    assert _files_contain(tmp_path / "out", (token, code, session)) == []
    import lab.capture

    [ex] = lab.capture.open(tmp_path / "out").exchanges()
    assert ex.url == "https://[REDACTED]@api.openai.com/v1/chat/completions?code=[REDACTED]"
    assert ex.request_headers["x-session-id"] == "[REDACTED]"
    assert ex.meta["lab.redacted"] == {"response_body": 1}
