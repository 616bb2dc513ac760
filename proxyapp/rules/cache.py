"""The result cache behind query rules' ``cache_ttl``: whole text-protocol responses, keyed by user, schema, query."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from proxyapp.report.stats import GlobalCounters


class QueryCache:
    """A bounded cache of raw responses; entries expire after their rule's TTL, the oldest go first when full."""

    def __init__(self, max_bytes: int, counters: GlobalCounters, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_bytes = max_bytes
        self.clock = clock  # what the TTLs count with (tests hold their own)
        self.counters = counters
        self.bytes = 0
        self._entries: OrderedDict[tuple[str, str, bytes], tuple[float, bytes]] = OrderedDict()

    def get(self, key: tuple[str, str, bytes]) -> bytes | None:
        """The cached response for ``key`` if present and fresh."""
        self.counters.Query_Cache_count_GET += 1
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, raw = entry
        if expires < self.clock():
            self._drop(key)
            self.counters.Query_Cache_Purged += 1
            return None
        self.counters.Query_Cache_count_GET_OK += 1
        self.counters.Query_Cache_bytes_OUT += len(raw)
        return raw

    def put(self, key: tuple[str, str, bytes], raw: bytes, ttl_ms: int) -> None:
        """Store a response for ``ttl_ms`` milliseconds, evicting the oldest entries past the size bound."""
        if len(raw) > self.max_bytes:
            return
        if key in self._entries:
            self._drop(key)
        self._entries[key] = (self.clock() + ttl_ms / 1000, raw)
        self.bytes += len(raw) + len(key[2])
        self.counters.Query_Cache_count_SET += 1
        self.counters.Query_Cache_bytes_IN += len(raw)
        while self.bytes > self.max_bytes and self._entries:
            self._drop(next(iter(self._entries)))
            self.counters.Query_Cache_Purged += 1
        self._publish()

    def clear(self) -> None:
        """Drop every entry (a new config may route the same queries elsewhere)."""
        self._entries.clear()
        self.bytes = 0
        self._publish()

    def _drop(self, key: tuple[str, str, bytes]) -> None:
        _, raw = self._entries.pop(key)
        self.bytes -= len(raw) + len(key[2])
        self._publish()

    def _publish(self) -> None:
        self.counters.Query_Cache_Entries = len(self._entries)
        self.counters.Query_Cache_Memory_bytes = self.bytes
