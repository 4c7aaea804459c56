"""The runner hands a read longer than the SSE window to the decoder in slices that end at
line ends (``lab.stream.line_slices``): the same events, taken a slice at a time."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import lab.stream
from lab.http.sse import WINDOW
from lab.replay import replay_sse
from lab.stream import line_slices

REALWORLD = Path(__file__).parent / "realworld"


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from([b"\n", b"\r\n", b"\r", b"data: x", b"\xe2\x82\xac", b"ab"]), max_size=60
    ),
    st.integers(min_value=1, max_value=40),
)
@example([b"ab"] * 30, 4)  # no line end at all: one slice
@example([b"ab" * 20, b"\n", b"ab", b"\n"], 4)  # one line longer than a slice
def test_slices_are_the_data_again_each_at_most_the_size_or_one_line(pieces, size):
    data = b"".join(pieces)
    slices = list(line_slices(data, size))
    assert b"".join(slices) == data
    assert all(slices)  # no empty slice
    for s in slices[:-1]:
        assert s.endswith(b"\n")  # every cut is right after a line end
    for s in slices:
        if len(s) > size:  # only a line longer than a slice makes one longer: it ends there
            assert b"\n" not in s[:size]
            assert s.count(b"\n") <= 1
    if len(data) <= size:
        assert slices == ([data] if data else [])


def test_a_read_up_to_the_window_is_handed_on_whole_and_a_longer_one_in_slices():
    short = b"data: {}\n\n" * (WINDOW // 10)
    assert len(short) <= WINDOW
    assert list(lab.stream._as_is(short)) == [short]
    long = short * 3
    got = list(lab.stream._as_is(long))
    assert len(got) > 2 and b"".join(got) == long
    assert all(len(s) <= WINDOW for s in got)


def _whole(result) -> tuple:  # noqa: ANN001
    return (
        [c.model_dump() for c in result.chunks],
        result.origins,
        result.text,
        result.reasoning,
        [e.model_dump() for e in result.guard_events],
        {k: v for k, v in result.facts.items()},
        result.finish_reason,
    )


@pytest.mark.parametrize(
    ("provider", "name"),
    [
        ("openrouter", "openrouter-vertex-claude-reasoning-signature.sse"),
        ("anthropic", "anthropic-sonnet45-text.sse"),
        ("google", "google-vertex-streamed-nested-args.sse"),
    ],
)
def test_a_whole_body_in_one_read_replays_the_same_sliced_or_not(provider, name, monkeypatch):
    one = (REALWORLD / name).read_bytes()
    body = one * max(1, (3 * WINDOW) // len(one) + 1)  # past the window: sliced
    assert len(body) > 2 * WINDOW
    cut: list[int] = []
    real = lab.stream.line_slices

    def counted(data, size=WINDOW):  # noqa: ANN001
        slices = list(real(data, size))
        cut.append(len(slices))
        return iter(slices)

    monkeypatch.setattr(lab.stream, "line_slices", counted)
    sliced = replay_sse(provider, body)
    assert cut and cut[0] > 2  # the runner did hand the read over in slices
    monkeypatch.setattr(lab.stream, "_as_is", lambda raw: (raw,))
    whole = replay_sse(provider, body)
    assert _whole(sliced) == _whole(whole)
