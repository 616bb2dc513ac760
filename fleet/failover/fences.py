"""Fencing an old primary: after a failover it must take no writes, so the control plane sets ``read_only=1`` on it
at once if it can reach it, and again whenever it comes back (a restarted MariaDB forgets ``SET GLOBAL``), while
the published config keeps it OFFLINE_HARD and out of the writer hostgroup. An operator's rejoin ends the fence.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from fleet.failover.models import Event, FailoverPolicy, Fence, Step
from fleet.failover.servers import Account, Server, ServerError

#: How often a fenced server is checked.
CHECK_EVERY = timedelta(seconds=2)
#: A fenced server's connection attempt gives up after this many seconds.
CONNECT_TIMEOUT = 1


def _seal(server: str, account: Account) -> bool:
    """Make sure ``server`` is read-only; whether it was writable (and is read-only now). ServerError when it cannot
    be reached."""
    with Server(server, account, connect_timeout=CONNECT_TIMEOUT) as conn:
        if int(conn.value("SELECT @@read_only")):
            return False
        conn.set_read_only(True)
        return True


def fence(event: Event, server: str, account: Account) -> Fence:
    """Fence ``server`` (the failed primary of ``event``) and try to make it read-only now; records FENCED."""
    now = timezone.now()
    record, _ = Fence.objects.get_or_create(
        cluster=event.cluster,
        server=server,
        released_at=None,
        defaults={"writer_hostgroup": event.writer_hostgroup, "event": event, "since": now},
    )
    try:
        changed = _seal(server, account)
    except ServerError as error:
        record.checked_at, record.reachable, record.check_error = now, False, str(error)
        record.save(update_fields=["checked_at", "reachable", "check_error"])
        event.record(
            Step.Name.FENCED,
            f"{server} is fenced: the control plane cannot reach it either ({error}). When it comes back it is set "
            f"read_only=1, and it stays out of hostgroup {event.writer_hostgroup} until an operator rejoins it.",
        )
        return record
    record.checked_at, record.reachable, record.read_only, record.check_error = now, True, True, ""
    record.save(update_fields=["checked_at", "reachable", "read_only", "check_error"])
    was = "it was writable" if changed else "it already was read-only"
    event.record(
        Step.Name.FENCED,
        f"{server} is fenced: the control plane still reaches it and set read_only=1 ({was}), so it takes no more "
        f"writes; it stays out of hostgroup {event.writer_hostgroup} until an operator rejoins it.",
    )
    return record


def check_fences(now: datetime | None = None) -> int:
    """Check every active fence not checked for ``CHECK_EVERY``: a server that came back is set read-only again (a
    step on its failover's timeline says so). Returns how many servers were found writable and sealed."""
    now = now or timezone.now()
    due = Fence.objects.filter(released_at__isnull=True).exclude(checked_at__gt=now - CHECK_EVERY)
    sealed = 0
    for record in due.select_related("event", "cluster"):
        account = Account.admin(FailoverPolicy.of(record.cluster, record.writer_hostgroup))
        was_reachable = record.reachable
        try:
            changed = _seal(record.server, account)
        except ServerError as error:
            if was_reachable:
                record.event.record(Step.Name.FENCED, f"{record.server} cannot be reached again ({error}).")
            record.checked_at, record.reachable, record.check_error = now, False, str(error)
            record.save(update_fields=["checked_at", "reachable", "check_error"])
            continue
        if changed:
            sealed += 1
            record.event.record(
                Step.Name.FENCED,
                f"{record.server} came back writable (read_only=0): the control plane set read_only=1. It stays "
                f"out of hostgroup {record.writer_hostgroup} until an operator rejoins it as a replica.",
            )
        elif not was_reachable:
            record.event.record(
                Step.Name.FENCED,
                f"{record.server} came back read-only; it stays out of hostgroup {record.writer_hostgroup} until an "
                "operator rejoins it as a replica.",
            )
        record.checked_at, record.reachable, record.read_only, record.check_error = now, True, True, ""
        record.save(update_fields=["checked_at", "reachable", "read_only", "check_error"])
    return sealed


def release(record: Fence, event: Event) -> None:
    """End the fence: ``event`` (a rejoin) made the server a replica."""
    record.released_at, record.released_by = timezone.now(), event
    record.save(update_fields=["released_at", "released_by"])
