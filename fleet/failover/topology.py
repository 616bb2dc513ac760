"""A replication hostgroup's topology as a published config holds it: the primary (the one ONLINE server of the
writer hostgroup), the replicas (the other servers of the reader hostgroup) and the servers kept out (OFFLINE_HARD).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fleet.failover.models import server_name

OFFLINE_HARD = "OFFLINE_HARD"


def row_server(row: Mapping[str, Any]) -> str:
    """A ``mysql_servers`` row's server as ``host:port``."""
    return server_name(row["hostname"], row["port"])


@dataclass(frozen=True)
class Topology:
    """One replication hostgroup of a config document."""

    writer_hostgroup: int
    reader_hostgroup: int
    check_type: str
    writer_rows: tuple[dict[str, Any], ...]
    reader_rows: tuple[dict[str, Any], ...]

    @property
    def primary(self) -> str | None:
        """The primary: the single ONLINE server of the writer hostgroup (None when there is not exactly one)."""
        online = [row_server(r) for r in self.writer_rows if r.get("status", "ONLINE") == "ONLINE"]
        return online[0] if len(online) == 1 else None

    @property
    def primary_problem(self) -> str:
        """Why there is no primary to watch, in words ("" when there is one)."""
        online = [row_server(r) for r in self.writer_rows if r.get("status", "ONLINE") == "ONLINE"]
        if len(online) == 1:
            return ""
        if not online:
            return f"hostgroup {self.writer_hostgroup} has no ONLINE server"
        listed = ", ".join(online)
        return f"hostgroup {self.writer_hostgroup} has {len(online)} ONLINE servers ({listed}): failover needs one"

    @property
    def replicas(self) -> list[str]:
        """The reader hostgroup's servers other than the primary and those kept out (OFFLINE_HARD)."""
        primary = self.primary
        return [
            row_server(r)
            for r in self.reader_rows
            if row_server(r) != primary and r.get("status", "ONLINE") != OFFLINE_HARD
        ]

    @property
    def kept_out(self) -> list[str]:
        """The reader hostgroup's OFFLINE_HARD servers that are not in the writer hostgroup (fenced or parked)."""
        writers = {row_server(r) for r in self.writer_rows}
        return [
            row_server(r)
            for r in self.reader_rows
            if r.get("status", "ONLINE") == OFFLINE_HARD and row_server(r) not in writers
        ]

    def row(self, hostgroup: int, server: str) -> dict[str, Any] | None:
        """The row of ``server`` in ``hostgroup`` (one of this pair's), or None."""
        rows = self.writer_rows if hostgroup == self.writer_hostgroup else self.reader_rows
        return next((r for r in rows if row_server(r) == server), None)

    def weight(self, server: str) -> int:
        """``server``'s weight in the reader hostgroup (0 when it is not there)."""
        row = self.row(self.reader_hostgroup, server)
        return int(row.get("weight", 1)) if row is not None else 0


def replication_pairs(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The document's ``mysql_replication_hostgroups`` rows, by writer hostgroup."""
    return sorted(document.get("mysql_replication_hostgroups", []), key=lambda r: r["writer_hostgroup"])


def topology(document: Mapping[str, Any], pair: Mapping[str, Any]) -> Topology:
    """The topology of the replication hostgroup ``pair`` (a ``mysql_replication_hostgroups`` row) in ``document``."""
    servers = document.get("mysql_servers", [])
    writer, reader = pair["writer_hostgroup"], pair["reader_hostgroup"]
    return Topology(
        writer_hostgroup=writer,
        reader_hostgroup=reader,
        check_type=pair.get("check_type", "read_only"),
        writer_rows=tuple(r for r in servers if r["hostgroup_id"] == writer),
        reader_rows=tuple(r for r in servers if r["hostgroup_id"] == reader),
    )


def find(document: Mapping[str, Any], writer_hostgroup: int) -> Topology | None:
    """The topology of the replication hostgroup whose writer hostgroup is ``writer_hostgroup``, or None."""
    for pair in replication_pairs(document):
        if pair["writer_hostgroup"] == writer_hostgroup:
            return topology(document, pair)
    return None
