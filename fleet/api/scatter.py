"""Sharding statistics in the API: the statements on sharded tables of ``?cluster=NAME`` (default: the first cluster
by name), worst scatter ratio first, as the Shards page lists them (``fleet.core.scatter``)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.api.common import CLUSTER_PARAMETER, resolve_cluster
from fleet.api.serializers import ShardingDigestsSerializer
from fleet.core import scatter


class ShardingDigestsView(APIView):
    """Each statement on sharded tables the cluster's nodes last reported, merged (at most ``scatter.TOP``): how
    often it reached one shard, several or was refused, its scatter ratio, and what its merges cost; a node whose
    section does not read is left out and named in ``problems``."""

    @extend_schema(parameters=[CLUSTER_PARAMETER], responses=ShardingDigestsSerializer)
    def get(self, request: Request) -> Response:
        cluster = resolve_cluster(request)
        problems: list[str] = []
        rows = scatter.sharding_digests(cluster, problems)[: scatter.TOP]
        answer = {"cluster": cluster.name, "digests": rows, "problems": problems}
        return Response(ShardingDigestsSerializer(answer).data)
