"""One JSON parser for the per-chunk hot path: orjson when it can, the standard library
when it cannot.

``loads(text)`` returns exactly what :func:`json.loads` would: orjson parses valid JSON to
the same values, and on anything it rejects (lone surrogates, ``NaN``, nesting past its
limit, plain garbage) the standard parser decides, raising ``ValueError`` (or
``RecursionError``) as before. orjson silently turns integers past 64 bits into floats, so a
text holding a run of 19 or more digits goes to the standard parser directly. orjson takes ~2.5 µs off each chunk of a
full-stack replay (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["FAST_MAX_CHARS", "loads"]

FAST_MAX_CHARS = 65536
"""Longer texts go to the standard parser: orjson's working memory is ~12x the document
(measured on 10 MB lines), the standard parser's ~1x, and SSE data lines this long are rare
(a stream that sends one is already a finding)."""

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency

    def loads(text: str) -> Any:
        return json.loads(text)
else:
    _fast = orjson.loads
    _slow = json.loads
    _Error = orjson.JSONDecodeError
    _ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
    # 19 digits in a row could be an integer past 64 bits: orjson keeps integers in
    # [-2**63, 2**64 - 1] and -9223372036854775809 (19 digits) is already a float to it
    _LONG_RUN = b"0" * 19

    def loads(text: str) -> Any:
        if len(text) > FAST_MAX_CHARS:
            return _slow(text)
        try:
            data = text.encode()
        except UnicodeEncodeError:  # lone surrogates: orjson would refuse them anyway
            return _slow(text)
        if _LONG_RUN in data.translate(_ZERO_DIGITS):
            return _slow(text)
        try:
            return _fast(data)
        except _Error:
            return _slow(text)
