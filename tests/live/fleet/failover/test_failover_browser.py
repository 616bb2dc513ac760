"""The Failover page in a real browser (the Chromium of ``test_browser``): what the nodes report shows up live, a
viewer has no buttons, and an operator's switchover asks for confirmation and, refused, says why."""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import BrowserContext, expect

from devstack.failover_sandbox import ha_document
from devstack.ports import free_port
from fleet.core import publishing, roles
from fleet.core.models import Cluster, ProxyNode
from tests.live.fleet.web.test_browser import LIVE_UPDATE_TIMEOUT_MS, browser, context, log_in  # noqa: F401 (fixtures)
from tests.support.control_plane import make_cluster
from tests.support.failover_fixtures import monitor_row, send_monitor_report

pytestmark = pytest.mark.django_db(transaction=True)

PRIMARY, REPLICA = (f"127.0.0.1:{free_port()}" for _ in range(2))


def report(cluster: Cluster, primary_up: bool) -> None:
    """Both nodes report the primary (up or shunned) and the replica."""
    now = timezone.now()
    for node in ProxyNode.objects.filter(cluster=cluster):
        rows = [monitor_row(PRIMARY, 10, up=primary_up, at=now), monitor_row(REPLICA, 20, at=now, read_only=True)]
        send_monitor_report(node, now, rows)


@pytest.fixture
def ha() -> Cluster:
    """A published cluster with two nodes (added after the publish, so nothing is pushed to them)."""
    cluster = make_cluster("browser-ha", ha_document(PRIMARY, [REPLICA]))
    publishing.publish(cluster, None, "seed")
    for name in ("browser-ha-a", "browser-ha-b"):
        ProxyNode.objects.create(cluster=cluster, name=name)
    return cluster


def test_the_topology_follows_the_reports_live_and_only_operators_act(
    context: BrowserContext,  # noqa: F811 (test_browser's fixture)
    ha: Cluster,
) -> None:
    viewer = log_in(context, roles.VIEWER)
    report(ha, primary_up=True)
    viewer.goto("/failover/")
    expect(viewer.locator(f'tr[data-server="{PRIMARY}"] td').nth(1)).to_have_text("primary")
    expect(viewer.locator(f'tr[data-server="{REPLICA}"]')).to_contain_text("up browser-ha-a")
    expect(viewer.get_by_role("button", name="Switch over to it")).to_have_count(0)
    viewer.close()

    page = log_in(context, roles.OPERATOR)
    report(ha, primary_up=True)  # fresh again however long the browser took so far (reports count for 15 s)
    page.goto("/failover/")
    checks = page.locator(f'tr[data-server="{PRIMARY}"] li[data-node="browser-ha-a"]')
    expect(checks).to_have_attribute("data-verdict", "up")
    report(ha, primary_up=False)  # no reload: htmx polls the cards
    expect(checks).to_have_attribute("data-verdict", "down", timeout=LIVE_UPDATE_TIMEOUT_MS)
    expect(page.locator(".votes")).to_contain_text(f"{PRIMARY} is reported down by 2 of 2 nodes")

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Switch over to it").click()
    expect(page.locator(".flash")).to_contain_text("Switchover refused: set the replication account")
