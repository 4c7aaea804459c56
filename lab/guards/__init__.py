"""Pure streaming text guards: they move leaked reasoning, drop repeats, cut at speaker
lines and recover tool calls, and record a :class:`GuardNote` for every such action.

No guard does I/O or knows about streams, attempts or files; each has ``feed``/``filter``
and ``flush`` (or is a plain function) and keeps its notes until ``drain_notes()``.

- :mod:`.tags` — the one definition of a reasoning tag;
- :mod:`.think` — ``ThinkBlockStripper``, ``split_think_blocks``;
- :mod:`.spill` — ``SpillGuardConfig``, ``SpillGuard``, ``find_spill_seam``;
- :mod:`.text` — ``RecentTextDedup``, ``SpeakerBoundaryGuard``,
  ``truncate_before_generic_speaker_line``;
- :mod:`.stops` — ``merge_stop_strings``, ``build_provider_stop_strings``;
- :mod:`.cleanup` — ``final_cleanup``;
- :mod:`.verbatim` — ``VerbatimToolCallParser``, ``VerbatimOutput``;
- :mod:`.markup` — ``MarkupGuard``, ``MarkupGuardConfig``, ``scan_markup``,
  ``parse_tool_block`` (leaked protocol markup: harmony, tool blocks, special tokens);
- :mod:`.json_repair` — ``repair_truncated_json``, ``parse_tool_arguments``.
"""

from .base import GuardNote, GuardOutput, NoteSink
from .cleanup import final_cleanup
from .json_repair import ParsedArguments, parse_tool_arguments, repair_truncated_json
from .markup import (
    MarkupDetection,
    MarkupGuard,
    MarkupGuardConfig,
    MarkupOutput,
    parse_tool_block,
    scan_markup,
)
from .spill import SpillGuard, SpillGuardConfig, find_spill_seam
from .stops import build_provider_stop_strings, merge_stop_strings
from .tags import find_trailing_tag_prefix
from .text import (
    RecentTextDedup,
    SpeakerBoundaryGuard,
    SpeakerTruncation,
    find_markdown_code_ranges,
    truncate_before_generic_speaker_line,
)
from .think import ThinkBlockStripper, split_think_blocks
from .verbatim import VerbatimOutput, VerbatimToolCallParser

__all__ = [
    "GuardNote",
    "GuardOutput",
    "MarkupDetection",
    "MarkupGuard",
    "MarkupGuardConfig",
    "MarkupOutput",
    "NoteSink",
    "ParsedArguments",
    "RecentTextDedup",
    "SpeakerBoundaryGuard",
    "SpeakerTruncation",
    "SpillGuard",
    "SpillGuardConfig",
    "ThinkBlockStripper",
    "VerbatimOutput",
    "VerbatimToolCallParser",
    "build_provider_stop_strings",
    "final_cleanup",
    "find_markdown_code_ranges",
    "find_spill_seam",
    "find_trailing_tag_prefix",
    "merge_stop_strings",
    "parse_tool_arguments",
    "parse_tool_block",
    "repair_truncated_json",
    "scan_markup",
    "split_think_blocks",
    "truncate_before_generic_speaker_line",
]
