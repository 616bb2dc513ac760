"""Sessions waiting for a connection of a hostgroup: one timer for all their deadlines, due at the earliest.

Each wait is stepped by hand (``coro.send``), so a test neither gives the loop turns nor waits for a deadline to pass:
a deadline is made due by setting it, and the timer's work is run by calling ``_expire``. A wait run by a session's
driver parks on the driver instead of a future: those tests wait for the loop to have run what was scheduled
(``tests.support.loop.scheduled_so_far``), an event, not time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from proxyapp.backends.pool import Hostgroup, PoolManager, ServerPool
from proxyapp.config.tables import MysqlServer
from proxyapp.driver import Driver
from proxyapp.mysql.backend import BackendConnection
from proxyapp.mysql.handshake import ServerGreeting
from proxyapp.mysql.wire import Wire
from proxyapp.report.stats import GlobalCounters
from tests.support.loop import scheduled_so_far
from tests.support.transport import MemoryTransport


def _hostgroup() -> Hostgroup:
    return Hostgroup(1, PoolManager(GlobalCounters()))


def _start(coro: Coroutine[Any, Any, Any]) -> None:
    """Run ``coro`` up to its first wait (it queues itself and awaits its future)."""
    assert isinstance(coro.send(None), asyncio.Future)


def _result(coro: Coroutine[Any, Any, Any]) -> Any:
    """Resume ``coro`` once its future is done; what it returned."""
    with pytest.raises(StopIteration) as returned:
        coro.send(None)
    return returned.value.value


def test_the_timer_is_due_at_the_earliest_deadline_and_ends_every_wait_past_its_own() -> None:
    async def main() -> None:
        hg = _hostgroup()
        loop = asyncio.get_running_loop()
        late = hg._wait("app", None, 60.0)
        _start(late)
        assert hg.expiry is not None and len(hg.waiters) == 1
        first_due = hg.expiry_at
        later = hg._wait("app", None, 120.0)  # later than the timer: no new timer
        _start(later)
        assert hg.expiry_at == first_due
        soon = hg._wait("app", None, 0.02)  # earlier: the timer moves up
        _start(soon)
        assert hg.expiry_at < first_due and hg.expiry_at <= loop.time() + 0.02
        hg.waiters[2].deadline = loop.time()  # its time is up, as when the timer fires
        hg._expire()
        assert _result(soon) is None  # None, as acquire expects
        assert not hg.waiters[0].future.done() and not hg.waiters[1].future.done()
        assert hg.expiry is not None and hg.expiry_at == first_due  # due again at the earliest deadline left
        assert len(hg.waiters) == 2
        hg.waiters[0].deadline = hg.waiters[1].deadline = loop.time()  # both due now
        hg._expire()
        assert _result(late) is None and _result(later) is None
        assert not hg.waiters and hg.expiry is None

    asyncio.run(main())


def test_a_wait_woken_early_leaves_the_queue_and_the_timer_finds_nothing_to_end() -> None:
    async def main() -> None:
        hg = _hostgroup()
        wait = hg._wait("app", None, 60.0)
        _start(wait)
        hg._wake_one()  # what ``release`` does when a connection goes idle: the first waiter tries again
        assert _result(wait) is None
        assert not hg.waiters
        hg._expire()  # fires with no waiter left: nothing to end, no timer left
        assert hg.expiry is None

    asyncio.run(main())


def test_a_cancelled_wait_leaves_the_queue() -> None:
    async def main() -> None:
        hg = _hostgroup()
        wait = hg._wait("app", None, 60.0)
        _start(wait)
        with pytest.raises(asyncio.CancelledError):
            wait.throw(asyncio.CancelledError())
        assert not hg.waiters

    asyncio.run(main())


def _in_use(hg: Hostgroup, username: str = "app") -> BackendConnection:
    """A connection of ``username`` to a server of ``hg``, handed out (as ``release`` expects)."""
    if not hg.pools:
        hg.pools.append(ServerPool(MysqlServer(hostname="db", hostgroup_id=hg.id), hg))
    pool = hg.pools[0]
    conn = BackendConnection(Wire(MemoryTransport()), ServerGreeting("10.11.0", 7, b"s" * 20, 0, 45), username, None)  # type: ignore[arg-type]
    conn.pool = pool
    hg._mark_used(pool, conn)
    return conn


class _Waiting:
    """A session's wait for a connection, run by a driver as the session runs its commands."""

    def __init__(self, hg: Hostgroup, username: str = "app") -> None:
        self.got: list[BackendConnection | None] = []
        self.ended: list[BaseException | None] = []
        self.driver = Driver(asyncio.get_running_loop(), self.ended.append)
        assert not self.driver.run(self._wait(hg, username))  # parked: it waits

    async def _wait(self, hg: Hostgroup, username: str) -> None:
        self.got.append(await hg._wait(username, None, 60.0))


def test_a_parked_session_is_handed_the_released_connection_on_the_next_turn_without_a_future() -> None:
    async def main() -> None:
        hg = _hostgroup()
        conn = _in_use(hg)
        first, second = _Waiting(hg), _Waiting(hg)
        assert [w.future for w in hg.waiters] == [None, None]  # parked on their drivers
        assert hg.waiters[0].driver is first.driver and first.driver.direct is hg.waiters[0].wait
        hg.release(conn, hg.pools[0], reusable=True)
        assert len(hg.waiters) == 1 and first.got == []  # taken off the queue; resumed later, not inside release
        await scheduled_so_far()
        assert first.got == [conn] and first.ended == [None]  # the longest wait first
        assert second.got == [] and len(hg.waiters) == 1
        assert hg.pools[0].used == 1 and not hg.pools[0].idle  # handed over: still in use, never idle

    asyncio.run(main())


def test_a_released_connection_goes_to_the_first_waiter_of_its_user() -> None:
    async def main() -> None:
        hg = _hostgroup()
        conn = _in_use(hg, "reports")
        other, same = _Waiting(hg, "app"), _Waiting(hg, "reports")
        hg.release(conn, hg.pools[0], reusable=True)
        await scheduled_so_far()
        assert same.got == [conn] and other.got == []
        assert [w.username for w in hg.waiters] == ["app"]

    asyncio.run(main())


def test_a_session_cancelled_after_the_hand_off_gives_the_connection_back_and_is_not_resumed() -> None:
    async def main() -> None:
        hg = _hostgroup()
        conn = _in_use(hg)
        waiting = _Waiting(hg)
        hg.release(conn, hg.pools[0], reusable=True)  # handed over, the resume scheduled
        waiting.driver.cancel()  # the session ends before its turn comes
        assert hg.pools[0].idle == [conn] and hg.pools[0].used == 0  # given back, idle for the next
        await scheduled_so_far()
        assert waiting.got == [] and waiting.ended == []  # the scheduled resume found nothing parked
        assert not hg.waiters

    asyncio.run(main())


def test_a_cancelled_parked_session_leaves_the_queue_and_the_next_release_keeps_the_connection_idle() -> None:
    async def main() -> None:
        hg = _hostgroup()
        conn = _in_use(hg)
        waiting = _Waiting(hg)
        waiting.driver.cancel()
        assert not hg.waiters
        hg.release(conn, hg.pools[0], reusable=True)
        assert hg.pools[0].idle == [conn]

    asyncio.run(main())


def test_the_timer_ends_a_parked_wait_with_none_and_keeps_only_live_waits_queued() -> None:
    async def main() -> None:
        hg = _hostgroup()
        due, later = _Waiting(hg), _Waiting(hg)
        hg.waiters[0].deadline = 0.0  # its time is up
        hg._expire()
        assert len(hg.waiters) == 1 and hg.waiters[0].driver is later.driver
        await scheduled_so_far()
        assert due.got == [None] and later.got == []

    asyncio.run(main())


def test_sessions_handed_connections_in_one_turn_resume_in_that_order_from_one_scheduled_call() -> None:
    """Three releases, one scheduled resume; the sessions resume in the order they were handed a connection, and one
    whose resume fails does not keep the next waiting (the loop's exception handler is told)."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        reported: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        hg = _hostgroup()
        conns = [_in_use(hg) for _ in range(3)]
        waiting = [_Waiting(hg) for _ in range(3)]
        order: list[int] = []

        def ends(i: int) -> Callable[[BaseException | None], None]:
            def done(failure: BaseException | None) -> None:
                order.append(i)
                if i == 1:
                    raise RuntimeError("the session's end failed")

            return done

        for i, w in enumerate(waiting):
            w.driver.done = ends(i)
        for conn in conns:
            hg.release(conn, hg.pools[0], reusable=True)
        assert hg.resuming and len(hg.ended) == 3 and not hg.waiters  # one resume scheduled for all three
        await scheduled_so_far()
        assert order == [0, 1, 2]
        assert [w.got for w in waiting] == [[conns[0]], [conns[1]], [conns[2]]]
        assert not hg.resuming and hg.ended == []
        assert len(reported) == 1 and isinstance(reported[0]["exception"], RuntimeError)

    asyncio.run(main())
