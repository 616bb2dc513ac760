"""The ordered mode's lanes without a server: where a committed unit goes (memory within the bound, disk for a
lossless hostgroup, dropped for a lossy one), what is counted, and when a runner is asked for."""

from __future__ import annotations

import asyncio
from pathlib import Path

from proxyapp.backends.pool import PoolManager
from proxyapp.mirror.counts import MirrorCounts
from proxyapp.mirror.lanes import IDLE, READY
from proxyapp.mirror.ordered import OrderedLanes
from proxyapp.mirror.units import OP_OVERHEAD, QUERY, MirrorOp
from proxyapp.mysql.backend import Credentials
from proxyapp.report.stats import GlobalCounters
from proxyapp.session.state import SessionState

LOSSLESS, LOSSY = 700, 701
USER = Credentials("app", "secret")


def lanes(max_memory: int, spill_dir: Path | None = None) -> tuple[OrderedLanes, list[int]]:
    counters = GlobalCounters()
    kicks: list[int] = []
    ordered = OrderedLanes(MirrorCounts(counters), counters, PoolManager(counters), 0, 1, lambda: kicks.append(1))
    ordered.max_memory = max_memory
    ordered.lossless = {LOSSLESS: True, LOSSY: False}
    ordered.spill_dir = spill_dir
    return ordered, kicks


def op(hostgroup: int, sql: bytes = b"\x03INSERT INTO t VALUES (1)") -> MirrorOp:
    return MirrorOp(QUERY, hostgroup, sql, "", [], 0, True, SessionState("app"))


def test_a_unit_within_the_bound_waits_in_memory_and_asks_for_a_runner() -> None:
    ordered, kicks = lanes(1 << 20)
    lane = ordered.new_lane("1.700", LOSSY)
    assert lane.state == IDLE
    ordered.push(lane, [op(LOSSY), op(LOSSY)], True, USER)
    size = 2 * (len(op(LOSSY).payload) + OP_OVERHEAD)
    assert (len(lane.units), ordered.memory, ordered.memory_ops) == (1, size, 2)
    assert lane.state == READY and list(ordered.ready) == [lane] and kicks == [1]
    assert (ordered.counts.mirrored, ordered.counters.Mirror_queue_length) == (2, 2)
    ordered.push(lane, [op(LOSSY)], False, USER)  # already ready: no second place in line, no second kick
    assert (len(lane.units), list(ordered.ready), kicks) == (2, [lane], [1])
    assert [unit.seq for unit in lane.units] == [1, 2]


def test_a_lossy_hostgroup_drops_what_the_memory_bound_cannot_hold() -> None:
    ordered, kicks = lanes(10)
    lane = ordered.new_lane("1.701", LOSSY)
    ordered.push(lane, [op(LOSSY), op(LOSSY), op(LOSSY)], True, USER)
    assert (len(lane.units), ordered.memory, lane.disk_units) == (0, 0, 0)
    counts = ordered.counts
    assert (counts.mirrored, counts.dropped) == (3, {"memory_full": 3})  # handed over, then dropped: counted both
    assert (ordered.counters.Mirror_queries_dropped, lane.state, kicks) == (3, IDLE, [])


def test_a_lossless_hostgroup_spills_to_disk_and_keeps_the_order(tmp_path: Path) -> None:
    async def scenario() -> None:
        ordered, kicks = lanes(10, tmp_path)
        lane = ordered.new_lane("1.700", LOSSLESS)
        ordered.push(lane, [op(LOSSLESS)], False, USER)
        ordered.push(lane, [op(LOSSLESS), op(LOSSLESS)], True, USER)
        assert (len(lane.units), lane.disk_units, lane.disk_ops, ordered.disk_ops) == (0, 2, 3, 3)
        assert (ordered.counters.Mirror_queries_spilled, ordered.counters.Mirror_queue_disk_length) == (3, 3)
        assert (ordered.counts.dropped, lane.state, kicks) == ({}, READY, [1])
        assert ordered.oldest(10**12) == lane.disk_head_created
        # Once the lane has units on disk, a unit that would fit in memory goes to disk too, behind them.
        ordered.max_memory = 1 << 20
        ordered.push(lane, [op(LOSSLESS)], False, USER)
        assert (len(lane.units), lane.disk_units) == (0, 3)
        await ordered.close()
        assert (tmp_path / "worker-0.sqlite3").exists()

    asyncio.run(scenario())


def test_a_closed_lane_with_nothing_to_run_is_retired() -> None:
    ordered, _ = lanes(1 << 20)
    lane = ordered.new_lane("1.701", LOSSY)
    ordered.close_lane(lane)
    assert lane.key not in ordered.lanes
    busy = ordered.new_lane("2.701", LOSSY)
    ordered.push(busy, [op(LOSSY)], False, USER)
    ordered.close_lane(busy)  # its unit runs first
    assert busy.key in ordered.lanes and busy.closed
