"""Final clean-up sweep over finished text: leftover reasoning tags (``cleanLLMOutput``).

The streaming :class:`~lab.guards.think.ThinkBlockStripper` handles tags as they arrive;
this sweep is the last line of defence over a complete text (for example text assembled by
a path that did not run the stripper). It uses the same tag shape (:mod:`lab.guards.tags`).

The reference names the sweep but does not spell out its rules, so this is the lab's
choice, kept conservative because it only sees finished text:

- ``<think>…</think>``: the block's inner text moves to reasoning, both tags go;
- an opener never closed: everything after it moves to reasoning;
- a stray closer (no opener before it) and a nested opener inside a block: the tag is
  removed, the surrounding text stays where it was (unlike the streaming stripper, the
  sweep does not reinterpret visible prose before a stray closer as reasoning);
- a partial tag at the end (``<thi``) is left alone: in finished text it is just text.

Every move and every removed tag records a note (guard ``"cleanup"``, rules
``think_block``, ``unclosed_block``, ``stray_tag``); offsets index the input text.
"""

from __future__ import annotations

from .base import GuardNote, GuardOutput
from .tags import REASONING_TAG_RE

__all__ = ["final_cleanup"]

GUARD = "cleanup"


def final_cleanup(text: str, notes: list[GuardNote] | None = None) -> GuardOutput:
    """Remove leftover reasoning tags from finished ``text``; returns (content, reasoning).

    Pass a list as ``notes`` to receive the :class:`GuardNote` records.

    >>> final_cleanup("a<think>b</think>c</think>d")
    GuardOutput(content='acd', reasoning='b')
    """
    if "<" not in text:
        return GuardOutput(text, "")
    sink: list[GuardNote] = notes if notes is not None else []
    vis: list[str] = []
    th: list[str] = []
    pos = 0
    block_at = -1  # start of the current block's inner text, or -1 outside a block
    block: list[str] = []  # the current block's reasoning pieces (nested tags removed)
    for m in REASONING_TAG_RE.finditer(text):
        closing = bool(m.group(1))
        if block_at < 0:
            vis.append(text[pos : m.start()])
            if closing:
                sink.append(GuardNote(GUARD, "stray_tag", m.start(), m.group(0)))
            else:
                block_at = m.end()
                block = []
        else:
            block.append(text[pos : m.start()])
            if closing:
                inner = "".join(block)
                th.append(inner)
                if inner:
                    sink.append(GuardNote(GUARD, "think_block", block_at, inner))
                block_at = -1
            else:
                sink.append(GuardNote(GUARD, "stray_tag", m.start(), m.group(0)))
        pos = m.end()
    if block_at >= 0:
        block.append(text[pos:])
        inner = "".join(block)
        th.append(inner)
        if inner:
            sink.append(GuardNote(GUARD, "unclosed_block", block_at, inner))
    else:
        vis.append(text[pos:])
    return GuardOutput("".join(vis), "".join(th))
