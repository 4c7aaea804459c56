"""Stream Lab: record, replay and tabulate LLM provider streams."""

__version__ = "0.1.0"
