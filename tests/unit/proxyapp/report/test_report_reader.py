"""The stats report's reader (proxyapp.report.reader): a proxy's report reads into typed rows section by section,
and a malformed one is refused naming the bad path."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from proxyapp.report.reader import (
    DigestRow,
    ForwardListenerRow,
    ForwardServerRow,
    MonitorRow,
    PgsqlPooling,
    PgsqlPoolRow,
    PoolRow,
    ReportedConfig,
    ReportError,
    RuleHits,
    ShardingRow,
    ShardTableRow,
    read_config,
    read_counters,
    read_digests,
    read_mirror,
    read_monitor,
    read_pgsql,
    read_pgsql_forward,
    read_pools,
    read_rule_hits,
    read_sharding,
    read_sharding_tables,
    read_transitions,
)
from proxyapp.report.sharding import ShardingStats
from proxyapp.report.stats import DigestStats, GlobalCounters
from tests.support.node_messages import (
    digest_row,
    pgsql_pool_row,
    pgsql_section,
    pool_row,
    sharding_row,
    table_row,
)


def report(**sections: Any) -> dict[str, Any]:
    """A report with a real proxy's counters, one pool row, and ``sections``."""
    return {
        "global": GlobalCounters().snapshot(),
        "connection_pool": [pool_row("10.0.0.1", 3306, 10, Queries=7, Latency_us=420.5)],
        **sections,
    }


MONITOR = {"hostgroup": 10, "srv_host": "10.0.0.1", "srv_port": 3306, "status": "SHUNNED", "connect_ok": False}
TRANSITION = {"at": 1.5, "hostgroup": 10, "srv_host": "h", "srv_port": 1, "from": "ONLINE", "to": "SHUNNED"}
MIRROR = {
    "mirrored": 3,
    "completed": 2,
    "failed": {"2013": 1},
    "dropped": {},
    "queue_length": 0,
    "queue_disk": 0,
    "concurrency": 1,
    "oldest_age_s": 0.25,
}
#: What a proxy's mirror reports beyond ``MIRROR`` (a report may leave it out).
MIRROR_EXTRA = {
    "retried": 4,
    "max_concurrency": 16,
    "queue_proxysql": 0,
    "queue_memory": 0,
    "memory_bytes": 0,
    "memory_limit": 1 << 20,
    "lanes": 2,
    "lanes_waiting": 1,
    "last_error": "hostgroup 700: no ONLINE server",
    "ordered_hostgroups": {"700": "lossless"},
    "spill_path": "/var/spill",
}
DIGEST = digest_row("0xA1", "SELECT ?", 3, 90)
CONFIG = {"checksum": "ab12", "loaded_at": 1.5, "source": "admin"}
LISTENER = {
    "port": 15432,
    "interface": "127.0.0.1",
    "hostgroup_id": 100,
    "state": "listening",
    "connections_active": 1,
    "connections_total": 3,
    "connections_refused": 0,
    "bytes_from_clients": 410,
    "bytes_to_clients": 1210,
}
PG_SERVER = {
    "hostgroup_id": 100,
    "hostname": "127.0.0.1",
    "port": 5432,
    "status": "SHUNNED",
    "status_reason": "connect failed 3 times",
    "connections_active": 1,
    "connections_total": 3,
    "connect_errors": 2,
    "bytes_sent": 410,
    "bytes_recv": 1210,
}
SHARDING = sharding_row("0xC3", "SELECT * FROM t WHERE a = ?", 1, 3, merge_rows=40, merge_us=900)


def test_a_report_reads_into_typed_rows() -> None:
    data = report(mirror=MIRROR, monitor=[MONITOR], server_transitions=[TRANSITION])
    assert read_counters(data)["Questions"] == 0 and "ProxySQL_Uptime" in read_counters(data)
    assert read_pools(data) == [PoolRow(10, "10.0.0.1", 3306, "ONLINE", 0, 0, 0, 0, 7, 420.5)]
    mirror = read_mirror(data)
    assert mirror is not None and (mirror.failed, mirror.oldest_age_s) == ({"2013": 1}, 0.25)
    assert (mirror.retried, mirror.last_error, mirror.ordered_hostgroups) == (0, "", {})  # left out: 0 or empty
    assert read_monitor(data) == [MonitorRow(10, "10.0.0.1", 3306, "SHUNNED", False, None, None, None, "", None)]
    (transition,) = read_transitions(data)
    assert (transition.at, transition.to_status, transition.reason) == (datetime.fromtimestamp(1.5, UTC), "SHUNNED", "")
    bare = report()
    assert (read_mirror(bare), read_monitor(bare), read_transitions(bare)) == (None, None, [])
    assert (read_digests(bare), read_rule_hits(bare), read_config(bare)) == ([], [], None)
    assert read_sharding(bare) == read_sharding_tables(bare) == []  # a node that shards nothing


def test_sharded_tables_rows_read_with_missing_ones_as_none() -> None:
    known, missing = read_sharding_tables(
        report(sharding_tables=[table_row("orders", 0, 42), table_row("orders", 1, None, None)])
    )
    assert known == ShardTableRow("shop", "orders", 0, 100, 42, datetime.fromtimestamp(1.5, UTC))
    assert missing == ShardTableRow("shop", "orders", 1, 101, None, None)


def test_sharding_digests_read_with_their_averages() -> None:
    table = ShardingStats()
    table.record("shop", "0xD4", "SELECT name FROM items WHERE City_ID = ?", 1)
    table.record("shop", "0xD4", "SELECT name FROM items WHERE City_ID = ?", 4, merge_rows=8, merge_us=300)
    table.record("shop", "0xD4", "SELECT name FROM items WHERE City_ID = ?", 0)  # refused
    mine, real = read_sharding(report(sharding_digest=[SHARDING, *table.rows()]))
    assert mine == ShardingRow("app", "0xC3", "SELECT * FROM t WHERE a = ?", 1, 3, 0, 7, 40, 900, 0.75)
    assert (real.single_shard, real.scatter, real.refused, real.scatter_ratio) == (1, 1, 1, 0.5)
    assert (real.ran, real.avg_shards, real.avg_merge_us) == (2, 2.5, 300.0)
    nothing_ran = ShardingRow("app", "0x1", "SELECT ?", 0, 0, 2, 0, 0, 0, 0.0)
    assert (nothing_ran.avg_shards, nothing_ran.avg_merge_us) == (0.0, 0.0)


def test_the_rest_of_a_report_reads_into_typed_rows() -> None:
    digests = DigestStats()
    digests.record(-1, "app", "app", "10.0.0.9", "0xB2", "SELECT @@version", 120, 1, 0)  # a proxy's real row
    data = report(
        mirror={**MIRROR, **MIRROR_EXTRA},
        query_digest=[DIGEST, *digests.rows()],
        query_rules=[{"rule_id": 3, "hits": 7}],
        config=CONFIG,
    )
    mirror = read_mirror(data)
    assert mirror is not None and {name: getattr(mirror, name) for name in MIRROR_EXTRA} == MIRROR_EXTRA
    first, real = read_digests(data)
    assert first == DigestRow(10, "app", "app", "", "0xA1", "SELECT ?", 3, 1, 2, 90, 1, 90, 0, 3)
    assert (real.hostgroup, real.digest_text, real.count_star, real.sum_time) == (-1, "SELECT @@version", 1, 120)
    assert read_rule_hits(data) == [RuleHits(rule_id=3, hits=7)]
    assert read_config(data) == ReportedConfig("ab12", datetime.fromtimestamp(1.5, UTC), "admin")
    assert read_config(report(config={"checksum": "ab"})) == ReportedConfig("ab", None, "")


def test_the_pgsql_forward_section_reads_into_listeners_and_servers() -> None:
    taken = {**LISTENER, "port": 6033, "state": "error: [Errno 98] address already in use"}
    taken.update(connections_active=0, connections_total=0, bytes_from_clients=0, bytes_to_clients=0)
    forward = read_pgsql_forward(report(pgsql_forward={"listeners": [LISTENER, taken], "servers": [PG_SERVER]}))
    assert forward is not None
    assert forward.listeners == (
        ForwardListenerRow(15432, "127.0.0.1", 100, "listening", 1, 3, 0, 410, 1210),
        ForwardListenerRow(6033, "127.0.0.1", 100, "error: [Errno 98] address already in use", 0, 0, 0, 0, 0),
    )
    (server,) = forward.servers
    assert server == ForwardServerRow(100, "127.0.0.1", 5432, "SHUNNED", "connect failed 3 times", 1, 3, 2, 410, 1210)
    assert server.server == "127.0.0.1:5432"
    reasonless = {k: v for k, v in PG_SERVER.items() if k != "status_reason"}
    forward = read_pgsql_forward(report(pgsql_forward={"listeners": [], "servers": [reasonless]}))
    assert forward is not None and (forward.listeners, forward.servers[0].status_reason) == ((), "")
    assert read_pgsql_forward(report()) is None  # a proxy from before PostgreSQL forwarding


def _forward(listener: dict[str, Any] | None = None, server: dict[str, Any] | None = None) -> dict[str, Any]:
    """A report whose ``pgsql_forward`` section has one listener and one server, each changed by the arguments."""
    return report(
        pgsql_forward={"listeners": [{**LISTENER, **(listener or {})}], "servers": [{**PG_SERVER, **(server or {})}]}
    )


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (report(pgsql_forward=[]), "stats.pgsql_forward: expected an object, not"),
        (report(pgsql_forward={"servers": []}), "stats.pgsql_forward.listeners: expected a list of rows, not None"),
        (report(pgsql_forward={"listeners": [], "servers": {}}), "stats.pgsql_forward.servers: expected a list of"),
        (report(pgsql_forward={"listeners": [7], "servers": []}), r"pgsql_forward.listeners\[0\]: expected an object"),
        (_forward({"port": "15432"}), r"pgsql_forward.listeners\[0\].port: expected a whole number"),
        (_forward({"interface": ""}), r"pgsql_forward.listeners\[0\].interface: expected text"),
        (_forward({"state": None}), r"pgsql_forward.listeners\[0\].state: expected text"),
        (_forward({"connections_total": -1}), r"listeners\[0\].connections_total: expected a whole number of 0"),
        (_forward({"bytes_to_clients": 1.5}), r"listeners\[0\].bytes_to_clients: expected a whole number"),
        (_forward(server={"status": "UP"}), r"pgsql_forward.servers\[0\].status: expected one of ONLINE"),
        (_forward(server={"hostname": 5}), r"pgsql_forward.servers\[0\].hostname: expected text"),
        (_forward(server={"status_reason": None}), r"servers\[0\].status_reason: expected text"),
        (_forward(server={"connect_errors": True}), r"servers\[0\].connect_errors: expected a whole number"),
        (_forward(server={"bytes_recv": None}), r"servers\[0\].bytes_recv: expected a whole number"),
    ],
)
def test_a_malformed_pgsql_forward_section_is_refused_naming_the_path(data: Any, says: str) -> None:
    with pytest.raises(ReportError, match=says):
        read_pgsql_forward(data)


def test_the_pgsql_section_reads_into_its_listener_counts_and_pool_rows() -> None:
    shunned = pgsql_pool_row("10.0.0.2", 5432, 100, "SHUNNED", "connect failed 3 times", ConnERR=3, ConnOK=1)
    busy = pgsql_pool_row("10.0.0.1", 5432, 100, ConnUsed=2, ConnFree=3, ConnOK=5, MaxConnUsed=4)
    section = pgsql_section(pool=[busy, shunned], clients_connected=7, clients_total=40, logins_failed=2)
    section |= {"transactions": 90, "queries": 310, "waiting_clients": 1}
    pooling = read_pgsql(report(pgsql=section))
    assert pooling == PgsqlPooling(
        listener_address="127.0.0.1:6133",
        listener_state="listening",
        clients_connected=7,
        clients_total=40,
        logins_failed=2,
        transactions=90,
        queries=310,
        waiting_clients=1,
        connection_pool=(
            PgsqlPoolRow(100, "10.0.0.1", 5432, "ONLINE", "", 2, 3, 5, 0, 4),
            PgsqlPoolRow(100, "10.0.0.2", 5432, "SHUNNED", "connect failed 3 times", 0, 0, 1, 3, 0),
        ),
    )
    assert pooling.connection_pool[1].server == "10.0.0.2:5432"
    reasonless = {k: v for k, v in busy.items() if k != "status_reason"}
    off = read_pgsql(report(pgsql=pgsql_section("off", [reasonless], address="")))
    assert off is not None and (off.listener_state, off.listener_address) == ("off", "")
    assert off.connection_pool[0].status_reason == ""
    taken = read_pgsql(report(pgsql=pgsql_section("error: [Errno 98] address already in use")))
    assert taken is not None and taken.listener_state == "error: [Errno 98] address already in use"
    assert read_pgsql(report()) is None  # a proxy from before PostgreSQL pooling


def _pgsql(listener: dict[str, Any] | None = None, row: dict[str, Any] | None = None, **counts: Any) -> dict[str, Any]:
    """A report whose ``pgsql`` section has one pool row, its listener, the row and counts changed by the arguments."""
    section = pgsql_section(pool=[{**pgsql_pool_row("10.0.0.1", 5432, 100), **(row or {})}])
    section["listener"] |= listener or {}
    return report(pgsql=section | counts)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (report(pgsql=[]), "stats.pgsql: expected an object, not"),
        (report(pgsql={**pgsql_section(), "listener": "on"}), "stats.pgsql.listener: expected an object, not 'on'"),
        (_pgsql({"state": "up"}), "stats.pgsql.listener.state: expected listening, off or 'error: ' and why"),
        (_pgsql({"state": None}), "stats.pgsql.listener.state: expected text"),
        (_pgsql({"address": 6133}), "stats.pgsql.listener.address: expected text"),
        (_pgsql(clients_connected=-1), "stats.pgsql.clients_connected: expected a whole number of 0 or more"),
        (_pgsql(waiting_clients=None), "stats.pgsql.waiting_clients: expected a whole number"),
        (_pgsql(queries=1.5), "stats.pgsql.queries: expected a whole number"),
        (_pgsql(connection_pool={}), "stats.pgsql.connection_pool: expected a list of rows"),
        (_pgsql(connection_pool=[3]), r"stats.pgsql.connection_pool\[0\]: expected an object"),
        (_pgsql(row={"status": "UP"}), r"pgsql.connection_pool\[0\].status: expected one of ONLINE"),
        (_pgsql(row={"srv_host": ""}), r"pgsql.connection_pool\[0\].srv_host: expected text"),
        (_pgsql(row={"srv_port": "5432"}), r"pgsql.connection_pool\[0\].srv_port: expected a whole number"),
        (_pgsql(row={"ConnFree": True}), r"pgsql.connection_pool\[0\].ConnFree: expected a whole number"),
        (_pgsql(row={"MaxConnUsed": -2}), r"pgsql.connection_pool\[0\].MaxConnUsed: expected a whole number"),
        (_pgsql(row={"status_reason": 5}), r"pgsql.connection_pool\[0\].status_reason: expected text"),
    ],
)
def test_a_malformed_pgsql_section_is_refused_naming_the_path(data: Any, says: str) -> None:
    with pytest.raises(ReportError, match=says):
        read_pgsql(data)


@pytest.mark.parametrize(
    ("data", "read", "says"),
    [
        ([], read_pools, "stats: expected an object, not list"),
        (None, read_mirror, "stats: expected an object, not NoneType"),
        ({"global": []}, read_counters, "stats.global: expected an object"),
        ({"global": {"Questions": "7"}}, read_counters, "stats.global.Questions: expected a number, not '7'"),
        ({"global": {"Questions": True}}, read_counters, "stats.global.Questions: expected a number"),
        ({"connection_pool": {}}, read_pools, "stats.connection_pool: expected a list of rows"),
        ({"connection_pool": [1]}, read_pools, r"stats.connection_pool\[0\]: expected an object"),
        (report(connection_pool=[{**pool_row("h", 1, 10), "srv_port": -1}]), read_pools, r"\[0\].srv_port: expected a"),
        (report(connection_pool=[{**pool_row("h", 1, 10), "status": 5}]), read_pools, r"\[0\].status: expected text"),
        (report(mirror=[]), read_mirror, "stats.mirror: expected an object"),
        (report(mirror={**MIRROR, "dropped": 3}), read_mirror, "stats.mirror.dropped: expected an object of counts"),
        (report(mirror={**MIRROR, "failed": {"1062": "x"}}), read_mirror, "stats.mirror.failed.1062: expected a num"),
        (report(mirror={**MIRROR, "queue_length": -1}), read_mirror, "stats.mirror.queue_length: expected a number of"),
        (report(monitor=[{**MONITOR, "srv_port": "3306"}]), read_monitor, r"monitor\[0\].srv_port: expected a whole"),
        (report(monitor=[{**MONITOR, "status": "UP"}]), read_monitor, r"monitor\[0\].status: expected one of ONLINE"),
        (report(monitor=[{**MONITOR, "srv_host": ""}]), read_monitor, r"monitor\[0\].srv_host: expected text"),
        (report(monitor=[{**MONITOR, "lag_s": True}]), read_monitor, r"lag_s: expected int or float or null"),
        (report(monitor=[{**MONITOR, "checked_at": "soon"}]), read_monitor, r"checked_at: expected an ISO 8601 time"),
        (report(server_transitions=[{**TRANSITION, "at": None}]), read_transitions, r"\[0\].at: missing"),
        (report(server_transitions=[{**TRANSITION, "to": 3}]), read_transitions, r"\[0\].to: expected text"),
        (report(server_transitions=[{**TRANSITION, "reason": 3}]), read_transitions, r"\[0\].reason: expected text"),
        (report(connection_pool=[{**pool_row("h", 1, 10), "ConnOK": None}]), read_pools, r"\[0\].ConnOK: expected a"),
        (report(mirror={**MIRROR, "lanes": "2"}), read_mirror, "stats.mirror.lanes: expected a number"),
        (report(mirror={**MIRROR, "last_error": None}), read_mirror, "stats.mirror.last_error: expected text"),
        (report(mirror={**MIRROR, "ordered_hostgroups": {"7": "fast"}}), read_mirror, "ordered_hostgroups: expected"),
        (report(query_digest={}), read_digests, "stats.query_digest: expected a list of rows"),
        (report(query_digest=[{**DIGEST, "hostgroup": "10"}]), read_digests, r"\[0\].hostgroup: expected a whole"),
        (report(query_digest=[{**DIGEST, "count_star": -1}]), read_digests, r"\[0\].count_star: expected a whole"),
        (report(query_digest=[{**DIGEST, "digest_text": None}]), read_digests, r"\[0\].digest_text: expected text"),
        (report(sharding_digest={}), read_sharding, "stats.sharding_digest: expected a list of rows"),
        (report(sharding_digest=[{**SHARDING, "scatter": -2}]), read_sharding, r"\[0\].scatter: expected a whole"),
        (report(sharding_digest=[{**SHARDING, "digest": 7}]), read_sharding, r"\[0\].digest: expected text"),
        (report(sharding_digest=[{**SHARDING, "scatter_ratio": 2}]), read_sharding, "scatter_ratio: expected a num"),
        (report(sharding_digest=[{**SHARDING, "merge_us": 1.5}]), read_sharding, r"\[0\].merge_us: expected a whole"),
        (report(sharding_tables={}), read_sharding_tables, "stats.sharding_tables: expected a list of rows"),
        (report(sharding_tables=[table_row("t", -1, 3)]), read_sharding_tables, r"\[0\].shard: expected a whole"),
        (report(sharding_tables=[table_row("t", 0, -3)]), read_sharding_tables, r"rows_estimate: expected a whole"),
        (
            report(sharding_tables=[{**table_row("t", 0, 3), "rows_estimate": "3"}]),
            read_sharding_tables,
            r"rows_estimate: expected int or",
        ),
        (report(sharding_tables=[table_row("", 0, 3)]), read_sharding_tables, r"\[0\].tablename: expected text"),
        (report(query_rules=[{"rule_id": 1}]), read_rule_hits, r"query_rules\[0\].hits: expected a whole number"),
        (report(query_rules=["1"]), read_rule_hits, r"query_rules\[0\]: expected an object"),
        (report(config=[]), read_config, "stats.config: expected an object"),
        (report(config={**CONFIG, "checksum": 5}), read_config, "stats.config.checksum: expected text"),
        (report(config={**CONFIG, "loaded_at": "then"}), read_config, "stats.config.loaded_at: expected an ISO"),
    ],
)
def test_a_malformed_report_is_refused_naming_the_path(data: Any, read: Any, says: str) -> None:
    with pytest.raises(ReportError, match=says):
        read(data)


def test_texts_a_node_sent_as_lone_surrogates_read_escaped() -> None:
    """A report from a node that sent a query's bytes that are not UTF-8 as ``\\udcff`` in its JSON: every text read
    from it comes out as ``\\xff``, which pages and the API can encode."""
    stats = report(
        query_digest=[{**digest_row("0x1", "SELECT `\udcff`", 2, 10), "schemaname": "db\udcfe"}],
        sharding_digest=[sharding_row("0x2", "SELECT * FROM t WHERE k = \udcff", 1, 0)],
    )
    [row] = read_digests(stats)
    assert (row.schemaname, row.digest_text) == ("db\\xfe", "SELECT `\\xff`")
    assert read_sharding(stats)[0].digest_text == "SELECT * FROM t WHERE k = \\xff"


def test_the_sharding_rows_show_texts_that_are_not_utf8_escaped() -> None:
    sharding = ShardingStats()
    sharding.record("db\udcfe", "0x2", "SELECT * FROM t WHERE k = \udcff", 2)
    [row] = sharding.rows()
    assert (row["schemaname"], row["digest_text"]) == ("db\\xfe", "SELECT * FROM t WHERE k = \\xff")
