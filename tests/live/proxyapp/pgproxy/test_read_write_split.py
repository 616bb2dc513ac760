"""Read/write split on a real primary and streaming replica (the PostgreSQL sandbox): the monitor's
``pg_is_in_recovery()`` check keeps the writer in the writer hostgroup whatever the config says, a ``^SELECT`` rule
sends reads to the replica, writes and transactions stay on the primary, and users of SCRAM and MD5 servers log in
through the proxy."""

from __future__ import annotations

import base64
import signal
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psycopg
import pytest

from devstack.pgsandbox import APP_PASSWORD, APP_USER, MD5_PASSWORD, MD5_USER, MONITOR_PASSWORD, MONITOR_USER, PgSandbox
from devstack.ports import free_port
from devstack.proxy import ProxyProcess
from devstack.stack import wait_until
from proxyapp.pgsql.auth import scram_verifier

WRITERS, READERS = 10, 20


def split_config(pg: PgSandbox, port: int) -> dict[str, Any]:
    """The primary configured (wrongly) as a reader too, and the replica (wrongly) in the writer hostgroup: the
    monitor puts them right."""
    primary, (replica,) = pg.primary(), pg.replicas()
    return {
        "pgsql_servers": [
            {"hostgroup_id": READERS, "hostname": primary.host, "port": primary.port},
            {"hostgroup_id": WRITERS, "hostname": replica.host, "port": replica.port},
        ],
        "pgsql_replication_hostgroups": [{"writer_hostgroup": WRITERS, "reader_hostgroup": READERS}],
        "pgsql_users": [
            {"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": WRITERS},
            {"username": MD5_USER, "password": MD5_PASSWORD, "default_hostgroup": WRITERS},
        ],
        "pgsql_query_rules": [
            {"rule_id": 1, "active": 1, "match_digest": "^SELECT", "destination_hostgroup": READERS, "apply": 1}
        ],
        "global_variables": [
            {"variable_name": name, "variable_value": str(value)}
            for name, value in {
                "mysql-threads": 1,
                "pgsql-interfaces": f"127.0.0.1:{port}",
                "pgsql-monitor_username": MONITOR_USER,
                "pgsql-monitor_password": MONITOR_PASSWORD,
                "mysql-monitor_read_only_interval": 200,
                "mysql-monitor_ping_interval": 200,
            }.items()
        ],
    }


def placed(proxy: ProxyProcess) -> dict[int, set[int]]:
    """The ports of the servers each hostgroup routes to now."""
    rows = proxy.stats()["pgsql"]["connection_pool"]
    found: dict[int, set[int]] = {}
    for row in rows:
        if row["status"] == "ONLINE":
            found.setdefault(row["hostgroup"], set()).add(row["srv_port"])
    return found


def test_reads_go_to_the_replica_and_writes_to_the_primary(
    pg_sandbox: PgSandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    port = free_port()
    proxy = start_proxy(split_config(pg_sandbox, port))
    primary, (replica,) = pg_sandbox.primary(), pg_sandbox.replicas()
    wait_until(
        lambda: placed(proxy).get(WRITERS) == {primary.port} and replica.port in placed(proxy).get(READERS, set()),
        "the monitor placing the writer and the reader",
        30,
    )
    dsn = f"postgresql://{APP_USER}:{APP_PASSWORD}@127.0.0.1:{port}/app?sslmode=disable"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS split_rw (id int PRIMARY KEY)")
        conn.execute("INSERT INTO split_rw VALUES (1) ON CONFLICT DO NOTHING")
        assert conn.execute("SHOW transaction_read_only").fetchone() == ("off",)  # not a SELECT: the writer
        reads = {conn.execute("SELECT pg_is_in_recovery()").fetchone() for _ in range(4)}
        assert (True,) in reads  # the reader hostgroup holds the replica (and, as configured, the primary)
        with conn.transaction():
            conn.execute("INSERT INTO split_rw VALUES (2) ON CONFLICT DO NOTHING")
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)  # a transaction stays put
    with psycopg.connect(f"postgresql://{MD5_USER}:{MD5_PASSWORD}@127.0.0.1:{port}/app?sslmode=disable") as md5:
        assert md5.execute("SELECT current_user").fetchone() == (MD5_USER,)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(f"postgresql://{APP_USER}:wrong@127.0.0.1:{port}/app?sslmode=disable")


def test_users_stored_as_the_servers_hashes_log_in_to_the_servers(
    pg_sandbox: PgSandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    """pgsql_users holding what the servers keep (pg_authid's SCRAM verifier and MD5 hash), not the passwords: the
    clients log in with their passwords and the pooler reaches the servers with the hashes (SCRAM with the key the
    client's proof gave, MD5 with the hash), as PgBouncer's pass-through does; a verifier of another salt is refused
    with the reason, not taken for an unreachable server."""
    with pg_sandbox.primary().connect() as admin:
        stored = dict(
            admin.execute(
                "SELECT rolname, rolpassword FROM pg_authid WHERE rolname IN (%s, %s)", (APP_USER, MD5_USER)
            ).fetchall()
        )
    assert stored[APP_USER].startswith("SCRAM-SHA-256$") and stored[MD5_USER].startswith("md5")
    port = free_port()
    config = split_config(pg_sandbox, port)
    config["pgsql_users"] = [
        {"username": APP_USER, "password": stored[APP_USER], "default_hostgroup": WRITERS},
        {"username": MD5_USER, "password": stored[MD5_USER], "default_hostgroup": WRITERS},
    ]
    config["pgsql_query_rules"] = []
    start_proxy(config)
    for user, password in ((APP_USER, APP_PASSWORD), (MD5_USER, MD5_PASSWORD)):
        with psycopg.connect(f"postgresql://{user}:{password}@127.0.0.1:{port}/app?sslmode=disable") as conn:
            assert conn.execute("SELECT current_user, 6 * 7").fetchone() == (user, 42)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(f"postgresql://{APP_USER}:wrong@127.0.0.1:{port}/app?sslmode=disable")

    other_salt = scram_verifier(APP_PASSWORD)
    config["pgsql_users"][0]["password"] = (
        f"SCRAM-SHA-256${other_salt.iterations}:{base64.b64encode(other_salt.salt).decode()}$"
        f"{base64.b64encode(other_salt.stored_key).decode()}:{base64.b64encode(other_salt.server_key).decode()}"
    )
    other_port = free_port()
    config["global_variables"] = [
        {**row, "variable_value": f"127.0.0.1:{other_port}"} if row["variable_name"] == "pgsql-interfaces" else row
        for row in config["global_variables"]
    ]
    start_proxy(config)
    with pytest.raises(psycopg.OperationalError, match="salt or iterations differ from pgsql_users' verifier"):
        psycopg.connect(f"postgresql://{APP_USER}:{APP_PASSWORD}@127.0.0.1:{other_port}/app?sslmode=disable")


def only_the_replica_as_writer(pg: PgSandbox, port: int, wait_ms: int) -> dict[str, Any]:
    """The split config with the replica alone in the writer hostgroup: the monitor moves it to the readers, and the
    writer hostgroup is left without a server."""
    config = split_config(pg, port)
    (replica,) = pg.replicas()
    config["pgsql_servers"] = [{"hostgroup_id": WRITERS, "hostname": replica.host, "port": replica.port}]
    config["pgsql_query_rules"] = []
    config["global_variables"].append({"variable_name": "pgsql-no_writer_wait_ms", "variable_value": str(wait_ms)})
    return config


def test_a_client_of_the_writer_hostgroup_waits_for_the_monitor_to_find_a_writer(
    pg_sandbox: PgSandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> None:
    """A login to a writer hostgroup with no ONLINE server waits (pgsql-no_writer_wait_ms) instead of being refused:
    when a reload adds the primary and the monitor finds it out of recovery, the waiting client is served by it."""
    port = free_port()
    config = only_the_replica_as_writer(pg_sandbox, port, 120_000)
    proxy = start_proxy(config)
    primary, (replica,) = pg_sandbox.primary(), pg_sandbox.replicas()
    wait_until(lambda: placed(proxy) == {READERS: {replica.port}}, "the replica moved out of the writers", 30)

    def login_and_ask() -> tuple[Any, ...] | None:
        dsn = f"postgresql://{APP_USER}:{APP_PASSWORD}@127.0.0.1:{port}/app?sslmode=disable"
        with psycopg.connect(dsn) as conn:
            return conn.execute("SELECT current_user, pg_is_in_recovery()").fetchone()

    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(login_and_ask)
        wait_until(lambda: proxy.stats()["pgsql"]["waiting_clients"] == 1, "the client waiting for a writer", 30)
        assert not answer.done()
        config["pgsql_servers"].append({"hostgroup_id": READERS, "hostname": primary.host, "port": primary.port})
        proxy.write_config(config)
        proxy.signal(signal.SIGHUP)
        assert answer.result(timeout=60) == (APP_USER, False)  # served by the primary, the writer found
    assert proxy.stats()["pgsql"]["waiting_clients"] == 0


@pytest.mark.parametrize("wait_ms", [0, 300])
def test_a_writer_hostgroup_without_a_writer_refuses_after_the_wait_with_the_reason(
    pg_sandbox: PgSandbox, start_proxy: Callable[[dict[str, Any]], ProxyProcess], wait_ms: int
) -> None:
    port = free_port()
    proxy = start_proxy(only_the_replica_as_writer(pg_sandbox, port, wait_ms))
    (replica,) = pg_sandbox.replicas()
    wait_until(lambda: placed(proxy) == {READERS: {replica.port}}, "the replica moved out of the writers", 30)
    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(f"postgresql://{APP_USER}:{APP_PASSWORD}@127.0.0.1:{port}/app?sslmode=disable")
    expected = f"ProxyFleet: pgsql hostgroup {WRITERS} has no server"
    if wait_ms:
        expected += f": no writer came ONLINE within {wait_ms} ms (pgsql-no_writer_wait_ms)"
    assert str(refused.value).endswith(f"FATAL:  {expected}")
    assert proxy.stats()["pgsql"]["waiting_clients"] == 0
