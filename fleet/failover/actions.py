"""What operators do (from the UI and the API): a planned switchover, rejoining a fenced old primary as a replica,
and acknowledging a failover (which ends its cooling period).

A switchover loses nothing: writes are stopped first (the old primary is published OFFLINE_SOFT, so the nodes send
it no new writes and hold them while the writer hostgroup has no writer; transactions in flight finish), then the
old primary is set ``read_only=1`` and its binlog position read, the chosen replica applies up to that position
(``MASTER_GTID_WAIT``), is promoted, and the new topology is published, after which the held writes go to the new
primary. The old primary becomes a replica of the new one. A replica that does not catch up within the policy's
``write_wait_s`` aborts the switchover: the old primary is made writable and published ONLINE again.
"""

from __future__ import annotations

import time
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from fleet.core.drafts import Actor
from fleet.core.models import Cluster, ProxyNode
from fleet.failover import gtid, procedures
from fleet.failover.config_edits import PublishRefused, publish_edit, remove_row, set_status
from fleet.failover.detection import REPORT_FRESH
from fleet.failover.fences import release
from fleet.failover.models import Event, FailoverPolicy, Fence, Step
from fleet.failover.servers import Account, Server, ServerError
from fleet.failover.topology import Topology, find
from proxyapp.report.reader import read_monitor

#: How long the old primary's open write transactions may take to finish once writes are stopped.
DRAIN_S = 2.0
#: How long a switchover waits for the nodes' monitors to see the old primary read-only before removing its row.
RETIRE_WAIT = REPORT_FRESH


class ActionRefused(Exception):
    """An operator action that cannot be done; the message says why (and names the field when one is at fault)."""

    def __init__(self, message: str, field: str = "non_field_errors") -> None:
        super().__init__(message)
        self.field = field


def current_topology(cluster: Cluster, writer_hostgroup: int) -> Topology:
    """The hostgroup's topology in the cluster's latest version; ActionRefused when there is none."""
    latest = cluster.latest_version()
    layout = find(latest.document, writer_hostgroup) if latest is not None else None
    if layout is None:
        raise ActionRefused(f"no published replication hostgroup has writer hostgroup {writer_hostgroup}")
    return layout


def _not_running(cluster: Cluster, writer_hostgroup: int) -> None:
    running = Event.objects.filter(cluster=cluster, writer_hostgroup=writer_hostgroup, state=Event.State.RUNNING)
    if (event := running.first()) is not None:
        raise ActionRefused(f"{event.kind} #{event.pk} of hostgroup {writer_hostgroup} is under way")


# --- switchover -----------------------------------------------------------------------------------------------


def request_switchover(cluster: Cluster, writer_hostgroup: int, target: str, user: Actor) -> Event:
    """Check and record a switchover to ``target`` (host:port); the caller runs it (``run_switchover``, a Celery
    task). ActionRefused naming the field at fault."""
    layout = current_topology(cluster, writer_hostgroup)
    policy = FailoverPolicy.of(cluster, writer_hostgroup)
    old = layout.primary
    if old is None:
        raise ActionRefused(f"no switchover without a primary: {layout.primary_problem}")
    if target not in layout.replicas:
        choices = ", ".join(layout.replicas) or "none"
        raise ActionRefused(
            f"{target} is not a replica of hostgroup {writer_hostgroup} (replicas: {choices})", "target"
        )
    if not policy.replication_user:
        raise ActionRefused(
            f"set the replication account in hostgroup {writer_hostgroup}'s failover settings: the old primary "
            f"{old} has no replication login of its own to become a replica with",
            "replication_user",
        )
    with transaction.atomic():
        _not_running(cluster, writer_hostgroup)
        return Event.objects.create(
            cluster=cluster,
            writer_hostgroup=writer_hostgroup,
            reader_hostgroup=layout.reader_hostgroup,
            kind=Event.Kind.SWITCHOVER,
            requested_by=user if user is not None and user.is_authenticated else None,
            old_primary=old,
            new_primary=target,
            started_at=timezone.now(),
        )


def _wait_applied(cluster: Cluster, version: int, deadline: float) -> tuple[list[str], list[str], list[str]]:
    """Wait until every node with a fresh report runs ``version`` (or the deadline); (applied, late, silent)."""
    while True:
        now = timezone.now()
        nodes = list(ProxyNode.objects.filter(cluster=cluster))
        live = [n for n in nodes if n.last_heartbeat is not None and now - n.last_heartbeat <= REPORT_FRESH]
        applied = [n.name for n in live if (n.applied_version or 0) >= version]
        late = [n.name for n in live if n.name not in applied]
        silent = [n.name for n in nodes if n not in live]
        if not late or time.monotonic() >= deadline:
            return applied, late, silent
        time.sleep(0.1)


def _abort(event: Event, layout: Topology, policy: FailoverPolicy, user: Actor, why: str) -> None:
    """Give writes back to the old primary: read_only=0 and ONLINE again; the event fails with ``why``."""
    old = event.old_primary
    try:
        with Server(old, Account.admin(policy)) as server:
            server.set_read_only(False)
        undone = f"{old} was set read_only=0"
    except ServerError as error:
        undone = f"{old} could not be set writable again ({error})"

    def edit() -> None:
        set_status(event.cluster, layout.writer_hostgroup, old, "ONLINE", user, layout.writer_hostgroup)

    try:
        published = publish_edit(event.cluster, user, f"switchover #{event.pk} aborted: {old} takes writes again", edit)
        undone += f" and {published.describe()}"
    except PublishRefused as error:
        undone += f", but it could not be published ONLINE again: {error}"
    event.record(Step.Name.RESUMED, f"{undone}.", ok=False)
    event.finish(Event.State.FAILED, f"switchover to {event.new_primary} aborted: {why}")


def _monitors_seeing_read_only(cluster: Cluster, server: str) -> tuple[list[str], list[str]]:
    """The nodes with a fresh report whose monitor sees ``server`` read-only, and those whose does not (yet)."""
    now = timezone.now()
    seeing, waiting = [], []
    for node in ProxyNode.objects.filter(cluster=cluster):
        if node.last_heartbeat is None or now - node.last_heartbeat > REPORT_FRESH:
            continue
        try:
            rows = [row for row in read_monitor(node.last_report) or [] if row.server == server]
        except ValueError:
            rows = []
        (seeing if rows and all(row.read_only is True for row in rows) else waiting).append(node.name)
    return seeing, waiting


def _retire_old_writer(event: Event, layout: Topology, user: Actor) -> None:
    """Remove the old primary's OFFLINE_SOFT writer row once every node's monitor has seen it read-only (until
    then a node whose monitor still takes it for the writer would send it writes); records PUBLISHED."""
    old, deadline = event.old_primary, time.monotonic() + RETIRE_WAIT.total_seconds()
    while True:
        seeing, waiting = _monitors_seeing_read_only(event.cluster, old)
        if not waiting or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if waiting:
        event.record(
            Step.Name.PUBLISHED,
            f"{old} stays OFFLINE_SOFT in hostgroup {layout.writer_hostgroup}: {', '.join(waiting)} did not report "
            f"it read-only within {RETIRE_WAIT.seconds} s. It takes no writes (read_only=1); remove the row later.",
        )
        return

    def drop() -> None:
        remove_row(event.cluster, layout.writer_hostgroup, old, user)

    seen = f"every node's monitor sees {old} read-only ({', '.join(seeing) or 'no node reports'})"
    try:
        published = publish_edit(event.cluster, user, f"switchover #{event.pk}: {old} leaves the writers", drop)
    except PublishRefused as error:
        event.record(Step.Name.PUBLISHED, f"{seen}, but its writer row could not be removed: {error}", ok=False)
        return
    event.record(
        Step.Name.PUBLISHED, f"{published.describe()}: {seen}, so it leaves hostgroup {layout.writer_hostgroup}."
    )


def run_switchover(event: Event) -> None:
    """Run a requested switchover to its end (DONE, or FAILED with the old primary back in charge)."""
    if event.state != Event.State.RUNNING or event.steps.exists():
        return  # already run (a message delivered twice)
    cluster, old, new = event.cluster, event.old_primary, event.new_primary
    policy = FailoverPolicy.of(cluster, event.writer_hostgroup)
    account, user = Account.admin(policy), event.requested_by
    deadline = time.monotonic() + policy.write_wait_s
    layout = current_topology(cluster, event.writer_hostgroup)
    if layout.primary != old or new not in layout.replicas:
        changed = f"the topology changed since it was requested (the primary is {layout.primary})"
        event.record(Step.Name.FAILED, changed, ok=False)
        event.finish(Event.State.FAILED, "the topology changed before the switchover started")
        return

    def soft() -> None:
        set_status(cluster, layout.writer_hostgroup, old, "OFFLINE_SOFT", user, layout.writer_hostgroup)

    try:
        held = publish_edit(cluster, user, f"switchover #{event.pk}: writes held while {new} takes over", soft)
    except PublishRefused as error:
        event.record(Step.Name.WRITES_STOPPED, f"writes could not be stopped: {error}", ok=False)
        event.finish(Event.State.FAILED, "the switchover could not stop writes (nothing changed)")
        return
    applied, late, silent = _wait_applied(cluster, held.version.number, deadline)
    nodes = f"applied by {', '.join(applied) or 'no node'}"
    if silent:
        nodes += f"; not waited for (no fresh report): {', '.join(silent)}"
    if late:
        event.record(
            Step.Name.WRITES_STOPPED,
            f"{held.describe()}; {nodes}; not applied within {policy.write_wait_s} s by {', '.join(late)}",
            ok=False,
        )
        _abort(event, layout, policy, user, f"nodes {', '.join(late)} did not apply the held writes in time")
        return
    try:
        with Server(old, account) as server:
            drain_until = time.monotonic() + DRAIN_S
            while server.open_write_transactions() and time.monotonic() < drain_until:
                time.sleep(0.05)
            still_open = server.open_write_transactions()
            server.set_read_only(True)
            position = server.state().binlog_pos
    except ServerError as error:
        event.record(Step.Name.WRITES_STOPPED, f"{held.describe()}; {nodes}; then {error}", ok=False)
        _abort(event, layout, policy, user, f"the old primary could not be made read-only ({error})")
        return
    cut = f"; {still_open} write transaction(s) still open were refused at commit" if still_open else ""
    event.record(
        Step.Name.WRITES_STOPPED,
        f"{held.describe()} ({old} OFFLINE_SOFT: the nodes send it no new writes and hold them); {nodes}. "
        f"Then {old} was set read_only=1 at {gtid.render(position) or 'no transactions'}{cut}.",
        data={"version": held.version.number, "position": gtid.render(position), "applied": applied},
    )
    remaining = max(deadline - time.monotonic(), 0.1)
    started = time.monotonic()
    try:
        with Server(new, account, wait=remaining) as server:
            caught_up = server.wait_for(position, remaining)
    except ServerError as error:
        caught_up, problem = False, str(error)
    else:
        problem = f"it did not apply {gtid.render(position)} within {remaining:.1f} s"
    if not caught_up:
        event.record(Step.Name.CAUGHT_UP, f"{new} did not catch up: {problem}", ok=False)
        _abort(event, layout, policy, user, f"{new} did not catch up with {old}")
        return
    event.record(
        Step.Name.CAUGHT_UP,
        f"{new} applied everything {old} had ({gtid.render(position) or 'no transactions'}) in "
        f"{time.monotonic() - started:.2f} s: nothing is lost.",
    )
    if not procedures.promote(event, new, account):
        _abort(event, layout, policy, user, f"{new} could not be promoted")
        return
    others = [name for name in layout.replicas if name != new]
    procedures.repoint(event, others, new, account, Account.replication(policy), demoted=(old, position))
    published = procedures.publish_move(event, layout, old, new, "ONLINE", user, old_writer_status="OFFLINE_SOFT")
    procedures.check_replication(event, [*others, old], new, account)
    if published:
        _retire_old_writer(event, layout, user)
        event.finish(Event.State.DONE, f"{new} replaced {old} as the primary of hostgroup {event.writer_hostgroup}")
    else:
        event.finish(Event.State.FAILED, f"{new} was promoted but the new topology could not be published")


# --- rejoin and acknowledge -------------------------------------------------------------------------------------


def rejoin(cluster: Cluster, writer_hostgroup: int, server: str, user: Actor) -> Event:
    """Make a fenced old primary a replica of the current primary and publish it ONLINE in the reader hostgroup.

    Refused (ActionRefused) when it is not fenced, when there is no primary or replication account, and when it
    holds transactions the primary lacks (replicating would diverge: it must be rebuilt); a failed attempt leaves
    it fenced and the event says why.
    """
    record = Fence.objects.filter(cluster=cluster, server=server, released_at__isnull=True).first()
    if record is None:
        raise ActionRefused(f"{server} is not fenced: only a fenced old primary is rejoined", "server")
    layout = current_topology(cluster, writer_hostgroup)
    primary = layout.primary
    if primary is None:
        raise ActionRefused(f"no primary to replicate from: {layout.primary_problem}")
    policy = FailoverPolicy.of(cluster, writer_hostgroup)
    login = Account.replication(policy)
    if login is None:
        raise ActionRefused(
            f"set the replication account in hostgroup {writer_hostgroup}'s failover settings: {server} has no "
            "replication login of its own",
            "replication_user",
        )
    with transaction.atomic():
        _not_running(cluster, writer_hostgroup)
        event = Event.objects.create(
            cluster=cluster,
            writer_hostgroup=writer_hostgroup,
            reader_hostgroup=layout.reader_hostgroup,
            kind=Event.Kind.REJOIN,
            requested_by=user if user is not None and user.is_authenticated else None,
            old_primary=server,
            new_primary=primary,
            started_at=timezone.now(),
        )
    account = Account.admin(policy)
    try:
        with Server(server, account) as mine, Server(primary, account) as theirs:
            own, reference = mine.state().position, theirs.state().position
            extra = {**gtid.conflicts(own, reference), **gtid.ahead(own, reference)}
            if extra:
                listed = ", ".join(
                    f"{gtid_} (the primary is at {theirs_ or 'nothing'})" for gtid_, theirs_ in extra.values()
                )
                raise ActionRefused(
                    f"{server} holds transactions {primary} does not have: {listed}. Replicating would diverge; "
                    f"rebuild {server} from a copy of {primary}"
                )
            mine.set_read_only(True)
            mine.replicate_from(primary, login, own)
            target = theirs.state().binlog_pos
            state = mine.wait_replicating(target, procedures.REPLICATION_CHECK_S)
            if not state.caught_up(target):
                mine.run("STOP SLAVE")
                hint = (
                    f" ({server}'s position {gtid.render(own)} is not in {primary}'s binlog: it has transactions the "
                    "primary never got; rebuild it)"
                    if "1236" in state.last_error
                    else ""
                )
                behind = gtid.describe_gaps(gtid.missing(state.position, target), state.position, target)
                raise ActionRefused(
                    f"replication from {primary} did not catch up within {procedures.REPLICATION_CHECK_S} s: "
                    f"{state.threads()}{'; ' + behind if behind else ''}{hint}"
                )
    except (ServerError, ActionRefused) as error:
        event.record(Step.Name.REJOINED, f"{server} was not rejoined: {error}. It stays fenced.", ok=False)
        event.finish(Event.State.FAILED, f"{server} could not rejoin")
        raise ActionRefused(str(error)) from None
    event.record(
        Step.Name.REJOINED,
        f"{server} {state.threads()}, from its position {gtid.render(own) or 'nothing'} (read_only=1, "
        "MASTER_USE_GTID=slave_pos).",
    )

    def online() -> None:
        set_status(cluster, layout.reader_hostgroup, server, "ONLINE", user, layout.writer_hostgroup)

    try:
        published = publish_edit(cluster, user, f"rejoin #{event.pk}: {server} is a replica of {primary}", online)
    except PublishRefused as error:
        event.record(Step.Name.PUBLISHED, f"it could not be published ONLINE: {error}", ok=False)
        event.finish(Event.State.FAILED, f"{server} replicates from {primary} but could not be published ONLINE")
        release(record, event)
        return event
    serving = f"{server} serves reads in hostgroup {layout.reader_hostgroup}"
    event.record(Step.Name.PUBLISHED, f"{published.describe()}: {serving}.")
    release(record, event)
    event.finish(Event.State.DONE, f"{server} rejoined as a replica of {primary}")
    return event


def acknowledge(event: Event, user: Actor, now: datetime | None = None) -> Event:
    """An operator saw ``event`` (a failover): its cooling period no longer blocks another failover."""
    if event.kind != Event.Kind.FAILOVER or not event.promoted:
        raise ActionRefused(f"{event.kind} #{event.pk} promoted nothing: there is nothing to acknowledge")
    if event.acknowledged_at is not None:
        return event
    event.acknowledged_at = now or timezone.now()
    event.acknowledged_by = user if user is not None and user.is_authenticated else None
    event.save(update_fields=["acknowledged_at", "acknowledged_by"])
    who = event.acknowledged_by.get_username() if event.acknowledged_by else "an operator"
    event.record(Step.Name.ACKNOWLEDGED, f"acknowledged by {who}: its cooling period no longer blocks a failover")
    return event
