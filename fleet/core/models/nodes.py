"""Clusters (nodes sharing one config) and the proxy nodes that serve it."""

from __future__ import annotations

import uuid

from django.core.validators import RegexValidator
from django.db import models

from fleet.core.sealing import SealedTextField

# A node's addresses: host:port, the host a DNS name, an IPv4 address or a bracketed IPv6 address.
HOST_PORT = RegexValidator(
    r"^([A-Za-z0-9]([A-Za-z0-9_.-]{0,252})|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}$", "host:port, as in 10.0.0.5:6033"
)
# A node's name is part of its Celery queue's name ("node.<name>"), so it keeps to a safe alphabet.
NODE_NAME = RegexValidator(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$", "letters, digits, '.', '_' and '-' (at most 63)")


class Cluster(models.Model):
    """A set of proxy nodes that serve one config; every table row belongs to exactly one cluster."""

    name = models.CharField(max_length=100, unique=True, validators=[NODE_NAME])
    # Sent with every version: a node compares version numbers only within one cluster identity.
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    comment = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def latest_version(self) -> ConfigVersion | None:  # noqa: F821  (defined in versions.py)
        """The newest published version: what every node of the cluster should be running."""
        return self.versions.order_by("-number").first()


class ProxyNode(models.Model):
    """One proxy process of a cluster, reached through its own Celery queue ``node.<name>``."""

    class State(models.TextChoices):
        PENDING = "pending", "pending"
        APPLIED = "applied", "applied"
        FAILED = "failed", "failed"

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="nodes")
    name = models.CharField(max_length=63, unique=True, validators=[NODE_NAME])
    mysql_address = models.CharField(
        max_length=255, blank=True, default="", validators=[HOST_PORT], help_text="host:port clients use"
    )
    admin_address = models.CharField(
        max_length=255, blank=True, default="", validators=[HOST_PORT], help_text="host:port of its admin API"
    )
    # The node's admin credential (its admin.token file, ``proxyapp.credential``), sealed at rest: what the node
    # page's KILL and digest reset show the node.
    admin_token = SealedTextField(
        blank=True, default="", help_text="the token in the node's admin.token file (for KILL and digest resets)"
    )
    # What the node last told us it runs, and how its last apply went.
    applied_version = models.PositiveIntegerField(null=True, blank=True)
    applied_checksum = models.CharField(max_length=64, blank=True, default="")
    state = models.CharField(max_length=10, choices=State.choices, default=State.PENDING)
    error = models.TextField(blank=True, default="")
    # The version last sent to the node, which ``state`` is about: pending on it, refused it, or running it.
    pushed_version = models.PositiveIntegerField(null=True, blank=True)
    last_pushed_at = models.DateTimeField(null=True, blank=True)
    last_ack_at = models.DateTimeField(null=True, blank=True)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    # Set by reconcile when the node stopped reporting (no heartbeat for ``push.STALE_AFTER``); cleared by a report.
    stale_since = models.DateTimeField(null=True, blank=True)
    # The node's latest report: {"global": {...}, "connection_pool": [...], "query_digest": [...], ...}, as the
    # proxy's admin endpoint /stats returns it.
    last_report = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster__name", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def queue(self) -> str:
        """The Celery queue this node consumes."""
        return f"node.{self.name}"
