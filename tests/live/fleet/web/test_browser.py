"""The web UI in a real browser (Playwright driving Debian's Chromium, one browser for the module).

Publishing runs against a live Django server, the proxy nodes played by the test: what a node would send (its acks
and reports) goes through the control plane's own ingestion, the task functions of ``fleet.core.tasks`` called directly
(``tests/support/node_messages.py``); the version is stored and pushed to each node's queue on the real Redis (the
queues are removed afterwards). The backend dashboard runs against the whole product instead (``devstack.stack``): a
private redis-server, gunicorn and a Celery worker on a file SQLite database, and a real proxy node with its agent in
front of a sandbox MariaDB of the module's own; the server the test kills shows SHUNNED on the live page because that
node's monitor saw it down and its agent reported it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pymysql
import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User as Account
from django.utils import timezone
from playwright.sync_api import Browser, BrowserContext, Locator, Page, expect, sync_playwright

from devstack import ports, stack
from devstack.pgsandbox import APP_PASSWORD as PG_APP_PASSWORD
from devstack.pgsandbox import APP_USER as PG_APP_USER
from devstack.pgsandbox import PgSandbox
from devstack.sandbox import APP_PASSWORD, APP_USER, Sandbox
from fleet.core import roles
from fleet.core.models import Cluster, ConfigVersion, ProxyNode
from tests.support.control_plane import LOGIN_PASSWORD, make_account
from tests.support.fleet_seed import cluster_seed
from tests.support.monitor_support import global_variables, own_sandbox
from tests.support.node_messages import pool_row, send_ack, send_report, snapshot

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
    return log_in_as(context, make_account(role))


def log_in_as(browsing: BrowserContext, account: Account) -> Page:
    """A page logged in through the login form as ``account`` (its password ``LOGIN_PASSWORD``)."""
    page = browsing.new_page()
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


LIVE_NODE = "live-1"
LIVE_CLUSTER = "live"
VIEWER, VIEWER_PASSWORD = "live-viewer", "live-viewer-pass"
OPERATOR = "live-operator"  # with VIEWER_PASSWORD
#: Seeds the stack's database: a viewer and an operator, the cluster with its config published (pushed to the node's
#: queue).
LIVE_SEED = cluster_seed("LIVE", viewer=True, publish="the dashboard's config")


@dataclass
class LiveStack:
    """The running product: the web UI's address, the sandbox the node serves, the node's admin endpoint and the
    address its clients connect to."""

    url: str
    box: Sandbox
    node_admin: str
    node_token: str
    node_mysql: str
    redis: stack.Service
    redis_url: str
    worker: stack.Service
    web: stack.Service


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    """The module's own sandbox: a primary, which a test kills."""
    with own_sandbox("browser", replicas=0) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def shard_box() -> Iterator[Sandbox]:
    """A second server of the module, which the browser makes shard 1 of a shard group."""
    with own_sandbox("browser-shard1", replicas=0) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def fleet_shape(box: Sandbox) -> stack.FleetShape:
    """A viewer and an operator, the cluster with its config published, and node ``live-1`` reporting every second,
    whose hostgroup 10 is the primary of ``box``, checked by the node's monitor every 200 ms. A worker silent for 5 s
    shows as down (30 s in production): the fault test need not wait long. No beat."""
    document = {
        "mysql_servers": [{"hostgroup_id": 10, "hostname": "127.0.0.1", "port": box.primary().port}],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 10}],
        "global_variables": global_variables({"mysql-threads": 1}),
    }
    return stack.FleetShape(
        seed=LIVE_SEED,
        seed_env={
            "LIVE_VIEWER": VIEWER,
            "LIVE_OPERATOR": OPERATOR,
            "LIVE_PASSWORD": VIEWER_PASSWORD,
            "LIVE_CLUSTER": LIVE_CLUSTER,
            "LIVE_DOCUMENT": json.dumps(document),
        },
        env={"FLEET_SERVICE_SILENT_SECONDS": "5"},
        nodes=[stack.NodeShape(LIVE_NODE, report_interval=1)],
        beat=False,
        collectstatic=True,
    )


@pytest.fixture(scope="module")
def live_stack(running_fleet: stack.RunningFleet, box: Sandbox) -> LiveStack:
    """The running product, once node ``live-1`` runs the published config."""
    fleet = running_fleet
    live = LiveStack(
        fleet.url,
        box,
        fleet.node_admin(LIVE_NODE),
        fleet.node_token(LIVE_NODE),
        fleet.node_mysql(LIVE_NODE),
        fleet.redis,
        fleet.broker,
        fleet.worker,
        fleet.web,
    )
    stack.wait_until(
        lambda: _node_pool(live) != [], "the node running the published config", 30, fleet.nodes[LIVE_NODE]
    )
    return live


def _node_pool(live: LiveStack) -> list[dict[str, object]]:
    """The node's connection pool rows (its own admin endpoint)."""
    with urllib.request.urlopen(f"http://{live.node_admin}/stats/connection_pool", timeout=5) as response:
        return json.loads(response.read())


def test_a_backend_going_down_shows_on_the_live_dashboard(browser: Browser, live_stack: LiveStack) -> None:
    context = browser.new_context(base_url=live_stack.url)
    try:
        page = context.new_page()
        page.goto("/login/")
        page.fill("input[name=username]", VIEWER)
        page.fill("input[name=password]", VIEWER_PASSWORD)
        page.click("button[type=submit]")
        expect(page.locator("h1")).to_have_text("Fleet overview")
        worker = page.locator('section.control-plane tr[data-service="worker"] .status')
        expect(worker).to_have_text("ok", timeout=LIVE_UPDATE_TIMEOUT_MS)  # it reads the node's reports
        page.goto("/tables/servers/")
        expect(page.locator("h1")).to_contain_text("Servers")
        expect(page.locator("a.button", has_text="Add")).to_have_count(0)  # a viewer is offered no changes

        primary = live_stack.box.primary()
        page.goto("/backends/")
        status = page.locator(f'tr[data-server="10/127.0.0.1:{primary.port}/{LIVE_NODE}"] .status')
        expect(status).to_have_text("ONLINE", timeout=LIVE_UPDATE_TIMEOUT_MS)
        expect(page.locator("canvas[data-chart-url]")).to_have_count(2)
        assert page.evaluate("typeof window.Chart") == "function"  # Chart.js, served from static/
        page.evaluate("window.sameDocument = true")

        live_stack.box.kill(primary.name)  # the node's monitor finds it down, shuns it, and its next report says so
        try:
            expect(status).to_have_text("SHUNNED", timeout=LIVE_UPDATE_TIMEOUT_MS)
            [row] = _node_pool(live_stack)
            assert row["status"] == "SHUNNED"
        finally:
            live_stack.box.start(primary.name)
        expect(status).to_have_text("ONLINE", timeout=LIVE_UPDATE_TIMEOUT_MS)  # back on its own
        assert page.evaluate("window.sameDocument") is True  # htmx swapped the table in; the page never reloaded
    finally:
        context.close()


def _log_in_as_operator(context: BrowserContext) -> Page:
    page = context.new_page()
    page.goto("/login/")
    page.fill("input[name=username]", OPERATOR)
    page.fill("input[name=password]", VIEWER_PASSWORD)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Fleet overview")
    return page


def _node_answers(live: LiveStack) -> bool:
    """Whether the node serves a query (autocommit, so that it is routed by the rules)."""
    host, port = live.node_mysql.split(":")
    client = pymysql.connect(host=host, port=int(port), user=APP_USER, password=APP_PASSWORD, autocommit=True)
    with client as conn, conn.cursor() as cur:
        cur.execute("SELECT 41 + 1")
        return cur.fetchall() == ((42,),)


def _fill_row(page: Page, slug: str, values: dict[str, str | bool]) -> None:
    """Add a row through the table's form as a person does: type the fields named, leave the rest as shown."""
    page.goto(f"/tables/{slug}/add/")
    _fill(page, values)


def _fill(page: Page, values: dict[str, str | bool]) -> None:
    """Fill the open row form and save it; the table's list must come back (the row was accepted)."""
    for name, value in values.items():
        field = page.locator(f"[name={name}]")
        if isinstance(value, bool):
            field.set_checked(value)
        elif field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    page.click("button[type=submit]")
    expect(page.locator(".field-errors")).to_have_count(0)
    expect(page.locator("h1")).not_to_contain_text("Add to")


def _refused_row(page: Page, slug: str, values: dict[str, str], field: str, message: str) -> None:
    """Submit ``values`` on the table's add form: the form comes back with ``message`` on ``field`` alone."""
    page.goto(f"/tables/{slug}/add/")
    for name, value in values.items():
        page.locator(f"[name={name}]").fill(value)
    page.click("button[type=submit]")
    errors = page.locator(".field-errors")
    expect(errors).to_have_count(1)
    expect(page.locator(f'.field-errors[data-field="{field}"]')).to_contain_text(message)
    expect(page.locator("h1")).to_contain_text("Add to")


def _forward_listener(live: LiveStack, port: int) -> dict[str, object] | None:
    """The node's report row of its forwarding listener on ``port`` (its own admin endpoint), if it has one."""
    with urllib.request.urlopen(f"http://{live.node_admin}/stats", timeout=5) as response:
        listeners = json.loads(response.read()).get("pgsql_forward", {}).get("listeners", [])
    return next((row for row in listeners if row["port"] == port), None)


def test_hostile_postgresql_rows_show_their_field_errors(browser: Browser, live_stack: LiveStack) -> None:
    """A PostgreSQL server, forwarding listener or user the proxy would refuse (a user's password that starts like a
    SCRAM-SHA-256 verifier and is not one, a pool_mode it has not) comes back on its form with the proxy's message
    on the field (never a server error), and nothing is saved."""
    context = browser.new_context(base_url=live_stack.url)
    try:
        page = _log_in_as_operator(context)
        server = {"hostname": "127.0.0.1", "port": "5432", "hostgroup_id": "100"}
        _refused_row(page, "pgsql-servers", {**server, "hostname": "db one"}, "hostname", "not a host name")
        _refused_row(page, "pgsql-servers", {**server, "port": "70000"}, "port", "above the maximum 65535")
        listener = {"port": "15439", "hostgroup_id": "100"}
        _refused_row(page, "pgsql-forward-listeners", {**listener, "interface": "eth0"}, "interface", "not an IP")
        _refused_row(page, "pgsql-forward-listeners", {**listener, "port": "0"}, "port", "below the minimum 1")
        mysql_port = {**listener, "port": "6033"}  # the draft's mysql-interfaces (the node's --listen is its own)
        _refused_row(page, "pgsql-forward-listeners", mysql_port, "port", "6033 is the port of mysql-interfaces")
        page.goto("/tables/pgsql-forward-listeners/")
        expect(page.locator("table.grid tbody")).not_to_contain_text("15439")
        user = {"username": "hostile_pg", "default_hostgroup": "100"}
        bad_verifier = {**user, "password": "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVka2V5"}
        _refused_row(page, "pgsql-users", bad_verifier, "password", "so it is read as a verifier")
        page.goto("/tables/pgsql-users/add/")
        for name, value in user.items():
            page.locator(f"[name={name}]").fill(value)
        # a tampered form: pool_mode offers transaction and session, a hand-made request sends statement
        pool_mode = page.locator("[name=pool_mode]")
        pool_mode.evaluate("e => { e.add(new Option('statement', 'statement')); e.value = 'statement'; }")
        page.click("button[type=submit]")
        expect(page.locator(".field-errors")).to_have_count(1)
        expect(page.locator('.field-errors[data-field="pool_mode"]')).to_contain_text("statement")
        page.goto("/tables/pgsql-users/")
        expect(page.locator("table.grid tbody")).not_to_contain_text("hostile_pg")
    finally:
        context.close()


def test_every_table_edited_in_the_browser_reaches_a_real_node(
    browser: Browser, live_stack: LiveStack, shard_box: Sandbox
) -> None:
    """One row of every table added or edited through the forms, published from the browser: the node then routes
    reads by the new rule to the new server (a blank error_msg once blocked every matching query), blocks only
    what the blocking rule names, plans statements on the new sharded table, numbering its ids from the
    sequence (a row inserted without one gets one and lands on the shard it maps to), and forwards a PostgreSQL
    client on the new listener's port to the machine's PostgreSQL, which the Backends page then counts."""
    context = browser.new_context(base_url=live_stack.url)
    port = live_stack.box.primary().port
    shard_servers = (live_stack.box.primary(), shard_box.primary())
    for server in shard_servers:
        with server.connect() as conn, conn.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS app.sharded_things")
            cur.execute("CREATE TABLE app.sharded_things (id bigint PRIMARY KEY AUTO_INCREMENT, name varchar(20))")
    try:
        page = _log_in_as_operator(context)
        _fill_row(page, "hostgroups", {"hostgroup_id": "20", "name": "readers"})
        _fill_row(page, "servers", {"hostgroup_id": "20", "hostname": "127.0.0.1", "port": str(port)})
        _fill_row(
            page,
            "query-rules",
            {"rule_id": "1", "active": True, "match_digest": "^SELECT", "destination_hostgroup": "20", "apply": True},
        )
        _fill_row(
            page,
            "query-rules",
            {"rule_id": "2", "active": True, "match_digest": "^DELETE", "error_msg": "no deletes here"},
        )
        _fill_row(page, "replication-hostgroups", {"writer_hostgroup": "30", "reader_hostgroup": "40"})
        _fill_row(page, "variables", {"variable_name": "mysql-long_query_time", "variable_value": "2000"})
        fast = {"username": APP_USER, "schemaname": "app", "destination_hostgroup": "20"}
        _fill_row(page, "fast-routing", fast)
        _fill_row(page, "hostgroups", {"hostgroup_id": "50", "name": "shard 1"})
        _fill_row(page, "servers", {"hostgroup_id": "50", "hostname": "127.0.0.1", "port": str(shard_servers[1].port)})
        _fill_row(page, "shards", {"shard_group": "things", "shard": "0", "hostgroup_id": "10"})
        _fill_row(page, "shards", {"shard_group": "things", "shard": "1", "hostgroup_id": "50"})
        sharded = {"schemaname": "app", "tablename": "sharded_things", "shard_group": "things", "shard_key": "id"}
        _fill_row(page, "sharded-tables", {**sharded, "algorithm": "mod", "sequence_column": "id"})
        _fill_row(page, "pgsql-servers", {"hostname": "127.0.0.1", "port": "5432", "hostgroup_id": "100"})
        pg_port = ports.free_port()
        _fill_row(page, "pgsql-forward-listeners", {"port": str(pg_port), "hostgroup_id": "100"})
        page.goto("/tables/users/")
        page.locator("table.grid tbody tr", has_text=APP_USER).get_by_role("link", name="Edit").click()
        _fill(page, {"comment": "edited in the browser"})
        for match in ("^SELECT", "^DELETE"):  # edit the rules, changing only the comment (this once failed: digest)
            page.goto("/tables/query-rules/")
            page.locator("table.grid tbody tr", has_text=match).get_by_role("link", name="Edit").click()
            _fill(page, {"comment": f"the {match} rule"})

        page.goto("/publish/")
        page.fill("input[name=comment]", "every table from the browser")
        page.click("form.publish-form button[type=submit]")
        expect(page.locator(".flash")).to_contain_text("Published version 2")

        def readers_in_use() -> bool:
            return any(row["hostgroup"] == 20 for row in _node_pool(live_stack))

        stack.wait_until(readers_in_use, "the node applying version 2", 30)
        assert _node_answers(live_stack)
        host, node_port = live_stack.node_mysql.split(":")
        client = pymysql.connect(host=host, port=int(node_port), user=APP_USER, password=APP_PASSWORD, autocommit=True)
        with client as conn, conn.cursor() as cur, pytest.raises(pymysql.err.OperationalError) as blocked:
            cur.execute("DELETE FROM app.nothing")
        assert blocked.value.args == (1148, "no deletes here")
        on_app = pymysql.connect(
            host=host, port=int(node_port), user=APP_USER, password=APP_PASSWORD, database="app", autocommit=True
        )
        with on_app as conn, conn.cursor() as cur:
            cur.execute("DO 1")  # no rule matches: the fast routing row for app on app sends it to hostgroup 20
            with pytest.raises(pymysql.err.MySQLError) as unsharded:  # the node knows the sharded table
                cur.execute("INSERT INTO sharded_things VALUES (1)")
            assert unsharded.value.args[0] == 1235 and "without a column list" in unsharded.value.args[1]
            cur.execute("INSERT INTO sharded_things (name) VALUES ('numbered')")
            numbered = cur.lastrowid
        assert numbered >= 1
        for number, server in enumerate(shard_servers):
            with server.connect() as conn, conn.cursor() as cur:
                cur.execute("SELECT id FROM app.sharded_things WHERE name = 'numbered'")
                assert cur.fetchall() == (((numbered,),) if numbered % 2 == number else ())
        with urllib.request.urlopen(f"http://{live_stack.node_admin}/stats/query_digest", timeout=5) as response:
            digests = json.loads(response.read())
        routed = {(row["digest_text"], row["hostgroup"]) for row in digests}
        assert ("SELECT ? + ?", 20) in routed, routed  # the SELECT went to the new server by the new rule
        assert ("DO ?", 20) in routed, routed  # and DO by the fast routing row
        with urllib.request.urlopen(f"http://{live_stack.node_admin}/stats/query_rules", timeout=5) as response:
            hits = {row["rule_id"]: row["hits"] for row in json.loads(response.read())}
        assert hits[1] >= 1 and hits[2] == 1, hits

        def forwarding() -> bool:
            row = _forward_listener(live_stack, pg_port)
            return row is not None and row["state"] == "listening"

        stack.wait_until(forwarding, f"the node listening on {pg_port} for PostgreSQL clients", 30)
        with psycopg.connect(
            host="127.0.0.1", port=pg_port, user="postgres", dbname="postgres", connect_timeout=10
        ) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        page.goto("/backends/")
        listener = page.locator(f'tr[data-listener="{pg_port}/{LIVE_NODE}"]')
        expect(listener.locator(".state")).to_have_text("listening", timeout=LIVE_UPDATE_TIMEOUT_MS)
        expect(listener.locator(".connections_total")).to_have_text(
            re.compile(r"^[1-9][0-9]*$"), timeout=LIVE_UPDATE_TIMEOUT_MS
        )
        server = page.locator(f'tr[data-pgsql-server="100/127.0.0.1:5432/{LIVE_NODE}"]')
        expect(server.locator(".status")).to_have_text("ONLINE")
        expect(server.locator(".connections_total")).to_have_text(
            re.compile(r"^[1-9][0-9]*$"), timeout=LIVE_UPDATE_TIMEOUT_MS
        )
    finally:
        context.close()


PG_USER, PG_PASSWORD = "app_pg", "app-pg-browser-pw"
#: The machine's PostgreSQL in hostgroup 100 on the PostgreSQL servers page.
PG_SERVER_ROW = 'table.grid tbody tr:has(td:text-is("100")):has(td:text-is("127.0.0.1")):has(td:text-is("5432"))'


def _pgsql_report(live: LiveStack) -> dict[str, object]:
    """The node's ``pgsql`` section (its pooling proxy; its own admin endpoint), empty when it has none."""
    with urllib.request.urlopen(f"http://{live.node_admin}/stats", timeout=5) as response:
        return json.loads(response.read()).get("pgsql") or {}


@pytest.fixture
def pg_role() -> Iterator[str]:
    """The role ``app_pg`` on the machine's PostgreSQL (trust auth: it logs in with any password), dropped after."""
    with psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {PG_USER}")
        conn.execute(f"CREATE ROLE {PG_USER} LOGIN")
    yield PG_USER
    with psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname="postgres", autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (PG_USER,))
        conn.execute(f"DROP ROLE {PG_USER}")


def test_a_postgresql_user_from_the_browser_logs_in_through_the_node(
    browser: Browser, live_stack: LiveStack, pg_role: str
) -> None:
    """A pgsql_users row (transaction pooling), the machine's PostgreSQL in its hostgroup and the PostgreSQL listener
    on a free port, filled in the browser and published: a client logs in to the node's PostgreSQL port as that user
    with its password and runs as it on the server; a wrong password is refused; the Backends page shows the node's
    listener and its pool to the server."""
    context = browser.new_context(base_url=live_stack.url)
    pg_port = ports.free_port()
    try:
        page = _log_in_as_operator(context)
        page.goto("/tables/pgsql-servers/")
        # the module's draft is shared: the every-table test may have put the machine's PostgreSQL in hostgroup 100
        if page.locator(PG_SERVER_ROW).count() == 0:
            _fill_row(page, "pgsql-servers", {"hostname": "127.0.0.1", "port": "5432", "hostgroup_id": "100"})
        user = {"username": pg_role, "password": PG_PASSWORD, "default_hostgroup": "100", "pool_mode": "transaction"}
        _fill_row(page, "pgsql-users", user)
        _fill_row(page, "variables", {"variable_name": "pgsql-interfaces", "variable_value": f"127.0.0.1:{pg_port}"})
        page.goto("/tables/pgsql-users/")
        row = page.locator("table.grid tbody tr", has_text=pg_role)
        expect(row).to_contain_text("transaction")
        expect(row).not_to_contain_text(PG_PASSWORD)  # write-only

        page.goto("/publish/")
        expect(page.locator("table.changes")).to_contain_text(f"username={pg_role}")
        expect(page.locator("body")).not_to_contain_text(PG_PASSWORD)
        page.fill("input[name=comment]", "a PostgreSQL user from the browser")
        page.click("form.publish-form button[type=submit]")
        expect(page.locator(".flash")).to_contain_text("Published version")

        def listening() -> bool:
            listener = _pgsql_report(live_stack).get("listener") or {}
            return listener == {"address": f"127.0.0.1:{pg_port}", "state": "listening"}

        stack.wait_until(listening, f"the node's PostgreSQL listener on {pg_port}", 30)
        login = {"host": "127.0.0.1", "port": pg_port, "user": pg_role, "dbname": "postgres", "connect_timeout": 10}
        with psycopg.connect(**login, password=PG_PASSWORD) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (pg_role,)
        with pytest.raises(psycopg.OperationalError) as refused:
            psycopg.connect(**login, password="not-" + PG_PASSWORD)
        assert "password authentication failed" in str(refused.value)

        page.goto("/backends/")
        node = page.locator(f'tr[data-pgsql-node="{LIVE_NODE}"]')
        expect(node.locator(".state")).to_have_text("listening", timeout=LIVE_UPDATE_TIMEOUT_MS)
        expect(node).to_contain_text(f"127.0.0.1:{pg_port}")
        pool = page.locator(f'tr[data-pgsql-pool="100/127.0.0.1:5432/{LIVE_NODE}"]')
        expect(pool.locator(".conn_ok")).to_have_text(re.compile(r"^[1-9][0-9]*$"), timeout=LIVE_UPDATE_TIMEOUT_MS)
        expect(node.locator(".logins_failed")).to_have_text(
            re.compile(r"^[1-9][0-9]*$"), timeout=LIVE_UPDATE_TIMEOUT_MS
        )
    finally:
        context.close()


def _node_document(live: LiveStack) -> dict[str, Any]:
    """The config document the node runs (its own admin endpoint; secrets masked)."""
    with urllib.request.urlopen(f"http://{live.node_admin}/config", timeout=5) as response:
        return json.loads(response.read())["document"]


def _set_variable(page: Page, name: str, value: str) -> None:
    """Set global variable ``name`` in the draft through its form: edit its row, or add one when it has none."""
    page.goto("/tables/variables/")
    row = page.locator("table.grid tbody tr", has=page.locator(f'td:text-is("{name}")'))
    if row.count() == 0:
        _fill_row(page, "variables", {"variable_name": name, "variable_value": value})
        return
    row.get_by_role("link", name="Edit").click()
    _fill(page, {"variable_value": value})


def test_a_postgresql_rule_from_the_browser_blocks_through_the_node(
    browser: Browser, live_stack: LiveStack, pg_role: str
) -> None:
    """A pgsql_query_rules row (active, match_pattern forbidden_pg, error_msg, apply) and a pgsql_replication_hostgroups
    pair (writer 100, reader 101) filled in the browser and published with a PostgreSQL user and listener: through the
    node's PostgreSQL port the matching statement gets the rule's error, another still runs, and the document the node
    runs holds the rule and the pair."""
    context = browser.new_context(base_url=live_stack.url)
    pg_port = ports.free_port()
    try:
        page = _log_in_as_operator(context)
        # the module's draft is shared: the tests before may have added the server and the user already
        page.goto("/tables/pgsql-servers/")
        if page.locator(PG_SERVER_ROW).count() == 0:
            _fill_row(page, "pgsql-servers", {"hostname": "127.0.0.1", "port": "5432", "hostgroup_id": "100"})
        page.goto("/tables/pgsql-users/")
        if page.locator("table.grid tbody tr", has_text=pg_role).count() == 0:
            user = {"username": pg_role, "password": PG_PASSWORD, "default_hostgroup": "100"}
            _fill_row(page, "pgsql-users", user)
        _set_variable(page, "pgsql-interfaces", f"127.0.0.1:{pg_port}")
        rule = {"rule_id": "7", "active": True, "match_pattern": "forbidden_pg", "error_msg": "blocked by the fleet"}
        _fill_row(page, "pgsql-query-rules", {**rule, "apply": True})
        _fill_row(page, "pgsql-replication-hostgroups", {"writer_hostgroup": "100", "reader_hostgroup": "101"})
        page.goto("/tables/pgsql-query-rules/")
        row = page.locator("table.grid tbody tr", has_text="forbidden_pg")
        expect(row).to_contain_text("blocked by the fleet")
        expect(row.locator("td").nth(3)).to_have_text("NULL")  # database: a blank field is null
        page.goto("/tables/pgsql-replication-hostgroups/")
        expect(page.locator("table.grid tbody tr", has_text="read_only")).to_contain_text("101")

        page.goto("/publish/")
        changes = page.locator("table.changes")
        expect(changes).to_contain_text("rule_id=7")
        expect(changes).to_contain_text("writer_hostgroup=100")
        page.fill("input[name=comment]", "a PostgreSQL rule and replication pair from the browser")
        page.click("form.publish-form button[type=submit]")
        expect(page.locator(".flash")).to_contain_text("Published version")

        def listening() -> bool:
            listener = _pgsql_report(live_stack).get("listener") or {}
            return listener == {"address": f"127.0.0.1:{pg_port}", "state": "listening"}

        stack.wait_until(listening, f"the node's PostgreSQL listener on {pg_port}", 30)
        document = _node_document(live_stack)
        (pair,) = document["pgsql_replication_hostgroups"]
        assert (pair["writer_hostgroup"], pair["reader_hostgroup"], pair["check_type"]) == (100, 101, "read_only")
        (published,) = (r for r in document["pgsql_query_rules"] if r["rule_id"] == 7)
        assert (published["active"], published["match_pattern"], published["apply"]) == (True, "forbidden_pg", True)
        assert (published["error_msg"], published["database"], published["replace_pattern"]) == (
            "blocked by the fleet",
            None,
            None,
        )
        login = {"host": "127.0.0.1", "port": pg_port, "user": pg_role, "dbname": "postgres", "connect_timeout": 10}
        with psycopg.connect(**login, password=PG_PASSWORD, autocommit=True) as conn:
            with pytest.raises(psycopg.Error) as blocked:
                conn.execute("SELECT 'forbidden_pg'")
            assert "blocked by the fleet" in str(blocked.value)
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        context.close()


#: The PostgreSQL sandbox's hostgroups in the module's draft: both servers are put in the writer one, and the
#: published replication pair must take the replica out of it into the reader one.
PG_WRITERS, PG_READERS = 300, 301


def _pgsql_placement(live: LiveStack) -> dict[int, set[int]]:
    """The node's pooling proxy's ONLINE servers now: their ports by hostgroup."""
    rows = _pgsql_report(live).get("connection_pool") or []
    assert isinstance(rows, list)
    placed: dict[int, set[int]] = {}
    for row in rows:
        if row["status"] == "ONLINE":
            placed.setdefault(row["hostgroup"], set()).add(row["srv_port"])
    return placed


def test_a_postgresql_replication_pair_from_the_browser_splits_reads_and_writes_on_the_node(
    browser: Browser, live_stack: LiveStack, pg_sandbox: PgSandbox
) -> None:
    """The PostgreSQL sandbox's primary and replica both entered in one hostgroup, a pgsql_replication_hostgroups pair
    making it the writer hostgroup of another, a ^SELECT rule to that reader hostgroup and a user, filled in the browser
    and published: the node's monitor finds the replica in recovery and moves it to the reader hostgroup, so through
    the node's PostgreSQL port every SELECT runs on the replica and every write on the primary."""
    primary, (replica,) = pg_sandbox.primary(), pg_sandbox.replicas()
    context = browser.new_context(base_url=live_stack.url)
    pg_port = ports.free_port()
    try:
        page = _log_in_as_operator(context)
        for server in (primary, replica):
            _fill_row(page, "pgsql-servers", {"hostname": server.host, "port": str(server.port), "hostgroup_id": "300"})
        _fill_row(page, "pgsql-replication-hostgroups", {"writer_hostgroup": "300", "reader_hostgroup": "301"})
        _fill_row(
            page, "pgsql-users", {"username": PG_APP_USER, "password": PG_APP_PASSWORD, "default_hostgroup": "300"}
        )
        rule: dict[str, str | bool] = {
            "rule_id": "30",
            "active": True,
            "username": PG_APP_USER,
            "match_digest": "^SELECT",
        }
        _fill_row(page, "pgsql-query-rules", {**rule, "destination_hostgroup": "301", "apply": True})
        _set_variable(page, "pgsql-interfaces", f"127.0.0.1:{pg_port}")
        page.goto("/publish/")
        expect(page.locator("table.changes")).to_contain_text("writer_hostgroup=300")
        page.fill("input[name=comment]", "the PostgreSQL sandbox split by a replication pair")
        page.click("form.publish-form button[type=submit]")
        expect(page.locator(".flash")).to_contain_text("Published version")

        stack.wait_until(
            lambda: (
                _pgsql_placement(live_stack).get(PG_WRITERS) == {primary.port}
                and _pgsql_placement(live_stack).get(PG_READERS) == {replica.port}
            ),
            "the node's monitor placing the primary in 300 and the replica in 301",
            30,
        )
        dsn = f"postgresql://{PG_APP_USER}:{PG_APP_PASSWORD}@127.0.0.1:{pg_port}/app?connect_timeout=10"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS browser_split (id int PRIMARY KEY)")
            conn.execute("INSERT INTO browser_split VALUES (1) ON CONFLICT DO NOTHING")  # a replica would refuse it
            assert conn.execute("SHOW transaction_read_only").fetchone() == ("off",)  # no SELECT: the writer
            pg_sandbox.wait_replicated()
            for _ in range(4):
                assert conn.execute("SELECT pg_is_in_recovery(), inet_server_port()").fetchone() == (
                    True,
                    replica.port,
                )
            assert conn.execute("SELECT id FROM browser_split").fetchall() == [(1,)]  # replayed on the replica

        page.goto("/backends/")
        for hostgroup, server in ((PG_WRITERS, primary), (PG_READERS, replica)):
            row = page.locator(f'tr[data-pgsql-pool="{hostgroup}/127.0.0.1:{server.port}/{LIVE_NODE}"]')
            expect(row).to_be_visible(timeout=LIVE_UPDATE_TIMEOUT_MS)
    finally:
        context.close()


def test_hostile_postgresql_rules_and_pairs_show_their_field_errors(browser: Browser, live_stack: LiveStack) -> None:
    """A PostgreSQL rule or replication pair the proxy would refuse (an invalid regular expression, a reader equal
    to its writer, a check_type other than read_only sent by a tampered form) comes back on its form with the
    proxy's message on the field (never a server error), and nothing is saved."""
    context = browser.new_context(base_url=live_stack.url)
    try:
        page = _log_in_as_operator(context)
        rule = {"rule_id": "66", "match_pattern": "(unclosed"}
        _refused_row(page, "pgsql-query-rules", rule, "match_pattern", "invalid regular expression")
        _refused_row(page, "pgsql-query-rules", {"rule_id": "66", "match_digest": "a{2,1}"}, "match_digest", "invalid")
        page.goto("/tables/pgsql-query-rules/")
        expect(page.locator("table.grid tbody")).not_to_contain_text("(unclosed")
        pair = {"writer_hostgroup": "166", "reader_hostgroup": "166"}
        _refused_row(page, "pgsql-replication-hostgroups", pair, "reader_hostgroup", "must differ")
        page.goto("/tables/pgsql-replication-hostgroups/add/")
        page.locator("[name=writer_hostgroup]").fill("166")
        page.locator("[name=reader_hostgroup]").fill("167")
        # a tampered form: check_type offers read_only alone, a hand-made request sends innodb_read_only
        check_type = page.locator("[name=check_type]")
        check_type.evaluate("e => { e.add(new Option('innodb', 'innodb_read_only')); e.value = 'innodb_read_only'; }")
        page.click("button[type=submit]")
        expect(page.locator(".field-errors")).to_have_count(1)
        expect(page.locator('.field-errors[data-field="check_type"]')).to_contain_text("innodb_read_only")
        page.goto("/tables/pgsql-replication-hostgroups/")
        expect(page.locator("table.grid tbody")).not_to_contain_text("166")
    finally:
        context.close()


def test_a_node_edited_in_the_browser_shows_its_sessions_and_kills_one(browser: Browser, live_stack: LiveStack) -> None:
    """The node's admin address and credential set on the clusters page; its page then lists a client's session
    live from the node, KILL ends it on the node, and the digests page empties the node's digest table."""
    context = browser.new_context(base_url=live_stack.url)
    host, port = live_stack.node_mysql.split(":")
    client = pymysql.connect(host=host, port=int(port), user=APP_USER, password=APP_PASSWORD, autocommit=True)
    try:
        page = _log_in_as_operator(context)
        page.on("dialog", lambda dialog: dialog.accept())  # the buttons ask before they act
        page.goto("/fleet/")
        page.locator(f'tr[data-node="{LIVE_NODE}"]').get_by_role("link", name="Edit").click()
        page.fill("input[name=admin_address]", live_stack.node_admin)
        page.fill("input[name=admin_token]", live_stack.node_token)
        page.click("button[type=submit]")
        expect(page.locator(f'tr[data-node="{LIVE_NODE}"]')).to_contain_text(live_stack.node_admin)
        with client.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("SELECT 1")
        session = client.thread_id()
        page.goto(f"/nodes/{LIVE_NODE}/")
        row = page.locator(f'tr[data-session="{session}"]')
        expect(row).to_contain_text("open")  # its transaction, as the node reports it
        row.get_by_role("button", name="Kill", exact=True).click()
        expect(page.locator(".flash")).to_have_text(
            f"KILL {session} on {LIVE_NODE}: done, its client was told 1927 Connection was killed."
        )
        expect(page.locator(f'tr[data-session="{session}"]')).to_have_count(0)
        with pytest.raises(pymysql.err.MySQLError), client.cursor() as cur:
            cur.execute("SELECT 2")  # the node ended the session
        assert _node_answers(live_stack)  # and serves the others
        page.goto("/digests/")
        page.get_by_role("button", name="Reset on every node").click()
        expect(page.locator(".flash")).to_contain_text(f"Digests reset on {LIVE_NODE}")
        with urllib.request.urlopen(f"http://{live_stack.node_admin}/stats/query_digest", timeout=5) as response:
            left = json.loads(response.read())
        assert all(row["digest_text"] != "SELECT ? + ?" for row in left)  # only what ran since the reset
    finally:
        client.close()
        context.close()


def test_a_stopped_worker_shows_on_the_overview_and_the_node_keeps_serving(
    browser: Browser, live_stack: LiveStack
) -> None:
    context = browser.new_context(base_url=live_stack.url)
    try:
        page = _log_in_as_operator(context)
        worker = page.locator('section.control-plane tr[data-service="worker"]')
        expect(worker.locator(".status")).to_have_text("ok", timeout=LIVE_UPDATE_TIMEOUT_MS)
        live_stack.worker.stop()
        try:
            expect(worker.locator(".status")).to_have_text("down", timeout=LIVE_UPDATE_TIMEOUT_MS)  # live, no reload
            expect(worker.locator(".summary")).to_contain_text("not running?")
            assert _node_answers(live_stack)
        finally:
            live_stack.worker.start()
        expect(worker.locator(".status")).to_have_text("ok", timeout=LIVE_UPDATE_TIMEOUT_MS)
    finally:
        context.close()


def test_the_web_server_killed_leaves_the_nodes_serving(browser: Browser, live_stack: LiveStack) -> None:
    os.killpg(live_stack.web.proc.pid, signal.SIGKILL)  # gunicorn and its workers (its own process group)
    live_stack.web.proc.wait(10)
    try:
        assert not stack.http_ok(f"{live_stack.url}/healthz")
        assert _node_answers(live_stack)  # the data plane never needed the web server
    finally:
        live_stack.web.start()
        stack.wait_until(lambda: stack.http_ok(f"{live_stack.url}/healthz"), "the web server back", 30, live_stack.web)
    context = browser.new_context(base_url=live_stack.url)
    try:
        _log_in_as_operator(context)  # and the UI is back with its data
    finally:
        context.close()


def test_a_publish_with_the_broker_down_says_it_was_not_delivered(browser: Browser, live_stack: LiveStack) -> None:
    """Redis stopped: the publish is stored and says at once that it did not reach the nodes (it once hung 20 s and
    then said "Published"), and the node keeps serving."""
    context = browser.new_context(base_url=live_stack.url)
    try:
        page = _log_in_as_operator(context)
        _fill_row(page, "query-rules", {"rule_id": "9", "comment": "a change to publish"})
        live_stack.redis.stop()
        try:
            page.goto("/publish/")
            page.fill("input[name=comment]", "while the broker is down")
            page.click("form.publish-form button[type=submit]")
            flash = page.locator(".flash")
            expect(flash).to_contain_text("not delivered: the broker is unreachable", timeout=10_000)
            expect(flash).not_to_contain_text("Published version")
            broker = page.locator('section.control-plane tr[data-service="broker"]')
            expect(broker.locator(".status")).to_have_text("down")  # the overview says which part is down
            expect(broker.locator(".summary")).to_contain_text("unreachable")
            assert _node_answers(live_stack)  # the data plane does not need the control plane
        finally:
            live_stack.redis.start()
            stack.wait_until(lambda: stack.redis_answers(live_stack.redis_url), "redis back", 15)
    finally:
        context.close()


def _shoot(page: Page, name: str) -> None:
    """Save the page as ``docs/img/first-hour/NAME.png`` when ``FLEET_TOUR_DIR`` names that folder (the docs'
    screenshots are taken by this test: ``FLEET_TOUR_DIR=docs/img/first-hour pytest -k first_hour``)."""
    folder = os.environ.get("FLEET_TOUR_DIR")
    if folder:
        page.set_viewport_size({"width": 1400, "height": 900})
        page.screenshot(path=f"{folder}/{name}.png", full_page=False)


def test_the_first_hour_tour(browser: Browser, live_stack: LiveStack) -> None:
    """The pages a DBA opens first (docs/first-hour.md), each showing what it is for, under the site's
    Content-Security-Policy: nothing on them is refused (an inline script or style would be)."""
    context = browser.new_context(base_url=live_stack.url)
    refused: list[str] = []
    try:
        page = _log_in_as_operator(context)
        page.on(
            "console",
            lambda message: (
                refused.append(f"{page.url}: {message.text}") if "Content Security" in message.text else None
            ),
        )
        expect(page.locator('section.control-plane tr[data-service="broker"] .status')).to_have_text("ok")
        _shoot(page, "1-overview")
        page.goto("/tables/query-rules/")
        expect(page.locator("table.grid thead")).to_contain_text("destination_hostgroup")
        _shoot(page, "2-query-rules")
        page.goto("/tables/query-rules/add/")
        expect(page.locator("input[name=digest]")).to_have_value("")
        _shoot(page, "3-rule-form")
        page.goto("/rules/test/?query=SELECT+*+FROM+orders+WHERE+id%3D7&username=app&source=draft")
        expect(page.locator(".trial .answer")).to_contain_text("runs on hostgroup")
        _shoot(page, "4-rule-tester")
        page.goto("/publish/")
        expect(page.locator("h1")).to_contain_text("Publish")
        _shoot(page, "5-publish")
        page.goto(f"/nodes/{LIVE_NODE}/")
        expect(page.locator("section.sessions")).to_contain_text("Client sessions")
        _shoot(page, "6-node")
        page.goto("/backends/")
        expect(page.locator("h1")).to_contain_text("Backend status")
        expect(page.locator("canvas[data-chart-url]").first).to_be_visible()
        _shoot(page, "7-backends")
        page.goto("/api/docs/")
        expect(page.locator(".swagger-ui .info .title")).to_contain_text("ProxyFleet API")  # drawn by its script
        header = page.request.get("/").headers.get("content-security-policy", "")
        assert "script-src 'self'" in header and "frame-ancestors 'none'" in header
        assert refused == []
    finally:
        context.close()
