"""The web UI through Django's test client: every page for every role, role enforcement (a viewer sees no mutating
button and gets 403 on every change), row forms with the field's error, write-only secrets, publish, diff and
rollback."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User as Account
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from fleet.core import publishing, roles
from fleet.core.drafts import save_row
from fleet.core.models import (
    AuditEntry,
    Cluster,
    ConfigVersion,
    Hostgroup,
    PgsqlForwardListener,
    PgsqlQueryRule,
    PgsqlReplicationHostgroup,
    PgsqlServer,
    PgsqlUser,
    ProxyNode,
    QueryRule,
    ReplicationHostgroup,
    Server,
    Shard,
    ShardedTable,
    User,
    Variable,
)
from fleet.web.pages import TABLE_PAGES
from fleet.web.views.tables import PAGE_SIZE
from proxyapp.pgproxy.routing import PgRouter, Route
from proxyapp.rules.engine import QueryContext, RuleEngine
from tests.support.control_plane import LOGIN_PASSWORD, MONITOR_SECRET, NO_ROLE, SECRET, make_cluster
from tests.support.node_messages import (
    digest_row,
    pgsql_digest_row,
    pgsql_pool_row,
    pgsql_section,
    pool_row,
    send_ack,
    send_report,
    sharding_row,
    snapshot,
)

pytestmark = pytest.mark.django_db

NODE = "web-node-1"


@pytest.fixture
def published(cluster: Cluster) -> Cluster:
    """The seed cluster published twice (v2 adds a reader), with one node that applied v1 and reported twice."""
    v1 = publishing.publish(cluster, None, comment="seed")
    save_row(Server(cluster=cluster, hostgroup_id=20, hostname="10.0.0.9", port=3307), None)
    publishing.publish(cluster, None, comment="one more reader")
    node = ProxyNode.objects.create(cluster=cluster, name=NODE, mysql_address="127.0.0.1:6033")
    now = timezone.now()
    send_ack(node, v1, now - timedelta(seconds=6))
    digests = [digest_row("0x1", "SELECT ?", 5, 50), digest_row("0x2", "UPDATE t SET a=?", 2, 400)]
    for at, queries in ((now - timedelta(seconds=5), 100), (now, 150)):  # 50 queries in 5 s: 10 per second
        pools = [
            pool_row("127.0.0.1", 3306, 10, ConnUsed=2, ConnFree=5, ConnERR=1, Latency_us=420, Queries=queries),
            pool_row("127.0.0.1", 3307, 20, "SHUNNED", ConnERR=9),
        ]
        send_report(node, at, snapshot(pools, digests, questions=queries, clients=3), v1)
    return cluster


def client_for(role: str) -> Client:
    """A client logged in as a fresh account holding ``role`` (no role for ``NO_ROLE``; "superuser" for one)."""
    if role == "superuser":
        account = Account.objects.create_superuser("root-account", email="")
    else:
        account = Account.objects.create_user(f"{role}-account")
        if role != NO_ROLE:
            roles.grant(account, role)
    client = Client()
    client.force_login(account)
    return client


@pytest.fixture
def viewer() -> Client:
    """A client logged in as a viewer."""
    return client_for(roles.VIEWER)


@pytest.fixture
def operator() -> Client:
    """A client logged in as an operator."""
    return client_for(roles.OPERATOR)


def viewer_urls() -> list[str]:
    """Every page and partial a viewer may open (for the ``published`` cluster)."""
    return [
        reverse("web:overview"),
        reverse("web:overview_nodes"),
        *(reverse("web:table_list", args=[page.slug]) for page in TABLE_PAGES),
        reverse("web:publish"),
        reverse("web:history"),
        reverse("web:diff") + "?old=1&new=2",
        reverse("web:backends"),
        reverse("web:backends_table"),
        reverse("web:chart_data", args=["questions_per_s"]),
        reverse("web:chart_data", args=["latency_us"]) + "?hostgroup=10&server=127.0.0.1:3306",
        reverse("web:server", args=[10, "127.0.0.1:3306"]),
        reverse("web:digests") + "?sort=count",
        reverse("web:audit"),
        reverse("web:audit") + "?action=create&table=mysql_servers",
        reverse("web:rule_test"),
        reverse("web:shard_map"),
        reverse("web:hot_rows"),
        reverse("web:hot_rows_table"),
        reverse("web:fleet"),
        reverse("web:node", args=[NODE]),
    ]


def operator_urls(cluster: Cluster) -> list[str]:
    """The pages only an operator may open: each table's add form and an edit form for every row."""
    urls = [reverse("web:cluster_add"), reverse("web:node_add"), reverse("web:cluster_edit", args=[cluster.pk])]
    urls.append(reverse("web:import_cnf"))
    urls += [reverse("web:node_edit", args=[pk]) for pk in ProxyNode.objects.values_list("pk", flat=True)]
    for page in TABLE_PAGES:
        urls.append(reverse("web:row_add", args=[page.slug]))
        urls += [
            reverse("web:row_edit", args=[page.slug, pk]) for pk in page.model.objects.values_list("pk", flat=True)
        ]
    return urls


def post_forms(html: str) -> list[str]:
    """The action of every POST form on the page ("" for a form posting to the page itself)."""
    actions = []
    for form in re.findall(r"<form\b[^>]*>", html):
        if 'method="post"' in form:
            action = re.search(r'action="([^"]*)"', form)
            actions.append(action.group(1) if action else "")
    return actions


def buttons(html: str) -> set[str]:
    """The labels of the page's buttons."""
    return {re.sub(r"\s+", " ", label).strip() for label in re.findall(r"<button\b[^>]*>(.*?)</button>", html, re.S)}


def field_errors(html: str, field: str) -> list[str]:
    """The error messages the row form shows next to ``field``."""
    block = re.search(rf'<ul class="errors field-errors" data-field="{field}">(.*?)</ul>', html, re.S)
    return re.findall(r"<li>(.*?)</li>", block.group(1)) if block else []


# --- access ----------------------------------------------------------------------------------------------------


def test_anonymous_is_sent_to_login(published: Cluster) -> None:
    for url in [*viewer_urls(), *operator_urls(published)]:
        response = Client().get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login")), url


def test_login_form_and_logout(published: Cluster) -> None:
    Account.objects.create_user("someone", password=LOGIN_PASSWORD)
    roles.grant(Account.objects.get(username="someone"), roles.VIEWER)
    client = Client()
    refused = client.post(reverse("login"), {"username": "someone", "password": "wrong"})
    assert refused.status_code == 200 and "Please enter a correct username and password" in refused.content.decode()
    response = client.post(reverse("login"), {"username": "someone", "password": LOGIN_PASSWORD})
    assert response.status_code == 302 and response["Location"] == reverse("web:overview")
    assert "someone" in client.get(reverse("web:overview")).content.decode()
    assert client.post(reverse("logout")).status_code == 302
    assert client.get(reverse("web:overview")).status_code == 302


def test_account_without_role_gets_403_everywhere(published: Cluster) -> None:
    client = client_for(NO_ROLE)
    for url in viewer_urls():
        response = client.get(url)
        assert response.status_code == 403, url
    assert "no role" in client.get(reverse("web:overview")).content.decode()


@pytest.mark.parametrize("role", [roles.VIEWER, roles.OPERATOR, roles.ADMIN, "superuser"])
def test_every_page_renders_for_each_role(published: Cluster, role: str) -> None:
    client = client_for(role)
    for url in viewer_urls():
        assert client.get(url).status_code == 200, url
    expected = 403 if role == roles.VIEWER else 200
    for url in operator_urls(published):
        assert client.get(url).status_code == expected, url


def test_viewer_sees_no_mutating_forms_or_buttons(published: Cluster, viewer: Client) -> None:
    save_row(Server(cluster=published, hostgroup_id=20, hostname="10.0.0.10", port=3306), None)  # a draft change
    assert "10.0.0.10" in viewer.get(reverse("web:publish")).content.decode()  # the preview, without the button
    for url in viewer_urls():
        html = viewer.get(url).content.decode()
        assert set(post_forms(html)) <= {reverse("logout")}, url
        harmless = {"Log out", "Diff", "Go", "Search", "Filter", "Try it", "Which shard?", "Menu"}  # GET forms, menu
        assert buttons(html) <= harmless, url
        assert not re.search(r'href="/tables/[^"]+/(add|\d+)/"', html), url
    # the same pages show an operator the buttons
    operator = client_for(roles.OPERATOR)
    servers = operator.get(reverse("web:table_list", args=["servers"])).content.decode()
    assert reverse("web:row_add", args=["servers"]) in servers and ">Delete<" in servers
    history = operator.get(reverse("web:history")).content.decode()
    assert reverse("web:rollback", args=[1]) in history
    assert reverse("web:rollback", args=[2]) not in history  # the latest version: nothing to roll back to


def test_viewer_gets_403_on_every_change(published: Cluster, viewer: Client) -> None:
    server = Server.objects.filter(cluster=published).first()
    posts = [
        reverse("web:row_add", args=["servers"]),
        reverse("web:row_edit", args=["servers", server.pk]),
        reverse("web:row_delete", args=["servers", server.pk]),
        reverse("web:publish"),
        reverse("web:rollback", args=[1]),
        reverse("web:hot_rows_accept"),
    ]
    counts = (Server.objects.count(), ConfigVersion.objects.count(), AuditEntry.objects.count())
    for url in posts:
        assert viewer.post(url, {"hostname": "x", "port": "1", "comment": "no"}).status_code == 403, url
    assert (Server.objects.count(), ConfigVersion.objects.count(), AuditEntry.objects.count()) == counts


def test_admin_is_for_superusers(published: Cluster) -> None:
    assert client_for(roles.ADMIN).get(reverse("admin:index")).status_code == 302  # not staff: the admin's login
    root = client_for("superuser")
    assert root.get(reverse("admin:index")).status_code == 200
    node = ProxyNode.objects.get(name=NODE)
    assert root.get(reverse("admin:core_proxynode_change", args=[node.pk])).status_code == 200
    assert root.get(reverse("admin:core_cluster_changelist")).status_code == 200


# --- what the pages show ---------------------------------------------------------------------------------------


def test_overview_shows_each_node_against_the_latest_version(published: Cluster, viewer: Client) -> None:
    html = viewer.get(reverse("web:overview_nodes")).content.decode()
    row = re.search(rf'<tr data-node="{NODE}">(.*?)</tr>', html, re.S).group(1)
    assert re.search(r'class="desired">v2<', row) and re.search(r'class="applied">v1<', row)
    assert "drift" in row and ">applied<" in row and "1/2" in row  # one backend of two is ONLINE
    assert re.search(r">\d+ s ago", row)  # the last report's heartbeat
    assert 'hx-trigger="every 3s"' in viewer.get(reverse("web:overview")).content.decode()
    ProxyNode.objects.filter(name=NODE).update(state=ProxyNode.State.FAILED, error="mysql_servers[0]: port: bad")
    html = viewer.get(reverse("web:overview_nodes")).content.decode()
    assert ">failed<" in html and "mysql_servers[0]: port: bad" in html


def test_backends_and_digests_show_the_reports(published: Cluster, viewer: Client) -> None:
    backends = viewer.get(reverse("web:backends_table")).content.decode()
    row = re.search(rf'<tr data-server="10/127.0.0.1:3306/{NODE}">(.*?)</tr>', backends, re.S).group(1)
    assert "ONLINE" in row and "420 µs" in row and ">10.0<" in row  # queries/s from the two reports
    assert "SHUNNED" in re.search(rf'<tr data-server="20/127.0.0.1:3307/{NODE}">(.*?)</tr>', backends, re.S).group(1)
    assert 'hx-trigger="every 2s"' in viewer.get(reverse("web:backends")).content.decode()
    chart = viewer.get(reverse("web:chart_data", args=["client_connections"])).json()
    assert [(s["node"], [value for _, value in s["points"]]) for s in chart["series"]] == [(NODE, [3, 3])]
    server = {"hostgroup": 10, "server": "127.0.0.1:3306", "span": "6h"}
    chart = viewer.get(reverse("web:chart_data", args=["queries_per_s"]), server).json()
    assert [value for _, value in chart["series"][0]["points"]] == [10.0]
    assert chart["until"] - chart["since"] == 6 * 3600 * 1000
    bad_server = {"server": "x", "hostgroup": "x"}
    assert viewer.get(reverse("web:chart_data", args=["queries_per_s"]), bad_server).status_code == 404
    assert viewer.get(reverse("web:backends_table"), bad_server).status_code == 404
    one = viewer.get(reverse("web:server", args=[20, "127.0.0.1:3307"])).content.decode()
    assert re.findall(r'<tr data-server="([^"]+)"', one) == [f"20/127.0.0.1:3307/{NODE}"]
    assert one.count("<canvas") == 5 and "server=127.0.0.1%3A3307" in one
    assert viewer.get(reverse("web:chart_data", args=["nonsense"])).status_code == 404
    by_count = viewer.get(reverse("web:digests") + "?sort=count").content.decode()
    assert by_count.index("SELECT ?") < by_count.index("UPDATE t SET a=?")
    by_avg = viewer.get(reverse("web:digests") + "?sort=avg").content.decode()
    assert by_avg.index("UPDATE t SET a=?") < by_avg.index("SELECT ?")
    assert viewer.get(reverse("web:digests") + "?sort=bogus").status_code == 200  # falls back to the default


def test_backends_show_the_postgresql_forwarding(published: Cluster, viewer: Client) -> None:
    """Each node's forwarding listeners and PostgreSQL servers under the MySQL backends; a node whose section does
    not read is named, the others still shown."""
    listener = {"port": 15432, "interface": "127.0.0.1", "hostgroup_id": 100, "state": "listening"}
    listener |= {"connections_active": 1, "connections_total": 4, "connections_refused": 2}
    listener |= {"bytes_from_clients": 310, "bytes_to_clients": 990}
    server = {"hostgroup_id": 100, "hostname": "127.0.0.1", "port": 5432, "status": "OFFLINE_SOFT"}
    server |= {"status_reason": "draining", "connections_active": 1, "connections_total": 4, "connect_errors": 0}
    server |= {"bytes_sent": 310, "bytes_recv": 990}
    report = snapshot([]) | {"pgsql_forward": {"listeners": [listener], "servers": [server]}}
    ProxyNode.objects.create(cluster=published, name="pg-node", last_report=report)
    bad = snapshot([]) | {"pgsql_forward": {"listeners": [{**listener, "connections_total": "4"}], "servers": []}}
    ProxyNode.objects.create(cluster=published, name="pg-odd-node", last_report=bad)
    table = html.unescape(viewer.get(reverse("web:backends_table")).content.decode())
    row = re.search(r'<tr data-listener="15432/pg-node">(.*?)</tr>', table, re.S).group(1)
    assert "127.0.0.1:15432" in row and ">listening<" in row
    assert re.findall(r'<td class="num connections_\w+">(\d+)</td>', row) == ["1", "4", "2"]
    row = re.search(r'<tr data-pgsql-server="100/127.0.0.1:5432/pg-node">(.*?)</tr>', table, re.S).group(1)
    assert ">OFFLINE_SOFT<" in row and "draining" in row and ">990<" in row
    assert "pg-odd-node: stats.pgsql_forward.listeners[0].connections_total: expected a whole number" in table
    assert 'data-listener="15432/pg-odd-node"' not in table
    assert viewer.get(reverse("web:backends")).status_code == 200
    one = viewer.get(reverse("web:server", args=[10, "127.0.0.1:3306"])).content.decode()
    assert "data-listener" not in one and "Left out" not in one  # one MySQL server's page


def test_backends_show_the_postgresql_pooling(published: Cluster, viewer: Client) -> None:
    """Each node's PostgreSQL listener (state, clients connected and waiting) and its server pools (ConnUsed,
    ConnFree, ConnOK, ConnERR per server); a node whose pgsql section does not read is named, the others shown; a
    node whose listener is off and pools nothing is left out."""
    shunned = pgsql_pool_row("127.0.0.1", 5433, 100, "SHUNNED", "connect failed 3 times", ConnERR=3)
    busy = pgsql_pool_row("127.0.0.1", 5432, 100, ConnUsed=2, ConnFree=3, ConnOK=5, ConnERR=1, MaxConnUsed=4)
    section = pgsql_section(pool=[shunned, busy], clients_connected=6, waiting_clients=2, clients_total=9)
    ProxyNode.objects.create(cluster=published, name="pg-pool-node", last_report=snapshot([]) | {"pgsql": section})
    taken = pgsql_section("error: cannot listen on 127.0.0.1:6133: [Errno 98] address already in use")
    ProxyNode.objects.create(cluster=published, name="pg-taken-node", last_report=snapshot([]) | {"pgsql": taken})
    off = snapshot([]) | {"pgsql": pgsql_section("off", address="")}
    ProxyNode.objects.create(cluster=published, name="pg-off-node", last_report=off)
    bad = snapshot([]) | {"pgsql": {**section, "waiting_clients": -1}}
    ProxyNode.objects.create(cluster=published, name="pg-odd-node", last_report=bad)
    table = html.unescape(viewer.get(reverse("web:backends_table")).content.decode())
    assert re.findall(r'<tr data-pgsql-node="([^"]+)">', table) == ["pg-pool-node", "pg-taken-node"]
    row = re.search(r'<tr data-pgsql-node="pg-pool-node">(.*?)</tr>', table, re.S).group(1)
    assert "127.0.0.1:6133" in row and ">listening<" in row
    cells = re.findall(r'<td class="num (clients_connected|waiting_clients|clients_total)">(\d+)</td>', row)
    assert cells == [("clients_connected", "6"), ("waiting_clients", "2"), ("clients_total", "9")]
    row = re.search(r'<tr data-pgsql-node="pg-taken-node">(.*?)</tr>', table, re.S).group(1)
    assert 'class="badge failed state">error: cannot listen on 127.0.0.1:6133' in row
    pools = re.findall(r'<tr data-pgsql-pool="([^"]+)">', table)
    assert pools == ["100/127.0.0.1:5432/pg-pool-node", "100/127.0.0.1:5433/pg-pool-node"]
    row = re.search(r'<tr data-pgsql-pool="100/127.0.0.1:5432/pg-pool-node">(.*?)</tr>', table, re.S).group(1)
    assert re.findall(r'<td class="num conn_\w+">(\d+)</td>', row) == ["2", "3", "5", "1"]
    row = re.search(r'<tr data-pgsql-pool="100/127.0.0.1:5433/pg-pool-node">(.*?)</tr>', table, re.S).group(1)
    assert ">SHUNNED<" in row and "connect failed 3 times" in row
    assert "pg-odd-node: stats.pgsql.waiting_clients: expected a whole number of 0 or more" in table
    assert "pg-off-node" not in table and "pg-odd-node</td>" not in table
    assert viewer.get(reverse("web:backends")).status_code == 200
    one = viewer.get(reverse("web:server", args=[10, "127.0.0.1:3306"])).content.decode()
    assert "data-pgsql-node" not in one  # one MySQL server's page


def test_table_lists_are_paged(cluster: Cluster, viewer: Client) -> None:
    Server.objects.bulk_create(
        Server(cluster=cluster, hostgroup_id=30, hostname=f"10.1.0.{i}", port=3306) for i in range(PAGE_SIZE + 5)
    )
    url = reverse("web:table_list", args=["servers"])
    first = viewer.get(url).content.decode()
    assert first.count("<tr>") == PAGE_SIZE + 1  # the header and one page
    assert "page 1 of 2" in first
    second = viewer.get(url + "?page=2").content.decode()
    assert second.count("<tr>") == 1 + Server.objects.count() - PAGE_SIZE
    found = viewer.get(url, {"q": "10.1.0.10"}).content.decode()  # 10.1.0.10 and 10.1.0.100 to 104
    assert found.count("<tr>") == 1 + 6 and "page 1 of" not in found
    by_hostgroup = viewer.get(url, {"q": "30"}).content.decode()
    assert "page 1 of 2" in by_hostgroup and 'href="?q=30&amp;page=2"' in by_hostgroup
    assert "No row matches" in viewer.get(url, {"q": "no-such-host"}).content.decode()
    variables = reverse("web:table_list", args=["variables"])
    assert "No row matches" in viewer.get(variables, {"q": MONITOR_SECRET[:6]}).content.decode()  # values unsearched


def test_cluster_selector_keeps_the_choice(published: Cluster, viewer: Client) -> None:
    other = make_cluster("other", {"mysql_servers": [{"hostname": "only-in-other", "port": 3306}]})
    servers = reverse("web:table_list", args=["servers"])
    response = viewer.get(reverse("web:select_cluster"), {"cluster": other.pk, "next": servers})
    assert response.status_code == 302 and response["Location"] == servers
    html = viewer.get(servers).content.decode()
    assert "only-in-other" in html and "10.0.0.9" not in html
    outside = viewer.get(reverse("web:select_cluster"), {"cluster": other.pk, "next": "https://evil.example/"})
    assert outside["Location"] == reverse("web:overview")
    assert viewer.get(reverse("web:select_cluster"), {"cluster": "x"}).status_code == 404


# --- row forms -------------------------------------------------------------------------------------------------


def server_form(**values: Any) -> dict[str, Any]:
    """A server row form's POST data: ProxySQL's defaults with ``values`` on top."""
    data = {
        "hostname": "db2",
        "hostgroup_id": "10",
        "port": "3306",
        "gtid_port": "0",
        "status": "ONLINE",
        "weight": "1",
        "max_connections": "1000",
        "max_replication_lag": "0",
        "max_latency_ms": "0",
        "comment": "",
    }
    data.update({k: str(v) for k, v in values.items()})
    return data


def user_form(**values: Any) -> dict[str, Any]:
    """A mysql_users row form's POST data."""
    data = {
        "username": "reporting",
        "password": SECRET,
        "active": "on",
        "default_hostgroup": "20",
        "default_schema": "",
        "transaction_persistent": "on",
        "backend": "on",
        "frontend": "on",
        "max_connections": "10000",
        "attributes": "",
        "comment": "",
    }
    data.update({k: str(v) for k, v in values.items()})
    return data


# (table page, valid POST data, the bad value, the field its error must be under, a piece of the message)
#: A good row of each PostgreSQL table's form.
PGSQL_SERVER = {"hostname": "127.0.0.1", "hostgroup_id": "100", "port": "5432", "status": "ONLINE", "weight": "1"}
PGSQL_SERVER |= {"max_connections": "1000", "max_replication_lag": "0", "max_latency_ms": "0", "comment": ""}
PGSQL_LISTENER = {"port": "15432", "interface": "127.0.0.1", "hostgroup_id": "100", "active": "on"}
PGSQL_LISTENER |= {"max_connections": "10000", "comment": ""}
PGSQL_USER = {"username": "app_pg", "password": SECRET, "active": "on", "default_hostgroup": "100"}
PGSQL_USER |= {"transaction_persistent": "on", "backend": "on", "frontend": "on", "max_connections": "10000"}
PGSQL_USER |= {"pool_mode": "transaction", "attributes": "", "comment": ""}
PGSQL_RULE = {"rule_id": "9", "flagIN": "0", "re_modifiers": "CASELESS", "match_pattern": "^SELECT", "apply": "on"}
PGSQL_PAIR = {"writer_hostgroup": "100", "reader_hostgroup": "101", "check_type": "read_only", "comment": ""}
#: A text that starts like a SCRAM-SHA-256 verifier and is not one (no ServerKey).
BAD_VERIFIER = "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVka2V5"

BAD_INPUT = [
    ("servers", server_form(), {"port": "70000"}, "port", "65535"),
    ("servers", server_form(), {"port": "abc"}, "port", "whole number"),
    ("servers", server_form(), {"gtid_port": "3306"}, "gtid_port", "also the port"),
    ("users", user_form(), {"attributes": "{"}, "attributes", "JSON"),
    (
        "query-rules",
        {"rule_id": "9", "flagIN": "0", "re_modifiers": "CASELESS"},
        {"match_pattern": "("},
        "match_pattern",
        "regular expression",
    ),
    (
        "replication-hostgroups",
        {"writer_hostgroup": "30", "check_type": "read_only"},
        {"reader_hostgroup": "30"},
        "reader_hostgroup",
        "must differ",
    ),
    ("variables", {"variable_value": "1"}, {"variable_name": "mysql-no_such_thing"}, "variable_name", "unknown"),
    ("variables", {"variable_name": "mysql-threads"}, {"variable_value": "many"}, "variable_value", ""),
    ("hostgroups", {"name": "x"}, {"hostgroup_id": "-1"}, "hostgroup_id", "greater than or equal to 0"),
    ("pgsql-servers", PGSQL_SERVER, {"hostname": "db one"}, "hostname", "not a host name"),
    ("pgsql-servers", PGSQL_SERVER, {"port": "70000"}, "port", "65535"),
    ("pgsql-servers", PGSQL_SERVER, {"status": "UP"}, "status", "not one of the available choices"),
    ("pgsql-forward-listeners", PGSQL_LISTENER, {"interface": "localhost"}, "interface", "not an IP address"),
    ("pgsql-forward-listeners", PGSQL_LISTENER, {"port": "0"}, "port", "0 is below the minimum 1"),
    ("pgsql-forward-listeners", PGSQL_LISTENER, {"port": "6033"}, "port", "6033 is the port of mysql-interfaces"),
    ("pgsql-forward-listeners", PGSQL_LISTENER, {"port": "6070"}, "port", "6070 is the port of admin-restapi_port"),
    ("pgsql-forward-listeners", PGSQL_LISTENER, {"max_connections": "0"}, "max_connections", "below the minimum 1"),
    ("pgsql-users", PGSQL_USER, {"password": BAD_VERIFIER}, "password", "read as a verifier"),
    ("pgsql-users", PGSQL_USER, {"pool_mode": "statement"}, "pool_mode", "not one of the available choices"),
    ("pgsql-users", PGSQL_USER, {"default_hostgroup": "-1"}, "default_hostgroup", "below the minimum 0"),
    ("pgsql-users", PGSQL_USER, {"max_connections": "-1"}, "max_connections", "below the minimum 0"),
    ("pgsql-query-rules", PGSQL_RULE, {"match_pattern": "(unclosed"}, "match_pattern", "invalid regular expression"),
    ("pgsql-query-rules", PGSQL_RULE, {"match_digest": "a{2,1}"}, "match_digest", "invalid regular expression"),
    ("pgsql-query-rules", PGSQL_RULE, {"re_modifiers": "BOGUS"}, "re_modifiers", "unknown modifier"),
    ("pgsql-query-rules", PGSQL_RULE, {"digest": "SELECT"}, "digest", "0x"),
    ("pgsql-query-rules", PGSQL_RULE, {"multiplex": "3"}, "multiplex", "not one of the available choices"),
    ("pgsql-query-rules", PGSQL_RULE, {"rule_id": "0"}, "rule_id", "below the minimum 1"),
    ("pgsql-replication-hostgroups", PGSQL_PAIR, {"reader_hostgroup": "100"}, "reader_hostgroup", "must differ"),
    ("pgsql-replication-hostgroups", PGSQL_PAIR, {"check_type": "innodb_read_only"}, "check_type", "not one of"),
    ("pgsql-replication-hostgroups", PGSQL_PAIR, {"writer_hostgroup": "-1"}, "writer_hostgroup", "below the minimum"),
]


@pytest.mark.parametrize(("slug", "data", "bad", "field", "message"), BAD_INPUT)
def test_bad_input_shows_the_field_error(
    cluster: Cluster, operator: Client, slug: str, data: dict[str, str], bad: dict[str, str], field: str, message: str
) -> None:
    model = next(page.model for page in TABLE_PAGES if page.slug == slug)
    before = model.objects.count()
    response = operator.post(reverse("web:row_add", args=[slug]), {**data, **bad})
    assert response.status_code == 200
    html = response.content.decode()
    errors = field_errors(html, field)
    assert errors and message in " ".join(errors), (slug, field, errors)
    assert [name for name in re.findall(r'data-field="([^"]+)"', html)] == [field]  # only that field
    assert model.objects.count() == before


def test_operator_adds_a_server_bad_port_then_fixed(cluster: Cluster, operator: Client) -> None:
    add = reverse("web:row_add", args=["servers"])
    response = operator.post(add, server_form(port=70000))
    assert "65535" in " ".join(field_errors(response.content.decode(), "port"))
    assert 'value="db2"' in response.content.decode()  # what was typed stays in the form
    response = operator.post(add, server_form(port=3310))
    assert response.status_code == 302 and response["Location"] == reverse("web:table_list", args=["servers"])
    server = Server.objects.get(hostname="db2")
    assert (server.cluster, server.port) == (cluster, 3310)
    entry = AuditEntry.objects.get(action=AuditEntry.Action.CREATE, table="mysql_servers")
    assert entry.after["port"] == 3310
    assert "db2" in operator.get(reverse("web:audit")).content.decode()


def test_duplicate_key_is_refused_on_the_form(cluster: Cluster, operator: Client) -> None:
    response = operator.post(reverse("web:row_add", args=["servers"]), server_form(hostname="127.0.0.1"))
    assert response.status_code == 200
    assert "already exists" in response.content.decode()
    assert Server.objects.filter(hostname="127.0.0.1", hostgroup_id=10).count() == 1


def test_operator_edits_and_deletes_a_row(cluster: Cluster, operator: Client) -> None:
    server = Server.objects.get(cluster=cluster, hostgroup_id=10)
    edit = reverse("web:row_edit", args=["servers", server.pk])
    response = operator.post(edit, server_form(hostname="127.0.0.1", weight=7, max_connections=64))
    assert response.status_code == 302
    server.refresh_from_db()
    assert server.weight == 7
    update = AuditEntry.objects.get(action=AuditEntry.Action.UPDATE)
    assert (update.before["weight"], update.after["weight"]) == (1, 7)
    assert operator.post(reverse("web:row_delete", args=["servers", server.pk])).status_code == 302
    assert not Server.objects.filter(pk=server.pk).exists()
    assert AuditEntry.objects.filter(action=AuditEntry.Action.DELETE).count() == 1
    assert operator.get(reverse("web:row_delete", args=["servers", server.pk])).status_code == 405
    other = make_cluster("other")
    foreign = Server.objects.filter(cluster=other).first()
    assert operator.get(reverse("web:row_edit", args=["servers", foreign.pk])).status_code == 404  # not this cluster


def test_secrets_are_write_only(published: Cluster, operator: Client) -> None:
    assert operator.post(reverse("web:row_add", args=["users"]), user_form()).status_code == 302
    user = User.objects.get(username="reporting")
    assert user.password == SECRET
    edit = reverse("web:row_edit", args=["users", user.pk])
    assert operator.post(edit, user_form(password="", comment="kept")).status_code == 302
    user.refresh_from_db()
    assert (user.password, user.comment) == (SECRET, "kept")
    monitor = Variable.objects.get(cluster=published, variable_name="mysql-monitor_password")
    variable_edit = reverse("web:row_edit", args=["variables", monitor.pk])
    data = {"variable_name": "mysql-monitor_password", "variable_value": ""}
    assert operator.post(variable_edit, data).status_code == 302
    monitor.refresh_from_db()
    assert monitor.variable_value == MONITOR_SECRET
    publishing.publish(published, None, comment="with the reporting user")  # v3: a diff with a new password
    for url in [*viewer_urls(), *operator_urls(published), reverse("web:diff") + "?old=1&new=3"]:
        html = operator.get(url).content.decode()
        assert SECRET not in html and MONITOR_SECRET not in html, url
    for form in (operator.get(edit).content.decode(), operator.get(variable_edit).content.decode()):
        (secret_input,) = re.findall(r'<input type="password"[^>]*>', form)
        assert "value=" not in secret_input


def test_a_forwarding_listener_may_not_take_the_postgresql_listener_s_port(cluster: Cluster, operator: Client) -> None:
    """The draft's pgsql-interfaces port is the node's own: a forwarding listener's form names it on its port."""
    save_row(Variable(cluster=cluster, variable_name="pgsql-interfaces", variable_value="127.0.0.1:6133"), None)
    response = operator.post(
        reverse("web:row_add", args=["pgsql-forward-listeners"]), {**PGSQL_LISTENER, "port": "6133"}
    )
    assert field_errors(response.content.decode(), "port") == [
        "6133 is the port of pgsql-interfaces; give the listener a port of its own"
    ]
    assert not PgsqlForwardListener.objects.filter(cluster=cluster).exists()


def test_a_pgsql_user_s_password_is_write_only_and_published(published: Cluster, operator: Client) -> None:
    """A PostgreSQL user's password is taken by its form, never shown (list, form, diff, export), kept when the form
    leaves it blank, and published as typed (what the node logs clients in with)."""
    save_row(PgsqlServer(cluster=published, hostgroup_id=100, hostname="127.0.0.1"), None)
    assert operator.post(reverse("web:row_add", args=["pgsql-users"]), PGSQL_USER).status_code == 302
    user = PgsqlUser.objects.get(cluster=published, username="app_pg")
    assert (user.password, user.pool_mode, user.default_hostgroup) == (SECRET, "transaction", 100)
    edit = reverse("web:row_edit", args=["pgsql-users", user.pk])
    assert operator.post(edit, {**PGSQL_USER, "password": "", "pool_mode": "session"}).status_code == 302
    user.refresh_from_db()
    assert (user.password, user.pool_mode) == (SECRET, "session")
    version = publishing.publish(published, None, comment="a PostgreSQL user")
    assert [(u["username"], u["password"]) for u in version.document["pgsql_users"]] == [("app_pg", SECRET)]
    for url in [*viewer_urls(), *operator_urls(published), reverse("web:diff") + "?old=2&new=3"]:
        assert SECRET not in operator.get(url).content.decode(), url
    (secret_input,) = re.findall(r'<input type="password"[^>]*>', operator.get(edit).content.decode())
    assert "value=" not in secret_input
    listed = operator.get(reverse("web:table_list", args=["pgsql-users"])).content.decode()
    assert "app_pg" in listed and ">session<" in listed


# --- publish, diff, rollback -----------------------------------------------------------------------------------


def test_publish_through_the_ui(cluster: Cluster, operator: Client) -> None:
    ProxyNode.objects.create(cluster=cluster, name=NODE)
    preview = operator.get(reverse("web:publish")).content.decode()
    assert "mysql_servers" in preview and "added" in preview and "publish-form" in preview
    response = operator.post(reverse("web:publish"), {"comment": "first config"})
    assert response.status_code == 302 and response["Location"] == reverse("web:overview")
    version = ConfigVersion.objects.get(cluster=cluster)
    assert (version.number, version.comment, version.author.username) == (1, "first config", "operator-account")
    overview = operator.get(reverse("web:overview")).content.decode()
    assert "Published version 1" in overview and "latest v1" in overview
    again = operator.post(reverse("web:publish"), {"comment": "again"}, follow=True).content.decode()
    assert "Nothing to publish" in again
    assert ConfigVersion.objects.filter(cluster=cluster).count() == 1


def test_the_publish_preview_shows_the_draft_s_warnings(cluster: Cluster, operator: Client) -> None:
    save_row(Variable(cluster=cluster, variable_name="mysql-query_digests_lowercase", variable_value="true"), None)
    page = html.unescape(operator.get(reverse("web:publish")).content.decode())
    assert "publish-warnings" in page and "mysql-query_digests_lowercase: accepted for ProxySQL" in page
    assert "publish-form" in page  # a warning does not stop a publish


def test_an_invalid_draft_is_not_published(cluster: Cluster, operator: Client) -> None:
    # each row is valid alone; the pair is not: hostgroup 20 is the reader of one pair and the writer of another
    Hostgroup.objects.create(cluster=cluster, hostgroup_id=30)
    save_row(ReplicationHostgroup(cluster=cluster, writer_hostgroup=20, reader_hostgroup=30), None)
    page = operator.get(reverse("web:publish")).content.decode()
    assert "cannot be published" in page and "reader_hostgroup of mysql_replication_hostgroups" in page
    assert "publish-form" not in page
    response = operator.post(reverse("web:publish"), {"comment": "bad"})
    assert response.status_code == 200 and "writer_hostgroup: 20" in response.content.decode()
    assert not ConfigVersion.objects.exists()


def test_diff_and_rollback_through_the_ui(published: Cluster, operator: Client) -> None:
    diff = html.unescape(operator.get(reverse("web:diff"), {"old": 1, "new": 2}).content.decode())
    assert "hostgroup_id=20, hostname=10.0.0.9, port=3307" in diff and "added" in diff
    assert "+++ v2" in diff and '+    hostname = "10.0.0.9"' in diff
    assert "differ" not in operator.get(reverse("web:diff"), {"old": 2, "new": 2}).content.decode()
    missing = operator.get(reverse("web:diff"), {"old": 1, "new": 99})
    assert missing.status_code == 404 and "Not found" in missing.content.decode()
    assert operator.get(reverse("web:diff"), {"old": "x", "new": 2}).status_code == 404

    response = operator.post(reverse("web:rollback", args=[1]), follow=True)
    assert "Rolled back to version 1" in response.content.decode()
    v3 = ConfigVersion.objects.get(cluster=published, number=3)
    assert (v3.rollback_of.number, v3.checksum) == (1, ConfigVersion.objects.get(number=1).checksum)
    assert not Server.objects.filter(cluster=published, hostname="10.0.0.9").exists()  # the draft went back too
    history = operator.get(reverse("web:history")).content.decode()
    assert 'data-version="3"' in history and ">rollback<" in history
    response = operator.post(reverse("web:rollback", args=[3]), follow=True)
    assert "Nothing to roll back" in response.content.decode()
    assert operator.post(reverse("web:rollback", args=[42])).status_code == 404


def browser_post(form_html: str, **values: str) -> dict[str, str]:
    """What a browser submits for a form page: every text input and select as shown (blank when empty), checked
    checkboxes only, with ``values`` typed in (a checkbox named with "on" is checked, with "" unchecked)."""
    data: dict[str, str] = {}
    for tag in re.findall(r"<input[^>]*>", form_html):
        name = re.search(r'name="([^"]+)"', tag)
        if name is None or name.group(1) == "csrfmiddlewaretoken":
            continue
        value = re.search(r'value="([^"]*)"', tag)
        if 'type="checkbox"' in tag:
            if "checked" in tag:
                data[name.group(1)] = "on"
        else:
            data[name.group(1)] = html.unescape(value.group(1)) if value else ""
    for select, body in re.findall(r'<select name="([^"]+)"[^>]*>(.*?)</select>', form_html, re.S):
        chosen = re.search(r'<option value="([^"]*)"[^>]*selected', body) or re.search(r'<option value="([^"]*)"', body)
        data[select] = chosen.group(1) if chosen else ""
    for name, value in values.items():
        if value == "" and data.get(name) == "on":
            del data[name]
        else:
            data[name] = value
    return data


def test_a_rule_saved_from_the_form_stores_nulls_and_routes_instead_of_blocking(
    cluster: Cluster, operator: Client
) -> None:
    """Blank fields of the rule form are NULL (a blank error_msg blocked every matching query; a blank digest
    refused every save)."""
    add = reverse("web:row_add", args=["query-rules"])
    data = browser_post(
        operator.get(add).content.decode(),
        rule_id="90",
        active="on",
        match_digest="^SELECT",
        destination_hostgroup="20",
        apply="on",
    )
    response = operator.post(add, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    rule = QueryRule.objects.get(cluster=cluster, rule_id=90)
    for column in ("digest", "schemaname", "client_addr", "proxy_addr", "match_pattern", "error_msg", "OK_msg"):
        assert getattr(rule, column) is None, column
    edit = reverse("web:row_edit", args=["query-rules", rule.pk])
    assert operator.post(edit, browser_post(operator.get(edit).content.decode(), comment="reads")).status_code == 302
    rule.refresh_from_db()
    assert rule.comment == "reads" and rule.error_msg is None
    outcome = RuleEngine(publishing.compile_draft(cluster).mysql_query_rules).evaluate(
        QueryContext("app", "", "127.0.0.1", "127.0.0.1", 6033, "SELECT 1", "0x1", "SELECT ?"), 0
    )
    assert (outcome.destination_hostgroup, outcome.error_msg) == (20, None)


def test_a_pgsql_rule_saved_from_the_form_stores_nulls_and_blocks_what_it_matches(
    cluster: Cluster, operator: Client
) -> None:
    """The PostgreSQL rule form means by a blank what the MySQL one does: NULL (replace_pattern excepted, which the
    form leaves NULL too when blank); its rule blocks the query it matches and lets the rest run, as the pooling
    proxy's router reads it."""
    add = reverse("web:row_add", args=["pgsql-query-rules"])
    form = operator.get(add).content.decode()
    assert 'name="database"' in form and 'name="schemaname"' not in form and 'name="trx_queue"' not in form
    data = browser_post(
        form, rule_id="5", active="on", match_pattern="forbidden_pg", error_msg="blocked by the fleet", apply="on"
    )
    assert operator.post(add, data).status_code == 302
    rule = PgsqlQueryRule.objects.get(cluster=cluster, rule_id=5)
    for column in ("username", "database", "digest", "client_addr", "proxy_addr", "match_digest", "OK_msg"):
        assert getattr(rule, column) is None, column
    assert (rule.replace_pattern, rule.flagOUT, rule.destination_hostgroup, rule.multiplex) == (None, None, None, None)
    edit = reverse("web:row_edit", args=["pgsql-query-rules", rule.pk])
    assert operator.post(edit, browser_post(operator.get(edit).content.decode(), comment="no")).status_code == 302
    rule.refresh_from_db()
    assert (rule.comment, rule.error_msg, rule.database) == ("no", "blocked by the fleet", None)
    router = PgRouter(publishing.compile_draft(cluster))
    assert router.route("SELECT 'forbidden_pg'", "app", "postgres", "127.0.0.1", 6133).error == "blocked by the fleet"
    assert router.route("SELECT 1", "app", "postgres", "127.0.0.1", 6133) == Route(None, "SELECT 1", None)
    pair = reverse("web:row_add", args=["pgsql-replication-hostgroups"])
    data = browser_post(operator.get(pair).content.decode(), writer_hostgroup="100", reader_hostgroup="101")
    assert operator.post(pair, data).status_code == 302
    stored = PgsqlReplicationHostgroup.objects.get(cluster=cluster)
    assert (stored.writer_hostgroup, stored.reader_hostgroup, stored.check_type) == (100, 101, "read_only")
    listed = operator.get(reverse("web:table_list", args=["pgsql-query-rules"])).content.decode()
    assert ">blocked by the fleet<" in listed and ">database</th>" in listed and ">trx_queue</th>" not in listed


def test_a_pgsql_rule_that_can_never_match_is_flagged_in_its_list(cluster: Cluster, viewer: Client) -> None:
    """The PostgreSQL rules page flags a rule an earlier apply=1 rule keeps from ever matching, as the MySQL one
    does, and shows no MySQL hits for them."""
    save_row(PgsqlQueryRule(cluster=cluster, rule_id=1, active=True, match_digest="^SELECT", apply=True), None)
    save_row(PgsqlQueryRule(cluster=cluster, rule_id=2, active=True, match_digest="^SELECT 1", apply=True), None)
    page = viewer.get(reverse("web:table_list", args=["pgsql-query-rules"])).content.decode()
    assert "never matches: rule 1 first" in page and page.count("never matches") == 1
    assert ">checks</th>" in page and ">hits</th>" not in page


def test_hostnames_are_checked_and_every_accepted_one_shows(cluster: Cluster, operator: Client) -> None:
    add = reverse("web:row_add", args=["servers"])
    for bad, says in [("bad host name!", "is not a host name"), ("db/2", "is not a host name"), ("/tmp/s", "socket")]:
        response = operator.post(add, server_form(hostname=bad))
        assert response.status_code == 200 and says in html.unescape(response.content.decode()), bad
    assert operator.post(add, server_form(hostname="fe80::2", port="3310")).status_code == 302
    publishing.publish(cluster, None, "an IPv6 server")
    for url in (
        reverse("web:backends"),
        reverse("web:backends_table"),
        reverse("web:server", args=[10, "fe80::2:3310"]),
    ):
        assert operator.get(url).status_code == 200, url


HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)>'


def plant_hostile_values(cluster: Cluster) -> None:
    """Markup in every text column of ``cluster`` that accepts any text (a user, a rule, a variable, a server, a
    hostgroup, a shard and a sharded table, a PostgreSQL server, forwarding listener, user, query rule and replication
    pair, the cluster, a version's comment), published, and in a digest, a hot-row queue and proposal, and a
    forwarding listener and PostgreSQL server its node ``NODE`` reports."""
    save_row(User(cluster=cluster, username=HOSTILE, password="x", default_schema=HOSTILE, comment=HOSTILE), None)
    rule = QueryRule(
        cluster=cluster,
        rule_id=50,
        active=True,
        username=HOSTILE,
        schemaname=HOSTILE,
        match_pattern="<script>",
        replace_pattern=HOSTILE,
        error_msg=HOSTILE,
        comment=HOSTILE,
    )
    save_row(rule, None)
    save_row(Variable(cluster=cluster, variable_name="mysql-server_version", variable_value=HOSTILE), None)
    save_row(Server(cluster=cluster, hostgroup_id=30, hostname="10.0.0.30", port=3306, comment=HOSTILE), None)
    save_row(Shard(cluster=cluster, shard_group=HOSTILE, shard=0, hostgroup_id=30, comment=HOSTILE), None)
    sharded = ShardedTable(
        cluster=cluster,
        schemaname=HOSTILE,
        tablename=HOSTILE,
        shard_group=HOSTILE,
        algorithm="hash",
        shard_key=HOSTILE,
        sequence_column=HOSTILE,
    )
    save_row(sharded, None)
    save_row(PgsqlServer(cluster=cluster, hostgroup_id=100, hostname="10.0.0.40", comment=HOSTILE), None)
    save_row(PgsqlForwardListener(cluster=cluster, port=15432, hostgroup_id=100, comment=HOSTILE), None)
    save_row(
        PgsqlUser(cluster=cluster, username=HOSTILE, password=HOSTILE, default_hostgroup=100, comment=HOSTILE), None
    )
    hostile_rule = {c: HOSTILE for c in ("username", "database", "replace_pattern", "error_msg", "comment")}
    save_row(PgsqlQueryRule(cluster=cluster, rule_id=1, match_pattern="<b>", **hostile_rule), None)
    save_row(
        PgsqlReplicationHostgroup(cluster=cluster, writer_hostgroup=100, reader_hostgroup=101, comment=HOSTILE), None
    )
    hostgroup = Hostgroup.objects.get(cluster=cluster, hostgroup_id=10)
    hostgroup.name = hostgroup.comment = HOSTILE
    hostgroup.save()
    Cluster.objects.filter(pk=cluster.pk).update(comment=HOSTILE)
    publishing.publish(cluster, None, comment=HOSTILE)
    node = ProxyNode.objects.get(cluster=cluster, name=NODE)
    sharding = [{**sharding_row("0x3", HOSTILE, 1, 1), "schemaname": HOSTILE}]
    stats = snapshot([], [digest_row("0x3", HOSTILE, 1, 1)], sharding=sharding)
    counts = ("keys_active", "waiters", "longest_wait_ms", "transactions", "timeouts", "refused", "waited")
    hot_queue = {"queue": HOSTILE, "wait_ms_total": 0, **dict.fromkeys(counts, 1)}
    names = ("id", "schema", "table", "column", "queue", "digest_text", "state")
    proposal = {**dict.fromkeys(names, HOSTILE), "digest": "0x3", "keys": [HOSTILE], "evidence": {HOSTILE: 1}}
    stats["trx_queue"] = {"queues": [hot_queue], "proposals": [proposal]}
    listener = {"port": 15432, "interface": "127.0.0.1", "hostgroup_id": 100, "state": HOSTILE}
    listener |= dict.fromkeys(("connections_active", "connections_total", "connections_refused"), 1)
    listener |= dict.fromkeys(("bytes_from_clients", "bytes_to_clients"), 1)
    server = {"hostgroup_id": 100, "hostname": HOSTILE, "port": 5432, "status": "SHUNNED", "status_reason": HOSTILE}
    server |= dict.fromkeys(
        ("connections_active", "connections_total", "connect_errors", "bytes_sent", "bytes_recv"), 1
    )
    stats["pgsql_forward"] = {"listeners": [listener], "servers": [server]}
    pool = pgsql_pool_row(HOSTILE, 5432, 100, "SHUNNED", HOSTILE)
    stats["pgsql"] = pgsql_section(f"error: {HOSTILE}", [pool], address=HOSTILE)
    send_report(node, timezone.now(), stats, None)


def test_hostile_values_are_escaped_on_every_page(published: Cluster, operator: Client) -> None:
    """Every text column that accepts any text holds markup, and a node reports markup in a digest, a sharding
    digest and a hot-row queue and proposal: every page a viewer or operator opens answers 200 and shows it as text,
    never as markup (in a real browser, for every role and the Django admin too: ``test_browser_crawl``)."""
    cluster = published
    plant_hostile_values(cluster)
    urls = [*viewer_urls(), *operator_urls(cluster), reverse("web:diff") + "?old=2&new=3", reverse("web:api_token")]
    urls.append(reverse("web:rule_test") + "?" + urlencode({"query": HOSTILE, "username": HOSTILE, "source": "draft"}))
    urls.append(reverse("web:shard_map") + "?" + urlencode({"table": f"{HOSTILE}.{HOSTILE}", "key": HOSTILE}))
    for url in urls:
        response = operator.get(url)
        assert response.status_code == 200, url
        body = response.content.decode()
        assert "<script>alert(1)" not in body and "onerror=alert(2)>" not in body, url
    assert html.escape(HOSTILE) in operator.get(reverse("web:hot_rows")).content.decode()  # the report was read
    backends = operator.get(reverse("web:backends_table")).content.decode()
    listener = re.search(rf'<tr data-listener="15432/{NODE}">(.*?)</tr>', backends, re.S).group(1)
    assert html.escape(HOSTILE) in listener  # its state, as text
    pooling = re.search(rf'<tr data-pgsql-node="{NODE}">(.*?)</tr>', backends, re.S).group(1)
    assert html.escape(HOSTILE) in pooling  # its address and state, as text


def test_a_publish_refuses_a_draft_changed_since_its_preview(cluster: Cluster, operator: Client) -> None:
    """Two operators share the draft: a publish carries the checksum of the draft its page showed."""
    page = operator.get(reverse("web:publish")).content.decode()
    (previewed,) = re.findall(r'name="draft_checksum" value="([0-9a-f]+)"', page)
    other = Account.objects.create_user("colleague", password=LOGIN_PASSWORD)
    save_row(Server(cluster=cluster, hostgroup_id=20, hostname="10.0.0.77", port=3306), other)
    response = operator.post(reverse("web:publish"), {"comment": "mine", "draft_checksum": previewed}, follow=True)
    said = html.unescape(response.content.decode())
    assert "Not published: the draft changed by colleague at " in said
    assert not ConfigVersion.objects.filter(cluster=cluster).exists()
    page = operator.get(reverse("web:publish")).content.decode()
    assert "10.0.0.77" in page  # the new preview shows the colleague's change
    (again,) = re.findall(r'name="draft_checksum" value="([0-9a-f]+)"', page)
    assert operator.post(reverse("web:publish"), {"comment": "ours", "draft_checksum": again}).status_code == 302
    assert ConfigVersion.objects.get(cluster=cluster).comment == "ours"


def test_digests_show_their_hash_each_nodes_share_and_make_a_rule(published: Cluster, operator: Client) -> None:
    other = ProxyNode.objects.create(cluster=published, name="second-node")
    send_report(other, timezone.now(), snapshot([], [digest_row("0x1", "SELECT ?", 3, 30)]), None)
    page = html.unescape(operator.get(reverse("web:digests") + "?sort=count").content.decode())
    assert "<code>0x1</code>" in page
    assert f'second-node: 3</span><br><span class="nowrap">{NODE}: 5</span>' in page  # nodes by name
    (link,) = set(re.findall(r'href="(/tables/query-rules/add/\?digest=0x1[^"]*)"', page))
    form = operator.get(link).content.decode()
    assert re.search(r'name="digest" value="0x1"', form)


def test_digests_show_postgresql_digests_in_a_table_of_their_own(published: Cluster, viewer: Client) -> None:
    before = html.unescape(viewer.get(reverse("web:digests")).content.decode())
    assert "PostgreSQL digests" not in before and "MySQL digests" not in before  # no node reports any
    mysql = [digest_row("0x1", "SELECT ?", 3, 30)]
    pgsql = [
        pgsql_digest_row("0xP1", "SELECT * FROM t WHERE id = ?::int", 7, 700),
        pgsql_digest_row("0xP2", "SELECT ?", 8, 5000),
    ]
    first = ProxyNode.objects.create(cluster=published, name="pg-node-1")
    send_report(first, timezone.now(), {**snapshot([], mysql), "pgsql_query_digest": pgsql}, None)
    second = ProxyNode.objects.create(cluster=published, name="pg-node-2")
    send_report(second, timezone.now(), {**snapshot([]), "pgsql_query_digest": [{**pgsql[0], "count_star": 2}]}, None)
    row = r'<tr>\s*<td>10</td>\s*<td>app</td>.*?<code>(0x\w+)</code>.*?<td class="num">(\d+)</td>'

    by_count = html.unescape(viewer.get(reverse("web:digests") + "?sort=count").content.decode())
    mysql_table, pgsql_table = by_count.split('<h2 id="pgsql-digests">')
    assert "MySQL digests" in mysql_table and "<code>0x1</code>" in mysql_table and "0xP1" not in mysql_table
    assert "<th>Database</th>" in pgsql_table and "<th>Schema</th>" not in pgsql_table and "0x1<" not in pgsql_table
    assert re.findall(row, pgsql_table, re.S) == [("0xP1", "9"), ("0xP2", "8")]  # merged across nodes
    assert "SELECT * FROM t WHERE id = ?::int" in pgsql_table and "Make a rule" not in pgsql_table
    assert 'pg-node-1: 7</span><br><span class="nowrap">pg-node-2: 2</span>' in pgsql_table
    by_sum = html.unescape(viewer.get(reverse("web:digests") + "?sort=sum").content.decode())
    assert re.findall(row, by_sum.split('<h2 id="pgsql-digests">')[1], re.S) == [("0xP2", "8"), ("0xP1", "9")]

    odd = ProxyNode.objects.create(cluster=published, name="odd-pg-node")
    send_report(odd, timezone.now(), {**snapshot([]), "pgsql_query_digest": [{"digest": 5}]}, None)
    page = html.unescape(viewer.get(reverse("web:digests")).content.decode())
    assert "odd-pg-node: stats.pgsql_query_digest[0].hostgroup: expected a whole number" in page
    assert "0xP1" in page and "<code>0x1</code>" in page  # the nodes that read still show


def test_the_node_page_shows_its_last_report(published: Cluster, viewer: Client) -> None:
    monitor = {"hostgroup": 10, "srv_host": "127.0.0.1", "srv_port": 3306, "status": "SHUNNED", "connect_ok": False}
    monitor |= {"ping_ok": None, "read_only": True, "lag_s": 1.5, "last_error": "Connection refused"}
    moved = {"at": 1.5, "hostgroup": 10, "srv_host": "127.0.0.1", "srv_port": 3306, "from": "ONLINE", "to": "SHUNNED"}
    report = snapshot([pool_row("127.0.0.1", 3306, 10, ConnOK=4, Latency_us=420.5)], questions=12)
    report |= {"monitor": [monitor], "server_transitions": [{**moved, "reason": "ping failed"}]}
    report |= {"config": {"checksum": "feedface" * 8, "loaded_at": 1.5, "source": "agent"}}
    ProxyNode.objects.create(cluster=published, name="reported-node", last_report=report)
    page = html.unescape(viewer.get(reverse("web:node", args=["reported-node"])).content.decode())
    assert '<code>Questions</code></td><td class="num">12<' in page and "<code>feedfacefeedface</code>" in page
    assert "from agent" in page and '<td class="num">4</td>' in page and "420.5" in page  # ConnOK, Latency_us
    assert "<td>failed</td><td>\N{EN DASH}</td><td>yes</td>" in page and "1.5" in page and "Connection refused" in page
    assert "ONLINE → SHUNNED</td><td>ping failed" in page and "Left out" not in page


def test_a_report_that_does_not_read_is_named_on_its_pages(published: Cluster, viewer: Client) -> None:
    report = {
        "global": {"Questions": "12"},
        "connection_pool": [{"srv_host": 1}],
        "monitor": [{"status": "UP"}],
        "server_transitions": "none",
        "config": [],
        "mirror": {"failed": {}, "dropped": {}, "mirrored": -1},
        "query_digest": [{"digest": 5}],
        "query_rules": [{"rule_id": "1", "hits": 2}],
    }
    ProxyNode.objects.create(cluster=published, name="odd-node", last_report=report)  # stored as is (not a proxy's)
    page = html.unescape(viewer.get(reverse("web:node", args=["odd-node"])).content.decode())
    for said in (
        "stats.global.Questions: expected a number, not '12'",
        "stats.connection_pool[0].hostgroup: expected a number",
        "stats.monitor[0].status: expected one of ONLINE",
        "stats.server_transitions: expected a list of rows, not 'none'",
        "stats.config: expected an object, not []",
    ):
        assert said in page
    digests = html.unescape(viewer.get(reverse("web:digests")).content.decode())
    assert "odd-node: stats.query_digest[0].hostgroup: expected a whole number" in digests and "SELECT ?" in digests
    rules = html.unescape(viewer.get(reverse("web:table_list", args=["query-rules"])).content.decode())
    assert "odd-node: stats.query_rules[0].rule_id: expected a whole number of 0 or more, not '1'" in rules
    mirror = html.unescape(viewer.get(reverse("web:mirror_table")).content.decode())
    assert "odd-node: stats.mirror.mirrored: expected a number of 0 or more, not -1" in mirror
    (entry,) = [n for n in viewer.get("/api/v1/mirror/").json()["nodes"] if n["node"] == "odd-node"]
    assert entry["mirror"] is None and entry["error"].startswith("stats.mirror.mirrored: expected a number")
    for name in ("web:backends", "web:overview", "web:mirror"):
        assert viewer.get(reverse(name)).status_code == 200


def test_the_audit_log_filters_and_pages_with_its_filters(cluster: Cluster, operator: Client) -> None:
    for port in range(3400, 3460):
        save_row(Server(cluster=cluster, hostgroup_id=30, hostname="10.0.3.1", port=port), None)
    publishing.publish(cluster, None, "filtered")
    url = reverse("web:audit")
    page = operator.get(url, {"action": "create", "table": "mysql_servers"}).content.decode()
    assert "page 1 of 2" in page and "publish</span>" not in page
    assert "?action=create&amp;table=mysql_servers&amp;page=2" in page  # the pager keeps the filters
    only = operator.get(url, {"action": "publish"}).content.decode()
    assert only.count('<span class="badge publish">') == 1
    assert "port=3459" in operator.get(url, {"q": "3459"}).content.decode()
    assert "Nothing recorded yet." in operator.get(url, {"user": "nobody-at-all"}).content.decode()
    assert operator.get(url, {"action": "<script>"}).status_code == 200


def test_every_audit_entry_says_where_it_came_from(cluster: Cluster, operator: Client) -> None:
    add = reverse("web:row_add", args=["servers"])
    assert operator.post(add, server_form(hostname="db9"), REMOTE_ADDR="10.7.7.7").status_code == 302
    publishing.publish(cluster, None, "from code")  # no request: the CLI's, a task's, beat's
    ui = AuditEntry.objects.get(action=AuditEntry.Action.CREATE, object_key__contains="db9")
    assert (ui.source, ui.client) == ("web", "10.7.7.7")
    assert AuditEntry.objects.get(action=AuditEntry.Action.PUBLISH).source == "cli"
    page = operator.get(reverse("web:audit"), {"source": "web"}).content.decode()
    assert "10.7.7.7" in page and "publish</span>" not in page
