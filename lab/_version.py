"""The package version: a leaf module, so that whatever stamps it (the capture writer, the
CLI's ``--version``) imports nothing else of the lab."""

__version__ = "0.1.0"
