"""Automatic failover of a replication hostgroup whose primary a majority of the cluster's nodes report dead.

``handle_dead_primary`` decides: fail over (claiming the hostgroup, so that two evaluations never both do), or
record once why not (failover off, the cooling period of an earlier failover that nobody acknowledged). ``run``
does it, each step on the event's timeline: detected (the nodes' votes), fenced (the old primary), chosen (the
replicas' GTID positions and why this one), promoted, replicas repointed, published, replication checked; the
first write on the new primary is recorded later by the evaluation that sees it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction

from fleet.core.models import Cluster
from fleet.failover import procedures
from fleet.failover.choice import choose, preference
from fleet.failover.detection import Votes
from fleet.failover.fences import fence
from fleet.failover.models import Event, FailoverPolicy, Step
from fleet.failover.servers import Account
from fleet.failover.topology import OFFLINE_HARD, Topology

#: A failover that failed before promoting anything is tried again after this long.
RETRY_AFTER = timedelta(seconds=30)


def why_not(policy: FailoverPolicy, now: datetime) -> tuple[str, bool]:
    """Why the hostgroup must not fail over now, and whether that is worth a (blocked) event; ("", False) when it
    may."""
    if not policy.enabled:
        return (
            f"failover is off for hostgroup {policy.writer_hostgroup}: the nodes follow read_only only (as "
            "ProxySQL does); turn it on in the hostgroup's failover settings to promote a replica automatically",
            True,
        )
    events = Event.objects.filter(cluster=policy.cluster, writer_hostgroup=policy.writer_hostgroup)
    cooling = timedelta(seconds=policy.cooling_period_s)
    failovers = events.filter(kind=Event.Kind.FAILOVER)
    last = (
        failovers.filter(promoted=True, acknowledged_at__isnull=True, started_at__gt=now - cooling)
        .order_by("-started_at")
        .first()
    )
    if last is not None:
        return (
            f"failover #{last.pk} promoted {last.new_primary} at {last.started_at:%H:%M:%S} and its cooling period "
            f"({policy.cooling_period_s} s) lasts until {last.started_at + cooling:%H:%M:%S}; an operator who "
            f"acknowledges #{last.pk} allows another failover at once",
            True,
        )
    if failovers.filter(state=Event.State.FAILED, promoted=False, started_at__gt=now - RETRY_AFTER).exists():
        return "a failover failed moments ago without promoting anything; it is tried again shortly", False
    return "", False


def _open_blocked(cluster: Cluster, writer_hostgroup: int, primary: str) -> Event | None:
    return Event.objects.filter(
        cluster=cluster,
        writer_hostgroup=writer_hostgroup,
        state=Event.State.BLOCKED,
        finished_at__isnull=True,
        old_primary=primary,
    ).first()


def _block(cluster: Cluster, topology: Topology, primary: str, votes: Votes, reason: str, now: datetime) -> Event:
    """Record (once per outage, and again when the reason changes) that a dead primary is not failed over."""
    event = _open_blocked(cluster, topology.writer_hostgroup, primary)
    if event is None:
        event = Event.objects.create(
            cluster=cluster,
            writer_hostgroup=topology.writer_hostgroup,
            reader_hostgroup=topology.reader_hostgroup,
            kind=Event.Kind.FAILOVER,
            state=Event.State.BLOCKED,
            old_primary=primary,
            started_at=now,
            summary=f"not failed over: {reason}",
        )
        event.record(Step.Name.DETECTED, votes.describe(), data=votes.as_data())
        event.record(Step.Name.BLOCKED, f"Not failing over: {reason}.", ok=False)
    elif not event.summary.endswith(reason):
        event.record(Step.Name.BLOCKED, f"Still not failing over: {reason}.", ok=False)
        event.summary = f"not failed over: {reason}"
    event.last_seen_at = now
    event.save(update_fields=["last_seen_at", "summary"])
    return event


def primary_alive(cluster: Cluster, topology: Topology, primary: str, votes: Votes) -> None:
    """The primary is not (or no longer) reported dead by a majority: close a blocked event about it."""
    event = _open_blocked(cluster, topology.writer_hostgroup, primary)
    if event is not None:
        event.record(Step.Name.DETECTED, f"No longer a majority: {votes.describe()}.")
        reason = event.summary.removeprefix("not failed over: ")
        event.finish(Event.State.BLOCKED, f"{primary} was not failed over ({reason}); it is reported up again")


def handle_dead_primary(
    cluster: Cluster, topology: Topology, primary: str, votes: Votes, policy: FailoverPolicy, now: datetime
) -> Event | None:
    """A majority reports ``primary`` dead: fail over (the event), or record why not (None)."""
    base = Event.objects.filter(cluster=cluster, writer_hostgroup=topology.writer_hostgroup)
    if base.filter(state=Event.State.RUNNING).exists():
        return None  # a failover or switchover of this hostgroup is under way
    reason, worth_an_event = why_not(policy, now)
    if reason:
        if worth_an_event:
            _block(cluster, topology, primary, votes, reason, now)
        return None
    with transaction.atomic():
        FailoverPolicy.objects.select_for_update().filter(pk=policy.pk).first()  # one claimant at a time
        if base.filter(state=Event.State.RUNNING).exists() or why_not(policy, now)[0]:
            return None
        event = Event.objects.create(
            cluster=cluster,
            writer_hostgroup=topology.writer_hostgroup,
            reader_hostgroup=topology.reader_hostgroup,
            kind=Event.Kind.FAILOVER,
            old_primary=primary,
            started_at=now,
        )
    blocked = _open_blocked(cluster, topology.writer_hostgroup, primary)
    if blocked is not None:
        blocked.finish(Event.State.BLOCKED, f"{blocked.summary}; failover #{event.pk} followed")
    run(event, policy, topology, votes)
    return event


def run(event: Event, policy: FailoverPolicy, topology: Topology, votes: Votes) -> None:
    """Fail over ``event``'s hostgroup: fence, choose, promote, repoint, publish, check."""
    old = event.old_primary
    event.record(Step.Name.DETECTED, votes.describe() + ".", data=votes.as_data())
    account = Account.admin(policy)
    fence(event, old, account)
    order, basis = preference(topology, policy)
    choice = choose(procedures.inspect(order, account), basis)
    event.record(Step.Name.CHOSEN, choice.explanation, ok=choice.chosen is not None, data=choice.data)
    if choice.chosen is None:
        event.finish(Event.State.FAILED, f"{old} is down and no replica could be promoted")
        return
    new = choice.chosen
    if not procedures.promote(event, new, account):
        event.finish(Event.State.FAILED, f"{old} is down and {new} could not be promoted")
        return
    others = [name for name in order if name != new]
    procedures.repoint(event, others, new, account, Account.replication(policy))
    published = procedures.publish_move(event, topology, old, new, OFFLINE_HARD, None)
    procedures.check_replication(event, others, new, account)
    if published:
        replaced = f"{new} replaced {old} (down) as the primary of hostgroup {event.writer_hostgroup}"
        event.finish(Event.State.DONE, replaced)
    else:
        event.finish(
            Event.State.FAILED,
            f"{new} was promoted in place of {old} (down), but the new topology could not be published",
        )
