"""Failover, switchover and rejoin against real MariaDB (a primary and two replicas of this module's own), run in
process with the database: nodes' reports are played through the report task, the evaluation runs as beat would
run it, and every effect is read back from the servers and the published versions."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pymysql
import pytest
from django.utils import timezone

from devstack.failover_sandbox import address, ha_document, ids, query, read_only
from devstack.sandbox import APP_PASSWORD, APP_USER, REPL_PASSWORD, REPL_USER, Sandbox
from fleet.core import publishing
from fleet.core.models import Cluster, ProxyNode
from fleet.failover import actions
from fleet.failover.evaluate import evaluate
from fleet.failover.fences import CHECK_EVERY
from fleet.failover.models import Event, FailoverPolicy, Fence
from fleet.failover.topology import find
from tests.support.control_plane import make_cluster
from tests.support.failover_fixtures import monitor_row, send_monitor_report
from tests.support.monitor_support import own_sandbox

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db]

TABLE = "app.failover_rows"


@pytest.fixture
def box() -> Iterator[Sandbox]:
    """A fresh primary with two replicas (asynchronous replication) for each test."""
    with own_sandbox("failover", replicas=2) as sandbox:
        query(sandbox.primary(), f"CREATE TABLE {TABLE} (id INT PRIMARY KEY, note VARCHAR(40))")
        yield sandbox


def servers(box: Sandbox) -> tuple[str, str, str]:
    primary, first, second = box.primary(), *box.replicas()
    return address(primary), address(first), address(second)


def ha_cluster(box: Sandbox) -> Cluster:
    """The cluster ``ha`` over the sandbox, published, with failover on and two nodes."""
    primary, first, second = servers(box)
    cluster = make_cluster("ha", ha_document(primary, [first, second]))
    publishing.publish(cluster, None, "seed")
    FailoverPolicy.objects.create(
        cluster=cluster,
        writer_hostgroup=10,
        enabled=True,
        admin_user="root",
        replication_user=REPL_USER,
        replication_password=REPL_PASSWORD,
    )
    for name in ("ha-a", "ha-b"):
        ProxyNode.objects.create(cluster=cluster, name=name)
    return cluster


def insert(box: Sandbox, first: int, last: int) -> None:
    """Rows ``first``..``last``, a transaction each."""
    with box.primary().connect() as conn, conn.cursor() as cur:
        for i in range(first, last + 1):
            cur.execute(f"INSERT INTO {TABLE} VALUES (%s, %s)", (i, f"row {i}"))


def nodes_report_dead(dead: str, replicas: list[str]) -> None:
    """Both nodes report ``dead`` shunned and the replicas fine."""
    now = timezone.now()
    for node in ProxyNode.objects.all():
        rows = [monitor_row(dead, 10, up=False, at=now)] + [monitor_row(r, 20, at=now) for r in replicas]
        send_monitor_report(node, now, rows)


def test_a_dead_primary_is_replaced_by_the_most_advanced_replica_fenced_and_rejoined(box: Sandbox) -> None:
    cluster = ha_cluster(box)
    primary, behind, ahead = servers(box)
    insert(box, 1, 10)
    box.wait_replicated()
    query(box.replicas()[0], "STOP SLAVE")  # the first replica misses what follows
    insert(box, 11, 15)
    query(
        box.replicas()[1], "SELECT MASTER_GTID_WAIT(%s, 10)", (query(box.primary(), "SELECT @@gtid_binlog_pos")[0][0],)
    )
    box.kill("primary")
    query(box.replicas()[0], "START SLAVE")  # it tries to reach the dead primary again

    nodes_report_dead(primary, [behind, ahead])
    evaluate()

    event = Event.objects.get(kind="failover")
    assert (event.state, event.old_primary, event.new_primary, event.promoted) == ("done", primary, ahead, True)
    steps = {step.name: step for step in event.steps.all()}
    assert list(steps) == ["detected", "fenced", "chosen", "promoted", "repointed", "published", "replicating"]
    assert all(step.ok for step in steps.values())
    assert steps["detected"].detail.startswith(f"{primary} is reported down by 2 of 2 nodes (a majority is 2)")
    assert "the control plane cannot reach it either" in steps["fenced"].detail
    chosen = steps["chosen"].detail
    assert chosen.startswith(f"{ahead} was chosen: it has 0-1-")
    assert f"{behind} is at 0-1-" in chosen and "5 transactions behind in domain 0" in chosen
    assert f"{behind} replicates from {ahead}" in steps["repointed"].detail
    assert "STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only=0" in steps["promoted"].detail

    new_primary, other = box.replicas()[1], box.replicas()[0]
    assert not read_only(new_primary)
    assert query(new_primary, "SHOW SLAVE STATUS") == []
    query(other, "SELECT MASTER_GTID_WAIT(%s, 10)", (event.promoted_position,))
    assert ids(other) == ids(new_primary) == set(range(1, 16))  # the lagging replica caught up from the new primary
    layout = find(cluster.latest_version().document, 10)
    assert (layout.primary, layout.replicas, layout.kept_out) == (ahead, [behind], [primary])
    assert event.version == cluster.latest_version()

    # the first write on the new primary is seen by the next evaluation
    query(new_primary, f"INSERT INTO {TABLE} VALUES (16, 'after the failover')")
    evaluate()
    event.refresh_from_db()
    assert event.first_write_at is not None
    assert event.steps.filter(name="first_write").exists()

    # the old primary comes back writable: it is fenced (read_only=1) and stays out of the writer hostgroup
    box.start("primary")
    assert not read_only(box.primary())
    Fence.objects.update(checked_at=timezone.now() - CHECK_EVERY)
    evaluate()
    assert read_only(box.primary())
    assert "came back writable (read_only=0): the control plane set read_only=1" in event.steps.last().detail
    app = box.primary().connect(user=APP_USER, password=APP_PASSWORD)
    with app, app.cursor() as cur, pytest.raises(pymysql.err.OperationalError, match="read-only"):
        cur.execute(f"INSERT INTO {TABLE} VALUES (99, 'split brain')")  # the app's writes are refused

    # an operator rejoins it as a replica of the new primary
    rejoin = actions.rejoin(cluster, 10, primary, None)
    assert (rejoin.state, rejoin.kind) == ("done", "rejoin")
    assert [s.name for s in rejoin.steps.all()] == ["rejoined", "published"]
    query(box.primary(), "SELECT MASTER_GTID_WAIT(%s, 10)", (query(new_primary, "SELECT @@gtid_binlog_pos")[0][0],))
    assert ids(box.primary()) == set(range(1, 17))
    assert read_only(box.primary())
    layout = find(cluster.latest_version().document, 10)
    assert (layout.primary, sorted(layout.replicas), layout.kept_out) == (ahead, sorted([behind, primary]), [])
    assert not Fence.objects.filter(released_at__isnull=True).exists()


def test_a_switchover_under_writes_loses_nothing_and_demotes_the_old_primary(box: Sandbox) -> None:
    cluster = ha_cluster(box)
    primary, target, other = servers(box)
    written: list[int] = []
    stop = threading.Event()

    def writer() -> None:
        with box.primary().connect(user=APP_USER, password=APP_PASSWORD) as conn, conn.cursor() as cur:
            for i in range(1, 100_000):
                if stop.is_set():
                    return
                try:
                    cur.execute(f"INSERT INTO {TABLE} VALUES (%s, 'switchover')", (i,))
                except pymysql.err.MySQLError:
                    continue  # read-only now: the proxy would hold this write; here it is simply not counted
                written.append(i)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while len(written) < 50:
            threading.Event().wait(0.01)
        event = actions.request_switchover(cluster, 10, target, None)
        actions.run_switchover(event)
    finally:
        stop.set()
        thread.join()

    event.refresh_from_db()
    assert (event.state, event.old_primary, event.new_primary) == ("done", primary, target), event.summary
    assert [s.name for s in event.steps.all()] == [
        "writes_stopped",
        "caught_up",
        "promoted",
        "repointed",
        "published",
        "replicating",
        "published",  # the old primary's OFFLINE_SOFT writer row removed (no node reports: nothing to wait for)
    ]
    assert "nothing is lost" in event.steps.get(name="caught_up").detail
    new_primary, old_primary = box.replicas()[0], box.primary()
    assert set(written) <= ids(new_primary)  # every write the client saw succeed is on the new primary
    assert not read_only(new_primary) and read_only(old_primary)
    for server in (old_primary, box.replicas()[1]):
        status = query(server, "SHOW SLAVE STATUS")
        assert status, "the server replicates from nobody"
    query(old_primary, "SELECT MASTER_GTID_WAIT(%s, 10)", (query(new_primary, "SELECT @@gtid_binlog_pos")[0][0],))
    query(new_primary, f"INSERT INTO {TABLE} VALUES (0, 'on the new primary')")
    query(old_primary, "SELECT MASTER_GTID_WAIT(%s, 10)", (query(new_primary, "SELECT @@gtid_binlog_pos")[0][0],))
    assert 0 in ids(old_primary)  # the old primary replicates from the new one
    documents = [v.document for v in cluster.versions.order_by("number")]
    held = {(r["hostgroup_id"], r["port"]): r["status"] for r in documents[1]["mysql_servers"]}
    assert held[(10, box.primary().port)] == "OFFLINE_SOFT"  # writes were stopped by publishing it OFFLINE_SOFT
    layout = find(documents[-1], 10)
    assert (layout.primary, sorted(layout.replicas)) == (target, sorted([primary, other]))


def test_a_switchover_to_a_server_that_is_no_replica_is_refused_naming_the_field(box: Sandbox) -> None:
    cluster = ha_cluster(box)
    with pytest.raises(actions.ActionRefused) as refused:
        actions.request_switchover(cluster, 10, "10.1.1.1:3306", None)
    assert refused.value.field == "target"
    assert str(refused.value).startswith("10.1.1.1:3306 is not a replica of hostgroup 10 (replicas: ")
    FailoverPolicy.objects.update(replication_user="")
    with pytest.raises(actions.ActionRefused) as refused:
        actions.request_switchover(cluster, 10, servers(box)[1], None)
    assert refused.value.field == "replication_user"


def test_an_old_primary_holding_transactions_the_new_one_lacks_is_not_rejoined(box: Sandbox) -> None:
    cluster = ha_cluster(box)
    primary, first, second = servers(box)
    insert(box, 1, 5)
    box.wait_replicated()
    box.kill("primary")
    nodes_report_dead(primary, [first, second])
    evaluate()
    event = Event.objects.get(kind="failover")
    assert event.state == "done", event.summary
    box.start("primary")
    query(box.primary(), f"INSERT INTO {TABLE} VALUES (100, 'only on the old primary')")  # root ignores read_only

    with pytest.raises(actions.ActionRefused, match=f"{primary} holds transactions {event.new_primary} does not have"):
        actions.rejoin(cluster, 10, primary, None)
    refused = Event.objects.get(kind="rejoin")
    assert refused.state == "failed"
    assert "It stays fenced." in refused.steps.get().detail
    assert Fence.objects.filter(server=primary, released_at__isnull=True).exists()

    # once the new primary wrote more, the old one is no longer "ahead" by number, but its extra transaction is
    # still not in the new primary's binlog: replication refuses to start and the rejoin says why
    new_primary = next(s for s in box.replicas() if address(s) == event.new_primary)
    for i in range(3):
        query(new_primary, f"INSERT INTO {TABLE} VALUES (%s, 'new primary')", (200 + i,))
    with pytest.raises(actions.ActionRefused, match="has transactions the primary never got; rebuild it"):
        actions.rejoin(cluster, 10, primary, None)
    assert Fence.objects.filter(server=primary, released_at__isnull=True).exists()
    assert (timezone.now() - Event.objects.filter(kind="rejoin").first().started_at) < timedelta(minutes=1)
