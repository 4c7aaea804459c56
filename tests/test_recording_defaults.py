"""User recordings never land in captures/, the bundled sample the notebooks read."""

from __future__ import annotations

import inspect

from lab.cli import build_parser
from lab.recorder import DEFAULT_OUT, Recorder


def test_lab_record_and_the_recorder_default_to_the_recordings_folder():
    args = build_parser().parse_args(
        ["record", "--provider", "openrouter", "--model", "m", "--prompt", "p"]
    )
    assert args.out == DEFAULT_OUT == "recordings"
    assert inspect.signature(Recorder).parameters["out"].default == "recordings"
