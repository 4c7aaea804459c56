"""The markup guard: each leaked protocol class detected, and recovered under ``recover=True``.

Bodies are built to each format's published source (cited in ``lab/guards/markup.py``);
the real leaked outputs of public issue threads are in ``tests/realworld/markup/`` and
``tests/test_markup_realworld.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab.guards import MarkupGuard, MarkupGuardConfig, parse_tool_block, scan_markup
from lab.guards.markup import MARKUP_CLASSES, MarkupDetection, MarkupOutput, markup_kinds
from lab.replay import replay_sse

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]

HARMONY = (
    '<|channel|>analysis<|message|>User asks: "What is 2 + 2?" Simple arithmetic.<|end|>'
    "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>"
)
HARMONY_CALL = (
    "<|channel|>analysis<|message|>Need to use function get_weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"city":"San Francisco"}<|call|>'
)
KIMI = (
    "Let me check.\n<|tool_calls_section_begin|>\n<|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"city": "Tokyo"}<|tool_call_end|>\n'
    "<|tool_calls_section_end|>\nDone."
)
DEEPSEEK_V3 = (
    "ok <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
    '```json\n{"city": "Beijing"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function'
    '<｜tool▁sep｜>get_weather\n```json\n{"city": "Shanghai"}\n```<｜tool▁call▁end｜>'
    "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>"
)
DEEPSEEK_V31 = (
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
    '{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
)
HERMES = 'Sure.<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
GLM = (
    "x<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>123</arg_value>\n"
    "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>"
)
QWEN3_CODER = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>"
)
MINIMAX = (
    'a<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Oslo'
    "</parameter>\n</invoke>\n</minimax:tool_call>b"
)
SPECIAL = "Hello! How can I help you today?<|im_end|>"
HARMONY_TOKENS = ("<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|return|>", "<|call|>")


def stripped(body: str) -> str:
    """A harmony body with its special tokens decoded to nothing, as some serving stacks
    send it (oobabooga/textgen#7374, Augustas11/macprovider#743)."""
    for tok in (*HARMONY_TOKENS, "<|constrain|>"):
        body = body.replace(tok, "")
    return body


# built to the harmony format (openai/harmony docs/format.md), its tokens stripped
HARMONY_STRIPPED = stripped(
    "<|channel|>analysis<|message|>Two steps.<|end|><|start|>assistant<|channel|>analysis"
    "<|message|>Both done.<|end|>"
    + HARMONY.replace("<|channel|>analysis", "<|start|>assistant<|channel|>analysis", 1)
)

# body -> (text, reasoning, [(name, args, id, provider_fields)], sorted classes)
EXPECTED = {
    "harmony": (
        HARMONY,
        "2 + 2 = 4.",
        'User asks: "What is 2 + 2?" Simple arithmetic.',
        [],
        ["harmony"],
    ),
    "harmony_call": (
        HARMONY_CALL,
        "",
        "Need to use function get_weather.",
        [
            (
                "get_weather",
                {"city": "San Francisco"},
                None,
                {"recovered_from": "harmony", "recipient": "functions.get_weather"},
            )
        ],
        ["harmony"],
    ),
    "kimi": (
        KIMI,
        "Let me check.\n\nDone.",
        "",
        [
            (
                "get_weather",
                {"city": "Tokyo"},
                "functions.get_weather:0",
                {"recovered_from": "kimi_tool_section"},
            )
        ],
        ["kimi_tool_section"],
    ),
    "deepseek_v3": (
        DEEPSEEK_V3,
        "ok ",
        "",
        [
            ("get_weather", {"city": "Beijing"}, None, {"recovered_from": "deepseek_tool_calls"}),
            ("get_weather", {"city": "Shanghai"}, None, {"recovered_from": "deepseek_tool_calls"}),
        ],
        ["deepseek_tool_calls", "special_token"],
    ),
    "deepseek_v31": (
        DEEPSEEK_V31,
        "",
        "",
        [("get_weather", {"city": "Paris"}, None, {"recovered_from": "deepseek_tool_calls"})],
        ["deepseek_tool_calls"],
    ),
    "hermes": (
        HERMES,
        "Sure.",
        "",
        [("get_weather", {"city": "Paris"}, None, {"recovered_from": "xml_tool_call"})],
        ["xml_tool_call"],
    ),
    "glm": (
        GLM,
        "x",
        "",
        # the tool declares city a string: "123" stays text; days is JSON
        [("get_weather", {"city": "123", "days": 3}, None, {"recovered_from": "xml_tool_call"})],
        ["xml_tool_call"],
    ),
    "qwen3_coder": (
        QWEN3_CODER,
        "",
        "",
        [("get_weather", {"city": "Paris", "days": 2}, None, {"recovered_from": "xml_tool_call"})],
        ["xml_tool_call"],
    ),
    "minimax": (
        MINIMAX,
        "ab",
        "",
        [("get_weather", {"city": "Oslo"}, None, {"recovered_from": "minimax_tool_call"})],
        ["minimax_tool_call"],
    ),
    "special": (SPECIAL, "Hello! How can I help you today?", "", [], ["special_token"]),
    "harmony_stripped": (
        HARMONY_STRIPPED,
        "2 + 2 = 4.",
        'Two steps.Both done.User asks: "What is 2 + 2?" Simple arithmetic.',
        [],
        ["harmony_stripped"],
    ),
}


def _calls(out: MarkupOutput) -> list[tuple]:
    return [(c.name, c.args, c.id, c.provider_fields) for c in out.calls]


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_markup_recovery_gives_exact_text_reasoning_and_calls(case):
    body, text, reasoning, calls, classes = EXPECTED[case]
    out, found = scan_markup(body, recover=True, tools=TOOLS)
    assert (out.text, out.reasoning, _calls(out)) == (text, reasoning, calls)
    assert sorted({d.kind for d in found}) == classes


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_markup_detection_changes_nothing_and_finds_the_same_markers(case):
    body = EXPECTED[case][0]
    guard = MarkupGuard()
    pieces = [body[i : i + 7] for i in range(0, len(body), 7)]
    assert pieces
    outs = [guard.feed(p) for p in pieces]
    assert [o.text for o in outs] == pieces  # delta for delta, nothing held back
    assert all(not o.reasoning and not o.calls for o in outs)
    assert guard.flush() == MarkupOutput()
    _, recovered = scan_markup(body, recover=True, tools=TOOLS)
    assert guard.detections == recovered
    assert guard.detections


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_markup_every_cut_gives_the_same_result(case):
    body = EXPECTED[case][0]
    whole = scan_markup(body, recover=True, tools=TOOLS)
    detected = scan_markup(body)[1]
    for cut in range(len(body) + 1):
        assert scan_markup([body[:cut], body[cut:]], recover=True, tools=TOOLS) == whole, cut
        assert scan_markup([body[:cut], body[cut:]])[1] == detected, cut


ALL_BODIES = "".join(EXPECTED[k][0] + "\n" for k in sorted(EXPECTED))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(ALL_BODIES)), max_size=40))
def test_markup_any_split_of_the_markers_across_deltas_gives_the_same_result(cuts):
    """Every class in one text, cut at arbitrary points: detections (class, marker, offset),
    text, reasoning and calls are those of the text fed whole."""
    points = sorted(set(cuts))
    pieces = [
        ALL_BODIES[a:b] for a, b in zip([0, *points], [*points, len(ALL_BODIES)], strict=True)
    ]
    assert "".join(pieces) == ALL_BODIES
    assert scan_markup(pieces, recover=True, tools=TOOLS) == scan_markup(
        ALL_BODIES, recover=True, tools=TOOLS
    )
    assert scan_markup(pieces)[1] == scan_markup(ALL_BODIES)[1]


def _feed_as_the_adapters_do(guard: MarkupGuard, pieces: list[str]) -> list[MarkupOutput]:
    """The chat adapters' per-chunk protocol: an idle guard's delta without ``<`` is only
    counted (``fed``), any other goes through ``feed``."""
    outs = []
    for p in pieces:
        if p and guard.idle and "<" not in p:
            guard.fed += len(p)
            outs.append(MarkupOutput(p))
        else:
            outs.append(guard.feed(p))
    outs.append(guard.flush())
    return outs


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=len(ALL_BODIES)), max_size=60),
    st.booleans(),
)
def test_markup_idle_deltas_only_counted_give_what_feed_gives(cuts, recover):
    """Skipping ``feed`` for an idle guard's deltas without ``<`` (what the adapters do
    per chunk) changes nothing: same outputs delta for delta, detections, notes, count."""
    points = sorted(set(cuts))
    pieces = [
        ALL_BODIES[a:b] for a, b in zip([0, *points], [*points, len(ALL_BODIES)], strict=True)
    ]
    fed, skipped = (
        MarkupGuard(recover=recover, tools=TOOLS),
        MarkupGuard(recover=recover, tools=TOOLS),
    )
    whole = [fed.feed(p) for p in pieces] + [fed.flush()]
    assert _feed_as_the_adapters_do(skipped, pieces) == whole
    assert skipped.detections == fed.detections and skipped.detections
    assert skipped.drain_notes() == fed.drain_notes()
    assert skipped.fed == fed.fed == len(ALL_BODIES)


def test_markup_guard_is_idle_exactly_when_nothing_is_held_or_open():
    guard = MarkupGuard(recover=True)
    states = []
    for piece in ["plain ", "a <|im_", "end|> b ", "<tool_call>", '{"name": "f"}', "</tool_call>"]:
        guard.feed(piece)
        states.append(guard.idle)
    assert states == [True, False, True, False, False, True]
    guard.feed("<|chan")
    assert not guard.idle
    guard.flush()
    assert guard.idle and guard.fed == len("plain a <|im_end|> b <tool_call>") + 13 + 12 + 6


def test_markup_detections_name_class_marker_and_offset():
    _, found = scan_markup("ab<|im_end|>c<tool_call>{}</tool_call><|eot_id|>")
    assert found == [
        MarkupDetection("special_token", "<|im_end|>", 2),
        MarkupDetection("xml_tool_call", "<tool_call>", 13),
        MarkupDetection("special_token", "<|eot_id|>", 38),
    ]


def test_markup_notes_are_detections_in_the_default_and_moves_under_recovery():
    guard = MarkupGuard()
    guard.feed("Hi<|im_end|>")
    assert [(n.rule, n.offset, n.moved, n.detail) for n in guard.drain_notes()] == [
        ("markup_detected", 2, "", {"kind": "special_token", "marker": "<|im_end|>"})
    ]
    guard = MarkupGuard(recover=True)
    guard.feed("Hi<|im_end|>")
    assert [(n.rule, n.offset, n.moved) for n in guard.drain_notes()] == [
        ("markup_detected", 2, ""),
        ("removed_markup", 2, "<|im_end|>"),
    ]


def test_markup_recovered_block_note_holds_the_block_text():
    guard = MarkupGuard(recover=True)
    out = guard.feed(HERMES)
    assert out.text == "Sure."
    rules = [(n.rule, n.offset, n.moved) for n in guard.drain_notes()]
    assert rules[-1] == ("recovered_call", 5, HERMES[5:])


def test_markup_stream_ending_inside_a_block_recovers_the_cut_call():
    body = 'x<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"a": 1, "b": "hel'
    out, found = scan_markup(body, recover=True)
    assert out.text == "x"
    (call,) = out.calls
    assert (call.name, call.args, call.arguments_truncated) == ("f", {"a": 1}, True)
    assert call.provider_fields == {"recovered_from": "kimi_tool_section", "block_unclosed": True}
    assert [d.marker for d in found] == ["<|tool_call_begin|>"]


def test_markup_block_with_no_call_goes_back_into_the_text():
    body = "see <tool_call>not a call at all</tool_call> here"
    out, found = scan_markup(body, recover=True)
    assert out == MarkupOutput(body, "", ())
    assert [d.kind for d in found] == ["xml_tool_call"]


def test_markup_block_longer_than_the_limit_is_released_as_text():
    config = MarkupGuardConfig(max_block_chars=20)
    body = "<tool_call>" + "x" * 30 + "</tool_call>"
    guard = MarkupGuard(config, recover=True)
    out = guard.feed(body)
    # past the limit the block is text; the closer after it is a stray marker, removed
    assert out.text == "<tool_call>" + "x" * 30
    assert [n.rule for n in guard.drain_notes()] == [
        "markup_detected",
        "block_too_long",
        "markup_detected",
        "removed_markup",
    ]


def test_markup_classes_left_out_are_plain_text():
    config = MarkupGuardConfig(classes=("harmony",))
    out, found = scan_markup(SPECIAL + KIMI, config, recover=True)
    assert out.text == SPECIAL + KIMI
    assert found == []


def test_markup_special_tokens_are_a_config_list():
    config = MarkupGuardConfig(special_tokens=("<|my_end|>",))
    out, found = scan_markup("a<|my_end|>b<|im_end|>", config, recover=True)
    assert out.text == "ab<|im_end|>"
    assert [d.marker for d in found] == ["<|my_end|>"]


def test_markup_harmony_builtin_tool_recipient_is_reasoning():
    body = (
        '<|channel|>analysis to=browser.search <|constrain|>json<|message|>{"query": "x"}<|call|>'
    )
    out, _ = scan_markup(body, recover=True)
    assert out == MarkupOutput("", '{"query": "x"}', ())


def test_markup_harmony_preamble_on_commentary_stays_visible():
    body = (
        "<|channel|>commentary<|message|>Plan: look it up.<|end|><|start|>assistant"
        "<|channel|>commentary to=functions.get_weather<|message|>{}<|call|>"
    )
    out, _ = scan_markup(body, recover=True)
    assert out.text == "Plan: look it up."
    assert [c.name for c in out.calls] == ["get_weather"]


def test_markup_closer_alone_outside_a_block_is_plain_text():
    body = "function f() {}</function> end"
    assert scan_markup(body, recover=True) == (MarkupOutput(body, "", ()), [])


def test_markup_prose_without_markers_is_untouched():
    body = "Use a < b and <b>bold</b> or <think> tags; x<|y and <｜ too."
    out, found = scan_markup(body, recover=True)
    assert out.text == body and found == []


def test_markup_parse_tool_block_per_class():
    assert [c.name for c in parse_tool_block("deepseek_tool_calls", DEEPSEEK_V3[3:])] == [
        "get_weather",
        "get_weather",
    ]
    assert parse_tool_block("minimax_tool_call", "<minimax:tool_call></minimax:tool_call>") == []
    assert set(MARKUP_CLASSES) >= {"harmony", "special_token"}


@pytest.mark.parametrize("recover", [False, True])
def test_markup_held_state_stays_bounded_one_char_per_delta(recover):
    rnd = random.Random(3)
    words = [HARMONY, KIMI, "<|", "<tool_c", "<｜tool", "plain text ", "<", "\n"]
    text = "".join(rnd.choice(words) for _ in range(3000))
    guard = MarkupGuard(MarkupGuardConfig(max_block_chars=512), recover=recover)
    longest = guard._v.longest
    for ch in text:
        guard.feed(ch)
        assert len(guard._pending) < longest
        assert guard._buf_chars <= 512 + longest
        if recover:
            assert sum(map(len, guard._buf)) <= 512 + longest
    guard.flush()
    assert not guard._pending


REALWORLD = Path(__file__).parent / "realworld"
SOURCES = json.loads((REALWORLD / "sources.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("src", SOURCES, ids=[s["name"] for s in SOURCES])
def test_markup_finds_nothing_in_real_bodies_without_markup(src):
    """No false positive on the real provider bodies: none holds leaked markup, in its raw
    bytes or in the text and reasoning the lab reads from it."""
    raw = (REALWORLD / src["file"]).read_bytes()
    result = replay_sse(src["provider"], raw, stream_id=src["name"], path=src.get("request_path"))
    assert raw and result.stream_id == src["name"]
    for text in (raw.decode("utf-8", "replace"), result.text, result.reasoning):
        assert scan_markup(text)[1] == []


def test_markup_harmony_stripped_detections_name_the_start_and_each_boundary():
    assert HARMONY_STRIPPED == (
        "analysisTwo steps.assistantanalysisBoth done.assistantanalysisUser asks: "
        '"What is 2 + 2?" Simple arithmetic.assistantfinal2 + 2 = 4.'
    )
    _, found = scan_markup(HARMONY_STRIPPED)
    assert found == [
        MarkupDetection("harmony_stripped", "analysis", 0),
        MarkupDetection("harmony_stripped", "assistantanalysis", 18),
        MarkupDetection("harmony_stripped", "assistantanalysis", 45),
        MarkupDetection("harmony_stripped", "assistantfinal", 108),
    ]


def test_markup_harmony_with_its_tokens_stripped_recovers_as_with_them():
    out, _ = scan_markup(HARMONY, recover=True)
    assert scan_markup(stripped(HARMONY), recover=True)[0] == out
    assert out == MarkupOutput("2 + 2 = 4.", 'User asks: "What is 2 + 2?" Simple arithmetic.')


def test_markup_harmony_stripped_recovery_notes_what_moved_and_what_was_removed():
    guard = MarkupGuard(recover=True)
    for piece in ("anal", "ysisWe add.assis", "tantfinal4"):
        guard.feed(piece)
    guard.flush()
    notes = [(n.rule, n.offset, n.moved) for n in guard.drain_notes()]
    assert notes == [
        ("markup_detected", 0, ""),
        ("markup_detected", 15, ""),
        ("removed_markup", 0, "analysis"),
        ("harmony_reasoning", 8, "We add."),
        ("removed_markup", 15, "assistantfinal"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "analysis of the logs shows the assistant final answer",
        "analysis: the assistantfinal step",
        "Analysis first. assistantfinal",
        "analysis\nassistantfinal then",
        "analysis_done assistantfinal",
        "The analysisWe assistantfinal",  # not at the start
        "assistant final answer",
        "assistants finally",
        "analysisWithout any boundary, however long the text runs on.",
        "an",
        "",
    ],
)
def test_markup_harmony_stripped_needs_the_precise_shape(text):
    """Words of normal prose never fire: the stream must begin with the channel name glued
    to a letter or digit, and a glued boundary must confirm it (or open the stream)."""
    for recover in (False, True):
        out, found = scan_markup(text, recover=recover)
        assert (out.text, out.reasoning, found) == (text, "", []), recover
    assert markup_kinds(text) == []


def test_markup_harmony_stripped_commentary_is_detected_and_kept_as_text():
    """A commentary message may be a preamble or a call whose name and arguments run
    together once the tokens are gone: named, never guessed at."""
    body = stripped(HARMONY_CALL)
    assert body == (
        "analysisNeed to use function get_weather.assistantcommentary to=functions.get_weather"
        ' json{"city":"San Francisco"}'
    )
    out, found = scan_markup(body, recover=True)
    assert [d.marker for d in found] == ["analysis", "assistantcommentary"]
    assert out == MarkupOutput(
        'assistantcommentary to=functions.get_weather json{"city":"San Francisco"}',
        "Need to use function get_weather.",
    )


def test_markup_harmony_stripped_boundary_at_the_start_of_the_stream():
    out, found = scan_markup('assistantfinal{"x":1}', recover=True)
    assert out.text == '{"x":1}' and [(d.marker, d.offset) for d in found] == [
        ("assistantfinal", 0)
    ]


def test_markup_harmony_stripped_unconfirmed_start_is_released_unchanged():
    guard = MarkupGuard(recover=True)
    assert guard.feed("analysisW") == MarkupOutput()  # held: it may be a stripped stream
    assert guard.feed("e are done.") == MarkupOutput()
    assert guard.flush() == MarkupOutput("analysisWe are done.")
    assert guard.detections == [] and guard.drain_notes() == []


def test_markup_harmony_stripped_analysis_past_the_limit_goes_out_as_text():
    guard = MarkupGuard(MarkupGuardConfig(max_block_chars=20), recover=True)
    got = [guard.feed(p) for p in ("analysisThis thinks ", "for too long.", "assistantfinalok")]
    assert [o.text for o in got] == ["", "analysisThis thinks for too long.", "assistantfinalok"]
    assert [d.marker for d in guard.detections] == ["analysis", "assistantfinal"]
    assert [n.rule for n in guard.drain_notes()] == [
        "block_too_long",
        "markup_detected",
        "markup_detected",
    ]


def test_markup_harmony_stripped_gives_way_to_a_real_marker():
    body = "analysisX<|im_end|>assistantfinalY"
    out, found = scan_markup(body, recover=True)
    assert out.text == "analysisXassistantfinalY"
    assert [d.kind for d in found] == ["special_token"]


def test_markup_harmony_stripped_is_a_config_switch():
    off = MarkupGuardConfig(classes=tuple(c for c in MARKUP_CLASSES if c != "harmony_stripped"))
    assert scan_markup(HARMONY_STRIPPED, off, recover=True) == (
        MarkupOutput(HARMONY_STRIPPED),
        [],
    )
    final_only = MarkupGuardConfig(harmony_stripped_channels=("final",))
    out, found = scan_markup(stripped(HARMONY), final_only, recover=True)
    assert out == MarkupOutput("2 + 2 = 4.", 'User asks: "What is 2 + 2?" Simple arithmetic.')
    assert [d.marker for d in found] == ["analysis", "assistantfinal"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(HARMONY_STRIPPED)), max_size=30))
def test_markup_harmony_stripped_any_split_gives_the_same_result(cuts):
    points = sorted(set(cuts))
    pieces = [
        HARMONY_STRIPPED[a:b]
        for a, b in zip([0, *points], [*points, len(HARMONY_STRIPPED)], strict=True)
    ]
    whole = MarkupGuard(recover=True)
    whole.feed(HARMONY_STRIPPED)
    whole.flush()
    split = MarkupGuard(recover=True)
    for p in pieces:
        split.feed(p)
    split.flush()
    assert split.drain_notes() == whole.drain_notes()
    assert scan_markup(pieces, recover=True) == scan_markup(HARMONY_STRIPPED, recover=True)
    assert scan_markup(pieces)[1] == scan_markup(HARMONY_STRIPPED)[1]


def test_markup_hermes_block_cut_by_the_end_of_stream_is_repaired_not_invented():
    out, _ = scan_markup('<tool_call>\n{"name": "f", "arguments": {"a": 1, "b": "x', recover=True)
    (call,) = out.calls
    assert (call.name, call.args, call.arguments_truncated) == ("f", {"a": 1}, True)
    assert call.provider_fields == {"recovered_from": "xml_tool_call", "block_unclosed": True}
