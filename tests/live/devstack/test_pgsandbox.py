"""The PostgreSQL sandbox: a primary and a streaming replica up, a row written on the primary replayed on the replica,
the roles' logins (SCRAM, MD5, the monitor's checks), kill/start, down stopping every process, the management
command."""

from __future__ import annotations

import io
import json
import os
import pwd
import shutil
import stat
import uuid
from pathlib import Path

import psycopg
import pytest

from devstack.pgsandbox import (
    APP_PASSWORD,
    APP_USER,
    MD5_PASSWORD,
    MD5_USER,
    MONITOR_PASSWORD,
    MONITOR_USER,
    SYSTEM_USER,
    PgSandbox,
)
from devstack.sandbox import pid_alive
from devstack.sandboxes import main as sandboxes
from devstack.stack import REPO
from tests.conftest import TEST_PG_SANDBOX_DIR, module_pg_sandbox_dir

#: Whether this session is encrypted, asked of the server.
ENCRYPTED = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"


def test_shape_streaming_and_recovery(pg_sandbox: PgSandbox) -> None:
    servers = pg_sandbox.status()
    assert [(s.name, s.role) for s in servers] == [("primary", "primary"), ("replica1", "replica")]
    assert all(s.running and pid_alive(s.pid) and s.host == "127.0.0.1" for s in servers)
    assert len({s.port for s in servers}) == 2
    base = REPO / TEST_PG_SANDBOX_DIR
    assert all(Path(s.datadir).is_relative_to(base) for s in servers)
    for server in servers:
        with server.connect() as conn:
            row = conn.execute(
                "SELECT pg_is_in_recovery(), current_setting('listen_addresses'), "
                "current_setting('unix_socket_directories')"
            ).fetchone()
            assert row == (server.role == "replica", "127.0.0.1", server.socket_dir)
        assert Path(server.socket_dir, f".s.PGSQL.{server.port}").is_socket()
    with pg_sandbox.primary().connect() as conn:
        rows = conn.execute("SELECT application_name, state FROM pg_stat_replication").fetchall()
    assert rows == [("replica1", "streaming")]


def test_a_row_written_on_the_primary_reaches_the_replica(pg_sandbox: PgSandbox) -> None:
    mark = uuid.uuid4().hex
    with pg_sandbox.primary().connect(user=APP_USER, password=APP_PASSWORD, dbname="test") as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS sandbox_check (id serial PRIMARY KEY, mark text NOT NULL)")
        conn.execute("INSERT INTO sandbox_check (mark) VALUES (%s)", (mark,))
    pg_sandbox.wait_replicated()
    replica = pg_sandbox.replicas()[0]
    with replica.connect(user=APP_USER, password=APP_PASSWORD, dbname="test") as conn:
        assert conn.execute("SELECT count(*) FROM sandbox_check WHERE mark = %s", (mark,)).fetchone() == (1,)
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            conn.execute("INSERT INTO sandbox_check (mark) VALUES ('not on a replica')")


def test_app_logs_in_with_scram_and_md5user_with_md5(pg_sandbox: PgSandbox) -> None:
    for server in pg_sandbox.status():
        # require_auth: libpq refuses the login unless the server asked for exactly that method.
        with server.connect(user=APP_USER, password=APP_PASSWORD, dbname="app", require_auth="scram-sha-256") as c:
            assert c.execute("SELECT current_user, current_database()").fetchone() == (APP_USER, "app")
        with server.connect(user=MD5_USER, password=MD5_PASSWORD, dbname="app", require_auth="md5") as conn:
            assert conn.execute("SELECT current_user").fetchone() == (MD5_USER,)
    primary = pg_sandbox.primary()
    with pytest.raises(psycopg.OperationalError, match="server requested SASL authentication"):
        primary.connect(user=APP_USER, password=APP_PASSWORD, dbname="app", require_auth="md5")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        primary.connect(user=APP_USER, password="wrong", dbname="app")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        primary.connect(user=MD5_USER, password="wrong", dbname="app")


def test_monitor_reads_recovery_and_replication(pg_sandbox: PgSandbox) -> None:
    for server in pg_sandbox.status():
        with server.connect(user=MONITOR_USER, password=MONITOR_PASSWORD, require_auth="scram-sha-256") as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (server.role == "replica",)
    with pg_sandbox.primary().connect(user=MONITOR_USER, password=MONITOR_PASSWORD) as conn:
        # Without pg_monitor, another role's walsender shows NULL for these.
        row = conn.execute("SELECT client_addr::text, sent_lsn IS NOT NULL FROM pg_stat_replication").fetchone()
    assert row == ("127.0.0.1/32", True)


def test_up_again_in_the_same_shape_returns_the_running_servers(pg_sandbox: PgSandbox) -> None:
    before = [(s.name, s.port, s.pid) for s in pg_sandbox.status()]
    again = PgSandbox(TEST_PG_SANDBOX_DIR).up(replicas=1)
    assert [(s.name, s.port, s.pid) for s in again] == before  # the same processes: nothing was restarted


def test_status_command_json(pg_sandbox: PgSandbox) -> None:
    out = io.StringIO()
    assert sandboxes(["pgsql", "status", "--json", "--dir", TEST_PG_SANDBOX_DIR], out) == 0
    rows = json.loads(out.getvalue())
    assert [(r["name"], r["role"], r["running"]) for r in rows] == [
        ("primary", "primary", True),
        ("replica1", "replica", True),
    ]
    assert [(r["port"], r["pid"], r["datadir"]) for r in rows] == [
        (s.port, s.pid, s.datadir) for s in pg_sandbox.status()
    ]


def test_a_tls_sandbox_requires_tls_and_streams_over_it(pg_tls_sandbox: PgSandbox) -> None:
    server_user = pwd.getpwnam(SYSTEM_USER).pw_uid if os.geteuid() == 0 else os.geteuid()
    for server in pg_tls_sandbox.status():
        key = Path(server.datadir, "server.key").stat()
        assert (stat.S_IMODE(key.st_mode), key.st_uid) == (0o600, server_user)
        verified = {"sslmode": "verify-full", "sslrootcert": str(pg_tls_sandbox.ca_file)}
        with server.connect(user=APP_USER, password=APP_PASSWORD, dbname="app", **verified) as conn:
            assert conn.execute(ENCRYPTED).fetchone() == (True,)
        with pytest.raises(psycopg.OperationalError, match=r"pg_hba\.conf rejects connection .* no encryption"):
            server.connect(sslmode="disable")
    with pg_tls_sandbox.primary().connect() as conn:
        streams = "SELECT application_name, ssl FROM pg_stat_replication JOIN pg_stat_ssl USING (pid)"
        assert conn.execute(streams).fetchall() == [("replica1", True)]
    pg_tls_sandbox.wait_replicated()


def test_command_up_kill_start_and_down_stops_every_process() -> None:
    where = module_pg_sandbox_dir("command")
    box = PgSandbox(where)
    try:
        out = io.StringIO()
        command = ("up", "--set", "max_connections=150", "--tls", "on", "--json", "--dir", where)
        assert sandboxes(["pgsql", *command], out) == 0
        assert [r["role"] for r in json.loads(out.getvalue())] == ["primary", "replica"]
        primary, replica = box.status()
        for server in (primary, replica):
            with server.connect() as conn:
                assert conn.execute("SHOW max_connections").fetchone() == ("150",)
                assert conn.execute(ENCRYPTED).fetchone() == (True,)  # libpq's sslmode=prefer takes the TLS offered
            with server.connect(sslmode="disable") as conn:  # offered, not required
                assert conn.execute(ENCRYPTED).fetchone() == (False,)

        box.kill(replica.name)  # the postmaster and its children are gone when kill returns
        assert not any(pid_alive(pid) for pid in (replica.pid, *replica.children()))
        assert [s.running for s in box.status()] == [True, False]
        with primary.connect(dbname="test") as conn:
            conn.execute("CREATE TABLE while_down (id int PRIMARY KEY)")
            conn.execute("INSERT INTO while_down VALUES (7)")
        restarted = box.start(replica.name)
        assert restarted.port == replica.port and restarted.pid != replica.pid
        box.wait_replicated()  # it streams again by itself and catches up
        with restarted.connect(dbname="test") as conn:
            assert conn.execute("SELECT id FROM while_down").fetchall() == [(7,)]

        processes = [pid for s in box.status() for pid in (s.pid, *s.children())]
        assert len(processes) > 4  # postmasters with their checkpointers, walsender, walreceiver...
        assert sandboxes(["pgsql", "down", "--dir", where], io.StringIO()) == 0
        assert not [pid for pid in processes if pid_alive(pid)]
        assert not (REPO / where).exists()
        assert box.status() == []
    finally:
        box.down()


def test_a_stopped_sandbox_behind_a_closed_directory_restarts_with_its_data_and_ports() -> None:
    """``make run`` sets var/ to 0700 at each start, which the servers' user cannot pass through: the restart of a
    stopped sandbox opens the way again instead of building it afresh (new ports, the data lost)."""
    closed = REPO / f"var/test-pgsandbox-closed-{os.getpid()}"
    box = PgSandbox(closed / "box")
    try:
        (primary,) = box.up(replicas=0)
        with primary.connect(dbname="test") as conn:
            conn.execute("CREATE TABLE kept (id int PRIMARY KEY)")
            conn.execute("INSERT INTO kept VALUES (42)")
        box.stop()  # as make run stops it
        closed.chmod(0o700)
        (again,) = box.up(replicas=0)
        assert again.port == primary.port
        with again.connect(dbname="test") as conn:
            assert conn.execute("SELECT id FROM kept").fetchall() == [(42,)]
    finally:
        box.down()
        shutil.rmtree(closed, ignore_errors=True)
