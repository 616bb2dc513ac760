"""Where the suites run: the servers direct, and a ProxyFleet node in front of them (a ``ProxyProcess`` from a config
document), with the user the harness makes for them on each server."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import psycopg
import pymysql

from devstack.pgbouncer import PgBouncer
from devstack.ports import free_port
from devstack.proxy import ProxyProcess

HOST = "127.0.0.1"
MYSQL_PORT = 3306
PGSQL_PORT = 5432
#: The login the harness makes on both servers, with every privilege, for the runs through the proxy.
USER = "conformance"
PASSWORD = "conformance-pass"
MYSQL_HOSTGROUP = 0
PGSQL_HOSTGROUP = 100


@dataclass(frozen=True)
class Endpoint:
    """One way to a server: its address and the login used there."""

    name: str  # direct, proxy, pooler, forward, pgbouncer
    port: int
    user: str
    password: str
    host: str = HOST


MYSQL_DIRECT = Endpoint("direct", MYSQL_PORT, "root", "")
PGSQL_DIRECT = Endpoint("direct", PGSQL_PORT, USER, PASSWORD)


def ensure_mysql_user() -> None:
    """``conformance`` on the MariaDB at 127.0.0.1:3306 with every privilege, its password reset."""
    conn = pymysql.connect(host=HOST, port=MYSQL_PORT, user="root", password="", connect_timeout=10)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE USER IF NOT EXISTS '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'")
            cur.execute(f"ALTER USER '{USER}'@'%' IDENTIFIED BY '{PASSWORD}'")
            cur.execute(f"GRANT ALL ON *.* TO '{USER}'@'%' WITH GRANT OPTION")
    finally:
        conn.close()


def _pg_admin() -> psycopg.Connection[object]:
    return psycopg.connect(host=HOST, port=PGSQL_PORT, user="postgres", dbname="postgres", autocommit=True)


def ensure_pgsql_user() -> None:
    """The superuser role ``conformance`` (with a password) on the PostgreSQL at 127.0.0.1:5432."""
    with _pg_admin() as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (USER,)).fetchone() is None:
            conn.execute(f"CREATE ROLE {USER} LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
        else:
            conn.execute(f"ALTER ROLE {USER} LOGIN SUPERUSER PASSWORD '{PASSWORD}'")


def fresh_pgsql_database(name: str) -> None:
    """An empty database ``name`` owned by ``conformance`` (dropped first if it exists, its sessions ended)."""
    with _pg_admin() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" OWNER {USER}')


def drop_pgsql_databases(prefix: str) -> None:
    """Drop every database whose name starts with ``prefix`` (a run's test databases, ``_other`` and clones), their
    sessions ended: those a pooler keeps included, which would make Django's own DROP DATABASE fail."""
    with _pg_admin() as conn:
        names = conn.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (prefix,)).fetchall()
        for (name,) in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def mysql_proxy_config() -> dict[str, object]:
    """One hostgroup holding the server at 127.0.0.1:3306 and ``conformance`` in ``mysql_users``; defaults
    otherwise."""
    return {
        "mysql_servers": [{"hostgroup_id": MYSQL_HOSTGROUP, "hostname": HOST, "port": MYSQL_PORT}],
        "mysql_users": [{"username": USER, "password": PASSWORD, "default_hostgroup": MYSQL_HOSTGROUP}],
        "global_variables": [],
    }


def pgsql_proxy_config(pooler_port: int, forward_port: int) -> dict[str, object]:
    """The server at 127.0.0.1:5432 in one hostgroup, behind the pooler (``pgsql-interfaces``, ``conformance`` in
    ``pgsql_users`` in transaction pooling) and a forwarding listener; defaults otherwise."""
    return {
        "pgsql_servers": [{"hostgroup_id": PGSQL_HOSTGROUP, "hostname": HOST, "port": PGSQL_PORT}],
        "pgsql_users": [
            {"username": USER, "password": PASSWORD, "default_hostgroup": PGSQL_HOSTGROUP, "pool_mode": "transaction"}
        ],
        "pgsql_forward_listeners": [{"port": forward_port, "interface": HOST, "hostgroup_id": PGSQL_HOSTGROUP}],
        "global_variables": [{"variable_name": "pgsql-interfaces", "variable_value": f"{HOST}:{pooler_port}"}],
    }


class MysqlProxy:
    """A proxy node in front of the MariaDB at 127.0.0.1:3306, for the ``proxy`` target."""

    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.process = ProxyProcess(mysql_proxy_config(), workdir)

    def __enter__(self) -> Endpoint:
        ensure_mysql_user()
        self.process.start()
        return Endpoint("proxy", self.process.port, USER, PASSWORD)

    def __exit__(self, *exc: object) -> None:
        self.process.stop()


class PgsqlProxy:
    """A proxy node in front of the PostgreSQL at 127.0.0.1:5432, for the ``pooler`` and ``forward`` targets."""

    def __init__(self, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.pooler_port, self.forward_port = free_port(), free_port()
        self.process = ProxyProcess(pgsql_proxy_config(self.pooler_port, self.forward_port), workdir)

    def __enter__(self) -> dict[str, Endpoint]:
        ensure_pgsql_user()
        self.process.start()
        return {
            "pooler": Endpoint("pooler", self.pooler_port, USER, PASSWORD),
            "forward": Endpoint("forward", self.forward_port, USER, PASSWORD),
        }

    def __exit__(self, *exc: object) -> None:
        self.process.stop()


#: The reference targets: peers measured beside the proxy, whose failures are theirs (reported, never failing a run).
REFERENCES = frozenset({"pgbouncer"})
#: PgBouncer's server connections per user and database (the suites run one client at a time, asyncpg's pool tests a
#: few more).
PGBOUNCER_POOL_SIZE = 20


class PgbouncerReference:
    """PgBouncer in transaction pooling mode in front of the PostgreSQL at 127.0.0.1:5432 (every database,
    ``conformance`` by SCRAM; ``devstack/pgbouncer.py`` picks the binary), for the ``pgbouncer`` target."""

    def __init__(self, workdir: Path) -> None:
        databases = [f"* = host={HOST} port={PGSQL_PORT}"]
        self.bouncer = PgBouncer(workdir, databases, USER, PASSWORD, PGBOUNCER_POOL_SIZE, "postgres")

    def __enter__(self) -> Endpoint:
        ensure_pgsql_user()
        self.bouncer.start()
        return Endpoint("pgbouncer", self.bouncer.port, USER, PASSWORD)

    def __exit__(self, *exc: object) -> None:
        self.bouncer.stop()
