"""``lab config``: config files for --config and --compare."""

from __future__ import annotations

import argparse
from typing import Any


def run(args: argparse.Namespace) -> int:
    from lab.console import config_example

    print(config_example())
    return 0


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    """Add ``lab config`` to ``sub`` (``tv``: the table options parent parser)."""
    cf = sub.add_parser("config", help="config files for --config and --compare")
    cf_sub = cf.add_subparsers(dest="config_command", required=True)
    cf_sub.add_parser(
        "example",
        help="print every config field at its default, each under a // comment "
        "(lab config example > my-config.json, edit, then --config my-config.json)",
    )
    cf.set_defaults(func=run)
