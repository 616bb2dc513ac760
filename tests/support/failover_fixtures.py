"""The nodes' monitors played for the failover tests: reports whose ``stats`` carry ``monitor`` rows and
``server_transitions``, sent through the control plane's own report task (``fleet.core.tasks``, no broker)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from fleet.core import tasks
from fleet.core.models import ProxyNode
from tests.support.node_messages import snapshot


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
