"""The node's one set of hot-row lines shared by its workers (``proxyapp.hotrows.broker``): two workers' owners wait
in one line; a give_back sent after a take is applied after it; a worker whose socket ends gives back every key its
sessions held; a broker gone lets statements run without the queue; the node finds heat once, from every worker's
marks, and every worker learns the queues it applied."""

from __future__ import annotations

import asyncio

from proxyapp.clock import Clock
from proxyapp.hotrows.broker import BrokeredHotRows, ForwardedHeat, HotRowBroker
from proxyapp.hotrows.queues import GRANTED, UNQUEUED, WITHDRAWN
from proxyapp.hotrows.service import HotRowSettings


async def answered(worker: BrokeredHotRows, owner: int) -> None:
    """A round trip to the broker (``owner`` takes and gives back a key of its own): once it is answered, the broker
    has read every message the worker sent before, and the worker every message the broker sent it before the answer
    (one ordered stream each way)."""
    assert await worker.acquire(owner, ("barrier", str(owner)), True) == GRANTED
    worker.give_back(owner)


def test_two_workers_wait_in_one_line_and_a_worker_gone_gives_its_keys_back() -> None:
    async def test() -> None:
        broker = HotRowBroker(Clock(), HotRowSettings())
        one = BrokeredHotRows(Clock(), HotRowSettings(), broker.pair().detach())
        two = BrokeredHotRows(Clock(), HotRowSettings(), broker.pair().detach())
        lines = broker.hot_rows.queues
        assert await one.acquire(1, ("q", "a"), True) == GRANTED
        waiting = asyncio.ensure_future(two.acquire(2, ("q", "a"), True))
        withdrawn = asyncio.ensure_future(two.acquire(4, ("q", "a"), True))
        await asyncio.ensure_future(answered(two, 90))  # a task after theirs: it asks after them
        assert lines.waiters() == 2
        two.withdraw(4)
        assert await withdrawn == WITHDRAWN
        one.give_back(1)
        assert await waiting == GRANTED
        assert lines.held(2) == [("q", "a")]
        assert await one.acquire(3, ("q", "b"), True) == GRANTED
        one.give_back(3)  # sent after the take: applied after it
        assert await one.acquire(3, ("q", "b"), True) == GRANTED
        assert one._writer is not None
        freed = asyncio.ensure_future(two.acquire(6, ("q", "b"), True))
        await asyncio.ensure_future(answered(two, 90))
        one._writer.close()  # the worker is gone: its owner 3 gives key b back, to the next in line
        assert await freed == GRANTED
        assert lines.held(3) == []
        two.give_back(6)
        await answered(two, 90)
        assert [r["keys_active"] for r in broker.hot_rows.rows() if r["queue"] == "q"] == [1]
        await broker.stop()
        assert await two.acquire(5, ("q", "c"), True) == UNQUEUED  # no broker: no queue

    asyncio.run(test())


def test_the_node_finds_heat_once_from_every_worker_s_marks_and_hands_each_worker_what_it_applied() -> None:
    async def test() -> None:
        settings = HotRowSettings()
        settings.threshold, settings.auto_apply = 3, True
        broker = HotRowBroker(Clock(), settings)
        workers = [BrokeredHotRows(Clock(), settings, broker.pair().detach()) for _ in range(2)]
        for worker in workers:
            await worker.start()
        heats = [ForwardedHeat(Clock(), settings, worker) for worker in workers]
        update = "UPDATE acct SET b = b - 1 WHERE id = 7"
        heats[0].observe(update, "app", "0xA", "UPDATE acct ...", 1213)
        heats[1].observe(update, "app", "0xA", "UPDATE acct ...", 0)
        heats[1].observe(update, "app", "0xA", "UPDATE acct ...", 1205)  # 3 marks, over two workers: a proposal
        for worker in (workers[0], workers[1], workers[0]):  # the broker reads both's marks, then each its answer
            await answered(worker, 90)
        assert [worker.applied for worker in workers] == [{"0xA": ("app.acct", "id")}] * 2
        assert heats[0].applied is workers[0].applied  # what the worker's sessions read
        (proposal,) = broker.heat.proposals()
        assert proposal["evidence"] == {"deadlocks": 1, "lock_wait_timeouts": 1, "slow": 1, "marks_last_minute": 3}
        assert heats[0].proposals() == []  # the supervisor reports them
        late = BrokeredHotRows(Clock(), settings, broker.pair().detach())
        await late.start()  # a worker started later (restarted) is told at once
        await answered(late, 91)
        assert late.applied == {"0xA": ("app.acct", "id")}
        broker.configure(HotRowSettings())  # auto apply off: withdrawn from every worker
        for worker in [*workers, late]:
            await answered(worker, 92)
        assert not any(worker.applied for worker in [*workers, late])
        await broker.stop()

    asyncio.run(test())
