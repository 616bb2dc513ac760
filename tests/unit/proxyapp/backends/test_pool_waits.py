"""Sessions waiting for a connection of a hostgroup whose connections are all in use: one timer for all their
deadlines, due at the earliest.

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

from proxyapp.backends.pool import Hostgroup, PoolError
from proxyapp.driver import Driver
from proxyapp.mysql.backend import BackendConnection, Credentials
from proxyapp.mysql.constants import DEFAULT_SESSION_FLAGS, Cap
from tests.support.loop import scheduled_so_far
from tests.support.pools import full_hostgroup

_TIMED_OUT = "hostgroup 1: no free backend connection within"


def _acquire(
    hg: Hostgroup, timeout_ms: int = 60_000, username: str = "app", flags: int = DEFAULT_SESSION_FLAGS
) -> Coroutine[Any, Any, Any]:
    """A session's request for a connection of ``hg`` (as ``username`` with session ``flags``), waiting at most
    ``timeout_ms`` (mysql-connection_wait_timeout)."""
    hg.manager.settings.connection_wait_timeout_ms = timeout_ms
    return hg.acquire(Credentials(username, flags=flags), None)


def _start(coro: Coroutine[Any, Any, Any]) -> None:
    """Run ``coro`` up to its first wait (it queues itself and awaits its future)."""
    assert isinstance(coro.send(None), asyncio.Future)


def _timed_out(coro: Coroutine[Any, Any, Any]) -> None:
    """Resume ``coro`` once its future is done: its time is up."""
    with pytest.raises(PoolError, match=_TIMED_OUT):
        coro.send(None)


def test_the_timer_is_due_at_the_earliest_deadline_and_ends_every_wait_past_its_own() -> None:
    async def main() -> None:
        hg, _ = full_hostgroup()
        loop = asyncio.get_running_loop()
        late = _acquire(hg, 60_000)
        _start(late)
        assert hg.expiry is not None and len(hg.waiters) == 1
        first_due = hg.expiry_at
        later = _acquire(hg, 120_000)  # later than the timer: no new timer
        _start(later)
        assert hg.expiry_at == first_due
        soon = _acquire(hg, 20)  # earlier: the timer moves up
        _start(soon)
        assert hg.expiry_at < first_due and hg.expiry_at <= loop.time() + 0.02
        hg.waiters.waiters()[2].deadline = loop.time()  # its time is up, as when the timer fires
        hg._expire()
        _timed_out(soon)
        assert not hg.waiters.waiters()[0].future.done() and not hg.waiters.waiters()[1].future.done()
        assert hg.expiry is not None and hg.expiry_at == first_due  # due again at the earliest deadline left
        assert len(hg.waiters) == 2
        hg.waiters.waiters()[0].deadline = hg.waiters.waiters()[1].deadline = loop.time()  # both due now
        hg._expire()
        _timed_out(late)
        _timed_out(later)
        assert not hg.waiters and hg.expiry is None

    asyncio.run(main())


def test_a_wait_woken_without_a_connection_queues_again_until_its_own_deadline() -> None:
    async def main() -> None:
        hg, _ = full_hostgroup()
        wait = _acquire(hg)
        _start(wait)
        deadline = hg.waiters.waiters()[0].deadline
        hg._wake_one()  # what ``release`` does when a connection goes idle: the first waiter tries again
        assert not hg.waiters
        _start(wait)  # nothing free: it queues again, with the deadline it had
        assert len(hg.waiters) == 1 and hg.waiters.waiters()[0].deadline == deadline
        hg.waiters.waiters()[0].deadline = asyncio.get_running_loop().time()
        hg._expire()
        _timed_out(wait)
        assert not hg.waiters and hg.expiry is None  # nothing left to end: no timer left

    asyncio.run(main())


def test_a_cancelled_wait_leaves_the_queue() -> None:
    async def main() -> None:
        hg, _ = full_hostgroup()
        wait = _acquire(hg)
        _start(wait)
        with pytest.raises(asyncio.CancelledError):
            wait.throw(asyncio.CancelledError())
        assert not hg.waiters

    asyncio.run(main())


class _Waiting:
    """A session's wait for a connection, run by a driver as the session runs its commands."""

    def __init__(self, hg: Hostgroup, username: str = "app", flags: int = DEFAULT_SESSION_FLAGS) -> None:
        self.got: list[BackendConnection] = []
        self.ended: list[BaseException | None] = []
        self.driver = Driver(asyncio.get_running_loop(), self.ended.append)
        assert not self.driver.run(self._wait(hg, username, flags))  # parked: it waits

    async def _wait(self, hg: Hostgroup, username: str, flags: int) -> None:
        self.got.append(await _acquire(hg, username=username, flags=flags))


def test_a_parked_session_is_handed_the_released_connection_on_the_next_turn_without_a_future() -> None:
    async def main() -> None:
        hg, (conn,) = full_hostgroup()
        first, second = _Waiting(hg), _Waiting(hg)
        assert [w.future for w in hg.waiters.waiters()] == [None, None]  # parked on their drivers
        queued = hg.waiters.waiters()[0]
        assert queued.driver is first.driver and first.driver.direct is first.driver.parking
        assert queued.park == first.driver.parks  # its driver's latest park
        hg.release(conn, hg.pools[0], reusable=True)
        assert len(hg.waiters) == 1 and first.got == []  # taken off the queue; resumed later, not inside release
        await scheduled_so_far()
        assert first.got == [conn] and first.ended == [None]  # the longest wait first
        assert second.got == [] and len(hg.waiters) == 1
        assert hg.pools[0].used == 1 and not hg.pools[0].idle  # handed over: still in use, never idle

    asyncio.run(main())


def test_a_released_connection_goes_to_the_first_waiter_of_its_user() -> None:
    async def main() -> None:
        hg, (conn,) = full_hostgroup(1, "reports")
        other, same = _Waiting(hg, "app"), _Waiting(hg, "reports")
        hg.release(conn, hg.pools[0], reusable=True)
        await scheduled_so_far()
        assert same.got == [conn] and other.got == []
        assert [w.credentials.username for w in hg.waiters.waiters()] == ["app"]

    asyncio.run(main())


def test_a_released_connection_goes_only_to_a_session_with_its_flags() -> None:
    async def main() -> None:
        hg, (conn,) = full_hostgroup(1)  # logged in with the default session flags
        found_rows = _Waiting(hg, flags=DEFAULT_SESSION_FLAGS | Cap.FOUND_ROWS)  # counts matched rows: not this one
        same = _Waiting(hg)
        hg.release(conn, hg.pools[0], reusable=True)
        await scheduled_so_far()
        assert same.got == [conn] and found_rows.got == []
        assert [w.credentials.flags for w in hg.waiters.waiters()] == [DEFAULT_SESSION_FLAGS | Cap.FOUND_ROWS]

    asyncio.run(main())


def test_a_session_cancelled_after_the_hand_off_gives_the_connection_back_and_is_not_resumed() -> None:
    async def main() -> None:
        hg, (conn,) = full_hostgroup()
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
        hg, (conn,) = full_hostgroup()
        waiting = _Waiting(hg)
        waiting.driver.cancel()
        assert not hg.waiters
        hg.release(conn, hg.pools[0], reusable=True)
        assert hg.pools[0].idle == [conn]

    asyncio.run(main())


def test_the_timer_ends_a_parked_wait_past_its_deadline_and_keeps_only_live_waits_queued() -> None:
    async def main() -> None:
        hg, _ = full_hostgroup()
        due, later = _Waiting(hg), _Waiting(hg)
        hg.waiters.waiters()[0].deadline = asyncio.get_running_loop().time()  # its time is up
        hg._expire()
        assert len(hg.waiters) == 1 and hg.waiters.waiters()[0].driver is later.driver
        await scheduled_so_far()
        assert due.got == [] and len(due.ended) == 1 and isinstance(due.ended[0], PoolError)
        assert _TIMED_OUT in str(due.ended[0])
        assert later.got == [] and later.ended == []

    asyncio.run(main())


def test_sessions_handed_connections_in_one_turn_resume_in_that_order_from_one_scheduled_call() -> None:
    """Three releases, one scheduled resume; the sessions resume in the order they were handed a connection, and one
    whose resume fails does not keep the next waiting (the loop's exception handler is told)."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        reported: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: reported.append(context))
        hg, conns = full_hostgroup(3)
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
