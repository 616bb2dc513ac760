"""Failover's decisions with the database and no MariaDB: the nodes' verdicts and the majority (fresh reports only),
GTID positions compared domain by domain, the configured order, the cooling period and its acknowledgement, failover
off, the config edit that moves a primary, and the backend status history."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from devstack.failover_sandbox import server_row
from devstack.ports import free_port
from devstack.sandbox import APP_PASSWORD, APP_USER
from fleet.core import publishing
from fleet.core.drafts import save_row
from fleet.core.models import Cluster, ProxyNode, Variable
from fleet.failover import actions, detection, gtid, history
from fleet.failover.choice import Candidate, choose, preference
from fleet.failover.config_edits import move_primary, publish_edit
from fleet.failover.evaluate import evaluate
from fleet.failover.failover import why_not
from fleet.failover.models import BackendTransition, Event, FailoverPolicy, Step
from fleet.failover.servers import ReplicationState
from fleet.failover.topology import find
from tests.support.control_plane import make_cluster
from tests.support.failover_fixtures import monitor_row, send_monitor_report, transition

pytestmark = pytest.mark.django_db

# Loopback ports nobody listens on: a failover attempt against them fails fast ("Connection refused").
PRIMARY, REPLICA1, REPLICA2 = (f"127.0.0.1:{free_port()}" for _ in range(3))


def document() -> dict[str, Any]:
    """Writer hostgroup 10 = PRIMARY; reader hostgroup 20 = the two replicas (weight 1000) and PRIMARY (weight 1)."""
    return {
        "mysql_servers": [
            server_row(10, PRIMARY, max_connections=300, comment="db-a"),
            server_row(20, PRIMARY, weight=1, comment="db-a"),
            server_row(20, REPLICA1, weight=1000, max_replication_lag=30, comment="db-b"),
            server_row(20, REPLICA2, weight=1000, comment="db-c"),
        ],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 10}],
        "mysql_replication_hostgroups": [{"writer_hostgroup": 10, "reader_hostgroup": 20}],
    }


@pytest.fixture
def cluster(db: None) -> Cluster:
    """The cluster ``ha`` with the document published and three nodes (a, b, c) that have not reported."""
    cluster = make_cluster("ha", document())
    publishing.publish(cluster, None, "seed")
    for name in ("ha-a", "ha-b", "ha-c"):
        ProxyNode.objects.create(cluster=cluster, name=name)
    return cluster


def node(name: str) -> ProxyNode:
    return ProxyNode.objects.get(name=name)


def report(name: str, primary_up: bool, ago: float = 0, **extra: Any) -> None:
    """Node ``name`` reports, ``ago`` seconds back, its view of the primary (both hostgroups) and the replicas."""
    at = timezone.now() - timedelta(seconds=ago)
    rows = [monitor_row(PRIMARY, hg, up=primary_up, at=at, **extra) for hg in (10, 20)]
    rows += [monitor_row(replica, 20, at=at) for replica in (REPLICA1, REPLICA2)]
    send_monitor_report(node(name), at, rows)


def votes() -> detection.Votes:
    nodes = ProxyNode.objects.filter(cluster__name="ha")
    return detection.votes(nodes, PRIMARY, (10, 20), timezone.now())


def state(applied: str, received: str = "", master: str | None = PRIMARY) -> ReplicationState:
    """A replica's state with GTID ``applied`` (as @@gtid_slave_pos) and ``received`` (Gtid_IO_Pos)."""
    return ReplicationState(
        server="",
        read_only=True,
        binlog_pos={},
        slave_pos=gtid.parse(applied),
        current_pos=gtid.parse(applied),
        io_pos=gtid.parse(received or applied),
        master=master,
        io_running="Connecting",
        sql_running="Yes",
        last_error="",
        seconds_behind=None,
    )


# --- the nodes' verdicts and the majority ------------------------------------------------------------------


def test_a_nodes_verdict_comes_from_its_latest_fresh_monitor_rows(cluster: Cluster) -> None:
    report("ha-a", primary_up=False)
    report("ha-b", primary_up=True)
    send_monitor_report(node("ha-c"), timezone.now(), None)  # a proxy without the monitor
    by_node = {v.node: v for v in votes().verdicts}
    assert (by_node["ha-a"].verdict, by_node["ha-a"].reason) == (
        "down",
        "SHUNNED, connect and ping failed: Connection refused",
    )
    assert (by_node["ha-b"].verdict, by_node["ha-b"].reason) == ("up", "ONLINE, checks pass")
    assert (by_node["ha-c"].verdict, by_node["ha-c"].reason) == ("unknown", "its report has no monitor rows")

    ProxyNode.objects.create(cluster=cluster, name="ha-d")
    report("ha-d", primary_up=False, ago=20)  # older than REPORT_FRESH: it does not vote
    stale = {v.node: v for v in votes().verdicts}["ha-d"]
    assert (stale.verdict, stale.reason.split(" (")[0]) == ("unknown", "no fresh report")


def test_a_malformed_monitor_row_makes_the_node_unknown_naming_the_field(cluster: Cluster) -> None:
    at = timezone.now()
    send_monitor_report(node("ha-a"), at, [monitor_row(PRIMARY, 10, up=False, srv_port="3306")])
    [verdict] = [v for v in votes().verdicts if v.node == "ha-a"]
    assert verdict.verdict == "unknown"
    assert (
        verdict.reason
        == "its report's monitor rows are malformed: stats.monitor[0].srv_port: expected a whole number of 0 or more, "
        "not '3306'"
    )


def test_a_majority_of_the_clusters_nodes_must_report_the_primary_down(cluster: Cluster) -> None:
    report("ha-b", primary_up=False, status="ONLINE")  # failed checks short of a shun: suspect, not down
    assert {v.node: v.verdict for v in votes().verdicts}["ha-b"] == "suspect"
    report("ha-a", primary_up=False)
    assert not votes().dead  # one node's view is not enough
    assert votes().describe().startswith(f"{PRIMARY} is reported down by 1 of 3 nodes (a majority is 2): ha-a: down")

    report("ha-c", primary_up=False, ago=20)  # a stale report does not count
    assert not votes().dead

    report("ha-b", primary_up=False)
    assert votes().dead
    assert votes().needed == 2

    ProxyNode.objects.create(cluster=cluster, name="ha-d")  # four nodes: two is no majority
    assert not votes().dead


def test_a_node_whose_last_check_is_old_does_not_vote(cluster: Cluster) -> None:
    old = (timezone.now() - timedelta(seconds=60)).isoformat()
    for name in ("ha-a", "ha-b"):
        report(name, primary_up=False, checked_at=old)
    assert not votes().dead
    assert all("its last check of" in v.reason for v in votes().saying("unknown")[:2])


# --- the choice of a replica -------------------------------------------------------------------------------


def test_gtid_positions_parse_and_refuse_what_is_not_one() -> None:
    assert gtid.parse(" 0-1-100, 1-2-7\n") == {0: gtid.Gtid(0, 1, 100), 1: gtid.Gtid(1, 2, 7)}
    assert gtid.parse("") == {}
    assert gtid.render(gtid.parse("1-2-7,0-1-100")) == "0-1-100,1-2-7"
    with pytest.raises(ValueError, match="'0-1' is not a GTID"):
        gtid.parse("0-1")
    with pytest.raises(ValueError, match="names domain 0 twice"):
        gtid.parse("0-1-5,0-2-6")


def test_gtid_positions_compare_domain_by_domain() -> None:
    old, new = gtid.parse("0-1-11,1-5-3"), gtid.parse("0-2-11,1-5-7,2-9-1")
    assert gtid.missing(old, new) == {1: 4, 2: 1}
    assert gtid.ahead(old, new) == {}
    assert gtid.conflicts(old, new) == {0: (gtid.Gtid(0, 1, 11), gtid.Gtid(0, 2, 11))}  # two transactions numbered 11
    assert gtid.ahead(gtid.parse("0-1-12"), new) == {0: (gtid.Gtid(0, 1, 12), gtid.Gtid(0, 2, 11))}
    assert gtid.latest(old, new) == gtid.parse("0-1-11,1-5-7,2-9-1")  # the first of equal numbers stays


def test_the_replica_with_every_transaction_in_every_domain_is_chosen() -> None:
    candidates = [
        Candidate("db-b:3306", state("0-1-10,1-2-5")),
        Candidate("db-c:3306", state("0-1-12,1-2-1")),
        Candidate("db-d:3306", state("0-1-12,1-2-5")),
    ]
    choice = choose(candidates, "the test's order")
    assert choice.chosen == "db-d:3306"
    assert choice.explanation == (
        "db-d:3306 was chosen: it has 0-1-12,1-2-5, every transaction any candidate has. "
        "db-b:3306 is at 0-1-10,1-2-5: 2 transactions behind in domain 0 (at 0-1-10 of 0-1-12). "
        "db-c:3306 is at 0-1-12,1-2-1: 4 transactions behind in domain 1 (at 1-2-1 of 1-2-5)."
    )
    assert choice.data["reference"] == "0-1-12,1-2-5"


def test_across_domains_the_fewest_missing_transactions_win() -> None:
    choice = choose(
        [Candidate("db-b:3306", state("0-1-12,1-2-1")), Candidate("db-c:3306", state("0-1-10,1-2-5"))], "order"
    )
    assert choice.chosen == "db-c:3306"
    assert choice.explanation.startswith(
        "db-c:3306 was chosen: it has 0-1-10,1-2-5, the fewest missing (2 transactions behind in domain 0 "
        "(at 0-1-10 of 0-1-12))."
    )


def test_equally_advanced_replicas_are_taken_in_the_configured_order() -> None:
    choice = choose(
        [Candidate("db-c:3306", state("0-1-12")), Candidate("db-b:3306", state("0-1-12"))], "the promotion order"
    )
    assert choice.chosen == "db-c:3306"
    assert (
        "db-b:3306 is as advanced (0-1-12); db-c:3306 comes first in the configured order (the promotion order)."
        in choice.explanation
    )


def test_what_a_replica_received_counts_and_unusable_replicas_say_why() -> None:
    candidates = [
        Candidate("db-b:3306", state("0-1-12")),
        Candidate("db-c:3306", state("0-1-10", received="0-1-13")),
        Candidate("db-d:3306", None, "it cannot be reached (db-d:3306: cannot connect: Connection refused)"),
        Candidate("db-e:3306", state("0-1-20", master=None), "it replicates from nobody (not a replica)"),
    ]
    choice = choose(candidates, "order")
    assert choice.chosen == "db-c:3306"
    assert "db-c:3306 had received up to 0-1-13 but applied only 0-1-10 when compared" in choice.explanation
    assert "db-d:3306 was not considered: it cannot be reached" in choice.explanation
    assert "db-e:3306 was not considered: it replicates from nobody (not a replica)." in choice.explanation

    nothing = choose([candidates[2]], "order")
    assert nothing.chosen is None
    assert nothing.explanation.startswith("No replica can be promoted: db-d:3306 was not considered")


def test_the_configured_order_is_the_promotion_order_then_weight_host_and_port(cluster: Cluster) -> None:
    layout = find(cluster.latest_version().document, 10)
    policy = FailoverPolicy.of(cluster, 10)
    assert sorted(layout.replicas) == sorted([REPLICA1, REPLICA2])
    order, basis = preference(layout, policy)
    assert order == sorted([REPLICA1, REPLICA2], key=lambda n: int(n.rsplit(":", 1)[1]))  # equal weights: by port
    assert basis == "no promotion order is set: by reader weight, then host and port"
    policy.promotion_order = f"{REPLICA2}, 10.9.9.9:3306"  # a server that is no replica is left out
    assert preference(layout, policy)[0] == [REPLICA2, REPLICA1]


def test_a_promotion_order_entry_that_is_not_host_port_is_refused_naming_the_field(cluster: Cluster) -> None:
    policy = FailoverPolicy(cluster=cluster, writer_hostgroup=10, promotion_order="db-b:3306, db-c")
    with pytest.raises(ValidationError) as refused:
        policy.full_clean()
    assert refused.value.message_dict == {
        "promotion_order": ["'db-c' is not host:port (a port from 1 to 65535)"],
    }


# --- failover off, cooling period, acknowledgement ----------------------------------------------------------


def dead_primary() -> None:
    for name in ("ha-a", "ha-b"):
        report(name, primary_up=False)


def test_with_failover_off_a_dead_primary_gets_one_blocked_event_until_it_is_back(cluster: Cluster) -> None:
    dead_primary()
    evaluate()
    evaluate()
    [event] = Event.objects.all()
    assert (event.kind, event.state, event.old_primary, event.finished_at) == ("failover", "blocked", PRIMARY, None)
    steps = list(event.steps.values_list("name", "detail"))
    assert [name for name, _ in steps] == ["detected", "blocked"]
    assert steps[0][1].startswith(f"{PRIMARY} is reported down by 2 of 3 nodes (a majority is 2)")
    assert steps[1][1] == (
        "Not failing over: failover is off for hostgroup 10: the nodes follow read_only only (as ProxySQL does); "
        "turn it on in the hostgroup's failover settings to promote a replica automatically."
    )

    for name in ("ha-a", "ha-b"):
        report(name, primary_up=True)
    evaluate()
    event.refresh_from_db()
    assert event.finished_at is not None
    assert event.summary.endswith("it is reported up again")
    assert Event.objects.count() == 1


def test_the_cooling_period_blocks_a_second_failover_until_an_operator_acknowledges(cluster: Cluster) -> None:
    policy = FailoverPolicy.objects.create(cluster=cluster, writer_hostgroup=10, enabled=True, cooling_period_s=300)
    earlier = Event.objects.create(
        cluster=cluster,
        writer_hostgroup=10,
        reader_hostgroup=20,
        kind="failover",
        state="done",
        old_primary="10.0.0.1:3306",
        new_primary=PRIMARY,
        promoted=True,
        started_at=timezone.now() - timedelta(seconds=60),
    )
    dead_primary()
    evaluate()
    blocked = Event.objects.get(state="blocked")
    assert f"failover #{earlier.pk} promoted {PRIMARY}" in blocked.summary
    assert f"an operator who acknowledges #{earlier.pk} allows another failover at once" in blocked.summary

    actions.acknowledge(earlier, None)
    assert why_not(policy, timezone.now()) == ("", False)
    assert list(earlier.steps.values_list("name", flat=True)) == ["acknowledged"]

    evaluate()  # the failover runs; no server answers here, so it fails before promoting anything
    attempt = Event.objects.filter(kind="failover").exclude(pk__in=[earlier.pk, blocked.pk]).get()
    assert (attempt.state, attempt.promoted) == ("failed", False)
    assert attempt.summary == f"{PRIMARY} is down and no replica could be promoted"
    assert [s.name for s in attempt.steps.all()] == ["detected", "fenced", "chosen"]
    chosen = attempt.steps.get(name="chosen")
    assert not chosen.ok
    assert chosen.detail.startswith("No replica can be promoted: ")
    for replica in (REPLICA1, REPLICA2):
        assert f"{replica} was not considered: it cannot be reached ({replica}: cannot connect:" in chosen.detail
    assert "Connection refused" in attempt.steps.get(name="fenced").detail
    blocked.refresh_from_db()
    assert blocked.finished_at is not None and blocked.summary.endswith(f"failover #{attempt.pk} followed")

    evaluate()  # a failed attempt is not retried at once, and is no blocked event either
    assert Event.objects.count() == 3


def test_a_failover_past_its_cooling_period_no_longer_blocks(cluster: Cluster) -> None:
    policy = FailoverPolicy.objects.create(cluster=cluster, writer_hostgroup=10, enabled=True, cooling_period_s=300)
    Event.objects.create(
        cluster=cluster,
        writer_hostgroup=10,
        reader_hostgroup=20,
        kind="failover",
        state="done",
        promoted=True,
        started_at=timezone.now() - timedelta(seconds=301),
    )
    assert why_not(policy, timezone.now()) == ("", False)


def test_only_a_failover_that_promoted_can_be_acknowledged(cluster: Cluster) -> None:
    event = Event.objects.create(
        cluster=cluster, writer_hostgroup=10, reader_hostgroup=20, kind="rejoin", started_at=timezone.now()
    )
    with pytest.raises(actions.ActionRefused, match="promoted nothing"):
        actions.acknowledge(event, None)


# --- the published topology change ---------------------------------------------------------------------------


def test_moving_the_primary_swaps_the_servers_rows_and_publishes(cluster: Cluster) -> None:
    def edit() -> None:
        move_primary(cluster, 10, 20, PRIMARY, REPLICA1, "OFFLINE_HARD", None)

    published = publish_edit(cluster, None, "failover test", edit)
    assert published.version.number == 2
    rows = {
        (r["hostgroup_id"], f"{r['hostname']}:{r['port']}"): (
            r["status"],
            r["weight"],
            r["max_connections"],
            r["max_replication_lag"],
            r["comment"],
        )
        for r in published.version.document["mysql_servers"]
    }
    assert rows == {
        (10, REPLICA1): ("ONLINE", 1, 300, 0, "db-b"),  # the old primary's writer row, the new primary's comment
        (20, REPLICA1): ("ONLINE", 1, 1000, 0, "db-b"),  # the old primary's reader row
        (20, PRIMARY): ("OFFLINE_HARD", 1000, 1000, 30, "db-a"),  # the new primary's former reader row
        (20, REPLICA2): ("ONLINE", 1000, 1000, 0, "db-c"),
    }
    layout = find(published.version.document, 10)
    assert (layout.primary, layout.replicas, layout.kept_out) == (REPLICA1, [REPLICA2], [PRIMARY])
    assert published.carried == []
    assert published.describe().startswith("version 2 published: mysql_servers")


def test_draft_changes_made_before_are_published_with_it_and_named(cluster: Cluster) -> None:
    save_row(Variable(cluster=cluster, variable_name="mysql-max_connections", variable_value="500"), None)
    with transaction.atomic():
        published = publish_edit(
            cluster, None, "t", lambda: move_primary(cluster, 10, 20, PRIMARY, REPLICA2, "ONLINE", None)
        )
    assert published.carried == ["global_variables (variable_name=mysql-max_connections): added"]
    assert "it also carried 1 earlier draft change(s): global_variables" in published.describe()


# --- backend status history ---------------------------------------------------------------------------------


def test_server_transitions_of_fresh_reports_are_kept_once(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    now = timezone.now()
    moves = [
        transition(PRIMARY, 10, now - timedelta(seconds=3), "ONLINE", "SHUNNED", "ping failed 3 times: refused"),
        transition(REPLICA1, 20, now - timedelta(seconds=2), "ONLINE", "SHUNNED", "lag 40 s over 30 s"),
    ]
    send_monitor_report(node("ha-a"), now, [], moves)
    nodes = list(ProxyNode.objects.filter(cluster=cluster))
    history.ingest(nodes, timezone.now())
    history.ingest(nodes, timezone.now())
    stored = list(BackendTransition.objects.order_by("at").values_list("server", "from_status", "to_status", "reason"))
    assert stored == [
        (PRIMARY, "ONLINE", "SHUNNED", "ping failed 3 times: refused"),
        (REPLICA1, "ONLINE", "SHUNNED", "lag 40 s over 30 s"),
    ]

    bad = [{**moves[0], "srv_port": -1}]
    send_monitor_report(node("ha-b"), timezone.now(), [], bad)
    with caplog.at_level(logging.WARNING, logger="fleet.failover"):
        history.ingest(list(ProxyNode.objects.filter(cluster=cluster)), timezone.now())
    assert "node ha-b: server transitions not recorded: stats.server_transitions[0].srv_port" in caplog.text
    assert BackendTransition.objects.count() == 2
    assert history.prune(timezone.now() + history.RETENTION + timedelta(seconds=1)) == 2


def test_steps_explain_themselves_in_the_log_too(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    event = Event.objects.create(
        cluster=cluster, writer_hostgroup=10, reader_hostgroup=20, kind="failover", started_at=timezone.now()
    )
    with caplog.at_level(logging.INFO, logger="fleet.failover"):
        event.record(Step.Name.CHOSEN, "db-b was chosen: it has 0-1-12")
    assert f"failover #{event.pk} chosen: db-b was chosen: it has 0-1-12" in caplog.text
