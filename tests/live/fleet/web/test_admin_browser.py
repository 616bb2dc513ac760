"""The web admin of issue 42 in a real browser (the Chromium of ``test_browser``): the overview's health rolled up over
both engines; a row form refusing what every other path refuses, and warning at save of what publishing would; a
MySQL-only proxysql.cnf imported over a draft with PostgreSQL and shards, and the publish page's warnings; the draft
discarded, and a rollback that says it discards it; rule hits that stay on their rule when rules are renumbered; a
real node's page: its byte counters, its servers' status changes with their time, its replica's lag."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import BrowserContext, expect

from devstack.ports import free_port
from devstack.proxy import READER_HG, rw_split_config
from devstack.sandbox import Sandbox
from fleet.core import publishing, roles
from fleet.core.drafts import save_row
from fleet.core.models import AuditEntry, Cluster, ProxyNode, QueryRule, Server, User
from tests.live.fleet.web.test_browser import browser, context, log_in, node_cell, nodes  # noqa: F401 (fixtures)
from tests.support.control_plane import make_cluster
from tests.support.harness import StartProxy
from tests.support.monitor_support import global_variables, wait_for
from tests.support.node_messages import pgsql_pool_row, pgsql_section, pool_row, send_ack, send_report, snapshot
from tests.unit.fleet.core.test_proxysql_cnf import MYSQL_ONLY_CNF, mixed_document

pytestmark = pytest.mark.django_db(transaction=True)


def monitor_row(host: str, port: int, hostgroup: int, lag_s: float | None) -> dict[str, Any]:
    """A ``monitor`` row of a snapshot: a server the monitor reaches, lagging ``lag_s`` seconds."""
    return {"hostgroup": hostgroup, "srv_host": host, "srv_port": port, "status": "ONLINE", "lag_s": lag_s}


def test_the_overview_rolls_up_both_engines_and_degrades_on_a_shun_or_a_lag(
    context: BrowserContext,  # noqa: F811 (test_browser's fixture)
    nodes: list[ProxyNode],  # noqa: F811 (test_browser's fixture)
) -> None:
    pg_shunned, mysql_lagging = nodes
    ProxyNode.objects.filter(pk__in=[node.pk for node in nodes]).update(state=ProxyNode.State.APPLIED)
    mysql = [pool_row("db1", 3306, 10), pool_row("db2", 3307, 20)]
    pg_stats = snapshot(mysql) | {"pgsql": pgsql_section(pool=[pgsql_pool_row("pg1", 5432, 30, "SHUNNED")])}
    send_report(pg_shunned, timezone.now(), pg_stats)
    lag_stats = snapshot(mysql) | {"monitor": [monitor_row("db2", 3307, 20, 42.0)]}
    send_report(mysql_lagging, timezone.now(), lag_stats)

    page = log_in(context, roles.VIEWER)
    expect(node_cell(page, pg_shunned, "backends")).to_have_text("2/3")
    expect(node_cell(page, pg_shunned, "health")).to_contain_text("degraded")
    expect(node_cell(page, pg_shunned, "health")).to_contain_text("PostgreSQL pg1:5432 (hostgroup 30) SHUNNED")
    expect(node_cell(page, mysql_lagging, "backends")).to_have_text("2/2")
    expect(node_cell(page, mysql_lagging, "health")).to_contain_text("degraded")
    expect(node_cell(page, mysql_lagging, "health")).to_contain_text("MySQL db2:3307 lags 42 s")


def test_a_user_form_refuses_an_empty_username_and_out_of_range_numbers_and_warns_of_a_hostgroup_with_no_servers(
    context: BrowserContext,  # noqa: F811 (test_browser's fixture)
) -> None:
    cluster = make_cluster("browser-users")
    page = log_in(context, roles.OPERATOR)
    page.goto(f"/cluster/?cluster={cluster.pk}")
    page.goto("/tables/users/add/")
    page.fill("input[name=username]", "  ")
    page.fill("input[name=max_connections]", str(2**31))
    page.click("button[type=submit]")
    expect(page.locator("#field-username .field-errors")).to_have_text("may not be empty")
    expect(page.locator("#field-max_connections .field-errors")).to_have_text(
        "2147483648 is above the maximum 2147483647"
    )
    page.fill("input[name=username]", "reporter")
    page.fill("input[name=max_connections]", "100")
    page.fill("input[name=password]", "reporter-pass")
    page.fill("input[name=default_hostgroup]", "99")
    page.click("button[type=submit]")
    expect(page.locator(".flash.success")).to_contain_text("Saved")
    expect(page.locator(".flash.warning")).to_have_text(
        "Warning: hostgroup 99 has no servers (referenced by mysql_users[1] username='reporter' default_hostgroup)."
    )
    assert User.objects.filter(cluster=cluster, username="reporter").exists()


def test_a_mysql_only_cnf_import_keeps_postgresql_and_shards_and_publish_warns_of_what_it_takes_away(
    context: BrowserContext,  # noqa: F811 (test_browser's fixture)
) -> None:
    cluster = make_cluster("browser-mixed", mixed_document())
    publishing.publish(cluster, None, "before the migration")
    page = log_in(context, roles.OPERATOR)
    page.goto(f"/cluster/?cluster={cluster.pk}")
    page.goto("/import/")
    page.fill("textarea[name=text]", MYSQL_ONLY_CNF)
    page.get_by_role("button", name="Import into the draft").click()
    imported = page.locator("section.imported")
    expect(imported).to_contain_text("mysql_servers: 1")
    expect(imported).to_contain_text("pgsql_servers: 1")
    expect(imported).to_contain_text("mysql_shards: 2")
    expect(page.locator(".import-notes")).to_contain_text("pgsql_users: the draft's 1 row kept")
    page.get_by_role("link", name="Review and publish").click()
    warnings = page.locator(".publish-warnings")
    expect(warnings).to_contain_text("removes the whole of mysql_query_rules: v1 has 2 rows, this version none")
    expect(warnings).to_contain_text("mysql-interfaces changes from '127.0.0.1:6033' to '0.0.0.0:6033'")


def edit_a_server(cluster_name: str, weight: int) -> None:
    """An unpublished edit: the draft's first server gets ``weight``."""
    server = Server.objects.filter(cluster__name=cluster_name).order_by("pk").first()
    assert server is not None
    server.weight = weight
    save_row(server, None)


def test_discard_the_draft_and_a_rollback_that_says_it_discards_it(
    context: BrowserContext,  # noqa: F811 (test_browser's fixture)
) -> None:
    cluster = make_cluster("browser-discard")
    publishing.publish(cluster, None, "v1")
    edit_a_server(cluster.name, 7)
    page = log_in(context, roles.OPERATOR)
    asked: list[str] = []
    page.on("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.goto(f"/cluster/?cluster={cluster.pk}")
    page.goto("/publish/")
    expect(page.locator("table.changes")).to_contain_text("weight")
    page.get_by_role("button", name="Discard draft").click()
    expect(page.locator(".flash.success")).to_have_text(
        "Discarded the draft's unpublished edits: it is version 1's config again."
    )
    expect(page.locator(".nothing")).to_be_visible()
    expect(page.get_by_role("button", name="Discard draft")).to_have_count(0)
    assert asked == ["Discard every unpublished edit of the draft? It becomes v1's config again."]
    assert Server.objects.filter(cluster=cluster, weight=7).count() == 0
    assert AuditEntry.objects.filter(cluster=cluster, action=AuditEntry.Action.DISCARD).count() == 1

    edit_a_server(cluster.name, 8)
    publishing.publish(cluster, None, "v2")
    edit_a_server(cluster.name, 9)  # unpublished: the rollback drops it
    page.goto("/versions/")
    page.get_by_role("button", name="Roll back to v1").click()
    expect(page.locator(".flash")).to_contain_text(
        "Rolled back to version 1's config as version 3. The draft's unpublished edits were discarded."
    )
    assert "This discards the draft's unpublished edits: the draft becomes v1's config." in asked[-1]
    assert Server.objects.filter(cluster=cluster, weight=9).count() == 0


def renumber(cluster: Cluster, old: int, new: int) -> None:
    """Give the draft's rule ``old`` the number ``new``."""
    rule = QueryRule.objects.get(cluster=cluster, rule_id=old)
    rule.rule_id = new
    save_row(rule, None)


def test_rule_hits_stay_on_their_rule_when_the_rules_are_renumbered(
    context: BrowserContext,  # noqa: F811 (test_browser's fixture)
) -> None:
    cluster = make_cluster("browser-hits")  # rule 1 sends SELECT ... FOR UPDATE to the writer, rule 2 SELECT to readers
    node = ProxyNode.objects.create(cluster=cluster, name="hits-node")
    version = publishing.publish(cluster, None, "v1")
    now = timezone.now()
    send_ack(node, version, now)
    send_report(
        node, now, snapshot([]) | {"query_rules": [{"rule_id": 1, "hits": 5}, {"rule_id": 2, "hits": 700}]}, version
    )
    renumber(cluster, 1, 10)  # the draft swaps their order: FOR UPDATE is now rule 10, SELECT rule 1
    renumber(cluster, 2, 1)
    page = log_in(context, roles.VIEWER)
    page.goto(f"/cluster/?cluster={cluster.pk}")
    page.goto("/tables/query-rules/")
    row = page.locator("table.grid tbody tr")
    expect(row.filter(has_text="FOR UPDATE").locator("td.hits")).to_contain_text("hits-node: 5never matches")
    expect(row.filter(has_text="^SELECT").filter(has_not_text="FOR UPDATE").locator("td.hits")).to_contain_text(
        "hits-node: 700"
    )


BYTE_COUNTERS = (
    "Queries_frontends_bytes_recv",
    "Queries_frontends_bytes_sent",
    "Queries_backends_bytes_sent",
    "Queries_backends_bytes_recv",
)


def test_a_real_nodes_page_shows_its_bytes_its_status_changes_when_and_its_replicas_lag(
    context: BrowserContext,  # noqa: F811 (test_browser's fixture)
    sandbox: Sandbox,
    start_proxy: StartProxy,
) -> None:
    config = rw_split_config(sandbox.primary().port, [r.port for r in sandbox.replicas()])
    dead = free_port()  # a reader nobody listens on: the monitor shuns it, a status change
    config["mysql_servers"].append({"hostgroup_id": READER_HG, "hostname": "127.0.0.1", "port": dead})
    config["global_variables"] = global_variables()
    proxy = start_proxy(config)
    with proxy.connect(database="app", autocommit=True) as client, client.cursor() as cur:
        for _ in range(20):
            cur.execute("SELECT REPEAT('x', 1000)")
            assert len(cur.fetchone()[0]) == 1000

    def reported() -> bool:
        stats = proxy.stats()
        replica = [row for row in stats["monitor"] if row["srv_port"] == sandbox.replicas()[0].port]
        shunned = [row for row in stats["server_transitions"] if row["srv_port"] == dead]
        return bool(shunned) and any(row["lag_s"] is not None for row in replica)

    wait_for(reported, "the replica's lag measured and the dead reader shunned", proxy)
    cluster = Cluster.objects.create(name="browser-node")
    node = ProxyNode.objects.create(cluster=cluster, name="real-node")
    send_report(node, timezone.now(), proxy.stats())

    page = log_in(context, roles.VIEWER)
    page.goto(f"/nodes/{node.name}/")
    counters = page.locator("table.counters")
    for name in BYTE_COUNTERS:
        value = counters.locator("tr", has=page.locator(f'code:text-is("{name}")')).locator("td.num")
        expect(value).to_have_text(re.compile(r"^[1-9][0-9]*$"))
    sent = counters.locator("tr", has=page.locator('code:text-is("Queries_frontends_bytes_sent")')).locator("td.num")
    assert int(sent.inner_text()) > 20 * 1000  # the 20 rows of 1,000 bytes went to the client
    change = page.locator("table.transitions tbody tr", has_text=f"127.0.0.1:{dead}").first
    expect(change).to_contain_text("ONLINE → SHUNNED")
    expect(change.locator("time")).to_have_text(re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$"))
    replica = page.locator("section", has_text="Servers as the monitor sees them").locator(
        "tbody tr", has_text=f":{sandbox.replicas()[0].port}"
    )
    expect(replica.first.locator("td.num")).to_have_text(re.compile(r"^\d+(\.\d+)?$"))
