"""The session's socket guard (tests/netguard.py): loopback only, failing loudly."""

from __future__ import annotations

import socket

import httpx
import netguard
import pytest


@pytest.fixture
def blocked():
    """The attempts this test made on purpose; taken out of the record so that the
    conftest's after-test check does not fail the test for them."""
    before = len(netguard.BLOCKED)
    seen: list[str] = []
    yield seen
    seen.extend(netguard.BLOCKED[before:])
    del netguard.BLOCKED[before:]


def test_a_connection_to_a_public_address_raises_and_is_recorded(blocked):
    with socket.socket() as s, pytest.raises(netguard.NetworkBlocked) as info:
        s.connect(("192.0.2.1", 443))  # TEST-NET-1: the guard must stop it before any packet
    assert str(info.value) == (
        "tests may reach loopback only: connect to ('192.0.2.1', 443) is blocked "
        "(tests/netguard.py)"
    )
    assert netguard.BLOCKED[-1] == "connect to ('192.0.2.1', 443)"


def test_connect_ex_and_ipv6_are_guarded_too(blocked):
    with socket.socket() as s, pytest.raises(netguard.NetworkBlocked):
        s.connect_ex(("10.0.0.1", 80))
    with socket.socket(socket.AF_INET6) as s, pytest.raises(netguard.NetworkBlocked):
        s.connect(("2001:db8::1", 80, 0, 0))
    assert netguard.BLOCKED[-2:] == [
        "connect to ('10.0.0.1', 80)",
        "connect to ('2001:db8::1', 80, 0, 0)",
    ]


def test_an_http_client_reaching_for_the_internet_fails_loudly_not_as_a_connect_error(blocked):
    # not an OSError: httpx does not turn it into a ConnectError a test might expect
    with pytest.raises(netguard.NetworkBlocked, match="name lookup of 'api.openai.com'"):
        httpx.get("https://api.openai.com/v1/models", timeout=1)


def test_a_swallowed_attempt_stays_on_record_for_the_after_test_check(blocked):
    try:
        socket.getaddrinfo("openrouter.ai", 443)
    except Exception:  # the code under test might swallow it like this
        pass
    assert netguard.BLOCKED[-1] == "name lookup of 'openrouter.ai'"


def test_loopback_is_allowed(fake_server):
    assert httpx.get(f"{fake_server.base_url}/nothing-here", timeout=5).status_code == 404
    assert socket.getaddrinfo("localhost", 80)
    assert [netguard.is_loopback(h) for h in ("127.0.0.1", "127.9.9.9", "::1", "[::1]")] == [
        True,
        True,
        True,
        True,
    ]
    assert [netguard.is_loopback(h) for h in ("0.0.0.0", "10.0.0.1", "example.com", "")] == [
        False,
        False,
        False,
        False,
    ]
