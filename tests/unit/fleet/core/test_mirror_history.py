"""The mirror in the control plane: its figures in the report history (rates, rollups, retention, malformed
sections), the live dashboard page and its charts, and the API."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User as Account
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from fleet.core import roles, stats
from fleet.core.models import Cluster, MirrorSample, ProxyNode, Resolution
from tests.support.node_messages import pool_row, send_report, snapshot

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 10, 0, 0, tzinfo=UTC)


def mirror_section(**values: Any) -> dict[str, Any]:
    """A proxy's ``/stats`` ``mirror`` section."""
    section: dict[str, Any] = {
        "mirrored": 0,
        "completed": 0,
        "failed": {},
        "dropped": {},
        "retried": 0,
        "concurrency": 0,
        "max_concurrency": 16,
        "queue_length": 0,
        "queue_proxysql": 0,
        "queue_memory": 0,
        "queue_disk": 0,
        "memory_bytes": 0,
        "memory_limit": 1 << 20,
        "oldest_age_s": 0.0,
        "lanes": 0,
        "lanes_waiting": 0,
        "last_error": "",
        "ordered_hostgroups": {"700": "lossless"},
        "spill_path": "",
    }
    section.update(values)
    return section


def stats_with(mirror: dict[str, Any] | None) -> dict[str, Any]:
    """A snapshot with one backend and (unless None) a mirror section."""
    snap = snapshot([pool_row("db1", 3306, 10)], questions=10, clients=1)
    if mirror is not None:
        snap["mirror"] = mirror
    return snap


@pytest.fixture
def node(db: None) -> ProxyNode:
    """A node of cluster ``mirrors``."""
    cluster = Cluster.objects.create(name="mirrors")
    return ProxyNode.objects.create(cluster=cluster, name="mirror-node-1")


def test_reports_record_the_mirror_with_rates_from_its_counters(node: ProxyNode) -> None:
    send_report(node, T0, stats_with(mirror_section(mirrored=100, completed=80, dropped={"queue_full": 5})))
    second = mirror_section(
        mirrored=600,
        completed=480,
        failed={"1062": 2, "2013": 8},
        dropped={"queue_full": 45, "too_large": 10},
        queue_length=70,
        queue_disk=60,
        concurrency=16,
        oldest_age_s=2.5,
    )
    send_report(node, T0 + timedelta(seconds=5), stats_with(second))
    first, last = MirrorSample.objects.filter(node=node, resolution=Resolution.RAW).order_by("at")
    assert (first.mirrored_per_s, first.dropped, first.queue_length) == (None, 5, 0)
    assert (last.mirrored_per_s, last.completed_per_s, last.failed_per_s, last.dropped_per_s) == (100, 80, 2, 10)
    assert (last.queue_length, last.queue_disk, last.concurrency, last.oldest_age_s, last.dropped) == (
        70,
        60,
        16,
        2.5,
        55,
    )
    points = stats.mirror_series(node, "dropped_per_s", T0 - timedelta(minutes=1))
    assert points == [(T0 + timedelta(seconds=5), 10.0)]  # the first report has no rate


def test_a_report_without_a_mirror_records_none_and_a_bad_one_names_the_field(node: ProxyNode) -> None:
    send_report(node, T0, stats_with(None))
    assert not MirrorSample.objects.exists()
    for section, message in (
        ([], "stats.mirror: expected an object"),
        (mirror_section(dropped=3), "stats.mirror.dropped: expected an object of counts by reason"),
        (mirror_section(failed={"1062": "x"}), "stats.mirror.failed.1062: expected a number"),
        (mirror_section(queue_length=-1), "stats.mirror.queue_length: expected a number of 0 or more"),
    ):
        with pytest.raises(ValueError, match=message):
            send_report(node, T0 + timedelta(seconds=10), stats_with(section))
    assert not MirrorSample.objects.exists()
    with pytest.raises(ValueError, match="not one of queue_length"):
        stats.mirror_series(node, "nonsense", T0)


def test_mirror_points_roll_up_and_expire(node: ProxyNode) -> None:
    for i, queued in enumerate((10, 20, 30)):
        send_report(
            node, T0 + timedelta(seconds=20 * i), stats_with(mirror_section(queue_length=queued, dropped={"x": i}))
        )
    stats.compact(now=T0 + timedelta(minutes=2))
    minute = MirrorSample.objects.get(node=node, resolution=Resolution.MINUTE)
    assert (minute.at, minute.queue_length, minute.dropped) == (T0, 20.0, 2)
    stats.compact(now=T0 + timedelta(days=3))
    assert not MirrorSample.objects.filter(node=node, resolution__in=[Resolution.RAW, Resolution.MINUTE]).exists()


def _reported_cluster() -> tuple[Cluster, ProxyNode]:
    cluster = Cluster.objects.create(name="shadow")
    node = ProxyNode.objects.create(cluster=cluster, name="shadow-node")
    now = timezone.now()
    send_report(node, now - timedelta(seconds=5), stats_with(mirror_section(mirrored=10)))
    send_report(
        node,
        now,
        stats_with(
            mirror_section(
                mirrored=20,
                completed=12,
                failed={"1213": 1},
                dropped={"memory_full": 3},
                queue_length=4,
                queue_disk=2,
                concurrency=3,
                oldest_age_s=7.4,
                lanes=5,
                lanes_waiting=2,
                last_error="hostgroup 700: no ONLINE server",
            )
        ),
    )
    return cluster, node


def viewer() -> Client:
    account = Account.objects.create_user("mirror-viewer")
    roles.grant(account, roles.VIEWER)
    client = Client()
    client.force_login(account)
    return client


def test_the_dashboard_shows_each_nodes_mirror_live_and_over_time(db: None) -> None:
    _reported_cluster()
    client = viewer()
    page = client.get(reverse("web:mirror")).content.decode()
    assert f'href="{reverse("web:mirror")}"' in page  # in the nav
    assert 'hx-get="/mirror/table/"' in page
    for metric in ("queue_length", "concurrency", "dropped_per_s", "oldest_age_s"):
        assert reverse("web:mirror_chart", args=[metric]) in page
    table = client.get(reverse("web:mirror_table")).content.decode()
    assert "shadow-node" in table and "memory_full: 3" in table and "1213: 1" in table
    assert "7.4 s" in table and "3 / 16" in table and "2 waiting" in table and "700 lossless" in table
    assert "hostgroup 700: no ONLINE server" in table
    chart = client.get(reverse("web:mirror_chart", args=["queue_length"]) + "?span=6h").json()
    assert chart["title"].startswith("Queue length") and chart["until"] - chart["since"] == 6 * 3600 * 1000
    (series,) = chart["series"]
    assert series["node"] == "shadow-node" and [p[1] for p in series["points"]] == [0, 4]
    drops = client.get(reverse("web:mirror_chart", args=["dropped_per_s"])).json()
    assert [p[1] for p in drops["series"][0]["points"]] == [pytest.approx(0.6)]
    assert client.get(reverse("web:mirror_chart", args=["nonsense"])).status_code == 404
    assert Client().get(reverse("web:mirror")).status_code == 302  # to the login page


def test_the_api_gives_the_latest_mirror_and_its_history(db: None) -> None:
    cluster, node = _reported_cluster()
    account = Account.objects.create_user("mirror-api-viewer")
    roles.grant(account, roles.VIEWER)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=account).key}")

    latest = api.get("/api/v1/mirror/", {"cluster": cluster.name}).json()
    (entry,) = latest["nodes"]
    assert (latest["cluster"], entry["node"], entry["mirror"]["dropped"]) == ("shadow", node.name, {"memory_full": 3})
    history = api.get("/api/v1/mirror/history/", {"cluster": "shadow", "metric": "oldest_age_s", "span": "1h"})
    assert history.status_code == 200
    (series,) = history.json()["series"]
    assert [value for _, value in series["points"]] == [0.0, 7.4]
    bad = api.get("/api/v1/mirror/history/", {"cluster": "shadow", "metric": "speed"})
    assert bad.status_code == 400 and "metric" in bad.json()
    assert api.get("/api/v1/mirror/history/", {"span": "1y"}).json()["span"][0].startswith("'1y' is not one of")
    assert api.get("/api/v1/mirror/", {"cluster": "nowhere"}).status_code == 404
    assert APIClient().get("/api/v1/mirror/").status_code == 401
