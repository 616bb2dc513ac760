"""Hot rows in the API (docs/hot-rows.md): each hot-row queue of the nodes of ``?cluster=NAME`` (default: the first
cluster by name) and of the fleet, the queues the nodes propose, and accepting one into the draft, as the Hot rows
page shows and does (``fleet.core.hotrows``)."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.api.common import CLUSTER_PARAMETER, ClusterScoped, drf_error, resolve_cluster
from fleet.api.serializers import (
    ROW_SERIALIZERS,
    AcceptedRulesSerializer,
    AcceptProposalSerializer,
    HotRowsSerializer,
)
from fleet.core import hotrows


class HotRowsView(APIView):
    """Each node's hot-row queues as its last report has them, the fleet's per queue (summed; the longest wait the
    longest anywhere), with the latest rates, and the proposals (``accepted``: the draft has a rule queueing the
    digest); a node whose section does not read is left out and named in ``problems``."""

    @extend_schema(parameters=[CLUSTER_PARAMETER], responses=HotRowsSerializer)
    def get(self, request: Request) -> Response:
        cluster = resolve_cluster(request)
        problems: list[str] = []
        lines, fleet = hotrows.queue_lines(cluster, problems)
        proposals = hotrows.proposals(cluster, problems)
        answer = {"cluster": cluster.name, "queues": lines, "fleet": fleet, "proposals": proposals}
        return Response(HotRowsSerializer({**answer, "problems": problems}).data)


class AcceptProposalView(ClusterScoped, APIView):
    """Accept a proposal (operators): its query rules (one per digest not queued yet) are added to the draft,
    audited, and answered (201 ``{"rules": [...]}``); publish to run them. 404 when no node reports the proposal,
    409 when the draft already queues each of its digests or it names none."""

    @extend_schema(
        parameters=[CLUSTER_PARAMETER],
        request=AcceptProposalSerializer,
        responses={201: AcceptedRulesSerializer},
    )
    def post(self, request: Request) -> Response:
        asked = AcceptProposalSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        cluster = self.cluster()
        try:
            rules = hotrows.accept(cluster, asked.validated_data["id"], request.user)
        except hotrows.ProposalError as error:
            if not any(p.row.id == asked.validated_data["id"] for p in hotrows.proposals(cluster, [])):
                raise NotFound(str(error)) from None
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        except DjangoValidationError as error:
            raise drf_error(error) from None
        serializer = ROW_SERIALIZERS["mysql_query_rules"](rules, many=True, context={"request": request, "view": self})
        return Response({"rules": serializer.data}, status=status.HTTP_201_CREATED)
