"""Reasoning spill guard: a tagless reasoning tail glued to the first visible content.

The rule: docs/reference.md, "7.3 The spill guard". Some backends concatenate their reasoning
buffer onto the first content delta with no separator (``"must do.Hello!"``). The guard looks
only at the first visible content after reasoning was seen, and only when it starts with a
lowercase letter. It finds the first sentence boundary; if the text right after the boundary is
*glued* to it (no whitespace) and either looks like the start of an answer (uppercase or
caseless letter, emoji, quote or bracket) or the fragment before it is a multi-word clause, the
fragment is moved to reasoning. A spaced boundary (``"wait. Actually"``) is the model's own
prose and is left alone, as is a single-word fragment glued to a lowercase continuation
(``"obj.method"``), a boundary inside an open inline-code span (odd number of backticks before
it) and a decimal point.

While the decision is open (no boundary yet, a boundary run at the very end, only
whitespace after it) the content is held, up to :attr:`SpillGuardConfig.hold_limit_chars`
characters of core text (reference ``MAX_PENDING_CONTENT_CHARS = 180``); past that it is
emitted untouched. Because of that cap the guard is split-invariant only for first content
shorter than the cap.

One definition: :func:`find_spill_seam` (the whole text taken as complete) and
:class:`SpillGuard` (streaming) both call :func:`evaluate_spill`. Every heuristic is a
field of :class:`SpillGuardConfig` whose default is the reference value.
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_right
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from .base import GuardOutput, NoteSink

__all__ = [
    "SpillDecision",
    "SpillGuard",
    "SpillGuardConfig",
    "evaluate_spill",
    "find_spill_seam",
    "is_answer_start",
    "is_extended_pictographic",
    "is_lowercase_letter",
]

GUARD = "spill_guard"
_EMPTY = GuardOutput("", "")
_tuple_new = tuple.__new__  # a NamedTuple without its Python __new__


class SpillGuardConfig(BaseModel):
    """Every spill-guard heuristic, defaults = reference behaviour. Immutable, JSON-safe."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True
    """Master switch. Off: content passes through untouched."""
    require_reasoning_first: bool = True
    """Only inspect content when reasoning was observed before any visible content."""
    hold_limit_chars: int = Field(180, ge=0)
    """Hold undecided content while its core (after leading whitespace) is shorter than this."""
    require_lowercase_start: bool = True
    """Only content whose first non-space character is a lowercase letter can spill."""
    boundary_chars: str = ".!?。！？"
    """Sentence-boundary characters."""
    skip_decimal_points: bool = True
    """A ``.`` with a digit on both sides is not a boundary."""
    extend_boundary_run: bool = True
    """The boundary covers the whole run of consecutive boundary characters (``...``, ``?!``)."""
    protect_open_inline_code: bool = True
    """An odd number of backticks before the boundary (open inline code) emits unchanged."""
    require_glued_boundary: bool = True
    """Only a boundary followed directly by non-whitespace (a glued seam) can be stripped."""
    strip_on_answer_start: bool = True
    """Strip when the text after the seam looks like an answer start."""
    strip_on_multi_word_clause: bool = True
    """Strip when the fragment before the seam is a clause of ``min_clause_words`` words."""
    min_clause_words: int = Field(2, ge=1)
    """Words (whitespace-separated) that make the fragment a clause (reference: has whitespace)."""
    answer_start_chars: str = "*_([{\"'“”‘’「『（"
    """Characters that start an answer (markdown emphasis, brackets, quotes)."""
    answer_start_uppercase: bool = True
    """An uppercase letter (``\\p{Lu}``) starts an answer."""
    answer_start_caseless: bool = True
    """A caseless or titlecase letter (``\\p{Lo}``/``\\p{Lt}``: CJK, kana, hangul) starts an answer."""
    answer_start_emoji: bool = True
    """An Extended_Pictographic character starts an answer."""


_DEFAULT_CONFIG = SpillGuardConfig()
_DIGITS = "0123456789"

# Extended_Pictographic (Unicode emoji-data), as inclusive code point ranges.
_EP_RANGES: tuple[tuple[int, int], ...] = (
    (0x00A9, 0x00A9), (0x00AE, 0x00AE), (0x203C, 0x203C), (0x2049, 0x2049),
    (0x2122, 0x2122), (0x2139, 0x2139), (0x2194, 0x2199), (0x21A9, 0x21AA),
    (0x231A, 0x231B), (0x2328, 0x2328), (0x2388, 0x2388), (0x23CF, 0x23CF),
    (0x23E9, 0x23F3), (0x23F8, 0x23FA), (0x24C2, 0x24C2), (0x25AA, 0x25AB),
    (0x25B6, 0x25B6), (0x25C0, 0x25C0), (0x25FB, 0x25FE), (0x2600, 0x2605),
    (0x2607, 0x2612), (0x2614, 0x2685), (0x2690, 0x2705), (0x2708, 0x2712),
    (0x2714, 0x2714), (0x2716, 0x2716), (0x271D, 0x271D), (0x2721, 0x2721),
    (0x2728, 0x2728), (0x2733, 0x2734), (0x2744, 0x2744), (0x2747, 0x2747),
    (0x274C, 0x274C), (0x274E, 0x274E), (0x2753, 0x2755), (0x2757, 0x2757),
    (0x2763, 0x2767), (0x2795, 0x2797), (0x27A1, 0x27A1), (0x27B0, 0x27B0),
    (0x27BF, 0x27BF), (0x2934, 0x2935), (0x2B05, 0x2B07), (0x2B1B, 0x2B1C),
    (0x2B50, 0x2B50), (0x2B55, 0x2B55), (0x3030, 0x3030), (0x303D, 0x303D),
    (0x3297, 0x3297), (0x3299, 0x3299), (0x1F000, 0x1F0FF), (0x1F10D, 0x1F10F),
    (0x1F12F, 0x1F12F), (0x1F16C, 0x1F171), (0x1F17E, 0x1F17F), (0x1F18E, 0x1F18E),
    (0x1F191, 0x1F19A), (0x1F1AD, 0x1F1E5), (0x1F201, 0x1F20F), (0x1F21A, 0x1F21A),
    (0x1F22F, 0x1F22F), (0x1F232, 0x1F23A), (0x1F23C, 0x1F23F), (0x1F249, 0x1F3FA),
    (0x1F400, 0x1F53D), (0x1F546, 0x1F64F), (0x1F680, 0x1F6FF), (0x1F774, 0x1F77F),
    (0x1F7D5, 0x1F7FF), (0x1F80C, 0x1F80F), (0x1F848, 0x1F84F), (0x1F85A, 0x1F85F),
    (0x1F888, 0x1F88F), (0x1F8AE, 0x1F8FF), (0x1F90C, 0x1F93A), (0x1F93C, 0x1F945),
    (0x1F947, 0x1FAFF), (0x1FC00, 0x1FFFD),
)  # fmt: skip
_EP_STARTS = tuple(r[0] for r in _EP_RANGES)


def is_extended_pictographic(ch: str) -> bool:
    """True for an ``Extended_Pictographic`` code point (emoji and pictographs)."""
    cp = ord(ch)
    i = bisect_right(_EP_STARTS, cp) - 1
    return i >= 0 and cp <= _EP_RANGES[i][1]


def is_lowercase_letter(ch: str) -> bool:
    """The reference's "lowercase": equals its lowercase form and differs from its uppercase."""
    return ch == ch.lower() and ch != ch.upper()


def is_answer_start(text: str, config: SpillGuardConfig | None = None) -> bool:
    """Does ``text`` start like an answer (an uppercase or caseless letter, an emoji, a quote
    or a bracket, as configured)?"""
    if not text:
        return False
    cfg = config or _DEFAULT_CONFIG
    ch = text[0]
    if ch in cfg.answer_start_chars:
        return True
    cat = unicodedata.category(ch)
    if cfg.answer_start_uppercase and cat == "Lu":
        return True
    if cfg.answer_start_caseless and cat in ("Lo", "Lt"):
        return True
    return cfg.answer_start_emoji and is_extended_pictographic(ch)


class SpillDecision(NamedTuple):
    """What to do with a candidate: ``hold`` it, ``emit`` it unchanged, or ``strip`` it.

    For ``strip``, ``seam`` is the offset where the answer starts (``text[:seam]`` leaked).
    ``rule`` names the reason (``answer_start`` or ``multi_word_clause`` for a strip).
    """

    action: Literal["hold", "emit", "strip"]
    seam: int | None = None
    rule: str = ""


def evaluate_spill(text: str, config: SpillGuardConfig | None = None) -> SpillDecision:
    """The spill test over one candidate (pending + new content): hold, emit or strip. The one
    definition."""
    cfg = config or _DEFAULT_CONFIG
    core_at = len(text) - len(text.lstrip())
    if core_at == len(text):
        return SpillDecision("hold", rule="blank")  # 1. core empty
    core_len = len(text) - core_at
    if cfg.require_lowercase_start and not is_lowercase_letter(text[core_at]):
        return SpillDecision("emit", rule="not_lowercase")  # 2.
    # 3. first sentence boundary in the core
    bchars = cfg.boundary_chars
    i = core_at
    n = len(text)
    b = -1
    while i < n:
        ch = text[i]
        if ch in bchars:
            if (
                ch == "."
                and cfg.skip_decimal_points
                and i > core_at
                and i + 1 < n
                and text[i - 1] in _DIGITS
                and text[i + 1] in _DIGITS
            ):
                i += 1
                continue
            b = i
            break
        i += 1
    if b < 0:
        if core_len < cfg.hold_limit_chars:
            return SpillDecision("hold", rule="no_boundary")
        return SpillDecision("emit", rule="hold_limit")
    # 4. open inline code before the boundary
    if cfg.protect_open_inline_code and text.count("`", core_at, b) % 2 == 1:
        return SpillDecision("emit", rule="inline_code")
    # 5. extend over the run of boundary characters
    end = b + 1
    if cfg.extend_boundary_run:
        while end < n and text[end] in bchars:
            end += 1
    if end >= n:
        if core_len < cfg.hold_limit_chars:
            return SpillDecision("hold", rule="boundary_at_end")
        return SpillDecision("emit", rule="hold_limit")
    # 6. remainder only whitespace -> hold
    remainder = text[end:]
    if not remainder.strip():
        return SpillDecision("hold", rule="trailing_space")
    # 7. glued?  8. strip?
    glued = not remainder[0].isspace()
    if cfg.require_glued_boundary and not glued:
        return SpillDecision("emit", rule="spaced_boundary")
    if cfg.strip_on_answer_start and is_answer_start(remainder.lstrip(), cfg):
        return SpillDecision("strip", end, "answer_start")
    if cfg.strip_on_multi_word_clause and len(text[core_at:end].split()) >= cfg.min_clause_words:
        return SpillDecision("strip", end, "multi_word_clause")
    return SpillDecision("emit", rule="no_seam")


def find_spill_seam(text: str, config: SpillGuardConfig | None = None) -> int | None:
    """Where the answer starts in ``text``, the first visible content after reasoning.

    ``text`` is taken as complete (nothing more will arrive), so undecided cases count as
    "no seam". Returns the offset of the answer (``text[:offset]`` is leaked reasoning) or
    None to emit the text untouched. ``config.enabled`` is ignored here; the seam logic is
    the same one :class:`SpillGuard` uses.

    >>> find_spill_seam("must do.Hello!")
    8
    >>> find_spill_seam("wait. Actually") is None
    True
    """
    d = evaluate_spill(text, config)
    return d.seam if d.action == "strip" else None


class SpillGuard(NoteSink):
    """Streaming spill guard: ``observe_reasoning``, then ``filter`` content; ``flush``.

    ``filter`` and ``flush`` return ``GuardOutput(content, reasoning)``; ``reasoning`` is the
    stripped fragment, trimmed, as the reference appends it to the reasoning channel. A strip
    records a note (guard ``"spill_guard"``, rule ``answer_start`` or ``multi_word_clause``)
    whose offset counts characters of the guard's content input.
    """

    __slots__ = ("notes", "config", "inspecting", "_saw_reasoning", "_pending", "_pending_at",
                 "_hold_rule", "_fed")  # fmt: skip

    def __init__(self, config: SpillGuardConfig | None = None) -> None:
        self.notes = []
        self.config = config or _DEFAULT_CONFIG
        self._saw_reasoning = False
        self.inspecting = True
        """False once visible content went out: from then on :meth:`filter` returns every
        delta as it came, with no reasoning and no note, so a caller may skip the call
        (the adapters' per-delta paths do)."""
        self._pending: list[str] = []
        self._pending_at = 0
        self._hold_rule = ""
        self._fed = 0

    @property
    def visible_started(self) -> bool:
        """True once visible content went out (the guard no longer inspects content)."""
        return not self.inspecting

    def observe_reasoning(self, text: str | None) -> None:
        """Note reasoning seen before any visible content (enables the guard)."""
        if self.inspecting and text:
            self._saw_reasoning = True

    def filter(self, content: str) -> GuardOutput:
        """Filter one content delta; returns what to emit now and any spilled reasoning."""
        if not content:
            return _EMPTY
        cfg = self.config
        if (
            not self.inspecting
            or not cfg.enabled
            or (cfg.require_reasoning_first and not self._saw_reasoning)
        ):  # passed through from now on: no offset of a later note to count toward
            self.inspecting = False
            return _tuple_new(GuardOutput, (content, ""))  # GuardOutput(content, ""), per delta
        at = self._fed
        self._fed += len(content)
        if self._pending:
            # Linear-time shortcuts: held whitespace stays undecided while only whitespace
            # arrives (steps 1 and 6 hold without a length cap).
            if self._hold_rule in ("blank", "trailing_space") and content.isspace():
                self._pending.append(content)
                return _EMPTY
            candidate = "".join(self._pending) + content
            at = self._pending_at
            self._pending = []
        else:
            candidate = content
        d = evaluate_spill(candidate, cfg)
        if d.action == "hold":
            self._pending = [candidate]
            self._pending_at = at
            self._hold_rule = d.rule
            return _EMPTY
        self.inspecting = False
        if d.action == "emit":
            return GuardOutput(candidate, "")
        seam = d.seam or 0
        leaked = candidate[:seam]
        thought = leaked.strip()
        self._note(GUARD, d.rule, at + len(leaked) - len(leaked.lstrip()), thought, seam=seam)
        return GuardOutput(candidate[seam:], thought)

    def flush(self) -> GuardOutput:
        """End of stream: release held content unchanged."""
        if not self._pending:
            return _EMPTY
        out = "".join(self._pending)
        self._pending = []
        self.inspecting = False
        return GuardOutput(out, "")
