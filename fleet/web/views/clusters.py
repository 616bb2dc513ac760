"""The fleet overview (clusters and their nodes, refreshed live) and the header's cluster choice."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme

from fleet.core import stats
from fleet.core.health import ControlPlane, control_plane
from fleet.core.models import Cluster, ConfigVersion, ProxyNode
from fleet.core.push import STALE_AFTER
from fleet.web.access import choose_cluster, viewer_page
from proxyapp.report.reader import read_monitor, read_pgsql, read_pgsql_forward


@dataclass(frozen=True)
class NodeStatus:
    """A node as the overview shows it: what it should run, what it runs, and whether it is healthy."""

    node: ProxyNode
    desired: ConfigVersion | None
    drift: bool
    stale: bool
    control_plane_blame: str = ""  # why the control plane, not the node, may be behind its stale or pending state

    @property
    def blame(self) -> str:
        """Whose side a stale or pending state is on, when it is the control plane's ("" otherwise)."""
        return self.control_plane_blame if self.health in ("stale", "pending") else ""

    @property
    def health(self) -> str:
        """One word, the first that applies: failed (refused the version it was sent), stale (stopped reporting),
        pending (applying the version it was sent), degraded (a backend server of either engine is not ONLINE, or a
        replica lags), drift (runs another config than the latest) or ok."""
        if self.node.state == ProxyNode.State.FAILED:
            return "failed"
        if self.stale:
            return "stale"
        if self.node.state == ProxyNode.State.PENDING:
            return "pending"
        if self.troubles:
            return "degraded"
        if self.drift:
            return "drift"
        return "ok"

    @cached_property
    def servers(self) -> list[tuple[str, str]]:
        """Every backend server in the node's last report, MySQL's and PostgreSQL's (pooled and forwarded), as
        (what it is, its status)."""
        report = self.node.last_report
        found = [(f"MySQL {pool.server} (hostgroup {pool.hostgroup})", pool.status) for pool in stats.pools_of(report)]
        pooling = stats.read_section(read_pgsql, report, None, [])
        if pooling is not None:
            found += [
                (f"PostgreSQL {row.server} (hostgroup {row.hostgroup})", row.status) for row in pooling.connection_pool
            ]
        forward = stats.read_section(read_pgsql_forward, report, None, [])
        if forward is not None:
            found += [
                (f"PostgreSQL {row.server} (hostgroup {row.hostgroup_id}, forwarded)", row.status)
                for row in forward.servers
            ]
        return found

    @cached_property
    def troubles(self) -> list[str]:
        """What degrades the node: each server not ONLINE, each replica the monitor finds lagging."""
        found = [f"{server} {status}" for server, status in self.servers if status != "ONLINE"]
        monitor = stats.read_section(read_monitor, self.node.last_report, None, []) or []
        found += [f"MySQL {row.server} lags {row.lag_s:g} s" for row in monitor if row.lag_s]
        return found

    @property
    def backends(self) -> tuple[int, int]:
        """How many of the servers in the node's last report (both engines) are ONLINE, and how many it reports."""
        return sum(status == "ONLINE" for _, status in self.servers), len(self.servers)


@dataclass(frozen=True)
class ClusterStatus:
    """A cluster with its latest version and its nodes' status."""

    cluster: Cluster
    latest: ConfigVersion | None
    nodes: list[NodeStatus]


def fleet_status(control: ControlPlane) -> list[ClusterStatus]:
    """Every cluster with its nodes' status, as of now."""
    now = timezone.now()
    blame = control.blame
    out = []
    for cluster in Cluster.objects.prefetch_related("nodes"):
        latest = cluster.latest_version()
        nodes = [
            NodeStatus(
                node=node,
                desired=latest,
                drift=latest is not None and node.applied_checksum != latest.checksum,
                stale=node.last_heartbeat is None or now - node.last_heartbeat > STALE_AFTER,
                control_plane_blame=blame,
            )
            for node in cluster.nodes.all()
        ]
        out.append(ClusterStatus(cluster, latest, nodes))
    return out


@viewer_page
def overview(request: HttpRequest) -> HttpResponse:
    """The fleet overview page."""
    return render(request, "web/overview.html", _overview_context())


def _overview_context() -> dict[str, object]:
    control = control_plane()
    return {"fleet": fleet_status(control), "control": control}


@viewer_page
def overview_nodes(request: HttpRequest) -> HttpResponse:
    """The overview's live part (htmx polls it)."""
    return render(request, "web/partials/fleet_status.html", _overview_context())


@viewer_page
def select_cluster(request: HttpRequest) -> HttpResponse:
    """Make the chosen cluster this session's working cluster, then go back where the user was."""
    chosen = request.GET.get("cluster", "")
    if not chosen.isdigit():
        raise Http404("no such cluster")
    choose_cluster(request, get_object_or_404(Cluster, pk=int(chosen)))
    back = request.GET.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = "web:overview"
    return redirect(back)
