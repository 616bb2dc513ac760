"""Client timeouts: a login that never completes, and an idle session past mysql-wait_timeout."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pymysql
import pytest

from devstack.proxy import ProxyProcess, rw_split_config
from devstack.sandbox import Sandbox


def test_silent_clients_are_disconnected(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    config = rw_split_config(
        sandbox.primary().port,
        [r.port for r in sandbox.replicas()],
        global_variables=[
            {"variable_name": "mysql-connect_timeout_client", "variable_value": "500"},
            {"variable_name": "mysql-wait_timeout", "variable_value": "1500"},
        ],
    )
    proxy = start_proxy(config)
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        assert sock.recv(1024)[4] == 10  # the handshake greeting
        started = time.monotonic()
        assert sock.recv(1024) == b""  # closed by the proxy, never answering the greeting
        assert time.monotonic() - started < 5
    conn = proxy.connect(database="app")
    with conn.cursor() as cur:
        cur.execute("SELECT 1")
        time.sleep(3)
        with pytest.raises(pymysql.err.OperationalError) as info:
            cur.execute("SELECT 1")
    assert info.value.args[0] in (2006, 2013)
    with proxy.connect(database="app") as fresh, fresh.cursor() as cur:
        cur.execute("SELECT 2")
        assert cur.fetchone() == (2,)
