"""The sharding statistics of a cluster (``fleet.core.scatter``): the nodes' ``sharding_digest`` sections carried in
their reports, merged and ranked worst scatter ratio first, on the Shards page, beside each digest on the digests
page, and in the API; a node whose section does not read is named, never a 500."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import User as Account
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from fleet.core import roles, scatter
from fleet.core.models import Cluster, ProxyNode
from tests.support.control_plane import make_cluster
from tests.support.node_messages import digest_row, send_report, sharding_row, snapshot
from tests.unit.fleet.core.test_shard_tester import sharded_document

POINT = "SELECT name FROM items WHERE City_ID = ?"
MISSED = "SELECT name FROM items WHERE qty > ?"
HALF = "SELECT name FROM items WHERE City_ID IN (...)"


@pytest.fixture
def reported(db: None) -> Cluster:
    """A sharded cluster whose two nodes reported their sharding digests: ``MISSED`` always scatters, ``HALF`` half
    the time (over both nodes), ``POINT`` never; ``0x1`` and ``0x3`` are also query digests."""
    cluster = make_cluster("scatter", sharded_document())
    one = ProxyNode.objects.create(cluster=cluster, name="shard-node-1")
    two = ProxyNode.objects.create(cluster=cluster, name="shard-node-2")
    now = timezone.now()
    sharding = [
        sharding_row("0x1", POINT, 9, 0),
        sharding_row("0x2", MISSED, 0, 2, merge_rows=30, merge_us=800),
        sharding_row("0x3", HALF, 3, 0),
    ]
    digests = [digest_row("0x1", POINT, 9, 90), digest_row("0x3", HALF, 6, 600), digest_row("0x9", "SELECT ?", 1, 5)]
    send_report(one, now, snapshot([], digests, sharding=sharding))
    send_report(two, now, snapshot([], [], sharding=[sharding_row("0x3", HALF, 0, 3, refused=1, merge_us=60)]))
    return cluster


@pytest.fixture
def viewer(reported: Cluster, accounts: dict[str, Account]) -> Client:
    client = Client()
    client.force_login(accounts[roles.VIEWER])
    return client


def test_the_reports_carry_sharding_digests_merged_worst_first(reported: Cluster) -> None:
    assert ProxyNode.objects.get(name="shard-node-2").last_report["sharding_digest"][0]["scatter"] == 3
    problems: list[str] = []
    rows = scatter.sharding_digests(reported, problems)
    assert problems == []
    assert [(r.digest_text, r.single_shard, r.scatter, r.refused, r.scatter_ratio) for r in rows] == [
        (MISSED, 0, 2, 0, 1.0),
        (HALF, 3, 3, 1, 0.5),
        (POINT, 9, 0, 0, 0.0),
    ]
    missed, half, _ = rows
    assert (missed.avg_shards, missed.merge_rows, missed.avg_merge_us) == (2.0, 30, 400.0)
    assert (half.avg_shards, half.merge_us) == (1.5, 60)
    assert set(scatter.by_digest(rows)) == {("app", "0x1"), ("app", "0x2"), ("app", "0x3")}


def test_a_node_whose_section_does_not_read_is_named_and_left_out(reported: Cluster, viewer: Client) -> None:
    odd = ProxyNode.objects.create(cluster=reported, name="odd-node")
    bad = snapshot([], [], sharding=[{**sharding_row("0x7", "SELECT 7", 1, 1), "scatter": "1"}])
    send_report(odd, timezone.now(), bad)
    problems: list[str] = []
    rows = scatter.sharding_digests(reported, problems)
    assert problems == ["odd-node: stats.sharding_digest[0].scatter: expected a whole number of 0 or more, not '1'"]
    assert len(rows) == 3
    for url in (reverse("web:shard_map"), reverse("web:digests")):
        page = html.unescape(viewer.get(url).content.decode())
        assert "odd-node: stats.sharding_digest[0].scatter" in page and HALF in page, url


def test_the_shards_page_lists_queries_by_scatter_ratio(viewer: Client) -> None:
    page = viewer.get(reverse("web:shard_map")).content.decode()
    table = page[page.index('<table class="grid scatter-digests">') :]
    rows = re.findall(r'<tr data-digest="([^"]+)">(.*?)</tr>', table, re.S)
    assert [digest for digest, _ in rows] == ["0x2", "0x3", "0x1"]
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for _, row in rows]
    assert cells[0][3:] == ["1.00", "0", "2", "0", "2.0", "30", "800", "400"]
    assert cells[1][3:] == ["0.50", "3", "3", "1", "1.5", "0", "60", "20"]
    assert "Shard group shops" in page  # the map still shows above


def test_the_digests_page_shows_each_sharded_digests_ratio_and_sorts_by_it(viewer: Client) -> None:
    page = viewer.get(reverse("web:digests")).content.decode()
    assert re.search(r'<td class="num sharding">3 / 3 / 1</td>\s*<td class="num scatter-ratio">0.50</td>', page)
    assert re.search(r'<td class="num sharding">9 / 0 / 0</td>\s*<td class="num scatter-ratio">0.00</td>', page)
    by_scatter = viewer.get(reverse("web:digests") + "?sort=scatter").content.decode()
    order = [by_scatter.index(text) for text in (HALF, POINT, "SELECT ?</code>")]
    assert order == sorted(order)  # unsharded digests last
    assert 'href="?sort=scatter" class="current"' in by_scatter


def test_the_api_lists_the_clusters_sharding_digests(reported: Cluster, api_viewer: APIClient) -> None:
    answer = api_viewer.get("/api/v1/stats/sharding/?cluster=scatter")
    assert answer.status_code == 200
    body = answer.json()
    assert (body["cluster"], body["problems"]) == ("scatter", [])
    assert [d["digest"] for d in body["digests"]] == ["0x2", "0x3", "0x1"]
    assert body["digests"][1] == {
        "schemaname": "app",
        "digest": "0x3",
        "digest_text": HALF,
        "single_shard": 3,
        "scatter": 3,
        "refused": 1,
        "shards_reached": 9,
        "merge_rows": 0,
        "merge_us": 60,
        "scatter_ratio": 0.5,
        "avg_shards": 1.5,
        "avg_merge_us": 20.0,
    }
    assert api_viewer.get("/api/v1/stats/sharding/?cluster=nope").status_code == 404
    schema = api_viewer.get("/api/schema/?format=json").json()
    assert "/api/v1/stats/sharding/" in schema["paths"]
    assert APIClient().get("/api/v1/stats/sharding/").status_code in (401, 403)
