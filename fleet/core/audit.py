"""Recording changes in the audit log."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models
from django.http import HttpRequest, HttpResponse

from fleet.core.models import AuditEntry, Cluster, ClusterRow
from fleet.core.sealing import shown
from proxyapp.config.secrets import mask_row


def snapshot(obj: models.Model) -> dict[str, Any]:
    """A JSON-ready picture of a row for the audit log, with secrets masked."""
    if isinstance(obj, ClusterRow):
        values = mask_row(obj.table, obj.as_row())
    else:
        fields = [f for f in obj._meta.concrete_fields if f.name != "id"]
        values = {f.attname: shown(obj, f, getattr(obj, f.attname)) for f in fields}
    return {k: _jsonable(v) for k, v in values.items()}


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str | list | dict):
        return value
    return str(value)


#: The request being served, if any: where an audit entry comes from (``AuditSourceMiddleware``).
_request: ContextVar[HttpRequest | None] = ContextVar("audit_request", default=None)


class AuditSourceMiddleware:
    """Makes each request known to ``record``, so every entry says where it came from (UI, API) and the client's
    address; an entry written outside a request (a management command, beat, a task) says ``cli``."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _request.set(request)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)


def origin(request: HttpRequest | None) -> tuple[str, str]:
    """(source, client address) of a change made while serving ``request`` (None: no request, the CLI)."""
    if request is None:
        return "cli", ""
    return ("api" if request.path.startswith("/api/") else "web"), request.META.get("REMOTE_ADDR", "")[:64]


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
    source, client = origin(_request.get())
    return AuditEntry.objects.create(
        source=source,
        client=client,
        user=user if user is not None and user.is_authenticated else None,
        action=action,
        cluster=cluster,
        table=table,
        object_key=object_key[:255],
        before=before,
        after=after,
    )
