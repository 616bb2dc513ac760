"""Sequences through real proxies on two independent servers (issue 14): orders sharded by their id mod 2, the id
numbered by the proxy (``sequence_column``) from blocks of 3 (``mysql-sharding_sequence_block``) reserved in
proxyfleet.sequences on shard 0. An INSERT without the id (or with NULL or 0) gets ids unique over every connection
and proxy, increasing on each connection, above the rows the shards already hold; each row lands on the shard its
id maps to; the client's OK and LAST_INSERT_ID() tell the first id, as MySQL does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from devstack.sandbox import Sandbox, SandboxServer
from tests.live.proxyapp.sharding.test_single_shard import config as shop_config
from tests.live.proxyapp.sharding.test_single_shard import refused
from tests.support.harness import StartProxy

Servers = tuple[SandboxServer, SandboxServer]


@pytest.fixture
def shards(sandbox: Sandbox, other: Sandbox) -> Iterator[Servers]:
    """Both shards with shop.orders holding one row each (ids 40 and 41), and no proxyfleet schema yet."""
    servers = (sandbox.primary(), other.primary())
    for number, server in enumerate(servers):
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS proxyfleet")
            cur.execute("DROP DATABASE IF EXISTS shop")
            cur.execute("CREATE DATABASE shop")
            cur.execute("CREATE TABLE shop.orders (id bigint PRIMARY KEY AUTO_INCREMENT, name varchar(20))")
            cur.execute(f"INSERT INTO shop.orders VALUES ({40 + number}, 'before')")
    yield servers
    for server in servers:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS proxyfleet")
            cur.execute("DROP DATABASE IF EXISTS shop")


def config(servers: Servers, block: int = 3) -> dict[str, Any]:
    document = shop_config(servers)
    document["mysql_sharded_tables"] = [
        {
            "schemaname": "shop",
            "tablename": "orders",
            "shard_group": "shops",
            "algorithm": "mod",
            "shard_key": "id",
            "sequence_column": "id",
        }
    ]
    document["global_variables"] = [{"variable_name": "mysql-sharding_sequence_block", "variable_value": block}]
    return document


def ids_on(server: SandboxServer) -> list[int]:
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT id FROM shop.orders WHERE name <> 'before' ORDER BY id")
        return [int(row[0]) for row in cur.fetchall()]


def next_value(server: SandboxServer) -> int:
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT next_value FROM proxyfleet.sequences WHERE name = 'shop.orders'")
        return int(cur.fetchone()[0])


def inserted(cur: Any, sql: str) -> int:
    """Run an INSERT; the id its OK tells, which LAST_INSERT_ID() tells too."""
    cur.execute(sql)
    first = int(cur.lastrowid)
    cur.execute("SELECT LAST_INSERT_ID()")
    assert cur.fetchall() == ((first,),)
    return first


def test_ids_are_unique_increasing_per_connection_and_on_their_shard(shards: Servers, start_proxy: StartProxy) -> None:
    proxy = start_proxy(config(shards))
    conns = [proxy.connect(database="shop", autocommit=True) for _ in range(3)]
    try:
        cursors = [conn.cursor() for conn in conns]
        seen: list[list[int]] = [[] for _ in conns]
        for round_ in range(6):  # the connections take turns, so their ids interleave and cross blocks
            for n, cur in enumerate(cursors):
                if (round_ + n) % 3 == 0:  # a multi-row INSERT: 4 ids, over both shards (one XA transaction)
                    first = inserted(cur, f"INSERT INTO orders (name) VALUES ('c{n}'), ('c{n}'), ('c{n}'), ('c{n}')")
                    seen[n] += range(first, first + 4)
                elif (round_ + n) % 3 == 1:
                    seen[n].append(inserted(cur, f"INSERT INTO orders (id, name) VALUES (NULL, 'c{n}')"))
                else:
                    seen[n].append(inserted(cur, f"REPLACE INTO orders (name, id) VALUES ('c{n}', 0)"))
        every = sorted(i for ids in seen for i in ids)
        assert len(set(every)) == len(every) == 3 * (2 * 4 + 4)
        assert every[0] == 42  # the first block starts above the highest id the shards held (41)
        for ids in seen:
            assert ids == sorted(ids)
        assert ids_on(shards[0]) == [i for i in every if i % 2 == 0]
        assert ids_on(shards[1]) == [i for i in every if i % 2 == 1]
        assert next_value(shards[0]) >= every[-1] + 1

        cur = cursors[0]
        # An id given is kept; a value that might be NULL or 0 is refused, nothing written.
        assert inserted(cur, "INSERT INTO orders (id, name) VALUES (1001, 'given')") == 1001
        assert "shop.orders whose sequence column id is not a literal integer" in refused(
            cur, "INSERT INTO orders (id, name) VALUES (@unset, 'x')"
        )
        # In a transaction: on the shard of the new id, LAST_INSERT_ID() from that shard's connection.
        cur.execute("BEGIN")
        first = inserted(cur, "INSERT INTO orders (name) VALUES ('tx')")
        cur.execute("COMMIT")
        assert first in ids_on(shards[first % 2])
        # NO_AUTO_VALUE_ON_ZERO: 0 is a value, stored on shard 0.
        cur.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_AUTO_VALUE_ON_ZERO')")
        cur.execute("INSERT INTO orders (id, name) VALUES (0, 'zero')")
        assert 0 in ids_on(shards[0])
    finally:
        for conn in conns:
            conn.close()


def test_another_proxy_and_a_restart_continue_above_the_blocks_reserved(
    shards: Servers, start_proxy: StartProxy
) -> None:
    first, second = start_proxy(config(shards)), start_proxy(config(shards))
    a, b = first.connect(database="shop", autocommit=True), second.connect(database="shop", autocommit=True)
    with a, b, a.cursor() as cur_a, b.cursor() as cur_b:
        assert [inserted(cur_a, "INSERT INTO orders (name) VALUES ('a')") for _ in range(2)] == [42, 43]  # 42-44
        assert inserted(cur_b, "INSERT INTO orders (name) VALUES ('b')") == 45  # its block: 45-47
        assert [inserted(cur_a, "INSERT INTO orders (name) VALUES ('a')") for _ in range(2)] == [44, 48]
        assert inserted(cur_b, "INSERT INTO orders (name) VALUES ('b'), ('b'), ('b'), ('b')") == 46  # 46, 47, 51-52
    assert next_value(shards[0]) == 54  # first holds 49-50, second 53
    first.stop()
    first.start()
    with first.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        assert inserted(cur, "INSERT INTO orders (name) VALUES ('again')") == 54  # 49 and 50 are never used
    assert ids_on(shards[0]) + ids_on(shards[1]) == [42, 44, 46, 48, 52, 54, 43, 45, 47, 51]


def test_a_user_who_may_not_reserve_gets_the_reason(shards: Servers, start_proxy: StartProxy) -> None:
    with shards[0].connect() as conn, conn.cursor() as cur:
        cur.execute("DROP USER IF EXISTS 'seqless'@'%'")
        cur.execute("CREATE USER 'seqless'@'%' IDENTIFIED BY 'pw'")
        cur.execute("GRANT SELECT, INSERT ON shop.* TO 'seqless'@'%'")
    with shards[1].connect() as conn, conn.cursor() as cur:
        cur.execute("DROP USER IF EXISTS 'seqless'@'%'")
        cur.execute("CREATE USER 'seqless'@'%' IDENTIFIED BY 'pw'")
        cur.execute("GRANT SELECT, INSERT ON shop.* TO 'seqless'@'%'")
    document = config(shards)
    document["mysql_users"].append({"username": "seqless", "password": "pw", "default_hostgroup": 100})
    proxy = start_proxy(document)
    try:
        conn = proxy.connect(user="seqless", password="pw", database="shop", autocommit=True)
        with conn, conn.cursor() as cur, pytest.raises(pymysql.err.MySQLError) as info:
            cur.execute("INSERT INTO orders (name) VALUES ('x')")
        assert info.value.args[0] in (1044, 1142), info.value.args  # access denied: CREATE on proxyfleet
        assert "no values from the sequence of shop.orders: shard 0 (hostgroup 100)" in info.value.args[1]
        assert ids_on(shards[0]) == ids_on(shards[1]) == []
    finally:
        for server in shards:
            with server.connect() as conn, conn.cursor() as cur:
                cur.execute("DROP USER IF EXISTS 'seqless'@'%'")


def test_ids_increase_across_the_workers_of_a_node(shards: Servers, start_proxy: StartProxy) -> None:
    """Two worker processes share the node's block (proxyapp.sharding.nodeblocks): one row at a time from eight
    connections, which the kernel spreads over both workers, gets ids that increase from each row to the next (each
    worker with blocks of its own would alternate between two ranges)."""
    document = config(shards, block=5)
    document["global_variables"].append({"variable_name": "mysql-threads", "variable_value": "2"})
    proxy = start_proxy(document)
    conns = [proxy.connect(database="shop", autocommit=True) for _ in range(8)]
    try:
        handed = []
        for _ in range(4):
            for conn in conns:
                with conn.cursor() as cur:
                    handed.append(inserted(cur, "INSERT INTO orders (name) VALUES ('n')"))
    finally:
        for conn in conns:
            conn.close()
    assert handed == sorted(handed) and len(set(handed)) == len(handed) == 32
    assert handed[0] == 42
    assert sorted(ids_on(shards[0]) + ids_on(shards[1])) == handed
