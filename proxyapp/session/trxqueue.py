"""A session's place in the hot-row queues (``proxyapp.hotrows``): before a statement that asks for keys borrows a
backend connection, its transaction waits in line for them; at the transaction's end (COMMIT, ROLLBACK, an error that
ended it, a reset, the session's end) it gives them back.

A transaction waits only while the wait cannot close a circle with the server's row locks: before its first
statement (a BEGIN is held back while queues may apply: ``QueryPipeline.held_back``) or once it holds keys, and only
for keys above those it holds. Otherwise it takes a key only if there is room, and runs without the queue if not.
"""

from __future__ import annotations

from typing import Final

from proxyapp.hotrows.marks import MarkError, column_keys, hinted, ordered
from proxyapp.hotrows.queues import DEADLOCK, GRANTED, REFUSED, TIMED_OUT, UNQUEUED, WITHDRAWN, QueueKey
from proxyapp.mysql.constants import ErrorCode
from proxyapp.mysql.wire import CONNECTION_LOST
from proxyapp.rules.engine import RuleOutcome
from proxyapp.session.client import Client, SessionEnd
from proxyapp.session.link import BackendLink
from proxyapp.session.services import SessionServices

#: No keys (shared: never modified).
NO_KEYS: Final[list[QueueKey]] = []


class TransactionQueue:
    """The keys a session's transaction holds, and its waits for more."""

    def __init__(self, services: SessionServices, client: Client, link: BackendLink, owner: int) -> None:
        self.services = services
        self.client = client
        self.link = link
        self.owner = owner
        self.holding = False  # it holds a key (or may: a wait was answered)
        self.waiting = False  # it waits for a key now
        self.interrupted = False  # a KILL QUERY ended the wait

    async def wait_for(self, sql: str, outcome: RuleOutcome, digest: str) -> list[QueueKey] | None:
        """Wait in line for the keys ``sql`` asks for (``_keys``); the keys ([] for none), or None after sending the
        error that ends the statement."""
        keys = self._keys(sql, outcome, digest)
        if keys is None or (keys and not await self._admit(keys)):
            return None
        return keys

    def _keys(self, sql: str, outcome: RuleOutcome, digest: str) -> list[QueueKey] | None:
        """The keys ``sql`` asks for, by its hint, its rule (``outcome``) or a queue the proxy applied itself to its
        ``digest`` (``proxyapp.hotrows.heat``), in the queues' order; None after sending the error of a malformed
        hint."""
        hint = outcome.annotations.get("trx_queue") if outcome.annotations else None
        if hint is not None and self.services.hot_rows.settings.hints:
            try:
                return hinted(hint)
            except MarkError as exc:
                self.client.send_error(ErrorCode.WRONG_ARGUMENTS, f"Incorrect arguments to trx_queue: {exc}", 1)
                return None
        queue = outcome.trx_queue
        if queue is None:
            applied = self.services.heat.applied.get(digest) if digest else None
            return ordered(applied[0], column_keys(sql, applied[1])) if applied is not None else NO_KEYS
        if outcome.trx_queue_key is not None:
            return [(queue, outcome.trx_queue_key)]
        if outcome.trx_queue_column is not None:
            return ordered(queue, column_keys(sql, outcome.trx_queue_column))
        return NO_KEYS

    async def _admit(self, keys: list[QueueKey]) -> bool:
        """Wait in line for ``keys`` (in their order); False after sending the error that ends the statement (a
        timeout, a full line, a deadlock: the transaction is rolled back then, as the server would)."""
        link = self.link
        may_wait = self.holding or not link.in_transaction or link.opening is not None
        hot_rows = self.services.hot_rows
        for key in keys:
            self.waiting = True
            try:
                answer = await hot_rows.acquire(self.owner, key, may_wait)
            finally:
                self.waiting = False
            if answer == GRANTED:
                self.holding = may_wait = True
            elif answer != UNQUEUED:
                await self._refuse(answer, key)
                return False
        return True

    async def _refuse(self, answer: int, key: QueueKey) -> None:
        """Tell the client why its statement does not run (``answer``, for ``key``)."""
        queue, value = key
        settings = self.services.hot_rows.settings
        client = self.client
        if answer == TIMED_OUT:
            client.send_error(
                ErrorCode.LOCK_WAIT_TIMEOUT,
                f"ProxyFleet trx_queue: waited over mysql-trx_queue_wait_timeout_ms ({settings.timeout_ms} ms) for "
                f"key {value[:80]} of queue {queue}",
                1,
            )
        elif answer == REFUSED:
            client.send_error(
                ErrorCode.LOCK_WAIT_TIMEOUT,
                f"ProxyFleet trx_queue: key {value[:80]} of queue {queue} has mysql-trx_queue_max_waiters "
                f"({settings.max_waiters}) waiting",
                1,
            )
        elif answer == DEADLOCK:
            await self._roll_back()
            client.send_error(
                ErrorCode.LOCK_DEADLOCK,
                f"Deadlock found when trying to get lock; try restarting transaction (ProxyFleet trx_queue: key "
                f"{value[:80]} of queue {queue} is held by a transaction that waits for this one)",
                1,
            )
        elif answer == WITHDRAWN:
            if not self.interrupted:  # the client is gone
                raise SessionEnd
            self.interrupted = False
            client.send_error(ErrorCode.QUERY_INTERRUPTED, "Query execution was interrupted", 1)

    async def _roll_back(self) -> None:
        """Roll back the session's transaction (its keys go back at ``settle``)."""
        link = self.link
        conn = link.conn
        if conn is not None and conn.in_transaction:
            try:
                await conn.simple_command(b"\x03ROLLBACK")
                lost = False
            except CONNECTION_LOST:
                lost = True
            if lost:  # awaited outside the ``except`` block (``backends.pool._search`` says why)
                await link.drop(reset=False)
        link.end_transaction()
        await link.maybe_release()

    def settle(self) -> None:
        """After a statement: a transaction that ended gives its keys back."""
        if self.holding and not self.link.in_transaction:
            self.holding = False
            self.services.hot_rows.give_back(self.owner)

    def interrupt(self, gone: bool) -> None:
        """A wait ends: the client is gone (``gone``) or a KILL QUERY interrupted it."""
        if self.waiting:
            self.interrupted = not gone
            self.services.hot_rows.withdraw(self.owner)

    def leave(self) -> None:
        """The session ends or is reset: its keys go back, its wait ends."""
        if self.holding or self.waiting:
            self.holding = False
            self.services.hot_rows.give_back(self.owner)
