"""Read/write split through a real proxy, shown by the servers' own statement counters."""

from __future__ import annotations

from devstack.proxy import ProxyProcess
from devstack.sandbox import Sandbox, SandboxServer


def com_counts(server: SandboxServer) -> dict[str, int]:
    """The server's Com_select / Com_insert / Com_update counters."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_select', 'Com_insert', 'Com_update')")
        return {name: int(value) for name, value in cur.fetchall()}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in before}


def test_reads_go_to_the_replica_and_writes_to_the_primary(sandbox: Sandbox, rw_proxy: ProxyProcess) -> None:
    primary, replica = sandbox.primary(), sandbox.replicas()[0]
    with rw_proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS rw (id INT PRIMARY KEY, v INT)")
        cur.execute("REPLACE INTO rw VALUES (1, 0)")
        sandbox.wait_replicated()
        p0, r0 = com_counts(primary), com_counts(replica)
        for _ in range(50):
            cur.execute("SELECT v FROM rw WHERE id = 1")
            assert cur.fetchall() == ((0,),)
        for i in range(10):
            cur.execute("UPDATE rw SET v = v WHERE id = %s", (i,))
        for _ in range(5):
            cur.execute("SELECT v FROM rw WHERE id = 1 FOR UPDATE")
        dp, dr = delta(p0, com_counts(primary)), delta(r0, com_counts(replica))
    assert dr["Com_select"] == 50
    assert dp["Com_select"] == 5  # only the locking reads
    assert dp["Com_update"] == 10 and dr["Com_update"] == 0


def test_a_transaction_stays_on_the_primary(sandbox: Sandbox, rw_proxy: ProxyProcess) -> None:
    primary, replica = sandbox.primary(), sandbox.replicas()[0]
    with rw_proxy.connect(database="app") as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS rw_tx (id INT PRIMARY KEY, v INT)")
        conn.commit()
        p0, r0 = com_counts(primary), com_counts(replica)
        cur.execute("BEGIN")
        cur.execute("SELECT COUNT(*) FROM rw_tx")
        cur.execute("INSERT INTO rw_tx VALUES (1, 1) ON DUPLICATE KEY UPDATE v = v + 1")
        cur.execute("SELECT v FROM rw_tx WHERE id = 1")
        conn.commit()
        dp, dr = delta(p0, com_counts(primary)), delta(r0, com_counts(replica))
    assert dp["Com_select"] == 2 and dr["Com_select"] == 0


def test_autocommit_off_is_a_transaction_from_its_first_select(sandbox: Sandbox, rw_proxy: ProxyProcess) -> None:
    """ProxySQL sends the first SELECT after SET autocommit=0 to a replica; we keep it with the writes."""
    primary, replica = sandbox.primary(), sandbox.replicas()[0]
    with rw_proxy.connect(database="app", autocommit=False) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS rw_ac (id INT PRIMARY KEY, v INT)")
        conn.commit()
        p0, r0 = com_counts(primary), com_counts(replica)
        cur.execute("SELECT COUNT(*) FROM rw_ac")
        cur.execute("REPLACE INTO rw_ac VALUES (1, 1)")
        cur.execute("SELECT v FROM rw_ac WHERE id = 1")
        assert cur.fetchall() == ((1,),)
        conn.rollback()
        dp, dr = delta(p0, com_counts(primary)), delta(r0, com_counts(replica))
    assert dp["Com_select"] == 2 and dr["Com_select"] == 0


def test_wrong_password_is_1045(rw_proxy: ProxyProcess) -> None:
    import pymysql
    import pytest

    with pytest.raises(pymysql.err.OperationalError) as info:
        rw_proxy.connect(password="nope")
    assert info.value.args[0] == 1045


def test_a_multi_statement_batch_with_a_write_goes_to_the_writer(sandbox: Sandbox, rw_proxy: ProxyProcess) -> None:
    """The ^SELECT rule matches the batch's first statement; the batch also writes, so it must not reach a replica."""
    from pymysql.constants import CLIENT

    with (
        rw_proxy.connect(database="app", autocommit=True, client_flag=CLIENT.MULTI_STATEMENTS) as conn,
        conn.cursor() as cur,
    ):
        cur.execute("CREATE TABLE IF NOT EXISTS rw_multi (id INT PRIMARY KEY)")
        cur.execute("SELECT @@port; REPLACE INTO rw_multi VALUES (1)")
        assert cur.fetchone() == (sandbox.primary().port,)
        while cur.nextset():
            pass
