"""The MariaDB sandbox: servers up, replication working, kill/start, and the management command."""

from __future__ import annotations

import io
import json

from django.core.management import call_command

from fleet.sandbox import Sandbox, pid_alive
from tests.conftest import TEST_SANDBOX_DIR


def test_shape_and_replication(sandbox: Sandbox) -> None:
    servers = sandbox.status()
    assert [s.role for s in servers] == ["primary", "replica"]
    assert all(s.running and s.pid for s in servers)
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS test.sandbox_check (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute("REPLACE INTO test.sandbox_check VALUES (1, 'one'), (2, 'two')")
        cur.execute("SELECT @@read_only")
        assert cur.fetchone() == (0,)
    sandbox.wait_replicated()
    replica = sandbox.replicas()[0]
    with replica.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT v FROM test.sandbox_check ORDER BY id")
        assert cur.fetchall() == (("one",), ("two",))
        cur.execute("SELECT @@read_only")
        assert cur.fetchone() == (1,)


def test_kill_and_start_keeps_data(sandbox: Sandbox) -> None:
    replica = sandbox.replicas()[0]
    sandbox.kill(replica.name)
    assert not sandbox.replicas()[0].running
    restarted = sandbox.start(replica.name)
    assert restarted.running and restarted.port == replica.port
    with restarted.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM test.sandbox_check")
        assert cur.fetchone()[0] == 2
        cur.execute("START SLAVE")
    sandbox.wait_replicated()


def test_status_command_json(sandbox: Sandbox) -> None:
    out = io.StringIO()
    call_command("sandbox", "status", "--json", "--dir", TEST_SANDBOX_DIR, stdout=out)
    rows = json.loads(out.getvalue())
    assert [r["role"] for r in rows] == ["primary", "replica"]
    assert {"role", "port", "pid", "datadir"} <= set(rows[0])
    assert rows[0]["port"] == sandbox.primary().port


def test_down_stops_only_its_servers(tmp_path) -> None:
    box = Sandbox(tmp_path / "box")
    servers = box.up(replicas=0)
    pid = servers[0].pid
    box.down()
    assert box.status() == []
    assert not pid_alive(pid)
