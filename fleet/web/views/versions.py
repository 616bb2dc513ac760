"""Publishing the draft with a preview of its changes, the version history, diffs between any two versions, and
rollback."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from fleet.core import publishing
from fleet.core.models import Cluster, ConfigVersion
from fleet.web.access import current_cluster, operator_action, operator_only, viewer_page
from proxyapp.config.document import ConfigError

#: Versions the history lists at once (``?page=`` for older ones).
PAGE_SIZE = 50


@operator_action
def publish_page(request: HttpRequest) -> HttpResponse:
    """The draft's changes against the latest version and, for operators, the Publish button.

    A published version is pushed to the cluster's nodes; the overview then shows each node taking it.
    """
    cluster = current_cluster(request)
    errors: list[str] = []
    comment = request.POST.get("comment", "")
    if cluster is not None and request.method == "POST":
        try:
            previewed = request.POST.get("draft_checksum", "")
            version = publishing.publish(cluster, request.user, comment=comment, previewed=previewed)
        except publishing.NothingToPublish:
            messages.info(request, "Nothing to publish: the draft is the latest version's config.")
        except publishing.DraftChanged as changed:
            messages.warning(request, f"Not published: {changed}.")
        except ConfigError as error:
            errors = error.errors
        else:
            delivered, message = publishing.publish_message(version)
            (messages.success if delivered else messages.warning)(request, message)
            return redirect("web:overview")
    changes: list[publishing.RowChange] = []
    warnings: list[str] = []
    checksum = ""
    if cluster is not None:
        try:
            changes, warnings, checksum = publishing.draft_preview(cluster)
        except ConfigError as error:
            errors = errors or error.errors
    context = {
        "cluster": cluster,
        "latest": cluster.latest_version() if cluster is not None else None,
        "changes": changes,
        "errors": errors,
        "warnings": warnings,
        "comment": comment,
        "checksum": checksum,
    }
    return render(request, "web/publish.html", context)


@viewer_page
def history(request: HttpRequest) -> HttpResponse:
    """The working cluster's published versions, newest first, ``PAGE_SIZE`` a page, with a two-version picker."""
    cluster = current_cluster(request)
    versions = ConfigVersion.objects.filter(cluster=cluster).select_related("author").order_by("-number")
    page = Paginator(versions, PAGE_SIZE).get_page(request.GET.get("page"))
    latest = cluster.latest_version() if cluster is not None else None
    context = {"cluster": cluster, "versions": page, "latest": latest}
    return render(request, "web/history.html", context)


def _version(cluster: Cluster | None, number: str) -> ConfigVersion:
    """Version ``number`` (as text, from a query string) of ``cluster``; 404 when there is none."""
    return get_object_or_404(ConfigVersion, cluster=cluster, number=int(number) if number.isdigit() else -1)


@viewer_page
def version_diff(request: HttpRequest) -> HttpResponse:
    """What changed from version ``old`` to version ``new`` (query parameters): row changes and a unified diff."""
    cluster = current_cluster(request)
    old, new = (_version(cluster, request.GET.get(name, "")) for name in ("old", "new"))
    context = {
        "cluster": cluster,
        "old": old,
        "new": new,
        "latest": cluster.latest_version() if cluster is not None else None,
        "changes": publishing.diff_versions(old, new),
        "unified": publishing.unified_diff(old.document, new.document, f"v{old.number}", f"v{new.number}"),
    }
    return render(request, "web/diff.html", context)


@require_POST
@operator_only
def discard_draft(request: HttpRequest) -> HttpResponse:
    """Put the latest version's config back in the working cluster's draft, dropping its unpublished edits."""
    cluster = current_cluster(request)
    if cluster is None:
        messages.error(request, "There is no cluster yet: there is no draft to discard.")
        return redirect("web:publish")
    try:
        latest = publishing.discard_draft(cluster, request.user)
    except publishing.NothingToDiscard as nothing:
        messages.info(request, f"Nothing to discard: {nothing}.")
    else:
        messages.success(
            request, f"Discarded the draft's unpublished edits: it is version {latest.number}'s config again."
        )
    return redirect("web:publish")


@require_POST
@operator_only
def rollback(request: HttpRequest, number: int) -> HttpResponse:
    """Publish version ``number``'s config again as a new version; the draft's unpublished edits are discarded (the
    draft becomes that config)."""
    target = get_object_or_404(ConfigVersion, cluster=current_cluster(request), number=number)
    discarded = publishing.has_unpublished_edits(target.cluster)
    try:
        version = publishing.rollback(target, request.user, comment=request.POST.get("comment", ""))
    except publishing.NothingToPublish:
        messages.info(request, f"Nothing to roll back: version {number}'s config is the latest version's.")
    except ConfigError as error:
        messages.error(request, f"Rollback to version {number} refused: {'; '.join(error.errors)}")
    else:
        delivered, message = publishing.publish_message(version)
        said = f"Rolled back to version {number}'s config as version {version.number}."
        if discarded:
            said += " The draft's unpublished edits were discarded."
        if delivered:
            messages.success(request, said)
        else:
            messages.warning(request, f"{said} {message}")
    return redirect("web:history")
