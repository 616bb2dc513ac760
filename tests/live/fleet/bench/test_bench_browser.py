"""A finished benchmark run in a real browser (Playwright driving Debian's Chromium): its charts are drawn with its
data, and the job's page charts it against the config version it ran with."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, expect

from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from fleet.bench import editing, service
from fleet.bench.models import BenchJob, BenchRun, BenchTarget
from fleet.core import roles
from fleet.core.models import Cluster, ProxyNode
from tests.live.fleet.web.test_browser import browser, log_in  # noqa: F401  (the module's Chromium fixture)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sandbox]

#: Points a chart holds: (non-empty y values of its datasets), read through Chart.js's own registry.
CHART_POINTS = """(id) => {
  const chart = window.Chart.getChart(document.getElementById(id));
  return chart ? chart.data.datasets.map((d) => d.data.filter((p) => p !== null && (p.y ?? p) !== null).length) : null;
}"""


@pytest.fixture
def context(browser: Browser, live_server) -> Iterator[BrowserContext]:  # noqa: F811
    context = browser.new_context(base_url=live_server.url)
    yield context
    context.close()


@pytest.fixture
def finished_run(sandbox: Sandbox) -> BenchRun:
    """A point-select job against the sandbox primary, run once (as the bench worker would) at config v3."""
    cluster = Cluster.objects.create(name="charted")
    ProxyNode.objects.create(cluster=cluster, name="charted-a", applied_version=3)
    primary = sandbox.primary()
    target = BenchTarget(name="primary", host=primary.host, port=primary.port, user=APP_USER, password=APP_PASSWORD)
    target.database, target.safe_for_writes = "test", True
    editing.save_target(target, None)
    job = BenchJob(name="charted", cluster=cluster, workload="point-select", connections="1,2", duration=1.5)
    job.rows, job.interval = 100, 0.5
    editing.save_job(job, [target], None)
    run = service.execute(service.queue_run(job).pk)
    assert run is not None and run.status == "done", run and run.error
    return run


def test_a_finished_run_shows_its_charts(live_server, context: BrowserContext, finished_run: BenchRun) -> None:
    page = log_in(context, roles.VIEWER)
    page.goto(f"/bench/runs/{finished_run.pk}/")
    expect(page.locator(".run-state")).to_have_text("done")
    expect(page.locator("table.bench-steps tbody tr[data-step]")).to_have_count(2)
    page.wait_for_function("() => window.Chart && window.Chart.getChart(document.getElementById('chart-sweep'))")
    page.wait_for_function(f"() => ({CHART_POINTS})('chart-tps')?.[0] > 0")
    tps_points = page.evaluate(CHART_POINTS, "chart-tps")
    assert len(tps_points) == 1 and tps_points[0] >= 2  # one target; points from both steps
    assert page.evaluate(CHART_POINTS, "chart-latency")[0] == tps_points[0]
    assert page.evaluate(CHART_POINTS, "chart-sweep") == [2]  # tps at 1 and at 2 connections
    assert page.evaluate("() => window.Chart.getChart(document.getElementById('chart-sweep')).data.labels") == [
        "1",
        "2",
    ]
    expect(page.locator("button.cancel-run")).to_have_count(0)  # finished, and a viewer

    page.click(f"a[href='/bench/jobs/{finished_run.job.pk}/']")
    page.wait_for_function(f"() => ({CHART_POINTS})('chart-versions')?.[0] === 1")
    labels = page.evaluate("() => window.Chart.getChart(document.getElementById('chart-versions')).data.labels")
    assert labels == [f"run {finished_run.pk} · v3"]


def test_the_flash_of_a_queued_run_goes_away_when_it_finishes(
    live_server, context: BrowserContext, finished_run: BenchRun
) -> None:
    page = log_in(context, roles.OPERATOR)
    page.goto(f"/bench/jobs/{finished_run.job.pk}/")
    page.click(f"form[action='/bench/jobs/{finished_run.job.pk}/run/'] button")
    expect(page.locator(".flash")).to_contain_text("queued for the bench worker")
    queued = BenchRun.objects.filter(job=finished_run.job, status="queued").get()
    assert service.execute(queued.pk).status == "done"  # as the bench worker would, while the page watches
    expect(page.locator(".run-state")).to_have_text("done", timeout=20_000)
    expect(page.locator(".flash")).to_have_count(0)  # "queued" would contradict the page now
