"""Running benchmark jobs: queueing a run, claiming it once, running the engine while storing its progress live,
cancelling, and recording which config version the cluster's nodes had applied.

The engine runs in a thread of its own (its event loop must not share a thread with the ORM); its events come back
through a queue and are written here, and the cancel flag is read from the database between them. The same
``execute`` serves the Celery task (queue ``bench``) and ``manage.py bench job run``.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from fleet.bench.engine.plans import runner_for
from fleet.bench.engine.results import IntervalPoint, RunResult, StepResult
from fleet.bench.engine.runner import Listener, PlanError, drop_tables
from fleet.bench.engine.script import ScriptError
from fleet.bench.models import EXECUTE_TASK, QUEUE, BenchJob, BenchRun, RunPoint, RunStep
from fleet.core.models import ProxyNode

log = logging.getLogger("fleet.bench")

#: How often a running run reads its cancel flag and writes its heartbeat.
CHECK_EVERY_S = 0.5
#: A running run whose heartbeat is older than this lost its worker.
LOST_AFTER = timedelta(minutes=2)


def queue_run(job: BenchJob, user: Any = None, trigger: str = BenchRun.Trigger.MANUAL) -> BenchRun:
    """A new queued run of ``job``, sent to the bench worker once the transaction commits."""
    from fleet.celery import app

    run = BenchRun.objects.create(job=job, trigger=trigger, requested_by=user if user and user.pk else None)
    transaction.on_commit(lambda: app.send_task(EXECUTE_TASK, kwargs={"run": run.pk}, queue=QUEUE))
    return run


def scheduled_run(job_id: int, task_id: str) -> BenchRun | None:
    """The run a beat message for job ``job_id`` stands for (the same one when the message is delivered again);
    None when the job is gone or disabled, or another run of it is still going."""
    job = BenchJob.objects.filter(pk=job_id).first()
    if job is None or not job.enabled:
        log.info("bench job %s: gone or disabled, scheduled run skipped", job_id)
        return None
    existing = BenchRun.objects.filter(task_id=task_id).first()
    if existing is not None:
        return existing
    busy = job.runs.filter(status__in=(BenchRun.Status.QUEUED, BenchRun.Status.RUNNING)).exists()
    if busy:
        log.info("bench job %s: a run is still going, scheduled run skipped", job.name)
        return None
    return BenchRun.objects.create(job=job, trigger=BenchRun.Trigger.SCHEDULE, task_id=task_id)


def request_cancel(run: BenchRun) -> BenchRun:
    """Cancel ``run``: a queued one at once, a running one as soon as its worker reads the flag."""
    now = timezone.now()
    queued = BenchRun.objects.filter(pk=run.pk, status=BenchRun.Status.QUEUED)
    if queued.update(status=BenchRun.Status.CANCELLED, cancel_requested=True, finished_at=now):
        log.info("bench run %s cancelled before it started", run.pk)
    else:
        BenchRun.objects.filter(pk=run.pk, status=BenchRun.Status.RUNNING).update(cancel_requested=True)
    run.refresh_from_db()
    return run


def mark_lost_runs() -> int:
    """Fail the running runs whose worker stopped beating, and drop the tables they made; how many."""
    stale = BenchRun.objects.filter(status=BenchRun.Status.RUNNING, heartbeat_at__lt=timezone.now() - LOST_AFTER)
    lost = 0
    for run in stale.select_related("job"):
        failed = BenchRun.objects.filter(pk=run.pk, status=BenchRun.Status.RUNNING).update(
            status=BenchRun.Status.FAILED, finished_at=timezone.now(), error="the worker running it stopped"
        )
        if not failed:  # another worker found it first
            continue
        lost += 1
        targets = run.job.ordered_targets()
        if run.made_tables and targets:
            notes = asyncio.run(drop_tables(targets[0].engine_target(), run.made_tables))
            BenchRun.objects.filter(pk=run.pk).update(notes=[*run.notes, *notes])
            log.info("bench run %s was lost: %s", run.pk, "; ".join(notes))
    return lost


def applied_version(job: BenchJob, targets: list[Any]) -> tuple[int | None, str]:
    """The config version the run goes against, and a note: a proxy target's node's applied version, else the one
    every node of the job's cluster applied (the oldest, noted, when they differ)."""
    for target in targets:
        if target.node_id is not None:
            node = ProxyNode.objects.get(pk=target.node_id)
            return node.applied_version, f"applied on node {node.name}"
    if job.cluster_id is None:
        return None, ""
    versions = sorted(
        {v for v in ProxyNode.objects.filter(cluster_id=job.cluster_id).values_list("applied_version", flat=True)},
        key=lambda v: -1 if v is None else v,
    )
    if not versions:
        return None, "the cluster has no node"
    if len(versions) > 1:
        shown = ", ".join("none" if v is None else f"v{v}" for v in versions)
        return versions[0], f"nodes differ ({shown}): the oldest is recorded"
    return versions[0], "applied on every node of the cluster"


class _Events(Listener):
    """Hands the engine's events to the thread that writes them."""

    def __init__(self, sink: queue.Queue[tuple[str, Any]], echo: Listener | None) -> None:
        self.sink = sink
        self.echo = echo

    def step_started(self, step: StepResult) -> None:
        self.sink.put(("step", step))
        if self.echo:
            self.echo.step_started(step)

    def interval(self, step: StepResult, point: IntervalPoint) -> None:
        self.sink.put(("point", (step.index, step.target, step.connections, point)))
        if self.echo:
            self.echo.interval(step, point)

    def step_finished(self, step: StepResult) -> None:
        self.sink.put(("done", step))
        if self.echo:
            self.echo.step_finished(step)

    def note(self, text: str) -> None:
        if self.echo:
            self.echo.note(text)

    def tables_made(self, names: list[str]) -> None:
        self.sink.put(("tables", names))
        if self.echo:
            self.echo.tables_made(names)


def claim(run_id: int) -> BenchRun | None:
    """Move a queued run to running (once: a message delivered twice finds it taken); None when it was not queued."""
    now = timezone.now()
    taken = BenchRun.objects.filter(pk=run_id, status=BenchRun.Status.QUEUED).update(
        status=BenchRun.Status.RUNNING, started_at=now, heartbeat_at=now
    )
    if not taken:
        log.info("bench run %s is not queued (taken, cancelled or gone): nothing to do", run_id)
        return None
    return BenchRun.objects.select_related("job").get(pk=run_id)


def execute(run_id: int, echo: Listener | None = None) -> BenchRun | None:
    """Claim and run a queued run to its end, storing its progress and results; the run, or None when it was not
    queued. ``echo`` also hears the engine's events (the command line prints them)."""
    mark_lost_runs()
    run = claim(run_id)
    if run is None:
        return None
    job = run.job
    targets = job.ordered_targets()
    run.config_version, run.config_note = applied_version(job, targets)
    run.cluster_id = job.cluster_id
    run.workload = job.workload
    run.targets = [{**t.engine_target().describe(), "kind": t.kind} for t in targets]
    try:
        plan = job.plan(targets)
        plan.check()
    except (PlanError, ScriptError, ValueError) as exc:
        return _finish(run, BenchRun.Status.FAILED, error=str(exc))
    run.settings = plan.settings()
    run.steps_total = len(plan.steps())
    run.save(
        update_fields=["config_version", "config_note", "cluster", "workload", "targets", "settings", "steps_total"]
    )
    log.info("bench run %s of job %s: %s, %d steps", run.pk, job.name, job.workload, run.steps_total)
    events: queue.Queue[tuple[str, Any]] = queue.Queue()
    runner = runner_for(plan, _Events(events, echo))
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            outcome["result"] = runner.run()
        except Exception as exc:  # the engine's own bug or a refused plan: the run fails with it
            log.exception("bench run %s failed", run.pk)
            outcome["error"] = f"{type(exc).__name__}: {exc}"

    thread = threading.Thread(target=work, name=f"bench-run-{run.pk}", daemon=True)
    thread.start()
    try:
        _follow(run, runner, thread, events)
    except BaseException:
        runner.cancel()  # a worker shutting down or a time limit: stop, and let the engine clean up
        thread.join(60)
        _drain(run, events)
        _finish(run, BenchRun.Status.FAILED, error="stopped by the worker (shutdown or time limit)")
        raise
    result: RunResult | None = outcome.get("result")
    if result is None:
        return _finish(run, BenchRun.Status.FAILED, error=outcome.get("error", "the engine ended without a result"))
    status = {"done": BenchRun.Status.DONE, "cancelled": BenchRun.Status.CANCELLED}.get(
        result.status, BenchRun.Status.FAILED
    )
    return _finish(run, status, error=result.error, result=result)


def _follow(run: BenchRun, runner: Any, thread: threading.Thread, events: queue.Queue[tuple[str, Any]]) -> None:
    """Write the engine's events as they come; read the cancel flag and beat between them."""
    checked = 0.0
    while thread.is_alive() or not events.empty():
        try:
            kind, payload = events.get(timeout=CHECK_EVERY_S)
        except queue.Empty:
            pass
        else:
            _store(run, kind, payload)
        if time.monotonic() - checked >= CHECK_EVERY_S:
            checked = time.monotonic()
            BenchRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())
            if BenchRun.objects.filter(pk=run.pk, cancel_requested=True).exists():
                runner.cancel()


def _drain(run: BenchRun, events: queue.Queue[tuple[str, Any]]) -> None:
    while not events.empty():
        _store(run, *events.get())


def _store(run: BenchRun, kind: str, payload: Any) -> None:
    if kind == "step":
        step: StepResult = payload
        progress = {"step": step.index, "target": step.target, "connections": step.connections, "point": None}
        BenchRun.objects.filter(pk=run.pk).update(progress=progress)
    elif kind == "point":
        index, target, connections, point = payload
        RunPoint.objects.create(
            run=run,
            step=index,
            target=target,
            connections=connections,
            t=point.t,
            tps=point.tps,
            qps=point.qps,
            lat_avg_ms=point.lat_avg_ms,
            lat_p95_ms=point.lat_p95_ms,
            errors=point.errors,
            lag_ms=point.lag_ms,
        )
        progress = {"step": index, "target": target, "connections": connections, "point": point.__dict__}
        BenchRun.objects.filter(pk=run.pk).update(progress=progress)
    elif kind == "done":
        save_step(run, payload)
    elif kind == "tables":
        BenchRun.objects.filter(pk=run.pk).update(made_tables=payload)


def save_step(run: BenchRun, step: StepResult) -> RunStep:
    """Store a finished step's summary."""
    lat = step.latency
    values = {
        "round": step.round,
        "target": step.target,
        "connections": step.connections,
        "status": step.status,
        "error": step.error,
        "duration_s": step.duration_s,
        "transactions": step.transactions,
        "failed_transactions": step.failed_transactions,
        "queries": step.queries,
        "errors": step.error_count,
        "tps": step.tps,
        "qps": step.qps,
        "lat_min_ms": lat.min,
        "lat_avg_ms": lat.avg,
        "lat_p50_ms": lat.p50,
        "lat_p95_ms": lat.p95,
        "lat_p99_ms": lat.p99,
        "lat_max_ms": lat.max,
        "statements": [{**s.__dict__, "latency": s.latency.__dict__} for s in step.statements],
        "error_codes": step.errors,
    }
    saved, _ = RunStep.objects.update_or_create(run=run, index=step.index, defaults=values)
    return saved


def _finish(run: BenchRun, status: str, error: str = "", result: RunResult | None = None) -> BenchRun:
    run.status = status
    run.error = error
    run.finished_at = timezone.now()
    run.progress = None
    if result is not None:
        run.result = result.to_dict()
        run.notes = result.notes
        if RunStep.objects.filter(run=run).count() != len(result.steps):
            for step in result.steps:
                save_step(run, step)
    run.save(update_fields=["status", "error", "finished_at", "progress", "result", "notes"])
    log.info("bench run %s %s%s", run.pk, status, f": {error}" if error else "")
    return run
