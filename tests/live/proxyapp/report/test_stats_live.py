"""Statistics after known traffic through a real proxy: query digests, connection pool, global counters, /metrics."""

from __future__ import annotations

import re
import socket
import time
from typing import Any

import pymysql
import pytest

from devstack.proxy import READER_HG, WRITER_HG, ProxyProcess, rw_split_config
from devstack.sandbox import Sandbox
from devstack.stack import wait_until
from proxyapp.report.reader import (
    read_config,
    read_counters,
    read_digests,
    read_mirror,
    read_monitor,
    read_pools,
    read_rule_hits,
    read_transitions,
)
from proxyapp.sql.digest import compute_digest
from tests.support.harness import StartProxy

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@pytest.fixture(scope="module", autouse=True)
def backend_objects(sandbox: Sandbox) -> None:
    """A small table with three rows, on both servers."""
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS app.st_t (id INT PRIMARY KEY, v INT)")
        cur.execute("DELETE FROM app.st_t")
        cur.execute("INSERT INTO app.st_t VALUES (1, 0), (2, 0), (3, 0)")
    sandbox.wait_replicated()


@pytest.fixture
def proxy(sandbox: Sandbox, start_proxy: StartProxy) -> ProxyProcess:
    """The read/write split: writes and the user's default on the primary (10), SELECTs on the replica (20)."""
    config = rw_split_config(sandbox.primary().port, [r.port for r in sandbox.replicas()])
    config["mysql_servers"][0]["max_connections"] = 20
    return start_proxy(config)


def metrics(proxy: ProxyProcess) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """The /metrics samples: (name, labels) -> value."""
    samples = {}
    for line in proxy.admin("GET", "/metrics").splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        labels = frozenset(_LABEL.findall(match["labels"] or ""))
        samples[(match["name"], labels)] = float(match["value"])
    return samples


def metric(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    """One sample: the series of ``name`` whose labels include ``labels``."""
    found = [v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls]
    assert len(found) == 1, f"{name} {labels}: {found}"
    return found[0]


def pool_rows(proxy: ProxyProcess) -> dict[int, dict[str, Any]]:
    """hostgroup -> its (only) connection pool row."""
    return {row["hostgroup"]: row for row in proxy.admin("GET", "/stats/connection_pool")}


def test_query_digest_rows_after_known_queries(proxy: ProxyProcess) -> None:
    started = int(time.time())
    with proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
        proxy.admin("POST", "/stats/query_digest/reset")
        for i in range(1, 6):
            cur.execute(f"SELECT v FROM st_t WHERE id = {i}")  # ids 4 and 5 do not exist
        for i in range(10, 13):
            cur.execute(f"INSERT INTO st_t (id, v) VALUES ({i}, 0)")
        cur.execute("UPDATE st_t SET v = v + 1 WHERE id <= 2")
        for _ in range(2):
            cur.execute("SELECT SLEEP(0.1)")
        cur.execute("DELETE FROM st_t WHERE id >= 10")
    ended = int(time.time())
    rows = {row["digest_text"]: row for row in proxy.admin("GET", "/stats/query_digest")}
    texts = {
        kind: compute_digest(sql).text
        for kind, sql in {
            "select": "SELECT v FROM st_t WHERE id = 1",
            "insert": "INSERT INTO st_t (id, v) VALUES (10, 0)",
            "update": "UPDATE st_t SET v = v + 1 WHERE id <= 2",
            "sleep": "SELECT SLEEP(0.1)",
            "delete": "DELETE FROM st_t WHERE id >= 10",
        }.items()
    }
    assert texts["select"] == "SELECT v FROM st_t WHERE id = ?"
    assert set(rows) == set(texts.values())
    select = rows[texts["select"]]
    assert select["digest"] == compute_digest("SELECT v FROM st_t WHERE id = 1").hash
    assert (select["hostgroup"], select["username"], select["schemaname"]) == (READER_HG, "app", "app")
    assert select["client_address"] == "127.0.0.1"
    assert (select["count_star"], select["sum_rows_sent"], select["sum_rows_affected"]) == (5, 3, 0)
    insert = rows[texts["insert"]]
    assert (insert["hostgroup"], insert["count_star"], insert["sum_rows_affected"], insert["sum_rows_sent"]) == (
        WRITER_HG,
        3,
        3,
        0,
    )
    update = rows[texts["update"]]
    assert (update["hostgroup"], update["count_star"], update["sum_rows_affected"]) == (WRITER_HG, 1, 2)
    assert rows[texts["delete"]]["sum_rows_affected"] == 3
    sleep = rows[texts["sleep"]]
    assert sleep["count_star"] == 2 and sleep["hostgroup"] == READER_HG and sleep["sum_rows_sent"] == 2
    assert 100_000 <= sleep["min_time"] <= sleep["max_time"] < 2_000_000  # microseconds
    assert sleep["sum_time"] >= sleep["min_time"] + sleep["max_time"] - 1
    for row in rows.values():
        assert started <= row["first_seen"] <= row["last_seen"] <= ended
        assert 0 <= row["min_time"] <= row["max_time"] <= row["sum_time"]
    samples = metrics(proxy)
    assert metric(samples, "proxyfleet_query_digest_count_total", digest=select["digest"]) == 5
    assert metric(samples, "proxyfleet_query_digest_time_us_total", digest=sleep["digest"]) == sleep["sum_time"]


def test_connection_pool_rows(sandbox: Sandbox, proxy: ProxyProcess) -> None:
    primary, replica = sandbox.primary(), sandbox.replicas()[0]
    with proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
        for i in range(10):
            cur.execute("SELECT %s", (i,))
        rows = pool_rows(proxy)
        reader, writer = rows[READER_HG], rows[WRITER_HG]
        assert (reader["srv_host"], reader["srv_port"], reader["status"]) == ("127.0.0.1", replica.port, "ONLINE")
        assert writer["srv_port"] == primary.port
        assert (reader["Queries"], reader["ConnOK"], reader["ConnUsed"], reader["ConnFree"]) == (10, 1, 0, 1)
        assert reader["ConnERR"] == 0 and reader["MaxConnUsed"] == 1
        assert reader["Bytes_data_sent"] > 10 * len("SELECT 0") and reader["Bytes_data_recv"] > 0
        assert 0 < reader["Latency_us"] < 1_000_000  # a moving average of real response times
        assert writer["Queries"] == 1  # PyMySQL's SET NAMES at connect
        others = [proxy.connect(database="app", autocommit=True) for _ in range(2)]
        try:
            for n, session in enumerate([conn, *others], start=1):
                with session.cursor() as c:
                    c.execute("BEGIN")
                    c.execute(f"UPDATE st_t SET v = v WHERE id = {n}")  # each its own row: no lock waits
            writer = pool_rows(proxy)[WRITER_HG]
            assert (writer["ConnUsed"], writer["ConnFree"], writer["ConnOK"], writer["MaxConnUsed"]) == (3, 0, 3, 3)
            for session in [conn, *others]:
                with session.cursor() as c:
                    c.execute("COMMIT")
            writer = pool_rows(proxy)[WRITER_HG]
            # All three pooled (until they sit unused for mysql-ping_interval_server_msec: then 10% of 20 stay).
            assert (writer["ConnUsed"], writer["ConnFree"], writer["ConnOK"]) == (0, 3, 3)
            assert writer["Queries"] == 1 + 2 + 3 * 3  # SET NAMES x3, BEGIN + UPDATE + COMMIT x3
        finally:
            for session in others:
                session.close()
    samples = metrics(proxy)
    endpoint = f"127.0.0.1:{replica.port}"
    assert metric(samples, "proxyfleet_connpool_queries_total", hostgroup="20", endpoint=endpoint) == 10
    assert metric(samples, "proxyfleet_connpool_conns_ok_total", hostgroup="10") == 3
    assert metric(samples, "proxyfleet_connpool_conns", hostgroup="10", status="free") == 3


def test_global_counters(proxy: ProxyProcess) -> None:
    def stat(name: str) -> int:
        """One stats_mysql_global variable now."""
        return proxy.stats()["global"][name]

    created = stat("Client_Connections_created")
    conns = [proxy.connect(database="app", autocommit=True) for _ in range(3)]
    try:
        assert stat("Client_Connections_connected") == 3
        assert stat("Client_Connections_created") == created + 3
        questions = stat("Questions")
        with conns[0].cursor() as cur:
            for i in range(7):
                cur.execute("SELECT %s", (i,))
        assert stat("Questions") == questions + 7
        assert stat("Active_Transactions") == 0
        with conns[1].cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("UPDATE st_t SET v = v WHERE id = 2")
            assert stat("Active_Transactions") == 1
            with conns[2].cursor() as other:
                other.execute("START TRANSACTION")
                other.execute("SELECT v FROM st_t WHERE id = 3 FOR UPDATE")
                assert stat("Active_Transactions") == 2
                samples = metrics(proxy)
                assert metric(samples, "proxyfleet_active_transactions") == 2
                assert metric(samples, "proxyfleet_client_connections_connected") == 3
                assert metric(samples, "proxyfleet_questions_total") == stat("Questions")
                other.execute("ROLLBACK")
            cur.execute("COMMIT")
        assert stat("Active_Transactions") == 0
    finally:
        for conn in conns:
            conn.close()
    wait_until(lambda: stat("Client_Connections_connected") == 0, "the sessions to end", 30)
    assert stat("Client_Connections_aborted") == 0
    # A client that drops the connection in the middle of the handshake is an aborted connection.
    with socket.create_connection(("127.0.0.1", proxy.port)) as raw:
        assert raw.recv(4)  # the greeting starts
    wait_until(lambda: stat("Client_Connections_aborted") == 1, "the aborted connection", 30)
    assert stat("Client_Connections_created") == created + 4 and stat("Client_Connections_connected") == 0
    with pytest.raises(pymysql.err.OperationalError):
        proxy.connect(password="wrong")
    assert stat("Access_Denied_Wrong_Password") == 1
    samples = metrics(proxy)
    assert metric(samples, "proxyfleet_client_connections_created_total") == created + 5
    assert metric(samples, "proxyfleet_client_connections_aborted_total") == stat("Client_Connections_aborted")
    assert metric(samples, "proxyfleet_active_transactions") == 0


def test_a_live_report_reads_section_by_section(proxy: ProxyProcess) -> None:
    """What a real proxy reports is what the reader the control plane uses reads (``proxyapp.report.reader``)."""
    with proxy.connect(database="app", autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT 1")
    stats = proxy.stats()
    assert read_counters(stats)["Questions"] >= 1
    assert {(row.hostgroup, row.status) for row in read_pools(stats)} >= {(READER_HG, "ONLINE")}
    read_mirror(stats), read_monitor(stats), read_transitions(stats), read_rule_hits(stats)
    assert any(row.digest_text == "SELECT ?" for row in read_digests(stats))
    config = read_config(stats)
    assert config is not None and config.checksum and config.loaded_at is not None
