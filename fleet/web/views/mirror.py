"""The mirror dashboard: each node's mirror as it reports it (live), and its queue, concurrency, drops and the
oldest entry's age over time, a line per node, the way the field note's PMM graphs show ProxySQL's two gauges."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone

from fleet.core import stats
from fleet.core.models import Cluster, ProxyNode
from fleet.web.access import current_cluster, viewer_page
from fleet.web.views.backends import chosen_span
from proxyapp.report.reader import MirrorCounts, read_mirror

#: The charts: metric (``stats.MIRROR_METRICS``) -> title.
CHARTS = {
    "queue_length": "Queue length (statements waiting)",
    "concurrency": "Concurrency (running on the mirror)",
    "dropped_per_s": "Drops/s",
    "oldest_age_s": "Oldest entry's age (s)",
    "queue_disk": "Queue on disk (statements)",
    "completed_per_s": "Completed/s",
}


@dataclass(frozen=True)
class MirrorRow:
    """A node's mirror as its last report has it."""

    node: str
    counts: MirrorCounts

    @property
    def failed_total(self) -> int:
        """Failures of every error code."""
        return sum(self.counts.failed.values())

    @property
    def dropped_total(self) -> int:
        """Drops of every reason."""
        return sum(self.counts.dropped.values())


def mirror_rows(cluster: Cluster | None, problems: list[str]) -> list[MirrorRow]:
    """Every node of the cluster whose last report has a ``mirror`` section, by name; a section that does not read
    is left out, named in ``problems``."""
    rows = []
    for node in ProxyNode.objects.filter(cluster=cluster).only("name", "last_report").order_by("name"):
        counts = stats.read_section(read_mirror, node.last_report, None, problems, node.name)
        if counts is not None:
            rows.append(MirrorRow(node.name, counts))
    return rows


def _table_context(cluster: Cluster | None) -> dict[str, Any]:
    problems: list[str] = []
    return {"rows": mirror_rows(cluster, problems), "report_problems": problems}


@viewer_page
def mirror(request: HttpRequest) -> HttpResponse:
    """The dashboard: the live table and the charts over ``?span=``."""
    cluster = current_cluster(request)
    context = {"cluster": cluster, "charts": CHARTS, "span": chosen_span(request), "spans": stats.SPANS}
    return render(request, "web/mirror.html", {**context, **_table_context(cluster)})


@viewer_page
def mirror_table(request: HttpRequest) -> HttpResponse:
    """The live table (htmx polls it)."""
    return render(request, "web/partials/mirror_table.html", _table_context(current_cluster(request)))


@viewer_page
def mirror_chart(request: HttpRequest, metric: str) -> JsonResponse:
    """One mirror metric over ``?span=``, a series per node of the working cluster, in the format the dashboard's
    charts take (``fleet.web.views.backends.chart_data``)."""
    if metric not in CHARTS:
        raise Http404(f"no chart {metric!r}")
    now = timezone.now()
    since = now - stats.SPANS[chosen_span(request)]
    series: list[dict[str, Any]] = [
        {
            "node": node.name,
            "points": [[at.timestamp() * 1000, value] for at, value in stats.mirror_series(node, metric, since)],
        }
        for node in ProxyNode.objects.filter(cluster=current_cluster(request)).only("name").order_by("name")
    ]
    return JsonResponse(
        {
            "metric": metric,
            "title": CHARTS[metric],
            "since": since.timestamp() * 1000,
            "until": now.timestamp() * 1000,
            "series": series,
        }
    )
