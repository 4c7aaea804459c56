"""lab._json.loads returns exactly what json.loads returns, and fails where it fails."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lab import _json

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


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_same_values_as_the_standard_library(value):
    text = json.dumps(value)
    assert repr(_json.loads(text)) == repr(json.loads(text))


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
    ],
)
def test_inputs_orjson_rejects_fall_back_to_the_standard_parser(text):
    expected = json.loads(text)
    got = _json.loads(text)
    assert repr(got) == repr(expected)


@pytest.mark.parametrize("text", ["", "{", "data: x", "[1,]", "{'a': 1}"])
def test_invalid_json_raises_value_error_like_json(text):
    with pytest.raises(ValueError):
        _json.loads(text)


def test_nesting_too_deep_raises_recursion_error_like_json():
    text = "[" * 100_000 + "]" * 100_000
    with pytest.raises(RecursionError):
        _json.loads(text)


def test_a_huge_text_uses_the_standard_parser_and_its_small_memory_footprint():
    import tracemalloc

    text = '{"a": "' + "x" * 2_000_000 + '"}'
    tracemalloc.start()
    assert _json.loads(text) == {"a": "x" * 2_000_000}
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * len(text)
