"""Filters and tags of the web UI: role checks, table cells, audit changes and the header's cluster selector."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.db.models import Model

from fleet.core import roles, timefmt
from fleet.core.models import AuditEntry, Cluster
from fleet.web.access import current_cluster
from fleet.web.pages import TABLE_PAGES, TablePage
from proxyapp.config.secrets import mask_row

register = template.Library()


@register.filter
def can_edit(user: Any) -> bool:
    """Whether ``user`` may change the configuration (buttons are shown only then)."""
    return roles.can_edit(user)


@register.filter
def cells(row: Model, page: TablePage) -> list[Any]:
    """``row``'s values as ``page`` lists them, secrets masked."""
    return page.cells(row)


@register.filter
def lookup(mapping: dict[Any, Any] | None, key: Any) -> Any:
    """``mapping[key]``, or None (a template cannot index a dict by a variable)."""
    return (mapping or {}).get(key)


@register.filter
def ago(at: datetime | None) -> str:
    """How long ago ``at`` was (``fleet.core.timefmt.ago``)."""
    return timefmt.ago(at)


@register.filter
def item(mapping: dict[Any, Any] | None, key: Any) -> Any:
    """``mapping[key]``, or empty when missing (for keys a template cannot spell: variables, numbers)."""
    return (mapping or {}).get(key, "")


@register.filter
def audit_changes(entry: AuditEntry) -> list[tuple[str, Any, Any]]:
    """An audit entry's ``(column, before, after)``: only the changed columns of an update, every column else.

    Secrets are masked; a whole table (an import's before and after) shows as its row count.
    """
    before, after = (_shown(entry.table, values) for values in (entry.before, entry.after))
    columns = list(dict.fromkeys([*before, *after]))
    if before and after:
        columns = [c for c in columns if before.get(c) != after.get(c)]
    return [(c, before.get(c), after.get(c)) for c in columns]


def _shown(table: str, values: dict[str, Any] | None) -> dict[str, Any]:
    masked = mask_row(table, values or {})
    return {k: f"{len(v)} row{'' if len(v) == 1 else 's'}" if isinstance(v, list) else v for k, v in masked.items()}


@register.inclusion_tag("web/partials/cluster_selector.html", takes_context=True)
def cluster_selector(context: template.Context) -> dict[str, Any]:
    """The header's cluster choice, remembered in the session."""
    request = context["request"]
    return {"clusters": Cluster.objects.order_by("name"), "current": current_cluster(request), "request": request}


@register.simple_tag
def table_pages() -> tuple[TablePage, ...]:
    """The table pages, for the navigation."""
    return TABLE_PAGES
