"""Mirroring through a real proxy onto a second MariaDB of the test's own (not a replica of the primary).

ProxySQL mode must count every statement it does not deliver; ordered mode must leave the mirror equal to the
primary (row counts and CHECKSUM TABLE of the field note's four tables) after inserts from many clients, after a
CRUD mix with rollbacks, savepoints, autocommit=0 and prepared statements, after spilling to disk under a tiny
memory bound, after the mirror was down, and across a proxy restart. Waits poll the proxy's counters; nothing
asserts on timings.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import MySQLdb
import pymysql
import pytest
from django.core.management import CommandError, call_command
from pymysql.constants import CLIENT

from devstack.bench.mirror_workload import (
    SCHEMA,
    create_schema,
    crud_mix,
    insert_load,
    prepared_mix,
    run_threads,
    server_locked,
    table_checks,
)
from devstack.proxy import ProxyProcess
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox, pid_alive
from devstack.stack import REPO, wait_until
from fleet.core.mirrorcheck import Endpoint
from proxyapp import native
from tests.support.harness import StartProxy

pytestmark = pytest.mark.sandbox

PRIMARY_HG = 10
MIRROR_HG = 700
MIRROR_ROOT = REPO / "var" / "test-sandbox"


@pytest.fixture(scope="module")
def mirror_box() -> Iterator[Sandbox]:
    """The mirror: a standalone MariaDB sandbox of this module's own, on free ports."""
    for path in MIRROR_ROOT.glob("mirror-*"):
        pid = path.name.removeprefix("mirror-")
        if pid.isdigit() and not pid_alive(int(pid)):
            Sandbox(path).down()
    box = Sandbox(MIRROR_ROOT / f"mirror-{os.getpid()}")
    box.up(replicas=0)
    yield box
    box.down()


@pytest.fixture
def servers(sandbox: Sandbox, mirror_box: Sandbox) -> tuple[Endpoint, Endpoint]:
    """(primary, mirror) as root, each with the four tables freshly created and empty."""
    if not mirror_box.primary().running:
        mirror_box.start("primary")
    primary = Endpoint("127.0.0.1", sandbox.primary().port)
    mirror = Endpoint("127.0.0.1", mirror_box.primary().port)
    create_schema(primary, mirror)
    return primary, mirror


def mirror_config(
    primary: Endpoint, mirror: Endpoint, spill_dir: Path, match_digest: str | None = None, **variables: Any
) -> dict[str, Any]:
    """The note's setup: every statement of the app user (``match_digest``: only those) goes to the primary and is
    mirrored to hostgroup 700."""
    settings = {
        "mysql-mirror_spill_dir": str(spill_dir),
        "mysql-shun_recovery_time_sec": 1,
        "mysql-connect_timeout_server_max": 2000,
        **variables,
    }
    return {
        "mysql_servers": [
            {"hostgroup_id": PRIMARY_HG, "hostname": primary.host, "port": primary.port, "max_connections": 200},
            {"hostgroup_id": MIRROR_HG, "hostname": mirror.host, "port": mirror.port, "max_connections": 200},
        ],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": PRIMARY_HG}],
        "mysql_query_rules": [
            {
                "rule_id": 202,
                "active": 1,
                "username": APP_USER,
                "match_digest": match_digest,
                "destination_hostgroup": PRIMARY_HG,
                "mirror_hostgroup": MIRROR_HG,
                "apply": 1,
            }
        ],
        "global_variables": [{"variable_name": k, "variable_value": str(v)} for k, v in settings.items()],
    }


def connector(proxy: ProxyProcess) -> Callable[[], Any]:
    """Connections to the proxy as the app user, in the test schema, autocommit on."""
    return lambda: proxy.connect(database=SCHEMA, autocommit=True)


def wait_for(proxy: ProxyProcess, done: Callable[[dict[str, Any]], bool], what: str, timeout: float = 240) -> dict:
    """Poll the proxy's /stats with ``wait_until`` until ``done(stats)``; the stats then."""
    seen: list[dict] = []

    def check() -> bool:
        seen[:] = [proxy.stats()]
        return done(seen[0])

    wait_until(check, what, timeout)
    return seen[0]


def drained(stats: dict[str, Any]) -> bool:
    """Every client gone, and nothing of the mirror waiting, running or open."""
    m = stats["mirror"]
    return (
        stats["global"]["Client_Connections_connected"] == 0
        and m["queue_length"] == m["concurrency"] == 0 == (m["lanes"])
    )


def assert_equal(primary: Endpoint, mirror: Endpoint) -> list[Any]:
    """The four tables on both servers: equal row counts and checksums, and rows in each."""
    checks = table_checks(primary, mirror)
    assert [c.table for c in checks] == ["mirtabAUTOINC", "mirtabMID", "mirtabMIDPart", "mirtabMIDUUID"]
    for check in checks:
        assert check.equal, f"{check.name}: {check.verdict} ({check})"
        assert check.primary_rows
    return checks


def total_rows(server: Endpoint) -> int:
    """Exact rows in the four tables of ``server``."""
    with server.connect() as conn, conn.cursor() as cur:
        total = 0
        for table in ("mirtabAUTOINC", "mirtabMID", "mirtabMIDPart", "mirtabMIDUUID"):
            cur.execute(f"SELECT COUNT(*) FROM {SCHEMA}.{table}")
            total += int(cur.fetchone()[0])
        return total


# ---------------------------------------------------------------------------------------------- ProxySQL mode


def test_proxysql_mode_counts_every_statement_it_drops(
    servers: tuple[Endpoint, Endpoint], start_proxy: StartProxy, tmp_path: Path
) -> None:
    primary, mirror = servers
    limits = {"mysql-mirror_max_concurrency": 1, "mysql-mirror_max_queue_length": 0}
    config = mirror_config(primary, mirror, tmp_path / "spill", "^INSERT", **limits)
    proxy = start_proxy(config)
    insert_load(connector(proxy), threads=8, inserts=40)
    stats = wait_for(proxy, drained, "the ProxySQL-mode mirror settling")
    m, g = stats["mirror"], stats["global"]

    on_primary, on_mirror = total_rows(primary), total_rows(mirror)
    assert on_primary == 320
    dropped, failed = sum(m["dropped"].values()), sum(m["failed"].values())
    assert m["mirrored"] == 320
    assert dropped > 0 and set(m["dropped"]) == {"queue_full"}
    assert on_mirror == m["completed"] == 320 - dropped - failed
    assert (g["Mirror_queries_mirrored"], g["Mirror_queries_dropped"]) == (320, dropped)
    assert (g["Mirror_queries_completed"], g["Mirror_queries_failed"]) == (on_mirror, failed)
    metrics = proxy.admin("GET", "/metrics")
    assert f'proxyfleet_mirror_dropped_by_reason_total{{reason="queue_full"}} {dropped}' in metrics
    assert f"proxyfleet_mirror_queries_dropped_total {dropped}" in metrics


def test_proxysql_mode_does_not_mirror_prepared_statements_and_says_so(
    servers: tuple[Endpoint, Endpoint], start_proxy: StartProxy, tmp_path: Path
) -> None:
    primary, mirror = servers
    proxy = start_proxy(mirror_config(primary, mirror, tmp_path / "spill"))
    prepared_mix(Endpoint("127.0.0.1", proxy.port, APP_USER, APP_PASSWORD), thread=1, rounds=5)
    m = wait_for(proxy, drained, "the mirror settling")["mirror"]
    assert m["dropped"]["prepared_statement"] == 15  # 5 rounds of 3 executes (ProxySQL mode ignores transactions)
    assert total_rows(mirror) == 0


def test_mirror_flag_out_routes_rewrites_and_blocks_the_mirror_by_rules(
    servers: tuple[Endpoint, Endpoint], start_proxy: StartProxy, tmp_path: Path
) -> None:
    primary, mirror = servers
    config = mirror_config(primary, mirror, tmp_path / "spill")
    config["mysql_query_rules"] = [
        {"rule_id": 10, "active": 1, "username": APP_USER, "destination_hostgroup": PRIMARY_HG, "mirror_flagOUT": 5,
         "apply": 1},
        {"rule_id": 20, "active": 1, "flagIN": 5, "match_digest": "mirtabMIDUUID", "error_msg": "not mirrored",
         "apply": 1},
        {"rule_id": 30, "active": 1, "flagIN": 5, "match_pattern": "mirtabMIDPart ", "replace_pattern": "mirtabMID ",
         "destination_hostgroup": MIRROR_HG, "apply": 1},
        {"rule_id": 40, "active": 1, "flagIN": 5, "destination_hostgroup": MIRROR_HG, "apply": 1},
    ]  # fmt: skip
    proxy = start_proxy(config)
    insert_load(connector(proxy), threads=2, inserts=8)
    m = wait_for(proxy, drained, "the mirror settling")["mirror"]
    rows = {c.table: (c.primary_rows, c.mirror_rows) for c in table_checks(primary, mirror)}
    assert rows == {"mirtabAUTOINC": (4, 4), "mirtabMID": (4, 8), "mirtabMIDPart": (4, 0), "mirtabMIDUUID": (4, 0)}
    assert m["dropped"] == {"blocked_by_rule": 4}
    assert {r["rule_id"]: r["hits"] for r in proxy.stats()["query_rules"]}[20] == 4


# ---------------------------------------------------------------------------------------------- ordered mode


def test_ordered_lossless_mode_reproduces_the_notes_inserts_exactly(
    servers: tuple[Endpoint, Endpoint], start_proxy: StartProxy, tmp_path: Path
) -> None:
    primary, mirror = servers
    config = mirror_config(
        primary,
        mirror,
        tmp_path / "spill",
        **{"mysql-mirror_max_concurrency": 16, "mysql-mirror_ordered_hostgroups": str(MIRROR_HG)},
    )
    proxy = start_proxy(config)
    insert_load(connector(proxy), threads=12, inserts=60)
    stats = wait_for(proxy, drained, "the ordered mirror draining")
    m = stats["mirror"]
    checks = assert_equal(primary, mirror)
    assert sum(c.primary_rows or 0 for c in checks) == 720
    assert (m["mirrored"], m["completed"], m["failed"], m["dropped"]) == (720, 720, {}, {})
    assert m["ordered_hostgroups"] == {str(MIRROR_HG): "lossless"}
    assert ("proxyapp.mirror.mirror" in stats["native"]) == native.is_fresh()  # compiled whenever the build is fresh


def test_ordered_mode_keeps_transactions_rollbacks_savepoints_and_prepared_statements(
    servers: tuple[Endpoint, Endpoint], start_proxy: StartProxy, tmp_path: Path
) -> None:
    primary, mirror = servers
    config = mirror_config(primary, mirror, tmp_path / "spill", **{"mysql-mirror_ordered_hostgroups": MIRROR_HG})
    proxy = start_proxy(config)
    through_proxy = Endpoint("127.0.0.1", proxy.port, APP_USER, APP_PASSWORD)

    def client(thread: int) -> None:
        if thread < 6:
            crud_mix(connector(proxy), thread, rounds=24)
        else:
            prepared_mix(through_proxy, thread, rounds=15)

    run_threads(8, client)
    m = wait_for(proxy, drained, "the ordered mirror draining")["mirror"]
    assert_equal(primary, mirror)
    assert (m["failed"], m["dropped"]) == ({}, {})
    assert m["mirrored"] == m["completed"] > 0


LATIN1_SCHEMA = "caf\u00e9"  # sent by a latin1 client as b"caf\xe9": not UTF-8


def latin1_root(server: Endpoint) -> pymysql.Connection:
    """A root connection to ``server`` speaking latin1."""
    return pymysql.connect(host=server.host, port=server.port, user="root", charset="latin1", autocommit=True)


def test_the_mirror_replays_a_sessions_state_as_the_session_does(
    servers: tuple[Endpoint, Endpoint], start_proxy: StartProxy, tmp_path: Path
) -> None:
    """One routine brings a connection to a session's state for the session and for the mirror: a schema whose name
    is not UTF-8 (a latin1 client's) and the multi-statement option arrive on the mirror's connection as on the
    session's. One connection per server, so that every step reuses a connection another client changed: one with
    multi-statements off (a client's COM_SET_OPTION), one on another schema."""
    primary, mirror = servers
    for server in servers:
        with latin1_root(server) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{LATIN1_SCHEMA}`")
            cur.execute(f"CREATE DATABASE `{LATIN1_SCHEMA}`")
            cur.execute(f"CREATE TABLE `{LATIN1_SCHEMA}`.t (id INT PRIMARY KEY)")
    config = mirror_config(primary, mirror, tmp_path / "spill", **{"mysql-mirror_ordered_hostgroups": MIRROR_HG})
    for server in config["mysql_servers"]:
        server["max_connections"] = 1
    on_mirror = {"rule_id": 100, "active": 1, "match_pattern": "on-the-mirror", "destination_hostgroup": MIRROR_HG}
    config["mysql_query_rules"].insert(0, {**on_mirror, "apply": 1})
    proxy = start_proxy(config)

    single = MySQLdb.connect(host="127.0.0.1", port=proxy.port, user=APP_USER, password=APP_PASSWORD)
    single.set_server_option(1)  # MYSQL_OPTION_MULTI_STATEMENTS_OFF
    with single.cursor() as cur:
        cur.execute("SELECT 'on-the-mirror'")  # leaves the mirror's one connection with multi-statements off
    single.close()
    latin1 = pymysql.connect(
        host="127.0.0.1",
        port=proxy.port,
        user=APP_USER,
        password=APP_PASSWORD,
        charset="latin1",
        autocommit=True,
        client_flag=CLIENT.MULTI_STATEMENTS,
    )
    latin1.select_db(LATIN1_SCHEMA)  # COM_INIT_DB b"caf\xe9"
    with latin1.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (1); INSERT INTO t VALUES (2)")
        while cur.nextset():
            pass
    with proxy.connect(database=SCHEMA, autocommit=True) as other, other.cursor() as cur:
        cur.execute("SELECT 1")  # the primary's one connection now on another schema
    with latin1.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (3)")  # the session replays its schema
    latin1.close()

    m = wait_for(proxy, drained, "the ordered mirror draining")["mirror"]
    assert (m["failed"], m["dropped"]) == ({}, {})
    for server in servers:
        with latin1_root(server) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT id FROM `{LATIN1_SCHEMA}`.t ORDER BY id")
            assert [row[0] for row in cur.fetchall()] == [1, 2, 3], server
            cur.execute(f"DROP DATABASE `{LATIN1_SCHEMA}`")


def test_ordered_lossless_mode_spills_to_disk_under_a_tiny_bound_and_drains(
    servers: tuple[Endpoint, Endpoint], start_proxy: StartProxy, tmp_path: Path
) -> None:
    primary, mirror = servers
    config = mirror_config(
        primary,
        mirror,
        tmp_path / "spill",
        **{"mysql-mirror_ordered_hostgroups": f"{MIRROR_HG}:lossless", "mysql-mirror_ordered_max_memory": 4096},
    )
    proxy = start_proxy(config)
    with server_locked(mirror):  # the mirror takes nothing meanwhile: everything queues
        insert_load(connector(proxy), threads=6, inserts=40)
        stats = wait_for(proxy, lambda s: s["mirror"]["mirrored"] == 240, "handing 240 statements to the mirror")
        m, g = stats["mirror"], stats["global"]
        assert m["completed"] == 0 and m["queue_length"] == 240
        assert m["queue_disk"] > 200 and g["Mirror_queries_spilled"] >= m["queue_disk"]
        assert g["Mirror_queue_disk_length"] == m["queue_disk"]
        assert m["oldest_age_s"] > 0 and g["Mirror_oldest_entry_age_ms"] > 0
        assert Path(m["spill_path"]).parent == tmp_path / "spill"
    m = wait_for(proxy, drained, "the spilled queue draining")["mirror"]
    assert_equal(primary, mirror)
    assert (m["completed"], m["dropped"], m["failed"]) == (240, {}, {})


def test_ordered_lossy_mode_drops_at_the_bound_and_counts(
    servers: tuple[Endpoint, Endpoint], start_proxy: StartProxy, tmp_path: Path
) -> None:
    primary, mirror = servers
    config = mirror_config(
        primary,
        mirror,
        tmp_path / "spill",
        **{"mysql-mirror_ordered_hostgroups": f"{MIRROR_HG}:lossy", "mysql-mirror_ordered_max_memory": 4096},
    )
    proxy = start_proxy(config)
    with server_locked(mirror):
        insert_load(connector(proxy), threads=4, inserts=30)
        m = wait_for(proxy, lambda s: s["mirror"]["mirrored"] == 120, "handing 120 statements to the mirror")["mirror"]
        assert m["dropped"]["memory_full"] > 0 and m["queue_disk"] == 0
    m = wait_for(proxy, drained, "the lossy queue draining")["mirror"]
    dropped = m["dropped"]["memory_full"]
    assert total_rows(mirror) == m["completed"] == 120 - dropped
    assert not (tmp_path / "spill").exists()  # lossy never writes to disk


def test_a_mirror_that_was_down_is_caught_up_when_it_returns(
    servers: tuple[Endpoint, Endpoint], mirror_box: Sandbox, start_proxy: StartProxy, tmp_path: Path
) -> None:
    primary, mirror = servers
    config = mirror_config(
        primary,
        mirror,
        tmp_path / "spill",
        **{"mysql-mirror_ordered_hostgroups": MIRROR_HG, "mysql-mirror_ordered_max_memory": 4096},
    )
    proxy = start_proxy(config)
    mirror_box.kill("primary")
    try:
        insert_load(connector(proxy), threads=6, inserts=40)
        m = wait_for(proxy, lambda s: s["mirror"]["lanes_waiting"] > 0, "the lanes waiting for the mirror")["mirror"]
        assert m["completed"] == 0 and m["queue_length"] == 240 and m["last_error"]
    finally:
        mirror_box.start("primary")
    m = wait_for(proxy, drained, "the mirror catching up")["mirror"]
    assert_equal(primary, mirror)
    assert (m["completed"], m["dropped"], m["failed"]) == (240, {}, {})


def test_a_proxy_restart_resumes_the_spilled_queue(
    servers: tuple[Endpoint, Endpoint], mirror_box: Sandbox, start_proxy: StartProxy, tmp_path: Path
) -> None:
    primary, mirror = servers
    spill = tmp_path / "spill"
    ordered = {"mysql-mirror_ordered_hostgroups": MIRROR_HG, "mysql-mirror_ordered_max_memory": 4096}
    config = mirror_config(primary, mirror, spill, **ordered)
    proxy = start_proxy(config)
    mirror_box.kill("primary")
    try:
        insert_load(connector(proxy), threads=6, inserts=40)
        wait_for(proxy, lambda s: s["mirror"]["mirrored"] == 240, "handing 240 statements to the mirror")
        proxy.signal(signal.SIGTERM)  # a graceful stop writes what waits in memory to disk too
        assert proxy.proc is not None and proxy.proc.wait(30) == 0
        with sqlite3.connect(spill / "worker-0.sqlite3") as db:
            assert db.execute("SELECT SUM(ops), COUNT(DISTINCT lane) FROM units").fetchone() == (240, 6)
    finally:
        mirror_box.start("primary")
    proxy.stop()
    proxy.start()
    m = wait_for(proxy, drained, "the resumed queue draining")["mirror"]
    assert_equal(primary, mirror)
    assert (m["mirrored"], m["completed"], m["dropped"], m["failed"]) == (240, 240, {}, {})
    with sqlite3.connect(spill / "worker-0.sqlite3") as db:
        assert db.execute("SELECT COUNT(*) FROM units").fetchone() == (0,)


# ---------------------------------------------------------------------------------------------- mirror-check


def test_mirror_check_compares_table_by_table(
    servers: tuple[Endpoint, Endpoint], capsys: pytest.CaptureFixture[str]
) -> None:
    primary, mirror = servers
    for server in (primary, mirror):
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute(f"INSERT INTO {SCHEMA}.mirtabAUTOINC (thread, step, val) VALUES (1, 1, 'a'), (1, 2, 'b')")
    arguments = ["--primary", str(primary), "--mirror", str(mirror), "--schema", SCHEMA]
    call_command("mirror-check", *arguments)
    out = capsys.readouterr().out
    assert re.search(r"mirrortest\.mirtabAUTOINC\s+2\s+2\s+\d+\s+\d+\s+equal", out)
    assert "all 4 tables are equal" in out

    with mirror.connect() as conn, conn.cursor() as cur:
        cur.execute(f"UPDATE {SCHEMA}.mirtabAUTOINC SET val = 'x' WHERE step = 2")
        cur.execute(f"DROP TABLE {SCHEMA}.mirtabMIDUUID")
    with pytest.raises(CommandError) as refused:
        call_command("mirror-check", *arguments)
    assert refused.value.returncode == 1
    out = capsys.readouterr().out
    assert re.search(r"mirtabAUTOINC\s+2\s+2\s+\d+\s+\d+\s+CHECKSUMS DIFFER", out)
    assert re.search(r"mirtabMIDUUID\s+0\s+-\s+\d+\s+-\s+MISSING ON THE MIRROR", out)
    assert "2 of 4 tables differ" in out

    with pytest.raises(CommandError) as unreachable:
        call_command("mirror-check", "--primary", str(primary), "--mirror", "127.0.0.1:1")
    assert unreachable.value.returncode == 2
    with pytest.raises(CommandError, match="not HOST:PORT"):
        call_command("mirror-check", "--primary", "db:port", "--mirror", str(mirror))
