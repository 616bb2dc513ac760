"""Sessions waiting for a connection of a hostgroup: one timer for all their deadlines, due at the earliest."""

from __future__ import annotations

import asyncio
from typing import Any

from proxyapp.backends.pool import Hostgroup


class _Manager:
    """What a hostgroup's waits ask of its manager: the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop


def _hostgroup() -> Hostgroup:
    return Hostgroup(1, _Manager(asyncio.get_running_loop()))  # type: ignore[arg-type]


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


def test_a_wait_handed_a_connection_leaves_the_queue_and_the_timer_finds_nothing_to_end() -> None:
    async def main() -> None:
        hg = _hostgroup()
        wait = asyncio.ensure_future(hg._wait("app", None, 60.0))
        await asyncio.sleep(0)
        handed: Any = object()
        waiter = hg.waiters.popleft()  # what ``release`` does when it hands a connection over
        waiter.future.set_result(handed)
        assert await wait is handed
        hg._expire()  # fires with no waiter left: nothing to end, no timer left
        assert hg.expiry is None and not hg.waiters

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
