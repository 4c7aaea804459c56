"""``lab capture compact DIR``: merge a recording's small parts into large ones.

A recording written by a slow trickle of traffic has many small parts (the writer writes a
part at least every ``flush_interval``), and thousands of small files make every scan pay
per file. Compaction rewrites each recording under ``DIR`` as few large parts:

- whole units only (:mod:`lab.capture.units`): every attempt of a logical request lands in
  one part, so each new part is self-contained;
- rows sorted (streams by start time, stream and attempt; chunks by stream, attempt,
  exchange and sequence), so one stream's reads are contiguous;
- large row groups (about :data:`ROW_GROUP_BYTES` of data each);
- no statistics and no dictionary on ``raw`` (min/max of bytes is never a useful filter and
  a dictionary of unique reads only grows the file), and no ``ARROW:schema`` blob in the
  footer (the Parquet schema says the same); the ``lab.*`` footer keys are kept, so the
  result is still a Stream Lab capture that ``lab.capture.open`` reads exactly as before.

Recordings with journals (in progress, or crashed before ``close()``) are left alone: open
them once so the reader recovers the journals, or let the recorder finish. Rows are copied,
never changed: the bytes stay the source of truth.

The swap is atomic from a reader's point of view. New parts are written under hidden names
(readers never look at them), then a manifest naming old and new files is written with one
rename (the commit point), then the new parts are renamed into place, then the old ones are
removed, then the manifest. While the manifest is there, readers
(:func:`lab.capture.open`, :func:`lab.capture.units.capture_units`) see one of the two
whole sets, never both (:func:`hidden_by_compaction`): the old parts until every new part
has its final name (old parts are only removed after that), the new ones from then on. A run
cut short before the manifest leaves only hidden files (removed next time); one cut after
it is finished by the next run, from the manifest. A reader that finds a part gone (removed
by a compaction that moved on after the reader listed the directory) reads again.

Only whole Stream Lab parts of this lab's schema version are compacted: a recording holding
a part of another version or a Parquet file that is no capture part is left alone, and the
report says why (rewriting it would relabel the rows as this version and delete the
originals).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = [
    "COMPACT_TARGET_BYTES",
    "MANIFEST",
    "ROW_GROUP_BYTES",
    "CompactReport",
    "compact",
    "hidden_by_compaction",
]

COMPACT_TARGET_BYTES = 128 * 1024 * 1024
"""Raw bytes (sum of ``n_bytes``) a compacted part aims at; a unit is never split."""
ROW_GROUP_BYTES = 64 * 1024 * 1024
"""Data per row group of a compacted ``chunks`` part (streams parts are one row group)."""

_PART = re.compile(r"^(streams|chunks)-(\d+)\.parquet$")
MANIFEST = ".compact-manifest.json"
"""The compaction manifest in a recording directory: ``{"rename": [[hidden, final], ...],
"remove": [old part, ...]}``; present from the commit point until the swap is done."""
_STREAMS_ORDER = [("started_at", "ascending"), ("stream_id", "ascending"), ("attempt", "ascending")]
_CHUNKS_ORDER = [
    ("stream_id", "ascending"),
    ("attempt", "ascending"),
    ("exchange", "ascending"),
    ("seq", "ascending"),
]


@dataclass
class CompactReport:
    """What :func:`compact` did, per recording directory."""

    recordings: list[Path] = field(default_factory=list)  # compacted
    skipped: dict[Path, str] = field(default_factory=dict)  # left alone, and why
    parts_before: int = 0
    parts_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0


def _recordings(root: Path) -> list[Path]:
    if not root.is_dir():
        raise ValueError(f"{root}: not a directory")
    dirs = {p.parent for p in root.rglob("*.parquet") if _PART.match(p.name)}
    dirs |= {p.parent for p in root.rglob(MANIFEST)}
    return sorted(dirs)


def compact(
    root: str | Path,
    *,
    target_bytes: int = COMPACT_TARGET_BYTES,
    row_group_bytes: int = ROW_GROUP_BYTES,
) -> CompactReport:
    """Compact every recording directory under ``root`` (``root`` itself may be one)."""
    from lab.capture.journal import JOURNAL_SUFFIX

    report = CompactReport()
    for rec in _recordings(Path(root)):
        _finish(rec)  # a run cut short after its manifest
        for stale in rec.glob(".*.parquet.compact"):
            stale.unlink()
        if any(rec.glob(f"*{JOURNAL_SUFFIX}")):
            report.skipped[rec] = "has journals (recording in progress or crashed)"
            continue
        parts = sorted(p for p in rec.iterdir() if _PART.match(p.name))
        refused = _refusal(rec, parts)
        if refused:
            report.skipped[rec] = refused
            continue
        before = sum(p.stat().st_size for p in parts)
        new, after = _compact_recording(rec, parts, target_bytes, row_group_bytes)
        report.recordings.append(rec)
        report.parts_before += len(parts)
        report.parts_after += new
        report.bytes_before += before
        report.bytes_after += after
    return report


def _refusal(rec: Path, parts: list[Path]) -> str | None:
    """Why ``rec`` must not be compacted, or None: a part that is not a Stream Lab part of
    this lab's schema version (its footer says another table or version, or it has none), or
    another Parquet file among the parts (not named like one)."""
    from lab.capture.schema import FOOTER_SCHEMA_VERSION, FOOTER_TABLE, SCHEMA_VERSION

    others = sorted(
        p.name
        for p in rec.iterdir()
        if p.suffix == ".parquet" and not p.name.startswith(".") and not _PART.match(p.name)
    )
    if others:
        return f"holds Parquet files that are not capture parts ({', '.join(others[:3])})"
    for part in parts:
        try:
            metadata = pq.ParquetFile(part).schema_arrow.metadata or {}
        except Exception as exc:
            return f"{part.name}: not a readable Parquet file ({type(exc).__name__})"
        table = metadata.get(FOOTER_TABLE, b"").decode("utf-8", "replace")
        version = metadata.get(FOOTER_SCHEMA_VERSION, b"").decode("utf-8", "replace")
        if not table or not version:
            return f"{part.name}: not a Stream Lab capture part (no lab.table / lab.schema_version)"
        if not part.name.startswith(f"{table}-"):
            return f"{part.name}: its footer says it is a {table!r} table"
        if version != str(SCHEMA_VERSION):
            return (
                f"{part.name}: capture schema version {version}, not this lab's "
                f"{SCHEMA_VERSION} (compaction would relabel its rows)"
            )
    return None


def hidden_by_compaction(directory: Path, present: set[str]) -> set[str]:
    """Names of ``directory`` a reader must pass over while a compaction is under way there
    (``present``: the names the reader listed). Without a manifest, none. With one: the new
    parts until every one of them has its final name, then the old parts.

    A manifest that cannot be read raises :class:`lab.capture.CaptureError` saying so."""
    path = directory / MANIFEST
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return set()
    except OSError as exc:
        from lab.capture.errors import CaptureError

        raise CaptureError(f"{path}: cannot read the compaction manifest ({exc})") from None
    try:
        manifest = json.loads(text)
        finals = {str(final) for _hidden, final in manifest["rename"]}
        old = {str(name) for name in manifest["remove"]}
    except (ValueError, KeyError, TypeError) as exc:
        from lab.capture.errors import CaptureError

        raise CaptureError(
            f"{path}: unreadable compaction manifest ({type(exc).__name__}); "
            f"`lab capture compact {directory}` cannot finish it either: restore the "
            "recording from a copy"
        ) from None
    return (old - finals) if finals <= present else finals


def _groups(rec: Path, target_bytes: int) -> list[list[Path]]:
    """Units of ``rec`` packed in order into groups of about ``target_bytes`` raw bytes."""
    from lab.capture.units import capture_units

    groups: list[list[Path]] = []
    size = 0
    for unit in capture_units(rec, split_large=False):  # whole files: they are rewritten
        streams = [f for f in unit.files if f.name.startswith("streams-")]
        n = sum(_raw_bytes(f) for f in streams)
        if not groups or size + n > target_bytes:
            groups.append([])
            size = 0
        groups[-1].extend(unit.files)
        size += n
    return groups


def _raw_bytes(streams_part: Path) -> int:
    import pyarrow.compute as pc

    return int(pc.sum(pq.read_table(streams_part, columns=["n_bytes"])["n_bytes"]).as_py() or 0)


def _read(files: list[Path], table: str) -> tuple[pa.Table, dict[bytes, bytes]]:
    tables: list[pa.Table] = []
    metadata: dict[bytes, bytes] = {}
    for f in files:
        if not f.name.startswith(f"{table}-"):
            continue
        t = pq.read_table(f)
        metadata = metadata or dict(t.schema.metadata or {})
        tables.append(t.replace_schema_metadata(None))
    return pa.concat_tables(tables, promote_options="permissive"), metadata


def _lab_keys(metadata: dict[bytes, bytes]) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in metadata.items() if k.startswith(b"lab.")}


def _write(table: pa.Table, path: Path, metadata: dict[str, str], row_group_rows: int) -> None:
    plain = [n for n in table.column_names if n != "raw"]
    with pq.ParquetWriter(
        path,
        table.schema,
        compression="zstd",
        store_schema=False,
        use_dictionary=plain,
        write_statistics=plain,
    ) as writer:
        writer.write_table(table, row_group_size=max(1, row_group_rows))
        writer.add_key_value_metadata(metadata)


def _compact_recording(
    rec: Path, parts: list[Path], target_bytes: int, row_group_bytes: int
) -> tuple[int, int]:
    """Rewrite ``rec``'s parts; returns (new parts, their bytes)."""
    groups = _groups(rec, target_bytes)
    numbers = (_PART.match(p.name) for p in parts)  # every part's name matches
    start = 1 + max((int(m.group(2)) for m in numbers if m), default=-1)
    staged: list[tuple[Path, Path]] = []
    for i, files in enumerate(groups):
        number = f"{start + i:05d}"
        for table, order in (("chunks", _CHUNKS_ORDER), ("streams", _STREAMS_ORDER)):
            data, metadata = _read(files, table)
            data = data.sort_by(order)
            per_row = max(1, data.nbytes // max(1, data.num_rows))
            rows = data.num_rows if table == "streams" else row_group_bytes // per_row
            final = rec / f"{table}-{number}.parquet"
            hidden = rec / f".{final.name}.compact"
            _write(data, hidden, _lab_keys(metadata), rows)
            staged.append((hidden, final))
    manifest = {"rename": [[h.name, f.name] for h, f in staged], "remove": [p.name for p in parts]}
    tmp = rec / f"{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest), encoding="utf-8")
    os.replace(tmp, rec / MANIFEST)
    size = sum(h.stat().st_size for h, _ in staged)
    _finish(rec)
    return len(staged), size


def _finish(rec: Path) -> None:
    """Carry out a written manifest: new parts into place (chunks before streams, as the
    writer does), old parts removed, manifest last."""
    path = rec / MANIFEST
    if not path.exists():
        return
    manifest = json.loads(path.read_text(encoding="utf-8"))
    for hidden, final in manifest["rename"]:
        if (rec / hidden).exists():
            os.replace(rec / hidden, rec / final)
    lost = [final for _hidden, final in manifest["rename"] if not (rec / final).exists()]
    if lost:  # never remove the old parts when a new one is not there to take their rows
        from lab.capture.errors import CaptureError

        raise CaptureError(
            f"{path}: compacted part(s) {', '.join(lost)} are gone; the old parts are kept "
            "(readers see them); remove the manifest to let the next compaction start over"
        )
    for name in manifest["remove"]:
        (rec / name).unlink(missing_ok=True)
    path.unlink()
