"""Client sessions as real drivers open them, for the differential tests: one function opens a session through the
proxy and its direct twin alike, so that the twin is exactly what the client gets direct, nothing of the proxy's in
it; and what a client sees of a statement, read the same way from both."""

from __future__ import annotations

from typing import Any, NamedTuple

import MySQLdb
import pymysql

from devstack.sandbox import APP_PASSWORD, APP_USER


def open_session(port: int, driver: str, flags: int = 0, charset: str = "utf8mb4") -> Any:
    """A session of ``driver`` ("pymysql" or "mysqlclient") on ``port`` as the app user in schema app, autocommit on,
    asking for capability ``flags`` beyond the driver's own, in character set ``charset``."""
    if driver == "pymysql":
        return pymysql.connect(
            host="127.0.0.1",
            port=port,
            user=APP_USER,
            password=APP_PASSWORD,
            database="app",
            client_flag=flags,
            charset=charset,
            autocommit=True,
            connect_timeout=10,
            read_timeout=60,
        )
    conn = MySQLdb.connect(
        host="127.0.0.1",
        port=port,
        user=APP_USER,
        password=APP_PASSWORD,
        database="app",
        client_flag=flags,
        charset=charset,
        connect_timeout=10,
    )
    conn.autocommit(True)
    return conn


class Answer(NamedTuple):
    """What a client sees of a statement: its error (0: none), its affected rows, its OK's info, its rows."""

    code: int
    affected: int = 0
    info: str = ""
    rows: tuple[tuple[Any, ...], ...] = ()


def answer(conn: Any, sql: str) -> Answer:
    """Run ``sql`` on ``conn`` and read what its client sees; a session that cannot be used any more (the driver's
    InterfaceError) raises."""
    try:
        with conn.cursor() as cur:
            affected = cur.execute(sql)
            rows = tuple(tuple(r) for r in cur.fetchall()) if cur.description else ()
            info = cur._result.message if isinstance(conn, pymysql.Connection) else conn.info()
    except (pymysql.err.InterfaceError, MySQLdb.InterfaceError):
        raise
    except (pymysql.err.MySQLError, MySQLdb.MySQLError) as exc:
        return Answer(int(exc.args[0]) if exc.args and isinstance(exc.args[0], int) else -1)
    if isinstance(info, bytes):
        info = info.decode()
    return Answer(0, int(affected), info or "", rows)
