"""Processor acceptance cases, over ProcessedChunks.

Case numbers in the docstrings are those of docs/reference.md, "9.10 Acceptance cases".
AI-SDK-event-only cases (orphan deltas, metadata replacement, permission rejection, summary
messages, AI SDK 5 Anthropic usage) have no ProcessedChunk equivalent; their closest
chunk-level behaviour is tested instead.
"""

from __future__ import annotations

import json
import sys
import types as pytypes
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab import processor as processor_module
from lab.model import FunctionCall, ProcessedChunk, ProviderError, ThoughtLogEntry, Usage
from lab.processor import (
    TOOL_ABORTED,
    ModelInfo,
    Price,
    Processor,
    ProcessorConfig,
    ReasoningPart,
    StepFinishPart,
    StepStartPart,
    TextPart,
    ToolPart,
    is_overflow,
    load_model_table,
    model_info,
    normalize_usage,
)

# "Model M200" of the acceptance cases.
M200 = ModelInfo(
    context_limit=200_000,
    output_limit=64_000,
    price=Price(input=3, output=15, cache_read=0.30, cache_write=3.75),
)


def text(content: str, **metadata) -> ProcessedChunk:
    return ProcessedChunk(type="text", content=content, metadata=metadata)


def thought(content: str, kind: str = "raw") -> ProcessedChunk:
    return ProcessedChunk(
        type="text", content="", thoughts=[ThoughtLogEntry(kind=kind, content=content)]
    )


def call(name: str, args: dict, id: str | None = None) -> ProcessedChunk:
    return ProcessedChunk(
        type="function_call", function_call=FunctionCall(name=name, args=args, id=id)
    )


def done(usage: Usage | None = None, finish_reason: str | None = "stop") -> ProcessedChunk:
    metadata: dict = {}
    if usage is not None:
        metadata["usage"] = usage
    if finish_reason is not None:
        metadata["finish_reason"] = finish_reason
    return ProcessedChunk(type="done", metadata=metadata)


def error(message: str, *, status: int | None = None, code: str = "unknown") -> ProcessedChunk:
    return ProcessedChunk(
        type="error",
        error=ProviderError(
            type="api_error", message=message, retryable=False, status=status, code=code
        ),
    )


def types(proc: Processor) -> list[str]:
    return [part.type for part in proc.message.parts]


# --------------------------------------------------------------------- parts and state


def test_plain_text_step_builds_step_start_text_step_finish_and_continues():
    """Case 1."""
    proc = Processor(M200)
    outcome = proc.process(
        [text("Hel"), text("lo"), done(Usage(input_tokens=100, output_tokens=20))]
    )
    assert outcome == "continue"
    parts = proc.message.parts
    assert types(proc) == ["step-start", "text", "step-finish"]
    assert parts[0] == StepStartPart(index=0)
    assert parts[1] == TextPart(text="Hello", start=1, end=3)
    assert parts[1].start <= parts[1].end
    assert isinstance(parts[2], StepFinishPart)
    assert parts[2].reason == "stop"
    assert parts[2].tokens == {
        "input": 100,
        "output": 20,
        "reasoning": 0,
        "cache_read": 0,
        "cache_write": 0,
    }
    assert proc.message.finish_reason == "stop"
    assert proc.message.error is None
    assert proc.message.doom_loop is False


def test_empty_deltas_create_no_parts():
    """Closest to case 2 (orphan deltas): empty text and empty thoughts make nothing."""
    proc = Processor(M200)
    proc.process([text(""), thought(""), ProcessedChunk(type="text"), done()])
    assert types(proc) == ["step-start", "step-finish"]


def test_consecutive_thoughts_make_one_reasoning_part_and_kind_change_opens_another():
    """Closest to case 3: one reasoning part per contiguous run of one kind."""
    proc = Processor(M200)
    proc.process([thought("a"), thought("b"), thought("S", kind="summary"), done()])
    reasoning = [p for p in proc.message.parts if p.type == "reasoning"]
    assert reasoning == [
        ReasoningPart(text="ab", kind="raw", start=1, end=3),
        ReasoningPart(text="S", kind="summary", start=3, end=4),
    ]


def test_reasoning_and_text_parts_keep_stream_order_and_close_each_other():
    proc = Processor(M200)
    both = ProcessedChunk(
        type="text", content="B", thoughts=[ThoughtLogEntry(kind="raw", content="r2")]
    )
    proc.process([thought("r1"), text("A"), both, done()])
    parts = proc.message.parts
    assert types(proc) == ["step-start", "reasoning", "text", "reasoning", "text", "step-finish"]
    assert [(p.text, p.start, p.end) for p in parts[1:5]] == [
        ("r1", 1, 2),
        ("A", 2, 3),
        ("r2", 3, 3),
        ("B", 3, 4),
    ]


def test_function_call_is_running_during_the_step_and_aborted_at_cleanup():
    """Case 5 adapted: the lab runs no tools, so the call never completes (case 11 wording)."""
    proc = Processor(M200)
    seen: list[tuple[str, dict]] = []

    def stream() -> Iterator[ProcessedChunk]:
        yield call("read", {"path": "a"}, id="c1")
        tool = proc.message.parts[-1]
        seen.append((tool.state, tool.input))
        yield done(finish_reason="tool_calls")

    outcome = proc.process(stream())
    assert seen == [("running", {"path": "a"})]
    assert outcome == "continue"
    assert proc.message.finish_reason == "tool_calls"
    tool = proc.message.parts[1]
    assert isinstance(tool, ToolPart)
    assert (tool.call_id, tool.tool, tool.state, tool.error) == (
        "c1",
        "read",
        "error",
        TOOL_ABORTED,
    )
    assert tool.input == {"path": "a"}
    assert tool.metadata == {"interrupted": True}
    assert (tool.start, tool.end) == (1, 2)
    assert tool.function_call == FunctionCall(name="read", args={"path": "a"}, id="c1")


def test_function_call_closes_open_text_and_text_after_it_opens_a_new_part():
    proc = Processor(M200)
    proc.process([text("Let me look."), call("read", {"path": "a"}), text("Done."), done()])
    assert types(proc) == ["step-start", "text", "tool", "text", "step-finish"]
    assert proc.message.parts[1] == TextPart(text="Let me look.", start=1, end=2)


def test_call_without_id_gets_synthetic_id_and_repeated_id_overwrites_its_part():
    proc = Processor(M200)
    proc.process(
        [
            call("read", {}),
            call("ls", {}),
            call("a", {"x": 1}, id="k"),
            call("b", {}, id="k"),
            done(),
        ]
    )
    tools = [p for p in proc.message.parts if p.type == "tool"]
    assert [(t.call_id, t.tool, t.input) for t in tools] == [
        ("call_1", "read", {}),
        ("call_2", "ls", {}),
        ("k", "b", {}),
    ]


def test_error_after_running_tool_aborts_it_sets_error_and_stops():
    """Case 11."""
    proc = Processor(M200)
    outcome = proc.process(
        [call("read", {"path": "a"}, id="c1"), error("Unauthorized", status=401)]
    )
    assert outcome == "stop"
    tool = proc.message.parts[1]
    assert (tool.state, tool.error, tool.start, tool.end) == ("error", TOOL_ABORTED, 1, 2)
    assert proc.message.error.message == "Unauthorized"
    assert proc.message.overflow_error is None
    # a halted step writes no step-finish and leaves finish_reason unset
    assert types(proc) == ["step-start", "tool"]
    assert proc.message.finish_reason is None


def test_open_text_at_failure_is_kept_and_closed():
    """Case 12."""
    proc = Processor(M200)
    assert proc.process([text("partial"), error("upstream exploded")]) == "stop"
    assert proc.message.parts[1] == TextPart(text="partial", start=1, end=2)


def test_error_chunk_content_is_kept_as_text_before_halting():
    proc = Processor(M200)
    chunk = ProcessedChunk(
        type="error",
        content="tail",
        error=ProviderError(type="unknown", message="x", retryable=False),
    )
    assert proc.process([text("head "), chunk]) == "stop"
    assert proc.message.parts[1].text == "head tail"


def test_error_chunk_without_error_object_still_stops_with_an_error():
    proc = Processor(M200)
    assert proc.process([ProcessedChunk(type="error")]) == "stop"
    assert proc.message.error.type == "unknown"
    assert proc.message.error.message == "error chunk without an error"


def test_usage_reported_before_an_error_is_settled_not_dropped():
    proc = Processor(M200)
    chunks = [text("hi", usage=Usage(input_tokens=1000, output_tokens=100)), error("boom")]
    assert proc.process(chunks) == "stop"
    finish = proc.message.parts[-1]
    assert isinstance(finish, StepFinishPart)
    assert finish.reason == "error"
    assert proc.message.cost == 0.0045


def test_stream_that_raises_becomes_an_unknown_error_and_stops():
    """A thrown exception takes the same halt path as an error part."""
    proc = Processor(M200)

    def stream() -> Iterator[ProcessedChunk]:
        yield text("abc")
        raise ConnectionResetError("reset by peer")

    assert proc.process(stream()) == "stop"
    assert proc.message.error.type == "unknown"
    assert proc.message.error.message == "ConnectionResetError: reset by peer"
    assert proc.message.parts[1] == TextPart(text="abc", start=1, end=1)


def test_usage_in_a_chunk_after_done_is_settled_with_the_step():
    """OpenAI-format streams send usage in a chunk of its own after the finish chunk; the
    step ends when its stream does (docs/reference.md, "9.1 Stream events")."""
    proc = Processor(M200)
    usage = Usage(input_tokens=1000, output_tokens=100)
    assert proc.process([text("Hello"), done(), text("", usage=usage)]) == "continue"
    assert proc.message.tokens["input"] == 1000
    assert proc.message.tokens["output"] == 100
    assert proc.message.cost == pytest.approx((1000 * 3 + 100 * 15) / 1e6)
    assert proc.message.finish_reason == "stop"
    assert [p.type for p in proc.message.parts] == ["step-start", "text", "step-finish"]


def test_a_reported_cost_after_done_is_the_cost():
    proc = Processor(ModelInfo(context_limit=100_000))  # no price: only the report gives one
    proc.process([text("Hi"), done(), text("", usage=Usage(input_tokens=9, cost=0.5))])
    assert proc.message.cost == 0.5


def test_overflowing_usage_after_done_asks_for_compaction():
    model = ModelInfo(context_limit=100_000, output_limit=4_000, price=Price(input=1, output=1))
    trailing = text("", usage=Usage(input_tokens=99_000))
    assert Processor(model).process([text("Hi"), done(), trailing]) == "compact"
    assert Processor(model).process([text("Hi"), trailing, done()]) == "compact"


def test_text_after_done_stays_in_the_step():
    proc = Processor(M200)
    proc.process([text("a"), done(), text("b")])
    assert [p.text for p in proc.message.parts if p.type == "text"] == ["ab"]
    assert proc.message.steps == 1


def test_stream_without_done_ends_at_its_end_with_unknown_finish_reason():
    proc = Processor(M200)
    assert proc.process([text("cut")]) == "continue"
    assert proc.message.parts[-1].reason == "unknown"
    assert proc.message.finish_reason == "unknown"


def test_finish_reason_and_usage_are_read_from_any_chunk_last_wins():
    proc = Processor(M200)
    proc.process(
        [
            text("a", finishReason="length", usage=Usage(input_tokens=1)),
            text("b", usage={"input_tokens": 7, "output_tokens": 2}),
        ]
    )
    assert proc.message.finish_reason == "length"
    assert proc.message.tokens["input"] == 7
    assert proc.message.tokens["output"] == 2


def test_parts_accumulate_over_steps_with_step_indexes():
    proc = Processor(M200)
    proc.process([call("read", {"path": "a"}), done(finish_reason="tool_calls")])
    proc.process([text("ok"), done()])
    assert types(proc) == ["step-start", "tool", "step-finish", "step-start", "text", "step-finish"]
    assert [p.index for p in proc.message.parts if p.type in ("step-start", "step-finish")] == [
        0,
        0,
        1,
        1,
    ]
    assert proc.message.steps == 2
    assert proc.message.finish_reason == "stop"


# ------------------------------------------------------------------------------ doom loop


def test_three_identical_calls_in_one_step_are_a_doom_loop_and_stop():
    """Case 13 (the lab has no user to ask: a doom loop is treated as denied, case 17)."""
    proc = Processor(M200)
    outcome = proc.process([call("read", {"path": "a"})] * 3 + [done()])
    assert outcome == "stop"
    assert proc.message.doom_loop is True
    assert proc.message.error is None
    # the step is still settled to its end
    assert types(proc)[-1] == "step-finish"


@pytest.mark.parametrize(
    "chunks",
    [
        [call("read", {"path": "a"}), call("read", {"path": "a"}), call("read", {"path": "b"})],
        [call("read", {"path": "a"}), call("read", {"path": "a"})],
        [call("read", {"path": "a"}), call("read", {"path": "a"}), call("grep", {"path": "a"})],
    ],
    ids=["third-input-differs", "only-two-calls", "third-tool-differs"],
)
def test_two_equal_calls_or_a_different_third_are_not_a_doom_loop(chunks):
    """Case 14."""
    proc = Processor(M200)
    assert proc.process(chunks + [done()]) == "continue"
    assert proc.message.doom_loop is False


def test_doom_loop_compares_arguments_as_json_values_ignoring_key_order():
    """Case 15, deliberately not the reference: DESIGN.md compares JSON values."""
    proc = Processor(M200)
    chunks = [call("edit", {"a": 1, "b": 2}), call("edit", {"b": 2, "a": 1})]
    chunks.append(call("edit", {"a": 1, "b": 2}))
    assert proc.process(chunks + [done()]) == "stop"
    assert proc.message.doom_loop is True


def test_doom_loop_tells_json_true_from_one():
    proc = Processor(M200)
    chunks = [call("f", {"x": True}), call("f", {"x": True}), call("f", {"x": 1})]
    assert proc.process(chunks + [done()]) == "continue"


def test_text_between_calls_breaks_the_doom_loop_streak():
    """Case 16."""
    proc = Processor(M200)
    chunks = [call("read", {"path": "a"}), call("read", {"path": "a"}), text("hmm")]
    chunks.append(call("read", {"path": "a"}))
    assert proc.process(chunks + [done()]) == "continue"
    assert proc.message.doom_loop is False


def test_doom_loop_is_detected_across_steps():
    """The reference misses this (docs/reference.md, "9.3 The doom loop"); DESIGN.md counts
    across steps."""
    proc = Processor(M200)
    step = [
        thought("I should read a."),
        call("read", {"path": "a"}),
        done(finish_reason="tool_calls"),
    ]
    assert proc.process(step) == "continue"
    assert proc.process(step) == "continue"
    assert proc.message.doom_loop is False
    assert proc.process(step) == "stop"
    assert proc.message.doom_loop is True


def test_text_in_a_step_between_repeated_calls_breaks_the_cross_step_streak():
    proc = Processor(M200)
    step = [call("read", {"path": "a"}), done(finish_reason="tool_calls")]
    proc.process(step)
    proc.process(step)
    proc.process([text("Let me try once more."), done()])
    assert proc.process(step) == "continue"
    assert proc.process(step) == "continue"
    assert proc.process(step) == "stop"


def test_doom_loop_within_one_step_only_when_configured():
    proc = Processor(M200, ProcessorConfig(doom_loop_across_steps=False))
    step = [call("read", {"path": "a"}), done(finish_reason="tool_calls")]
    assert [proc.process(step) for _ in range(4)] == ["continue"] * 4
    assert proc.process([call("read", {"path": "a"})] * 3) == "stop"


# --------------------------------------------------------------------------- usage and cost


def test_usage_is_split_into_non_overlapping_buckets_and_priced_with_cache_and_reasoning():
    """Case 18."""
    proc = Processor(M200)
    usage = Usage(
        input_tokens=10_000,
        cache_read_tokens=8_000,
        cache_write_tokens=1_000,
        output_tokens=2_000,
        reasoning_tokens=500,
        total_tokens=12_000,
    )
    proc.process([text("x"), done(usage)])
    assert proc.message.tokens == {
        "input": 1_000,
        "output": 1_500,
        "reasoning": 500,
        "cache_read": 8_000,
        "cache_write": 1_000,
    }
    assert proc.message.total_tokens == 12_000
    assert proc.message.cost == 0.03915
    assert proc.message.parts[-1].cost == 0.03915
    assert proc.message.parts[-1].usage == usage


def test_cache_read_and_write_are_priced_separately():
    proc = Processor(M200)
    usage = Usage(
        input_tokens=1_000, cache_read_tokens=600, cache_write_tokens=200, output_tokens=100
    )
    proc.process([done(usage)])
    # 200·3 + 100·15 + 600·0.30 + 200·3.75 = 3030 per million
    assert proc.message.cost == 0.00303


def test_cost_sums_over_steps_while_tokens_are_the_last_steps():
    """Case 19."""
    proc = Processor(M200)
    proc.process([done(Usage(input_tokens=500, output_tokens=50, cost=0.01))])
    t2 = Usage(input_tokens=900, output_tokens=70, cost=0.02)
    proc.process([done(t2)])
    assert proc.message.cost == 0.03
    assert proc.message.tokens == normalize_usage(t2)[0]
    assert [p.cost for p in proc.message.parts if p.type == "step-finish"] == [0.01, 0.02]


def test_step_without_usage_has_zero_tokens_and_zero_cost():
    """Case 20."""
    proc = Processor(M200)
    assert proc.process([text("x"), done()]) == "continue"
    assert proc.message.tokens == {
        "input": 0,
        "output": 0,
        "reasoning": 0,
        "cache_read": 0,
        "cache_write": 0,
    }
    assert proc.message.cost == 0.0


OVER = Price(input=6, output=22.5, cache_read=0.6, cache_write=7.5)
M200_TIERED = ModelInfo(
    context_limit=1_000_000,
    output_limit=64_000,
    price=Price(input=3, output=15, cache_read=0.30, cache_write=3.75, over_200k=OVER),
)


def test_over_200k_prices_apply_strictly_above_200k_input_plus_cache_read():
    """Case 21."""
    above = Processor(M200_TIERED)
    above.process([done(Usage(input_tokens=210_000, cache_read_tokens=60_000))])
    assert above.message.cost == 0.936  # 150_000·6 + 60_000·0.6
    at = Processor(M200_TIERED)
    at.process([done(Usage(input_tokens=200_000, cache_read_tokens=60_000))])
    assert at.message.cost == 0.438  # 140_000·3 + 60_000·0.30


def test_provider_reported_cost_is_authoritative_even_zero():
    proc = Processor(M200)
    proc.process([done(Usage(input_tokens=1_000, output_tokens=100, cost=0.0042))])
    assert proc.message.cost == 0.0042  # computed would be 0.0045
    free = Processor(M200)
    free.process([done(Usage(input_tokens=1_000, output_tokens=100, cost=0.0))])
    assert free.message.cost == 0.0


def test_non_finite_reported_cost_counts_as_not_reported():
    proc = Processor(M200)
    proc.process([done(Usage(input_tokens=1_000, output_tokens=100, cost=float("nan")))])
    assert proc.message.cost == 0.0045


def test_inconsistent_usage_is_clamped_to_zero():
    tokens, total = normalize_usage(
        Usage(input_tokens=10, cache_read_tokens=50, output_tokens=3, reasoning_tokens=9)
    )
    assert tokens == {"input": 0, "output": 0, "reasoning": 9, "cache_read": 50, "cache_write": 0}
    assert total is None


def test_unknown_model_costs_zero_as_in_the_reference_and_never_overflows():
    proc = Processor(None)
    huge = Usage(input_tokens=5_000_000, output_tokens=1_000, total_tokens=5_001_000)
    assert proc.process([text("x"), done(huge)]) == "continue"
    assert proc.message.cost == 0  # reference: a missing price counts as 0
    assert proc.message.cost_known is False  # ... and the tables still say "unknown"
    assert proc.message.parts[-1].cost is None
    assert proc.message.tokens["input"] == 5_000_000


def test_unknown_model_takes_provider_reported_cost():
    proc = Processor(None)
    proc.process([done(Usage(input_tokens=10, cost=0.5))])
    proc.process([done(Usage(input_tokens=10))])
    assert proc.message.cost == 0.5


# ------------------------------------------------------------------- overflow and compaction


@pytest.mark.parametrize(("total", "outcome"), [(168_000, "compact"), (167_999, "continue")])
def test_overflow_at_finish_step_uses_context_minus_max_output(total, outcome):
    """Cases 23 and 26: M200 usable = 200_000 - min(64_000, 32_000) = 168_000."""
    proc = Processor(M200)
    usage = Usage(input_tokens=total - 1_000, output_tokens=1_000, total_tokens=total)
    assert proc.process([text("x"), done(usage)]) == outcome
    assert types(proc)[-1] == "step-finish"
    assert proc.message.finish_reason == "stop"


def test_overflow_without_total_sums_buckets_excluding_reasoning():
    """Case 23, total 0: input + output + cache_read + cache_write (reasoning not counted)."""
    usage = Usage(input_tokens=160_000, cache_read_tokens=60_000, output_tokens=8_000)
    assert Processor(M200).process([done(usage)]) == "compact"
    with_reasoning = Usage(
        input_tokens=160_000, cache_read_tokens=60_000, output_tokens=8_000, reasoning_tokens=1
    )
    assert Processor(M200).process([done(with_reasoning)]) == "continue"
    zero_total = Usage(input_tokens=168_000, total_tokens=0)
    assert Processor(M200).process([done(zero_total)]) == "compact"


def test_usable_window_with_input_limit_subtracts_reserved():
    """Case 24."""
    tokens = {"input": 0, "output": 0, "reasoning": 0, "cache_read": 0, "cache_write": 0}
    big = ModelInfo(context_limit=400_000, input_limit=400_000, output_limit=32_000)
    assert is_overflow(tokens, 380_000, big) is True
    assert is_overflow(tokens, 379_999, big) is False
    mid = ModelInfo(context_limit=400_000, input_limit=272_000, output_limit=32_000)
    config = ProcessorConfig(reserved_tokens=50_000)
    assert is_overflow(tokens, 222_000, mid, config) is True
    assert is_overflow(tokens, 221_999, mid, config) is False


def test_zero_context_limit_or_auto_compact_off_never_overflows():
    """Case 25."""
    tokens = {"input": 10**9, "output": 0, "reasoning": 0, "cache_read": 0, "cache_write": 0}
    assert is_overflow(tokens, None, ModelInfo(context_limit=0)) is False
    off = ProcessorConfig(auto_compact=False)
    assert is_overflow(tokens, None, M200, off) is False
    proc = Processor(M200, off)
    assert proc.process([done(Usage(input_tokens=10**6))]) == "continue"


@pytest.mark.parametrize(
    "chunk",
    [
        error("prompt is too long: 210345 tokens > 200000 maximum"),
        error("Request too large", status=413),
        error("413 (no body)"),
        error(
            "This model's maximum context length is 128000 tokens. However, you requested 130000"
        ),
    ],
    ids=["anthropic-message", "status-413", "413-no-body", "openrouter-message"],
)
def test_context_length_error_compacts_without_setting_error(chunk):
    """Case 27 (Effect versions)."""
    proc = Processor(M200)
    assert proc.process([text("x"), chunk]) == "compact"
    assert proc.message.error is None
    assert proc.message.overflow_error == chunk.error
    assert proc.message.finish_reason is None


def test_context_length_error_stops_with_error_when_compaction_is_off():
    """Case 27 classic, and newest with compaction.auto = false."""
    chunk = error("prompt is too long: 210345 tokens > 200000 maximum")
    for config in (
        ProcessorConfig(compact_on_context_error=False),
        ProcessorConfig(auto_compact=False),
    ):
        proc = Processor(M200, config)
        assert proc.process([chunk]) == "stop"
        assert proc.message.error == chunk.error


def test_other_error_stops_with_error():
    proc = Processor(M200)
    chunk = error("Rate limit exceeded", status=429)
    assert proc.process([text("x"), chunk]) == "stop"
    assert proc.message.error == chunk.error
    assert proc.message.overflow_error is None


@pytest.mark.parametrize(
    ("message", "status", "code", "expected"),
    [
        ("prompt is too long: 210345 tokens > 200000 maximum", None, "unknown", True),
        ("Input token count (1200000) exceeds the maximum number of tokens", None, "x", True),
        ("maximum context length is 65536 tokens", None, "unknown", True),
        ("400 status code (no body)", None, "unknown", True),
        ("whatever", 413, "unknown", True),
        ("whatever", 400, "context_length_exceeded", True),
        ("Rate limit exceeded", 429, "rate_limit", False),
        ("Internal server error", 500, "unknown", False),
    ],
)
def test_local_context_overflow_patterns(message, status, code, expected):
    err = ProviderError(
        type="api_error", message=message, retryable=False, status=status, code=code
    )
    assert processor_module._local_is_context_overflow(err) is expected


def test_doom_loop_stops_even_when_the_step_also_overflows():
    proc = Processor(M200)
    chunks = [call("read", {"path": "a"})] * 3 + [done(Usage(input_tokens=200_000))]
    assert proc.process(chunks) == "stop"
    assert proc.message.doom_loop is True


# ------------------------------------------------------------------------------ model table


def test_bundled_model_table_has_the_real_and_fake_models_with_prices():
    table = load_model_table()
    expected = {
        "deepseek/deepseek-r1",
        "openai/gpt-4o-mini",
        "anthropic/claude-sonnet-4",
        "google/gemini-2.5-flash",
        "z-ai/glm-4.6",
        "minimax/minimax-m2",
        "fake/clean",
        "fake/reasoning",
        "fake/think-leak",
        "fake/spill",
        "fake/tool-call",
        "fake/truncated-tool-args",
        "fake/mid-stream-error",
        "fake/no-done",
    }
    assert expected <= set(table)
    assert all(info.price is not None and info.context_limit > 0 for info in table.values())
    assert table["anthropic/claude-sonnet-4"] == M200


def test_model_info_returns_none_for_unknown_models():
    assert model_info("nobody/never") is None
    assert model_info("openai/gpt-4o-mini").context_limit == 128_000
    assert model_info("x", {"x": M200}) is M200


def test_load_model_table_reads_a_given_file_and_rejects_bad_entries(tmp_path):
    good = tmp_path / "models.json"
    good.write_text(json.dumps({"models": {"m": {"context_limit": 8000}}}))
    assert load_model_table(good) == {"m": ModelInfo(context_limit=8000)}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"models": {"m": {"context_limit": 8000, "colour": "red"}}}))
    with pytest.raises(ValueError, match="bad entry 'm'"):
        load_model_table(bad)
    with pytest.raises(ValueError, match="cannot read model table"):
        load_model_table(tmp_path / "missing.json")


def _fake_errors_module(verdict: str | None) -> pytypes.ModuleType:
    module = pytypes.ModuleType("lab.errors")
    module.classify_error = lambda error: verdict
    return module


def test_classifier_context_length_verdict_also_compacts(monkeypatch):
    monkeypatch.setitem(sys.modules, "lab.errors", _fake_errors_module("context_length"))
    proc = Processor(M200)
    assert proc.process([error("Context window is exceeded, sorry")]) == "compact"


def test_reference_overflow_patterns_compact_whatever_the_classifier_says(monkeypatch):
    monkeypatch.setitem(sys.modules, "lab.errors", _fake_errors_module(None))
    proc = Processor(M200)
    assert proc.process([error("prompt is too long: 210345 tokens > 200000 maximum")]) == "compact"
    other = Processor(M200)
    assert other.process([error("Context window is exceeded, sorry")]) == "stop"


def test_usage_reported_after_an_error_chunk_is_settled_and_nothing_else_is():
    """OpenRouter's mid-stream 502: error chunk, finish_reason "error" chunk, then usage."""
    proc = Processor(M200)
    usage = Usage(input_tokens=7, output_tokens=3, cost=0.001)
    chunks = [text("Hello"), error("provider_unavailable"), text(" more"), text("", usage=usage)]
    assert proc.process(chunks) == "stop"
    assert proc.message.error.message == "provider_unavailable"
    assert proc.message.cost == 0.001
    assert proc.message.tokens["input"] == 7 and proc.message.tokens["output"] == 3
    assert [p.text for p in proc.message.parts if p.type == "text"] == ["Hello"]
    assert proc.message.parts[-1].type == "step-finish"
    assert proc.message.parts[-1].reason == "error"


def _parts_by_rule(chunks: list[ProcessedChunk]) -> list[tuple]:
    """The text and reasoning parts a step makes of text and thought deltas, read from the
    rule (the test's oracle): a delta continues the open part when it is of its type (and,
    for reasoning, its kind), else it closes that part at its chunk and opens its own; the
    step's end closes the last one at the last chunk."""
    parts: list[list] = []
    current: list | None = None
    seq = 0
    for chunk in chunks:
        seq += 1
        said = [("reasoning", t.kind, t.content) for t in chunk.thoughts if t.content]
        said += [("text", None, chunk.content)] if chunk.content else []
        for kind, sub, piece in said:
            if current is not None and current[0] == kind and current[1] == sub:
                current[2].append(piece)
                continue
            if current is not None:
                current[4] = seq
            current = [kind, sub, [piece], seq, None]
            parts.append(current)
    if current is not None:
        current[4] = seq
    return [(k, s, "".join(p), start, end) for k, s, p, start, end in parts]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "a", "bc"]),
            st.lists(st.tuples(st.sampled_from(["raw", "summary"]), st.sampled_from(["", "r"]))),
        ),
        max_size=12,
    )
)
def test_deltas_join_their_open_part_or_open_their_own_as_the_rule_reads(spec):
    chunks = [
        ProcessedChunk(
            type="text",
            content=content,
            thoughts=[ThoughtLogEntry(kind=kind, content=said) for kind, said in thoughts],
        )
        for content, thoughts in spec
    ]
    proc = Processor(None)
    proc.process(chunks)
    got = [
        (p.type, getattr(p, "kind", None), p.text, p.start, p.end)
        for p in proc.message.parts
        if p.type in ("text", "reasoning")
    ]
    assert got == _parts_by_rule(chunks)
