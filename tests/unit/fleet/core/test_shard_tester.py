"""The shard map page and the "which shard holds key K of table T" tester (page and API): every algorithm's answer
as the proxy's own code gives it, its refusals, bad input, the draft against a published version, and who may ask."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User as Account
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from fleet.core import publishing, roles, shards
from fleet.core.drafts import save_row
from fleet.core.models import Cluster, ProxyNode, ShardedTable
from tests.support.control_plane import NO_ROLE, client_for, make_cluster, seed_document
from tests.support.node_messages import pool_row, send_report, snapshot

LOCATE = "/api/v1/shards/locate/"
HOSTILE = '"><script>alert(1)</script>'

#: One table per algorithm over the group ``shops`` (hostgroups 100 and 101), and a global one.
TABLES: list[dict[str, Any]] = [
    {"tablename": "by_mod", "algorithm": "mod", "shard_key": "City_ID"},
    {"tablename": "by_hash", "algorithm": "hash", "shard_key": "code", "parameters": '{"key_type": "string"}'},
    {
        "tablename": "by_bucket",
        "algorithm": "consistent_hash",
        "shard_key": "id",
        "parameters": json.dumps({"buckets": 4, "assignment": [[0, 1, 1], [2, 3, 0]]}),
    },
    {
        "tablename": "by_range",
        "algorithm": "range",
        "shard_key": "id",
        "parameters": json.dumps({"ranges": [[None, 1000, 0], [1000, 2000, 1]]}),
    },
    {
        "tablename": "by_list",
        "algorithm": "list",
        "shard_key": "region",
        "parameters": json.dumps({"lists": {"0": ["eu", 7], "1": ["us"]}, "default": 1}),
    },
    {
        "tablename": "by_month",
        "algorithm": "date",
        "shard_key": "day",
        "parameters": json.dumps({"unit": "month", "start": "2024-01-01"}),
    },
    {"tablename": "cities", "algorithm": "global"},
]


def sharded_document() -> dict[str, Any]:
    """The seed config with two shard servers (hostgroups 100 and 101) and a table per algorithm in ``shop``."""
    document = seed_document()
    document["mysql_servers"] += [
        {"hostgroup_id": 100, "hostname": "10.0.1.10", "port": 3306},
        {"hostgroup_id": 101, "hostname": "10.0.1.11", "port": 3306, "status": "OFFLINE_SOFT"},
    ]
    document["mysql_shards"] = [
        {"shard_group": "shops", "shard": 0, "hostgroup_id": 100},
        {"shard_group": "shops", "shard": 1, "hostgroup_id": 101, "physical_schema": "shop_b"},
    ]
    document["mysql_sharded_tables"] = [{"schemaname": "shop", "shard_group": "shops", **t} for t in TABLES]
    return document


@pytest.fixture
def sharded(db: None) -> Cluster:
    """A cluster whose draft is ``sharded_document()``, nothing published."""
    return make_cluster("sharded", sharded_document())


@pytest.fixture
def viewer(sharded: Cluster, accounts: dict[str, Account]) -> Client:
    """A browser session of the viewer."""
    client = Client()
    client.force_login(accounts[roles.VIEWER])
    return client


def where(cluster: Cluster, table: str, key: str) -> tuple[int | None, str | None]:
    """(shard, refusal) for ``key`` of ``shop.table`` in the draft."""
    location = shards.locate(publishing.compile_draft(cluster), f"shop.{table}", key)
    return (None if location.shard is None else location.shard.number), location.refusal


@pytest.mark.parametrize(
    ("table", "key", "shard"),
    [
        ("by_mod", "7", 1),
        ("by_mod", "-7", 1),  # never negative, as the proxy computes it
        ("by_mod", "10", 0),
        # hash: the first 8 bytes of BLAKE2b(text), big-endian, mod 2; consistent_hash: the same mod 4 buckets
        ("by_hash", "7", 0),  # a string key: the text '7'
        ("by_hash", "abc", 1),
        ("by_hash", "ABC ", 1),
        ("by_bucket", "7", 0),  # bucket 2
        ("by_bucket", "2", 1),  # bucket 0
        ("by_bucket", "0401", 0),  # the integer 401: bucket 3
        ("by_range", "-5", 0),
        ("by_range", "999", 0),
        ("by_range", "1000", 1),
        ("by_list", "eu", 0),
        ("by_list", "7", 0),  # typed 7: the integer the list holds
        ("by_list", "us", 1),
        ("by_list", "fr", 1),  # the default
        ("by_month", "2024-01-31", 0),
        ("by_month", "2024-02-01", 1),
        ("by_month", "2024-03-15 10:00:00", 0),
    ],
)
def test_each_algorithm_places_a_key_as_the_proxy_does(sharded: Cluster, table: str, key: str, shard: int) -> None:
    assert where(sharded, table, key) == (shard, None)


@pytest.mark.parametrize(
    ("table", "key", "refusal"),
    [
        ("by_mod", "Hangzhou", "the shard key must be an integer, not 'Hangzhou'"),
        ("by_mod", "7.5", "the shard key must be an integer, not '7.5'"),
        ("by_range", "2000", "no shard holds the key 2000: it is in no range and the rule has no default"),
        ("by_month", "2023-12-31", "no shard holds the date 2023-12-31: the rule starts on 2024-01-01"),
        ("by_month", "yesterday", "the shard key must be a date 'YYYY-MM-DD', not 'yesterday'"),
        ("cities", "1", "a global table is on every shard: it has no shard key"),
    ],
)
def test_a_key_the_rule_refuses_is_answered_with_the_refusal(
    sharded: Cluster, table: str, key: str, refusal: str
) -> None:
    assert where(sharded, table, key) == (None, refusal)


def test_the_key_is_an_integer_when_it_is_digits_as_the_planner_reads_it() -> None:
    assert [shards.key_of(text) for text in ("7", "-7", "007", "7a", "+7", " 7", "0x1F")] == [
        7,
        -7,
        7,
        "7a",
        "+7",
        " 7",
        "0x1F",
    ]


def test_the_map_shows_groups_shards_servers_and_each_rule_in_words(sharded: Cluster) -> None:
    (group,) = shards.shard_groups(publishing.compile_draft(sharded))
    assert group.name == "shops"
    assert [(s.number, s.hostgroup_id, s.physical_schema) for s in group.shards] == [(0, 100, None), (1, 101, "shop_b")]
    assert [(v.hostname, v.status) for v in group.shards[1].servers] == [("10.0.1.11", "OFFLINE_SOFT")]
    rules = {t.name: t.rule for t in group.tables}
    assert rules == {
        "shop.by_bucket": "hash of the integer id into 4 buckets: buckets 0-1 → shard 1; buckets 2-3 → shard 0",
        "shop.by_hash": "BLAKE2b of code's text (without case, accents or trailing spaces), mod 2",
        "shop.by_list": 'region in ("eu", 7) → shard 0; region in ("us") → shard 1; any other key: shard 1',
        "shop.by_mod": "City_ID mod 2 (never negative)",
        "shop.by_month": "by month of day from 2024-01-01: one month per shard, round the 2 shards; "
        "earlier dates refused",
        "shop.by_range": "-∞ ≤ id < 1000 → shard 0; 1000 ≤ id < 2000 → shard 1; any other key: refused",
        "shop.cities": "whole on each of the 2 shards: written to all, read from one",
    }


def test_the_page_shows_the_map_the_nodes_traffic_and_answers_the_tester(sharded: Cluster, viewer: Client) -> None:
    node = ProxyNode.objects.create(cluster=sharded, name="shard-node", mysql_address="127.0.0.1:6033")
    now = timezone.now()
    for at, queries in ((now - timedelta(seconds=5), 100), (now, 150)):  # 10 queries/s on shard 0
        pools = [pool_row("10.0.1.10", 3306, 100, ConnUsed=3, ConnFree=2, Queries=queries)]
        send_report(node, at, snapshot(pools, [], questions=queries, clients=1), None)
    page = viewer.get(reverse("web:shard_map")).content.decode()
    assert "Shard group shops" in page and "City_ID mod 2 (never negative)" in page
    assert "shard-node: 10.0.1.10:3306" in page and "3 used / 2 free" in page
    assert '<td class="num">10.0</td>' in page  # shard 0's queries/s
    assert "shop_b" in page and "OFFLINE_SOFT" in page
    answer = viewer.get(reverse("web:shard_map"), {"table": "shop.by_mod", "key": "7"}).content.decode()
    assert "shop.by_mod key 7 is on shard 1 of shops (hostgroup 101)" in answer
    assert '<td class="shard-hostgroup">101</td>' in answer and "10.0.1.11:3306" in answer
    refused = viewer.get(reverse("web:shard_map"), {"table": "shop.by_mod", "key": "x"}).content.decode()
    assert "No shard holds it" in refused and "the shard key must be an integer, not &#x27;x&#x27;" in refused


def test_the_page_refuses_bad_input_clearly_never_with_a_500(sharded: Cluster, viewer: Client) -> None:
    url = reverse("web:shard_map")
    cases = {
        ("shop.nope", "1"): "shop.nope is not a sharded or global table in this config (its tables: shop.by_bucket",
        ("by_mod", "1"): "name the table as schema.table, not &#x27;by_mod&#x27;",
        ("shop.by_mod", ""): "give a key to locate",
        (f"shop.{HOSTILE}", HOSTILE): "is not a sharded or global table",
        (HOSTILE, "1"): "name the table as schema.table",
        ("shop.by_mod", "7\x00"): "Null characters are not allowed.",
        ("shop.by_mod", "9" * 300): "Ensure this value has at most 255 characters",
    }
    for (table, key), message in cases.items():
        response = viewer.get(url, {"table": table, "key": key})
        page = response.content.decode()
        assert response.status_code == 200 and message in page, (table, key)
        assert "<script>alert(1)" not in page and "Shard group shops" in page  # the map still shows
    missing = viewer.get(url, {"table": "shop.by_mod", "key": "1", "source": "9"})
    assert missing.status_code == 200 and "Select a valid choice" in missing.content.decode()


def test_the_draft_and_a_published_version_answer_apart(sharded: Cluster, viewer: Client) -> None:
    publishing.publish(sharded, None, "mod")
    row = ShardedTable.objects.get(cluster=sharded, tablename="by_mod")
    row.algorithm, row.parameters = "range", json.dumps({"ranges": [[None, 100, 1]], "default": 0})
    save_row(row, None)
    url = reverse("web:shard_map")
    draft = viewer.get(url, {"table": "shop.by_mod", "key": "8", "source": "draft"}).content.decode()
    assert "is on shard 1 of shops" in draft and "-∞ ≤ City_ID &lt; 100 → shard 1" in draft
    published = viewer.get(url, {"table": "shop.by_mod", "key": "8", "source": "1"}).content.decode()
    assert "is on shard 0 of shops" in published and "version 1" in published


def test_a_draft_that_does_not_validate_is_said_so(sharded: Cluster, viewer: Client) -> None:
    ShardedTable.objects.filter(cluster=sharded, tablename="by_mod").update(shard_group="gone")  # past the form
    page = viewer.get(reverse("web:shard_map"), {"table": "shop.by_mod", "key": "1"}).content.decode()
    assert "the draft does not validate, so it has no shard map" in page and "gone" in page


def test_the_api_answers_each_algorithm_and_refusals(sharded: Cluster, api_viewer: APIClient) -> None:
    hit = api_viewer.post(LOCATE, {"table": "shop.by_mod", "key": 7}, format="json")
    assert hit.status_code == 200, hit.json()
    assert hit.json() == {
        "answer": "shop.by_mod key 7 is on shard 1 of shops (hostgroup 101)",
        "table": "shop.by_mod",
        "shard_group": "shops",
        "key": 7,
        "shard": 1,
        "hostgroup": 101,
        "physical_schema": "shop_b",
        "servers": [{"hostname": "10.0.1.11", "port": 3306, "status": "OFFLINE_SOFT", "weight": 1}],
        "refused": None,
    }
    for table, key, shard in (("by_hash", "abc", 1), ("by_list", "eu", 0), ("by_month", "2024-02-01", 1)):
        answer = api_viewer.post(LOCATE, {"table": f"SHOP.{table}", "key": key}, format="json").json()
        assert (answer["shard"], answer["key"]) == (shard, key), answer
    refusal = api_viewer.post(LOCATE, {"table": "shop.by_range", "key": "5000"}, format="json")
    assert refusal.status_code == 200 and refusal.json()["shard"] is None
    assert refusal.json()["refused"] == "no shard holds the key 5000: it is in no range and the rule has no default"


def test_the_api_refuses_bad_input_with_400_naming_it(sharded: Cluster, api_viewer: APIClient) -> None:
    def errors(body: dict[str, Any], query: str = "") -> str:
        response = api_viewer.post(LOCATE + query, body, format="json")
        assert response.status_code in (400, 404), response.json()
        return json.dumps(response.json())

    assert "is not a sharded or global table" in errors({"table": "shop.nope", "key": "1"})
    assert "This field may not be blank" in errors({"table": "shop.by_mod", "key": ""})
    assert "This field is required" in errors({"table": "shop.by_mod"})
    assert "no version 4 in sharded" in errors({"table": "shop.by_mod", "key": "1", "source": "4"})
    assert "does not match" in errors({"table": "shop.by_mod", "key": "1", "source": "latest"})
    assert "no cluster named" in errors({"table": "shop.by_mod", "key": "1"}, "?cluster=" + HOSTILE)
    assert "Null characters are not allowed" in errors({"table": "shop.by_mod", "key": "1\x00"})
    assert "Not a valid string" in errors({"table": "shop.by_mod", "key": {"a": 1}})


def test_any_viewer_may_ask_others_may_not(sharded: Cluster, accounts: dict[str, Account]) -> None:
    body = {"table": "shop.by_mod", "key": "7"}
    for role in roles.ROLES:
        assert client_for(accounts[role]).post(LOCATE, body, format="json").status_code == 200, role
    assert client_for(accounts[NO_ROLE]).post(LOCATE, body, format="json").status_code == 403
    assert client_for(None).post(LOCATE, body, format="json").status_code == 401
    page = reverse("web:shard_map")
    assert Client().get(page).status_code == 302  # to the login
    nobody = Client()
    nobody.force_login(accounts[NO_ROLE])
    assert nobody.get(page).status_code == 403


def test_the_api_schema_documents_the_tester(sharded: Cluster, api_viewer: APIClient) -> None:
    schema = api_viewer.get("/api/schema/", {"format": "json"}).json()
    operation = schema["paths"]["/api/v1/shards/locate/"]["post"]
    assert "which shard" in operation["description"]
    assert set(schema["components"]["schemas"]["ShardLocation"]["properties"]) >= {"shard", "hostgroup", "refused"}
