"""A node's report whose query texts hold bytes that are not UTF-8 (issue 39): a node decodes them with
surrogateescape, and one that reports them unescaped sends lone surrogates (``"\\udcff"`` in its JSON). The control
plane stores and shows them escaped (``proxyapp.shown``: ``\\xff``) and never fails: the digests page (MySQL's,
PostgreSQL's, the sharding digests, the operator's "Make a rule" link), the hot rows page, the node page's live
processlist, and the API's node stats, a report stored before too."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.db import DataError, connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from fleet.core import roles
from fleet.core.models import Cluster, ProxyNode
from tests.support.control_plane import LOGIN_PASSWORD, make_account, make_cluster
from tests.support.node_messages import digest_row, pgsql_digest_row, send_report, sharding_row, snapshot

pytestmark = pytest.mark.django_db

#: What a node's JSON holds for ``SELECT `\xff``` in schema ``db\xfe``, and a hot key ``'\xff'``, once decoded.
TEXT, SCHEMA = "SELECT `\udcff` FROM t", "db\udcfe"
SHOWN_TEXT, SHOWN_SCHEMA = "SELECT `\\xff` FROM t", "db\\xfe"


def as_node_sends(value: Any) -> Any:
    """``value`` through the JSON a node sends (``json.dumps`` writes a lone surrogate as ``\\udcff``)."""
    sent = json.dumps(value)
    assert "\\udcff" in sent
    return json.loads(sent)


def report() -> dict[str, Any]:
    """A ``/stats`` snapshot from a node that sent its texts unescaped."""
    stats = snapshot(
        [],
        [{**digest_row("0x1", TEXT, 3, 30), "schemaname": SCHEMA}],
        questions=3,
        sharding=[{**sharding_row("0x2", "SELECT * FROM s WHERE k = '\udcff'", 1, 2), "schemaname": SCHEMA}],
    )
    stats["pgsql_query_digest"] = [{**pgsql_digest_row("0x3", "SELECT '\udcff'", 1, 5), "database": SCHEMA}]
    proposal = {
        "id": f"{SCHEMA}.t.id",
        "schema": SCHEMA,
        "table": "t",
        "column": "id",
        "queue": "db_.t",
        "digest": "0x4",
        "digest_text": "UPDATE t SET n=? WHERE id='\udcff'",
        "keys": ["\udcff"],
        "evidence": {"deadlocks": 3},
        "state": "proposed",
        "since": 1764860000.0,
    }
    stats["trx_queue"] = {"queues": [], "proposals": [proposal]}
    return as_node_sends(stats)


def logged_in(role: str) -> Client:
    client = Client()
    assert client.login(username=make_account(role).username, password=LOGIN_PASSWORD)
    return client


@pytest.fixture
def reported(db: None) -> ProxyNode:
    """A node of the cluster ``main`` that reported the texts twice."""
    node = ProxyNode.objects.create(cluster=make_cluster("main"), name="odd-1")
    now = timezone.now()
    for at in (now - timedelta(seconds=5), now):
        send_report(node, at, report())
    return node


def test_the_report_is_stored_with_its_texts_escaped(reported: ProxyNode) -> None:
    reported.refresh_from_db()
    stored = json.dumps(reported.last_report)
    assert "\\udc" not in stored
    assert reported.last_report["query_digest"][0]["digest_text"] == SHOWN_TEXT
    assert reported.last_report["trx_queue"]["proposals"][0]["keys"] == ["\\xff"]


def test_the_digests_and_hot_rows_pages_show_the_texts_escaped(reported: ProxyNode) -> None:
    operator = logged_in(roles.OPERATOR)  # its "Make a rule" link URL-encodes the digest text
    digests = operator.get(reverse("web:digests"))
    assert digests.status_code == 200
    page = digests.content.decode("utf-8")
    assert SHOWN_TEXT in page and f"<td>{SHOWN_SCHEMA}</td>" in page
    assert "SELECT &#x27;\\xff&#x27;" in page  # PostgreSQL's digest
    assert "comment=SELECT%20%60%5Cxff%60%20FROM%20t" in page
    hot = operator.get(reverse("web:hot_rows"))
    assert hot.status_code == 200
    assert "UPDATE t SET n=? WHERE id=&#x27;\\xff&#x27;" in hot.content.decode("utf-8")
    shards = operator.get(reverse("web:shard_map"))
    assert shards.status_code == 200


def test_the_api_answers_a_report_stored_before_escaped(reported: ProxyNode) -> None:
    """A report with lone surrogates, as a control plane before this fix stored it on SQLite or MySQL; PostgreSQL's
    jsonb never held one (it refuses them), so there the page reads the escaped report."""
    stored_before = ProxyNode.objects.filter(pk=reported.pk)
    if connection.vendor == "postgresql":
        with pytest.raises(DataError, match="surrogate"), transaction.atomic():
            stored_before.update(last_report=report())
    else:
        stored_before.update(last_report=report())
    viewer = make_account(roles.VIEWER)
    api = APIClient()
    api.force_authenticate(viewer)
    answer = api.get(f"/api/v1/stats/nodes/{reported.name}/")
    assert answer.status_code == 200
    assert answer.json()["query_digest"][0]["digest_text"] == SHOWN_TEXT
    assert "\\udc" not in answer.content.decode("utf-8")
    browser = Client()
    browser.force_login(viewer)
    page = browser.get(reverse("web:digests"))
    assert page.status_code == 200 and SHOWN_TEXT in page.content.decode("utf-8")


class _Processlist(BaseHTTPRequestHandler):
    """A node's admin endpoint that answers ``/processlist`` with a session in schema ``db\\xfe`` running ``SELECT
    `\\xff```, sent unescaped."""

    def do_GET(self) -> None:
        row = {"SessionID": 7, "user": "app", "db": SCHEMA, "cli_host": "127.0.0.1", "cli_port": 5000}
        row |= {"hostgroup": 10, "command": "Query", "time_ms": 5, "info": TEXT, "in_transaction": False}
        body = json.dumps([row]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def node_admin() -> Iterator[str]:
    """The address of a fake admin endpoint (``_Processlist``)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Processlist)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_the_node_page_shows_the_live_processlist_escaped(node_admin: str, db: None) -> None:
    node = ProxyNode.objects.create(cluster=Cluster.objects.create(name="live"), name="odd-2", admin_address=node_admin)
    page = logged_in(roles.VIEWER).get(reverse("web:node", args=[node.name]))
    assert page.status_code == 200
    text = page.content.decode("utf-8")
    assert f"<td>{SHOWN_SCHEMA}</td>" in text and f"<code>{SHOWN_TEXT}</code>" in text
