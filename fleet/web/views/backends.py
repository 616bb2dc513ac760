"""The backend status dashboard: every server of every hostgroup as each node of the working cluster reports it,
refreshed live, with charts of the nodes' and each server's history (``fleet.core.stats``); below, the PostgreSQL
servers and the forwarding listeners in front of them (each node's ``pgsql_forward`` section), and the pooling proxy:
each node's PostgreSQL listener, its clients, and its server pools (each node's ``pgsql`` section)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone

from fleet.core import stats
from fleet.core.models import Cluster, Hostgroup, ProxyNode, Resolution, ServerSample
from fleet.web.access import current_cluster, viewer_page
from proxyapp.report.reader import (
    ForwardListenerRow,
    ForwardServerRow,
    PgsqlPooling,
    PgsqlPoolRow,
    read_pgsql,
    read_pgsql_forward,
)

#: A server's queries/s shown in the table is its latest point no older than this.
RATE_WINDOW = timedelta(minutes=2)
#: The charts: metric -> title, for the cluster's nodes and for one server.
NODE_CHARTS = {"questions_per_s": "Questions/s", "client_connections": "Client connections"}
SERVER_CHARTS = {
    "queries_per_s": "Queries/s",
    "latency_us": "Latency (µs)",
    "conn_used": "Connections used",
    "conn_free": "Connections free",
    "conn_err": "Connection errors (total)",
}


@dataclass(frozen=True)
class BackendRow:
    """One server of one hostgroup as one node reports it (a ``connection_pool`` row of its last report)."""

    node: str
    hostgroup: int
    server: str
    status: str
    conn_used: int
    conn_free: int
    conn_err: int
    latency_us: int
    queries_per_s: float | None


def _latest_rates(cluster: Cluster | None) -> dict[tuple[int, int, str], float | None]:
    """(node id, hostgroup, server) -> the latest queries/s recorded within ``RATE_WINDOW``, in one query."""
    samples = ServerSample.objects.filter(
        node__cluster=cluster, resolution=Resolution.RAW, at__gte=timezone.now() - RATE_WINDOW
    ).order_by("at")
    return {
        (node, hostgroup, server): rate
        for node, hostgroup, server, rate in samples.values_list("node_id", "hostgroup", "server", "queries_per_s")
    }


def backend_rows(cluster: Cluster | None) -> list[BackendRow]:
    """Every (hostgroup, server, node) of the cluster from the nodes' last reports, sorted that way."""
    rates = _latest_rates(cluster)
    rows = []
    for node in ProxyNode.objects.filter(cluster=cluster).only("name", "last_report"):
        for pool in stats.pools_of(node.last_report):
            server = pool.server
            rows.append(
                BackendRow(
                    node=node.name,
                    hostgroup=pool.hostgroup,
                    server=server,
                    status=pool.status,
                    conn_used=pool.conn_used,
                    conn_free=pool.conn_free,
                    conn_err=pool.conn_err,
                    latency_us=pool.latency_us,
                    queries_per_s=rates.get((node.pk, pool.hostgroup, server)),
                )
            )
    return sorted(rows, key=lambda r: (r.hostgroup, r.server, r.node))


@dataclass(frozen=True)
class PgsqlForwardRows:
    """The forwarding listeners and PostgreSQL servers of a cluster's nodes, each with its node's name, from their
    last reports; ``problems`` names the sections that do not read (left out)."""

    listeners: list[tuple[str, ForwardListenerRow]]
    servers: list[tuple[str, ForwardServerRow]]
    problems: list[str]


def pgsql_forward_rows(cluster: Cluster | None) -> PgsqlForwardRows:
    """Every node's listeners (by port, then node) and PostgreSQL servers (by hostgroup, server, then node)."""
    found = PgsqlForwardRows([], [], [])
    for node in ProxyNode.objects.filter(cluster=cluster).only("name", "last_report").order_by("name"):
        forward = stats.read_section(read_pgsql_forward, node.last_report, None, found.problems, node.name)
        if forward is not None:
            found.listeners.extend((node.name, listener) for listener in forward.listeners)
            found.servers.extend((node.name, server) for server in forward.servers)
    found.listeners.sort(key=lambda item: (item[1].port, item[0]))
    found.servers.sort(key=lambda item: (item[1].hostgroup_id, item[1].server, item[0]))
    return found


@dataclass(frozen=True)
class PgsqlPoolingRows:
    """The pooling proxy on a cluster's nodes, from their last reports: each node's ``pgsql`` section (its listener
    and clients) and its server pool rows, each with its node's name; ``problems`` names the sections that do not
    read (left out)."""

    nodes: list[tuple[str, PgsqlPooling]]
    pools: list[tuple[str, PgsqlPoolRow]]
    problems: list[str]


def pgsql_pooling_rows(cluster: Cluster | None) -> PgsqlPoolingRows:
    """Every node that pools PostgreSQL (its listener not off, or pools reported), by name, and their pool rows (by
    hostgroup, server, then node)."""
    found = PgsqlPoolingRows([], [], [])
    for node in ProxyNode.objects.filter(cluster=cluster).only("name", "last_report").order_by("name"):
        pooling = stats.read_section(read_pgsql, node.last_report, None, found.problems, node.name)
        if pooling is not None and (pooling.listener_state != "off" or pooling.connection_pool):
            found.nodes.append((node.name, pooling))
            found.pools.extend((node.name, row) for row in pooling.connection_pool)
    found.pools.sort(key=lambda item: (item[1].hostgroup, item[1].server, item[0]))
    return found


def _table_context(cluster: Cluster | None, hostgroup: int | None = None, server: str = "") -> dict[str, Any]:
    """The live table's rows (only ``server`` of ``hostgroup`` when given, else the PostgreSQL forwarding's and
    pooling's rows too) and the hostgroups' names."""
    rows = backend_rows(cluster)
    names = dict(Hostgroup.objects.filter(cluster=cluster).values_list("hostgroup_id", "name"))
    if server:
        rows = [row for row in rows if (row.hostgroup, row.server) == (hostgroup, server)]
        return {"rows": rows, "hostgroup_names": names}
    forward = pgsql_forward_rows(cluster)
    pooling = pgsql_pooling_rows(cluster)
    return {
        "rows": rows,
        "hostgroup_names": names,
        "pgsql_listeners": forward.listeners,
        "pgsql_servers": forward.servers,
        "pgsql_nodes": pooling.nodes,
        "pgsql_pools": pooling.pools,
        "report_problems": forward.problems + pooling.problems,
    }


def chosen_span(request: HttpRequest) -> str:
    """The span a page's charts draw: ``?span=`` when it is one of ``stats.SPANS``, else the first."""
    span = request.GET.get("span", "")
    return span if span in stats.SPANS else next(iter(stats.SPANS))


@viewer_page
def backends(request: HttpRequest) -> HttpResponse:
    """The dashboard: the live table and the nodes' charts over ``?span=``."""
    cluster = current_cluster(request)
    context = {"cluster": cluster, "charts": NODE_CHARTS, "span": chosen_span(request), "spans": stats.SPANS}
    return render(request, "web/backends.html", {**context, **_table_context(cluster)})


@viewer_page
def backends_table(request: HttpRequest) -> HttpResponse:
    """The live table (htmx polls it): every server, or one with ``?hostgroup=&server=host:port``."""
    hostgroup, server = request.GET.get("hostgroup", ""), request.GET.get("server", "")
    if server and not hostgroup.isdigit():
        raise Http404("hostgroup: expected a number")
    context = _table_context(current_cluster(request), int(hostgroup) if server else None, server)
    return render(request, "web/partials/backends_table.html", context)


@viewer_page
def server_page(request: HttpRequest, hostgroup: int, server: str) -> HttpResponse:
    """One server of one hostgroup: its live status on each node, and its charts over ``?span=``, a line per node."""
    cluster = current_cluster(request)
    context = {
        **_table_context(cluster, hostgroup, server),
        "cluster": cluster,
        "hostgroup": hostgroup,
        "server": server,
        "charts": SERVER_CHARTS,
        "span": chosen_span(request),
        "spans": stats.SPANS,
    }
    return render(request, "web/server.html", context)


@viewer_page
def chart_data(request: HttpRequest, metric: str) -> JsonResponse:
    """One metric over ``?span=``, a series per node of the working cluster: a node metric, or a server's with
    ``?hostgroup=&server=host:port``.

    ``{"metric", "title", "since", "until", "series": [{"node", "points": [[ms, value], ...]}]}``, times in
    milliseconds since the epoch (what the chart's x axis takes).
    """
    hostgroup, server = request.GET.get("hostgroup", ""), request.GET.get("server", "")
    charts = SERVER_CHARTS if server else NODE_CHARTS
    if metric not in charts:
        raise Http404(f"no chart {metric!r}")
    if server and not hostgroup.isdigit():
        raise Http404("hostgroup: expected a number")
    now = timezone.now()
    since = now - stats.SPANS[chosen_span(request)]

    def points(node: ProxyNode) -> list[tuple[Any, float]]:
        if server:
            return stats.server_series(node, int(hostgroup), server, metric, since)
        return stats.series(node, metric, since)

    series = [
        {"node": node.name, "points": [[at.timestamp() * 1000, value] for at, value in points(node)]}
        for node in ProxyNode.objects.filter(cluster=current_cluster(request)).only("name")
    ]
    span = {"since": since.timestamp() * 1000, "until": now.timestamp() * 1000}
    return JsonResponse({"metric": metric, "title": charts[metric], **span, "series": series})
