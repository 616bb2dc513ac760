"""Failover's pages and API resources for every role: the topology with each node's view, the event timelines, the
backend status history, the settings form (write-only passwords, field-named errors), and the operators' actions
(switchover, rejoin, acknowledge), whose buttons a viewer never sees and whose requests a viewer gets 403 for."""

from __future__ import annotations

import html
from datetime import timedelta

import pytest
from django.contrib.auth.models import User as Account
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from devstack.failover_sandbox import ha_document
from devstack.ports import free_port
from fleet.core import publishing, roles
from fleet.core.models import AuditEntry, Cluster, ProxyNode
from fleet.failover import history
from fleet.failover.models import Event, FailoverPolicy, Fence, Step
from proxyapp.config.secrets import MASK
from tests.support.control_plane import LOGIN_PASSWORD, NO_ROLE, make_cluster
from tests.support.failover_fixtures import monitor_row, send_monitor_report, transition

pytestmark = pytest.mark.django_db

PRIMARY, REPLICA, OLD = (f"127.0.0.1:{free_port()}" for _ in range(3))
ADMIN_SECRET = "r00t-s3cret-failover"
API = "/api/v1"


@pytest.fixture
def ha(accounts: dict[str, Account]) -> Cluster:
    """A published cluster whose hostgroup 10 has a primary and a replica, a fenced old primary after a failover
    (with its timeline), two nodes that reported, and a reported state change."""
    cluster = make_cluster("ha", ha_document(PRIMARY, [REPLICA]))
    publishing.publish(cluster, None, "seed")
    now = timezone.now()
    for name in ("ha-a", "ha-b"):
        node = ProxyNode.objects.create(cluster=cluster, name=name)
        rows = [
            monitor_row(PRIMARY, 10, at=now, read_only=False),
            monitor_row(REPLICA, 20, at=now, read_only=True, lag_s=2.0),
        ]
        moves = [transition(OLD, 10, now - timedelta(seconds=30), "ONLINE", "SHUNNED", "ping failed 3 times")]
        send_monitor_report(node, now, rows, moves)
    event = Event.objects.create(
        cluster=cluster,
        writer_hostgroup=10,
        reader_hostgroup=20,
        kind="failover",
        state="done",
        old_primary=OLD,
        new_primary=PRIMARY,
        promoted=True,
        started_at=now - timedelta(seconds=30),
        summary=f"{PRIMARY} replaced {OLD} (down) as the primary of hostgroup 10",
    )
    event.record(Step.Name.CHOSEN, f"{PRIMARY} was chosen: it has 0-1-12, every transaction any candidate has.")
    Fence.objects.create(cluster=cluster, writer_hostgroup=10, server=OLD, event=event, since=now)
    return cluster


def web(role: str) -> Client:
    client = Client()
    if role != "anonymous":
        assert client.login(username=f"{role}-account", password=LOGIN_PASSWORD)
    return client


def api(role: str) -> APIClient:
    client = APIClient()
    if role != "anonymous":
        client.force_authenticate(Account.objects.get(username=f"{role}-account"))
    return client


def test_the_topology_page_shows_each_nodes_view_and_buttons_only_to_operators(ha: Cluster) -> None:
    page = web(roles.VIEWER).get(reverse("web:failover"))
    assert page.status_code == 200
    text = page.content.decode()
    for server, role in ((PRIMARY, "primary"), (REPLICA, "replica"), (OLD, "fenced")):
        assert f'data-server="{server}" data-role="{role}"' in text
    assert 'data-node="ha-a" data-verdict="up"' in text
    assert f"{PRIMARY} is reported down by 0 of 2 nodes" in text
    assert "2.0 s" in text  # the replica's lag
    assert 'data-failover="off"' in text
    for action in ("switchover", "rejoin", "settings"):
        assert f"/failover/10/{action}/" not in text

    operator = web(roles.OPERATOR).get(reverse("web:failover")).content.decode()
    for action in ("switchover", "rejoin", "settings"):
        assert f"/failover/10/{action}/" in operator
    live = web(roles.VIEWER).get(reverse("web:failover_live"))
    assert live.status_code == 200 and f'data-server="{PRIMARY}"' in live.content.decode()


@pytest.mark.parametrize(
    "name", ["failover", "failover_live", "failover_events", "failover_transitions", "failover_policy"]
)
def test_pages_need_a_role(ha: Cluster, name: str) -> None:
    url = reverse(f"web:{name}", kwargs={"writer_hostgroup": 10} if name == "failover_policy" else None)
    assert web("anonymous").get(url).status_code == 302
    assert web(NO_ROLE).get(url).status_code == 403
    assert web(roles.VIEWER).get(url).status_code == (403 if name == "failover_policy" else 200)
    assert web(roles.OPERATOR).get(url).status_code == 200


def test_a_viewer_cannot_act(ha: Cluster) -> None:
    viewer = web(roles.VIEWER)
    event = Event.objects.get(kind="failover")
    assert viewer.post(reverse("web:failover_switchover", args=[10]), {"target": REPLICA}).status_code == 403
    assert viewer.post(reverse("web:failover_rejoin", args=[10]), {"server": OLD}).status_code == 403
    assert viewer.post(reverse("web:failover_acknowledge", args=[event.pk])).status_code == 403
    assert viewer.post(reverse("web:failover_policy", args=[10]), {"enabled": "on"}).status_code == 403
    assert not Event.objects.filter(kind="switchover").exists()
    assert Event.objects.get(pk=event.pk).acknowledged_at is None


def test_the_event_page_shows_the_timeline_and_an_operator_acknowledges(ha: Cluster) -> None:
    event = Event.objects.get(kind="failover")
    url = reverse("web:failover_event", args=[event.pk])
    viewer_page = web(roles.VIEWER).get(url).content.decode()
    assert f"{PRIMARY} was chosen: it has 0-1-12, every transaction any candidate has." in viewer_page
    assert 'data-step="chosen" data-ok="1"' in viewer_page
    assert "acknowledge/" not in viewer_page
    operator = web(roles.OPERATOR)
    assert "acknowledge/" in operator.get(url).content.decode()
    response = operator.post(reverse("web:failover_acknowledge", args=[event.pk]))
    assert response.status_code == 302
    event.refresh_from_db()
    assert event.acknowledged_by.username == "operator-account"
    assert "acknowledged by operator-account" in operator.get(url).content.decode()
    listing = web(roles.VIEWER).get(reverse("web:failover_events")).content.decode()
    assert f'data-event="{event.pk}"' in listing


def test_the_status_history_lists_reported_changes_filtered_by_server(ha: Cluster) -> None:
    history.ingest(list(ProxyNode.objects.all()), timezone.now())
    page = web(roles.VIEWER).get(reverse("web:failover_transitions"), {"server": OLD}).content.decode()
    assert page.count("ping failed 3 times") == 2  # one per node
    empty = web(roles.VIEWER).get(reverse("web:failover_transitions"), {"server": PRIMARY}).content.decode()
    assert "No state change reported for this filter." in empty


def test_the_settings_form_names_the_bad_field_and_keeps_passwords_write_only(ha: Cluster) -> None:
    operator = web(roles.OPERATOR)
    url = reverse("web:failover_policy", args=[10])
    fields = {
        "enabled": "on",
        "cooling_period_s": "120",
        "write_wait_s": "8",
        "admin_user": "root",
        "admin_password": ADMIN_SECRET,
        "replication_user": "repl",
        "replication_password": "",
        "promotion_order": f"{REPLICA}, not-a-server",
    }
    refused = operator.post(url, fields)
    assert refused.status_code == 200
    assert 'data-field="promotion_order"' in refused.content.decode()
    assert "'not-a-server' is not host:port" in html.unescape(refused.content.decode())
    assert not FailoverPolicy.objects.exists()

    assert operator.post(url, {**fields, "promotion_order": REPLICA}).status_code == 302
    policy = FailoverPolicy.objects.get()
    assert (policy.enabled, policy.cooling_period_s, policy.admin_password) == (True, 120, ADMIN_SECRET)
    form = operator.get(url).content.decode()
    assert ADMIN_SECRET not in form
    assert operator.post(url, {**fields, "admin_password": "", "promotion_order": ""}).status_code == 302
    assert FailoverPolicy.objects.get().admin_password == ADMIN_SECRET  # blank keeps it
    entries = AuditEntry.objects.filter(table="failover_policy").order_by("id")
    assert [e.action for e in entries] == ["create", "update"]
    assert entries[0].after["admin_password"] == MASK
    assert ADMIN_SECRET not in str([(e.before, e.after) for e in entries])


def test_a_refused_switchover_says_why_on_the_page(ha: Cluster) -> None:
    operator = web(roles.OPERATOR)
    response = operator.post(reverse("web:failover_switchover", args=[10]), {"target": REPLICA}, follow=True)
    assert "Switchover refused: set the replication account" in response.content.decode()
    FailoverPolicy.objects.create(cluster=ha, writer_hostgroup=10, replication_user="repl")
    response = operator.post(reverse("web:failover_switchover", args=[10]), {"target": REPLICA})
    event = Event.objects.get(kind="switchover")
    assert response.url == reverse("web:failover_event", args=[event.pk])
    assert (event.state, event.old_primary, event.new_primary, event.requested_by.username) == (
        "running",
        PRIMARY,
        REPLICA,
        "operator-account",
    )


# --- the API ------------------------------------------------------------------------------------------------


def test_the_api_shows_the_topology_to_viewers(ha: Cluster) -> None:
    assert api("anonymous").get(f"{API}/failover/").status_code == 401
    assert api(NO_ROLE).get(f"{API}/failover/").status_code == 403
    [hostgroup] = api(roles.VIEWER).get(f"{API}/failover/?cluster=ha").json()
    assert (hostgroup["writer_hostgroup"], hostgroup["reader_hostgroup"], hostgroup["failover_enabled"]) == (
        10,
        20,
        False,
    )
    assert hostgroup["primary"]["server"] == PRIMARY
    assert hostgroup["primary"]["read_only"] is False
    assert [n["verdict"] for n in hostgroup["primary"]["nodes"]] == ["up", "up"]
    assert [(r["server"], r["lag_s"], r["read_only"]) for r in hostgroup["replicas"]] == [(REPLICA, 2.0, True)]
    assert [(k["server"], k["role"]) for k in hostgroup["kept_out"]] == [(OLD, "fenced")]
    assert hostgroup["kept_out"][0]["fenced_since"] is not None
    assert hostgroup["recent"][0]["kind"] == "failover"
    assert api(roles.VIEWER).get(f"{API}/failover/10/").json()["primary"]["server"] == PRIMARY
    missing = api(roles.VIEWER).get(f"{API}/failover/30/")
    assert missing.status_code == 404
    assert "publishes no replication hostgroup 30" in missing.json()["detail"]


def test_the_api_policy_is_operator_editable_with_write_only_passwords(ha: Cluster) -> None:
    url = f"{API}/failover/10/policy/"
    assert api(roles.VIEWER).get(url).json()["enabled"] is False
    assert api(roles.VIEWER).patch(url, {"enabled": True}, format="json").status_code == 403
    operator = api(roles.OPERATOR)
    refused = operator.patch(url, {"promotion_order": "db-b", "write_wait_s": 0}, format="json")
    assert refused.status_code == 400
    assert refused.json() == {
        "promotion_order": ["'db-b' is not host:port (a port from 1 to 65535)"],
        "write_wait_s": ["at least 1 second"],
    }
    saved = operator.patch(url, {"enabled": True, "admin_password": ADMIN_SECRET}, format="json")
    assert saved.status_code == 200
    assert saved.json()["enabled"] is True
    assert "admin_password" not in saved.json() and ADMIN_SECRET not in saved.content.decode()
    operator.patch(url, {"cooling_period_s": 60}, format="json")
    policy = FailoverPolicy.objects.get()
    assert (policy.cooling_period_s, policy.admin_password) == (60, ADMIN_SECRET)


def test_the_api_actions_refuse_naming_the_field_and_viewers_get_403(ha: Cluster) -> None:
    viewer, operator = api(roles.VIEWER), api(roles.OPERATOR)
    assert viewer.post(f"{API}/failover/10/switchover/", {"target": REPLICA}, format="json").status_code == 403
    refused = operator.post(f"{API}/failover/10/switchover/?cluster=ha", {"target": "10.0.0.9:3306"}, format="json")
    assert refused.status_code == 400
    assert refused.json()["target"][0].startswith("10.0.0.9:3306 is not a replica of hostgroup 10")
    assert operator.post(f"{API}/failover/10/switchover/", {}, format="json").json() == {
        "target": ["This field is required."]
    }
    not_fenced = operator.post(f"{API}/failover/10/rejoin/", {"server": REPLICA}, format="json")
    assert not_fenced.status_code == 400
    assert not_fenced.json() == {"server": [f"{REPLICA} is not fenced: only a fenced old primary is rejoined"]}

    FailoverPolicy.objects.create(cluster=ha, writer_hostgroup=10, replication_user="repl")
    started = operator.post(f"{API}/failover/10/switchover/", {"target": REPLICA}, format="json")
    assert started.status_code == 202
    assert (started.json()["kind"], started.json()["state"], started.json()["new_primary"]) == (
        "switchover",
        "running",
        REPLICA,
    )
    again = operator.post(f"{API}/failover/10/switchover/", {"target": REPLICA}, format="json")
    assert again.status_code == 400
    assert again.json()["non_field_errors"] == [f"switchover #{started.json()['id']} of hostgroup 10 is under way"]


def test_the_api_lists_events_with_timelines_and_operators_acknowledge(ha: Cluster) -> None:
    event = Event.objects.get(kind="failover")
    [listed] = api(roles.VIEWER).get(f"{API}/failover-events/?cluster=ha").json()["results"]
    assert (listed["id"], listed["kind"], listed["promoted"]) == (event.pk, "failover", True)
    assert [s["name"] for s in listed["steps"]] == ["chosen"]
    url = f"{API}/failover-events/{event.pk}/acknowledge/"
    assert api(roles.VIEWER).post(url).status_code == 403
    acknowledged = api(roles.OPERATOR).post(url)
    assert acknowledged.status_code == 200
    assert acknowledged.json()["acknowledged_by"] == "operator-account"
    assert [s["name"] for s in acknowledged.json()["steps"]] == ["chosen", "acknowledged"]
    filtered = api(roles.VIEWER).get(f"{API}/failover-events/?kind=switchover").json()
    assert filtered["count"] == 0


def test_the_api_lists_backend_transitions(ha: Cluster) -> None:
    history.ingest(list(ProxyNode.objects.all()), timezone.now())
    body = api(roles.VIEWER).get(f"{API}/backend-transitions/?server={OLD}").json()
    assert body["count"] == 2
    assert {(r["node"], r["from_status"], r["to_status"], r["reason"]) for r in body["results"]} == {
        ("ha-a", "ONLINE", "SHUNNED", "ping failed 3 times"),
        ("ha-b", "ONLINE", "SHUNNED", "ping failed 3 times"),
    }
