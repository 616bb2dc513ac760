"""Each sharded table's rows on each of its shards, as InnoDB estimates them (``information_schema.TABLES.TABLE_ROWS``),
for the control plane's Shards page. Reported in ``/stats`` as ``sharding_tables``.

One process of a node asks (worker 0): a pass as soon as it can, then one every ``INTERVAL`` seconds of the proxy's
clock, from its housekeeping (``TableRows.sweep``), never two at once. A pass sends one query per shard hostgroup to
that hostgroup's writer, as the monitor user (``proxyapp.sharding.coordinator.monitor_connect``), naming each table in
the schema the shard keeps it in (its physical schema when set). information_schema shows a user only the tables it
has some privilege on: the monitor user needs one (SELECT will do) on the sharded tables, else their rows are missing.
A pass never touches the sessions' pools; what fails is logged once (until it changes) and its rows are reported
missing (``rows_estimate`` None).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from proxyapp.mysql.backend import BackendError
from proxyapp.mysql.packets import ErrPacket
from proxyapp.mysql.wire import CONNECTION_LOST
from proxyapp.sharding.shardmap import ShardMap
from proxyapp.sharding.xa import Connect

log = logging.getLogger("proxyapp.sharding")

#: Seconds of the proxy's clock between two passes.
INTERVAL = 60.0
#: Seconds a shard server may take to answer.
QUERY_TIMEOUT = 10.0


@dataclass(frozen=True)
class Target:
    """A sharded table on one shard: its logical name, the shard, its hostgroup and the schema it is in there."""

    schemaname: str
    tablename: str
    shard: int
    hostgroup: int
    physical: str


def targets(shard_map: ShardMap | None) -> dict[int, list[Target]]:
    """Each shard hostgroup's tables to ask about, by hostgroup (none without a shard map)."""
    found: dict[int, list[Target]] = {}
    for table in shard_map.tables.values() if shard_map is not None else ():
        for shard in table.shards:
            where = shard.physical_schema or table.schema
            target = Target(table.schema, table.table, shard.number, shard.hostgroup_id, where)
            found.setdefault(shard.hostgroup_id, []).append(target)
    return found


def rows_sql(tables: list[Target]) -> str:
    """The one query that asks a shard server for the estimated rows of ``tables``."""
    pairs = ", ".join(f"({_string(t.physical)}, {_string(t.tablename)})" for t in tables)
    return (
        "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES "
        f"WHERE (TABLE_SCHEMA, TABLE_NAME) IN ({pairs})"
    )


def _string(name: str) -> str:
    """``name`` as an SQL string (in hex when it holds a backslash, which sql_mode decides how to read)."""
    if "\\" in name:
        return f"_utf8mb4 X'{name.encode().hex()}'"
    return "'" + name.replace("'", "''") + "'"


class TableRows:
    """The latest estimates, and the passes that refresh them. ``shard_map`` gives the config's in force,
    ``writer`` a hostgroup's writer (``host:port``, None when it has none usable), ``connect`` how to reach it."""

    def __init__(
        self,
        shard_map: Callable[[], ShardMap | None],
        writer: Callable[[int], str | None],
        connect: Connect,
        interval: float = INTERVAL,
    ) -> None:
        self.shard_map = shard_map
        self.writer = writer
        self.connect = connect
        self.interval = interval
        #: The latest answer for each (schema, table, shard), lowercase names: (rows or None, unix time).
        self.latest: dict[tuple[str, str, int], tuple[int | None, float]] = {}
        self._failing: dict[int, str] = {}  # each hostgroup's error logged last
        self._task: asyncio.Task[None] | None = None
        self._next = float("-inf")  # on the proxy's clock

    def reconfigure(self) -> None:
        """A new config is in force: the next housekeeping asks at once (its shard map may name other tables, and a
        node that got its first sharded config should not wait a whole interval to report them)."""
        self._next = float("-inf")

    def sweep(self, now: float) -> None:
        """Start a pass if one is due at ``now`` (the proxy's clock); called from the housekeeping."""
        if (self._task is not None and not self._task.done()) or now < self._next:
            return
        self._next = now + self.interval
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def run(self) -> None:
        """One pass now, over every shard hostgroup at once."""
        wanted = targets(self.shard_map())
        await asyncio.gather(*(self._ask(hostgroup, tables) for hostgroup, tables in wanted.items()))

    async def _ask(self, hostgroup: int, tables: list[Target]) -> None:
        """Ask ``hostgroup``'s writer about ``tables`` and keep the answer (missing rows when it fails)."""
        found: dict[tuple[str, str], int | None] = {}
        error = ""
        server = self.writer(hostgroup)
        if server is None:
            error = "no ONLINE server"
        else:
            try:
                answer = await self._query(server, rows_sql(tables))
            except (BackendError, *CONNECTION_LOST) as exc:
                error = f"{server}: {exc or 'timed out'}"
            else:
                if isinstance(answer, ErrPacket):
                    error = f"{server}: refused: {answer.message} ({answer.code})"
                else:
                    for schema, name, rows in answer:
                        named = ((schema or b"").decode().lower(), (name or b"").decode().lower())
                        found[named] = int(rows) if rows is not None else None
        self._note(hostgroup, error)
        at = time.time()
        for t in tables:
            key = (t.schemaname.lower(), t.tablename.lower(), t.shard)
            self.latest[key] = (found.get((t.physical.lower(), t.tablename.lower())), at)

    async def _query(self, server: str, sql: str) -> list[list[bytes | None]] | ErrPacket:
        conn = await self.connect(server)
        try:
            answer = await asyncio.wait_for(conn.fetch_named(sql), QUERY_TIMEOUT)
        finally:
            conn.close()
        return answer if isinstance(answer, ErrPacket) else answer[1]

    def _note(self, hostgroup: int, error: str) -> None:
        """Log a hostgroup's error once, until it changes or the hostgroup answers again."""
        if error == self._failing.get(hostgroup, ""):
            return
        if error:
            log.error("sharding table rows: hostgroup %d: %s; its rows are reported missing", hostgroup, error)
            self._failing[hostgroup] = error
        else:
            log.info("sharding table rows: hostgroup %d answers again", hostgroup)
            del self._failing[hostgroup]

    def rows(self) -> list[dict[str, object]]:
        """The ``sharding_tables`` rows of the config in force: each sharded table on each shard, its estimated rows
        (None: not known yet, or the last pass could not tell) and when they were asked (unix time, None: not yet)."""
        every = [t for tables in targets(self.shard_map()).values() for t in tables]
        out: list[dict[str, object]] = []
        for t in sorted(every, key=lambda t: (t.schemaname, t.tablename, t.shard)):
            rows, at = self.latest.get((t.schemaname.lower(), t.tablename.lower(), t.shard), (None, None))
            out.append(
                {
                    "schemaname": t.schemaname,
                    "tablename": t.tablename,
                    "shard": t.shard,
                    "hostgroup": t.hostgroup,
                    "rows_estimate": rows,
                    "checked_at": at,
                }
            )
        return out

    async def stop(self) -> None:
        """Cancel a pass under way."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])
