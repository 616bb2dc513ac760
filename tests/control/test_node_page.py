"""A node's page against a real proxy node: its live sessions, KILL from the browser's form (audited), and a node
whose admin endpoint cannot be reached."""

from __future__ import annotations

import pymysql
import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from devstack.sandbox import Sandbox
from fleet.core import roles
from fleet.core.models import AuditEntry, Cluster, ProxyNode
from tests.control.conftest import LOGIN_PASSWORD, make_account
from tests.harness import StartProxy, free_port, rw_split_config

pytestmark = pytest.mark.django_db


def logged_in(role: str) -> Client:
    """A browser session holding ``role``."""
    client = Client()
    assert client.login(username=make_account(role).username, password=LOGIN_PASSWORD)
    return client


def test_sessions_live_from_the_node_and_kill(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(rw_split_config(sandbox.primary().port, [r.port for r in sandbox.replicas()]))
    cluster = Cluster.objects.create(name="nodes")
    report = {
        "global": {"Questions": 12, "Active_Transactions": 1},
        "connection_pool": [],
        "config": {"checksum": "ab"},
    }
    node = ProxyNode.objects.create(
        cluster=cluster, name="live-node", admin_address=f"127.0.0.1:{proxy.admin_port}", last_report=report
    )
    client = proxy.connect(database="app", autocommit=True)
    with client.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("SELECT 1")
    session = client.thread_id()
    operator = logged_in(roles.OPERATOR)
    page = operator.get(reverse("web:node", args=[node.name])).content.decode()
    assert f'data-session="{session}"' in page and "<td>open</td>" in page
    assert "<code>Questions</code>" in page and "Kill query" in page
    assert "Kill query" not in logged_in(roles.VIEWER).get(reverse("web:node", args=[node.name])).content.decode()
    done = operator.post(
        reverse("web:node_kill", args=[node.name]), {"session": session, "what": "session"}, follow=True
    )
    assert f"KILL {session} on live-node: done." in done.content.decode()
    with pytest.raises(pymysql.err.MySQLError), client.cursor() as cur:
        cur.execute("SELECT 2")
    entry = AuditEntry.objects.get(action=AuditEntry.Action.KILL)
    assert entry.object_key == f"live-node session {session}" and entry.after["ok"] is True
    unknown = operator.post(
        reverse("web:node_kill", args=[node.name]), {"session": "99999", "what": "query"}, follow=True
    )
    assert "KILL QUERY 99999 on live-node: " in unknown.content.decode() and "done." not in unknown.content.decode()


def test_a_node_that_cannot_be_asked_says_so(db: None) -> None:
    cluster = Cluster.objects.create(name="away")
    ProxyNode.objects.create(cluster=cluster, name="gone", admin_address=f"127.0.0.1:{free_port()}")
    ProxyNode.objects.create(cluster=cluster, name="silent")
    viewer = logged_in(roles.VIEWER)
    assert "Cannot ask the node: 127.0.0.1:" in viewer.get(reverse("web:node", args=["gone"])).content.decode()
    assert "has no admin address" in viewer.get(reverse("web:node", args=["silent"])).content.decode()
    assert viewer.get(reverse("web:node", args=["nobody"])).status_code == 404


def test_operators_add_and_edit_clusters_and_nodes_in_the_ui(db: None) -> None:
    operator = logged_in(roles.OPERATOR)
    assert operator.post(reverse("web:cluster_add"), {"name": "east", "comment": "the east DC"}).status_code == 302
    cluster = Cluster.objects.get(name="east")
    node = {"name": "east-1", "cluster": cluster.pk, "mysql_address": "10.0.0.5:6033", "admin_address": "bad"}
    refused = operator.post(reverse("web:node_add"), node)
    assert refused.status_code == 200 and "host:port" in refused.content.decode()
    node["admin_address"] = "10.0.0.5:6070"
    assert operator.post(reverse("web:node_add"), node).status_code == 302
    saved = ProxyNode.objects.get(name="east-1")
    edit = {**node, "name": "renamed", "mysql_address": "[fe80::1]:6033"}
    assert operator.post(reverse("web:node_edit", args=[saved.pk]), edit).status_code == 302
    saved.refresh_from_db()
    assert (saved.name, saved.mysql_address) == ("east-1", "[fe80::1]:6033")  # the name is fixed once made
    viewer = logged_in(roles.VIEWER)
    page = viewer.get(reverse("web:fleet")).content.decode()
    assert 'data-node="east-1"' in page and "Add a node" not in page
    assert viewer.get(reverse("web:node_add")).status_code == 403
    assert AuditEntry.objects.filter(table="proxynode", action=AuditEntry.Action.UPDATE).count() == 1


def test_nodes_through_the_api(db: None) -> None:
    api = APIClient()
    api.force_authenticate(make_account(roles.OPERATOR))
    Cluster.objects.create(name="west")
    made = api.post("/api/v1/nodes/", {"name": "west-1", "cluster": "west", "admin_address": "10.1.0.1:6070"})
    assert made.status_code == 201, made.json()
    renamed = api.patch("/api/v1/nodes/west-1/", {"name": "other"}, format="json")
    assert renamed.status_code == 400 and "cannot change" in str(renamed.json())
    moved = api.patch("/api/v1/nodes/west-1/", {"mysql_address": "nonsense"}, format="json")
    assert moved.status_code == 400 and "host:port" in str(moved.json())
    assert api.delete("/api/v1/nodes/west-1/").status_code == 204
    assert not ProxyNode.objects.filter(name="west-1").exists()


def test_digests_reset_on_every_node(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(rw_split_config(sandbox.primary().port, [r.port for r in sandbox.replicas()]))
    cluster = Cluster.objects.create(name="digesting")
    ProxyNode.objects.create(cluster=cluster, name="d-1", admin_address=f"127.0.0.1:{proxy.admin_port}")
    ProxyNode.objects.create(cluster=cluster, name="d-2", admin_address=f"127.0.0.1:{free_port()}")
    with proxy.connect(database="app", autocommit=True) as client, client.cursor() as cur:
        cur.execute("SELECT 1 + 1")
    assert proxy.admin("GET", "/stats/query_digest")  # the node has digests
    operator = logged_in(roles.OPERATOR)
    operator.get(reverse("web:select_cluster"), {"cluster": cluster.pk})
    said = operator.post(reverse("web:digests_reset"), follow=True).content.decode()
    assert "Digests reset on d-1 (" in said and "Not reset: d-2: 127.0.0.1:" in said
    assert proxy.admin("GET", "/stats/query_digest") == []
    entry = AuditEntry.objects.get(table="stats_mysql_query_digest")
    assert entry.after["reset"][0].startswith("d-1") and entry.after["failed"][0].startswith("d-2")
