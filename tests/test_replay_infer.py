"""Replay never fails as a whole for one stream: the family comes from the request when the
capture does not name one, else that stream is one error row and the others replay."""

from __future__ import annotations

import httpx
import pytest

from lab.capture import CaptureWriter
from lab.capture import open as open_capture
from lab.cli import main
from lab.http.transports import RecordingTransport
from lab.infer import (
    FamilyGuess,
    ProviderGuess,
    infer_family,
    infer_provider,
    resolve_family,
    resolve_provider,
)
from lab.providers import PROVIDERS
from lab.replay import replay

HI = [{"role": "user", "content": "hi"}]
KNOWN = ", ".join(sorted(PROVIDERS))
CLEAN = "Hello! The café on the corner opens at 8:00 — their crème brûlée is worth the trip ☕."


@pytest.mark.parametrize(
    ("url", "headers", "body", "family", "evidence"),
    [
        (
            "https://openrouter.ai/api/v1/chat/completions",
            {},
            None,
            "openrouter",
            "host 'openrouter.ai'",
        ),
        (
            "http://127.0.0.1:9/api/v1/chat/completions",
            {},
            None,
            "openrouter",
            "path '/api/v1/chat/completions' (OpenRouter's /api/v1/)",
        ),
        (
            "https://api.openai.com/v1/chat/completions",
            {},
            None,
            "openai",
            "host 'api.openai.com'",
        ),
        (
            "https://api.deepseek.com/chat/completions",
            {},
            None,
            "deepseek",
            "host 'api.deepseek.com'",
        ),
        (
            "https://api.z.ai/api/paas/v4/chat/completions",
            {},
            None,
            "zai",
            "host 'api.z.ai'",
        ),
        (
            "https://integrate.api.nvidia.com/v1/chat/completions",
            {},
            None,
            "nvidia",
            "host 'integrate.api.nvidia.com'",
        ),
        (
            "https://api.groq.com/openai/v1/chat/completions",
            {},
            None,
            "groq",
            "host 'api.groq.com'",
        ),
        (
            "https://open.bigmodel.cn/api/paas/v4/chat/completions",
            {},
            None,
            "zai",
            "host 'open.bigmodel.cn'",
        ),
        (
            "https://api.anthropic.com/v1/messages",
            {},
            None,
            "anthropic",
            "host 'api.anthropic.com'",
        ),
        (
            "http://127.0.0.1:8000/v1/chat/completions",
            {},
            None,
            "custom",
            "path '/v1/chat/completions' (OpenAI-compatible, host '127.0.0.1')",
        ),
        ("http://127.0.0.1:8000/v1/messages", {}, None, "anthropic", "path '/v1/messages'"),
        (
            "http://h/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            {},
            None,
            "google",
            "path '/v1beta/models/gemini-2.5-flash:streamGenerateContent'",
        ),
        (
            "http://h/relay",
            {"Anthropic-Version": "2023-06-01"},
            None,
            "anthropic",
            "header 'anthropic-version'",
        ),
        (
            "http://h/relay",
            {"x-goog-api-key": "[REDACTED]"},
            None,
            "google",
            "header 'x-goog-api-key'",
        ),
        ("http://h/relay", {}, b'{"contents": []}', "google", "body field 'contents'"),
        (
            "http://h/relay",
            {},
            b'{"anthropic_version": "vertex-2023-10-16"}',
            "anthropic",
            "body field 'anthropic_version'",
        ),
        (
            "http://h/relay",
            {},
            b'{"model": "m", "messages": []}',
            "custom",
            "body field 'messages' (OpenAI-compatible)",
        ),
        (
            "http://h/v1/responses",
            {},
            b'{"model": "m", "input": "hi"}',
            "openai",
            "path '/v1/responses' (the OpenAI Responses API, host 'h')",
        ),
        (
            "http://h/api/v1/responses",
            {},
            None,
            "openrouter",
            "path '/api/v1/responses' (OpenRouter's Responses API)",
        ),
    ],
)
def test_infer_provider_reads_path_then_headers_then_body(url, headers, body, family, evidence):
    guess = infer_provider("POST", url, headers, body)
    assert (guess.provider, guess.evidence) == (family, evidence)


def test_the_old_family_names_still_answer():
    guess = infer_family("POST", "http://h/v1/messages")
    assert isinstance(guess, FamilyGuess) and FamilyGuess is ProviderGuess
    assert guess.family == guess.provider == "anthropic"
    assert resolve_family is resolve_provider


@pytest.mark.parametrize(
    ("url", "body"),
    [
        ("http://h/v1/embeddings", b'{"input": "x"}'),
        ("not a url", b"\xff\xfe"),
    ],
)
def test_infer_provider_says_none_when_nothing_in_the_request_tells(url, body):
    assert infer_family("POST", url, {}, body) is None


def _bare_capture(tmp_path, fake_server):
    """The issue's recipe: an httpx client over a bare RecordingTransport (no family)."""
    base = fake_server.base_url
    with CaptureWriter(tmp_path) as writer:
        client = httpx.Client(transport=RecordingTransport(writer))
        calls = [
            (
                f"{base}/v1/chat/completions",
                {"model": "fake/clean", "messages": HI, "stream": True},
            ),
            (
                f"{base}/v1/messages",
                {"model": "fake/clean", "max_tokens": 64, "messages": HI, "stream": True},
            ),
            (
                f"{base}/v1beta/models/fake/clean:streamGenerateContent?alt=sse",
                {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]},
            ),
            (f"{base}/v1/embeddings", {"input": "hi"}),
        ]
        for url, body in calls:
            client.post(url, json=body).read()
        client.close()
        return writer.path


def test_a_capture_without_families_replays_each_stream_by_its_request(tmp_path, fake_server):
    path = _bare_capture(tmp_path, fake_server)
    assert set(open_capture(path).streams["provider"]) == {"127.0.0.1"}
    results = replay(path)
    assert [r.provider for r in results[:3]] == ["custom", "anthropic", "google"]
    assert [r.text for r in results[:3]] == [CLEAN, CLEAN, CLEAN]
    assert [r.error for r in results[:3]] == [None, None, None]
    unknown = results[3]
    assert unknown.error.code == "unknown_provider"
    assert unknown.error.message == (
        f"cannot tell the provider of POST {fake_server.base_url}/v1/embeddings "
        "(recorded provider '127.0.0.1'; no known path, header or body shape); replay it "
        f"with provider=... (lab replay --provider P), one of: {KNOWN}"
    )
    assert [c.type for c in unknown.chunks] == ["error"]


def test_replay_provider_overrides_the_family_of_every_stream(tmp_path, fake_server):
    path = _bare_capture(tmp_path, fake_server)
    results = replay(path, provider="anthropic")
    # the Anthropic stream replays; the others are not Anthropic's wire format
    assert results[1].text == CLEAN and results[1].error is None
    assert results[0].text == "" and results[2].text == ""
    bad = replay(path, provider="nope")
    assert {r.error.code for r in bad} == {"unknown_provider"}
    assert bad[0].error.message.startswith("unknown provider 'nope' (given to replay)")


def test_replay_provider_override_reaches_parallel_workers(tmp_path, fake_server):
    path = _bare_capture(tmp_path, fake_server)
    serial = [r.to_dict() for r in replay(path, provider="custom")]
    parallel = [r.to_dict() for r in replay(path, provider="custom", workers=2)]
    assert parallel == serial
    assert serial[0]["text"] == CLEAN


def test_cli_replay_takes_provider_and_refuses_an_unknown_one(tmp_path, fake_server, capsys):
    path = _bare_capture(tmp_path, fake_server)
    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "== streams (4 rows) ==" in out
    assert main(["replay", str(path), "--provider", "nope"]) == 2
    assert capsys.readouterr().err == (f"lab: error: --provider nope: unknown; one of: {KNOWN}\n")
