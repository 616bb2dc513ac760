"""Each sharded table's rows per shard as a cluster's nodes last reported them (their ``sharding_tables`` sections:
InnoDB's estimates, ``proxyapp.sharding.tablerows``), for the Shards page. The nodes of a cluster share their shard
servers, so for each table and shard the newest answer counts; the nodes' answers are never added up."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from fleet.core.models import Cluster, ProxyNode
from fleet.core.stats import read_section
from proxyapp.report.reader import ShardTableRow, read_sharding_tables


@dataclass
class TableRows:
    """A sharded table's estimated rows on each shard reported (None: the node could not tell) and when the
    oldest of those answers was asked (None: none was)."""

    by_shard: dict[int, int | None] = field(default_factory=dict)
    checked_at: datetime | None = None

    @property
    def total(self) -> int:
        """The rows of the shards whose estimate is known, added up."""
        return sum(rows for rows in self.by_shard.values() if rows is not None)

    @property
    def missing(self) -> bool:
        """Whether some shard's estimate is not known (``total`` leaves it out)."""
        return any(rows is None for rows in self.by_shard.values())


def table_rows(cluster: Cluster | None, problems: list[str]) -> dict[str, TableRows]:
    """Each sharded table's rows (by ``schema.table``) from the cluster's nodes' last reports; a node whose section
    does not read is left out, named in ``problems``."""
    reports = ProxyNode.objects.filter(cluster=cluster).order_by("name").values_list("name", "last_report")
    newest: dict[tuple[str, str, int], ShardTableRow] = {}
    for name, report in reports:
        for row in read_section(read_sharding_tables, report, [], problems, name):
            key = (row.schemaname, row.tablename, row.shard)
            if key not in newest or _later(row, newest[key]):
                newest[key] = row
    tables: dict[str, TableRows] = {}
    for (schema, table, shard), row in sorted(newest.items()):
        rows = tables.setdefault(f"{schema}.{table}", TableRows())
        rows.by_shard[shard] = row.rows_estimate
        if row.checked_at is not None and (rows.checked_at is None or row.checked_at < rows.checked_at):
            rows.checked_at = row.checked_at
    return tables


def _later(row: ShardTableRow, than: ShardTableRow) -> bool:
    """Whether ``row`` was asked after ``than`` (an answer beats no answer)."""
    if row.checked_at is None:
        return False
    return than.checked_at is None or row.checked_at > than.checked_at
