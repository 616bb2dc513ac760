"""Failures through a real proxy: no server, refused and silent servers, pool exhaustion, backends dying mid-query.

Every error names the hostgroup (and the cause), comes quickly, leaves the proxy serving, and a statement that
may have run is never run a second time.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from devstack.ports import free_port
from devstack.proxy import WRITER_HG
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox, SandboxServer
from tests.support.harness import StartProxy, backend_thread


@pytest.fixture(scope="module", autouse=True)
def backend_objects(sandbox: Sandbox) -> None:
    """The table the write tests use."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS app.err_writes (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
    sandbox.wait_replicated()


def make_config(
    sandbox: Sandbox,
    *,
    servers: list[dict[str, Any]] | None = None,
    rules: list[dict[str, Any]] | None = None,
    variables: dict[str, Any] | None = None,
    max_connections: int = 10,
) -> dict[str, Any]:
    """Hostgroup 10 = the primary, plus ``servers``; the app user defaults to hostgroup 10."""
    rows = [{"hostgroup_id": WRITER_HG, "hostname": "127.0.0.1", "port": sandbox.primary().port}]
    rows[0]["max_connections"] = max_connections
    return {
        "mysql_servers": rows + [{"hostname": "127.0.0.1", **row} for row in servers or []],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": WRITER_HG}],
        "mysql_query_rules": [{"active": 1, **rule} for rule in rules or []],
        "global_variables": [
            {"variable_name": name, "variable_value": str(value)} for name, value in (variables or {}).items()
        ],
    }


def route(marker: str, hostgroup: int, rule_id: int) -> dict[str, Any]:
    """A rule sending queries that contain ``marker`` to ``hostgroup``."""
    return {"rule_id": rule_id, "match_pattern": marker, "destination_hostgroup": hostgroup, "apply": 1}


def query_error(conn: pymysql.Connection, sql: str) -> tuple[int, str]:
    """Run ``sql``, which must fail; returns (error code, message)."""
    with pytest.raises(pymysql.err.MySQLError) as info, conn.cursor() as cur:
        cur.execute(sql)
    code, message = info.value.args
    return code, message


def still_serves(conn: pymysql.Connection) -> None:
    """The session goes on answering queries."""
    with conn.cursor() as cur:
        cur.execute("SELECT 'alive'")
        assert cur.fetchall() == (("alive",),)


def kill(server: SandboxServer, thread_id: int) -> None:
    """KILL a connection on the server, as root."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"KILL {thread_id}")


def run_killed(proxy_conn: pymysql.Connection, server: SandboxServer, sql: str, marker: str) -> tuple[int, str]:
    """Run ``sql`` through the proxy and kill its backend connection while it runs; returns the client's error."""
    outcome: dict[str, Any] = {}

    def client() -> None:
        """The client side, in its own thread: the statement and its outcome."""
        try:
            with proxy_conn.cursor() as cur:
                cur.execute(sql)
                outcome["rows"] = cur.fetchall()
        except pymysql.err.MySQLError as exc:
            outcome["error"] = exc.args

    thread = threading.Thread(target=client)
    thread.start()
    kill(server, backend_thread(server, marker))
    thread.join(15)
    assert not thread.is_alive()
    assert "error" in outcome, f"the statement did not fail: {outcome}"
    return outcome["error"]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections but never says a word (a hung server)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield sock.getsockname()[1]


def test_no_online_server_names_the_hostgroup(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    replica = sandbox.replicas()[0]
    proxy = start_proxy(
        make_config(
            sandbox,
            servers=[{"hostgroup_id": 30, "port": replica.port, "status": "OFFLINE_HARD"}],
            rules=[route("to_30", 30, 1), route("to_40", 40, 2)],
        )
    )
    with proxy.connect(autocommit=True) as conn:
        code, message = query_error(conn, "SELECT 'to_30'")
        assert code == 9001 and "hostgroup 30" in message and "OFFLINE_HARD" in message
        code, message = query_error(conn, "SELECT 'to_40'")  # a hostgroup without servers
        assert code == 9001 and "hostgroup 40" in message and "no servers" in message
        still_serves(conn)
    assert proxy.stats()["global"]["ConnPool_get_conn_failure"] == 2
    # Answered at once: not a single connection was attempted to the OFFLINE_HARD server.
    (row,) = [r for r in proxy.admin("GET", "/stats/connection_pool") if r["hostgroup"] == 30]
    assert (row["ConnOK"], row["ConnERR"]) == (0, 0)


def test_refused_backend_fails_fast_naming_hostgroup_and_cause(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    closed = free_port()
    proxy = start_proxy(
        make_config(
            sandbox,
            servers=[{"hostgroup_id": 50, "port": closed}],
            rules=[route("to_50", 50, 1)],
            variables={"mysql-connect_timeout_server": 200},
        )
    )
    with proxy.connect(autocommit=True) as conn:
        code, message = query_error(conn, "SELECT 'to_50'")
        assert code == 9001
        assert "hostgroup 50" in message and f"127.0.0.1:{closed}" in message and "refused" in message.lower()
        still_serves(conn)
    (row,) = [r for r in proxy.admin("GET", "/stats/connection_pool") if r["hostgroup"] == 50]
    assert row["ConnERR"] >= 1 and row["ConnOK"] == 0


def test_silent_backend_is_bounded_by_the_connect_timeouts(
    sandbox: Sandbox, start_proxy: StartProxy, silent_port: int
) -> None:
    proxy = start_proxy(
        make_config(
            sandbox,
            servers=[{"hostgroup_id": 60, "port": silent_port}],
            rules=[route("to_60", 60, 1)],
            variables={"mysql-connect_timeout_server": 300, "mysql-connect_timeout_server_max": 600},
        )
    )
    with proxy.connect(autocommit=True) as conn:
        code, message = query_error(conn, "SELECT 'to_60'")
        assert code == 9001 and "hostgroup 60" in message and "timed out" in message
        # Bounded by connect_timeout_server_max, not by 11 attempts of connect_timeout_server.
        assert "Max connect timeout (600 ms) reached" in message, message
        still_serves(conn)


def test_pool_exhausted_past_the_wait_timeout(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(make_config(sandbox, max_connections=1, variables={"mysql-connection_wait_timeout": 500}))
    with proxy.connect(autocommit=True) as holder, proxy.connect(autocommit=True) as waiter:
        with holder.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("SELECT 1")
        code, message = query_error(waiter, "SELECT 2")
        assert code == 9001 and "hostgroup 10" in message and "500 ms" in message
        with holder.cursor() as cur:
            cur.execute("COMMIT")
        still_serves(waiter)
        still_serves(holder)


def test_backend_killed_mid_query(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    primary = sandbox.primary()
    proxy = start_proxy(make_config(sandbox, variables={"mysql-query_retries_on_failure": 0}))
    with proxy.connect(autocommit=True) as conn:
        code, message = run_killed(conn, primary, "SELECT SLEEP(10), 'kill_me'", "kill_me")  # not its 10 s
        assert code == 2013 and "hostgroup 10" in message and f"127.0.0.1:{primary.port}" in message
        still_serves(conn)
    with proxy.connect(autocommit=True) as other:
        still_serves(other)


def test_backend_killed_in_a_transaction_is_not_retried(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    primary = sandbox.primary()
    proxy = start_proxy(make_config(sandbox))  # reads may be retried (query_retries_on_failure=1)...
    with proxy.connect(autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
        assert proxy.stats()["global"]["Active_Transactions"] == 1
        code, message = run_killed(conn, primary, "SELECT SLEEP(10), 'in_tx'", "in_tx")
        assert code == 2013 and "hostgroup 10" in message  # ...but not one whose transaction is gone
        assert proxy.stats()["global"]["Active_Transactions"] == 0
        still_serves(conn)
        with conn.cursor() as cur:
            cur.execute("SELECT @@in_transaction")
            assert cur.fetchall() == ((0,),)


def test_a_write_is_never_retried_once_sent(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    primary = sandbox.primary()
    proxy = start_proxy(make_config(sandbox, rules=[{"rule_id": 1, "match_pattern": "^INSERT", "retries": 5}]))
    with primary.connect() as root, root.cursor() as cur:
        cur.execute("DELETE FROM app.err_writes")
    with proxy.connect(database="app", autocommit=True) as conn:
        code, message = run_killed(conn, primary, "INSERT INTO err_writes (v) VALUES (SLEEP(1.5) + 7)", "SLEEP(1.5)")
        assert code == 2013 and "hostgroup 10" in message and "not retried" in message
        # No retry is running either (one in flight would show in the processlist, its SLEEP not yet over).
        with primary.connect() as root, root.cursor() as cur:
            sql = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = %s AND INFO LIKE %s"
            cur.execute(sql, (APP_USER, "%err_writes%"))
            assert cur.fetchone() == (0,)
        with conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM err_writes")
            assert cur.fetchall() == ((0,),)
            cur.execute("INSERT INTO err_writes (v) VALUES (1)")
            cur.execute("SELECT COUNT(*) FROM err_writes")
            assert cur.fetchall() == ((1,),)


def test_a_read_is_retried_when_its_idle_pooled_connection_died(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    primary = sandbox.primary()
    proxy = start_proxy(make_config(sandbox, variables={"mysql-free_connections_pct": 100}))
    sessions = [proxy.connect(autocommit=True) for _ in range(3)]
    try:
        for conn in sessions:  # three transactions at once: three backend connections, then idle in the pool
            with conn.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute("SELECT CONNECTION_ID()")
        threads = []
        for conn in sessions:
            with conn.cursor() as cur:
                cur.execute("SELECT CONNECTION_ID()")
                threads.append(cur.fetchone()[0])
                cur.execute("COMMIT")
        (row,) = proxy.admin("GET", "/stats/connection_pool")
        assert row["ConnFree"] == 3 and row["ConnOK"] == 3
        for thread_id in threads:
            kill(primary, thread_id)
        for conn in sessions:
            with conn.cursor() as cur:
                cur.execute("SELECT 'read after the kill'")
                assert cur.fetchall() == (("read after the kill",),)
                cur.execute("SELECT CONNECTION_ID()")
                assert cur.fetchone()[0] not in threads
        with proxy.connect(autocommit=True) as fresh:
            still_serves(fresh)
    finally:
        for conn in sessions:
            conn.close()
    (row,) = proxy.admin("GET", "/stats/connection_pool")
    assert row["ConnOK"] == 4  # one new connection replaced the three dead ones


def test_a_clients_unknown_schema_is_its_own_error_and_shuns_nothing(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    """A client asking for a schema the server does not have gets the server's 1049, as many times as it asks; the
    server is not shunned for it, and other clients go on (ProxySQL counts such errors against the server)."""
    proxy = start_proxy(make_config(sandbox, variables={"mysql-shun_on_failures": "2"}))
    for _ in range(6):
        with pytest.raises(pymysql.err.OperationalError) as info:
            proxy.connect(database="no_such_schema").close()
        code, message = info.value.args
        assert code == 1049 and message.endswith(
            f"refused the login of '{APP_USER}': Unknown database 'no_such_schema'"
        )
    with proxy.connect(database="app") as conn, conn.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchall() == ((1,),)
    servers = proxy.stats()["connection_pool"]
    assert [s["status"] for s in servers] == ["ONLINE"]
