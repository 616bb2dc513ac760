"""The one way the API, the UI and the admin change benchmark targets and jobs: validate (a job's plan as the engine
would check it), save, keep the job's beat entry in step, and write the audit log (a target's password masked, as
every sealed field)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from fleet.bench.models import BenchJob, BenchTarget
from fleet.core import audit
from fleet.core.models import AuditEntry


def _picture(obj: BenchTarget | BenchJob, targets: list[BenchTarget] | None = None) -> dict[str, Any]:
    values = audit.snapshot(obj)  # the target's password masked
    if targets is not None:
        values["targets"] = [t.name for t in targets]
    return values


@transaction.atomic
def save_target(target: BenchTarget, user: Any) -> BenchTarget:
    """Validate and save a target; ValidationError naming the field."""
    before = _picture(BenchTarget.objects.get(pk=target.pk)) if target.pk else None
    target.full_clean()
    target.save()
    action = AuditEntry.Action.UPDATE if before else AuditEntry.Action.CREATE
    audit.record(user, action, obj=target, table="bench_target", before=before, after=_picture(target))
    return target


@transaction.atomic
def save_job(job: BenchJob, targets: list[BenchTarget], user: Any) -> BenchJob:
    """Validate a job with its targets (in order), save it and its schedule; ValidationError naming the field."""
    previous = BenchJob.objects.filter(pk=job.pk).first() if job.pk else None
    before = _picture(previous, previous.ordered_targets()) if previous else None
    if len({t.pk for t in targets}) != len(targets):
        raise ValidationError({"targets": "a target is listed twice"})
    job.full_clean(exclude=["created_by"])
    job.validate_plan(targets)
    if job.created_by_id is None and user is not None and getattr(user, "pk", None):
        job.created_by = user
    job.save()
    job.set_targets(targets)
    job.sync_schedule()
    action = AuditEntry.Action.UPDATE if before else AuditEntry.Action.CREATE
    audit.record(user, action, obj=job, table="bench_job", before=before, after=_picture(job, targets))
    return job


@transaction.atomic
def delete_job(job: BenchJob, user: Any) -> None:
    """Delete a job, its runs and its beat entry."""
    before = _picture(job, job.ordered_targets())
    audit.record(user, AuditEntry.Action.DELETE, obj=job, table="bench_job", before=before)
    job.delete()


@transaction.atomic
def delete_target(target: BenchTarget, user: Any) -> None:
    """Delete a target no job uses; ValidationError naming the jobs that do."""
    jobs = sorted(link.job.name for link in target.job_links.select_related("job"))
    if jobs:
        raise ValidationError({"name": f"target {target.name} is used by job {', '.join(jobs)}"})
    audit.record(user, AuditEntry.Action.DELETE, obj=target, table="bench_target", before=_picture(target))
    target.delete()
