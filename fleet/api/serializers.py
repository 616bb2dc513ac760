"""The API's serializers. Table rows are saved through ``fleet.core.drafts.save_row``, so a refused row comes back
with the same messages, keyed by the same column names, as in the UI; secrets are write-only."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import AbstractUser, Group
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from rest_framework import serializers

from fleet.api.common import drf_error
from fleet.core import audit, roles
from fleet.core.drafts import save_row
from fleet.core.models import TABLE_MODELS, AuditEntry, Cluster, ConfigVersion, Hostgroup, ProxyNode
from fleet.core.models.tables import key_path_of
from fleet.core.ruletest import MYSQL, PGSQL
from proxyapp.config.document import table_columns
from proxyapp.config.secrets import SECRET_COLUMNS, mask_document, mask_row


class SavedThroughDrafts:
    """Saves through ``fleet.core.drafts.save_row`` (the proxy's validation, the unique keys, the audit log): a
    refused row answers 400 naming its fields."""

    context: dict[str, Any]

    def _save(self, obj: Any) -> Any:
        try:
            return save_row(obj, self.context["request"].user)
        except DjangoValidationError as error:
            raise drf_error(error) from None


class DraftRowSerializer(SavedThroughDrafts, serializers.ModelSerializer):
    """A row of a cluster's draft: created in the view's cluster, validated and audited by ``save_row``."""

    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    key = serializers.SerializerMethodField(help_text="the row's natural key: its URL is /api/v1/<table>/<key>/")

    def get_key(self, row: models.Model) -> str:
        return key_path_of(row)

    def build_standard_field(self, field_name: str, model_field: models.Field) -> tuple[type, dict[str, Any]]:
        """Strings keep their spaces (a pattern's trailing space matters); columns without default are required."""
        field_class, kwargs = super().build_standard_field(field_name, model_field)
        if issubclass(field_class, serializers.CharField):
            kwargs["trim_whitespace"] = False
        column = table_columns(self.Meta.model.table).get(field_name) if hasattr(self.Meta.model, "table") else None
        if column is not None and column.default is dataclasses.MISSING:
            kwargs["required"] = True
        return field_class, kwargs

    def create(self, validated_data: dict[str, Any]) -> models.Model:
        return self._save(self.Meta.model(cluster=self.context["view"].cluster(), **validated_data))

    def update(self, instance: models.Model, validated_data: dict[str, Any]) -> models.Model:
        for name, value in validated_data.items():
            setattr(instance, name, value)
        return self._save(instance)


def _row_serializer(model: type[models.Model]) -> type[DraftRowSerializer]:
    """The serializer of one table model: every ProxySQL column, secrets write-only."""
    columns = model.column_names()
    meta = type(
        "Meta",
        (),
        {
            "model": model,
            "fields": ["id", "key", "cluster", *columns],
            "extra_kwargs": {c: {"write_only": True} for c in columns if c in SECRET_COLUMNS},
            "validators": [],  # the unique keys are checked by save_row (full_clean), with the UI's messages
        },
    )
    return type(f"{model.__name__}Serializer", (DraftRowSerializer,), {"Meta": meta, "__module__": __name__})


class _MaskedVariables(DraftRowSerializer):
    def to_representation(self, instance: models.Model) -> dict[str, Any]:
        """A password variable's value is shown masked."""
        return mask_row("global_variables", super().to_representation(instance))


#: Table name -> serializer.
ROW_SERIALIZERS: dict[str, type[DraftRowSerializer]] = {table: _row_serializer(m) for table, m in TABLE_MODELS.items()}
ROW_SERIALIZERS["global_variables"] = type(
    "VariableSerializer",
    (_MaskedVariables,),
    {"Meta": ROW_SERIALIZERS["global_variables"].Meta, "__module__": __name__},
)


class HostgroupSerializer(DraftRowSerializer):
    """A hostgroup's name and description (servers and rules refer to hostgroups by number)."""

    class Meta:
        model = Hostgroup
        fields = ["id", "key", "cluster", "hostgroup_id", "name", "comment"]
        validators: list[Any] = []


class ClusterSerializer(SavedThroughDrafts, serializers.ModelSerializer):
    """A cluster: nodes sharing one config."""

    latest_version = serializers.SerializerMethodField()
    nodes = serializers.SerializerMethodField()

    class Meta:
        model = Cluster
        fields = ["id", "name", "comment", "created_at", "latest_version", "nodes"]

    def get_latest_version(self, cluster: Cluster) -> int | None:
        latest = cluster.latest_version()
        return latest.number if latest is not None else None

    def get_nodes(self, cluster: Cluster) -> list[str]:
        return [node.name for node in cluster.nodes.all()]

    def create(self, validated_data: dict[str, Any]) -> Cluster:
        return self._save(Cluster(**validated_data))

    def update(self, instance: Cluster, validated_data: dict[str, Any]) -> Cluster:
        for name, value in validated_data.items():
            setattr(instance, name, value)
        return self._save(instance)


class NodeSerializer(SavedThroughDrafts, serializers.ModelSerializer):
    """A proxy node: the version it should run (its cluster's latest), what it runs, how its last apply went.

    Operators create and edit a node's name, cluster and addresses (validated and audited like every row); the
    rest is what the node reports. A node's name is its queue's: it cannot change once the node exists.
    """

    cluster = serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all())
    desired_version = serializers.IntegerField(read_only=True, allow_null=True)

    class Meta:
        model = ProxyNode
        fields = [
            "id",
            "name",
            "cluster",
            "mysql_address",
            "admin_address",
            "admin_token",
            "desired_version",
            "pushed_version",
            "applied_version",
            "applied_checksum",
            "state",
            "error",
            "last_pushed_at",
            "last_ack_at",
            "last_heartbeat",
            "stale_since",
        ]
        read_only_fields = [
            "pushed_version",
            "applied_version",
            "applied_checksum",
            "state",
            "error",
            "last_pushed_at",
            "last_ack_at",
            "last_heartbeat",
            "stale_since",
        ]
        extra_kwargs = {
            "name": {"validators": []},  # unique: checked by save_row with the UI's message
            "admin_token": {"write_only": True, "style": {"input_type": "password"}},
        }

    def create(self, validated_data: dict[str, Any]) -> ProxyNode:
        return self._save(ProxyNode(**validated_data))

    def update(self, instance: ProxyNode, validated_data: dict[str, Any]) -> ProxyNode:
        if validated_data.get("name", instance.name) != instance.name:
            raise serializers.ValidationError({"name": ["a node's name is its queue's: it cannot change"]})
        for name, value in validated_data.items():
            setattr(instance, name, value)
        return self._save(instance)


class VersionSerializer(serializers.ModelSerializer):
    """A published version, without its document."""

    cluster = serializers.SlugRelatedField(slug_field="name", read_only=True)
    author = serializers.SlugRelatedField(slug_field="username", read_only=True)
    rollback_of = serializers.SlugRelatedField(slug_field="number", read_only=True)

    class Meta:
        model = ConfigVersion
        fields = ["id", "number", "cluster", "checksum", "author", "created_at", "comment", "rollback_of"]


class VersionDetailSerializer(VersionSerializer):
    """A published version with its config document (passwords masked unless the view asks for secrets)."""

    document = serializers.SerializerMethodField()

    class Meta(VersionSerializer.Meta):
        fields = [*VersionSerializer.Meta.fields, "document"]

    def get_document(self, version: ConfigVersion) -> dict[str, list[dict[str, Any]]]:
        return version.document if self.context.get("secrets") else mask_document(version.document)


class RowChangeSerializer(serializers.Serializer):
    """One row added, removed or changed (``fleet.core.publishing.RowChange``), secrets masked."""

    table = serializers.CharField()
    key = serializers.CharField()
    kind = serializers.ChoiceField(choices=["added", "removed", "changed"])
    before = serializers.DictField()
    after = serializers.DictField()
    columns = serializers.ListField(child=serializers.CharField())


class DiffSerializer(serializers.Serializer):
    """What changed from version ``from`` to version ``to``."""

    to = serializers.IntegerField()
    changes = RowChangeSerializer(many=True)
    unified = serializers.CharField()

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["from"] = serializers.IntegerField()  # a keyword in Python
        return fields


class CommentSerializer(serializers.Serializer):
    """The comment a publish or a rollback is stored with."""

    comment = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=False)


class PublishRequestSerializer(CommentSerializer):
    """A publish: its comment and, to publish exactly the draft previewed, that draft's checksum."""

    checksum = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="the previewed draft's checksum: refused if it changed"
    )


class PublishedSerializer(serializers.Serializer):
    """The version a publish or a rollback stored."""

    version = serializers.IntegerField()
    checksum = serializers.CharField()


class RefusedSerializer(serializers.Serializer):
    """Why a publish, rollback or import was refused, each error naming its row and column."""

    errors = serializers.ListField(child=serializers.CharField())


class DraftStateSerializer(serializers.Serializer):
    """The draft against the latest version: the changes a publish would make, or why it would be refused."""

    changes = RowChangeSerializer(many=True)
    errors = serializers.ListField(child=serializers.CharField())
    warnings = serializers.ListField(child=serializers.CharField(), help_text="what a node would warn about")
    checksum = serializers.CharField(help_text="the draft's checksum, to publish exactly this draft")


class ImportedSerializer(serializers.Serializer):
    """The draft an import wrote: its checksum, its row count per table and (a cnf import) what was left out."""

    checksum = serializers.CharField()
    rows = serializers.DictField(child=serializers.IntegerField())
    notes = serializers.ListField(child=serializers.CharField(), required=False)


class CnfSerializer(serializers.Serializer):
    """A ProxySQL ``proxysql.cnf``'s text."""

    cnf = serializers.CharField(max_length=10_000_000, trim_whitespace=False)
    force = serializers.BooleanField(
        required=False, default=False, help_text="drop sections ProxyFleet lacks even when routing changes"
    )


class AccountSerializer(serializers.ModelSerializer):
    """A control-plane account and its role; the password is write-only (required when creating)."""

    role = serializers.ChoiceField(choices=list(roles.ROLES), allow_null=True, required=False)
    password = serializers.CharField(
        write_only=True, required=False, trim_whitespace=False, style={"input_type": "password"}
    )

    class Meta:
        model = get_user_model()
        fields = ["id", "username", "email", "is_active", "role", "password", "last_login", "date_joined"]
        read_only_fields = ["last_login", "date_joined"]

    def to_representation(self, account: AbstractUser) -> dict[str, Any]:
        data = super().to_representation(account)
        data["role"] = roles.role_of(account)
        return data

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if self.instance is None and not attrs.get("password"):
            raise serializers.ValidationError({"password": ["a new account needs a password"]})
        if attrs.get("password"):
            candidate = self.instance or self.Meta.model(username=attrs.get("username", ""))
            try:
                password_validation.validate_password(attrs["password"], candidate)
            except DjangoValidationError as error:
                raise serializers.ValidationError({"password": error.messages}) from None
        return attrs

    def create(self, validated_data: dict[str, Any]) -> AbstractUser:
        role = validated_data.pop("role", None)
        account = self.Meta.model.objects.create_user(**validated_data)
        return self._finish(account, role, None)

    def update(self, account: AbstractUser, validated_data: dict[str, Any]) -> AbstractUser:
        before = self.summary(account)
        role = validated_data.pop("role", None)
        password = validated_data.pop("password", None)
        for name, value in validated_data.items():
            setattr(account, name, value)
        if password:
            account.set_password(password)
        account.save()
        return self._finish(account, role, before)

    def _finish(self, account: AbstractUser, role: str | None, before: dict[str, Any] | None) -> Any:
        """Set the role when the request gives one (null: none), and audit the account as it now is."""
        if "role" in self.initial_data and role is not None:
            roles.grant(account, role)
        elif "role" in self.initial_data:
            account.groups.remove(*Group.objects.filter(name__in=roles.ROLES))
        action = AuditEntry.Action.CREATE if before is None else AuditEntry.Action.UPDATE
        audit.record(
            self.context["request"].user,
            action,
            table="account",
            object_key=account.username,
            before=before,
            after=self.summary(account),
        )
        return account

    @staticmethod
    def summary(account: AbstractUser) -> dict[str, Any]:
        """What the audit log keeps of an account (never its password)."""
        return {
            "username": account.username,
            "email": account.email,
            "is_active": account.is_active,
            "role": roles.role_of(account),
        }


class RuleTestSerializer(serializers.Serializer):
    """What the rule tester tries: a query, the session it comes from, the rules (``mysql`` or ``pgsql``: then
    ``schemaname`` is the database), ``draft`` or a version number."""

    query = serializers.CharField(max_length=100_000, trim_whitespace=False)
    engine = serializers.ChoiceField(choices=[MYSQL, PGSQL], required=False, default=MYSQL)
    username = serializers.CharField(max_length=255)
    schemaname = serializers.CharField(max_length=255, required=False, default="", allow_blank=True)
    client_addr = serializers.CharField(max_length=255, required=False, default="127.0.0.1")
    flag_in = serializers.IntegerField(min_value=0, required=False, default=0)
    source = serializers.RegexField(r"^(draft|[1-9][0-9]{0,8})$", required=False, default="draft")


class ShardLocateSerializer(serializers.Serializer):
    """What the shard tester locates: a key of a sharded table (``schema.table``) in the draft or a version. A key
    of digits (or a JSON integer) is an integer, as the planner reads an unquoted number; anything else a string."""

    table = serializers.CharField(max_length=200)
    key = serializers.CharField(max_length=255)
    source = serializers.RegexField(r"^(draft|[1-9][0-9]{0,8})$", required=False, default="draft")


class ShardServerSerializer(serializers.Serializer):
    """A server of the shard's hostgroup, as the config has it."""

    hostname = serializers.CharField()
    port = serializers.IntegerField()
    status = serializers.CharField()
    weight = serializers.IntegerField()


class ShardLocationSerializer(serializers.Serializer):
    """The shard tester's answer: the shard holding the key, or (``shard`` null) why its table's rule refuses it."""

    answer = serializers.CharField(help_text="the answer in one sentence")
    table = serializers.CharField(help_text="schema.table as the config names it")
    shard_group = serializers.CharField()
    key = serializers.JSONField(help_text="the key as read: an integer or a string")
    shard = serializers.IntegerField(allow_null=True)
    hostgroup = serializers.IntegerField(allow_null=True)
    physical_schema = serializers.CharField(allow_null=True)
    servers = ShardServerSerializer(many=True)
    refused = serializers.CharField(allow_null=True, help_text="the algorithm's refusal (ShardKeyError), if any")


class ShardingDigestSerializer(serializers.Serializer):
    """A statement on sharded tables as the cluster's nodes report it (``sharding_digest`` rows, merged)."""

    schemaname = serializers.CharField()
    digest = serializers.CharField()
    digest_text = serializers.CharField()
    single_shard = serializers.IntegerField(help_text="runs that reached one shard")
    scatter = serializers.IntegerField(help_text="runs that reached several shards")
    refused = serializers.IntegerField(help_text="runs the sharding refused")
    shards_reached = serializers.IntegerField(help_text="shards reached, summed over the runs")
    merge_rows = serializers.IntegerField(help_text="rows the merges of scatters read")
    merge_us = serializers.IntegerField(help_text="microseconds the merges took")
    scatter_ratio = serializers.FloatField(help_text="scatters over the runs that ran (0 to 1)")
    avg_shards = serializers.FloatField(help_text="shards a run reached, on average")
    avg_merge_us = serializers.FloatField(help_text="a scatter's merge time, on average")


class ShardingDigestsSerializer(serializers.Serializer):
    """The cluster's statements on sharded tables, worst scatter ratio first, and what its nodes' reports left out."""

    cluster = serializers.CharField()
    digests = ShardingDigestSerializer(many=True)
    problems = serializers.ListField(child=serializers.CharField(), help_text="a node's section that does not read")


class HotQueueSerializer(serializers.Serializer):
    """A hot-row queue as a node (or, ``node`` empty, the fleet) reports it, with its latest rates."""

    node = serializers.CharField(help_text="the node; empty for the fleet's line")
    queue = serializers.CharField(source="row.queue")
    keys_active = serializers.IntegerField(source="row.keys_active", help_text="keys a transaction holds")
    waiters = serializers.IntegerField(source="row.waiters", help_text="transactions waiting for a key")
    longest_wait_ms = serializers.FloatField(source="row.longest_wait_ms", help_text="the longest wait now")
    transactions = serializers.IntegerField(source="row.transactions", help_text="since the proxy started")
    timeouts = serializers.IntegerField(source="row.timeouts", help_text="waits that timed out")
    refused = serializers.IntegerField(source="row.refused", help_text="transactions refused: the queue was full")
    waited = serializers.IntegerField(source="row.waited", help_text="transactions that had to wait")
    wait_ms_total = serializers.FloatField(source="row.wait_ms_total", help_text="milliseconds waited in all")
    transactions_per_s = serializers.FloatField(allow_null=True, help_text="between the last two reports")
    timeouts_per_s = serializers.FloatField(allow_null=True)
    refused_per_s = serializers.FloatField(allow_null=True)


class HotProposalSerializer(serializers.Serializer):
    """A queue the nodes propose for a hot key column, merged over the nodes that report it."""

    id = serializers.CharField(source="row.id")
    schema = serializers.CharField(source="row.schema")
    table = serializers.CharField(source="row.table")
    column = serializers.CharField(source="row.column", help_text="the key column: the rule's trx_queue_key")
    queue = serializers.CharField(source="row.queue")
    digest = serializers.CharField(source="row.digest")
    digest_text = serializers.CharField(source="row.digest_text")
    digests = serializers.SerializerMethodField(help_text="every digest the proposal queues, with its text")
    keys = serializers.ListField(source="row.keys", child=serializers.CharField(), help_text="the hottest key values")
    evidence = serializers.DictField(source="row.evidence", child=serializers.IntegerField())
    state = serializers.CharField(source="row.state", help_text="proposed, or applied (by the node itself)")
    since = serializers.DateTimeField(source="row.since", allow_null=True)
    nodes = serializers.ListField(child=serializers.CharField())
    accepted = serializers.BooleanField(help_text="the draft has a rule queueing each of its digests")
    rule_ids = serializers.ListField(child=serializers.IntegerField(), help_text="the rules queueing its digests")

    def get_digests(self, proposal: Any) -> list[dict[str, str]]:
        return [{"digest": digest, "digest_text": text} for digest, text in proposal.row.digests]


class HotRowsSerializer(serializers.Serializer):
    """The cluster's hot-row queues and proposals, and what its nodes' reports left out."""

    cluster = serializers.CharField()
    queues = HotQueueSerializer(many=True)
    fleet = HotQueueSerializer(many=True)
    proposals = HotProposalSerializer(many=True)
    problems = serializers.ListField(child=serializers.CharField(), help_text="a node's section that does not read")


class AcceptedRulesSerializer(serializers.Serializer):
    """The query rules accepting a proposal added to the draft."""

    rules = ROW_SERIALIZERS["mysql_query_rules"](many=True)


class AcceptProposalSerializer(serializers.Serializer):
    """Which proposal to accept."""

    id = serializers.CharField(help_text="the proposal's id, as the nodes report it (schema.table.column)")
