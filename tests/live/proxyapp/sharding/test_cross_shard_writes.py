"""Writes over several shards through a real proxy on two independent servers (issue 14): one XA transaction over
the shards they reach, committed on all of them or none. A multi-row INSERT gives each shard its rows, an UPDATE or
DELETE without the key runs on both, a global table is written to both; the OK adds up the shards' counts (a global
table's is one copy's, and copies that answer differently roll the write back). A shard that refuses its part rolls
the other back. The proxy killed (by the XA test hook) after every branch is prepared, or after the decision to
commit, leaves prepared branches that its recovery, at the restart, rolls back or commits: all or nothing, and
nothing left prepared; and so does a proxy killed (SIGKILL) while six clients write."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_USER, Sandbox, SandboxServer
from devstack.stack import wait_until
from proxyapp.sharding.xa import FAILPOINT, RECOVERY_INTERVAL
from tests.live.proxyapp.sharding.test_single_shard import config, refused
from tests.support.harness import StartProxy

Servers = tuple[SandboxServer, SandboxServer]


@pytest.fixture
def shards(sandbox: Sandbox, other: Sandbox) -> Iterator[Servers]:
    """Both shards with an empty shop.tb_Shop and shop.cities (a global table)."""
    servers = (sandbox.primary(), other.primary())
    for server in servers:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS shop")
            cur.execute("CREATE DATABASE shop")
            cur.execute("CREATE TABLE shop.tb_Shop (City_ID int PRIMARY KEY, name varchar(20), n int DEFAULT 0)")
            cur.execute("CREATE TABLE shop.cities (id int PRIMARY KEY, name varchar(20))")
            cur.execute(f"GRANT ALL ON shop.* TO '{APP_USER}'@'%'")
    yield servers
    for server in servers:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS shop")


def rows(server: SandboxServer, table: str = "tb_Shop") -> list[tuple[Any, ...]]:
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT * FROM shop.{table} ORDER BY 1")
        return [tuple(row) for row in cur.fetchall()]


def prepared(server: SandboxServer) -> list[str]:
    """The xids prepared on ``server`` (XA RECOVER)."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("XA RECOVER")
        return [row[3].decode() if isinstance(row[3], bytes) else str(row[3]) for row in cur.fetchall()]


def test_a_write_over_both_shards_commits_on_both(shards: Servers, start_proxy: StartProxy) -> None:
    proxy = start_proxy(config(shards))
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        assert cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')") == 4
        assert rows(shards[0]) == [(2, "b", 0), (4, "d", 0)] and rows(shards[1]) == [(1, "a", 0), (3, "c", 0)]
        assert cur.execute("UPDATE tb_Shop SET n = n + 1 WHERE name <> 'd'") == 3
        assert cur.execute("DELETE FROM tb_Shop WHERE City_ID IN (3, 4)") == 2
        assert rows(shards[0]) == [(2, "b", 1)] and rows(shards[1]) == [(1, "a", 1)]
        assert cur.execute("INSERT INTO cities (id, name) VALUES (1, 'Hangzhou'), (2, 'Ningbo')") == 2  # one copy's
        assert rows(shards[0], "cities") == rows(shards[1], "cities") == [(1, "Hangzhou"), (2, "Ningbo")]
        assert cur.execute("UPDATE cities SET name = 'Wenzhou' WHERE id = 2") == 1

        # Copies that differ answer differently: the write is rolled back on both, saying so.
        with shards[1].connect() as direct, direct.cursor() as other:
            other.execute("DELETE FROM shop.cities WHERE id = 1")
        with pytest.raises(pymysql.err.MySQLError) as differ:
            cur.execute("DELETE FROM cities WHERE id < 3")
        assert differ.value.args[0] == 1180 and "shard 0: 2 rows affected" in differ.value.args[1]
        assert rows(shards[0], "cities") == [(1, "Hangzhou"), (2, "Wenzhou")] and rows(shards[1], "cities") == [
            (2, "Wenzhou")
        ]

        # Shard 0 refuses its row (a duplicate key): shard 1's row is rolled back with it.
        with pytest.raises(pymysql.err.IntegrityError) as info:
            cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (5, 'new'), (2, 'dup')")
        assert info.value.args[0] == 1062
        assert rows(shards[1]) == [(1, "a", 1)]
        cur.execute("SELECT COUNT(*) FROM tb_Shop")  # the session goes on
        assert cur.fetchall() == ((2,),)
        assert "with = or IN" not in refused(cur, "UPDATE tb_Shop SET n = 0 ORDER BY name LIMIT 1")
    assert prepared(shards[0]) == [] and prepared(shards[1]) == []
    assert (proxy.workdir / "xa-log" / "worker-0.xa").exists()


def test_cross_shard_writes_can_be_forbidden(shards: Servers, start_proxy: StartProxy) -> None:
    document = config(shards)
    document["global_variables"] = [{"variable_name": "mysql-sharding_cross_shard_writes", "variable_value": "false"}]
    proxy = start_proxy(document)
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        reason = refused(cur, "INSERT INTO tb_Shop (City_ID, name) VALUES (1, 'a'), (2, 'b')")
        assert "(mysql-sharding_cross_shard_writes=false)" in reason
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (1, 'a')")  # one shard: as before
    assert rows(shards[0]) == [] and rows(shards[1]) == [(1, "a", 0)]


@pytest.mark.parametrize(("step", "kept"), [("prepared", False), ("decided", True)])
def test_a_proxy_killed_in_the_middle_leaves_all_or_nothing(
    shards: Servers, start_proxy: StartProxy, step: str, kept: bool
) -> None:
    proxy: ProxyProcess = start_proxy(config(shards))
    proxy.stop()
    proxy.env[FAILPOINT] = step
    proxy.start()
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        with pytest.raises(pymysql.err.OperationalError) as info:
            cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (1, 'a'), (2, 'b')")
        assert info.value.args[0] in (2013, 2006)  # the proxy died under it
    assert proxy.proc is not None and proxy.proc.wait(timeout=10) == 137
    assert len(prepared(shards[0])) == 1 and len(prepared(shards[1])) == 1  # both branches prepared, in doubt
    assert rows(shards[0]) == [] and rows(shards[1]) == []

    proxy.env.pop(FAILPOINT)
    proxy.start()  # recovery runs at once: commit (the decision is on disk) or roll back (none is)

    def recovered() -> bool:
        if prepared(shards[0]) or prepared(shards[1]):
            proxy.advance_clock(RECOVERY_INTERVAL)  # a branch the server still held for the dead connection: again
            return False
        return True

    wait_until(recovered, "recovery of the prepared branches", 30, interval=0.2)
    assert rows(shards[0]) == ([(2, "b", 0)] if kept else [])
    assert rows(shards[1]) == ([(1, "a", 0)] if kept else [])
    assert ("xa recovery: committed" if kept else "xa recovery: rolled back") in proxy.log()


def test_a_proxy_killed_under_load_leaves_every_transaction_whole(shards: Servers, start_proxy: StartProxy) -> None:
    """Six clients write pairs of rows, one on each shard, as fast as they can; the proxy is killed (SIGKILL)
    in the middle. After the restart's recovery nothing stays prepared, every pair is on both shards or on
    neither, and every pair a client saw committed is there."""
    proxy: ProxyProcess = start_proxy(config(shards))
    committed: list[int] = []
    lock = threading.Lock()

    def write(client: int) -> None:
        conn = proxy.connect(database="shop", autocommit=True, read_timeout=10)
        with contextlib.suppress(pymysql.err.MySQLError, OSError), conn, conn.cursor() as cur:  # until the kill
            for n in range(10_000):
                pair = (client * 10_000 + n) * 2  # even: shard 0; odd: shard 1
                cur.execute(f"INSERT INTO tb_Shop (City_ID, name) VALUES ({pair}, 'p'), ({pair + 1}, 'p')")
                with lock:
                    committed.append(pair)

    writers = [threading.Thread(target=write, args=(client,), daemon=True) for client in range(6)]
    for writer in writers:
        writer.start()
    wait_until(lambda: len(committed) >= 60, "sixty pairs committed", 60, interval=0.05)
    proxy.signal(signal.SIGKILL)
    assert proxy.proc is not None and proxy.proc.wait(timeout=10) == -signal.SIGKILL
    for writer in writers:
        writer.join(timeout=30)
        assert not writer.is_alive()

    proxy.start()

    def recovered() -> bool:
        if prepared(shards[0]) or prepared(shards[1]):
            proxy.advance_clock(RECOVERY_INTERVAL)
            return False
        return True

    wait_until(recovered, "recovery of the prepared branches", 30, interval=0.2)
    evens = {row[0] for row in rows(shards[0])}
    odds = {row[0] - 1 for row in rows(shards[1])}
    assert evens == odds, f"pairs split over the shards: {sorted(evens ^ odds)}"
    assert set(committed) <= evens, f"committed pairs lost: {sorted(set(committed) - evens)}"
    assert all(pair % 2 == 0 for pair in evens) and len(evens) >= 60


def test_a_write_over_both_shards_takes_its_locks_shard_by_shard_in_order(
    shards: Servers, start_proxy: StartProxy
) -> None:
    """Sent to both shards at once, two writes could each lock a row on one shard and wait for the other's row on
    the other: a deadlock no server sees, until the lock wait timeout (it stalled Amoeba's update on two shards). So
    a write runs on its shards one after the other, in shard order: while it waits on shard 0, it holds nothing on
    shard 1."""
    proxy = start_proxy(config(shards))
    with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO tb_Shop (City_ID, name) VALUES (1, 'a'), (2, 'b')")
    holder = shards[0].connect(autocommit=False)  # row 2, on shard 0, locked by someone else
    holder.cursor().execute("SELECT * FROM shop.tb_Shop WHERE City_ID = 2 FOR UPDATE")
    outcome: list[Any] = []

    def write() -> None:
        with proxy.connect(database="shop", autocommit=True) as conn, conn.cursor() as cur:
            outcome.append(cur.execute("UPDATE tb_Shop SET n = n + 1 WHERE City_ID IN (1, 2)"))

    writer = threading.Thread(target=write)
    writer.start()
    try:
        wait_until(lambda: _lock_waits(shards[0]) > 0, "the write waiting for row 2 on shard 0", 10)
        with shards[1].connect(autocommit=False) as other, other.cursor() as cur:  # row 1 on shard 1: still free
            cur.execute("SELECT n FROM shop.tb_Shop WHERE City_ID = 1 FOR UPDATE NOWAIT")
            assert cur.fetchall() == ((0,),)
            other.rollback()
    finally:
        holder.rollback()
        holder.close()
        writer.join(timeout=30)
    assert outcome == [2]
    assert rows(shards[0]) == [(2, "b", 1)] and rows(shards[1]) == [(1, "a", 1)]


def _lock_waits(server: SandboxServer) -> int:
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.innodb_lock_waits")
        return int(cur.fetchall()[0][0])
