"""The benchmark jobs' Celery tasks, on the queue ``bench`` (their own worker: a run never delays a config push).

Both are safe to deliver twice (acks late, a worker lost): a run is claimed once (queued -> running), and a beat
message's run is keyed by the message's task id.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.conf import settings

from fleet.bench import service
from fleet.bench.models import EXECUTE_TASK, SCHEDULED_TASK

#: Celery's own limits, a backstop behind the engine's (every run ends within BENCH_MAX_RUN_SECONDS).
SOFT_LIMIT = settings.BENCH_MAX_RUN_SECONDS + 120
HARD_LIMIT = settings.BENCH_MAX_RUN_SECONDS + 300


@shared_task(name=EXECUTE_TASK, soft_time_limit=SOFT_LIMIT, time_limit=HARD_LIMIT)
def execute(run: int) -> None:
    """Run the queued run ``run`` (a manual one)."""
    service.execute(run)


@shared_task(name=SCHEDULED_TASK, bind=True, soft_time_limit=SOFT_LIMIT, time_limit=HARD_LIMIT)
def scheduled(self: Any, job: int) -> None:
    """A job's crontab fired (beat): make its run and run it."""
    run = service.scheduled_run(job, self.request.id)
    if run is not None:
        service.execute(run.pk)
