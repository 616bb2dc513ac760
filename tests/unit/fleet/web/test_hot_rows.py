"""The Hot rows page and API (``fleet.core.hotrows``) fed by fake node reports with a ``trx_queue`` section: each
node's queues and the fleet's, their history as charts, and the proposals, which an operator (not a viewer, not
without the CSRF token) accepts into the draft as a query rule, audited, shown as accepted afterwards."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User as Account
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from fleet.core import hotrows, publishing, roles, stats
from fleet.core.drafts import save_row
from fleet.core.models import AuditEntry, Cluster, HotQueueSample, ProxyNode, QueryRule, Resolution
from tests.support.control_plane import make_cluster
from tests.support.node_messages import send_report, snapshot

pytestmark = pytest.mark.django_db

API = "/api/v1/stats/hot_rows/"
DIGEST = "0x1234567890ABCDEF"
OTHER = "0x00000000000000A1"  # a second digest that bore the heat
PROPOSAL = "test.t1.id"
UPDATE_T1 = "UPDATE t1 SET balance=balance-? WHERE id=?"


def queue(name: str, transactions: int, **figures: float) -> dict[str, Any]:
    """A ``trx_queue.queues`` row; figures not given are 0."""
    row: dict[str, Any] = {"queue": name, "transactions": transactions}
    for key in ("keys_active", "waiters", "longest_wait_ms", "timeouts", "refused", "waited", "wait_ms_total"):
        row[key] = figures.get(key, 0)
    return row


def proposal(deadlocks: int, keys: list[str], state: str = "proposed", both: bool = False) -> dict[str, Any]:
    """The ``trx_queue.proposals`` row of ``test.t1.id``: its digest ``DIGEST``, and with ``both`` its ``digests``
    list ``DIGEST`` and ``OTHER`` (a proxy lists every digest; the contract names one)."""
    digests = [{"digest": DIGEST, "digest_text": UPDATE_T1}, {"digest": OTHER, "digest_text": "UPDATE t1 SET n=?"}]
    return {
        "id": PROPOSAL,
        "schema": "test",
        "table": "t1",
        "column": "id",
        "queue": "t1",
        "digest": DIGEST,
        "digest_text": UPDATE_T1,
        **({"digests": digests} if both else {}),
        "keys": keys,
        "evidence": {"deadlocks": deadlocks, "lock_wait_timeouts": 1, "slow": 20, "statements": 30},
        "state": state,
        "since": 1764860000.0,
    }


def hot_report(queues: list[dict[str, Any]], proposals: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``/stats`` snapshot with this ``trx_queue`` section."""
    return {**snapshot([]), "trx_queue": {"queues": queues, "proposals": proposals}}


@pytest.fixture
def reported(db: None) -> Cluster:
    """Two nodes each reporting twice, 5 s apart: ``hot-1`` 50 transactions of queue t1 in between (10/s), 3 keys,
    5 waiting for up to 12 ms, one timeout; ``hot-2`` 20 of t1 (4/s) with 2 waiting for 40 ms, and queue t2; both
    propose ``test.t1.id`` (``hot-1`` for two digests)."""
    cluster = make_cluster("hot")
    one = ProxyNode.objects.create(cluster=cluster, name="hot-1")
    two = ProxyNode.objects.create(cluster=cluster, name="hot-2")
    now = timezone.now()
    earlier = now - timedelta(seconds=5)
    send_report(one, earlier, hot_report([queue("t1", 100)], []))
    send_report(two, earlier, hot_report([queue("t1", 10), queue("t2", 0)], []))
    send_report(
        one,
        now,
        hot_report(
            [queue("t1", 150, keys_active=3, waiters=5, longest_wait_ms=12, timeouts=1, waited=40, wait_ms_total=400)],
            [proposal(4, ["7", "3"], both=True)],
        ),
    )
    send_report(
        two,
        now,
        hot_report(
            [queue("t1", 30, keys_active=1, waiters=2, longest_wait_ms=40), queue("t2", 0)],
            [proposal(2, ["3", "9"], state="applied")],
        ),
    )
    return cluster


def logged_in(accounts: dict[str, Account], role: str, **options: Any) -> Client:
    """A browser logged in as the account of ``role``."""
    client = Client(**options)
    client.force_login(accounts[role])
    return client


def test_each_report_adds_a_point_per_queue_with_rates(reported: Cluster) -> None:
    points = HotQueueSample.objects.filter(node__name="hot-1", resolution=Resolution.RAW).order_by("at")
    assert [(p.queue, p.waiters, p.transactions_per_s) for p in points] == [("t1", 0, None), ("t1", 5, 10.0)]
    lines, fleet = hotrows.queue_lines(reported, [])
    assert [(line.node, line.row.queue, line.row.waiters, line.transactions_per_s) for line in lines] == [
        ("hot-1", "t1", 5, 10.0),
        ("hot-2", "t1", 2, 4.0),
        ("hot-2", "t2", 0, 0.0),
    ]
    t1 = fleet[0]
    assert (t1.row.queue, t1.row.keys_active, t1.row.waiters, t1.row.longest_wait_ms) == ("t1", 4, 7, 40.0)
    assert (t1.row.transactions, t1.row.timeouts, t1.transactions_per_s) == (180, 1, 14.0)
    counts = stats.compact(timezone.now() + timedelta(hours=2))
    assert counts["minutes"] >= 1
    assert HotQueueSample.objects.filter(node__name="hot-1", resolution=Resolution.MINUTE, queue="t1").exists()


def test_a_malformed_section_refuses_the_report_naming_the_field(reported: Cluster) -> None:
    node = ProxyNode.objects.get(name="hot-1")
    bad = hot_report([{**queue("t1", 1), "waiters": "many"}], [])
    with pytest.raises(ValueError, match=r"stats\.trx_queue\.queues\[0\]\.waiters: expected a whole number"):
        send_report(node, timezone.now() + timedelta(seconds=1), bad)
    bad = hot_report([], [{**proposal(1, []), "evidence": [1]}])
    with pytest.raises(ValueError, match=r"stats\.trx_queue\.proposals\[0\]\.evidence: expected an object"):
        send_report(node, timezone.now() + timedelta(seconds=1), bad)


def test_a_node_whose_stored_section_does_not_read_is_named(reported: Cluster, accounts: dict[str, Account]) -> None:
    ProxyNode.objects.filter(name="hot-2").update(last_report={**snapshot([]), "trx_queue": {"queues": "x"}})
    page = logged_in(accounts, roles.VIEWER).get(reverse("web:hot_rows")).content.decode()
    assert "hot-2: stats.trx_queue.queues: expected a list of rows" in page
    assert 'data-node="hot-1" data-queue="t1"' in page


def test_the_page_shows_each_queue_and_the_proposals(reported: Cluster, accounts: dict[str, Account]) -> None:
    viewer = logged_in(accounts, roles.VIEWER)
    page = viewer.get(reverse("web:hot_rows")).content.decode()
    assert 'href="/hot-rows/"' in page  # the nav entry
    row = re.search(r'<tr data-node="fleet" data-queue="t1".*?</tr>', page, re.S)
    assert row is not None
    assert re.search(r'class="num waiters">7<', row.group(0)) and re.search(r'class="num tps">14.0<', row.group(0))
    row = re.search(r'<tr data-node="hot-2" data-queue="t1".*?</tr>', page, re.S)
    assert row is not None and re.search(r'class="num longest-wait">40<', row.group(0))
    listed = re.search(rf'<tr data-proposal="{PROPOSAL}".*?</tr>', page, re.S)
    assert listed is not None
    assert (
        "deadlocks 6" in listed.group(0) and "7, 3, 9" in listed.group(0) and "applied by the node" in listed.group(0)
    )
    assert "Accept</button>" not in page  # a viewer
    table = viewer.get(reverse("web:hot_rows_table")).content.decode()
    assert 'data-node="hot-1" data-queue="t1"' in table


def test_the_charts_draw_the_fleet_per_queue_or_one_node(reported: Cluster, accounts: dict[str, Account]) -> None:
    viewer = logged_in(accounts, roles.VIEWER)
    fleet = viewer.get(reverse("web:hot_rows_chart", args=["waiters"])).json()
    assert [s["label"] for s in fleet["series"]] == ["fleet · t1", "fleet · t2"]
    assert [value for _, value in fleet["series"][0]["points"]][-1] == 7
    longest = viewer.get(reverse("web:hot_rows_chart", args=["longest_wait_ms"])).json()
    assert [value for _, value in longest["series"][0]["points"]][-1] == 40  # the longest anywhere
    node = viewer.get(reverse("web:hot_rows_chart", args=["transactions_per_s"]) + "?node=hot-1&span=6h").json()
    assert [(s["label"], [v for _, v in s["points"]]) for s in node["series"]] == [("hot-1 · t1", [10.0])]
    assert viewer.get(reverse("web:hot_rows_chart", args=["nope"])).status_code == 404


def test_an_operator_accepts_a_proposal_into_the_draft(reported: Cluster, accounts: dict[str, Account]) -> None:
    accept = reverse("web:hot_rows_accept")
    assert logged_in(accounts, roles.VIEWER).post(accept, {"id": PROPOSAL}).status_code == 403
    operator = logged_in(accounts, roles.OPERATOR, enforce_csrf_checks=True)
    assert operator.post(accept, {"id": PROPOSAL}).status_code == 403  # no CSRF token
    page = operator.get(reverse("web:hot_rows")).content.decode()
    form = re.search(rf'<form method="post" action="{accept}".*?</form>', page, re.S)
    assert form is not None and f'value="{PROPOSAL}"' in form.group(0)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.group(0))
    assert token is not None
    last = QueryRule.objects.filter(cluster=reported).order_by("-rule_id").first()
    assert last is not None
    answer = operator.post(accept, {"id": PROPOSAL, "csrfmiddlewaretoken": token.group(1)}, follow=True)
    numbers = (last.rule_id + 1, last.rule_id + 2)
    assert f"Rule {numbers[0]}, {numbers[1]} (queue t1 by id) added to the draft" in answer.content.decode()
    rules = QueryRule.objects.filter(cluster=reported, rule_id__in=numbers).order_by("rule_id")
    assert [(r.active, r.digest, r.trx_queue, r.trx_queue_key, r.apply) for r in rules] == [
        (True, DIGEST, "t1", "id", False),
        (True, OTHER, "t1", "id", False),
    ]
    rule = rules[0]
    assert rule.comment == (
        f"hot rows: proposal {PROPOSAL} (evidence: deadlocks 6, lock_wait_timeouts 2, slow 40, statements 60)"
    )
    entry = AuditEntry.objects.get(table="mysql_query_rules", object_key=f"rule_id={rule.rule_id}")
    assert (entry.action, entry.user, entry.source, entry.after["trx_queue"]) == (
        "create",
        accounts[roles.OPERATOR],
        "web",
        "t1",
    )
    listed = re.search(rf'<tr data-proposal="{PROPOSAL}".*?</tr>', answer.content.decode(), re.S)
    assert (
        listed is not None and "accepted" in listed.group(0) and f"rule {numbers[0]}, {numbers[1]}" in listed.group(0)
    )
    assert "Accept</button>" not in listed.group(0)
    again = operator.post(accept, {"id": PROPOSAL, "csrfmiddlewaretoken": token.group(1)}, follow=True)
    assert "is accepted already" in again.content.decode()
    assert QueryRule.objects.filter(cluster=reported, trx_queue="t1").count() == 2
    published = publishing.publish(reported, None).document["mysql_query_rules"]
    assert [(r["digest"], r["trx_queue"], r["trx_queue_key"]) for r in published if r["trx_queue"]] == [
        (DIGEST, "t1", "id"),
        (OTHER, "t1", "id"),
    ]


def test_the_api_lists_the_queues_and_accepts_a_proposal(
    reported: Cluster, api_viewer: APIClient, api_operator: APIClient
) -> None:
    answer = api_viewer.get(API, {"cluster": "hot"}).json()
    assert answer["problems"] == []
    assert [(q["node"], q["queue"], q["waiters"], q["transactions_per_s"]) for q in answer["queues"]] == [
        ("hot-1", "t1", 5, 10.0),
        ("hot-2", "t1", 2, 4.0),
        ("hot-2", "t2", 0, 0.0),
    ]
    assert [(q["queue"], q["waiters"], q["longest_wait_ms"]) for q in answer["fleet"]] == [
        ("t1", 7, 40.0),
        ("t2", 0, 0.0),
    ]
    (listed,) = answer["proposals"]
    assert (listed["id"], listed["column"], listed["accepted"], listed["nodes"]) == (
        PROPOSAL,
        "id",
        False,
        ["hot-1", "hot-2"],
    )
    assert listed["evidence"]["deadlocks"] == 6 and listed["keys"] == ["7", "3", "9"]
    assert [d["digest"] for d in listed["digests"]] == [DIGEST, OTHER]
    by_hand = QueryRule(
        cluster=reported, rule_id=200, active=True, digest=DIGEST.lower(), trx_queue="t1", trx_queue_key="id"
    )
    save_row(by_hand, None)  # the draft queues one of its digests already
    (listed,) = api_viewer.get(API, {"cluster": "hot"}).json()["proposals"]
    assert (listed["accepted"], listed["rule_ids"]) == (False, [200])
    accept = f"{API}accept/?cluster=hot"
    assert api_viewer.post(accept, {"id": PROPOSAL}, format="json").status_code == 403
    assert api_operator.post(accept, {"id": "test.none.id"}, format="json").status_code == 404
    created = api_operator.post(accept, {"id": PROPOSAL}, format="json")
    assert created.status_code == 201, created.json()
    (rule,) = created.json()["rules"]  # the digest not queued yet
    assert (rule["rule_id"], rule["trx_queue"], rule["trx_queue_key"], rule["digest"]) == (201, "t1", "id", OTHER)
    assert AuditEntry.objects.filter(table="mysql_query_rules", source="api", action="create").count() == 1
    assert api_operator.post(accept, {"id": PROPOSAL}, format="json").status_code == 409
    (listed,) = api_viewer.get(API, {"cluster": "hot"}).json()["proposals"]
    assert (listed["accepted"], listed["rule_ids"]) == (True, [200, 201])


def test_a_proposal_without_a_digest_is_not_accepted(reported: Cluster) -> None:
    node = ProxyNode.objects.get(name="hot-2")
    send_report(
        node, timezone.now() + timedelta(seconds=1), hot_report([], [{**proposal(1, []), "id": "x.y.z", "digest": ""}])
    )
    with pytest.raises(hotrows.ProposalError, match="names no digest"):
        hotrows.accept(reported, "x.y.z", None)
    assert not QueryRule.objects.filter(cluster=reported, trx_queue__isnull=False).exists()


def test_a_report_without_the_section_shows_nothing(db: None, accounts: dict[str, Account]) -> None:
    cluster = make_cluster("quiet")
    node = ProxyNode.objects.create(cluster=cluster, name="quiet-1")
    send_report(node, datetime.now(tz=timezone.get_current_timezone()), snapshot([]))
    assert not HotQueueSample.objects.exists()
    page = logged_in(accounts, roles.VIEWER).get(reverse("web:hot_rows")).content.decode()
    assert "No node reports a hot-row queue yet." in page and "No node proposes a queue" in page
