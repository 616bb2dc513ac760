"""The table pages: one per editable table of a cluster's draft, each built from its model alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import models
from django.http import Http404

from fleet.core.models import Hostgroup, QueryRule, ReplicationHostgroup, Server, User, Variable
from fleet.core.models.tables import SECRET_COLUMNS
from fleet.core.publishing import mask_row


@dataclass(frozen=True)
class TablePage:
    """A table's page: its URL slug, title, model and the columns its list shows (secrets never)."""

    slug: str
    title: str
    model: type[models.Model]
    list_columns: tuple[str, ...] = ()

    @property
    def columns(self) -> list[str]:
        """The columns the list shows: ``list_columns`` or every editable column, secrets left out."""
        names = self.list_columns or tuple(
            f.name for f in self.model._meta.concrete_fields if f.editable and f.name not in ("id", "cluster")
        )
        return [name for name in names if name not in SECRET_COLUMNS]

    def cells(self, row: models.Model) -> list[Any]:
        """``row``'s values for ``columns``, secrets (a password variable's value) masked."""
        columns = self.columns
        return list(mask_row(getattr(self.model, "table", ""), {c: getattr(row, c) for c in columns}).values())


TABLE_PAGES: tuple[TablePage, ...] = (
    TablePage("servers", "Servers", Server),
    TablePage("users", "Users", User),
    TablePage(
        "query-rules",
        "Query rules",
        QueryRule,
        (
            "rule_id",
            "active",
            "username",
            "schemaname",
            "flagIN",
            "match_digest",
            "match_pattern",
            "destination_hostgroup",
            "cache_ttl",
            "multiplex",
            "apply",
            "comment",
        ),
    ),
    TablePage("replication-hostgroups", "Replication hostgroups", ReplicationHostgroup),
    TablePage("variables", "Variables", Variable),
    TablePage("hostgroups", "Hostgroups", Hostgroup),
)
_BY_SLUG = {page.slug: page for page in TABLE_PAGES}


def table_page(slug: str) -> TablePage:
    """The page for ``slug``; 404 for an unknown one."""
    try:
        return _BY_SLUG[slug]
    except KeyError:
        raise Http404(f"no table {slug!r}") from None
