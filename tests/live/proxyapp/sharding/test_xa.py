"""Cross-shard commits with XA on two independent MariaDB servers (shard 0: the session sandbox's primary, shard 1:
a server of this module's own): both shards or neither, whatever fails, and recovery after a crash of the proxy
resolves every prepared branch as the decision log says. Recovery connects as the sandbox's monitor user, which has
no privilege on the data: MariaDB lets any user list and resolve another's detached prepared xids."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from devstack.sandbox import APP_PASSWORD, APP_USER, MONITOR_PASSWORD, MONITOR_USER, Sandbox, SandboxServer
from devstack.stack import wait_until
from proxyapp.mysql.backend import BackendConnection, Credentials
from proxyapp.sharding.decisions import DecisionLog, log_path
from proxyapp.sharding.xa import (
    Branch,
    BranchState,
    Recovery,
    commit,
    commit_prepared,
    prepare,
    recover,
    xa_start_sql,
    xid_prefix,
    xid_sql,
)

DB = "xa_test"
PREFIX = xid_prefix("xa-test-node", 0)

Servers = tuple[SandboxServer, SandboxServer]


@pytest.fixture
def servers(sandbox: Sandbox, other: Sandbox) -> Iterator[Servers]:
    """Both shards' servers, each with an empty ``xa_test.t``; what a failed test left prepared is rolled back."""
    both = (sandbox.primary(), other.primary())
    for server in both:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {DB}")
            cur.execute(f"DROP TABLE IF EXISTS {DB}.t")
            cur.execute(f"CREATE TABLE {DB}.t (id int PRIMARY KEY, shard int)")
    yield both
    for server in both:
        with server.connect() as conn, conn.cursor() as cur:
            for gtrid, bqual in prepared(server):
                cur.execute(f"XA ROLLBACK {xid_sql(gtrid, bqual)}")
            cur.execute(f"DROP DATABASE {DB}")


def name(server: SandboxServer) -> str:
    return f"{server.host}:{server.port}"


def ids(server: SandboxServer) -> list[int]:
    """The rows of ``xa_test.t`` on ``server``, as a new reader sees them."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SELECT id FROM {DB}.t ORDER BY id")
        return [int(row[0]) for row in cur.fetchall()]


def prepared(server: SandboxServer) -> list[tuple[str, str]]:
    """Every xid prepared on ``server`` (``XA RECOVER``)."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("XA RECOVER")
        return [(data[:glen].decode(), data[glen : glen + blen].decode()) for _, glen, blen, data in cur.fetchall()]


async def open_branch(server: SandboxServer, shard: int, xid: str, row: int) -> Branch:
    """Shard ``shard``'s branch of ``xid``, as the executor leaves it: ``XA START`` and an INSERT of ``row``."""
    conn = await BackendConnection.connect(server.host, server.port, Credentials(APP_USER, APP_PASSWORD), DB, timeout=5)
    for sql in (xa_start_sql(xid, shard), f"INSERT INTO t VALUES ({row}, {shard})"):
        assert (await conn.query(sql)).error is None, sql
    return Branch(shard, name(server), conn)


async def open_branches(servers: Servers, xid: str, rows: tuple[int, int] = (1, 2)) -> list[Branch]:
    pairs = zip(servers, rows, strict=True)
    return [await open_branch(server, shard, xid, row) for shard, (server, row) in enumerate(pairs)]


def close(branches: list[Branch]) -> None:
    for branch in branches:
        branch.conn.close()


async def monitor_connect(server: str) -> BackendConnection:
    """How recovery reaches a server in these tests: as the monitor user (no privilege on any data)."""
    host, port = server.rsplit(":", 1)
    return await BackendConnection.connect(
        host, int(port), Credentials(MONITOR_USER, MONITOR_PASSWORD), None, timeout=5
    )


def crash(servers: Servers, branches: list[Branch]) -> None:
    """The proxy dies: its branch connections close without another word (from the event loop they were opened
    in). Returns once both servers have noticed: their prepared branches are then detached, for recovery."""
    for branch in branches:
        branch.conn.close()
    for server, branch in zip(servers, branches, strict=True):
        with server.connect() as conn, conn.cursor() as cur:

            def gone(thread: int = branch.conn.thread_id) -> bool:
                cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s", (thread,))
                return cur.fetchone()[0] == 0

            wait_until(gone, f"the end of connection {branch.conn.thread_id} on {name(server)}", 10)


def restarted(path: Path, log: DecisionLog) -> DecisionLog:
    """The worker after a restart: its log read again from disk."""
    asyncio.run(log.close())
    return DecisionLog.open(path, PREFIX)


def test_a_commit_writes_both_shards_and_leaves_nothing_behind(servers: Servers, tmp_path: Path) -> None:
    path = log_path(tmp_path, 0)
    log = DecisionLog.open(path, PREFIX)
    xid = log.new_xid()

    async def run() -> None:
        branches = await open_branches(servers, xid)
        outcome = await commit(branches, xid, log)
        assert outcome.committed and outcome.failure is None and outcome.pending == ()
        assert all(b.state == BranchState.COMMITTED and b.reusable and not b.conn.in_transaction for b in branches)
        close(branches)

    asyncio.run(run())
    assert [ids(s) for s in servers] == [[1], [2]]
    assert prepared(servers[0]) == prepared(servers[1]) == []
    assert log.entries == {} and log.in_flight == set()
    assert restarted(path, log).entries == {} and path.read_text() == ""


def test_one_branch_commits_in_one_phase_without_the_log(servers: Servers, tmp_path: Path) -> None:
    path = log_path(tmp_path, 0)
    log = DecisionLog.open(path, PREFIX)
    xid = log.new_xid()

    async def run() -> None:
        branch = await open_branch(servers[1], 1, xid, 7)
        outcome = await commit([branch], xid, log)
        assert outcome.committed and branch.reusable
        close([branch])

    asyncio.run(run())
    assert ids(servers[1]) == [7] and ids(servers[0]) == []
    assert path.read_text() == ""
    asyncio.run(log.close())


def test_a_branch_the_server_refuses_to_prepare_rolls_both_back(servers: Servers, tmp_path: Path) -> None:
    """Shard 1's branch is a deadlock victim: its server makes it rollback-only and refuses XA END."""
    log = DecisionLog.open(log_path(tmp_path, 0), PREFIX)
    xid = log.new_xid()
    with servers[1].connect() as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {DB}.t VALUES " + ", ".join(f"({n}, 1)" for n in range(100, 111)))

    async def run() -> None:
        branches = await open_branches(servers, xid)
        victim = branches[1].conn
        assert (await victim.query("UPDATE t SET shard = 9 WHERE id = 100")).error is None
        with servers[1].connect(autocommit=False) as other, other.cursor() as cur:
            cur.execute(f"UPDATE {DB}.t SET shard = 8 WHERE id > 100")  # ten rows: the heavier transaction
            waiting = asyncio.create_task(victim.query("UPDATE t SET shard = 9 WHERE id = 101"))

            def lock_wait() -> bool:
                cur.execute("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'")
                return cur.fetchone()[0] == 1

            # In a thread, so that the event loop sends the branch's UPDATE meanwhile: the server shows it waiting.
            await asyncio.to_thread(wait_until, lock_wait, "the branch waiting for a lock", 10)
            cur.execute(f"UPDATE {DB}.t SET shard = 8 WHERE id = 100")  # a deadlock: the branch is the victim
            refused = (await waiting).error
            assert refused is not None and refused.code == 1213
            other.rollback()
        outcome = await commit(branches, xid, log)
        assert not outcome.committed and outcome.pending == ()
        assert outcome.failure is not None and (outcome.failure.shard, outcome.failure.code) == (1, 1399)
        assert str(outcome.failure).startswith(f"shard 1 ({name(servers[1])}): XAER_RMFAIL")
        assert all(b.reusable for b in branches)
        close(branches)

    asyncio.run(run())
    assert ids(servers[0]) == [] and ids(servers[1]) == list(range(100, 111))
    assert prepared(servers[0]) == prepared(servers[1]) == []
    assert log.entries == {}
    asyncio.run(log.close())


def test_a_server_killed_before_prepare_rolls_the_other_shard_back(
    servers: Servers, other: Sandbox, tmp_path: Path
) -> None:
    log = DecisionLog.open(log_path(tmp_path, 0), PREFIX)
    xid = log.new_xid()

    async def run() -> None:
        branches = await open_branches(servers, xid)
        other.kill(servers[1].name)
        outcome = await commit(branches, xid, log)
        assert not outcome.committed and outcome.pending == ()
        assert outcome.failure is not None and (outcome.failure.shard, outcome.failure.code) == (1, 2013)
        assert branches[0].reusable and not branches[1].reusable
        close(branches)

    try:
        asyncio.run(run())
    finally:
        other.start(servers[1].name)
    assert ids(servers[0]) == [] and ids(servers[1]) == []
    assert prepared(servers[0]) == prepared(servers[1]) == []
    assert log.entries == {}
    asyncio.run(log.close())


def test_a_crash_after_the_commit_decision_is_committed_by_recovery(servers: Servers, tmp_path: Path) -> None:
    path = log_path(tmp_path, 0)
    log = DecisionLog.open(path, PREFIX)
    xid = log.new_xid()

    async def until_the_decision() -> None:
        branches = await open_branches(servers, xid)
        assert await prepare(branches, xid, log) is None
        await log.decide_commit(xid)
        crash(servers, branches)

    asyncio.run(until_the_decision())
    assert ids(servers[0]) == ids(servers[1]) == []  # prepared, not committed
    log = restarted(path, log)
    assert log.committed(xid)

    report = asyncio.run(recover(log, [name(s) for s in servers], monitor_connect))
    assert sorted(report.committed) == [f"{xid},0@{name(servers[0])}", f"{xid},1@{name(servers[1])}"]
    assert report.rolled_back == report.errors == report.unfinished == []
    assert [ids(s) for s in servers] == [[1], [2]]
    assert prepared(servers[0]) == prepared(servers[1]) == []
    assert log.entries == {} and restarted(path, log).entries == {}


def test_a_crash_before_the_decision_is_rolled_back_by_recovery(servers: Servers, tmp_path: Path) -> None:
    path = log_path(tmp_path, 0)
    log = DecisionLog.open(path, PREFIX)
    xid = log.new_xid()

    async def until_prepared() -> None:
        branches = await open_branches(servers, xid)
        assert await prepare(branches, xid, log) is None
        crash(servers, branches)

    asyncio.run(until_prepared())
    log = restarted(path, log)
    assert list(log.pending()) == [xid] and not log.committed(xid)

    recovery = Recovery(log, lambda: [name(s) for s in servers], monitor_connect, interval=10)

    async def passes() -> None:
        first = recovery.sweep(0)
        assert first is not None and recovery.sweep(0) is None  # one pass at a time
        report = await first
        assert sorted(report.rolled_back) == [f"{xid},0@{name(servers[0])}", f"{xid},1@{name(servers[1])}"]
        assert report.committed == report.errors == []
        assert recovery.sweep(60) is None  # every server swept and nothing left in the log: no more passes

    asyncio.run(passes())
    assert ids(servers[0]) == ids(servers[1]) == []
    assert prepared(servers[0]) == prepared(servers[1]) == []
    assert log.entries == {}
    asyncio.run(log.close())


def test_a_commit_a_branch_does_not_confirm_is_finished_by_recovery(servers: Servers, tmp_path: Path) -> None:
    log = DecisionLog.open(log_path(tmp_path, 0), PREFIX)
    xid = log.new_xid()

    async def run() -> None:
        branches = await open_branches(servers, xid)
        assert await prepare(branches, xid, log) is None
        await log.decide_commit(xid)
        branches[1].conn.close()  # shard 1's connection is lost before its XA COMMIT
        outcome = await commit_prepared(branches, xid, log)
        assert outcome.committed and outcome.failure is None and outcome.pending == (1,)
        assert branches[0].reusable and not branches[1].reusable
        assert ids(servers[0]) == [1] and ids(servers[1]) == []
        assert list(log.pending()) == [xid]
        crash(servers, branches)  # closes shard 0's, which is committed; waits until shard 1's is detached

    asyncio.run(run())

    report = asyncio.run(recover(log, [name(s) for s in servers], monitor_connect))
    assert report.committed == [f"{xid},1@{name(servers[1])}"] and report.errors == []
    assert [ids(s) for s in servers] == [[1], [2]]
    assert prepared(servers[1]) == [] and log.entries == {}
    asyncio.run(log.close())


def test_a_branch_prepared_on_a_server_that_crashes_is_committed_after_its_restart(
    servers: Servers, other: Sandbox, tmp_path: Path
) -> None:
    log = DecisionLog.open(log_path(tmp_path, 0), PREFIX)
    xid = log.new_xid()

    async def run() -> None:
        branches = await open_branches(servers, xid)
        assert await prepare(branches, xid, log) is None
        await log.decide_commit(xid)
        other.kill(servers[1].name)
        try:
            outcome = await commit_prepared(branches, xid, log)
        finally:
            other.start(servers[1].name)
        assert outcome.committed and outcome.pending == (1,)
        close(branches)

    asyncio.run(run())
    assert prepared(servers[1]) == [(xid, "1")]  # kept through the server's crash
    report = asyncio.run(recover(log, [name(s) for s in servers], monitor_connect))
    assert report.committed == [f"{xid},1@{name(servers[1])}"] and report.errors == []
    assert [ids(s) for s in servers] == [[1], [2]]
    assert prepared(servers[1]) == [] and log.entries == {}
    asyncio.run(log.close())


def test_recovery_leaves_transactions_in_flight_and_other_prefixes_alone(servers: Servers, tmp_path: Path) -> None:
    log = DecisionLog.open(log_path(tmp_path, 0), PREFIX)
    xid = log.new_xid()
    foreign = [(xid_prefix("xa-test-node", 1) + "1.1", "0"), (xid_prefix("xa-test-node", 10) + "1.1", "0")]
    foreign.append(("an-application-xid", "1"))
    for n, (gtrid, bqual) in enumerate(foreign):  # each prepared by a connection gone since
        with servers[0].connect() as conn, conn.cursor() as cur:
            sql = xid_sql(gtrid, bqual)
            for statement in (f"XA START {sql}", f"INSERT INTO {DB}.t VALUES ({10 + n}, 0)", f"XA END {sql}"):
                cur.execute(statement)
            cur.execute(f"XA PREPARE {sql}")

    async def run() -> None:
        branches = await open_branches(servers, xid)
        assert await prepare(branches, xid, log) is None
        report = await recover(log, [name(s) for s in servers], monitor_connect)
        assert report.committed == report.rolled_back == report.errors == []
        assert set(prepared(servers[0])) == {*foreign, (xid, "0")} and xid in log.entries
        await log.decide_commit(xid)
        assert (await commit_prepared(branches, xid, log)).committed
        close(branches)

    asyncio.run(run())
    assert set(prepared(servers[0])) == set(foreign) and prepared(servers[1]) == []
    assert [ids(s) for s in servers] == [[1], [2]]
    asyncio.run(log.close())


def test_a_replica_refuses_the_monitor_user_a_commit(sandbox: Sandbox, servers: Servers) -> None:
    """An XA PREPARE replicates; recovery's user, without READ_ONLY ADMIN, cannot commit it on a read_only replica."""
    replica = sandbox.replicas()[0]
    with servers[0].connect() as conn, conn.cursor() as cur:
        for statement in ("XA START 'xa-replica','0'", f"INSERT INTO {DB}.t VALUES (5, 0)", "XA END 'xa-replica','0'"):
            cur.execute(statement)
        cur.execute("XA PREPARE 'xa-replica','0'")
    sandbox.wait_replicated()
    assert ("xa-replica", "0") in prepared(replica)
    with (
        replica.connect(user=MONITOR_USER, password=MONITOR_PASSWORD) as conn,
        conn.cursor() as cur,
        pytest.raises(pymysql.err.MySQLError) as refused,
    ):
        cur.execute("XA COMMIT 'xa-replica','0'")
    assert refused.value.args[0] == 1290
    with servers[0].connect() as conn, conn.cursor() as cur:
        cur.execute("XA ROLLBACK 'xa-replica','0'")
    sandbox.wait_replicated()
    assert prepared(replica) == []
