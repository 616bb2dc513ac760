"""A node's page against a real proxy node: its live sessions, KILL from the browser's form (audited), and a node
whose admin endpoint cannot be reached."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from devstack.ports import free_port
from fleet.core import roles
from fleet.core.models import AuditEntry, Cluster, ProxyNode
from tests.support.control_plane import LOGIN_PASSWORD, make_account

pytestmark = pytest.mark.django_db


def logged_in(role: str) -> Client:
    """A browser session holding ``role``."""
    client = Client()
    assert client.login(username=make_account(role).username, password=LOGIN_PASSWORD)
    return client


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
