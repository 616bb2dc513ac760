"""Publishing a topology change: the cluster's draft ``mysql_servers`` rows are edited (through
``fleet.core.drafts``, audited) and the draft is published (``fleet.core.publishing.publish``), in one transaction.

A primary moves by swapping servers between rows: the new primary takes the old primary's writer row (its weight,
connection limits and other attributes) and its reader row, and the old primary takes the new primary's former
reader row, with the status asked for (ONLINE as a replica after a switchover, OFFLINE_HARD while fenced after a
failover). A server keeps its comment wherever it goes. The draft's other unpublished changes, if any, are published
with it, and the returned description says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from fleet.core import publishing
from fleet.core.drafts import Actor, delete_row, save_row
from fleet.core.models import Cluster, ConfigVersion, Server
from fleet.failover.models import parse_server, server_name
from proxyapp.config.document import ConfigError

_IDENTITY = ("hostgroup_id", "hostname", "port", "comment", "status")


@dataclass(frozen=True)
class Published:
    """A version published for a topology change, and what it changed in words."""

    version: ConfigVersion
    changes: list[str]
    carried: list[str]  # the draft's earlier unpublished changes that went out with it

    def describe(self) -> str:
        """ "version 7 published: ...; it also carried 2 earlier draft changes: ..."."""
        text = f"version {self.version.number} published: {'; '.join(self.changes) or 'no server rows changed'}"
        if self.carried:
            text += f"; it also carried {len(self.carried)} earlier draft change(s): {'; '.join(self.carried)}"
        return text


class PublishRefused(Exception):
    """The draft could not be published (ConfigError from the draft's other rows, or nothing to publish)."""


def _rows(cluster: Cluster, hostgroup: int) -> dict[str, Any]:
    return {server_name(r.hostname, r.port): r for r in Server.objects.filter(cluster=cluster, hostgroup_id=hostgroup)}


def _attributes(row: Any) -> dict[str, Any]:
    return {c: getattr(row, c) for c in Server.column_names() if c not in _IDENTITY}


def _describe(change: publishing.RowChange) -> str:
    if change.kind == "changed":
        columns = ", ".join(f"{c} {change.before.get(c)!r} -> {change.after.get(c)!r}" for c in change.columns)
        return f"{change.table} ({change.key}): {columns}"
    return f"{change.table} ({change.key}): {change.kind}"


def publish_edit(cluster: Cluster, user: Actor, comment: str, edit: Any) -> Published:
    """Run ``edit()`` (draft changes) and publish the draft, all in one transaction; PublishRefused (and nothing
    changed) when the draft cannot be published."""
    previous = cluster.latest_version()
    try:
        carried = [_describe(c) for c in publishing.draft_changes(cluster)]
    except ConfigError as error:
        raise PublishRefused(f"the draft does not validate: {'; '.join(error.errors)}") from None
    try:
        with transaction.atomic():
            edit()
            version = publishing.publish(cluster, user, comment)
    except ConfigError as error:
        raise PublishRefused(f"the draft does not validate: {'; '.join(error.errors)}") from None
    except publishing.NothingToPublish as error:
        raise PublishRefused(str(error)) from None
    changes = [_describe(c) for c in publishing.diff_versions(previous, version)] if previous else []
    carried_keys = set(carried)
    return Published(version, [c for c in changes if c not in carried_keys], carried)


def move_primary(
    cluster: Cluster,
    writer_hg: int,
    reader_hg: int,
    old: str,
    new: str,
    old_status: str,
    user: Actor,
    old_writer_status: str | None = None,
) -> None:
    """Edit the draft so that ``new`` is the writer hostgroup's server in ``old``'s place, and ``old`` is in the
    reader hostgroup with ``old_status``, swapping the two servers' rows (call inside a transaction). With
    ``old_writer_status``, ``old`` also keeps a writer row with that status (removed later by ``remove_row``)."""
    writers, readers = _rows(cluster, writer_hg), _rows(cluster, reader_hg)
    comments = {
        name: next((r.comment for r in (writers.get(name), readers.get(name)) if r is not None and r.comment), "")
        for name in (old, new)
    }
    writer_base = writers.get(old) or writers.get(new)
    old_reader_base = readers.get(new) or writer_base
    new_reader_base = readers.get(old)
    for row in (writers.get(old), writers.get(new), readers.get(old), readers.get(new)):
        if row is not None:
            delete_row(row, user)

    def add(hostgroup: int, name: str, base: Any, status: str) -> None:
        host, port = parse_server(name)
        attributes = _attributes(base) if base is not None else {}
        save_row(
            Server(
                cluster=cluster,
                hostgroup_id=hostgroup,
                hostname=host,
                port=port,
                comment=comments[name],
                status=status,
                **attributes,
            ),
            user,
        )

    add(writer_hg, new, writer_base, "ONLINE")
    if old_writer_status is not None:
        add(writer_hg, old, writer_base, old_writer_status)
    if new_reader_base is not None:
        add(reader_hg, new, new_reader_base, "ONLINE")
    add(reader_hg, old, old_reader_base, old_status)


def set_status(cluster: Cluster, hostgroup: int, server: str, status: str, user: Actor, base_hostgroup: int) -> None:
    """Give ``server``'s row in ``hostgroup`` ``status``; a missing row is created from its row in
    ``base_hostgroup`` (call inside a transaction)."""
    row = _rows(cluster, hostgroup).get(server)
    if row is None:
        base = _rows(cluster, base_hostgroup).get(server)
        host, port = parse_server(server)
        attributes = _attributes(base) if base is not None else {}
        comment = base.comment if base is not None else ""
        row = Server(cluster=cluster, hostgroup_id=hostgroup, hostname=host, port=port, comment=comment, **attributes)
    row.status = status
    save_row(row, user)


def remove_row(cluster: Cluster, hostgroup: int, server: str, user: Actor) -> None:
    """Delete ``server``'s row in ``hostgroup`` from the draft, if it has one (call inside a transaction)."""
    row = _rows(cluster, hostgroup).get(server)
    if row is not None:
        delete_row(row, user)
