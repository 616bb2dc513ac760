"""The API's failover resources (``fleet.failover``), for ``?cluster=NAME`` (default: the first cluster by name):

- ``failover/``: each replication hostgroup's topology (primary, replicas, servers kept out, every node's view of
  each) and policy summary; ``failover/{writer_hostgroup}/policy/`` reads and changes its policy (operators;
  passwords write-only); ``POST failover/{writer_hostgroup}/switchover/`` ``{"target": "host:port"}`` starts a
  switchover (202, the event); ``POST failover/{writer_hostgroup}/rejoin/`` ``{"server": "host:port"}`` rejoins a
  fenced old primary as a replica (the event);
- ``failover-events/``: failovers, switchovers and rejoins with their timelines; ``POST .../{id}/acknowledge/``;
- ``backend-transitions/``: the servers' state changes the nodes' monitors reported.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from fleet.api.common import CLUSTER_PARAMETER, ClusterScoped, drf_error
from fleet.failover import actions
from fleet.failover.models import BackendTransition, Event, FailoverPolicy, Step
from fleet.failover.policies import EDITABLE, save_policy
from fleet.failover.status import HostgroupStatus, cluster_status
from fleet.failover.tasks import queue_switchover

# --- serializers --------------------------------------------------------------------------------------------


class NodeCheckSerializer(serializers.Serializer):
    """One node's view of one server (from its latest report's monitor rows)."""

    node = serializers.CharField()
    verdict = serializers.ChoiceField(choices=["up", "suspect", "down", "unknown"])
    reason = serializers.CharField()
    status = serializers.CharField(help_text="the server's state on the node, per hostgroup")
    read_only = serializers.BooleanField(allow_null=True)
    lag_s = serializers.FloatField(allow_null=True)
    last_error = serializers.CharField()
    checked_at = serializers.DateTimeField(allow_null=True)
    reported_at = serializers.DateTimeField(allow_null=True)


class ServerStatusSerializer(serializers.Serializer):
    """A server of a replication hostgroup: its role in the published config and every node's view of it."""

    server = serializers.CharField(help_text="host:port")
    role = serializers.ChoiceField(choices=["primary", "replica", "fenced", "kept out"])
    configured = serializers.DictField(child=serializers.CharField(), help_text="hostgroup -> configured status")
    read_only = serializers.BooleanField(allow_null=True)
    lag_s = serializers.FloatField(allow_null=True)
    summary = serializers.CharField()
    fenced_since = serializers.DateTimeField(source="fence.since", allow_null=True, default=None)
    nodes = NodeCheckSerializer(source="checks", many=True)


class StepSerializer(serializers.ModelSerializer):
    """A step of an event's timeline, explaining itself."""

    class Meta:
        model = Step
        fields = ["at", "name", "ok", "detail", "data"]


class EventSerializer(serializers.ModelSerializer):
    """A failover, switchover or rejoin with its timeline."""

    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    acknowledged_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    version = serializers.SlugRelatedField(slug_field="number", read_only=True)
    steps = StepSerializer(many=True, read_only=True)

    class Meta:
        model = Event
        fields = [
            "id",
            "kind",
            "state",
            "writer_hostgroup",
            "reader_hostgroup",
            "old_primary",
            "new_primary",
            "summary",
            "requested_by",
            "started_at",
            "finished_at",
            "promoted",
            "version",
            "first_write_at",
            "acknowledged_at",
            "acknowledged_by",
            "steps",
        ]


class EventSummarySerializer(serializers.ModelSerializer):
    """An event without its timeline."""

    class Meta:
        model = Event
        fields = ["id", "kind", "state", "old_primary", "new_primary", "summary", "started_at", "finished_at"]


class PolicySerializer(serializers.ModelSerializer):
    """A replication hostgroup's failover policy; the passwords are write-only (a PUT without one keeps it)."""

    class Meta:
        model = FailoverPolicy
        fields = ["writer_hostgroup", *EDITABLE, "updated_at"]
        read_only_fields = ["writer_hostgroup", "updated_at"]
        extra_kwargs = {name: {"write_only": True, "required": False} for name in FailoverPolicy.SECRETS}

    def update(self, instance: FailoverPolicy, validated_data: dict[str, Any]) -> FailoverPolicy:
        for name, value in validated_data.items():
            setattr(instance, name, value)
        try:
            return save_policy(instance, self.context["request"].user)
        except DjangoValidationError as error:
            raise drf_error(error) from None


class TopologySerializer(serializers.Serializer):
    """A replication hostgroup of the cluster's latest version: its servers, what the nodes see, its policy."""

    writer_hostgroup = serializers.IntegerField()
    reader_hostgroup = serializers.IntegerField()
    version = serializers.IntegerField(help_text="the published version this topology is from")
    failover_enabled = serializers.BooleanField(source="policy.enabled")
    cooling_period_s = serializers.IntegerField(source="policy.cooling_period_s")
    primary = ServerStatusSerializer(allow_null=True)
    primary_problem = serializers.CharField(help_text="why there is no primary to watch ('' when there is one)")
    replicas = ServerStatusSerializer(many=True)
    kept_out = ServerStatusSerializer(many=True, help_text="fenced old primaries and other OFFLINE_HARD servers")
    votes = serializers.CharField(help_text="what the nodes say of the primary, in words")
    dead = serializers.BooleanField(help_text="whether a majority of the cluster's nodes report the primary down")
    running = EventSummarySerializer(allow_null=True)
    recent = EventSummarySerializer(many=True)


class SwitchoverSerializer(serializers.Serializer):
    """The replica to promote."""

    target = serializers.CharField(help_text="host:port of a replica of the hostgroup")


class RejoinSerializer(serializers.Serializer):
    """The fenced old primary to make a replica."""

    server = serializers.CharField(help_text="host:port of a fenced server")


class TransitionSerializer(serializers.ModelSerializer):
    """A server's state change on one node, with the monitor's reason."""

    node = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = BackendTransition
        fields = ["id", "node", "at", "hostgroup", "server", "from_status", "to_status", "reason"]


# --- views --------------------------------------------------------------------------------------------------


def _refused(error: actions.ActionRefused) -> Response:
    return Response({error.field: [str(error)]}, status=status.HTTP_400_BAD_REQUEST)


@extend_schema_view(
    list=extend_schema(parameters=[CLUSTER_PARAMETER], responses=TopologySerializer(many=True)),
    retrieve=extend_schema(parameters=[CLUSTER_PARAMETER], responses=TopologySerializer),
)
class FailoverViewSet(ClusterScoped, viewsets.ViewSet):
    """The cluster's replication hostgroups: topology, policy, switchover and rejoin."""

    lookup_field = "writer_hostgroup"
    lookup_value_regex = "[0-9]+"

    def _status(self, writer_hostgroup: str) -> HostgroupStatus:
        for hostgroup in cluster_status(self.cluster()):
            if hostgroup.writer_hostgroup == int(writer_hostgroup):
                return hostgroup
        raise NotFound(f"cluster {self.cluster().name!r} publishes no replication hostgroup {writer_hostgroup}")

    def list(self, request: Request) -> Response:
        return Response(TopologySerializer(cluster_status(self.cluster()), many=True).data)

    def retrieve(self, request: Request, writer_hostgroup: str) -> Response:
        return Response(TopologySerializer(self._status(writer_hostgroup)).data)

    @extend_schema(parameters=[CLUSTER_PARAMETER], request=PolicySerializer, responses=PolicySerializer)
    @action(detail=True, methods=["get", "put", "patch"])
    def policy(self, request: Request, writer_hostgroup: str) -> Response:
        """The hostgroup's failover policy (defaults, failover off, until saved); PUT/PATCH change it."""
        hostgroup = self._status(writer_hostgroup)
        policy = hostgroup.policy
        if request.method == "GET":
            return Response(PolicySerializer(policy).data)
        serializer = PolicySerializer(
            policy, data=request.data, partial=request.method == "PATCH", context={"request": request}
        )
        serializer.is_valid(raise_exception=True)
        serializer.save()
        return Response(PolicySerializer(policy).data)

    @extend_schema(
        parameters=[CLUSTER_PARAMETER], request=SwitchoverSerializer, responses={202: EventSerializer, 400: None}
    )
    @action(detail=True, methods=["post"])
    def switchover(self, request: Request, writer_hostgroup: str) -> Response:
        """Start a planned switchover to ``target`` (operators); the event's timeline shows its progress."""
        body = SwitchoverSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            event = actions.request_switchover(
                self.cluster(), int(writer_hostgroup), body.validated_data["target"].strip(), request.user
            )
        except actions.ActionRefused as error:
            return _refused(error)
        queue_switchover(event)
        return Response(EventSerializer(event).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        parameters=[CLUSTER_PARAMETER], request=RejoinSerializer, responses={200: EventSerializer, 400: None}
    )
    @action(detail=True, methods=["post"])
    def rejoin(self, request: Request, writer_hostgroup: str) -> Response:
        """Make a fenced old primary a replica of the current primary and publish it ONLINE (operators)."""
        body = RejoinSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            event = actions.rejoin(
                self.cluster(), int(writer_hostgroup), body.validated_data["server"].strip(), request.user
            )
        except actions.ActionRefused as error:
            return _refused(error)
        return Response(EventSerializer(event).data)


@extend_schema_view(list=extend_schema(parameters=[CLUSTER_PARAMETER]))
class EventViewSet(ClusterScoped, viewsets.ReadOnlyModelViewSet):
    """Failovers, switchovers and rejoins of the cluster, newest first, each with its timeline."""

    serializer_class = EventSerializer
    filterset_fields = ["kind", "state", "writer_hostgroup"]
    ordering_fields = ["started_at", "id"]

    def get_queryset(self) -> models.QuerySet:
        events = Event.objects.select_related("requested_by", "acknowledged_by", "version").prefetch_related("steps")
        if getattr(self, "swagger_fake_view", False):
            return events.none()
        if self.detail and not self.request.query_params.get("cluster"):
            return events  # an event's id is unique across clusters
        return events.filter(cluster=self.cluster())

    @extend_schema(request=None, responses={200: EventSerializer, 400: None})
    @action(detail=True, methods=["post"])
    def acknowledge(self, request: Request, pk: str) -> Response:
        """Acknowledge a failover: its cooling period no longer blocks another one (operators)."""
        try:
            actions.acknowledge(self.get_object(), request.user)
        except actions.ActionRefused as error:
            return _refused(error)
        return Response(EventSerializer(self.get_object()).data)  # read again: the timeline has a new step


@extend_schema_view(list=extend_schema(parameters=[CLUSTER_PARAMETER]))
class TransitionViewSet(ClusterScoped, viewsets.ReadOnlyModelViewSet):
    """The backend status history: every server state change the cluster's nodes reported, newest first."""

    serializer_class = TransitionSerializer
    filterset_fields = ["node__name", "hostgroup", "server", "to_status"]
    ordering_fields = ["at"]

    def get_queryset(self) -> models.QuerySet:
        if getattr(self, "swagger_fake_view", False):
            return BackendTransition.objects.none()
        return BackendTransition.objects.filter(node__cluster=self.cluster()).select_related("node")
