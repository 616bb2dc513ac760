"""The backend status history: the server state changes the nodes' monitors report (``server_transitions`` of their
reports, ``{"at", "hostgroup", "srv_host", "srv_port", "from", "to", "reason"}``), kept for ``RETENTION``."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.db.models import Max
from django.utils import timezone

from fleet.core.models import ProxyNode
from fleet.failover.detection import REPORT_FRESH
from fleet.failover.models import BackendTransition, server_name
from proxyapp.report.reader import read_transitions

log = logging.getLogger("fleet.failover")

RETENTION = timedelta(days=30)


def transitions(node: ProxyNode, stats: object) -> list[BackendTransition]:
    """The transitions in a report's ``stats`` (none when it has none), unsaved, read by ``proxyapp.report.reader``;
    ReportError (a ValueError) naming the bad field."""
    return [
        BackendTransition(
            node=node,
            at=row.at,
            hostgroup=row.hostgroup,
            server=server_name(row.srv_host, row.srv_port)[:300],
            from_status=row.from_status[:16],
            to_status=row.to_status[:16],
            reason=row.reason,
        )
        for row in read_transitions(stats)
    ]


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
