"""Hot rows through the whole product (``devstack.stack``) in a real browser (Playwright driving Debian's Chromium):
an operator writes a query rule that queues ``UPDATE hot ... WHERE id = N`` by its key (``trx_queue`` hot,
``trx_queue_key`` \\1) in the rule form and publishes it; a real node runs it. One client then holds key 1 in an
open transaction, and a second client's UPDATE of the same row waits in the proxy's queue, not on the server's row
lock: the node's ``/stats`` and the Hot rows page show one waiter on queue ``hot`` while the server sees no lock
wait; once the first commits, the second completes. Then the node finds a hot key by itself (lock wait timeouts on
``cold`` row 5), the Hot rows page shows its proposal, the operator accepts and publishes it, and the node queues
that statement by the key its WHERE clause names."""

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
COLD_UPDATE = "UPDATE cold SET n = n + 1 WHERE id = 5"
PROPOSAL = f"{SCHEMA}.cold.id"
#: How long the node may take to apply a published version, or to report (it reports every second).
NODE_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def primary(sandbox: Sandbox) -> Iterator[SandboxServer]:
    """The run's sandbox primary with ``hotrows_ui.hot`` (rows 1 and 2) and ``hotrows_ui.cold`` (rows 5 and 6), ``n``
    0."""
    server = sandbox.primary()
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
        cur.execute(f"CREATE DATABASE {SCHEMA}")
        cur.execute(f"CREATE TABLE {SCHEMA}.hot (id int PRIMARY KEY, n int NOT NULL)")
        cur.execute(f"INSERT INTO {SCHEMA}.hot VALUES (1, 0), (2, 0)")
        cur.execute(f"CREATE TABLE {SCHEMA}.cold (id int PRIMARY KEY, n int NOT NULL)")
        cur.execute(f"INSERT INTO {SCHEMA}.cold VALUES (5, 0), (6, 0)")
    yield server
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")


@pytest.fixture(scope="module")
def fleet_shape(primary: SandboxServer) -> stack.FleetShape:
    """An operator, the cluster with a first config published (hostgroup 10: the primary; no rule; a queue wait
    may last a minute, far beyond what the test takes; three marks of a hot key make a proposal), and node ``hot-1``
    reporting every second; the static files collected (the page polls with htmx)."""
    document = {
        "mysql_servers": [{"hostgroup_id": 10, "hostname": "127.0.0.1", "port": primary.port}],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 10}],
        "global_variables": global_variables(
            {"mysql-threads": 1, "mysql-trx_queue_wait_timeout_ms": 60000, "mysql-trx_queue_heat_threshold": 3}
        ),
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


def hot_queue(fleet: stack.RunningFleet, name: str = "hot") -> dict[str, Any] | None:
    """Queue ``name`` as the node's ``/stats`` has it now (None before its first use)."""
    queues = node_stats(fleet).get("trx_queue", {}).get("queues", [])
    return next((queue for queue in queues if queue["queue"] == name), None)


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


def second_update(fleet: stack.RunningFleet, update: str = UPDATE) -> int:
    """The second client's transaction on key 1 (of ``update``); the rows its UPDATE changed."""
    with connect(fleet) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        changed = cur.execute(update)
        conn.commit()
        return changed


def timed_out_update(fleet: stack.RunningFleet) -> int:
    """An UPDATE of ``cold`` row 5 that waits for the row's lock at most a second: its error code (1205)."""
    with connect(fleet) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
        try:
            cur.execute(COLD_UPDATE)
        except pymysql.err.OperationalError as error:
            return int(error.args[0])
        return 0


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


def test_a_hot_key_the_node_found_is_accepted_in_the_browser_and_the_node_queues_it(
    browser: Browser, running_fleet: stack.RunningFleet, primary: SandboxServer
) -> None:
    fleet = running_fleet
    stack.wait_until(lambda: node_answers(fleet), "the node running its config", NODE_TIMEOUT_S)
    context = browser.new_context(base_url=fleet.url)
    pool = ThreadPoolExecutor(max_workers=3)
    first = connect(fleet)
    waiting: Future[int] | None = None
    try:
        with primary.connect() as locker, locker.cursor() as cur:  # row 5 locked on the server, not through the node
            cur.execute("BEGIN")
            cur.execute(f"SELECT n FROM {SCHEMA}.cold WHERE id = 5 FOR UPDATE")
            marks = [pool.submit(timed_out_update, fleet) for _ in range(3)]
            assert [mark.result(timeout=NODE_TIMEOUT_S) for mark in marks] == [1205, 1205, 1205]
            locker.rollback()
        stack.wait_until(  # the node reads a statement's marks once its client has the answer
            lambda: bool(node_stats(fleet)["trx_queue"]["proposals"]), "the node's proposal", NODE_TIMEOUT_S
        )
        proposals = node_stats(fleet)["trx_queue"]["proposals"]
        assert [(p["id"], p["state"], p["keys"]) for p in proposals] == [(PROPOSAL, "proposed", ["5"])]

        page = context.new_page()
        log_in(page)
        row = page.locator(f'table.proposals tr[data-proposal="{PROPOSAL}"]')

        def proposal_shown() -> bool:
            page.goto("/hot-rows/")
            return row.count() == 1

        stack.wait_until(proposal_shown, "the proposal on the Hot rows page", NODE_TIMEOUT_S)
        expect(row.locator("td.queue")).to_have_text(f"{SCHEMA}.cold")
        expect(row.locator("td.evidence")).to_contain_text("lock_wait_timeouts 3")
        expect(row.locator("td.keys")).to_have_text("5")
        row.locator("button", has_text="Accept").click()
        expect(page.locator(".flash")).to_contain_text("added to the draft")
        expect(row.locator("td.state")).to_contain_text("accepted")

        page.goto("/publish/")
        page.fill("input[name=comment]", "queue the key the node found")
        page.click("form.publish-form button[type=submit]")
        expect(page.locator(".flash")).to_contain_text("Published version")
        stack.wait_until(
            lambda: len(node_stats(fleet, "/query_rules")) == 2, "the node running the accepted rule", NODE_TIMEOUT_S
        )

        with first.cursor() as cur:  # holds key 5 of the accepted queue
            cur.execute("BEGIN")
            assert cur.execute(COLD_UPDATE) == 1
        waiting = pool.submit(second_update, fleet, COLD_UPDATE)
        stack.wait_until(
            lambda: (hot_queue(fleet, f"{SCHEMA}.cold") or {}).get("waiters") == 1,
            "the second transaction waiting in the accepted queue",
            NODE_TIMEOUT_S,
        )
        assert lock_waits(primary) == 0
        first.commit()
        assert waiting.result(timeout=NODE_TIMEOUT_S) == 1
        with primary.connect() as conn, conn.cursor() as cur:
            cur.execute(f"SELECT n FROM {SCHEMA}.cold WHERE id = 5")
            assert cur.fetchall() == ((2,),)
    finally:
        if waiting is not None and not waiting.done():
            first.rollback()
        pool.shutdown()
        first.close()
        context.close()
