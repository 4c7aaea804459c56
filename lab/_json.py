"""One JSON parser for the per-chunk hot path: a fast parser when it can, the standard
library when it cannot.

``loads(text)`` returns exactly what :func:`json.loads` would, and fails where it fails
(``ValueError``, or ``RecursionError`` for nesting too deep). The fast parser is, in order:

- **msgspec** when it is installed (the optional ``[speed]`` extra): it parses valid JSON
  to the same values as the standard parser, integers past 64 bits included, and rejects
  everything the two could disagree on (``NaN``/``Infinity``, numbers out of the float
  range, lone surrogates, a BOM, nesting past its limit), so on any error the standard
  parser decides. It reads ``str`` directly: no encoding, no digit check.
- **orjson** (a core dependency) otherwise: the same fallback on its errors, but orjson
  silently turns integers past 64 bits into floats, so a text holding a run of 19 or more
  digits goes to the standard parser directly (a check on the encoded bytes, ~0.6 µs).
- the standard parser alone when neither imports.

Every parser is tested against :func:`json.loads` (``tests/test_json.py``) and a whole replay
gives identical results with each (``tests/test_replay_parsers.py``). ``PARSER`` names the
one in use; ``LAB_JSON_PARSER=orjson`` (or ``json``) set before ``lab`` is imported picks a
slower one, for those tests. What each bought: docs/PERFORMANCE.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

__all__ = ["FAST_MAX_CHARS", "PARSER", "PARSERS", "loads"]

FAST_MAX_CHARS = 65536
"""Longer texts go to the standard parser: orjson's working memory is ~12x the document
(measured on 10 MB lines), the standard parser's ~1x, and SSE data lines this long are rare
(a stream that sends one is already a finding)."""

PARSER_ENV = "LAB_JSON_PARSER"
"""Environment variable naming the parser to use (``msgspec``, ``orjson`` or ``json``),
when it is installed; unset, the fastest installed one."""

_slow = json.loads


def _std_loads(text: str) -> Any:
    return _slow(text)


PARSERS: dict[str, Callable[[str], Any]] = {"json": _std_loads}
"""Every parser that imports here, by name, each returning what :func:`json.loads` would."""

try:
    import orjson
except ImportError:  # pragma: no cover - orjson is a declared dependency
    pass
else:
    _orjson_loads = orjson.loads
    _orjson_error = orjson.JSONDecodeError
    _ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
    # 19 digits in a row could be an integer past 64 bits: orjson keeps integers in
    # [-2**63, 2**64 - 1] and -9223372036854775809 (19 digits) is already a float to it
    _LONG_RUN = b"0" * 19

    def _orjson(text: str) -> Any:
        if len(text) > FAST_MAX_CHARS:
            return _slow(text)
        try:
            data = text.encode()
        except UnicodeEncodeError:  # lone surrogates: orjson would refuse them anyway
            return _slow(text)
        if _LONG_RUN in data.translate(_ZERO_DIGITS):
            return _slow(text)
        try:
            return _orjson_loads(data)
        except _orjson_error:
            return _slow(text)

    PARSERS["orjson"] = _orjson

try:
    import msgspec
except ImportError:
    pass
else:
    _msgspec_decode = msgspec.json.Decoder().decode

    def _msgspec(text: str) -> Any:
        if len(text) > FAST_MAX_CHARS:
            return _slow(text)
        try:
            return _msgspec_decode(text)
        except (ValueError, RecursionError):  # DecodeError, a lone surrogate, too deep
            return _slow(text)

    PARSERS["msgspec"] = _msgspec


def _pick() -> str:
    wanted = os.environ.get(PARSER_ENV, "")
    if wanted:
        if wanted not in PARSERS:
            raise ImportError(
                f"{PARSER_ENV}={wanted!r}: not installed here (installed: {', '.join(PARSERS)})"
            )
        return wanted
    return next(name for name in ("msgspec", "orjson", "json") if name in PARSERS)


PARSER: str = _pick()
"""The parser :func:`loads` uses."""

loads: Callable[[str], Any] = PARSERS[PARSER]
