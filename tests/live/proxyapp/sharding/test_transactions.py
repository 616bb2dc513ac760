"""Transactions over several shards through a real proxy on two independent servers (issue 14): a transaction whose
first statement is on a sharded table is one XA transaction over the shards it reaches
(``proxyapp.session.sharded.transactions``), opened by BEGIN or with autocommit off. Its statements see its own
writes on every shard; COMMIT commits all, or none; ROLLBACK, a deadlock, a client gone away roll all back;
savepoints and implicit commits mean what they mean on one server; and no pooled connection is left inside a
transaction."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_USER, Sandbox, SandboxServer
from devstack.stack import wait_until
from tests.live.proxyapp.sharding.test_single_shard import config
from tests.support.harness import StartProxy

Servers = tuple[SandboxServer, SandboxServer]


@pytest.fixture
def shards(sandbox: Sandbox, other: Sandbox) -> Iterator[Servers]:
    """Both shards with an empty shop.tb_Shop (sharded by City_ID mod 2: even ids on shard 0)."""
    servers = (sandbox.primary(), other.primary())
    for server in servers:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS shop")
            cur.execute("CREATE DATABASE shop")
            cur.execute("CREATE TABLE shop.tb_Shop (City_ID int PRIMARY KEY, name varchar(20), n int DEFAULT 0)")
            cur.execute("CREATE TABLE shop.cities (id int PRIMARY KEY, name varchar(20))")
            cur.execute("CREATE TABLE shop.plain (id int PRIMARY KEY)")
            cur.execute(f"GRANT ALL ON shop.* TO '{APP_USER}'@'%'")
    yield servers
    for server in servers:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS shop")


@pytest.fixture
def proxy(shards: Servers, start_proxy: StartProxy) -> ProxyProcess:
    return start_proxy(config(shards))


def ids(server: SandboxServer) -> list[int]:
    """The City_IDs stored on ``server``."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT City_ID FROM shop.tb_Shop ORDER BY 1")
        return [row[0] for row in cur.fetchall()]


def settled(shards: Servers) -> None:
    """Nothing is left prepared on either shard, and no connection of the app user is inside a transaction."""
    for server in shards:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("XA RECOVER")
            assert cur.fetchall() == ()
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.innodb_trx t JOIN information_schema.processlist p "
                f"ON p.id = t.trx_mysql_thread_id WHERE p.user = '{APP_USER}'"
            )
            assert cur.fetchall() == ((0,),)


def one(cur: Any, sql: str) -> Any:
    cur.execute(sql)
    return cur.fetchall()


def test_a_transaction_over_both_shards_commits_on_both(shards: Servers, proxy: ProxyProcess) -> None:
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (1, 'a')")  # shard 1: the home branch
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (2, 'b')")  # shard 0: a second branch
        cur.execute("UPDATE tb_Shop SET n = 5 WHERE City_ID = 2")
        assert one(cur, "SELECT name, n FROM tb_Shop WHERE City_ID = 2") == (("b", 5),)  # its own writes
        assert one(cur, "SELECT name FROM tb_Shop WHERE City_ID = 1") == (("a",),)
        assert ids(shards[0]) == [] and ids(shards[1]) == []  # not yet for others
        assert conn.server_status & 1  # SERVER_STATUS_IN_TRANS
        cur.execute("COMMIT")
        assert not conn.server_status & 1
        assert ids(shards[0]) == [2] and ids(shards[1]) == [1]
        assert one(cur, "SELECT n FROM tb_Shop WHERE City_ID = 2") == ((5,),)
    settled(shards)
    assert (proxy.workdir / "xa-log" / "worker-0.xa").exists()


def test_statements_over_both_shards_run_inside_the_transaction(shards: Servers, proxy: ProxyProcess) -> None:
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (51, 'a')")
        assert cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (52, 'b'), (53, 'c')") == 2
        assert one(cur, "SELECT COUNT(*) FROM tb_Shop") == ((3,),)  # a scatter sees the transaction's rows
        assert cur.execute("UPDATE tb_Shop SET n = n + 1") == 3
        assert one(cur, "SELECT City_ID, n FROM tb_Shop ORDER BY City_ID") == ((51, 1), (52, 1), (53, 1))
        with pytest.raises(pymysql.err.IntegrityError) as info:  # 51 is taken on shard 1: 54 is undone on shard 0
            cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (54, 'd'), (51, 'again')")
        assert info.value.args[0] == 1062
        assert one(cur, "SELECT City_ID FROM tb_Shop ORDER BY City_ID") == ((51,), (52,), (53,))
        assert ids(shards[0]) == [] and ids(shards[1]) == []
        cur.execute("COMMIT")
    assert ids(shards[0]) == [52] and ids(shards[1]) == [51, 53]
    settled(shards)
    with proxy.connect(database="shop", autocommit=False) as conn, conn.cursor() as cur:
        assert one(cur, "SELECT COUNT(*) FROM tb_Shop") == ((3,),)  # opens the transaction on both shards
        cur.execute("DELETE FROM tb_Shop")
        assert one(cur, "SELECT COUNT(*) FROM tb_Shop") == ((0,),)
        conn.rollback()
        assert one(cur, "SELECT COUNT(*) FROM tb_Shop") == ((3,),)
        conn.commit()
    settled(shards)


def test_rollback_and_a_client_gone_leave_nothing(shards: Servers, proxy: ProxyProcess) -> None:
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (3, 'a')")
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (4, 'b')")
        cur.execute("ROLLBACK")
        assert one(cur, "SELECT COUNT(*) FROM tb_Shop WHERE City_ID IN (3)") == ((0,),)
    conn = proxy.connect(database="shop", autocommit=True)
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (5, 'a')")
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (6, 'b')")
    conn.close()  # mid-transaction: both branches roll back
    wait_until(lambda: not any(ids(s) for s in shards) and _no_app_trx(shards), "the branches rolled back", 10)
    settled(shards)
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:  # the pool is clean
        for key in range(7, 11):
            cur.execute(f"INSERT INTO tb_Shop (City_ID) VALUES ({key})")
    assert ids(shards[0]) == [8, 10] and ids(shards[1]) == [7, 9]
    settled(shards)


def _no_app_trx(shards: Servers) -> bool:
    try:
        settled(shards)
    except AssertionError:
        return False
    return True


def test_autocommit_off_spans_shards_transaction_after_transaction(shards: Servers, proxy: ProxyProcess) -> None:
    with proxy.connect(database="shop", autocommit=False) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (11)")
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (12)")
        conn.commit()
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (14)")
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (13)")
        conn.rollback()
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (16)")
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (15)")
        cur.execute("SET autocommit = 1")  # commits, as on one server
        assert ids(shards[0]) == [12, 16] and ids(shards[1]) == [11, 15]
    settled(shards)


def test_savepoints_and_implicit_commits_mean_what_they_mean_on_one_server(
    shards: Servers, proxy: ProxyProcess
) -> None:
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (21)")  # home: shard 1
        cur.execute("SAVEPOINT a")
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (22)")  # shard 0 opens after a
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (23)")
        cur.execute("ROLLBACK TO SAVEPOINT a")  # shard 0's branch is rolled back whole, 23 undone on shard 1
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (24)")
        cur.execute("SAVEPOINT b")
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (26)")
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (25)")
        cur.execute("ROLLBACK TO b")  # both branches existed at b: 25 and 26 undone
        cur.execute("RELEASE SAVEPOINT b")
        with pytest.raises(pymysql.err.OperationalError) as info:
            cur.execute("ROLLBACK TO b")
        assert info.value.args[0] == 1305  # SAVEPOINT b does not exist
        cur.execute("COMMIT")
        assert ids(shards[0]) == [24] and ids(shards[1]) == [21]

        cur.execute("BEGIN")
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (27)")
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (28)")
        cur.execute("CREATE TABLE IF NOT EXISTS plain2 (id int)")  # DDL commits the transaction first
        assert not conn.server_status & 1
        cur.execute("BEGIN")
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (29)")
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (30)")
        cur.execute("BEGIN")  # so does BEGIN
        cur.execute("ROLLBACK")
        assert ids(shards[0]) == [24, 28, 30] and ids(shards[1]) == [21, 27, 29]
    settled(shards)


def test_a_deadlock_on_one_shard_rolls_back_the_whole_transaction(shards: Servers, proxy: ProxyProcess) -> None:
    with shards[0].connect() as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO shop.tb_Shop (City_ID) VALUES (40), (42)")
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (41)")  # home: shard 1
        cur.execute("UPDATE tb_Shop SET n = 1 WHERE City_ID = 40")  # shard 0's branch locks 40
        rival = shards[0].connect()
        rival_cur = rival.cursor()
        rival_cur.execute("BEGIN")
        rival_cur.execute("UPDATE shop.tb_Shop SET n = 2 WHERE City_ID = 42")

        def wait_for_40() -> None:
            with contextlib.suppress(pymysql.err.OperationalError):  # the victim, if not the proxy's branch
                rival_cur.execute("UPDATE shop.tb_Shop SET n = 2 WHERE City_ID = 40")

        waiter = threading.Thread(target=wait_for_40)
        waiter.start()
        wait_until(lambda: _waiting(shards[0]), "the rival waiting for row 40", 10)
        with pytest.raises(pymysql.err.OperationalError) as info:
            cur.execute("UPDATE tb_Shop SET n = 1 WHERE City_ID = 42")  # the cycle: one of them is the victim
        waiter.join(10)
        rival.rollback()
        rival.close()
        assert info.value.args[0] == 1213
        assert ids(shards[1]) == []  # 41 rolled back with it: the whole transaction is over, as on one server
        cur.execute("INSERT INTO tb_Shop (City_ID) VALUES (43)")  # the session goes on, in autocommit
        assert not conn.server_status & 1

    assert ids(shards[1]) == [43]
    settled(shards)


def _waiting(server: SandboxServer) -> bool:
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.innodb_lock_waits")
        return bool(cur.fetchall()[0][0])
