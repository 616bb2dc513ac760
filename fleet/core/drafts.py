"""Editing a cluster's draft config (ProxySQL's MEMORY layer): validated saves and deletes, each audited.

The UI and the REST API both edit rows through these functions, so both validate and audit the same way.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models, transaction

from fleet.core import audit
from fleet.core.models import AuditEntry

Actor = AbstractBaseUser | AnonymousUser | None


def save_row(obj: models.Model, user: Actor) -> models.Model:
    """Validate (the proxy's checks and the unique keys) and save ``obj``, recording before and after.

    ValidationError, keyed by field, when the row is refused; nothing is saved then.
    """
    obj.full_clean()
    with transaction.atomic():
        before = None
        if obj.pk is not None:
            old = type(obj).objects.filter(pk=obj.pk).first()
            before = audit.snapshot(old) if old is not None else None
        obj.save()
        action = AuditEntry.Action.UPDATE if before is not None else AuditEntry.Action.CREATE
        audit.record(user, action, obj=obj, before=before, after=audit.snapshot(obj))
    return obj


def delete_row(obj: models.Model, user: Actor) -> None:
    """Delete ``obj``, recording what it was."""
    with transaction.atomic():
        audit.record(user, AuditEntry.Action.DELETE, obj=obj, before=audit.snapshot(obj))
        obj.delete()
