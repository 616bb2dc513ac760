"""A shard with a physical schema through a real proxy on two independent servers (issue 14): shard 1 keeps the
logical schema ``shop`` as ``shop_1`` (and has no ``shop``), so every statement on its sharded tables runs there with
``shop`` renamed and in default schema ``shop_1`` (``proxyapp.sharding.physical``): inserts, point selects qualified
or not, a scatter read, an XA write, a transaction over both shards, DDL, sequences, prepared statements."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import mysql.connector
import pymysql
import pytest

from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox, SandboxServer
from tests.live.proxyapp.sharding.test_single_shard import config
from tests.support.harness import StartProxy

Servers = tuple[SandboxServer, SandboxServer]
SCHEMAS = ("shop", "shop_1")  # where each shard keeps shop's tables


@pytest.fixture
def shards(sandbox: Sandbox, other: Sandbox) -> Iterator[Servers]:
    """shop.tb_Shop (City_ID mod 2) and the global shop.cities, in ``shop`` on shard 0 and ``shop_1`` on shard 1;
    ``shop.orders`` numbered by a sequence."""
    servers = (sandbox.primary(), other.primary())
    for server, schema in zip(servers, SCHEMAS, strict=True):
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS shop")
            cur.execute("DROP DATABASE IF EXISTS proxyfleet")
            cur.execute(f"DROP DATABASE IF EXISTS {schema}")
            cur.execute(f"CREATE DATABASE {schema}")
            cur.execute(f"CREATE TABLE {schema}.tb_Shop (City_ID int PRIMARY KEY, name varchar(20))")
            cur.execute(f"CREATE TABLE {schema}.cities (id int PRIMARY KEY, name varchar(20))")
            cur.execute(f"INSERT INTO {schema}.cities VALUES (1, 'Hangzhou')")
            cur.execute(f"CREATE TABLE {schema}.orders (id bigint PRIMARY KEY, item varchar(20))")
            cur.execute(f"GRANT ALL ON {schema}.* TO '{APP_USER}'@'%'")
            cur.execute(f"GRANT ALL ON proxyfleet.* TO '{APP_USER}'@'%'")
    yield servers
    for server, schema in zip(servers, SCHEMAS, strict=True):
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {schema}")
            cur.execute("DROP DATABASE IF EXISTS proxyfleet")


@pytest.fixture
def proxy(shards: Servers, start_proxy: StartProxy) -> ProxyProcess:
    document = config(shards)
    document["mysql_shards"][1]["physical_schema"] = "shop_1"
    document["mysql_sharded_tables"] = [t for t in document["mysql_sharded_tables"] if t["tablename"] != "accounts"] + [
        {
            "schemaname": "shop",
            "tablename": "orders",
            "shard_group": "shops",
            "algorithm": "mod",
            "shard_key": "id",
            "sequence_column": "id",
        }
    ]
    return start_proxy(document)


def stored(server: SandboxServer, schema: str, sql: str = "SELECT City_ID, name FROM {}.tb_Shop ORDER BY 1") -> Any:
    """What ``server`` holds, asked directly (``{}``: ``schema``)."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(sql.format(schema))
        return cur.fetchall()


def one(cur: Any, sql: str) -> Any:
    cur.execute(sql)
    return cur.fetchall()


def test_rows_go_to_the_shard_s_physical_schema_and_are_read_back_qualified_or_not(
    shards: Servers, proxy: ProxyProcess
) -> None:
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (1, 'one')")
        cur.execute("INSERT INTO shop.tb_Shop (City_ID, name) VALUES (2, 'two')")
        cur.execute("INSERT INTO `shop`.`tb_Shop` (City_ID, name) VALUES (3, 'shop.tb_Shop')")  # a string keeps it
        assert stored(shards[0], "shop") == ((2, "two"),)
        assert stored(shards[1], "shop_1") == ((1, "one"), (3, "shop.tb_Shop"))
        assert one(cur, "SELECT name FROM tb_Shop WHERE City_ID = 1") == (("one",),)
        assert one(cur, "SELECT shop.tb_Shop.name FROM shop.tb_Shop WHERE City_ID = 3") == (("shop.tb_Shop",),)
        assert one(cur, "SELECT s.name FROM shop.tb_Shop s WHERE s.City_ID = 2") == (("two",),)
        assert one(cur, "SELECT DATABASE() FROM tb_Shop WHERE City_ID = 1") == (("shop_1",),)
        assert one(cur, "SELECT DATABASE()") == (("shop",),)  # on no sharded table: the session's own
        joined = "SELECT t.name, c.name FROM tb_Shop t JOIN shop.cities c ON c.id = 1 WHERE t.City_ID = 1"
        assert one(cur, joined) == (("one", "Hangzhou"),)
        assert one(cur, "SELECT City_ID, name FROM tb_Shop ORDER BY City_ID DESC") == (
            (3, "shop.tb_Shop"),
            (2, "two"),
            (1, "one"),
        )  # a scatter read
        assert cur.execute("UPDATE shop.tb_Shop SET name = CONCAT(name, '!') WHERE City_ID IN (1, 2)") == 2  # XA
        assert stored(shards[1], "shop_1") == ((1, "one!"), (3, "shop.tb_Shop"))
        assert cur.execute("UPDATE cities SET name = 'Hz' WHERE id = 1") == 1  # a global table: both copies
        for server, schema in zip(shards, SCHEMAS, strict=True):
            assert stored(server, schema, "SELECT name FROM {}.cities") == (("Hz",),)
    with proxy.connect(autocommit=True) as conn, conn.cursor() as cur:  # no default schema: qualified only
        assert one(cur, "SELECT name FROM shop.tb_Shop WHERE City_ID = 1") == (("one!",),)


def test_a_transaction_over_both_shards_and_ddl_on_both(shards: Servers, proxy: ProxyProcess) -> None:
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (11, 'a')")  # shard 1: the home branch
        cur.execute("INSERT INTO shop.tb_Shop (City_ID, name) VALUES (12, 'b')")  # shard 0
        assert one(cur, "SELECT COUNT(*) FROM tb_Shop") == ((2,),)  # a scatter on the branches
        assert cur.execute("UPDATE tb_Shop SET name = 'c'") == 2
        assert stored(shards[1], "shop_1") == ()
        cur.execute("COMMIT")
        assert stored(shards[0], "shop") == ((12, "c"),)
        assert stored(shards[1], "shop_1") == ((11, "c"),)
        cur.execute("ALTER TABLE shop.tb_Shop ADD COLUMN n int DEFAULT 7")
        cur.execute("ALTER TABLE tb_Shop ADD INDEX by_name (name)")
        for server, schema in zip(shards, SCHEMAS, strict=True):
            assert stored(server, schema, "SELECT City_ID, n FROM {}.tb_Shop")[0][1] == 7
            assert stored(server, schema, "SHOW INDEX FROM {}.tb_Shop WHERE Key_name = 'by_name'") != ()
        assert one(cur, "SELECT City_ID, n FROM tb_Shop ORDER BY City_ID") == ((11, 7), (12, 7))


def test_sequences_start_above_the_physical_schema_s_rows(shards: Servers, proxy: ProxyProcess) -> None:
    with shards[1].connect() as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO shop_1.orders VALUES (41, 'before')")
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO orders (item) VALUES ('x')")
        assert cur.lastrowid == 42
        assert stored(shards[0], "shop", "SELECT id, item FROM {}.orders") == ((42, "x"),)


def test_prepared_statements_run_binary_on_a_renamed_shard_and_scatter(shards: Servers, proxy: ProxyProcess) -> None:
    for server, schema, rows in zip(shards, SCHEMAS, ([(2, "two")], [(1, "one")]), strict=True):
        with server.connect() as conn, conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {schema}.tb_Shop VALUES (%s, %s)", rows)
    conn = mysql.connector.connect(
        host="127.0.0.1", port=proxy.port, user=APP_USER, password=APP_PASSWORD, database="shop", autocommit=True
    )
    try:
        cur = conn.cursor(prepared=True)
        cur.execute("SELECT name FROM tb_Shop WHERE City_ID = ?", (2,))  # shard 0: binary, end to end
        assert cur.fetchall() == [("two",)]
        cur.execute("SELECT City_ID FROM shop.tb_Shop WHERE City_ID IN (?, ?) ORDER BY City_ID", (1, 2))  # scatter
        assert cur.fetchall() == [(1,), (2,)]
        cur.execute("SELECT name FROM tb_Shop WHERE City_ID = ?", (1,))  # shard 1: prepared there renamed
        assert cur.fetchall() == [("one",)]
        cur.execute("SELECT name FROM shop.tb_Shop WHERE City_ID = ?", (1,))  # qualified, renamed
        assert cur.fetchall() == [("one",)]
        cur.execute("UPDATE shop.tb_Shop SET name = ? WHERE City_ID = ?", ("uno", 1))
        assert cur.rowcount == 1
    finally:
        conn.close()
    with proxy.connect(database="shop") as text, text.cursor() as cur:  # as text too
        assert one(cur, "SELECT name FROM tb_Shop WHERE City_ID = 1") == (("uno",),)


def test_a_statement_on_no_sharded_table_is_not_renamed(shards: Servers, proxy: ProxyProcess) -> None:
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        with pytest.raises(pymysql.err.ProgrammingError) as info:  # shop_1 is no schema on shard 0, the default
            cur.execute("SELECT * FROM shop_1.tb_Shop")
        assert info.value.args[0] in (1049, 1146)
