"""Published config versions: immutable, numbered per cluster, each a whole config document."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from fleet.core.models.nodes import Cluster
from fleet.core.sealing import SealedDocumentField


class ConfigVersion(models.Model):
    """A published config (ProxySQL's LOAD ... TO RUNTIME): the compiled document, never edited afterwards."""

    #: Set by a publish once it tried to send the version to its nodes: what kept it from them ("" if nothing).
    delivery_problem = ""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    document = SealedDocumentField()  # its passwords sealed at rest
    checksum = models.CharField(max_length=64)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    comment = models.TextField(blank=True, default="")
    rollback_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["cluster__name", "-number"]
        constraints = [models.UniqueConstraint(fields=["cluster", "number"], name="version_number_per_cluster")]

    def __str__(self) -> str:
        return f"{self.cluster.name} v{self.number}"
