"""Where the spill-guard tuner writes.

Nothing the tuner writes goes inside a repository by default: saved configs and labels go to
:func:`user_data_dir` (``$LAB_DATA_DIR``, else the platform's per-user data directory), so
labelling or saving never changes a tracked file or a test's input.
:func:`write_text_atomic` writes a file whole or not at all, and never replaces one silently.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "DATA_DIR_ENV",
    "default_config_path",
    "default_user_corpus_path",
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
