"""The Django admin (superusers): accounts and role groups (Django's own), clusters and proxy nodes.

Table rows, versions and the audit log are not registered: the UI's pages edit and show them through
``fleet.core.drafts`` and ``fleet.core.publishing``, so every change is validated and audited the same way and no
secret is ever rendered.
"""

from __future__ import annotations

from django.contrib import admin

from fleet.core.models import Cluster, ProxyNode


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    """Clusters: a name and a comment."""

    list_display = ("name", "comment", "created_at")
    search_fields = ("name",)


@admin.register(ProxyNode)
class ProxyNodeAdmin(admin.ModelAdmin):
    """Nodes: their cluster and addresses are set here; what they report is read-only."""

    list_display = ("name", "cluster", "mysql_address", "applied_version", "state", "last_heartbeat")
    list_filter = ("cluster", "state")
    search_fields = ("name", "mysql_address")
    readonly_fields = (
        "pushed_version",
        "stale_since",
        "applied_version",
        "applied_checksum",
        "state",
        "error",
        "last_pushed_at",
        "last_ack_at",
        "last_heartbeat",
        "last_report",
    )
