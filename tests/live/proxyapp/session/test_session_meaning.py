"""A client cannot tell the proxy from its server: each test runs the same statements through the proxy and on a
direct twin session (the sandbox's primary, opened exactly as the client opens the proxy's, nothing of the proxy's in
it) and compares what the client gets: errors, affected rows, the OK's info, every session variable.

The proxy's primary has few backend connections, so a connection one session let go is the next one's at once.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import MySQLdb
import pymysql
import pytest
from pymysql.constants import CLIENT

from devstack.proxy import ProxyProcess, small_pool_config
from devstack.sandbox import Sandbox
from devstack.stack import wait_until
from tests.support.clients import answer, open_session
from tests.support.harness import StartProxy

TABLE = "app.sm_rows"

#: How clients ask for their sessions: (driver, extra capability flags, character set).
CLIENTS = {
    "pymysql": ("pymysql", 0, "utf8mb4"),
    "pymysql FOUND_ROWS": ("pymysql", CLIENT.FOUND_ROWS, "utf8mb4"),
    "pymysql IGNORE_SPACE": ("pymysql", CLIENT.IGNORE_SPACE, "utf8mb4"),
    "pymysql INTERACTIVE": ("pymysql", CLIENT.INTERACTIVE, "latin1"),
    "mysqlclient": ("mysqlclient", 0, "utf8mb4"),
    "mysqlclient FOUND_ROWS": ("mysqlclient", CLIENT.FOUND_ROWS, "utf8mb4"),
}

#: Session variables that differ between any two sessions of the server (its thread, its clock): not compared.
PER_CONNECTION = frozenset({"pseudo_thread_id", "timestamp", "rand_seed1", "rand_seed2"})


def connect(port: int, client: str) -> Any:
    """A session of ``client`` (a key of ``CLIENTS``) on ``port``."""
    driver, flags, charset = CLIENTS[client]
    return open_session(port, driver, flags, charset)


def affected(conn: Any, sql: str) -> tuple[int, int, str]:
    """Run a change: its error, its affected rows and its OK packet's info ("Rows matched: 1  Changed: 0 ...")."""
    got = answer(conn, sql)
    return got.code, got.affected, got.info


def variables(conn: Any) -> dict[str, str]:
    """Every session variable, as SHOW SESSION VARIABLES gives it."""
    with conn.cursor() as cur:
        cur.execute("SHOW SESSION VARIABLES")
        return {name: value for name, value in cur.fetchall()}


def idle(proxy: ProxyProcess) -> int:
    """The proxy's idle backend connections, with no session open."""
    stats = proxy.stats()
    if stats["global"]["Client_Connections_connected"]:
        return -1
    return sum(int(row["ConnFree"]) for row in stats["connection_pool"])


def error_code(conn: Any, sql: str) -> int:
    """The error ``sql`` fails with, 0 if it succeeds."""
    try:
        return answer(conn, sql).code
    except (pymysql.err.InterfaceError, MySQLdb.InterfaceError):
        return 2006  # the driver knows its connection is gone: MySQL server has gone away


@pytest.fixture(scope="module", autouse=True)
def backend_objects(sandbox: Sandbox) -> None:
    """The table the tests change."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (id INT PRIMARY KEY, qty INT NOT NULL)")
        cur.execute(f"REPLACE INTO {TABLE} VALUES (1, 1), (2, 1), (3, 1), (4, 1)")


@pytest.fixture
def proxy(sandbox: Sandbox, start_proxy: StartProxy) -> ProxyProcess:
    """A proxy whose primary has three backend connections, all kept when idle."""
    return start_proxy(small_pool_config(sandbox.primary().port, 3))


@pytest.fixture
def direct(sandbox: Sandbox) -> int:
    """The port of the twin sessions: the primary itself."""
    return sandbox.primary().port


@pytest.fixture
def opened() -> Iterator[Callable[[Any], Any]]:
    """Close what a test opened."""
    conns: list[Any] = []

    def keep(conn: Any) -> Any:
        conns.append(conn)
        return conn

    yield keep
    for conn in conns:
        with contextlib.suppress(Exception):  # already closed by the test
            conn.close()


def test_a_savepoint_first_with_autocommit_off_stays_on_its_connection(
    proxy: ProxyProcess, direct: int, opened: Callable[[Any], Any]
) -> None:
    """Django's nested atomic: ``SET autocommit=0`` then SAVEPOINT as the transaction's first statement. MariaDB sets
    no IN_TRANS for it; two other sessions take the other connections in the meantime, so a connection given back
    there is gone when the ROLLBACK TO SAVEPOINT comes."""
    for port in (direct, proxy.port):
        django = opened(connect(port, "mysqlclient FOUND_ROWS"))
        others = [opened(connect(port, "mysqlclient FOUND_ROWS")) for _ in range(2)]
        with django.cursor() as cur:
            cur.execute("SET autocommit = 0")
            cur.execute("SAVEPOINT s1")
        for other in others:
            with other.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute(f"SELECT qty FROM {TABLE} WHERE id = 1")
        with django.cursor() as cur:
            cur.execute(f"UPDATE {TABLE} SET qty = 7 WHERE id = 2")
            assert error_code(django, "ROLLBACK TO SAVEPOINT s1") == 0, port
            cur.execute(f"SELECT qty FROM {TABLE} WHERE id = 2")
            assert cur.fetchone() == (1,)
            cur.execute("COMMIT")
        for other in others:
            other.rollback()


def test_a_read_with_autocommit_off_keeps_its_snapshot(
    proxy: ProxyProcess, sandbox: Sandbox, direct: int, opened: Callable[[Any], Any]
) -> None:
    """Under REPEATABLE READ, the first read with autocommit off fixes what the transaction sees: a change committed
    meanwhile stays unseen until COMMIT, whichever connections the other sessions take."""
    for port in (direct, proxy.port):
        reader = opened(connect(port, "pymysql"))
        others = [opened(connect(port, "pymysql")) for _ in range(2)]
        with reader.cursor() as cur:
            cur.execute("SET autocommit = 0")
            cur.execute(f"SELECT qty FROM {TABLE} WHERE id = 3")
            assert cur.fetchone() == (1,)
        for other in others:
            with other.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute("SELECT 1")
        with sandbox.primary().connect() as writer, writer.cursor() as cur:
            cur.execute(f"UPDATE {TABLE} SET qty = 5 WHERE id = 3")
        with reader.cursor() as cur:
            cur.execute(f"SELECT qty FROM {TABLE} WHERE id = 3")
            assert cur.fetchone() == (1,), port  # the snapshot of the first read
            cur.execute("COMMIT")
            cur.execute(f"SELECT qty FROM {TABLE} WHERE id = 3")
            assert cur.fetchone() == (5,)
            cur.execute(f"UPDATE {TABLE} SET qty = 1 WHERE id = 3")
            cur.execute("COMMIT")
        for other in others:
            other.rollback()


@pytest.mark.parametrize("client", CLIENTS)
def test_affected_rows_and_info_are_the_server_own(
    client: str, proxy: ProxyProcess, direct: int, opened: Callable[[Any], Any]
) -> None:
    """An UPDATE that matches rows already so: 0 affected unless the client asked for FOUND_ROWS, as direct; a
    connection another client's flags opened never serves it (the other client goes first)."""
    other = "pymysql" if CLIENTS[client][1] & CLIENT.FOUND_ROWS else "pymysql FOUND_ROWS"
    with opened(connect(proxy.port, other)).cursor() as cur:
        cur.execute(f"UPDATE {TABLE} SET qty = 1 WHERE id = 4")
    statements = [
        f"UPDATE {TABLE} SET qty = 1 WHERE id = 4",
        f"UPDATE {TABLE} SET qty = 1 WHERE id IN (1, 2, 4)",
        f"INSERT INTO {TABLE} VALUES (4, 1) ON DUPLICATE KEY UPDATE qty = 1",
    ]
    twin = opened(connect(direct, client))
    through = opened(connect(proxy.port, client))
    for sql in statements:
        assert affected(through, sql) == affected(twin, sql), sql


@pytest.mark.parametrize("client", CLIENTS)
def test_every_session_variable_is_the_server_own_on_a_fresh_and_a_reused_connection(
    client: str, proxy: ProxyProcess, sandbox: Sandbox, direct: int, opened: Callable[[Any], Any]
) -> None:
    """SHOW SESSION VARIABLES through the proxy equals a direct session's: on the backend connection the session's
    login opened, and on one another session of the same client changed (sql_mode, wait_timeout, the time zone,
    the character set, a user variable) and gave back."""
    with sandbox.primary().connect() as root, root.cursor() as cur:
        cur.execute("SET GLOBAL interactive_timeout = 4321")  # an INTERACTIVE login's wait_timeout, told apart
    try:
        want = variables(opened(connect(direct, client)))
        created = proxy.stats()["global"]["Server_Connections_created"]
        first = connect(proxy.port, client)
        fresh = variables(first)
        first.close()
        assert proxy.stats()["global"]["Server_Connections_created"] == created + 1  # a fresh connection
        assert {k: v for k, v in fresh.items() if want.get(k) != v and k not in PER_CONNECTION} == {}
        changer = opened(connect(proxy.port, client))
        with changer.cursor() as cur:
            cur.execute(
                "SET SESSION sql_mode = 'ANSI', wait_timeout = 77, time_zone = '+03:00', NAMES utf8mb3, @leftover = 1"
            )
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE")
            cur.execute("CREATE TEMPORARY TABLE sm_scratch (a INT)")
        changer.close()
        wait_until(lambda: idle(proxy) == 1, "the changed connection reset and idle", 10, interval=0.01)
        created = proxy.stats()["global"]["Server_Connections_created"]
        reused = variables(opened(connect(proxy.port, client)))
        assert proxy.stats()["global"]["Server_Connections_created"] == created  # one of the pool's
        assert {k: v for k, v in reused.items() if want.get(k) != v and k not in PER_CONNECTION} == {}
    finally:
        with sandbox.primary().connect() as root, root.cursor() as cur:
            cur.execute("SET GLOBAL interactive_timeout = DEFAULT")


def test_ignore_space_is_the_client_own(proxy: ProxyProcess, direct: int, opened: Callable[[Any], Any]) -> None:
    """``count`` is a table name unless the client asked for IGNORE_SPACE, whichever connection the proxy uses."""
    for client in ("pymysql IGNORE_SPACE", "pymysql", "pymysql IGNORE_SPACE", "pymysql"):
        for port in (direct, proxy.port):
            conn = opened(connect(port, client))
            code = error_code(conn, "CREATE TEMPORARY TABLE count (i INT)")
            assert code == (1064 if "IGNORE_SPACE" in client else 0), (client, port)


def test_a_session_own_wait_timeout_ends_it_idle(proxy: ProxyProcess, opened: Callable[[Any], Any]) -> None:
    """``SET wait_timeout = 1``: read back as 1; idle past it (on the proxy's clock), the session is closed as
    MariaDB 10.11 closes it (the client reads a lost connection); a session without it stays; the backend
    connection goes back to the pool with the server's wait_timeout."""
    short = opened(connect(proxy.port, "pymysql"))
    patient = opened(connect(proxy.port, "pymysql"))
    with short.cursor() as cur:
        cur.execute("SET SESSION wait_timeout = 1")
        cur.execute("SELECT @@wait_timeout")
        assert cur.fetchone() == (1,)
    proxy.advance_clock(2.5)
    assert error_code(short, "SELECT 1") in (2006, 2013)
    with patient.cursor() as cur:
        cur.execute("SELECT @@wait_timeout")
        assert cur.fetchone() == (28800,)
    with opened(connect(proxy.port, "pymysql")).cursor() as cur:  # whichever connection it gets
        cur.execute("SELECT @@wait_timeout")
        assert cur.fetchone() == (28800,)


def test_savepoint_loops_under_churn_match_direct(proxy: ProxyProcess, opened: Callable[[Any], Any]) -> None:
    """The user's loop: ``SET autocommit=0; SAVEPOINT s1; INSERT; ROLLBACK TO SAVEPOINT s1``, 40 times, while two
    other sessions borrow the pool's connections without a pause: every ROLLBACK TO finds its savepoint."""
    stop = threading.Event()
    failures: list[str] = []

    def churn() -> None:
        with opened(connect(proxy.port, "pymysql")).cursor() as cur:
            while not stop.is_set():
                cur.execute("SELECT @@in_transaction, @@autocommit")
                if cur.fetchone() != (0, 1):
                    failures.append("a churner inherited another session's transaction")

    churners = [threading.Thread(target=churn) for _ in range(2)]
    for thread in churners:
        thread.start()
    try:
        conn = opened(connect(proxy.port, "pymysql"))
        for i in range(40):
            with conn.cursor() as cur:
                cur.execute("SET autocommit = 0")
                cur.execute("SAVEPOINT s1")
                cur.execute(f"INSERT INTO {TABLE} VALUES ({1000 + i}, 0)")
                code = error_code(conn, "ROLLBACK TO SAVEPOINT s1")
                if code:
                    failures.append(f"round {i}: ROLLBACK TO SAVEPOINT failed with {code}")
                cur.execute("COMMIT")
                cur.execute("SET autocommit = 1")
    finally:
        stop.set()
        for thread in churners:
            thread.join()
    assert failures == []
    with conn.cursor() as cur:
        cur.execute(f"SELECT COUNT(*) FROM {TABLE} WHERE id >= 1000")
        assert cur.fetchone() == (0,)
