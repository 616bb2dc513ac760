"""The REST API: every resource for anonymous, role-less, viewer, operator and admin callers; field-named errors,
write-only passwords, token auth, pagination, cluster filters, versions, import/export and the OpenAPI schema."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.contrib.auth.models import User as Account
from django.contrib.staticfiles import finders
from django.utils import timezone
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from fleet.core import publishing, roles
from fleet.core.models import AuditEntry, Cluster, ProxyNode, Server
from tests.support.control_plane import (
    LOGIN_PASSWORD,
    MONITOR_SECRET,
    NO_ROLE,
    SECRET,
    client_for,
    make_cluster,
    seed_document,
)

pytestmark = pytest.mark.django_db

API = "/api/v1"
TABLES = ("servers", "users", "query-rules", "replication-hostgroups", "variables", "hostgroups")

#: A valid new row per table (none of them in the seed config).
NEW_ROWS: dict[str, dict[str, Any]] = {
    "servers": {"hostgroup_id": 20, "hostname": "10.0.0.5", "port": 3310, "weight": 3},
    "users": {"username": "reporter", "password": "n3w-" + SECRET, "default_hostgroup": 20},
    "query-rules": {"rule_id": 50, "active": True, "match_digest": "^SELECT .* ", "destination_hostgroup": 20},
    "replication-hostgroups": {"writer_hostgroup": 30, "reader_hostgroup": 40},
    "variables": {"variable_name": "mysql-max_connections", "variable_value": "500"},
    "hostgroups": {"hostgroup_id": 30, "name": "analytics"},
}
#: A change per table for PATCH.
PATCHES: dict[str, dict[str, Any]] = {
    "servers": {"weight": 9},
    "users": {"max_connections": 5},
    "query-rules": {"comment": "reports"},
    "replication-hostgroups": {"check_type": "super_read_only"},
    "variables": {"variable_value": "600"},
    "hostgroups": {"comment": "batch jobs"},
}


@pytest.fixture
def clients(accounts: dict[str, Account], cluster: Cluster) -> dict[str, APIClient]:
    """An API client per role (and ``NO_ROLE``, and ``"anonymous"``), over the seeded cluster."""
    made = {role: client_for(account) for role, account in accounts.items()}
    made["anonymous"] = client_for(None)
    return made


def first_key(client: APIClient, table: str) -> str:
    """The natural key (the URL's) of the first row of ``table`` in the default cluster."""
    return client.get(f"{API}/{table}/").json()["results"][0]["key"]


def read_urls(client: APIClient, cluster: Cluster) -> list[str]:
    """Every read endpoint, with ids of existing rows (publishes a version and adds a node if there is none)."""
    version = cluster.latest_version() or publishing.publish(cluster, None)
    node, _ = ProxyNode.objects.get_or_create(cluster=cluster, name="node-a", last_report={"global": {"Questions": 1}})
    rows = [f"{API}/{table}/{first_key(client, table)}/" for table in TABLES]
    return [
        f"{API}/",
        *(f"{API}/{table}/" for table in TABLES),
        *rows,
        f"{API}/clusters/",
        f"{API}/clusters/{cluster.name}/",
        f"{API}/nodes/",
        f"{API}/nodes/{node.name}/",
        f"{API}/versions/",
        f"{API}/versions/{version.number}/",
        f"{API}/versions/{version.number}/diff/?against=1",
        f"{API}/publish/",
        f"{API}/export/",
        f"{API}/stats/nodes/{node.name}/",
    ]


def test_token_auth(accounts: dict[str, Account], cluster: Cluster) -> None:
    anonymous = APIClient()
    response = anonymous.post(f"{API}/auth/token/", {"username": "viewer-account", "password": LOGIN_PASSWORD})
    assert response.status_code == 200
    token = response.json()["token"]
    assert anonymous.get(f"{API}/servers/").status_code == 401
    anonymous.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert anonymous.get(f"{API}/servers/").json()["count"] == 2
    refused = APIClient().post(f"{API}/auth/token/", {"username": "viewer-account", "password": "wrong"})
    assert refused.status_code == 400 and "non_field_errors" in refused.json()
    forged = APIClient()
    forged.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert forged.get(f"{API}/servers/").status_code == 401


def test_session_auth_for_the_ui(accounts: dict[str, Account], cluster: Cluster) -> None:
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="operator-account", password=LOGIN_PASSWORD)
    assert client.get(f"{API}/servers/").status_code == 200
    assert client.post(f"{API}/servers/", NEW_ROWS["servers"], format="json").status_code == 403  # no CSRF token


def test_anonymous_and_role_less_callers_get_nothing(clients: dict[str, APIClient], cluster: Cluster) -> None:
    urls = read_urls(clients["viewer"], cluster)
    for url in urls:
        assert clients["anonymous"].get(url).status_code == 401, url
        assert clients[NO_ROLE].get(url).status_code == 403, url
    for url in (f"{API}/servers/", f"{API}/publish/", f"{API}/import/", f"{API}/accounts/"):
        assert clients["anonymous"].post(url, {}, format="json").status_code == 401, url
    assert clients["anonymous"].get(f"{API}/accounts/").status_code == 401


def test_viewer_reads_everything_and_changes_nothing(clients: dict[str, APIClient], cluster: Cluster) -> None:
    viewer = clients["viewer"]
    for url in read_urls(viewer, cluster):
        assert viewer.get(url).status_code == 200, url
    for table in TABLES:
        row = f"{API}/{table}/{first_key(viewer, table)}/"
        assert viewer.post(f"{API}/{table}/", NEW_ROWS[table], format="json").status_code == 403
        assert viewer.patch(row, PATCHES[table], format="json").status_code == 403
        assert viewer.delete(row).status_code == 403
    denied = viewer.post(f"{API}/publish/", {}, format="json")
    assert denied.status_code == 403 and "operators" in denied.json()["detail"]
    assert viewer.post(f"{API}/versions/1/rollback/", {}, format="json").status_code == 403
    assert viewer.post(f"{API}/import/", seed_document(), format="json").status_code == 403
    assert viewer.post(f"{API}/clusters/", {"name": "other"}, format="json").status_code == 403
    assert viewer.get(f"{API}/accounts/").status_code == 403
    assert viewer.get(f"{API}/export/?secrets=1").status_code == 403
    assert not AuditEntry.objects.filter(user__username="viewer-account").exists()


def test_operator_edits_every_table_and_publishes(clients: dict[str, APIClient], cluster: Cluster) -> None:
    operator = clients["operator"]
    for table in TABLES:
        created = operator.post(f"{API}/{table}/", NEW_ROWS[table], format="json")
        assert created.status_code == 201, (table, created.json())
        body = created.json()
        assert body["cluster"] == "main"
        row = f"{API}/{table}/{body['key']}/"
        patched = operator.patch(row, PATCHES[table], format="json")
        assert patched.status_code == 200 and patched.json().items() >= PATCHES[table].items()
    assert operator.get(f"{API}/query-rules/?rule_id=50").json()["results"][0]["match_digest"] == "^SELECT .* "
    published = operator.post(f"{API}/publish/", {"comment": "from the API"}, format="json")
    assert published.status_code == 201
    version = cluster.latest_version()
    assert published.json() == {
        "version": 1,
        "checksum": version.checksum,
        "delivered": True,
        "message": "Published version 1 of main; sending it to its nodes.",
    }
    assert version.comment == "from the API" and version.author.username == "operator-account"
    again = operator.post(f"{API}/publish/", {}, format="json")
    assert again.status_code == 400 and again.json()["errors"][0].startswith("nothing to publish")
    for table in TABLES:
        assert operator.delete(f"{API}/{table}/{first_key(operator, table)}/").status_code == 204
    actions = set(AuditEntry.objects.filter(user__username="operator-account").values_list("action", flat=True))
    assert actions == {"create", "update", "delete", "publish"}
    assert operator.get(f"{API}/accounts/").status_code == 403


def test_errors_name_the_field(clients: dict[str, APIClient], cluster: Cluster) -> None:
    operator = clients["operator"]

    def refused(table: str, row: dict[str, Any]) -> dict[str, list[str]]:
        response = operator.post(f"{API}/{table}/", row, format="json")
        assert response.status_code == 400, response.json()
        return response.json()

    assert refused("servers", {"hostname": "db", "port": 70000}) == {"port": ["70000 is above the maximum 65535"]}
    assert refused("servers", {"port": 3306}) == {"hostname": ["This field is required."]}
    assert "already exists" in refused("servers", {"hostgroup_id": 10, "hostname": "127.0.0.1"})["non_field_errors"][0]
    assert list(refused("query-rules", {"rule_id": 9, "match_pattern": "(unclosed"})) == ["match_pattern"]
    assert refused("variables", {"variable_name": "mysql-thread", "variable_value": "2"})["variable_name"][0].endswith(
        "did you mean 'mysql-threads'?"
    )
    assert list(refused("variables", {"variable_name": "mysql-wait_timeout", "variable_value": "x"})) == [
        "variable_value"
    ]
    assert list(refused("replication-hostgroups", {"writer_hostgroup": 5, "reader_hostgroup": 5})) == [
        "reader_hostgroup"
    ]
    global_table = {"schemaname": "s", "tablename": "t", "shard_group": "g", "algorithm": "global"}
    assert refused("sharded-tables", {**global_table, "sequence_column": "id"}) == {
        "sequence_column": ["a global table has no sequence: it is written whole to every shard"]
    }
    server = first_key(operator, "servers")
    patched = operator.patch(f"{API}/servers/{server}/", {"status": "BROKEN"}, format="json")
    assert patched.status_code == 400 and list(patched.json()) == ["status"]
    # A whole-config problem is refused at publish, naming the row and column.
    operator.post(f"{API}/replication-hostgroups/", {"writer_hostgroup": 20, "reader_hostgroup": 30}, format="json")
    publish = operator.post(f"{API}/publish/", {}, format="json")
    assert publish.status_code == 400
    assert publish.json()["errors"] == [
        "mysql_replication_hostgroups[1] (writer_hostgroup=20): writer_hostgroup: 20 is the reader_hostgroup of "
        "mysql_replication_hostgroups[0]"
    ]
    assert operator.get(f"{API}/publish/").json()["errors"] == publish.json()["errors"]


def test_the_draft_preview_carries_what_a_node_would_warn_about(
    clients: dict[str, APIClient], cluster: Cluster
) -> None:
    operator = clients["operator"]
    assert operator.get(f"{API}/publish/").json()["warnings"] == []
    row = {"variable_name": "mysql-query_digests_lowercase", "variable_value": "true"}
    assert operator.post(f"{API}/variables/", row, format="json").status_code == 201
    preview = operator.get(f"{API}/publish/").json()
    assert preview["errors"] == [] and len(preview["warnings"]) == 1
    assert "mysql-query_digests_lowercase: accepted for ProxySQL compatibility" in preview["warnings"][0]
    assert operator.post(f"{API}/publish/", {}, format="json").status_code == 201  # a warning does not refuse


def test_a_password_never_comes_back(clients: dict[str, APIClient], cluster: Cluster) -> None:
    operator, admin = clients["operator"], clients["admin"]
    seen = []
    created = operator.post(f"{API}/users/", NEW_ROWS["users"], format="json")
    seen.append(created)
    user = f"{API}/users/{created.json()['key']}/"
    seen.append(operator.patch(user, {"password": "changed-" + SECRET}, format="json"))
    seen.append(operator.put(user, {"username": "reporter", "default_hostgroup": 10}, format="json"))
    assert operator.post(f"{API}/publish/", {}, format="json").status_code == 201
    operator.patch(user, {"password": "third-" + SECRET}, format="json")
    assert operator.post(f"{API}/publish/", {}, format="json").status_code == 201
    urls = read_urls(operator, cluster)
    for client in (operator, admin):
        seen += [client.get(url) for url in urls]
        seen += [client.get(f"{API}/versions/{n}/") for n in (1, 2)]
        seen.append(client.get(f"{API}/versions/2/diff/?against=1"))
    texts = [response.content.decode() for response in seen]
    for secret in (SECRET, "n3w-" + SECRET, "changed-" + SECRET, "third-" + SECRET, MONITOR_SECRET):
        assert not any(secret in text for text in texts), secret
    assert all(response.status_code in (200, 201) for response in seen)
    assert '"password"' not in operator.get(f"{API}/users/").content.decode()
    assert "********" in operator.get(f"{API}/variables/?variable_name=mysql-monitor_password").content.decode()
    # The PUT without a password kept it: the version nodes run holds the real one.
    assert cluster.latest_version().document["mysql_users"][1]["password"] == "third-" + SECRET
    # Only an admin asking for it sees the real passwords (to re-import them elsewhere).
    assert operator.get(f"{API}/export/?secrets=1").status_code == 403
    assert operator.get(f"{API}/versions/1/?secrets=1").status_code == 403
    assert admin.get(f"{API}/export/?secrets=1").json()["mysql_users"][0]["password"] == SECRET
    assert admin.get(f"{API}/versions/1/?secrets=1").json()["document"]["mysql_users"][0]["password"] == SECRET


def test_pagination_ordering_and_cluster_filter(clients: dict[str, APIClient], cluster: Cluster) -> None:
    other = seed_document()
    other["mysql_servers"] += [{"hostgroup_id": 30, "hostname": f"10.1.0.{n}"} for n in range(5)]
    make_cluster("other", other)
    viewer = clients["viewer"]
    first = viewer.get(f"{API}/servers/?cluster=other&page_size=3").json()
    assert first["count"] == 7 and len(first["results"]) == 3 and first["previous"] is None
    assert {row["cluster"] for row in first["results"]} == {"other"}
    second = viewer.get(first["next"]).json()
    last = viewer.get(second["next"]).json()
    assert len(second["results"]) == 3 and len(last["results"]) == 1 and last["next"] is None
    assert viewer.get(f"{API}/servers/").json()["count"] == 2  # default: the first cluster by name ("main")
    filtered = viewer.get(f"{API}/servers/?cluster=other&hostgroup_id=30&ordering=-hostname").json()
    assert [row["hostname"] for row in filtered["results"]] == [f"10.1.0.{n}" for n in range(4, -1, -1)]
    assert viewer.get(f"{API}/users/?cluster=other&username=nobody").json()["count"] == 0
    missing = viewer.get(f"{API}/servers/?cluster=nope")
    assert missing.status_code == 404 and missing.json()["detail"] == "no cluster named 'nope'"
    # A row is addressed by its natural key within a cluster (the first one, or ?cluster=).
    key = first["results"][0]["key"]
    row = viewer.get(f"{API}/servers/{key}/?cluster=other").json()
    assert row["cluster"] == "other" and key == f"{row['hostgroup_id']}/{row['hostname']}/{row['port']}"
    assert viewer.get(f"{API}/servers/30/10.1.0.4/3306/").status_code == 404  # not in the first cluster
    assert viewer.get(f"{API}/servers/30/10.1.0.4/x/?cluster=other").status_code == 404
    assert viewer.get(f"{API}/clusters/?name=other").json()["count"] == 1


def test_versions_diff_and_rollback(clients: dict[str, APIClient], cluster: Cluster) -> None:
    operator = clients["operator"]
    operator.post(f"{API}/publish/", {}, format="json")
    server = Server.objects.get(cluster=cluster, hostgroup_id=20)
    key = f"20/{server.hostname}/{server.port}"
    assert operator.patch(f"{API}/servers/{key}/", {"weight": 4}, format="json").status_code == 200
    operator.post(f"{API}/publish/", {"comment": "heavier reader"}, format="json")
    listed = operator.get(f"{API}/versions/").json()
    assert [(v["number"], v["author"], v["comment"]) for v in listed["results"]] == [
        (2, "operator-account", "heavier reader"),
        (1, "operator-account", ""),
    ]
    assert "document" not in listed["results"][0]
    diff = operator.get(f"{API}/versions/2/diff/").json()  # against the previous version by default
    assert (diff["from"], diff["to"]) == (1, 2)
    (change,) = diff["changes"]
    assert (change["table"], change["kind"], change["columns"]) == ("mysql_servers", "changed", ["weight"])
    assert "-    weight = 1\n+    weight = 4" in diff["unified"]
    assert operator.get(f"{API}/versions/2/diff/?against=9").status_code == 404
    assert operator.get(f"{API}/versions/2/diff/?against=x").json() == {"against": ["'x' is not a version number"]}
    rolled = operator.post(f"{API}/versions/1/rollback/", {"comment": "undo"}, format="json")
    assert rolled.status_code == 201 and rolled.json()["version"] == 3
    assert cluster.latest_version().rollback_of.number == 1
    detail = operator.get(f"{API}/versions/3/").json()
    assert (detail["rollback_of"], detail["comment"], detail["checksum"]) == (
        1,
        "undo",
        listed["results"][1]["checksum"],
    )
    # The rollback made new rows (new ids): the natural key still names the same server.
    assert Server.objects.get(cluster=cluster, hostgroup_id=20).pk != server.pk
    assert operator.get(f"{API}/servers/{key}/").json()["weight"] == 1
    again = operator.post(f"{API}/versions/3/rollback/", {}, format="json")
    assert again.status_code == 400 and "nothing to publish" in again.json()["errors"][0]
    assert operator.get(f"{API}/versions/?cluster=main&ordering=number").json()["results"][0]["number"] == 1


def test_import_and_export(clients: dict[str, APIClient], cluster: Cluster) -> None:
    operator, admin = clients["operator"], clients["admin"]
    Cluster.objects.create(name="copy")
    exported = admin.get(f"{API}/export/?cluster=main&secrets=1").json()
    imported = operator.post(f"{API}/import/?cluster=copy", exported, format="json")
    assert imported.status_code == 200
    checksum = publishing.compile_draft(cluster).checksum
    assert imported.json() == {
        "checksum": checksum,
        "rows": {
            "mysql_servers": 2,
            "mysql_users": 1,
            "mysql_query_rules": 2,
            "mysql_replication_hostgroups": 1,
            "global_variables": 2,
        },
    }
    # A masked export (what an operator gets) imports back: the masks keep the draft's passwords.
    masked = operator.get(f"{API}/export/?cluster=copy").json()
    assert masked["mysql_users"][0]["password"] == "********"
    assert operator.post(f"{API}/import/?cluster=copy", masked, format="json").json()["checksum"] == checksum
    bad = json.loads(json.dumps(exported))
    bad["mysql_servers"][0]["port"] = -1
    bad["mysql_userz"] = []
    refused = operator.post(f"{API}/import/?cluster=copy", bad, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"] == [
        "mysql_servers[0] (hostgroup_id=10, hostname='127.0.0.1', port=-1): port: -1 is below the minimum 0",
        "unknown table 'mysql_userz'; did you mean 'mysql_users'?",
    ]
    assert operator.post(f"{API}/import/?cluster=copy", [1, 2], format="json").status_code == 400
    assert publishing.compile_draft(Cluster.objects.get(name="copy")).checksum == checksum


def test_json_the_node_refuses_the_api_refuses(clients: dict[str, APIClient], cluster: Cluster) -> None:
    """One strict reader for the control plane and the nodes: a key twice in one object (the last would silently
    win, emptying the draft's users here) and nesting too deep to decode are 400s, and the draft is kept."""
    operator = clients["operator"]
    checksum = publishing.compile_draft(cluster).checksum
    exported = json.dumps(operator.get(f"{API}/export/?cluster=main").json())
    twice = exported[:-1] + ', "mysql_users": []}'
    for body in (twice, "[" * 100_000, '{"a": ' * 50_000):
        answer = operator.generic("POST", f"{API}/import/?cluster=main", body, content_type="application/json")
        assert answer.status_code == 400, answer.content[:200]
        assert "JSON parse error" in answer.json()["detail"]
    assert (
        "appears twice"
        in operator.generic("POST", f"{API}/import/?cluster=main", twice, content_type="application/json").json()[
            "detail"
        ]
    )
    assert publishing.compile_draft(cluster).checksum == checksum


def test_nodes_and_stats(clients: dict[str, APIClient], cluster: Cluster) -> None:
    other = make_cluster("other")
    report = {"global": {"Questions": 42}, "connection_pool": [{"srv_host": "127.0.0.1", "ConnUsed": 2}]}
    now = timezone.now()
    ProxyNode.objects.create(
        cluster=cluster,
        name="node.a",
        applied_version=1,
        state=ProxyNode.State.FAILED,
        error="port: refused",
        last_heartbeat=now,
        last_report=report,
    )
    ProxyNode.objects.create(cluster=other, name="node-b")
    publishing.publish(cluster, None)
    viewer = clients["viewer"]
    nodes = viewer.get(f"{API}/nodes/").json()["results"]
    assert [(n["name"], n["cluster"], n["desired_version"]) for n in nodes] == [
        ("node.a", "main", 1),
        ("node-b", "other", None),
    ]
    node = viewer.get(f"{API}/nodes/node.a/").json()
    assert (node["applied_version"], node["state"], node["error"]) == (1, "failed", "port: refused")
    assert node["last_heartbeat"] is not None
    assert [n["name"] for n in viewer.get(f"{API}/nodes/?cluster=other").json()["results"]] == ["node-b"]
    assert viewer.get(f"{API}/nodes/?state=failed").json()["count"] == 1
    assert viewer.get(f"{API}/stats/nodes/node.a/").json() == report
    assert viewer.get(f"{API}/stats/nodes/node-b/").json() == {}
    assert viewer.get(f"{API}/stats/nodes/nope/").status_code == 404
    assert clients["viewer"].post(f"{API}/nodes/", {"name": "x"}, format="json").status_code == 403
    refused = clients["operator"].post(f"{API}/nodes/", {"name": "x"}, format="json")  # no cluster
    assert refused.status_code == 400 and "cluster" in refused.json()


def test_clusters(clients: dict[str, APIClient], cluster: Cluster) -> None:
    operator = clients["operator"]
    created = operator.post(f"{API}/clusters/", {"name": "staging", "comment": "pre-prod"}, format="json")
    assert created.status_code == 201
    assert created.json()["latest_version"] is None and created.json()["nodes"] == []
    bad = operator.post(f"{API}/clusters/", {"name": "no spaces"}, format="json")
    assert bad.status_code == 400 and list(bad.json()) == ["name"]
    assert (
        operator.post(f"{API}/clusters/", {"name": "staging"}, format="json")
        .json()["name"][0]
        .endswith("already exists.")
    )
    ProxyNode.objects.create(cluster=cluster, name="node-1")
    kept = operator.delete(f"{API}/clusters/main/")
    assert kept.status_code == 400 and "still has nodes" in kept.json()["name"][0]
    assert operator.delete(f"{API}/clusters/staging/").status_code == 204
    assert AuditEntry.objects.filter(table="cluster", action="delete", object_key="staging").exists()


def test_accounts_are_managed_by_admins(clients: dict[str, APIClient], accounts: dict[str, Account]) -> None:
    admin = clients["admin"]
    created = admin.post(
        f"{API}/accounts/", {"username": "newop", "password": "long-enough-pw", "role": "operator"}, format="json"
    )
    assert created.status_code == 201
    body = created.json()
    assert body["role"] == "operator" and "password" not in body
    token = APIClient().post(f"{API}/auth/token/", {"username": "newop", "password": "long-enough-pw"}).json()
    assert "token" in token
    account = f"{API}/accounts/{body['id']}/"
    assert admin.patch(account, {"role": "viewer"}, format="json").json()["role"] == "viewer"
    assert not roles.can_edit(Account.objects.get(username="newop"))
    assert admin.patch(account, {"role": None}, format="json").json()["role"] is None
    assert admin.patch(account, {"password": "short"}, format="json").json() == {
        "password": ["This password is too short. It must contain at least 8 characters."]
    }
    no_password = admin.post(f"{API}/accounts/", {"username": "nopw", "role": "viewer"}, format="json")
    assert no_password.json() == {"password": ["a new account needs a password"]}
    assert admin.post(f"{API}/accounts/", {"username": "x", "password": "p" * 9, "role": "root"}, format="json").json()[
        "role"
    ] == ['"root" is not a valid choice.']
    listed = admin.get(f"{API}/accounts/?username=admin-account").json()["results"]
    assert [(a["username"], a["role"]) for a in listed] == [("admin-account", "admin")]
    assert admin.delete(f"{API}/accounts/{accounts['admin'].pk}/").status_code == 400
    assert admin.delete(account).status_code == 204
    entries = AuditEntry.objects.filter(table="account", object_key="newop").values_list("action", flat=True)
    assert set(entries) == {"create", "update", "delete"}
    assert "long-enough-pw" not in repr(list(AuditEntry.objects.values("before", "after")))
    assert clients["operator"].post(f"{API}/accounts/", {}, format="json").status_code == 403


def test_openapi_schema_and_docs(clients: dict[str, APIClient]) -> None:
    for url in ("/api/schema/?format=json", "/api/docs/"):  # behind a login
        assert clients["anonymous"].get(url).status_code in (401, 403), url
    viewer = clients["viewer"]
    response = viewer.get("/api/schema/?format=json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    validate_schema(schema)
    assert schema["openapi"].startswith("3.")
    for path in ("/api/v1/servers/", "/api/v1/publish/", "/api/v1/versions/{number}/diff/", "/api/v1/auth/token/"):
        assert path in schema["paths"]
    assert schema["components"]["schemas"]["User"]["properties"]["password"]["writeOnly"] is True
    docs = viewer.get("/api/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in docs and "cdn" not in docs.lower()
    for asset in re.findall(r"/static/(drf_spectacular_sidecar/[^\"']+)", docs):
        assert finders.find(asset) is not None, asset  # every asset of the page is a local static file


def test_blank_means_null_through_the_api_too(clients: dict[str, APIClient], cluster: Cluster) -> None:
    operator = clients["operator"]
    row = {"rule_id": 77, "match_digest": "^SELECT", "destination_hostgroup": 20, "error_msg": "", "digest": ""}
    response = operator.post(f"{API}/query-rules/", row, format="json")
    assert response.status_code == 201, response.json()
    assert (response.json()["error_msg"], response.json()["digest"]) == (None, None)
    refused = operator.post(f"{API}/query-rules/", {"rule_id": 78, "OK_msg": "  "}, format="json")
    assert refused.status_code == 400 and "empty message" in str(refused.json()["OK_msg"])
    bad_host = operator.post(f"{API}/servers/", {"hostgroup_id": 10, "hostname": "bad host!"}, format="json")
    assert bad_host.status_code == 400 and "not a host name" in str(bad_host.json()["hostname"])


def test_publish_with_the_previewed_checksum(clients: dict[str, APIClient], cluster: Cluster) -> None:
    operator = clients["operator"]
    previewed = operator.get(f"{API}/publish/").json()["checksum"]
    assert len(previewed) >= 16
    row = {"hostgroup_id": 20, "hostname": "10.0.0.78", "port": 3306}
    assert operator.post(f"{API}/servers/", row, format="json").status_code == 201
    stale = operator.post(f"{API}/publish/", {"checksum": previewed}, format="json")
    assert stale.status_code == 400 and "changed by operator-account" in str(stale.json())
    fresh = operator.get(f"{API}/publish/").json()["checksum"]
    assert operator.post(f"{API}/publish/", {"checksum": fresh}, format="json").status_code == 201


def test_the_postgresql_tables_are_edited_published_and_exported(
    clients: dict[str, APIClient], cluster: Cluster
) -> None:
    """pgsql_servers and pgsql_forward_listeners through the API: created, addressed by their keys, refused naming
    the field (the listener's port against the draft's MySQL listener too), published, diffed and exported."""
    operator, admin = clients["operator"], clients["admin"]
    server = operator.post(f"{API}/pgsql-servers/", {"hostname": "127.0.0.1", "hostgroup_id": 100}, format="json")
    assert server.status_code == 201 and server.json()["key"] == "100/127.0.0.1/5432"
    assert server.json()["max_connections"] == 1000  # ProxySQL 3.0's default
    listener = {"port": 15432, "hostgroup_id": 100}
    created = operator.post(f"{API}/pgsql-forward-listeners/", listener, format="json")
    assert created.status_code == 201 and created.json()["key"] == "15432"
    assert created.json()["interface"] == "127.0.0.1"

    def refused(table: str, row: dict[str, Any]) -> dict[str, list[str]]:
        response = operator.post(f"{API}/{table}/", row, format="json")
        assert response.status_code == 400, response.json()
        return response.json()

    assert refused("pgsql-forward-listeners", {**listener, "port": 6033}) == {
        "port": ["6033 is the port of mysql-interfaces; give the listener a port of its own"]
    }
    assert list(refused("pgsql-forward-listeners", {**listener, "port": 15433, "interface": "eth0"})) == ["interface"]
    assert list(refused("pgsql-forward-listeners", {"port": 0, "hostgroup_id": 100})) == ["port"]
    assert list(refused("pgsql-servers", {"hostname": "127.0.0.1", "hostgroup_id": 100, "status": "UP"})) == ["status"]
    patched = operator.patch(f"{API}/pgsql-servers/100/127.0.0.1/5432/", {"weight": 5}, format="json")
    assert patched.status_code == 200 and patched.json()["weight"] == 5
    assert operator.get(f"{API}/pgsql-forward-listeners/?hostgroup_id=100").json()["count"] == 1
    assert operator.post(f"{API}/publish/", {}, format="json").status_code == 201
    document = operator.get(f"{API}/versions/1/").json()["document"]
    assert [(s["hostname"], s["port"], s["weight"]) for s in document["pgsql_servers"]] == [("127.0.0.1", 5432, 5)]
    assert [(row["port"], row["hostgroup_id"]) for row in document["pgsql_forward_listeners"]] == [(15432, 100)]
    assert operator.patch(f"{API}/pgsql-forward-listeners/15432/", {"active": False}, format="json").status_code == 200
    operator.post(f"{API}/publish/", {}, format="json")
    (change,) = operator.get(f"{API}/versions/2/diff/").json()["changes"]
    assert (change["table"], change["key"], change["columns"]) == ("pgsql_forward_listeners", "port=15432", ["active"])
    exported = admin.get(f"{API}/export/?secrets=1").json()
    assert exported["pgsql_forward_listeners"][0]["active"] is False
    assert operator.delete(f"{API}/pgsql-forward-listeners/15432/").status_code == 204


def test_pgsql_users_through_the_api_keep_their_password_secret(
    clients: dict[str, APIClient], cluster: Cluster
) -> None:
    """pgsql_users: created with ProxySQL 3.0's defaults and pool_mode transaction, addressed by (username, backend),
    the password write-only (never in an answer, a version, a diff or a masked export; a masked export imports
    back with it), a bad verifier or pool_mode refused on its field, published as typed."""
    operator, admin = clients["operator"], clients["admin"]
    pg_secret = "pg-" + SECRET
    operator.post(f"{API}/pgsql-servers/", {"hostname": "127.0.0.1", "hostgroup_id": 100}, format="json")
    user = {"username": "app_pg", "password": pg_secret, "default_hostgroup": 100}
    created = operator.post(f"{API}/pgsql-users/", user, format="json")
    assert created.status_code == 201 and created.json()["key"] == "app_pg/1"
    assert (created.json()["pool_mode"], created.json()["max_connections"]) == ("transaction", 10000)

    def refused(row: dict[str, Any]) -> dict[str, list[str]]:
        response = operator.post(f"{API}/pgsql-users/", {**user, "username": "other", **row}, format="json")
        assert response.status_code == 400, response.content
        assert pg_secret not in response.content.decode()
        return response.json()

    bad_verifier = refused({"password": "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVka2V5"})
    assert list(bad_verifier) == ["password"] and "read as a verifier" in bad_verifier["password"][0]
    assert list(refused({"pool_mode": "statement"})) == ["pool_mode"]
    assert "Username and Backend already exists" in refused({"username": "app_pg"})["non_field_errors"][0]
    patched = operator.patch(f"{API}/pgsql-users/app_pg/1/", {"pool_mode": "session"}, format="json")
    assert patched.status_code == 200 and patched.json()["pool_mode"] == "session"
    assert operator.get(f"{API}/pgsql-users/?pool_mode=session").json()["count"] == 1
    assert operator.post(f"{API}/publish/", {}, format="json").status_code == 201
    verifier = "SCRAM-SHA-256$4096:c2FsdA==$c3RvcmVka2V5:c2VydmVya2V5"
    assert operator.patch(f"{API}/pgsql-users/app_pg/1/", {"password": verifier}, format="json").status_code == 200
    assert operator.post(f"{API}/publish/", {}, format="json").status_code == 201
    (change,) = operator.get(f"{API}/versions/2/diff/").json()["changes"]
    assert (change["table"], change["key"], change["columns"]) == (
        "pgsql_users",
        "username=app_pg, backend=1",
        ["password"],
    )
    seen = [operator.get(f"{API}/pgsql-users/"), operator.get(f"{API}/pgsql-users/app_pg/1/")]
    seen += [client.get(f"{API}/versions/{n}/") for client in (operator, admin) for n in (1, 2)]
    seen += [operator.get(f"{API}/versions/2/diff/?against=1"), admin.get(f"{API}/export/")]
    for response in seen:
        assert response.status_code == 200
        text = response.content.decode()
        assert pg_secret not in text and verifier not in text
    assert '"password"' not in seen[0].content.decode()
    masked = admin.get(f"{API}/export/").json()
    assert masked["pgsql_users"][0]["password"] == "********"
    assert operator.post(f"{API}/import/", masked, format="json").status_code == 200
    assert admin.get(f"{API}/export/?secrets=1").json()["pgsql_users"][0]["password"] == verifier
    assert admin.get(f"{API}/versions/1/?secrets=1").json()["document"]["pgsql_users"][0]["password"] == pg_secret


def test_pgsql_query_rules_and_replication_hostgroups_through_the_api(
    clients: dict[str, APIClient], cluster: Cluster
) -> None:
    """pgsql_query_rules (addressed by rule_id, blank meaning null as in every rule, a bad regex, an empty message
    or a reader equal to its writer refused on their field) and pgsql_replication_hostgroups (by writer_hostgroup):
    published as typed, diffed, exported, and an export imports back."""
    operator, admin = clients["operator"], clients["admin"]
    rule = {"rule_id": 5, "active": True, "match_pattern": "forbidden_pg", "error_msg": "blocked", "apply": True}
    created = operator.post(f"{API}/pgsql-query-rules/", {**rule, "database": "", "digest": ""}, format="json")
    assert created.status_code == 201, created.json()
    assert (created.json()["key"], created.json()["database"], created.json()["digest"]) == ("5", None, None)
    assert created.json()["re_modifiers"] == "CASELESS" and "schemaname" not in created.json()
    pair = {"writer_hostgroup": 100, "reader_hostgroup": 101}
    made = operator.post(f"{API}/pgsql-replication-hostgroups/", pair, format="json")
    assert made.status_code == 201 and (made.json()["key"], made.json()["check_type"]) == ("100", "read_only")

    def refused(table: str, row: dict[str, Any]) -> dict[str, list[str]]:
        response = operator.post(f"{API}/{table}/", row, format="json")
        assert response.status_code == 400, response.content
        return response.json()

    assert list(refused("pgsql-query-rules", {"rule_id": 6, "match_pattern": "(unclosed"})) == ["match_pattern"]
    assert "empty message" in refused("pgsql-query-rules", {"rule_id": 6, "error_msg": " "})["error_msg"][0]
    assert list(refused("pgsql-query-rules", {"rule_id": 6, "multiplex": 3})) == ["multiplex"]
    assert (
        "must differ"
        in refused("pgsql-replication-hostgroups", {"writer_hostgroup": 7, "reader_hostgroup": 7})["reader_hostgroup"][
            0
        ]
    )
    bad_check = {"writer_hostgroup": 7, "reader_hostgroup": 8, "check_type": "innodb_read_only"}
    assert list(refused("pgsql-replication-hostgroups", bad_check)) == ["check_type"]
    taken = refused("pgsql-replication-hostgroups", {"writer_hostgroup": 102, "reader_hostgroup": 101})
    assert "already exists" in taken["non_field_errors"][0]
    assert operator.post(f"{API}/publish/", {}, format="json").status_code == 201
    document = operator.get(f"{API}/versions/1/").json()["document"]
    assert [
        (r["rule_id"], r["match_pattern"], r["error_msg"], r["database"]) for r in document["pgsql_query_rules"]
    ] == [(5, "forbidden_pg", "blocked", None)]
    assert document["pgsql_replication_hostgroups"] == [{**pair, "check_type": "read_only", "comment": ""}]
    patched = operator.patch(f"{API}/pgsql-query-rules/5/", {"database": "shop"}, format="json")
    assert patched.status_code == 200 and patched.json()["database"] == "shop"
    assert operator.get(f"{API}/pgsql-query-rules/?destination_hostgroup=100").json()["count"] == 0
    assert operator.post(f"{API}/publish/", {}, format="json").status_code == 201
    (change,) = operator.get(f"{API}/versions/2/diff/").json()["changes"]
    assert (change["table"], change["key"], change["columns"]) == ("pgsql_query_rules", "rule_id=5", ["database"])
    exported = admin.get(f"{API}/export/").json()
    assert operator.delete(f"{API}/pgsql-replication-hostgroups/100/").status_code == 204
    assert operator.post(f"{API}/import/", exported, format="json").status_code == 200
    assert operator.get(f"{API}/pgsql-replication-hostgroups/100/").json()["reader_hostgroup"] == 101
