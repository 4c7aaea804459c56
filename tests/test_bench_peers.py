"""The per-family benchmark's peers (bench/sdk_peers.py) read the same text the lab reads:
a peer that skipped work could look fast, so each is checked on every family body."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from lab.replay import replay_sse

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(name: str):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))  # sdk_peers imports nothing of bench, _common is loaded
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


common = _load("_common")
peers = _load("sdk_peers")


@pytest.mark.parametrize("name", list(common.FAMILY_BODIES))
def test_every_peer_reads_the_text_the_lab_reads(name):
    provider, path, body = common.family_body(name, 300)
    want = peers.expected_text(name, body)
    assert len(want) > 300
    result = replay_sse(provider, body, path=path)
    if result.function_calls:  # the tool body: the lab parses the arguments it joined
        (call,) = result.function_calls
        assert call.args == json.loads(want) and not result.text
    else:
        assert result.text == want
    found = peers.peers(name, body)
    assert "httpx-sse loop" in found  # a dev dependency
    assert len(found) == 2  # and the family's SDK (openai, anthropic, google-genai: dev too)
    for peer, read in found.items():
        assert read() == want, peer


def test_the_sdk_targets_are_the_issues():
    assert peers.sdk_target("sdk openai") == 10.0
    assert peers.sdk_target("sdk google.genai") == 10.0
    assert peers.sdk_target("sdk anthropic") == 4.0
    assert peers.sdk_target("httpx-sse loop") is None
