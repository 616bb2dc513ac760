"""Each sharded table's estimated rows per shard on the Shards page (``fleet.core.tablerows``): the nodes'
``sharding_tables`` sections, the newest answer for each table and shard (nodes share their shard servers, so
their answers are never added up), the total, a missing estimate said so, and a node whose section does not read
named, never a 500."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth.models import User as Account
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from fleet.core import roles, tablerows
from fleet.core.models import Cluster, ProxyNode
from tests.support.control_plane import make_cluster
from tests.support.node_messages import send_report, snapshot, table_row
from tests.unit.fleet.core.test_shard_tester import sharded_document

#: What the page shows for rows not known.
DASH = "\N{EN DASH}"


@pytest.fixture
def reported(db: None) -> Cluster:
    """The sharded cluster (group ``shops``: shards 0 and 1) whose two nodes reported rows: node 2 asked shard 1 of
    by_mod later than node 1; nobody knows by_hash's rows on shard 1."""
    cluster = make_cluster("tablerows", sharded_document())
    one = ProxyNode.objects.create(cluster=cluster, name="rows-node-1")
    two = ProxyNode.objects.create(cluster=cluster, name="rows-node-2")
    now = timezone.now()
    first = [table_row("by_mod", 0, 120, 100.0), table_row("by_mod", 1, 70, 100.0), table_row("cities", 0, 9, 100.0)]
    first += [table_row("cities", 1, 9, 100.0), table_row("by_hash", 0, 5, 100.0), table_row("by_hash", 1, None)]
    send_report(one, now, snapshot([], tables=first))
    send_report(two, now, snapshot([], tables=[table_row("by_mod", 1, 80, 160.0)]))
    return cluster


@pytest.fixture
def viewer(reported: Cluster, accounts: dict[str, Account]) -> Client:
    client = Client()
    client.force_login(accounts[roles.VIEWER])
    return client


def test_the_newest_answer_for_each_shard_counts_and_the_total_adds_the_shards(reported: Cluster) -> None:
    problems: list[str] = []
    rows = tablerows.table_rows(reported, problems)
    assert problems == []
    assert sorted(rows) == ["shop.by_hash", "shop.by_mod", "shop.cities"]
    by_mod = rows["shop.by_mod"]
    assert (by_mod.by_shard, by_mod.total, by_mod.missing) == ({0: 120, 1: 80}, 200, False)
    assert by_mod.checked_at is not None and by_mod.checked_at.timestamp() == 100.0  # the older of the two answers
    by_hash = rows["shop.by_hash"]
    assert (by_hash.by_shard, by_hash.total, by_hash.missing) == ({0: 5, 1: None}, 5, True)


def cells(page: str, table: str) -> list[str]:
    """The row of ``table`` in the page's sharded tables: the rows on each shard and in all."""
    row = re.search(rf'<tr data-table="{re.escape(table)}">(.*?)</tr>', page, re.S)
    assert row is not None, table
    return re.findall(r'<td class="num (?:shard|total)-rows">(.*?)</td>', row.group(1), re.S)


def test_the_shards_page_shows_each_tables_rows_per_shard_and_in_all(viewer: Client) -> None:
    page = html.unescape(viewer.get(reverse("web:shard_map")).content.decode())
    assert "estimate (InnoDB TABLE_ROWS" in page
    assert '<th class="num">Rows on shard 1</th>' in page
    assert cells(page, "shop.by_mod") == ["120", "80", "200"]
    assert cells(page, "shop.by_hash") == ["5", DASH, "5 + ?"]
    assert cells(page, "shop.cities") == ["9", "9", "whole on each"]
    assert cells(page, "shop.by_range") == [DASH, DASH, DASH]  # no node reported it


def test_a_node_whose_section_does_not_read_is_named_and_left_out(reported: Cluster, viewer: Client) -> None:
    odd = ProxyNode.objects.create(cluster=reported, name="odd-node")
    send_report(odd, timezone.now(), snapshot([], tables=[{**table_row("by_mod", 0, 1), "rows_estimate": "many"}]))
    problems: list[str] = []
    assert tablerows.table_rows(reported, problems)["shop.by_mod"].by_shard == {0: 120, 1: 80}
    assert problems == ["odd-node: stats.sharding_tables[0].rows_estimate: expected int or null, not 'many'"]
    page = html.unescape(viewer.get(reverse("web:shard_map")).content.decode())
    assert "odd-node: stats.sharding_tables[0].rows_estimate" in page and cells(page, "shop.by_mod")[2] == "200"
