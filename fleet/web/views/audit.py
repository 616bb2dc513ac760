"""The audit log page: every recorded change, newest first, paged."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import urlencode

from fleet.core.models import AuditEntry, Cluster
from fleet.web.access import viewer_page

PAGE_SIZE = 50


@viewer_page
def audit_log(request: HttpRequest) -> HttpResponse:
    """The audit log, all clusters, ``PAGE_SIZE`` entries a page (``?page=``), filtered by ``?action=``,
    ``?user=`` (a username), ``?cluster=`` (a name), ``?table=``, ``?q=`` (text in the row's key) and ``?source=``
    (web, api, cli)."""
    filters = {name: request.GET.get(name, "").strip() for name in FILTERS}
    entries = AuditEntry.objects.select_related("user", "cluster")
    for name, lookup in FILTERS.items():
        if filters[name]:
            entries = entries.filter(**{lookup: filters[name]})
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "entries": page,
        "filters": filters,
        "query": urlencode({k: v for k, v in filters.items() if v}),
        "actions": AuditEntry.Action.choices,
        "tables": AuditEntry.objects.order_by("table").values_list("table", flat=True).distinct(),
        "clusters": Cluster.objects.values_list("name", flat=True),
        "sources": SOURCES,
    }
    return render(request, "web/audit.html", context)


#: The audit page's filters: query parameter -> the lookup it filters on.
FILTERS = {
    "action": "action",
    "user": "user__username",
    "cluster": "cluster__name",
    "table": "table",
    "q": "object_key__icontains",
    "source": "source",
}
#: The sources an entry may come from.
SOURCES = ("web", "api", "cli")
