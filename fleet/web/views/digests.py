"""The query digest page: the top digests of the working cluster's nodes (their last reports, merged)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from fleet.core.models import Cluster, ProxyNode
from fleet.web.access import current_cluster, viewer_page
from proxyapp.workers import merge_digest_rows

#: How many digests the page lists.
TOP = 50
#: The orders the page offers: query parameter -> the row value sorted on (largest first).
SORTS = {"count": "count_star", "sum": "sum_time", "avg": "avg_time", "max": "max_time", "rows": "sum_rows_sent"}
DEFAULT_SORT = "sum"


def top_digests(cluster: Cluster | None, sort: str) -> list[dict[str, Any]]:
    """The cluster's digests merged across nodes, each with ``avg_time``, the ``TOP`` largest by ``sort``."""
    reports = ProxyNode.objects.filter(cluster=cluster).values_list("last_report", flat=True)
    rows = merge_digest_rows([row for report in reports for row in (report or {}).get("query_digest", [])])
    for row in rows:
        row["avg_time"] = row["sum_time"] / row["count_star"] if row["count_star"] else 0
    return sorted(rows, key=lambda row: row[SORTS[sort]], reverse=True)[:TOP]


@viewer_page
def digests(request: HttpRequest) -> HttpResponse:
    """The top digests, largest first by count, total, average or max time, or rows sent (``?sort=``)."""
    sort = request.GET.get("sort", DEFAULT_SORT)
    if sort not in SORTS:
        sort = DEFAULT_SORT
    cluster = current_cluster(request)
    return render(request, "web/digests.html", {"cluster": cluster, "rows": top_digests(cluster, sort), "sort": sort})
