"""Structural repair of truncated JSON objects, and the tool-argument parse step.

:func:`repair_truncated_json` takes an argument payload that was cut short (a proxy
timeout, a socket reset, a dropped delta) and returns the longest *structural prefix* that
is a valid JSON object: it drops the incomplete trailing fragment and closes the containers
still open. It never fabricates: no value is invented, completed or changed. A string,
literal or number cut mid-token is dropped with its entry; a number that ends the payload
is dropped too, because ``12345`` cut out of ``123456`` would read as exact. Objects may lose
trailing keys and arrays trailing members, nothing else.

It returns None (refuses) for empty input, input longer than the cap, valid or
malformed-but-not-truncated JSON (``json.loads`` owns those), top-level arrays and
primitives, and a payload whose only content is a number inside a nested container.

Scan rules, refusal rules and the closing algorithm follow
docs/reference.md, "7.9 JSON repair": a lone ``-`` at the end is a cut token, while ``12.``,
``1e`` and ``1e+`` at the end are malformed (the number matches ``12``, then ``.`` cannot
follow) and refused. A lab addition behind
``cut_number_prefixes`` (``LabConfig.repair_cut_number_prefixes``, off) drops those like a
cut string instead. Choices where the reference is silent:

- when a closed candidate does not parse (the scan is looser than JSON: bad escapes, raw
  control characters in strings, ``{"a"}``), the next pass re-runs the repair on the input
  cut one character before the previous candidate's end, which drops at least the last
  complete entry; at most :data:`JSON_REPAIR_MAX_PASSES` passes.

:func:`parse_tool_arguments` is the adapters' parse step
(docs/reference.md, "7.10 The tool-argument parse step"): ``json.loads`` first, the repair
only when that fails. A payload that parsed directly is never ``truncated``.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from .base import GuardNote

__all__ = [
    "JSON_REPAIR_MAX_CHARS",
    "JSON_REPAIR_MAX_PASSES",
    "JSON_REPAIR_MIN_CAP",
    "ParsedArguments",
    "parse_tool_arguments",
    "repair_truncated_json",
]

JSON_REPAIR_MAX_CHARS = 1_048_576
"""Inputs longer than this are refused (reference env ``BOT_JSON_REPAIR_MAX_CHARS``)."""
JSON_REPAIR_MIN_CAP = 1024
"""The cap can't be set below this."""
JSON_REPAIR_MAX_PASSES = 64
"""Closing attempts before giving up."""

_WS = " \t\n\r"
_STRING_RE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NUMBER_RE = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_PREFIX_RE = re.compile(
    r"-?(?:(?:0|[1-9][0-9]*)(?:\.(?:[0-9]+(?:[eE][+-]?[0-9]*)?)?|[eE][+-]?[0-9]*)?)?"
)
_NUMBER_CHARS = frozenset("0123456789.eE+-")
_KEYWORDS = {"t": "true", "f": "false", "n": "null"}

# frame states
_KEY, _COLON, _VALUE, _SEP = 0, 1, 2, 3


class _Frame:
    __slots__ = ("start", "is_obj", "state", "complete_end", "has_complete_entry")

    def __init__(self, start: int, is_obj: bool) -> None:
        self.start = start
        self.is_obj = is_obj
        self.state = _KEY if is_obj else _VALUE
        self.complete_end = start + 1  # end of the last complete entry
        self.has_complete_entry = False


class _Scan(NamedTuple):
    frames: list[_Frame]
    break_at: int  # where the scan stopped (len(text) when it consumed everything)
    in_value: bool  # stopped on a cut token (a removable fragment)
    malformed: bool
    trailing_number: bool


def _value_allowed(f: _Frame | None) -> bool:
    return f is None or (f.state == _VALUE if f.is_obj else f.state in (_VALUE, _SEP))


def _complete(f: _Frame | None, end: int) -> None:
    if f is not None:
        f.state = _SEP
        f.complete_end = end
        f.has_complete_entry = True


def _scan(text: str, cut_number_prefixes: bool = False) -> _Scan:
    stack: list[_Frame] = []
    n = len(text)
    last = len(text.rstrip(_WS))  # everything from here on is whitespace
    i = 0

    def cut(at: int, trailing_number: bool = False) -> _Scan:
        return _Scan(stack, at, True, False, trailing_number)

    def bad(at: int) -> _Scan:
        return _Scan(stack, at, False, True, False)

    while i < n:
        c = text[i]
        if c in _WS:
            i += 1
            continue
        f = stack[-1] if stack else None
        if c == '"':
            m = _STRING_RE.match(text, i)
            if m is None:
                return cut(i)  # unterminated string: drop from its opening quote
            if f is not None and f.is_obj and f.state != _VALUE:
                f.state = _COLON  # a key (settles the previous entry)
            else:
                _complete(f, m.end())
            i = m.end()
        elif c == ":":
            if f is None or not f.is_obj or f.state != _COLON:
                return bad(i)
            f.state = _VALUE
            i += 1
        elif c == ",":
            if f is None or f.state != _SEP:
                return bad(i)
            f.state = _KEY if f.is_obj else _VALUE
            i += 1
        elif c == "{" or c == "[":
            if not _value_allowed(f):
                return bad(i)
            stack.append(_Frame(i, c == "{"))
            i += 1
        elif c == "}" or c == "]":
            if f is None or f.is_obj != (c == "}") or (f.is_obj and f.state == _VALUE):
                return bad(i)
            stack.pop()
            _complete(stack[-1] if stack else None, i + 1)
            i += 1
        elif c == "-" or "0" <= c <= "9":
            if not _value_allowed(f):
                return bad(i)
            m = _NUMBER_RE.match(text, i)
            j = m.end() if m else i
            k = j
            while k < n and text[k] in _NUMBER_CHARS:
                k += 1
            if cut_number_prefixes and k == n and (m is None or j < n):
                # a number prefix running into the end ("12.", "1e+", "-"): a cut token
                return cut(i) if _NUMBER_PREFIX_RE.fullmatch(text, i) else bad(i)
            if m is None:
                return cut(i) if i + 1 >= last else bad(i)  # lone "-" before trailing space
            if j >= last:
                return cut(i, trailing_number=True)  # ambiguous: might have been longer
            _complete(f, j)
            i = j
        elif c in _KEYWORDS:
            if not _value_allowed(f):
                return bad(i)
            word = _KEYWORDS[c]
            got = text[i : i + len(word)]
            if got == word:
                _complete(f, i + len(word))
                i += len(word)
            elif i + len(got) == n and word.startswith(got):
                return cut(i)  # literal cut off at the end
            else:
                return bad(i)
        else:
            return bad(i)
    return _Scan(stack, n, False, False, False)


def _close_once(text: str, cut_number_prefixes: bool = False) -> tuple[str, int] | None:
    """One repair pass: the closed candidate text and the cut offset, or None (refuse)."""
    s = _scan(text, cut_number_prefixes)
    if s.malformed or not s.frames:
        return None  # malformed, valid/complete, or a bare top-level fragment
    frames = s.frames
    top = len(frames) - 1
    if s.trailing_number and top > 0 and not any(f.has_complete_entry for f in frames):
        return None

    def pending(idx: int) -> bool:
        f = frames[idx]
        return idx < top or s.in_value or (f.is_obj and f.state in (_COLON, _VALUE))

    chosen = -1
    for idx in range(top, -1, -1):
        f = frames[idx]
        if s.trailing_number and idx == top > 0 and not f.has_complete_entry:
            # The cut number was this nested frame's only content: the frame goes with it
            # (``[{"id": 1}, {"id": 3`` -> ``[{"id": 1}]``, not ``[{"id": 1}, {}]``).
            continue
        p = pending(idx)
        if (not p and f.has_complete_entry) or (p and (f.has_complete_entry or f.is_obj)):
            chosen = idx
            break
    if chosen < 0:
        if s.trailing_number and top > 0:
            return None
        outer = frames[0]
        end = outer.start + 1
        return text[:end] + ("}" if outer.is_obj else "]"), end
    f = frames[chosen]
    resume = f.complete_end if f.has_complete_entry else f.start + 1
    end = min(s.break_at, resume)
    body = text[:end].rstrip(_WS + ",")
    closers = "".join("}" if frames[k].is_obj else "]" for k in range(chosen, -1, -1))
    return body + closers, end


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _loads(text: str) -> Any:
    """``json.loads`` with JavaScript ``JSON.parse`` strictness (no NaN/Infinity)."""
    return json.loads(text, parse_constant=_reject_constant)


def _repair(
    text: str, max_chars: int, cut_number_prefixes: bool = False
) -> tuple[dict[str, Any], int] | None:
    if not text or len(text) > max(JSON_REPAIR_MIN_CAP, max_chars):
        return None
    for _ in range(JSON_REPAIR_MAX_PASSES):
        closed = _close_once(text, cut_number_prefixes)
        if closed is None:
            return None
        candidate, end = closed
        try:
            value = _loads(candidate)
        except RecursionError:
            return None
        except ValueError:
            if end <= 1:
                return None
            text = text[: end - 1]
            continue
        return (value, end) if isinstance(value, dict) else None
    return None


def repair_truncated_json(
    text: str, *, max_chars: int = JSON_REPAIR_MAX_CHARS, cut_number_prefixes: bool = False
) -> dict[str, Any] | None:
    """Recover the complete part of a truncated JSON object, or None to refuse.

    **text** the cut payload. **max_chars** the input cap (at least
    :data:`JSON_REPAIR_MIN_CAP`). **cut_number_prefixes** (lab addition, off as in the
    reference): a number prefix that runs into the end (``12.``, ``1e+``) is a cut token
    dropped with its entry, where the reference calls the payload malformed and refuses it.

    >>> repair_truncated_json('{"a": 1, "b": "hel')
    {'a': 1}
    >>> repair_truncated_json('{"a": "x", "n": 12') # a trailing number goes with its entry
    {'a': 'x'}
    >>> repair_truncated_json('{"a": 1}') is None   # not truncated: json.loads owns it
    True
    """
    got = _repair(text, max_chars, cut_number_prefixes)
    return None if got is None else got[0]


class ParsedArguments(NamedTuple):
    """Tool-call arguments after the parse step.

    ``truncated`` is True only when the payload was cut and repaired; ``error`` says why
    nothing (or only a non-object) could be parsed; ``parsed`` is True when ``json.loads``
    accepted the payload as it was.
    """

    args: dict[str, Any]
    truncated: bool = False
    error: str | None = None
    parsed: bool = False


TOOL_ARGUMENTS_MAX_DEPTH = 128
"""Tool arguments nested deeper than this are refused (kept raw, with an error): every
consumer (pydantic serialization, ``json.dumps``, pandas) has a recursion limit below
Python's, and no real tool schema nests this deep."""


def _max_depth(text: str, limit: int) -> int:
    """How deep **text**'s brackets nest outside strings, counting stops past **limit**."""
    depth = deepest = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_tool_arguments(
    raw: str,
    *,
    tool_name: str | None = None,
    notes: list[GuardNote] | None = None,
    max_chars: int = JSON_REPAIR_MAX_CHARS,
    cut_number_prefixes: bool = False,
) -> ParsedArguments:
    """Parse streamed tool-call arguments, repairing a truncated payload.

    - empty ``raw`` -> ``args={}``, not parsed, no error;
    - ``json.loads`` succeeds with an object -> those args, ``parsed=True``, never truncated;
      a non-object (``[1]``, ``5``) -> ``args={}``, ``parsed=True`` and an ``error``;
    - otherwise :func:`repair_truncated_json`: success -> ``truncated=True`` and, when
      ``notes`` is given, a ``json_repair`` note (rule ``truncated_arguments``, offset = where
      the dropped tail starts, moved = the dropped tail, detail ``tool_name``,
      ``recovered_keys``, ``argument_chars``); refusal -> ``args={}`` and the parse error.
    """
    if not raw:
        return ParsedArguments({})
    limit = TOOL_ARGUMENTS_MAX_DEPTH
    if raw.count("[") + raw.count("{") > limit and _max_depth(raw, limit) > limit:
        return ParsedArguments(
            {}, error=f"invalid JSON arguments: nested deeper than {TOOL_ARGUMENTS_MAX_DEPTH}"
        )
    try:
        value = _loads(raw)
    except RecursionError:
        # Nested deeper than the parser's stack: refused, never repaired (the repair would
        # recurse as deep); the raw text is kept by the caller.
        return ParsedArguments({}, error="invalid JSON arguments: nested too deep")
    except ValueError as exc:
        error = f"invalid JSON arguments: {exc}"
    else:
        if isinstance(value, dict):
            return ParsedArguments(value, parsed=True)
        return ParsedArguments(
            {}, error=f"arguments are JSON {type(value).__name__}, not an object", parsed=True
        )
    got = _repair(raw, max_chars, cut_number_prefixes)
    if got is None:
        return ParsedArguments({}, error=error)
    args, end = got
    if notes is not None:
        notes.append(
            GuardNote(
                "json_repair",
                "truncated_arguments",
                end,
                raw[end:],
                {"tool_name": tool_name, "recovered_keys": len(args), "argument_chars": len(raw)},
            )
        )
    return ParsedArguments(args, truncated=True)
