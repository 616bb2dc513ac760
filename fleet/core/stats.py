"""Node report history: recorded from each report, rolled up, pruned, and read back as series for charts.

Every report adds a raw point per node (questions/s, client connections), per backend server (status, connections
used/free/failed, queries/s, latency) and, when the report has a ``mirror`` section, of the node's mirror (queue length
and its part on disk, concurrency, the oldest entry's age, statements mirrored, completed, failed and dropped per
second, drops so far) and, when it has a ``trx_queue`` section, of each of the node's hot-row queues (keys held,
transactions waiting, the longest wait, transactions, timeouts and refusals per second). Rates are counter differences
between consecutive reports; a counter that went down restarted from zero in between (the proxy restarted, a server was
re-added), so its whole value counts. ``compact`` (Celery beat, every minute) averages whole minutes of raw points into
minute points and whole hours of minute points into hour points, then drops what is older than ``RETENTION``.
``series``, ``server_series``, ``mirror_series`` and ``queue_series`` pick the resolution from the span asked for and
finish with finer points where the rollups end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import groupby
from typing import Any, TypeVar

from django.db import models
from django.utils import timezone

from fleet.core.hotreport import QueueRow, read_trx_queue
from fleet.core.models import HotQueueSample, MirrorSample, NodeSample, ProxyNode, Resolution, ServerSample
from proxyapp.report.reader import PoolRow, ReportError, read_counters, read_mirror, read_pools

#: How long points of each resolution are kept.
RETENTION = {
    Resolution.RAW: timedelta(hours=6),
    Resolution.MINUTE: timedelta(days=2),
    Resolution.HOUR: timedelta(days=30),
}
#: The spans the charts offer (the web's and the API's ``?span=``), the first the default.
SPANS = {"1h": timedelta(hours=1), "6h": timedelta(hours=6), "24h": timedelta(days=1), "7d": timedelta(days=7)}
#: The longest span drawn at each resolution (at most 1,440 points per series: a report every 5 s).
SPAN_LIMITS = ((timedelta(hours=2), Resolution.RAW), (timedelta(days=1), Resolution.MINUTE))
#: Two reports further apart than this give no rate (the node was away).
MAX_RATE_GAP = timedelta(minutes=5)
#: The metrics ``series`` and ``server_series`` draw.
NODE_METRICS = ("questions_per_s", "client_connections")
SERVER_METRICS = ("queries_per_s", "conn_used", "conn_free", "conn_err", "latency_us")
MIRROR_METRICS = (
    "queue_length",
    "queue_disk",
    "concurrency",
    "oldest_age_s",
    "mirrored_per_s",
    "completed_per_s",
    "failed_per_s",
    "dropped_per_s",
)
QUEUE_METRICS = (
    "keys_active",
    "waiters",
    "longest_wait_ms",
    "transactions_per_s",
    "timeouts_per_s",
    "refused_per_s",
)
_FINER = {Resolution.HOUR: Resolution.MINUTE, Resolution.MINUTE: Resolution.RAW}


@dataclass(frozen=True)
class MirrorFigures:
    """A report's ``mirror`` section, as far as the history keeps it (failures and drops summed)."""

    mirrored: int
    completed: int
    failed: int
    dropped: int
    queue_length: int
    queue_disk: int
    concurrency: int
    oldest_age_s: float


@dataclass(frozen=True)
class Figures:
    """What the history keeps of one report (``stats`` of ``proxyfleet.fleet.report``)."""

    questions: int
    client_connections: int
    servers: tuple[PoolRow, ...]
    mirror: MirrorFigures | None = None  # None: the report has no ``mirror`` section
    queues: tuple[QueueRow, ...] | None = None  # None: the report has no ``trx_queue`` section


def figures(snapshot: object) -> Figures:
    """The figures of a report's ``stats`` (the proxy's ``/stats`` snapshot, read by ``proxyapp.report.reader``);
    ReportError (a ValueError) naming what is wrong."""
    counters = read_counters(snapshot)
    for name in ("Questions", "Client_Connections_connected"):
        if counters.get(name, -1) < 0:
            raise ReportError(f"stats.global.{name}: expected a number of 0 or more, not {counters.get(name)!r}")
    mirror = read_mirror(snapshot)
    trx_queue = read_trx_queue(snapshot)
    return Figures(
        questions=int(counters["Questions"]),
        client_connections=int(counters["Client_Connections_connected"]),
        servers=tuple(read_pools(snapshot)),
        mirror=None
        if mirror is None
        else MirrorFigures(
            mirrored=mirror.mirrored,
            completed=mirror.completed,
            failed=sum(mirror.failed.values()),
            dropped=sum(mirror.dropped.values()),
            queue_length=mirror.queue_length,
            queue_disk=mirror.queue_disk,
            concurrency=mirror.concurrency,
            oldest_age_s=mirror.oldest_age_s,
        ),
        queues=None if trx_queue is None else trx_queue.queues,
    )


def pools_of(report: object) -> list[PoolRow]:
    """The ``connection_pool`` rows of a node's last report (``ProxyNode.last_report``); none when it has no report,
    or one that does not read (a report is checked when it arrives: only one written by hand gets here)."""
    try:
        return read_pools(report)
    except ReportError:
        return []


T = TypeVar("T")


def read_section(read: Callable[[object], T], report: object, default: T, problems: list[str], node: str = "") -> T:
    """A section of a node's last report, read with ``read`` (a ``proxyapp.report.reader`` function) for a page to
    show; ``default`` when the node has not reported yet, or when the section does not read: then the ReportError
    (after ``node``'s name when given) is added to ``problems``, for the page to say what it leaves out."""
    if not report:
        return default
    try:
        return read(report)
    except ReportError as error:
        problems.append(f"{node}: {error}" if node else str(error))
        return default


def server_name(host: object, port: object) -> str:
    """``host:port`` as the history and the dashboards name a backend server."""
    return f"{host}:{port}"


def _rate(current: int, previous: int | None, seconds: float) -> float | None:
    """Per-second increase of a counter; a counter that went down restarted from zero, so all of it counts."""
    if previous is None:
        return None
    return (current - previous if current >= previous else current) / seconds


def record(node: ProxyNode, at: datetime, now: Figures, previous: object, previous_at: datetime | None) -> None:
    """Add the raw points of a report taken at ``at``; ``previous`` is the node's report before it (its ``stats``,
    taken at ``previous_at``), from which the rates are computed."""
    before: Figures | None = None
    seconds = (at - previous_at).total_seconds() if previous_at is not None else 0.0
    if previous is not None and 0 < seconds <= MAX_RATE_GAP.total_seconds():
        try:
            before = figures(previous)
        except ValueError:
            before = None  # a stored report this module did not check (written by hand): no rates this time
    servers_before = {(s.hostgroup, s.server): s.queries for s in before.servers} if before else {}
    NodeSample.objects.create(
        node=node,
        resolution=Resolution.RAW,
        at=at,
        questions_per_s=_rate(now.questions, before.questions, seconds) if before else None,
        client_connections=now.client_connections,
    )
    ServerSample.objects.bulk_create(
        ServerSample(
            node=node,
            resolution=Resolution.RAW,
            at=at,
            hostgroup=s.hostgroup,
            server=s.server,
            status=s.status,
            conn_used=s.conn_used,
            conn_free=s.conn_free,
            conn_err=s.conn_err,
            queries_per_s=_rate(s.queries, servers_before.get((s.hostgroup, s.server)), seconds) if before else None,
            latency_us=s.latency_us,
        )
        for s in now.servers
    )
    if now.mirror is not None:
        _record_mirror(node, at, now.mirror, before.mirror if before else None, seconds)
    if now.queues is not None:
        _record_queues(node, at, now.queues, before.queues if before else None, seconds)


def _record_mirror(
    node: ProxyNode, at: datetime, now: MirrorFigures, before: MirrorFigures | None, seconds: float
) -> None:
    def rate(name: str) -> float | None:
        return _rate(getattr(now, name), getattr(before, name), seconds) if before is not None else None

    MirrorSample.objects.create(
        node=node,
        resolution=Resolution.RAW,
        at=at,
        queue_length=now.queue_length,
        queue_disk=now.queue_disk,
        concurrency=now.concurrency,
        oldest_age_s=now.oldest_age_s,
        mirrored_per_s=rate("mirrored"),
        completed_per_s=rate("completed"),
        failed_per_s=rate("failed"),
        dropped_per_s=rate("dropped"),
        dropped=now.dropped,
    )


def _record_queues(
    node: ProxyNode, at: datetime, now: tuple[QueueRow, ...], before: tuple[QueueRow, ...] | None, seconds: float
) -> None:
    earlier = {row.queue: row for row in before} if before is not None else None

    def rate(row: QueueRow, name: str) -> float | None:
        if earlier is None:
            return None
        previous = earlier.get(row.queue)
        return _rate(getattr(row, name), getattr(previous, name) if previous else 0, seconds)

    HotQueueSample.objects.bulk_create(
        HotQueueSample(
            node=node,
            resolution=Resolution.RAW,
            at=at,
            queue=row.queue,
            keys_active=row.keys_active,
            waiters=row.waiters,
            longest_wait_ms=row.longest_wait_ms,
            transactions_per_s=rate(row, "transactions"),
            timeouts_per_s=rate(row, "timeouts"),
            refused_per_s=rate(row, "refused"),
        )
        for row in now
    )


# --- reading --------------------------------------------------------------------------------------------------


def _resolution_for(since: datetime) -> Resolution:
    span = timezone.now() - since
    return next((resolution for limit, resolution in SPAN_LIMITS if span <= limit), Resolution.HOUR)


def _points(rows: models.QuerySet, metric: str, since: datetime, resolution: Resolution) -> list[tuple[datetime, Any]]:
    """``(at, value)`` at ``resolution`` from ``since``, continued with finer points after the last one."""
    points = list(rows.filter(resolution=resolution, at__gte=since).order_by("at").values_list("at", metric))
    finer = _FINER.get(resolution)
    if finer is None:
        return points
    tail_from = points[-1][0] + timedelta(seconds=resolution) if points else since
    return points + _points(rows, metric, tail_from, finer)


def series(node: ProxyNode, metric: str, since: datetime) -> list[tuple[datetime, float]]:
    """A node metric (``NODE_METRICS``) from ``since`` until now, oldest first; points without a value are left out."""
    if metric not in NODE_METRICS:
        raise ValueError(f"metric: {metric!r} is not one of {', '.join(NODE_METRICS)}")
    rows = NodeSample.objects.filter(node=node)
    return [(at, value) for at, value in _points(rows, metric, since, _resolution_for(since)) if value is not None]


def server_series(
    node: ProxyNode, hostgroup: int, server: str, metric: str, since: datetime
) -> list[tuple[datetime, float]]:
    """A metric (``SERVER_METRICS``) of ``server`` (``host:port``) in ``hostgroup`` as ``node`` saw it, from
    ``since`` until now, oldest first; points without a value are left out."""
    if metric not in SERVER_METRICS:
        raise ValueError(f"metric: {metric!r} is not one of {', '.join(SERVER_METRICS)}")
    rows = ServerSample.objects.filter(node=node, hostgroup=hostgroup, server=server)
    return [(at, value) for at, value in _points(rows, metric, since, _resolution_for(since)) if value is not None]


def mirror_series(node: ProxyNode, metric: str, since: datetime) -> list[tuple[datetime, float]]:
    """A metric (``MIRROR_METRICS``) of ``node``'s mirror from ``since`` until now, oldest first; points without a
    value are left out."""
    if metric not in MIRROR_METRICS:
        raise ValueError(f"metric: {metric!r} is not one of {', '.join(MIRROR_METRICS)}")
    rows = MirrorSample.objects.filter(node=node)
    return [(at, value) for at, value in _points(rows, metric, since, _resolution_for(since)) if value is not None]


def queue_series(node: ProxyNode, queue: str, metric: str, since: datetime) -> list[tuple[datetime, float]]:
    """A metric (``QUEUE_METRICS``) of ``node``'s hot-row queue ``queue`` from ``since`` until now, oldest first;
    points without a value are left out."""
    if metric not in QUEUE_METRICS:
        raise ValueError(f"metric: {metric!r} is not one of {', '.join(QUEUE_METRICS)}")
    rows = HotQueueSample.objects.filter(node=node, queue=queue)
    return [(at, value) for at, value in _points(rows, metric, since, _resolution_for(since)) if value is not None]


def queues_seen(node: ProxyNode, since: datetime) -> list[str]:
    """The hot-row queues ``node`` reported since ``since``, by name."""
    names = HotQueueSample.objects.filter(node=node, at__gte=since).values_list("queue", flat=True).distinct()
    return sorted(names)


# --- rolling up and pruning -----------------------------------------------------------------------------------


def _bucket(at: datetime, resolution: Resolution) -> datetime:
    """The start of the minute or hour ``at`` falls in."""
    seconds = int(at.timestamp()) // resolution * resolution
    return datetime.fromtimestamp(seconds, tz=at.tzinfo)


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _node_rollups(node: ProxyNode, samples: list[NodeSample], resolution: Resolution) -> Iterator[NodeSample]:
    for at, group in groupby(samples, key=lambda s: _bucket(s.at, resolution)):
        points = list(group)
        yield NodeSample(
            node=node,
            resolution=resolution,
            at=at,
            questions_per_s=_mean(p.questions_per_s for p in points),
            client_connections=_mean(p.client_connections for p in points) or 0.0,
        )


def _server_rollups(node: ProxyNode, samples: list[ServerSample], resolution: Resolution) -> Iterator[ServerSample]:
    ordered = sorted(samples, key=lambda s: (s.hostgroup, s.server, s.at))
    for (hostgroup, server, at), group in groupby(
        ordered, key=lambda s: (s.hostgroup, s.server, _bucket(s.at, resolution))
    ):
        points = list(group)
        yield ServerSample(
            node=node,
            resolution=resolution,
            at=at,
            hostgroup=hostgroup,
            server=server,
            status=points[-1].status,
            conn_used=_mean(p.conn_used for p in points) or 0.0,
            conn_free=_mean(p.conn_free for p in points) or 0.0,
            conn_err=max(p.conn_err for p in points),
            queries_per_s=_mean(p.queries_per_s for p in points),
            latency_us=_mean(p.latency_us for p in points) or 0.0,
        )


def _mirror_rollups(node: ProxyNode, samples: list[MirrorSample], resolution: Resolution) -> Iterator[MirrorSample]:
    for at, group in groupby(samples, key=lambda s: _bucket(s.at, resolution)):
        points = list(group)
        yield MirrorSample(
            node=node,
            resolution=resolution,
            at=at,
            **{name: _mean(getattr(p, name) for p in points) or 0.0 for name in MIRROR_METRICS[:4]},
            **{name: _mean(getattr(p, name) for p in points) for name in MIRROR_METRICS[4:]},
            dropped=max(p.dropped for p in points),
        )


def _queue_rollups(node: ProxyNode, samples: list[HotQueueSample], resolution: Resolution) -> Iterator[HotQueueSample]:
    ordered = sorted(samples, key=lambda s: (s.queue, s.at))
    for (queue, at), group in groupby(ordered, key=lambda s: (s.queue, _bucket(s.at, resolution))):
        points = list(group)
        yield HotQueueSample(
            node=node,
            resolution=resolution,
            at=at,
            queue=queue,
            **{name: _mean(getattr(p, name) for p in points) or 0.0 for name in QUEUE_METRICS[:3]},
            **{name: _mean(getattr(p, name) for p in points) for name in QUEUE_METRICS[3:]},
        )


def _roll_up(node: ProxyNode, source: Resolution, target: Resolution, until: datetime) -> int:
    """Average the node's ``source`` points of every whole ``target`` period before ``until`` not yet rolled up."""
    last = NodeSample.objects.filter(node=node, resolution=target).aggregate(last=models.Max("at"))["last"]
    window: dict[str, Any] = {"node": node, "resolution": source, "at__lt": _bucket(until, target)}
    if last is not None:
        window["at__gte"] = last + timedelta(seconds=target)
    node_points = list(_node_rollups(node, list(NodeSample.objects.filter(**window).order_by("at")), target))
    server_points = list(_server_rollups(node, list(ServerSample.objects.filter(**window)), target))
    mirror_points = list(_mirror_rollups(node, list(MirrorSample.objects.filter(**window).order_by("at")), target))
    queue_points = list(_queue_rollups(node, list(HotQueueSample.objects.filter(**window)), target))
    NodeSample.objects.bulk_create(node_points, ignore_conflicts=True)
    ServerSample.objects.bulk_create(server_points, ignore_conflicts=True)
    MirrorSample.objects.bulk_create(mirror_points, ignore_conflicts=True)
    HotQueueSample.objects.bulk_create(queue_points, ignore_conflicts=True)
    return len(node_points)


def compact(now: datetime | None = None) -> dict[str, int]:
    """Roll up what is due and drop what is past ``RETENTION``; returns counts (for the log)."""
    now = now or timezone.now()
    counts = {"minutes": 0, "hours": 0, "deleted": 0}
    for node in ProxyNode.objects.all():
        counts["minutes"] += _roll_up(node, Resolution.RAW, Resolution.MINUTE, now)
        counts["hours"] += _roll_up(node, Resolution.MINUTE, Resolution.HOUR, now)
    for resolution, keep in RETENTION.items():
        for model in (NodeSample, ServerSample, MirrorSample, HotQueueSample):
            deleted, _ = model.objects.filter(resolution=resolution, at__lt=now - keep).delete()
            counts["deleted"] += deleted
    return counts
