"""What a cluster's nodes say about a server, and whether a majority of them say it is down.

Each node's latest report carries its monitor's view (``stats["monitor"]``: a row per server of each hostgroup with
the outcome of the latest connect, ping and ``read_only`` checks). A node's verdict on a server comes from its rows
for that server in the replication hostgroup's two hostgroups; only fresh reports count (``REPORT_FRESH``), and a
server is dead only when a majority of the cluster's nodes (all of them, fresh or not) say so: one node's view is
never enough, and a node that stopped reporting cannot vote.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from fleet.core.models import ProxyNode
from fleet.failover.models import server_name

#: A report older than this does not vote (nodes report every 5 s by default: this misses two reports).
REPORT_FRESH = timedelta(seconds=15)
DOWN, SUSPECT, UP, UNKNOWN = "down", "suspect", "up", "unknown"
_STATUSES = ("ONLINE", "SHUNNED", "OFFLINE_SOFT", "OFFLINE_HARD")


@dataclass(frozen=True)
class MonitorRow:
    """One row of a node's ``stats["monitor"]``: a server of a hostgroup and its latest checks."""

    hostgroup: int
    server: str
    status: str
    connect_ok: bool | None
    ping_ok: bool | None
    read_only: bool | None
    lag_s: float | None
    last_error: str
    checked_at: datetime | None

    @property
    def verdict(self) -> tuple[str, str]:
        """(DOWN, SUSPECT, UP or UNKNOWN, the reason in words) from this row alone: down once the monitor shunned
        the server for failed checks (``mysql-monitor_ping_max_failures`` or ``_read_only_max_timeout_count`` in a
        row), suspect while its latest check failed but it is not shunned (yet)."""
        failed = [name for name, ok in (("connect", self.connect_ok), ("ping", self.ping_ok)) if ok is False]
        error = f": {self.last_error}" if self.last_error else ""
        if failed and self.status == "SHUNNED":
            return DOWN, f"SHUNNED, {' and '.join(failed)} failed{error}"
        if failed:
            return SUSPECT, f"{self.status}, {' and '.join(failed)} failed{error} (not shunned yet)"
        if self.connect_ok or self.ping_ok:
            return UP, f"{self.status}, checks pass"
        return UNKNOWN, f"{self.status}, not checked yet"


def _optional(row: Mapping[str, Any], key: str, kinds: tuple[type, ...], where: str) -> Any:
    value = row.get(key)
    if value is not None and (not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool))):
        raise ValueError(f"{where}.{key}: expected {' or '.join(k.__name__ for k in kinds)} or null, not {value!r}")
    return value


def moment(value: object, where: str) -> datetime | None:
    """A report's time: ISO 8601 with its offset, or seconds since the epoch; None when missing."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    raise ValueError(f"{where}: expected an ISO 8601 time or seconds since the epoch, not {value!r}")


def monitor_rows(stats: object) -> list[MonitorRow] | None:
    """The monitor rows of a report's ``stats`` (None when it has none); ValueError naming the bad field."""
    if not isinstance(stats, Mapping) or "monitor" not in stats:
        return None
    rows = stats["monitor"]
    if not isinstance(rows, list):
        raise ValueError("stats.monitor: expected a list of rows")
    parsed = []
    for index, row in enumerate(rows):
        where = f"stats.monitor[{index}]"
        if not isinstance(row, Mapping):
            raise ValueError(f"{where}: expected an object")
        for key in ("hostgroup", "srv_port"):
            if isinstance(row.get(key), bool) or not isinstance(row.get(key), int):
                raise ValueError(f"{where}.{key}: expected a number, not {row.get(key)!r}")
        if not isinstance(row.get("srv_host"), str) or not row["srv_host"]:
            raise ValueError(f"{where}.srv_host: expected a host name, not {row.get('srv_host')!r}")
        if row.get("status") not in _STATUSES:
            raise ValueError(f"{where}.status: expected one of {', '.join(_STATUSES)}, not {row.get('status')!r}")
        lag = _optional(row, "lag_s", (int, float), where)
        parsed.append(
            MonitorRow(
                hostgroup=row["hostgroup"],
                server=server_name(row["srv_host"], row["srv_port"]),
                status=row["status"],
                connect_ok=_optional(row, "connect_ok", (bool,), where),
                ping_ok=_optional(row, "ping_ok", (bool,), where),
                read_only=_optional(row, "read_only", (bool,), where),
                lag_s=float(lag) if lag is not None else None,
                last_error=_optional(row, "last_error", (str,), where) or "",
                checked_at=moment(row.get("checked_at"), f"{where}.checked_at"),
            )
        )
    return parsed


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
        rows = monitor_rows(node.last_report)
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
    verdicts = [row.verdict for row in mine]
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
