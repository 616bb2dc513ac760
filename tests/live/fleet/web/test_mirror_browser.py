"""The Mirror page in a real browser (Playwright driving Debian's Chromium): a node's mirror as it reports it, the
live table following a new report without a reload, and the charts drawn from the history."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import BrowserContext, expect

from fleet.core import roles
from fleet.core.models import Cluster, ProxyNode
from tests.live.fleet.web.test_browser import LIVE_UPDATE_TIMEOUT_MS, browser, context, log_in
from tests.support.node_messages import pool_row, send_report, snapshot
from tests.unit.fleet.core.test_mirror_history import mirror_section

pytestmark = pytest.mark.django_db(transaction=True)

__all__ = ["browser", "context"]  # the browser test module's fixtures, used here


def report(node: ProxyNode, seconds_ago: float, **mirror: object) -> None:
    """``node`` reports a snapshot with one backend and this mirror section."""
    stats = snapshot([pool_row("db1", 3306, 10)], questions=10, clients=1)
    stats["mirror"] = mirror_section(**mirror)
    send_report(node, timezone.now() - timedelta(seconds=seconds_ago), stats)


def test_the_mirror_page_follows_the_nodes_reports_live(live_server, context: BrowserContext) -> None:
    cluster = Cluster.objects.create(name="mirror-browser")
    node = ProxyNode.objects.create(cluster=cluster, name="mirror-browser-node")
    report(node, 10, mirrored=100, completed=90, queue_length=10)
    report(node, 5, mirrored=300, completed=240, dropped={"queue_full": 12}, queue_length=48, concurrency=16)
    page = log_in(context, roles.VIEWER)
    page.click("nav >> text=Mirror")
    expect(page.locator("h1")).to_contain_text("Mirror")
    row = page.locator(f'tr[data-node="{node.name}"]')
    expect(row).to_contain_text("queue_full: 12")
    expect(row.locator("td").nth(7)).to_have_text("16 / 16")
    charts = page.locator("canvas[data-chart-url]")
    expect(charts).to_have_count(6)
    page.wait_for_function(
        "() => [...document.querySelectorAll('canvas[data-chart-url]')].every(c => window.Chart.getChart(c)"
        " && window.Chart.getChart(c).data.datasets.length === 1)"
    )
    queue_points = page.evaluate(
        "() => window.Chart.getChart(document.querySelector('canvas[data-chart-url*=\"queue_length\"]'))"
        ".data.datasets[0].data.map(p => p.y)"
    )
    assert queue_points == [10, 48]

    report(node, 0, mirrored=500, completed=500, dropped={"queue_full": 12, "memory_full": 7}, lanes_waiting=3)
    expect(row).to_contain_text("memory_full: 7", timeout=LIVE_UPDATE_TIMEOUT_MS)  # htmx polled, no reload
    expect(row).to_contain_text("3 waiting")
