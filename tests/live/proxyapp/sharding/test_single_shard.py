"""Sharding through a real proxy on two independent servers (issue 14, its first working part): Amoeba's tb_Shop by
City_ID mod 2. Statements its key narrows to one shard run there, and only there; a transaction opens on the shard
of its first statement (without cross-shard writes, one that reaches another shard is refused with 1235 saying why,
changing nothing); a global table is read from a shard. String keys the collation holds equal are one key. (Writes
over several shards: test_cross_shard_writes.py; transactions over several: test_transactions.py; prepared
statements: test_prepared.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox, SandboxServer
from tests.support.harness import StartProxy

SHARD_HOSTGROUPS = (100, 101)


@pytest.fixture
def shards(sandbox: Sandbox, other: Sandbox) -> Iterator[tuple[SandboxServer, SandboxServer]]:
    """Both shards with an empty shop.tb_Shop and shop.cities (a global table, one row)."""
    servers = (sandbox.primary(), other.primary())
    for server in servers:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE DATABASE IF NOT EXISTS shop")
            cur.execute("DROP TABLE IF EXISTS shop.tb_Shop, shop.cities, shop.accounts")
            cur.execute("CREATE TABLE shop.tb_Shop (City_ID int PRIMARY KEY, name varchar(20))")
            cur.execute(
                "CREATE TABLE shop.accounts (code varchar(20) COLLATE utf8mb4_general_ci PRIMARY KEY, n int) "
                "DEFAULT CHARSET utf8mb4"
            )
            cur.execute("CREATE TABLE shop.cities (id int PRIMARY KEY, name varchar(20))")
            cur.execute("INSERT INTO shop.cities VALUES (1, 'Hangzhou')")
            cur.execute(f"GRANT ALL ON shop.* TO '{APP_USER}'@'%'")
    yield servers
    for server in servers:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS shop")


def config(servers: tuple[SandboxServer, SandboxServer]) -> dict[str, Any]:
    return {
        "mysql_servers": [
            {"hostgroup_id": hg, "hostname": "127.0.0.1", "port": s.port}
            for hg, s in zip(SHARD_HOSTGROUPS, servers, strict=True)
        ],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 100}],
        "mysql_shards": [
            {"shard_group": "shops", "shard": n, "hostgroup_id": hg} for n, hg in enumerate(SHARD_HOSTGROUPS)
        ],
        "mysql_sharded_tables": [
            {
                "schemaname": "shop",
                "tablename": "tb_Shop",
                "shard_group": "shops",
                "algorithm": "mod",
                "shard_key": "City_ID",
            },
            {"schemaname": "shop", "tablename": "cities", "shard_group": "shops", "algorithm": "global"},
            {
                "schemaname": "shop",
                "tablename": "accounts",
                "shard_group": "shops",
                "algorithm": "hash",
                "shard_key": "code",
                "parameters": '{"key_type": "string"}',
            },
        ],
    }


def ids_on(server: SandboxServer) -> list[int]:
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT City_ID FROM shop.tb_Shop ORDER BY City_ID")
        return [int(row[0]) for row in cur.fetchall()]


def refused(cur: Any, sql: str) -> str:
    with pytest.raises(pymysql.err.MySQLError) as info:
        cur.execute(sql)
    assert info.value.args[0] == 1235, info.value.args
    return str(info.value.args[1])


def test_rows_go_to_the_shard_their_key_names_and_only_there(
    shards: tuple[SandboxServer, SandboxServer], start_proxy: StartProxy
) -> None:
    proxy = start_proxy(config(shards))
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        for city in range(1, 7):
            cur.execute(f"INSERT INTO tb_Shop (City_ID, name) VALUES ({city}, 'shop {city}')")
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (8, 'a'), (10, 'b')")  # both rows on shard 0
        assert ids_on(shards[0]) == [2, 4, 6, 8, 10] and ids_on(shards[1]) == [1, 3, 5]

        cur.execute("SELECT name FROM tb_Shop WHERE City_ID = 3")
        assert cur.fetchall() == (("shop 3",),)
        cur.execute("SELECT City_ID FROM tb_Shop WHERE City_ID IN (4, 8) ORDER BY City_ID")
        assert cur.fetchall() == ((4,), (8,))
        cur.execute("UPDATE tb_Shop SET name = 'renamed' WHERE City_ID = 5")
        assert cur.rowcount == 1
        cur.execute("SELECT c.name FROM tb_Shop s JOIN cities c ON c.id = 1 WHERE s.City_ID = 5")
        assert cur.fetchall() == (("Hangzhou",),)

        cur.execute("SELECT COUNT(*) FROM tb_Shop")  # both shards, merged (test_scatter.py has the rest)
        assert cur.fetchall() == ((8,),)
        assert "changing the shard key" in refused(cur, "UPDATE tb_Shop SET City_ID = 7 WHERE City_ID = 5")
        assert ids_on(shards[0]) == [2, 4, 6, 8, 10] and ids_on(shards[1]) == [1, 3, 5]  # nothing refused ran
    with shards[1].connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT name FROM shop.tb_Shop WHERE City_ID = 5")
        assert cur.fetchone() == ("renamed",)


def test_string_keys_the_collation_holds_equal_are_one_key(
    shards: tuple[SandboxServer, SandboxServer], start_proxy: StartProxy
) -> None:
    proxy = start_proxy(config(shards))
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        for n, code in enumerate(("apple", "pear", "plum", "fig", "kiwi", "lime")):
            cur.execute("INSERT INTO accounts (code, n) VALUES (%s, %s)", (code, n))
        for same in ("APPLE", "Äpple ", "apple  "):  # as one server: the primary key says it is there already
            with pytest.raises(pymysql.err.IntegrityError) as info:
                cur.execute("INSERT INTO accounts (code, n) VALUES (%s, 9)", (same,))
            assert info.value.args[0] == 1062
            cur.execute("SELECT code, n FROM accounts WHERE code = %s", (same,))
            assert cur.fetchall() == (("apple", 0),)
        cur.execute("SELECT code FROM accounts WHERE code IN ('PEAR', 'Plum ') ORDER BY code")
        assert cur.fetchall() == (("pear",), ("plum",))
        cur.execute("SELECT name FROM tb_Shop WHERE City_ID = '0003'")  # an integer key written as text
        assert cur.fetchall() == ()
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES ('0003', 'three')")
        cur.execute("SELECT name FROM tb_Shop WHERE City_ID = 3")
        assert cur.fetchall() == (("three",),)
        assert "the string key 'straße'" in refused(cur, "INSERT INTO accounts (code, n) VALUES ('straße', 1)")
        cur.execute("SELECT COUNT(*) FROM accounts WHERE code = 'straße'")  # a key not placed: every shard
        assert cur.fetchall() == ((0,),)
    assert ids_on(shards[0]) == [] and ids_on(shards[1]) == [3]
    counts = []
    for server in shards:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM shop.accounts")
            row = cur.fetchone()
            assert row is not None
            counts.append(int(row[0]))
    assert sum(counts) == 6 and min(counts) > 0  # spread over both shards


def test_a_transaction_stays_on_its_shard_without_cross_shard_writes(
    shards: tuple[SandboxServer, SandboxServer], start_proxy: StartProxy
) -> None:
    document = config(shards)  # else it would span the shards (tests/live/proxyapp/sharding/test_transactions.py)
    document["global_variables"] = [{"variable_name": "mysql-sharding_cross_shard_writes", "variable_value": "false"}]
    proxy = start_proxy(document)
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (2, 'in a transaction')")
        cur.execute("SELECT name FROM cities WHERE id = 1")  # a global table, read on the transaction's shard
        assert cur.fetchall() == (("Hangzhou",),)
        reason = refused(cur, "INSERT INTO tb_Shop (City_ID, name) VALUES (3, 'other shard')")
        assert "a transaction or pinned session across shards" in reason and "hostgroup 100" in reason
        cur.execute("ROLLBACK")
    assert ids_on(shards[0]) == [] and ids_on(shards[1]) == []


def test_a_transaction_opens_on_the_shard_of_its_first_statement(
    shards: tuple[SandboxServer, SandboxServer], start_proxy: StartProxy
) -> None:
    proxy = start_proxy(config(shards))
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")  # held back: no shard is chosen yet, but the client is in a transaction
        assert conn.server_status & pymysql.constants.SERVER_STATUS.SERVER_STATUS_IN_TRANS
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (3, 'shard 1')")  # shard 1, not the default's 0
        cur.execute("UPDATE tb_Shop SET name = 'updated' WHERE City_ID = 3")
        cur.execute("SELECT name FROM tb_Shop WHERE City_ID = 3 FOR UPDATE")  # sees its own write
        assert cur.fetchall() == (("updated",),)
        assert ids_on(shards[1]) == []  # not committed yet
        cur.execute("COMMIT")
        assert not conn.server_status & pymysql.constants.SERVER_STATUS.SERVER_STATUS_IN_TRANS
        assert ids_on(shards[1]) == [3]

        cur.execute("START TRANSACTION")
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (5, 'rolled back')")
        cur.execute("ROLLBACK")
        cur.execute("BEGIN")
        cur.execute("COMMIT")  # a transaction that ran nothing ends at the proxy
        cur.execute("BEGIN")
        cur.execute("SELECT name FROM tb_Shop WHERE City_ID = 4")  # the transaction opens on shard 0
        cur.execute("ROLLBACK")
        cur.execute("SELECT COUNT(*) FROM tb_Shop")
        assert cur.fetchall() == ((1,),)
    assert ids_on(shards[0]) == [] and ids_on(shards[1]) == [3]
    assert proxy.stats()["global"]["Active_Transactions"] == 0
