"""ProxySQL's tables as Django models, one row per cluster, built from the proxy's own table definitions.

Each model's columns are generated from ``proxyapp.config.tables`` (names, types, nullability, defaults, choices), and
``clean()`` runs the proxy's ``validate_row`` on the row, so the admin UI, the REST API and a node refuse exactly
the same rows, naming the same field.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models

from fleet.core.models.nodes import Cluster
from fleet.core.sealing import SealedIfPasswordVariableField, SealedTextField
from proxyapp.config.document import Column, blank_to_null, listener_port_error, table_columns, validate_row
from proxyapp.config.secrets import SECRET_COLUMNS
from proxyapp.config.variables import Variables

# String columns that take part in a unique key: bounded so that every database can index them.
_KEY_STRINGS = {"hostname", "username", "variable_name"}


def proxysql_field(column: Column) -> models.Field:
    """The Django field for one ProxySQL column: same type, nullability, default and choices."""
    options: dict[str, Any] = {"null": column.nullable, "blank": column.nullable or column.type is str}
    if column.default is not dataclasses.MISSING:
        options["default"] = column.default
    if column.choices is not None:
        options["choices"] = [(c, str(c)) for c in column.choices]
    if column.help:
        options["help_text"] = column.help
    if column.type is bool:
        return models.BooleanField(**options)
    if column.type is int:
        return models.BigIntegerField(**options)
    if column.name in _KEY_STRINGS:
        return models.CharField(max_length=255, **options)
    if column.name in SECRET_COLUMNS:
        return SealedTextField(**options)
    if column.name == "variable_value":
        return SealedIfPasswordVariableField(**options)
    return models.TextField(**options)


class ClusterRow(models.Model):
    """A row of one of ProxySQL's tables in one cluster's draft config (ProxySQL's MEMORY layer)."""

    #: The config document's table this model holds.
    table: ClassVar[str]

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE)

    class Meta:
        abstract = True

    @classmethod
    def column_names(cls) -> list[str]:
        """The ProxySQL column names, in the document's order."""
        return list(table_columns(cls.table))

    def as_row(self) -> dict[str, Any]:
        """The row as a config document row (column name to value)."""
        return {name: getattr(self, name) for name in self.column_names()}

    def clean(self) -> None:
        """Check the row with the proxy's own validation (a query rule's with its rule engine's too), blank fields
        taken as null as the proxy takes them; errors are keyed by column."""
        super().clean()
        row = self.as_row()
        for name, value in blank_to_null(self.table, row).items():
            if value is None and row[name] is not None:
                setattr(self, name, None)
        _, errors = validate_row(self.table, self.as_row())
        if errors:
            by_field: dict[str, list[str]] = {}
            for column, message in errors:
                by_field.setdefault(column or NON_FIELD_ERRORS, []).append(message)
            raise ValidationError(by_field)

    def key(self) -> str:
        """The row's key as text, for messages and the audit log."""
        return ", ".join(f"{c}={getattr(self, c)}" for c in self.key_columns)

    key_columns: ClassVar[tuple[str, ...]]

    def key_path(self) -> str:
        """The row's key as the API addresses it: the key's values joined by "/" (booleans as 0 or 1), stable
        across a rollback, unlike the row's id (``key_path_of``)."""
        return key_path_of(self)


class ForwardListenerRow(ClusterRow):
    """A ``pgsql_forward_listeners`` row, which also may not take a port the cluster's draft gives the node's
    MySQL listener or admin endpoint (the proxy checks that on the whole document: here it shows on the form)."""

    class Meta:
        abstract = True

    def clean(self) -> None:
        """The row's own checks, then its port against the draft's variables (when they read)."""
        super().clean()
        values = dict(
            Variable.objects.filter(cluster_id=self.cluster_id).values_list("variable_name", "variable_value")
        )
        try:
            variables = Variables(values)
        except ValueError:
            return  # a draft variable that does not read: publishing names it
        error = listener_port_error(self.port, variables)
        if error is not None:
            raise ValidationError({"port": [error]})


def _table_model(
    name: str,
    table: str,
    doc: str,
    key: tuple[str, ...],
    unique: tuple[tuple[str, ...], ...] = (),
    base: type[ClusterRow] = ClusterRow,
) -> type[ClusterRow]:
    """A concrete ``base`` model for ``table``, unique per cluster on ``key`` and each of ``unique``."""
    constraints = [
        models.UniqueConstraint(fields=["cluster", *fields], name=f"{table}_{'_'.join(fields)}_per_cluster")
        for fields in (key, *unique)
    ]
    meta = type("Meta", (), {"constraints": constraints, "ordering": ["cluster", *key]})
    attrs: dict[str, Any] = {
        "__module__": __name__,
        "__doc__": doc,
        "__str__": lambda self: f"{table} ({self.key()})",
        "Meta": meta,
        "table": table,
        "key_columns": key,
    }
    attrs.update({column.name: proxysql_field(column) for column in table_columns(table).values()})
    return type(name, (base,), attrs)


Server = _table_model(
    "Server", "mysql_servers", "A backend server in a hostgroup (mysql_servers).", ("hostgroup_id", "hostname", "port")
)
User = _table_model(
    "User",
    "mysql_users",
    "A user clients log in as and the proxy reaches backends as (mysql_users); the password is write-only.",
    ("username", "backend"),
    unique=(("username", "frontend"),),
)
QueryRule = _table_model(
    "QueryRule", "mysql_query_rules", "A query rule (mysql_query_rules), applied in rule_id order.", ("rule_id",)
)
FastRoutingRule = _table_model(
    "FastRoutingRule",
    "mysql_query_rules_fast_routing",
    "A fast routing row (mysql_query_rules_fast_routing): user, schema and flagIN to a hostgroup in one lookup.",
    ("username", "schemaname", "flagIN"),
)
ReplicationHostgroup = _table_model(
    "ReplicationHostgroup",
    "mysql_replication_hostgroups",
    "A writer/reader hostgroup pair that follows the servers' read_only (mysql_replication_hostgroups).",
    ("writer_hostgroup",),
    unique=(("reader_hostgroup",),),
)
Shard = _table_model(
    "Shard",
    "mysql_shards",
    "One shard of a shard group and the hostgroup that serves it (mysql_shards, ProxyFleet's own).",
    ("shard_group", "shard"),
)
ShardedTable = _table_model(
    "ShardedTable",
    "mysql_sharded_tables",
    "A table spread over a shard group by its key and algorithm, or global (mysql_sharded_tables).",
    ("schemaname", "tablename"),
)
PgsqlServer = _table_model(
    "PgsqlServer",
    "pgsql_servers",
    "A PostgreSQL server in a (PostgreSQL) hostgroup (pgsql_servers, ProxySQL 3.0's columns).",
    ("hostgroup_id", "hostname", "port"),
)
PgsqlUser = _table_model(
    "PgsqlUser",
    "pgsql_users",
    "A user PostgreSQL clients log in as and the proxy reaches pgsql_servers as (pgsql_users, ProxySQL 3.0's columns "
    "and ProxyFleet's pool_mode); the password is write-only.",
    ("username", "backend"),
    unique=(("username", "frontend"),),
)
PgsqlForwardListener = _table_model(
    "PgsqlForwardListener",
    "pgsql_forward_listeners",
    "A node port forwarding whole connections to a hostgroup of pgsql_servers (pgsql_forward_listeners, ProxyFleet's "
    "own).",
    ("port",),
    base=ForwardListenerRow,
)
Variable = _table_model(
    "Variable", "global_variables", "A global variable override (global_variables).", ("variable_name",)
)


def key_path_of(row: models.Model) -> str:
    """``row``'s natural key as the API's path: its ``key_columns``' values joined by "/", booleans as 0 or 1."""
    return "/".join(str(int(v)) if isinstance(v, bool) else str(v) for v in (getattr(row, c) for c in row.key_columns))


class Hostgroup(models.Model):
    """A hostgroup's name and description in the control plane; servers and rules refer to it by number."""

    key_columns: ClassVar[tuple[str, ...]] = ("hostgroup_id",)

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="hostgroups")
    hostgroup_id = models.PositiveIntegerField()
    name = models.CharField(max_length=100, blank=True, default="")
    comment = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["cluster", "hostgroup_id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "hostgroup_id"], name="hostgroup_per_cluster")]

    def __str__(self) -> str:
        return f"{self.hostgroup_id} {self.name}".strip()


#: Config document table name -> the model holding its rows, in the document's order.
TABLE_MODELS: dict[str, type[ClusterRow]] = {
    model.table: model
    for model in (
        Server,
        User,
        QueryRule,
        FastRoutingRule,
        ReplicationHostgroup,
        Shard,
        ShardedTable,
        PgsqlServer,
        PgsqlUser,
        PgsqlForwardListener,
        Variable,
    )
}
