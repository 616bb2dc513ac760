"""The sharding digests of a cluster: each node's last ``sharding_digest`` section (``proxyapp.report.sharding``: per
statement on sharded tables, how often it reached one shard, several or was refused, and what its merges cost),
merged across the nodes by (schemaname, digest), worst scatter ratio first, so a DBA sees which statements miss
the shard key. The Shards page, the digests page and the API read them here."""

from __future__ import annotations

from dataclasses import asdict

from fleet.core.models import Cluster, ProxyNode
from fleet.core.stats import read_section
from proxyapp.report.reader import ShardingRow, read_sharding
from proxyapp.report.sharding import merge_rows

#: How many sharding digests the Shards page and the API list.
TOP = 50


def sharding_digests(cluster: Cluster | None, problems: list[str]) -> list[ShardingRow]:
    """The cluster's sharding digests merged across its nodes, the worst scatter ratio first (then the most
    scatters, then the most refusals); a node whose section does not read is left out, named in ``problems``."""
    reports = ProxyNode.objects.filter(cluster=cluster).order_by("name").values_list("name", "last_report")
    every = [asdict(row) for name, report in reports for row in read_section(read_sharding, report, [], problems, name)]
    rows = [ShardingRow(**row) for row in merge_rows(every)]
    return sorted(rows, key=lambda row: (-row.scatter_ratio, -row.scatter, -row.refused, row.digest_text))


def by_digest(rows: list[ShardingRow]) -> dict[tuple[str, str], ShardingRow]:
    """``rows`` by (schemaname, digest), the key a query digest row shares with its sharding digest."""
    return {(row.schemaname, row.digest): row for row in rows}
