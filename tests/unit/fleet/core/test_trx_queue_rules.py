"""The query rule columns ``trx_queue`` and ``trx_queue_key`` (hot rows, docs/hot-rows.md) in the control plane: the
row form (with its help), the API, a JSON and a ``proxysql.cnf`` import, the published document; blank is unset, and
a bad combination is refused everywhere with the message the node refuses it with (its rule engine's row check)."""

from __future__ import annotations

import html
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from fleet.core import publishing
from fleet.core.models import Cluster, QueryRule
from fleet.core.proxysql_cnf import import_cnf
from proxyapp.config.document import ConfigError
from proxyapp.config.rulecompile import check_rule
from proxyapp.config.tables import MysqlQueryRule
from tests.unit.fleet.web.test_web_views import browser_post, operator

pytestmark = pytest.mark.django_db
__all__ = ["operator"]  # the web tests' fixture, used here

API = "/api/v1"
PATTERN = r"^UPDATE hot SET .* WHERE id = (\d+)"
#: Columns of a rule the node queues: by the pattern's group, and by the WHERE clause's column.
BY_GROUP = {"match_pattern": PATTERN, "trx_queue": "hot", "trx_queue_key": r"\1"}
BY_COLUMN = {"match_digest": "^UPDATE hot ", "trx_queue": "hot.rows", "trx_queue_key": "id"}
#: Combinations the node refuses (docs/hot-rows.md): one column without the other, a group the pattern lacks, a
#: group without a pattern or of a negated one, a queue or a column that is no name; and the RuleEngine's older check
#: of the same kind (a replacement naming a group the pattern lacks), which the per-row validation does not make.
BAD = [
    {"match_pattern": PATTERN, "replace_pattern": r"\3"},
    {"match_pattern": PATTERN, "trx_queue": "hot"},
    {"match_pattern": PATTERN, "trx_queue_key": r"\1"},
    {"match_pattern": PATTERN, "trx_queue": "hot", "trx_queue_key": r"\2"},
    {"match_digest": "^UPDATE", "trx_queue": "hot", "trx_queue_key": r"\1"},
    {"match_pattern": PATTERN, "negate_match_pattern": True, "trx_queue": "hot", "trx_queue_key": r"\1"},
    {"match_pattern": PATTERN, "trx_queue": "hot queue", "trx_queue_key": "id"},
    {"match_pattern": PATTERN, "trx_queue": "hot", "trx_queue_key": "1d"},
]


def node_says(columns: dict[str, Any]) -> tuple[str, str]:
    """The column and the reason the node refuses this rule (taken as active) with."""
    problem = check_rule(MysqlQueryRule(rule_id=1, **columns))
    assert problem is not None
    return problem


def form_values(columns: dict[str, Any]) -> dict[str, str]:
    """``columns`` as the row form takes them (a checkbox "on")."""
    return {name: "on" if value is True else str(value) for name, value in columns.items()}


def test_the_form_shows_the_columns_help_and_saves_a_queueing_rule(cluster: Cluster, operator: Client) -> None:
    add = reverse("web:row_add", args=["query-rules"])
    page = operator.get(add).content.decode()
    assert 'name="trx_queue"' in page and 'name="trx_queue_key"' in page
    assert "hot-row queue" in page and "a group of match_pattern" in page  # each column's help
    response = operator.post(add, browser_post(page, rule_id="40", active="on", apply="on", **BY_GROUP))
    assert response.status_code == 302, response.content.decode()[:2000]
    response = operator.post(add, browser_post(page, rule_id="41", active="on", **BY_COLUMN))
    assert response.status_code == 302, response.content.decode()[:2000]
    response = operator.post(add, browser_post(page, rule_id="42", active="on", match_digest="^SELECT"))
    assert response.status_code == 302, response.content.decode()[:2000]
    rules = QueryRule.objects.filter(cluster=cluster, rule_id__in=(40, 41, 42)).order_by("rule_id")
    assert [(r.trx_queue, r.trx_queue_key) for r in rules] == [("hot", r"\1"), ("hot.rows", "id"), (None, None)]
    listed = operator.get(reverse("web:table_list", args=["query-rules"])).content.decode()
    assert "hot.rows" in listed


@pytest.mark.parametrize("columns", BAD)
def test_the_form_refuses_a_bad_combination_with_the_nodes_message(
    cluster: Cluster, operator: Client, columns: dict[str, Any]
) -> None:
    add = reverse("web:row_add", args=["query-rules"])
    data = browser_post(operator.get(add).content.decode(), rule_id="43", **form_values(columns))
    response = operator.post(add, data)
    assert response.status_code == 200
    assert html.escape(node_says(columns)[1]) in response.content.decode()
    assert not QueryRule.objects.filter(cluster=cluster, rule_id=43).exists()


def test_the_api_takes_and_shows_the_columns(cluster: Cluster, api_operator: APIClient) -> None:
    created = api_operator.post(f"{API}/query-rules/", {"rule_id": 44, "active": True, **BY_GROUP}, format="json")
    assert created.status_code == 201, created.json()
    assert (created.json()["trx_queue"], created.json()["trx_queue_key"]) == ("hot", r"\1")
    blank = api_operator.post(f"{API}/query-rules/", {"rule_id": 45, "trx_queue": "", "trx_queue_key": ""})
    assert blank.status_code == 201, blank.json()
    assert QueryRule.objects.get(cluster=cluster, rule_id=45).trx_queue is None
    changed = api_operator.patch(f"{API}/query-rules/44/", {"trx_queue_key": "id"}, format="json")
    assert changed.status_code == 200 and changed.json()["trx_queue_key"] == "id"
    schema = api_operator.get("/api/schema/?format=json").json()
    assert {"trx_queue", "trx_queue_key"} <= set(schema["components"]["schemas"]["QueryRule"]["properties"])


@pytest.mark.parametrize("columns", BAD)
def test_the_api_refuses_a_bad_combination_with_the_nodes_message(
    cluster: Cluster, api_operator: APIClient, columns: dict[str, Any]
) -> None:
    refused = api_operator.post(f"{API}/query-rules/", {"rule_id": 46, **columns}, format="json")
    assert refused.status_code == 400
    column, reason = node_says(columns)
    assert reason in refused.json()[column]
    assert not QueryRule.objects.filter(cluster=cluster, rule_id=46).exists()


def test_an_import_carries_the_columns_to_the_published_document(cluster: Cluster) -> None:
    document = publishing.export_document(cluster)
    document["mysql_query_rules"].append({"rule_id": 47, "active": 1, **BY_COLUMN})
    publishing.import_document(cluster, document, None)
    rule = QueryRule.objects.get(cluster=cluster, rule_id=47)
    assert (rule.trx_queue, rule.trx_queue_key) == ("hot.rows", "id")
    exported = {row["rule_id"]: row for row in publishing.export_document(cluster)["mysql_query_rules"]}
    assert (exported[47]["trx_queue"], exported[47]["trx_queue_key"]) == ("hot.rows", "id")
    assert exported[1]["trx_queue"] is None  # the seed's rules queue nothing
    version = publishing.publish(cluster, None)
    published = {row["rule_id"]: row for row in version.document["mysql_query_rules"]}
    assert (published[47]["trx_queue"], published[47]["trx_queue_key"]) == ("hot.rows", "id")


@pytest.mark.parametrize("columns", BAD)
def test_an_import_with_a_bad_combination_is_refused_with_the_nodes_message(
    cluster: Cluster, columns: dict[str, Any]
) -> None:
    document = publishing.export_document(cluster)
    document["mysql_query_rules"].append({"rule_id": 48, "active": 1, **columns})
    with pytest.raises(ConfigError) as refused:
        publishing.import_document(cluster, document, None)
    (error,) = refused.value.errors
    assert error.endswith("(rule_id=48): {}: {}".format(*node_says(columns)))
    assert not QueryRule.objects.filter(cluster=cluster, rule_id=48).exists()


def test_a_proxysql_cnf_rule_may_queue(cluster: Cluster) -> None:
    pattern = PATTERN.replace("\\", "\\\\")  # libconfig's escape
    cnf = f"""
mysql_query_rules =
(
    {{ rule_id = 1; active = 1; match_pattern = "{pattern}"; trx_queue = "hot";
       trx_queue_key = "\\\\1"; apply = 0 }},
    {{ rule_id = 2; active = 1; match_pattern = "{pattern}"; trx_queue = "hot" }}
)
"""
    with pytest.raises(ConfigError) as refused:
        import_cnf(cluster, cnf, None)
    assert "(rule_id=2): {}: {}".format(*node_says({"match_pattern": PATTERN, "trx_queue": "hot"})) in str(
        refused.value
    )
    config, _ = import_cnf(cluster, cnf.replace('trx_queue = "hot" }', "apply = 0 }"), None)
    assert [(r.rule_id, r.trx_queue, r.trx_queue_key) for r in config.mysql_query_rules] == [
        (1, "hot", r"\1"),
        (2, None, None),
    ]
