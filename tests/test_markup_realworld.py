"""Real leaked markup (``tests/realworld/markup/``): each output quoted in a public issue is
detected as its class, and recovery gives exactly what ``sources.json`` expects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.guards import scan_markup
from lab.toolcheck import check_call

HERE = Path(__file__).parent / "realworld" / "markup"
SOURCES = json.loads((HERE / "sources.json").read_text(encoding="utf-8"))


def _body(src: dict) -> str:
    return (HERE / src["file"]).read_text(encoding="utf-8")


def test_markup_realworld_every_file_has_a_source_and_every_source_a_file():
    assert sorted(p.name for p in HERE.glob("*.txt")) == sorted(s["file"] for s in SOURCES)
    for s in SOURCES:
        assert s["url"].startswith(f"https://github.com/{s['repo']}/issues/")


@pytest.mark.parametrize("src", SOURCES, ids=[s["name"] for s in SOURCES])
def test_markup_realworld_output_is_detected_and_recovered(src):
    body = _body(src)
    want = src["expected"]
    out, found = scan_markup(body, recover=True)
    assert sorted({d.kind for d in found}) == src["classes"]
    assert out.text == want["text"]
    assert out.reasoning == want["reasoning"]
    assert [[c.name, c.args, c.id] for c in out.calls] == want["calls"]
    for c in out.calls:
        assert c.provider_fields["recovered_from"] in src["classes"]
        kind = check_call(c, None).error_kind
        assert kind == ("invalid_json" if want.get("invalid_json") else None)
    # detection alone changes nothing and sees the same markers
    plain, same = scan_markup(body)
    assert plain.text == body and same == found


@pytest.mark.parametrize("src", SOURCES, ids=[s["name"] for s in SOURCES])
def test_markup_realworld_output_cut_anywhere_gives_the_same_result(src):
    body = _body(src)
    whole = scan_markup(body, recover=True)
    for cut in range(len(body) + 1):
        assert scan_markup([body[:cut], body[cut:]], recover=True) == whole, cut
