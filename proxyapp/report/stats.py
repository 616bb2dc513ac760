"""The proxy's statistics: per-digest query stats and the global counters, named as ProxySQL names them.

``DigestStats`` is ``stats_mysql_query_digest`` (``DigestStats(schema_column="database")``: ProxySQL 3.0's
``stats_pgsql_query_digest``); ``GlobalCounters`` is ``stats_mysql_global``. Both are updated
from the single asyncio thread without locks, and both are cheap on the hot path: a digest record is one dict
lookup and a few additions, and a counter is a plain slot attribute (``counters.Questions += 1``).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Final, NamedTuple

from proxyapp.shown import shown

#: The wall clock digests' first_seen and last_seen are reported on (a Final name: one lookup at import).
_WALL_CLOCK: Final = time.time
#: What a digest entry's last seen is stamped with (``time.monotonic``, which a query's duration is measured on
#: already: ``proxyapp.clock.MONOTONIC``): the wall clock's time is worked out when the rows are read, not read per
#: query.
_STAMP_CLOCK: Final = time.monotonic
#: stats_mysql_query_digest's columns, in ProxySQL's order.
DIGEST_COLUMNS = (
    "hostgroup",
    "schemaname",
    "username",
    "client_address",
    "digest",
    "digest_text",
    "count_star",
    "first_seen",
    "last_seen",
    "sum_time",
    "min_time",
    "max_time",
    "sum_rows_affected",
    "sum_rows_sent",
)

#: stats_pgsql_query_digest's columns (ProxySQL 3.0): stats_mysql_query_digest's, with ``database`` for
#: ``schemaname``.
PGSQL_DIGEST_COLUMNS = tuple("database" if column == "schemaname" else column for column in DIGEST_COLUMNS)

#: The numeric digest columns rows can be ordered by (always largest first).
DIGEST_ORDER_COLUMNS = DIGEST_COLUMNS[6:]


def order_digest_rows(
    rows: Iterable[dict[str, Any]], limit: int | None = None, order_by: str = "sum_time"
) -> list[dict[str, Any]]:
    """Digest rows sorted by ``order_by`` (largest first), the first ``limit`` of them when given.

    Raises ``ValueError`` for a column outside ``DIGEST_ORDER_COLUMNS`` or a negative limit.
    """
    if order_by not in DIGEST_ORDER_COLUMNS:
        raise ValueError(f"order_by must be one of {', '.join(DIGEST_ORDER_COLUMNS)}, not {order_by!r}")
    if limit is None:
        return sorted(rows, key=lambda row: row[order_by], reverse=True)
    if limit < 0:
        raise ValueError(f"limit must be 0 or more, not {limit}")
    return heapq.nlargest(limit, rows, key=lambda row: row[order_by])


#: The most entries a ``DigestMemo`` keeps before it starts again.
_MEMO_SIZE: Final = 64


class _DigestEntry:
    """The aggregate of one digest key (everything but the key columns, and its hostgroup)."""

    __slots__ = (
        "count_star",
        "digest_text",
        "first_seen",
        "hostgroup",
        "last_seen",
        "max_time",
        "min_time",
        "sum_rows_affected",
        "sum_rows_sent",
        "sum_time",
    )

    def __init__(
        self, hostgroup: int, digest_text: str, at: float, elapsed_us: int, rows_sent: int, rows_affected: int
    ) -> None:
        self.hostgroup = hostgroup  # of its key: a ``DigestMemo`` finds the entry by its digest alone
        self.digest_text = digest_text
        self.count_star = 1
        self.first_seen = int(_WALL_CLOCK())  # once per key: the wall clock's second, the same at every read
        self.last_seen = at  # on ``_STAMP_CLOCK``, per query
        self.sum_time = self.min_time = self.max_time = elapsed_us
        self.sum_rows_affected = rows_affected
        self.sum_rows_sent = rows_sent


class DigestMemo:
    """One session's digest entries by digest (``DigestStats.record``'s ``memo``): a session repeating its statements
    finds their entries without hashing the five-part key. They hold for one schema, user and client address, and
    while the table's ``generation`` is the one they were taken in."""

    __slots__ = ("client_addr", "entries", "generation", "schemaname", "username")

    def __init__(self) -> None:
        self.generation = -1  # no table's: the first record fills it
        self.schemaname = ""
        self.username = ""
        self.client_addr = ""
        self.entries: dict[str, _DigestEntry] = {}


class DigestStats:
    """Per-digest query statistics keyed like stats_mysql_query_digest.

    The key is (hostgroup, schemaname, username, client_address, digest). The table holds at most
    ``max_entries`` keys: once it is full, queries whose key is not in it yet are not recorded but counted in
    ``overflow``; keys already present keep aggregating. ``reset()`` empties the table and zeroes ``overflow``.
    ``schema_column`` names the schema in the rows: ``"database"`` makes them stats_pgsql_query_digest's
    (``PGSQL_DIGEST_COLUMNS``), the database being what ``record`` is given as ``schemaname``.
    """

    __slots__ = ("_entries", "generation", "max_entries", "overflow", "schema_column")

    def __init__(self, max_entries: int = 10000, schema_column: str = "schemaname") -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be 1 or more, not {max_entries}")
        if schema_column not in ("schemaname", "database"):
            raise ValueError(f"schema_column must be schemaname or database, not {schema_column!r}")
        self.max_entries = max_entries
        self.schema_column = schema_column
        #: Queries not recorded because the table was full (since creation or the last reset).
        self.overflow = 0
        self._entries: dict[tuple[int, str, str, str, str], _DigestEntry] = {}
        #: Counts the times the table was emptied: a ``DigestMemo`` of an earlier generation names a dropped entry.
        self.generation = 0

    def record(
        self,
        hostgroup: int,
        schemaname: str,
        username: str,
        client_addr: str,
        digest: str,
        digest_text: str,
        elapsed_us: int,
        rows_sent: int,
        rows_affected: int,
        at: float | None = None,
        memo: DigestMemo | None = None,
    ) -> None:
        """Count one executed query that took ``elapsed_us`` microseconds and ended ``at`` (``time.monotonic``'s
        time, which its duration was measured with; by default now). ``memo``: the caller's entries by digest, used
        and kept up to date."""
        if at is None:
            at = _STAMP_CLOCK()
        entry: _DigestEntry | None = None
        if memo is not None:
            if (
                memo.generation != self.generation
                or memo.schemaname != schemaname
                or memo.username != username
                or memo.client_addr != client_addr
                or len(memo.entries) >= _MEMO_SIZE
            ):
                memo.entries.clear()
                memo.generation = self.generation
                memo.schemaname = schemaname
                memo.username = username
                memo.client_addr = client_addr
            entry = memo.entries.get(digest)
            if entry is not None and entry.hostgroup != hostgroup:
                entry = None
        if entry is None:
            key = (hostgroup, schemaname, username, client_addr, digest)
            entry = self._entries.get(key)
            if entry is None:
                if len(self._entries) >= self.max_entries:
                    self.overflow += 1
                    return
                entry = _DigestEntry(hostgroup, digest_text, at, elapsed_us, rows_sent, rows_affected)
                self._entries[key] = entry
                if memo is not None:
                    memo.entries[digest] = entry
                return  # the new entry counts this query
            if memo is not None:
                memo.entries[digest] = entry
        entry.count_star += 1
        entry.last_seen = at
        entry.sum_time += elapsed_us
        if elapsed_us < entry.min_time:
            entry.min_time = elapsed_us
        elif elapsed_us > entry.max_time:
            entry.max_time = elapsed_us
        entry.sum_rows_affected += rows_affected
        entry.sum_rows_sent += rows_sent

    def rows(self, limit: int | None = None, order_by: str = "sum_time") -> list[dict[str, Any]]:
        """The table as rows with ProxySQL's column names, ordered by ``order_by`` (largest first); a query's bytes
        that are not UTF-8 in a digest text or schema name are shown as ``\\xff`` (``shown``)."""
        schema_column = self.schema_column
        to_wall = _WALL_CLOCK() - _STAMP_CLOCK()  # a stamp's time on the wall clock: the stamp plus this
        return order_digest_rows(
            (
                {
                    "hostgroup": hostgroup,
                    schema_column: shown(schemaname),
                    "username": username,
                    "client_address": client_address,
                    "digest": digest,
                    "digest_text": shown(e.digest_text),
                    "count_star": e.count_star,
                    "first_seen": e.first_seen,
                    "last_seen": max(e.first_seen, int(e.last_seen + to_wall)),
                    "sum_time": e.sum_time,
                    "min_time": e.min_time,
                    "max_time": e.max_time,
                    "sum_rows_affected": e.sum_rows_affected,
                    "sum_rows_sent": e.sum_rows_sent,
                }
                for (hostgroup, schemaname, username, client_address, digest), e in self._entries.items()
            ),
            limit,
            order_by,
        )

    def reset(self) -> list[dict[str, Any]]:
        """The rows, then empty the table (like reading stats_mysql_query_digest_reset)."""
        rows = self.rows()
        self._entries.clear()
        self.generation += 1
        self.overflow = 0
        return rows


class CounterSpec(NamedTuple):
    """How a stats_mysql_global variable behaves: ``kind`` is "counter" (only grows) or "gauge"."""

    kind: str
    help: str


def _counter(help: str) -> Any:
    return field(default=0, metadata={"spec": CounterSpec("counter", help)})


def _gauge(help: str) -> Any:
    return field(default=0, metadata={"spec": CounterSpec("gauge", help)})


@dataclass(slots=True)
class GlobalCounters:
    """The stats_mysql_global variables as int attributes (ProxySQL's names); ProxySQL_Uptime is computed."""

    Client_Connections_connected: int = _gauge("client connections currently open")
    Client_Connections_created: int = _counter("client connections accepted")
    Client_Connections_aborted: int = _counter("client connections that ended with an error or a timeout")
    Client_Connections_non_idle: int = _gauge("client connections currently running a command")
    Client_Connections_tls: int = _counter("client connections upgraded to TLS")
    Client_TLS_handshake_errors: int = _counter(
        "client connections dropped because their TLS handshake failed (not TLS, an old version, a bad certificate)"
    )
    Questions: int = _counter("client commands received (queries and prepared statement commands)")
    Slow_queries: int = _counter("queries that ran longer than mysql-long_query_time")
    Active_Transactions: int = _gauge("client sessions currently inside a transaction")
    Server_Connections_connected: int = _gauge("backend connections currently open")
    Server_Connections_created: int = _counter("backend connections opened")
    Server_Connections_aborted: int = _counter("backend connections that failed or broke")
    Server_Connects_waited: int = _counter(
        "requests for a backend connection that waited in line because their server had mysql-max_connects_in_flight "
        "connects under way or their hostgroup reached mysql-throttle_connections_per_sec_to_hostgroup"
    )
    Query_Cache_count_GET: int = _counter("query cache lookups")
    Query_Cache_count_GET_OK: int = _counter("query cache lookups that found a fresh entry")
    Query_Cache_count_SET: int = _counter("responses stored in the query cache")
    Query_Cache_bytes_IN: int = _counter("bytes stored in the query cache")
    Query_Cache_bytes_OUT: int = _counter("bytes served from the query cache")
    Query_Cache_Entries: int = _gauge("entries in the query cache")
    Query_Cache_Memory_bytes: int = _gauge("bytes held by the query cache")
    Query_Cache_Purged: int = _counter("query cache entries expired or evicted")
    Access_Denied_Wrong_Password: int = _counter("logins refused for a wrong user or password")
    Access_Denied_Max_Connections: int = _counter("logins refused because mysql-max_connections was reached")
    Access_Denied_Host_Blocked: int = _counter(
        "connections refused because their address failed to log in too often (mysql-max_auth_errors_until_block)"
    )
    generated_error_packets: int = _counter("error packets the proxy generated itself")
    ConnPool_get_conn_success: int = _counter("backend connections obtained from the pool or opened")
    ConnPool_get_conn_failure: int = _counter("requests for a backend connection that failed")
    ConnPool_get_conn_immediate: int = _counter("backend connections handed out from the idle pool at once")
    mysql_killed_backend_queries: int = _counter("backend queries killed (timeout or client gone)")
    Sessions_waiting_for_writer: int = _gauge("queries waiting for their writer hostgroup to get an ONLINE writer")
    Writer_wait_timeouts: int = _counter("queries that failed after waiting mysql-no_writer_wait_ms for a writer")
    Com_commit: int = _counter("COMMIT statements")
    Com_rollback: int = _counter("ROLLBACK statements")
    Mirror_concurrency: int = _gauge("mirrored queries currently executing")
    Mirror_queue_length: int = _gauge("mirrored queries waiting to execute")
    Mirror_queue_disk_length: int = _gauge("mirrored queries waiting in the ordered mirror's queue on disk")
    Mirror_oldest_entry_age_ms: int = _gauge("milliseconds the oldest waiting mirrored query has waited")
    Mirror_queries_mirrored: int = _counter("queries handed to the mirror (committed ones, in ordered mode)")
    Mirror_queries_completed: int = _counter("mirrored queries that ran on the mirror without error")
    Mirror_queries_failed: int = _counter("mirrored queries that failed on the mirror or could not reach it")
    Mirror_queries_dropped: int = _counter("mirrored queries dropped (queue full, memory full, ...)")
    Mirror_queries_spilled: int = _counter("mirrored queries written to the ordered mirror's queue on disk")
    Queries_backends_bytes_sent: int = _counter("query bytes sent to backends")
    Queries_backends_bytes_recv: int = _counter("result bytes received from backends")
    Queries_frontends_bytes_sent: int = _counter("bytes sent to clients")
    Queries_frontends_bytes_recv: int = _counter("bytes received from clients")
    started: float = field(default_factory=time.monotonic, compare=False)

    def snapshot(self) -> dict[str, int]:
        """Every variable with its current value, ProxySQL_Uptime (whole seconds since ``started``) first."""
        values = {"ProxySQL_Uptime": int(time.monotonic() - self.started)}
        for name in _COUNTER_NAMES:
            values[name] = getattr(self, name)
        return values


#: Every stats_mysql_global variable a snapshot holds, with its kind and meaning.
COUNTERS: dict[str, CounterSpec] = {
    "ProxySQL_Uptime": CounterSpec("gauge", "seconds since the proxy started"),
    **{f.name: f.metadata["spec"] for f in fields(GlobalCounters) if "spec" in f.metadata},
}
_COUNTER_NAMES = tuple(name for name in COUNTERS if name != "ProxySQL_Uptime")
