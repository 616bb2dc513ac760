"""The shard map page: a config's shard groups, shards and sharded tables, each shard's traffic and each table's
estimated rows per shard as the nodes report them (``fleet.core.tablerows``), the "which shard holds key K of table
T" tester (``fleet.core.shards``) and the statements on sharded tables by scatter ratio, as the nodes report them
(``fleet.core.scatter``)."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from fleet.core import scatter, tablerows
from fleet.core.models import Cluster, ConfigVersion
from fleet.core.ruletest import DRAFT, config_of
from fleet.core.shards import LocateError, Location, locate, shard_groups
from fleet.web.access import current_cluster, viewer_page
from fleet.web.forms.tools import ShardLocateForm
from fleet.web.views.backends import BackendRow, backend_rows
from proxyapp.config.document import Config, ConfigError


@dataclass(frozen=True)
class ShardTraffic:
    """A shard hostgroup's servers as the nodes last reported them, with the queries/s and connections in use
    summed over them (None: no recent rate reported)."""

    rows: list[BackendRow]
    queries_per_s: float | None
    conn_used: int


def traffic_by_hostgroup(cluster: Cluster, hostgroups: set[int]) -> dict[int, ShardTraffic]:
    """Each of ``hostgroups``' traffic from the cluster's nodes' last reports."""
    rows: dict[int, list[BackendRow]] = {hostgroup: [] for hostgroup in hostgroups}
    for row in backend_rows(cluster):
        if row.hostgroup in rows:
            rows[row.hostgroup].append(row)
    traffic = {}
    for hostgroup, reported in rows.items():
        rates = [row.queries_per_s for row in reported if row.queries_per_s is not None]
        used = sum(row.conn_used for row in reported)
        traffic[hostgroup] = ShardTraffic(reported, sum(rates) if rates else None, used)
    return traffic


@viewer_page
def shard_map(request: HttpRequest) -> HttpResponse:
    """The shard map of the draft or a published version (``?source=``), and the tester's answer once asked
    (a GET, so an answer can be linked to)."""
    cluster = current_cluster(request)
    form = ShardLocateForm(request.GET or None, cluster=cluster)
    errors: list[str] = []
    location: Location | None = None
    config: Config | None = None
    asked = form.is_bound and form.is_valid() and form.asks()
    source = (form.cleaned_data.get("source") if form.is_bound else None) or DRAFT
    if cluster is not None and not form.has_error("source"):  # the map shows beside a question's field errors
        try:
            config = config_of(cluster, source)
        except ConfigVersion.DoesNotExist:
            errors = [f"no version {source} in {cluster}"]
        except ConfigError as error:
            errors = [f"the draft does not validate, so it has no shard map: {e}" for e in error.errors]
    if config is not None and asked:
        try:
            location = locate(config, form.cleaned_data["table"], form.cleaned_data["key"])
        except LocateError as error:
            errors = [str(error)]
    groups = shard_groups(config) if config is not None else []
    hostgroups = {shard.hostgroup_id for group in groups for shard in group.shards}
    problems: list[str] = []
    context = {
        "cluster": cluster,
        "form": form,
        "source": source,
        "groups": groups,
        "traffic": traffic_by_hostgroup(cluster, hostgroups) if cluster is not None else {},
        "tables": sorted(table.name for group in groups for table in group.tables),
        "table_rows": tablerows.table_rows(cluster, problems),
        "location": location,
        "errors": errors,
        "scatter": scatter.sharding_digests(cluster, problems)[: scatter.TOP],
        "report_problems": problems,
    }
    return render(request, "web/shard_map.html", context)
