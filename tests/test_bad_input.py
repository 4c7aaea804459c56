"""Bad input gives a clear error result or one clear exception, never a traceback from a stream."""

from __future__ import annotations

import json

import pytest

from lab.replay import replay_sse

FAMILIES = ["openrouter", "openai", "deepseek", "zai", "nvidia", "custom", "google", "anthropic"]

ANTHROPIC_BODY = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
    b'"type":"message","role":"assistant","content":[],"usage":{"input_tokens":3}}}\n\n'
    b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"hi"}}\n\n'
)


def test_unknown_provider_name_is_an_error_result_naming_the_known_ones():
    r = replay_sse("openruoter", b"data: {}\n\n")
    assert r.error is not None
    assert r.error.code == "unknown_provider"
    assert "'openruoter'" in r.error.message and "openrouter" in r.error.message
    assert [c.type for c in r.chunks] == ["error"]


@pytest.mark.parametrize("provider", FAMILIES)
@pytest.mark.parametrize(
    "body", [b"", b"\x00\xff\xfe\x80 binary garbage \xc3\n\n\x01"], ids=["empty", "binary"]
)
def test_empty_and_binary_bodies_end_as_an_empty_response_error(provider, body):
    r = replay_sse(provider, body)
    assert r.error is not None, provider
    assert (r.error.code, r.error.type, r.error.retryable) == ("empty_response", "api_error", True)
    assert r.text == ""
    assert r.finish_reason == "error"


@pytest.mark.parametrize("provider", ["openrouter", "openai", "google"])
def test_a_body_of_another_family_gives_an_error_result(provider):
    r = replay_sse(provider, ANTHROPIC_BODY)
    assert r.error is not None
    assert r.text == ""


def test_empty_response_rule_can_be_switched_off_for_reference_behaviour():
    r = replay_sse(
        "openrouter", b": OPENROUTER PROCESSING\n\n", config={"empty_response_is_error": False}
    )
    assert r.error is None
    assert r.chunks == []


def test_unknown_provider_in_run_stream_raises_one_clear_value_error():
    from lab.stream import run_stream

    with pytest.raises(ValueError, match="unknown provider 'nope'; known providers: "):
        run_stream("nope", {"model": "m", "messages": []})


@pytest.mark.parametrize("workers", [0, -2])
def test_replay_refuses_fewer_than_one_worker(workers):
    from lab.replay import replay

    with pytest.raises(ValueError, match=f"workers must be at least 1 .*not {workers}$"):
        replay("captures-that-are-never-opened", workers=workers)


def test_replay_refuses_a_worker_count_that_is_not_an_int():
    from lab.replay import replay

    with pytest.raises(TypeError, match="workers must be an int or None, not float"):
        replay("captures-that-are-never-opened", workers=1.5)


def test_an_empty_capture_path_is_refused_not_read_as_the_current_directory():
    from lab.capture import CaptureError
    from lab.capture import open as open_capture

    with pytest.raises(CaptureError, match="^empty capture path"):
        open_capture("")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"hold_limit_chars": 10, "degrade": False},
            "invalid config: hold_limit_chars: not a config field (a spill guard "
            'field: put it under "spill")',
        ),
        (
            {"degrad": False},
            "invalid config: degrad: not a config field (did you mean 'degrade'?)",
        ),
        (
            {"spill": {"hold_limit_char": 10}},
            "invalid config: spill.hold_limit_char: not a config field "
            "(did you mean 'hold_limit_chars'?)",
        ),
        (
            {"zzz_unknown": 1},
            "invalid config: zzz_unknown: not a config field",
        ),
        (
            {"inactivity_timeout_s": -1},
            "invalid config: inactivity_timeout_s: Input should be greater than 0 (got -1)",
        ),
        (
            {"dedup_min_chars": -1, "degrade": "maybe"},
            "invalid config: dedup_min_chars: Input should be greater than or equal to 0 "
            "(got -1); degrade: Input should be a valid boolean, unable to interpret input "
            "(got 'maybe')",
        ),
    ],
)
def test_a_bad_config_is_one_line_naming_each_field(value, message):
    from lab.config import ConfigError, LabConfig

    with pytest.raises(ConfigError) as info:
        LabConfig.coerce(value)
    assert str(info.value) == message


def test_a_config_fingerprint_names_the_choices_away_from_the_defaults_only():
    """A field added later at its default leaves every earlier fingerprint as it was."""
    import hashlib

    from lab.config import LabConfig
    from lab.guards import SpillGuardConfig

    default = LabConfig().fingerprint()
    assert default == hashlib.sha1(b"{}").hexdigest()[:10]
    assert LabConfig(degrade=True, spill=SpillGuardConfig()).fingerprint() == default
    tuned = LabConfig(spill=SpillGuardConfig(min_clause_words=3))
    assert tuned.fingerprint() == hashlib.sha1(b'{"spill":{"min_clause_words":3}}').hexdigest()[:10]
    assert len({default, tuned.fingerprint(), LabConfig(degrade=False).fingerprint()}) == 3


@pytest.mark.parametrize("provider", FAMILIES)
def test_a_json_error_body_sent_with_200_instead_of_a_stream_keeps_the_providers_word(provider):
    # a gateway or server that answers a streaming request with one JSON error object and
    # HTTP 200, no SSE framing: the provider's message and its status are what the user needs
    body = b'{"error":{"message":"model is overloaded","type":"server_error","code":503}}\n'
    r = replay_sse(provider, body)
    assert r.error is not None and r.finish_reason == "error"
    assert "model is overloaded" in r.error.message
    assert r.error.message.endswith("[a JSON error body, not a stream, sent with HTTP 200]")
    assert r.error.retryable is True  # 503, as the body says: worth another try
    # a JSON body without an error is still an empty response
    other = replay_sse(provider, b'{"status": "ok"}\n')
    assert other.error is not None and other.error.code == "empty_response"


@pytest.mark.parametrize("provider", FAMILIES)
def test_a_json_error_body_sent_with_200_whose_code_names_no_status_stays_retryable(provider):
    # a code that names a status as a string is that status; a word, or no code, names
    # none: HTTP 200 tells no rule anything, so the body's code is kept and it is retried,
    # as the empty body it was taken for is
    said = replay_sse(provider, b'{"error":{"message":"slow down","code":"429"}}')
    assert said.error is not None
    assert (said.error.code, said.error.retryable) == ("429", True)
    for body, code in (
        (
            b'{"error":{"message":"Rate limit exceeded","code":"rate_limit_exceeded"}}',
            "rate_limit_exceeded",
        ),
        (b'\xef\xbb\xbf{"error":"model overloaded"}', "error_body"),  # a BOM in front
    ):
        r = replay_sse(provider, body)
        assert r.error is not None
        assert (r.error.code, r.error.retryable) == (code, True)
        assert r.error.message.endswith("[a JSON error body, not a stream, sent with HTTP 200]")
    # a message a classifier knows keeps its advice: a longer context will not help
    long = b'{"error":{"message":"This model\'s maximum context length is 8192 tokens"}}'
    r = replay_sse(provider, long)
    assert r.error is not None and r.error.retryable is False


@pytest.mark.parametrize("provider", FAMILIES)
@pytest.mark.parametrize("code", ["\u00b2", "\u0663", "9" * 5000])
def test_a_json_error_body_whose_code_is_digits_no_int_takes_is_kept_not_a_crash(provider, code):
    # "²" and the Arabic-Indic "٣" are str.isdigit() but int() refuses them; int() refuses a
    # string of more than 4,300 digits: the code is the provider's word, kept as sent
    body = json.dumps({"error": {"message": "x", "code": code}}).encode()
    r = replay_sse(provider, body)
    assert r.error is not None
    assert (r.error.code, r.error.retryable) == (code, True)
