"""A node's page against a real proxy node: its live sessions, KILL from the browser's form (audited), and a node
whose admin endpoint cannot be reached."""

from __future__ import annotations

import pymysql
import pytest
from django.urls import reverse

from devstack.ports import free_port
from devstack.proxy import rw_split_config
from devstack.sandbox import Sandbox
from fleet.core import roles
from fleet.core.models import AuditEntry, Cluster, ProxyNode
from proxyapp import credential
from tests.support.harness import StartProxy
from tests.unit.fleet.web.test_node_page import logged_in

pytestmark = pytest.mark.django_db


def test_sessions_live_from_the_node_and_kill(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(rw_split_config(sandbox.primary().port, [r.port for r in sandbox.replicas()]))
    cluster = Cluster.objects.create(name="nodes")
    report = {
        "global": {"Questions": 12, "Active_Transactions": 1},
        "connection_pool": [],
        "config": {"checksum": "ab"},
    }
    node = ProxyNode.objects.create(
        cluster=cluster,
        name="live-node",
        admin_address=f"127.0.0.1:{proxy.admin_port}",
        admin_token=credential.read(proxy.token_path),
        last_report=report,
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
    assert (
        f"KILL {session} on live-node: done, its client was told 1927 Connection was killed." in done.content.decode()
    )
    with pytest.raises(pymysql.err.MySQLError), client.cursor() as cur:
        cur.execute("SELECT 2")
    entry = AuditEntry.objects.get(action=AuditEntry.Action.KILL)
    assert entry.object_key == f"live-node session {session}" and entry.after["ok"] is True
    unknown = operator.post(
        reverse("web:node_kill", args=[node.name]), {"session": "99999", "what": "query"}, follow=True
    )
    assert "KILL QUERY 99999 on live-node: " in unknown.content.decode() and "done" not in unknown.content.decode()


def test_a_node_without_its_admin_credential_says_so_and_its_sessions_live_on(
    sandbox: Sandbox, start_proxy: StartProxy
) -> None:
    proxy = start_proxy(rw_split_config(sandbox.primary().port, [r.port for r in sandbox.replicas()]))
    cluster = Cluster.objects.create(name="tokenless")
    node = ProxyNode.objects.create(cluster=cluster, name="no-token", admin_address=f"127.0.0.1:{proxy.admin_port}")
    with proxy.connect(database="app", autocommit=True) as client:
        session = client.thread_id()
        operator = logged_in(roles.OPERATOR)
        said = operator.post(
            reverse("web:node_kill", args=[node.name]), {"session": session, "what": "session"}, follow=True
        ).content.decode()
        assert f"KILL {session} on no-token: " in said and "needs the admin credential" in said
        with client.cursor() as cur:
            cur.execute("SELECT 2")
            assert cur.fetchone() == (2,)


def test_digests_reset_on_every_node(sandbox: Sandbox, start_proxy: StartProxy) -> None:
    proxy = start_proxy(rw_split_config(sandbox.primary().port, [r.port for r in sandbox.replicas()]))
    cluster = Cluster.objects.create(name="digesting")
    ProxyNode.objects.create(
        cluster=cluster,
        name="d-1",
        admin_address=f"127.0.0.1:{proxy.admin_port}",
        admin_token=credential.read(proxy.token_path),
    )
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
