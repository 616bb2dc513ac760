"""Backend connection pooling through a real proxy: limits under load, reuse, weights and server status changes."""

from __future__ import annotations

import asyncio
import resource
import threading
import time
from collections import Counter
from typing import Any

import pymysql
import pytest

from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox, SandboxServer
from devstack.stack import wait_until
from proxyapp.mysql.backend import BackendConnection, Credentials
from proxyapp.mysql.packets import ErrPacket
from tests.support.harness import StartProxy

HG = 30
SERVER_NAMES = {1: "primary", 2: "replica"}


def make_config(servers: list[dict[str, Any]], variables: dict[str, Any] | None = None) -> dict[str, Any]:
    """Hostgroup 30 made of ``servers`` (rows without hostgroup_id/hostname), the app user defaulting to it."""
    return {
        "mysql_servers": [{"hostgroup_id": HG, "hostname": "127.0.0.1", **row} for row in servers],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": HG}],
        "mysql_query_rules": [],
        "global_variables": [
            {"variable_name": name, "variable_value": str(value)} for name, value in (variables or {}).items()
        ],
    }


def server_status(server: SandboxServer, *names: str) -> dict[str, int]:
    """Some of the server's global status variables."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN (" + ", ".join(["%s"] * len(names)) + ")", names)
        return {name: int(value) for name, value in cur.fetchall()}


def app_threads(server: SandboxServer) -> list[int]:
    """The ids of the server's connections of the app user (the proxy's backend connections)."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s", (APP_USER,))
        return sorted(int(row[0]) for row in cur.fetchall())


def admin_commands(server: SandboxServer) -> int:
    """The server's Com_admin_commands: the COM_PINGs it answered (and other admin commands), from all clients."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE 'Com_admin_commands'")
        return int(cur.fetchone()[1])


def pool_row(proxy: ProxyProcess, port: int) -> dict[str, Any]:
    """The /stats/connection_pool row of the server on ``port``."""
    rows = [r for r in proxy.admin("GET", "/stats/connection_pool") if r["srv_port"] == port]
    assert len(rows) == 1, rows
    return rows[0]


def served_by(conn: pymysql.Connection) -> str:
    """Which sandbox server answers this session's next query ('primary' or 'replica')."""
    with conn.cursor() as cur:
        cur.execute("SELECT @@server_id")
        return SERVER_NAMES[int(cur.fetchone()[0])]


def raise_fd_limit(wanted: int) -> None:
    """Raise this process's open-file soft limit (inherited by the proxy it starts) to ``wanted`` if it is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < wanted:
        target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= wanted, "cannot open enough files for the test"


async def client_session(port: int, n: int) -> list[list[bytes | None]]:
    """One client session through the proxy (ProxyFleet's own MySQL client): a few SELECTs, their rows."""
    conn = await BackendConnection.connect("127.0.0.1", port, Credentials(APP_USER, APP_PASSWORD), "app", timeout=60)
    try:
        rows = []
        for sql in (f"SELECT {n}", f"SELECT SLEEP(0.02), {n} + 1", f"SELECT SLEEP(0.02), {n} + 2"):
            result = await asyncio.wait_for(conn.fetch_row(sql), 60)
            assert not isinstance(result, ErrPacket), f"session {n}: {result.code} {result.message}"
            rows.append(result[1])
        return rows
    finally:
        conn.close()


def test_a_thousand_sessions_share_64_backend_connections(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    sessions = 1000
    raise_fd_limit(3 * sessions + 512)
    primary = sandbox.primary()
    proxy = start_proxy(make_config([{"port": primary.port, "max_connections": 64}]))
    with primary.connect() as root, root.cursor() as cur:
        cur.execute("FLUSH STATUS")  # Max_used_connections restarts from the connections open now
        cur.execute("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
        baseline = int(cur.fetchone()[1])

    async def run_all() -> list[Any]:
        return await asyncio.gather(*(client_session(proxy.port, n) for n in range(sessions)), return_exceptions=True)

    samples: list[int] = []
    done = threading.Event()

    def sample_threads_connected() -> None:
        """Watch the primary's Threads_connected while the sessions run."""
        with primary.connect() as watcher, watcher.cursor() as cur:
            while not done.is_set():
                cur.execute("SHOW GLOBAL STATUS LIKE 'Threads_connected'")
                samples.append(int(cur.fetchone()[1]))
                time.sleep(0.01)

    sampler = threading.Thread(target=sample_threads_connected)
    sampler.start()
    try:
        results = asyncio.run(run_all())
    finally:
        done.set()
        sampler.join(10)
    failures = [r for r in results if isinstance(r, BaseException)]
    assert not failures, f"{len(failures)} sessions failed, first: {failures[0]!r}"
    for n, rows in enumerate(results):
        assert rows == [[str(n).encode()], [b"0", str(n + 1).encode()], [b"0", str(n + 2).encode()]]
    row = pool_row(proxy, primary.port)
    # At most 64 at once, and no more ever opened: a released connection stays pooled until it sits unused.
    assert row["MaxConnUsed"] <= 64 and row["ConnOK"] <= 64
    assert row["MaxConnUsed"] >= 16  # the sessions did have to share
    assert row["Queries"] == 3 * sessions and row["ConnUsed"] == 0
    backend = server_status(primary, "Max_used_connections")["Max_used_connections"]
    assert backend - baseline <= 64 + 1  # the sampler's own connection
    assert samples and max(samples) - baseline <= 64 + 1
    wait_until(
        lambda: not proxy.stats()["global"]["Client_Connections_connected"], "every session gone", 5, interval=0.05
    )
    stats = proxy.stats()["global"]
    assert stats["Client_Connections_created"] == sessions and stats["Client_Connections_connected"] == 0


def test_idle_connections_are_reused_by_sequential_sessions(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    primary = sandbox.primary()
    proxy = start_proxy(make_config([{"port": primary.port, "max_connections": 64}]))
    sessions = 200

    async def one_after_another() -> None:
        for n in range(sessions):
            conn = await BackendConnection.connect(
                "127.0.0.1", proxy.port, Credentials(APP_USER, APP_PASSWORD), "app", timeout=10
            )
            try:
                for sql in (f"SELECT {n}", f"SELECT {n} + 1"):
                    result = await conn.fetch_row(sql)
                    assert not isinstance(result, ErrPacket), result
            finally:
                conn.close()

    with primary.connect() as root, root.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE 'Connections'")
        connections_before = int(cur.fetchone()[1])
        asyncio.run(one_after_another())
        cur.execute("SHOW GLOBAL STATUS LIKE 'Connections'")
        opened = int(cur.fetchone()[1]) - connections_before
    row = pool_row(proxy, primary.port)
    assert row["ConnOK"] <= 2 and opened <= 2  # one backend connection served every session
    assert row["Queries"] == 2 * sessions and row["ConnUsed"] == 0 and row["ConnFree"] >= 1
    assert proxy.stats()["global"]["Client_Connections_created"] == sessions


def test_weighted_choice_follows_the_weights(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    primary, replica = sandbox.primary(), sandbox.replicas()[0]
    proxy = start_proxy(
        make_config(
            [
                {"port": primary.port, "weight": 1, "max_connections": 10},
                {"port": replica.port, "weight": 9, "max_connections": 10},
            ]
        )
    )
    queries = 400
    with proxy.connect(autocommit=True) as conn:
        served = Counter(served_by(conn) for _ in range(queries))
    assert served["primary"] + served["replica"] == queries
    share = served["replica"] / queries
    assert 0.8 <= share <= 0.97, served  # expected 0.9; the bounds are more than 4 standard deviations away
    # The pools counted the same queries, plus PyMySQL's SET NAMES at connect on one of them.
    on_replica, on_primary = pool_row(proxy, replica.port)["Queries"], pool_row(proxy, primary.port)["Queries"]
    assert on_replica + on_primary == queries + 1
    assert on_replica - served["replica"] in (0, 1) and on_primary - served["primary"] in (0, 1)


def test_offline_soft_drains_new_sessions_away_and_lets_transactions_finish(
    sandbox: Sandbox, start_proxy: StartProxy
) -> None:
    primary, replica = sandbox.primary(), sandbox.replicas()[0]
    with primary.connect() as root, root.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS app.pool_soft (id INT PRIMARY KEY)")
        cur.execute("DELETE FROM app.pool_soft")
    sandbox.wait_replicated()
    config = make_config(
        [
            {"port": primary.port, "max_connections": 10},
            {"port": replica.port, "max_connections": 10, "status": "OFFLINE_SOFT"},
        ]
    )
    proxy = start_proxy(config)
    with proxy.connect(database="app", autocommit=True) as tx:
        cur = tx.cursor()
        cur.execute("BEGIN")
        cur.execute("INSERT INTO pool_soft VALUES (1)")
        assert served_by(tx) == "primary"
        cur.execute("SELECT CONNECTION_ID()")
        tx_thread = cur.fetchone()[0]
        # Drain the primary, bring the replica in.
        config["mysql_servers"][0]["status"] = "OFFLINE_SOFT"
        config["mysql_servers"][1]["status"] = "ONLINE"
        assert proxy.admin("POST", "/reload", config)["ok"] is True
        for _ in range(10):
            with proxy.connect(autocommit=True) as other:
                assert served_by(other) == "replica"
        assert pool_row(proxy, primary.port)["status"] == "OFFLINE_SOFT"
        assert pool_row(proxy, primary.port)["ConnUsed"] == 1  # the transaction keeps its connection
        cur.execute("INSERT INTO pool_soft VALUES (2)")
        assert served_by(tx) == "primary"
        cur.execute("COMMIT")
        assert served_by(tx) == "replica"  # its connection went back, and was closed
    with primary.connect() as root, root.cursor() as check:
        check.execute("SELECT id FROM app.pool_soft ORDER BY id")
        assert check.fetchall() == ((1,), (2,))
    row = pool_row(proxy, primary.port)
    assert row["ConnUsed"] == 0 and row["ConnFree"] == 0
    wait_until(
        lambda: tx_thread not in app_threads(primary), "the transaction's backend connection closed", 3, interval=0.02
    )


def test_offline_hard_cuts_the_connections(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    primary, replica = sandbox.primary(), sandbox.replicas()[0]
    config = make_config(
        [
            {"port": primary.port, "max_connections": 10},
            {"port": replica.port, "max_connections": 10, "status": "OFFLINE_SOFT"},
        ]
    )
    proxy = start_proxy(config)
    with proxy.connect(database="app", autocommit=True) as tx, proxy.connect(autocommit=True) as idle:
        cur = tx.cursor()
        cur.execute("BEGIN")
        cur.execute("SELECT CONNECTION_ID()")
        tx_thread = cur.fetchone()[0]
        with idle.cursor() as other:
            other.execute("SELECT CONNECTION_ID()")  # a second connection, idle in the pool afterwards
            idle_thread = other.fetchone()[0]
        assert tx_thread != idle_thread and {tx_thread, idle_thread} <= set(app_threads(primary))
        assert pool_row(proxy, primary.port)["ConnFree"] >= 1  # (and the one the schema-less login used)
        config["mysql_servers"][0]["status"] = "OFFLINE_HARD"
        config["mysql_servers"][1]["status"] = "ONLINE"
        assert proxy.admin("POST", "/reload", config)["ok"] is True
        # the transaction's backend connection and the idle one: cut
        wait_until(
            lambda: not {tx_thread, idle_thread} & set(app_threads(primary)),
            "both backend connections cut",
            3,
            interval=0.02,
        )
        with pytest.raises(pymysql.err.OperationalError) as info:
            cur.execute("SELECT 1")
        assert info.value.args[0] == 2013 and f"hostgroup {HG}" in info.value.args[1]
        assert served_by(idle) == "replica"
        row = pool_row(proxy, primary.port)
        assert row["status"] == "OFFLINE_HARD" and row["ConnUsed"] == 0 and row["ConnFree"] == 0
    assert proxy.stats()["global"]["Active_Transactions"] == 0


def test_idle_connections_beyond_free_connections_pct_are_trimmed_and_the_rest_kept_alive(
    sandbox: Sandbox, start_proxy: StartProxy
) -> None:
    primary = sandbox.primary()
    before = app_threads(primary)
    # A minute between pings, so that only the proxy's clock, moved by the test, makes the connections unused; no
    # monitor, so that every COM_PING the server counts is a keep-alive ping of the pool.
    variables = {
        "mysql-free_connections_pct": 20,
        "mysql-ping_interval_server_msec": 60_000,
        "mysql-monitor_enabled": "false",
    }
    proxy = start_proxy(make_config([{"port": primary.port, "max_connections": 10}], variables))
    clients = [proxy.connect(autocommit=True) for _ in range(6)]
    try:
        for client in clients:  # six transactions at once: six backend connections
            with client.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute("SELECT 1")
        for client in clients:
            with client.cursor() as cur:
                cur.execute("COMMIT")
        # Released at once, all six stay pooled (a burst that comes back finds them) ...
        assert pool_row(proxy, primary.port)["ConnFree"] == 6
        pings = admin_commands(primary)
        # ... until they sit unused for mysql-ping_interval_server_msec: then 20 % of 10 stay, kept alive by pings.
        proxy.advance_clock(61)
        wait_until(lambda: pool_row(proxy, primary.port)["ConnFree"] == 2, "the idle excess trimmed, two pinged", 15)
        kept = [t for t in app_threads(primary) if t not in before]
        assert len(kept) == 2
        assert admin_commands(primary) - pings == 2
        # Another minute unused: the same two are pinged again, and stay.
        proxy.advance_clock(61)
        wait_until(lambda: admin_commands(primary) - pings == 4, "the two kept connections pinged again", 15)
        wait_until(lambda: pool_row(proxy, primary.port)["ConnFree"] == 2, "the pinged connections back", 15)
        assert kept == [t for t in app_threads(primary) if t not in before]  # the same two connections
        row = pool_row(proxy, primary.port)
        assert (row["ConnOK"], row["ConnERR"]) == (6, 0)
    finally:
        for client in clients:
            client.close()
