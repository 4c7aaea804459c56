"""Guards hold bounded state and run in linear time when fed one character per delta."""

from __future__ import annotations

import random

import pytest

from lab.guards import (
    RecentTextDedup,
    SpeakerBoundaryGuard,
    SpillGuard,
    ThinkBlockStripper,
    VerbatimToolCallParser,
)
from lab.guards.text import DEDUP_RECENT_CHARS

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


ADVERSARIAL = {
    "mixed": stream,
    "spaces": lambda n: " " * n,
    "open-angles": lambda n: "<" * n,
    "one-long-think": lambda n: "<think>" + "ab\n" * (n // 3),
    "unclosed-call": lambda n: "ping(" + "x" * n,
}


@pytest.mark.parametrize("make", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_held_state_stays_bounded_one_char_per_delta(make):
    """Every guard holds at most a fixed amount of text whatever it is fed, so the work per
    character is bounded and a stream costs linear time. (Wall-clock linearity is measured
    by ``bench/bench_linearity.py``; timing does not belong in a pass/fail test.)"""
    text = make(60_000)
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
        assert sum(map(len, dedup._older)) <= 2 * 256
        assert len(dedup._recent) <= 2 * DEDUP_RECENT_CHARS
    if make is stream:
        assert spill.visible_started and not spill._pending
    # the one unbounded hold, by the reference's rule: whitespace before any visible text,
    # held as a list of pieces (an append per delta, joined once) and released at the end
    spill.flush()
    assert not spill._pending
