"""The markup guard in the chat adapters' pipeline: detection by default, recovery under
``LabConfig.complete()``, on real leaked outputs and on the whole real-body corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab import tables
from lab.anomalies import detect, markup_leak_kinds
from lab.config import LabConfig
from lab.guards import MarkupGuard, MarkupGuardConfig, scan_markup
from lab.guards.markup import markup_kinds
from lab.replay import replay, replay_sse
from lab.resultfiles import read_results
from tests.latency_captures import DONE, MS, content, exchange_row, write_capture

HERE = Path(__file__).parent / "realworld"
MARKUP = json.loads((HERE / "markup" / "sources.json").read_text(encoding="utf-8"))
SOURCES = json.loads((HERE / "sources.json").read_text(encoding="utf-8"))


def chat_body(deltas: list[str], finish: str = "stop") -> bytes:
    """An OpenAI chat-completions stream carrying ``deltas`` as content."""
    out = []
    for d in deltas:
        chunk = {"choices": [{"index": 0, "delta": {"content": d}, "finish_reason": None}]}
        out.append(f"data: {json.dumps(chunk)}\n\n")
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    out.append(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n")
    return "".join(out).encode()


def openrouter_body(deltas: list[str]) -> bytes:
    out = []
    for d in deltas:
        chunk = {
            "provider": "Parasail",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": d}}],
        }
        out.append(f"data: {json.dumps(chunk)}\n\n")
    end = {"provider": "Parasail", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    out.append(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n")
    return "".join(out).encode()


HARMONY = [
    "<|channel|>analy",
    "sis<|message|>User asks 2+2.<|e",
    "nd|><|start|>assistant<|chan",
    "nel|>final<|message|>4",
    ".<|return|>",
]


def test_pipeline_default_leaves_markup_in_the_text_and_names_it():
    r = replay_sse("openai", chat_body(HARMONY))
    assert r.text == "".join(HARMONY)
    events = [(e.guard, e.detail["rule"], e.detail["kind"], e.offset) for e in r.guard_events]
    assert events[:3] == [
        ("markup", "markup_detected", "harmony", 0),
        ("markup", "markup_detected", "harmony", 19),
        ("markup", "markup_detected", "harmony", 44),
    ]
    assert "markup_leak" in detect(r) and markup_leak_kinds(r) == ["harmony"]
    st = tables.streams([r])
    assert st.loc[0, "leak_kind"] == "harmony" and bool(st.loc[0, "leaked"])


@pytest.mark.parametrize("provider", ["openai", "openrouter"])
def test_pipeline_complete_recovers_harmony_channels(provider):
    body = chat_body(HARMONY) if provider == "openai" else openrouter_body(HARMONY)
    r = replay_sse(provider, body, config=LabConfig.complete())
    assert (r.text, r.reasoning) == ("4.", "User asks 2+2.")
    assert markup_leak_kinds(r) == ["harmony"]
    moved = [e.moved for e in r.guard_events if e.detail.get("rule") == "harmony_reasoning"]
    assert "".join(moved) == "User asks 2+2."


def _capture(root: Path, deltas: list[str]) -> Path:
    """A recorded capture of one chat stream carrying ``deltas`` as content, one SSE event
    per read, read ``i`` arriving at ``10 * (i + 1)`` ms (so ``t_ms`` is exact)."""
    reads = [content(d) for d in deltas] + [DONE]
    times = [(10 + 10 * i) * MS for i in range(len(reads))]
    row = exchange_row("s", reads, timing="reads")
    return write_capture(root, [(row, reads, times)])


def _rows(df: pd.DataFrame) -> list[list]:
    return df.astype(object).where(df.notna(), None).values.tolist()


# stream_id, serving_provider, attempt, seq, read_seq, offset, t_ms, guard, rule, leak_kind,
# moved, moved_chars (tables.LEAK_COLUMNS)
HARMONY_DEFAULT_ROWS = [
    ["s", None, 0, 0, 0, 0, 10.0, "markup", "markup_detected", "harmony", "", 0],
    ["s", None, 0, 1, 1, 19, 20.0, "markup", "markup_detected", "harmony", "", 0],
    ["s", None, 0, 2, 2, 44, 30.0, "markup", "markup_detected", "harmony", "", 0],
    ["s", None, 0, 2, 2, 51, 30.0, "markup", "markup_detected", "harmony", "", 0],
    ["s", None, 0, 3, 3, 69, 40.0, "markup", "markup_detected", "harmony", "", 0],
    ["s", None, 0, 3, 3, 85, 40.0, "markup", "markup_detected", "harmony", "", 0],
    ["s", None, 0, 4, 4, 98, 50.0, "markup", "markup_detected", "harmony", "", 0],
]
HARMONY_COMPLETE_ROWS = [
    ["s", None, 0, 1, 1, 0, 20.0, "markup", "removed_markup", "harmony",
     "<|channel|>analysis<|message|>", 30],
    ["s", None, 0, 1, 1, 30, 20.0, "markup", "harmony_reasoning", "harmony",
     "User asks 2+2.", 14],
    ["s", None, 0, 2, 2, 44, 30.0, "markup", "removed_markup", "harmony", "<|end|>", 7],
    ["s", None, 0, 3, 3, 51, 40.0, "markup", "removed_markup", "harmony",
     "<|start|>assistant<|channel|>final<|message|>", 45],
    ["s", None, 0, 4, 4, 98, 50.0, "markup", "removed_markup", "harmony", "<|return|>", 10],
]  # fmt: skip


@pytest.mark.parametrize("config", ["default", "complete"])
def test_pipeline_leaks_table_has_a_row_per_markup_detection_and_none_twice(config, tmp_path):
    """Default: one row per marker the guard saw (rule ``markup_detected``, the class as
    ``leak_kind``, nothing moved), at the read that brought it. complete(): the rows of
    what recovery moved or removed, and no detection row beside them (every marker of
    this body is inside one of them). ``replay(out=DIR)`` writes exactly these rows."""
    cfg = LabConfig.complete() if config == "complete" else None
    capture = _capture(tmp_path / "cap", HARMONY)
    results = replay(capture, config=cfg)
    want = HARMONY_COMPLETE_ROWS if cfg else HARMONY_DEFAULT_ROWS
    assert list(tables.leaks(results).columns) == tables.LEAK_COLUMNS
    assert _rows(tables.leaks(results)) == want
    # the guard sees the same markers in both modes
    assert [e.offset for e in _detections(results[0])] == [0, 19, 44, 51, 69, 85, 98]
    replay(capture, config=cfg, out=tmp_path / "out")
    written = read_results(tmp_path / "out", "leaks")
    assert list(written.columns) == tables.LEAK_COLUMNS
    assert _rows(written) == want


def test_pipeline_leaks_table_keeps_the_detection_of_markup_recovery_left_in_the_text(tmp_path):
    """complete(): a GLM block that yields no call goes back into the text (``unparsed_block``,
    nothing moved), so its detection keeps its row; the stray ``<|im_end|>`` was removed, so
    its ``removed_markup`` row stands for it and its detection has no row of its own. The
    default lists both detections."""
    body = "A <tool_call>tool_12</arg_value></tool_call> B<|im_end|>"
    # 9-character deltas: each marker is found in the event that completes it (seq 1: the
    # opener ends at character 13; seq 6: the token ends at 56), read i at 10 * (i + 1) ms
    deltas = [body[i : i + 9] for i in range(0, len(body), 9)]
    capture = _capture(tmp_path / "cap", deltas)
    (plain,) = replay(capture)
    assert _rows(tables.leaks([plain])) == [
        ["s", None, 0, 1, 1, 2, 20.0, "markup", "markup_detected", "xml_tool_call", "", 0],
        ["s", None, 0, 6, 6, 46, 70.0, "markup", "markup_detected", "special_token", "", 0],
    ]
    (full,) = replay(capture, config=LabConfig.complete())
    assert full.text == "A <tool_call>tool_12</arg_value></tool_call> B"
    assert [e.detail["rule"] for e in full.guard_events] == [
        "markup_detected",
        "unparsed_block",
        "markup_detected",
        "removed_markup",
    ]
    assert _rows(tables.leaks([full])) == [
        ["s", None, 0, 1, 1, 2, 20.0, "markup", "markup_detected", "xml_tool_call", "", 0],
        ["s", None, 0, 6, 6, 46, 70.0, "markup", "removed_markup", "special_token",
         "<|im_end|>", 10],
    ]  # fmt: skip


def test_pipeline_leaks_table_under_complete_lists_each_marker_once_on_the_mixed_body():
    """Every marker of the mixed body (harmony, an XML call, a special token) is recovered
    or removed under complete(): each detection lies inside exactly one moved row of the
    markup guard, and no detection row is left."""
    r = replay_sse("openai", chat_body([MIXED]), config=LabConfig.complete(), stream_id="s")
    lk = tables.leaks([r])
    assert "markup_detected" not in set(lk["rule"])
    cells = zip(lk["offset"], lk["moved_chars"], lk["moved"], strict=True)
    spans = [(o, o + n, m) for o, n, m in cells]
    for e in r.guard_events:
        if e.detail["rule"] == "markup_detected":
            marker, at = e.detail["marker"], e.offset
            holding = [s for s in spans if s[0] <= at and at + len(marker) <= s[1]]
            assert [m[at - a : at - a + len(marker)] for a, _, m in holding] == [marker]


def test_pipeline_complete_recovers_a_kimi_call_split_across_deltas():
    deltas = [
        "Checking.<|tool_calls_sec",
        "tion_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_arg",
        'ument_begin|>{"city": ',
        '"Oslo"}<|tool_call_end|><|tool_calls_section_end|>',
    ]
    r = replay_sse("openai", chat_body(deltas), config=LabConfig.complete())
    assert r.text == "Checking."
    (call,) = r.function_calls
    assert (call.name, call.args, call.id) == (
        "get_weather",
        {"city": "Oslo"},
        "functions.get_weather:0",
    )
    assert call.provider_fields["recovered_from"] == "kimi_tool_section"
    tc = tables.tool_calls([r])
    assert tc["recovered_from"].tolist() == ["kimi_tool_section"]
    assert tc["valid"].tolist() == [True]  # tools unknown: name and schema unchecked


IN_REASONING = [
    "Let me think.<|im",
    "_end|> Then call.<|tool_calls_sec",
    "tion_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>",
    '{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>',
]


def reasoning_body(provider: str, reasoning: list[str], answer: str) -> bytes:
    """A chat stream whose reasoning field (``reasoning_content``; OpenRouter's
    ``reasoning``) carries ``reasoning``, then ``answer`` as content."""
    field = "reasoning" if provider == "openrouter" else "reasoning_content"
    deltas = [{field: piece} for piece in reasoning] + [{"content": answer}]
    out = []
    for d in deltas:
        chunk = {"provider": "Novita", "choices": [{"index": 0, "delta": d}]}
        out.append(f"data: {json.dumps(chunk)}\n\n")
    end = {"provider": "Novita", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    out.append(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n")
    return "".join(out).encode()


@pytest.mark.parametrize("provider", ["openai", "deepseek", "openrouter"])
def test_pipeline_markup_in_the_reasoning_is_named_and_recovered_there(provider):
    """The guard reads the reasoning field too: a special token and a Kimi section split
    across reasoning deltas are named by default (reasoning untouched) and under complete()
    the token is removed and the section becomes the call."""
    body = reasoning_body(provider, IN_REASONING, "Sunny.")
    plain = replay_sse(provider, body)
    assert (plain.reasoning, plain.text, plain.function_calls) == (
        "".join(IN_REASONING),
        "Sunny.",
        [],
    )
    assert markup_leak_kinds(plain) == ["kimi_tool_section", "special_token"]
    assert "markup_leak" in detect(plain)
    full = replay_sse(provider, body, config=LabConfig.complete())
    assert (full.reasoning, full.text) == ("Let me think. Then call.", "Sunny.")
    assert [(c.name, c.args, c.id, c.provider_fields) for c in full.function_calls] == [
        ("get_weather", {"city": "Oslo"}, "functions.get_weather:0",
         {"recovered_from": "kimi_tool_section"}),
    ]  # fmt: skip
    assert markup_leak_kinds(full) == ["kimi_tool_section", "special_token"]


def test_pipeline_a_block_cut_by_the_end_of_stream_is_recovered_as_cut():
    deltas = ["<tool_call>\n", '{"name": "f", "arguments": {"a": 1, "b": "x']
    r = replay_sse("openai", chat_body(deltas), config=LabConfig.complete())
    (call,) = r.function_calls
    assert (call.name, call.args, call.arguments_truncated) == ("f", {"a": 1}, True)
    assert tables.tool_calls([r])["error_kind"].tolist() == ["truncated"]


STRIPPED = ["anal", "ysisUser asks 2+2.assis", "tantfin", "al4", "."]


@pytest.mark.parametrize("provider", ["openai", "openrouter"])
def test_pipeline_harmony_stripped_named_by_default_recovered_under_complete(provider):
    body = chat_body(STRIPPED) if provider == "openai" else openrouter_body(STRIPPED)
    r = replay_sse(provider, body)
    assert r.text == "".join(STRIPPED)
    assert _markup_events(r) == [
        ("markup_detected", "harmony_stripped", 0, ""),
        ("markup_detected", "harmony_stripped", 22, ""),
    ]
    assert markup_leak_kinds(r) == ["harmony_stripped"] and "markup_leak" in detect(r)
    assert tables.streams([r]).loc[0, "leak_kind"] == "harmony_stripped"
    full = replay_sse(provider, body, config=LabConfig.complete())
    assert (full.text, full.reasoning) == ("4.", "User asks 2+2.")
    assert markup_leak_kinds(full) == ["harmony_stripped"]


MIXED = (
    "Plain text first. <|channel|>analysis<|message|>Think.<|end|><|start|>assistant"
    "<|channel|>final<|message|>Four.<|return|> a < b and c<d; "
    '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call> then <|im_end|> end'
)


def _detections(r) -> list:
    return [e for e in r.guard_events if e.detail.get("rule") == "markup_detected"]


def _markup_events(r) -> list[tuple]:
    return [
        (e.detail["rule"], e.detail.get("kind"), e.offset, e.moved)
        for e in r.guard_events
        if e.guard == "markup"
    ]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=len(MIXED)), min_size=1, max_size=30),
    st.sampled_from(["openai", "openrouter"]),
    st.booleans(),
)
def test_pipeline_markup_split_anywhere_is_what_the_guard_sees_whole(cuts, provider, complete):
    """The adapters' per-chunk markup path (idle deltas without ``<`` only counted) finds
    exactly what one guard fed the same deltas finds: events (rule, class, offset, text),
    and under complete() the same text, reasoning and calls."""
    points = sorted(set(cuts))
    deltas = [MIXED[a:b] for a, b in zip([0, *points], [*points, len(MIXED)], strict=True)]
    deltas = [d for d in deltas if d]
    body = chat_body(deltas) if provider == "openai" else openrouter_body(deltas)
    cfg = LabConfig.complete() if complete else LabConfig()
    r = replay_sse(provider, body, config=cfg)
    guard = MarkupGuard(cfg.markup, recover=complete)
    out, _ = scan_markup(deltas, cfg.markup, recover=complete)
    for d in deltas:
        guard.feed(d)
    guard.flush()
    want = [(n.rule, n.detail.get("kind"), n.offset, n.moved) for n in guard.drain_notes()]
    assert want and _markup_events(r) == want
    if complete:
        assert (r.text, r.reasoning) == (out.text, out.reasoning)
        assert [(c.name, c.args) for c in r.function_calls] == [(c.name, c.args) for c in out.calls]
    else:
        assert r.text == MIXED


@pytest.mark.parametrize("provider", ["openai", "openrouter"])
def test_pipeline_markup_with_no_class_runs_no_guard_and_changes_nothing_else(provider):
    """``markup.classes=()`` builds no markup guard: markup stays text with no event, and
    every other part of the result is the default config's."""
    body = chat_body(HARMONY) if provider == "openai" else openrouter_body(HARMONY)
    none = LabConfig(markup=MarkupGuardConfig(classes=()))
    off, on = replay_sse(provider, body, config=none), replay_sse(provider, body)
    assert off.text == on.text == "".join(HARMONY)
    assert _markup_events(off) == [] and _markup_events(on)
    keep = [e for e in on.guard_events if e.guard != "markup"]
    assert off.guard_events == keep
    assert [c.model_dump() for c in off.chunks] == [c.model_dump() for c in on.chunks]


@pytest.mark.parametrize("src", MARKUP, ids=[s["name"] for s in MARKUP])
def test_pipeline_real_leaked_outputs_framed_as_a_stream(src):
    """Each real leaked output, as a chat stream of 5-character deltas: detected as its
    class under the default (text untouched), recovered as expected under complete()."""
    text = (HERE / "markup" / src["file"]).read_text(encoding="utf-8")
    body = chat_body([text[i : i + 5] for i in range(0, len(text), 5)])
    plain = replay_sse("openai", body)
    assert plain.text == text
    assert markup_leak_kinds(plain) == src["classes"]
    full = replay_sse("openai", body, config=LabConfig.complete())
    want = src["expected"]
    assert full.text == want["text"].strip() or full.text == want["text"]
    assert full.reasoning == want["reasoning"]
    assert [[c.name, c.args, c.id] for c in full.function_calls] == want["calls"]
    assert markup_leak_kinds(full) == src["classes"]
    # the leaks table: a detection row per marker by default; under complete() one only for
    # markup recovery left in the text (a block that did not parse), whose marker is there
    lk = tables.leaks([plain])
    assert lk["rule"].tolist() == ["markup_detected"] * len(_detections(plain))
    assert sorted(set(lk["leak_kind"])) == src["classes"]
    kept = tables.leaks([full]).query("rule == 'markup_detected'")["offset"].tolist()
    markers = {e.offset: e.detail["marker"] for e in _detections(full)}
    assert all(markers[o] in full.text for o in kept)
    assert bool(kept) == bool(markup_kinds(full.text))  # none where none is left


@pytest.mark.parametrize("config", ["default", "complete"])
def test_pipeline_no_markup_leak_on_any_real_body_without_markup(config):
    """The false-positive check over the whole real corpus: no real provider body in
    tests/realworld carries markup, and none gets a markup guard event, the anomaly or a
    markup row in the leaks table."""
    cfg = LabConfig.complete() if config == "complete" else None
    assert SOURCES
    flagged = []
    for src in SOURCES:
        body = (HERE / src["file"]).read_bytes()
        r = replay_sse(
            src["provider"], body, config=cfg, stream_id=src["name"], path=src.get("request_path")
        )
        markup_rows = (tables.leaks([r])["guard"] == "markup").any()
        if any(e.guard == "markup" for e in r.guard_events) or "markup_leak" in detect(r):
            flagged.append(src["name"])
        elif markup_rows:
            flagged.append(f"{src['name']} (leaks table)")
    assert flagged == []
