"""Verbatim tool-call recovery (verbatim.py; docs/reference.md, "7.8 Verbatim tool calls")."""

from __future__ import annotations

import pytest

from lab.guards import VerbatimOutput, VerbatimToolCallParser
from lab.guards.verbatim import parse_tool_specs
from lab.model import FunctionCall

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "generate_image",
            "parameters": {
                "type": "object",
                "properties": {"prompt": {"type": "string"}, "mode": {"type": "string"}},
                "required": ["prompt"],
            },
        },
    },
    {"name": "ping", "parameters": {"type": "object", "properties": {}}},
    {"name": "gen", "parameters": {"required": ["a", "b"]}},
]

CAT = FunctionCall(name="generate_image", args={"prompt": "a cat", "mode": "txt2img"})


def run(deltas, *, all_steps=False, tools=TOOLS, **kw):
    """Feed every delta and flush; returns (visible text, calls) in stream order."""
    p = VerbatimToolCallParser(tools, **kw)
    outs: list[VerbatimOutput] = []
    for d in deltas:
        outs.extend(p.feed_all(d) if all_steps else [p.feed(d)])
    outs.append(p.flush())
    text = "".join(o.text for o in outs)
    calls = [o.function_call for o in outs if o.function_call is not None]
    return text, calls, p


def test_tool_specs_accept_openai_and_bare_shapes():
    specs = parse_tool_specs([*TOOLS, {"type": "function"}, "junk", {"name": ""}])
    assert sorted(specs) == ["gen", "generate_image", "ping"]
    assert specs["generate_image"].single_string_param == "prompt"
    assert specs["gen"].required == ("a", "b") and specs["gen"].single_string_param is None


def test_prose_before_the_call_is_emitted_first_then_the_call():
    p = VerbatimToolCallParser(TOOLS)
    assert p.feed('Fine. `generate_image({"prompt":"a cat","mode":"txt2img"})`') == VerbatimOutput(
        "Fine. ", None
    )
    assert p.feed(" ") == VerbatimOutput("", CAT)  # resolved on a later chunk
    assert p.flush() == VerbatimOutput("", None)  # the closer "` " went with the call


@pytest.mark.parametrize(
    "text",
    [
        'generate_image({"prompt":"a cat","mode":"txt2img"})',
        '`generate_image({"prompt":"a cat","mode":"txt2img"})`',
        '```json\ngenerate_image({"prompt":"a cat","mode":"txt2img"})\n```',
        '```\ngenerate_image ({"prompt":"a cat","mode":"txt2img"})\n```',
        'generate_image({"prompt":"a cat","mode":"txt2img"}) ',
    ],
)
def test_bare_inline_and_fenced_calls_are_recovered(text):
    visible, calls, _ = run([text])
    assert calls == [CAT]
    assert visible.strip() == ""


def test_single_string_argument_maps_to_the_only_required_param():
    _, calls, _ = run(['generate_image("a dog")'])
    assert calls == [FunctionCall(name="generate_image", args={"prompt": "a dog"})]


def test_empty_arguments_only_for_tools_without_required_params():
    assert run(["ping()"])[1] == [FunctionCall(name="ping")]
    assert run(["generate_image()"])[:2] == ("generate_image()", [])


def test_a_mere_mention_is_released_as_text():
    visible, calls, _ = run(["generate_image (it makes art) and more"])
    assert (visible, calls) == ("generate_image (it makes art) and more", [])


def test_only_known_tool_names_anchor():
    visible, calls, _ = run(['print({"a": 1}) and imagine_image({"prompt": "x"})'])
    assert calls == [] and visible == 'print({"a": 1}) and imagine_image({"prompt": "x"})'


def test_word_boundary_is_required_before_the_name():
    assert run(["xping()"])[:2] == ("xping()", [])


def test_parentheses_inside_strings_do_not_close_the_call():
    _, calls, _ = run(['generate_image({"prompt":"a (cat)) \\" ) x"})'])
    assert calls == [FunctionCall(name="generate_image", args={"prompt": 'a (cat)) " ) x'})]


def test_arguments_must_be_a_json_object_or_string():
    for bad in ["generate_image([1])", "generate_image(prompt='x')", 'gen("x")', "ping(1)"]:
        assert run([bad])[:2] == (bad, []), bad


def test_no_tools_means_text_passes_through():
    p = VerbatimToolCallParser([])
    assert p.feed("ping()") == VerbatimOutput("ping()")
    assert p.flush() == VerbatimOutput()


def test_feed_returns_text_or_a_call_never_both():
    p = VerbatimToolCallParser(TOOLS)
    outs = [p.feed(c) for c in 'ok ping() then generate_image("x") end']
    outs.append(p.flush())
    for o in outs[:-1]:
        assert not (o.text and o.function_call)


def test_name_prefix_is_held_back_until_decided():
    p = VerbatimToolCallParser(TOOLS)
    assert p.feed("I use generate") == VerbatimOutput("I use ")
    assert p.buffered == "generate"
    assert p.feed("d art") == VerbatimOutput("generated art")


def test_full_name_with_trailing_space_and_opener_are_held():
    p = VerbatimToolCallParser(TOOLS)
    assert p.feed("call `ping ") == VerbatimOutput("call ")
    assert p.feed("()`") == VerbatimOutput("", FunctionCall(name="ping"))


def test_buffer_over_the_cap_is_released_as_text():
    p = VerbatimToolCallParser(TOOLS, max_buffer_chars=10)
    assert p.feed('ping("') == VerbatimOutput()
    assert p.feed("xxxxxxxx") == VerbatimOutput('ping("xxxxxxxx')
    assert p.flush() == VerbatimOutput()


def test_max_buffer_chars_is_clamped_to_at_least_one():
    assert VerbatimToolCallParser(TOOLS, max_buffer_chars=0).max_buffer_chars == 1


def test_flush_completes_a_pending_call_and_returns_text_after_it():
    p = VerbatimToolCallParser(TOOLS)
    assert p.feed("ok ") == VerbatimOutput("ok ")
    assert p.feed("ping() bye") == VerbatimOutput("", FunctionCall(name="ping"))
    assert p.flush() == VerbatimOutput(" bye")


def test_flush_releases_an_unbalanced_call_as_text():
    assert run(['generate_image({"prompt": "a'])[:2] == ('generate_image({"prompt": "a', [])


def test_failed_parse_releases_the_whole_buffer_reference_quirk():
    # everything after the failed mention in the same buffer goes out as text, unscanned
    text = "ping(x) ping()"
    assert run([text])[:2] == (text, [])
    assert run(["ping(x) ", "ping()"])[1] == [FunctionCall(name="ping")]


def test_feed_all_returns_every_output_a_delta_allows():
    p = VerbatimToolCallParser(TOOLS)
    outs = p.feed_all('Fine. `generate_image({"prompt":"a cat","mode":"txt2img"})` done')
    assert outs == [VerbatimOutput("Fine. "), VerbatimOutput("", CAT), VerbatimOutput("done")]


def test_recovered_call_records_a_note_with_its_offset():
    _, _, p = run(["Hi. ", "`ping()` ok"], all_steps=True)
    (note,) = p.drain_notes()
    assert (note.guard, note.rule, note.offset, note.moved) == (
        "verbatim_tool_call",
        "recovered_call",
        4,
        "`ping()` ",
    )
    assert note.detail == {"name": "ping"}


def test_closer_arriving_after_the_call_completed_stays_visible_reference_quirk():
    # The closer is only removed when it is already buffered when ")" balances the call.
    p = VerbatimToolCallParser(TOOLS)
    assert p.feed_all("`ping()") == [VerbatimOutput("", FunctionCall(name="ping"))]
    assert p.feed_all("` done") == [VerbatimOutput("` done")]


SPLIT_TEXTS = [
    'Fine. generate_image({"prompt":"a cat","mode":"txt2img"}) done',
    'Sure:\n```json\ngenerate_image({"prompt":"a cat","mode":"txt2img"})\n```\nThere.',
    'Fine. `generate_image({"prompt":"a cat","mode":"txt2img"})` done',
    "say ping() now",
    "generate_image (it makes art)",
]


def closer_cut(text: str, cut: int) -> bool:
    """Is ``cut`` between the call's ")" and the end of its closing backticks?"""
    close = text.rfind(")")
    tail = text[close + 1 :]
    closer = len(tail) - len(tail.lstrip(" \n`")) if "`" in tail[:3] else 0
    return close < cut <= close + closer


@pytest.mark.parametrize("text", SPLIT_TEXTS)
@pytest.mark.parametrize("all_steps", [False, True])
def test_every_single_cut_gives_the_same_text_and_calls(text, all_steps):
    whole_text, whole_calls = run([text], all_steps=all_steps)[:2]
    for cut in range(len(text) + 1):
        got_text, got_calls = run([text[:cut], text[cut:]], all_steps=all_steps)[:2]
        assert got_calls == whole_calls, cut
        if not (all_steps and closer_cut(text, cut)):
            assert got_text == whole_text, cut


@pytest.mark.parametrize("text", SPLIT_TEXTS)
def test_one_char_per_delta_gives_the_same_calls_and_text_up_to_late_closers(text):
    got_text, got_calls = run(list(text))[:2]
    whole_text, whole_calls = run([text])[:2]
    assert got_calls == whole_calls
    if "`" not in text:
        assert got_text == whole_text
    else:  # the closer arrives after the call completed: it stays visible (quirk above)
        assert got_text.replace("`", "").split() == whole_text.split()
