"""The API's views: a resource per table of a cluster's draft, clusters, nodes, versions, publish, import/export,
node stats and accounts. Tables, versions, publish, import and export work on ``?cluster=NAME`` (default: the first
cluster by name)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import models
from django.db.models import Max, ProtectedError
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import serializers, status, viewsets
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from fleet.api import serializers as api
from fleet.api import tokens
from fleet.api.common import (
    CLUSTER_PARAMETER,
    SECRETS_PARAMETER,
    ClusterScoped,
    refused,
    resolve_cluster,
    wants_secrets,
)
from fleet.api.permissions import AdminPermission, ViewerPermission
from fleet.core import audit, publishing, ruletest
from fleet.core.drafts import delete_row
from fleet.core.models import AuditEntry, Cluster, ConfigVersion, ProxyNode
from fleet.core.proxysql_cnf import import_cnf
from fleet.core.ruletest import config_of
from fleet.core.shards import LocateError, locate
from proxyapp.config.document import ConfigError
from proxyapp.shown import shown_in


@extend_schema_view(
    list=extend_schema(parameters=[CLUSTER_PARAMETER]),
    create=extend_schema(parameters=[CLUSTER_PARAMETER]),
)
class DraftRowViewSet(ClusterScoped, viewsets.ModelViewSet):
    """Rows of one table in a cluster's draft; saving validates like a node would and is audited."""

    model: type[models.Model]
    lookup_url_kwarg = "key"

    def get_queryset(self) -> models.QuerySet:
        if getattr(self, "swagger_fake_view", False):  # schema generation
            return self.model.objects.none()
        return self.model.objects.select_related("cluster").filter(cluster=self.cluster())

    def get_object(self) -> models.Model:
        """The row whose natural key is the URL's ``key`` (``10/db1/3306``, ``app/1``, ``42``...): stable across
        a rollback, which makes new rows (and ids) of the same keys."""
        parts = self.kwargs["key"].split("/")
        columns = self.model.key_columns
        if len(parts) != len(columns):
            raise NotFound(f"a {self.basename} row is addressed by {'/'.join(columns)}")
        lookup: dict[str, object] = {}
        for column, text in zip(columns, parts, strict=True):
            field = self.model._meta.get_field(column)
            if isinstance(field, models.BooleanField | models.IntegerField):
                if not text.isdigit() or (isinstance(field, models.BooleanField) and text not in ("0", "1")):
                    raise NotFound(f"{column}: {text!r} is not a number")
                lookup[column] = bool(int(text)) if isinstance(field, models.BooleanField) else int(text)
            else:
                lookup[column] = text
        row = get_object_or_404(self.get_queryset(), **lookup)
        self.check_object_permissions(self.request, row)
        return row

    def perform_destroy(self, instance: models.Model) -> None:
        delete_row(instance, self.request.user)


def _table_viewset(slug: str, serializer: type[serializers.ModelSerializer], filters: tuple[str, ...]) -> type:
    """A DraftRowViewSet for ``serializer``'s model, filterable on ``filters`` and sortable on its key."""
    model = serializer.Meta.model
    table = getattr(model, "table", "hostgroup names")
    return type(
        f"{model.__name__}ViewSet",
        (DraftRowViewSet,),
        {
            "__doc__": f"The {slug} of a cluster's draft ({table}); filter by {', '.join(filters)}.",
            "__module__": __name__,
            "model": model,
            "serializer_class": serializer,
            "filterset_fields": list(filters),
            "ordering_fields": list(model.key_columns),
            "lookup_value_regex": "/".join(["[^/]+"] * len(model.key_columns)),
        },
    )


_TABLES = (
    ("servers", api.ROW_SERIALIZERS["mysql_servers"], ("hostgroup_id", "hostname", "port", "status")),
    ("users", api.ROW_SERIALIZERS["mysql_users"], ("username", "active", "default_hostgroup")),
    ("query-rules", api.ROW_SERIALIZERS["mysql_query_rules"], ("rule_id", "active", "flagIN", "destination_hostgroup")),
    (
        "fast-routing",
        api.ROW_SERIALIZERS["mysql_query_rules_fast_routing"],
        ("username", "schemaname", "flagIN", "destination_hostgroup"),
    ),
    ("replication-hostgroups", api.ROW_SERIALIZERS["mysql_replication_hostgroups"], ("writer_hostgroup",)),
    ("shards", api.ROW_SERIALIZERS["mysql_shards"], ("shard_group", "hostgroup_id")),
    ("sharded-tables", api.ROW_SERIALIZERS["mysql_sharded_tables"], ("schemaname", "shard_group", "algorithm")),
    ("pgsql-servers", api.ROW_SERIALIZERS["pgsql_servers"], ("hostgroup_id", "hostname", "port", "status")),
    ("pgsql-users", api.ROW_SERIALIZERS["pgsql_users"], ("username", "active", "default_hostgroup", "pool_mode")),
    (
        "pgsql-query-rules",
        api.ROW_SERIALIZERS["pgsql_query_rules"],
        ("rule_id", "active", "flagIN", "destination_hostgroup"),
    ),
    ("pgsql-replication-hostgroups", api.ROW_SERIALIZERS["pgsql_replication_hostgroups"], ("writer_hostgroup",)),
    ("pgsql-forward-listeners", api.ROW_SERIALIZERS["pgsql_forward_listeners"], ("port", "hostgroup_id", "active")),
    ("variables", api.ROW_SERIALIZERS["global_variables"], ("variable_name",)),
    ("hostgroups", api.HostgroupSerializer, ("hostgroup_id", "name")),
)
#: URL name -> viewset of each table of the draft.
TABLE_VIEWSETS: dict[str, type] = {slug: _table_viewset(slug, ser, filters) for slug, ser, filters in _TABLES}


class ClusterViewSet(viewsets.ModelViewSet):
    """Clusters (nodes sharing one config); addressed by name. A cluster with nodes cannot be deleted."""

    queryset = Cluster.objects.prefetch_related("nodes")
    serializer_class = api.ClusterSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    filterset_fields = ["name"]

    def perform_destroy(self, instance: Cluster) -> None:
        try:
            delete_row(instance, self.request.user)
        except ProtectedError:
            raise ValidationError({"name": [f"cluster {instance.name!r} still has nodes; remove them first"]}) from None


@extend_schema_view(list=extend_schema(parameters=[OpenApiParameter("cluster", str, description="only this cluster")]))
class NodeViewSet(viewsets.ModelViewSet):
    """Proxy nodes: desired version (the cluster's latest), applied version, state, error, last heartbeat.
    Operators add, edit (cluster, addresses) and remove them."""

    serializer_class = api.NodeSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    filterset_fields = ["state"]
    ordering_fields = ["name", "last_heartbeat", "applied_version"]

    def get_queryset(self) -> models.QuerySet:
        nodes = (
            ProxyNode.objects.select_related("cluster")
            .annotate(desired_version=Max("cluster__versions__number"))
            .order_by("cluster__name", "name")  # an aggregate drops Meta.ordering
        )
        if getattr(self, "swagger_fake_view", False) or not self.request.query_params.get("cluster"):
            return nodes
        return nodes.filter(cluster=resolve_cluster(self.request))

    def perform_destroy(self, instance: ProxyNode) -> None:
        delete_row(instance, self.request.user)


@extend_schema_view(
    list=extend_schema(parameters=[CLUSTER_PARAMETER]),
    retrieve=extend_schema(parameters=[CLUSTER_PARAMETER, SECRETS_PARAMETER]),
)
class VersionViewSet(ClusterScoped, viewsets.ReadOnlyModelViewSet):
    """A cluster's published versions, addressed by number; the detail holds the document (passwords masked)."""

    lookup_field = "number"
    lookup_value_regex = "[0-9]+"
    filterset_fields = ["author__username"]
    ordering_fields = ["number", "created_at"]

    def get_queryset(self) -> models.QuerySet:
        if getattr(self, "swagger_fake_view", False):
            return ConfigVersion.objects.none()
        return ConfigVersion.objects.filter(cluster=self.cluster()).select_related("cluster", "author", "rollback_of")

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return api.VersionDetailSerializer if self.action == "retrieve" else api.VersionSerializer

    def get_serializer_context(self) -> dict[str, Any]:
        context = super().get_serializer_context()
        if self.action == "retrieve":
            context["secrets"] = wants_secrets(self.request)
        return context

    @extend_schema(
        parameters=[
            CLUSTER_PARAMETER,
            OpenApiParameter("against", int, description="the version to compare with (default: the previous one)"),
        ],
        responses=api.DiffSerializer,
    )
    @action(detail=True, methods=["get"])
    def diff(self, request: Request, number: str) -> Response:
        """What changed from version ``against`` to this one: row changes and a unified diff, passwords masked."""
        new = self.get_object()
        against = request.query_params.get("against", str(new.number - 1))
        if not against.isdigit():
            raise ValidationError({"against": [f"{against!r} is not a version number"]})
        old = self.get_queryset().filter(number=int(against)).first()
        if old is None:
            raise NotFound(f"no version {against} in cluster {self.cluster().name!r}")
        changes = publishing.diff_versions(old, new)
        text = publishing.unified_diff(old.document, new.document, f"v{old.number}", f"v{new.number}")
        changes_data = api.RowChangeSerializer(changes, many=True).data
        return Response({"from": old.number, "to": new.number, "changes": changes_data, "unified": text})

    @extend_schema(
        parameters=[CLUSTER_PARAMETER],
        request=api.CommentSerializer,
        responses={201: api.PublishedSerializer, 400: api.RefusedSerializer},
    )
    @action(detail=True, methods=["post"])
    def rollback(self, request: Request, number: str) -> Response:
        """Publish this version's config again as a new version (operators)."""
        target = self.get_object()
        comment = _comment(request)
        try:
            version = publishing.rollback(target, request.user, comment=comment)
        except ConfigError as error:
            return refused(error.errors)
        except publishing.NothingToPublish as error:
            return refused([str(error)])
        return _published(version)


def _published(version: ConfigVersion) -> Response:
    """A publish's answer: the version, and whether it reached the broker (``delivered``, ``message``)."""
    delivered, message = publishing.publish_message(version)
    body = {"version": version.number, "checksum": version.checksum, "delivered": delivered, "message": message}
    return Response(body, status=status.HTTP_201_CREATED)


def _comment(request: Request) -> str:
    comment = api.CommentSerializer(data=request.data)
    comment.is_valid(raise_exception=True)
    return comment.validated_data["comment"]


class PublishView(ClusterScoped, APIView):
    """GET: what publishing the draft would change; POST: publish it as the next version (operators)."""

    @extend_schema(parameters=[CLUSTER_PARAMETER], responses=api.DraftStateSerializer)
    def get(self, request: Request) -> Response:
        errors: list[str] = []
        checksum = ""
        try:
            changes, warnings, checksum = publishing.draft_preview(self.cluster())
        except ConfigError as error:
            changes, warnings, errors = [], [], error.errors
        body = {
            "changes": api.RowChangeSerializer(changes, many=True).data,
            "errors": errors,
            "warnings": warnings,
            "checksum": checksum,
        }
        return Response(body)

    @extend_schema(
        parameters=[CLUSTER_PARAMETER],
        request=api.PublishRequestSerializer,
        responses={201: api.PublishedSerializer, 400: api.RefusedSerializer},
    )
    def post(self, request: Request) -> Response:
        asked = api.PublishRequestSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        comment, previewed = asked.validated_data["comment"], asked.validated_data["checksum"]
        try:
            version = publishing.publish(self.cluster(), request.user, comment=comment, previewed=previewed)
        except ConfigError as error:
            return refused(error.errors)
        except (publishing.NothingToPublish, publishing.DraftChanged) as error:
            return refused([str(error)])
        return _published(version)


class TokenView(ObtainAuthToken):
    """An API token for a username and password; throttled and audited like the web login (fleet.core.logins).

    Authentication gets Django's own request, not DRF's wrapper: the lockout axes marks on it is what its
    middleware answers with 429.
    """

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "request": self.request._request}

    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """The account's token (a new one once the old expired) and when it expires."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        token = tokens.fresh_token(serializer.validated_data["user"])
        return Response({"token": token.key, "expires": tokens.expires_at(token).isoformat()})


class RuleTestView(ClusterScoped, APIView):
    """The rule tester: one query through the rules of the draft or of a published version (``source``), as the
    proxy's rule engine runs them. Any viewer may ask; nothing changes."""

    permission_classes = [ViewerPermission]

    @extend_schema(
        parameters=[CLUSTER_PARAMETER],
        request=api.RuleTestSerializer,
        responses={200: OpenApiTypes.OBJECT, 400: api.RefusedSerializer},
    )
    def post(self, request: Request) -> Response:
        asked = api.RuleTestSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        data = asked.validated_data
        try:
            config = config_of(self.cluster(), data["source"])
            trial = ruletest.try_query(
                config,
                data["query"],
                username=data["username"],
                schemaname=data["schemaname"],
                client_addr=data["client_addr"],
                flag_in=data["flag_in"],
                engine=data["engine"],
            )
        except ConfigVersion.DoesNotExist:
            return refused([f"no version {data['source']} in {self.cluster()}"])
        except ConfigError as error:
            return refused(error.errors)
        except ValueError as error:
            return refused([str(error)])
        body = {
            "answer": trial.answer,
            "hostgroup": trial.hostgroup,
            "digest": trial.digest,
            "digest_text": trial.digest_text,
            "matched": [rule.rule_id for rule in trial.matched],
            "rewritten": trial.rewritten,
            "outcome": trial.outcome,
            "notes": trial.notes,
        }
        return Response(body)


class ShardLocateView(ClusterScoped, APIView):
    """The shard tester: which shard of the draft's or a published version's (``source``) shard map holds ``key``
    of ``table``, answered by the proxy's own sharding code; a key its table's rule refuses is answered with the
    refusal (``shard`` null). Any viewer may ask; nothing changes."""

    permission_classes = [ViewerPermission]

    @extend_schema(
        parameters=[CLUSTER_PARAMETER],
        request=api.ShardLocateSerializer,
        responses={200: api.ShardLocationSerializer, 400: api.RefusedSerializer},
    )
    def post(self, request: Request) -> Response:
        asked = api.ShardLocateSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        data = asked.validated_data
        try:
            location = locate(config_of(self.cluster(), data["source"]), data["table"], data["key"])
        except ConfigVersion.DoesNotExist:
            return refused([f"no version {data['source']} in {self.cluster()}"])
        except ConfigError as error:
            return refused(error.errors)
        except LocateError as error:
            return refused([str(error)])
        shard = location.shard
        body = {
            "answer": location.answer,
            "table": location.name,
            "shard_group": location.table.group,
            "key": location.key,
            "shard": None if shard is None else shard.number,
            "hostgroup": None if shard is None else shard.hostgroup_id,
            "physical_schema": None if shard is None else shard.physical_schema,
            "servers": [
                {"hostname": s.hostname, "port": s.port, "status": s.status, "weight": s.weight}
                for s in location.servers
            ],
            "refused": location.refusal,
        }
        return Response(body)


class ExportView(ClusterScoped, APIView):
    """The cluster's draft as a config document; passwords masked unless an admin asks for ``secrets=1``."""

    @extend_schema(parameters=[CLUSTER_PARAMETER, SECRETS_PARAMETER], responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        return Response(publishing.export_document(self.cluster(), secrets=wants_secrets(request)))


class ImportView(ClusterScoped, APIView):
    """Replace the cluster's draft with a config document (operators); all or nothing. A masked password
    (from a masked export) keeps the password the draft has for that user."""

    @extend_schema(
        parameters=[CLUSTER_PARAMETER],
        request=OpenApiTypes.OBJECT,
        responses={200: api.ImportedSerializer, 400: api.RefusedSerializer},
    )
    def post(self, request: Request) -> Response:
        try:
            config = publishing.import_document(self.cluster(), request.data, request.user)
        except ConfigError as error:
            return refused(error.errors)
        rows = {table: len(rows) for table, rows in config.to_document().items()}
        return Response({"checksum": config.checksum, "rows": rows})


class ImportCnfView(ClusterScoped, APIView):
    """Replace the cluster's draft with a ProxySQL ``proxysql.cnf`` (operators): all or nothing, every refusal
    naming its line; the answer lists what was left out (``notes``), as the CLI and the UI say it."""

    @extend_schema(
        parameters=[CLUSTER_PARAMETER],
        request=api.CnfSerializer,
        responses={200: api.ImportedSerializer, 400: api.RefusedSerializer},
    )
    def post(self, request: Request) -> Response:
        asked = api.CnfSerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        try:
            data = asked.validated_data
            config, notes = import_cnf(self.cluster(), data["cnf"], request.user, force=data["force"])
        except ConfigError as error:
            return refused(error.errors)
        rows = {table: len(rows) for table, rows in config.to_document().items()}
        return Response({"checksum": config.checksum, "rows": rows, "notes": notes})


class NodeStatsView(APIView):
    """A node's latest report: global counters, connection pools per server, top query digests, the sharding
    digests that scatter most (the cluster's, merged: ``stats/sharding/``)."""

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, name: str) -> Response:
        node = get_object_or_404(ProxyNode, name=name)
        return Response(shown_in(node.last_report or {}))  # one stored before its texts were (``record_report``)


class AccountViewSet(viewsets.ModelViewSet):
    """Control-plane accounts and their roles (admins only); passwords are write-only."""

    queryset = get_user_model().objects.order_by("username").prefetch_related("groups")
    serializer_class = api.AccountSerializer
    permission_classes = [AdminPermission]
    filterset_fields = ["username", "is_active"]

    def perform_destroy(self, instance: Any) -> None:
        if instance.pk == self.request.user.pk:
            raise ValidationError({"username": ["you cannot delete your own account"]})
        audit.record(
            self.request.user,
            AuditEntry.Action.DELETE,
            table="account",
            object_key=instance.username,
            before=api.AccountSerializer.summary(instance),
        )
        instance.delete()
