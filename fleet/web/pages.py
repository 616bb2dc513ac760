"""The table pages: one per editable table of a cluster's draft, each built from its model alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import models
from django.db.models import Q
from django.http import Http404

from fleet.core.models import (
    FastRoutingRule,
    Hostgroup,
    PgsqlForwardListener,
    PgsqlQueryRule,
    PgsqlReplicationHostgroup,
    PgsqlServer,
    PgsqlUser,
    QueryRule,
    ReplicationHostgroup,
    Server,
    Shard,
    ShardedTable,
    User,
    Variable,
)
from proxyapp.config.secrets import SECRET_COLUMNS, mask_row


@dataclass(frozen=True)
class TablePage:
    """A table's page: its URL slug, title, model, the text columns its search looks in, and the columns its list
    shows (secrets never)."""

    slug: str
    title: str
    model: type[models.Model]
    search_columns: tuple[str, ...]
    list_columns: tuple[str, ...] = ()

    @property
    def columns(self) -> list[str]:
        """The columns the list shows: ``list_columns`` or every editable column, secrets left out."""
        names = self.list_columns or tuple(
            f.name for f in self.model._meta.concrete_fields if f.editable and f.name not in ("id", "cluster")
        )
        return [name for name in names if name not in SECRET_COLUMNS]

    def search(self, rows: models.QuerySet, text: str) -> models.QuerySet:
        """The ``rows`` with ``text`` in a search column, or (a number) equal to a listed integer column."""
        text = text.strip()
        if not text:
            return rows
        query = Q()
        for name in self.search_columns:
            query |= Q(**{f"{name}__icontains": text})
        if text.isdigit() and len(text) < 19:  # fits a 64-bit integer column
            for name in self.columns:
                if isinstance(self.model._meta.get_field(name), models.IntegerField):
                    query |= Q(**{name: int(text)})
        return rows.filter(query)

    def cells(self, row: models.Model) -> list[Any]:
        """``row``'s values for ``columns``, secrets (a password variable's value) masked."""
        columns = self.columns
        return list(mask_row(getattr(self.model, "table", ""), {c: getattr(row, c) for c in columns}).values())


def _rule_search_columns(schema: str) -> tuple[str, ...]:
    """The text columns both query rule tables search in, ``schema`` naming their schema column (MySQL's
    schemaname, PostgreSQL's database)."""
    return ("username", schema, "digest", "match_digest", "match_pattern")


def _rule_list_columns(schema: str) -> tuple[str, ...]:
    """The first columns both query rule tables list: the rule, what it matches and where it sends the query."""
    return (
        "rule_id",
        "active",
        "username",
        schema,
        "flagIN",
        "match_digest",
        "match_pattern",
        "destination_hostgroup",
        "replace_pattern",
        "error_msg",
        "flagOUT",
    )


TABLE_PAGES: tuple[TablePage, ...] = (
    TablePage("servers", "Servers", Server, ("hostname", "comment")),
    TablePage("users", "Users", User, ("username", "default_schema", "comment")),
    TablePage(
        "query-rules",
        "Query rules",
        QueryRule,
        (*_rule_search_columns("schemaname"), "trx_queue", "comment"),
        (
            *_rule_list_columns("schemaname"),
            "mirror_hostgroup",
            "cache_ttl",
            "multiplex",
            "trx_queue",
            "trx_queue_key",
            "apply",
            "comment",
        ),
    ),
    TablePage("fast-routing", "Fast routing", FastRoutingRule, ("username", "schemaname", "comment")),
    TablePage("replication-hostgroups", "Replication hostgroups", ReplicationHostgroup, ("check_type", "comment")),
    TablePage("shards", "Shards", Shard, ("shard_group", "physical_schema", "comment")),
    TablePage("sharded-tables", "Sharded tables", ShardedTable, ("schemaname", "tablename", "shard_group", "comment")),
    TablePage("pgsql-servers", "PostgreSQL servers", PgsqlServer, ("hostname", "comment")),
    TablePage("pgsql-users", "PostgreSQL users", PgsqlUser, ("username", "comment")),
    TablePage(
        "pgsql-query-rules",
        "PostgreSQL query rules",
        PgsqlQueryRule,
        (*_rule_search_columns("database"), "comment"),
        (*_rule_list_columns("database"), "apply", "comment"),
    ),
    TablePage(
        "pgsql-replication-hostgroups",
        "PostgreSQL replication hostgroups",
        PgsqlReplicationHostgroup,
        ("check_type", "comment"),
    ),
    TablePage("pgsql-forward-listeners", "PostgreSQL listeners", PgsqlForwardListener, ("interface", "comment")),
    TablePage("variables", "Variables", Variable, ("variable_name",)),  # never the values: some are secrets
    TablePage("hostgroups", "Hostgroups", Hostgroup, ("name", "comment")),
)
_BY_SLUG = {page.slug: page for page in TABLE_PAGES}


def table_page(slug: str) -> TablePage:
    """The page for ``slug``; 404 for an unknown one."""
    try:
        return _BY_SLUG[slug]
    except KeyError:
        raise Http404(f"no table {slug!r}") from None
