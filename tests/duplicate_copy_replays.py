"""The measurement behind RELIABILITY.md's duplicated-data figure (not a test).

Puts the bundled recording and a ``cp -r`` copy of it in one captures root, opens the root,
replays it, and counts the logical requests whose replay differs from the recording opened
alone (in the columns named, default: every column of ``tables.streams``)::

    python tests/duplicate_copy_replays.py captures n_chunks,text_chars,reasoning_chars,finish_reason,outcome,anomalies
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import lab.capture
from lab import tables
from lab.replay import replay


def main(captures: str, columns: str | None = None) -> None:
    src = next(p for p in sorted(Path(captures).iterdir()) if p.is_dir())
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "captures"
        shutil.copytree(src, root / src.name)
        shutil.copytree(src, root / f"{src.name}-backup")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            both = lab.capture.open(root)
        alone = lab.capture.open(root / src.name)
        a = tables.streams(replay(alone)).set_index("stream_id")
        b = tables.streams(replay(both)).drop_duplicates("stream_id").set_index("stream_id")
        cols = columns.split(",") if columns else list(a.columns)
        changed = sum(1 for s in a.index if not a.loc[s, cols].equals(b.loc[s, cols]))
        said = [w for w in caught if w.category.__name__ == "CaptureWarning"]
        print(
            f"exchanges: {alone.streams_table.num_rows} alone, {both.streams_table.num_rows} "
            f"with the copy; replays changed: {changed} of {len(a)}; CaptureWarnings: {len(said)}"
        )


if __name__ == "__main__":
    main(*sys.argv[1:3])
