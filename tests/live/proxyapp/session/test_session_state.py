"""Session state through a real proxy: many sessions share two backend connections, and each keeps its own state.

Hostgroup 10 is the primary with ``max_connections=2``, so sessions constantly take over connections another
session changed; every session still reads back exactly what it set, and nothing of it leaks to the others.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Callable, Iterator
from typing import Any

import mysql.connector
import pymysql
import pytest

from devstack.proxy import WRITER_HG, ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from tests.support.harness import StartProxy

SQL_MODES = [
    "ANSI_QUOTES",
    "NO_ZERO_DATE",
    "ONLY_FULL_GROUP_BY",
    "PIPES_AS_CONCAT",
    "IGNORE_SPACE",
    "NO_UNSIGNED_SUBTRACTION",
    "HIGH_NOT_PRECEDENCE",
    "NO_BACKSLASH_ESCAPES",
]
ISOLATION = [
    ("READ COMMITTED", "READ-COMMITTED"),
    ("SERIALIZABLE", "SERIALIZABLE"),
    ("READ UNCOMMITTED", "READ-UNCOMMITTED"),
    ("REPEATABLE READ", "REPEATABLE-READ"),
]
READBACK = (
    "SELECT @@session.sql_mode, @@session.time_zone, @@session.character_set_client, "
    "@@session.group_concat_max_len, @@session.div_precision_increment, DATABASE(), @@session.tx_isolation"
)


@pytest.fixture(scope="module", autouse=True)
def backend_objects(sandbox: Sandbox) -> None:
    """The schemas and tables the tests use."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS ss_db")
        cur.execute("CREATE TABLE IF NOT EXISTS app.ss_seven (id INT PRIMARY KEY)")
        cur.execute("REPLACE INTO app.ss_seven VALUES (1), (2), (3), (4), (5), (6), (7)")
        cur.execute("CREATE TABLE IF NOT EXISTS app.ss_three (id INT PRIMARY KEY)")
        cur.execute("REPLACE INTO app.ss_three VALUES (1), (2), (3)")
        cur.execute("CREATE TABLE IF NOT EXISTS app.ss_auto (id INT AUTO_INCREMENT PRIMARY KEY, who VARCHAR(10))")
        cur.execute("CREATE TABLE IF NOT EXISTS app.ss_tx (id INT PRIMARY KEY)")
        cur.execute("DELETE FROM app.ss_tx")
    sandbox.wait_replicated()


@pytest.fixture
def proxy(sandbox: Sandbox, start_proxy: StartProxy) -> ProxyProcess:
    """A proxy whose only hostgroup is the primary with two backend connections at most, both kept when idle."""
    return start_proxy(
        {
            "mysql_servers": [
                {
                    "hostgroup_id": WRITER_HG,
                    "hostname": "127.0.0.1",
                    "port": sandbox.primary().port,
                    "max_connections": 2,
                }
            ],
            "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": WRITER_HG}],
            # Keep both connections when idle (the default keeps 10% of max_connections, here one).
            "global_variables": [{"variable_name": "mysql-free_connections_pct", "variable_value": "100"}],
        }
    )


@pytest.fixture
def sessions(proxy: ProxyProcess) -> Iterator[Callable[[int], list[pymysql.Connection]]]:
    """Open N client sessions through the proxy (closed at the end of the test)."""
    opened: list[pymysql.Connection] = []

    def open_sessions(n: int) -> list[pymysql.Connection]:
        """N new sessions with the app schema, autocommit on."""
        conns = [proxy.connect(database="app", autocommit=True) for _ in range(n)]
        opened.extend(conns)
        return conns

    yield open_sessions
    for conn in opened:
        conn.close()


def one(conn: pymysql.Connection, sql: str, args: Any = None) -> tuple[Any, ...]:
    """The single row of a query."""
    with conn.cursor() as cur:
        cur.execute(sql, args)
        rows = cur.fetchall()
    assert len(rows) == 1, rows
    return rows[0]


def run(conn: pymysql.Connection, sql: str) -> None:
    """Run a statement, discarding any result."""
    with conn.cursor() as cur:
        cur.execute(sql)


def busy(conns: list[pymysql.Connection], rounds: int = 2) -> None:
    """Other sessions' traffic: each runs a few queries, taking whatever connection is free."""
    for _ in range(rounds):
        for conn in conns:
            assert one(conn, "SELECT 1 + 1") == (2,)


def defaults(sandbox: Sandbox) -> tuple[Any, ...]:
    """What READBACK returns for a session that set nothing (the server's global values, no schema)."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT @@global.sql_mode, @@global.time_zone, 'utf8mb4', @@global.group_concat_max_len, "
            "@@global.div_precision_increment, NULL, @@global.tx_isolation"
        )
        return cur.fetchone()


def configure(conn: pymysql.Connection, i: int) -> tuple[Any, ...]:
    """Give session ``i`` its own settings; returns what READBACK must show for it."""
    level, shown = ISOLATION[i % len(ISOLATION)]
    charset = "latin1" if i % 2 else "utf8mb4"
    schema = "ss_db" if i % 2 else "app"
    run(conn, f"SET sql_mode = '{SQL_MODES[i]}'")
    run(conn, f"SET time_zone = '+0{i}:00'")
    run(conn, f"SET NAMES {charset}")
    run(conn, f"SET SESSION group_concat_max_len = {2000 + i}, @@session.div_precision_increment = {i + 1}")
    run(conn, f"USE {schema}")
    run(conn, f"SET SESSION TRANSACTION ISOLATION LEVEL {level}")
    return (SQL_MODES[i], f"+0{i}:00", charset, 2000 + i, i + 1, schema, shown)


def pool_row(proxy: ProxyProcess) -> dict[str, Any]:
    """The connection pool row of the primary."""
    (row,) = proxy.admin("GET", "/stats/connection_pool")
    return row


def test_each_session_keeps_its_settings_on_shared_connections(
    proxy: ProxyProcess, sessions: Callable[[int], list[pymysql.Connection]]
) -> None:
    conns = sessions(8)
    expected = [configure(conn, i) for i, conn in enumerate(conns)]
    order = list(range(len(conns)))
    rng = random.Random(7)
    for _ in range(6):
        rng.shuffle(order)
        for i in order:
            assert one(conns[i], READBACK) == expected[i], f"session {i}"
    row = pool_row(proxy)
    assert row["MaxConnUsed"] <= 2 and row["ConnOK"] <= 2


def test_settings_survive_concurrent_interleaving(
    proxy: ProxyProcess, sessions: Callable[[int], list[pymysql.Connection]]
) -> None:
    conns = sessions(8)
    expected = [configure(conn, i) for i, conn in enumerate(conns)]
    errors: list[str] = []

    def worker(i: int) -> None:
        """Session i reads its settings back, again and again."""
        for n in range(15):
            got = one(conns[i], READBACK)
            if got != expected[i]:
                errors.append(f"session {i}, read {n}: {got} != {expected[i]}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(conns))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert pool_row(proxy)["MaxConnUsed"] <= 2


def test_a_sessions_settings_do_not_leak_to_others(
    sandbox: Sandbox, proxy: ProxyProcess, sessions: Callable[[int], list[pymysql.Connection]]
) -> None:
    changed = sessions(2)
    for i, conn in enumerate(changed):
        configure(conn, i + 1)
        run(conn, "SET @leaky = 'mine'")
    busy(changed)
    fresh = (*defaults(sandbox)[:5], "app", *defaults(sandbox)[6:])
    for _ in range(3):
        with proxy.connect(database="app", autocommit=True) as other:
            assert one(other, READBACK) == fresh
            assert one(other, "SELECT @leaky") == (None,)
            assert one(other, "SELECT @@session.autocommit") == (1,)


def test_a_session_without_a_schema_does_not_inherit_one(
    proxy: ProxyProcess, sessions: Callable[[int], list[pymysql.Connection]]
) -> None:
    """Both pooled connections were left in a schema by other sessions; a session that chose none sees none."""
    with_schema = sessions(2)
    for conn in with_schema:
        run(conn, "BEGIN")  # both connections at once
    for i, conn in enumerate(with_schema):
        run(conn, "USE ss_db" if i else "USE app")
        run(conn, "COMMIT")
    for _ in range(2):
        with proxy.connect(autocommit=True) as bare:
            assert one(bare, "SELECT DATABASE()") == (None,)
            with pytest.raises(pymysql.err.OperationalError) as info:
                run(bare, "SELECT COUNT(*) FROM ss_seven")
            assert info.value.args[0] == 1046  # No database selected
        busy(with_schema)
    assert pool_row(proxy)["MaxConnUsed"] <= 2


def test_autocommit_off_is_kept_per_session(
    sandbox: Sandbox, sessions: Callable[[int], list[pymysql.Connection]]
) -> None:
    off, on, watcher = sessions(3)
    run(off, "SET autocommit = 0")
    assert one(off, "SELECT @@session.autocommit") == (0,)
    assert one(on, "SELECT @@session.autocommit") == (1,)
    run(off, "INSERT INTO ss_tx VALUES (1)")
    assert one(watcher, "SELECT COUNT(*) FROM ss_tx") == (0,)  # not committed yet
    run(on, "INSERT INTO ss_tx VALUES (2)")  # autocommit: visible at once
    assert one(watcher, "SELECT COUNT(*) FROM ss_tx") == (1,)
    run(off, "COMMIT")
    assert one(watcher, "SELECT COUNT(*) FROM ss_tx") == (2,)
    busy([on, watcher])
    assert one(off, "SELECT @@session.autocommit") == (0,)
    run(off, "COMMIT")
    run(on, "DELETE FROM ss_tx")


def test_user_variables_follow_the_session(sessions: Callable[[int], list[pymysql.Connection]]) -> None:
    a, b, *others = sessions(5)
    run(a, "SET @x = 1, @name = 'alice'")
    run(b, "SET @x = 2")
    for _ in range(4):
        busy(others)
        assert one(a, "SELECT @x, @name") == (1, "alice")
        assert one(b, "SELECT @x, @name") == (2, None)
    run(a, "SET @x = @x + 10")
    assert one(a, "SELECT @x") == (11,)
    assert one(others[0], "SELECT @x") == (None,)


def test_temporary_tables_pin_the_session(sessions: Callable[[int], list[pymysql.Connection]]) -> None:
    a, *others = sessions(4)
    run(a, "CREATE TEMPORARY TABLE ss_tmp (id INT)")
    run(a, "INSERT INTO ss_tmp VALUES (1), (2), (3)")
    for _ in range(3):
        busy(others)
        assert one(a, "SELECT COUNT(*) FROM ss_tmp") == (3,)
    with pytest.raises(pymysql.err.ProgrammingError) as info:
        run(others[0], "SELECT COUNT(*) FROM ss_tmp")
    assert info.value.args[0] == 1146  # another session does not see it
    run(a, "DROP TEMPORARY TABLE ss_tmp")
    busy(others)


def test_get_lock_holds_until_release(sessions: Callable[[int], list[pymysql.Connection]]) -> None:
    a, b, *others = sessions(4)
    assert one(a, "SELECT GET_LOCK('ss_lock', 0)") == (1,)
    (holder,) = one(a, "SELECT CONNECTION_ID()")
    for _ in range(3):
        busy([*others, b])
        assert one(b, "SELECT IS_FREE_LOCK('ss_lock'), IS_USED_LOCK('ss_lock')") == (0, holder)
        assert one(a, "SELECT CONNECTION_ID()") == (holder,)
    assert one(a, "SELECT RELEASE_LOCK('ss_lock')") == (1,)
    assert one(b, "SELECT IS_FREE_LOCK('ss_lock')") == (1,)
    assert one(b, "SELECT GET_LOCK('ss_lock', 0)") == (1,)
    busy([*others, a])  # a is no longer pinned: it shares the other connection
    assert one(b, "SELECT RELEASE_LOCK('ss_lock')") == (1,)
    busy([*others, a, b])


def test_lock_tables_pin_until_unlock(sessions: Callable[[int], list[pymysql.Connection]]) -> None:
    a, *others = sessions(4)
    run(a, "LOCK TABLES ss_seven READ")
    for _ in range(3):
        busy(others)
        assert one(a, "SELECT COUNT(*) FROM ss_seven") == (7,)
        with pytest.raises(pymysql.err.OperationalError) as info:
            run(a, "SELECT COUNT(*) FROM ss_three")  # the connection holding the lock refuses other tables
        assert info.value.args[0] == 1100
    run(a, "UNLOCK TABLES")
    busy(others)
    assert one(a, "SELECT COUNT(*) FROM ss_three") == (3,)


def test_found_rows_reads_the_sessions_own_calc_found_rows(
    sessions: Callable[[int], list[pymysql.Connection]],
) -> None:
    a, b, *others = sessions(4)
    for _ in range(3):
        with a.cursor() as cur:
            cur.execute("SELECT SQL_CALC_FOUND_ROWS id FROM ss_seven ORDER BY id LIMIT 2")
            assert cur.fetchall() == ((1,), (2,))
        busy(others)  # on the other connection, with their own SQL_CALC_FOUND_ROWS
        with others[0].cursor() as cur:
            cur.execute("SELECT SQL_CALC_FOUND_ROWS id FROM ss_three ORDER BY id LIMIT 1")
        assert one(others[0], "SELECT FOUND_ROWS()") == (3,)
        with b.cursor() as cur:
            cur.execute("SELECT SQL_CALC_FOUND_ROWS id FROM ss_seven WHERE id > 5 LIMIT 1")
            assert cur.fetchall() == ((6,),)
        assert one(a, "SELECT FOUND_ROWS()") == (7,)
        assert one(b, "SELECT FOUND_ROWS()") == (2,)
        busy([*others, a, b])  # read: nobody is pinned any more


def test_last_insert_id_is_the_sessions_own(sessions: Callable[[int], list[pymysql.Connection]]) -> None:
    a, b, *others = sessions(4)
    for _ in range(3):
        with a.cursor() as cur:
            cur.execute("INSERT INTO ss_auto (who) VALUES ('a')")
            mine = cur.lastrowid
        with b.cursor() as cur:
            cur.execute("INSERT INTO ss_auto (who) VALUES ('b')")
            theirs = cur.lastrowid
        assert mine != theirs
        busy(others)
        assert one(a, "SELECT LAST_INSERT_ID()") == (mine,)
        assert one(b, "SELECT LAST_INSERT_ID()") == (theirs,)
        assert one(a, "SELECT who FROM ss_auto WHERE id = %s", (mine,)) == ("a",)


def test_prepared_statements_keep_working_while_the_session_moves(
    proxy: ProxyProcess, sessions: Callable[[int], list[pymysql.Connection]]
) -> None:
    (taker,) = sessions(1)
    cnx = mysql.connector.connect(
        host="127.0.0.1",
        port=proxy.port,
        user=APP_USER,
        password=APP_PASSWORD,
        database="app",
        autocommit=True,
        ssl_disabled=True,
        use_pure=True,
    )
    try:
        cur = cnx.cursor(prepared=True)
        seen = []
        for n in range(6):
            cur.execute("SELECT CONNECTION_ID(), ? + 1, (SELECT COUNT(*) FROM ss_seven WHERE id <= ?)", (n, n))
            backend, plus_one, count = cur.fetchall()[0]
            assert (plus_one, count) == (n + 1, min(n, 7))
            seen.append(backend)
            # Another session takes the connection the statement just ran on, or gives one back.
            if n % 2 == 0:
                run(taker, "BEGIN")
                run(taker, "SELECT COUNT(*) FROM ss_three")
            else:
                run(taker, "COMMIT")
        # The statement ran on both backend connections in turn (prepared again where it was new).
        assert len(set(seen)) == 2 and all(x != y for x, y in itertools.pairwise(seen)), seen
        cur.close()
    finally:
        cnx.close()
    run(taker, "COMMIT")


def test_reset_connection_clears_the_session(
    sandbox: Sandbox, proxy: ProxyProcess, sessions: Callable[[int], list[pymysql.Connection]]
) -> None:
    others = sessions(2)
    cnx = mysql.connector.connect(
        host="127.0.0.1",
        port=proxy.port,
        user=APP_USER,
        password=APP_PASSWORD,
        database="app",
        autocommit=True,
        ssl_disabled=True,
        use_pure=True,
    )
    try:
        cur = cnx.cursor()
        cur.execute("SET @x = 5")
        cur.execute("SET SESSION sql_mode = 'ANSI_QUOTES'")
        cur.execute("CREATE TEMPORARY TABLE ss_reset_tmp (id INT)")
        cur.execute("SELECT @x, @@session.sql_mode")
        assert cur.fetchall() == [(5, "ANSI_QUOTES")]
        cnx.cmd_reset_connection()
        busy(others)
        cur = cnx.cursor()
        cur.execute("SELECT @x, @@session.sql_mode, DATABASE()")
        assert cur.fetchall() == [(None, defaults(sandbox)[0], "app")]  # the schema stays, as with MySQL
        with pytest.raises(mysql.connector.errors.ProgrammingError) as info:
            cur.execute("SELECT * FROM ss_reset_tmp")
        assert info.value.errno == 1146
    finally:
        cnx.close()
