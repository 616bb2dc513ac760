"""A sandbox of a failover test's own (a primary and two replicas, which the session's sandbox does not have), under
``var/test-sandbox/<name>-<pid>``; sandboxes of earlier runs whose pytest process is gone are taken down first."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pymysql

from fleet.sandbox import Sandbox, SandboxServer, pid_alive
from tests.conftest import TEST_SANDBOX_ROOT


@contextmanager
def own_sandbox(name: str, semi_sync: bool = False) -> Iterator[Sandbox]:
    """A fresh primary with two replicas (semi-synchronous when asked), taken down afterwards."""
    for path in TEST_SANDBOX_ROOT.glob(f"{name}-*"):
        pid = path.name.rpartition("-")[2]
        if pid.isdigit() and not pid_alive(int(pid)):
            Sandbox(path).down()
    box = Sandbox(TEST_SANDBOX_ROOT / f"{name}-{os.getpid()}")
    box.down()
    box.up(replicas=2, semi_sync=semi_sync)
    try:
        yield box
    finally:
        box.down()


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
