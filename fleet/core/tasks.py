"""The control plane's Celery tasks, on queue ``fleet`` (docs/control-plane.md, "Push protocol").

Nodes send ``proxyfleet.fleet.ack`` and ``proxyfleet.fleet.report``; beat sends ``proxyfleet.fleet.reconcile``
(every ``FLEET_RECONCILE_SECONDS``) and ``proxyfleet.fleet.compact_history`` (every minute). Each checks its
arguments (a bad one fails the task with an error naming it) and hands over to ``push`` or ``stats``; all of them
are idempotent, so a message delivered twice does no harm.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from celery import shared_task
from celery.signals import task_postrun

from fleet.core import push
from fleet.core import stats as history
from fleet.core.health import heartbeat


@task_postrun.connect
def _worker_alive(sender: Any = None, **_: Any) -> None:
    """Each task the worker runs shows the overview that it runs (the heartbeat is written every few seconds)."""
    heartbeat("worker", f"task {getattr(sender, 'name', sender)}")


def _text(value: object, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name}: expected text, not {value!r}")
    return value


def _version(value: object, name: str, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: expected a version number (1 or more), not {value!r}")
    return value


def _time(value: object, name: str) -> datetime:
    try:
        at = datetime.fromisoformat(_text(value, name))
    except ValueError:
        raise ValueError(f"{name}: expected an ISO 8601 time with its UTC offset, not {value!r}") from None
    if at.tzinfo is None:
        raise ValueError(f"{name}: {value!r} has no UTC offset")
    return at


@shared_task(name="proxyfleet.fleet.ack")
def ack(node: str, version: int, checksum: str, ok: bool, error: str = "", at: str = "") -> str:
    """A node applied ``version`` (``ok``) or refused it (``error`` says why)."""
    if not isinstance(ok, bool):
        raise ValueError(f"ok: expected true or false, not {ok!r}")
    return push.record_ack(
        _text(node, "node"),
        _version(version, "version"),
        _text(checksum, "checksum"),
        ok,
        _text(error, "error"),
        _time(at, "at"),
    )


@shared_task(name="proxyfleet.fleet.report")
def report(node: str, at: str, applied_version: int | None, applied_checksum: str, stats: dict[str, Any]) -> str:
    """A node's periodic report: what it runs and its ``/stats`` snapshot."""
    return push.record_report(
        _text(node, "node"),
        _time(at, "at"),
        _version(applied_version, "applied_version", optional=True),
        _text(applied_checksum, "applied_checksum"),
        stats,
    )


@shared_task(name="proxyfleet.fleet.reconcile")
def reconcile() -> list[str]:
    """Re-send each cluster's latest version to the nodes that do not run it; mark silent nodes stale."""
    return push.reconcile()


@shared_task(name="proxyfleet.fleet.compact_history")
def compact_history() -> dict[str, int]:
    """Roll the report history up into minutes and hours, and drop what is past its retention."""
    return history.compact()
