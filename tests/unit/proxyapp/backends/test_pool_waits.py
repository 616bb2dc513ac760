"""Sessions waiting for a connection of a hostgroup: one timer for all their deadlines, due at the earliest."""

from __future__ import annotations

import asyncio

from proxyapp.backends.pool import Hostgroup, PoolManager
from proxyapp.report.stats import GlobalCounters


def _hostgroup() -> Hostgroup:
    return Hostgroup(1, PoolManager(GlobalCounters()))


def test_the_timer_is_due_at_the_earliest_deadline_and_ends_every_wait_past_its_own() -> None:
    async def main() -> None:
        hg = _hostgroup()
        loop = asyncio.get_running_loop()
        late = asyncio.ensure_future(hg._wait("app", None, 60.0))
        await asyncio.sleep(0)
        assert hg.expiry is not None and len(hg.waiters) == 1
        first_due = hg.expiry_at
        later = asyncio.ensure_future(hg._wait("app", None, 120.0))  # later than the timer: no new timer
        await asyncio.sleep(0)
        assert hg.expiry_at == first_due
        soon = asyncio.ensure_future(hg._wait("app", None, 0.02))  # earlier: the timer moves up
        await asyncio.sleep(0)
        assert hg.expiry_at < first_due and hg.expiry_at <= loop.time() + 0.02
        assert await soon is None  # its time is up: None, as acquire expects
        assert not late.done() and not later.done()
        assert hg.expiry is not None and hg.expiry_at == first_due  # due again at the earliest deadline left
        assert len(hg.waiters) == 2
        hg.waiters[0].deadline = hg.waiters[1].deadline = loop.time()  # both due now
        hg._expire()
        assert await late is None and await later is None
        assert not hg.waiters and hg.expiry is None

    asyncio.run(main())


def test_a_wait_woken_early_leaves_the_queue_and_the_timer_finds_nothing_to_end() -> None:
    async def main() -> None:
        hg = _hostgroup()
        wait = asyncio.ensure_future(hg._wait("app", None, 60.0))
        await asyncio.sleep(0)
        hg._wake_one()  # what ``release`` does when a connection goes idle: the first waiter tries again
        assert await wait is None
        assert not hg.waiters
        hg._expire()  # fires with no waiter left: nothing to end, no timer left
        assert hg.expiry is None

    asyncio.run(main())


def test_a_cancelled_wait_leaves_the_queue() -> None:
    async def main() -> None:
        hg = _hostgroup()
        wait = asyncio.ensure_future(hg._wait("app", None, 60.0))
        await asyncio.sleep(0)
        wait.cancel()
        await asyncio.gather(wait, return_exceptions=True)
        assert not hg.waiters

    asyncio.run(main())
