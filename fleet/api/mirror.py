"""The mirror in the API: each node's mirror as it last reported it, and the mirror's history as series (the
dashboard's charts), for ``?cluster=NAME`` (default: the first cluster by name)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.api.common import CLUSTER_PARAMETER, resolve_cluster
from fleet.core import stats
from fleet.core.models import ProxyNode
from proxyapp.report.reader import read_mirror


def _node_mirror(node: ProxyNode) -> dict[str, Any]:
    """A node's entry: its mirror section as read by ``proxyapp.report.reader`` (None when it has none), and when
    the section does not read, ``error`` saying why instead."""
    problems: list[str] = []
    counts = stats.read_section(read_mirror, node.last_report, None, problems)
    mirror = None if counts is None else asdict(counts)
    entry = {"node": node.name, "reported_at": node.last_heartbeat, "mirror": mirror}
    return {**entry, "error": problems[0]} if problems else entry


class MirrorView(APIView):
    """Each node's mirror as its last report has it (the proxy's ``/stats`` ``mirror`` section); a section that
    does not read is null, with ``error`` naming the bad field."""

    @extend_schema(parameters=[CLUSTER_PARAMETER], responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        cluster = resolve_cluster(request)
        nodes = ProxyNode.objects.filter(cluster=cluster).only("name", "last_report", "last_heartbeat").order_by("name")
        return Response({"cluster": cluster.name, "nodes": [_node_mirror(node) for node in nodes]})


class MirrorHistoryView(APIView):
    """A mirror metric over a span, a series of ``[time, value]`` points per node (raw points up to 2 hours,
    per-minute averages up to a day, per-hour beyond)."""

    @extend_schema(
        parameters=[
            CLUSTER_PARAMETER,
            OpenApiParameter("metric", str, enum=list(stats.MIRROR_METRICS), description="what to draw"),
            OpenApiParameter(
                "span", str, enum=list(stats.SPANS), description=f"how far back (default {next(iter(stats.SPANS))})"
            ),
            OpenApiParameter("node", str, description="only this node"),
        ],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Request) -> Response:
        cluster = resolve_cluster(request)
        metric = request.query_params.get("metric", "queue_length")
        if metric not in stats.MIRROR_METRICS:
            raise ValidationError({"metric": [f"{metric!r} is not one of {', '.join(stats.MIRROR_METRICS)}"]})
        span = request.query_params.get("span", next(iter(stats.SPANS)))
        if span not in stats.SPANS:
            raise ValidationError({"span": [f"{span!r} is not one of {', '.join(stats.SPANS)}"]})
        nodes = ProxyNode.objects.filter(cluster=cluster).only("name").order_by("name")
        if "node" in request.query_params:
            nodes = nodes.filter(name=request.query_params["node"])
        now = timezone.now()
        since = now - stats.SPANS[span]
        series = [
            {"node": node.name, "points": [[at, value] for at, value in stats.mirror_series(node, metric, since)]}
            for node in nodes
        ]
        return Response({"cluster": cluster.name, "metric": metric, "since": since, "until": now, "series": series})
