"""Failover's Celery tasks, on queue ``fleet``: the evaluation round (beat, every ``FAILOVER_EVALUATE_SECONDS``), a
requested switchover, and the history's pruning (beat, hourly). All are idempotent."""

from __future__ import annotations

from celery import shared_task
from django.db import transaction
from kombu.exceptions import KombuError

from fleet.failover import actions, history
from fleet.failover.evaluate import evaluate as evaluate_round
from fleet.failover.models import Event, Step


@shared_task(name="proxyfleet.fleet.failover_evaluate")
def evaluate() -> list[str]:
    """Check every primary (fail over a dead one), the fences, the first writes and the status history."""
    return evaluate_round()


@shared_task(name="proxyfleet.fleet.switchover")
def switchover(event_id: int) -> str:
    """Run the requested switchover ``event_id`` (nothing when it already ran)."""
    if isinstance(event_id, bool) or not isinstance(event_id, int):
        raise ValueError(f"event_id: expected an event number, not {event_id!r}")
    event = Event.objects.filter(pk=event_id, kind=Event.Kind.SWITCHOVER).select_related("cluster").first()
    if event is None:
        return f"no switchover #{event_id}"
    actions.run_switchover(event)
    event.refresh_from_db()
    return f"switchover #{event_id} {event.state}: {event.summary}"


@shared_task(name="proxyfleet.fleet.failover_prune")
def prune() -> int:
    """Drop backend status history past its retention."""
    return history.prune()


def queue_switchover(event: Event) -> None:
    """Send ``event``'s switchover to a worker once the current transaction commits; a broker that cannot be
    reached fails the event, saying so (nothing changed then)."""

    def send() -> None:
        try:
            switchover.apply_async(args=[event.pk], queue="fleet")
        except (KombuError, OSError) as error:
            event.record(Step.Name.FAILED, f"the switchover could not be queued: {error}", ok=False)
            event.finish(Event.State.FAILED, "the switchover could not be queued (nothing changed)")

    transaction.on_commit(send)
