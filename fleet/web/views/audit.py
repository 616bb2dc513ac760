"""The audit log page: every recorded change, newest first, paged."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from fleet.core.models import AuditEntry
from fleet.web.access import viewer_page

PAGE_SIZE = 50


@viewer_page
def audit_log(request: HttpRequest) -> HttpResponse:
    """The audit log, all clusters, ``PAGE_SIZE`` entries a page (``?page=``)."""
    entries = AuditEntry.objects.select_related("user", "cluster")
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "web/audit.html", {"entries": page})
