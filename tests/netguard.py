"""The test session's one network switch: every address but loopback is blocked.

:func:`install` (``conftest.py`` calls it before any test module is imported) wraps
``socket.socket.connect`` / ``connect_ex`` and ``socket.getaddrinfo``: a connection to, or
a name lookup of, anything other than 127.0.0.0/8, ``::1``, ``localhost`` or a Unix socket
raises :class:`NetworkBlocked` (a ``RuntimeError``, not an ``OSError``, so no client takes
it for an ordinary connection failure and retries or maps it), and is remembered in
:data:`BLOCKED` so a test that swallowed the exception still fails (``conftest.py`` checks
after every test). A test that would reach the internet fails loudly at once instead of
hanging in CI. Subprocesses (notebook kernels, the CLI run as a program) are not covered.
"""

from __future__ import annotations

import ipaddress
import socket

__all__ = ["BLOCKED", "NetworkBlocked", "install", "is_loopback"]

BLOCKED: list[str] = []

_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


class NetworkBlocked(RuntimeError):
    """A test tried to reach a non-loopback address."""


def is_loopback(host: object) -> bool:
    """True for a loopback IP literal (``127.x.y.z``, ``::1``) or the name ``localhost``."""
    if host is None:
        return True  # getaddrinfo(None, port): the local host's own wildcard
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    name = host.strip("[]").split("%", 1)[0].lower()
    if name in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _refuse(what: str) -> None:
    BLOCKED.append(what)
    raise NetworkBlocked(f"tests may reach loopback only: {what} is blocked (tests/netguard.py)")


def _checked(address: object, family: int) -> None:
    if family not in (socket.AF_INET, socket.AF_INET6):
        return  # AF_UNIX and friends never leave the machine
    host = address[0] if isinstance(address, tuple) and address else address
    if not is_loopback(host):
        _refuse(f"connect to {address!r}")


_installed = False


def install() -> None:
    """Block non-loopback connections and name lookups for this process (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def connect(self, address):
        _checked(address, self.family)
        return real_connect(self, address)

    def connect_ex(self, address):
        _checked(address, self.family)
        return real_connect_ex(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if not is_loopback(host):
            _refuse(f"name lookup of {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex
    socket.getaddrinfo = getaddrinfo
