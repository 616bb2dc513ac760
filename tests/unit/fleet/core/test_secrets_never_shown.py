"""No secret reaches anything a user or an operator reads: a marker secret is put in every sealed field of every model
(``fleet.core.sealing.sealed_fields``: a sealed field is a secret, the one list), through the paths users take (the
API, the draft, publishing), each row created, changed and deleted; then every page reachable from the overview, every
API answer, every audit row and every log line is searched for the markers."""

from __future__ import annotations

import json
import logging
import re
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
from django.apps import apps
from django.contrib.auth.models import User as Account
from django.test import Client

from fleet.bench.models import BenchTarget
from fleet.core import publishing, roles
from fleet.core.models import AuditEntry, Cluster, ConfigVersion, PgsqlUser, ProxyNode, User, Variable
from fleet.core.sealing import sealed_fields
from fleet.failover.models import FailoverPolicy
from fleet.failover.policies import save_policy
from tests.support.control_plane import LOGIN_PASSWORD, MONITOR_SECRET, SECRET, client_for

pytestmark = pytest.mark.django_db

NODE_TOKEN = "n0de-t0ken-marker-7f3a"
FAILOVER_ADMIN = "f4ilover-admin-marker-91c2"
FAILOVER_REPLICATION = "f4ilover-repl-marker-5d0e"
BENCH_PASSWORD = "b3nch-pw-marker-22b8"
CHANGED_PASSWORD = "ch4nged-user-pw-marker-e41f"
PG_PASSWORD = "pg-user-pw-marker-0b7d"
MARKERS = (
    SECRET, MONITOR_SECRET, NODE_TOKEN, FAILOVER_ADMIN, FAILOVER_REPLICATION, BENCH_PASSWORD, CHANGED_PASSWORD,
    PG_PASSWORD,
)  # fmt: skip
#: Each model with sealed fields, and the fields this test fills with a marker.
COVERED = {
    ProxyNode: {"admin_token"},
    FailoverPolicy: {"admin_password", "replication_password"},
    BenchTarget: {"password"},
    ConfigVersion: {"document"},
    User: {"password"},
    PgsqlUser: {"password"},
    Variable: {"variable_value"},
}


def test_every_sealed_field_is_covered() -> None:
    found = {model: set(names) for model, names in sealed_fields(apps)}
    missing = {model.__name__: names - COVERED.get(model, set()) for model, names in found.items()}
    assert not {name: fields for name, fields in missing.items() if fields}, "a secret field this test does not fill"


def _found(text: str) -> list[str]:
    return [marker for marker in MARKERS if marker in text]


def test_no_secret_in_any_page_api_answer_audit_row_or_log(
    cluster: Cluster, accounts: dict[str, Account], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    admin = accounts[roles.ADMIN]
    api = client_for(admin)
    # The draft holds SECRET and MONITOR_SECRET (seeded); a user's password changes, the draft is published twice.
    publishing.publish(cluster, admin, "first")
    user = next(u for u in User.objects.filter(cluster=cluster) if u.password == SECRET)
    assert (
        api.patch(
            f"/api/v1/users/{user.username}/{int(user.backend)}/", {"password": CHANGED_PASSWORD}, format="json"
        ).status_code
        == 200
    )
    pg_user = {"cluster": cluster.name, "username": "app_pg", "password": PG_PASSWORD, "default_hostgroup": 10}
    assert api.post("/api/v1/pgsql-users/", pg_user, format="json").status_code == 201
    publishing.publish(cluster, admin, "second")
    # A node, a bench target: created, changed, deleted through the API.
    node = api.post("/api/v1/nodes/", {"name": "n1", "cluster": cluster.name, "admin_token": NODE_TOKEN}, format="json")
    assert node.status_code == 201, node.content
    assert api.patch("/api/v1/nodes/n1/", {"mysql_address": "127.0.0.1:6033"}).status_code == 200
    target = api.post(
        "/api/v1/bench/targets/",
        {"name": "t1", "host": "127.0.0.1", "user": "bench", "password": BENCH_PASSWORD},
        format="json",
    )
    assert target.status_code == 201, target.content
    assert api.delete(f"/api/v1/bench/targets/{target.json()['id']}/").status_code == 204
    # A failover policy, saved as its page and API save it.
    policy = save_policy(
        FailoverPolicy(
            cluster=cluster,
            writer_hostgroup=10,
            admin_password=FAILOVER_ADMIN,
            replication_password=FAILOVER_REPLICATION,
        ),
        admin,
    )
    policy.cooling_period_s = 60
    save_policy(policy, admin)
    assert (
        api.post(
            "/api/v1/nodes/", {"name": "n2", "cluster": cluster.name, "admin_token": NODE_TOKEN}, format="json"
        ).status_code
        == 201
    )
    assert api.delete("/api/v1/nodes/n2/").status_code == 204

    leaks: dict[str, list[str]] = {}
    for entry in AuditEntry.objects.all():
        text = json.dumps([entry.before, entry.after, entry.object_key])
        if _found(text):
            leaks[f"audit {entry.action} {entry.table} {entry.object_key}"] = _found(text)
    assert AuditEntry.objects.filter(table="proxynode").count() >= 3  # the node rows were audited
    web = Client()
    assert web.login(username=admin.get_username(), password=LOGIN_PASSWORD)
    pages = _crawl(web, "/")
    assert len(pages) > 40, sorted(pages)
    leaks.update({f"page {url}": found for url, text in pages.items() if (found := _found(text))})
    answers = _crawl(api, "/api/v1/", api=True)
    assert len(answers) > 20, sorted(answers)
    leaks.update({f"api {url}": found for url, text in answers.items() if (found := _found(text))})
    if found := _found(caplog.text):
        leaks["log"] = found
    assert not leaks


#: Pages the crawl does not follow: they act (logout), are there to hand secrets back on purpose, or are static files.
_SKIPPED = re.compile(r"/logout|secrets=1|/export/\w+$|\.csv$|^/static/")


def _crawl(client: Any, start: str, api: bool = False, limit: int = 600) -> dict[str, str]:
    """Every same-site URL reachable from ``start`` by GET, and its answer's text: links and form actions in pages,
    URLs and ids in API answers (a list's items by ``id`` too)."""
    seen: dict[str, str] = {}
    queue = [start]
    while queue and len(seen) < limit:
        url = queue.pop(0)
        if url in seen or _SKIPPED.search(url):
            continue
        answer = client.get(url, HTTP_ACCEPT="application/json" if api else "text/html")
        body = b"".join(answer.streaming_content) if answer.streaming else answer.content
        text = body.decode("utf-8", "replace") if answer.status_code < 400 or api else ""
        seen[url] = text
        if answer.status_code >= 300:
            continue
        for link in _links(url, text, api):
            if link not in seen:
                queue.append(link)
    return seen


def _links(url: str, text: str, api: bool) -> list[str]:
    if not api:
        hrefs = re.findall(r'(?:href|hx-get|data-url)="([^"#]+)"', text)
        return [link for link in (urljoin(url, h.replace("&amp;", "&")) for h in hrefs) if link.startswith("/")]
    try:
        data = json.loads(text)
    except ValueError:
        return []
    links = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("id"), int) and urlsplit(url).path.count("/") in (4, 5):
                links.append(f"{urlsplit(url).path}{value['id']}/")
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str) and "://testserver/api/" in value:
            links.append(urlsplit(value).path + (f"?{urlsplit(value).query}" if urlsplit(value).query else ""))

    walk(data)
    return links
