"""The Shards page in a real browser (Playwright driving Debian's Chromium) against the whole product
(``devstack.stack``): a real proxy node runs a published sharded config (``scatter_shop.items`` by City_ID mod 2 over
two independent servers), a statement runs through it once on one shard and once on both, and once its agent has
reported, the page ranks that statement by its scatter ratio, 0.50, below one that always misses the shard key; and
it shows the rows the node found on each shard (3 and 2, written on the servers before the node started)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from devstack import stack
from devstack.sandbox import APP_PASSWORD, APP_USER, MONITOR_USER, Sandbox, SandboxServer
from proxyapp.sql.digest import compute_digest
from tests.live.fleet.web.test_browser import browser
from tests.support.fleet_seed import cluster_seed
from tests.support.monitor_support import own_sandbox

__all__ = ["browser"]  # the browser test module's fixture, used here

NODE = "scatter-1"
SCHEMA = "scatter_shop"
VIEWER, PASSWORD = "scatter-viewer", "scatter-viewer-pass"
#: The same statement twice: both keys odd (shard 1 alone), then one of each (both shards).
ROUTED = "SELECT name FROM items WHERE City_ID IN (1, 3)"
SCATTERED = "SELECT name FROM items WHERE City_ID IN (1, 2)"
#: A statement whose WHERE does not name the shard key: it reaches every shard.
MISSED = "SELECT name FROM items WHERE name = 'x'"
#: How long the control plane may take to show the node's next report (it reports every second).
REPORT_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def shards(sandbox: Sandbox) -> Iterator[tuple[SandboxServer, SandboxServer]]:
    """Shard 0 on the run's sandbox primary, shard 1 on a server of the module's own, each with
    ``scatter_shop.items`` holding the rows of its shard (City_ID 10, 12, 14 on shard 0; 11, 13 on shard 1: none that
    the test's statements read), which the monitor user may see (the page's rows per shard)."""
    with own_sandbox("scatterui", replicas=0) as other:
        servers = (sandbox.primary(), other.primary())
        for number, server in enumerate(servers):
            with server.connect() as conn, conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")
                cur.execute(f"CREATE DATABASE {SCHEMA}")
                cur.execute(f"CREATE TABLE {SCHEMA}.items (City_ID int PRIMARY KEY, name varchar(20))")
                cur.executemany(
                    f"INSERT INTO {SCHEMA}.items VALUES (%s, 'kept')", [(k,) for k in range(10 + number, 15, 2)]
                )
                cur.execute(f"ANALYZE TABLE {SCHEMA}.items")
                cur.fetchall()
                cur.execute(f"GRANT SELECT ON {SCHEMA}.* TO '{MONITOR_USER}'@'%'")
        yield servers
        with servers[0].connect() as conn, conn.cursor() as cur:
            cur.execute(f"REVOKE SELECT ON {SCHEMA}.* FROM '{MONITOR_USER}'@'%'")
            cur.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")


def sharded_config(servers: tuple[SandboxServer, SandboxServer]) -> dict[str, Any]:
    """``scatter_shop.items`` by City_ID mod 2 over hostgroups 100 and 101 (one server each), one worker."""
    hostgroups = (100, 101)
    return {
        "mysql_servers": [
            {"hostgroup_id": hg, "hostname": "127.0.0.1", "port": s.port}
            for hg, s in zip(hostgroups, servers, strict=True)
        ],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 100}],
        "mysql_shards": [{"shard_group": "shops", "shard": n, "hostgroup_id": hg} for n, hg in enumerate(hostgroups)],
        "mysql_sharded_tables": [
            {
                "schemaname": SCHEMA,
                "tablename": "items",
                "shard_group": "shops",
                "algorithm": "mod",
                "shard_key": "City_ID",
            }
        ],
        "global_variables": [{"variable_name": "mysql-threads", "variable_value": "1"}],
    }


@pytest.fixture(scope="module")
def fleet_shape(shards: tuple[SandboxServer, SandboxServer]) -> stack.FleetShape:
    """A viewer, the cluster with the sharded config published, and node ``scatter-1`` reporting every second."""
    return stack.FleetShape(
        seed=cluster_seed("SCATTER", viewer=True, publish="sharded"),
        seed_env={
            "SCATTER_VIEWER": VIEWER,
            "SCATTER_OPERATOR": "scatter-operator",
            "SCATTER_PASSWORD": PASSWORD,
            "SCATTER_CLUSTER": "scatter",
            "SCATTER_DOCUMENT": json.dumps(sharded_config(shards)),
        },
        nodes=[stack.NodeShape(NODE, report_interval=1)],
        beat=False,
    )


def run_through(fleet: stack.RunningFleet, *statements: str) -> None:
    """Run ``statements`` through the node in ``scatter_shop``."""
    host, port = fleet.node_mysql(NODE).split(":")
    client = pymysql.connect(
        host=host, port=int(port), user=APP_USER, password=APP_PASSWORD, database=SCHEMA, autocommit=True
    )
    with client as conn, conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)
            assert cur.fetchall() == ()


def node_runs_the_sharded_config(fleet: stack.RunningFleet) -> bool:
    """Whether the node routes ``scatter_shop.items`` by its shard map yet (before, it refuses the connection or
    the statement)."""
    try:
        run_through(fleet, "SELECT name FROM items WHERE City_ID = 0")
    except pymysql.err.MySQLError:
        return False
    return True


def scatter_row(page: Page, sql: str) -> Locator:
    """The row of ``sql``'s digest in the Shards page's "Queries by scatter ratio" table."""
    return page.locator(f'table.scatter-digests tr[data-digest="{compute_digest(sql).hash}"]')


def test_the_shards_page_shows_each_statements_scatter_ratio(
    browser: Browser,
    running_fleet: stack.RunningFleet,
) -> None:
    fleet = running_fleet
    stack.wait_until(lambda: node_runs_the_sharded_config(fleet), "the node running the sharded config", 30)
    run_through(fleet, ROUTED, SCATTERED, MISSED)
    context = browser.new_context(base_url=fleet.url)
    try:
        page = context.new_page()
        page.goto("/login/")
        page.fill("input[name=username]", VIEWER)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        expect(page.locator("h1")).to_have_text("Fleet overview")

        items = page.locator(f'table.sharded-tables tr[data-table="{SCHEMA}.items"]')

        def reported() -> bool:  # MISSED ran last: a report that has it counts the other runs too
            page.goto("/shards/")
            counted = items.locator("td.total-rows").inner_text().strip().isdigit()  # the node has looked at both
            return scatter_row(page, SCATTERED).count() == 1 and scatter_row(page, MISSED).count() == 1 and counted

        stack.wait_until(reported, "the node's report of both statements on the Shards page", REPORT_TIMEOUT_S)
        expect(page.locator("section.shard-group h2")).to_contain_text("Shard group shops")
        row = scatter_row(page, SCATTERED)
        expect(row.locator("td.scatter-ratio")).to_have_text("0.50")
        expect(row.locator("td.sql")).to_contain_text("City_ID IN")
        expect(row.locator("td").nth(4)).to_have_text("1")  # one run on one shard
        expect(row.locator("td").nth(5)).to_have_text("1")  # one on both
        expect(scatter_row(page, MISSED).locator("td.scatter-ratio")).to_have_text("1.00")
        ranked = page.locator("table.scatter-digests tbody tr").evaluate_all("rows => rows.map(r => r.dataset.digest)")
        assert ranked.index(compute_digest(MISSED).hash) < ranked.index(compute_digest(SCATTERED).hash)
        expect(items.locator("td.shard-rows")).to_have_text(["3", "2"])
        expect(items.locator("td.total-rows")).to_have_text("5")
    finally:
        context.close()
