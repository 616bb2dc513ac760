"""Hot rows through the whole product (``devstack.stack``) in a real browser (Playwright driving Debian's Chromium):
an operator writes a query rule that queues ``UPDATE hot ... WHERE id = N`` by its key (``trx_queue`` hot,
``trx_queue_key`` \\1) in the rule form and publishes it; a real node runs it. One client then holds key 1 in an
open transaction, and a second client's UPDATE of the same row waits in the proxy's queue, not on the server's row
lock: the node's ``/stats`` and the Hot rows page show one waiter on queue ``hot`` while the server sees no lock
wait; once the first commits, the second completes."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pymysql
import pytest
from playwright.sync_api import Browser, Page, expect

from devstack import stack
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox, SandboxServer
from tests.live.fleet.web.test_browser import LIVE_UPDATE_TIMEOUT_MS, browser
from tests.support.fleet_seed import cluster_seed
from tests.support.monitor_support import global_variables

__all__ = ["browser"]  # the browser test module's fixture, used here

NODE = "hot-1"
SCHEMA = "hotrows_ui"
OPERATOR, PASSWORD = "hot-operator", "hot-operator-pass"
PATTERN = r"^UPDATE hot SET .* WHERE id = (\d+)"
UPDATE = "UPDATE hot SET n = n + 1 WHERE id = 1"
#: How long the node may take to apply a published version, or to report (it reports every second).
NODE_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def primary(sandbox: Sandbox) -> Iterator[SandboxServer]:
    """The run's sandbox primary with ``hotrows_ui.hot``: rows 1 and 2, ``n`` 0."""
    server = sandbox.primary()
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
        cur.execute(f"CREATE DATABASE {SCHEMA}")
        cur.execute(f"CREATE TABLE {SCHEMA}.hot (id int PRIMARY KEY, n int NOT NULL)")
        cur.execute(f"INSERT INTO {SCHEMA}.hot VALUES (1, 0), (2, 0)")
    yield server
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")


@pytest.fixture(scope="module")
def fleet_shape(primary: SandboxServer) -> stack.FleetShape:
    """An operator, the cluster with a first config published (hostgroup 10: the primary; no rule; a queue wait
    may last a minute, far beyond what the test takes), and node ``hot-1`` reporting every second; the static files
    collected (the page polls with htmx)."""
    document = {
        "mysql_servers": [{"hostgroup_id": 10, "hostname": "127.0.0.1", "port": primary.port}],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 10}],
        "global_variables": global_variables({"mysql-threads": 1, "mysql-trx_queue_wait_timeout_ms": 60000}),
    }
    return stack.FleetShape(
        seed=cluster_seed("HOT", publish="no queue yet"),
        seed_env={
            "HOT_OPERATOR": OPERATOR,
            "HOT_PASSWORD": PASSWORD,
            "HOT_CLUSTER": "hot",
            "HOT_DOCUMENT": json.dumps(document),
        },
        nodes=[stack.NodeShape(NODE, report_interval=1)],
        beat=False,
        collectstatic=True,
    )


def node_stats(fleet: stack.RunningFleet, path: str = "") -> Any:
    """The node's ``/stats`` (or one of its sections), from its admin endpoint."""
    with urllib.request.urlopen(f"http://{fleet.node_admin(NODE)}/stats{path}", timeout=5) as response:
        return json.loads(response.read())


def hot_queue(fleet: stack.RunningFleet) -> dict[str, Any] | None:
    """Queue ``hot`` as the node's ``/stats`` has it now (None before its first use)."""
    queues = node_stats(fleet).get("trx_queue", {}).get("queues", [])
    return next((queue for queue in queues if queue["queue"] == "hot"), None)


def connect(fleet: stack.RunningFleet) -> pymysql.Connection:
    """A client of the node, in ``hotrows_ui``."""
    host, port = fleet.node_mysql(NODE).split(":")
    return pymysql.connect(host=host, port=int(port), user=APP_USER, password=APP_PASSWORD, database=SCHEMA)


def node_answers(fleet: stack.RunningFleet) -> bool:
    """Whether the node serves a client yet (before its first config it refuses the login)."""
    try:
        with connect(fleet) as conn, conn.cursor() as cur:
            cur.execute("SELECT n FROM hot WHERE id = 2")
            return cur.fetchall() == ((0,),)
    except pymysql.err.MySQLError:
        return False


def lock_waits(server: SandboxServer) -> int:
    """Transactions the server has waiting for a row lock."""
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT'")
        return int(cur.fetchone()[0])


def second_update(fleet: stack.RunningFleet) -> int:
    """The second client's transaction on key 1; the rows its UPDATE changed."""
    with connect(fleet) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        changed = cur.execute(UPDATE)
        conn.commit()
        return changed


def log_in(page: Page) -> None:
    """Log in as the operator."""
    page.goto("/login/")
    page.fill("input[name=username]", OPERATOR)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Fleet overview")


def test_a_rule_written_in_the_browser_queues_the_second_transaction_on_a_hot_row_in_the_node(
    browser: Browser, running_fleet: stack.RunningFleet, primary: SandboxServer
) -> None:
    fleet = running_fleet
    stack.wait_until(lambda: node_answers(fleet), "the node running the first config", NODE_TIMEOUT_S)
    context = browser.new_context(base_url=fleet.url)
    first = connect(fleet)
    pool = ThreadPoolExecutor(max_workers=1)
    waiting: Future[int] | None = None
    try:
        page = context.new_page()
        log_in(page)
        page.goto("/tables/query-rules/add/")
        expect(page.locator("#field-trx_queue .help")).to_contain_text("hot-row queue")
        page.fill("input[name=rule_id]", "1")
        page.set_checked("input[name=active]", True)
        page.fill("input[name=match_pattern]", PATTERN)
        page.fill("input[name=trx_queue]", "hot")
        page.fill("input[name=trx_queue_key]", r"\2")  # the pattern has one group: the node's own message says so
        page.click("button[type=submit]")
        errors = page.locator("#field-trx_queue_key .field-errors")
        expect(errors).to_contain_text("\\2 refers to a group match_pattern does not have")
        page.fill("input[name=trx_queue_key]", r"\1")
        page.click("button[type=submit]")
        expect(page.locator(".field-errors")).to_have_count(0)
        expect(page.locator("table.grid tbody")).to_contain_text("hot")

        page.goto("/publish/")
        expect(page.locator("table.changes")).to_contain_text("rule_id=1")
        page.fill("input[name=comment]", "queue the hot rows")
        page.click("form.publish-form button[type=submit]")
        expect(page.locator(".flash")).to_contain_text("Published version 2")
        stack.wait_until(
            lambda: any(row["rule_id"] == 1 for row in node_stats(fleet, "/query_rules")),
            "the node running the rule",
            NODE_TIMEOUT_S,
        )

        with first.cursor() as cur:  # holds key 1 of queue hot, and the row's lock on the server
            cur.execute("BEGIN")
            assert cur.execute(UPDATE) == 1
        waiting = pool.submit(second_update, fleet)
        stack.wait_until(
            lambda: (hot_queue(fleet) or {}).get("waiters") == 1, "the second transaction waiting", NODE_TIMEOUT_S
        )
        queue = hot_queue(fleet)
        assert queue is not None and queue["keys_active"] == 1
        assert not waiting.done()
        assert lock_waits(primary) == 0  # it waits in the proxy, holding nothing on the server

        page.goto("/hot-rows/")
        line = page.locator(f'table.hot-queues tr[data-node="{NODE}"][data-queue="hot"]')
        expect(line.locator("td.waiters")).to_have_text("1", timeout=LIVE_UPDATE_TIMEOUT_MS)
        expect(line.locator("td.keys-active")).to_have_text("1")
        fleet_line = page.locator('table.hot-queues tr[data-node="fleet"][data-queue="hot"]')
        expect(fleet_line.locator("td.waiters")).to_have_text("1")
        expect(page.locator("canvas[data-chart-url]")).to_have_count(6)

        first.commit()
        assert waiting.result(timeout=NODE_TIMEOUT_S) == 1
        with primary.connect() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT n FROM {SCHEMA}.hot WHERE id = 1")
            assert cur.fetchall() == ((2,),)
        stack.wait_until(lambda: (hot_queue(fleet) or {}).get("waiters") == 0, "the queue empty again", NODE_TIMEOUT_S)
        expect(line.locator("td.waiters")).to_have_text("0", timeout=LIVE_UPDATE_TIMEOUT_MS)  # htmx, no reload
        assert (hot_queue(fleet) or {}).get("transactions", 0) >= 2
    finally:
        if waiting is not None and not waiting.done():
            first.rollback()  # lets the second client finish
        pool.shutdown()
        first.close()
        context.close()
