"""Anomaly detectors over real-shaped streams: each replayed through the whole stack.

Every SSE body below is built the way the provider sends it
(docs/reference.md, "1.2 OpenRouter"): keepalive comments, the full chunk envelope with
``provider`` and ``role`` on every delta, ``reasoning`` and ``reasoning_details`` side by side,
a finish chunk, a usage chunk with ``finish_reason: null``, then ``[DONE]``. Each detector has a
stream that fires it and a clean stream that does not; assertions are the exact list
:func:`lab.anomalies.detect` returns.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.anomalies import (
    DETECTORS,
    GLUED_SUMMARY_RE,
    TOOL_MARKUP_MARKERS,
    TOOL_MARKUP_RE,
    AnomalyConfig,
    detect,
    explain,
    find_duplicated_delta,
    find_immediate_repetition,
    shown_before_close,
)
from lab.model import FunctionCall, ProcessedChunk, ProviderError, ThoughtLogEntry
from lab.replay import replay_sse
from lab.result import AttemptInfo, ChunkOrigin, StreamResult
from lab.toolcheck import check_stream

# --------------------------------------------------------------------------- wire builders

GEN_ID = "gen-1759420128-LjBsuYJf6lKeyy66nQs9"
KEEPALIVES = ": OPENROUTER PROCESSING\n\n: OPENROUTER PROCESSING\n\n"
DONE = "data: [DONE]\n\n"
USAGE = {"prompt_tokens": 12, "completion_tokens": 40, "total_tokens": 52}


def or_chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish: str | None = None,
    provider: str = "DeepInfra",
    model: str = "z-ai/glm-4.5",
    usage: dict[str, Any] | None = None,
) -> str:
    """One OpenRouter SSE event with the full envelope real captures carry."""
    d: dict[str, Any] = {"role": "assistant", "content": "", "reasoning": None}
    d["reasoning_details"] = []
    d.update(delta or {})
    body: dict[str, Any] = {
        "id": GEN_ID,
        "provider": provider,
        "model": model,
        "object": "chat.completion.chunk",
        "created": 1759420128,
        "choices": [
            {
                "index": 0,
                "delta": d,
                "finish_reason": finish,
                "native_finish_reason": finish,
                "logprobs": None,
            }
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return "data: " + json.dumps(body, ensure_ascii=False) + "\n\n"


def reasoning(text: str, **kw: Any) -> str:
    """A reasoning delta: ``reasoning`` plus the matching ``reasoning_details`` fragment."""
    fragment = {"type": "reasoning.text", "text": text, "format": "unknown", "index": 0}
    return or_chunk({"reasoning": text, "reasoning_details": [fragment]}, **kw)


def content(text: str, **kw: Any) -> str:
    return or_chunk({"content": text}, **kw)


def tool_delta(call: dict[str, Any], **kw: Any) -> str:
    kw.setdefault("provider", "Amazon Bedrock")
    kw.setdefault("model", "anthropic/claude-opus-4.6")
    return or_chunk({"content": None, "tool_calls": [call]}, **kw)


def ending(finish: str = "stop", **kw: Any) -> str:
    """Finish chunk, then the usage chunk (finish_reason null again), then [DONE]."""
    return or_chunk(finish=finish, **kw) + or_chunk(usage=USAGE, **kw) + DONE


def openrouter(*events: str, config: Any = None) -> StreamResult:
    return replay_sse("openrouter", KEEPALIVES + "".join(events), config=config)


def gemini_chunk(text: str, finish: str | None = None) -> str:
    candidate: dict[str, Any] = {"content": {"parts": [{"text": text}], "role": "model"}}
    candidate["index"] = 0
    if finish:
        candidate["finishReason"] = finish
    body = {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 8, "candidatesTokenCount": 5, "totalTokenCount": 13},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "mT6SaIbcBpnXz7IPmdqT-Qs",
    }
    return "data: " + json.dumps(body) + "\r\n\r\n"


def gemini(*events: str) -> StreamResult:
    return replay_sse("google", "".join(events))


def anthropic_event(name: str, data: dict[str, Any]) -> str:
    """Anthropic's named events: ``event: <type>`` then ``data:`` with the same type."""
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


ANTHROPIC_START = anthropic_event(
    "message_start",
    {
        "type": "message_start",
        "message": {
            "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 472, "cache_read_input_tokens": 900, "output_tokens": 2},
        },
    },
) + anthropic_event("ping", {"type": "ping"})


def anthropic_block_start(index: int, block: dict[str, Any]) -> str:
    return anthropic_event(
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": block},
    )


def anthropic_delta(index: int, delta: dict[str, Any]) -> str:
    return anthropic_event(
        "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    )


def anthropic_text(index: int, *parts: str) -> str:
    return (
        anthropic_block_start(index, {"type": "text", "text": ""})
        + "".join(anthropic_delta(index, {"type": "text_delta", "text": p}) for p in parts)
        + anthropic_event("content_block_stop", {"type": "content_block_stop", "index": index})
    )


def anthropic_end(stop_reason: str = "end_turn") -> str:
    return anthropic_event(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": 89},
        },
    ) + anthropic_event("message_stop", {"type": "message_stop"})


def anthropic(*events: str) -> StreamResult:
    return replay_sse("anthropic", ANTHROPIC_START + "".join(events))


def clean_stream() -> StreamResult:
    """GLM-4.5 via DeepInfra: reasoning, then the answer, finish, usage, [DONE]."""
    return openrouter(
        reasoning("Okay"),
        reasoning(", the user asks for the capital of France."),
        content("Paris is"),
        content(" the capital of France."),
        ending(),
    )


def built(**kw: Any) -> StreamResult:
    """A hand-built result (for providers whose adapters are not in the lab yet)."""
    kw.setdefault("stream_id", "s1")
    kw.setdefault("provider", "openrouter")
    return StreamResult(**kw)


MINIMAX_CALL = (
    '<minimax:tool_call>\n<invoke name="bash">\n<parameter name="command">mb --help'
    "</parameter>\n</invoke>\n</minimax:tool_call>"
)
KIMI_CALL = (
    " <|tool_calls_section_begin|> <|tool_call_begin|> functions.bash:0 "
    '<|tool_call_argument_begin|> {"command": "ls -la"} <|tool_call_end|> '
    "<|tool_calls_section_end|"
)
PASSAGE = (
    "To reset your password, open Settings, choose Security, and press Reset password. "
    "A link arrives by email within five minutes. "
)


# --------------------------------------------------------------------------- the registry


def test_registry_lists_every_detector_in_report_order():
    assert list(DETECTORS) == [
        "tool_markup_in_content",
        "tool_markup_in_reasoning",
        "markup_leak",
        "duplicated_deltas",
        "glued_reasoning_summaries",
        "eof_without_terminator",
        "recording_cut",
        "limit_reached",
        "truncated_tool_arguments",
        "tool_arguments_glued",
        "tool_arguments_resent",
        "empty_answer_with_reasoning",
        "think_tags_after_guards",
        "error_in_200_stream",
        "error_swallowed_in_200",
        "parallel_tool_calls_dropped",
        "reasoning_field_ignored",
        "usage_excludes_reasoning",
        "unhandled_shape",
        "hostile_value",
        "dedup_dropped_repeat",
        "tool_call_header_resent",
        "tool_calls_merged",
        "length_content_dropped",
        "tool_call_failed",
        "unknown_finish_reason",
        "choices_mixed",
        "reasoning_shown_before_close",
        "tool_calls_dropped",
        "usage_not_final",
        "body_not_as_sent",
        "refusal",
        "secret_redacted",
        "secret_unchecked",
    ]


@pytest.mark.parametrize("name", list(DETECTORS))
def test_explain_gives_one_line_per_detector(name):
    line = explain(name)
    assert line and "\n" not in line and line.endswith((".", ")"))


def test_explain_unknown_name_lists_known_ones():
    with pytest.raises(KeyError, match="tool_markup_in_content"):
        explain("no_such_anomaly")


def test_clean_openrouter_stream_has_no_anomalies():
    r = clean_stream()
    assert r.text == "Paris is the capital of France."
    assert detect(r) == []


def test_clean_stream_fires_no_single_detector():
    r = clean_stream()
    assert {name: fn(r) for name, fn in DETECTORS.items()} == dict.fromkeys(DETECTORS, False)


# --------------------------------------------------------------------------- tool markup


def test_minimax_xml_tool_call_left_in_content_is_flagged():
    # pi #368: MiniMax M2.1 via OpenRouter writes its call as text; the opener is split.
    r = openrouter(
        content("I'll check the help first.\n"),
        content(MINIMAX_CALL[:12]),
        content(MINIMAX_CALL[12:]),
        ending(provider="Minimax", model="minimax/minimax-m2.1"),
    )
    assert "<minimax:tool_call>" in r.text and r.function_calls == []
    assert detect(r) == ["tool_markup_in_content", "markup_leak"]


def test_kimi_tool_tokens_in_reasoning_flag_markup_and_the_empty_answer():
    # opencode #8851: Kimi-K2's call lands in the thinking block (closer missing its ">"),
    # so no call is made and the visible answer is empty.
    r = openrouter(
        reasoning("I should list the files."),
        reasoning(KIMI_CALL),
        ending(provider="Chutes", model="moonshotai/kimi-k2.5"),
    )
    assert detect(r) == ["tool_markup_in_reasoning", "markup_leak", "empty_answer_with_reasoning"]


@pytest.mark.parametrize(
    "markup",
    [
        "<tool_call><function=read_file><parameter=path>a.md</parameter></function></tool_call>",
        "<tool_call>read_file<arg_key>path</arg_key><arg_value>a.md</arg_value></tool_call>",
        '<tool_call>{"name": "read_file", "arguments": {"path": "a.md"}}</tool_call>',
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>read_file\n```json\n{"path": "a.md"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
        "<|tool_call_section_begin|> <|tool_call_begin|> functions.read_file:0",
    ],
    ids=["qwen-xml", "glm", "hermes", "deepseek", "kimi-singular"],
)
def test_every_vendor_tool_markup_dialect_in_content_is_flagged(markup):
    r = openrouter(content("Reading it now. "), content(markup), ending())
    assert detect(r) == ["tool_markup_in_content", "markup_leak"]


def test_tool_markup_pattern_is_built_from_the_marker_list():
    assert TOOL_MARKUP_MARKERS
    for marker in TOOL_MARKUP_MARKERS:
        assert TOOL_MARKUP_RE.search(f"text {marker} more")
    assert TOOL_MARKUP_RE.search("a <tool> tag, a call_tool() and <toolcall>") is None


def test_a_real_tool_call_is_not_tool_markup():
    r = openrouter(
        tool_delta(
            {
                "index": 0,
                "id": "toolu_bdrk_01RMTd7R9DzQjEEWgDwzcBsU",
                "type": "function",
                "function": {"name": "read_file", "arguments": ""},
            }
        ),
        tool_delta({"index": 0, "function": {"arguments": '{"path": "RE'}}),
        tool_delta({"index": 0, "function": {"arguments": 'ADME.md"}'}}),
        ending("tool_calls", provider="Amazon Bedrock"),
    )
    assert [(f.name, f.args) for f in r.function_calls] == [("read_file", {"path": "README.md"})]
    assert detect(r) == []


# --------------------------------------------------------------------------- duplicated deltas


def test_every_reasoning_delta_sent_twice_is_flagged():
    # bifrost #6427: "TheThe user is user is greeting greeting me with me with ..."
    doubled = ["The", "The", " user is", " user is", " greeting", " greeting", " me with"]
    r = openrouter(
        *(reasoning(d) for d in doubled),
        content("Hello! How can I help you today?"),
        ending(),
    )
    assert r.reasoning.startswith("TheThe user is user is greeting greeting")
    assert find_duplicated_delta(r) == " user is"
    assert detect(r) == ["duplicated_deltas"]


def test_passage_repeated_back_to_back_inside_the_answer_is_flagged():
    r = openrouter(content("Sure:\n" + PASSAGE + PASSAGE), ending())
    assert find_immediate_repetition(r.text) == (6, len(PASSAGE))
    assert detect(r) == ["duplicated_deltas"]


def test_repeated_text_delta_the_dedup_guard_dropped_is_not_flagged():
    r = openrouter(content("Sure. "), content(PASSAGE), content(PASSAGE), ending())
    assert r.text == "Sure. " + PASSAGE
    assert [e.guard for e in r.guard_events] == ["dedup"]
    assert detect(r) == []


def test_short_or_blank_deltas_repeated_are_not_duplicates():
    # Indentation, blank lines and short words legitimately repeat back to back.
    r = openrouter(
        reasoning("Let me write the loop:\n"),
        reasoning("    "),
        reasoning("    "),
        reasoning("\n\n"),
        reasoning("\n\n"),
        reasoning("very"),
        reasoning("very"),
        content("```python\nfor x in xs:\n"),
        content("        "),
        content("        "),
        content("print(x)\n```"),
        ending(),
    )
    # Not duplicated deltas. But the reference dedup drops the second 8-space indent
    # of the answer, and dedup_dropped_repeat says so (issue 18).
    assert detect(r) == ["dedup_dropped_repeat"]
    assert r.text == "```python\nfor x in xs:\n        print(x)\n```"  # one indent, not two


def test_reasoning_on_a_delta_split_into_text_and_tool_call_is_not_a_duplicate():
    # One OpenRouter delta with text, reasoning and a tool call: the adapter splits it into
    # a text piece and a tool piece, both carrying the reasoning (the second marked
    # repeated_thoughts). The reasoning was sent once: not duplicated deltas.
    said = "The user wants the weather in Paris today."
    call = {"index": 0, "id": "call_1", "type": "function"}
    call["function"] = {"name": "get_weather", "arguments": '{"city":"Paris"}'}
    delta = {"content": "Let me check.", "reasoning": said, "tool_calls": [call]}
    r = openrouter(or_chunk(delta), ending("tool_calls"))
    assert [[t.content for t in c.thoughts] for c in r.chunks[:2]] == [[said], [said]]
    assert r.chunks[1].metadata["repeated_thoughts"] is True
    assert r.reasoning == said
    assert find_duplicated_delta(r) is None
    assert "duplicated_deltas" not in detect(r)
    # the same reasoning sent twice, in two deltas, still is
    again = openrouter(or_chunk(delta), or_chunk({"reasoning": said}), ending("tool_calls"))
    assert find_duplicated_delta(again) == said
    assert "duplicated_deltas" in detect(again)


def test_openrouter_skips_a_data_line_that_is_not_json_and_says_so():
    # the reference logs the line and reads on; its content is missing from the answer
    garbled = 'data: {"choices":[{"index":0,"delta":{"content":" world"}}]}}\n\n'
    r = openrouter(content("Hello"), garbled, content(" again."), ending())
    assert (r.text, r.error) == ("Hello again.", None)
    assert r.facts["invalid_json"] == 1
    assert r.facts["unhandled_shapes"] == {"data: not JSON": 1}
    assert detect(r) == ["unhandled_shape"]


def test_openrouter_body_cut_inside_its_last_event_is_a_cut_not_invalid_json():
    cut = 'data: {"choices":[],"usage":{"prompt_tok'
    r = openrouter(content("Hello world."), or_chunk(finish="stop"), cut)
    assert r.text == "Hello world."
    assert (r.facts["invalid_json"], r.facts["cut_event_chars"]) == (0, len(cut) - len("data: "))
    assert "eof_without_terminator" in detect(r)
    assert "unhandled_shape" not in detect(r)


def test_reasoning_sent_as_the_whole_text_so_far_each_time_is_flagged():
    # DashScope paths send the reasoning so far each time, not what is new (qwen-code #3896)
    snapshots = ["The user", "The user wants a count", "The user wants a count from one."]
    r = openrouter(*(reasoning(d) for d in snapshots), content("1 2 3"), ending())
    assert r.reasoning == "".join(snapshots)
    assert find_duplicated_delta(r) == "The user wants a count"  # five words: at once
    assert detect(r) == ["duplicated_deltas"]
    # reasoning that only goes on is not
    onward = openrouter(*(reasoning(d) for d in ["The user", " wants a count", " from one."]))
    assert find_duplicated_delta(onward) is None


def test_duplicate_delta_threshold_is_configurable():
    r = openrouter(reasoning(" very"), reasoning(" very"), content("Fine."), ending())
    assert detect(r) == []
    one_pair = AnomalyConfig(duplicate_delta_min_chars=4, duplicate_delta_min_pairs=1)
    assert detect(r, one_pair) == ["duplicated_deltas"]
    assert detect(r, AnomalyConfig(duplicate_delta_min_chars=4)) == []  # one pair of one word


def test_one_word_doubled_on_purpose_is_not_a_duplicated_delta():
    # a model writes "really really" as two deltas " really", " really": English
    r = openrouter(
        reasoning("The user is"),
        reasoning(" really"),
        reasoning(" really"),
        reasoning(" upset."),
        content("I'm"),
        content(" really"),
        content(" really"),
        content(" sorry about that."),
        ending(),
    )
    assert r.text == "I'm really really sorry about that."
    assert find_duplicated_delta(r) is None
    assert detect(r) == []


def test_two_doubled_words_or_one_doubled_phrase_are_duplicated_deltas():
    words = ["Sure", ",", " gladly", " gladly", " really", " really", " glad to help."]
    r = openrouter(*(content(d) for d in words), ending())
    assert find_duplicated_delta(r) == " gladly"  # the first of the two pairs
    assert detect(r) == ["duplicated_deltas"]
    phrase = openrouter(
        reasoning("Let me see."),
        reasoning(" The user asks"),
        reasoning(" The user asks"),
        content("Hi."),
        ending(),
    )
    assert find_duplicated_delta(phrase) == " The user asks"  # three words: at once
    assert detect(phrase) == ["duplicated_deltas"]
    # pairs are counted in the text and in the reasoning apart
    split = openrouter(
        reasoning(" really"),
        reasoning(" really"),
        content(" gladly"),
        content(" gladly"),
        ending(),
    )
    assert find_duplicated_delta(split) is None


def test_long_separator_rules_and_repeated_short_rows_are_not_repetitions():
    table = "| id | name |\n|----|------|\n" + "| 0  | n/a  |\n" * 20
    rule = "=" * 200 + "\n"
    r = openrouter(content(rule), content(table), content(rule), ending())
    assert detect(r) == []


class _CountingText(str):
    """A str that counts the characters its searches and slices touch (work, not time)."""

    work = 0

    def find(self, sub, start=None, end=None):  # noqa: ANN001, ANN201
        lo = 0 if start is None else max(0, start)
        hi = len(self) if end is None else min(len(self), end)
        found = super().find(sub, start, end)
        if found >= 0:  # a search stops at its first match
            hi = min(hi, found + len(sub))
        _CountingText.work += max(0, hi - lo)
        return found

    def __getitem__(self, key):  # noqa: ANN001, ANN204
        out = super().__getitem__(key)
        _CountingText.work += len(out)
        return out


def _recurring_block(n: int) -> str:
    """One 48-character block again and again, each time after different filler: every
    anchor in it recurs many times within the search window, but never as ``XX``."""
    rnd = random.Random(0)
    block = "".join(rnd.choice("abcdefghij") for _ in range(48))
    pieces: list[str] = []
    size = 0
    while size < n:
        piece = block + "".join(rnd.choice("klmnopqrstuvwxyz") for _ in range(rnd.randint(20, 60)))
        pieces.append(piece)
        size += len(piece)
    return "".join(pieces)[:n]


def _search_work(text: str) -> int:
    _CountingText.work = 0
    assert find_immediate_repetition(_CountingText(text)) is None
    return _CountingText.work


@pytest.mark.parametrize(
    "unit", ["a", "ab", "x = 1\n", "| 0 | 0 | 0 |\n"], ids=["a", "ab", "assign", "table"]
)
def test_repetition_search_work_grows_linearly_on_pathological_text(unit):
    """Doubling the text at most doubles the characters searched and compared (plus the
    rounding of one anchor): the search is linear however periodic the text is. (Wall
    time is a benchmark's business, not a test's.)"""
    small = unit * (25_000 // len(unit))
    big = unit * (50_000 // len(unit))
    w_small, w_big = _search_work(small), _search_work(big)
    assert w_small > 0
    assert w_big <= 2 * w_small + 1_000


def test_repetition_search_work_is_bounded_per_character_when_candidates_abound():
    """Text whose anchor blocks recur every ~100 characters without ever repeating
    immediately: the candidates per anchor are capped, so the work per character levels
    off (it rises at first, while the search window still reaches the text's start)."""
    small, big = _search_work(_recurring_block(160_000)), _search_work(_recurring_block(320_000))
    assert big <= 2.1 * small


def _repetition_reference(text: str, config: AnomalyConfig) -> tuple[int, int] | None:
    """find_immediate_repetition as first written: the local-periodicity test before the
    search for the block further on (the two only decide whether an anchor is passed over,
    so their order must not change what is found)."""
    from lab.repetition import MAX_CANDIDATES_PER_ANCHOR, _common_prefix_len, _common_suffix_len

    m = config.repetition_min_chars
    h = max(1, m // 2)
    n = len(text)
    for a in range(0, n - m - h + 1, h):
        block = text[a : a + h]
        if text.find(block, a + 1, a + m - 1 + h) >= 0:
            continue
        end = min(n, a + config.repetition_max_period + h)
        pos = text.find(block, a + m, end)
        for _ in range(MAX_CANDIDATES_PER_ANCHOR):
            if pos < 0:
                break
            p = pos - a
            back = _common_suffix_len(text, a, pos, h)
            fwd = _common_prefix_len(text, a, pos, p)
            if back + fwd >= p:
                start = a - back
                x = text[start : start + p]
                if (x + x).find(x, 1) == p and sum(ch.isalnum() for ch in x) >= (
                    config.repetition_min_alnum
                ):
                    return start, p
            pos = text.find(block, pos + 1, end)
    return None


_PIECES = st.text(alphabet="ab =\n|x", max_size=12)


@settings(max_examples=400, deadline=None)
@given(
    pieces=st.lists(st.one_of(_PIECES, st.sampled_from([PASSAGE[:90], PASSAGE])), max_size=12),
    doubled=st.integers(0, 11),
    min_chars=st.integers(2, 90),
    max_period=st.integers(1, 400),
    min_alnum=st.integers(0, 30),
)
def test_repetition_search_finds_what_its_first_form_found(
    pieces, doubled, min_chars, max_period, min_alnum
):
    if pieces:  # one piece doubled in place, so that squares are common
        i = doubled % len(pieces)
        pieces[i] = pieces[i] * 2
    text = "".join(pieces)
    cfg = AnomalyConfig(
        repetition_min_chars=min_chars,
        repetition_max_period=max_period,
        repetition_min_alnum=min_alnum,
    )
    assert find_immediate_repetition(text, cfg) == _repetition_reference(text, cfg)


@pytest.mark.parametrize("cut", range(0, 60, 7))
def test_repetition_found_at_any_alignment(cut):
    text = "z" * cut + "Intro. " + PASSAGE + PASSAGE + "Bye."
    found = find_immediate_repetition(text)
    assert found is not None and found[1] == len(PASSAGE)
    start, n = found
    assert text[start : start + n] == text[start + n : start + 2 * n]


# --------------------------------------------------------------------------- glued summaries


def test_summary_headings_arriving_as_separate_deltas_are_glued_in_reasoning():
    # OmniRoute #9500: the separator is not in the upstream payload, so joining glues them.
    r = openrouter(
        reasoning("**Planning exact formatted output**"),
        reasoning("**Confirming exact reproduction requirement**"),
        content("Here is the output, reproduced exactly."),
        ending(provider="OpenAI", model="openai/gpt-5"),
    )
    assert "output****Confirming" in r.reasoning
    assert detect(r) == ["glued_reasoning_summaries"]


def test_summary_heading_glued_to_the_previous_paragraph_is_flagged():
    # hermes-agent PR #80736: "one glued paragraph".
    r = openrouter(
        reasoning("**Investigating culprit PRs**\n\nI looked at the merged PRs."),
        reasoning("**Inspecting message schema**\n\nThe schema changed."),
        content("Found it."),
        ending(),
    )
    assert detect(r) == ["glued_reasoning_summaries"]


def test_separated_summaries_and_inline_bold_are_not_glued():
    r = openrouter(
        reasoning("**Planning the answer**\n\nI will use **bold** and **more bold** words.\n\n"),
        reasoning("**Checking the result**\n\nLooks right."),
        content("Done."),
        ending(),
    )
    assert detect(r) == []
    assert GLUED_SUMMARY_RE.search("Note:**not a heading** inline") is None


def test_glued_summary_thoughts_in_a_hand_built_result_are_flagged():
    thoughts = [ThoughtLogEntry(kind="summary", content="**Plan A****Plan B**")]
    r = built(text="ok", thoughts=thoughts, finish_reason="stop")
    assert detect(r) == ["glued_reasoning_summaries"]


# --------------------------------------------------------------------------- truncation


def test_openrouter_stream_cut_before_finish_and_done_is_flagged():
    r = openrouter(content("The answer is"), content(" forty"))
    assert (r.text, r.finish_reason, r.error) == ("The answer is forty", None, None)
    assert detect(r) == ["eof_without_terminator"]


def test_stream_cut_inside_an_event_is_flagged_as_unterminated():
    r = openrouter(content("The answer is"), content(" forty")[:-40])
    assert r.facts["unterminated_tail"] is True
    assert detect(r) == ["eof_without_terminator"]


def test_done_without_finish_reason_counts_as_terminated():
    r = openrouter(content("Short answer."), or_chunk(usage=USAGE), DONE)
    assert r.finish_reason is None and r.facts["done_seen"] is True
    assert detect(r) == []


def test_finish_reason_without_done_counts_as_terminated():
    r = openrouter(content("Short answer."), or_chunk(finish="stop"), or_chunk(usage=USAGE))
    assert detect(r) == []


def test_gemini_stream_with_finish_reason_needs_no_done():
    r = gemini(gemini_chunk("Hello"), gemini_chunk(" world", finish="STOP"))
    assert detect(r) == []


def test_gemini_stream_without_finish_reason_is_truncated():
    r = gemini(gemini_chunk("Hello"), gemini_chunk(" world"))
    # the usage it carried was a running count: never the final report
    assert detect(r) == ["eof_without_terminator", "usage_not_final"]


def test_anthropic_stream_ending_with_message_stop_needs_no_done():
    r = anthropic(anthropic_text(0, "Looking", "."), anthropic_end())
    assert (r.text, r.finish_reason) == ("Looking.", "stop")
    assert detect(r) == []


def test_anthropic_stream_cut_before_message_delta_is_truncated():
    r = anthropic(anthropic_text(0, "Looking", "."))
    assert detect(r) == ["eof_without_terminator", "usage_not_final"]


def test_anthropic_stream_cut_inside_tool_use_is_truncated_with_cut_arguments():
    r = anthropic(
        anthropic_block_start(
            0,
            {
                "type": "tool_use",
                "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                "name": "read_file",
                "input": {},
            },
        ),
        anthropic_delta(0, {"type": "input_json_delta", "partial_json": ""}),
        anthropic_delta(0, {"type": "input_json_delta", "partial_json": '{"path": "RE'}),
    )
    assert detect(r) == ["eof_without_terminator", "truncated_tool_arguments", "usage_not_final"]


def test_anthropic_overloaded_error_event_is_an_error_in_200():
    overloaded = {"type": "overloaded_error", "message": "Overloaded"}
    r = anthropic(
        anthropic_text(0, "Look"),
        anthropic_event("error", {"type": "error", "error": overloaded}),
    )
    assert r.error is not None and r.error.type == "provider_overloaded"
    assert detect(r) == ["error_in_200_stream"]


def test_stream_stopped_by_the_speaker_guard_is_not_truncation():
    attempts = [AttemptInfo(attempt=0, label="default", status=200, end_reason="stopped_by_guard")]
    r = built(text="Sure, here you go.", attempts=attempts, facts={"done_seen": False})
    assert detect(r) == []


def test_openrouter_length_rewritten_to_tool_calls_over_cut_arguments_is_flagged():
    # hermes-agent PR #7693: finish says tool_calls, the argument JSON is unterminated.
    r = openrouter(
        tool_delta(
            {
                "index": 0,
                "id": "toolu_bdrk_01RMTd7R9DzQjEEWgDwzcBsU",
                "type": "function",
                "function": {"name": "read_file", "arguments": ""},
            }
        ),
        tool_delta({"index": 0, "function": {"arguments": '{"path": "RE'}}),
        ending("tool_calls", provider="Amazon Bedrock"),
    )
    assert r.finish_reason == "tool_calls"
    assert [f.arguments_truncated for f in r.function_calls] == [True]
    assert detect(r) == ["truncated_tool_arguments"]


def test_unparsable_raw_arguments_count_as_truncated():
    call = FunctionCall(
        name="write_file",
        args={},
        provider_fields={"raw_arguments": '{"path": "a.md", "content": "Unterminated'},
    )
    r = built(function_calls=[call], finish_reason="tool_calls")
    assert detect(r) == ["truncated_tool_arguments"]


def test_whole_argument_objects_glued_together_are_named_not_called_truncated():
    # GPT-5.4 sends two calls' arguments at one index, no name or id between (open-webui
    # #22235): the reference appends them into one string that does not parse
    r = openrouter(
        tool_delta({"index": 0, "id": "c1", "type": "function", "function": {"name": "search"}}),
        tool_delta({"index": 0, "function": {"arguments": '{"query": "A", "count": 5}'}}),
        tool_delta({"index": 0, "function": {"arguments": '{"query": "B", "count": 5}'}}),
        ending("tool_calls"),
    )
    (call,) = r.function_calls
    assert call.provider_fields["raw_arguments"] == (
        '{"query": "A", "count": 5}{"query": "B", "count": 5}'
    )
    assert detect(r) == ["tool_arguments_glued"]
    (check,) = check_stream(r.function_calls, r.finish_reason, None)
    assert (check.error_kind, check.detail[:32]) == (
        "invalid_json",
        "2 JSON objects glued together: {",
    )
    # a cut second object is a cut, not a glue
    cut = built(
        function_calls=[
            FunctionCall(
                name="search", args={}, provider_fields={"raw_arguments": '{"q": 1}{"q": '}
            )
        ],
        finish_reason="tool_calls",
    )
    assert detect(cut) == ["truncated_tool_arguments"]


# --------------------------------------------------------------------------- empty answer


def test_reasoning_only_answer_with_finish_stop_is_flagged():
    # chunkhound #415: content empty, finish stop, the JSON answer sits in reasoning.
    r = openrouter(
        reasoning("The user wants JSON."),
        reasoning(' {"answer": 42}'),
        content(""),
        ending(provider="Targon", model="deepseek/deepseek-r1"),
    )
    assert (r.text, r.finish_reason) == ("", "stop")
    assert detect(r) == ["empty_answer_with_reasoning"]


def test_reasoning_then_a_refusal_is_a_refusal_not_an_empty_answer():
    def chunk(delta: dict, finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return "data: " + json.dumps({"choices": [choice]}) + "\n\n"

    body = (
        chunk({"reasoning_content": "The user asks for something disallowed."})
        + chunk({"refusal": "I can't help with that."})
        + chunk({}, "stop")
        + "data: [DONE]\n\n"
    )
    r = replay_sse("deepseek", body.encode())
    assert (r.text, r.refusal) == ("", "I can't help with that.")
    assert r.reasoning == "The user asks for something disallowed."
    assert detect(r) == ["refusal"]


def test_reasoning_then_tool_call_is_not_an_empty_answer():
    r = openrouter(
        reasoning("I need the file."),
        tool_delta(
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.md"}'},
            }
        ),
        ending("tool_calls"),
    )
    assert detect(r) == []


# --------------------------------------------------------------------------- think tags


def test_think_block_the_stripper_removed_is_not_flagged():
    r = openrouter(content("<think>plan it</think>"), content("Answer: 42."), ending())
    assert (r.text, r.reasoning) == ("Answer: 42.", "plan it")
    assert detect(r) == []


def test_think_tags_kept_when_stripping_is_off_are_flagged():
    r = openrouter(
        content("<think>plan it</think>"),
        content("Answer: 42."),
        ending(),
        config={"strip_think_blocks": False},
    )
    assert r.text == "<think>plan it</think>Answer: 42."
    assert detect(r) == ["think_tags_after_guards"]


@pytest.mark.parametrize("tag", ["</think>", "<THINK>", "<mm:think>", "</minimax:think>"])
def test_any_reasoning_tag_shape_left_in_text_is_flagged(tag):
    r = built(text=f"Answer{tag} 42.", finish_reason="stop")
    assert detect(r) == ["think_tags_after_guards"]


def test_words_that_look_like_tags_are_not_think_tags():
    r = built(text="Use <thinker> or <think attr='x'> in XML.", finish_reason="stop")
    assert detect(r) == []


# --------------------------------------------------------------------------- errors in 200


def test_openrouter_mid_stream_error_after_tokens_is_reported_as_error_in_200():
    err = {
        "id": "cmpl-abc123",
        "object": "chat.completion.chunk",
        "created": 1234567890,
        "model": "gpt-3.5-turbo",
        "provider": "openai",
        "error": {"code": "server_error", "message": "Provider disconnected unexpectedly"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    r = openrouter(content("Partial ans"), "data: " + json.dumps(err) + "\n\n", DONE)
    assert r.error is not None and r.attempts[0].status == 200
    assert detect(r) == ["error_in_200_stream"]


def test_provider_unavailable_chunk_then_finish_error_is_reported_as_error_in_200():
    # Captured gpt-5.4-mini 502: error chunk with choices [], then finish "error", then usage.
    err = {
        "id": "gen-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "openai/gpt-5.4-mini",
        "provider": "OpenAI",
        "choices": [],
        "error": {
            "code": 502,
            "message": "Network connection lost.",
            "metadata": {"error_type": "provider_unavailable"},
        },
    }
    r = openrouter(
        content("Partial ans"),
        "data: " + json.dumps(err) + "\n\n",
        or_chunk(finish="error"),
        or_chunk(usage=USAGE),
    )
    assert detect(r) == ["error_in_200_stream"]


def test_malformed_tool_call_error_turned_into_done_is_swallowed():
    # The reference turns an invalid_type error over a pending tool call into a "done" chunk:
    # no error reaches the result, the turn looks finished.
    r = openrouter(
        tool_delta(
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": ""},
            }
        ),
        tool_delta({"index": 0, "function": {"arguments": '{"path": "a.md"}'}}),
        'data: {"error":{"code":"invalid_type",'
        '"message":"Invalid input: expected string, received null"}}\n\n',
        DONE,
    )
    assert r.error is None and r.chunks[-1].metadata["malformedToolCall"] is True
    assert detect(r) == ["error_swallowed_in_200"]


def test_finish_error_chunk_without_an_error_chunk_is_swallowed():
    chunks = [
        ProcessedChunk(type="text", content="Partial answer"),
        ProcessedChunk(type="done", metadata={"finish_reason": "error"}),
    ]
    attempts = [AttemptInfo(attempt=0, label="default", status=200, end_reason="eof")]
    r = built(text="Partial answer", chunks=chunks, attempts=attempts, facts={"done_seen": True})
    assert detect(r) == ["error_swallowed_in_200"]


def test_http_error_before_the_stream_is_not_an_error_in_200():
    error = ProviderError(type="rate_limit", message="Rate limit exceeded", retryable=True)
    attempts = [AttemptInfo(attempt=0, label="default", status=429, end_reason="http_error")]
    chunks = [ProcessedChunk(type="error", error=error)]
    r = built(
        chunks=chunks,
        attempts=attempts,
        error=error,
        finish_reason="error",
        origins=[ChunkOrigin(attempt=0, event=-1, read_seq=-1)],
    )
    assert detect(r) == []


def test_error_in_200_is_judged_on_the_attempt_that_produced_the_error():
    # Attempt 0 streamed (200) and was retried before the commit point; attempt 1 got a 500.
    error = ProviderError(type="unknown", message="Internal Server Error", retryable=False)
    attempts = [
        AttemptInfo(attempt=0, label="default", status=200, end_reason="retried"),
        AttemptInfo(attempt=1, label="targeted_drop_min_p", status=500, end_reason="http_error"),
    ]
    r = built(
        chunks=[ProcessedChunk(type="error", error=error)],
        origins=[ChunkOrigin(attempt=1, event=-1, read_seq=-1)],
        attempts=attempts,
        error=error,
        finish_reason="error",
    )
    assert detect(r) == []


# --------------------------------------------------------------------------- tables integration


def test_streams_table_anomalies_column_joins_detect_output():
    from lab import tables

    results = [
        clean_stream(),
        openrouter(reasoning("I should list the files."), reasoning(KIMI_CALL), ending()),
    ]
    st = tables.streams(results)
    assert st["anomalies"].tolist() == [
        "",
        "tool_markup_in_reasoning,markup_leak,empty_answer_with_reasoning",
    ]


# --------------------------------------------------------------------------- wire-shape losses


def _facts(**facts) -> StreamResult:
    return StreamResult(stream_id="s", provider="custom", finish_reason="stop", facts=facts)


def test_wire_shape_detectors_fire_on_their_fact_only():
    cases = {
        "parallel_tool_calls_dropped": {"dropped_tool_calls": ["read_file"]},
        "reasoning_field_ignored": {"ignored_reasoning_chars": 12},
        "usage_excludes_reasoning": {"usage_excludes_reasoning": True},
        "unhandled_shape": {"unhandled_shapes": {"choices[].delta.audio": 2}},
        "hostile_value": {"hostile_values": ["usage.prompt_tokens"]},
    }
    for name, facts in cases.items():
        assert detect(_facts(**facts)) == [name], name
    assert detect(_facts()) == []


def test_unhandled_shapes_lists_the_paths_with_counts():
    from lab.anomalies import unhandled_shapes

    r = _facts(unhandled_shapes={"choices[].delta.audio": 2, "x": 1})
    assert unhandled_shapes(r) == {"choices[].delta.audio": 2, "x": 1}


def _chat(*contents: str) -> bytes:
    def chunk(delta: dict, finish: str | None) -> str:
        return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    lines = [chunk({"content": c}, None) for c in contents]
    lines.append(chunk({}, "stop"))
    return "".join(f"data: {x}\n\n" for x in lines).encode() + b"data: [DONE]\n\n"


def test_reference_dedup_drops_a_repeated_word_and_the_anomaly_says_so():
    from lab.config import LabConfig

    body = _chat("Ask the", " question", " question", " again.")
    ref = replay_sse("openai", body)
    assert ref.text == "Ask the question again."
    assert "dedup_dropped_repeat" in detect(ref)
    kept = replay_sse("openai", body, config=LabConfig(dedup_keep_word_repeats=True))
    assert kept.text == "Ask the question question again."
    assert "dedup_dropped_repeat" not in detect(kept)


def test_dedup_still_drops_a_resent_overlap_with_keep_word_repeats():
    from lab.config import LabConfig

    body = _chat("Hello there, friend", "there, friend. How are you?")
    r = replay_sse("openai", body, config=LabConfig(dedup_keep_word_repeats=True))
    assert r.text == "Hello there, friend. How are you?"
    assert "dedup_dropped_repeat" not in detect(r)


def test_keep_word_repeats_still_drops_a_passage_resent_whole():
    from lab.config import LabConfig

    body = _chat("The café opens at 8:00.", " Their terrace is quiet.", " Their terrace is quiet.")
    r = replay_sse("openai", body, config=LabConfig(dedup_keep_word_repeats=True))
    assert r.text == "The café opens at 8:00. Their terrace is quiet."
    assert "dedup_dropped_repeat" not in detect(r)


def test_reasoning_shown_before_its_closing_tag_is_flagged():
    # the stripper emitted "Let me think about it. " before "</think>" said it was reasoning
    body = _chat("Let me think about it. ", "The user wants X.</think>Answer: X.")
    r = replay_sse("openai", body)
    assert "reasoning_shown_before_close" in detect(r)
    clean = replay_sse("openai", _chat("<think>", "The user wants X.</think>Answer: X."))
    assert "reasoning_shown_before_close" not in detect(clean)


@pytest.mark.parametrize("family", ["custom", "openrouter", "deepseek"])
@pytest.mark.parametrize("closer", [["</think>"], ["</", "think>"], ["\n</think>"]])
def test_reasoning_shown_before_a_closing_tag_sent_as_its_own_delta_is_flagged(family, closer):
    # a local server (vLLM, llama.cpp) streaming a template that pre-opens <think>, with no
    # reasoning parser: the closer is one token, a delta of its own after the reasoning
    said = ["Okay, the user says hello.", " I should greet them back."]
    r = replay_sse(family, _chat(*said, *closer, "\n\nHello!"))
    assert r.text == "".join(said) + "\n\nHello!"  # the reference's text: shown, not recalled
    moved = "\n" if closer == ["\n</think>"] else ""  # what the stripper still held
    assert shown_before_close(r) == [("".join(said), moved)]
    assert "reasoning_shown_before_close" in detect(r)
    quiet = replay_sse(family, _chat("</think>", "Hello!"))  # nothing before it: nothing shown
    assert quiet.text == "Hello!"
    assert "reasoning_shown_before_close" not in detect(quiet)


@pytest.mark.parametrize("family", ["custom", "openrouter", "deepseek"])
@pytest.mark.parametrize("closer", [["</think>"], ["</", "think>"], ["\n</think>"]])
def test_reasoning_shown_before_its_closer_counts_as_a_think_leak_in_the_tables(family, closer):
    """The whole reasoning was the user's answer, though the stripper had nothing left to
    move (the closer in a delta of its own): the streams table says it leaked (kind
    ``think``), as it did when the stripper happened to hold one character ("\n</think>"),
    and the per-backend leak count sees it. A closer with nothing before it leaked nothing."""
    from lab.tables import by_backend, leaks, streams

    said = ["Okay, the user says hello.", " I should greet them back."]
    r = replay_sse(family, _chat(*said, *closer, "\n\nHello!"))
    quiet = replay_sse(family, _chat("</think>", "Hello!"))
    table = streams([r, quiet])
    assert table[["leaked", "leak_kind"]].values.tolist() == [[True, "think"], [False, ""]]
    assert by_backend(table)["leaked"].sum() == 1
    # and the leaks table has its row: where the closer came, what the stripper still held
    moved = "\n" if closer == ["\n</think>"] else ""
    rows = leaks([r, quiet])[["stream_id", "guard", "rule", "leak_kind", "moved", "offset"]]
    assert rows.values.tolist() == [
        [r.stream_id, "think_stripper", "orphan_close", "think", moved, len("".join(said))]
    ]


@pytest.mark.parametrize("family", ["openai", "openrouter"])
def test_a_call_in_the_stop_chunk_itself_is_named_when_the_reference_drops_it(family):
    import json

    from lab.config import LabConfig
    from lab.replay import replay_sse

    call = {"index": 0, "id": "c1", "type": "function"}
    call["function"] = {"name": "get_weather", "arguments": '{"city":"Bern"}'}
    chunk = {"choices": [{"index": 0, "delta": {"content": "Sure.", "tool_calls": [call]}}]}
    chunk["choices"][0]["finish_reason"] = "stop"
    body = ("data: " + json.dumps(chunk) + "\n\ndata: [DONE]\n\n").encode()
    r = replay_sse(family, body)
    assert (r.text, r.function_calls) == ("Sure.", [])  # the reference builds no call on stop
    assert r.facts["dropped_tool_calls"] == ["get_weather"]
    assert "parallel_tool_calls_dropped" in detect(r)
    kept = replay_sse(family, body, config=LabConfig.complete())
    assert [c.name for c in kept.function_calls] == ["get_weather"]


def test_two_words_doubled_far_apart_are_english_not_duplicated_deltas():
    # "really really" early and "deeply deeply" many deltas later: a backend that doubles its
    # deltas doubles them one after another (duplicate_delta_max_gap deltas apart at most)
    far = [
        "I'm",
        " really",
        " really",
        " sorry.",
        " It",
        " was",
        " a",
        " deeply",
        " deeply",
        " long day.",
    ]
    r = openrouter(*(content(d) for d in far), ending())
    assert find_duplicated_delta(r) is None
    assert detect(r) == []
    wide = AnomalyConfig(duplicate_delta_max_gap=4)
    assert find_duplicated_delta(r, wide) == " really"
    near = ["I'm", " really", " really", " sorry", ",", " deeply", " deeply", " sorry."]
    close = openrouter(*(content(d) for d in near), ending())
    assert find_duplicated_delta(close) == " really"  # two deltas between: one after another


def test_a_doubled_cjk_sentence_counts_its_characters_as_words():
    # a Chinese sentence has no spaces: each character is a word, so one doubled sentence
    # is flagged at once, as an English one is
    r = openrouter(content("我们来看看。"), content("我们来看看。"), content("好的"), ending())
    assert find_duplicated_delta(r) == "我们来看看。"
    assert detect(r) == ["duplicated_deltas"]
    # distinct characters are what count: a laugh doubled is one character, not six words
    laugh = openrouter(
        reasoning("哈哈哈哈哈哈"), reasoning("哈哈哈哈哈哈"), reasoning("，好的"), ending()
    )
    assert find_duplicated_delta(laugh) is None


def test_every_reasoning_token_doubled_on_a_short_answer_is_flagged_across_short_words():
    # bifrost #6427 with word-sized tokens: the doubled words of six characters or more sit
    # several short doubled words apart; a short pair keeps the run going (the gap counts
    # from the last pair of any size)
    said = "Sure! Here is a quick summary of the main points you asked about in the last message."
    tokens = re.findall(r" ?[\w']+|[^\w\s]+", said)
    r = openrouter(*(reasoning(x) for t in tokens for x in (t, t)), content("ok"), ending())
    assert find_duplicated_delta(r) == " summary"
    assert detect(r) == ["duplicated_deltas"]


# --------------------------------------------------------------------------- one chunk pass


def _back_to_back_by_two_passes(result: StreamResult, cfg: AnomalyConfig) -> str | None:
    """The duplicated-delta rule as it read before the detectors shared one pass over the
    chunks (the test's oracle): the text deltas, returning at the first finding, then the
    reasoning deltas (:func:`lab.result.counted_thoughts`)."""
    from lab.anomalies import _back_to_back
    from lab.repetition import first_back_to_back
    from lab.result import counted_thoughts

    rule = _back_to_back(cfg)
    previous = None
    for position, delta in enumerate(c.content for c in result.chunks if c.content):
        if delta == previous:
            found = rule.pair(delta, position)
            if found is not None:
                return found
        previous = delta
    deltas = [t.content for c in result.chunks for t in counted_thoughts(c) if t.content]
    return first_back_to_back(deltas, _back_to_back(cfg))  # the reasoning rule, unchanged


def _swallowed_by_its_own_pass(result: StreamResult) -> bool:
    """error_swallowed_in_200 as it read with its own pass (the test's oracle)."""
    if result.error is not None or any(c.type == "error" for c in result.chunks):
        return False
    said = any(
        c.metadata.get("finish_reason") == "error" or "originalError" in c.metadata
        for c in result.chunks
    )
    return said or result.finish_reason == "error"


_WORDS = st.sampled_from(["", " go", " go", "The user wants a count", "x", "ab", " really"])


@st.composite
def _chunk_streams(draw: Any) -> list[ProcessedChunk]:
    chunks = []
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["text", "text", "text", "error", "done"]))
        thoughts = [
            ThoughtLogEntry(kind="raw", content=draw(_WORDS))
            for _ in range(draw(st.integers(0, 2)))
        ]
        metadata = draw(
            st.sampled_from(
                [{}, {}, {"repeated_thoughts": True}, {"finish_reason": "error"},
                 {"originalError": {}}, {"finish_reason": "stop"}]
            )
        )  # fmt: skip
        chunks.append(
            ProcessedChunk(type=kind, content=draw(_WORDS), thoughts=thoughts, metadata=metadata)
        )
    return chunks


@settings(max_examples=400, deadline=None)
@given(chunks=_chunk_streams(), finish=st.sampled_from([None, "stop", "error"]))
def test_the_detectors_sharing_one_chunk_pass_answer_as_each_did_alone(chunks, finish):
    # duplicated_deltas and error_swallowed_in_200 read one pass over the chunks, made once
    # per detect() call; each answers as its own pass did, inside detect() and outside it
    cfg = AnomalyConfig(duplicate_delta_min_pairs=2)
    result = StreamResult(stream_id="s", provider="openai", chunks=chunks, finish_reason=finish)
    want_duplicate = _back_to_back_by_two_passes(result, cfg)
    want_swallowed = _swallowed_by_its_own_pass(result)
    assert find_duplicated_delta(result, cfg) == want_duplicate
    assert DETECTORS["error_swallowed_in_200"](result, cfg) is want_swallowed
    found = detect(result, cfg)
    assert ("error_swallowed_in_200" in found) is want_swallowed
    if want_duplicate is not None:
        assert "duplicated_deltas" in found
    # a second result right after gets its own pass, not the first one's
    other = StreamResult(stream_id="t", provider="openai", chunks=chunks[::-1])
    assert find_duplicated_delta(other, cfg) == _back_to_back_by_two_passes(other, cfg)
    assert ("error_swallowed_in_200" in detect(other, cfg)) is _swallowed_by_its_own_pass(other)
