"""Prepared statements on sharded and global tables (issue 14): analyzed like text statements.

COM_STMT_PREPARE runs on a connection to the table group's shard 0, which tells the client the parameters and
columns; nothing is planned yet, as the plan depends on the values. Each COM_STMT_EXECUTE is rendered as the text
statement its values make (``proxyapp.sharding.params``) and planned and placed like a COM_QUERY of it
(``QueryPipeline.place``). One shard: the prepared statement runs there in the binary protocol, end to end (the
caller's execute path, on that shard's hostgroup; on a shard with a physical schema, the text prepared there is
renamed, ``proxyapp.sharding.physical``). Several shards: the text runs through the scatter
(``session.scatter``), a merged result goes back as a binary result set, a write's OK as it is. A refusal is a 1235
error, as for text.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxyapp.mysql.backend import BackendConnection
from proxyapp.mysql.constants import ErrorCode
from proxyapp.mysql.packets import ErrPacket
from proxyapp.mysql.wire import CONNECTION_LOST
from proxyapp.session.client import Client
from proxyapp.session.link import BackendLink, release
from proxyapp.session.prepared import ClientStatement, prepare_anew, rendered, with_client_id
from proxyapp.session.query import QueryPipeline
from proxyapp.session.state import SessionState
from proxyapp.sharding.params import ParamError
from proxyapp.sharding.physical import default_schema, rewrite, shard_on
from proxyapp.sharding.shardmap import ShardedTable


class ShardedStatements:
    """Prepare and place a session's statements on sharded tables."""

    def __init__(self, client: Client, state: SessionState, link: BackendLink, queries: QueryPipeline) -> None:
        self.client = client
        self.state = state
        self.link = link
        self.queries = queries

    async def prepare(self, stmt: ClientStatement, table: ShardedTable) -> bool:
        """Prepare ``stmt`` on a connection to ``table``'s shard 0 and send the client the answer with its id; the
        connection goes back to the pool at once (the session's transaction, or one held back, is left alone).
        False when the client got an error."""
        shard = table.shards[0]
        conn = await self.link.borrow(shard.hostgroup_id, default_schema(shard, self.state.schema))
        if conn is None:
            return False
        try:
            result, raw = await prepare_anew(conn, rewrite(stmt.sql, shard))
        except CONNECTION_LOST as exc:
            release(conn, reusable=False)
            self.client.send_error(
                ErrorCode.BACKEND_LOST,
                f"Lost connection to shard {shard.number} (hostgroup {shard.hostgroup_id}) while preparing: {exc}",
            )
            return False
        release(conn)
        if isinstance(result, ErrPacket):
            self.client.wire.write(raw)
            return False
        stmt.num_params = result.num_params
        stmt.num_columns = result.num_columns
        self.client.wire.write(with_client_id(raw, stmt.client_id))
        return True

    async def place(self, stmt: ClientStatement, execute: bytes, hostgroup: int, started: float) -> OnShard | None:
        """Where the execute ``execute`` (its parameter types bound: ``prepared.bind_types``) of ``stmt`` runs:
        on its one shard (``hostgroup`` when its values name no sharded table); None when it was answered here (a
        scatter, a refusal, parameters that cannot be read)."""
        queries = self.queries
        try:
            sql = rendered(stmt, execute, self.state)
        except ParamError as exc:
            self.client.send_error(ErrorCode.WRONG_ARGUMENTS, f"Incorrect arguments to mysqld_stmt_execute: {exc}", 1)
            return None
        placed = queries.place(sql)
        if placed is None:
            return OnShard(hostgroup, stmt.sql)
        found, where = placed
        if where.refused:
            self.client.send_error(ErrorCode.NOT_SUPPORTED, where.refused, 1)
            queries.record(-1, stmt.digest, started, 0, 0)
            queries.record_sharded(stmt.digest, 0)
            return None
        branch = None
        if where.spanning:
            entered = await queries.spanning.enter(found.table, where.hostgroup, where.shards)
            if entered is False:
                queries.record(-1, stmt.digest, started, 0, 0)
                return None
            if isinstance(entered, BackendConnection):
                branch = entered
        if where.shards:
            await queries.scatter(sql, found, where, stmt.digest, started, binary=True)
            return None
        queries.record_sharded(stmt.digest, 1)
        shard = shard_on(found.table, where.hostgroup)
        return OnShard(where.hostgroup, rewrite(stmt.sql, shard), branch, default_schema(shard, self.state.schema))


@dataclass(frozen=True)
class OnShard:
    """Where an execute runs: ``hostgroup``, the statement text prepared there (``sql``: renamed on a shard with a
    physical schema, ``proxyapp.sharding.physical``), the branch of the session's transaction over shards it runs
    on (None: as usual), and the default schema it runs in (None: the session's)."""

    hostgroup: int
    sql: str
    branch: BackendConnection | None = None
    schema: str | None = None
