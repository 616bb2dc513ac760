"""Real drivers' habits through the proxy: what mysqlclient and MariaDB Connector/Python (both libmariadb),
mysql-connector-python (pure and C) and PyMySQL do that our own tests never did: change_user with the first
handshake's scramble, resets, the compressed protocol, LOAD DATA LOCAL with a missing file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import mariadb
import mysql.connector
import MySQLdb
import pymysql
import pytest

from devstack.proxy import ProxyProcess, small_pool_config
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from tests.support.harness import StartProxy

Connect = Callable[..., Any]


@pytest.fixture(scope="module", autouse=True)
def backend_objects(sandbox: Sandbox) -> None:
    """The table the tests load."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS app.drv_rows (id INT PRIMARY KEY, name VARCHAR(40))")


@pytest.fixture
def proxy(sandbox: Sandbox, start_proxy: StartProxy) -> ProxyProcess:
    """A proxy with one backend connection: every session takes the connection the previous one left."""
    return start_proxy(small_pool_config(sandbox.primary().port, max_connections=1))


def mysqlclient(proxy: ProxyProcess, **kwargs: Any) -> MySQLdb.Connection:
    """mysqlclient (libmariadb) through the proxy."""
    return MySQLdb.connect(host="127.0.0.1", port=proxy.port, user=APP_USER, password=APP_PASSWORD, **kwargs)


def mariadb_connector(proxy: ProxyProcess, **kwargs: Any) -> mariadb.Connection:
    """MariaDB Connector/Python (libmariadb) through the proxy."""
    return mariadb.connect(host="127.0.0.1", port=proxy.port, user=APP_USER, password=APP_PASSWORD, **kwargs)


def connector(proxy: ProxyProcess, pure: bool = True, **kwargs: Any) -> Any:
    """mysql-connector-python through the proxy (its pure-Python protocol unless ``pure`` is false)."""
    kwargs.setdefault("connection_timeout", 10)
    return mysql.connector.connect(
        host="127.0.0.1", port=proxy.port, user=APP_USER, password=APP_PASSWORD, use_pure=pure, **kwargs
    )


def rows(conn: Any, sql: str) -> list[tuple[Any, ...]]:
    """Run ``sql`` on any DB-API connection; its rows as tuples."""
    cur = conn.cursor()
    try:
        cur.execute(sql)
        return [tuple(row) for row in cur.fetchall()] if cur.description else []
    finally:
        cur.close()


def test_multi_statements_work_after_a_reset_of_a_connection_that_had_them_off(proxy: ProxyProcess) -> None:
    """MariaDB keeps COM_SET_OPTION's setting across COM_RESET_CONNECTION: the proxy must not assume it is on."""
    single = proxy.connect(database="app")  # PyMySQL asks for no multi-statements: the proxy turns them off
    rows(single, "CREATE TEMPORARY TABLE drv_tmp (a INT)")  # state only a reset clears
    single.close()  # the connection is reset on its way back to the pool
    multi = proxy.connect(database="app", client_flag=pymysql.constants.CLIENT.MULTI_STATEMENTS)
    try:
        with multi.cursor() as cur:
            cur.execute("SELECT 1; SELECT 2")
            assert cur.fetchall() == ((1,),)
            assert cur.nextset()
            assert cur.fetchall() == ((2,),)
    finally:
        multi.close()


def test_the_character_set_after_a_reset_is_the_sessions(proxy: ProxyProcess) -> None:
    first = proxy.connect(database="app", charset="latin1")
    rows(first, "CREATE TEMPORARY TABLE drv_tmp (a INT)")
    first.close()
    second = proxy.connect(database="app", charset="utf8mb4")
    try:
        assert rows(second, "SELECT @@character_set_client, @@character_set_results") == [("utf8mb4", "utf8mb4")]
    finally:
        second.close()


@pytest.mark.parametrize("driver", ["mysqlclient", "mariadb"])
def test_libmariadb_change_user(proxy: ProxyProcess, driver: str) -> None:
    """libmariadb answers COM_CHANGE_USER with a token from the first handshake's scramble, as MariaDB accepts."""
    conn = mysqlclient(proxy, database="app") if driver == "mysqlclient" else mariadb_connector(proxy, database="app")
    try:
        rows(conn, "SET @mine = 7")
        conn.change_user(APP_USER, APP_PASSWORD, "test")
        assert rows(conn, "SELECT CURRENT_USER(), DATABASE(), @mine") == [(f"{APP_USER}@%", "test", None)]
        conn.change_user(APP_USER, APP_PASSWORD, "app")  # and again, on the same scramble
        assert rows(conn, "SELECT DATABASE()") == [("app",)]
        if driver == "mariadb":
            conn.reset()  # COM_RESET_CONNECTION
            assert rows(conn, "SELECT 1") == [(1,)]
    finally:
        conn.close()


def test_libmariadb_change_user_with_a_wrong_password_is_refused(proxy: ProxyProcess) -> None:
    conn = mysqlclient(proxy, database="app")
    with pytest.raises(MySQLdb.OperationalError) as info:
        conn.change_user(APP_USER, "wrong", "app")
    assert info.value.args[0] == 1045
    conn.close()
    assert rows(mysqlclient(proxy), "SELECT 1") == [(1,)]


COMPRESSED: dict[str, Connect] = {
    "connector-pure": lambda proxy, **kw: connector(proxy, compress=True, **kw),
    "mysqlclient": lambda proxy, **kw: mysqlclient(proxy, compress=True, **kw),
}


@pytest.mark.parametrize("driver", list(COMPRESSED))
def test_the_compressed_protocol(proxy: ProxyProcess, sandbox: Sandbox, driver: str, tmp_path: Path) -> None:
    conn = COMPRESSED[driver](proxy, database="app", **({"local_infile": 1} if driver == "mysqlclient" else {}))
    try:
        big = rows(conn, "SELECT REPEAT('x', 3000000), 2")  # several frames, compressed
        assert len(big[0][0]) == 3_000_000 and big[0][1] == 2
        for i in range(200):  # small frames, sent as they are
            assert rows(conn, f"SELECT {i}") == [(i,)]
        rows(conn, "DELETE FROM drv_rows")
        cur = conn.cursor()
        cur.execute("INSERT INTO drv_rows VALUES (%s, %s)", (1, "one" * 10))
        cur.close()
        if driver == "mysqlclient":
            data = tmp_path / "rows.csv"
            data.write_text("".join(f"{i},name-{i}\n" for i in range(2, 5000)))
            rows(conn, f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE drv_rows FIELDS TERMINATED BY ','")
        conn.commit()
        expected = 1 if driver != "mysqlclient" else 4999
        assert rows(conn, "SELECT COUNT(*) FROM drv_rows") == [(expected,)]
    finally:
        conn.close()
    with sandbox.primary().connect() as direct, direct.cursor() as cur:
        cur.execute("SELECT name FROM app.drv_rows WHERE id = 1")
        assert cur.fetchone() == ("one" * 10,)


def test_connector_prepared_statements_compressed(proxy: ProxyProcess) -> None:
    conn = connector(proxy, compress=True, database="app")
    try:
        cur = conn.cursor(prepared=True)
        cur.execute("SELECT ?, REPEAT('y', ?)", (41, 100_000))
        value, text = cur.fetchone()
        assert value == 41 and len(text) == 100_000
        cur.close()
    finally:
        conn.close()


def test_compression_asked_of_a_listener_without_it_is_refused_not_hung(
    sandbox: Sandbox, start_proxy: StartProxy
) -> None:
    proxy = start_proxy(small_pool_config(sandbox.primary().port, **{"mysql-have_compress": "false"}))
    # mysql-connector (pure) compresses even when the server does not offer it: refused at login, at once.
    with pytest.raises(mysql.connector.Error) as info:
        connector(proxy, compress=True, connection_timeout=5)
    assert info.value.errno == 1043 and "Compression is not enabled" in info.value.msg
    assert rows(connector(proxy), "SELECT 1") == [(1,)]


def test_load_data_local_with_a_missing_file_answers_as_the_server(proxy: ProxyProcess, sandbox: Sandbox) -> None:
    """mysql-connector (pure) sends nothing when the file is missing; the server answers its next statement
    with 1156 and closes the connection. The proxy does the same, never a hang."""
    with sandbox.primary().connect() as direct, direct.cursor() as cur:
        cur.execute("DELETE FROM app.drv_rows")
    conn = connector(proxy, database="app", allow_local_infile=True)
    cur = conn.cursor()
    with pytest.raises(mysql.connector.Error) as missing:
        cur.execute("LOAD DATA LOCAL INFILE '/no/such/file.csv' INTO TABLE drv_rows")
    assert "does not exist" in str(missing.value)
    with pytest.raises(mysql.connector.Error) as info:
        cur.execute("SELECT 42")
    assert info.value.errno == 1156
    with pytest.raises(mysql.connector.Error):
        cur.execute("SELECT 43")  # the session was ended, as the server ends it
    conn.close()
    assert rows(connector(proxy, database="app"), "SELECT COUNT(*) FROM drv_rows") == [(0,)]


def test_load_data_local_without_the_clients_capability_is_4166(proxy: ProxyProcess) -> None:
    conn = proxy.connect(database="app")  # PyMySQL without local_infile
    with pytest.raises(pymysql.err.MySQLError) as info, conn.cursor() as cur:
        cur.execute("LOAD DATA LOCAL INFILE '/tmp/x.csv' INTO TABLE drv_rows")
    assert info.value.args[0] == 4166
    assert rows(conn, "SELECT 1") == [(1,)]
    conn.close()


def test_an_orms_get_or_create_with_libmariadb(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    """Django's get_or_create on mysqlclient: autocommit off, a savepoint, the expected duplicate, back to the
    savepoint, read the existing row, then roll back; another session takes the free connection meanwhile."""
    proxy = start_proxy(small_pool_config(sandbox.primary().port, max_connections=2))
    with sandbox.primary().connect() as direct, direct.cursor() as cur:
        cur.execute("DELETE FROM app.drv_rows")
        cur.execute("INSERT INTO app.drv_rows VALUES (1, 'existing')")
    orm = mysqlclient(proxy, database="app")
    other = proxy.connect(database="app", autocommit=True)
    try:
        orm.autocommit(False)
        assert rows(orm, "SELECT name FROM drv_rows WHERE id = 2") == []
        rows(orm, "INSERT INTO drv_rows VALUES (2, 'created')")
        rows(orm, "SAVEPOINT `s1_x1`")
        with pytest.raises(MySQLdb.IntegrityError) as info:
            rows(orm, "INSERT INTO drv_rows VALUES (1, 'existing')")
        assert info.value.args[0] == 1062
        rows(other, "SET autocommit = 1")  # would commit the transaction, had it been handed over
        rows(orm, "ROLLBACK TO SAVEPOINT `s1_x1`")
        assert rows(orm, "SELECT name FROM drv_rows WHERE id = 1") == [("existing",)]
        orm.rollback()  # the request failed after all: nothing of it stays
        orm.autocommit(True)
    finally:
        orm.close()
        other.close()
    with sandbox.primary().connect() as direct, direct.cursor() as cur:
        cur.execute("SELECT id FROM app.drv_rows ORDER BY id")
        assert cur.fetchall() == ((1,),)
