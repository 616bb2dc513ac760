"""The steps failover and switchover share, each recording itself on the event's timeline in words: inspecting the
replicas, promoting one, repointing the others, publishing the moved primary and checking replication.

Servers are handled in parallel threads that touch only MariaDB (never Django's database), each call bounded by the
timeouts of ``fleet.failover.servers``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from django.utils import timezone

from fleet.core.drafts import Actor
from fleet.failover import gtid
from fleet.failover.choice import Candidate
from fleet.failover.config_edits import PublishRefused, move_primary, publish_edit
from fleet.failover.models import Event, Step
from fleet.failover.servers import Account, ReplicationState, Server, ServerError
from fleet.failover.topology import Topology

#: Seconds the chosen replica may take to apply what it has received before it is promoted.
CATCH_UP_S = 3
#: Seconds a repointed replica may take to show both replication threads running.
REPLICATION_CHECK_S = 5

T = TypeVar("T")


def parallel(names: Iterable[str], work: Callable[[str], T]) -> dict[str, T]:
    """``work(name)`` for every name at once; the results by name, in the names' order."""
    names = list(names)
    if not names:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(names))) as pool:
        return dict(zip(names, pool.map(work, names), strict=True))


def inspect(names: Iterable[str], account: Account) -> list[Candidate]:
    """Each replica's state for the choice; one that cannot be reached, or replicates from nobody, says why."""

    def look(name: str) -> Candidate:
        try:
            with Server(name, account) as server:
                state = server.state()
        except ServerError as error:
            return Candidate(name, None, f"it cannot be reached ({error})")
        if state.master is None:
            return Candidate(name, state, "it replicates from nobody (not a replica)")
        return Candidate(name, state)

    return list(parallel(names, look).values())


def promote(event: Event, new: str, account: Account) -> bool:
    """Promote ``new`` after it applied what it had received (up to ``CATCH_UP_S``); records PROMOTED (or FAILED)
    and the new primary's position on the event. Whether it was promoted."""
    try:
        with Server(new, account, wait=CATCH_UP_S) as server:
            before = server.state()
            pending = gtid.ahead(before.io_pos, before.position)
            applied = server.wait_for(before.io_pos, CATCH_UP_S) if pending else True
            position = server.promote()
            read_only = server.state().read_only
    except ServerError as error:
        event.record(Step.Name.PROMOTED, f"{new} could not be promoted: {error}", ok=False)
        return False
    if pending and applied:
        relay = f"it first applied the rest of what it had received (up to {gtid.render(before.io_pos)}); "
    elif pending:
        relay = (
            f"it could not apply everything it had received within {CATCH_UP_S} s (received "
            f"{gtid.render(before.io_pos)}, applied {gtid.render(before.position)}): the rest is lost; "
        )
    else:
        relay = ""
    detail = (
        f"{new} was promoted: {relay}STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only=0. It is now read_only="
        f"{int(read_only)} at {gtid.render(position) or 'no transactions'}, the primary of hostgroup "
        f"{event.writer_hostgroup}."
    )
    event.new_primary, event.promoted, event.promoted_position = new, True, gtid.render(position)
    event.save(update_fields=["new_primary", "promoted", "promoted_position"])
    event.record(
        Step.Name.PROMOTED,
        detail,
        ok=not read_only,
        data={"server": new, "position": gtid.render(position), "read_only": read_only},
    )
    return True


def repoint(
    event: Event,
    replicas: Iterable[str],
    new: str,
    account: Account,
    login: Account | None,
    demoted: tuple[str, gtid.Position] | None = None,
) -> None:
    """Point ``replicas`` (keeping their replication login) and ``demoted`` (an old primary with the position it
    starts from, with ``login``) at ``new``: CHANGE MASTER TO ... MASTER_USE_GTID=slave_pos, START SLAVE. Records
    REPOINTED."""
    starts: dict[str, gtid.Position | None] = {name: None for name in replicas}
    if demoted is not None:
        starts[demoted[0]] = demoted[1]

    def move(name: str) -> str:
        start = starts[name]
        try:
            with Server(name, account) as server:
                server.replicate_from(new, login if start is not None else None, start)
        except ServerError as error:
            return f"{name} could not be repointed: {error}"
        where = f"gtid_slave_pos set to its own position {gtid.render(start)}, " if start is not None else ""
        return f"{name} replicates from {new} ({where}MASTER_USE_GTID=slave_pos)"

    if not starts:
        event.record(Step.Name.REPOINTED, f"no other replica to point at {new}")
        return
    outcomes = parallel(starts, move)
    failed = [text for text in outcomes.values() if "could not" in text]
    event.record(Step.Name.REPOINTED, "; ".join(outcomes.values()) + ".", ok=not failed, data={"servers": list(starts)})


def publish_move(
    event: Event,
    topology: Topology,
    old: str,
    new: str,
    old_status: str,
    user: Actor,
    old_writer_status: str | None = None,
) -> bool:
    """Publish ``new`` in the writer hostgroup and ``old`` in the reader hostgroup with ``old_status`` (and, with
    ``old_writer_status``, still in the writer hostgroup with that status); records PUBLISHED. Whether a version
    was published."""
    comment = f"{event.kind} #{event.pk}: {new} replaces {old} as the primary of hostgroup {topology.writer_hostgroup}"

    def edit() -> None:
        move_primary(
            event.cluster,
            topology.writer_hostgroup,
            topology.reader_hostgroup,
            old,
            new,
            old_status,
            user,
            old_writer_status,
        )

    try:
        published = publish_edit(event.cluster, user, comment, edit)
    except PublishRefused as error:
        event.record(
            Step.Name.PUBLISHED,
            f"the new topology could not be published: {error}. The nodes' monitors still see {new} with "
            f"read_only=0 and move it into hostgroup {topology.writer_hostgroup}; fix the draft and publish.",
            ok=False,
        )
        return False
    Event.objects.filter(pk=event.pk).update(version=published.version)
    event.version = published.version
    lingering = (
        f", and stays {old_writer_status} in hostgroup {topology.writer_hostgroup} until every node's monitor has "
        "seen it read-only (so that no node takes it for the writer meanwhile)"
        if old_writer_status
        else ""
    )
    event.record(
        Step.Name.PUBLISHED,
        f"{published.describe()}. {new} is the writer of hostgroup {topology.writer_hostgroup}; {old} is "
        f"{old_status} in hostgroup {topology.reader_hostgroup}{lingering}. The nodes apply it as it reaches them.",
        data={"version": published.version.number, "changes": published.changes, "carried": published.carried},
    )
    return True


def check_replication(event: Event, servers: Iterable[str], primary: str, account: Account) -> None:
    """Wait (up to ``REPLICATION_CHECK_S``) for ``servers`` to replicate from ``primary`` and reach its position of
    now; records REPLICATING."""
    names = list(servers)
    if not names:
        return
    try:
        with Server(primary, account) as conn:
            target = conn.state().binlog_pos
    except ServerError as error:
        event.record(Step.Name.REPLICATING, f"replication could not be checked: {error}", ok=False)
        return

    def check(name: str) -> ReplicationState | str:
        try:
            with Server(name, account) as server:
                return server.wait_replicating(target, REPLICATION_CHECK_S)
        except ServerError as error:
            return str(error)

    results = parallel(names, check)
    lines, healthy = [], True
    for name, result in results.items():
        if isinstance(result, str):
            lines.append(f"{name} could not be checked: {result}")
            healthy = False
            continue
        ok = result.caught_up(target) and result.master == primary
        healthy = healthy and ok
        reached = "" if ok else f" short of {primary}'s {gtid.render(target)}"
        lines.append(f"{name} {result.threads()}, at {gtid.render(result.position) or 'no transactions'}{reached}")
    event.record(Step.Name.REPLICATING, "; ".join(lines) + ".", ok=healthy)


def watch_first_write(event: Event, account: Account) -> bool:
    """Whether the new primary's binlog moved past its position at promotion (a client wrote through it); records
    FIRST_WRITE the first time it has."""
    try:
        with Server(event.new_primary, account, connect_timeout=1) as server:
            now = gtid.parse(server.value("SELECT @@gtid_binlog_pos"))
    except ServerError:
        return False
    start = gtid.parse(event.promoted_position)
    if not gtid.ahead(now, start):
        return False
    seen = timezone.now()
    if not Event.objects.filter(pk=event.pk, first_write_at__isnull=True).update(first_write_at=seen):
        return False  # another evaluation saw it first
    event.record(
        Step.Name.FIRST_WRITE,
        f"{event.new_primary} took writes: its binlog moved from {event.promoted_position or 'nothing'} to "
        f"{gtid.render(now)} (checked every second).",
        data={"from": event.promoted_position, "to": gtid.render(now)},
    )
    return True
