"""The history of what nodes report, for dashboards: raw points for the last hours, per-minute and per-hour
averages for days (``fleet.core.stats`` writes, rolls up, prunes and reads it)."""

from __future__ import annotations

from django.db import models

from fleet.core.models.nodes import ProxyNode


class Resolution(models.IntegerChoices):
    """Seconds one point stands for: a single report, or the average over a minute or an hour."""

    RAW = 0, "raw"
    MINUTE = 60, "minute"
    HOUR = 3600, "hour"


class NodeSample(models.Model):
    """One point of a node's history: its client side."""

    node = models.ForeignKey(ProxyNode, on_delete=models.CASCADE, related_name="+")
    resolution = models.PositiveIntegerField(choices=Resolution.choices)
    at = models.DateTimeField(help_text="the report's time, or the start of the minute or hour")
    questions_per_s = models.FloatField(null=True, help_text="client commands per second (none without a rate)")
    client_connections = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "resolution", "at"], name="one_node_sample_per_time")]
        indexes = [models.Index(fields=["resolution", "at"], name="node_sample_age")]

    def __str__(self) -> str:
        return f"{self.node_id} {self.get_resolution_display()} {self.at:%Y-%m-%d %H:%M:%S}"


class ServerSample(models.Model):
    """One point of the history of a backend server (of one hostgroup) as one node sees it."""

    node = models.ForeignKey(ProxyNode, on_delete=models.CASCADE, related_name="+")
    resolution = models.PositiveIntegerField(choices=Resolution.choices)
    at = models.DateTimeField(help_text="the report's time, or the start of the minute or hour")
    hostgroup = models.PositiveIntegerField()
    server = models.CharField(max_length=300, help_text="host:port")
    status = models.CharField(max_length=16, help_text="ONLINE, SHUNNED, OFFLINE_SOFT, OFFLINE_HARD (the last seen)")
    conn_used = models.FloatField()
    conn_free = models.FloatField()
    conn_err = models.PositiveBigIntegerField(help_text="failed connection attempts so far (ConnERR)")
    queries_per_s = models.FloatField(null=True, help_text="queries sent per second (none without a rate)")
    latency_us = models.FloatField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["node", "hostgroup", "server", "resolution", "at"], name="one_server_sample_per_time"
            )
        ]
        indexes = [
            models.Index(fields=["resolution", "at"], name="server_sample_age"),
            models.Index(fields=["node", "resolution", "at"], name="server_sample_node"),
        ]

    def __str__(self) -> str:
        return f"{self.node_id} hg{self.hostgroup} {self.server} {self.get_resolution_display()} {self.at}"


class MirrorSample(models.Model):
    """One point of the history of a node's mirror (``/stats`` ``mirror``): what waits, what runs, how long the
    oldest statement has waited, and its counters as rates."""

    node = models.ForeignKey(ProxyNode, on_delete=models.CASCADE, related_name="+")
    resolution = models.PositiveIntegerField(choices=Resolution.choices)
    at = models.DateTimeField(help_text="the report's time, or the start of the minute or hour")
    queue_length = models.FloatField(help_text="statements waiting (ProxySQL queue, ordered in memory and on disk)")
    queue_disk = models.FloatField(help_text="statements waiting in the ordered mirror's queue on disk")
    concurrency = models.FloatField(help_text="statements (and ordered sessions) running on the mirror")
    oldest_age_s = models.FloatField(help_text="seconds the oldest waiting statement has waited")
    mirrored_per_s = models.FloatField(null=True, help_text="statements handed to the mirror per second")
    completed_per_s = models.FloatField(null=True, help_text="statements run on the mirror per second")
    failed_per_s = models.FloatField(null=True, help_text="statements that failed on the mirror per second")
    dropped_per_s = models.FloatField(null=True, help_text="statements dropped per second")
    dropped = models.PositiveBigIntegerField(help_text="statements dropped so far (a rollup keeps the highest)")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "resolution", "at"], name="one_mirror_sample_per_time")]
        indexes = [models.Index(fields=["resolution", "at"], name="mirror_sample_age")]

    def __str__(self) -> str:
        return f"{self.node_id} mirror {self.get_resolution_display()} {self.at:%Y-%m-%d %H:%M:%S}"


class HotQueueSample(models.Model):
    """One point of the history of a hot-row queue of a node (``/stats`` ``trx_queue.queues``, docs/hot-rows.md):
    its keys held and transactions waiting, the longest wait now, and its counters as rates."""

    node = models.ForeignKey(ProxyNode, on_delete=models.CASCADE, related_name="+")
    resolution = models.PositiveIntegerField(choices=Resolution.choices)
    at = models.DateTimeField(help_text="the report's time, or the start of the minute or hour")
    queue = models.CharField(max_length=64, help_text="the queue's name")
    keys_active = models.FloatField(help_text="keys some transaction holds")
    waiters = models.FloatField(help_text="transactions waiting for a key")
    longest_wait_ms = models.FloatField(help_text="how long the transaction waiting longest has waited (ms)")
    transactions_per_s = models.FloatField(null=True, help_text="transactions that went through the queue per second")
    timeouts_per_s = models.FloatField(null=True, help_text="waits that timed out per second")
    refused_per_s = models.FloatField(null=True, help_text="transactions refused (queue full) per second")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["node", "queue", "resolution", "at"], name="one_hot_queue_sample_per_time")
        ]
        indexes = [
            models.Index(fields=["resolution", "at"], name="hot_queue_sample_age"),
            models.Index(fields=["node", "resolution", "at"], name="hot_queue_sample_node"),
        ]

    def __str__(self) -> str:
        return f"{self.node_id} queue {self.queue} {self.get_resolution_display()} {self.at:%Y-%m-%d %H:%M:%S}"
