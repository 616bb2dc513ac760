"""The query digest page: the top digests of the working cluster's nodes (their last reports, merged), each digest
on sharded tables with its shards reached and scatter ratio (``fleet.core.scatter``); PostgreSQL's digests
(``pgsql_query_digest``, keyed by database) in a table of their own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from fleet.core import audit, nodeadmin, scatter
from fleet.core.models import AuditEntry, Cluster, ProxyNode
from fleet.core.stats import read_section
from fleet.web.access import current_cluster, operator_only, viewer_page
from proxyapp.report.merge import digest_key, merge_digest_rows
from proxyapp.report.reader import DigestRow, PgsqlDigestRow, read_digests, read_pgsql_digests

#: How many digests the page lists.
TOP = 50
#: The orders the page offers: query parameter -> the row value sorted on (largest first; None last).
SORTS = {
    "count": "count_star",
    "sum": "sum_time",
    "avg": "avg_time",
    "max": "max_time",
    "rows": "sum_rows_sent",
    "scatter": "scatter_ratio",
}
DEFAULT_SORT = "sum"


def top_digests(cluster: Cluster | None, sort: str, problems: list[str]) -> list[dict[str, Any]]:
    """The cluster's digests merged across nodes, each with ``avg_time``, ``nodes`` (each node's count) and, on
    sharded tables, ``sharding`` (its ``ShardingRow``) and ``scatter_ratio`` (None elsewhere), the ``TOP`` largest
    by ``sort``; a node whose digests do not read is left out, named in ``problems``."""
    rows = _merged_digests(cluster, read_digests, "schemaname", problems)
    sharded = scatter.by_digest(scatter.sharding_digests(cluster, problems))
    for row in rows:
        row["sharding"] = sharded.get((row["schemaname"], row["digest"]))
        row["scatter_ratio"] = row["sharding"].scatter_ratio if row["sharding"] else None
    return _top(rows, sort)


def top_pgsql_digests(cluster: Cluster | None, sort: str, problems: list[str]) -> list[dict[str, Any]]:
    """The cluster's PostgreSQL digests (``pgsql_query_digest``, keyed by ``database``) merged across nodes, each with
    ``avg_time`` and ``nodes``, the ``TOP`` largest by ``sort`` (none scatters: by scatter ratio, in no order); a node
    whose PostgreSQL digests do not read is left out, named in ``problems``."""
    return _top(_merged_digests(cluster, read_pgsql_digests, "database", problems), sort)


def _merged_digests(
    cluster: Cluster | None,
    read: Callable[[object], Sequence[DigestRow | PgsqlDigestRow]],
    schema_column: str,
    problems: list[str],
) -> list[dict[str, Any]]:
    """The digests ``read`` reads from each node's last report, merged across nodes by their key (``schema_column``
    naming the schema in it), each with ``avg_time`` and ``nodes`` (each node's count, nodes by name)."""
    reports = ProxyNode.objects.filter(cluster=cluster).order_by("name").values_list("name", "last_report")
    per_node: dict[tuple[Any, ...], list[tuple[str, int]]] = {}
    every: list[dict[str, Any]] = []
    for name, report in reports:
        digests = read_section(read, report, [], problems, name)
        for row in merge_digest_rows([asdict(digest) for digest in digests], schema_column):
            per_node.setdefault(digest_key(row, schema_column), []).append((name, row["count_star"]))
            every.append(row)
    rows = merge_digest_rows(every, schema_column)
    for row in rows:
        row["avg_time"] = row["sum_time"] / row["count_star"] if row["count_star"] else 0
        row["nodes"] = per_node.get(digest_key(row, schema_column), [])
    return rows


def _top(rows: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    """The ``TOP`` largest ``rows`` by ``sort`` (rows without its value last)."""
    column = SORTS[sort]
    return sorted(rows, key=lambda row: (row.get(column) is not None, row.get(column) or 0), reverse=True)[:TOP]


@viewer_page
def digests(request: HttpRequest) -> HttpResponse:
    """The top digests, largest first by count, total, average or max time, rows sent or scatter ratio
    (``?sort=``); PostgreSQL's below MySQL's, in the same order, when a node reports any."""
    sort = request.GET.get("sort", DEFAULT_SORT)
    if sort not in SORTS:
        sort = DEFAULT_SORT
    cluster = current_cluster(request)
    problems: list[str] = []
    rows = top_digests(cluster, sort, problems)
    pgsql_rows = top_pgsql_digests(cluster, sort, problems)
    context = {"cluster": cluster, "rows": rows, "pgsql_rows": pgsql_rows, "sort": sort, "report_problems": problems}
    return render(request, "web/digests.html", context)


@require_POST
@operator_only
def reset(request: HttpRequest) -> HttpResponse:
    """Empty the digest table of every node of the working cluster (each node's admin endpoint), audited; a node
    that cannot be asked is named. The page shows the reset once the nodes report again."""
    cluster = current_cluster(request)
    done, failed = [], []
    for node in ProxyNode.objects.filter(cluster=cluster).order_by("name"):
        try:
            done.append(f"{node.name} ({nodeadmin.reset_digests(node)} rows)")
        except nodeadmin.NodeUnreachable as error:
            failed.append(f"{node.name}: {error}")
    audit.record(
        request.user,
        AuditEntry.Action.UPDATE,
        cluster=cluster,
        table="stats_mysql_query_digest",
        object_key="reset",
        after={"reset": done, "failed": failed},
    )
    if done:
        messages.success(request, "Digests reset on " + ", ".join(done) + ".")
    if failed:
        messages.error(request, "Not reset: " + "; ".join(failed))
    return redirect("web:digests")
