"""Dedup, speaker-boundary guard, stop strings (text.py, stops.py).

The rules: docs/reference.md, "7. Guards"."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.guards import (
    RecentTextDedup,
    SpeakerBoundaryGuard,
    build_provider_stop_strings,
    find_markdown_code_ranges,
    merge_stop_strings,
    truncate_before_generic_speaker_line,
)
from lab.guards.text import (
    DEDUP_RECENT_CHARS,
    CodeRange,
    SpeakerTruncation,
    is_decorated_self_label,
    is_generic_speaker_stop_label,
)

# -- dedup ----------------------------------------------------------------------------------


def test_dedup_drops_a_full_repeat_of_the_tail():
    d = RecentTextDedup()
    assert d.filter("Hello there, friend") == "Hello there, friend"
    assert d.filter("there, friend") == ""
    (note,) = d.drain_notes()
    assert (note.guard, note.rule, note.offset, note.moved) == (
        "dedup",
        "full_repeat",
        19,
        "there, friend",
    )


def test_dedup_strips_the_longest_overlap_with_the_tail():
    d = RecentTextDedup()
    d.filter("abcabcabcabc")
    assert d.filter("abcabcabcXYZ") == "XYZ"
    assert d.drain_notes()[0].detail == {"overlap": 9}


@pytest.mark.parametrize(
    "first, second, expected",
    [
        ("Hello world", "short", "short"),  # under 8 characters: untouched
        ("Hello world", "o world!", "o world!"),  # a 7-char overlap is too short
        ("Hello world", "lo world, hi", ", hi"),  # 8-char overlap
        ("Hello world", "completely new text", "completely new text"),
    ],
)
def test_dedup_overlap_minimum_is_eight_characters(first, second, expected):
    d = RecentTextDedup()
    d.filter(first)
    assert d.filter(second) == expected


def test_dedup_passes_everything_before_anything_was_streamed():
    d = RecentTextDedup()
    assert d.filter("repeat me") == "repeat me"
    assert d.filter("") == ""


def test_dedup_short_chunks_extend_the_tail():
    d = RecentTextDedup()
    for ch in "abcdefgh":
        assert d.filter(ch) == ch
    assert d.filter("abcdefgh") == ""


def test_dedup_tail_is_bounded():
    d = RecentTextDedup(tail_chars=16)
    d.filter("0123456789abcdefXYZ")
    assert d.tail == "3456789abcdefXYZ"
    assert d.filter("0123456789") == "0123456789"  # fell out of the tail


def test_dedup_thresholds_are_parameters():
    d = RecentTextDedup(min_chars=3)
    d.filter("hello")
    assert d.filter("llo!") == "!"


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.text(alphabet="ab ", max_size=20), max_size=20),
    st.integers(8, 40),
    st.integers(1, 10),
)
def test_dedup_tail_matches_a_naive_rolling_tail(chunks, tail_chars, min_chars):
    _check_dedup_against_a_naive_rolling_tail(chunks, tail_chars, min_chars)


_RESEND = st.tuples(st.integers(1, 600), st.integers(1, 400))
"""A chunk that resends streamed text: (how far back it starts, how long it is)."""


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="ab ", max_size=12),
            st.integers(120, 300).flatmap(
                lambda n: st.text(alphabet="ab ", min_size=n, max_size=n)
            ),
            _RESEND,
        ),
        max_size=40,
    ),
    st.integers(1, 700),
    st.integers(1, 10),
)
def test_dedup_matches_a_naive_tail_across_its_recent_string_and_cut_backs(
    drawn, tail_chars, min_chars
):
    # chunks shorter and longer than DEDUP_RECENT_CHARS (120-300 characters), resends of
    # what was streamed (the repeats and overlaps dedup is for), tails shorter and longer
    # than the window: streams long enough for the recent string and the pieces to be cut
    # back several times
    assert DEDUP_RECENT_CHARS == 128  # (the sizes above straddle it)
    chunks: list[str] = []
    streamed = ""
    for c in drawn:
        if isinstance(c, tuple):
            back, size = c
            c = streamed[-back:][:size]
        chunks.append(c)
        streamed += c
    _check_dedup_against_a_naive_rolling_tail(chunks, tail_chars, min_chars)


@pytest.mark.parametrize(
    "chunks, last",
    [
        # a chunk longer than the recent string: its overlap reaches past it
        (["a" * 130, "y" * 130, "a" * 10 + "y" * 130 + "Z"], "Z"),
        # a long piece retires the recent string to the older pieces, where a repeat finds it
        (["Hello there, friend", "x" * 130, "Hello there, friend" + "x" * 130], ""),
    ],
)
def test_dedup_reads_the_tail_past_the_recent_string(chunks, last):
    d = RecentTextDedup()
    assert [d.filter(c) for c in chunks][-1] == last


def test_dedup_reset_forgets_the_recent_string_and_the_older_pieces():
    d = RecentTextDedup(tail_chars=300)
    for i in range(40):
        d.filter(f"<{i:04d}>" * 3)
    d.filter("z" * 200)
    d.reset()
    assert d.tail == ""
    assert d.filter("z" * 200) == "z" * 200  # nothing to repeat after a reset
    assert d.filter("<0039><0039>") == "<0039><0039>"
    assert d.filter("<0039><0039>") == ""


def test_dedup_holds_a_bounded_end_of_a_huge_chunk():
    d = RecentTextDedup(tail_chars=16)
    d.filter("x" * 1_000_000 + "0123456789abcdef")
    for _ in range(10):
        assert d.filter("0123456789abcdef") == ""
    assert d.tail == "0123456789abcdef"
    held = len(d._recent) + sum(map(len, d._older))
    assert held <= 2 * DEDUP_RECENT_CHARS


def test_dedup_keeps_its_pieces_within_twice_the_tail_and_reads_a_long_chunk_whole():
    d = RecentTextDedup(tail_chars=300)
    for i in range(200):
        piece = f"<{i:04d}>" * 3  # 18 characters, none repeating the tail
        assert d.filter(piece) == piece
        assert d._older_len == sum(map(len, d._older)) <= 600
        assert len(d._recent) <= 2 * DEDUP_RECENT_CHARS
        # read through the recent string, cut back or not: the piece again, and an overlap
        assert d.filter(piece) == ""
        assert d.filter(piece[-9:] + "!") == "!"
    long = "".join(f"[{i:04d}]" for i in range(60))  # 360 characters: past the recent string
    assert d.filter(long) == long
    assert d.filter(long[-250:]) == ""  # a full repeat, in the long piece kept whole
    assert d.filter(long[-200:] + "new") == "new"  # an overlap of 200 characters
    assert d.tail == (long + "new")[-300:]
    assert [n.rule for n in d.drain_notes()[-2:]] == ["full_repeat", "overlap"]


def _check_dedup_against_a_naive_rolling_tail(chunks, tail_chars, min_chars):
    # what each chunk keeps, the rule each cut names and the tail, against the reference's
    # rule read naively (the whole rolling tail, every overlap length tried)
    d = RecentTextDedup(tail_chars=tail_chars, min_chars=min_chars)
    naive = ""
    for c in chunks:
        before = len(d.notes)
        out = d.filter(c)
        exp, rule = c, None
        if c and len(c) >= min_chars and naive:
            if naive.endswith(c):
                exp, rule = "", "full_repeat"
            else:
                for k in range(min(len(naive), len(c)), min_chars - 1, -1):
                    if naive[-k:] == c[:k]:
                        exp, rule = c[k:], "overlap"
                        break
        assert out == exp
        assert [n.rule for n in d.notes[before:]] == ([rule] if rule else [])
        if exp:
            naive = (naive + exp)[-tail_chars:]
        assert d.tail == naive


# -- markdown code ranges and labels ------------------------------------------------------------


@pytest.mark.parametrize(
    "text, ranges",
    [
        ("no code", []),
        ("a `b` c", [CodeRange(2, 5)]),
        ("a ``b`c`` d", [CodeRange(2, 9)]),
        ("```\ncode\n```\nx", [CodeRange(0, 12)]),
        ("open ``` fence", [CodeRange(5, 14)]),  # unclosed: to the end
        ("`a` and `b`", [CodeRange(0, 3), CodeRange(8, 11)]),
    ],
)
def test_markdown_code_ranges(text, ranges):
    assert find_markdown_code_ranges(text) == ranges


@pytest.mark.parametrize(
    "label, generic",
    [
        ("User", True),
        ("Tomori", True),
        ("  Bob ", True),
        ("名前", True),
        ("_", True),
        ("[System]", False),
        ("<tag>", False),
        ("!!!", False),
        ("", False),
        ("x" * 65, False),
    ],
)
def test_generic_speaker_labels(label, generic):
    assert is_generic_speaker_stop_label(label) is generic


def test_decorated_self_labels_are_allowed_but_plain_ones_are_not():
    names = ["Tomori", "Tomo"]
    assert is_decorated_self_label("Tomori (sleepy)", names)
    assert is_decorated_self_label("tomo  (whisper)", names)
    assert not is_decorated_self_label("Tomori", names)
    assert not is_decorated_self_label("Tomori ()", names)
    assert not is_decorated_self_label("Bob (sleepy)", names)


@pytest.mark.parametrize(
    "text, kwargs, expected",
    [
        ("Sure!\nUser: more", {}, SpeakerTruncation("Sure!", True, "User", 5)),
        ("Sure!\n\n  User:more", {}, SpeakerTruncation("Sure!", True, "User", 5)),
        ("User: hi", {}, SpeakerTruncation("User: hi")),
        ("User: hi", {"include_start": True}, SpeakerTruncation("", True, "User", 0)),
        ("a\n[System]: x", {}, SpeakerTruncation("a\n[System]: x")),
        ("see `\nfoo: bar` ok", {}, SpeakerTruncation("see `\nfoo: bar` ok")),
        (
            "a\n```\nkey: v\n```\nBob: hi",
            {},
            SpeakerTruncation("a\n```\nkey: v\n```", True, "Bob", 16),
        ),
        ("a\n```\nkey: v", {}, SpeakerTruncation("a\n```\nkey: v")),  # unclosed fence
        ("x\nno colon here\nok", {}, SpeakerTruncation("x\nno colon here\nok")),
        ("", {}, SpeakerTruncation("")),
        (
            "hi\nTomori (sleepy): z\nBob: y",
            {"is_allowed_speaker_label": lambda s: s == "Tomori (sleepy)"},
            SpeakerTruncation("hi\nTomori (sleepy): z", True, "Bob", 21),
        ),
    ],
)
def test_truncate_before_generic_speaker_line(text, kwargs, expected):
    assert truncate_before_generic_speaker_line(text, **kwargs) == expected


# -- speaker guard ---------------------------------------------------------------------------


def test_speaker_guard_holds_back_32_characters():
    g = SpeakerBoundaryGuard()
    assert g.feed("x" * 32) == ""
    assert g.feed("y") == "x"
    assert g.pending == "x" * 31 + "y"
    assert g.flush() == "x" * 31 + "y"
    assert g.flush() == ""


def test_speaker_guard_catches_a_label_split_across_chunks():
    g = SpeakerBoundaryGuard()
    out = [g.feed(c) for c in ["Here you go, the answer is 42.", "\nUs", "er: and now"]]
    assert "".join(out) == "Here you go, the answer is 42."
    assert g.fired and g.matched_speaker == "User"
    assert g.feed("more") == "" and g.flush() == ""
    notes = g.drain_notes()
    assert [(n.rule, n.offset, n.moved) for n in notes] == [
        ("generic_speaker_line", 30, "\nUser: and now"),
        ("after_stop", 44, "more"),
    ]
    assert notes[0].detail == {"speaker": "User"}


def test_speaker_guard_allows_decorated_self_label_but_not_plain():
    g = SpeakerBoundaryGuard(persona_name="Tomori")
    text = "ok\nTomori (sleepy): yawn\nTomori: stop"
    out = g.feed(text) + g.flush()
    assert out == "ok\nTomori (sleepy): yawn"
    assert g.fired


def test_speaker_guard_exempts_code_in_its_window():
    g = SpeakerBoundaryGuard()
    text = "code:\n```\nkey: value\n```\ndone"
    assert g.feed(text) + g.flush() == text
    assert not g.fired


def test_speaker_guard_disabled_passes_through():
    g = SpeakerBoundaryGuard(enabled=False)
    assert g.feed("a\nUser: b") == "a\nUser: b"


def test_speaker_guard_holdback_is_a_parameter():
    g = SpeakerBoundaryGuard(holdback_chars=0)
    assert g.feed("abc") == "abc"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab \n:", max_size=12), max_size=12))
def test_speaker_guard_never_loses_text_unless_it_fired(chunks):
    g = SpeakerBoundaryGuard()
    out = "".join(g.feed(c) for c in chunks) + g.flush()
    text = "".join(chunks)
    if not g.fired:
        assert out == text
    else:
        assert text.startswith(out)
        moved = g.drain_notes()[0]
        assert text[moved.offset :].startswith(moved.moved)


# -- stop strings --------------------------------------------------------------------------------


def test_merge_stop_strings_dedups_in_first_seen_order():
    assert merge_stop_strings(["a", "b"], "b", None, ["c", "", 3, "a"], "d") == ["a", "b", "c", "d"]
    assert merge_stop_strings(None) is None
    assert merge_stop_strings([], "", [None]) is None


def test_provider_stop_strings_always_include_the_universal_stop():
    assert build_provider_stop_strings() == ["<｜begin▁of▁sentence｜>"]


def test_provider_stop_strings_merge_order():
    stops = build_provider_stop_strings(
        existing_stops=["X"],
        provider_name=" NovelAI ",
        model="GLM-4-6",
        persona_name=" Tomo\r\nri   Chan ",
        configured_stops=["Y", "X"],
        include_persona_speaker_stop=True,
    )
    assert stops == [
        "X",
        "<｜begin▁of▁sentence｜>",
        "<|user|>",
        "<|observation|>",
        "<|system|>",
        "</think>",
        "Y",
        "\nTomo ri Chan:",
    ]


def test_specialized_stop_rule_needs_the_exact_model():
    assert "<|user|>" not in build_provider_stop_strings(provider_name="novelai", model="glm-4-6x")


def test_persona_stop_only_when_requested_and_named():
    assert build_provider_stop_strings(persona_name="Tomori") == ["<｜begin▁of▁sentence｜>"]
    assert build_provider_stop_strings(persona_name="  ", include_persona_speaker_stop=True) == [
        "<｜begin▁of▁sentence｜>"
    ]


def test_guards_package_exports_a_sorted_all_of_public_names():
    import lab.guards as guards

    assert guards.__all__ == sorted(guards.__all__)
    assert guards.__all__
    for name in guards.__all__:
        assert hasattr(guards, name), name
    required = {
        "GuardOutput", "GuardNote", "ThinkBlockStripper", "split_think_blocks",
        "SpillGuardConfig", "SpillGuard", "find_spill_seam", "VerbatimToolCallParser",
        "VerbatimOutput", "repair_truncated_json", "parse_tool_arguments", "RecentTextDedup",
        "SpeakerBoundaryGuard", "merge_stop_strings", "final_cleanup",
    }  # fmt: skip
    assert required <= set(guards.__all__)
