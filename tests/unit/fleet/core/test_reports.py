"""Node reports and acks as the control plane records them: heartbeats, rates from counters, the history's rollups
and retention, the order of late messages, and reconcile's choice of nodes (with the database and real Redis)."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from fleet.core import push, signing, stats, tasks
from fleet.core.models import Cluster, ConfigVersion, NodeSample, ProxyNode, Resolution, ServerSample
from proxyapp.node import signature

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 10, 0, 0, tzinfo=UTC)


def snapshot(questions: int, queries: int, clients: int = 3, status: str = "ONLINE", err: int = 0) -> dict[str, Any]:
    """A node's ``/stats`` snapshot with one backend server (hostgroup 10, db1:3306)."""
    pool = {
        "hostgroup": 10,
        "srv_host": "db1",
        "srv_port": 3306,
        "status": status,
        "ConnUsed": 2,
        "ConnFree": 4,
        "ConnOK": 6,
        "ConnERR": err,
        "MaxConnUsed": 3,
        "Queries": queries,
        "Bytes_data_sent": 0,
        "Bytes_data_recv": 0,
        "Latency_us": 250,
    }
    return {
        "global": {"ProxySQL_Uptime": 60, "Questions": questions, "Client_Connections_connected": clients},
        "connection_pool": [pool],
        "query_digest": [],
        "query_rules": [],
        "config": {"checksum": "c" * 64, "loaded_at": 0.0, "source": "admin"},
    }


def report(node: ProxyNode, at: datetime, stats_: dict[str, Any], version: int | None = None) -> str:
    """Run the report task as a node sends it."""
    return tasks.report(node.name, at.isoformat(), version, stats_["config"]["checksum"], stats_)


def ack(node: ProxyNode, version: int, at: datetime, ok: bool = True, error: str = "") -> str:
    """Run the ack task as a node sends it."""
    return tasks.ack(node.name, version, f"sum{version}", ok, error, at.isoformat())


@pytest.fixture
def node(db: None) -> ProxyNode:
    """A node of cluster ``reports`` with a name of its own (its Redis queue is removed afterwards)."""
    cluster = Cluster.objects.create(name="reports")
    node = ProxyNode.objects.create(cluster=cluster, name=f"reports-{uuid.uuid4().hex[:8]}")
    yield node
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(node.queue)


def raw_points(node: ProxyNode) -> list[tuple[float | None, float]]:
    rows = NodeSample.objects.filter(node=node, resolution=Resolution.RAW).order_by("at")
    return list(rows.values_list("questions_per_s", "client_connections"))


def test_report_records_heartbeat_and_rates_from_counter_differences(node: ProxyNode) -> None:
    assert "recorded" in report(node, T0, snapshot(questions=100, queries=40), version=3)
    report(node, T0 + timedelta(seconds=5), snapshot(questions=600, queries=290, clients=7), version=3)
    node.refresh_from_db()
    assert (node.last_heartbeat, node.applied_version, node.applied_checksum) == (
        T0 + timedelta(seconds=5),
        3,
        "c" * 64,
    )
    assert node.last_report["global"]["Questions"] == 600
    assert raw_points(node) == [(None, 3.0), (100.0, 7.0)]  # the first report has nothing to subtract
    servers = ServerSample.objects.filter(node=node).order_by("at")
    assert list(servers.values_list("server", "status", "conn_used", "conn_free", "queries_per_s", "latency_us")) == [
        ("db1:3306", "ONLINE", 2.0, 4.0, None, 250.0),
        ("db1:3306", "ONLINE", 2.0, 4.0, 50.0, 250.0),
    ]


def test_counter_that_went_down_restarted_from_zero_and_a_long_gap_gives_no_rate(node: ProxyNode) -> None:
    report(node, T0, snapshot(questions=10_000, queries=9_000))
    report(node, T0 + timedelta(seconds=10), snapshot(questions=50, queries=20))  # the proxy restarted
    report(node, T0 + timedelta(minutes=20), snapshot(questions=5_000, queries=20))  # away for 20 minutes
    assert [rate for rate, _ in raw_points(node)] == [None, 5.0, None]
    rates = ServerSample.objects.filter(node=node).order_by("at").values_list("queries_per_s", flat=True)
    assert list(rates) == [None, 2.0, None]


def test_a_report_older_than_the_last_one_is_ignored(node: ProxyNode) -> None:
    report(node, T0 + timedelta(seconds=10), snapshot(questions=500, queries=1), version=4)
    assert "ignored" in report(node, T0, snapshot(questions=100, queries=1), version=3)
    node.refresh_from_db()
    assert (node.last_heartbeat, node.applied_version, len(raw_points(node))) == (T0 + timedelta(seconds=10), 4, 1)


def test_malformed_reports_are_refused_naming_the_field(node: ProxyNode) -> None:
    bad = snapshot(questions=1, queries=1)
    del bad["global"]["Questions"]
    with pytest.raises(ValueError, match=r"stats\.global\.Questions: expected a number"):
        report(node, T0, bad)
    bad = snapshot(questions=1, queries=1)
    bad["connection_pool"][0]["srv_port"] = "x"
    with pytest.raises(ValueError, match=r"stats\.connection_pool\[0\]\.srv_port"):
        report(node, T0, bad)
    with pytest.raises(ValueError, match=r"^at: .* has no UTC offset"):
        tasks.report(node.name, "2026-03-02T10:00:00", None, "", snapshot(1, 1))
    with pytest.raises(ValueError, match=r"^applied_version: expected a version number"):
        tasks.report(node.name, T0.isoformat(), "7", "", snapshot(1, 1))
    with pytest.raises(ValueError, match=r"^ok: expected true or false"):
        tasks.ack(node.name, 1, "x", "yes", "", T0.isoformat())
    node.refresh_from_db()
    assert node.last_heartbeat is None and not NodeSample.objects.exists()


def test_unknown_nodes_are_ignored(db: None) -> None:
    assert "unknown node" in tasks.report("nobody", T0.isoformat(), None, "", snapshot(1, 1))
    assert "unknown node" in tasks.ack("nobody", 1, "x", True, "", T0.isoformat())


def test_acks_claim_once_so_late_ones_never_undo_newer_news(node: ProxyNode) -> None:
    ProxyNode.objects.filter(pk=node.pk).update(pushed_version=6)
    assert ack(node, 6, T0) == f"{node.name} applied v6"
    assert "ignored" in ack(node, 5, T0 - timedelta(seconds=1))  # a late ack of an older version
    node.refresh_from_db()
    assert (node.applied_version, node.applied_checksum, node.state) == (6, "sum6", "applied")

    ProxyNode.objects.filter(pk=node.pk).update(pushed_version=7, state="pending")
    assert "refused" in ack(node, 7, T0 + timedelta(seconds=1), ok=False, error="hostgroup 30 is not served")
    ack(node, 6, T0 + timedelta(seconds=2))  # the same ack of v6 again: it runs v6, but v7 stays refused
    assert "ignored" in ack(node, 5, T0 + timedelta(seconds=3), ok=False, error="old news")
    node.refresh_from_db()
    assert (node.applied_version, node.pushed_version, node.state, node.error) == (
        6,
        7,
        "failed",
        "hostgroup 30 is not served",
    )
    ProxyNode.objects.filter(pk=node.pk).update(pushed_version=8, state="pending", error="")
    assert "ignored" in ack(node, 7, T0 + timedelta(seconds=4), ok=False, error="late refusal")
    node.refresh_from_db()
    assert (node.pushed_version, node.state) == (8, "pending")


def test_a_refusal_of_a_version_never_sent_shows_and_does_not_hold_back_the_next_one(node: ProxyNode) -> None:
    ProxyNode.objects.filter(pk=node.pk).update(pushed_version=6, applied_version=6, state="applied")
    forged = "signature check failed: version 40 of cluster 'reports' is not signed by the control plane ..."
    assert "refused" in ack(node, 40, T0, ok=False, error=forged)  # someone pushed v40 straight to its queue
    node.refresh_from_db()
    assert (node.applied_version, node.pushed_version, node.state, node.error) == (6, 6, "failed", forged)

    cluster = node.cluster
    document = {"mysql_servers": [], "global_variables": []}
    push.push_to_node(node, ConfigVersion.objects.create(cluster=cluster, number=7, document=document, checksum="x"))
    node.refresh_from_db()
    assert (node.pushed_version, node.state, node.error) == (7, "pending", "")
    ack(node, 7, T0 + timedelta(seconds=1))
    node.refresh_from_db()
    assert (node.applied_version, node.state) == (7, "applied")


def test_reports_do_not_undo_a_newer_ack_and_settle_a_pending_node_whose_ack_was_lost(node: ProxyNode) -> None:
    ProxyNode.objects.filter(pk=node.pk).update(pushed_version=6)
    ack(node, 6, T0 + timedelta(seconds=2))
    report(node, T0 + timedelta(seconds=1), snapshot(1, 1), version=5)  # taken before the apply
    node.refresh_from_db()
    assert (node.applied_version, node.last_heartbeat) == (6, T0 + timedelta(seconds=1))

    ProxyNode.objects.filter(pk=node.pk).update(pushed_version=7, state="pending")
    report(node, T0 + timedelta(seconds=5), snapshot(1, 1), version=7)  # runs v7; its ack never came
    node.refresh_from_db()
    assert (node.applied_version, node.state) == (7, "applied")


def queued(node: ProxyNode) -> list[dict[str, Any]]:
    """The apply messages waiting in the node's Redis queue (their kwargs)."""
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    messages = [json.loads(raw) for raw in broker.lrange(node.queue, 0, -1)]
    assert all(m["headers"]["task"] == "proxyfleet.node.apply" for m in messages)
    return [json.loads(base64.b64decode(m["body"]))[1] for m in messages]


def test_reconcile_resends_to_drifted_nodes_only_and_marks_silent_ones_stale(node: ProxyNode) -> None:
    cluster = node.cluster
    document = {"mysql_servers": [], "global_variables": []}
    ConfigVersion.objects.create(cluster=cluster, number=1, document=document, checksum="sum1")
    ConfigVersion.objects.create(cluster=cluster, number=2, document=document, checksum="sum2")
    in_sync = ProxyNode.objects.create(
        cluster=cluster,
        name=f"{node.name}-sync",
        applied_version=2,
        applied_checksum="sum2",
        last_heartbeat=timezone.now(),
    )
    refused = ProxyNode.objects.create(
        cluster=cluster, name=f"{node.name}-refused", applied_version=1, pushed_version=2, state="failed"
    )
    try:
        ProxyNode.objects.filter(pk=node.pk).update(applied_version=1, applied_checksum="sum1")
        assert push.reconcile() == [node.name]
        sent = {"cluster": "reports", "cluster_uid": str(cluster.uid), "version": 2, "checksum": "sum2"}
        (message,) = queued(node)
        assert {k: message[k] for k in sent} == sent and message["document"] == document
        # Signed for this node by the control plane's key (the node checks it: tests/unit/proxyapp/node).
        fields = {k: v for k, v in message.items() if k != "signature"}
        public_key = signing.private_key().public_key()
        signature.verify([public_key], signature.SignedConfig(**fields), node.name, message["signature"])
        node.refresh_from_db()
        assert (node.state, node.pushed_version) == ("pending", 2)
        assert push.reconcile() == []  # a message already waits in its queue: no second one
        assert len(queued(node)) == 1 and queued(refused) == queued(in_sync) == []

        # Silent for longer than STALE_AFTER: marked stale once; the next report clears the mark.
        later = timezone.now() + push.STALE_AFTER + timedelta(seconds=1)
        push.reconcile(now=later)
        stale = set(ProxyNode.objects.filter(stale_since=later).values_list("name", flat=True))
        assert stale == {node.name, in_sync.name, refused.name}
        report(in_sync, timezone.now(), snapshot(1, 1), version=2)
        assert ProxyNode.objects.get(pk=in_sync.pk).stale_since is None
    finally:
        redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(in_sync.queue, refused.queue)


def node_point(node: ProxyNode, resolution: int, at: datetime, rate: float | None, clients: float) -> NodeSample:
    return NodeSample(node=node, resolution=resolution, at=at, questions_per_s=rate, client_connections=clients)


def server_point(
    node: ProxyNode, resolution: int, at: datetime, rate: float, status: str = "ONLINE", err: int = 0
) -> ServerSample:
    return ServerSample(
        node=node,
        resolution=resolution,
        at=at,
        hostgroup=10,
        server="db1:3306",
        status=status,
        conn_used=1.0,
        conn_free=2.0,
        conn_err=err,
        queries_per_s=rate,
        latency_us=100.0,
    )


def test_history_rolls_up_into_minutes_and_hours_and_drops_old_points(node: ProxyNode) -> None:
    now = timezone.now().replace(minute=30, second=0, microsecond=0)
    start = now - timedelta(hours=8)
    # A report every 20 s for 8 hours: 10 questions/s and 2 clients in even minutes, 30/s and 4 in odd ones.
    reports = 8 * 180
    times = [start + timedelta(seconds=20 * i) for i in range(reports)]
    NodeSample.objects.bulk_create(
        node_point(node, 0, at, 30.0 if at.minute % 2 else 10.0, 4.0 if at.minute % 2 else 2.0) for at in times
    )
    ServerSample.objects.bulk_create(
        server_point(node, 0, at, 5.0, "SHUNNED" if i == reports - 1 else "ONLINE", err=i) for i, at in enumerate(times)
    )

    counts = stats.compact(now)
    minutes = NodeSample.objects.filter(node=node, resolution=Resolution.MINUTE).order_by("at")
    assert counts["minutes"] == minutes.count() == 8 * 60  # every whole minute before now
    assert [(m.questions_per_s, m.client_connections) for m in minutes[:2]] == [(10.0, 2.0), (30.0, 4.0)]
    hours = NodeSample.objects.filter(node=node, resolution=Resolution.HOUR).order_by("at")
    # Whole hours: 02:30-03:00 is half an hour, then 03:00 ... 09:00 (seven), and 10:00-10:30 is not over yet.
    assert counts["hours"] == hours.count() == 8
    assert all(h.questions_per_s == 20.0 and h.client_connections == 3.0 for h in hours)
    server_minutes = ServerSample.objects.filter(node=node, resolution=Resolution.MINUTE).order_by("at")
    last = server_minutes.last()
    assert (last.status, last.conn_err, last.queries_per_s) == ("SHUNNED", reports - 1, 5.0)  # last status, max err
    # Raw points older than their retention (6 hours) are gone; the minutes and hours stay.
    oldest_raw = NodeSample.objects.filter(node=node, resolution=Resolution.RAW).order_by("at").first()
    assert oldest_raw.at >= now - stats.RETENTION[Resolution.RAW]
    assert (
        ServerSample.objects.filter(node=node, resolution=Resolution.RAW, at__lt=now - timedelta(hours=6)).count() == 0
    )
    assert stats.compact(now) == {"minutes": 0, "hours": 0, "deleted": 0}  # nothing new: idempotent

    # Two days on: the half hour 10:00-10:30 becomes an hour point, and only hour points are left.
    later = now + stats.RETENTION[Resolution.MINUTE] + timedelta(hours=1)
    stats.compact(later)
    assert not NodeSample.objects.filter(node=node, resolution__in=[0, 60]).exists()
    assert NodeSample.objects.filter(node=node, resolution=Resolution.HOUR).count() == 9


def test_series_pick_a_resolution_by_span_and_end_with_the_finest_points(node: ProxyNode) -> None:
    now = timezone.now()
    for minutes_ago in range(180, 0, -1):  # a minute point per minute for 3 hours, the last 5 minutes raw only
        at = (now - timedelta(minutes=minutes_ago)).replace(second=0, microsecond=0)
        resolution = Resolution.MINUTE if minutes_ago > 5 else Resolution.RAW
        node_point(node, resolution, at, float(minutes_ago), 1.0).save()
        server_point(node, resolution, at, float(minutes_ago)).save()
    node_point(node, 0, now - timedelta(minutes=3, seconds=1), None, 1.0).save()  # a report without a rate

    hour = stats.series(node, "questions_per_s", now - timedelta(hours=1))  # raw resolution: 5 points (no None)
    assert [value for _, value in hour] == [5.0, 4.0, 3.0, 2.0, 1.0]
    day = stats.series(node, "questions_per_s", now - timedelta(hours=6))  # minutes, then the raw tail
    assert [value for _, value in day] == [float(m) for m in range(180, 0, -1)]
    assert [at for at, _ in day] == sorted(at for at, _ in day)
    server_day = stats.server_series(node, 10, "db1:3306", "queries_per_s", now - timedelta(hours=6))
    assert [value for _, value in server_day] == [float(m) for m in range(180, 0, -1)]
    assert stats.server_series(node, 20, "db1:3306", "queries_per_s", now - timedelta(hours=6)) == []
    with pytest.raises(ValueError, match="metric: 'Questions' is not one of"):
        stats.series(node, "Questions", now)
    with pytest.raises(ValueError, match="metric: 'status' is not one of"):
        stats.server_series(node, 10, "db1:3306", "status", now)
