"""What the UI and the API show of a cluster's replication hostgroups: the published topology (primary, replicas,
servers kept out), each server as every node's monitor sees it (state, read_only, lag, errors), the policy, and
the events under way and past."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from fleet.core.models import Cluster, ProxyNode
from fleet.failover import detection
from fleet.failover.models import Event, FailoverPolicy, Fence
from fleet.failover.topology import Topology, replication_pairs, topology


@dataclass(frozen=True)
class NodeCheck:
    """One node's view of one server."""

    node: str
    verdict: str
    reason: str
    status: str
    read_only: bool | None
    lag_s: float | None
    last_error: str
    checked_at: datetime | None
    reported_at: datetime | None


@dataclass(frozen=True)
class ServerStatus:
    """A server of the hostgroup: its role in the published config and what the nodes see."""

    server: str
    role: str  # primary, replica, fenced or kept out
    configured: dict[int, str]  # hostgroup -> its status in the published config
    checks: list[NodeCheck]
    fence: Fence | None = None

    @property
    def lag_s(self) -> float | None:
        """The largest replication lag the nodes report (None when none reports one)."""
        lags = [check.lag_s for check in self.checks if check.lag_s is not None]
        return max(lags) if lags else None

    @property
    def read_only(self) -> bool | None:
        """``read_only`` as the latest node report says (None when unknown)."""
        seen = [check.read_only for check in self.checks if check.read_only is not None]
        return seen[0] if seen else None

    @property
    def summary(self) -> str:
        """How many nodes see it up, down or suspect."""
        counts = {verdict: 0 for verdict in (detection.UP, detection.SUSPECT, detection.DOWN, detection.UNKNOWN)}
        for check in self.checks:
            counts[check.verdict] += 1
        shown = [f"{verdict} on {n}" for verdict, n in counts.items() if n]
        return ", ".join(shown) + f" of {len(self.checks)} node(s)" if shown else "no nodes"


@dataclass(frozen=True)
class HostgroupStatus:
    """One replication hostgroup of the cluster's latest version."""

    writer_hostgroup: int
    reader_hostgroup: int
    version: int
    policy: FailoverPolicy
    primary: ServerStatus | None
    primary_problem: str
    replicas: list[ServerStatus]
    kept_out: list[ServerStatus]
    votes: str
    dead: bool
    running: Event | None
    recent: list[Event] = field(default_factory=list)


def _checks(nodes: list[ProxyNode], server: str, layout: Topology, now: datetime) -> list[NodeCheck]:
    checks = []
    for node in nodes:
        verdict = detection.node_verdict(node, server, (layout.writer_hostgroup, layout.reader_hostgroup), now)
        rows = verdict.rows
        checks.append(
            NodeCheck(
                node=node.name,
                verdict=verdict.verdict,
                reason=verdict.reason,
                status=", ".join(dict.fromkeys(f"{row.status} in {row.hostgroup}" for row in rows)),
                read_only=next((row.read_only for row in rows if row.read_only is not None), None),
                lag_s=max((row.lag_s for row in rows if row.lag_s is not None), default=None),
                last_error=next((row.last_error for row in rows if row.last_error), ""),
                checked_at=max((row.checked_at for row in rows if row.checked_at is not None), default=None),
                reported_at=verdict.reported_at,
            )
        )
    return checks


def _configured(layout: Topology, server: str) -> dict[int, str]:
    statuses = {}
    for hostgroup in (layout.writer_hostgroup, layout.reader_hostgroup):
        row = layout.row(hostgroup, server)
        if row is not None:
            statuses[hostgroup] = row.get("status", "ONLINE")
    return statuses


def cluster_status(cluster: Cluster | None, now: datetime | None = None, recent: int = 5) -> list[HostgroupStatus]:
    """Every replication hostgroup of ``cluster``'s latest version, as of ``now``."""
    latest = cluster.latest_version() if cluster is not None else None
    if latest is None:
        return []
    now = now or timezone.now()
    nodes = list(cluster.nodes.all())
    fences = {f.server: f for f in Fence.objects.filter(cluster=cluster, released_at__isnull=True)}
    result = []
    for pair in replication_pairs(latest.document):
        layout = topology(latest.document, pair)
        writer = layout.writer_hostgroup

        def status(server: str, role: str, layout: Topology = layout) -> ServerStatus:
            return ServerStatus(
                server, role, _configured(layout, server), _checks(nodes, server, layout, now), fences.get(server)
            )

        primary = layout.primary
        kept_out = list(
            dict.fromkeys([*layout.kept_out, *(s for s, f in fences.items() if f.writer_hostgroup == writer)])
        )
        votes = detection.votes(nodes, primary, (writer, layout.reader_hostgroup), now) if primary else None
        events = Event.objects.filter(cluster=cluster, writer_hostgroup=writer)
        result.append(
            HostgroupStatus(
                writer_hostgroup=writer,
                reader_hostgroup=layout.reader_hostgroup,
                version=latest.number,
                policy=FailoverPolicy.of(cluster, writer),
                primary=status(primary, "primary") if primary else None,
                primary_problem=layout.primary_problem,
                replicas=[status(name, "replica") for name in layout.replicas],
                kept_out=[status(name, "fenced" if name in fences else "kept out") for name in kept_out],
                votes=votes.describe() if votes is not None else "",
                dead=votes.dead if votes is not None else False,
                running=events.filter(state=Event.State.RUNNING).first(),
                recent=list(events[:recent]),
            )
        )
    return result
