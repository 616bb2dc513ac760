"""What a cluster's nodes say about a server, and whether a majority of them say it is down.

Each node's latest report carries its monitor's view (``stats["monitor"]``: a row per server of each hostgroup with
the outcome of the latest connect, ping and ``read_only`` checks). A node's verdict on a server comes from its rows
for that server in the replication hostgroup's two hostgroups; only fresh reports count (``REPORT_FRESH``), and a
server is dead only when a majority of the cluster's nodes (all of them, fresh or not) say so: one node's view is
never enough, and a node that stopped reporting cannot vote.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fleet.core.models import ProxyNode
from proxyapp.report.reader import MonitorRow, read_monitor

#: A report older than this does not vote (nodes report every 5 s by default: this misses two reports).
REPORT_FRESH = timedelta(seconds=15)
DOWN, SUSPECT, UP, UNKNOWN = "down", "suspect", "up", "unknown"


def row_verdict(row: MonitorRow) -> tuple[str, str]:
    """(DOWN, SUSPECT, UP or UNKNOWN, the reason in words) from one monitor row alone: down once the monitor shunned
    the server for failed checks (``mysql-monitor_ping_max_failures`` or ``_read_only_max_timeout_count`` in a row),
    suspect while its latest check failed but it is not shunned (yet)."""
    failed = [name for name, ok in (("connect", row.connect_ok), ("ping", row.ping_ok)) if ok is False]
    error = f": {row.last_error}" if row.last_error else ""
    if failed and row.status == "SHUNNED":
        return DOWN, f"SHUNNED, {' and '.join(failed)} failed{error}"
    if failed:
        return SUSPECT, f"{row.status}, {' and '.join(failed)} failed{error} (not shunned yet)"
    if row.connect_ok or row.ping_ok:
        return UP, f"{row.status}, checks pass"
    return UNKNOWN, f"{row.status}, not checked yet"


@dataclass(frozen=True)
class NodeVerdict:
    """One node's view of one server."""

    node: str
    verdict: str  # DOWN, SUSPECT, UP or UNKNOWN
    reason: str
    reported_at: datetime | None
    rows: tuple[MonitorRow, ...] = ()

    def describe(self) -> str:
        """ "node-a: down (ping failed: Connection refused), reported 10:00:01"."""
        when = f", reported {self.reported_at:%H:%M:%S}" if self.reported_at else ""
        return f"{self.node}: {self.verdict} ({self.reason}{when})"


def node_verdict(node: ProxyNode, server: str, hostgroups: Iterable[int], now: datetime) -> NodeVerdict:
    """What ``node``'s latest report says of ``server`` in ``hostgroups``: down when a row says the monitor shunned
    it for failed checks, suspect when its checks fail short of that, up when they pass, unknown without a fresh
    report or without rows for it."""
    at = node.last_heartbeat
    if at is None or now - at > REPORT_FRESH:
        since = f"since {at:%H:%M:%S}" if at is not None else "yet"
        return NodeVerdict(node.name, UNKNOWN, f"no fresh report ({'none ' + since})", at)
    try:
        rows = read_monitor(node.last_report)
    except ValueError as error:
        return NodeVerdict(node.name, UNKNOWN, f"its report's monitor rows are malformed: {error}", at)
    if rows is None:
        return NodeVerdict(node.name, UNKNOWN, "its report has no monitor rows", at)
    wanted = set(hostgroups)
    mine = tuple(row for row in rows if row.server == server and row.hostgroup in wanted)
    if not mine:
        return NodeVerdict(node.name, UNKNOWN, f"its monitor does not check {server}", at, mine)
    checked = [row.checked_at for row in mine if row.checked_at is not None]
    if checked and now - max(checked) > REPORT_FRESH:
        return NodeVerdict(node.name, UNKNOWN, f"its last check of {server} was at {max(checked):%H:%M:%S}", at, mine)
    verdicts = [row_verdict(row) for row in mine]
    for verdict in (DOWN, SUSPECT, UP):
        reasons = list(dict.fromkeys(reason for kind, reason in verdicts if kind == verdict))
        if reasons:
            return NodeVerdict(node.name, verdict, "; ".join(reasons), at, mine)
    return NodeVerdict(node.name, UNKNOWN, verdicts[0][1], at, mine)


@dataclass(frozen=True)
class Votes:
    """Every node's verdict on one server, and whether a majority of the cluster's nodes say it is down."""

    server: str
    verdicts: tuple[NodeVerdict, ...]

    @property
    def needed(self) -> int:
        """How many nodes make a majority of the cluster's nodes."""
        return len(self.verdicts) // 2 + 1

    def saying(self, verdict: str) -> list[NodeVerdict]:
        """The nodes whose verdict is ``verdict``."""
        return [v for v in self.verdicts if v.verdict == verdict]

    @property
    def dead(self) -> bool:
        """Whether a majority of the cluster's nodes report the server down."""
        return bool(self.verdicts) and len(self.saying(DOWN)) >= self.needed

    def describe(self) -> str:
        """The votes in words: how many nodes said down out of how many, and each node's view."""
        if not self.verdicts:
            return f"{self.server}: the cluster has no nodes to report on it"
        down = len(self.saying(DOWN))
        head = f"{self.server} is reported down by {down} of {len(self.verdicts)} nodes (a majority is {self.needed})"
        return head + ": " + "; ".join(v.describe() for v in self.verdicts)

    def as_data(self) -> dict[str, Any]:
        """The votes for a timeline step's data."""
        return {
            "server": self.server,
            "nodes": len(self.verdicts),
            "needed": self.needed,
            "verdicts": [
                {
                    "node": v.node,
                    "verdict": v.verdict,
                    "reason": v.reason,
                    "reported_at": v.reported_at.isoformat() if v.reported_at else None,
                }
                for v in self.verdicts
            ],
        }


def votes(nodes: Iterable[ProxyNode], server: str, hostgroups: Iterable[int], now: datetime) -> Votes:
    """Every node's verdict on ``server`` (in ``hostgroups``)."""
    groups = tuple(hostgroups)
    return Votes(server, tuple(node_verdict(node, server, groups, now) for node in nodes))
