"""``lab fake-server``: the scripted fake providers on loopback."""

from __future__ import annotations

import argparse
import errno
from typing import Any

from lab.cli.common import UsageError


def run(args: argparse.Namespace) -> int:
    from lab.fakes import serve_forever

    port = args.port
    if not 0 <= port <= 65535:
        raise UsageError(f"--port {port}: must be 0-65535 (0 = any free port)")
    try:
        serve_forever(port)
    except OSError as exc:
        # binding the socket is the first thing serve_forever does: nothing served yet
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(f"--port {port}: already in use on 127.0.0.1") from None
        if exc.errno == errno.EACCES:
            raise UsageError(
                f"--port {port}: permission denied on 127.0.0.1 (ports below 1024 "
                "need privileges; 0 = any free port)"
            ) from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise UsageError(f"--port {port}: cannot listen on 127.0.0.1: {exc.strerror}") from None
        raise
    return 0


def add_parser(sub: Any, tv: argparse.ArgumentParser) -> None:
    """Add ``lab fake-server`` to ``sub`` (``tv``: the table options parent parser)."""
    f = sub.add_parser("fake-server", help="run the scripted fake providers on 127.0.0.1")
    f.add_argument(
        "--port",
        type=int,
        default=0,
        help="port on 127.0.0.1, 0-65535 (default 0: any free port, printed at start)",
    )
    f.set_defaults(func=run)
