"""Publishing: compiling and validating the draft, numbered versions, diffs, rollback, import and export."""

from __future__ import annotations

import json

import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import User as Account

from fleet.core import publishing
from fleet.core.drafts import delete_row, save_row
from fleet.core.models import (
    AuditEntry,
    Cluster,
    ConfigVersion,
    Hostgroup,
    ProxyNode,
    QueryRule,
    Server,
    User,
    Variable,
)
from fleet.core.models import ReplicationHostgroup as Replication
from proxyapp.config import secrets
from proxyapp.config.document import ConfigError, parse_config
from tests.support.control_plane import MONITOR_SECRET, SECRET, make_cluster, seed_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def author(db: None) -> Account:
    """The account publishing in these tests."""
    return Account.objects.create_user("publisher")


def edit_draft(cluster: Cluster, author: Account) -> None:
    """Change the draft the way an operator would: a weight, a password, a new server, a deleted rule."""
    server = Server.objects.get(cluster=cluster, hostgroup_id=20)
    server.weight = 5
    save_row(server, author)
    user = User.objects.get(cluster=cluster)
    user.password = "another-" + SECRET
    save_row(user, author)
    monitor = Variable.objects.get(cluster=cluster, variable_name="mysql-monitor_password")
    monitor.variable_value = "another-" + MONITOR_SECRET
    save_row(monitor, author)
    save_row(Server(cluster=cluster, hostgroup_id=20, hostname="10.0.0.9", port=3307), author)
    delete_row(QueryRule.objects.get(cluster=cluster, rule_id=2), author)


def test_publish_stores_the_compiled_document(cluster: Cluster, author: Account) -> None:
    version = publishing.publish(cluster, author, comment="first")
    expected = parse_config(seed_document())
    assert (version.number, version.comment, version.author) == (1, "first", author)
    assert version.document == expected.to_document()
    assert version.checksum == expected.checksum == parse_config(version.document).checksum
    assert version.document["mysql_users"][0]["password"] == SECRET  # what nodes run holds the real password
    assert set(Hostgroup.objects.filter(cluster=cluster).values_list("hostgroup_id", flat=True)) == {10, 20}
    entry = AuditEntry.objects.get(action=AuditEntry.Action.PUBLISH)
    assert (entry.user, entry.cluster, entry.after["version"]) == (author, cluster, 1)


def test_versions_are_numbered_and_an_unchanged_draft_is_not_published(cluster: Cluster, author: Account) -> None:
    assert publishing.publish(cluster, author).number == 1
    with pytest.raises(publishing.NothingToPublish, match="version 1"):
        publishing.publish(cluster, author)
    edit_draft(cluster, author)
    assert publishing.publish(cluster, author).number == 2
    other = make_cluster("other")
    assert publishing.publish(other, author).number == 1  # numbering is per cluster
    assert ConfigVersion.objects.filter(cluster=cluster).count() == 2


def test_invalid_draft_is_refused_naming_row_and_column(cluster: Cluster, author: Account) -> None:
    # Rows that skipped validation (written around save_row) and a cross-row conflict only the whole config shows.
    Server.objects.create(cluster=cluster, hostgroup_id=30, hostname="db9", port=70000)
    Replication.objects.create(cluster=cluster, writer_hostgroup=20, reader_hostgroup=30)
    with pytest.raises(ConfigError) as refused:
        publishing.publish(cluster, author)
    errors = refused.value.errors
    assert any(e.startswith("mysql_servers[") and "port=70000" in e and "port: 70000 is above" in e for e in errors)
    assert any(
        e.startswith("mysql_replication_hostgroups[1] (writer_hostgroup=20): writer_hostgroup: 20 is the reader")
        for e in errors
    )
    assert not ConfigVersion.objects.exists()
    with pytest.raises(ConfigError):
        publishing.draft_changes(cluster)


def test_push_happens_after_commit(cluster: Cluster, author: Account, django_capture_on_commit_callbacks) -> None:
    node = ProxyNode.objects.create(cluster=cluster, name="publishing-test-node")
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete(node.queue)
    try:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            publishing.publish(cluster, author)
        node.refresh_from_db()
        assert len(callbacks) == 1 and node.last_pushed_at is None  # nothing sent before the commit
        edit_draft(cluster, author)
        with django_capture_on_commit_callbacks(execute=True):
            version = publishing.publish(cluster, author)
        node.refresh_from_db()
        assert node.last_pushed_at is not None
        (message,) = broker.lrange(node.queue, 0, -1)
        assert json.loads(message)["headers"]["task"] == "proxyfleet.node.apply"
        assert version.number == 2
    finally:
        broker.delete(node.queue)


def test_draft_changes_and_version_diffs(cluster: Cluster, author: Account) -> None:
    assert {(c.table, c.kind) for c in publishing.draft_changes(cluster)} >= {("mysql_servers", "added")}
    v1 = publishing.publish(cluster, author)
    assert publishing.draft_changes(cluster) == []
    edit_draft(cluster, author)
    changes = publishing.draft_changes(cluster)
    by_key = {(c.table, c.key): c for c in changes}
    weight = by_key[("mysql_servers", "hostgroup_id=20, hostname=127.0.0.1, port=3307")]
    assert (weight.kind, weight.columns) == ("changed", ("weight",))
    assert (weight.before["weight"], weight.after["weight"]) == (1, 5)
    password = by_key[("mysql_users", "username=app, backend=1")]
    assert password.columns == ("password",)
    assert password.before["password"] == password.after["password"] == secrets.MASK
    assert by_key[("mysql_servers", "hostgroup_id=20, hostname=10.0.0.9, port=3307")].kind == "added"
    removed = by_key[("mysql_query_rules", "rule_id=2")]
    assert (removed.kind, removed.before["destination_hostgroup"], removed.after) == ("removed", 20, {})
    monitor = by_key[("global_variables", "variable_name=mysql-monitor_password")]
    assert monitor.before["variable_value"] == monitor.after["variable_value"] == secrets.MASK
    assert len(changes) == 5
    v2 = publishing.publish(cluster, author)
    assert publishing.diff_versions(v1, v2) == changes
    assert {c.kind for c in publishing.diff_versions(v2, v1)} == {"changed", "added", "removed"}
    text = publishing.unified_diff(v1.document, v2.document, "v1", "v2")
    assert text.startswith("--- v1\n+++ v2\n")
    assert "\n-    weight = 1\n+    weight = 5\n" in text
    assert "\n-mysql_query_rules (rule_id=2)\n" in text
    assert SECRET not in text
    assert f'password = "{secrets.MASK}"' in publishing.unified_diff({}, v1.document, "empty", "v1")


def test_rollback_publishes_an_old_version_anew(cluster: Cluster, author: Account) -> None:
    v1 = publishing.publish(cluster, author)
    edit_draft(cluster, author)
    v2 = publishing.publish(cluster, author)
    v3 = publishing.rollback(v1, author)
    assert (v3.number, v3.rollback_of, v3.checksum) == (3, v1, v1.checksum)
    assert v3.comment == "rollback to version 1"
    assert publishing.compile_draft(cluster).checksum == v1.checksum
    assert AuditEntry.objects.filter(action=AuditEntry.Action.ROLLBACK, object_key="3").exists()
    # Refused when it would change nothing; the draft, edited meanwhile, is left as it was.
    save_row(Server(cluster=cluster, hostgroup_id=10, hostname="db-new", port=3306), author)
    with pytest.raises(publishing.NothingToPublish):
        publishing.rollback(v3, author)
    assert Server.objects.filter(cluster=cluster, hostname="db-new").exists()
    assert publishing.rollback(v2, author, comment="again").number == 4


def test_export_import_round_trip(cluster: Cluster, author: Account) -> None:
    exported = publishing.export_document(cluster)
    assert exported["mysql_users"][0]["password"] == SECRET
    copy = Cluster.objects.create(name="copy")
    publishing.import_document(copy, json.loads(json.dumps(exported)), author)
    assert publishing.compile_draft(copy).checksum == publishing.compile_draft(cluster).checksum
    entry = AuditEntry.objects.get(action=AuditEntry.Action.IMPORT, cluster=copy)
    assert entry.user == author and entry.before["mysql_servers"] == []
    assert entry.after["mysql_users"][0]["password"] == secrets.MASK
    # A masked export imports again: the mask stands for the password the draft already has.
    masked = publishing.export_document(cluster, secrets=False)
    assert masked["mysql_users"][0]["password"] == secrets.MASK
    masked["mysql_servers"][0]["weight"] = 7
    publishing.import_document(cluster, masked, author)
    assert User.objects.get(cluster=cluster).password == SECRET
    assert (
        Variable.objects.get(cluster=cluster, variable_name="mysql-monitor_password").variable_value == MONITOR_SECRET
    )
    assert Server.objects.get(cluster=cluster, hostgroup_id=10).weight == 7
    with pytest.raises(
        ConfigError, match=r"mysql_users\[0\] \(username=app, backend=True\): password: the mask '\*+' "
    ):
        publishing.import_document(Cluster.objects.create(name="empty"), masked, author)


def test_a_refused_import_changes_nothing(cluster: Cluster, author: Account) -> None:
    before = publishing.export_document(cluster)
    bad = seed_document()
    bad["mysql_servers"][1]["port"] = "x"
    bad["mysql_query_rules"][0]["destination_hostgrup"] = 10
    with pytest.raises(ConfigError) as refused:
        publishing.import_document(cluster, bad, author)
    assert refused.value.errors == [
        "mysql_servers[1] (hostgroup_id=20, hostname='127.0.0.1', port='x'): port: expected an integer, got 'x'",
        "mysql_query_rules[0] (rule_id=1): destination_hostgrup: unknown column; did you mean 'destination_hostgroup'?",
    ]
    long_name = seed_document()
    long_name["mysql_servers"][0]["hostname"] = "h" * 300  # a DNS label has at most 63 characters
    with pytest.raises(ConfigError, match=r"mysql_servers\[0\] \(.*\): hostname: 'h+' is not a host name"):
        publishing.import_document(cluster, long_name, author)
    with pytest.raises(ConfigError, match="must be a JSON object"):
        publishing.import_document(cluster, ["not", "a", "document"], author)
    assert publishing.export_document(cluster) == before
    assert not AuditEntry.objects.filter(action=AuditEntry.Action.IMPORT, user=author).exists()


def test_no_password_in_anything_a_user_sees(cluster: Cluster, author: Account) -> None:
    v1 = publishing.publish(cluster, author)
    edit_draft(cluster, author)
    v2 = publishing.publish(cluster, author)
    publishing.rollback(v1, author)
    shown = [
        publishing.draft_changes(make_cluster("fresh")),
        publishing.diff_versions(v1, v2),
        publishing.unified_diff(v1.document, v2.document, "v1", "v2"),
        publishing.export_document(cluster, secrets=False),
        list(AuditEntry.objects.values("before", "after", "object_key")),
    ]
    text = repr(shown)
    for secret in (SECRET, "another-" + SECRET, MONITOR_SECRET, "another-" + MONITOR_SECRET):
        assert secret not in text
