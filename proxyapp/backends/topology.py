"""The runtime view of ``mysql_servers``: the config's rows as the monitor's findings rearrange them.

Like ProxySQL's ``runtime_mysql_servers``: in each ``mysql_replication_hostgroups`` pair the server the monitor keeps
as the writer (``read_only=0``) is in the writer hostgroup and the servers with ``read_only=1`` are in the reader
hostgroup, whatever the config says; a server the monitor shuns is SHUNNED in every hostgroup. The config document
stays as published: this view is recomputed from the config and the monitor's latest ``MonitorState`` whenever either
changes, by ``runtime_view`` in every process, so every worker routes by the same view.

Placement in a pair (writer hostgroup W, reader hostgroup R), per server:

- the writer the monitor chose: in W; it stays in R where the config (or a former reader role) had it there only
  with ``mysql-monitor_writer_is_also_reader`` (ProxySQL's meaning: it decides whether a server moved into the writer
  hostgroup stays a reader; a configured writer is never copied into R);
- ``read_only=1``: in R only;
- ``read_only=0`` while another server is the writer (a second writer): out of W, in R; the monitor logs it as an
  error (ProxySQL puts both in W after a restart, its issue #4515);
- ``read_only`` not known yet: where the config puts it, except W once the monitor has chosen a writer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from proxyapp.backends.pool import ONLINE, SHUNNED
from proxyapp.config.document import Config
from proxyapp.config.tables import (
    MysqlReplicationHostgroup,
    MysqlServer,
    PgsqlReplicationHostgroup,
    PgsqlServer,
)

#: A backend server's address: (hostname, port).
Address = tuple[str, int]
#: A ``mysql_servers`` row's key: (hostgroup_id, hostname, port).
ServerKey = tuple[int, str, int]


@dataclass(frozen=True, slots=True)
class ServerVerdict:
    """What the monitor concluded about one server: ONLINE or SHUNNED and why, and its ``read_only`` if known."""

    status: str
    reason: str
    read_only: bool | None = None


@dataclass(frozen=True)
class MonitorState:
    """The monitor's conclusions, as it hands them to every worker: one verdict per server address and the writer
    it keeps for each replication pair (by writer hostgroup). ``seq`` grows with each change."""

    seq: int = 0
    servers: dict[Address, ServerVerdict] = field(default_factory=dict)
    writers: dict[int, Address] = field(default_factory=dict)
    #: The writers of the PostgreSQL pairs (``pgsql_replication_hostgroups``: hostgroups numbered apart).
    pgsql_writers: dict[int, Address] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The state as a JSON document (what the supervisor sends its workers)."""
        return {
            "seq": self.seq,
            "servers": [
                {"host": host, "port": port, "status": v.status, "reason": v.reason, "read_only": v.read_only}
                for (host, port), v in self.servers.items()
            ],
            "writers": [{"writer_hostgroup": hg, "host": a[0], "port": a[1]} for hg, a in self.writers.items()],
            "pgsql_writers": [
                {"writer_hostgroup": hg, "host": a[0], "port": a[1]} for hg, a in self.pgsql_writers.items()
            ],
        }

    @classmethod
    def from_json(cls, doc: object) -> MonitorState:
        """Parse ``to_json``'s document; ValueError naming the field that is wrong."""
        if not isinstance(doc, dict):
            raise ValueError("the monitor state must be a JSON object")
        seq = doc.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            raise ValueError(f"seq: expected a whole number of 0 or more, not {seq!r}")
        servers: dict[Address, ServerVerdict] = {}
        for i, row in enumerate(_rows(doc, "servers")):
            status, reason, read_only = row.get("status"), row.get("reason"), row.get("read_only")
            if status not in (ONLINE, SHUNNED):
                raise ValueError(f"servers[{i}].status: expected ONLINE or SHUNNED, not {status!r}")
            if not isinstance(reason, str):
                raise ValueError(f"servers[{i}].reason: expected text, not {reason!r}")
            if read_only is not None and not isinstance(read_only, bool):
                raise ValueError(f"servers[{i}].read_only: expected true, false or null, not {read_only!r}")
            servers[_address(row, f"servers[{i}]")] = ServerVerdict(status, reason, read_only)
        return cls(seq, servers, _writers(doc, "writers"), _writers(doc, "pgsql_writers"))


def _writers(doc: dict[str, Any], name: str) -> dict[int, Address]:
    writers: dict[int, Address] = {}
    for i, row in enumerate(_rows(doc, name)):
        hostgroup = row.get("writer_hostgroup")
        if not isinstance(hostgroup, int) or isinstance(hostgroup, bool):
            raise ValueError(f"{name}[{i}].writer_hostgroup: expected a whole number, not {hostgroup!r}")
        writers[hostgroup] = _address(row, f"{name}[{i}]")
    return writers


def _rows(doc: dict[str, Any], name: str) -> list[dict[str, Any]]:
    rows = doc.get(name, [])
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise ValueError(f"{name}: expected a list of objects")
    return rows


def _address(row: dict[str, Any], where: str) -> Address:
    host, port = row.get("host"), row.get("port")
    if not isinstance(host, str) or not host:
        raise ValueError(f"{where}.host: expected a host name, not {host!r}")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ValueError(f"{where}.port: expected a port number, not {port!r}")
    return host, port


@dataclass(frozen=True)
class RuntimeView:
    """The servers a proxy routes by, with why each one is placed where it is and has the status it has.

    ``placement`` holds, by row key, why a row the monitor moved is there, and why a row of the config is absent;
    ``status_reasons`` why a row's status is what it is. ``reader_of`` maps each pair's writer hostgroup to its
    reader hostgroup.
    """

    servers: tuple[MysqlServer, ...]
    placement: dict[ServerKey, str]
    status_reasons: dict[ServerKey, str]
    reader_of: dict[int, int]


def runtime_view(config: Config, state: MonitorState) -> RuntimeView:
    """The runtime ``mysql_servers`` of ``config`` under the monitor's ``state`` (see the module's docstring)."""
    view = _view(
        config.mysql_servers,
        config.mysql_replication_hostgroups,
        state.writers,
        state,
        config.variables.flag("mysql-monitor_writer_is_also_reader"),
    )
    return RuntimeView(
        tuple(s for s in view.servers if isinstance(s, MysqlServer)),
        view.placement,
        view.status_reasons,
        view.reader_of,
    )


def pgsql_runtime(config: Config, state: MonitorState) -> tuple[tuple[PgsqlServer, str], ...]:
    """The runtime ``pgsql_servers`` of ``config`` under the monitor's ``state``, placed in their
    ``pgsql_replication_hostgroups`` pairs as MySQL's servers are in theirs, each with why it is where it is with
    the status it has."""
    view = _view(config.pgsql_servers, config.pgsql_replication_hostgroups, state.pgsql_writers, state, False)
    return tuple(
        (s, view.status_reasons.get(s.key) or view.placement.get(s.key) or "configured")
        for s in view.servers
        if isinstance(s, PgsqlServer)
    )


def _view(
    servers: Sequence[MysqlServer] | Sequence[PgsqlServer],
    pairs: Sequence[MysqlReplicationHostgroup] | Sequence[PgsqlReplicationHostgroup],
    writers: dict[int, Address],
    state: MonitorState,
    also_reader: bool,
) -> _View:
    """The runtime rows of ``servers`` in their replication ``pairs`` under the monitor's ``state`` (its chosen
    ``writers`` of these pairs)."""
    configured: dict[ServerKey, MysqlServer | PgsqlServer] = {server.key: server for server in servers}
    rows = dict(configured)
    placement: dict[ServerKey, str] = {}
    for pair in pairs:
        writer_hg, reader_hg = pair.writer_hostgroup, pair.reader_hostgroup
        members: dict[Address, MysqlServer | PgsqlServer] = {}
        for hostgroup in (writer_hg, reader_hg):
            for server in servers:
                if server.hostgroup_id == hostgroup:
                    members.setdefault(server.address, server)
        writer = writers.get(writer_hg)
        if writer not in members:
            writer = None
        for address, template in members.items():
            verdict = state.servers.get(address)
            read_only = verdict.read_only if verdict is not None else None
            in_reader = (reader_hg, *address) in configured
            if address == writer:
                wanted = {writer_hg: f"read_only=0: the writer of hostgroup {writer_hg}"}
                if in_reader and also_reader:
                    wanted[reader_hg] = f"the writer of hostgroup {writer_hg} stays a reader (writer_is_also_reader)"
                why_not = f"the writer of hostgroup {writer_hg} leaves its reader hostgroup (writer_is_also_reader=0)"
            elif read_only is True:
                wanted = {reader_hg: f"read_only=1: a reader of hostgroup {reader_hg}"}
                why_not = f"read_only=1: not a writer of hostgroup {writer_hg}"
            elif read_only is False and writer is not None:
                why_not = (
                    f"read_only=0, but {show_address(writer)} is the writer of hostgroup {writer_hg}: "
                    "a second writer is refused"
                )
                wanted = {reader_hg: why_not}
            else:  # read_only not known yet: where the config has it, but the writer hostgroup has its writer
                wanted = {hg: "" for hg in (writer_hg, reader_hg) if (hg, *address) in configured}
                if writer is not None:
                    wanted.pop(writer_hg, None)
                why_not = f"read_only not known; {show_address(writer)} is the writer of hostgroup {writer_hg}"
            for hostgroup in (writer_hg, reader_hg):
                key = (hostgroup, *address)
                if hostgroup in wanted:
                    if key not in rows:
                        rows[key] = configured.get(key) or dataclasses.replace(template, hostgroup_id=hostgroup)
                    if wanted[hostgroup]:
                        placement[key] = wanted[hostgroup]
                elif key in rows:
                    del rows[key]
                    placement[key] = why_not
    status_reasons: dict[ServerKey, str] = {}
    for key, server in rows.items():
        verdict = state.servers.get(server.address)
        if verdict is None or server.status != ONLINE:
            continue
        if verdict.status == SHUNNED:
            rows[key] = dataclasses.replace(server, status=SHUNNED)
        if verdict.reason:
            status_reasons[key] = verdict.reason
    reader_of = {pair.writer_hostgroup: pair.reader_hostgroup for pair in pairs}
    ordered = tuple(rows[key] for key in sorted(rows))
    return _View(ordered, placement, status_reasons, reader_of)


@dataclass(frozen=True)
class _View:
    """``RuntimeView`` for either engine's servers."""

    servers: tuple[MysqlServer | PgsqlServer, ...]
    placement: dict[ServerKey, str]
    status_reasons: dict[ServerKey, str]
    reader_of: dict[int, int]


def show_address(address: Address | None) -> str:
    """``host:port`` (``[host]:port`` for IPv6), or "nobody" for None."""
    if address is None:
        return "nobody"
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def server_row(server: MysqlServer, status: str, reason: str) -> dict[str, Any]:
    """A runtime ``mysql_servers`` row: every column (the runtime hostgroup and status), and ``status_reason``."""
    row = {f.name: getattr(server, f.name) for f in dataclasses.fields(server)}
    for name, value in row.items():
        if isinstance(value, bool):
            row[name] = int(value)
    row["status"] = status
    row["status_reason"] = reason
    return row
