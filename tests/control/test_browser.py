"""The web UI in a real browser (Playwright driving Debian's Chromium, one browser for the module) against a live
Django server.

The proxy nodes here are played by the test: what a node would send (its acks and its reports, including a backend
it shuns after the server went down) goes through the control plane's own ingestion, the task functions of
``fleet.core.tasks`` called directly (``tests/control/node_messages.py``). Publishing is real: the version is
stored and pushed to each node's queue on the real Redis (the queues are removed afterwards). The whole loop with
real proxy nodes, Celery workers and MariaDB is the end-to-end test's.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings
from django.utils import timezone
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect, sync_playwright

from fleet.core import roles
from fleet.core.models import Cluster, ConfigVersion, ProxyNode
from tests.control.conftest import LOGIN_PASSWORD, make_account
from tests.control.node_messages import pool_row, send_ack, send_report, snapshot

pytestmark = pytest.mark.django_db(transaction=True)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: How long a page may take to show what the server now says (htmx polls every 2 to 3 s).
LIVE_UPDATE_TIMEOUT_MS = 15_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the module.

    Playwright's sync API keeps an event loop running in this thread, so Django would refuse the test's own ORM
    calls as "async unsafe"; they are plain synchronous code, which DJANGO_ALLOW_ASYNC_UNSAFE allows while the
    browser is up.
    """
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def context(browser: Browser, live_server) -> Iterator[BrowserContext]:
    """A fresh browser context (cookies, storage) on the live server, closed after the test."""
    context = browser.new_context(base_url=live_server.url)
    yield context
    context.close()


@pytest.fixture
def nodes() -> Iterator[list[ProxyNode]]:
    """Two nodes of a fresh cluster, named uniquely; their Redis queues are removed afterwards."""
    cluster = Cluster.objects.create(name="browser")
    prefix = f"browser-{uuid.uuid4().hex[:8]}"
    made = [ProxyNode.objects.create(cluster=cluster, name=f"{prefix}-{i}") for i in (1, 2)]
    yield made
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(*(node.queue for node in made))


def log_in(context: BrowserContext, role: str) -> Page:
    """A page logged in through the login form as a fresh account holding ``role``."""
    account = make_account(role)
    page = context.new_page()
    page.goto("/login/")
    page.fill("input[name=username]", account.username)
    page.fill("input[name=password]", LOGIN_PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Fleet overview")
    return page


def node_cell(page: Page, node: ProxyNode, cell: str) -> Locator:
    """A cell (``applied``, ``state``, ``health``) of ``node``'s row on the overview."""
    return page.locator(f'tr[data-node="{node.name}"] td.{cell}')


def test_add_server_fix_the_port_publish_and_see_both_nodes_apply(
    live_server, context: BrowserContext, nodes: list[ProxyNode]
) -> None:
    page = log_in(context, roles.OPERATOR)

    page.goto("/tables/servers/add/")
    page.fill("input[name=hostname]", "db2.internal")
    page.fill("input[name=hostgroup_id]", "10")
    page.fill("input[name=port]", "70000")
    page.click("button[type=submit]")
    expect(page.locator("#field-port .field-errors")).to_have_text("70000 is above the maximum 65535")
    expect(page.locator(".field-errors")).to_have_count(1)
    page.fill("input[name=port]", "3307")
    page.click("button[type=submit]")
    expect(page).to_have_url(f"{live_server.url}/tables/servers/")
    expect(page.locator("table.grid tbody")).to_contain_text("db2.internal")

    page.goto("/publish/")
    expect(page.locator("table.changes")).to_contain_text("hostgroup_id=10, hostname=db2.internal, port=3307")
    page.fill("input[name=comment]", "first server")
    page.click("form.publish-form button[type=submit]")
    expect(page).to_have_url(f"{live_server.url}/")
    expect(page.locator(".flash")).to_contain_text("Published version 1")
    for node in nodes:  # sent to both nodes, neither has answered
        expect(node_cell(page, node, "state")).to_contain_text("pending v1")

    version = ConfigVersion.objects.get(cluster=nodes[0].cluster)
    assert (version.number, version.comment, version.author.username) == (1, "first server", "operator-account")
    for node in nodes:  # each node applies it, acknowledges, and reports
        now = timezone.now()
        send_ack(node, version, now)
        send_report(node, now, snapshot([pool_row("db2.internal", 3307, 10)]), version)
    for node in nodes:  # the overview polls: no reload
        expect(node_cell(page, node, "applied")).to_have_text("v1", timeout=LIVE_UPDATE_TIMEOUT_MS)
        expect(node_cell(page, node, "state")).to_have_text("applied")
        expect(node_cell(page, node, "health")).to_have_text("ok")


def test_a_backend_going_down_shows_on_the_live_dashboard(context: BrowserContext, nodes: list[ProxyNode]) -> None:
    node = nodes[0]
    send_report(node, timezone.now(), snapshot([pool_row("db1", 3306, 10, ConnUsed=1, ConnFree=3)]))
    page = log_in(context, roles.VIEWER)
    page.goto("/tables/servers/")
    expect(page.locator("h1")).to_contain_text("Servers")
    expect(page.locator("a.button", has_text="Add")).to_have_count(0)  # a viewer is offered no changes

    page.goto("/backends/")
    status = page.locator(f'tr[data-server="10/db1:3306/{node.name}"] .status')
    expect(status).to_have_text("ONLINE")
    expect(page.locator("canvas[data-chart-url]")).to_have_count(2)
    assert page.evaluate("typeof window.Chart") == "function"  # Chart.js, served from static/
    page.evaluate("window.sameDocument = true")

    # the server stops: the node's pool fails to connect and shuns it, and says so in its next report
    send_report(node, timezone.now(), snapshot([pool_row("db1", 3306, 10, "SHUNNED", ConnERR=5)]))
    expect(status).to_have_text("SHUNNED", timeout=LIVE_UPDATE_TIMEOUT_MS)
    expect(page.locator(f'tr[data-server="10/db1:3306/{node.name}"] td').nth(5)).to_have_text("5")
    assert page.evaluate("window.sameDocument") is True  # htmx swapped the table in; the page never reloaded
