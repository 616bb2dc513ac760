"""What the pooling proxy's tests share: a role and a database of their own on the machine's PostgreSQL
(127.0.0.1:5432, which trusts loopback logins: the proxy checks the password, the server lets the proxy in), and a
proxy in front of it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from devstack.ports import free_port
from devstack.proxy import ProxyProcess

PG_HOST, PG_PORT = "127.0.0.1", 5432
#: Named after this test process: runs side by side on the one server (other checkouts') neither drop each other's
#: role and database nor see each other's server connections.
ROLE, PASSWORD, DATABASE = f"pf_pool_{os.getpid()}", "pf-pool-pass", f"pf_pool_test_{os.getpid()}"
HG = 200


def superuser(database: str = "postgres") -> psycopg.Connection:
    """A connection to the machine's PostgreSQL as postgres, autocommit."""
    return psycopg.connect(host=PG_HOST, port=PG_PORT, user="postgres", dbname=database, autocommit=True)


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """The test role and database (made afresh for the run)."""
    with superuser() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        conn.execute(f"DROP ROLE IF EXISTS {ROLE}")
        conn.execute(f"CREATE ROLE {ROLE} LOGIN PASSWORD '{PASSWORD}'")
        conn.execute(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
    yield DATABASE
    with superuser() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
        conn.execute(f"DROP ROLE IF EXISTS {ROLE}")


def pool_config(port: int, max_connections: int = 10, pool_mode: str = "transaction", **variables: Any) -> dict:
    """A proxy whose PostgreSQL listener is on ``port``, the test role pooled on the machine's server."""
    values = {"mysql-threads": 1, "mysql-monitor_enabled": "false", "pgsql-interfaces": f"127.0.0.1:{port}"}
    values.update(variables)
    return {
        "pgsql_servers": [
            {"hostgroup_id": HG, "hostname": PG_HOST, "port": PG_PORT, "max_connections": max_connections}
        ],
        "pgsql_users": [
            {"username": ROLE, "password": PASSWORD, "default_hostgroup": HG, "pool_mode": pool_mode},
        ],
        "global_variables": [{"variable_name": k, "variable_value": str(v)} for k, v in values.items()],
    }


class Pooler:
    """A running proxy with its PostgreSQL listener."""

    def __init__(self, proxy: ProxyProcess, port: int) -> None:
        self.proxy = proxy
        self.port = port

    def connect(self, **kwargs: Any) -> psycopg.Connection:
        """A psycopg connection through the proxy as the test role to the test database (no TLS unless asked)."""
        options: dict[str, Any] = {"sslmode": "disable", "password": PASSWORD, "user": ROLE, "dbname": DATABASE}
        options.update(kwargs)
        return psycopg.connect(host="127.0.0.1", port=self.port, connect_timeout=10, **options)

    def dsn(self) -> str:
        """The libpq connection string of the proxy (for pgbench, asyncpg and psql)."""
        return f"postgresql://{ROLE}:{PASSWORD}@127.0.0.1:{self.port}/{DATABASE}?sslmode=disable"

    def stats(self) -> dict[str, Any]:
        """The proxy's ``pgsql`` report section."""
        return self.proxy.stats()["pgsql"]


@pytest.fixture
def start_pooler(pg_database: str, start_proxy: Callable[[dict[str, Any]], ProxyProcess]) -> Callable[..., Pooler]:
    """Start a pooling proxy (``pool_config``'s arguments)."""

    def start(**kwargs: Any) -> Pooler:
        port = free_port()
        return Pooler(start_proxy(pool_config(port, **kwargs)), port)

    return start


def server_sessions(state: str | None = None) -> list[tuple[str, str]]:
    """The test role's server connections now: (state, query) each, optionally only those in ``state``."""
    with superuser() as conn:
        rows = conn.execute(
            "SELECT state, query FROM pg_stat_activity WHERE usename = %s AND pid <> pg_backend_pid()", (ROLE,)
        ).fetchall()
    return [(s, q) for s, q in rows if state is None or s == state]
