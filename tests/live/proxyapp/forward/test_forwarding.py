"""Forwarding listeners through a real proxy to the machine's PostgreSQL (127.0.0.1:5432): sessions pass whole and are
counted, cancel requests reach their session, OFFLINE_SOFT drains, OFFLINE_HARD closes, a dead server is skipped and
named, a full listener refuses with SQLSTATE 53300, a taken port is reported and bound once free, and several worker
processes serve one port; each through the C relay and through the Python one (``conftest``)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from devstack.ports import free_port
from devstack.proxy import ProxyProcess
from devstack.stack import wait_until

PG_HOST, PG_PORT = "127.0.0.1", 5432
HG = 100

StartProxy = Callable[[dict[str, Any]], ProxyProcess]


def forward_config(port: int, servers: list[dict[str, Any]] | None = None, **listener: Any) -> dict[str, Any]:
    """One forwarding listener on ``port`` to hostgroup 100 (the machine's PostgreSQL unless ``servers``)."""
    return {
        "pgsql_servers": servers or [{"hostgroup_id": HG, "hostname": PG_HOST, "port": PG_PORT}],
        "pgsql_forward_listeners": [{"port": port, "hostgroup_id": HG, **listener}],
        "global_variables": [
            {"variable_name": "mysql-threads", "variable_value": "1"},
            # the monitor's own tests are test_forward_monitor.py: here a dead server is found by the connects alone
            {"variable_name": "mysql-monitor_enabled", "variable_value": "false"},
        ],
    }


def connect(port: int, **kwargs: Any) -> psycopg.Connection:
    """A psycopg connection through the listener on ``port``."""
    return psycopg.connect(
        host="127.0.0.1", port=port, user="postgres", dbname="postgres", connect_timeout=10, **kwargs
    )


def forward(proxy: ProxyProcess) -> dict[str, Any]:
    """The proxy's ``pgsql_forward`` report section."""
    return proxy.stats()["pgsql_forward"]


def listener_row(proxy: ProxyProcess, port: int) -> dict[str, Any]:
    """The report row of the listener on ``port``."""
    (row,) = [r for r in forward(proxy)["listeners"] if r["port"] == port]
    return row


def server_rows(proxy: ProxyProcess) -> dict[tuple[str, int], dict[str, Any]]:
    """The report's server rows by (hostname, port)."""
    return {(r["hostname"], r["port"]): r for r in forward(proxy)["servers"]}


def reconfigure(proxy: ProxyProcess, config: dict[str, Any]) -> None:
    """Load ``config`` into the running proxy (POST /reload), which answers once its listeners are bound."""
    answer = proxy.admin("POST", "/reload", config)
    assert answer["ok"], answer


def test_a_session_passes_whole_and_is_counted(start_proxy: StartProxy, relay: str) -> None:
    port = free_port()
    proxy = start_proxy(forward_config(port))
    assert listener_row(proxy, port)["state"] == "listening"
    with connect(port) as conn:
        assert conn.execute("SELECT inet_server_port(), 6 * 7").fetchone() == (PG_PORT, 42)
        conn.execute("CREATE TEMP TABLE t (id int)")
        with conn.cursor().copy("COPY t FROM STDIN") as copy:
            for i in range(1000):
                copy.write_row((i,))
        assert conn.execute("SELECT count(*), sum(id) FROM t").fetchone() == (1000, 499500)
    wait_until(lambda: listener_row(proxy, port)["connections_active"] == 0, "the proxy sees the client gone", 10)
    row = listener_row(proxy, port)
    assert (row["connections_total"], row["connections_refused"]) == (1, 0)
    assert row["connections_spliced"] == (1 if relay == "c" else 0)
    assert row["bytes_from_clients"] > 4000  # the COPY's rows
    assert row["bytes_to_clients"] > 0
    server = server_rows(proxy)[(PG_HOST, PG_PORT)]
    assert (server["connections_total"], server["connections_active"], server["connect_errors"]) == (1, 0, 0)
    assert server["bytes_sent"] == row["bytes_from_clients"]
    assert server["bytes_recv"] == row["bytes_to_clients"]
    metrics = proxy.admin("GET", "/metrics")
    assert f'proxyfleet_pgsql_forward_connections_total{{port="{port}"}} 1' in metrics


def test_bytes_are_counted_while_the_session_lives(start_proxy: StartProxy) -> None:
    port = free_port()
    proxy = start_proxy(forward_config(port))
    with connect(port) as conn:
        # a large answer: psycopg reads it as it comes, the relay holds the server back meanwhile
        assert conn.execute("SELECT repeat('x', 8000000)").fetchone() == ("x" * 8_000_000,)
        conn.execute("CREATE TEMP TABLE t (line text)")
        line = "y" * 1000
        with conn.cursor().copy("COPY t FROM STDIN") as copy:  # and a large upload
            for _ in range(8000):
                copy.write_row((line,))
        assert conn.execute("SELECT count(*), sum(length(line)) FROM t").fetchone() == (8000, 8_000_000)
        row = listener_row(proxy, port)
        assert row["connections_active"] == 1
        assert row["bytes_to_clients"] > 8_000_000 and row["bytes_from_clients"] > 8_000_000
        server = server_rows(proxy)[(PG_HOST, PG_PORT)]
        assert (server["bytes_sent"], server["bytes_recv"]) == (row["bytes_from_clients"], row["bytes_to_clients"])
    wait_until(lambda: listener_row(proxy, port)["connections_active"] == 0, "the proxy sees the client gone", 10)
    assert server_rows(proxy)[(PG_HOST, PG_PORT)]["connections_active"] == 0


def test_a_cancel_request_reaches_its_session(start_proxy: StartProxy) -> None:
    port = free_port()
    servers = [
        {"hostgroup_id": HG, "hostname": PG_HOST, "port": PG_PORT},
        {"hostgroup_id": HG, "hostname": "localhost", "port": PG_PORT},  # the same server by another name
    ]
    proxy = start_proxy(forward_config(port, servers))
    with connect(port, autocommit=True) as conn:
        errors: list[BaseException] = []

        def sleep() -> None:
            try:
                conn.execute("SELECT pg_sleep(60)")
            except psycopg.Error as exc:
                errors.append(exc)

        thread = threading.Thread(target=sleep)
        thread.start()
        with connect(port) as watcher:
            wait_until(
                lambda: (
                    watcher.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(60)' AND state = 'active'"
                    ).fetchone()
                    == (1,)
                ),
                "the sleep running",
                10,
            )
        conn.cancel_safe()
        thread.join(30)
        assert not thread.is_alive()
        assert [type(e) for e in errors] == [psycopg.errors.QueryCanceled]
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the session goes on
    assert listener_row(proxy, port)["connections_total"] == 3  # the session, the watcher, the cancel request


def test_a_cancel_request_is_done_when_the_client_is_told_so(start_proxy: StartProxy) -> None:
    """The listener closes the client's cancel connection only after each server closed the one it sent it on, the
    server having acted on it: a cancel sent while nothing runs is spent and never cancels the next statement."""
    port = free_port()
    start_proxy(forward_config(port))
    with connect(port) as conn:
        for _ in range(5):
            conn.cancel_safe()
            assert conn.execute("SELECT pg_sleep(0.2), 7").fetchone() == ("", 7)


def test_offline_soft_drains_and_offline_hard_closes(start_proxy: StartProxy) -> None:
    port = free_port()
    config = forward_config(port)
    proxy = start_proxy(config)
    with connect(port) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        config["pgsql_servers"][0]["status"] = "OFFLINE_SOFT"
        reconfigure(proxy, config)
        assert conn.execute("SELECT 2").fetchone() == (2,)  # draining: the session goes on
        with pytest.raises(psycopg.OperationalError, match="no server of pgsql hostgroup 100 can take a connection"):
            connect(port)
        config["pgsql_servers"][0]["status"] = "OFFLINE_HARD"
        reconfigure(proxy, config)
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 3")
    assert server_rows(proxy)[(PG_HOST, PG_PORT)]["status"] == "OFFLINE_HARD"


def test_a_dead_server_is_skipped_and_named(start_proxy: StartProxy) -> None:
    port, dead = free_port(), free_port()
    servers = [
        {"hostgroup_id": HG, "hostname": PG_HOST, "port": dead, "weight": 1000},
        {"hostgroup_id": HG, "hostname": PG_HOST, "port": PG_PORT, "weight": 1},
    ]
    proxy = start_proxy(forward_config(port, servers))
    for _ in range(3):
        with connect(port) as conn:
            assert conn.execute("SELECT inet_server_port()").fetchone() == (PG_PORT,)
    rows = server_rows(proxy)
    assert rows[(PG_HOST, dead)]["connect_errors"] >= 1
    assert rows[(PG_HOST, dead)]["connections_total"] == 0
    assert rows[(PG_HOST, PG_PORT)]["connections_total"] == 3
    reconfigure(proxy, forward_config(port, servers[:1]))
    with pytest.raises(psycopg.OperationalError, match=f"no server of pgsql hostgroup 100 answered: 127.0.0.1:{dead}"):
        connect(port)


def test_a_weight_of_zero_gets_nothing(start_proxy: StartProxy) -> None:
    port = free_port()
    servers = [
        {"hostgroup_id": HG, "hostname": PG_HOST, "port": PG_PORT, "weight": 1},
        {"hostgroup_id": HG, "hostname": "localhost", "port": PG_PORT, "weight": 0},
    ]
    proxy = start_proxy(forward_config(port, servers))
    for _ in range(5):
        with connect(port) as conn:
            conn.execute("SELECT 1")
    rows = server_rows(proxy)
    assert (rows[(PG_HOST, PG_PORT)]["connections_total"], rows[("localhost", PG_PORT)]["connections_total"]) == (5, 0)


def test_a_full_listener_refuses_with_53300(start_proxy: StartProxy) -> None:
    port = free_port()
    proxy = start_proxy(forward_config(port, max_connections=1))
    with connect(port) as conn:
        with pytest.raises(psycopg.OperationalError, match="max_connections=1"):
            connect(port)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            body = struct.pack("!i", 196608) + b"user\0postgres\0\0"
            raw.sendall(struct.pack("!i", len(body) + 4) + body)
            answer = raw.recv(1000)
        assert answer[:1] == b"E" and b"C53300\0" in answer
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert listener_row(proxy, port)["connections_refused"] == 2


def test_bad_first_bytes_get_an_error_and_the_port_goes_on(start_proxy: StartProxy) -> None:
    port = free_port()
    proxy = start_proxy(forward_config(port))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(b"\x7f\xff\xff\xffGET / HTTP/1.1\r\n\r\n")
        answer = raw.recv(1000)
    assert answer[:1] == b"E" and b"08P01" in answer and b"invalid length of startup packet" in answer
    with connect(port) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert server_rows(proxy)[(PG_HOST, PG_PORT)]["connections_total"] == 1


def test_a_taken_port_is_reported_and_bound_once_free(start_proxy: StartProxy) -> None:
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen()
    port = blocker.getsockname()[1]
    proxy = start_proxy(forward_config(port))
    state = listener_row(proxy, port)["state"]
    assert state.startswith(f"error: cannot listen on 127.0.0.1:{port}"), state
    blocker.close()
    proxy.advance_clock(1)  # the housekeeping retries the bind
    wait_until(lambda: listener_row(proxy, port)["state"] == "listening", "the listener bound", 10)
    with connect(port) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_worker_processes_share_the_port(start_proxy: StartProxy) -> None:
    port = free_port()
    config = forward_config(port)
    config["global_variables"][0]["variable_value"] = "2"  # mysql-threads
    proxy = start_proxy(config)
    assert proxy.stats()["workers"] == 2
    for _ in range(6):
        with connect(port) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    row = listener_row(proxy, port)
    assert (row["state"], row["connections_total"]) == ("listening", 6)
    assert server_rows(proxy)[(PG_HOST, PG_PORT)]["connections_total"] == 6
