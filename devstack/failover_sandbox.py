"""A failover sandbox (a primary and two replicas, which the test session's sandbox does not have: each failover test
module and the failover benchmark make their own): the config document that puts it in a replication hostgroup, and
reading its servers. No Django here."""

from __future__ import annotations

from typing import Any

import pymysql

from devstack.sandbox import APP_PASSWORD, APP_USER, SandboxServer


def address(server: SandboxServer) -> str:
    """A sandbox server as failover names it: host:port."""
    return f"{server.host}:{server.port}"


def query(server: SandboxServer, sql: str, args: object = None) -> list[tuple[object, ...]]:
    """Rows of ``sql`` run as root on ``server``."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def read_only(server: SandboxServer) -> bool:
    """Whether ``server`` is read-only now."""
    return bool(int(query(server, "SELECT @@read_only")[0][0]))


def ids(server: SandboxServer, table: str = "app.failover_rows") -> set[int]:
    """The ids in ``table`` on ``server`` (empty when the table does not exist there)."""
    try:
        return {int(row[0]) for row in query(server, f"SELECT id FROM {table}")}
    except pymysql.err.ProgrammingError:
        return set()


def server_row(hostgroup: int, server: str, **columns: Any) -> dict[str, Any]:
    """A ``mysql_servers`` row for ``server`` (host:port)."""
    host, port = server.rsplit(":", 1)
    return {"hostgroup_id": hostgroup, "hostname": host, "port": int(port), **columns}


def ha_document(primary: str, replicas: list[str], **primary_columns: Any) -> dict[str, Any]:
    """Writer hostgroup 10 = ``primary``; reader hostgroup 20 = the replicas (weight 1000 each); the user ``app``."""
    return {
        "mysql_servers": [
            server_row(10, primary, **primary_columns),
            *(server_row(20, replica, weight=1000) for replica in replicas),
        ],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 10}],
        "mysql_replication_hostgroups": [{"writer_hostgroup": 10, "reader_hostgroup": 20}],
    }
