"""A DBA's tools in a real browser (the Chromium of ``test_browser``): a proxysql.cnf imported from a file, an API
token made and revoked, and the audit log that shows both, with where each came from; the shard map's tester asked
of the draft and of a published version."""

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
