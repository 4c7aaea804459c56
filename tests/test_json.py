"""lab._json.loads returns exactly what json.loads returns, and fails where it fails: with
every parser installed here (msgspec, orjson, the standard library), not only the one in use."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab import _json

PARSERS = sorted(_json.PARSERS)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**62, max_value=2**90)
    | st.integers(min_value=-(2**90), max_value=-(2**62))
    | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@pytest.mark.parametrize("parser", PARSERS)
@settings(max_examples=300, deadline=None)
@given(value=json_values)
def test_same_values_as_the_standard_library(parser, value):
    text = json.dumps(value)
    assert repr(_json.PARSERS[parser](text)) == repr(json.loads(text))


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud800"',
        "NaN",
        "[Infinity]",
        str(2**70),
        str(2**64),
        f'{{"id": {10**25}}}',
        '{"a": 1, "a": 2}',
        "1e400",
        "-0",
        str(-(2**63)),
        str(-(2**63) - 1),  # 19 digits, below orjson's integers: it made it a float
        str(2**64 - 1),
        "1" * 4300,  # the standard parser's own limit is 4300 digits
        "1.7976931348623157e309",  # past the float range: inf
        '{"\\ud800": 1}',
        "[" * 900 + "]" * 900,
    ],
)
@pytest.mark.parametrize("parser", PARSERS)
def test_inputs_a_fast_parser_rejects_or_would_change_fall_back_to_the_standard_parser(
    parser, text
):
    expected = json.loads(text)
    got = _json.PARSERS[parser](text)
    assert repr(got) == repr(expected)


@pytest.mark.parametrize(
    "text", ["", "{", "data: x", "[1,]", "{'a': 1}", "1" * 4301, '"\x00"', "\ufeff{}"]
)
@pytest.mark.parametrize("parser", PARSERS)
def test_invalid_json_raises_value_error_like_json(parser, text):
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        _json.PARSERS[parser](text)


def test_a_lone_surrogate_in_the_text_itself_parses_as_the_standard_parser_does():
    text = '"\ud800"'  # the character, not an escape: it cannot even be encoded
    for parser in PARSERS:
        assert repr(_json.PARSERS[parser](text)) == repr(json.loads(text)), parser


@pytest.mark.parametrize("parser", PARSERS)
def test_nesting_too_deep_raises_recursion_error_like_json(parser):
    text = "[" * 100_000 + "]" * 100_000
    with pytest.raises(RecursionError):
        _json.PARSERS[parser](text)


def test_the_fastest_installed_parser_is_the_one_in_use_unless_the_environment_names_one():
    import os

    wanted = os.environ.get(_json.PARSER_ENV)
    fastest = next(p for p in ("msgspec", "orjson", "json") if p in _json.PARSERS)
    assert _json.PARSER == (wanted or fastest)
    assert _json.loads is _json.PARSERS[_json.PARSER]


def test_an_unknown_parser_in_the_environment_is_a_one_line_import_error():
    import subprocess
    import sys

    env = {**__import__("os").environ, _json.PARSER_ENV: "simdjson"}
    proc = subprocess.run(
        [sys.executable, "-c", "import lab._json"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "ImportError: LAB_JSON_PARSER='simdjson': not installed here (installed: "
        + ", ".join(_json.PARSERS)
        + ")"
    )


def test_a_huge_text_uses_the_standard_parser_and_its_small_memory_footprint():
    import tracemalloc

    text = '{"a": "' + "x" * 2_000_000 + '"}'
    tracemalloc.start()
    assert _json.loads(text) == {"a": "x" * 2_000_000}
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * len(text)
