"""The answer of a simple Query that a ``cache_ttl`` rule caches (``pgsql_query_rules``), gathered as it passes to
the client and kept in the query cache at its ReadyForQuery when it may be replayed: whole (nothing but rows, tags
and notices), with rows (or empty answers are kept too), and leaving no transaction open."""

from __future__ import annotations

from proxyapp.rules.cache import QueryCache

#: Server messages an answer kept in the query cache may hold: RowDescription, DataRow, CommandComplete,
#: EmptyQueryResponse, NoticeResponse (an error, a parameter status or COPY is never kept).
CACHEABLE = frozenset(b"TDCIN")
_DATA_ROW = ord("D")


class CachedAnswer:
    """A simple Query's answer on its way to the client, for the query cache."""

    __slots__ = ("empty_too", "key", "parts", "rows", "ttl_ms", "whole")

    def __init__(self, key: tuple[str, str, bytes], ttl_ms: int, empty_too: bool) -> None:
        self.key = key  # user, database, the Query message
        self.ttl_ms = ttl_ms
        self.empty_too = empty_too  # an answer without rows is kept too
        self.parts: list[bytes] = []
        self.rows = 0
        self.whole = True  # nothing but rows, tags and notices so far

    def add(self, kind: int, out: bytes) -> None:
        """A message of the answer (``kind``), as written to the client (``out``)."""
        self.parts.append(out)
        self.rows += kind == _DATA_ROW
        self.whole = self.whole and kind in CACHEABLE

    def store(self, cache: QueryCache, status: bytes) -> bool:
        """The answer ended with a ReadyForQuery of ``status``: keep it in ``cache`` if it may be replayed (a hit is
        answered with a ReadyForQuery of idle); whether it was kept."""
        if not self.whole or status != b"I" or not (self.rows or self.empty_too):
            return False
        cache.put(self.key, b"".join(self.parts), self.ttl_ms)
        return True
