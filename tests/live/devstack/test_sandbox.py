"""The MariaDB sandbox: servers up, replication working, kill/start, semi-sync, down, and the management command."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys
from pathlib import Path

import pymysql
import pytest

from devstack.sandbox import (
    APP_PASSWORD,
    APP_USER,
    MONITOR_PASSWORD,
    MONITOR_USER,
    Sandbox,
    SandboxServer,
    pid_alive,
)
from devstack.sandboxes import main as sandboxes
from devstack.stack import REPO, wait_until
from tests.conftest import TEST_SANDBOX_DIR


def global_status(server: SandboxServer, name: str) -> str:
    """One SHOW GLOBAL STATUS value."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW GLOBAL STATUS LIKE %s", (name,))
        return cur.fetchone()[1]


def test_shape_and_replication(sandbox: Sandbox) -> None:
    servers = sandbox.status()
    assert [(s.name, s.role, s.server_id) for s in servers] == [("primary", "primary", 1), ("replica1", "replica", 2)]
    assert all(s.running and pid_alive(s.pid) and s.host == "127.0.0.1" for s in servers)
    assert len({s.port for s in servers}) == 2
    assert all(Path(s.datadir).is_relative_to(REPO / TEST_SANDBOX_DIR) for s in servers)
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS test.sandbox_check (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute("REPLACE INTO test.sandbox_check VALUES (1, 'one'), (2, 'two')")
        cur.execute("SELECT @@read_only, @@gtid_strict_mode, @@binlog_format")
        assert cur.fetchone() == (0, 1, "ROW")
    sandbox.wait_replicated()
    with sandbox.replicas()[0].connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT v FROM test.sandbox_check ORDER BY id")
        assert cur.fetchall() == (("one",), ("two",))
        cur.execute("SELECT @@read_only")
        assert cur.fetchone() == (1,)


def test_a_server_is_known_by_its_data_directory_not_by_the_port_it_asked_for(sandbox: Sandbox) -> None:
    """A server still starting, whose port another sandbox's server took first, is not taken for that one (it was
    made a replica of a server with its own server id): only the server with its data directory counts as up."""
    primary = sandbox.primary()
    assert Sandbox._is_ours(primary)
    starting = dataclasses.replace(primary, name="replica9", datadir=str(Path(primary.datadir).parent / "other"))
    assert not Sandbox._is_ours(starting)


def test_replica_refuses_writes_from_ordinary_users(sandbox: Sandbox) -> None:
    with sandbox.replicas()[0].connect(user=APP_USER, password=APP_PASSWORD) as conn, conn.cursor() as cur:
        with pytest.raises(pymysql.err.MySQLError) as info:
            cur.execute("CREATE TABLE app.not_here (id INT)")
        assert info.value.args[0] == 1290  # ER_OPTION_PREVENTS_STATEMENT: --read-only


def test_users_replicated_to_every_server(sandbox: Sandbox) -> None:
    for server in sandbox.status():
        with server.connect(user=APP_USER, password=APP_PASSWORD, database="app") as conn, conn.cursor() as cur:
            cur.execute("SELECT CURRENT_USER()")
            assert cur.fetchone() == (f"{APP_USER}@%",)
        with server.connect(user=MONITOR_USER, password=MONITOR_PASSWORD) as conn, conn.cursor() as cur:
            cur.execute("SELECT @@read_only")
            assert cur.fetchone() == (0 if server.role == "primary" else 1,)


def test_up_again_in_the_same_shape_returns_the_running_servers(sandbox: Sandbox) -> None:
    before = [(s.name, s.port, s.pid) for s in sandbox.status()]
    again = Sandbox(TEST_SANDBOX_DIR).up(replicas=1)
    assert [(s.name, s.port, s.pid) for s in again] == before  # the same processes: nothing was restarted


def test_kill_and_start_keeps_data_and_replication(sandbox: Sandbox) -> None:
    replica = sandbox.replicas()[0]
    sandbox.kill(replica.name)
    assert not pid_alive(replica.pid)
    assert not sandbox.replicas()[0].running
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS test.while_down (id INT PRIMARY KEY)")
        cur.execute("REPLACE INTO test.while_down VALUES (7)")
    restarted = sandbox.start(replica.name)
    assert restarted.running and restarted.port == replica.port and restarted.pid != replica.pid
    assert sandbox.replicas()[0].pid == restarted.pid  # recorded in the state file
    sandbox.wait_replicated()  # the replica resumed replicating by itself
    with restarted.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT id FROM test.while_down")
        assert cur.fetchall() == ((7,),)


def test_status_command_json(sandbox: Sandbox) -> None:
    out = io.StringIO()
    assert sandboxes(["mysql", "status", "--json", "--dir", TEST_SANDBOX_DIR], out) == 0
    rows = json.loads(out.getvalue())
    assert [(r["name"], r["role"], r["running"]) for r in rows] == [
        ("primary", "primary", True),
        ("replica1", "replica", True),
    ]
    assert [(r["port"], r["pid"], r["datadir"], r["socket"]) for r in rows] == [
        (s.port, s.pid, s.datadir, s.socket) for s in sandbox.status()
    ]


@pytest.mark.live  # servers of its own
def test_command_semi_sync_up_kill_and_down(tmp_path: Path) -> None:
    base = tmp_path / "box"
    out = io.StringIO()
    assert sandboxes(["mysql", "up", "--replicas", "1", "--semi-sync", "--json", "--dir", str(base)], out) == 0
    rows = json.loads(out.getvalue())
    assert [r["role"] for r in rows] == ["primary", "replica"]
    box = Sandbox(base)
    primary = box.primary()
    wait_until(
        lambda: global_status(primary, "Rpl_semi_sync_master_clients") == "1", "semi-sync replica", 10, interval=0.05
    )
    acked = int(global_status(primary, "Rpl_semi_sync_master_yes_tx"))
    with primary.connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE test.semi (id INT PRIMARY KEY)")
    assert global_status(primary, "Rpl_semi_sync_master_status") == "ON"
    assert int(global_status(primary, "Rpl_semi_sync_master_yes_tx")) == acked + 1

    box.kill("replica1")  # a dead server in the state file must not upset down
    pids = [r["pid"] for r in rows]
    assert sandboxes(["mysql", "down", "--dir", str(base)], io.StringIO()) == 0
    assert not any(pid_alive(pid) for pid in pids)
    assert not base.exists()
    assert box.status() == []


@pytest.mark.live  # servers of its own
def test_up_restarts_what_stopped_and_keeps_data_and_ports(tmp_path: Path) -> None:
    """make run's restart: a member that died is started again without rebuilding the healthy one, and a sandbox
    stopped whole comes back on its ports with its data."""
    base = tmp_path / "keep"
    box = Sandbox(base)
    try:
        box.up(replicas=1)
        primary = box.primary()
        with primary.connect() as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE test.kept (id INT PRIMARY KEY)")
            cur.execute("INSERT INTO test.kept VALUES (7)")
        box.wait_replicated()
        ports = {s.name: s.port for s in box.status()}
        box.kill("replica1")
        box.up(replicas=1)
        assert box.primary().pid == primary.pid  # the healthy primary was left running
        assert {s.name: s.port for s in box.status()} == ports
        assert sandboxes(["mysql", "stop", "--dir", str(base)], io.StringIO()) == 0
        assert not any(s.running for s in box.status()) and base.exists()
        assert sandboxes(["mysql", "up", "--dir", str(base)], io.StringIO()) == 0
        assert {s.name: s.port for s in box.status()} == ports
        for server in box.status():
            with server.connect() as conn, conn.cursor() as cur:
                cur.execute("SELECT id FROM test.kept")
                assert cur.fetchall() == ((7,),), server.name
        assert sandboxes(["mysql", "stop", "replica1", "--dir", str(base)], io.StringIO()) == 0
        assert [s.running for s in box.status()] == [True, False]
        assert sandboxes(["mysql", "start", "replica1", "--dir", str(base)], io.StringIO()) == 0
        assert [s.running for s in box.status()] == [True, True]
    finally:
        box.down()


def test_a_server_stopped_from_another_shell_is_reaped_not_left_a_zombie(tmp_path: Path) -> None:
    """``make run`` is the servers' parent: one stopped by ``sandbox stop NAME`` from another shell stayed a zombie
    under it (issue 42 item 10) until its supervising loop reaps it (``Sandbox.reap``)."""
    base = tmp_path / "reap"
    box = Sandbox(base)
    try:
        box.up(replicas=0)
        pid = box.primary().pid
        assert pid is not None
        stop = [sys.executable, "-m", "devstack.sandboxes", "mysql", "stop", "primary", "--dir", str(base)]
        subprocess.run(stop, cwd=REPO, check=True, capture_output=True)
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        assert state == "Z"  # this process is its parent: a zombie until it is reaped
        box.reap()
        assert not Path(f"/proc/{pid}").exists()
    finally:
        box.down()
