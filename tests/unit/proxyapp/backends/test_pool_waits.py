"""Sessions waiting for a connection of a hostgroup: one timer for all their deadlines, due at the earliest.

Each wait is stepped by hand (``coro.send``), so a test neither gives the loop turns nor waits for a deadline to pass:
a deadline is made due by setting it, and the timer's work is run by calling ``_expire``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

from proxyapp.backends.pool import Hostgroup, PoolManager
from proxyapp.report.stats import GlobalCounters


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
