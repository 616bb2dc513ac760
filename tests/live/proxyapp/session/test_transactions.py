"""A proxy never changes what a transaction means: statement errors, savepoints, deadlocks, lock-wait timeouts and
a failed USE inside a transaction leave the transaction where the server has it, on the session's own connection.

The primary has at most two backend connections, both kept when idle, and a second session runs between the
steps: a connection let go too early is taken at once by the other session (whose ``SET autocommit=1`` would commit
what it holds).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest

from devstack.proxy import ProxyProcess, small_pool_config
from devstack.sandbox import Sandbox
from tests.support.harness import StartProxy, open_transactions

TABLE = "app.tx_integrity"


@pytest.fixture(scope="module", autouse=True)
def backend_objects(sandbox: Sandbox) -> None:
    """The table the tests write."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (k INT PRIMARY KEY, v INT NOT NULL DEFAULT 0)")


@pytest.fixture(autouse=True)
def empty_table(sandbox: Sandbox) -> None:
    """Each test starts with no rows."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"DELETE FROM {TABLE}")


@pytest.fixture
def proxy(sandbox: Sandbox, start_proxy: StartProxy) -> ProxyProcess:
    """A proxy whose primary has two backend connections."""
    return start_proxy(small_pool_config(sandbox.primary().port))


@pytest.fixture
def sessions(proxy: ProxyProcess) -> Iterator[Callable[..., pymysql.Connection]]:
    """Open client sessions through the proxy (closed at the end of the test)."""
    opened: list[pymysql.Connection] = []

    def open_session(**kwargs: Any) -> pymysql.Connection:
        kwargs.setdefault("autocommit", True)
        conn = proxy.connect(database="app", **kwargs)
        opened.append(conn)
        return conn

    yield open_session
    for conn in opened:
        conn.close()


def run(conn: pymysql.Connection, sql: str) -> tuple[tuple[Any, ...], ...]:
    """Run ``sql``; its rows."""
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def error_code(conn: pymysql.Connection, sql: str) -> int:
    """Run ``sql``, which must fail; its error number."""
    with pytest.raises(pymysql.err.MySQLError) as info, conn.cursor() as cur:
        cur.execute(sql)
    return int(info.value.args[0])


def churn(conns: list[pymysql.Connection]) -> None:
    """Other sessions take whatever backend connection is free and run autocommit statements on it."""
    for conn in conns:
        assert run(conn, "SELECT 1") == ((1,),)
        run(conn, "SET autocommit = 1")
        assert run(conn, "SELECT @@in_transaction") == ((0,),)


def committed(sandbox: Sandbox) -> list[int]:
    """The keys committed in the table, read directly on the primary."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT k FROM {TABLE} ORDER BY k")
        return [row[0] for row in cur.fetchall()]


@pytest.mark.parametrize("opening", ["SET autocommit = 0", "BEGIN", "START TRANSACTION"])
def test_a_duplicate_key_error_keeps_the_transaction_and_its_rollback(
    sessions: Callable[..., pymysql.Connection], sandbox: Sandbox, opening: str
) -> None:
    mine = sessions()
    others = [sessions(), sessions()]
    for k in range(1, 6):
        run(mine, opening)
        run(mine, f"INSERT INTO tx_integrity (k) VALUES ({k})")
        assert error_code(mine, f"INSERT INTO tx_integrity (k) VALUES ({k})") == 1062
        churn(others)
        assert run(mine, "SELECT @@in_transaction") == ((1,),)
        churn(others)
        run(mine, "ROLLBACK")
        run(mine, "SET autocommit = 1")
    assert committed(sandbox) == []
    assert open_transactions(sandbox.primary()) == []


def test_rollback_to_a_savepoint_after_an_error(sessions: Callable[..., pymysql.Connection], sandbox: Sandbox) -> None:
    """The ORMs' get-or-create: a savepoint, an expected duplicate, back to the savepoint, and on."""
    mine = sessions()
    others = [sessions(), sessions()]
    for autocommit in (True, False):
        mine.autocommit(autocommit)
        base = 10 if autocommit else 20
        run(mine, "BEGIN")
        run(mine, f"INSERT INTO tx_integrity (k) VALUES ({base + 1})")
        run(mine, "SAVEPOINT s1")
        assert error_code(mine, f"INSERT INTO tx_integrity (k) VALUES ({base + 1})") == 1062
        churn(others)
        run(mine, "ROLLBACK TO SAVEPOINT s1")
        run(mine, f"INSERT INTO tx_integrity (k) VALUES ({base + 2})")
        run(mine, "RELEASE SAVEPOINT s1")
        churn(others)
        run(mine, "COMMIT")
    assert committed(sandbox) == [11, 12, 21, 22]


def test_a_failed_use_inside_a_transaction_keeps_it(
    sessions: Callable[..., pymysql.Connection], sandbox: Sandbox
) -> None:
    mine = sessions()
    others = [sessions(), sessions()]
    run(mine, "BEGIN")
    run(mine, "INSERT INTO tx_integrity (k) VALUES (1)")
    with pytest.raises(pymysql.err.MySQLError) as info:
        mine.select_db("no_such_schema")  # COM_INIT_DB, answered with an error packet
    assert info.value.args[0] == 1049
    churn(others)
    assert run(mine, "SELECT k FROM tx_integrity") == ((1,),)
    run(mine, "ROLLBACK")
    assert committed(sandbox) == []


def test_a_lock_wait_timeout_rolls_back_the_statement_not_the_transaction(
    sessions: Callable[..., pymysql.Connection], sandbox: Sandbox, proxy: ProxyProcess
) -> None:
    mine, holder, other = sessions(), sessions(), sessions()
    run(holder, "BEGIN")
    run(holder, "INSERT INTO tx_integrity (k) VALUES (100)")  # holds the lock on k=100
    run(mine, "SET SESSION innodb_lock_wait_timeout = 1")
    run(mine, "BEGIN")
    run(mine, "INSERT INTO tx_integrity (k) VALUES (1)")
    assert error_code(mine, "INSERT INTO tx_integrity (k) VALUES (100)") == 1205
    run(holder, "ROLLBACK")
    churn([holder, other])
    run(mine, "INSERT INTO tx_integrity (k) VALUES (2)")
    run(mine, "COMMIT")
    assert committed(sandbox) == [1, 2]
    assert proxy.stats()["global"]["Active_Transactions"] == 0


def test_a_deadlock_ends_the_transaction_and_the_proxy_knows(
    sessions: Callable[..., pymysql.Connection], sandbox: Sandbox, proxy: ProxyProcess
) -> None:
    with sandbox.primary().connect() as root, root.cursor() as cur:
        cur.execute(f"INSERT INTO {TABLE} (k) VALUES (1), (2)")
    first, second = sessions(), sessions()
    run(first, "BEGIN")
    run(second, "BEGIN")
    run(first, "INSERT INTO tx_integrity (k) VALUES (50)")
    run(second, "INSERT INTO tx_integrity (k) VALUES (60)")
    run(first, "UPDATE tx_integrity SET v = 1 WHERE k = 1")
    run(second, "UPDATE tx_integrity SET v = 2 WHERE k = 2")
    outcome: dict[str, int] = {}

    def cross(conn: pymysql.Connection, name: str, key: int) -> None:
        try:
            run(conn, f"UPDATE tx_integrity SET v = 3 WHERE k = {key}")
            outcome[name] = 0
        except pymysql.err.MySQLError as exc:
            outcome[name] = int(exc.args[0])

    waiting = threading.Thread(target=cross, args=(first, "first", 2))
    waiting.start()
    waits = 0  # until the first waits for the second's lock: an event InnoDB reports, polled
    while not any(state == "LOCK WAIT" for _, state, _ in open_transactions(sandbox.primary())):
        waits += 1
        assert waits < 10_000 and waiting.is_alive(), outcome
    cross(second, "second", 1)
    waiting.join(30)
    assert sorted(outcome.values()) == [0, 1213]
    victim, survivor = (first, second) if outcome["first"] == 1213 else (second, first)
    assert run(victim, "SELECT @@in_transaction") == ((0,),)  # the server rolled it back: so does the proxy
    run(survivor, "COMMIT")
    assert proxy.stats()["global"]["Active_Transactions"] == 0
    survivor_key = 50 if survivor is first else 60
    assert committed(sandbox) == [1, 2, survivor_key]
    assert open_transactions(sandbox.primary()) == []


def test_an_error_in_a_multi_statement_batch_leaves_no_transaction_to_others(
    proxy: ProxyProcess, sandbox: Sandbox
) -> None:
    mine = proxy.connect(database="app", autocommit=True, client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
    others = [proxy.connect(database="app", autocommit=True) for _ in range(2)]
    try:
        with pytest.raises(pymysql.err.MySQLError) as info, mine.cursor() as cur:
            cur.execute("BEGIN; INSERT INTO tx_integrity (k) VALUES (7); INSERT INTO tx_integrity (k) VALUES (7)")
            while cur.nextset():
                pass
        assert info.value.args[0] == 1062
        churn(others)
        run(mine, "ROLLBACK")
        assert committed(sandbox) == []
    finally:
        for conn in [mine, *others]:
            conn.close()


def test_sessions_closed_mid_transaction_leave_no_transaction_in_the_pool(
    sessions: Callable[..., pymysql.Connection], sandbox: Sandbox, proxy: ProxyProcess
) -> None:
    for k in range(1, 5):
        gone = proxy.connect(database="app", autocommit=False)
        run(gone, f"INSERT INTO tx_integrity (k) VALUES ({k})")
        assert error_code(gone, f"INSERT INTO tx_integrity (k) VALUES ({k})") == 1062
        gone.close()
    churn([sessions(), sessions()])
    assert committed(sandbox) == []
    assert open_transactions(sandbox.primary()) == []
    assert "inside a transaction" not in proxy.log()
