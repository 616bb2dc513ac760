"""The lines of the hot-row queue: per key, at most ``concurrency`` transactions hold it, the others wait first in,
first out; a data structure on the proxy's clock (``proxyapp.clock``), so that tests decide every step.

A key is a queue's name and a value (``("t1", "42")``); an owner is a transaction's holder, an integer unique on the
node (a session id, with its worker's number above it when there are several: ``broker``). ``take`` answers at once:

* ``GRANTED``: the owner holds the key now;
* a ``Waiter``: it waits in line; its ``future`` is resolved with ``GRANTED`` when its turn comes, or with
  ``TIMED_OUT`` by ``expire`` past its deadline, or ``WITHDRAWN`` (``withdraw``: its client left, its query was
  killed);
* ``UNQUEUED``: it runs without the queue (a key out of order, see below, or no room for one more key);
* ``REFUSED``: the line is full (``max_waiters``);
* ``DEADLOCK``: a key out of order held by a transaction that waits, through the queue, for a key this one holds.

Deadlocks: an owner may wait only for a key above every key it holds (the keys' global order); a wait for a key below
would be a wait in the wrong order, so it is not made: the owner takes the key if there is room, otherwise it runs
without the queue, unless the key's holder waits for one of its keys (through other waiters maybe): the server would
then deadlock the two, so the proxy says so at once. Waits in key order can never close a circle.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

#: ``take``'s answers, and what a waiter's future is resolved with.
GRANTED = 0
UNQUEUED = 1
REFUSED = 2
DEADLOCK = 3
TIMED_OUT = 4
WITHDRAWN = 5

#: A key of a queue: its name and the key's value.
QueueKey = tuple[str, str]


class Waiter:
    """An owner waiting in line for a key."""

    __slots__ = ("deadline", "future", "key", "owner", "since")

    def __init__(self, owner: int, key: QueueKey, since: float, deadline: float, future: asyncio.Future[int]) -> None:
        self.owner = owner
        self.key = key
        self.since = since
        self.deadline = deadline
        self.future = future


class _Line:
    """One key's holders and waiters."""

    __slots__ = ("holders", "waiters")

    def __init__(self) -> None:
        self.holders: list[int] = []
        self.waiters: deque[Waiter] = deque()


class QueueCounters:
    """One queue's counters since the proxy started."""

    __slots__ = ("refused", "timeouts", "transactions", "wait_ms_total", "waited")

    def __init__(self) -> None:
        self.transactions = 0  # keys granted
        self.waited = 0  # of them after a wait
        self.wait_ms_total = 0  # the waits' total
        self.timeouts = 0
        self.refused = 0


class KeyQueues:
    """Every line of the node's (or one worker's) hot-row queues."""

    def __init__(
        self, clock: Callable[[], float], concurrency: int = 1, max_waiters: int = 1024, max_keys: int = 100_000
    ) -> None:
        self.clock = clock
        self.concurrency = concurrency
        self.max_waiters = max_waiters
        self.max_keys = max_keys
        self._lines: dict[QueueKey, _Line] = {}
        self._waiting: dict[int, Waiter] = {}  # owner -> its wait (an owner waits for one key at a time)
        self._held: dict[int, list[QueueKey]] = {}  # owner -> the keys it holds
        self.counters: dict[str, QueueCounters] = {}

    def configure(self, concurrency: int, max_waiters: int, max_keys: int) -> None:
        """New limits (a reload): the lines stay; a larger ``concurrency`` lets waiters in at once."""
        grow = concurrency > self.concurrency
        self.concurrency, self.max_waiters, self.max_keys = concurrency, max_waiters, max_keys
        if grow:
            for key in list(self._lines):
                self._admit(key, self._lines[key])

    def take(self, owner: int, key: QueueKey, timeout_s: float, wait: bool = True) -> int | Waiter:
        """``owner`` asks for ``key``, waiting at most ``timeout_s`` (``expire``), or not at all unless ``wait``
        (its transaction ran statements without the queue: it may hold row locks a holder needs); see the module's
        docstring. A wait is made in the running event loop."""
        held = self._held.get(owner)
        if held is not None and key in held:
            return GRANTED
        line = self._lines.get(key)
        if line is None:
            if len(self._lines) >= self.max_keys:
                return UNQUEUED
            line = self._lines[key] = _Line()
        if len(line.holders) < self.concurrency and not line.waiters:
            self._grant(owner, key, line, 0.0)
            return GRANTED
        if not wait or (held and key < max(held)):
            return DEADLOCK if self._closes_circle(owner, line) else UNQUEUED
        if len(line.waiters) >= self.max_waiters:
            self._counters(key[0]).refused += 1
            return REFUSED
        now = self.clock()
        waiter = Waiter(owner, key, now, now + timeout_s, asyncio.get_running_loop().create_future())
        line.waiters.append(waiter)
        self._waiting[owner] = waiter
        return waiter

    def give_back(self, owner: int) -> None:
        """``owner``'s transaction ended: every key it holds goes to the next in line, and a wait of its ends."""
        waiter = self._waiting.get(owner)
        if waiter is not None:
            self.withdraw(waiter)
        for key in self._held.pop(owner, ()):
            line = self._lines[key]
            line.holders.remove(owner)
            self._admit(key, line)

    def withdraw(self, waiter: Waiter, outcome: int = WITHDRAWN) -> None:
        """``waiter`` waits no more (its client left, its query was killed, it timed out: ``outcome``)."""
        if self._waiting.get(waiter.owner) is not waiter:
            return
        del self._waiting[waiter.owner]
        line = self._lines[waiter.key]
        line.waiters.remove(waiter)
        if not waiter.future.done():
            waiter.future.set_result(outcome)
        self._admit(waiter.key, line)

    def expire(self) -> int:
        """End the waits past their deadline (their futures: ``TIMED_OUT``); how many ended."""
        now = self.clock()
        late = [w for w in self._waiting.values() if w.deadline <= now]
        for waiter in late:
            self._counters(waiter.key[0]).timeouts += 1
            self.withdraw(waiter, TIMED_OUT)
        return len(late)

    def waiting(self, owner: int) -> Waiter | None:
        """What ``owner`` waits for (None: nothing)."""
        return self._waiting.get(owner)

    def held(self, owner: int) -> list[QueueKey]:
        """The keys ``owner`` holds (in the order it took them)."""
        return self._held.get(owner, [])

    def waiters(self) -> int:
        """Owners waiting for a key now."""
        return len(self._waiting)

    def next_deadline(self) -> float | None:
        """The earliest deadline of a wait (None when nobody waits)."""
        return min((w.deadline for w in self._waiting.values()), default=None)

    def rows(self) -> list[dict[str, object]]:
        """Each queue's state and counters (the ``trx_queue.queues`` rows of the stats)."""
        now = self.clock()
        active: dict[str, int] = {}
        waiting: dict[str, int] = {}
        longest: dict[str, float] = {}
        for (queue, _), line in self._lines.items():
            if line.holders:
                active[queue] = active.get(queue, 0) + 1
            if line.waiters:
                waiting[queue] = waiting.get(queue, 0) + len(line.waiters)
                longest[queue] = max(longest.get(queue, 0.0), now - line.waiters[0].since)
        rows: list[dict[str, object]] = []
        for queue in sorted(set(self.counters) | set(active) | set(waiting)):
            counters = self._counters(queue)
            rows.append(
                {
                    "queue": queue,
                    "keys_active": active.get(queue, 0),
                    "waiters": waiting.get(queue, 0),
                    "longest_wait_ms": int(longest.get(queue, 0.0) * 1000),
                    "transactions": counters.transactions,
                    "waited": counters.waited,
                    "wait_ms_total": counters.wait_ms_total,
                    "timeouts": counters.timeouts,
                    "refused": counters.refused,
                }
            )
        return rows

    def _grant(self, owner: int, key: QueueKey, line: _Line, since: float) -> None:
        """``owner`` holds ``key`` now, after waiting since ``since`` (0: it did not wait)."""
        line.holders.append(owner)
        self._held.setdefault(owner, []).append(key)
        counters = self._counters(key[0])
        counters.transactions += 1
        if since:
            counters.waited += 1
            counters.wait_ms_total += int((self.clock() - since) * 1000)

    def _admit(self, key: QueueKey, line: _Line) -> None:
        """Let the next waiters in while there is room; forget a line nobody holds or waits for."""
        while line.waiters and len(line.holders) < self.concurrency:
            waiter = line.waiters.popleft()
            del self._waiting[waiter.owner]
            self._grant(waiter.owner, key, line, waiter.since)
            waiter.future.set_result(GRANTED)
        if not line.holders and not line.waiters:
            del self._lines[key]

    def _closes_circle(self, owner: int, line: _Line) -> bool:
        """Whether a holder of ``line`` waits, directly or through other holders' waits, for a key ``owner`` holds."""
        seen: set[int] = set()
        todo = list(line.holders)
        while todo:
            holder = todo.pop()
            if holder == owner:
                return True
            if holder in seen:
                continue
            seen.add(holder)
            waiter = self._waiting.get(holder)
            if waiter is not None:
                todo.extend(self._lines[waiter.key].holders)
        return False

    def _counters(self, queue: str) -> QueueCounters:
        counters = self.counters.get(queue)
        if counters is None:
            counters = self.counters[queue] = QueueCounters()
        return counters
