"""Failover's models: a policy per replication hostgroup, events (failover, switchover, rejoin) with their timelines,
fences on old primaries, and the backend status history the nodes report."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils import timezone

from fleet.core.models import Cluster, ConfigVersion, ProxyNode
from fleet.core.sealing import SealedTextField

log = logging.getLogger("fleet.failover")


def parse_server(text: str) -> tuple[str, int]:
    """``"host:port"`` -> (host, port); ValueError saying what is wrong."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text.strip()!r} is not host:port (a port from 1 to 65535)")
    return host, int(port)


def server_name(host: str, port: int) -> str:
    """``host:port``, the way failover names a server (as the backend dashboards do)."""
    return f"{host}:{port}"


class FailoverPolicy(models.Model):
    """How the control plane treats the primary of one replication hostgroup (a cluster's writer hostgroup).

    Keyed by the writer hostgroup's number, not by the draft's row, so that editing or importing the draft keeps
    it. Without a saved policy (or with ``enabled`` off) the nodes only follow ``read_only``, as ProxySQL does.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    writer_hostgroup = models.PositiveIntegerField()
    enabled = models.BooleanField(
        default=False, help_text="fail over automatically; off: the nodes follow read_only only, as ProxySQL does"
    )
    cooling_period_s = models.PositiveIntegerField(
        default=300, help_text="seconds after a failover during which no other one starts unless it is acknowledged"
    )
    admin_user = models.CharField(
        max_length=80, default="root", help_text="the account that runs topology changes on the servers"
    )
    admin_password = SealedTextField(max_length=255, blank=True, default="", help_text="write-only")
    replication_user = models.CharField(
        max_length=80, blank=True, default="", help_text="the account replicas log in to the primary as"
    )
    replication_password = SealedTextField(max_length=255, blank=True, default="", help_text="write-only")
    write_wait_s = models.PositiveIntegerField(
        default=5,
        help_text="seconds writes may be held during a switchover (keep it within the nodes' mysql-no_writer_wait_ms, "
        "5000 by default: a write held longer fails); a replica that does not catch up within it aborts the "
        "switchover and the old primary takes writes again",
    )
    promotion_order = models.TextField(
        blank=True,
        default="",
        help_text="host:port of the replicas in order of preference, separated by commas: breaks ties between "
        "equally advanced replicas (unlisted ones follow by weight, then host and port)",
    )
    updated_at = models.DateTimeField(auto_now=True)

    #: The write-only fields: never shown, left blank in a form to keep them.
    SECRETS = ("admin_password", "replication_password")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "writer_hostgroup"], name="failover_policy_per_hostgroup")
        ]
        verbose_name_plural = "failover policies"

    def __str__(self) -> str:
        return f"{self.cluster} hostgroup {self.writer_hostgroup}: failover {'on' if self.enabled else 'off'}"

    @classmethod
    def of(cls, cluster: Cluster, writer_hostgroup: int) -> FailoverPolicy:
        """The saved policy of the hostgroup, or (unsaved) the defaults: failover off."""
        found = cls.objects.filter(cluster=cluster, writer_hostgroup=writer_hostgroup).first()
        return found or cls(cluster=cluster, writer_hostgroup=writer_hostgroup)

    def clean(self) -> None:
        """Check the promotion order (every entry host:port) and the wait (at least a second)."""
        super().clean()
        errors = {}
        try:
            self.promotion_list()
        except ValueError as error:
            errors["promotion_order"] = [str(error)]
        if self.write_wait_s < 1:
            errors["write_wait_s"] = ["at least 1 second"]
        if errors:
            raise ValidationError(errors)

    def promotion_list(self) -> list[str]:
        """The promotion order as ``host:port`` names; ValueError naming the entry that is not host:port."""
        names = []
        for entry in self.promotion_order.replace("\n", ",").split(","):
            if entry.strip():
                names.append(server_name(*parse_server(entry)))
        return names


class Event(models.Model):
    """A failover, switchover or rejoin of one replication hostgroup, with its timeline (``steps``)."""

    class Kind(models.TextChoices):
        FAILOVER = "failover", "failover"
        SWITCHOVER = "switchover", "switchover"
        REJOIN = "rejoin", "rejoin"

    class State(models.TextChoices):
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"
        BLOCKED = "blocked", "blocked"  # a dead primary seen, and not failed over (failover off, cooling period)

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    writer_hostgroup = models.PositiveIntegerField()
    reader_hostgroup = models.PositiveIntegerField()
    kind = models.CharField(max_length=12, choices=Kind.choices)
    state = models.CharField(max_length=10, choices=State.choices, default=State.RUNNING)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    old_primary = models.CharField(max_length=300, blank=True, default="", help_text="host:port")
    new_primary = models.CharField(max_length=300, blank=True, default="", help_text="host:port")
    summary = models.TextField(blank=True, default="", help_text="the outcome in a sentence")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    #: Whether the topology changed (a server was promoted): such a failover starts the cooling period.
    promoted = models.BooleanField(default=False)
    promoted_position = models.CharField(
        max_length=500, blank=True, default="", help_text="the new primary's @@gtid_binlog_pos when promoted"
    )
    version = models.ForeignKey(ConfigVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    first_write_at = models.DateTimeField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: For a blocked event: the last time the dead primary was still seen dead and still not failed over.
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["cluster", "writer_hostgroup", "state"], name="failover_event_state")]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk} of hostgroup {self.writer_hostgroup} ({self.state})"

    def record(self, name: str, detail: str, *, ok: bool = True, data: dict[str, Any] | None = None) -> Step:
        """Add a step to the timeline (and to the log, so that the logs say why too)."""
        log.log(logging.INFO if ok else logging.WARNING, "%s #%s %s: %s", self.kind, self.pk, name, detail)
        return Step.objects.create(event=self, at=timezone.now(), name=name, ok=ok, detail=detail, data=data or {})

    def finish(self, state: str, summary: str) -> None:
        """End the event with ``state`` and its outcome in a sentence."""
        self.state, self.summary, self.finished_at = state, summary, timezone.now()
        self.save(update_fields=["state", "summary", "finished_at"])
        log.info("%s #%s %s: %s", self.kind, self.pk, state, summary)


class Step(models.Model):
    """One step of an event's timeline, explaining itself in ``detail`` (and ``data`` for machines)."""

    class Name(models.TextChoices):
        DETECTED = "detected", "detected"
        BLOCKED = "blocked", "not failed over"
        FENCED = "fenced", "old primary fenced"
        CHOSEN = "chosen", "replica chosen"
        WRITES_STOPPED = "writes_stopped", "writes stopped"
        CAUGHT_UP = "caught_up", "replica caught up"
        PROMOTED = "promoted", "promoted"
        REPOINTED = "repointed", "replicas repointed"
        PUBLISHED = "published", "published"
        REPLICATING = "replicating", "replication checked"
        FIRST_WRITE = "first_write", "first write seen"
        REJOINED = "rejoined", "rejoined"
        ACKNOWLEDGED = "acknowledged", "acknowledged"
        FAILED = "failed", "failed"
        RESUMED = "resumed", "writes resumed on the old primary"

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="steps")
    at = models.DateTimeField()
    name = models.CharField(max_length=16, choices=Name.choices)
    ok = models.BooleanField(default=True)
    detail = models.TextField()
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.event_id} {self.name} {self.at:%H:%M:%S.%f}"


class Fence(models.Model):
    """An old primary kept out of the writer hostgroup (``read_only=1``, OFFLINE_HARD in the config) until an
    operator rejoins it as a replica."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    writer_hostgroup = models.PositiveIntegerField()
    server = models.CharField(max_length=300, help_text="host:port")
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="fences")
    since = models.DateTimeField()
    #: The last check of the server by the control plane, and what it found.
    checked_at = models.DateTimeField(null=True, blank=True)
    reachable = models.BooleanField(default=False)
    read_only = models.BooleanField(null=True, blank=True)
    check_error = models.TextField(blank=True, default="")
    released_at = models.DateTimeField(null=True, blank=True)
    released_by = models.ForeignKey(Event, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-since", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "server"], condition=Q(released_at__isnull=True), name="one_active_fence_per_server"
            )
        ]

    def __str__(self) -> str:
        return f"fence on {self.server} (hostgroup {self.writer_hostgroup})"


class BackendTransition(models.Model):
    """A server's state change as a node's monitor reported it (``server_transitions`` of its reports)."""

    node = models.ForeignKey(ProxyNode, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField()
    hostgroup = models.PositiveIntegerField()
    server = models.CharField(max_length=300, help_text="host:port")
    from_status = models.CharField(max_length=16)
    to_status = models.CharField(max_length=16)
    reason = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "at", "hostgroup", "server", "to_status"], name="one_transition_per_report_row"
            )
        ]
        indexes = [models.Index(fields=["at"], name="transition_age")]

    def __str__(self) -> str:
        return f"{self.node_id} hg{self.hostgroup} {self.server} {self.from_status}->{self.to_status}"
