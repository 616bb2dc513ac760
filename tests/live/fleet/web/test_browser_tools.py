"""A DBA's tools in a real browser (the Chromium of ``test_browser``): a proxysql.cnf imported from a file, an API
token made and revoked, and the audit log that shows both, with where each came from; the shard map's tester asked
of the draft and of a published version; the rule tester asked of the PostgreSQL rules, then of the MySQL ones."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import BrowserContext, expect

from fleet.core import publishing, roles
from fleet.core.drafts import save_row
from fleet.core.models import Cluster, Server, ShardedTable
from tests.live.fleet.web.test_browser import browser, context, log_in  # noqa: F401 (fixtures)
from tests.support.control_plane import make_cluster
from tests.unit.fleet.core.test_proxysql_cnf import PROXYSQL_CNF
from tests.unit.fleet.core.test_shard_tester import sharded_document

pytestmark = pytest.mark.django_db(transaction=True)


def api_status(base: str, token: str) -> int:
    """The status the API answers a request carrying ``token``."""
    request = urllib.request.Request(f"{base}/api/v1/clusters/", headers={"Authorization": f"Token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as refused:
        return refused.code


def test_import_a_cnf_make_and_revoke_a_token_and_see_both_audited(
    context: BrowserContext,  # noqa: F811 (test_browser's fixture)
    live_server: Any,
    tmp_path: Path,
) -> None:
    cluster = Cluster.objects.create(name="browser-import")
    cnf = tmp_path / "proxysql.cnf"
    cnf.write_text(PROXYSQL_CNF)
    page = log_in(context, roles.OPERATOR)
    page.on("dialog", lambda dialog: dialog.accept())  # revoking asks first
    page.goto(f"/cluster/?cluster={cluster.pk}")
    page.goto("/import/")
    page.set_input_files("input[name=file]", str(cnf))
    page.get_by_role("button", name="Import into the draft").click()
    expect(page.locator(".import-errors")).to_contain_text("scheduler not imported")  # it changes behaviour
    assert not Server.objects.filter(cluster=cluster).exists()
    page.set_input_files("input[name=file]", str(cnf))
    page.check("input[name=force]")
    page.get_by_role("button", name="Import into the draft").click()
    expect(page.locator("section.imported")).to_contain_text("mysql_servers: 3")
    expect(page.locator(".import-notes")).to_contain_text("mysql_variables.stacksize not imported")
    assert Server.objects.filter(cluster=cluster).count() == 3

    page.goto("/account/token/")
    page.get_by_role("button", name="New token").click()
    token = page.locator("#token").inner_text()
    assert api_status(live_server.url, token) == 200
    page.get_by_role("button", name="Revoke").click()
    expect(page.locator(".token-state")).to_contain_text("No token.")
    assert api_status(live_server.url, token) == 401

    page.goto("/audit/?action=import")
    entries = page.locator("table tbody tr")
    expect(entries).to_have_count(1)
    expect(entries.first).to_contain_text("web")  # the way in
    expect(entries.first).to_contain_text("127.0.0.1")  # and the client's address


def test_the_shard_tester_answers_for_the_draft_and_a_version(context: BrowserContext) -> None:  # noqa: F811
    cluster = make_cluster("browser-shards", sharded_document())
    publishing.publish(cluster, None, "by_mod is mod 2")
    row = ShardedTable.objects.get(cluster=cluster, tablename="by_mod")
    row.algorithm, row.parameters = "range", json.dumps({"ranges": [[None, 100, 1]], "default": 0})
    save_row(row, None)
    page = log_in(context, roles.VIEWER)
    page.goto(f"/cluster/?cluster={cluster.pk}")
    page.get_by_role("link", name="Shard map").click()
    expect(page.locator("section.shard-group h2")).to_contain_text("Shard group shops")
    expect(page.locator("table.sharded-tables")).to_contain_text("-∞ ≤ City_ID < 100 → shard 1")
    page.fill("input[name=table]", "shop.by_mod")
    page.fill("input[name=key]", "8")
    page.get_by_role("button", name="Which shard?").click()
    expect(page.locator("section.location .answer")).to_have_text(
        "shop.by_mod key 8 is on shard 1 of shops (hostgroup 101)"
    )
    expect(page.locator(".shard-servers")).to_contain_text("10.0.1.11:3306")
    page.select_option("select[name=source]", "1")
    page.get_by_role("button", name="Which shard?").click()
    expect(page.locator("section.location .answer")).to_have_text(
        "shop.by_mod key 8 is on shard 0 of shops (hostgroup 100)"
    )
    expect(page.locator("h1")).to_contain_text("version 1")
    page.fill("input[name=key]", "eight")
    page.get_by_role("button", name="Which shard?").click()
    expect(page.locator("section.location h2")).to_have_text("No shard holds it")
    expect(page.locator("section.location .answer")).to_contain_text("the shard key must be an integer, not 'eight'")
    page.fill("input[name=table]", "shop.nothing")
    page.get_by_role("button", name="Which shard?").click()
    expect(page.locator(".form-errors")).to_contain_text("shop.nothing is not a sharded or global table")


def rule_tester_document() -> dict[str, Any]:
    """A draft whose PostgreSQL rules refuse pg_sleep and send the ``sales`` database's reads to hostgroup 21, and
    whose MySQL rule sends every read to hostgroup 11 (the same query goes elsewhere by the engine asked)."""
    return {
        "mysql_servers": [{"hostgroup_id": 10, "hostname": "10.0.0.1"}, {"hostgroup_id": 11, "hostname": "10.0.0.2"}],
        "mysql_users": [{"username": "app", "password": "app-pw", "default_hostgroup": 10}],
        "mysql_query_rules": [
            {"rule_id": 1, "active": 1, "match_digest": "^SELECT", "destination_hostgroup": 11, "apply": 1}
        ],
        "pgsql_servers": [{"hostgroup_id": 20, "hostname": "10.0.1.1"}, {"hostgroup_id": 21, "hostname": "10.0.1.2"}],
        "pgsql_users": [{"username": "app", "password": "app-pw", "default_hostgroup": 20}],
        "pgsql_query_rules": [
            {"rule_id": 4, "active": 1, "match_pattern": "pg_sleep", "error_msg": "no sleeping here", "apply": 1},
            {
                "rule_id": 5,
                "active": 1,
                "database": "sales",
                "match_digest": "^SELECT",
                "destination_hostgroup": 21,
                "apply": 1,
                "comment": "sales reads",
            },
        ],
    }


def test_the_rule_tester_tries_a_query_on_the_postgresql_rules(context: BrowserContext) -> None:  # noqa: F811
    cluster = make_cluster("browser-pg-rules", rule_tester_document())
    page = log_in(context, roles.VIEWER)
    page.goto(f"/cluster/?cluster={cluster.pk}")
    page.get_by_role("link", name="Rule tester").click()
    page.fill("textarea[name=query]", "SELECT * FROM orders WHERE id = 7")
    page.select_option("select[name=engine]", "pgsql")
    page.fill("input[name=username]", "app")
    page.fill("input[name=schemaname]", "sales")
    page.get_by_role("button", name="Try it").click()
    trial = page.locator("section.trial")
    expect(trial.locator(".answer")).to_have_text("runs on hostgroup 21 (rule 5's destination)")
    expect(trial.locator(".matched")).to_have_text("5 (sales reads)")
    expect(trial.locator(".outcome-destination_hostgroup")).to_have_text("21")
    expect(page.locator("select[name=engine]")).to_have_value("pgsql")  # the form keeps what was asked

    page.fill("input[name=schemaname]", "hr")  # rule 5 is the sales database's
    page.get_by_role("button", name="Try it").click()
    expect(trial.locator(".answer")).to_have_text(
        "runs on hostgroup 20 (app's default_hostgroup: no rule sets a destination)"
    )
    expect(trial.locator(".matched")).to_have_text("none")

    page.fill("textarea[name=query]", "SELECT pg_sleep(5)")
    page.fill("input[name=schemaname]", "sales")
    page.get_by_role("button", name="Try it").click()
    expect(trial.locator(".answer")).to_have_text(
        "refused by the proxy with an ErrorResponse (SQLSTATE 28000): no sleeping here"
    )
    expect(trial.locator(".matched")).to_have_text("4")

    page.select_option("select[name=engine]", "mysql")  # the same query on the MySQL rules
    page.get_by_role("button", name="Try it").click()
    expect(trial.locator(".answer")).to_have_text("runs on hostgroup 11 (rule 1's destination)")
