"""The session limits on a clock the test holds (``proxyapp.session.limits.overstay``): no test waits for time."""

from __future__ import annotations

import dataclasses

import pytest

from proxyapp.config.document import parse_config
from proxyapp.rules.runtime import Runtime, SessionSettings
from proxyapp.session.limits import (
    ABANDON,
    ABANDON_AFTER_S,
    DISCONNECT,
    KILL,
    STAY,
    TIME_OUT,
    overstay,
    tells_inactivity,
)


def settings(
    transaction_ms: int = 60_000, idle_transaction_ms: int = 10_000, wait_ms: int = 30_000, net_read_ms: int = 5_000
) -> SessionSettings:
    loaded = Runtime.build(parse_config({}), "test").settings
    return dataclasses.replace(
        loaded,
        max_transaction_time_ms=transaction_ms,
        max_transaction_idle_time_ms=idle_transaction_ms,
        wait_timeout_ms=wait_ms,
        net_read_timeout_ms=net_read_ms,
    )


NOW = 10_000.0

CASES = [
    # in a transaction, transaction since, idle since (0: a command runs), action, why contains
    (False, 0.0, 0.0, STAY, ""),  # running a command, no transaction
    (False, 0.0, NOW - 29.9, STAY, ""),
    (False, 0.0, NOW - 30.1, TIME_OUT, "mysql-wait_timeout"),
    (True, NOW - 59.0, 0.0, STAY, ""),  # a long transaction, busy: within the limit
    (True, NOW - 61.0, 0.0, KILL, "mysql-max_transaction_time (60 s)"),  # busy is no excuse
    (True, NOW - 61.0, NOW - 1.0, KILL, "mysql-max_transaction_time"),
    (True, NOW - 20.0, NOW - 9.0, STAY, ""),
    (True, NOW - 20.0, NOW - 11.0, KILL, "mysql-max_transaction_idle_time (10 s)"),
    (False, NOW - 100.0, NOW - 11.0, STAY, ""),  # idle, not in a transaction: only wait_timeout applies
    (True, NOW - 20.0, NOW - 40.0, KILL, "max_transaction_idle_time"),  # the transaction's limit comes first
]


@pytest.mark.parametrize(("in_transaction", "since", "idle_since", "action", "why"), CASES)
def test_overstay(in_transaction: bool, since: float, idle_since: float, action: int, why: str) -> None:
    got, reason = overstay(in_transaction, since, idle_since, 0.0, NOW, settings())
    assert got == action
    assert why in reason and (reason == "") == (action == STAY)


def test_the_limits_follow_the_settings() -> None:
    tight = settings(transaction_ms=1000, idle_transaction_ms=500, wait_ms=2000)
    assert overstay(True, NOW - 1.5, 0.0, 0.0, NOW, tight)[0] == KILL
    assert overstay(True, NOW - 0.9, NOW - 0.6, 0.0, NOW, tight)[0] == KILL
    assert overstay(False, 0.0, NOW - 2.5, 0.0, NOW, tight)[0] == TIME_OUT
    assert overstay(False, 0.0, NOW - 1.5, 0.0, NOW, tight)[0] == STAY


@pytest.mark.parametrize(
    ("own_s", "idle_s", "action", "why"),
    [
        (1.0, 0.9, STAY, ""),
        (1.0, 1.1, TIME_OUT, "its wait_timeout (1 s)"),  # SET wait_timeout = 1: its own limit, as the server's
        (60.0, 31.0, TIME_OUT, "mysql-wait_timeout"),  # longer than the proxy's: the proxy's applies
        (0.0, 29.0, STAY, ""),  # none of its own
    ],
)
def test_a_session_own_wait_timeout_applies_when_shorter(own_s: float, idle_s: float, action: int, why: str) -> None:
    got, reason = overstay(False, 0.0, NOW - idle_s, 0.0, NOW, settings(wait_ms=30_000), wait_timeout_s=own_s)
    assert got == action and why in reason


def test_a_packet_left_half_sent_past_net_read_timeout_disconnects() -> None:
    limits = settings(net_read_ms=5_000)
    assert overstay(False, 0.0, NOW - 10.0, NOW - 4.9, NOW, limits) == (STAY, "")
    action, why = overstay(False, 0.0, NOW - 10.0, NOW - 5.1, NOW, limits)
    assert (action, why) == (DISCONNECT, "a packet half sent for over mysql-net_read_timeout")
    assert overstay(True, NOW - 1.0, NOW - 1.0, NOW - 6.0, NOW, limits)[0] == DISCONNECT  # in a transaction too


def test_a_login_past_connect_timeout_client_disconnects() -> None:
    limits = dataclasses.replace(settings(), connect_timeout_client_ms=10_000)
    assert overstay(False, 0.0, 0.0, 0.0, NOW, limits, login_since=NOW - 9.9) == (STAY, "")
    action, why = overstay(False, 0.0, 0.0, 0.0, NOW, limits, login_since=NOW - 10.1)
    assert (action, why) == (DISCONNECT, "did not log in within mysql-connect_timeout_client")


def test_a_statement_a_gone_client_left_running_is_abandoned_after_its_kill_had_time() -> None:
    assert overstay(True, NOW - 1.0, 0.0, 0.0, NOW, settings(), gone_since=NOW - ABANDON_AFTER_S + 0.1)[0] == STAY
    action, why = overstay(True, NOW - 1.0, 0.0, 0.0, NOW, settings(), gone_since=NOW - ABANDON_AFTER_S - 0.1)
    assert (action, why) == (ABANDON, "the backend did not end the statement of a client gone")


@pytest.mark.parametrize(
    ("version", "tells"),
    [
        ("10.11.19-MariaDB-0+deb12u1", False),
        ("5.5.5-10.11.6-MariaDB-log", False),  # MariaDB 10 behind the 5.5.5 prefix replication clients want
        ("11.4.2-MariaDB", True),
        ("5.5.5-11.4.2-MariaDB", True),
        ("8.0.23", False),
        ("8.0.36-0ubuntu0.22.04.1", True),
        ("8.4.0", True),
        ("5.7.44-log", False),
        ("", False),
        (None, False),
        ("garbage", False),
    ],
)
def test_which_servers_tell_an_idle_client_why(version: str | None, tells: bool) -> None:
    assert tells_inactivity(version) is tells
