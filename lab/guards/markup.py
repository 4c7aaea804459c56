"""Protocol markup that leaked into streamed text: detect it, and on request recover it.

Open-weight models speak their chat template's markup; the serving engine is supposed to
parse it into reasoning and tool calls. A backend whose parser is missing, misconfigured or
cut short streams that markup into visible content (or reasoning) instead. This guard
recognizes seven classes of it, each taken from its published source (formats read, code
our own):

``harmony``
    OpenAI's harmony response format for gpt-oss (``openai/harmony`` ``docs/format.md``):
    messages ``<|start|>{header}<|message|>{content}<|end|>``; the header names a channel
    after ``<|channel|>`` (``analysis`` = chain of thought, ``final`` = the answer,
    ``commentary`` = function calls and preambles), may name a recipient ``to=functions.NAME``
    and a content type after ``<|constrain|>``; ``<|return|>`` and ``<|call|>`` are stop
    tokens. The first message may omit ``<|start|>assistant``.
``harmony_stripped``
    The same format with its special tokens decoded to nothing, as serving stacks that
    skip special tokens without a harmony parser send it: ``<|channel|>analysis<|message|>
    User says…<|end|><|start|>assistant<|channel|>final<|message|>Hello!`` reads
    ``analysisUser says…assistantfinalHello!``. Public reports of this exact shape:
    oobabooga/textgen issue 7374 (llama-server) and Augustas11/macprovider issue 743
    (gpt-oss-20b on MLX behind an OpenAI-compatible relay), kept in
    ``tests/realworld/markup/``. With no marker left, only a precise shape counts: the
    guard's input must *begin* with a start channel (``analysis``, the config's
    ``harmony_stripped_start``) glued to a letter or digit, and a glued channel
    boundary ``assistant`` + channel (``assistantfinal``, ``assistantanalysis``,
    ``assistantcommentary``) must follow; a boundary at the very start counts alone. The
    word "analysis" in prose (followed by a space or punctuation, or not at the start)
    never fires. Recovery: each ``analysis`` message becomes reasoning and ``final`` the
    answer; after a ``commentary`` boundary (a preamble, or a call whose name and
    arguments ran together) the text stays as it came. To recover, the guard holds the
    opening message until a boundary shows what it is (at most ``max_block_chars``); a
    candidate that no boundary confirms goes out unchanged. Any real marker ends the
    stage (a stream with markers is not a stripped one).
``kimi_tool_section``
    Kimi K2 (vLLM ``kimi_k2_tool_parser.py``, the model's chat template):
    ``<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX
    <|tool_call_argument_begin|>{json}<|tool_call_end|><|tool_calls_section_end|>``; the call
    id is ``functions.NAME:IDX`` and the name is its part before ``:`` after the last ``.``.
``deepseek_tool_calls``
    DeepSeek V3/R1 and V3.1 (vLLM ``deepseekv3_tool_parser.py``,
    ``deepseekv31_tool_parser.py``), fullwidth bars and ``▁``:
    ``<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\n{json}
    \\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>`` (V3) or ``<｜tool▁call▁begin｜>NAME
    <｜tool▁sep｜>{json}<｜tool▁call▁end｜>`` (V3.1).
``xml_tool_call``
    ``<tool_call>…</tool_call>`` in three dialects: Hermes/Qwen2.5 JSON
    ``{"name": …, "arguments": …}`` (vLLM ``hermes_tool_parser.py``); GLM-4.5
    ``NAME\\n<arg_key>K</arg_key>\\n<arg_value>V</arg_value>`` (vLLM
    ``glm4_moe_tool_parser.py``); Qwen3-Coder ``<function=NAME>\\n<parameter=K>\\nV
    \\n</parameter>\\n</function>`` (vLLM ``qwen3coder_tool_parser.py``, which also accepts a
    bare ``<function=…>`` without the wrapper, as this guard does).
``minimax_tool_call``
    MiniMax-M2 (vLLM ``minimax_m2_tool_parser.py``, the model's ``chat_template.jinja``):
    ``<minimax:tool_call><invoke name="NAME"><parameter name="K">V</parameter></invoke>
    </minimax:tool_call>``.
``special_token``
    End-of-turn and role tokens that should never reach text: ChatML ``<|im_end|>``,
    ``<|im_start|>``, Llama 3 ``<|eot_id|>``, ``<|eom_id|>``, ``<|start_header_id|>``, GPT-2
    style ``<|endoftext|>``, DeepSeek ``<｜end▁of▁sentence｜>`` and more
    (:attr:`MarkupGuardConfig.special_tokens`).

**Default: detect only.** :class:`MarkupGuard` with ``recover=False`` returns its input
unchanged, delta for delta (it never holds text back), and records a
:class:`MarkupDetection` (class, marker, offset) plus a note (rule ``markup_detected``) per
marker it recognizes. A tool block's inner markers belong to the block and are not
counted again.

**Recovery** (``recover=True``; the lab turns it on with ``LabConfig.recover_markup``, part
of :meth:`LabConfig.complete`): harmony ``analysis`` text moves to reasoning, ``final`` (and
preamble ``commentary``) stays the answer, a ``commentary to=functions.NAME`` message
becomes a call, and the markup itself is removed; a tool block (kimi, deepseek, xml,
minimax) is taken out of the text and parsed into :class:`~lab.model.FunctionCall` values
whose ``provider_fields["recovered_from"]`` names the class (a block that yields no call
goes back into the text unchanged); stray special tokens and stray tool markers are
removed. Every move and drop records a note (rules ``harmony_reasoning``,
``removed_markup``, ``recovered_call``, ``unparsed_block``, ``block_too_long``).

**Streaming.** Every marker starts with ``<``. The guard holds back only a trailing run
that is a proper prefix of a marker (at most ``len(longest marker) - 1`` characters), so a
marker split anywhere across deltas is found exactly as if it had arrived whole, and work
per delta is linear in the delta. A stripped-harmony boundary split across deltas is found
through the last ``len(longest boundary) - 1`` characters kept beside the output. In
recovery a tool block (or a stripped ``analysis`` message) is buffered until its closer, at
most :attr:`MarkupGuardConfig.max_block_chars` characters (past that it is released as text,
note ``block_too_long``), so memory stays bounded.

**Cost where nothing is found** (issue 34 item 4). A delta without ``<`` reaching an
:attr:`MarkupGuard.idle` guard (nothing held, no block open, the stripped-harmony stage
decided) only counts characters; the chat adapters make that test inline per chunk, so a
body without markup pays two attribute reads, a ``"<" in text`` and an addition per delta
(the stripped-harmony stage decides on a stream's first characters). ``python
bench/callgrind_replay.py --detectors --chunks 1000 --only openrouter`` (msgspec): the
markup guard, its flush, the ``markup_leak`` anomaly and the tool-validity check add
+0.39 % instructions per OpenRouter chunk against no markup guard at all (+3.80 % before,
when each chunk called ``guard_markup`` and ``feed``); docs/PERFORMANCE.md, "Item 4".

Known limits: an ``analysis`` message whose opening markers the server stripped (text,
then ``<|end|>``) is detected but its text stays visible, since it streamed out before the
first marker. A stripped stream whose text does not open the guard's input (a chunk of
visible text before ``analysis``) is not recognized.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from lab.model import FunctionCall

from .markup_blocks import (
    DEEPSEEK,
    HARMONY,
    HARMONY_STRIPPED,
    KIMI,
    MARKUP_CLASSES,
    MINIMAX,
    SPECIAL,
    XML,
    MarkupClass,
    MarkupDetection,
    make_call,
    parse_tool_block,
    tool_properties,
)
from .markup_stripped import _HS_OFF, _ROLE, GUARD, StrippedHarmony

__all__ = [
    "DEFAULT_SPECIAL_TOKENS",
    "MARKUP_CLASSES",
    "MarkupClass",
    "MarkupDetection",
    "MarkupGuard",
    "MarkupGuardConfig",
    "MarkupOutput",
    "TOOL_BLOCK_OPENERS",
    "markup_kinds",
    "parse_tool_block",
    "scan_markup",
]


DEFAULT_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|im_end|>",
    "<|im_start|>",
    "<|im_sep|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|endoftext|>",
    "<|python_tag|>",
    "<｜end▁of▁sentence｜>",
    "<｜begin▁of▁sentence｜>",
    "<｜User｜>",
    "<｜Assistant｜>",
)
"""End-of-turn and role tokens of ChatML (Qwen, Kimi), Llama 3, GPT-2 style vocabularies
and DeepSeek. ``</s>`` and ``<s>`` are left out: they are also HTML (strikethrough)."""

# harmony markers (openai/harmony docs/format.md, "Special Tokens")
_H_START = "<|start|>"
_H_END = "<|end|>"
_H_MESSAGE = "<|message|>"
_H_CHANNEL = "<|channel|>"
_H_CONSTRAIN = "<|constrain|>"
_H_RETURN = "<|return|>"
_H_CALL = "<|call|>"
_HARMONY_MARKERS = (_H_START, _H_END, _H_MESSAGE, _H_CHANNEL, _H_CONSTRAIN, _H_RETURN, _H_CALL)
_HARMONY_STOPS = frozenset((_H_END, _H_RETURN, _H_CALL))

# tool blocks: opener -> (class, closer)
_BLOCKS: dict[str, tuple[MarkupClass, str]] = {
    "<|tool_calls_section_begin|>": (KIMI, "<|tool_calls_section_end|>"),
    "<|tool_call_section_begin|>": (KIMI, "<|tool_call_section_end|>"),  # singular (llama.cpp)
    "<|tool_call_begin|>": (KIMI, "<|tool_call_end|>"),
    "<｜tool▁calls▁begin｜>": (DEEPSEEK, "<｜tool▁calls▁end｜>"),
    "<｜tool▁call▁begin｜>": (DEEPSEEK, "<｜tool▁call▁end｜>"),
    "<tool_call>": (XML, "</tool_call>"),
    "<function=": (XML, "</function>"),
    "<minimax:tool_call>": (MINIMAX, "</minimax:tool_call>"),
}
TOOL_BLOCK_OPENERS: tuple[str, ...] = tuple(_BLOCKS)
"""Every literal that opens a leaked tool-call block (the one list: the anomaly detectors
``tool_markup_in_content``/``_reasoning`` use it too)."""

# markers that name their class when seen outside a block (stray closers, inner markers
# distinctive enough to be markup wherever they appear)
_STRAY: dict[str, MarkupClass] = {
    "<|tool_calls_section_end|>": KIMI,
    "<|tool_call_end|>": KIMI,
    "<|tool_call_argument_begin|>": KIMI,
    "<｜tool▁calls▁end｜>": DEEPSEEK,
    "<｜tool▁call▁end｜>": DEEPSEEK,
    "<｜tool▁sep｜>": DEEPSEEK,
    "</tool_call>": XML,
    "<arg_key>": XML,
    "</arg_key>": XML,
    "<arg_value>": XML,
    "</arg_value>": XML,
    "</minimax:tool_call>": MINIMAX,
}
# closers that are only markup when a block is open (``</function>`` is too common alone)
_BLOCK_ONLY = frozenset(("</function>",))


class MarkupGuardConfig(BaseModel):
    """What the markup guard recognizes and its bounds; defaults detect every class."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    classes: tuple[MarkupClass, ...] = MARKUP_CLASSES
    """The classes recognized; a class left out is plain text to the guard."""
    special_tokens: tuple[str, ...] = DEFAULT_SPECIAL_TOKENS
    """Literal tokens of class ``special_token``. Each must start with ``<``."""
    max_block_chars: int = Field(65536, ge=1)
    """A tool block (or a harmony call body) longer than this without its closer is not
    markup after all: it is released as text (note ``block_too_long``)."""
    max_header_chars: int = Field(256, ge=1)
    """A harmony message header (``assistant<|channel|>commentary to=…``) longer than this
    is released as text."""
    harmony_function_namespace: str = "functions"
    """A harmony message addressed ``to=<namespace>.NAME`` is a function call; other
    recipients (the built-in ``browser``, ``python``) are reasoning."""
    harmony_stripped_start: tuple[str, ...] = ("analysis",)
    """Class ``harmony_stripped``: the channel names a stream whose harmony special tokens
    were decoded to nothing may begin with (``<|channel|>analysis<|message|>We…`` reads
    ``analysisWe…``). The name must open the guard's input and be followed at once by a
    letter or digit; that makes the stream a candidate, and only a channel boundary
    (:attr:`harmony_stripped_channels`) makes it a detection."""
    harmony_stripped_channels: tuple[str, ...] = ("analysis", "commentary", "final")
    """Class ``harmony_stripped``: the channels whose boundary, ``assistant`` + channel
    (``<|end|><|start|>assistant<|channel|>final<|message|>`` with the tokens gone), is
    recognized in a candidate stream or at the very start of the input. Recovery knows
    ``analysis`` (reasoning) and ``final`` (the answer); after any other channel the text
    stays as it came. No channel may be a prefix of another."""


_DEFAULT_CONFIG = MarkupGuardConfig()  # frozen: one shared instance


class MarkupOutput(NamedTuple):
    """What the guard releases now: ``text`` stays in the channel it arrived in,
    ``reasoning`` moved out of it, ``calls`` recovered from it."""

    text: str = ""
    reasoning: str = ""
    calls: tuple[FunctionCall, ...] = ()


_EMPTY = MarkupOutput()
_tuple_new = tuple.__new__  # a NamedTuple without its Python __new__

# states
_TEXT, _BLOCK, _HEADER, _BODY = 0, 1, 2, 3


class _Vocab:
    """The markers of one config: a search regex, their roles, and every proper prefix;
    and the patterns of harmony with its special tokens stripped."""

    __slots__ = (
        "regex",
        "role",
        "prefixes",
        "longest",
        "hs_on",
        "hs_boundary",
        "hs_head",
        "hs_heads",
        "hs_head_max",
        "hs_tail",
    )

    def __init__(self, config: MarkupGuardConfig) -> None:
        on = set(config.classes)
        role: dict[str, tuple[str, MarkupClass]] = {}
        if HARMONY in on:
            for m in _HARMONY_MARKERS:
                role[m] = ("harmony", HARMONY)
        for opener, (kind, closer) in _BLOCKS.items():
            if kind in on:
                role[opener] = ("open", kind)
                role.setdefault(closer, ("stray", kind))
        for marker, kind in _STRAY.items():
            if kind in on and marker not in role:
                role[marker] = ("stray", kind)
        for marker in _BLOCK_ONLY:
            if marker in role:
                role[marker] = ("block_only", role[marker][1])
        if SPECIAL in on:
            for tok in config.special_tokens:
                if tok.startswith("<") and tok not in role:
                    role[tok] = ("special", SPECIAL)
        self.role = role
        markers = sorted(role, key=len, reverse=True)
        self.regex = re.compile("|".join(re.escape(m) for m in markers)) if markers else None
        self.prefixes = frozenset(m[:i] for m in markers for i in range(1, len(m)))
        self.longest = max((len(m) for m in markers), default=0)
        # harmony with its special tokens stripped: no marker, a shape of plain text
        self.hs_on = HARMONY_STRIPPED in on and bool(config.harmony_stripped_channels)
        channels = sorted(config.harmony_stripped_channels, key=len, reverse=True)
        starts = sorted(config.harmony_stripped_start, key=len, reverse=True)
        alt = "|".join(re.escape(c) for c in channels)
        self.hs_boundary = re.compile(f"{_ROLE}(?:{alt or '(?!)'})")
        self.hs_head = re.compile(
            "(?:(?P<start>{})(?=[^\\W_])|(?P<boundary>{}(?:{})))".format(
                "|".join(re.escape(c) for c in starts) or "(?!)", _ROLE, alt or "(?!)"
            )
        )
        # what a stripped stream may begin with (a start needs one more character)
        self.hs_heads = (*starts, *(_ROLE + c for c in channels))
        self.hs_head_max = max((len(h) for h in self.hs_heads), default=0) + 1
        self.hs_tail = max((len(_ROLE + c) for c in channels), default=1) - 1


_VOCAB_CACHE: dict[MarkupGuardConfig, _Vocab] = {}


def _vocab(config: MarkupGuardConfig) -> _Vocab:
    v = _VOCAB_CACHE.get(config)
    if v is None:
        v = _VOCAB_CACHE[config] = _Vocab(config)
    return v


class MarkupGuard(StrippedHarmony):
    """Detect (and with ``recover=True`` recover) leaked protocol markup, one delta at a
    time. See the module docstring.

    **tools** (OpenAI-format tool dicts) lets recovered XML arguments keep string
    parameters as strings; without it, a value that parses as JSON is taken as JSON.

    ``fed`` counts the characters fed so far (the offset of the next delta). ``idle`` is
    True while nothing is held and no block or message is open: a delta without ``<`` then
    comes back unchanged and is only counted, ``fed += len(delta)``. The chat adapters'
    per-chunk path does exactly that inline instead of calling :meth:`feed` (a call costs
    more than the whole check).

    >>> g = MarkupGuard(recover=True)
    >>> g.feed("<|channel|>analysis<|mess"), g.feed("age|>2+2<|end|>")
    (MarkupOutput(text='', reasoning='', calls=()), MarkupOutput(text='', reasoning='2+2', calls=()))
    >>> g.feed("<|start|>assistant<|channel|>final<|message|>4<|return|>").text
    '4'
    >>> [d.kind for d in g.detections][:2]
    ['harmony', 'harmony']
    """

    __slots__ = (
        "notes",
        "config",
        "recover",
        "tools",
        "detections",
        "fed",
        "idle",
        "_v",
        "_pending",
        "_state",
        "_kind",
        "_closer",
        "_buf",
        "_buf_chars",
        "_buf_offset",
        "_channel",
        "_recipient",
        "_call",
    )

    def __init__(
        self,
        config: MarkupGuardConfig | None = None,
        *,
        recover: bool = False,
        tools: Iterable[Any] | None = None,
    ) -> None:
        self.config = config or _DEFAULT_CONFIG
        self.recover = recover
        self.tools = tool_properties(tools)
        self._v = _vocab(self.config)
        self.reset()

    def reset(self) -> None:
        """Clear all state, notes and detections included."""
        self.notes = []
        self.detections: list[MarkupDetection] = []
        self._pending = ""
        self.fed = 0
        self._state = _TEXT
        self._kind: MarkupClass = HARMONY
        self._closer = ""
        self._buf: list[str] = []
        self._buf_chars = 0
        self._buf_offset = 0
        self._channel = ""
        self._recipient = ""
        self._call = False
        self._hs_reset()
        self.idle = self._hs == _HS_OFF

    @property
    def in_markup(self) -> bool:
        """True inside a tool block or a harmony message."""
        return self._state != _TEXT

    # -- streaming ---------------------------------------------------------------------

    def feed(self, text: str) -> MarkupOutput:
        """Scan one delta; returns what is released now (see :class:`MarkupOutput`)."""
        if not text:
            return _EMPTY
        if self.idle and "<" not in text:  # the fast path: no marker can start here
            self.fed += len(text)
            return _tuple_new(MarkupOutput, (text, "", ()))  # MarkupOutput(text), per delta
        out = self._scan(text)
        self.idle = not self._pending and self._state == _TEXT and self._hs == _HS_OFF
        return out

    def _scan(self, text: str) -> MarkupOutput:
        pending = self._pending
        if not pending and "<" not in text:
            self.fed += len(text)
            return self._plain(text, self.fed - len(text))
        base = self.fed - len(pending)
        self.fed += len(text)
        s = pending + text if pending else text
        regex = self._v.regex
        text_out: list[str] = []
        reason_out: list[str] = []
        calls: list[FunctionCall] = []
        pos = 0
        n = len(s)
        if regex is not None:
            for m in regex.finditer(s):
                if m.end() == n and m.group() in self._v.prefixes:
                    break  # could still grow into a longer marker: held below
                if m.start() > pos:
                    self._text(s[pos : m.start()], base + pos, text_out, reason_out)
                self._marker(m.group(), base + m.start(), text_out, reason_out, calls)
                pos = m.end()
        # hold back a trailing partial marker
        hold = self._partial_at(s, pos)
        end = n if hold is None else hold
        if end > pos:
            self._text(s[pos:end], base + pos, text_out, reason_out)
        self._pending = s[end:]
        if not self.recover:
            return MarkupOutput(text, "", ())
        return MarkupOutput("".join(text_out), "".join(reason_out), tuple(calls))

    def flush(self) -> MarkupOutput:
        """End of stream: release what is held; an open block is parsed as cut short."""
        text_out: list[str] = []
        reason_out: list[str] = []
        calls: list[FunctionCall] = []
        if self._pending:
            at = self.fed - len(self._pending)
            self._text(self._pending, at, text_out, reason_out)
            self._pending = ""
        if self._hs != _HS_OFF:
            self._hs_end(text_out, reason_out)
        if self._state == _BLOCK:
            self._close_block("", text_out, calls, closed=False)
        elif self._state == _HEADER:
            self._drop_header(text_out)
        elif self._state == _BODY:
            self._end_message(text_out, reason_out, calls, closed=False)
        self._state = _TEXT
        self.idle = True
        if not self.recover:
            return _EMPTY
        return MarkupOutput("".join(text_out), "".join(reason_out), tuple(calls))

    # -- internals ---------------------------------------------------------------------

    def _plain(self, text: str, offset: int) -> MarkupOutput:
        """A delta with no ``<`` and nothing held, while not :attr:`idle`."""
        t: list[str] = []
        r: list[str] = []
        self._text(text, offset, t, r)
        if not self.recover:
            return MarkupOutput(text)
        return MarkupOutput("".join(t), "".join(r), ())

    def _partial_at(self, s: str, pos: int) -> int | None:
        """Index of a trailing proper prefix of a marker in ``s[pos:]``, or None. No marker
        holds a second ``<``, so only the last ``<`` of the tail can start one."""
        n = len(s)
        i = s.rfind("<", max(pos, n - self._v.longest + 1), n)
        if i >= 0 and s[i:] in self._v.prefixes:
            return i
        return None

    def _text(self, t: str, offset: int, text_out: list[str], reason_out: list[str]) -> None:
        """Plain text (no complete marker) at input ``offset``, routed by the state."""
        state = self._state
        if state == _TEXT:
            if self._hs == _HS_OFF:
                text_out.append(t)
            else:
                self._stripped(t, offset, text_out, reason_out)
        elif state == _BLOCK:
            self._buffer(t, text_out)
        elif state == _HEADER:
            self._buf.append(t)
            self._buf_chars += len(t)
            if self._buf_chars > self.config.max_header_chars:
                self._release(text_out, "block_too_long")
        elif self._call:
            self._buffer(t, text_out)
        elif self._is_reasoning():
            if self.recover:
                self._note(GUARD, "harmony_reasoning", offset, t, kind=HARMONY)
            reason_out.append(t)
        else:
            text_out.append(t)

    def _buffer(self, t: str, text_out: list[str]) -> None:
        if self.recover:  # detection only counts
            self._buf.append(t)
        self._buf_chars += len(t)
        if self._buf_chars > self.config.max_block_chars:
            self._release(text_out, "block_too_long")

    def _release(self, text_out: list[str], rule: str) -> None:
        """Give up on the open block/header: its text (markers included) becomes text."""
        text = "".join(self._buf)
        if self.recover:
            self._note(GUARD, rule, self._buf_offset, "", kind=self._kind, chars=len(text))
        text_out.append(text)
        self._buf = []
        self._buf_chars = 0
        self._state = _TEXT
        self._call = False

    def _is_reasoning(self) -> bool:
        return self._channel == "analysis" or (
            bool(self._recipient) and not self._is_function(self._recipient)
        )

    def _is_function(self, recipient: str) -> bool:
        return recipient.startswith(self.config.harmony_function_namespace + ".")

    def _marker(
        self,
        marker: str,
        offset: int,
        text_out: list[str],
        reason_out: list[str],
        calls: list[FunctionCall],
    ) -> None:
        role, kind = self._v.role[marker]
        if self._hs != _HS_OFF:  # a marker: not a stream with its tokens stripped
            self._hs_release(text_out)
            self._hs = _HS_OFF
        state = self._state
        if state == _BLOCK:
            if marker == self._closer:
                self._buf.append(marker)
                self._close_block(marker, text_out, calls, closed=True)
            else:
                self._buffer(marker, text_out)
            return
        if state == _BODY and self._call and role not in ("harmony", "special"):
            self._buffer(marker, text_out)
            return
        if role == "block_only":
            self._text(marker, offset, text_out, reason_out)
            return
        if role == "special":
            self._detect(kind, marker, offset)
            if self.recover:
                self._note(GUARD, "removed_markup", offset, marker, kind=kind)
            else:
                text_out.append(marker)
            return
        if role == "harmony":
            self._detect(kind, marker, offset)
            self._harmony(marker, offset, text_out, reason_out, calls)
            return
        if state in (_HEADER, _BODY):  # a tool marker inside a harmony message: its text
            self._text(marker, offset, text_out, reason_out)
            return
        self._detect(kind, marker, offset)
        if role == "open":
            self._state = _BLOCK
            self._kind = kind
            self._closer = _BLOCKS[marker][1]
            self._buf = [marker]
            self._buf_chars = len(marker)
            self._buf_offset = offset
            return
        # a stray tool marker outside any block
        if self.recover:
            self._note(GUARD, "removed_markup", offset, marker, kind=kind)
        else:
            text_out.append(marker)

    def _close_block(
        self, closer: str, text_out: list[str], calls: list[FunctionCall], *, closed: bool
    ) -> None:
        block = "".join(self._buf)
        kind = self._kind
        self._buf = []
        self._buf_chars = 0
        self._state = _TEXT
        if not self.recover:
            return
        got = parse_tool_block(kind, block, tools=self.tools, closed=closed)
        if got:
            self._note(GUARD, "recovered_call", self._buf_offset, block, kind=kind, calls=len(got))
            calls.extend(got)
        else:
            self._note(GUARD, "unparsed_block", self._buf_offset, "", kind=kind)
            text_out.append(block)

    # harmony ---------------------------------------------------------------------------

    def _harmony(
        self,
        marker: str,
        offset: int,
        text_out: list[str],
        reason_out: list[str],
        calls: list[FunctionCall],
    ) -> None:
        state = self._state
        if state == _HEADER:
            if marker == _H_MESSAGE:
                self._open_body(offset + len(marker))
            elif marker == _H_START:
                self._drop_header(text_out)
                self._begin_header(marker, offset)
            elif marker in _HARMONY_STOPS:
                self._drop_header(text_out)
                self._removed(marker, offset)
            else:  # <|channel|>, <|constrain|>: header separators
                self._buf.append(marker)
                self._buf_chars += len(marker)
            return
        if state == _BODY:
            if marker in (_H_START, _H_CHANNEL):
                self._end_message(text_out, reason_out, calls, closed=True)
                self._begin_header(marker, offset)
            elif marker in _HARMONY_STOPS:
                self._end_message(text_out, reason_out, calls, closed=True)
                self._removed(marker, offset)
            else:  # <|message|>, <|constrain|> inside a body: text of the body
                self._text(marker, offset, text_out, reason_out)
            return
        # outside a message
        if marker in (_H_START, _H_CHANNEL):
            self._begin_header(marker, offset)
        elif marker == _H_MESSAGE:  # a body with no header: its channel is unknown
            self._channel = ""
            self._recipient = ""
            self._removed(marker, offset)
            self._state = _BODY
            self._call = False
        else:
            self._removed(marker, offset)
            if not self.recover:
                text_out.append(marker)

    def _removed(self, marker: str, offset: int) -> None:
        if self.recover:
            self._note(GUARD, "removed_markup", offset, marker, kind=HARMONY)

    def _begin_header(self, marker: str, offset: int) -> None:
        self._state = _HEADER
        self._kind = HARMONY
        self._buf = [marker]
        self._buf_chars = 0
        self._buf_offset = offset

    def _drop_header(self, text_out: list[str]) -> None:
        header = "".join(self._buf)
        if self.recover and header:
            self._note(GUARD, "removed_markup", self._buf_offset, header, kind=HARMONY)
        self._buf = []
        self._buf_chars = 0
        self._state = _TEXT

    def _open_body(self, body_offset: int) -> None:
        header = "".join(self._buf)
        channel = ""
        at = header.find(_H_CHANNEL)
        if at >= 0:
            rest = header[at + len(_H_CHANNEL) :].split()
            channel = rest[0] if rest else ""
            channel = channel.split("<|", 1)[0]
        m = _RECIPIENT_RE.search(header)
        self._channel = channel
        self._recipient = m.group(1) if m else ""
        if self.recover:
            self._note(
                GUARD,
                "removed_markup",
                self._buf_offset,
                header + _H_MESSAGE,
                kind=HARMONY,
                channel=channel,
            )
        self._call = bool(self._recipient) and self._is_function(self._recipient)
        self._buf = []
        self._buf_chars = 0
        self._buf_offset = body_offset
        self._state = _BODY

    def _end_message(
        self,
        text_out: list[str],
        reason_out: list[str],
        calls: list[FunctionCall],
        *,
        closed: bool,
    ) -> None:
        if self._call:
            body = "".join(self._buf)
            name = self._recipient[len(self.config.harmony_function_namespace) + 1 :]
            if self.recover:
                call = make_call(name, body, HARMONY, closed=closed, recipient=self._recipient)
                calls.append(call)
                self._note(GUARD, "recovered_call", self._buf_offset, body, kind=HARMONY, calls=1)
        self._buf = []
        self._buf_chars = 0
        self._call = False
        self._channel = ""
        self._recipient = ""
        self._state = _TEXT


_RECIPIENT_RE = re.compile(r"to=([^\s<]+)")


def scan_markup(
    deltas: str | Iterable[str],
    config: MarkupGuardConfig | None = None,
    *,
    recover: bool = False,
    tools: Iterable[Any] | None = None,
) -> tuple[MarkupOutput, list[MarkupDetection]]:
    """Feed every delta through a fresh :class:`MarkupGuard`, then flush: the whole output
    joined, and the detections. The non-streaming path is this function.

    >>> out, found = scan_markup("Hi<|im_end|>", recover=True)
    >>> out.text, [(d.kind, d.offset) for d in found]
    ('Hi', [('special_token', 2)])
    """
    guard = MarkupGuard(config, recover=recover, tools=tools)
    if isinstance(deltas, str):
        deltas = (deltas,)
    text: list[str] = []
    reasoning: list[str] = []
    calls: list[FunctionCall] = []
    for d in deltas:
        out = guard.feed(d)
        text.append(out.text)
        reasoning.append(out.reasoning)
        calls.extend(out.calls)
    out = guard.flush()
    text.append(out.text)
    reasoning.append(out.reasoning)
    calls.extend(out.calls)
    return MarkupOutput("".join(text), "".join(reasoning), tuple(calls)), guard.detections


def markup_kinds(*texts: str, config: MarkupGuardConfig | None = None) -> list[str]:
    """The classes of markup found in whole ``texts``, in :data:`MARKUP_CLASSES` order.

    >>> markup_kinds("a<|im_end|>", "<tool_call>x</tool_call>")
    ['xml_tool_call', 'special_token']
    """
    found: set[str] = set()
    v = _vocab(config or _DEFAULT_CONFIG)
    heads = v.hs_heads if v.hs_on else ()
    for text in texts:
        if text and ("<" in text or text.startswith(heads)):
            found.update(d.kind for d in scan_markup(text, config)[1])
    return [k for k in MARKUP_CLASSES if k in found]
