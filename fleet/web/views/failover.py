"""The failover pages (``fleet.failover``) of the working cluster: each replication hostgroup's topology as the nodes
see it, refreshed live, with the operators' buttons (switchover, rejoin, settings); the events with their
timelines (acknowledge); the backend status history the nodes' monitors reported."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from fleet.core.models import Cluster
from fleet.failover import actions
from fleet.failover.models import BackendTransition, Event
from fleet.failover.policies import save_policy
from fleet.failover.status import HostgroupStatus, cluster_status
from fleet.failover.tasks import queue_switchover
from fleet.web.access import current_cluster, operator_only, viewer_page
from fleet.web.forms import show_model_errors
from fleet.web.forms.failover import PolicyForm

#: Events and transitions a page lists at once.
PAGE_SIZE = 50


def _hostgroup(cluster: Cluster | None, writer_hostgroup: int) -> HostgroupStatus:
    for hostgroup in cluster_status(cluster):
        if hostgroup.writer_hostgroup == writer_hostgroup:
            return hostgroup
    raise Http404(f"no published replication hostgroup {writer_hostgroup}")


@viewer_page
def topology(request: HttpRequest) -> HttpResponse:
    """Every replication hostgroup of the working cluster: primary, replicas, lag and states per node."""
    cluster = current_cluster(request)
    return render(request, "web/failover/topology.html", {"cluster": cluster, "hostgroups": cluster_status(cluster)})


@viewer_page
def topology_live(request: HttpRequest) -> HttpResponse:
    """The topology cards alone (htmx polls them)."""
    context = {"hostgroups": cluster_status(current_cluster(request))}
    return render(request, "web/failover/partials/hostgroups.html", context)


@operator_only
def policy(request: HttpRequest, writer_hostgroup: int) -> HttpResponse:
    """A hostgroup's failover settings; errors show next to their fields."""
    cluster = current_cluster(request)
    hostgroup = _hostgroup(cluster, writer_hostgroup)
    form = PolicyForm(request.POST if request.method == "POST" else None, instance=hostgroup.policy)
    if form.is_bound and form.is_valid():
        try:
            save_policy(form.save(commit=False), request.user)
        except ValidationError as error:
            show_model_errors(form, error)
        else:
            messages.success(request, f"Saved the failover settings of hostgroup {writer_hostgroup}.")
            return redirect("web:failover")
    return render(request, "web/failover/policy.html", {"cluster": cluster, "hostgroup": hostgroup, "form": form})


@require_POST
@operator_only
def switchover(request: HttpRequest, writer_hostgroup: int) -> HttpResponse:
    """Start a switchover to the replica ``target``; its event page shows the progress."""
    try:
        event = actions.request_switchover(
            current_cluster(request), writer_hostgroup, request.POST.get("target", "").strip(), request.user
        )
    except actions.ActionRefused as error:
        messages.error(request, f"Switchover refused: {error}")
        return redirect("web:failover")
    queue_switchover(event)
    messages.success(request, f"Switchover #{event.pk} to {event.new_primary} started.")
    return redirect("web:failover_event", pk=event.pk)


@require_POST
@operator_only
def rejoin(request: HttpRequest, writer_hostgroup: int) -> HttpResponse:
    """Rejoin the fenced ``server`` as a replica of the current primary."""
    server = request.POST.get("server", "").strip()
    try:
        event = actions.rejoin(current_cluster(request), writer_hostgroup, server, request.user)
    except actions.ActionRefused as error:
        messages.error(request, f"Rejoin of {server} refused: {error}")
        return redirect("web:failover")
    messages.success(request, event.summary)
    return redirect("web:failover_event", pk=event.pk)


@viewer_page
def events(request: HttpRequest) -> HttpResponse:
    """The working cluster's failovers, switchovers and rejoins, newest first."""
    cluster = current_cluster(request)
    rows = Paginator(Event.objects.filter(cluster=cluster), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "web/failover/events.html", {"cluster": cluster, "events": rows})


@viewer_page
def event(request: HttpRequest, pk: int) -> HttpResponse:
    """One event's timeline, every step explaining itself."""
    found = get_object_or_404(Event.objects.select_related("requested_by", "acknowledged_by", "version"), pk=pk)
    return render(request, "web/failover/event.html", {"event": found, "steps": found.steps.all()})


@require_POST
@operator_only
def acknowledge(request: HttpRequest, pk: int) -> HttpResponse:
    """Acknowledge a failover: its cooling period no longer blocks another one."""
    found = get_object_or_404(Event, pk=pk)
    try:
        actions.acknowledge(found, request.user)
    except actions.ActionRefused as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"Acknowledged failover #{found.pk}: another failover may follow at once.")
    return redirect("web:failover_event", pk=found.pk)


@viewer_page
def transitions(request: HttpRequest) -> HttpResponse:
    """The backend status history of the working cluster, filtered by ``?server=host:port`` and ``?node=``."""
    cluster = current_cluster(request)
    server, node = request.GET.get("server", "").strip(), request.GET.get("node", "").strip()
    rows = BackendTransition.objects.filter(node__cluster=cluster).select_related("node")
    if server:
        rows = rows.filter(server=server)
    if node:
        rows = rows.filter(node__name=node)
    query = urlencode({k: v for k, v in (("server", server), ("node", node)) if v})
    context = {
        "cluster": cluster,
        "transitions": Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page")),
        "server": server,
        "node": node,
        "nodes": cluster.nodes.values_list("name", flat=True) if cluster is not None else [],
        "query": query,
    }
    return render(request, "web/failover/transitions.html", context)
