"""The control plane's own health: the broker (Redis), the Celery worker and beat, as the overview shows them.

The worker records a heartbeat after the tasks it runs (at most every ``BEAT_EVERY``), beat when it ticks; the
broker is asked directly. A node that looks stale or pending while the worker or the broker is down is not to
blame: its reports and acks are not being read (``blame``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import redis
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone

from fleet.core.models import ServiceHeartbeat
from fleet.core.timefmt import ago

log = logging.getLogger("fleet.health")

#: A heartbeat older than this means the process is not running (the worker hears from nodes every 5 s and beat
#: sends a reconcile every FLEET_RECONCILE_SECONDS).
SILENT_AFTER = timedelta(seconds=float(getattr(settings, "FLEET_SERVICE_SILENT_SECONDS", 30)))
#: A process writes its heartbeat at most this often.
BEAT_EVERY = 2.0
#: The queues whose backlog the overview shows.
QUEUES = ("fleet", "bench")

_last_written: dict[str, float] = {}


def heartbeat(name: str, detail: str = "") -> None:
    """Record that process ``name`` (``worker``, ``beat``) is alive and what it did; cheap to call often."""
    now = time.monotonic()
    if now - _last_written.get(name, -BEAT_EVERY) < BEAT_EVERY:
        return
    _last_written[name] = now
    try:
        ServiceHeartbeat.objects.update_or_create(name=name, defaults={"at": timezone.now(), "detail": detail[:200]})
    except DatabaseError as exc:  # the heartbeat must never fail the work it accompanies
        log.warning("cannot record the %s heartbeat: %s", name, exc)


@dataclass(frozen=True)
class Service:
    """One part of the control plane as the overview shows it."""

    name: str
    ok: bool
    summary: str


@dataclass(frozen=True)
class ControlPlane:
    """The control plane's parts, and what their trouble means for the nodes' state."""

    services: list[Service]

    def service(self, name: str) -> Service:
        """The part named ``name``."""
        return next(s for s in self.services if s.name == name)

    @property
    def ok(self) -> bool:
        """Whether every part works."""
        return all(s.ok for s in self.services)

    @property
    def blame(self) -> str:
        """Why nodes' reports and acks are not being read, if they are not ("" when they are)."""
        for name in ("broker", "worker"):
            service = self.service(name)
            if not service.ok:
                return f"the control plane's {name} is down: node reports and acks are not being read"
        return ""


def _process(name: str, beats: dict[str, ServiceHeartbeat], now: datetime, what: str) -> Service:
    beat = beats.get(name)
    if beat is None:
        return Service(name, False, f"never seen at work (no {what} recorded)")
    alive = now - beat.at <= SILENT_AFTER
    detail = f" ({beat.detail})" if beat.detail else ""
    verdict = "" if alive else "not running? "
    return Service(name, alive, f"{verdict}last {what} {ago(beat.at, now)}{detail}")


def _broker() -> Service:
    try:
        client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=1, socket_timeout=1)
        client.ping()
        depth = {queue: int(client.llen(queue)) for queue in QUEUES}
    except (redis.RedisError, OSError) as exc:
        return Service("broker", False, f"unreachable: {exc}")
    waiting = ", ".join(f"{queue} {n}" for queue, n in depth.items())
    return Service("broker", True, f"answers; messages waiting: {waiting}")


def control_plane(now: datetime | None = None) -> ControlPlane:
    """The control plane's health as of ``now``: the web server (answering this), the broker, worker and beat."""
    now = now or timezone.now()
    beats = {beat.name: beat for beat in ServiceHeartbeat.objects.all()}
    return ControlPlane(
        [
            Service("web", True, "answers (this page)"),
            _broker(),
            _process("worker", beats, now, "task"),
            _process("beat", beats, now, "tick"),
        ]
    )
