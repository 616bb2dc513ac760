"""The hot-row queue's lines (``proxyapp.hotrows.queues``) on a clock the test holds: grants, first in first out,
concurrency, waits out of order, deadlocks, timeouts, limits, and a random model check of the invariants."""

from __future__ import annotations

import asyncio
import random

import pytest

from proxyapp.hotrows.queues import (
    DEADLOCK,
    GRANTED,
    REFUSED,
    TIMED_OUT,
    UNQUEUED,
    WITHDRAWN,
    KeyQueues,
    Waiter,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(test: object) -> None:
    asyncio.run(test())  # type: ignore[operator]


def k(value: str, queue: str = "q") -> tuple[str, str]:
    return (queue, value)


def test_a_free_key_is_granted_and_the_next_wait_in_line_first_in_first_out() -> None:
    async def test() -> None:
        clock = FakeClock()
        queues = KeyQueues(clock)
        assert queues.take(1, k("a"), 10) == GRANTED
        second, third = queues.take(2, k("a"), 10), queues.take(3, k("a"), 10)
        assert isinstance(second, Waiter) and isinstance(third, Waiter)
        assert queues.take(1, k("a"), 10) == GRANTED  # a key one holds: granted again
        clock.now += 2
        queues.give_back(1)
        assert second.future.result() == GRANTED and not third.future.done()
        queues.give_back(2)
        assert third.future.result() == GRANTED
        queues.give_back(3)
        (row,) = queues.rows()
        assert row == {
            "queue": "q", "keys_active": 0, "waiters": 0, "longest_wait_ms": 0, "transactions": 3, "waited": 2,
            "wait_ms_total": 4000, "timeouts": 0, "refused": 0,
        }  # fmt: skip

    run(test)


def test_concurrency_lets_that_many_hold_a_key_and_a_reload_that_grows_it_lets_waiters_in() -> None:
    async def test() -> None:
        queues = KeyQueues(FakeClock(), concurrency=2)
        assert [queues.take(n, k("a"), 10) for n in (1, 2)] == [GRANTED, GRANTED]
        third = queues.take(3, k("a"), 10)
        assert isinstance(third, Waiter)
        queues.configure(3, 1024, 100)
        assert third.future.result() == GRANTED
        assert queues.rows()[0]["keys_active"] == 1

    run(test)


def test_keys_of_other_values_or_queues_do_not_block_each_other() -> None:
    async def test() -> None:
        queues = KeyQueues(FakeClock())
        assert [queues.take(1, k("a"), 10), queues.take(2, k("b"), 10), queues.take(3, k("a", "r"), 10)] == [
            GRANTED,
            GRANTED,
            GRANTED,
        ]
        assert [r["keys_active"] for r in queues.rows()] == [2, 1]

    run(test)


def test_a_key_below_one_held_is_not_waited_for_it_runs_without_the_queue_or_is_a_deadlock() -> None:
    async def test() -> None:
        queues = KeyQueues(FakeClock())
        assert queues.take(1, k("5"), 10) == GRANTED
        assert queues.take(2, k("3"), 10) == GRANTED
        assert queues.take(1, k("1"), 10) == GRANTED  # out of order but free: taken
        assert queues.take(2, k("1"), 10) != GRANTED  # 1 < 3 held: no wait...
        assert queues.take(2, k("1"), 10) == UNQUEUED  # ...and 1's holder waits for nothing: no circle
        wait = queues.take(2, k("5"), 10)  # in order (5 > 3): 2 waits for 1
        assert isinstance(wait, Waiter)
        assert queues.take(1, k("3"), 10) == DEADLOCK  # 3's holder waits for a key 1 holds
        assert queues.take(4, k("3"), 10, wait=False) == UNQUEUED  # no wait asked: runs without
        queues.give_back(1)
        assert wait.future.result() == GRANTED

    run(test)


def test_waits_past_their_deadline_time_out_and_a_withdrawn_wait_lets_the_next_in() -> None:
    async def test() -> None:
        clock = FakeClock()
        queues = KeyQueues(clock)
        queues.take(1, k("a"), 10)
        early = queues.take(2, k("a"), 5)
        late = queues.take(3, k("a"), 60)
        assert isinstance(early, Waiter) and isinstance(late, Waiter)
        assert queues.next_deadline() == 1005.0
        clock.now += 5
        assert queues.rows()[0]["longest_wait_ms"] == 5000
        assert queues.expire() == 1
        assert early.future.result() == TIMED_OUT and not late.future.done()
        gone = queues.take(4, k("a"), 60)
        assert isinstance(gone, Waiter)
        queues.withdraw(late)
        assert late.future.result() == WITHDRAWN
        queues.give_back(1)
        assert gone.future.result() == GRANTED
        assert queues.rows()[0]["timeouts"] == 1

    run(test)


def test_a_full_line_is_refused_and_keys_past_the_limit_run_without_the_queue() -> None:
    async def test() -> None:
        queues = KeyQueues(FakeClock(), max_waiters=1, max_keys=2)
        queues.take(1, k("a"), 10)
        assert isinstance(queues.take(2, k("a"), 10), Waiter)
        assert queues.take(3, k("a"), 10) == REFUSED
        assert queues.take(4, k("b"), 10) == GRANTED
        assert queues.take(5, k("c"), 10) == UNQUEUED  # a third key: no room
        assert queues.rows()[0]["refused"] == 1
        queues.give_back(4)
        assert queues.take(5, k("c"), 10) == GRANTED  # a line nobody holds is forgotten

    run(test)


def test_giving_back_ends_the_owner_s_own_wait_too() -> None:
    async def test() -> None:
        queues = KeyQueues(FakeClock())
        queues.take(1, k("a"), 10)
        queues.take(2, k("0"), 10)
        wait = queues.take(2, k("a"), 10)
        assert isinstance(wait, Waiter)
        queues.give_back(2)
        assert wait.future.result() == WITHDRAWN
        assert queues.waiters() == 0 and queues.held(2) == []

    run(test)


@pytest.mark.parametrize("seed", range(20))
def test_random_sequences_keep_the_invariants(seed: int) -> None:
    """Owners take keys in random order, give back, time out, withdraw: at every step no key has more holders than
    ``concurrency``, an owner waits only for a key above those it holds, waits are granted first in first out, and
    at the end no line is left."""

    async def test() -> None:
        rnd = random.Random(seed)
        clock = FakeClock()
        concurrency = rnd.choice([1, 2])
        queues = KeyQueues(clock, concurrency=concurrency, max_waiters=4, max_keys=6)
        waits: dict[int, Waiter] = {}
        asked: dict[tuple[str, str], list[int]] = {}  # the order the waiters of each key asked in
        for _ in range(400):
            owner = rnd.randrange(1, 9)
            action = rnd.random()
            if owner in waits:
                wait = waits[owner]
                if wait.future.done():
                    del waits[owner]
                elif action < 0.1:
                    queues.withdraw(wait)
                    asked[wait.key].remove(owner)
                    del waits[owner]
                continue
            if action < 0.55:
                key = k(str(rnd.randrange(8)))
                held = list(queues.held(owner))
                answer = queues.take(owner, key, rnd.choice([1, 5, 50]))
                if isinstance(answer, Waiter):
                    assert not held or key > max(held)
                    waits[owner] = answer
                    asked.setdefault(key, []).append(owner)
            elif action < 0.85:
                queues.give_back(owner)
            else:
                clock.now += rnd.choice([1, 2, 10])
                queues.expire()
                for owner_, wait in list(waits.items()):
                    if wait.future.done() and wait.future.result() == TIMED_OUT:
                        asked[wait.key].remove(owner_)
                        del waits[owner_]
            for key, owners in list(asked.items()):  # grants since: in asking order
                got = [o for o in owners if o in waits and waits[o].future.done() and waits[o].future.result() == 0]
                assert got == owners[: len(got)], "granted out of turn"
                asked[key] = owners[len(got) :]
            holders: dict[tuple[str, str], int] = {}
            for o in range(1, 9):
                for key in queues.held(o):
                    holders[key] = holders.get(key, 0) + 1
            assert all(count <= concurrency for count in holders.values())
        for o in range(1, 9):
            queues.give_back(o)
        assert queues.waiters() == 0
        assert all(row["keys_active"] == 0 and row["waiters"] == 0 for row in queues.rows())

    run(test)
