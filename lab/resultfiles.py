"""The old home of :mod:`lab.replay.files` (replay straight to Parquet); its public names
still import from here."""

from lab.replay.files import RESULT_TABLES, TABLE_FILES, ResultFiles, read_results, replay_to

__all__ = ["RESULT_TABLES", "TABLE_FILES", "ResultFiles", "read_results", "replay_to"]
