"""The Hot rows page (docs/hot-rows.md): each hot-row queue of every node and of the whole fleet as they report it
(live), its keys, waiters, longest wait, transactions, timeouts and refusals over time, and the queues the nodes
propose for hot keys, which an operator accepts into the draft as a query rule."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from fleet.core import hotrows, stats
from fleet.core.models import Cluster, ProxyNode
from fleet.web.access import current_cluster, operator_only, viewer_page
from fleet.web.views.backends import chosen_span

#: The charts: metric (``stats.QUEUE_METRICS``) -> title.
CHARTS = {
    "waiters": "Waiters (transactions waiting for a key)",
    "keys_active": "Keys active (held by a transaction)",
    "longest_wait_ms": "Longest wait (ms)",
    "transactions_per_s": "Transactions/s",
    "timeouts_per_s": "Timeouts/s",
    "refused_per_s": "Refused/s (queue full)",
}


def chosen_node(request: HttpRequest, cluster: Cluster | None) -> str:
    """The node the charts draw (``?node=``, one of the cluster's), or "" for the whole fleet."""
    name = request.GET.get("node", "")
    return name if name and ProxyNode.objects.filter(cluster=cluster, name=name).exists() else ""


def _table_context(cluster: Cluster | None) -> dict[str, Any]:
    problems: list[str] = []
    lines, fleet = hotrows.queue_lines(cluster, problems)
    return {"lines": lines, "fleet": fleet, "report_problems": problems}


@viewer_page
def hot_rows(request: HttpRequest) -> HttpResponse:
    """The page: the live queues, the charts over ``?span=`` (of ``?node=`` or the fleet) and the proposals."""
    cluster = current_cluster(request)
    problems: list[str] = []
    context = {
        "cluster": cluster,
        "charts": CHARTS,
        "span": chosen_span(request),
        "spans": stats.SPANS,
        "node": chosen_node(request, cluster),
        "nodes": ProxyNode.objects.filter(cluster=cluster).order_by("name").values_list("name", flat=True),
        "proposals": hotrows.proposals(cluster, problems),
        "proposal_problems": problems,
    }
    return render(request, "web/hot_rows.html", {**context, **_table_context(cluster)})


@viewer_page
def hot_rows_table(request: HttpRequest) -> HttpResponse:
    """The live table (htmx polls it)."""
    return render(request, "web/partials/hot_rows_table.html", _table_context(current_cluster(request)))


@viewer_page
def hot_rows_chart(request: HttpRequest, metric: str) -> JsonResponse:
    """One queue metric over ``?span=``, a series per queue of ``?node=`` or of the fleet, in the format the
    dashboard's charts take (``fleet.web.views.backends.chart_data``)."""
    if metric not in CHARTS:
        raise Http404(f"no chart {metric!r}")
    cluster = current_cluster(request)
    now = timezone.now()
    since = now - stats.SPANS[chosen_span(request)]
    return JsonResponse(
        {
            "metric": metric,
            "title": CHARTS[metric],
            "since": since.timestamp() * 1000,
            "until": now.timestamp() * 1000,
            "series": hotrows.chart_series(cluster, metric, since, chosen_node(request, cluster)),
        }
    )


@require_POST
@operator_only
def accept_proposal(request: HttpRequest) -> HttpResponse:
    """Accept the proposal ``id``: its query rules are added to the draft (audited), to be published as usual."""
    cluster = current_cluster(request)
    if cluster is None:
        raise Http404("no cluster")
    try:
        rules = hotrows.accept(cluster, request.POST.get("id", ""), request.user)
    except hotrows.ProposalError as error:
        messages.error(request, str(error))
    except ValidationError as error:
        messages.error(request, "The rule was refused: " + "; ".join(error.messages))
    else:
        messages.success(
            request,
            format_html(
                'Rule {} (queue {} by {}) added to the draft: <a href="{}">publish it</a> to run it.',
                ", ".join(str(rule.rule_id) for rule in rules),
                rules[0].trx_queue,
                rules[0].trx_queue_key,
                reverse("web:publish"),
            ),
        )
    return redirect("web:hot_rows")
