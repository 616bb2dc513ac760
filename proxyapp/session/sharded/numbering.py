"""Numbering an INSERT's rows from its table's sequence, for a session (``proxyapp.sharding.sequence``): values from
the worker's block, and a new block reserved on the group's shard 0 when it runs out.

A reservation runs on connections of the session's own backend user, borrowed apart from the session's and brought
to a plain state (autocommit on, no session variables), so that it commits at once whatever the session is doing.
That user needs, on the servers of shard 0's hostgroup, SELECT, INSERT and UPDATE on ``proxyfleet.sequences`` and
(until the table exists: or make it beforehand) CREATE on ``proxyfleet``; and SELECT on the sequenced table on every
shard (a table's first reservation starts above the highest value its shards hold).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from proxyapp.backends.pool import PoolError
from proxyapp.mysql.backend import BackendConnection, Credentials
from proxyapp.mysql.constants import ErrorCode
from proxyapp.mysql.packets import ErrPacket
from proxyapp.mysql.wire import CONNECTION_LOST, Response
from proxyapp.session.client import Client
from proxyapp.session.link import release
from proxyapp.session.services import SessionServices
from proxyapp.session.state import SessionState, bring
from proxyapp.sharding.physical import default_schema, rewrite
from proxyapp.sharding.sequence import CREATE_STATEMENTS, advance_sql, highest_sql, numbering, start_sql
from proxyapp.sharding.shardmap import Shard, ShardedTable
from proxyapp.sql.modes import lexical_dialect, sql_modes

#: The server's errors for a missing table and a missing schema: the sequences table is made.
_NO_TABLE = frozenset({1146, 1049})


class SequenceError(Exception):
    """A block could not be reserved: the server's error code (or the proxy's) and what happened."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


async def number_rows(services: SessionServices, client: Client, state: SessionState, sql: str) -> str | None:
    """``sql`` with the sequence values its rows need written in (``sql`` itself when it needs none); None when
    the error was sent to the client."""
    shard_map = services.runtime.shard_map
    assert shard_map is not None
    mode = state.variables.get("sql_mode")
    zero_is_value = "NO_AUTO_VALUE_ON_ZERO" in sql_modes(mode)
    found = numbering(sql, state.schema, shard_map, zero_is_value, lexical_dialect(mode))
    if found is None:
        return sql
    if found.refused:
        client.send_error(ErrorCode.NOT_SUPPORTED, found.refused, 1)
        return None
    table = found.table
    block = services.runtime.config.variables.integer("mysql-sharding_sequence_block")
    reserver = _Reserver(services, client.credentials, SessionState(state.schema, state.names), table)
    try:
        values = await services.sequences.of(table).take(found.count, block, reserver.reserve)
    except SequenceError as exc:
        client.send_error(
            exc.code, f"ProxyFleet sharding: no values from the sequence of {table.schema}.{table.table}: {exc}", 1
        )
        return None
    return found.fill(values)


class _Reserver:
    """Reserves blocks of one table's sequence as one session's backend user."""

    def __init__(
        self, services: SessionServices, credentials: Credentials, plain: SessionState, table: ShardedTable
    ) -> None:
        self.services = services
        self.credentials = credentials
        self.plain = plain  # the session's schema and character set, nothing else
        self.table = table

    async def reserve(self, size: int) -> int:
        """Reserve ``size`` values on shard 0: the first of them."""
        table = self.table
        async with self._connection(table.shards[0]) as conn:
            advanced = await conn.query(advance_sql(table, size))
            if advanced.error is not None and advanced.error.code in _NO_TABLE:
                for statement in CREATE_STATEMENTS:
                    _check(await conn.query(statement), table.shards[0])
            elif _check(advanced, table.shards[0]).affected_rows:
                return advanced.last_insert_id - size
            highest = await asyncio.gather(*(self._highest(shard) for shard in table.shards))
            started = await conn.query(start_sql(table, max(highest) + 1, size))
            return _check(started, table.shards[0]).last_insert_id - size

    async def _highest(self, shard: Shard) -> int:
        """The highest value of the sequence column on ``shard`` (0 when it has none above 0)."""
        async with self._connection(shard) as conn:
            found = await conn.fetch_row(rewrite(highest_sql(self.table), shard))
        if isinstance(found, ErrPacket):
            raise SequenceError(found.code, f"{_where(shard)}: {found.message}")
        value = found[1][0]
        try:
            return max(int(value or 0), 0)
        except ValueError:
            shown = (value or b"").decode("utf-8", "replace")
            raise SequenceError(
                ErrorCode.NOT_SUPPORTED,
                f"{_where(shard)}: its column {self.table.sequence} holds {shown!r}: a sequence numbers rows with "
                "integers",
            ) from None

    @asynccontextmanager
    async def _connection(self, shard: Shard) -> AsyncIterator[BackendConnection]:
        """A connection to ``shard``'s hostgroup in the plain state (in the shard's physical schema where it renames
        the session's) while in use, given back after (closed when lost or left mid-statement)."""
        hostgroup = self.services.pools.hostgroup(shard.hostgroup_id)
        where = _where(shard)
        physical = default_schema(shard, self.plain.schema)
        schema = physical or self.plain.schema
        conn = hostgroup.take_idle(self.credentials, schema)
        try:
            if not isinstance(conn, BackendConnection):
                conn = await hostgroup.acquire(self.credentials, schema, conn)
        except PoolError as exc:
            raise SequenceError(exc.code, f"{where}: {exc}") from None
        reusable = False
        try:
            refused = await bring(conn, self.plain, physical)
            if refused is not None:
                raise SequenceError(refused.code, f"{where}: {refused.message}")
            yield conn
            reusable = True
        except SequenceError:
            reusable = True
            raise
        except CONNECTION_LOST as exc:
            raise SequenceError(ErrorCode.BACKEND_LOST, f"{where}: lost connection: {exc}") from None
        finally:
            release(conn, reusable=reusable)


def _check(response: Response, shard: Shard) -> Response:
    """``response`` when it is not an error; SequenceError naming the shard otherwise."""
    if response.error is not None:
        raise SequenceError(response.error.code, f"{_where(shard)}: {response.error.message}")
    return response


def _where(shard: Shard) -> str:
    return f"shard {shard.number} (hostgroup {shard.hostgroup_id})"
