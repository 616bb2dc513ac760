"""The supervisor's merge of its workers' reports (proxyapp.report.merge): the pooling proxy's ``pgsql`` section."""

from __future__ import annotations

from typing import Any

from proxyapp.report.merge import merge_snapshots
from proxyapp.report.reader import PgsqlPoolRow, read_pgsql
from tests.support.node_messages import pgsql_pool_row, pgsql_section


def worker(pgsql: dict[str, Any] | None) -> dict[str, Any]:
    """A worker's snapshot with nothing in it but its ``pgsql`` section (none when None)."""
    snap: dict[str, Any] = {"global": {"Questions": 1}, "connection_pool": [], "query_digest": [], "query_rules": []}
    if pgsql is not None:
        snap["pgsql"] = pgsql
    return snap


def test_the_workers_pgsql_sections_merge_into_the_node_s() -> None:
    """Counts summed; pool rows summed per (hostgroup, srv_host, srv_port), the first worker's status kept; a
    server only one worker has kept as it is; the listener listening since every worker listens."""
    first = pgsql_section(
        pool=[
            pgsql_pool_row("10.0.0.1", 5432, 100, ConnUsed=2, ConnFree=1, ConnOK=3, ConnERR=1, MaxConnUsed=2),
            pgsql_pool_row("10.0.0.2", 5432, 100, "SHUNNED", "connect failed 3 times", ConnERR=3),
        ],
        clients_connected=3,
        clients_total=10,
        logins_failed=1,
        transactions=20,
        queries=50,
        timed_out=2,
        query_cache_hits=5,
        waiting_clients=1,
    )
    second = pgsql_section(
        pool=[
            pgsql_pool_row("10.0.0.2", 5432, 100, "ONLINE", ConnOK=1, ConnERR=2),
            pgsql_pool_row("10.0.0.1", 5432, 100, ConnUsed=1, ConnFree=4, ConnOK=5, MaxConnUsed=3),
            pgsql_pool_row("10.0.0.1", 5433, 101, ConnFree=1, ConnOK=1),
        ],
        clients_connected=4,
        clients_total=12,
        transactions=7,
        queries=9,
        timed_out=1,
        query_cache_hits=4,
        waiting_clients=2,
    )
    merged = merge_snapshots([worker(first), worker(second)])
    pooling = read_pgsql(merged)  # the merged section reads as a worker's does
    assert pooling is not None
    assert (pooling.listener_address, pooling.listener_state) == ("127.0.0.1:6133", "listening")
    counts = (pooling.clients_connected, pooling.clients_total, pooling.logins_failed, pooling.transactions)
    assert (*counts, pooling.queries, pooling.waiting_clients) == (7, 22, 1, 27, 59, 3)
    assert (merged["pgsql"]["timed_out"], merged["pgsql"]["query_cache_hits"]) == (3, 9)
    assert pooling.connection_pool == (
        PgsqlPoolRow(100, "10.0.0.1", 5432, "ONLINE", "", 3, 5, 8, 1, 5),
        PgsqlPoolRow(100, "10.0.0.2", 5432, "SHUNNED", "connect failed 3 times", 0, 0, 1, 5, 0),
        PgsqlPoolRow(101, "10.0.0.1", 5433, "ONLINE", "", 0, 1, 1, 0, 0),
    )
    assert first["connection_pool"][0]["ConnUsed"] == 2  # the workers' own rows are left as they were


def test_the_merged_listener_listens_only_if_every_worker_does() -> None:
    """One worker that could not bind the port makes the node's listener its error; all off is off; a node whose
    workers report no pgsql section (a proxy from before pooling) has none."""
    taken = "error: cannot listen on 127.0.0.1:6133: [Errno 98] address already in use"
    sections = [pgsql_section(), pgsql_section(taken), pgsql_section("off")]
    assert merge_snapshots([worker(s) for s in sections])["pgsql"]["listener"] == {
        "address": "127.0.0.1:6133",
        "state": taken,
    }
    off = merge_snapshots([worker(pgsql_section("off", address="")), worker(pgsql_section("off", address=""))])
    assert off["pgsql"]["listener"]["state"] == "off"
    assert "pgsql" not in merge_snapshots([worker(None), worker(None)])
