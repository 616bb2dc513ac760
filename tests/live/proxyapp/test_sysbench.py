"""sysbench ``oltp_read_write`` through the read/write-split proxy: no errors, and the servers' counters show where
the statements went.

Two shapes of the workload, each with ``--db-ps-mode=auto`` (binary protocol, COM_STMT_*) and ``disable`` (text):

* ``transactions`` (sysbench's default): every event is BEGIN ... COMMIT, and a transaction stays on the
  writer, so the reads run on the primary too and the replica sees none of them;
* ``autocommit`` (``--skip-trx=on``): the plain SELECTs go to the reader hostgroup (the replica) and the UPDATEs
  to the primary. ``--delete_inserts=0`` there, because without a transaction two threads deleting and
  re-inserting the same id race into a duplicate key, which has nothing to do with the proxy.

On MariaDB 10.11 the replica's SQL thread DOES bump ``Com_insert``/``Com_update``/``Com_delete`` for every row
event it applies (binlog_format=ROW included), so the replica's SQL thread is stopped while sysbench runs: any
write counted on the replica then is one the proxy sent there (and the ``app`` user lacks READ_ONLY ADMIN, so
such a write would also fail the run). Its IO thread keeps fetching; the SQL thread is restarted and caught up
afterwards. ``--rand-type=uniform`` keeps InnoDB deadlocks (error 1213, which sysbench counts as "ignored
errors") away from so small a data set.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.proxy import ProxyProcess, rw_split_config
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox, SandboxServer

TABLES = 2
TABLE_SIZE = 1000
THREADS = 4
EVENTS = 500
TIME_LIMIT_S = 15
COUNTERS = ("Com_select", "Com_insert", "Com_update", "Com_delete")

pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(shutil.which("sysbench") is None, reason="sysbench is not installed"),
]


def sysbench(port: int, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``sysbench oltp_read_write`` against 127.0.0.1:``port`` as the app user, in database ``app``.

    The last of ``args`` is the command (prepare, run, cleanup).
    """
    cmd = [
        "sysbench",
        "oltp_read_write",
        "--db-driver=mysql",
        "--mysql-host=127.0.0.1",
        f"--mysql-port={port}",
        f"--mysql-user={APP_USER}",
        f"--mysql-password={APP_PASSWORD}",
        "--mysql-db=app",
        f"--tables={TABLES}",
        f"--table-size={TABLE_SIZE}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def report_number(output: str, label: str) -> int:
    """A count from sysbench's report, e.g. ``report_number(out, "ignored errors")``."""
    match = re.search(rf"^\s*{label}:\s+(\d+)", output, re.MULTILINE)
    assert match is not None, f"no {label!r} in the sysbench output:\n{output}"
    return int(match.group(1))


def com_counts(server: SandboxServer) -> dict[str, int]:
    """The server's statement counters named in COUNTERS."""
    names = ", ".join(f"'{name}'" for name in COUNTERS)
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"SHOW GLOBAL STATUS WHERE Variable_name IN ({names})")
        return {name: int(value) for name, value in cur.fetchall()}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """after - before, per counter."""
    return {name: after[name] - before[name] for name in before}


@contextlib.contextmanager
def replication_applier_stopped(sandbox: Sandbox, replica: SandboxServer) -> Iterator[None]:
    """The replica's SQL thread stopped (so its Com_* counters count only what clients send it), then restarted
    and caught up with the primary."""
    with replica.connect() as conn, conn.cursor() as cur:
        cur.execute("STOP SLAVE SQL_THREAD")
    try:
        yield
    finally:
        with replica.connect() as conn, conn.cursor() as cur:
            cur.execute("START SLAVE SQL_THREAD")
        sandbox.wait_replicated()


@pytest.fixture(scope="module")
def sbtest_tables(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``sysbench prepare`` through a rw-split proxy (DDL and bulk inserts to the primary), replicated; then
    ``sysbench cleanup`` through it at the end of the module."""
    workdir = Path(tmp_path_factory.mktemp("sysbench-proxy"))
    proxy = ProxyProcess(rw_split_config(sandbox.primary().port, [r.port for r in sandbox.replicas()]), workdir)
    proxy.start()
    try:
        sysbench(proxy.port, "cleanup")  # leftovers of an interrupted run
        prepared = sysbench(proxy.port, "prepare")
        assert prepared.returncode == 0, f"sysbench prepare failed:\n{prepared.stdout}{prepared.stderr}"
        sandbox.wait_replicated()
        yield
        cleaned = sysbench(proxy.port, "cleanup")
        assert cleaned.returncode == 0, f"sysbench cleanup failed:\n{cleaned.stdout}{cleaned.stderr}"
    finally:
        proxy.stop()


@pytest.mark.parametrize("shape", ["transactions", "autocommit"])
@pytest.mark.parametrize("ps_mode", ["auto", "disable"])
def test_oltp_read_write_through_the_rw_split_proxy(
    sandbox: Sandbox, rw_proxy: ProxyProcess, sbtest_tables: None, ps_mode: str, shape: str
) -> None:
    primary, replica = sandbox.primary(), sandbox.replicas()[0]
    extra = ["--skip-trx=on", "--delete_inserts=0"] if shape == "autocommit" else []
    sandbox.wait_replicated()  # its MASTER_GTID_WAIT is a SELECT on the replica: before the counters are read
    with replication_applier_stopped(sandbox, replica):
        p0, r0 = com_counts(primary), com_counts(replica)
        result = sysbench(
            rw_proxy.port,
            f"--threads={THREADS}",
            f"--events={EVENTS}",
            f"--time={TIME_LIMIT_S}",
            "--forced-shutdown=10",
            "--rand-type=uniform",
            f"--db-ps-mode={ps_mode}",
            *extra,
            "run",
            timeout=TIME_LIMIT_S + 60,
        )
        dp, dr = delta(p0, com_counts(primary)), delta(r0, com_counts(replica))
    out = result.stdout + result.stderr
    assert result.returncode == 0, f"sysbench exited with {result.returncode}:\n{out}\n{rw_proxy.log()[-3000:]}"
    assert report_number(out, "ignored errors") == 0, out
    assert report_number(out, "reconnects") == 0, out
    assert report_number(out, "transactions") > 0, out
    reads, writes = report_number(out, "read"), report_number(out, "write")
    assert reads > 0 and writes > 0, out

    # No write ever reached the replica (its applier was stopped, so nothing else bumps these counters).
    assert dr["Com_insert"] == dr["Com_update"] == dr["Com_delete"] == 0, (dp, dr)
    # Every write reached the primary.
    assert dp["Com_insert"] + dp["Com_update"] + dp["Com_delete"] >= writes, (writes, dp)
    if shape == "autocommit":
        assert dr["Com_select"] >= reads, (reads, dp, dr)  # every read on the replica
        assert dp["Com_select"] < reads // 10, (reads, dp, dr)
        assert dp["Com_insert"] == dp["Com_delete"] == 0, dp
    else:
        assert dp["Com_select"] >= reads, (reads, dp, dr)  # the transactions' reads stayed on the primary
        assert dr["Com_select"] < reads // 10, (reads, dp, dr)
        assert dp["Com_insert"] > 0 and dp["Com_delete"] > 0 and dp["Com_update"] > 0, dp
