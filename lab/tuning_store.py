"""Where the spill-guard tuner writes, and the user's own labelled corpus.

Nothing the tuner writes goes inside a repository by default: saved configs and labels go to
:func:`user_data_dir` (``$LAB_DATA_DIR``, else the platform's per-user data directory), so
labelling or saving never changes a tracked file or a test's input.

- :func:`write_text_atomic`: a file written whole or not at all, never replaced silently;
- :func:`label_row`: a candidate seam (:func:`lab.tuning.seam_candidates`) plus a human label
  -> a corpus row of the bundled corpus's shape;
- :func:`save_label`: that row into the user corpus JSONL (a label given again replaces the
  earlier one), rewritten atomically under :func:`corpus_lock` (an OS lock on a lock file
  beside the corpus), so that two tuners (two kernels, two processes) labelling into the
  same file never lose each other's labels; :func:`load_user_corpus` reads it back, naming
  the line of any bad row.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from lab.tuning import CORPUS_COLUMNS, CorpusError, as_corpus, is_missing, load_corpus, row_problem

__all__ = [
    "DATA_DIR_ENV",
    "LABEL_EXTRA_COLUMNS",
    "LOCK_SUFFIX",
    "corpus_lock",
    "default_config_path",
    "default_user_corpus_path",
    "label_row",
    "load_user_corpus",
    "save_label",
    "user_data_dir",
    "write_text_atomic",
]

DATA_DIR_ENV = "LAB_DATA_DIR"
"""Environment variable naming the directory the tuner writes to (labels, saved configs)."""

_APP = "stream-lab"


def user_data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The per-user directory the tuner writes its files to, never inside a repository.

    ``$LAB_DATA_DIR`` when set; else ``$XDG_DATA_HOME/stream-lab`` or
    ``~/.local/share/stream-lab`` (Linux and other POSIX), ``~/Library/Application
    Support/stream-lab`` (macOS), ``%LOCALAPPDATA%\\stream-lab`` (Windows). **environ**
    defaults to ``os.environ``. Nothing is created here; the writers make the directory.

    >>> str(user_data_dir({"LAB_DATA_DIR": "/srv/lab"}))
    '/srv/lab'
    """
    env = os.environ if environ is None else environ
    if env.get(DATA_DIR_ENV):
        return Path(env[DATA_DIR_ENV]).expanduser()
    if sys.platform == "win32":
        base = env.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / _APP
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / _APP
    return Path(env.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / _APP


def default_user_corpus_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the labels a user gives to capture seams go: ``<user_data_dir>/seam_corpus.jsonl``.

    The same JSONL shape as the bundled corpus (:func:`load_corpus` reads it), outside the
    repository so that labelling never changes a tracked file.
    """
    return user_data_dir(environ) / "seam_corpus.jsonl"


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where "Save config" writes unless told otherwise: ``<user_data_dir>/spill-config.json``."""
    return user_data_dir(environ) / "spill-config.json"


def write_text_atomic(path: str | Path, text: str, *, overwrite: bool = False) -> Path:
    """Write **text** to **path** whole or not at all; never replace a file unless **overwrite**.

    The text goes to a temporary file in the same directory (made if missing), is flushed
    and fsynced, then renamed into place: a crash leaves the old file or the new one, never
    half of one. Without **overwrite** an existing **path** raises :class:`FileExistsError`
    (checked atomically: the rename is a hard link that fails when the name is taken).
    Returns the absolute path written.
    """
    target = Path(path).expanduser().absolute()
    if not overwrite and target.exists():
        raise FileExistsError(f"{target} already exists (not overwritten)")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a file where a directory of the path should be
        raise NotADirectoryError(f"{target.parent}: not a directory") from None
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if overwrite:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise FileExistsError(f"{target} already exists (not overwritten)") from None
            os.unlink(tmp)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


# -- the user's own labelled corpus ---------------------------------------------------------

LABEL_EXTRA_COLUMNS = (
    "stream_id",
    "capture_id",
    "backend",
    "model",
    "guard_decision",
    "guard_rule",
)
"""Columns a labelled capture seam carries after the corpus columns (where it came from)."""


def label_row(
    candidate: Mapping[str, Any], leak: bool, seam: int | None = None, note: str = ""
) -> dict[str, Any]:
    """A corpus row (the bundled corpus's shape) from one candidate seam and a human label.

    **candidate**: a row of :func:`lab.tuning.seam_candidates` (a dict or a Series).
    **leak**: the label. **seam**: where the answer starts when **leak** (default: the
    candidate's ``suggested_seam``); ignored otherwise. The row also carries
    :data:`LABEL_EXTRA_COLUMNS`. Raises :class:`~lab.tuning.CorpusError` when the row is not
    valid (a leak with no seam, a seam outside the text).
    """

    def get(key: str) -> Any:
        v = candidate.get(key)
        return None if is_missing(v) else v

    if leak:
        if seam is None:
            seam = get("suggested_seam")
        if seam is None:
            raise CorpusError(
                f"{get('id')}: a leak needs a seam (where the answer starts); none was suggested"
            )
        seam = int(seam)
    else:
        seam = None
    row = {
        "id": str(get("id")),
        "text": str(get("text") or ""),
        "leak": bool(leak),
        "seam": seam,
        "category": "capture",
        "note": note or f"{get('backend')}: the guard's decision {get('decision')} ({get('rule')})",
        "stream_id": get("stream_id"),
        "capture_id": get("capture_id"),
        "backend": get("backend"),
        "model": get("model"),
        "guard_decision": get("decision"),
        "guard_rule": get("rule"),
    }
    problem = row_problem(row)
    if problem is not None:
        raise CorpusError(f"{row['id']}: {problem}")
    return row


def load_user_corpus(path: str | Path | None = None) -> pd.DataFrame:
    """The user's labelled seams (default :func:`default_user_corpus_path`); empty if none yet.

    A missing or empty file is an empty corpus (the corpus columns, no rows). Any bad line
    raises :class:`~lab.tuning.CorpusError` naming the file and the line number: nothing is
    dropped silently.
    """
    p = Path(path).expanduser() if path is not None else default_user_corpus_path()
    try:
        raw = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raw = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise CorpusError(f"{p}: cannot read the corpus ({exc})") from None
    if not raw.strip():
        return as_corpus(pd.DataFrame(columns=list(CORPUS_COLUMNS)))
    return load_corpus(p)


LOCK_SUFFIX = ".lock"
"""The lock file of a user corpus is the corpus's path with this suffix added
(``seam_corpus.jsonl.lock``); it is created when first needed and never removed (removing a
lock file while another process waits on it would let a third one lock a new file)."""


@contextlib.contextmanager
def corpus_lock(path: str | Path) -> Iterator[Path]:
    """Hold an exclusive OS lock for the corpus at **path** while the block runs.

    The lock is on ``path + LOCK_SUFFIX`` (made with its directory when missing):
    ``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows. It is advisory, between the
    processes that take it (every :func:`save_label`); it waits as long as another holder
    keeps it, and the OS releases it when its holder exits, even by a crash. Yields the lock
    file's path.
    """
    target = Path(path).expanduser().absolute()
    lock = target.with_name(target.name + LOCK_SUFFIX)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
            import msvcrt  # Windows only: fcntl does not exist there

            while True:
                try:
                    msvcrt.locking(fd, msvcrt.LK_LOCK, 1)  # retries for ~10 s, then raises
                    break
                except OSError:
                    continue
        else:
            import fcntl  # POSIX only: msvcrt does the same on Windows

            fcntl.flock(fd, fcntl.LOCK_EX)
        yield lock
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def save_label(row: Mapping[str, Any], path: str | Path | None = None) -> Path:
    """Put one labelled row into the user corpus JSONL; returns the file's absolute path.

    A row whose ``id`` is already there replaces it (the last label wins); otherwise it is
    appended. The whole file is rewritten with :func:`write_text_atomic` (temporary file,
    fsync, rename), so a crash leaves the old file or the new one; the read, the change and
    the rename happen under :func:`corpus_lock`, so a label another process saved meanwhile
    is read and kept, never overwritten. A file with a bad line is never written over: the
    :class:`~lab.tuning.CorpusError` names its line.
    """
    problem = row_problem(dict(row))
    if problem is not None:
        raise CorpusError(f"{row.get('id')}: {problem}")
    p = Path(path).expanduser() if path is not None else default_user_corpus_path()
    with corpus_lock(p):
        load_user_corpus(p)  # refuses a corrupt file, naming the line
        try:
            lines = [ln for ln in p.read_text(encoding="utf-8").splitlines() if ln.strip()]
        except FileNotFoundError:
            lines = []
        new = json.dumps(dict(row), ensure_ascii=False)
        ids = [json.loads(ln)["id"] for ln in lines]
        if row["id"] in ids:
            lines[ids.index(row["id"])] = new
        else:
            lines.append(new)
        return write_text_atomic(p, "\n".join(lines) + "\n", overwrite=True)
