"""The one error type of the capture layer."""

from __future__ import annotations

__all__ = ["CaptureError"]


class CaptureError(Exception):
    """A capture could not be read or written; the message names the file and the problem."""
