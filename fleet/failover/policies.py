"""Saving a failover policy: validated, audited with its passwords masked (the one way the UI and the API do it)."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from fleet.core import audit
from fleet.core.drafts import Actor
from fleet.core.models import AuditEntry
from fleet.core.sealing import shown
from fleet.failover.models import FailoverPolicy

EDITABLE = (
    "enabled",
    "cooling_period_s",
    "write_wait_s",
    "admin_user",
    "admin_password",
    "replication_user",
    "replication_password",
    "promotion_order",
)


def snapshot(policy: FailoverPolicy) -> dict[str, Any]:
    """The policy's settings for the audit log, passwords masked."""
    names = ("writer_hostgroup", *EDITABLE)
    return {name: shown(policy, FailoverPolicy._meta.get_field(name), getattr(policy, name)) for name in names}


def save_policy(policy: FailoverPolicy, user: Actor) -> FailoverPolicy:
    """Validate (ValidationError keyed by field) and save ``policy``, recording before and after."""
    policy.full_clean()
    with transaction.atomic():
        old = FailoverPolicy.objects.filter(pk=policy.pk).first() if policy.pk else None
        policy.save()
        audit.record(
            user,
            AuditEntry.Action.UPDATE if old is not None else AuditEntry.Action.CREATE,
            cluster=policy.cluster,
            table="failover_policy",
            object_key=f"writer_hostgroup={policy.writer_hostgroup}",
            before=snapshot(old) if old is not None else None,
            after=snapshot(policy),
        )
    return policy
