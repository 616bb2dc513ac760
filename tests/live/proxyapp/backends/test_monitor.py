"""The monitor in real proxies against a sandbox of its own: a killed server is shunned with the reason and comes
back, replication lag shuns a replica until it catches up, a slow server is shunned over its max_latency_ms, a
server that accepts TCP and never answers is caught by timeouts, and several worker processes route by one
monitor."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pymysql
import pytest

from devstack.ports import free_port
from devstack.proxy import ProxyProcess, rw_split_config
from devstack.sandbox import Sandbox, SandboxServer
from tests.support.harness import StartProxy
from tests.support.monitor_support import (
    global_variables,
    monitor_rows,
    own_sandbox,
    transitions,
    wait_for,
)
from tests.support.relay import SlowRelay

pytestmark = pytest.mark.sandbox


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    """A primary and one replica for this module alone (its tests kill servers and stop replication)."""
    with own_sandbox("monitor", replicas=1) as sandbox:
        yield sandbox


def status_of(proxy: ProxyProcess, port: int) -> list[str]:
    """The monitor's status of the server on ``port``, per hostgroup it is in."""
    return [row["status"] for row in monitor_rows(proxy, port)]


def server_id(server: SandboxServer) -> int:
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT @@server_id")
        return int(cur.fetchone()[0])


def query(conn: pymysql.Connection, sql: str) -> tuple[tuple[object, ...], ...]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()


def replica_sql(replica: SandboxServer, *statements: str) -> None:
    """Run statements as root on the replica (replication control)."""
    with replica.connect() as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)


def test_a_killed_backend_is_shunned_with_the_reason_and_comes_back(box: Sandbox, start_proxy: StartProxy) -> None:
    primary, replica = box.primary(), box.replicas()[0]
    proxy = start_proxy(rw_split_config(primary.port, [replica.port], global_variables=global_variables()))
    wait_for(lambda: [r["read_only"] for r in monitor_rows(proxy, replica.port)] == [True], "first checks", proxy)
    client = proxy.connect(autocommit=True)
    assert query(client, "SELECT @@server_id") == ((server_id(replica),),)
    seq_before = proxy.admin("GET", "/runtime/monitor")["seq"]

    box.kill(replica.name)
    try:
        wait_for(lambda: status_of(proxy, replica.port) == ["SHUNNED"], "the dead replica shunned", proxy)
        # The findings' number moved on: what a node's agent watches to report a shun at once.
        assert proxy.admin("GET", "/runtime/monitor")["seq"] > seq_before
        [row] = monitor_rows(proxy, replica.port)
        assert (row["hostgroup"], row["connect_ok"], row["ping_ok"]) == (20, False, False)
        assert row["last_error"].endswith("Connection refused")
        shun = transitions(proxy, replica.port)[-1]
        assert (shun["hostgroup"], shun["from"], shun["to"]) == (20, "ONLINE", "SHUNNED")
        assert re.fullmatch(
            rf"(ping|read_only check|connect check) failed 2 times: cannot connect to 127\.0\.0\.1:{replica.port}: "
            "Connection refused",
            shun["reason"],
        ), shun
        assert f"127.0.0.1:{replica.port} in hostgroup 20: ONLINE -> SHUNNED: " in proxy.log()
        pool = [r for r in proxy.admin("GET", "/stats/connection_pool") if r["srv_port"] == replica.port]
        assert [r["status"] for r in pool] == ["SHUNNED"]
        failed_pings = [r for r in proxy.admin("GET", "/monitor/ping") if r["port"] == replica.port and r["ping_error"]]
        assert failed_pings and all(r["ping_success_time_us"] == 0 for r in failed_pings)
        metrics = proxy.admin("GET", "/metrics")
        assert (
            f'proxyfleet_monitor_server_status{{hostgroup="20",endpoint="127.0.0.1:{replica.port}",status="SHUNNED"}} 1'
            in metrics
        )
        assert f'proxyfleet_monitor_check_success{{check="ping",endpoint="127.0.0.1:{replica.port}"}} 0' in metrics
        assert f'proxyfleet_monitor_check_latency_us{{check="ping",endpoint="127.0.0.1:{primary.port}"}} ' in metrics
        with pytest.raises(pymysql.err.OperationalError) as refused:  # reads have nowhere to go: said at once
            query(client, "SELECT @@server_id")
        assert refused.value.args[0] == 9001 and "hostgroup 20 has no ONLINE server" in refused.value.args[1]
    finally:
        box.start(replica.name)
    wait_for(lambda: status_of(proxy, replica.port) == ["ONLINE"], "the replica back ONLINE", proxy)
    back = transitions(proxy, replica.port)[-1]
    assert (back["from"], back["to"]) == ("SHUNNED", "ONLINE")
    assert re.fullmatch(r"(ping|read_only check|connect check) succeeded again after \d+ s SHUNNED", back["reason"])
    assert query(client, "SELECT @@server_id") == ((server_id(replica),),)  # the same client session


def test_replication_lag_over_max_replication_lag_shuns_a_replica_until_it_catches_up(
    box: Sandbox, start_proxy: StartProxy
) -> None:
    primary, replica = box.primary(), box.replicas()[0]
    document = rw_split_config(primary.port, [replica.port], global_variables=global_variables())
    document["mysql_servers"][1]["max_replication_lag"] = 1
    proxy = start_proxy(document)
    wait_for(lambda: [r["lag_s"] for r in monitor_rows(proxy, replica.port)] == [0], "the first lag check", proxy)

    replica_sql(replica, "STOP SLAVE SQL_THREAD")
    try:
        wait_for(lambda: status_of(proxy, replica.port) == ["SHUNNED"], "the stopped replica shunned", proxy)
        assert transitions(proxy, replica.port)[-1]["reason"] == (
            "replication lag unknown (Seconds_Behind_Master is NULL: replication stopped or broken), counted as 60 s "
            "(mysql-monitor_slave_lag_when_null) > max_replication_lag 1"
        )
    finally:
        replica_sql(replica, "START SLAVE SQL_THREAD")
    wait_for(lambda: status_of(proxy, replica.port) == ["ONLINE"], "the replica back after START SLAVE", proxy)
    back = transitions(proxy, replica.port)[-1]
    assert re.fullmatch(r"replication lag \d+ s <= max_replication_lag 1", back["reason"]), back

    replica_sql(replica, "STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY = 3600", "START SLAVE")
    try:
        with primary.connect() as conn, conn.cursor() as cur:  # an event the replica holds back for an hour
            cur.execute("CREATE TABLE IF NOT EXISTS test.lagging (id INT PRIMARY KEY)")
        # (STOP SLAVE shows a NULL lag for a moment, which may shun it first; the lag then shuns it again)
        over = r"replication lag (\d+) s > max_replication_lag 1"
        wait_for(
            lambda: re.fullmatch(over, transitions(proxy, replica.port)[-1]["reason"]) is not None,
            "the delayed replica shunned for its lag",
            proxy,
        )
        shun = transitions(proxy, replica.port)[-1]
        assert shun["to"] == "SHUNNED" and int(re.fullmatch(over, shun["reason"]).group(1)) >= 2, shun
        lags = [r["repl_lag"] for r in proxy.admin("GET", "/monitor/replication_lag") if r["port"] == replica.port]
        assert lags[-1] is not None and lags[-1] >= 2, lags
    finally:
        replica_sql(replica, "STOP SLAVE", "CHANGE MASTER TO MASTER_DELAY = 0", "START SLAVE")
    wait_for(lambda: status_of(proxy, replica.port) == ["ONLINE"], "the replica caught up", proxy)
    box.wait_replicated()


@contextmanager
def black_hole() -> Iterator[int]:
    """A TCP server on loopback that accepts connections and never sends a byte; yields its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed: the test is over
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        thread.join(5)
        for conn in held:
            conn.close()


def test_a_server_slower_than_its_max_latency_ms_is_shunned_until_it_answers_in_time(
    box: Sandbox, start_proxy: StartProxy
) -> None:
    # The relay holds a ping's reply while 600 ms pass on the proxy's clock (no real time needs to): that ping took
    # 600 ms and more against a 300 ms limit. The thresholds are decided exactly in
    # tests/unit/proxyapp/backends/test_monitor_decisions.py; here the wiring is tested: the latency the monitor
    # measures, its verdict, the pools'. Connect checks only at the start and pings that never time out, so that
    # the replies the relay holds are pings, and only the ones the test holds.
    relay = SlowRelay(box.replicas()[0].port)
    try:
        variables = global_variables(
            {"mysql-monitor_ping_timeout": 600_000, "mysql-monitor_connect_interval": 7 * 86_400_000}
        )
        document = rw_split_config(box.primary().port, [], global_variables=variables)
        slow = {"hostgroup_id": 30, "hostname": "127.0.0.1", "port": relay.listener.getsockname()[1]}
        document["mysql_servers"].append({**slow, "max_latency_ms": 300})
        proxy = start_proxy(document)
        wait_for(lambda: len(proxy.admin("GET", "/monitor/ping")) >= 2, "the first pings", proxy)
        assert status_of(proxy, slow["port"]) == ["ONLINE"]

        relay.hold()
        wait_for(lambda: relay.held == 1, "a ping waiting for its reply", proxy)
        proxy.advance_clock(0.6)
        relay.let_through(1)  # that ping's reply; the next ping's waits, so the server stays as that one left it
        wait_for(lambda: status_of(proxy, slow["port"]) == ["SHUNNED"], "the slow server shunned", proxy)
        shun = transitions(proxy, slow["port"])[-1]
        over = re.fullmatch(r"ping took (\d+\.\d) ms > max_latency_ms 300", shun["reason"])
        assert over is not None and float(over.group(1)) >= 600, shun
        with proxy.connect(autocommit=True) as client, pytest.raises(pymysql.err.OperationalError) as failed:
            query(client, "/* hostgroup=30 */ SELECT 1")
        assert failed.value.args[0] == 9001 and "hostgroup 30" in failed.value.args[1]

        relay.release()
        wait_for(lambda: status_of(proxy, slow["port"]) == ["ONLINE"], "the server back once fast", proxy)
        back = transitions(proxy, slow["port"])[-1]
        assert re.fullmatch(r"ping took \d+\.\d ms <= max_latency_ms 300", back["reason"]), back
        with proxy.connect(autocommit=True) as client:
            assert query(client, "/* hostgroup=30 */ SELECT @@server_id") == ((server_id(box.replicas()[0]),),)
    finally:
        relay.close()


def test_a_backend_that_accepts_and_never_answers_is_caught_by_timeouts(box: Sandbox, start_proxy: StartProxy) -> None:
    primary = box.primary()
    with black_hole() as port:
        document = rw_split_config(primary.port, [])
        document["mysql_servers"].append({"hostgroup_id": 30, "hostname": "127.0.0.1", "port": port})
        document["global_variables"] = global_variables(
            {"mysql-connect_timeout_server": 300, "mysql-connect_timeout_server_max": 1000}
        )
        proxy = start_proxy(document)
        wait_for(lambda: status_of(proxy, port) == ["SHUNNED"], "the silent server shunned", proxy)
        shun = transitions(proxy, port)[-1]
        assert re.fullmatch(r"(ping|connect check) failed 2 times: .*timed out after 500 ms", shun["reason"]), shun
        connects = [r for r in proxy.admin("GET", "/monitor/connect") if r["port"] == port]
        assert connects and all("timed out after 500 ms" in r["connect_error"] for r in connects)
        with proxy.connect(autocommit=True) as client:
            with pytest.raises(pymysql.err.OperationalError) as failed:  # an error naming the hostgroup, no hang
                query(client, "/* hostgroup=30 */ SELECT 1")
            assert failed.value.args[0] == 9001 and "hostgroup 30" in failed.value.args[1]
            assert query(client, "SELECT @@server_id FOR UPDATE") == ((server_id(primary),),)  # the rest serves


def test_several_workers_route_by_one_monitor(box: Sandbox, start_proxy: StartProxy) -> None:
    primary, replica = box.primary(), box.replicas()[0]
    dead = free_port()
    document = rw_split_config(primary.port, [replica.port])
    document["mysql_servers"].append({"hostgroup_id": 30, "hostname": "127.0.0.1", "port": dead})
    document["global_variables"] = global_variables(
        {"mysql-threads": 2, "mysql-monitor_connect_interval": 120_000, "mysql-connect_timeout_server_max": 1000}
    )
    proxy = start_proxy(document)
    assert proxy.stats()["workers"] == 2
    wait_for(lambda: status_of(proxy, dead) == ["SHUNNED"], "the dead server shunned", proxy)
    wait_for(
        lambda: [r["status"] for r in proxy.admin("GET", "/runtime/servers") if r["port"] == dead] == ["SHUNNED"],
        "the workers routing by the monitor's verdict",
        proxy,
    )
    shuns = [t for t in transitions(proxy, dead) if t["to"] == "SHUNNED"]
    assert len(shuns) == 1, shuns  # every worker applied it; the node reports it once
    for _ in range(8):  # whichever worker serves the session, it knows the server is shunned
        with proxy.connect(autocommit=True) as client:
            with pytest.raises(pymysql.err.OperationalError) as failed:
                query(client, "/* hostgroup=30 */ SELECT 1")
            assert f"hostgroup 30 has no ONLINE server (127.0.0.1:{dead} SHUNNED)" in failed.value.args[1]

    def pings_of_primary() -> int:
        return len([r for r in proxy.admin("GET", "/monitor/ping") if r["port"] == primary.port])

    wait_for(lambda: pings_of_primary() >= 5, "five rounds of pings", proxy)
    with primary.connect() as conn, conn.cursor() as cur:  # one monitor connection per server, not one per worker
        cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'monitor'")
        assert cur.fetchone()[0] == 1
