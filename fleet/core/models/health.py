"""The control plane's own processes as they last showed themselves alive (Celery worker, beat)."""

from __future__ import annotations

from django.db import models


class ServiceHeartbeat(models.Model):
    """The last time a control-plane process did its work: the worker ran a task, beat ticked."""

    name = models.CharField(max_length=20, unique=True)
    at = models.DateTimeField()
    detail = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} at {self.at:%Y-%m-%d %H:%M:%S}"
