"""Benchmark jobs in the control plane: targets and jobs through the API (roles, write-only passwords, plans checked
as the engine runs them, crontab schedules kept in django-celery-beat), a run executed against the sandbox with its
results stored, exported and shown, cancelling, and the config version each run records."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User as Account
from django.test import Client
from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from rest_framework.test import APIClient

from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from fleet.bench import service
from fleet.bench.models import BenchJob, BenchRun, BenchTarget
from fleet.core import roles
from fleet.core.models import AuditEntry, Cluster, ProxyNode
from tests.support.control_plane import LOGIN_PASSWORD

pytestmark = pytest.mark.django_db

API = "/api/v1/bench"


def target_body(sandbox: Sandbox | None = None, **overrides: Any) -> dict[str, Any]:
    port = sandbox.primary().port if sandbox is not None else 3306
    body = {"name": "primary", "host": "127.0.0.1", "port": port, "user": APP_USER, "password": APP_PASSWORD}
    return {**body, "database": "test", "safe_for_writes": True, **overrides}


def job_body(**overrides: Any) -> dict[str, Any]:
    body = {"name": "points", "workload": "point-select", "targets": ["primary"], "connections": "1,2"}
    return {**body, "duration": 1, "rows": 100, "interval": 0.5, **overrides}


def test_targets_keep_their_password_write_only_and_viewers_only_read(
    api_operator: APIClient, api_viewer: APIClient
) -> None:
    created = api_operator.post(f"{API}/targets/", target_body(), format="json")
    assert created.status_code == 201, created.json()
    assert "password" not in created.json() and created.json()["safe_for_writes"] is True
    changed = api_operator.patch(f"{API}/targets/{created.json()['id']}/", {"port": 3307}, format="json")
    assert changed.status_code == 200
    assert BenchTarget.objects.get().password == APP_PASSWORD  # kept when left out
    assert api_viewer.get(f"{API}/targets/").json()["results"][0]["name"] == "primary"
    assert api_viewer.post(f"{API}/targets/", target_body(name="other"), format="json").status_code == 403
    bad = api_operator.post(f"{API}/targets/", target_body(name="bad name!", port=70000), format="json")
    assert bad.status_code == 400 and set(bad.json()) == {"name", "port"}
    entry = AuditEntry.objects.filter(table="bench_target").first()
    assert entry is not None and entry.after["password"] == "********"


def test_a_job_is_refused_with_the_field_named(api_operator: APIClient) -> None:
    api_operator.post(f"{API}/targets/", target_body(safe_for_writes=False), format="json")
    refusals = {
        "targets": job_body(),  # point-select creates its table: the target must be marked safe
        "schedule": job_body(schedule="*/5 * * *"),
        "script": job_body(workload="script", script="begin\n  select :missing\nend\n"),
        "connections": job_body(connections="0"),
        "time_limit": job_body(
            workload="script", script="begin\n select 1\nend\n", connections="1..40", duration=60, time_limit=600
        ),
    }
    for field, body in refusals.items():
        answer = api_operator.post(f"{API}/jobs/", body, format="json")
        assert answer.status_code == 400 and field in answer.json(), (field, answer.json())
    script_error = api_operator.post(f"{API}/jobs/", refusals["script"], format="json").json()["script"][0]
    assert script_error == "line 2: :missing is not declared (declared: none)"
    assert (
        "is not marked safe for benchmarks"
        in api_operator.post(f"{API}/jobs/", job_body(), format="json").json()["targets"][0]
    )
    assert BenchJob.objects.count() == 0


def test_a_schedule_is_a_beat_entry_kept_in_step_with_its_job(api_operator: APIClient) -> None:
    api_operator.post(f"{API}/targets/", target_body(), format="json")
    created = api_operator.post(f"{API}/jobs/", job_body(schedule="*/15 2 * * 1-5"), format="json")
    assert created.status_code == 201, created.json()
    job = BenchJob.objects.get()
    task = PeriodicTask.objects.get(pk=job.periodic_task_id)
    assert (task.task, task.queue, json.loads(task.kwargs), task.enabled) == (
        "proxyfleet.bench.scheduled", "bench", {"job": job.pk}, True
    )  # fmt: skip
    crontab = task.crontab
    assert (crontab.minute, crontab.hour, crontab.day_of_week) == ("*/15", "2", "1-5")
    api_operator.patch(f"{API}/jobs/{job.pk}/", {"enabled": False, "schedule": "0 3 * * *"}, format="json")
    task.refresh_from_db()
    assert (task.crontab.minute, task.crontab.hour, task.enabled) == ("0", "3", False)
    api_operator.patch(f"{API}/jobs/{job.pk}/", {"schedule": ""}, format="json")
    assert not PeriodicTask.objects.filter(pk=task.pk).exists()
    assert api_operator.get(f"{API}/jobs/{job.pk}/").json()["targets"] == ["primary"]
    assert api_operator.delete(f"{API}/jobs/{job.pk}/").status_code == 204


def test_cancelling_a_queued_run_ends_it_at_once_and_a_finished_one_stays(api_operator: APIClient) -> None:
    api_operator.post(f"{API}/targets/", target_body(), format="json")
    job = BenchJob.objects.get(pk=api_operator.post(f"{API}/jobs/", job_body(), format="json").json()["id"])
    run = service.queue_run(job)
    cancelled = api_operator.post(f"{API}/runs/{run.pk}/cancel/").json()
    assert (cancelled["status"], cancelled["cancel_requested"]) == ("cancelled", True)
    assert service.execute(run.pk) is None  # the worker, when the message comes, does nothing
    again = api_operator.post(f"{API}/runs/{run.pk}/cancel/").json()
    assert again["status"] == "cancelled"


def test_scheduled_messages_make_one_run_each_and_lost_runs_fail(api_operator: APIClient) -> None:
    api_operator.post(f"{API}/targets/", target_body(), format="json")
    job = BenchJob.objects.get(pk=api_operator.post(f"{API}/jobs/", job_body(), format="json").json()["id"])
    first = service.scheduled_run(job.pk, "task-1")
    assert first is not None and first.trigger == "schedule"
    assert service.scheduled_run(job.pk, "task-1") == first  # the same message delivered again
    assert service.scheduled_run(job.pk, "task-2") is None  # the job's run is still queued
    BenchRun.objects.filter(pk=first.pk).update(status="running", heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert service.mark_lost_runs() == 1
    first.refresh_from_db()
    assert (first.status, first.error) == ("failed", "the worker running it stopped")
    assert service.scheduled_run(job.pk + 1000, "task-3") is None


def test_the_config_version_of_a_proxy_target_is_its_node_s(api_operator: APIClient) -> None:
    cluster = Cluster.objects.create(name="mixed")
    node = ProxyNode.objects.create(cluster=cluster, name="mixed-a", applied_version=7)
    ProxyNode.objects.create(cluster=cluster, name="mixed-b", applied_version=6)
    api_operator.post(f"{API}/targets/", target_body(kind="proxy", node="mixed-a"), format="json")
    job = BenchJob.objects.get(pk=api_operator.post(f"{API}/jobs/", job_body(), format="json").json()["id"])
    assert service.applied_version(job, job.ordered_targets()) == (7, f"applied on node {node.name}")
    job.cluster = cluster
    assert service.applied_version(job, []) == (6, "nodes differ (v6, v7): the oldest is recorded")


def test_the_pages_for_operators_and_viewers(accounts: dict[str, Account], api_operator: APIClient) -> None:
    browser = Client()
    browser.login(username=accounts[roles.OPERATOR].username, password=LOGIN_PASSWORD)
    made = browser.post("/bench/targets/new/", {**target_body(), "kind": "direct", "port": "3306"})
    assert made.status_code == 302 and BenchTarget.objects.get().name == "primary"
    refused = browser.post("/bench/jobs/new/", {**job_body(), "targets": "primary, ghost", "warmup": "0"})
    assert "no target named &#x27;ghost&#x27;" in refused.content.decode()
    form = {**job_body(), "targets": "primary", "warmup": "0", "rounds": "1", "processes": "1", "time_limit": "600"}
    saved = browser.post("/bench/jobs/new/", {**form, "schedule": "0 4 * * *", "enabled": "on"})
    assert saved.status_code == 302, saved.content.decode()[:2000]
    job = BenchJob.objects.get()
    assert job.periodic_task is not None and browser.get("/bench/").content.decode().count("points") >= 1
    assert "Run now" in browser.get(f"/bench/jobs/{job.pk}/").content.decode()
    ran = browser.post(f"/bench/jobs/{job.pk}/run/")
    run = BenchRun.objects.get()
    assert ran["Location"] == f"/bench/runs/{run.pk}/" and run.status == "queued"
    assert "Cancel run" in browser.get(f"/bench/runs/{run.pk}/").content.decode()
    viewer = Client()
    viewer.login(username=accounts[roles.VIEWER].username, password=LOGIN_PASSWORD)
    assert viewer.post(f"/bench/jobs/{job.pk}/run/").status_code == 403
    assert viewer.get("/bench/jobs/new/").status_code == 403
    assert viewer.get("/bench/targets/").status_code == 200
