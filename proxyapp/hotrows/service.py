"""The hot-row queues as a worker's sessions use them (``SessionServices.hot_rows``): asking for a key, waiting for
it, giving keys back; the settings they follow; the waits' timeouts on the proxy's clock.

``HotRows`` keeps the lines in this process, for a proxy of one worker and for the supervisor's broker;
``proxyapp.hotrows.broker.BrokeredHotRows`` asks the broker instead, so that the workers of one node share one set
of lines.
"""

from __future__ import annotations

import asyncio

from proxyapp.clock import Clock
from proxyapp.config.document import Config
from proxyapp.hotrows.queues import KeyQueues, QueueKey, Waiter

#: A wait's timer fires this long after its deadline, so that the clock has reached the deadline when it does.
_TIMER_SLACK_S = 0.001


class HotRowSettings:
    """The ``mysql-trx_queue_*`` variables."""

    __slots__ = (
        "auto_apply", "concurrency", "cooldown_ms", "hints", "max_keys", "max_waiters", "slow_ms", "threshold",
        "timeout_ms",
    )  # fmt: skip

    def __init__(self, config: Config | None = None) -> None:
        v = config.variables if config is not None else None
        self.hints = v.flag("mysql-trx_queue_hints") if v is not None else True
        self.concurrency = v.integer("mysql-trx_queue_concurrency") if v is not None else 1
        self.timeout_ms = v.integer("mysql-trx_queue_wait_timeout_ms") if v is not None else 10_000
        self.max_waiters = v.integer("mysql-trx_queue_max_waiters") if v is not None else 1024
        self.max_keys = v.integer("mysql-trx_queue_max_keys") if v is not None else 100_000
        self.auto_apply = v.flag("mysql-trx_queue_auto_apply") if v is not None else False
        self.slow_ms = v.integer("mysql-trx_queue_heat_slow_ms") if v is not None else 20
        self.threshold = v.integer("mysql-trx_queue_heat_threshold") if v is not None else 20
        self.cooldown_ms = v.integer("mysql-trx_queue_heat_cooldown_ms") if v is not None else 300_000


class HotRows:
    """The lines of this process's hot-row queues."""

    def __init__(self, clock: Clock, settings: HotRowSettings | None = None) -> None:
        self.clock = clock
        self.settings = settings or HotRowSettings()
        self.queues = KeyQueues(clock.now)
        self.configure(self.settings)

    async def start(self) -> None:
        """Nothing to start: the lines are in this process."""

    def configure(self, settings: HotRowSettings) -> None:
        """Follow new settings (a reload): the lines and their waiters stay."""
        self.settings = settings
        self.queues.configure(settings.concurrency, settings.max_waiters, settings.max_keys)

    async def acquire(self, owner: int, key: QueueKey, wait: bool) -> int:
        """``owner`` asks for ``key`` (waiting in line for it unless not ``wait``); the answer, one of
        ``queues``' GRANTED, UNQUEUED, REFUSED, DEADLOCK, TIMED_OUT, WITHDRAWN."""
        taken = self.take(owner, key, wait)
        if not isinstance(taken, Waiter):
            return taken
        try:
            return await taken.future
        finally:
            self.queues.withdraw(taken)  # a cancelled session's wait ends with it (a no-op once the wait ended)

    def take(self, owner: int, key: QueueKey, wait: bool) -> int | Waiter:
        """``acquire``'s first step, at once: the answer, or the wait (its timeout's timer set)."""
        timeout_s = self.settings.timeout_ms / 1000
        taken = self.queues.take(owner, key, timeout_s, wait)
        if isinstance(taken, Waiter):
            asyncio.get_running_loop().call_later(timeout_s + _TIMER_SLACK_S, self.queues.expire)
        return taken

    def withdraw(self, owner: int) -> None:
        """``owner`` waits no more (its client left, its query was killed): its wait answers WITHDRAWN."""
        waiter = self.queues.waiting(owner)
        if waiter is not None:
            self.queues.withdraw(waiter)

    def give_back(self, owner: int) -> None:
        """``owner``'s transaction ended: its keys go to the next in line."""
        self.queues.give_back(owner)

    def expire(self) -> None:
        """End the waits past their deadline on the proxy's clock (the housekeeping asks once a second, so that a
        clock a test moved forward ends them too)."""
        self.queues.expire()

    def rows(self) -> list[dict[str, object]]:
        """Each queue's row of the stats (``trx_queue.queues``)."""
        return self.queues.rows()
