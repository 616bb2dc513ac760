"""The query cache's TTLs and size bound on a clock the test holds."""

from __future__ import annotations

from proxyapp.report.stats import GlobalCounters
from proxyapp.rules.cache import QueryCache

KEY = ("app", "db", b"SELECT 1")


class Clock:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 500.0

    def __call__(self) -> float:
        return self.now


def test_an_entry_is_served_until_its_ttl_and_not_after() -> None:
    clock, counters = Clock(), GlobalCounters()
    cache = QueryCache(1 << 20, counters, clock)
    cache.put(KEY, b"rows", 600)
    clock.now += 0.6
    assert cache.get(KEY) == b"rows"  # at the TTL: still fresh
    clock.now += 0.001
    assert cache.get(KEY) is None  # past it: gone, and counted as purged
    assert (counters.Query_Cache_count_GET, counters.Query_Cache_count_GET_OK) == (2, 1)
    assert (counters.Query_Cache_Purged, counters.Query_Cache_Entries, counters.Query_Cache_Memory_bytes) == (1, 0, 0)


def test_a_new_put_renews_the_ttl_and_the_oldest_go_first_when_full() -> None:
    clock, counters = Clock(), GlobalCounters()
    cache = QueryCache(30, counters, clock)
    cache.put(KEY, b"a" * 10, 100)
    clock.now += 0.09
    cache.put(KEY, b"b" * 10, 100)
    clock.now += 0.09
    assert cache.get(KEY) == b"b" * 10  # 180 ms after the first put, 90 ms after the second
    other = ("app", "db", b"SELECT 2")
    cache.put(other, b"c" * 10, 100)  # 20 + 18 bytes with the keys: over 30, the oldest goes
    assert cache.get(KEY) is None and cache.get(other) == b"c" * 10
    cache.put(("app", "db", b"x"), b"d" * 64, 100)  # bigger than the whole cache: not stored
    assert counters.Query_Cache_Entries == 1
