"""Wire helpers every provider family shares: public names, one definition each.

- **checked wire reads**: :func:`is_number`, :func:`wire_int`, :func:`wire_float` (a hostile
  count is None and named, never an exception);
- **URL join**: :func:`join_url`;
- **shape notes**: :func:`note_shape`, :func:`note_unknown_keys` (``facts["unhandled_shapes"]``,
  anomaly ``unhandled_shape``);
- **tool calls**: :class:`ToolCallAccumulator` (deltas by index), :func:`split_text_and_tool`;
- **usage**: :func:`openai_usage`, :func:`choice_usage`;
- **reasoning**: :func:`reasoning_details_text`, :func:`typed_content`.

Pure functions and small classes, no I/O; they import nothing above :mod:`lab.model`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from lab.guards.base import NoteSink
from lab.model import Usage

__all__ = [
    "MAX_WIRE_INT",
    "NoteList",
    "ToolCallAccumulator",
    "choice_usage",
    "is_number",
    "join_url",
    "note_shape",
    "note_unknown_keys",
    "openai_usage",
    "reasoning_details_text",
    "split_text_and_tool",
    "typed_content",
    "wire_float",
    "wire_int",
]


def is_number(v: Any) -> bool:
    """A finite JSON number (int or float, not bool, not NaN/inf): what every wire field
    check means by numeric. ``1e999`` parses to ``inf`` and the stdlib parser accepts
    ``NaN``/``Infinity``; neither is a number here."""
    if isinstance(v, int):
        return not isinstance(v, bool)
    return isinstance(v, float) and math.isfinite(v)


MAX_WIRE_INT = 2**53
"""The largest count or index taken from the wire (JSON's exact-integer range)."""


def wire_int(v: Any, path: str = "", bad: list[str] | None = None) -> int | None:
    """The one checked conversion of a count or index read from the wire.

    A non-negative finite number up to :data:`MAX_WIRE_INT` becomes an ``int`` (floats
    truncate, as ``int()`` does); anything else (bool, string, NaN, inf, negative, huge, a
    container) is None, and **path** is appended to **bad** when given, so the caller can
    raise an anomaly for that stream instead of an exception escaping it.

    >>> wire_int(12), wire_int(3.0), wire_int(float("inf")), wire_int(-1), wire_int("7")
    (12, 3, None, None, None)
    """
    if v is None:
        return None
    if is_number(v) and 0 <= v <= MAX_WIRE_INT:
        return int(v)
    if bad is not None:
        bad.append(path or "?")
    return None


def wire_float(v: Any, path: str = "", bad: list[str] | None = None) -> float | None:
    """A cost or other amount from the wire: a finite non-negative float, else None (and
    **path** appended to **bad**), as :func:`wire_int`. An integer past the float range
    (``1`` and 400 zeros parses to an exact ``int``) is hostile too, never an
    ``OverflowError``.

    >>> wire_float(0.25), wire_float(3), wire_float(10**400), wire_float(-0.5)
    (0.25, 3.0, None, None)
    """
    if v is None:
        return None
    if is_number(v) and v >= 0:
        try:
            return float(v)
        except OverflowError:
            pass
    if bad is not None:
        bad.append(path or "?")
    return None


def join_url(base: str, path: str, query: str = "") -> str:
    """``base`` with ``path`` appended to its path, before any query it carries.

    ``join_url("http://h/v1/?x=1", "/chat/completions")`` is
    ``"http://h/v1/chat/completions?x=1"``; **query** (``"alt=sse"``) is added to the base's
    own query. A fragment is dropped (it is never sent).
    """
    head = base.partition("#")[0]
    root, _, own = head.partition("?")
    params = "&".join(q for q in (own, query) if q)
    return root.rstrip("/") + path + ("?" + params if params else "")


class NoteList(NoteSink):
    """A note list for helper functions that append notes (``parse_tool_arguments``)."""

    __slots__ = ("notes",)

    def __init__(self) -> None:
        self.notes = []


def openai_usage(u: Any, bad: list[str] | None = None) -> Usage | None:
    """OpenAI-shaped usage (snake or camel case) -> :class:`Usage`; None when empty.

    Every count goes through :func:`wire_int`: a hostile value (``1e999``, ``NaN``, ``-1``,
    a string) is left out and its path appended to **bad**.
    """
    if not isinstance(u, dict):
        return None

    def pick(d: Any, where: str, *names: str) -> Any:
        if not isinstance(d, dict):
            return None
        for n in names:
            v = d.get(n)
            if v is not None:
                return wire_int(v, f"usage.{where}{n}", bad)
        return None

    prompt = pick(u, "", "prompt_tokens", "promptTokens", "input_tokens")
    completion = pick(u, "", "completion_tokens", "completionTokens", "output_tokens")
    total = pick(u, "", "total_tokens", "totalTokens")
    cdet = u.get("completion_tokens_details", u.get("completionTokensDetails"))
    pdet = u.get("prompt_tokens_details", u.get("promptTokensDetails"))
    reasoning = pick(cdet, "completion_tokens_details.", "reasoning_tokens", "reasoningTokens")
    cached = pick(pdet, "prompt_tokens_details.", "cached_tokens", "cachedTokens")
    if cached is None and (prompt, completion, total) != (None, None, None):
        # Moonshot/Kimi: the cache read at the top level, no details object; read beside
        # the counts only (a usage of {"cached_tokens": 0} alone says nothing)
        cached = pick(u, "", "cached_tokens")
    cache_write = pick(pdet, "prompt_tokens_details.", "cache_write_tokens", "cacheWriteTokens")
    cost = wire_float(u.get("cost"), "usage.cost", bad)
    if all(v is None for v in (prompt, completion, total, reasoning, cached, cache_write, cost)):
        return None
    return Usage(
        input_tokens=prompt or 0,
        output_tokens=completion or 0,
        reasoning_tokens=reasoning or 0,
        cache_read_tokens=cached or 0,
        cache_write_tokens=cache_write or 0,
        total_tokens=total,
        cost=cost,
    )


def reasoning_object_text(v: Any) -> str:
    """The text of a reasoning field sent as an object, ``{"text": "..."}`` (Bedrock's
    shape, passed through by gateways: envoyproxy/ai-gateway #1222); "" for anything else."""
    if type(v) is dict:
        text = v.get("text")
        if isinstance(text, str):
            return text
    return ""


def unread_chars(texts: Iterable[str], read: str | None) -> int:
    """Characters of reasoning no field read: **texts** from the fields not read, each
    distinct text once and none equal to what was **read** (one reasoning sent in three
    fields is one reasoning left unread, not three).

    >>> unread_chars(["abc", "abc", "", "de"], None), unread_chars(["abc"], "abc")
    (5, 0)
    """
    return sum(len(t) for t in set(texts) if t and t != read)


def cumulative_pieces(pieces: list[str]) -> bool:
    """Is every piece (two or more) the one before it and more, or the same again: the text
    so far sent each time, not what is new (DeepSeek and Baidu Qianfan tool arguments, hermes-agent PR
    #35718)? Stops at the first piece that is not, so streamed pieces cost a compare each.

    >>> cumulative_pieces(['{"a"', '{"a": 1', '{"a": 1}']), cumulative_pieces(['{"a"', ': 1}'])
    (True, False)
    """
    if len(pieces) < 2:
        return False
    previous = pieces[0]
    for piece in pieces[1:]:
        if len(piece) < len(previous) or not piece.startswith(previous):
            return False
        previous = piece
    return True


def resent_whole(pieces: list[str]) -> bool:
    """Is the last of three or more pieces all the ones before it, sent again whole (a final
    chunk that repeats the call)?

    >>> resent_whole(['{"a"', ': 1}', '{"a": 1}']), resent_whole(['{"a"', ': 1}'])
    (True, False)
    """
    if len(pieces) < 3:
        return False
    last = pieces[-1]
    if sum(map(len, pieces)) != 2 * len(last):
        return False
    return "".join(pieces[:-1]) == last


_STRUCTURE = re.compile(r'["\\{}\[\]]')


class _ObjectShape:
    """Where a call's argument text stands as one JSON object, read piece by piece, each
    character once: ``state`` 0 nothing yet, 1 inside the object, 2 the object closed (only
    whitespace after), 3 not one object (does not open with ``{``, or more after it).
    Only brackets, quotes and backslashes are looked at (a regex walks past the rest), so
    ``2`` says "worth a parse", not "valid JSON"."""

    __slots__ = ("depth", "esc", "fed", "in_str", "state")

    def __init__(self, fed: int) -> None:
        self.depth = 0
        self.esc = False  # the last piece ended inside a string on a backslash
        self.in_str = False
        self.state = 0
        self.fed = fed  # the pieces read so far (an index into the call's pieces)

    def feed(self, text: str) -> None:
        if self.state == 3:
            return
        pos = 0  # outside the object: where the text not yet checked for whitespace starts
        skip = 0 if self.esc else -1  # a character escaped by a backslash
        self.esc = False
        for m in _STRUCTURE.finditer(text):
            i = m.start()
            if i == skip:
                continue
            ch = text[i]
            if self.in_str:
                if ch == "\\":
                    if i + 1 == len(text):
                        self.esc = True
                    else:
                        skip = i + 1
                elif ch == '"':
                    self.in_str = False
                continue
            if self.state != 1:  # before or after the object: whitespace, then "{" only once
                if self.state == 2 or ch != "{" or text[pos:i].strip():
                    self.state = 3
                    return
                self.state, self.depth = 1, 1
                continue
            if ch == '"':
                self.in_str = True
            elif ch in "{[":
                self.depth += 1
            elif ch in "}]":
                self.depth -= 1
                if self.depth == 0:
                    self.state, pos = 2, i + 1
        if self.state != 1 and text[pos:].strip():
            self.state = 3


class ToolCallAccumulator:
    """Streamed tool-call deltas gathered by index: one definition for the chat adapters.

    Name and argument pieces are kept in lists and joined once when the call is built, so
    a call streamed as 200,000 argument deltas costs the same per delta as one of 20,000
    (``acc += piece`` would copy the growing string each time).

    Beside what is gathered, each slot remembers the call it is on now: its whole name,
    where its arguments start and how many characters came before them, and how far its
    arguments stand as one JSON object (:class:`_ObjectShape`, read lazily: each character
    once, whatever is asked how often). Where the reference glues several calls, or a name
    sent again, into one slot (``add(..., whole=...)``, :meth:`restart`), the next delta is
    still judged against that call, not against the glued text.

    Two more things serve ``config.all_tool_calls``, which keeps calls apart: ``alias``
    sends a wire index to the slot its current call moved to (calls sent all at index 0,
    each to a slot of its own), and ``pending`` holds a header (the same name, no id, no
    arguments) seen after complete arguments, until the next delta says whether it began
    another call of the same tool (a new object follows) or only repeated the name.
    ``plain`` is True while neither is in use: an argument delta may then go straight to
    :meth:`add`.
    """

    __slots__ = (
        "alias",
        "calls",
        "chars",
        "checked",
        "current",
        "pending",
        "plain",
        "shapes",
        "top",
    )

    def __init__(self) -> None:
        self.calls: dict[int, dict[str, Any]] = {}
        # slot -> (whole name, first piece, characters before it)
        self.current: dict[int, tuple[str, int, int]] = {}
        self.chars: dict[int, int] = {}  # slot -> argument characters gathered
        self.shapes: dict[int, _ObjectShape] = {}  # slot -> its current call's arguments
        self.checked: dict[int, tuple[int, bool]] = {}  # slot -> (pieces, complete?) cached
        self.alias: dict[int, int] = {}  # wire index -> slot
        self.pending: dict[int, str] = {}  # slot -> a header's name, not yet judged
        self.plain = True
        self.top = -1  # the highest slot

    def __bool__(self) -> bool:
        return bool(self.calls)

    def _begin(self, index: int, name: str) -> None:
        """The call at slot **index** is now one of **name** whose arguments start here."""
        first = len(self.calls[index]["arguments"])
        self.current[index] = (name, first, self.chars[index])
        self.shapes[index] = _ObjectShape(first)
        self.checked.pop(index, None)

    def add(
        self,
        index: int,
        *,
        name: str | None = None,
        arguments: str | None = None,
        fields: dict[str, Any] | None = None,
        whole: str | None = None,
    ) -> None:
        """Gather one delta of call **index**. **whole**: the delta's name is the whole name
        of a call already there (a name sent again: the call it is on stays) or of a new call
        glued onto it (the call it is on becomes that one); None: a piece of the name."""
        acc = self.calls.get(index)
        if acc is None:
            acc = self.calls[index] = {"name": [], "arguments": []}
            self.chars[index] = 0
            if index > self.top:
                self.top = index
        if whole is not None:
            current = self.current.get(index)
            if current is None or current[0] != whole:  # another call, glued: it starts here
                self._begin(index, whole)
        elif name:
            current = self.current.get(index)
            if current is None:
                self._begin(index, name)
            else:
                self.current[index] = (current[0] + name, current[1], current[2])
        if name:
            acc["name"].append(name)
        if arguments:
            acc["arguments"].append(arguments)
            self.chars[index] += len(arguments)
        if fields:
            acc.update(fields)

    def restart(self, index: int, name: str) -> None:
        """Another call of **name** starts at slot **index** with the next arguments (the
        reference glues it onto the one there)."""
        self._begin(index, name)

    def slot(self, index: int) -> int:
        """The slot wire **index**'s deltas go to now."""
        return self.alias.get(index, index)

    def move(self, index: int) -> int:
        """Give wire **index** a new slot, after every call so far; return it."""
        slot = self.top + 1
        self.alias[index] = slot
        self.plain = False
        return slot

    def hold(self, index: int, name: str) -> None:
        """Keep the header **name** at slot **index** until the next delta judges it."""
        self.pending[index] = name
        self.plain = False

    def release(self, index: int) -> str | None:
        """The header held at **index**, if any, no longer held."""
        name = self.pending.pop(index, None)
        if name is not None:
            self.plain = not self.alias and not self.pending
        return name

    def starts_new_call(self, index: int, call_id: str) -> bool:
        """Does a header with **call_id** at **index** start another call than the one
        there (which has a name and a different id)?"""
        acc = self.calls.get(index)
        return (
            acc is not None
            and bool(acc["name"])
            and isinstance(acc.get("id"), str)
            and acc["id"] != call_id
        )

    def has_id(self, index: int) -> bool:
        """Has the call at slot **index** an id (a header with one came)?"""
        acc = self.calls.get(index)
        return acc is not None and isinstance(acc.get("id"), str)

    def complete(self, index: int) -> bool:
        """Are the arguments of the call slot **index** is on a whole JSON object (or, sent
        whole each time, is the last of them)? Each character is read once however often
        this is asked (:class:`_ObjectShape`), and one parse confirms a candidate."""
        current = self.current.get(index)
        if current is None:
            return False
        pieces = self.calls[index]["arguments"]
        n = len(pieces)
        if n <= current[1]:
            return False
        seen = self.checked.get(index)
        if seen is not None and seen[0] == n:
            return seen[1]
        shape = self.shapes[index]
        for piece in pieces[shape.fed :]:
            shape.feed(piece)
        shape.fed = n
        found = False
        if shape.state == 2:
            try:
                found = isinstance(json.loads("".join(pieces[current[1] :])), dict)
            except (ValueError, RecursionError):
                found = False
        if not found and n - current[1] >= 2:
            # arguments sent whole each time: the last piece the one before and more, or
            # all the ones before it (the lengths say so before any text is compared).
            # Only the last two pieces are compared, not every one (cumulative_pieces):
            # linear however often this is asked, and the parse below decides. Tried
            # also when the shape closed: glued snapshots can close a brace by chance
            # (a quote escaped in one, bare after the next one's start).
            last = pieces[-1]
            if last.startswith(pieces[-2]) or (
                self.chars[index] - current[2] == 2 * len(last)
                and "".join(pieces[current[1] : -1]) == last
            ):
                try:
                    found = isinstance(json.loads(last), dict)
                except (ValueError, RecursionError):
                    found = False
        self.checked[index] = (n, found)
        return found

    def repeats_call(self, index: int, arguments: str) -> bool:
        """Are **arguments** the arguments of the call slot **index** is on, sent again
        whole (the last snapshot repeated, or a final chunk that resends the call)? Only a
        call streamed in pieces is resent so: a call sent whole, then the same again, is
        two calls (a model rolls a die twice)."""
        current = self.current.get(index)
        if current is None:
            return False
        pieces = self.calls[index]["arguments"]
        if len(pieces) - current[1] < 2:
            return False
        if pieces[-1] == arguments and arguments.lstrip()[:1] == "{":  # a snapshot again
            return True
        return self.chars[index] - current[2] == len(arguments) and (
            "".join(pieces[current[1] :]) == arguments
        )

    def starts_idless_call(
        self, index: int, name: str, arguments: str | None, call_id: str | None = None
    ) -> bool:
        """Does a delta with **name** start another call at slot **index**, whose call has
        no id? It does when that call has complete arguments (a JSON object) and the delta
        names another tool, or the same tool with an id (**call_id**) or another object (not
        the same arguments sent again): calls sent with no id, all at one index. The same
        name and no id or new object is the name sent again (:meth:`resends_header`)."""
        current = self.current.get(index)
        if current is None:
            return False
        if current[0] == name:  # the name check first: no work for a name sent every delta
            if call_id is None and not (arguments and arguments.lstrip()[:1] == "{"):
                return False
            if arguments and self.repeats_call(index, arguments):
                return False  # the call sent again
        return self.complete(index)

    def next_index(self) -> int:
        """A slot after every call so far (for a call that came with no index of its own)."""
        return self.top + 1

    def resends_header(self, index: int, call_id: str | None, name: str) -> bool:
        """Does a delta with **call_id** (None: the delta has no id) and **name** repeat the
        header of the call at **index** (the same id, or none on either side, the same whole
        name) rather
        than stream more of its name? MiniMax on NVIDIA NIM and GPT-5 resend the name on
        every delta (hermes-agent #8259, open-webui #22177)."""
        acc = self.calls.get(index)
        current = self.current.get(index)
        return (
            acc is not None
            and current is not None
            and (call_id is None or acc.get("id") in (None, call_id))
            and current[0] == name
        )

    def take(self) -> list[tuple[int, dict[str, Any]]]:
        """Every call as ``(index, {"name", "arguments", ...fields})`` in index order; the
        accumulator is empty afterwards. Arguments sent whole again (each piece the one
        before and more, or the last piece all the ones before it) also carry
        ``arguments_so_far``: the last piece."""
        built = []
        for index in sorted(self.calls):
            acc = self.calls[index]
            pieces = acc["arguments"]
            call = {**acc, "name": "".join(acc["name"]), "arguments": "".join(pieces)}
            if cumulative_pieces(pieces) or resent_whole(pieces):
                call["arguments_so_far"] = pieces[-1]
            built.append((index, call))
        self.calls, self.current, self.chars, self.shapes, self.checked = {}, {}, {}, {}, {}
        self.alias, self.pending, self.plain, self.top = {}, {}, True, -1
        return built

    def names(self) -> list[str]:
        return ["".join(self.calls[i]["name"]) for i in sorted(self.calls)]


def note_shape(facts: dict[str, Any], path: str) -> None:
    """Count one field path or event type an adapter does not read (``unhandled_shape``)."""
    shapes = facts.get("unhandled_shapes")
    if shapes is None:
        shapes = facts["unhandled_shapes"] = {}
    shapes[path] = shapes.get(path, 0) + 1


def note_unknown_keys(facts: dict[str, Any], obj: dict, known: frozenset[str], where: str) -> None:
    """Count every key of **obj** outside **known** whose value is not empty (``None``, ``""``,
    ``[]``, ``{}``) as ``<where>.<key>``, in the object's order (the facts of a replay are
    the same from run to run, whatever ``PYTHONHASHSEED``)."""
    if obj.keys() <= known:
        return
    for key in obj:
        if key in known:
            continue
        v = obj[key]
        if v is None or v == "" or v == [] or v == {}:
            continue
        note_shape(facts, f"{where}.{key}" if where else str(key))


def split_text_and_tool(
    chunk: dict,
    *,
    drop: tuple[str, ...] = ("usage",),
    text_fields: tuple[str, ...] = (),
    choice_fields: tuple[str, ...] = (),
) -> list[dict]:
    """A normalized chunk whose first choice carries both text and a tool call, split into
    a text piece then a tool piece (the reference emits them in that order); any other
    chunk as it is.

    The text piece keeps the chunk's envelope without ``drop``, a delta of ``role``,
    ``content`` and ``text_fields``, and the first choice's ``index``, ``finish_reason``
    None and ``choice_fields``. The tool piece is the chunk with ``content`` taken out of
    the first choice's delta.
    """
    choices = chunk.get("choices")
    if not choices:
        return [chunk]
    first = choices[0]
    delta = first["delta"]
    content = delta.get("content")
    has_tool = bool(delta.get("tool_calls")) or first["finish_reason"] == "tool_calls"
    if not (isinstance(content, str) and content and has_tool):
        return [chunk]
    text_chunk = {k: v for k, v in chunk.items() if k not in drop}
    text_delta = {"role": delta.get("role"), "content": content}
    text_delta.update((k, delta.get(k)) for k in text_fields)
    text_choice = {"index": first["index"], "delta": text_delta, "finish_reason": None}
    text_choice.update((k, first.get(k)) for k in choice_fields)
    text_chunk["choices"] = [text_choice]
    tool_delta = dict(delta)
    tool_delta.pop("content", None)
    tool_chunk = dict(chunk)
    tool_chunk["choices"] = [{**first, "delta": tool_delta}, *choices[1:]]
    return [text_chunk, tool_chunk]


def choice_usage(raw: dict) -> dict | None:
    """The usage object a choice carries (Moonshot/Kimi: ``choices[0].usage``), if any."""
    choices = raw.get("choices")
    if isinstance(choices, list):
        for ch in choices:
            if isinstance(ch, dict) and isinstance(ch.get("usage"), dict):
                return ch["usage"]
    return None


def reasoning_details_text(entries: list) -> tuple[str, str]:
    """``reasoning_details`` entries -> (raw text, summary text); encrypted entries carry none."""
    raw: list[str] = []
    summary: list[str] = []
    for e in entries:
        if not isinstance(e, dict):
            continue
        if isinstance(e.get("text"), str):
            raw.append(e["text"])
        elif isinstance(e.get("summary"), str):
            summary.append(e["summary"])
    return "".join(raw), "".join(summary)


def typed_content(parts: list) -> tuple[str, str]:
    """A typed content list (Mistral: ``[{"type": "thinking", "thinking": [...]}, {"type":
    "text", "text": ...}]``) -> (visible text, reasoning text)."""
    text: list[str] = []
    thinking: list[str] = []
    for part in parts:
        if isinstance(part, str):
            text.append(part)
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "thinking":
            inner = part.get("thinking")
            if isinstance(inner, str):
                thinking.append(inner)
            elif isinstance(inner, list):
                thinking.extend(typed_content(inner)[0:1])
        elif isinstance(part.get("text"), str):
            text.append(part["text"])
    return "".join(text), "".join(thinking)
