"""Reasoning spill guard (spill.py): docs/reference.md, "7.3 The spill guard", and its
examples."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.guards import GuardOutput, SpillGuard, SpillGuardConfig, find_spill_seam
from lab.guards.spill import evaluate_spill, is_answer_start, is_lowercase_letter

# (text, seam) — seam None means "emit untouched"
SEAM_CASES = [
    ("must do.Hello!", 8),  # seed: glued boundary before an answer start
    ("wait.Actually", 5),
    ("wait. Actually", None),  # spaced boundary: the model's own prose
    ("g it out.hey master 👋", 9),  # multi-word clause glued to a lowercase reply
    ("obj.method", None),  # single-word fragment glued to lowercase
    ("ok.hey", None),
    ("ok.Hey", 3),  # single word, but the answer start decides
    ("`obj.Method` is it", None),  # leading backtick is not lowercase
    ("use `obj.Method` here", None),  # odd backticks before the boundary
    ("use `x` now.Then", 12),  # even backticks: not protected
    ("pi is 3.14 so.Hello", 14),  # decimal point is not a boundary
    ("v3.2", None),
    ("so...Yes", 5),  # the boundary run is one boundary
    ('hmm?!"Hi"', 5),  # quote starts an answer
    ("done.*bold*", 5),
    ("done.(aside)", 5),
    ("thinking。好的", 9),  # CJK boundary, caseless letter answer start
    ("fine.👋 hi", 5),  # emoji starts an answer
    ("end.2 things", None),  # a digit is not an answer start, one word
    ("we end.2 things", 7),  # ...but a multi-word clause strips
    ("Hello.World", None),  # must start lowercase
    ("123.abc", None),
    ("  we go.so", 8),  # leading whitespace is part of the leak
    ("no boundary here", None),
    ("ends with boundary.", None),
    ("trailing space. ", None),
    ("   ", None),
    ("", None),
    ("ßtraße ok.Yes", 10),  # ß is lowercase (upper is "SS")
]


@pytest.mark.parametrize("text, seam", SEAM_CASES)
def test_find_spill_seam_reference_table(text, seam):
    assert find_spill_seam(text) == seam


def test_find_spill_seam_prefix_is_the_leak():
    text = "must do.Hello!"
    seam = find_spill_seam(text)
    assert (text[:seam], text[seam:]) == ("must do.", "Hello!")


def test_lowercase_definition_matches_reference():
    assert is_lowercase_letter("a") and is_lowercase_letter("é") and is_lowercase_letter("ß")
    for ch in "A1`.好😀 ":
        assert not is_lowercase_letter(ch)


@pytest.mark.parametrize(
    "text", ["Hello", "好", "ｶ", "😀", "*x", "(", "[", "{", '"', "'", "「", "（", "ǅ"]
)
def test_answer_starts(text):
    assert is_answer_start(text)


@pytest.mark.parametrize("text", ["hello", "1", ".", "-", "`", "", " Hello"])
def test_not_answer_starts(text):
    assert not is_answer_start(text)


# -- streaming guard ------------------------------------------------------------------------


def run(chunks, reasoning="thinking", config=None):
    g = SpillGuard(config)
    g.observe_reasoning(reasoning)
    outs = [g.filter(c) for c in chunks]
    outs.append(g.flush())
    return GuardOutput("".join(o.content for o in outs), "".join(o.reasoning for o in outs)), g


def test_spill_guard_strips_a_glued_seam_from_the_first_content():
    out, g = run(["must do.Hello!"])
    assert out == GuardOutput("Hello!", "must do.")
    (note,) = g.drain_notes()
    assert (note.guard, note.rule, note.offset, note.moved) == (
        "spill_guard",
        "answer_start",
        0,
        "must do.",
    )


def test_spill_guard_holds_until_the_seam_is_decidable():
    g = SpillGuard()
    g.observe_reasoning("r")
    assert g.filter("must ") == GuardOutput("", "")
    assert g.filter("do.") == GuardOutput("", "")
    assert g.filter("Hello!") == GuardOutput("Hello!", "must do.")
    assert g.filter(" more.Text") == GuardOutput(" more.Text", "")  # only the first content


def test_spill_guard_leaves_spaced_sentences_alone():
    assert run(["wait.", " Actually"])[0] == GuardOutput("wait. Actually", "")


def test_spill_guard_leaves_single_word_fragment_alone():
    assert run(["obj.method()"])[0] == GuardOutput("obj.method()", "")


def test_spill_guard_protects_open_inline_code():
    assert run(["use `obj.", "Method` now"])[0] == GuardOutput("use `obj.Method` now", "")


def test_spill_guard_ignores_content_without_prior_reasoning():
    g = SpillGuard()
    assert g.filter("must do.Hello!") == GuardOutput("must do.Hello!", "")
    g.observe_reasoning("late reasoning")
    assert g.filter("x.Y") == GuardOutput("x.Y", "")


def test_spill_guard_reasoning_after_visible_content_does_not_arm_it():
    g = SpillGuard()
    g.observe_reasoning("")  # empty reasoning does not count
    assert g.filter("a.B") == GuardOutput("a.B", "")


def test_spill_guard_holds_at_most_the_hold_limit():
    g = SpillGuard()
    g.observe_reasoning("r")
    text = "a" * 179
    assert g.filter(text) == GuardOutput("", "")
    assert g.filter("a") == GuardOutput("a" * 180, "")  # core reached 180: emit untouched
    assert g.filter("b.C") == GuardOutput("b.C", "")


def test_spill_guard_hold_limit_is_configurable():
    out, _ = run(["a" * 10, "b"], config=SpillGuardConfig(hold_limit_chars=5))
    assert out == GuardOutput("a" * 10 + "b", "")


def test_spill_guard_flush_releases_held_content_unchanged():
    out, _ = run(["we must do."])
    assert out == GuardOutput("we must do.", "")


def test_spill_guard_holds_whitespace_only_content():
    g = SpillGuard()
    g.observe_reasoning("r")
    assert g.filter("  ") == GuardOutput("", "")
    assert g.filter("\n") == GuardOutput("", "")
    assert g.filter("we go.Now") == GuardOutput("Now", "we go.")
    (note,) = g.drain_notes()
    assert note.offset == 3  # after the three held whitespace characters


def test_spill_guard_empty_content_is_a_no_op():
    g = SpillGuard()
    g.observe_reasoning("r")
    assert g.filter("") == GuardOutput("", "")
    assert not g.visible_started


# -- config -------------------------------------------------------------------------------


def test_spill_config_defaults_are_the_reference_values():
    c = SpillGuardConfig()
    assert c.hold_limit_chars == 180
    assert c.boundary_chars == ".!?。！？"
    assert c.answer_start_chars == "*_([{\"'“”‘’「『（"
    assert c.min_clause_words == 2
    assert c.enabled and c.require_glued_boundary and c.protect_open_inline_code


def test_spill_config_round_trips_through_json():
    c = SpillGuardConfig(hold_limit_chars=50, strip_on_answer_start=False)
    assert SpillGuardConfig.model_validate_json(c.model_dump_json()) == c
    assert json.loads(c.model_dump_json())["hold_limit_chars"] == 50


def test_spill_config_is_frozen_and_strict():
    c = SpillGuardConfig()
    with pytest.raises(ValueError):
        c.hold_limit_chars = 3  # type: ignore[misc]
    with pytest.raises(ValueError):
        SpillGuardConfig(unknown_field=True)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "config, text, seam",
    [
        (SpillGuardConfig(strip_on_answer_start=False), "wait.Actually", None),
        (SpillGuardConfig(strip_on_answer_start=False), "we wait.Actually", 8),
        (SpillGuardConfig(strip_on_multi_word_clause=False), "g it out.hey", None),
        (SpillGuardConfig(min_clause_words=3), "we go.hey", None),
        (SpillGuardConfig(min_clause_words=3), "so we go.hey", 9),
        (SpillGuardConfig(protect_open_inline_code=False), "use `obj.Method", 9),
        (SpillGuardConfig(skip_decimal_points=False), "v3.2 ok", None),
        (SpillGuardConfig(boundary_chars=";"), "we go;Now", 6),
        (SpillGuardConfig(boundary_chars=";"), "we go.Now", None),
        (SpillGuardConfig(require_lowercase_start=False), "We go.Now", 6),
        (SpillGuardConfig(answer_start_uppercase=False), "wait.Actually", None),
        (SpillGuardConfig(answer_start_emoji=False), "fine.👋", None),
        (SpillGuardConfig(answer_start_caseless=False), "ok.好", None),
        (SpillGuardConfig(answer_start_chars=""), 'ok."x"', None),
        (SpillGuardConfig(extend_boundary_run=False), "so...Yes", None),
        (SpillGuardConfig(require_glued_boundary=False), "wait. Actually", 5),
    ],
)
def test_every_spill_heuristic_is_switchable(config, text, seam):
    assert find_spill_seam(text, config) == seam


def test_spill_guard_disabled_passes_through():
    out, _ = run(["must do.Hello!"], config=SpillGuardConfig(enabled=False))
    assert out == GuardOutput("must do.Hello!", "")


def test_spill_guard_and_find_spill_seam_share_one_decision():
    cases = [(text, seam) for text, seam in SEAM_CASES if text.strip()]
    assert cases
    for text, seam in cases:
        out, _ = run([text])
        if seam is None:
            assert out == GuardOutput(text, ""), text
        else:
            assert out == GuardOutput(text[seam:], text[:seam].strip()), text
        assert evaluate_spill(text).action in ("hold", "emit", "strip")


# -- properties ---------------------------------------------------------------------------

TOKENS = ["wait", "we must", ".", "!", "?", "...", "Actually", "hey", " ", "\n", "`", "3",
          "é", "👋", "好", "obj", "(", '"', "。"]  # fmt: skip


@st.composite
def partitions(draw):
    text = draw(st.lists(st.sampled_from(TOKENS), max_size=12).map("".join))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=6)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@settings(max_examples=500, deadline=None)
@given(partitions())
def test_spill_guard_is_split_invariant_below_the_hold_limit(case):
    text, parts = case
    assert len(text) < 180
    assert run(parts)[0] == run([text])[0]


@settings(max_examples=300, deadline=None)
@given(partitions())
def test_spill_guard_conserves_text_and_matches_find_spill_seam(case):
    text, parts = case
    out, _ = run(parts)
    seam = find_spill_seam(text)
    if seam is None:
        assert out == GuardOutput(text, "")
    else:
        assert out == GuardOutput(text[seam:], text[:seam].strip())


@settings(max_examples=400, deadline=None)
@given(
    partitions(),
    st.booleans(),
    st.sampled_from([SpillGuardConfig(), SpillGuardConfig(enabled=False),
                     SpillGuardConfig(require_reasoning_first=False)]),
)  # fmt: skip
def test_a_guard_that_stopped_inspecting_passes_every_delta_as_it_came(case, reasoned, config):
    # the adapters skip filter() once inspecting is False: that must change nothing
    _, parts = case
    g = SpillGuard(config)
    if reasoned:
        g.observe_reasoning("thinking")
    for part in [*parts, "we must wait.", "Actually", "we must go.Hey", " "]:
        was_inspecting = g.inspecting
        notes = len(g.notes)
        out = g.filter(part)
        if not was_inspecting:
            assert out == GuardOutput(part, "") and len(g.notes) == notes
        assert g.visible_started is not g.inspecting
    g.flush()
    assert not g.inspecting and g.filter("we must go.Hey") == GuardOutput("we must go.Hey", "")
