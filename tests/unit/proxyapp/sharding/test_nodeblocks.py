"""A node's sequence blocks shared by its workers (proxyapp.sharding.nodeblocks): two workers' views of one shared
block, as two processes have them, hand out ids that increase across both, and never go back to a lower block."""

from __future__ import annotations

import asyncio
import os
import random

from proxyapp.sharding.nodeblocks import SLOTS, NodeBlocks, sequence_key
from proxyapp.sharding.sequence import Sequence
from tests.unit.proxyapp.sharding.test_sequence import Reserving


def test_two_workers_take_from_one_node_block() -> None:
    fd = NodeBlocks.create()
    try:
        one, two = NodeBlocks(fd), NodeBlocks(fd)
        key = sequence_key("shops/shop/orders")
        assert one.take(key, 3) == []  # nothing reserved yet
        assert one.install(key, 1, 10, 3) == [1, 2, 3]
        assert two.take(key, 4) == [4, 5, 6, 7]
        assert one.take(key, 5) == [8, 9, 10]  # the rest: a new block is the taker's to reserve
        assert two.install(key, 21, 10, 2) == [21, 22]  # a block reserved later (another worker took 11-20)
        assert one.install(key, 11, 10, 2) is None  # one reserved 11-20 first but installs it last: never back
        assert one.take(key, 2) == [23, 24]
        assert one.take(sequence_key("shops/shop/other"), 1) == []  # another sequence, another slot
    finally:
        os.close(fd)


def test_a_full_node_leaves_further_sequences_to_their_workers() -> None:
    fd = NodeBlocks.create()
    try:
        blocks = NodeBlocks(fd)
        for n in range(SLOTS):
            assert blocks.take(sequence_key(f"t{n}"), 1) == []
        assert blocks.take(sequence_key("one more"), 1) is None
    finally:
        os.close(fd)


def test_sequences_of_several_workers_increase_across_the_node() -> None:
    """Three workers' sequences share the node's block and one store; taking in a random order of workers, each
    value handed out is above every value handed out before it, anywhere on the node."""

    async def run() -> list[int]:
        fd = NodeBlocks.create()
        store = Reserving(start=1)
        key = sequence_key("shops/shop/orders")
        workers = [Sequence(NodeBlocks(fd), key) for _ in range(3)]
        rng = random.Random(14)
        handed: list[int] = []
        for _ in range(240):
            handed.extend(await rng.choice(workers).take(rng.randint(1, 4), 5, store.reserve))
        os.close(fd)
        return handed

    handed = asyncio.run(run())
    assert handed == sorted(handed) and len(set(handed)) == len(handed) > 200
