"""Who may see and do what in the UI, and which cluster a request works on (kept in the session)."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from fleet.core.models import Cluster
from fleet.core.roles import can_edit, can_view

SESSION_CLUSTER = "web_cluster_id"

View = Callable[..., HttpResponse]


def viewer_page(view: View) -> View:
    """A page any viewer may open (login required; 403 for an account without a role)."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not can_view(request.user):
            raise PermissionDenied("you have no role on this control plane")
        return view(request, *args, **kwargs)

    return wrapped


def operator_action(view: View) -> View:
    """A page that changes things: only operators may POST to it (viewers get 403); GETs are viewer pages."""

    @viewer_page
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method not in ("GET", "HEAD") and not can_edit(request.user):
            raise PermissionDenied("only operators may change the configuration")
        return view(request, *args, **kwargs)

    return wrapped


def operator_only(view: View) -> View:
    """A page only operators may open at all (forms that exist only to change things)."""

    @viewer_page
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not can_edit(request.user):
            raise PermissionDenied("only operators may change the configuration")
        return view(request, *args, **kwargs)

    return wrapped


def current_cluster(request: HttpRequest) -> Cluster | None:
    """The cluster chosen in the header (the first one until a choice is made), or None when there is none."""
    chosen = request.session.get(SESSION_CLUSTER)
    cluster = Cluster.objects.filter(pk=chosen).first() if chosen is not None else None
    return cluster or Cluster.objects.order_by("name").first()


def choose_cluster(request: HttpRequest, cluster: Cluster) -> None:
    """Remember ``cluster`` as this session's working cluster."""
    request.session[SESSION_CLUSTER] = cluster.pk
