"""What every streaming guard shares: its output shape and the notes it emits.

Guards are pure: they do no I/O and know nothing about streams, attempts or files. Each one
records a :class:`GuardNote` whenever it moves, drops, truncates or recovers text; the adapter
drains the notes after each call and turns them into :class:`lab.model.GuardEvent` with the
stream id, attempt and raw-chunk sequence number filled in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

__all__ = ["GuardNote", "GuardOutput", "NoteSink"]


class GuardOutput(NamedTuple):
    """Text a guard releases now: visible ``content`` and ``reasoning`` moved out of it."""

    content: str = ""
    reasoning: str = ""


@dataclass(slots=True)
class GuardNote:
    """One thing a guard did. ``offset`` counts characters of the guard's own input."""

    guard: str
    rule: str
    offset: int
    moved: str
    detail: dict[str, Any] = field(default_factory=dict)


class NoteSink:
    """Mixin: a guard keeps its notes here until the adapter drains them."""

    __slots__ = ()
    notes: list[GuardNote]  # a slot of each guard that mixes this in

    def _note(self, guard: str, rule: str, offset: int, moved: str, **detail: Any) -> None:
        self.notes.append(GuardNote(guard, rule, offset, moved, detail))

    def drain_notes(self) -> list[GuardNote]:
        notes = self.notes
        if notes:
            self.notes = []  # type: ignore[misc]  # the slot is the subclass's (see above)
        return notes
