"""The control plane's own health on the overview: broker, worker and beat, and whose side a stale node is on."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from fleet.core import health, roles
from fleet.core.models import Cluster, ProxyNode, ServiceHeartbeat
from tests.support.control_plane import LOGIN_PASSWORD, make_account

pytestmark = pytest.mark.django_db


def beat_at(name: str, seconds_ago: float, detail: str = "") -> None:
    """Store ``name``'s heartbeat as of ``seconds_ago``."""
    at = timezone.now() - timedelta(seconds=seconds_ago)
    ServiceHeartbeat.objects.update_or_create(name=name, defaults={"at": at, "detail": detail})


def test_a_working_control_plane() -> None:
    beat_at("worker", 3, "task proxyfleet.fleet.report")
    beat_at("beat", 1)
    control = health.control_plane()
    assert control.ok and control.blame == ""
    assert control.service("broker").summary.startswith("answers; messages waiting: fleet ")
    assert "task proxyfleet.fleet.report" in control.service("worker").summary


def test_a_silent_worker_is_shown_down_and_takes_the_blame_for_stale_nodes() -> None:
    beat_at("worker", health.SILENT_AFTER.total_seconds() + 5)
    beat_at("beat", 1)
    control = health.control_plane()
    assert not control.service("worker").ok and control.service("worker").summary.startswith("not running?")
    assert control.blame.startswith("the control plane's worker is down")
    cluster = Cluster.objects.create(name="c")
    ProxyNode.objects.create(cluster=cluster, name="quiet", last_heartbeat=timezone.now() - timedelta(minutes=5))
    client = Client()
    client.login(username=make_account(roles.VIEWER).username, password=LOGIN_PASSWORD)
    page = client.get(reverse("web:overview_nodes")).content.decode()
    assert 'data-service="worker"' in page and "not running?" in page
    assert "node reports and acks are not being read" in page  # the node is stale, but not through its fault


def test_no_heartbeat_ever_and_an_unreachable_broker() -> None:
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0"):
        control = health.control_plane()
    assert control.service("broker").summary.startswith("unreachable:")
    assert control.service("worker").summary == "never seen at work (no task recorded)"
    assert control.blame.startswith("the control plane's broker is down")


def test_heartbeats_are_written_at_most_every_few_seconds() -> None:
    health._last_written.clear()
    health.heartbeat("worker", "task one")
    first = ServiceHeartbeat.objects.get(name="worker")
    health.heartbeat("worker", "task two")  # within BEAT_EVERY: not written again
    assert ServiceHeartbeat.objects.get(name="worker").detail == "task one" == first.detail
