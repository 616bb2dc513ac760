"""The rule tester (page and API) and the query rules list's action columns and per-node hits."""

from __future__ import annotations

from django.contrib.auth.models import User as Account
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from fleet.core import publishing, roles, ruletest
from fleet.core.drafts import save_row
from fleet.core.models import Cluster, PgsqlQueryRule, PgsqlServer, PgsqlUser, ProxyNode, QueryRule
from tests.support.control_plane import LOGIN_PASSWORD, make_account

API = "/api/v1"


def viewer_client() -> Client:
    """A browser session of a viewer."""
    client = Client()
    assert client.login(username=make_account(roles.VIEWER).username, password=LOGIN_PASSWORD)
    return client


def test_the_seed_rules_route_reads_and_locking_reads(cluster: Cluster) -> None:
    config = publishing.compile_draft(cluster)
    read = ruletest.try_query(config, "SELECT * FROM t WHERE id = 5", username="app")
    assert ([r.rule_id for r in read.matched], read.hostgroup) == ([2], 20)
    assert (
        read.answer == "runs on hostgroup 20 (rule 2's destination)"
        and read.digest_text == "SELECT * FROM t WHERE id = ?"
    )
    locking = ruletest.try_query(config, "SELECT * FROM t FOR UPDATE", username="app")
    assert ([r.rule_id for r in locking.matched], locking.hostgroup) == ([1], 10)
    write = ruletest.try_query(config, "UPDATE t SET a = 1", username="app")
    assert (write.matched, write.hostgroup) == ([], 10) and "default_hostgroup" in write.answer
    stranger = ruletest.try_query(config, "UPDATE t SET a = 1", username="nobody")
    assert stranger.hostgroup is None and "could not log in" in stranger.notes[0]


def test_a_rewrite_a_block_and_the_draft_against_the_published_version(cluster: Cluster) -> None:
    publishing.publish(cluster, None, "v1")
    save_row(QueryRule(cluster=cluster, rule_id=5, active=True, match_pattern="^DELETE", error_msg="no deletes"), None)
    rewrite = QueryRule(
        cluster=cluster, rule_id=3, active=True, match_pattern="FROM old_t", replace_pattern="FROM new_t", apply=False
    )
    save_row(rewrite, None)
    config = publishing.compile_draft(cluster)
    blocked = ruletest.try_query(config, "DELETE FROM t", username="app")
    assert blocked.hostgroup is None and blocked.answer == "refused by the proxy with error 1148: no deletes"
    renamed = ruletest.try_query(config, "UPDATE old_t SET a = 1 FROM old_t", username="app")
    assert renamed.rewritten == "UPDATE old_t SET a = 1 FROM new_t"
    published = ruletest.try_query(ruletest.config_of(cluster, "1"), "DELETE FROM t", username="app")
    assert published.hostgroup == 10  # version 1 has no blocking rule yet


def test_the_page_answers_a_viewer(cluster: Cluster) -> None:
    client = viewer_client()
    assert "Try it" in client.get(reverse("web:rule_test")).content.decode()
    page = client.get(
        reverse("web:rule_test"), {"query": "SELECT 1", "username": "app", "source": "draft", "client_addr": "10.0.0.1"}
    ).content.decode()
    assert "runs on hostgroup 20 (rule 2&#x27;s destination)" in page
    assert "<code>SELECT ?</code>" in page
    hostile = client.get(reverse("web:rule_test"), {"query": "<script>alert(1)</script>", "username": "<b>x</b>"})
    assert hostile.status_code == 200 and "<script>alert(1)</script>" not in hostile.content.decode()


def test_the_api_answers_a_viewer_and_refuses_a_missing_version(cluster: Cluster) -> None:
    api = APIClient()
    api.force_authenticate(make_account(roles.VIEWER))
    response = api.post(f"{API}/rules/test/", {"query": "SELECT 1", "username": "app"}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["matched"] == [2] and response.json()["hostgroup"] == 20
    missing = api.post(f"{API}/rules/test/", {"query": "SELECT 1", "username": "app", "source": "7"}, format="json")
    assert missing.status_code == 400 and "no version 7" in str(missing.json())
    nobody = APIClient().post(f"{API}/rules/test/", {"query": "SELECT 1", "username": "app"}, format="json")
    assert nobody.status_code == 401


def test_the_rules_list_shows_actions_and_each_nodes_hits(cluster: Cluster) -> None:
    report = {"query_rules": [{"rule_id": 1, "hits": 3}, {"rule_id": 2, "hits": 41}]}
    ProxyNode.objects.create(cluster=cluster, name="n1", last_report=report)
    ProxyNode.objects.create(cluster=cluster, name="n2", last_report={"query_rules": [{"rule_id": 2, "hits": 1}]})
    page = viewer_client().get(reverse("web:table_list", args=["query-rules"])).content.decode()
    for column in ("replace_pattern", "error_msg", "flagOUT", "mirror_hostgroup", "hits"):
        assert f">{column}</th>" in page, column
    assert "n1: 41</span><br><span" in page and "n2: 1</span>" in page and "n1: 3</span>" in page


def test_a_rule_that_can_never_match_is_flagged_in_the_list_and_the_preview(cluster: Cluster) -> None:
    after = QueryRule(cluster=cluster, rule_id=3, active=True, match_digest="^SELECT.*FOR UPDATE", apply=True)
    save_row(after, None)  # the seed's rule 1 is the same with apply=1 (and rule 2, ^SELECT, would stop it too)
    page = viewer_client().get(reverse("web:table_list", args=["query-rules"])).content.decode()
    assert "never matches: rule 1 first" in page and page.count("never matches") == 1
    _, warnings, _ = publishing.draft_preview(cluster)
    assert any("rule_id=3 can never match: rule_id=1 (apply=1)" in w for w in warnings)


def test_postgresql_rules_are_tried_as_the_pooling_proxy_reads_them(cluster: Cluster) -> None:
    """With engine pgsql the tester reads pgsql_query_rules (database as the schema), pgsql_users and pgsql_servers:
    a block answers with the PostgreSQL error, a destination of the rule or the user's default hostgroup, outputs
    the pooling proxy does not act on are named; the MySQL rules are not involved (nor the reverse)."""
    save_row(PgsqlServer(cluster=cluster, hostgroup_id=100, hostname="127.0.0.1"), None)
    save_row(PgsqlUser(cluster=cluster, username="app_pg", password="pw", default_hostgroup=100), None)
    block = PgsqlQueryRule(cluster=cluster, rule_id=1, active=True, match_pattern="forbidden_pg", error_msg="blocked")
    save_row(block, None)
    route = PgsqlQueryRule(
        cluster=cluster, rule_id=2, active=True, database="shop", match_digest="^SELECT", destination_hostgroup=101
    )
    save_row(route, None)
    save_row(PgsqlQueryRule(cluster=cluster, rule_id=3, active=True, match_digest="^SHOW", mirror_hostgroup=5), None)
    config = publishing.compile_draft(cluster)

    def tried(query: str, database: str = "postgres", username: str = "app_pg") -> ruletest.Trial:
        return ruletest.try_query(config, query, username=username, schemaname=database, engine=ruletest.PGSQL)

    blocked = tried("SELECT 'forbidden_pg'")
    assert blocked.answer == "refused by the proxy with an ErrorResponse (SQLSTATE 28000): blocked"
    assert [r.rule_id for r in blocked.matched] == [1] and blocked.hostgroup is None
    assert (tried("SELECT 1").hostgroup, tried("SELECT 1").matched) == (100, [])
    routed = tried("SELECT 1", database="shop")
    assert routed.answer == "runs on hostgroup 101 (rule 2's destination)"
    assert routed.notes == ["hostgroup 101 has no servers in this config: no server could run it"]
    assert tried("SHOW search_path").notes == ["the PostgreSQL proxy does not act on mirror_hostgroup yet"]
    assert "could not log in" in tried("SELECT 1", username="app").notes[0]  # app is a MySQL user
    mysql = ruletest.try_query(config, "SELECT 'forbidden_pg'", username="app")
    assert mysql.hostgroup == 20 and [r.rule_id for r in mysql.matched] == [2]  # the seed's MySQL rules
    page = viewer_client().get(
        reverse("web:rule_test"),
        {"query": "SELECT 'forbidden_pg'", "username": "app_pg", "engine": "pgsql", "source": "draft"},
    )
    assert "SQLSTATE 28000): blocked" in page.content.decode()
    api = APIClient()
    api.force_authenticate(Account.objects.get(username=f"{roles.VIEWER}-account"))
    body = {"query": "SELECT 1", "username": "app_pg", "schemaname": "shop", "engine": "pgsql"}
    answer = api.post(f"{API}/rules/test/", body, format="json")
    assert answer.status_code == 200 and answer.json()["hostgroup"] == 101
    wrong = api.post(f"{API}/rules/test/", {**body, "engine": "oracle"}, format="json")
    assert wrong.status_code == 400 and list(wrong.json()) == ["engine"]
