"""The connections a server pool has handed out (``ServerPool.busy``): each knows its place in the list, so that
taking one back is a swap with the last, not a search. Random sequences of hand-outs and returns, against a model."""

from __future__ import annotations

import asyncio
import random

import pytest

from proxyapp.mysql.backend import BackendConnection
from tests.support.pools import full_hostgroup


def _consistent(busy: list[BackendConnection], model: set[BackendConnection], idle: list[BackendConnection]) -> None:
    assert set(busy) == model and len(busy) == len(model)
    assert all(conn.busy_at == at for at, conn in enumerate(busy))
    assert all(conn.busy_at == -1 for conn in idle)


@pytest.mark.parametrize("seed", range(20))
def test_handing_out_and_taking_back_in_any_order_keeps_the_list_and_the_places_in_step(seed: int) -> None:
    asyncio.run(_hand_out_and_take_back(random.Random(seed)))


async def _hand_out_and_take_back(rng: random.Random) -> None:
    hg, conns = full_hostgroup(12)
    pool = hg.pools[0]
    model = set(conns)
    idle: list[BackendConnection] = []
    for _ in range(300):
        if model and (not idle or rng.random() < 0.5):
            conn = rng.choice(sorted(model, key=id))
            pool.used -= 1
            pool.unmark_used(conn)
            model.discard(conn)
            idle.append(conn)
        else:
            conn = idle.pop(rng.randrange(len(idle)))
            hg._mark_used(pool, conn)
            model.add(conn)
        _consistent(pool.busy, model, idle)
        assert pool.used == len(model)


def test_taking_back_a_connection_not_handed_out_changes_nothing() -> None:
    asyncio.run(_take_back_twice())


async def _take_back_twice() -> None:
    hg, (first, second) = full_hostgroup(2)
    pool = hg.pools[0]
    pool.unmark_used(first)
    pool.unmark_used(first)  # again: it is no longer there
    assert pool.busy == [second] and second.busy_at == 0 and first.busy_at == -1
