"""The backend status history: the server state changes the nodes' monitors report (``server_transitions`` of their
reports, ``{"at", "hostgroup", "srv_host", "srv_port", "from", "to", "reason"}``), kept for ``RETENTION``."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from django.db.models import Max
from django.utils import timezone

from fleet.core.models import ProxyNode
from fleet.failover.detection import REPORT_FRESH, moment
from fleet.failover.models import BackendTransition, server_name

log = logging.getLogger("fleet.failover")

RETENTION = timedelta(days=30)


def transitions(node: ProxyNode, stats: object) -> list[BackendTransition]:
    """The transitions in a report's ``stats`` (none when it has none), unsaved; ValueError naming the bad field."""
    if not isinstance(stats, Mapping) or "server_transitions" not in stats:
        return []
    rows = stats["server_transitions"]
    if not isinstance(rows, list):
        raise ValueError("stats.server_transitions: expected a list of rows")
    parsed = []
    for index, row in enumerate(rows):
        where = f"stats.server_transitions[{index}]"
        if not isinstance(row, Mapping):
            raise ValueError(f"{where}: expected an object")
        for key in ("hostgroup", "srv_port"):
            if isinstance(row.get(key), bool) or not isinstance(row.get(key), int) or row[key] < 0:
                raise ValueError(f"{where}.{key}: expected a number, not {row.get(key)!r}")
        for key in ("srv_host", "from", "to"):
            if not isinstance(row.get(key), str):
                raise ValueError(f"{where}.{key}: expected text, not {row.get(key)!r}")
        if not isinstance(row.get("reason", ""), str):
            raise ValueError(f"{where}.reason: expected text, not {row.get('reason')!r}")
        at = moment(row.get("at"), f"{where}.at")
        if at is None:
            raise ValueError(f"{where}.at: missing")
        parsed.append(
            BackendTransition(
                node=node,
                at=at,
                hostgroup=row["hostgroup"],
                server=server_name(row["srv_host"], row["srv_port"])[:300],
                from_status=row["from"][:16],
                to_status=row["to"][:16],
                reason=row.get("reason", ""),
            )
        )
    return parsed


def ingest(nodes: Iterable[ProxyNode], now: datetime) -> int:
    """Store the transitions of the nodes' fresh reports not stored yet (none older than a node's newest stored
    one; duplicates are skipped); how many were offered. A malformed report is logged, naming the field."""
    fresh = [n for n in nodes if n.last_heartbeat is not None and now - n.last_heartbeat <= REPORT_FRESH]
    if not fresh:
        return 0
    latest = BackendTransition.objects.filter(node__in=fresh).values("node").annotate(last=Max("at"))
    newest = dict(latest.values_list("node", "last"))
    new = []
    for node in fresh:
        try:
            rows = transitions(node, node.last_report)
        except ValueError as error:
            log.warning("node %s: server transitions not recorded: %s", node.name, error)
            continue
        since = newest.get(node.pk)
        new += [row for row in rows if since is None or row.at >= since]
    return len(BackendTransition.objects.bulk_create(new, ignore_conflicts=True)) if new else 0


def prune(now: datetime | None = None) -> int:
    """Drop transitions older than ``RETENTION``; how many."""
    return BackendTransition.objects.filter(at__lt=(now or timezone.now()) - RETENTION).delete()[0]
