"""What the failover tests share: a config document with a replication hostgroup, and the nodes' monitors played
by reports whose ``stats`` carry ``monitor`` rows and ``server_transitions``, sent through the control plane's own
report task (``fleet.core.tasks``, no broker)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from fleet.core import tasks
from fleet.core.models import ProxyNode
from tests.control.node_messages import snapshot
from tests.harness import APP_PASSWORD, APP_USER


def server_row(hostgroup: int, server: str, **columns: Any) -> dict[str, Any]:
    """A ``mysql_servers`` row for ``server`` (host:port)."""
    host, port = server.rsplit(":", 1)
    return {"hostgroup_id": hostgroup, "hostname": host, "port": int(port), **columns}


def ha_document(primary: str, replicas: list[str], **primary_columns: Any) -> dict[str, Any]:
    """Writer hostgroup 10 = ``primary``; reader hostgroup 20 = the replicas (weight 1000 each); the user ``app``."""
    return {
        "mysql_servers": [
            server_row(10, primary, **primary_columns),
            *(server_row(20, replica, weight=1000) for replica in replicas),
        ],
        "mysql_users": [{"username": APP_USER, "password": APP_PASSWORD, "default_hostgroup": 10}],
        "mysql_replication_hostgroups": [{"writer_hostgroup": 10, "reader_hostgroup": 20}],
    }


def monitor_row(
    server: str, hostgroup: int, *, up: bool = True, status: str | None = None, at: datetime | None = None, **extra: Any
) -> dict[str, Any]:
    """A ``monitor`` row for ``server`` (host:port): its checks pass (``up``) or fail with "Connection refused"."""
    host, port = server.rsplit(":", 1)
    row: dict[str, Any] = {
        "hostgroup": hostgroup,
        "srv_host": host,
        "srv_port": int(port),
        "status": status or ("ONLINE" if up else "SHUNNED"),
        "connect_ok": up,
        "ping_ok": up,
        "read_only": None,
        "lag_s": None,
        "last_error": "" if up else "Connection refused",
        "checked_at": at.isoformat() if at is not None else None,
    }
    row.update(extra)
    return row


def transition(server: str, hostgroup: int, at: datetime, before: str, after: str, reason: str) -> dict[str, Any]:
    """A ``server_transitions`` row."""
    host, port = server.rsplit(":", 1)
    return {
        "at": at.isoformat(),
        "hostgroup": hostgroup,
        "srv_host": host,
        "srv_port": int(port),
        "from": before,
        "to": after,
        "reason": reason,
    }


def send_monitor_report(
    node: ProxyNode,
    at: datetime,
    rows: Iterable[dict[str, Any]] | None,
    transitions: Iterable[dict[str, Any]] = (),
) -> str:
    """``node`` reports at ``at`` with these monitor rows (None: a report without a ``monitor`` key)."""
    stats = snapshot([])
    if rows is not None:
        stats["monitor"] = list(rows)
    stats["server_transitions"] = list(transitions)
    return tasks.report(node.name, at.isoformat(), None, "", stats)
