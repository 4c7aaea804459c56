"""The errors of the capture layer."""

from __future__ import annotations

from pathlib import Path

from lab.exceptions import LabError

__all__ = ["CaptureError", "CaptureWarning", "CaptureWriteError", "PartTooLarge"]


class CaptureError(LabError):
    """A capture could not be read or written; the message names the file and the problem."""


class PartTooLarge(CaptureError):
    """A capture part would decode to more bytes than its size on disk allows
    (:data:`lab.capture.bounds.MAX_COMPRESSION_RATIO`): refused before it is decoded.

    - **path** – the part;
    - **decoded** – the bytes it declares (footer) or would expand to (dictionaries);
    - **allowed** – the bytes a part of its size may hold.

    Opening a directory leaves the part out (with its ``streams``/``chunks`` sibling) and
    says so in a ``CaptureWarning``; the other parts are read."""

    def __init__(self, path: Path, message: str, *, decoded: int, allowed: int) -> None:
        self.path = Path(path)
        self.decoded = decoded
        self.allowed = allowed
        super().__init__(message)


class CaptureWarning(UserWarning):
    """A capture opened, but not as recorded: an exchange found twice (a copy of a recording
    inside the captures root), or a part missing from a recording's sequence. The message
    names the files and says what was kept or is absent; the opened ``Capture`` lists the
    same messages in ``Capture.warnings``."""


class CaptureWriteError(CaptureError):
    """The recording cannot be written (disk full, I/O error): stop sending requests.

    The message says why and how many exchanges are safe on disk, and where:

    - **path** – the recording's directory;
    - **cause** – the ``OSError`` (or other failure) of the last write;
    - **total** – exchanges this recording started;
    - **in_parts** – of those, how many are in Parquet parts;
    - **in_journals** – how many more are whole in journals only (``lab.capture.open``
      recovers them);
    - **safe** – ``in_parts + in_journals``; the other ``total - safe`` are cut or lost.
    """

    def __init__(
        self,
        path: Path,
        cause: BaseException,
        *,
        total: int,
        in_parts: int,
        in_journals: int,
        doing: str = "writing the capture",
    ) -> None:
        self.path = Path(path)
        self.cause = cause
        self.total = total
        self.in_parts = in_parts
        self.in_journals = in_journals
        self.safe = in_parts + in_journals
        self.result: object = None  # Recorder: the StreamResult whose write failed
        why = getattr(cause, "strerror", None) or str(cause) or type(cause).__name__
        lost = total - self.safe
        super().__init__(
            f"{self.path}: {doing} failed ({why}); {self.safe} of {total} exchange(s) are "
            f"safe on disk ({in_parts} in Parquet parts, {in_journals} in journals that "
            f"lab.capture.open() recovers)" + (f"; {lost} are cut or lost" if lost else "")
        )
