"""Benchmark jobs end to end: the control plane (gunicorn, the bench worker on queue ``bench``, Celery beat with the
database scheduler) on a file SQLite database, a private redis-server, the sandbox MariaDB.

A job whose every-minute crontab last fired more than a minute ago is due when beat starts: beat sends it, the bench
worker runs it, and its results are stored. A long run started through the API is cancelled through the API: it
stops, and the table it made is dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devstack import stack
from devstack.api_client import ApiClient
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox

pytestmark = pytest.mark.sandbox

OPERATOR, OPERATOR_PASSWORD = "bench-operator", "bench-operator-pass"
#: How long a short run may take to be sent, run and stored (it takes a few seconds).
RUN_TIMEOUT = 60
SEED = """
import json, os
from datetime import timedelta
from django.contrib.auth.models import User
from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from fleet.bench import editing
from fleet.bench.models import BenchJob, BenchTarget
from fleet.core import roles
account = User.objects.create_user(os.environ["E2E_OPERATOR"], password=os.environ["E2E_PASSWORD"])
roles.grant(account, roles.OPERATOR)
target = editing.save_target(BenchTarget(**json.loads(os.environ["E2E_TARGET"])), account)
job = BenchJob(name="every-minute", workload="point-select", connections="1,2", duration=1, interval=0.5, rows=100,
               schedule="* * * * *")
editing.save_job(job, [target], account)
PeriodicTask.objects.filter(pk=job.periodic_task_id).update(last_run_at=timezone.now() - timedelta(minutes=2))
"""


@dataclass
class ControlPlane:
    api: ApiClient
    worker: stack.Service
    beat: stack.Service
    workdir: Path


@pytest.fixture(scope="module")
def fleet_shape(sandbox: Sandbox) -> stack.FleetShape:
    """The operator, the sandbox's primary as a target, the every-minute job; the bench worker and beat, no node."""
    primary = sandbox.primary()
    target = {"name": "primary", "host": primary.host, "port": primary.port, "user": APP_USER}
    target.update(password=APP_PASSWORD, database="test", safe_for_writes=True)
    return stack.FleetShape(
        seed=SEED,
        seed_env={"E2E_OPERATOR": OPERATOR, "E2E_PASSWORD": OPERATOR_PASSWORD, "E2E_TARGET": json.dumps(target)},
        worker_queue="bench",
        worker_pool="prefork",
    )


@pytest.fixture(scope="module")
def control_plane(running_fleet: stack.RunningFleet) -> ControlPlane:
    assert running_fleet.beat is not None
    api = ApiClient(running_fleet.url, OPERATOR, OPERATOR_PASSWORD)
    return ControlPlane(api, running_fleet.worker, running_fleet.beat, running_fleet.workdir)


def pfbench_tables(sandbox: Sandbox) -> list[str]:
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_NAME LIKE 'pfbench%'")
        return [row[0] for row in cur.fetchall()]


def dropped_tables(detail: dict[str, Any]) -> list[str]:
    """The tables a run's cleanup says it dropped."""
    prefix = "cleanup dropped "
    return [note.removeprefix(prefix) for note in detail["notes"] if note.startswith(prefix)]


def wait_for_run(cp: ControlPlane, what: str, check: Any, query: str = "") -> dict[str, Any]:
    """The first run (of ``/bench/runs/?QUERY``) for which ``check`` holds, waiting for it."""
    found: dict[str, Any] = {}

    def look() -> bool:
        for run in cp.api.call("GET", f"/bench/runs/?{query}")["results"]:
            if check(run):
                found.update(run)
                return True
        return False

    stack.wait_until(look, what, RUN_TIMEOUT, cp.worker)
    return found


def test_a_scheduled_job_fires_through_beat_and_its_run_is_stored(
    control_plane: ControlPlane, sandbox: Sandbox
) -> None:
    run = wait_for_run(
        control_plane, "a scheduled run that finished", lambda r: r["trigger"] == "schedule" and r["finished_at"]
    )
    assert (run["job"], run["status"], run["error"]) == ("every-minute", "done", "")
    detail = control_plane.api.call("GET", f"/bench/runs/{run['id']}/")
    assert [(s["connections"], s["status"]) for s in detail["steps"]] == [(1, "done"), (2, "done")]
    assert all(s["transactions"] > 0 and s["statements"][0]["executions"] == s["transactions"] for s in detail["steps"])
    series = control_plane.api.call("GET", f"/bench/runs/{run['id']}/series/")
    assert {s["step"] for s in series["timeline"]["series"]} == {0, 1}
    dropped = dropped_tables(detail)
    assert len(dropped) == 1
    # The every-minute job may be running again by now: its own next table is not this run's.
    assert dropped[0] not in pfbench_tables(sandbox)
    assert "proxyfleet.bench.scheduled" in control_plane.worker.log(400)  # run by the bench worker


def test_a_run_cancelled_through_the_api_stops_and_drops_its_table(
    control_plane: ControlPlane, sandbox: Sandbox
) -> None:
    api = control_plane.api
    job = api.call(
        "POST",
        "/bench/jobs/",
        {"name": "long", "workload": "point-select", "targets": ["primary"], "connections": "2,4", "duration": 300,
         "rows": 100, "interval": 0.5},
    )  # fmt: skip
    started = api.call("POST", f"/bench/jobs/{job['id']}/run/")
    wait_for_run(
        control_plane,
        "a running run with progress",
        lambda r: r["id"] == started["id"] and r["status"] == "running" and (r["progress"] or {}).get("point"),
        f"job={job['id']}",
    )
    assert pfbench_tables(sandbox) != []  # its table exists while it runs
    assert api.call("POST", f"/bench/runs/{started['id']}/cancel/")["cancel_requested"] is True

    run = wait_for_run(
        control_plane,
        "the cancelled run's end",
        lambda r: r["id"] == started["id"] and r["finished_at"],
        f"job={job['id']}",
    )
    assert run["status"] == "cancelled"
    detail = api.call("GET", f"/bench/runs/{run['id']}/")
    assert [s["status"] for s in detail["steps"]] == ["cancelled"]  # the second step never started
    dropped = dropped_tables(detail)
    assert len(dropped) == 1 and dropped[0].startswith("pfbench_sbtest_")
    assert dropped[0] not in pfbench_tables(sandbox)  # the every-minute job may have a table of its own by now
