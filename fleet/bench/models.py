"""Benchmark targets, jobs and runs.

A job is a workload run against targets over a sweep of connection counts, now (a manual run) or on a crontab
schedule (a django-celery-beat ``PeriodicTask`` the job keeps in step with itself). Each run records the config
version its cluster's nodes had applied, its per-interval series (``RunPoint``, written live) and per-step summary
(``RunStep``), and the engine's whole result document.
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models, transaction
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from fleet.bench.engine.plans import SCRIPT, make_plan, workload_names
from fleet.bench.engine.runner import PlanBase, PlanError
from fleet.bench.engine.script import ScriptError, parse_sweep
from fleet.bench.engine.targets import Target
from fleet.core.models import Cluster, ProxyNode
from fleet.core.models.nodes import NODE_NAME
from fleet.core.sealing import SealedTextField

#: The task beat sends for a job's schedule, and the one a manual run sends (both on the queue ``bench``).
SCHEDULED_TASK = "proxyfleet.bench.scheduled"
EXECUTE_TASK = "proxyfleet.bench.execute"
QUEUE = "bench"


def crontab_fields(text: str) -> dict[str, str]:
    """``"m h dom mon dow"`` as CrontabSchedule's fields; ValueError naming the bad field."""
    from celery.schedules import crontab

    parts = text.split()
    names = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
    if len(parts) != len(names):
        raise ValueError(f"expected 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}")
    fields = dict(zip(names, parts, strict=True))
    for name, value in fields.items():
        try:
            crontab(**{name: value})
        except (ValueError, TypeError, IndexError) as exc:
            raise ValueError(f"{name.replace('_', ' ')} {value!r}: {exc}") from None
    return fields


class BenchTarget(models.Model):
    """A MySQL endpoint benchmarks run against: a server directly, or a proxy node of the fleet."""

    class Kind(models.TextChoices):
        DIRECT = "direct", "direct (a server)"
        PROXY = "proxy", "proxy (a ProxyFleet node)"

    name = models.CharField(max_length=63, unique=True, validators=[NODE_NAME])
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.DIRECT)
    host = models.CharField(max_length=255)
    port = models.PositiveIntegerField(default=3306, validators=[MinValueValidator(1), MaxValueValidator(65535)])
    user = models.CharField(max_length=80)
    password = SealedTextField(max_length=255, blank=True, default="", help_text="write-only")
    database = models.CharField(max_length=64, blank=True, default="")
    safe_for_writes = models.BooleanField(
        default=False,
        help_text="marked safe for benchmarks: workloads that create tables or write may run against it",
    )
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    node = models.ForeignKey(
        ProxyNode,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="the proxy node this target is (its applied config version is recorded with each run)",
    )
    comment = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def engine_target(self) -> Target:
        """The engine's view of this target."""
        return Target(
            name=self.name,
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            database=self.database,
            safe=self.safe_for_writes,
        )


class BenchJob(models.Model):
    """A benchmark: a workload against targets over a sweep, run on demand or on a crontab schedule."""

    name = models.CharField(max_length=100, unique=True)
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="whose applied config version each run records (to compare runs across versions)",
    )
    workload = models.CharField(max_length=60, help_text="a built-in workload, sysbench:SCRIPT, or script")
    script = models.TextField(blank=True, default="", help_text="the bench script, for workload 'script'")
    connections = models.CharField(max_length=200, default="8", help_text="a sweep: 1,8,64 or 50..500/50")
    duration = models.FloatField(null=True, blank=True, help_text="seconds per step (default 10)")
    events = models.PositiveIntegerField(null=True, blank=True, help_text="transactions per step, instead of a time")
    warmup = models.FloatField(default=0.0, validators=[MinValueValidator(0.0)])
    rate = models.FloatField(null=True, blank=True, help_text="transactions/s of all connections together")
    interval = models.FloatField(default=1.0, validators=[MinValueValidator(0.1)])
    rounds = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(100)])
    rows = models.PositiveIntegerField(null=True, blank=True, help_text="rows a built-in workload's table gets")
    batch = models.PositiveIntegerField(null=True, blank=True, help_text="mycat-insert: inserts per transaction")
    processes = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(16)])
    time_limit = models.FloatField(
        default=float(getattr(settings, "BENCH_MAX_RUN_SECONDS", 1800)),
        validators=[MinValueValidator(1.0)],
        help_text="the most a run may take, in seconds",
    )
    schedule = models.CharField(
        max_length=100, blank=True, default="", help_text="crontab: minute hour day-of-month month day-of-week"
    )
    enabled = models.BooleanField(default=True, help_text="off: the schedule does not fire")
    periodic_task = models.OneToOneField(
        PeriodicTask, null=True, blank=True, editable=False, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def ordered_targets(self) -> list[BenchTarget]:
        """The job's targets in their order (the first is where setup runs, and the baseline of ratios)."""
        return [link.target for link in self.target_links.select_related("target").order_by("position", "pk")]

    def plan(self, targets: list[BenchTarget] | None = None) -> PlanBase:
        """The engine's plan for this job; PlanError (ScriptError for a script) when it cannot be made."""
        chosen = self.ordered_targets() if targets is None else targets
        return make_plan(
            self.workload,
            [t.engine_target() for t in chosen],
            script_text=self.script,
            rows=self.rows,
            batch=self.batch,
            processes=self.processes,
            connections=parse_sweep(self.connections),
            duration=self.duration,
            events=self.events,
            warmup=self.warmup,
            rate=self.rate,
            interval=self.interval,
            rounds=self.rounds,
            time_limit=self.time_limit,
        )

    def validate_plan(self, targets: list[BenchTarget]) -> None:
        """ValidationError naming the field when this job with ``targets`` could not run."""
        if self.workload not in workload_names():
            raise ValidationError({"workload": f"unknown workload {self.workload!r}"})
        if self.workload == SCRIPT and not self.script.strip():
            raise ValidationError({"script": "workload 'script' needs a script"})
        if self.schedule.strip():
            try:
                crontab_fields(self.schedule)
            except ValueError as exc:
                raise ValidationError({"schedule": str(exc)}) from None
        limit = float(getattr(settings, "BENCH_MAX_RUN_SECONDS", 1800))
        if self.time_limit > limit:
            raise ValidationError({"time_limit": f"at most {limit:.0f} s (BENCH_MAX_RUN_SECONDS)"})
        try:
            parse_sweep(self.connections)
        except ValueError as exc:
            raise ValidationError({"connections": str(exc)}) from None
        if not targets:
            raise ValidationError({"targets": "a job needs at least one target"})
        try:
            self.plan(targets).check()
        except ScriptError as exc:
            raise ValidationError({"script": str(exc)}) from None
        except PlanError as exc:
            field = "targets" if "safe for benchmarks" in str(exc) else "__all__"
            field = "time_limit" if "time limit" in str(exc) else field
            raise ValidationError({field: str(exc)}) from None

    def set_targets(self, targets: list[BenchTarget]) -> None:
        """Replace the job's targets, keeping their order."""
        self.target_links.all().delete()
        JobTarget.objects.bulk_create(JobTarget(job=self, target=t, position=i) for i, t in enumerate(targets))

    @transaction.atomic
    def sync_schedule(self) -> None:
        """Create, change or remove the beat entry that runs this job on its schedule."""
        task = self.periodic_task
        if not self.schedule.strip():
            if task is not None:
                self.periodic_task = None
                BenchJob.objects.filter(pk=self.pk).update(periodic_task=None)
                task.delete()
            return
        crontab, _ = CrontabSchedule.objects.get_or_create(**crontab_fields(self.schedule), timezone="UTC")
        values: dict[str, Any] = {
            "name": f"bench job {self.pk}: {self.name}"[:200],
            "task": SCHEDULED_TASK,
            "crontab": crontab,
            "interval": None,
            "kwargs": json.dumps({"job": self.pk}),
            "queue": QUEUE,
            "enabled": self.enabled,
            "description": f"benchmark job {self.name} (fleet.bench)",
        }
        if task is None:
            task = PeriodicTask.objects.create(**values)
            self.periodic_task = task
            BenchJob.objects.filter(pk=self.pk).update(periodic_task=task)
        else:
            for name, value in values.items():
                setattr(task, name, value)
            task.save()

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        """Delete the job and its beat entry."""
        task = self.periodic_task
        result = super().delete(*args, **kwargs)
        if task is not None:
            task.delete()
        return result


class JobTarget(models.Model):
    """A job's target, in its place."""

    job = models.ForeignKey(BenchJob, on_delete=models.CASCADE, related_name="target_links")
    target = models.ForeignKey(BenchTarget, on_delete=models.PROTECT, related_name="job_links")
    position = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["job", "target"], name="bench_target_once_per_job")]


class BenchRun(models.Model):
    """One run of a job: its status, what it ran against, and its results."""

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    class Trigger(models.TextChoices):
        MANUAL = "manual", "manual"
        SCHEDULE = "schedule", "schedule"
        CLI = "cli", "command line"

    FINISHED = (Status.DONE, Status.FAILED, Status.CANCELLED)

    job = models.ForeignKey(BenchJob, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.MANUAL)
    task_id = models.CharField(max_length=64, null=True, blank=True, unique=True)
    cancel_requested = models.BooleanField(default=False)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    workload = models.CharField(max_length=60, blank=True, default="")
    targets = models.JSONField(default=list, blank=True)  # [{"name", "dsn", "safe", "kind"}], no passwords
    settings = models.JSONField(default=dict, blank=True)
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    config_version = models.PositiveIntegerField(null=True, blank=True)
    config_note = models.CharField(max_length=255, blank=True, default="")
    steps_total = models.PositiveIntegerField(default=0)
    progress = models.JSONField(null=True, blank=True)  # the running step and its last point
    result = models.JSONField(null=True, blank=True)  # the engine's whole result document
    notes = models.JSONField(default=list, blank=True)
    #: The tables its setup created: its cleanup drops them, or, when its worker dies, whoever finds it lost.
    made_tables = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.job.name} run {self.pk}"

    @property
    def finished(self) -> bool:
        """Whether the run has ended (done, failed or cancelled)."""
        return self.status in self.FINISHED


class RunStep(models.Model):
    """The summary of one step of a run (one target at one connection count in one round)."""

    run = models.ForeignKey(BenchRun, on_delete=models.CASCADE, related_name="steps")
    index = models.PositiveIntegerField()
    round = models.PositiveIntegerField(default=1)
    target = models.CharField(max_length=63)
    connections = models.PositiveIntegerField()
    status = models.CharField(max_length=10, default="done")
    error = models.TextField(blank=True, default="")
    duration_s = models.FloatField(default=0.0)
    transactions = models.PositiveBigIntegerField(default=0)
    failed_transactions = models.PositiveBigIntegerField(default=0)
    queries = models.PositiveBigIntegerField(default=0)
    errors = models.PositiveBigIntegerField(default=0)
    tps = models.FloatField(default=0.0)
    qps = models.FloatField(default=0.0)
    lat_min_ms = models.FloatField(null=True, blank=True)
    lat_avg_ms = models.FloatField(null=True, blank=True)
    lat_p50_ms = models.FloatField(null=True, blank=True)
    lat_p95_ms = models.FloatField(null=True, blank=True)
    lat_p99_ms = models.FloatField(null=True, blank=True)
    lat_max_ms = models.FloatField(null=True, blank=True)
    statements = models.JSONField(default=list, blank=True)
    error_codes = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="bench_step_once")]


class RunPoint(models.Model):
    """One progress interval of a step, written while the run goes."""

    run = models.ForeignKey(BenchRun, on_delete=models.CASCADE, related_name="points")
    step = models.PositiveIntegerField()
    target = models.CharField(max_length=63)
    connections = models.PositiveIntegerField()
    t = models.FloatField(help_text="seconds since the step's measured part began")
    tps = models.FloatField()
    qps = models.FloatField()
    lat_avg_ms = models.FloatField(null=True, blank=True)
    lat_p95_ms = models.FloatField(null=True, blank=True)
    errors = models.PositiveIntegerField(default=0)
    lag_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["run", "step", "t"]
        indexes = [models.Index(fields=["run", "step", "t"], name="bench_point_run_step_t")]
