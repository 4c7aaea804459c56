"""Recover tool calls a model wrote as text: ``generate_image({"prompt": "a cat"})``.

docs/reference.md, "7.8 Verbatim tool calls".

Some chat models (Custom endpoints, Gemma) narrate a tool call in visible content instead
of using the tool-call channel. :class:`VerbatimToolCallParser` watches the content stream
for ``<known tool name>(``, accumulates from there until the parentheses balance (ignoring
parentheses inside double-quoted strings), and parses the ``name(...)`` body. The call may
be bare, in an inline code span or in a fenced block; prose before it is emitted first.
Only names of the exposed tools anchor, and the parse is the false-positive guard: a tool
merely mentioned in prose (``generate_image (it makes art)``) fails it and is released as
text.

API (the DESIGN contract, reference semantics): ``feed(text)`` returns one
:class:`VerbatimOutput`, either text or a call, never both; what it could not decide yet
stays buffered. Like the reference, one feed makes at most one step, so text that follows a
completed call in the same delta waits for the next ``feed`` (or ``flush``). When you want
everything a delta makes possible right away, use ``feed_all(text)``, which returns the
list of outputs from feeding and then stepping the parser until it can't progress without
more input; both methods share one state machine. ``flush()`` ends the stream and may
return a call *and* text; the text is what followed the call.

Reference quirks, kept: when the parse fails, the whole buffer is released as text,
including anything after the closing parenthesis (a real call there is not recovered);
when the buffer exceeds ``max_buffer_chars`` it is released as text without scanning.

Linear time: parenthesis balancing is incremental across deltas (each character is looked
at once), the call buffer is a list of pieces joined only when the call is complete, and the
scanning-mode hold-back is at most a tool name plus an opener.

A recovered call records a note (guard ``"verbatim_tool_call"``, rule ``recovered_call``)
whose offset is where the call text (opener included) started in the parser's input.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from lab.model import FunctionCall

from .base import NoteSink

__all__ = [
    "DEFAULT_MAX_BUFFER_CHARS",
    "ToolSpec",
    "VerbatimOutput",
    "VerbatimToolCallParser",
    "parse_tool_specs",
]

DEFAULT_MAX_BUFFER_CHARS = 8192
GUARD = "verbatim_tool_call"

_IDENT_CALL_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)", re.DOTALL)
_LEADING_OPENER_RE = re.compile(r"\s*(?:```[A-Za-z0-9_-]*\n|`{1,3})?\s*")
_LEADING_CLOSER_RE = re.compile(r"\s*`{1,3}\s*")
_LANG_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class VerbatimOutput(NamedTuple):
    """Visible ``text`` to emit and/or a recovered ``function_call``."""

    text: str = ""
    function_call: FunctionCall | None = None


_EMPTY = VerbatimOutput()


class ToolSpec(NamedTuple):
    name: str
    required: tuple[str, ...]
    single_string_param: str | None


def parse_tool_specs(tools: Iterable[Any] | None) -> dict[str, ToolSpec]:
    """Tool specs by name from OpenAI-format ``{"type": "function", "function": {...}}`` or
    bare ``{"name": ..., "parameters": ...}`` dicts; anything else is skipped."""
    specs: dict[str, ToolSpec] = {}
    for tool in tools or ():
        if not isinstance(tool, Mapping):
            continue
        fn = tool.get("function") if tool.get("type") == "function" else tool
        if not isinstance(fn, Mapping):
            continue
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            continue
        params = fn.get("parameters")
        params = params if isinstance(params, Mapping) else {}
        req = params.get("required")
        required = tuple(r for r in req if isinstance(r, str)) if isinstance(req, list) else ()
        single = None
        if len(required) == 1:
            props = params.get("properties")
            prop = props.get(required[0]) if isinstance(props, Mapping) else None
            if isinstance(prop, Mapping) and prop.get("type") == "string":
                single = required[0]
        specs[name] = ToolSpec(name, required, single)
    return specs


def _opener_len(text: str, end: int) -> int:
    """Length of a code opener (1–3 backticks, a language word, whitespace) ending at ``end``."""
    i = end
    while i > 0 and text[i - 1].isspace():
        i -= 1
    while i > 0 and text[i - 1] in _LANG_CHARS:
        i -= 1
    ticks = 0
    while i > 0 and ticks < 3 and text[i - 1] == "`":
        i -= 1
        ticks += 1
    return end - i if ticks else 0


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


class VerbatimToolCallParser(NoteSink):
    """Streaming recovery of ``tool_name(...)`` calls written in visible text.

    **tools** OpenAI-format tool definitions (or bare ``{"name", "parameters"}`` dicts); only
    these names anchor. **max_buffer_chars** (clamped to at least 1) caps what is held
    back; a larger buffer is released as text. See the module docstring for the API.

    >>> p = VerbatimToolCallParser([{"type": "function", "function": {"name": "gen"}}])
    >>> p.feed("Fine. `gen({})`")
    VerbatimOutput(text='Fine. ', function_call=None)
    >>> p.flush()
    VerbatimOutput(text='', function_call=FunctionCall(name='gen'))
    """

    __slots__ = ("notes", "specs", "max_buffer_chars", "_anchor", "_prefixes", "_first_chars",
                 "_max_name", "_names", "_buf", "_parts", "_len", "_accumulating", "_depth",
                 "_in_str", "_esc", "_opened", "_piece", "_piece_pos", "_piece_off", "_close_at",
                 "_buf_at", "_fed")  # fmt: skip

    def __init__(
        self, tools: list[dict[str, Any]] | None, max_buffer_chars: int = DEFAULT_MAX_BUFFER_CHARS
    ) -> None:
        self.notes = []
        self.specs = parse_tool_specs(tools)
        try:
            self.max_buffer_chars = max(1, int(max_buffer_chars))
        except (TypeError, ValueError):
            self.max_buffer_chars = DEFAULT_MAX_BUFFER_CHARS
        names = sorted(self.specs, key=len, reverse=True)
        self._names = tuple(names)
        self._anchor = (
            re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\s*\(", re.ASCII)
            if names
            else None
        )
        self._prefixes = frozenset(n[:k] for n in names for k in range(1, len(n) + 1))
        self._first_chars = frozenset(n[0] for n in names)
        self._max_name = max((len(n) for n in names), default=0)
        self._reset()
        self._fed = 0
        self._buf_at = 0  # input offset of the buffer's first character

    @property
    def has_tools(self) -> bool:
        return bool(self.specs)

    @property
    def buffered(self) -> str:
        """Text currently held back."""
        return "".join(self._parts) if self._accumulating else self._buf

    def _reset(self) -> None:
        self._buf = ""  # scanning mode buffer
        self._parts: list[str] = []  # accumulating mode buffer
        self._len = 0
        self._accumulating = False
        self._depth = 0
        self._in_str = False
        self._esc = False
        self._opened = False
        self._piece = 0  # balancing position: piece index, index within it, piece offset
        self._piece_pos = 0
        self._piece_off = 0
        self._close_at = -1

    # -- public API --------------------------------------------------------------------

    def feed(self, text: str) -> VerbatimOutput:
        """Feed one delta; one step of the reference state machine (text *or* a call)."""
        if not text:
            return _EMPTY
        if self._anchor is None:
            self._fed += len(text)
            return VerbatimOutput(text)
        overflow = self._append(text)
        if overflow is not None:
            return overflow
        return self._step()

    def feed_all(self, text: str) -> list[VerbatimOutput]:
        """Feed one delta and step until no progress; every output, in stream order."""
        out: list[VerbatimOutput] = []
        first = self.feed(text)
        if first.text or first.function_call is not None:
            out.append(first)
        while self._anchor is not None and (first.text or first.function_call is not None):
            first = self._step()
            if first.text or first.function_call is not None:
                out.append(first)
        return out

    def flush(self) -> VerbatimOutput:
        """End of stream: try to finish a call, release everything else as text, reset."""
        if self._accumulating:
            r = self._try_complete()
            rest = self.buffered
            out = VerbatimOutput(r.text + rest, r.function_call)
        else:
            out = VerbatimOutput(self._buf)
        self._reset()
        self._buf_at = self._fed
        return out

    # -- state machine -----------------------------------------------------------------

    def _append(self, text: str) -> VerbatimOutput | None:
        self._fed += len(text)
        if self._accumulating:
            self._parts.append(text)
            self._len += len(text)
            size = self._len
        else:
            self._buf += text
            size = len(self._buf)
        if size > self.max_buffer_chars:
            whole = self.buffered
            self._reset()
            self._buf_at = self._fed
            return VerbatimOutput(whole)
        return None

    def _emit_scan_prefix(self, k: int) -> str:
        out = self._buf[:k]
        self._buf = self._buf[k:]
        self._buf_at += k
        return out

    def _step(self) -> VerbatimOutput:
        if self._accumulating:
            return self._try_complete()
        buf = self._buf
        if not buf:
            return _EMPTY
        m = self._anchor.search(buf)  # type: ignore[union-attr]
        if m is not None:
            start = m.start()
            start -= _opener_len(buf, start)
            prose = self._emit_scan_prefix(start)
            call = self._buf
            self._buf = ""
            self._accumulating = True
            self._parts = [call]
            self._len = len(call)
            if prose:
                return VerbatimOutput(prose)
            return self._try_complete()
        hold = self._holdback(buf)
        return VerbatimOutput(self._emit_scan_prefix(len(buf) - hold))

    def _holdback(self, buf: str) -> int:
        """Longest tail that may still become an anchor (name prefix, opener)."""
        n = len(buf)
        name_part = 0
        prefixes = self._prefixes
        first = self._first_chars
        for k in range(min(self._max_name, n), 0, -1):
            if buf[n - k] in first and buf[n - k :] in prefixes:
                name_part = k
                break
        if not name_part and buf[-1].isspace():
            stripped = buf.rstrip()
            for name in self._names:
                if stripped.endswith(name):
                    name_part = n - len(stripped) + len(name)
                    break
        if name_part:
            return name_part + _opener_len(buf, n - name_part)
        return _opener_len(buf, n)

    def _try_complete(self) -> VerbatimOutput:
        if self._close_at < 0 and not self._balance():
            return _EMPTY
        whole = "".join(self._parts)
        close = self._close_at
        lead = _LEADING_OPENER_RE.match(whole)
        body_at = lead.end() if lead else 0
        call = self._parse(whole[body_at : close + 1])
        at = self._buf_at
        if call is None:
            self._reset()
            self._buf_at = at + len(whole)
            return VerbatimOutput(whole)
        rest_at = close + 1
        closer = _LEADING_CLOSER_RE.match(whole, rest_at)
        if closer is not None:
            rest_at = closer.end()
        self._note(GUARD, "recovered_call", at, whole[:rest_at], name=call.name)
        self._reset()
        self._buf_at = at + rest_at
        self._buf = whole[rest_at:]
        return VerbatimOutput("", call)

    def _balance(self) -> bool:
        """Advance the quote-aware parenthesis balance over unseen text; True when closed."""
        parts = self._parts
        depth, in_str, esc, opened = self._depth, self._in_str, self._esc, self._opened
        while self._piece < len(parts):
            piece = parts[self._piece]
            i = self._piece_pos
            if not opened:
                j = piece.find("(", i)
                i = len(piece) if j < 0 else j
                opened = j >= 0
            n = len(piece)
            while i < n:
                ch = piece[i]
                if in_str:
                    if esc:
                        esc = False
                    elif ch == "\\":
                        esc = True
                    elif ch == '"':
                        in_str = False
                elif ch == '"':
                    in_str = True
                elif ch == "(":
                    depth += 1
                elif ch == ")":
                    depth -= 1
                    if depth == 0:
                        self._close_at = self._piece_off + i
                        return True
                i += 1
            self._piece += 1
            self._piece_pos = 0
            self._piece_off += n
        self._depth, self._in_str, self._esc, self._opened = depth, in_str, esc, opened
        return False

    def _parse(self, call_text: str) -> FunctionCall | None:
        m = _IDENT_CALL_RE.fullmatch(call_text.strip())
        if m is None:
            return None
        spec = self.specs.get(m.group(1))
        if spec is None:
            return None
        args_text = m.group(2).strip()
        if not args_text:
            return None if spec.required else FunctionCall(name=spec.name, args={})
        if args_text[0] == "{" and args_text[-1] == "}":
            try:
                value = json.loads(args_text, parse_constant=_reject_constant)
            except ValueError:
                return None
            return FunctionCall(name=spec.name, args=value) if isinstance(value, dict) else None
        if len(args_text) >= 2 and args_text[0] == '"' and args_text[-1] == '"':
            if spec.single_string_param is None:
                return None
            try:
                value = json.loads(args_text)
            except ValueError:
                return None
            if not isinstance(value, str):
                return None
            return FunctionCall(name=spec.name, args={spec.single_string_param: value})
        return None
