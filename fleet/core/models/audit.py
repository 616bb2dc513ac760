"""The audit log: who changed what, when, with the row before and after (passwords masked)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from fleet.core.models.nodes import Cluster


class AuditEntry(models.Model):
    """One change (a row created, updated or deleted, a publish, a rollback, an import), or a login or failed
    login (``after`` holds the client's address and the way in)."""

    class Action(models.TextChoices):
        CREATE = "create", "create"
        UPDATE = "update", "update"
        DELETE = "delete", "delete"
        PUBLISH = "publish", "publish"
        ROLLBACK = "rollback", "rollback"
        IMPORT = "import", "import"
        DISCARD = "discard", "discard draft"
        LOGIN = "login", "login"
        LOGIN_FAILED = "login-fail", "login failed"
        KILL = "kill", "kill"

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=10, choices=Action.choices)
    cluster = models.ForeignKey(Cluster, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    table = models.CharField(max_length=64, blank=True, default="", help_text="ProxySQL table or model name")
    object_key = models.CharField(max_length=255, blank=True, default="")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    #: Where the change came from: ``web`` (the UI), ``api``, ``cli`` (a management command, beat, a task), and
    #: the client's address for the first two.
    source = models.CharField(max_length=8, blank=True, default="", db_index=True)
    client = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.user} {self.action} {self.table} {self.object_key}"
