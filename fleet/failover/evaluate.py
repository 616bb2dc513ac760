"""One evaluation round (Celery beat runs it every ``FAILOVER_EVALUATE_SECONDS``): for every replication hostgroup
of every cluster's latest version, what the nodes say of its primary (fail over when a majority says dead), then the
fences on old primaries, the first write on new primaries, and the nodes' backend status history."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from fleet.core.models import Cluster
from fleet.failover import detection, history, procedures
from fleet.failover.failover import handle_dead_primary, primary_alive
from fleet.failover.fences import check_fences
from fleet.failover.models import Event, FailoverPolicy, Step
from fleet.failover.servers import Account
from fleet.failover.topology import replication_pairs, topology

#: How long after a promotion the new primary is watched for its first write.
FIRST_WRITE_WATCH = timedelta(minutes=10)
#: A running event older than this lost its worker (a crash): it is marked failed, so the hostgroup is not blocked.
STUCK_AFTER = timedelta(minutes=10)


def evaluate(now: datetime | None = None) -> list[str]:
    """One round; returns what it did, for the log."""
    now = now or timezone.now()
    notes = []
    stuck = Event.objects.filter(state=Event.State.RUNNING, started_at__lt=now - STUCK_AFTER)
    for event in stuck:
        event.record(Step.Name.FAILED, f"no progress for {STUCK_AFTER}: its worker stopped", ok=False)
        event.finish(Event.State.FAILED, f"{event.kind} lost its worker")
    for cluster in Cluster.objects.all():
        nodes = list(cluster.nodes.all())
        history.ingest(nodes, now)
        latest = cluster.latest_version()
        if latest is None:
            continue
        for pair in replication_pairs(latest.document):
            layout = topology(latest.document, pair)
            primary = layout.primary
            if primary is None:
                continue
            votes = detection.votes(nodes, primary, (layout.writer_hostgroup, layout.reader_hostgroup), now)
            if not votes.dead:
                primary_alive(cluster, layout, primary, votes)
                continue
            policy = FailoverPolicy.of(cluster, layout.writer_hostgroup)
            event = handle_dead_primary(cluster, layout, primary, votes, policy, now)
            if event is not None:
                notes.append(f"{event}: {event.summary}")
    if sealed := check_fences(now):
        notes.append(f"{sealed} fenced server(s) came back writable and were set read-only")
    watched = Event.objects.filter(promoted=True, first_write_at__isnull=True, started_at__gt=now - FIRST_WRITE_WATCH)
    for event in watched.select_related("cluster"):
        policy = FailoverPolicy.of(event.cluster, event.writer_hostgroup)
        if procedures.watch_first_write(event, Account.admin(policy)):
            notes.append(f"{event}: first write seen on {event.new_primary}")
    return notes
