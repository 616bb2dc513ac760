"""Client timeouts: a login that never completes, and an idle session past mysql-wait_timeout."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable
from typing import Any

import pymysql
import pytest

from devstack.proxy import ProxyProcess, rw_split_config
from devstack.sandbox import Sandbox
from devstack.stack import wait_until
from tests.support.rawclient import RawClient


def test_silent_clients_are_disconnected(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    config = rw_split_config(
        sandbox.primary().port,
        [r.port for r in sandbox.replicas()],
        global_variables=[
            {"variable_name": "mysql-connect_timeout_client", "variable_value": "60000"},
            {"variable_name": "mysql-wait_timeout", "variable_value": "3600000"},
        ],
    )
    proxy = start_proxy(config)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        assert sock.recv(1024)[4] == 10  # the handshake greeting
        proxy.advance_clock(61)  # a minute without logging in: closed by the proxy (mysql-connect_timeout_client)
        assert sock.recv(1024) == b""  # (had it not closed, the socket's own 10 s timeout would raise)
    conn = proxy.connect(database="app")
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
        session = conn.thread_id()

        def ended() -> bool:
            return all(row["SessionID"] != session for row in proxy.admin("GET", "/processlist"))

        proxy.advance_clock(1800)  # half an hour idle: kept
        assert not ended()
        proxy.advance_clock(1801)
        wait_until(ended, "the idle session ended by mysql-wait_timeout", 30)
        with pytest.raises(pymysql.err.OperationalError) as info:
            cur.execute("SELECT 1")
    assert info.value.args[0] in (2006, 2013)
    with proxy.connect(database="app") as fresh, fresh.cursor() as cur:
        cur.execute("SELECT 2")
        assert cur.fetchone() == (2,)


def test_a_packet_left_half_sent_is_dropped_after_net_read_timeout(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    config = rw_split_config(
        sandbox.primary().port,
        [r.port for r in sandbox.replicas()],
        global_variables=[{"variable_name": "mysql-net_read_timeout", "variable_value": "60000"}],
    )
    proxy = start_proxy(config)
    client = RawClient.connect(proxy.port, database=None, timeout=30)
    try:
        client.send_raw(struct.pack("<I", 100)[:3] + b"\x00" + b"\x03SELECT ")  # 8 of the 100 bytes it announces
        session = client.greeting.connection_id if client.greeting is not None else 0

        def a_minute_later_gone() -> bool:
            # The housekeeping notes when the bytes stopped coming, at its first look after they arrived; a minute
            # after that look the proxy lets go (mysql-wait_timeout, 8 hours, would not have).
            proxy.advance_clock(61)
            return all(row["SessionID"] != session for row in proxy.admin("GET", "/processlist"))

        wait_until(a_minute_later_gone, "the session with a packet half sent ended", 30)
        assert client.wait_closed(30)
        assert "a packet half sent for over mysql-net_read_timeout" in proxy.log()
    finally:
        client.close()
