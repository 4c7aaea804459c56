"""Guards hold bounded state and run in linear time when fed one character per delta."""

from __future__ import annotations

import random
import time

import pytest

from lab.guards import (
    RecentTextDedup,
    SpeakerBoundaryGuard,
    SpillGuard,
    ThinkBlockStripper,
    VerbatimToolCallParser,
)

TOOLS = [{"type": "function", "function": {"name": "ping"}}, {"name": "generate_image"}]
WORDS = ["hello", "<think>", "</think>", "ping(", ")", "\n", "User:", "`", '"x"', ".", "<",
         "</th", "ink>", " ", "generate_im", "Yes"]  # fmt: skip


def stream(n: int, seed: int = 0) -> str:
    rnd = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < n:
        w = rnd.choice(WORDS)
        parts.append(w)
        size += len(w)
    return "".join(parts)[:n]


def test_held_state_stays_bounded_one_char_per_delta():
    text = stream(60_000)
    think = ThinkBlockStripper("Tomori")
    spill = SpillGuard()
    spill.observe_reasoning("r")
    dedup = RecentTextDedup(tail_chars=256)
    speaker = SpeakerBoundaryGuard()
    verbatim = VerbatimToolCallParser(TOOLS, max_buffer_chars=512)
    for ch in text:
        think.feed(ch)
        spill.filter(ch)
        dedup.filter(ch)
        if not speaker.fired:
            speaker.feed(ch)
        verbatim.feed(ch)
        assert len(think._pending) <= 64
        assert len(speaker.pending) <= 32
        assert len(verbatim.buffered) <= 512
        assert dedup._len <= 2 * 256 + 1
    assert spill.visible_started and not spill._pending


def _feed_all(text: str) -> float:
    t = time.perf_counter()
    think = ThinkBlockStripper("Tomori")
    spill = SpillGuard()
    spill.observe_reasoning("r")
    dedup = RecentTextDedup()
    speaker = SpeakerBoundaryGuard()
    verbatim = VerbatimToolCallParser(TOOLS)
    for ch in text:
        think.feed(ch)
        spill.filter(ch)
        dedup.filter(ch)
        speaker.feed(ch)
        verbatim.feed(ch)
    think.flush(), spill.flush(), speaker.flush(), verbatim.flush()
    return time.perf_counter() - t


@pytest.mark.slow
@pytest.mark.parametrize(
    "make",
    [
        stream,
        lambda n: " " * n,
        lambda n: "<" * n,
        lambda n: "<think>" + "ab\n" * (n // 3),
        lambda n: "ping(" + "x" * n,
    ],
)
def test_guards_scale_linearly(make):
    small, big = _feed_all(make(50_000)), _feed_all(make(200_000))
    assert big < 8 * small + 0.5  # 4x the input: well under quadratic (16x)
