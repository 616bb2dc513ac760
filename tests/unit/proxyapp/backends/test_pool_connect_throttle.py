"""``mysql-throttle_connections_per_sec_to_hostgroup`` and ``mysql-max_connects_in_flight`` as the pools read
them: each worker's share of the throttle (a bucket of at most a second's connects, the first line woken when the
next is due), no bookkeeping at ProxySQL's default, and the bound of connects under way per server."""

from __future__ import annotations

import asyncio

from proxyapp.backends.pool import UNTHROTTLED, PoolManager, PoolSettings
from proxyapp.config.tables import MysqlServer
from proxyapp.report.stats import GlobalCounters

SERVER = MysqlServer(hostname="db", hostgroup_id=1, max_connections=100)


def manager(workers: int = 1, **settings: int) -> PoolManager:
    pools = PoolManager(GlobalCounters(), workers=workers)
    pools.apply((SERVER,), PoolSettings(**settings))  # type: ignore[arg-type]
    return pools


def test_the_default_throttle_counts_nothing() -> None:
    async def main() -> None:
        hg = manager(throttle_connections_per_sec=UNTHROTTLED).hostgroup(1)
        assert all(hg._take_token() for _ in range(10_000))
        assert hg.token_timer is None and hg.tokens == 0.0

    asyncio.run(main())


def test_a_throttled_hostgroup_allows_a_seconds_worth_then_wakes_the_line_when_the_next_is_due() -> None:
    async def main() -> None:
        hg = manager(workers=2, throttle_connections_per_sec=6).hostgroup(1)  # 3 per second for this worker
        assert [hg._take_token() for _ in range(4)] == [True, True, True, False]
        timer = hg.token_timer
        assert timer is not None
        assert 0 < timer.when() - asyncio.get_running_loop().time() <= 1 / 3 + 0.01
        assert not hg._take_token() and hg.token_timer is timer  # one timer for the line
        hg._token_due()
        assert hg.token_timer is None

    asyncio.run(main())


def test_the_bound_of_connects_under_way_follows_the_config() -> None:
    async def main() -> None:
        pools = manager(max_connects_in_flight=2)
        pool = pools.hostgroup(1).pools[0]
        assert pool.connect_slots == 2 and pool.may_open
        pool.connecting = 2
        assert not pool.may_open and not pool.has_room
        pools.apply((SERVER,), PoolSettings(max_connects_in_flight=0))  # 0: no bound
        assert pool.may_open and pool.connect_slots > 100_000

    asyncio.run(main())
