"""The binary protocol's commands (COM_STMT_PREPARE, EXECUTE, SEND_LONG_DATA, CLOSE, RESET, FETCH) for one session.

The client's statements live here with the ids the proxy gave them; ``proxyapp.session.prepared`` prepares them on
whichever backend connection an execute runs on, ``proxyapp.session.sharded.router`` places those on sharded
tables.
"""

from __future__ import annotations

import struct

from proxyapp.mysql.backend import BackendConnection
from proxyapp.mysql.constants import Command, ErrorCode, Status
from proxyapp.mysql.packets import ErrPacket, ProtocolError, err_packet, frame
from proxyapp.mysql.wire import Relay, Response, read_response
from proxyapp.session.client import Client
from proxyapp.session.link import BackendLink
from proxyapp.session.prepared import (
    ClientStatement,
    bind_types,
    for_statement,
    prepare_anew,
    prepare_on,
    rendered,
    with_client_id,
)
from proxyapp.session.query import NO_RULES, QueryPipeline
from proxyapp.session.relay import Forward, Runner, relay_until_eof
from proxyapp.session.services import SessionServices
from proxyapp.session.state import Pin, SessionState
from proxyapp.sharding.params import ParamError
from proxyapp.sharding.plan import plan
from proxyapp.sql.analysis import analyze
from proxyapp.sql.modes import lexical_dialect


class PreparedStatements:
    """A session's prepared statements and the commands on them."""

    def __init__(
        self,
        services: SessionServices,
        client: Client,
        state: SessionState,
        link: BackendLink,
        queries: QueryPipeline,
    ) -> None:
        self.services = services
        self.client = client
        self.state = state
        self.link = link
        self.queries = queries
        self.statements: dict[int, ClientStatement] = {}
        self.next_id = 1
        #: The execute running now: its statement, and the Forward the link runs it with.
        self.executing: ClientStatement | None = None
        self.forward = Forward(b"", binary=True, first=self._prepare_first)

    def clear(self) -> None:
        """Forget every statement (COM_RESET_CONNECTION, COM_CHANGE_USER)."""
        self.statements.clear()

    async def prepare(self, payload: bytes) -> None:
        """COM_STMT_PREPARE: the rules apply (block, rewrite, route, mirror) as to a COM_QUERY of the same text."""
        rt = self.services.runtime
        self.services.counters.Questions += 1
        sql = payload[1:].decode("utf-8", "surrogateescape")
        statements, digest, commented = analyze(sql, rt.settings.max_digest_length)
        outcome = self.queries.apply_rules(sql, digest, commented)
        if outcome.error_msg is not None:
            self.client.send_error(ErrorCode.RULE_BLOCKED, outcome.error_msg, 1)
            return
        if outcome.query is not None:
            sql = outcome.query
            rewritten, digest, _ = analyze(sql, rt.settings.max_digest_length)
            statements = rewritten or statements
        hostgroup = self.queries.route(statements, outcome) if statements else self.client.default_hostgroup
        stmt = ClientStatement(self.next_id, sql, statements, hostgroup, 0, 0, digest)
        dialect = lexical_dialect(self.state.variables.get("sql_mode"))
        found = plan(sql, self.state.schema, rt.shard_map, dialect) if rt.shard_map is not None else None
        if found is not None:  # on sharded tables: each execute is planned (sharded_statements)
            stmt.sharded = True
            prepared = await self.queries.sharding.prepare(stmt, found.table)
        else:
            prepared = await self._prepare(stmt, hostgroup)
        if prepared:
            if outcome.mirror_hostgroup is not None or outcome.mirror_flagOUT is not None:
                stmt.mirror = outcome
            if outcome.trx_queue is not None or "trx_queue" in outcome.annotations:
                stmt.queued = outcome
            self.statements[stmt.client_id] = stmt
            self.next_id += 1

    async def _prepare(self, stmt: ClientStatement, hostgroup: int) -> bool:
        """Prepare ``stmt`` on a connection of ``hostgroup`` and relay the answer; False when it was an error."""

        async def run(conn: BackendConnection, relay: Relay) -> Response:
            result, raw = await prepare_anew(conn, stmt.sql)
            if isinstance(result, ErrPacket):
                relay.write(raw)
                return Response(status=conn.status, error=result)
            stmt.num_params = result.num_params
            stmt.num_columns = result.num_columns
            relay.write(with_client_id(raw, stmt.client_id))
            return Response(status=conn.status)

        response = await self.link.execute(hostgroup, run, [], None)
        return response is not None and response.error is None

    async def execute(self, payload: bytes) -> None:
        """COM_STMT_EXECUTE, on whichever connection the statement's route gives (prepared there if need be)."""
        self.services.counters.Questions += 1
        started = self.link.arrived
        stmt = self._statement(payload)
        if stmt is None:
            return
        if stmt.long_data_bytes > self.services.runtime.settings.max_allowed_packet:
            self._clear_long_data(stmt)
            limit = self.services.runtime.settings.max_allowed_packet
            self.client.send_error(
                ErrorCode.NET_PACKET_TOO_LARGE,
                f"Parameter of prepared statement which is set through mysql_send_long_data() is longer than "
                f"'max_allowed_packet' bytes ({limit})",
                1,
            )
            return
        try:  # a malformed execute is the client's error: not a lost backend (and its transaction)
            bound = bind_types(payload, stmt)
        except ProtocolError as exc:
            self.client.send_error(1835, f"Malformed communication packet: {exc}", 1)  # ER_MALFORMED_PACKET
            return
        queries = self.queries
        applied = self.services.heat.applied  # queues the proxy applied itself, by digest
        queued = stmt.queued is not None or (bool(applied) and stmt.digest.hash in applied)
        if queued and not await self._wait_in_line(stmt, bound):
            self._clear_long_data(stmt)
            return
        hostgroup = queries.route(stmt.statements, NO_RULES) if stmt.statements else stmt.hostgroup
        if self.link.conn is None and self.state.autocommit:
            hostgroup = stmt.hostgroup
        # Where it runs, as a sharded statement's shard may say otherwise (``sharded.router.OnShard``): the text
        # prepared there, the branch of the session's transaction over shards, the default schema.
        prepared_text = stmt.sql
        branch: BackendConnection | None = None
        schema: str | None = None
        if stmt.sharded and self.services.runtime.shard_map is not None:
            sharding = queries.sharding
            sharding.spanning.check()
            placed = await sharding.execute(stmt, bound, hostgroup, started)
            if placed is None:  # answered: over several shards, or refused
                self._clear_long_data(stmt)
                return
            hostgroup, branch, schema = placed.hostgroup, placed.branch, placed.schema
            if placed.sql is not None:
                prepared_text = placed.sql
        if len(payload) > 5 and payload[5] and stmt.num_columns:
            stmt.cursor = True

        forward = self.forward
        forward.payload = bound
        forward.statement = prepared_text
        self.executing = stmt
        run: Runner = forward
        if stmt.long_data:
            run = self._prepare_first
        try:
            response = await self.link.execute(hostgroup, run, stmt.statements, None, None, branch, schema)
            spanning = queries.sharding.spanning
            if spanning.current is not None:
                await spanning.after(response.error if response is not None else None, branch)
            accounting = queries.accounting
            if stmt.mirror is not None or accounting.followed:
                accounting.tell(payload, stmt.statements, stmt.mirror, response, stmt)
        finally:
            self._clear_long_data(stmt)
        if response is not None:
            elapsed_us = queries.accounting.record(
                hostgroup, stmt.digest, started, response.rows, response.affected_rows, response.ended
            )
            if not queued and stmt.statements and not stmt.statements[0].is_read:
                self._look_for_heat(stmt, bound, elapsed_us, response)

    async def _prepare_first(self, conn: BackendConnection, relay: Relay) -> Response:
        """The execute in ``forward`` on a connection that does not hold its statement yet, or with long data to send
        first: the statement prepared there (or found), its long data sent, then the execute."""
        forward = self.forward
        stmt, text = self.executing, forward.statement
        assert stmt is not None and text is not None, "an execute is running"
        prepared = await prepare_on(conn, text)
        if isinstance(prepared, ErrPacket):
            relay.write(frame(err_packet(prepared.code, prepared.message, prepared.sqlstate), 1))
            return Response(status=conn.status, error=prepared)
        for chunk in stmt.long_data:
            conn.wire.send(for_statement(chunk, prepared.stmt_id), 0)
        conn.wire.send(for_statement(forward.payload, prepared.stmt_id), 0)
        return await read_response(conn.wire, relay, binary=True)

    def _look_for_heat(self, stmt: ClientStatement, execute: bytes, elapsed_us: int, response: Response) -> None:
        """An execute that was not queued, as ``QueryAccounting.look_for_heat`` sees a statement: with its
        parameters' values (a mark is read from the rows its WHERE clause names)."""
        mark = self.queries.accounting.heat_mark(elapsed_us, response)
        if mark < 0:
            return
        try:
            sql = rendered(stmt, execute, self.state)
        except ParamError:  # its long data is gone with the execute: no key to read
            return
        self.services.heat.observe(sql, self.state.schema or "", stmt.digest.hash, stmt.digest.text, mark)

    async def _wait_in_line(self, stmt: ClientStatement, execute: bytes) -> bool:
        """Wait for the hot-row keys the execute ``execute`` of ``stmt`` asks for (``session.trxqueue``: by its hint,
        its rule, or a queue the proxy applied to its digest), a key column read with the parameters' values; False
        after sending the error that ends it."""
        outcome = stmt.queued or NO_RULES
        sql = stmt.sql
        hinted = "trx_queue" in outcome.annotations
        by_column = outcome.trx_queue_column is not None or (outcome.trx_queue is None and not hinted)
        if by_column and stmt.num_params:
            try:
                sql = rendered(stmt, execute, self.state)
            except ParamError as exc:
                self.client.send_error(
                    ErrorCode.WRONG_ARGUMENTS, f"Incorrect arguments to mysqld_stmt_execute: {exc}", 1
                )
                return False
        return await self.queries.queue.wait_for(sql, outcome, stmt.digest.hash) is not None

    @staticmethod
    def _clear_long_data(stmt: ClientStatement) -> None:
        stmt.long_data.clear()
        stmt.long_data_bytes = 0

    def _statement(self, payload: bytes) -> ClientStatement | None:
        if len(payload) < 5:
            raise ProtocolError("truncated statement command")
        client_id = payload[1] | payload[2] << 8 | payload[3] << 16 | payload[4] << 24
        stmt = self.statements.get(client_id)
        if stmt is None and payload[0] not in (Command.STMT_CLOSE, Command.STMT_SEND_LONG_DATA):
            self.client.send_error(
                ErrorCode.UNKNOWN_STMT_HANDLER,
                f"Unknown prepared statement handler ({client_id}) given to mysqld_stmt_execute",
                1,
            )
        return stmt

    async def send_long_data(self, payload: bytes) -> None:
        """COM_STMT_SEND_LONG_DATA: kept until the next execute (which sends it to its connection), up to
        ``mysql-max_allowed_packet`` in all, as the server bounds it; past that it is dropped and the execute
        refused (the command itself has no answer)."""
        stmt = self._statement(payload)
        if stmt is None:
            return
        stmt.long_data_bytes += len(payload) - 7  # the parameter's bytes, after the command, statement and parameter
        if stmt.long_data_bytes > self.services.runtime.settings.max_allowed_packet:
            stmt.long_data.clear()
        else:
            stmt.long_data.append(payload)

    async def close(self, payload: bytes) -> None:
        """COM_STMT_CLOSE (no answer)."""
        stmt = self._statement(payload)
        if stmt is not None:
            del self.statements[stmt.client_id]

    async def reset(self, payload: bytes) -> None:
        """COM_STMT_RESET: long data dropped, an open cursor closed on its connection."""
        stmt = self._statement(payload)
        if stmt is None:
            return
        self._clear_long_data(stmt)
        conn = self.link.conn
        if stmt.cursor and conn is not None:
            prepared = conn.prepared.get(stmt.sql)
            if prepared is not None:
                err = await conn.simple_command(payload[:1] + struct.pack("<I", prepared.stmt_id))
                if err is not None:
                    self.client.send_error(err.code, err.message)
                    return
            stmt.cursor = False
            self.state.pins.discard(Pin.CURSOR)
        self.client.send_ok(self.queries.status())

    async def fetch(self, payload: bytes) -> None:
        """COM_STMT_FETCH from the statement's open cursor, on the connection that keeps it."""
        stmt = self._statement(payload)
        if stmt is None:
            return
        conn = self.link.conn
        prepared = conn.prepared.get(stmt.sql) if conn is not None else None
        if conn is None or prepared is None:
            self.client.send_error(ErrorCode.UNKNOWN_STMT_HANDLER, "The statement has no open cursor", 1)
            return
        conn.wire.send(payload[:1] + struct.pack("<I", prepared.stmt_id) + payload[5:], 0)
        status, error = await relay_until_eof(conn.wire, self.client.wire)
        await conn.settle(Response(status, error))
        if error is None and status & Status.LAST_ROW_SENT:
            stmt.cursor = False
