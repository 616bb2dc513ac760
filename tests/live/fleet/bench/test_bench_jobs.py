"""Benchmark jobs in the control plane: targets and jobs through the API (roles, write-only passwords, plans checked
as the engine runs them, crontab schedules kept in django-celery-beat), a run executed against the sandbox with its
results stored, exported and shown, cancelling, and the config version each run records."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import User as Account
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from devstack.sandbox import Sandbox
from fleet.bench import service
from fleet.bench.models import BenchJob, BenchRun, RunPoint
from fleet.core import roles
from fleet.core.models import Cluster, ProxyNode
from tests.support.control_plane import LOGIN_PASSWORD
from tests.unit.fleet.bench.test_bench_jobs import API, job_body, target_body

pytestmark = pytest.mark.django_db


@pytest.mark.sandbox
def test_a_run_executes_against_the_sandbox_and_its_results_are_stored_and_exported(
    sandbox: Sandbox, api_operator: APIClient, api_viewer: APIClient, accounts: dict[str, Account]
) -> None:
    cluster = Cluster.objects.create(name="benched")
    for name in ("n1", "n2"):
        ProxyNode.objects.create(cluster=cluster, name=f"bench-{name}", applied_version=4)
    api_operator.post(f"{API}/targets/", target_body(sandbox), format="json")
    job_id = api_operator.post(f"{API}/jobs/", job_body(cluster="benched"), format="json").json()["id"]
    queued = api_operator.post(f"{API}/jobs/{job_id}/run/")
    assert queued.status_code == 201 and queued.json()["status"] == "queued"

    run = service.execute(queued.json()["id"])  # what the bench worker does with the message
    assert run is not None and (run.status, run.error) == ("done", "")
    assert service.execute(run.pk) is None  # a second delivery finds it taken
    run.refresh_from_db()
    assert len(run.made_tables) == 1 and f"cleanup dropped {run.made_tables[0]}" in run.notes

    detail = api_viewer.get(f"{API}/runs/{run.pk}/").json()
    assert (detail["config_version"], detail["config_note"]) == (4, "applied on every node of the cluster")
    assert [(s["target"], s["connections"], s["status"]) for s in detail["steps"]] == [
        ("primary", 1, "done"),
        ("primary", 2, "done"),
    ]
    assert detail["steps"][0]["statements"][0]["name"] == "SQL01"
    assert detail["targets"][0]["dsn"].startswith("mysql://app@127.0.0.1:") and "password" not in detail["targets"][0]
    assert any(note.startswith("cleanup dropped pfbench_sbtest_") for note in detail["notes"])
    assert RunPoint.objects.filter(run=run).count() >= 2

    steps = list(
        csv.DictReader(io.StringIO(api_viewer.get(f"{API}/runs/{run.pk}/export/?what=steps").content.decode()))
    )
    assert [int(s["connections"]) for s in steps] == [1, 2] and float(steps[0]["tps"]) > 0
    series = api_viewer.get(f"{API}/runs/{run.pk}/export/?what=series").content.decode().splitlines()
    assert series[0] == "step,target,connections,t,tps,qps,lat_avg_ms,lat_p95_ms,errors,lag_ms" and len(series) > 2
    document = api_viewer.get(f"{API}/runs/{run.pk}/export/?what=result").json()
    assert document["result"]["tool"] == "proxyfleet-bench" and len(document["result"]["steps"]) == 2
    assert api_viewer.get(f"{API}/runs/{run.pk}/export/?what=pdf").status_code == 400
    charts = api_viewer.get(f"{API}/runs/{run.pk}/series/").json()
    assert charts["sweep"]["connections"] == [1, 2] and charts["sweep"]["targets"][0]["ratio"] == [1.0, 1.0]

    browser = Client()
    browser.login(username=accounts[roles.VIEWER].username, password=LOGIN_PASSWORD)
    page = browser.get(f"/bench/runs/{run.pk}/").content.decode()
    assert 'id="chart-tps"' in page and "SQL01" in page and "Cancel run" not in page
    assert browser.get(f"/bench/runs/{run.pk}/export/steps.csv").content.decode().startswith("index,round,target")
    assert browser.get(f"/bench/runs/{run.pk}/export/nope.txt").status_code == 404
    history = browser.get(f"/bench/jobs/{job_id}/history.json").json()
    assert history["runs"] == [{"run": run.pk, "at": history["runs"][0]["at"], "version": 4}]
    assert "Run now" not in browser.get(f"/bench/jobs/{job_id}/").content.decode()


@pytest.mark.sandbox
def test_a_lost_run_s_tables_are_dropped_by_whoever_finds_it_lost(sandbox: Sandbox, api_operator: APIClient) -> None:
    api_operator.post(f"{API}/targets/", target_body(sandbox), format="json")
    job = BenchJob.objects.get(pk=api_operator.post(f"{API}/jobs/", job_body(), format="json").json()["id"])
    table = "pfbench_lost_0001"
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE test.{table} (id int primary key)")
    run = service.queue_run(job)
    old = timezone.now() - timedelta(minutes=5)
    BenchRun.objects.filter(pk=run.pk).update(status="running", heartbeat_at=old, made_tables=[table])

    assert service.mark_lost_runs() == 1
    run.refresh_from_db()
    assert (run.status, run.notes) == ("failed", [f"cleanup dropped {table}"])
    with sandbox.primary().connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_NAME = %s", (table,))
        assert cur.fetchone() == (0,)
    assert service.mark_lost_runs() == 0  # found once
