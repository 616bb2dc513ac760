"""Recording changes in the audit log."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models

from fleet.core.models import AuditEntry, Cluster, ClusterRow
from fleet.core.secrets import mask_row


def snapshot(obj: models.Model) -> dict[str, Any]:
    """A JSON-ready picture of a row for the audit log, with secrets masked."""
    if isinstance(obj, ClusterRow):
        values = mask_row(obj.table, obj.as_row())
    else:
        values = {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields if f.name != "id"}
    return {k: _jsonable(v) for k, v in values.items()}


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str | list | dict):
        return value
    return str(value)


def record(
    user: AbstractBaseUser | AnonymousUser | None,
    action: str,
    *,
    cluster: Cluster | None = None,
    obj: models.Model | None = None,
    table: str = "",
    object_key: str = "",
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> AuditEntry:
    """Write one audit entry; the table and key are taken from ``obj`` when it is given."""
    if obj is not None:
        table = table or getattr(obj, "table", obj._meta.model_name or "")
        object_key = object_key or (obj.key() if isinstance(obj, ClusterRow) else str(obj))
        if cluster is None and isinstance(getattr(obj, "cluster", None), Cluster):
            cluster = obj.cluster  # type: ignore[attr-defined]
    return AuditEntry.objects.create(
        user=user if user is not None and user.is_authenticated else None,
        action=action,
        cluster=cluster,
        table=table,
        object_key=object_key[:255],
        before=before,
        after=after,
    )
