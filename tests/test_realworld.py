"""Real provider bytes (``tests/realworld/``): every body gives exactly its expected result.

The bodies are response bodies real providers sent, committed by public SDK projects
(provenance in ``tests/realworld/sources.json`` and ``README.md``). Under
``LabConfig.complete()`` each must normalize exactly as ``expected.json`` says; under the
default (reference) config every difference must be named by an anomaly.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.anomalies import detect
from lab.config import LabConfig
from lab.errors import normalize_http_error
from lab.model import ProviderError
from lab.replay import replay_sse
from lab.result import StreamResult
from lab.tables import safety_text

HERE = Path(__file__).parent / "realworld"
EXPECTED: dict[str, dict] = json.loads((HERE / "expected.json").read_text(encoding="utf-8"))
SOURCES: dict[str, dict] = {
    s["name"]: s for s in json.loads((HERE / "sources.json").read_text(encoding="utf-8"))
}
NAMES = sorted(EXPECTED)

# Bodies the adapters still get wrong while issue 18 is in progress: strict xfail, so a fixed
# body fails here until it is taken off the list. The list must end empty.
KNOWN_GAPS: frozenset[str] = frozenset(
    {
        # issue 18c additions
    }
)


KNOWN_REFERENCE_GAPS: frozenset[str] = KNOWN_GAPS


def _cases(gaps: frozenset[str]) -> list:
    return [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason="issue 18 gap"))
        if n in gaps
        else n
        for n in NAMES
    ]


def _squash(text: str) -> str:
    return "".join(text.split())


def _replay(name: str, config: LabConfig | None = None) -> StreamResult:
    src = SOURCES[name]
    body = (HERE / src["file"]).read_bytes()
    return replay_sse(
        src["provider"], body, config=config, stream_id=name, path=src.get("request_path")
    )


def _error_mismatches(want: dict, err: ProviderError | None) -> list[str]:
    """How ``err`` falls short of an expected error: ``message_contains`` strings must be in its
    message; ``carries`` strings anywhere on it (code, message, user message, original error,
    but not the raw HTTP body kept there, which would carry anything); ``retryable`` and
    ``status`` as given."""
    if err is None:
        return [f"error: none vs {want}"]
    out: list[str] = []
    for piece in want.get("message_contains", []):
        if piece not in err.message:
            out.append(f"error.message: {err.message[:80]!r} lacks {piece!r}")
    original = err.original_error
    if isinstance(original, dict):
        original = {k: v for k, v in original.items() if k != "body"}
    everything = " ".join(
        [
            err.code,
            err.message,
            err.user_message or "",
            json.dumps(original, default=str, ensure_ascii=False),
            repr(original),
        ]
    )
    for piece in want.get("carries", []):
        if piece not in everything:
            out.append(f"error does not carry {piece!r}")
    for key in ("retryable", "status", "type", "code"):
        if key in want and getattr(err, key) != want[key]:
            out.append(f"error.{key}: {getattr(err, key)!r} vs {want[key]!r}")
    return out


def mismatches(name: str, r: StreamResult) -> list[str]:
    """How ``r`` differs from the expectation of body ``name`` (empty: it matches)."""
    exp = EXPECTED[name]
    out: list[str] = []
    if r.text.strip() != exp["text"].strip():
        out.append(f"text: {r.text[:60]!r}... ({len(r.text)}) vs {len(exp['text'])} chars")
    if _squash(r.reasoning) != _squash(exp["reasoning"]):
        out.append(f"reasoning: {len(r.reasoning)} vs {len(exp['reasoning'])} chars")
    whole = [[c.name, c.args] for c in r.function_calls if not c.arguments_truncated]
    if whole != exp["tool_calls"]:
        out.append(f"tool_calls: {whole} vs {exp['tool_calls']}")
    if exp.get("truncated"):
        partial = [c.name for c in r.function_calls if c.arguments_truncated]
        if partial != exp["partial_tool_calls"]:
            out.append(f"partial tool calls: {partial} vs {exp['partial_tool_calls']}")
        if r.finish_reason in ("stop", "length", "tool_calls", "content_filter"):
            out.append(f"a cut body claims finish {r.finish_reason!r}")
        if r.error is None and not {"eof_without_terminator", "truncated_tool_arguments"} & set(
            detect(r)
        ):
            out.append("the cut is not visible (no error, no truncation anomaly)")
        if r.error is not None and not r.error.retryable:
            out.append(f"a dropped connection is not retryable: {r.error.type}/{r.error.code}")
    else:
        if r.finish_reason != exp["finish_reason"]:
            out.append(f"finish_reason: {r.finish_reason!r} vs {exp['finish_reason']!r}")
        want = exp.get("error")
        if want is None and r.error is not None:
            out.append(f"error: {r.error.type}: {r.error.message[:80]}")
        elif want is not None:
            out.extend(_error_mismatches(want, r.error))
    eu = exp["usage"]
    if eu is None:
        if r.usage is not None and (r.usage.input_tokens or r.usage.output_tokens):
            out.append(f"usage: {r.usage} vs none")
    else:
        got = r.usage
        if got is None:
            out.append(f"usage: none vs {eu}")
        else:
            for key in ("input_tokens", "output_tokens", "reasoning_tokens"):
                if (getattr(got, key) or 0) != (eu.get(key) or 0):
                    out.append(f"usage.{key}: {getattr(got, key)} vs {eu.get(key)}")
    if r.serving_provider != exp["serving_provider"]:
        out.append(f"serving_provider: {r.serving_provider!r} vs {exp['serving_provider']!r}")
    if "safety" in exp:
        got_safety = safety_text(r.facts.get("safety_ratings"))
        if got_safety != exp["safety"]:
            out.append(f"safety: {got_safety!r} vs {exp['safety']!r}")
    return out


def test_every_body_has_its_provenance_and_bytes():
    assert NAMES, "no real bodies found"
    assert set(NAMES) == set(SOURCES)
    for name in NAMES:
        src = SOURCES[name]
        assert src["repo"] and src["path"], name
        # a body read from a test file's inline chunks names the test in its note instead
        assert src.get("file_commit") or src["how"] == "inline-chunks", name
        assert (HERE / src["file"]).stat().st_size > 0, name


@pytest.mark.parametrize("name", _cases(KNOWN_GAPS))
def test_real_body_normalizes_exactly_under_complete_config(name):
    r = _replay(name, LabConfig.complete())
    assert mismatches(name, r) == []


@pytest.mark.parametrize("name", _cases(KNOWN_REFERENCE_GAPS))
def test_real_body_under_reference_config_names_every_difference(name):
    r = _replay(name)
    if mismatches(name, r):
        assert detect(r), f"{name}: the reference result differs but no anomaly says so"


def _chat_bodies() -> list[str]:
    from lab.providers import get_adapter

    return [
        n
        for n in NAMES
        if get_adapter(SOURCES[n]["provider"]).family == "openai_compatible"
        and not SOURCES[n].get("request_path")  # chat completions, not another API
        and n not in KNOWN_GAPS
    ]


@pytest.mark.parametrize("name", _chat_bodies())
def test_custom_catch_all_reads_every_openai_compatible_body_under_complete_config(name):
    src = SOURCES[name]
    body = (HERE / src["file"]).read_bytes()
    r = replay_sse("custom", body, config=LabConfig.complete(), stream_id=name)
    assert mismatches(name, r) == []


# Real HTTP error bodies (``tests/realworld/http/``, provenance in ``http_errors.json``): each
# goes through ``normalize_http_error`` as the provider sent it, under the complete config.
HTTP_ERRORS: dict[str, dict] = {
    e["name"]: e for e in json.loads((HERE / "http_errors.json").read_text(encoding="utf-8"))
}
KNOWN_HTTP_GAPS: frozenset[str] = frozenset()


def test_every_http_error_body_has_its_provenance_and_bytes():
    assert HTTP_ERRORS, "no real HTTP error bodies found"
    for name, e in HTTP_ERRORS.items():
        assert e["repo"] and e["path"] and e["file_commit"] and e["basis"], name
        assert (HERE / e["file"]).stat().st_size == e["bytes"], name


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.xfail(strict=True, reason="issue 18 gap"))
        if n in KNOWN_HTTP_GAPS
        else n
        for n in sorted(HTTP_ERRORS)
    ],
)
def test_real_http_error_body_normalizes_under_complete_config(name):
    e = HTTP_ERRORS[name]
    body = (HERE / e["file"]).read_text(encoding="utf-8")
    cfg = LabConfig.complete()
    err = normalize_http_error(
        e["provider"], e["status"], body, body_error_codes=cfg.body_error_codes
    )
    assert _error_mismatches(e["expected"], err) == []
