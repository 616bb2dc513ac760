"""Playing a node's part for the UI tests: the ``/stats`` snapshots a proxy reports, and the acks and reports a node
sends, run through the control plane's own task functions (``fleet.core.tasks``, called directly, no broker)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fleet.core import tasks
from fleet.core.models import ConfigVersion, ProxyNode
from proxyapp.report.merge import PGSQL_COUNTS
from proxyapp.report.sharding import with_ratio


def pool_row(host: str, port: int, hostgroup: int, status: str = "ONLINE", **figures: float) -> dict[str, Any]:
    """A ``connection_pool`` row of a snapshot; figures not given are 0."""
    row: dict[str, Any] = {"hostgroup": hostgroup, "srv_host": host, "srv_port": port, "status": status}
    for name in ("ConnUsed", "ConnFree", "ConnOK", "ConnERR", "MaxConnUsed", "Queries", "Latency_us"):
        row[name] = figures.get(name, 0)
    return row


def pgsql_pool_row(
    host: str, port: int, hostgroup: int, status: str = "ONLINE", reason: str = "", **figures: int
) -> dict[str, Any]:
    """A ``pgsql.connection_pool`` row of a snapshot; figures not given are 0."""
    row: dict[str, Any] = {"hostgroup": hostgroup, "srv_host": host, "srv_port": port, "status": status}
    row["status_reason"] = reason
    for name in ("ConnUsed", "ConnFree", "ConnOK", "ConnERR", "MaxConnUsed"):
        row[name] = figures.get(name, 0)
    return row


def pgsql_section(
    state: str = "listening", pool: list[dict[str, Any]] | None = None, address: str = "127.0.0.1:6133", **counts: int
) -> dict[str, Any]:
    """A snapshot's ``pgsql`` section (the pooling proxy's): its listener, ``pool`` and counts (those not given 0)."""
    section: dict[str, Any] = {"listener": {"address": address, "state": state}}
    section |= {name: counts.get(name, 0) for name in PGSQL_COUNTS}
    section["connection_pool"] = pool or []
    return section


def digest_row(digest: str, text: str, count: int, sum_time: int) -> dict[str, Any]:
    """A ``query_digest`` row of a snapshot (hostgroup 10, schema and user ``app``)."""
    return {
        "hostgroup": 10,
        "schemaname": "app",
        "username": "app",
        "client_address": "",
        "digest": digest,
        "digest_text": text,
        "count_star": count,
        "first_seen": 1,
        "last_seen": 2,
        "sum_time": sum_time,
        "min_time": 1,
        "max_time": sum_time,
        "sum_rows_affected": 0,
        "sum_rows_sent": count,
    }


def pgsql_digest_row(digest: str, text: str, count: int, sum_time: int) -> dict[str, Any]:
    """A ``pgsql_query_digest`` row of a snapshot: ``digest_row``'s with the database ``app`` for its schema."""
    return {
        ("database" if name == "schemaname" else name): value
        for name, value in digest_row(digest, text, count, sum_time).items()
    }


def sharding_row(
    digest: str, text: str, single: int, scatter: int, refused: int = 0, merge_rows: int = 0, merge_us: int = 0
) -> dict[str, Any]:
    """A ``sharding_digest`` row of a snapshot (schema ``app``), each scatter reaching 2 shards."""
    row = {
        "schemaname": "app",
        "digest": digest,
        "digest_text": text,
        "single_shard": single,
        "scatter": scatter,
        "refused": refused,
        "shards_reached": single + 2 * scatter,
        "merge_rows": merge_rows,
        "merge_us": merge_us,
    }
    return with_ratio(row)


def table_row(table: str, shard: int, rows: int | None, checked_at: float | None = 1.5) -> dict[str, Any]:
    """A ``sharding_tables`` row of a snapshot: ``shop.table`` on ``shard`` (hostgroup 100 + shard)."""
    return {
        "schemaname": "shop",
        "tablename": table,
        "shard": shard,
        "hostgroup": 100 + shard,
        "rows_estimate": rows,
        "checked_at": checked_at,
    }


def snapshot(
    pools: list[dict[str, Any]],
    digests: list[dict[str, Any]] | None = None,
    questions: int = 0,
    clients: int = 0,
    sharding: list[dict[str, Any]] | None = None,
    tables: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A proxy's ``/stats`` snapshot with these pools and digests (and sharding digests and table rows when
    given)."""
    stats = {
        "global": {"Questions": questions, "Client_Connections_connected": clients},
        "connection_pool": pools,
        "query_digest": digests or [],
    }
    if sharding is not None:
        stats["sharding_digest"] = sharding
    if tables is not None:
        stats["sharding_tables"] = tables
    return stats


def send_report(node: ProxyNode, at: datetime, stats: dict[str, Any], version: ConfigVersion | None = None) -> str:
    """``node`` reports ``stats`` at ``at``, running ``version`` (None: nothing applied yet)."""
    number, checksum = (version.number, version.checksum) if version is not None else (None, "")
    return tasks.report(node.name, at.isoformat(), number, checksum, stats)


def send_ack(node: ProxyNode, version: ConfigVersion, at: datetime, error: str = "") -> str:
    """``node`` acknowledges ``version``: applied, or refused with ``error``."""
    return tasks.ack(node.name, version.number, version.checksum, not error, error, at.isoformat())
