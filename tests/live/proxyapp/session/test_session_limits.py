"""Global variables that bound or shape what sessions do: ``mysql-max_transaction_time`` and
``mysql-max_transaction_idle_time`` kill the session (its transaction rolled back), ``mysql-default_query_delay``
holds every query, ``mysql-query_cache_stores_empty_result`` decides whether empty results are cached."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest

from devstack.proxy import ProxyProcess, rw_split_config
from devstack.sandbox import Sandbox
from devstack.stack import wait_until
from tests.support.harness import advance_clock_while_running

TABLE = "app.limits_rows"


def start(sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess], **variables: Any) -> ProxyProcess:
    rows = [{"variable_name": name, "variable_value": str(value)} for name, value in variables.items()]
    return start_proxy(rw_split_config(sandbox.primary().port, [sandbox.replicas()[0].port], global_variables=rows))


@pytest.fixture
def table(sandbox: Sandbox) -> Iterator[str]:
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS app")
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
        cur.execute(f"CREATE TABLE {TABLE} (id int primary key)")
    yield TABLE
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS {TABLE}")


def rows_on_primary(sandbox: Sandbox) -> int:
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {TABLE}")
        return int(cur.fetchone()[0])


def disconnected(conn: pymysql.Connection) -> bool:
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1")
    except (pymysql.err.OperationalError, pymysql.err.InterfaceError):
        return True
    return False


@pytest.mark.parametrize("threads", [1, 2])  # with 2, the supervisor moves every worker's clock
def test_a_transaction_left_idle_past_max_transaction_idle_time_is_killed_and_rolled_back(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess], table: str, threads: int
) -> None:
    proxy = start(sandbox, start_proxy, **{"mysql-max_transaction_idle_time": 60_000, "mysql-threads": threads})
    idle_in_transaction = proxy.connect(autocommit=True)
    idle_outside = proxy.connect(autocommit=True)
    try:
        with idle_in_transaction.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO {table} VALUES (1)")
        proxy.advance_clock(30)  # half the limit: nothing happens
        assert proxy.stats()["global"]["Active_Transactions"] == 1
        proxy.advance_clock(31)
        wait_until(lambda: proxy.stats()["global"]["Active_Transactions"] == 0, "the idle transaction ended", 15)
        assert disconnected(idle_in_transaction)
        assert rows_on_primary(sandbox) == 0
        assert not disconnected(idle_outside)  # idle, but not in a transaction: left alone
        assert "killed: idle in a transaction for over mysql-max_transaction_idle_time (60 s)" in proxy.log()
    finally:
        idle_in_transaction.close()
        idle_outside.close()


def test_a_transaction_running_past_max_transaction_time_is_killed_even_while_busy(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess], table: str
) -> None:
    proxy = start(sandbox, start_proxy, **{"mysql-max_transaction_time": 60_000})
    conn = proxy.connect(autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO {table} VALUES (1)")
            advancer = advance_clock_while_running(proxy, conn.thread_id(), "limits_marker", 61)
            with pytest.raises(pymysql.err.OperationalError):
                cur.execute("SELECT SLEEP(30) AS limits_marker FOR UPDATE")  # busy, not idle: still killed
            advancer.join()
        # The client is let go first, so that the interrupted statement's error never reaches it as an answer.
        wait_until(
            lambda: proxy.stats()["global"]["mysql_killed_backend_queries"] == 1, "the backend query was killed", 15
        )
        assert rows_on_primary(sandbox) == 0
        assert "killed: its transaction ran for over mysql-max_transaction_time (60 s)" in proxy.log()
    finally:
        conn.close()


def test_default_query_delay_holds_every_query(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    proxy = start(sandbox, start_proxy, **{"mysql-default_query_delay": 300})
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        started = time.monotonic()
        for _ in range(3):
            cur.execute("SELECT 1")
        assert time.monotonic() - started >= 0.9


@pytest.mark.parametrize(("stores", "sets"), [(True, 1), (False, 0)])
def test_query_cache_stores_empty_result_decides_for_rules_that_do_not(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess], table: str, stores: bool, sets: int
) -> None:
    document = rw_split_config(
        sandbox.primary().port,
        [sandbox.replicas()[0].port],
        global_variables=[
            {"variable_name": "mysql-query_cache_stores_empty_result", "variable_value": str(stores).lower()}
        ],
    )
    document["mysql_query_rules"] = [{"rule_id": 1, "active": 1, "match_digest": "limits_rows", "cache_ttl": 60000}]
    proxy = start_proxy(document)
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT id FROM {table}")
        assert cur.fetchall() == ()
    assert proxy.stats()["query_rules"] == [{"rule_id": 1, "hits": 1}]
    assert proxy.stats()["global"]["Query_Cache_count_SET"] == sets


def test_max_connections_is_the_nodes_limit_across_workers_counting_sessions_not_handshakes(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    proxy = start(sandbox, start_proxy, **{"mysql-max_connections": 4, "mysql-threads": 2})
    # Handshakes that never finish hold no seat.
    lingering = [socket.create_connection(("127.0.0.1", proxy.port)) for _ in range(6)]
    sessions = []
    try:
        for sock in lingering:
            assert sock.recv(4)  # the greeting's header: the proxy accepted it
        # Sessions land in either worker (the kernel picks); the limit holds for the node.
        sessions = [proxy.connect(autocommit=True) for _ in range(4)]
        with pytest.raises(pymysql.err.OperationalError) as refused:
            proxy.connect(autocommit=True)
        assert refused.value.args[0] == 1040 and "Too many connections" in refused.value.args[1]
        # A seat given back is a seat for the next client (once the proxy has seen the close).
        sessions.pop().close()

        def admitted() -> bool:
            try:
                sessions.append(proxy.connect(autocommit=True))
            except pymysql.err.OperationalError as exc:
                if exc.args[0] != 1040:
                    raise
                return False
            return True

        wait_until(admitted, "a session admitted in the closed one's seat", 15)
        with sessions[-1].cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)
    finally:
        for conn in sessions:
            conn.close()
        for sock in lingering:
            sock.close()


def test_an_address_that_fails_to_log_in_too_often_is_blocked(
    sandbox: Sandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    proxy = start(sandbox, start_proxy, **{"mysql-max_auth_errors_until_block": 3})
    for _ in range(3):
        with pytest.raises(pymysql.err.OperationalError) as denied:
            proxy.connect(password="not the password")
        assert denied.value.args[0] == 1045
    with pytest.raises(pymysql.err.OperationalError) as blocked:
        proxy.connect()  # the right password, but from a blocked address: refused before any authentication
    assert blocked.value.args[0] == 1129 and "is blocked because of many failed logins" in blocked.value.args[1]
    counters = proxy.stats()["global"]
    assert (counters["Access_Denied_Wrong_Password"], counters["Access_Denied_Host_Blocked"]) == (3, 1)
