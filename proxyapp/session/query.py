"""The COM_QUERY pipeline: analyze (scan + digest), apply the query rules, answer from the proxy when it can (rule
errors and OK messages, KILL, LAST_INSERT_ID, the cache), route (``route.route``, a pure function), run through the
link, then tell the listener, record the digest statistics and log the event.
"""

from __future__ import annotations

import asyncio
import time
from typing import Final

from proxyapp.clock import MONOTONIC
from proxyapp.mysql.backend import BackendConnection
from proxyapp.mysql.constants import ErrorCode, FieldType
from proxyapp.mysql.packets import load_byte_work
from proxyapp.mysql.resultset import result_set
from proxyapp.mysql.wire import Response, Wire
from proxyapp.report.eventslog import query_event
from proxyapp.report.stats import DigestMemo
from proxyapp.rules.engine import QueryContext, RuleOutcome
from proxyapp.session.client import Client, server_status
from proxyapp.session.events import QueryDone
from proxyapp.session.kill import KillRefused, carry_out, parse_kill
from proxyapp.session.link import BackendLink, CacheKey
from proxyapp.session.numbering import number_rows
from proxyapp.session.prepared import ClientStatement
from proxyapp.session.relay import Forward, InfileAbandoned
from proxyapp.session.route import route
from proxyapp.session.scatter import Scatter
from proxyapp.session.services import SessionServices
from proxyapp.session.shardtxn import SpanningTransactions
from proxyapp.session.state import Pin, SessionState
from proxyapp.session.trxqueue import NO_KEYS, TransactionQueue
from proxyapp.sharding.physical import default_schema, rewrite, shard_on
from proxyapp.sharding.placement import Placement, placement
from proxyapp.sharding.plan import Plan, plan
from proxyapp.sql.analysis import analyze
from proxyapp.sql.digest import Digest
from proxyapp.sql.modes import lexical_dialect
from proxyapp.sql.scan import Kind, Statement, scan

_WARNING_QUERIES = ("SHOW WARNINGS", "SHOW ERRORS", "SHOW COUNT")
#: A command's text, decoded from its payload with no slice made first (``_bytes.text``, or its Python twin).
_TEXT: Final = load_byte_work()[5]
#: The verdict when no rule can apply (shared: never modified).
NO_RULES: Final = RuleOutcome()


class QueryPipeline:
    """COM_QUERY for one session, and the steps COM_STMT_PREPARE and COM_STMT_EXECUTE share with it."""

    def __init__(
        self, services: SessionServices, client: Client, state: SessionState, link: BackendLink, session_id: int
    ) -> None:
        self.services = services
        self.client = client
        self.state = state
        self.link = link
        self.session_id = session_id
        self.flag_in = 0  # the rules' flagIN for the next statement (a rule's next_query_flagIN sets it)
        self.digest_memo = DigestMemo()  # its entries in the digest statistics (``DigestStats.record``)
        #: How a statement runs on its backend: sent as it is, its response relayed, a LOCAL INFILE request answered by
        #: ``_relay_infile`` (one for the session, its payload set per statement).
        self.forward = Forward(b"", relay_infile=self._relay_infile)
        self.followed = False  # the listener hears every command of this session (it said so)
        self.scattering: Scatter | None = None  # runs statements over several shards, made on first use
        self.spanning = SpanningTransactions(services, client, state, link)  # a transaction over shards
        self.queue = TransactionQueue(services, client, link, session_id)  # its place in the hot-row queues

    async def com_query(self, payload: bytes) -> None:
        """Serve a COM_QUERY."""
        services = self.services
        client = self.client
        link = self.link
        rt = services.runtime
        services.counters.Questions += 1
        started = link.arrived
        sql = _TEXT(payload, 1)
        statements, digest, commented = analyze(sql, rt.settings.max_digest_length)
        if not statements:
            client.send_error(1065, "Query was empty", 1)
            return
        schema = self.state.schema or ""
        outcome = self.apply_rules(sql, digest, commented)
        if outcome.next_query_flagIN is not None:  # ProxySQL: it stays the session's flagIN until a rule changes it
            self.flag_in = outcome.next_query_flagIN
        if outcome.error_msg is not None:
            client.send_error(ErrorCode.RULE_BLOCKED, outcome.error_msg, 1)
            self.record(-1, digest, started, 0, 0)
            return
        if outcome.OK_msg is not None:
            client.send_ok(self.status(), outcome.OK_msg.encode())
            self.record(-1, digest, started, 0, 0)
            return
        if outcome.query is not None:
            sql = outcome.query
            payload = b"\x03" + sql.encode("utf-8", "surrogateescape")
            statements = scan(sql) or statements
        delay = outcome.delay if outcome.delay is not None else rt.settings.default_query_delay_ms
        if delay:
            await asyncio.sleep(delay / 1000)
        pins = self.state.pins
        if len(pins) and Pin.WARNINGS in pins and not sql.lstrip().upper().startswith(_WARNING_QUERIES):
            pins.discard(Pin.WARNINGS)
            await link.maybe_release()
        first = statements[0]
        if first.keyword == "KILL" and len(statements) == 1:
            try:
                request = parse_kill(sql)
            except KillRefused as refused:
                client.send_error(ErrorCode.NOT_SUPPORTED, str(refused), 1)
                return
            await carry_out(request, self.session_id, client, services, self.status())
            self.record(-1, digest, started, 0, 0)
            return
        if not (client.local_files and rt.settings.local_infile) and any(s.load_local for s in statements):
            # Refused here, as MariaDB refuses it: the backend would ask this client for a file it cannot send.
            client.send_error(
                ErrorCode.LOCAL_INFILE_DISABLED,
                "The used command is not allowed because the MariaDB server or client has disabled the local "
                "infile capability",
                1,
            )
            return
        if rt.shard_map is not None:
            self.spanning.check()
            if await self.spanning.control(statements, sql):
                self.record(-1, digest, started, 0, 0)
                return
        if len(statements) == 1 and first.last_insert_id_only and link.conn is None:
            client.wire.write(result_set([("LAST_INSERT_ID()", FieldType.LONGLONG)], [[link.last_insert_id]]))
            self.record(-1, digest, started, 1, 0)
            return
        cache_key: CacheKey | None = None
        if outcome.cache_ttl and link.conn is None and all(s.is_read for s in statements):
            cache_key = (client.username, schema, payload[1:])
            hit = services.cache.get(cache_key)
            if hit is not None:
                client.wire.write(hit)
                self.record(-1, digest, started, 0, 0)
                return
        hostgroup = self.route(statements, outcome)
        if rt.holds_begin and len(statements) == 1 and self.held_back(first, sql, hostgroup, payload):
            client.send_ok(self.status())
            self.record(-1, digest, started, 0, 0)
            return
        keys = NO_KEYS
        if outcome.trx_queue is not None or outcome.annotations or services.heat.applied:
            taken = await self.queue.wait_for(sql, outcome, digest.hash)
            if taken is None:
                self.record(-1, digest, started, 0, 0)
                return
            keys = taken
        branch: BackendConnection | None = None  # a branch of the spanning transaction the statement runs on
        on_shard: str | None = None  # the statement on a shard with a physical schema, renamed (``sharding.physical``)
        physical: str | None = None  # the default schema it runs in there instead of the session's
        if rt.shard_map is not None:
            if rt.shard_map.sequenced and first.keyword in ("INSERT", "REPLACE"):
                numbered = await number_rows(services, client, self.state, sql)
                if numbered is None:
                    self.record(-1, digest, started, 0, 0)
                    return
                if numbered is not sql:  # the statement the shards run, the mirror hears, the events log holds
                    sql = numbered
                    payload = b"\x03" + sql.encode("utf-8", "surrogateescape")
            placed = self.place(sql)
            if placed is not None:
                found, where = placed
                if where.refused:
                    client.send_error(ErrorCode.NOT_SUPPORTED, where.refused, 1)
                    self.record(-1, digest, started, 0, 0)
                    self.record_sharded(digest, 0)
                    return
                if where.spanning:
                    entered = await self.spanning.enter(found.table, where.hostgroup, where.shards)
                    if entered is False:
                        self.record(-1, digest, started, 0, 0)
                        return
                    if isinstance(entered, BackendConnection):
                        branch = entered
                if where.shards:
                    await self.scatter(sql, found, where, digest, started)
                    return
                hostgroup = where.hostgroup
                shard = shard_on(found.table, hostgroup)
                if shard.renamed:
                    on_shard = rewrite(sql, shard)
                    physical = default_schema(shard, self.state.schema)
                self.record_sharded(digest, 1)
        sent = payload if on_shard is None else b"\x03" + on_shard.encode("utf-8", "surrogateescape")
        forward = self.forward
        forward.payload = sent
        response = await link.execute(hostgroup, forward, statements, outcome, cache_key, branch, physical)
        if self.spanning.current is not None:
            await self.spanning.after(response.error if response is not None else None, branch)
        if outcome.mirror_hostgroup is not None or outcome.mirror_flagOUT is not None or self.followed:
            self.tell(payload, statements, outcome, response, None)
        if response is not None:
            elapsed_us = self.record(hostgroup, digest, started, response.rows, response.affected_rows, response.ended)
            if not keys and not first.is_read:
                self.look_for_heat(sql, digest, elapsed_us, response)
        if outcome.log or (outcome.log is None and rt.settings.eventslog_default_log):
            self._log_event(hostgroup, digest.hash, sql, started, response)

    def look_for_heat(self, sql: str, digest: Digest, elapsed_us: int, response: Response) -> None:
        """Tell the search for hot keys (``proxyapp.hotrows.heat``) about a write or locking read that was not
        queued when it bore a hot row's mark (``heat_mark``)."""
        mark = self.heat_mark(elapsed_us, response)
        if mark >= 0:
            self.services.heat.observe(sql, self.state.schema or "", digest.hash, digest.text, mark)

    def heat_mark(self, elapsed_us: int, response: Response) -> int:
        """A hot row's mark on a statement that took ``elapsed_us``: its error 1213 or 1205, 0 for a run of
        ``mysql-trx_queue_heat_slow_ms`` or more; -1 for none."""
        code = response.error.code if response.error is not None else 0
        if code in (ErrorCode.LOCK_DEADLOCK, ErrorCode.LOCK_WAIT_TIMEOUT):
            return code
        return 0 if elapsed_us >= self.services.hot_rows.settings.slow_ms * 1000 else -1

    def status(self) -> int:
        """The session's server status flags, for the proxy's own answers."""
        return server_status(self.state, self.link.in_transaction)

    def apply_rules(self, sql: str, digest: Digest, commented: bool) -> RuleOutcome:
        """The query rules' verdict on ``sql`` for this session, from its current flagIN (``commented``: ``sql`` may
        hold an annotation, ``analyze`` says)."""
        rules = self.services.runtime.rules
        if not rules.active and not commented:  # no rule and no annotation can apply: the shared empty verdict
            return NO_RULES
        client = self.client
        return rules.evaluate(
            QueryContext(
                client.username,
                self.state.schema or "",
                client.addr,
                client.proxy_addr,
                client.proxy_port,
                sql,
                digest.hash,
                digest.text,
            ),
            self.flag_in,
        )

    def route(self, statements: list[Statement], outcome: RuleOutcome) -> int:
        """The hostgroup ``statements`` run in (``route.route`` for this session, its stand-in resolved)."""
        services = self.services
        link = self.link
        if link.opening is not None:  # in a transaction held back: where its BEGIN would have run
            return link.opening_hostgroup
        situation = link.situation()
        hostgroup, stand_in = route(statements, outcome.destination_hostgroup, services.runtime.writer_of, situation)
        return services.pools.stand_in(hostgroup) if stand_in else hostgroup

    def held_back(self, statement: Statement, sql: str, hostgroup: int, payload: bytes) -> bool:
        """With sharded tables or hot-row queues, a BEGIN outside a transaction is held back
        (``BackendLink.defer``) until the transaction's first statement, so that a shard key can choose the shard it
        runs on and a transaction waits in a hot-row queue holding no connection; a COMMIT or ROLLBACK of a
        transaction that never ran a statement ends it here. True when the proxy answers the statement."""
        link = self.link
        if link.opening is not None and statement.kind in (Kind.COMMIT, Kind.ROLLBACK):
            link.end_transaction()
            return True
        if (
            statement.kind is Kind.BEGIN
            and statement.keyword in ("BEGIN", "START")
            and link.conn is None
            and "SNAPSHOT" not in sql.upper()  # WITH CONSISTENT SNAPSHOT: its snapshot is taken now
        ):
            link.defer(payload, hostgroup)
            return True
        return False

    def place(self, sql: str) -> tuple[Plan, Placement] | None:
        """Where ``sql`` runs when it names a sharded table (``proxyapp.sharding``); None when it names none."""
        shard_map = self.services.runtime.shard_map
        assert shard_map is not None
        mode = self.state.variables.get("sql_mode")
        if mode is None:  # the usual case: the server's global mode, taken to be the default lexical rules
            found = plan(sql, self.state.schema, shard_map)
        else:
            found = plan(sql, self.state.schema, shard_map, lexical_dialect(mode))
        if found is None:
            return None
        situation = self.link.situation()
        autocommit = self.state.autocommit and self.link.opening is None
        writes = self.services.runtime.settings.cross_shard_writes
        spanning = not found.refused and not found.ddl and self.spanning.may_span(found.table)
        return found, placement(found, situation.kept, autocommit, writes, spanning)

    async def scatter(
        self, sql: str, found: Plan, where: Placement, digest: Digest, started: float, binary: bool = False
    ) -> None:
        """Run a statement over several shards (``session.scatter``) and count it (``binary``: a result set goes back
        in the binary protocol, for a prepared statement's execute)."""
        if self.scattering is None:
            self.scattering = Scatter(self.services, self.client, self.link)
        self.scattering.held = self.spanning.current
        self.scattering.doomed = []
        status = self.status()
        name = f"{found.table.schema}.{found.table.table}"
        affected = 0
        if found.gather is not None:
            limit = self.state.variables.get("sql_select_limit")
            done = await self.scattering.read(where.shards, found.gather, status, limit, binary)
        elif found.ddl:
            done = await self.scattering.everywhere(where.shards, sql, status, f"DDL on {name}")
        else:
            split = dict(found.statements)
            statements = [(shard, split.get(shard.number, sql)) for shard in where.shards]
            first = found.table.shards[found.first_row_shard]
            done = await self.scattering.write(
                statements, first, status, f"a write to {name}", copies=found.table.is_global
            )
            affected = done.rows if done is not None else 0
        if self.scattering.held is not None:
            await self.spanning.after_scatter(self.scattering.doomed)
        if done is not None:
            rows = 0 if affected else done.rows
            self.record(where.shards[0].hostgroup_id, digest, started, rows, affected)
            self.record_sharded(digest, len(where.shards), rows, done.merge_us)

    def record_sharded(self, digest: Digest, shards: int, merge_rows: int = 0, merge_us: int = 0) -> None:
        """Count a statement on sharded tables in the sharding statistics (``shards`` 0: refused)."""
        if self.services.runtime.settings.query_digests:
            self.services.sharding.record(
                self.state.schema or "", digest.hash, digest.text, shards, merge_rows, merge_us
            )

    def tell(
        self,
        payload: bytes,
        statements: list[Statement],
        outcome: RuleOutcome | None,
        response: Response | None,
        prepared: ClientStatement | None,
    ) -> None:
        """Tell the listener that a command ran (``prepared``: an execution of it)."""
        client = self.client
        done = QueryDone(
            self.session_id,
            client.username,
            client.credentials,
            client.addr,
            client.proxy_addr,
            client.proxy_port,
            client.default_hostgroup,
            self.state,
            self.link.in_transaction,
            self.services.runtime.rules,
            payload,
            statements,
            outcome,
            response,
            prepared,
        )
        self.followed = self.services.listener.query_done(done)

    def record(
        self, hostgroup: int, digest: Digest, started: float, rows: int, affected: int, ended: float = 0.0
    ) -> int:
        """Count a statement in the digest statistics (and as slow, past ``mysql-long_query_time``); the µs it
        took, from ``started`` to ``ended`` (``MONOTONIC``; 0: now)."""
        if not ended:
            ended = MONOTONIC()
        elapsed_us = int((ended - started) * 1_000_000)
        services = self.services
        if elapsed_us > services.runtime.settings.long_query_time_ms * 1000:
            services.counters.Slow_queries += 1
        if services.runtime.settings.query_digests:
            services.digests.record(
                hostgroup,
                self.state.schema or "",
                self.client.username,
                self.client.addr,
                digest.hash,
                digest.text,
                elapsed_us,
                rows,
                affected,
                ended,
                self.digest_memo,
            )
        return elapsed_us

    def _log_event(self, hostgroup: int, digest: str, sql: str, started: float, response: Response | None) -> None:
        """Append this query to the events log (rule ``log=1`` or ``mysql-eventslog_default_log``)."""
        error = None
        if response is None:
            error = "ProxyFleet error (sent to the client)"
        elif response.error is not None:
            error = f"{response.error.code}: {response.error.message}"
        last = self.link.last_pool
        self.services.events.write(
            query_event(
                username=self.client.username,
                schemaname=self.state.schema or "",
                client=f"{self.client.addr}",
                hostgroup=hostgroup,
                server=f"{last.server.hostname}:{last.server.port}" if last is not None else "",
                digest=digest,
                query=sql,
                thread_id=self.session_id,
                started=time.time() - (MONOTONIC() - started),
                rows_sent=response.rows if response else 0,
                rows_affected=response.affected_rows if response else 0,
                last_insert_id=self.link.last_insert_id,
                error=error,
            )
        )

    async def _relay_infile(self, backend: Wire) -> None:
        """Relay a LOAD DATA LOCAL INFILE: the client's file packets go to the backend until the empty one."""
        if not (self.client.local_files and self.services.runtime.settings.local_infile):
            backend.send(b"", backend.seq + 1)
            return
        client = self.client.wire
        await client.drain()
        expected = (backend.seq + 1) & 0xFF  # the file's packets continue the request's numbering
        while True:
            _, length = await client.next_part()
            if client.seq != expected:  # not a file packet: the client gave up (its file is missing) and moved on
                raise InfileAbandoned(client.seq)
            expected = (expected + 1) & 0xFF
            backend.write(client.take())
            if length == 0:
                break
            if backend.transport.get_write_buffer_size() > 1 << 20:
                await backend.drain()
        backend.seq = client.seq
