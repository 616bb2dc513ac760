"""Clusters and their nodes, listed for everyone and added or edited by operators (validated and audited by
``fleet.core.drafts.save_row``, as the API does)."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from fleet.core.drafts import save_row
from fleet.core.models import Cluster, ProxyNode
from fleet.web.access import operator_only, viewer_page
from fleet.web.forms import show_model_errors
from fleet.web.forms.rows import ClusterForm, NodeForm, RowForm


@viewer_page
def fleet_page(request: HttpRequest) -> HttpResponse:
    """Every cluster with its nodes."""
    clusters = Cluster.objects.prefetch_related("nodes")
    return render(request, "web/fleet.html", {"clusters": clusters})


@operator_only
def cluster_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    """Add a cluster, or edit one."""
    instance = get_object_or_404(Cluster, pk=pk) if pk is not None else Cluster()
    return _edit(request, ClusterForm, instance, "cluster")


@operator_only
def node_edit(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    """Add a node, or edit one."""
    instance = get_object_or_404(ProxyNode, pk=pk) if pk is not None else ProxyNode()
    return _edit(request, NodeForm, instance, "node")


def _edit(request: HttpRequest, form_class: type[RowForm], instance: Cluster | ProxyNode, what: str) -> HttpResponse:
    form = form_class(request.POST if request.method == "POST" else None, instance=instance)
    if form.is_bound and form.is_valid():
        try:
            saved = save_row(form.save(commit=False), request.user)
        except ValidationError as error:
            show_model_errors(form, error)
        else:
            messages.success(request, f"Saved {what} {saved}.")
            return redirect("web:fleet")
    return render(request, "web/simple_form.html", {"form": form, "what": what, "row": instance})
