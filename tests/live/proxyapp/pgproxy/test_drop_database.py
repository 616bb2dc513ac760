"""DROP DATABASE through the pooling proxy with two workers (issue 41, defect 4): the pool's idle server connections
to the database are closed in every worker process of the node first, or the server refuses the DROP ("being
accessed by other users"), as a test framework's teardown of its test database does; by the simple and the extended
protocol. ALTER DATABASE ... RENAME TO needs the same."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import psycopg
import pytest

from devstack.stack import wait_until
from tests.live.proxyapp.pgproxy.conftest import DATABASE, PASSWORD, ROLE, Pooler, superuser
from tests.support.pgraw import logged_in, message, read_message

StartPooler = Callable[..., Pooler]
VICTIM = f"pf_pool_dropped_{os.getpid()}"
RENAMED = f"pf_pool_renamed_{os.getpid()}"
WORKERS = 2


@pytest.fixture
def victim() -> Iterator[str]:
    """A database of the test role's, to drop or rename through the proxy."""
    with superuser() as conn:
        for name in (VICTIM, RENAMED):
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {VICTIM} OWNER {ROLE}")
        conn.execute(f"ALTER ROLE {ROLE} CREATEDB")  # an owner renames only with it
    yield VICTIM
    with superuser() as conn:
        for name in (VICTIM, RENAMED):
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def idle_connections_to(database: str) -> int:
    with superuser() as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (database,)).fetchone()
    assert row is not None
    return int(row[0])


def leave_idle_connections_in_every_worker(pooler: Pooler, database: str) -> None:
    """Clients of ``database`` on every worker (a client's process id says which), each in a transaction at once so
    that each worker opens a server connection, then gone: their connections stay idle in the workers' pools."""
    clients: list[psycopg.Connection] = []
    try:
        while {conn.info.backend_pid % WORKERS for conn in clients} != set(range(WORKERS)):
            assert len(clients) < 64, "the kernel never spread the clients over the workers"
            conn = pooler.connect(dbname=database)
            conn.execute("SELECT 1")  # holds its server connection until the commit
            clients.append(conn)
        for conn in clients:
            conn.commit()
    finally:
        for conn in clients:
            conn.close()
    wait_until(lambda: idle_connections_to(database) >= WORKERS, "idle connections in both workers", 10)


@pytest.mark.parametrize("protocol", ["simple", "extended"])
def test_drop_database_closes_the_idle_connections_of_every_worker(
    start_pooler: StartPooler, victim: str, protocol: str
) -> None:
    pooler = start_pooler(**{"mysql-threads": WORKERS})
    leave_idle_connections_in_every_worker(pooler, victim)
    if protocol == "simple":  # from the test database, on either worker
        with logged_in(pooler.port, ROLE, PASSWORD, DATABASE, 30) as sock:
            sock.sendall(message(b"Q", f"DROP DATABASE {victim}\0".encode()))
            answer = read_message(sock)
            assert answer == (b"C", b"DROP DATABASE\0"), answer
    else:
        with pooler.connect(autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {victim}")
    assert idle_connections_to(victim) == 0
    with superuser() as admin:
        assert admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (victim,)).fetchone() is None


def test_renaming_a_database_closes_the_idle_connections_of_every_worker(
    start_pooler: StartPooler, victim: str
) -> None:
    pooler = start_pooler(**{"mysql-threads": WORKERS})
    leave_idle_connections_in_every_worker(pooler, victim)
    with pooler.connect(autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {victim} RENAME TO {RENAMED}")
    with superuser() as admin:
        assert admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (RENAMED,)).fetchone() == (1,)
