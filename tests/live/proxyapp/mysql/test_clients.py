"""Real clients through the proxy: the ``mariadb`` CLI, PyMySQL and mysql-connector-python (pure and C)."""

from __future__ import annotations

import hashlib
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mysql.connector
import pymysql
import pytest
from pymysql.constants import CLIENT

from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from proxyapp.mysql import auth
from proxyapp.mysql.handshake import parse_auth_switch
from tests.support.rawclient import (
    APP2_PASSWORD,
    APP2_USER,
    HASH_PASSWORD,
    HASH_USER,
    OTHER_SCHEMA,
    SCHEMA,
    RawClient,
    ensure_backend_users,
    protocol_config,
    start_module_proxy,
)

try:
    import _mysql_connector  # noqa: F401  # the C extension; it may not load against this system's libssl

    CONNECTOR_MODES = ["pure", "cext"]
except ImportError:
    CONNECTOR_MODES = ["pure"]

MIB = 1 << 20
BIG = 17 * MIB  # over the 16 MiB packet size: split into several packets each way


@pytest.fixture(scope="module")
def proxy(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    """A rw-split proxy offering mysql_native_password, with the tables these tests use."""
    ensure_backend_users(sandbox)
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.cl_load (id INT PRIMARY KEY, name VARCHAR(40))")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.cl_big (id INT PRIMARY KEY, b LONGBLOB)")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.cl_auto (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        cur.execute(f"CREATE TABLE IF NOT EXISTS {SCHEMA}.cl_plain (id INT PRIMARY KEY)")
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA}.cl_ps "
            "(id INT PRIMARY KEY, i BIGINT, s VARCHAR(100), n INT NULL, b BLOB)"
        )
        cur.execute(
            f"CREATE OR REPLACE PROCEDURE {SCHEMA}.cl_two_sets(IN n INT) "
            "BEGIN SELECT n AS a; SELECT 'x' AS b, n * 2 AS c; END"
        )
    sandbox.wait_replicated()
    p = start_module_proxy(protocol_config(sandbox), tmp_path_factory.mktemp("clients-proxy"))
    yield p
    p.stop()


@pytest.fixture(scope="module")
def sha2_proxy(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    """A proxy whose handshake offers caching_sha2_password."""
    ensure_backend_users(sandbox)
    config = protocol_config(sandbox, mysql_default_authentication_plugin="caching_sha2_password")
    p = start_module_proxy(config, tmp_path_factory.mktemp("sha2-proxy"))
    yield p
    p.stop()


def primary_rows(sandbox: Sandbox, sql: str, args: Any = None) -> tuple[tuple[Any, ...], ...]:
    """Rows of a query run on the primary directly (not through the proxy)."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall()


def log_is_clean(proxy: ProxyProcess) -> None:
    """The proxy logged no unhandled error."""
    text = proxy.log()
    assert "Traceback" not in text and "internal error" not in text, text[-4000:]


# --------------------------------------------------------------------------------------- the mariadb CLI


def cli(proxy: ProxyProcess, sql: str, *args: str, user: str = APP_USER, password: str = APP_PASSWORD) -> str:
    """Run ``mariadb -N -B -e SQL`` through the proxy; returns its stdout (fails the test on an error)."""
    exe = shutil.which("mariadb") or shutil.which("mysql")
    assert exe is not None, "the mariadb client is not on PATH"
    command = [
        exe,
        "--no-defaults",
        "--protocol=TCP",
        "-h127.0.0.1",
        f"-P{proxy.port}",
        f"-u{user}",
        f"-p{password}",
        "-N",
        "-B",
        *args,
        SCHEMA,
        "-e",
        sql,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_cli_plain_query(proxy: ProxyProcess) -> None:
    assert cli(proxy, "SELECT 6 * 7, 'hi', NULL") == "42\thi\tNULL\n"


def test_cli_logs_in_to_a_sha2_proxy(sha2_proxy: ProxyProcess) -> None:
    assert cli(sha2_proxy, "SELECT CURRENT_USER()") == f"{APP_USER}@%\n"
    assert cli(sha2_proxy, "SELECT CURRENT_USER()", user=HASH_USER, password=HASH_PASSWORD) == f"{HASH_USER}@%\n"


def test_cli_multi_statements(proxy: ProxyProcess) -> None:
    assert cli(proxy, "SELECT 1; SELECT 2; SELECT 'three'") == "1\n2\nthree\n"


def test_cli_call_returns_several_result_sets(proxy: ProxyProcess) -> None:
    assert cli(proxy, "CALL cl_two_sets(21)") == "21\nx\t42\n"
    assert cli(proxy, "CALL cl_two_sets(1); SELECT 'after'") == "1\nx\t2\nafter\n"


def test_cli_load_data_local_infile(proxy: ProxyProcess, sandbox: Sandbox, tmp_path: Path) -> None:
    data = tmp_path / "cli.csv"
    data.write_text("".join(f"{i},cli-{i}\n" for i in range(1000, 1500)))
    out = cli(
        proxy,
        f"DELETE FROM cl_load WHERE id BETWEEN 1000 AND 1999; "
        f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE cl_load FIELDS TERMINATED BY ','; "
        "SELECT COUNT(*) FROM cl_load WHERE id BETWEEN 1000 AND 1999 FOR UPDATE",
        "--local-infile=1",
    )
    assert out == "500\n"
    assert primary_rows(
        sandbox, "SELECT COUNT(*), MIN(name), MAX(id) FROM app.cl_load WHERE id BETWEEN 1000 AND 1999"
    ) == ((500, "cli-1000", 1499),)


def test_cli_with_a_hash_user(proxy: ProxyProcess) -> None:
    assert cli(proxy, "SELECT CURRENT_USER()", user=HASH_USER, password=HASH_PASSWORD) == f"{HASH_USER}@%\n"


# --------------------------------------------------------------------------------------- PyMySQL


def test_pymysql_queries(proxy: ProxyProcess) -> None:
    with proxy.connect(database=SCHEMA, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT %s, %s, %s", (1, "two", None))
        assert cur.fetchall() == ((1, "two", None),)
        cur.execute("SELECT CAST('é' AS CHAR) AS c")
        assert cur.fetchone() == ("é",)
        assert [d[0] for d in cur.description] == ["c"]
        cur.execute("REPLACE INTO cl_plain VALUES (1)")
        assert cur.rowcount == 1
        cur.execute("SELECT id FROM cl_plain WHERE id = 1 FOR UPDATE")
        assert cur.fetchall() == ((1,),)
        with pytest.raises(pymysql.err.ProgrammingError) as info:
            cur.execute("SELEC broken")
        assert info.value.args[0] == 1064
        cur.execute("SELECT 1")
        assert cur.fetchall() == ((1,),)


def test_pymysql_multi_statements(proxy: ProxyProcess) -> None:
    with (
        proxy.connect(database=SCHEMA, autocommit=True, client_flag=CLIENT.MULTI_STATEMENTS) as conn,
        conn.cursor() as cur,
    ):
        cur.execute("SELECT 1 AS a; SELECT 2 AS b, 3 AS c; SELECT 'x' UNION ALL SELECT 'y'")
        sets = [cur.fetchall()]
        while cur.nextset():
            sets.append(cur.fetchall())
        assert sets == [((1,),), ((2, 3),), (("x",), ("y",))]
        # Writes first: the whole batch goes to the primary, and its reads see the write.
        cur.execute(
            "DELETE FROM cl_plain WHERE id = 2; INSERT INTO cl_plain VALUES (2); "
            "SELECT COUNT(*) FROM cl_plain WHERE id = 2"
        )
        assert cur.rowcount == 0
        assert cur.nextset() and cur.rowcount == 1
        assert cur.nextset() and cur.fetchall() == ((1,),)
        assert not cur.nextset()
        # An error in the middle ends the batch; the session goes on.
        with pytest.raises(pymysql.err.ProgrammingError):
            cur.execute("SELECT 1; SELEC 2; SELECT 3")
            while cur.nextset():
                pass
        cur.execute("SELECT 'still here'")
        assert cur.fetchall() == (("still here",),)


def test_pymysql_rows_over_16_mib_both_ways(proxy: ProxyProcess, sandbox: Sandbox) -> None:
    blob = random.Random(1616).randbytes(BIG)
    with (
        proxy.connect(database=SCHEMA, autocommit=True, max_allowed_packet=64 * MIB, read_timeout=60) as conn,
        conn.cursor() as cur,
    ):
        cur.execute("REPLACE INTO cl_big (id, b) VALUES (%s, %s)", (1, blob))
        assert primary_rows(sandbox, "SELECT LENGTH(b), MD5(b) FROM app.cl_big WHERE id = 1") == (
            (BIG, hashlib.md5(blob).hexdigest()),
        )
        cur.execute("SELECT b FROM cl_big WHERE id = 1 FOR UPDATE")  # from the primary
        (got,) = cur.fetchone()
        assert len(got) == BIG and got == blob
        sandbox.wait_replicated()
        cur.execute("SELECT id, b, LENGTH(b) FROM cl_big WHERE id = 1")  # from the replica
        assert cur.fetchall() == ((1, blob, BIG),)
        cur.execute("SELECT REPEAT('ab', %s), 'tail'", (BIG // 2 + 5,))  # a computed row over 16 MiB
        big, tail = cur.fetchone()
        assert len(big) == BIG + 10 and big[:4] == "abab" and tail == "tail"
        cur.execute("SELECT 1")
        assert cur.fetchall() == ((1,),)


def test_pymysql_load_data_local_infile(proxy: ProxyProcess, sandbox: Sandbox, tmp_path: Path) -> None:
    data = tmp_path / "py.csv"
    data.write_text("".join(f"{i},py-{i}\n" for i in range(2000, 2300)))
    with proxy.connect(database=SCHEMA, autocommit=True, local_infile=True) as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM cl_load WHERE id BETWEEN 2000 AND 2999")
        cur.execute(f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE cl_load FIELDS TERMINATED BY ','")
        assert cur.rowcount == 300
        cur.execute("SELECT 1")
        assert cur.fetchall() == ((1,),)
    assert primary_rows(sandbox, "SELECT COUNT(*), MAX(name) FROM app.cl_load WHERE id BETWEEN 2000 AND 2999") == (
        (300, "py-2299"),
    )


def test_pymysql_select_db_and_ping(proxy: ProxyProcess) -> None:
    with proxy.connect(database=SCHEMA, autocommit=True) as conn, conn.cursor() as cur:
        conn.select_db(OTHER_SCHEMA)
        cur.execute("SELECT DATABASE()")
        assert cur.fetchall() == ((OTHER_SCHEMA,),)
        with pytest.raises(pymysql.err.OperationalError) as info:
            conn.select_db("no_such_schema_here")
        assert info.value.args[0] == 1049
        cur.execute("SELECT DATABASE()")
        assert cur.fetchall() == ((OTHER_SCHEMA,),)
        conn.ping(reconnect=False)
        conn.select_db(SCHEMA)
        cur.execute("SELECT DATABASE()")
        assert cur.fetchall() == ((SCHEMA,),)
        conn.ping(reconnect=False)


def test_pymysql_last_insert_id(proxy: ProxyProcess) -> None:
    with proxy.connect(database=SCHEMA, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO cl_auto (v) VALUES (1)")
        first = cur.lastrowid
        assert first > 0
        cur.execute("SELECT LAST_INSERT_ID()")
        assert cur.fetchall() == ((first,),)
        cur.execute("INSERT INTO cl_auto (v) VALUES (2), (3), (4)")
        batch = cur.lastrowid
        assert batch > first
        cur.execute("SELECT LAST_INSERT_ID()")
        assert cur.fetchall() == ((batch,),)  # the first id of a multi-row insert, as MySQL says
        cur.execute("REPLACE INTO cl_plain VALUES (3)")  # no auto-increment: the value stays
        cur.execute("SELECT LAST_INSERT_ID()")
        assert cur.fetchall() == ((batch,),)
    with proxy.connect(database=SCHEMA, autocommit=True) as other, other.cursor() as cur:
        cur.execute("SELECT LAST_INSERT_ID()")  # per session
        assert cur.fetchall() == ((0,),)


def test_pymysql_last_insert_id_set_by_an_update(proxy: ProxyProcess) -> None:
    """``LAST_INSERT_ID(expr)`` in an UPDATE: the server's OK packet carries the value, the proxy keeps it."""
    with proxy.connect(database=SCHEMA, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO cl_auto (v) VALUES (5)")
        row_id = cur.lastrowid
        cur.execute("UPDATE cl_auto SET v = LAST_INSERT_ID(v + 72) WHERE id = %s", (row_id,))
        cur.execute("SELECT LAST_INSERT_ID()")
        assert cur.fetchall() == ((77,),)


def test_pymysql_last_insert_id_set_by_a_select(proxy: ProxyProcess) -> None:
    """``SELECT LAST_INSERT_ID(42)`` sets the session's value, as a server does (KNOWN FAILING, see the report).

    The proxy answers ``SELECT LAST_INSERT_ID()`` itself from the last OK packet's insert id; a SELECT (or SET,
    DO) calling ``LAST_INSERT_ID(expr)`` answers with a result set, which carries no insert id, so the proxy
    still answers the value from before.
    """
    with proxy.connect(database=SCHEMA, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT LAST_INSERT_ID(42)")
        assert cur.fetchall() == ((42,),)
        cur.execute("SELECT LAST_INSERT_ID()")
        assert cur.fetchall() == ((42,),)


def test_pymysql_logs_in_to_a_sha2_proxy(sha2_proxy: ProxyProcess) -> None:
    """PyMySQL answers the plugin the greeting names: caching_sha2_password (switched to native for a hash)."""
    for user, password in ((APP_USER, APP_PASSWORD), (HASH_USER, HASH_PASSWORD)):
        with sha2_proxy.connect(user=user, password=password) as conn, conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            assert cur.fetchall() == ((f"{user}@%",),)


# --------------------------------------------------------------------------------------- mysql-connector


def connector(proxy: ProxyProcess, mode: str, **kwargs: Any) -> Any:
    """A mysql-connector-python connection through the proxy; ``mode`` is 'pure' or 'cext'."""
    kwargs.setdefault("user", APP_USER)
    kwargs.setdefault("password", APP_PASSWORD)
    kwargs.setdefault("database", SCHEMA)
    return mysql.connector.connect(
        host="127.0.0.1",
        port=proxy.port,
        use_pure=mode == "pure",
        ssl_disabled=True,
        connection_timeout=10,
        autocommit=True,
        **kwargs,
    )


def one(conn: Any, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run ``sql`` on a plain cursor and fetch all rows."""
    cur = conn.cursor()
    try:
        cur.execute(sql, params)
        return cur.fetchall()
    finally:
        cur.close()


@pytest.mark.parametrize("mode", CONNECTOR_MODES)
def test_connector_prepared_statements(proxy: ProxyProcess, sandbox: Sandbox, mode: str) -> None:
    conn = connector(proxy, mode)
    try:
        base = 1000 if mode == "pure" else 2000
        one(conn, "DELETE FROM cl_ps WHERE id BETWEEN %s AND %s", (base, base + 999))
        cur = conn.cursor(prepared=True)
        rows = [
            (base + 1, 1, "one", None, b"\x00\x01\x02"),
            (base + 2, -(2**62), "two ünicode", 7, b""),
            (base + 3, 2**62, "", None, bytes(range(256)) * 40),
        ]
        for row in rows:  # one statement, executed again and again
            cur.execute("INSERT INTO cl_ps (id, i, s, n, b) VALUES (?, ?, ?, ?, ?)", row)
            assert cur.rowcount == 1
        cur.execute(
            "SELECT id, i, s, n, b FROM cl_ps WHERE id BETWEEN ? AND ? ORDER BY id FOR UPDATE", (base, base + 9)
        )
        got = [tuple(bytes(v) if isinstance(v, bytearray) else v for v in r) for r in cur.fetchall()]
        assert got == rows
        sandbox.wait_replicated()
        for row in rows:  # from the replica, prepared there on first use
            cur.execute("SELECT s, n, LENGTH(b) FROM cl_ps WHERE id = ?", (row[0],))
            assert cur.fetchall() == [(row[2], row[3], len(row[4]))]
        cur.execute("SELECT ? IS NULL, ?", (None, "x"))
        assert cur.fetchall() == [(1, "x")]
        cur.close()
        # Many statements at once, each its own cursor, then all executed again.
        cursors = [conn.cursor(prepared=True) for _ in range(40)]
        for k, c in enumerate(cursors):
            c.execute(f"SELECT ? + {k}", (k,))
            assert c.fetchall() == [(2 * k,)]
        for k, c in enumerate(cursors):
            c.execute(f"SELECT ? + {k}", (1,))
            assert c.fetchall() == [(k + 1,)]
            c.close()
        with pytest.raises(mysql.connector.Error) as info:
            bad = conn.cursor(prepared=True)
            bad.execute("SELECT * FROM no_such_table WHERE id = ?", (1,))
        assert info.value.errno == 1146
        assert one(conn, "SELECT 'ok'") == [("ok",)]
    finally:
        conn.close()


@pytest.mark.parametrize("mode", CONNECTOR_MODES)
def test_connector_change_user_reset_and_statistics(proxy: ProxyProcess, mode: str) -> None:
    conn = connector(proxy, mode)
    try:
        assert one(conn, "SELECT CURRENT_USER()") == [(f"{APP_USER}@%",)]
        one(conn, "SET @marker = 5")
        conn.cmd_change_user(username=APP2_USER, password=APP2_PASSWORD, database=OTHER_SCHEMA)
        assert one(conn, "SELECT CURRENT_USER(), DATABASE(), @marker") == [(f"{APP2_USER}@%", OTHER_SCHEMA, None)]
        conn.cmd_change_user(username=HASH_USER, password=HASH_PASSWORD, database=SCHEMA)
        assert one(conn, "SELECT CURRENT_USER(), DATABASE()") == [(f"{HASH_USER}@%", SCHEMA)]
        conn.cmd_change_user(username=APP_USER, password=APP_PASSWORD, database=SCHEMA)
        one(conn, "SET @marker = 6")
        one(conn, "SET SESSION sql_mode = 'ANSI_QUOTES'")
        assert one(conn, "SELECT @marker, @@session.sql_mode") == [(6, "ANSI_QUOTES")]
        assert conn.cmd_reset_connection() is True
        marker, mode_after = one(conn, "SELECT @marker, @@session.sql_mode")[0]
        assert marker is None and mode_after != "ANSI_QUOTES"
        assert one(conn, "SELECT DATABASE()") == [(SCHEMA,)]
        stats = conn.cmd_statistics()
        assert stats["Uptime"] >= 0 and stats["Threads"] >= 1 and stats["Questions"] >= 1
        assert one(conn, "SELECT 1") == [(1,)]
    finally:
        conn.close()


@pytest.mark.parametrize("mode", CONNECTOR_MODES)
def test_connector_change_user_with_a_wrong_password_is_refused(proxy: ProxyProcess, mode: str) -> None:
    conn = connector(proxy, mode)
    try:
        with pytest.raises(mysql.connector.Error) as info:
            conn.cmd_change_user(username=APP2_USER, password="wrong", database=SCHEMA)
        assert info.value.errno == 1045
    finally:
        conn.close()
    conn = connector(proxy, mode)
    try:
        assert one(conn, "SELECT 1") == [(1,)]
    finally:
        conn.close()


@pytest.mark.parametrize("mode", CONNECTOR_MODES)
@pytest.mark.live  # its proxy comes from request.getfixturevalue
@pytest.mark.parametrize("server_plugin", ["mysql_native_password", "caching_sha2_password"])
@pytest.mark.parametrize("client_plugin", ["mysql_native_password", "caching_sha2_password"])
@pytest.mark.parametrize(("user", "password"), [(APP_USER, APP_PASSWORD), (HASH_USER, HASH_PASSWORD)])
def test_connector_authentication(
    request: pytest.FixtureRequest,
    mode: str,
    server_plugin: str,
    client_plugin: str,
    user: str,
    password: str,
) -> None:
    target: ProxyProcess = request.getfixturevalue("sha2_proxy" if server_plugin.startswith("caching") else "proxy")
    conn = connector(target, mode, user=user, password=password, auth_plugin=client_plugin)
    try:
        assert one(conn, "SELECT CURRENT_USER(), 1 + 1") == [(f"{user}@%", 2)]
        assert one(conn, "SELECT COUNT(*) FROM cl_plain WHERE id < 0 FOR UPDATE") == [(0,)]
    finally:
        conn.close()
    with pytest.raises(mysql.connector.Error) as info:
        connector(target, mode, user=user, password=password + "x", auth_plugin=client_plugin)
    assert info.value.errno == 1045


def test_a_hash_user_runs_queries_on_both_hostgroups(proxy: ProxyProcess) -> None:
    """The proxy never saw the clear password: it logs in to backends with SHA1(password) from the reply."""
    conn = proxy.connect(user=HASH_USER, password=HASH_PASSWORD, database=SCHEMA, autocommit=True)
    with conn, conn.cursor() as cur:
        cur.execute("SELECT CURRENT_USER(), @@read_only")  # the replica
        assert cur.fetchall() == ((f"{HASH_USER}@%", 1),)
        cur.execute("REPLACE INTO cl_plain VALUES (4)")  # the primary
        cur.execute("SELECT @@read_only FROM cl_plain WHERE id = 4 FOR UPDATE")
        assert cur.fetchall() == ((0,),)
    with pytest.raises(pymysql.err.OperationalError) as info:
        proxy.connect(user=HASH_USER, password="not-" + HASH_PASSWORD)
    assert info.value.args[0] == 1045


def test_the_log_is_clean(proxy: ProxyProcess, sha2_proxy: ProxyProcess) -> None:
    for p in (proxy, sha2_proxy):
        assert p.proc is not None and p.proc.poll() is None
        log_is_clean(p)


def first_answer(proxy: ProxyProcess, user: str, plugin: str) -> bytes:
    """The kind of packet (and the plugin of an auth switch) the proxy answers a login attempt with."""
    client = RawClient(proxy.port)
    try:
        client.read_greeting()
        client.send_packet(client.login_payload(user, "wrong password", plugin=plugin), 1)
        reply = client.read_packet()
        return reply[:1] + (parse_auth_switch(reply)[0].encode() if reply[:1] == b"\xfe" else b"")
    finally:
        client.close()


@pytest.mark.parametrize("plugin", [auth.NATIVE, auth.CACHING_SHA2, "sha256_password", "client_ed25519"])
def test_an_unknown_user_is_answered_exactly_as_a_wrong_password(proxy: ProxyProcess, plugin: str) -> None:
    known = first_answer(proxy, APP_USER, plugin)
    assert first_answer(proxy, "nobody_here", plugin) == known
    assert known[:1] == (b"\xfe" if plugin not in auth.SUPPORTED_PLUGINS else b"\xff")
