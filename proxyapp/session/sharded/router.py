"""Where a session's statements on sharded tables run, carried out: a query or an execute is planned and placed by
the pure functions of ``proxyapp.sharding`` (``plan``, ``placement``), then run here on one shard (renamed for its
physical schema), over several (``scatter``), or refused; inside a transaction over shards (``transactions``), and
with an INSERT's rows numbered from its table's sequence first (``numbering``).

Prepared statements on sharded and global tables (issue 14) are analyzed like text: COM_STMT_PREPARE runs on a
connection to the table group's shard 0, which tells the client the parameters and columns (nothing is planned yet,
as the plan depends on the values); each COM_STMT_EXECUTE is rendered as the text statement its values make
(``proxyapp.sharding.params``) and placed like a COM_QUERY of it. One shard: the prepared statement runs there in the
binary protocol, end to end; several: the text runs through the scatter, a merged result goes back as a binary
result set, a write's OK as it is. A refusal is a 1235 error, as for text.
"""

from __future__ import annotations

from proxyapp.mysql.backend import BackendConnection
from proxyapp.mysql.constants import ErrorCode
from proxyapp.mysql.packets import ErrPacket
from proxyapp.mysql.wire import CONNECTION_LOST
from proxyapp.session.accounting import QueryAccounting
from proxyapp.session.client import Client, server_status
from proxyapp.session.link import BackendLink, release
from proxyapp.session.prepared import ClientStatement, prepare_anew, rendered, with_client_id
from proxyapp.session.services import SessionServices
from proxyapp.session.sharded.numbering import number_rows
from proxyapp.session.sharded.scatter import Scatter
from proxyapp.session.sharded.transactions import SpanningTransactions
from proxyapp.session.state import SessionState
from proxyapp.sharding.params import ParamError
from proxyapp.sharding.physical import default_schema, rewrite, shard_on
from proxyapp.sharding.placement import Placement, placement
from proxyapp.sharding.plan import Plan, plan
from proxyapp.sharding.shardmap import ShardedTable
from proxyapp.sql.digest import Digest
from proxyapp.sql.modes import lexical_dialect
from proxyapp.sql.scan import Statement


class OnShard:
    """Where a statement placed on one shard (or on no sharded table) runs: ``hostgroup``; the text it runs as there
    when the shard renames a schema (``sql``, ``proxyapp.sharding.physical``; None: as it is); the branch of the
    session's transaction over shards it runs on (None: as usual); the default schema it runs in (None: the
    session's); and the client's statement with sequence values written in, when it needed them (``numbered``: what
    runs, what the mirror hears and the events log holds)."""

    __slots__ = ("branch", "hostgroup", "numbered", "schema", "sql")

    def __init__(
        self,
        hostgroup: int,
        sql: str | None = None,
        branch: BackendConnection | None = None,
        schema: str | None = None,
        numbered: str | None = None,
    ) -> None:
        self.hostgroup = hostgroup
        self.sql = sql
        self.branch = branch
        self.schema = schema
        self.numbered = numbered


class ShardRouter:
    """One session's statements on sharded tables."""

    def __init__(
        self,
        services: SessionServices,
        client: Client,
        state: SessionState,
        link: BackendLink,
        accounting: QueryAccounting,
    ) -> None:
        self.services = services
        self.client = client
        self.state = state
        self.link = link
        self.accounting = accounting
        self.spanning = SpanningTransactions(services, client, state, link)  # a transaction over shards
        self.scattering: Scatter | None = None  # runs statements over several shards, made on first use

    async def query(self, sql: str, first: Statement, hostgroup: int, digest: Digest, started: float) -> OnShard | None:
        """Where the COM_QUERY ``sql`` (its first statement ``first``, routed to ``hostgroup`` as if no table were
        sharded) runs; None when it was answered here (over several shards, refused, or an error)."""
        numbered: str | None = None
        shard_map = self.services.runtime.shard_map
        assert shard_map is not None
        if shard_map.sequenced and first.keyword in ("INSERT", "REPLACE"):
            text = await number_rows(self.services, self.client, self.state, sql)
            if text is None:
                self.accounting.record(-1, digest, started, 0, 0)
                return None
            if text is not sql:
                sql = numbered = text
        placed = self.place(sql)
        if placed is None:
            return OnShard(hostgroup, numbered=numbered)
        return await self._run(placed, sql, sql, digest, started, False, numbered)

    async def execute(self, stmt: ClientStatement, execute: bytes, hostgroup: int, started: float) -> OnShard | None:
        """Where the execute ``execute`` (its parameter types bound: ``prepared.bind_types``) of ``stmt`` runs: on
        its one shard (``hostgroup`` when its values name no sharded table); None when it was answered here (a
        scatter, a refusal, parameters that cannot be read)."""
        try:
            sql = rendered(stmt, execute, self.state)
        except ParamError as exc:
            self.client.send_error(ErrorCode.WRONG_ARGUMENTS, f"Incorrect arguments to mysqld_stmt_execute: {exc}", 1)
            return None
        placed = self.place(sql)
        if placed is None:
            return OnShard(hostgroup)
        return await self._run(placed, sql, stmt.sql, stmt.digest, started, True, None)

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

    def place(self, sql: str) -> tuple[Plan, Placement] | None:
        """Where ``sql`` runs when it names a sharded table; None when it names none."""
        shard_map = self.services.runtime.shard_map
        assert shard_map is not None
        mode = self.state.variables.get("sql_mode")
        if mode is None:  # the usual case: the server's global mode, taken to be the default lexical rules
            found = plan(sql, self.state.schema, shard_map)
        else:
            found = plan(sql, self.state.schema, shard_map, lexical_dialect(mode))
        if found is None:
            return None
        link = self.link
        autocommit = self.state.autocommit and link.opening is None
        writes = self.services.runtime.settings.cross_shard_writes
        spanning = not found.refused and not found.ddl and self.spanning.may_span(found.table)
        return found, placement(found, link.situation().kept, autocommit, writes, spanning)

    async def _run(
        self,
        placed: tuple[Plan, Placement],
        sql: str,
        text: str,
        digest: Digest,
        started: float,
        binary: bool,
        numbered: str | None,
    ) -> OnShard | None:
        """Carry out a placement of ``sql`` (``text``: what runs on one shard, a prepared statement's own text for an
        execute; ``binary``: a result set goes back in the binary protocol): the one shard it runs on, or None when
        it was answered here."""
        found, where = placed
        accounting = self.accounting
        if where.refused:
            self.client.send_error(ErrorCode.NOT_SUPPORTED, where.refused, 1)
            accounting.record(-1, digest, started, 0, 0)
            accounting.record_sharded(digest, 0)
            return None
        branch = None
        if where.spanning:
            entered = await self.spanning.enter(found.table, where.hostgroup, where.shards)
            if entered is False:
                accounting.record(-1, digest, started, 0, 0)
                return None
            if isinstance(entered, BackendConnection):
                branch = entered
        if where.shards:
            await self._scatter(sql, found, where, digest, started, binary)
            return None
        accounting.record_sharded(digest, 1)
        shard = shard_on(found.table, where.hostgroup)
        renamed = rewrite(text, shard) if shard.renamed else None
        return OnShard(where.hostgroup, renamed, branch, default_schema(shard, self.state.schema), numbered)

    async def _scatter(
        self, sql: str, found: Plan, where: Placement, digest: Digest, started: float, binary: bool
    ) -> None:
        """Run a statement over several shards (``sharded.scatter``) and count it."""
        scattering = self.scattering
        if scattering is None:
            scattering = self.scattering = Scatter(self.services, self.client, self.link)
        scattering.held = self.spanning.current
        scattering.doomed = []
        status = server_status(self.state, self.link.in_transaction)
        name = f"{found.table.schema}.{found.table.table}"
        affected = 0
        if found.gather is not None:
            limit = self.state.variables.get("sql_select_limit")
            done = await scattering.read(where.shards, found.gather, status, limit, binary)
        elif found.ddl:
            done = await scattering.everywhere(where.shards, sql, status, f"DDL on {name}")
        else:
            split = dict(found.statements)
            statements = [(shard, split.get(shard.number, sql)) for shard in where.shards]
            first = found.table.shards[found.first_row_shard]
            done = await scattering.write(statements, first, status, f"a write to {name}", copies=found.table.is_global)
            affected = done.rows if done is not None else 0
        if scattering.held is not None:
            await self.spanning.after_scatter(scattering.doomed)
        if done is not None:
            rows = 0 if affected else done.rows
            self.accounting.record(where.shards[0].hostgroup_id, digest, started, rows, affected)
            self.accounting.record_sharded(digest, len(where.shards), rows, done.merge_us)
