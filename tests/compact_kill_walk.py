"""Compaction killed at every file operation, and what readers see afterwards.

``lab capture compact`` touches the disk through a known list of operations: it writes each
new part (a whole Parquet file), writes the manifest to a temporary name, renames it into
place, renames each new part into place, removes each old part and removes the manifest.
:func:`run` performs a compaction of a copy of the bundled capture and *dies* just before
operation ``position`` (mode ``kill``), or half-way through it when it writes a file
(mode ``torn``: half of the bytes reach the disk): the operation raises :class:`Killed`, a
``BaseException`` nothing in the lab catches, and nothing runs after it. What is left on
disk is what a SIGKILL at that point leaves (no operation is buffered in the process:
pyarrow closes each part before the next operation, and the renames and removals are
system calls).

:func:`check` then counts, against the capture before compaction:

- ``unopenable``: ``lab.capture.open`` of the root, or of one of its
  ``capture_units``, raised;
- ``wrong_bytes``: bytes by which the exchanges read differ from the originals (an exchange
  missing or extra counts all its bytes; reads doubled count the extra copy);

for the capture as the kill left it, and again after the next ``compact`` (which must
finish or undo the cut one). ``python tests/compact_kill_walk.py`` walks every position of
both modes and prints the totals; run it with ``PYTHONPATH`` at another checkout to measure
that one.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = ROOT / "captures"
TARGET_BYTES = 60_000
"""Raw bytes per compacted part in the walk: the bundled 400 KB become several parts, so
a kill can fall between two new parts as well as between the tables of one."""
MODES = ("kill", "torn")


class Killed(BaseException):
    """The process died here (raised by an intercepted file operation)."""


@contextmanager
def dying_at(position: int, mode: str) -> Iterator[list[str]]:
    """Intercept compaction's file operations; the ``position``-th one kills (0-based).
    Yields the list of operations seen (for counting)."""
    import lab.capture.compact as compact

    seen: list[str] = []
    real_write = compact._write
    real_replace = os.replace
    real_unlink = Path.unlink
    real_write_text = Path.write_text

    def step(what: str) -> bool:
        """True when this operation is the one that kills (torn: after half of it)."""
        seen.append(what)
        hit = len(seen) - 1 == position
        if hit and (mode == "kill" or not what.startswith("write")):
            raise Killed(what)
        return hit

    def write(table: Any, path: Path, metadata: Any, rows: int) -> None:
        torn = step(f"write {path.name}")
        real_write(table, path, metadata, rows)
        if torn:
            data = path.read_bytes()
            path.write_bytes(data[: len(data) // 2])
            raise Killed(f"torn {path.name}")

    def write_text(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        torn = step(f"write {self.name}")
        if torn:
            real_write_text(self, text[: len(text) // 2], *args, **kwargs)
            raise Killed(f"torn {self.name}")
        return real_write_text(self, text, *args, **kwargs)

    def replace(src: Any, dst: Any) -> None:
        step(f"rename {Path(src).name} -> {Path(dst).name}")
        real_replace(src, dst)

    def unlink(self: Path, missing_ok: bool = False) -> None:
        if self.exists():  # removing nothing touches no disk
            step(f"remove {self.name}")
        real_unlink(self, missing_ok=missing_ok)

    compact._write = write  # type: ignore[assignment]
    compact.os.replace = replace  # type: ignore[assignment]
    Path.unlink = unlink  # type: ignore[assignment,method-assign]
    Path.write_text = write_text  # type: ignore[assignment,method-assign]
    try:
        yield seen
    finally:
        compact._write = real_write  # type: ignore[assignment]
        compact.os.replace = real_replace
        Path.unlink = real_unlink  # type: ignore[method-assign]
        Path.write_text = real_write_text  # type: ignore[method-assign]


def exchanges(path: Path | list[Path]) -> dict[tuple[str, int], bytes]:
    """Every exchange's reads joined, by (capture_id, exchange)."""
    import lab.capture

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cap = lab.capture.open(path)
    out: dict[tuple[str, int], bytes] = {}
    for ex in cap.exchanges():
        key = (str(ex.capture_id), int(ex.exchange or 0))
        out[key] = out.get(key, b"") + b"".join(ex.reads)
    return out


def wrong_bytes(got: dict[tuple[str, int], bytes], want: dict[tuple[str, int], bytes]) -> int:
    bad = 0
    for key in set(got) | set(want):
        a, b = got.get(key, b""), want.get(key, b"")
        if a != b:
            bad += max(len(a), len(b))
    return bad


def check(root: Path, want: dict[tuple[str, int], bytes]) -> tuple[int, int, str]:
    """(unopenable, wrong bytes, first error) of the capture at ``root`` read whole and
    unit by unit."""
    from lab.capture.units import capture_units

    unopenable, wrong, first = 0, 0, ""
    try:
        wrong += wrong_bytes(exchanges(root), want)
    except Exception as exc:
        unopenable += 1
        first = f"{type(exc).__name__}: {exc}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            units = capture_units(root)
        merged: dict[tuple[str, int], bytes] = {}
        for unit in units:
            for key, data in exchanges(list(unit.files)).items():
                merged[key] = merged.get(key, b"") + data
        wrong += wrong_bytes(merged, want)
    except Exception as exc:
        unopenable += 1
        first = first or f"units: {type(exc).__name__}: {exc}"
    return unopenable, wrong, first


def operations(tmp: Path) -> list[str]:
    """The file operations of one whole compaction of the bundled capture."""
    import lab.capture.compact

    root = tmp / "count"
    shutil.copytree(BUNDLED, root)
    with dying_at(-1, "kill") as seen:
        lab.capture.compact.compact(root, target_bytes=TARGET_BYTES)
    shutil.rmtree(root)
    return list(seen)


def run(tmp: Path, position: int, mode: str, want: dict[tuple[str, int], bytes]) -> dict[str, Any]:
    """One compaction killed at ``position``; the counts before and after recovery."""
    import lab.capture.compact

    root = tmp / f"{mode}-{position}"
    shutil.copytree(BUNDLED, root)
    killed_at = None
    with dying_at(position, mode):
        try:
            lab.capture.compact.compact(root, target_bytes=TARGET_BYTES)
        except Killed as k:
            killed_at = str(k)
    unopenable, wrong, error = check(root, want)
    try:
        lab.capture.compact.compact(root, target_bytes=TARGET_BYTES)
        r_unopenable, r_wrong, r_error = check(root, want)
    except Exception as exc:
        r_unopenable, r_wrong, r_error = 1, 0, f"compact again: {type(exc).__name__}: {exc}"
    shutil.rmtree(root)
    return {
        "position": position,
        "mode": mode,
        "killed_at": killed_at,
        "unopenable": unopenable,
        "wrong_bytes": wrong,
        "error": error,
        "after_recompact_unopenable": r_unopenable,
        "after_recompact_wrong_bytes": r_wrong,
        "after_recompact_error": r_error,
    }


def walk(
    positions: Callable[[int], list[int]] | None = None, modes: tuple[str, ...] = MODES
) -> list[dict[str, Any]]:
    want = exchanges(BUNDLED)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        n = len(operations(tmp))
        chosen = positions(n) if positions else list(range(n))
        return [run(tmp, p, m, want) for m in modes for p in chosen]


def main(argv: list[str]) -> int:
    results = walk()
    bad = [r for r in results if r["unopenable"] or r["wrong_bytes"]]
    bad_after = [
        r for r in results if r["after_recompact_unopenable"] or r["after_recompact_wrong_bytes"]
    ]
    for mode in MODES:
        rs = [r for r in results if r["mode"] == mode]
        print(
            f"{mode}: {len(rs)} positions; unopenable states {sum(r['unopenable'] > 0 for r in rs)}, "
            f"states with wrong bytes {sum(r['wrong_bytes'] > 0 for r in rs)} "
            f"({sum(r['wrong_bytes'] for r in rs):,} bytes); after the next compact: "
            f"unopenable {sum(r['after_recompact_unopenable'] > 0 for r in rs)}, wrong bytes "
            f"{sum(r['after_recompact_wrong_bytes'] for r in rs):,}"
        )
    for r in (bad + bad_after)[:5]:
        print(
            "  e.g.",
            r["mode"],
            r["position"],
            r["killed_at"],
            r["error"] or r["after_recompact_error"],
        )
    return 1 if bad or bad_after else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
