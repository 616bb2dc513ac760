"""A session's link to its backends: borrow a connection, bring it to the session's state, run a command and relay
its response, retry a read on a lost connection, enforce the query timeout, then keep or release the connection.

The link owns the connection a session keeps while pinned and the session's transaction as the server reports it.
What a statement changed is decided by ``track`` (a pure function); the link carries the decision out.
"""

from __future__ import annotations

import asyncio
import logging

from proxyapp.backends.pool import Hostgroup, PoolError, ServerPool
from proxyapp.clock import MONOTONIC
from proxyapp.config.variables import NO_TIMEOUT_MS
from proxyapp.mysql.backend import BackendConnection
from proxyapp.mysql.constants import ErrorCode
from proxyapp.mysql.packets import ErrPacket
from proxyapp.mysql.wire import CONNECTION_LOST, STATUS_UNKNOWN, Relay, Response, read_response, walked_response
from proxyapp.rules.engine import RuleOutcome
from proxyapp.session.client import Client, SessionEnd
from proxyapp.session.kill import kill_running
from proxyapp.session.relay import Forward, InfileAbandoned, Runner
from proxyapp.session.route import Situation, beside_transaction
from proxyapp.session.services import SessionServices
from proxyapp.session.state import DIRTY_PINS, SessionState, bring, capture_user_variables, read_last_insert_id
from proxyapp.session.track import APPLIED, DIRTY, IN_TRANSACTION, KEEP, track
from proxyapp.sql.scan import Statement
from proxyapp.tasks import spawn

log = logging.getLogger("proxyapp.session.link")

#: The query cache's key: user, schema, statement bytes.
CacheKey = tuple[str, str, bytes]


class BackendLink:
    """The backend side of one session."""

    def __init__(self, services: SessionServices, client: Client, state: SessionState, session_id: int) -> None:
        self.services = services
        self.client = client
        self.state = state
        self.session_id = session_id
        self.conn: BackendConnection | None = None  # the connection the session keeps while pinned
        self.hostgroup = 0  # the hostgroup of ``conn``
        self.running: BackendConnection | None = None  # the connection a command runs on right now
        self.last_pool: ServerPool | None = None  # the server the last command ran on
        # The hostgroup the last command drew a connection from: kept, as the pools keep each hostgroup's object for
        # good (``PoolManager.hostgroup``), and asking them is a dict lookup.
        self.drew_from: Hostgroup | None = None
        self.last_insert_id = 0
        self.in_transaction = False
        self.busy_since = 0.0  # when (the proxy's clock) the current (or last) command arrived
        self.arrived = 0.0  # the same instant on the monotonic clock (``MONOTONIC``), which durations are measured on
        self.ended = 0.0  # when the last response a backend gave it was read whole (``MONOTONIC``)
        self.transaction_since = 0.0  # when the command that opened the current transaction arrived
        self.killed = False  # a KILL ended the session: a command still waiting for a connection must not run
        # A BEGIN held back until the transaction's first statement shows which shard it belongs on (``defer``).
        self.opening: bytes | None = None
        self.opening_hostgroup = 0  # where the held-back BEGIN would have run
        self.relay = Relay(client.wire)  # what relays each response to the client (``Relay.start`` per command)
        self.seen = Situation(0, False, True, False, None, state.pins)  # ``situation``'s, brought up to date each time

    def situation(self) -> Situation:
        """The session's situation as routing sees it now: one object per session, brought up to date at each call
        (routing reads it at once and keeps none; a new one per statement cost an allocation)."""
        client = self.client
        seen = self.seen
        seen.default_hostgroup = client.default_hostgroup
        seen.persistent = client.transaction_persistent
        seen.autocommit = self.state.autocommit
        seen.autocommit_false_is_transaction = self.services.runtime.settings.autocommit_false_is_transaction
        seen.kept = self.hostgroup if self.conn is not None else None
        seen.pins = self.state.pins
        seen.held = self.opening_hostgroup if self.opening is not None else None
        return seen

    async def execute(
        self,
        hostgroup: int,
        run: Runner,
        statements: list[Statement],
        outcome: RuleOutcome | None,
        cache_key: CacheKey | None = None,
        branch: BackendConnection | None = None,
        schema: str | None = None,
    ) -> Response | None:
        """Run one command on a backend of ``hostgroup`` and relay the response; None if an error was sent.
        ``branch``: run it on that connection, a branch the session's shard transaction holds (``shardtxn``);
        ``schema``: in that default schema instead of the session's (a shard's physical schema)."""
        rt = self.services.runtime
        retries = outcome.retries if outcome is not None and outcome.retries is not None else None
        if retries is None:
            retries = rt.settings.query_retries_on_failure
        safe_to_retry = bool(statements) and all(s.is_read for s in statements)
        timeout_ms = rt.settings.default_query_timeout_ms
        if outcome is not None and outcome.timeout:
            timeout_ms = outcome.timeout
        # A read routed away from the kept connection's transaction runs on another one (route.beside_transaction).
        beside = (
            branch is None and self.conn is not None and beside_transaction(statements, hostgroup, self.situation())
        )
        while True:
            kept = branch is not None or (self.conn is not None and not beside)
            conn = branch if branch is not None else self.conn if kept else None
            if conn is None:
                hg = self.drew_from
                if hg is None or hg.id != hostgroup:
                    hg = self.drew_from = self.services.pools.hostgroup(hostgroup)
                drawn = self.draw(hg, schema)
                if isinstance(drawn, BackendConnection) and self.state.matches(drawn.state, schema):
                    conn = drawn  # the common case, without a coroutine
                else:
                    conn = await self.complete(hg, schema, drawn)
                    if conn is None:
                        return None
            elif not self.state.matches(conn.state, schema):
                err = await self._sync_safely(conn, schema)
                if err is not None:
                    self.client.send_error(err.code, err.message)
                    return None
            if self.killed:  # killed while it waited for the connection: the statement must not run
                if not kept:
                    release(conn)
                raise SessionEnd
            opened = self.opening is not None and not kept
            if opened and not await self._open(conn):
                return None
            pool = conn.pool
            assert isinstance(pool, ServerPool)
            relay = self.relay
            relay.start(cache_key is not None)
            timer = None
            if timeout_ms < NO_TIMEOUT_MS:
                timer = self.client.wire.loop.call_later(timeout_ms / 1000, self.on_query_timeout, conn)
            sent_before = conn.wire.bytes_out
            began = MONOTONIC()
            self.running = conn
            try:
                if isinstance(run, Forward):
                    payload = run.addressed(conn)
                    if payload is None:  # an execute on a connection that does not hold its statement yet
                        first = run.first
                        assert first is not None, "a prepared statement's Forward prepares it first"
                        response = await first(conn, relay)
                    else:
                        wire = conn.wire
                        wire.send(payload, 0)
                        while not wire.unread():
                            await wire.fill()
                        whole = walked_response(wire, relay, run.binary)
                        if whole is not None:
                            response = whole
                        else:
                            response = await read_response(
                                wire, relay, relay_infile=run.relay_infile, binary=run.binary
                            )
                else:
                    response = await run(conn, relay)
            except CONNECTION_LOST as exc:
                lost: BaseException | None = exc
            except InfileAbandoned as abandoned:
                # As the server does: the statement is abandoned with its connection (closed mid-file, the server
                # rolls the load back), the client's stray packet is answered with 1156, and the session ends.
                self.lose(conn, pool)
                self.client.send_error(ErrorCode.PACKETS_OUT_OF_ORDER, "Got packets out of order", abandoned.seq + 1)
                raise SessionEnd from None
            else:
                lost = None
            finally:
                self.running = None
                if timer is not None:
                    timer.cancel()
            if lost is not None:
                self.lose(conn, pool)
                if opened:  # the transaction it opened is gone with it
                    self.end_transaction()
                what = f"{pool.server.hostname}:{pool.server.port} (hostgroup {pool.server.hostgroup_id})"
                if relay.written == 0 and not kept and not opened and safe_to_retry and retries > 0:
                    retries -= 1
                    log.info("session %d: retrying a read after losing %s: %s", self.session_id, what, lost)
                    continue
                sent = "" if safe_to_retry else " (not retried: the statement may have run)"
                self.client.send_error(
                    ErrorCode.BACKEND_LOST,
                    f"Lost connection to backend {what} during query: {lost}{sent}",
                    conn.wire.seq + 1 if relay.written else 1,
                )
                return None
            pool.queries += 1
            # Latency_us: a moving average of the backend's response time (first byte to last), in µs.
            ended = response.ended = self.ended = MONOTONIC()
            pool.latency_us += (int((ended - began) * 1_000_000) - pool.latency_us) >> 3
            self.last_pool = pool
            to_backend = conn.wire.bytes_out - sent_before
            pool.bytes_sent += to_backend
            pool.bytes_recv += relay.written
            counters = self.services.counters
            counters.Queries_backends_bytes_sent += to_backend
            counters.Queries_backends_bytes_recv += relay.written
            if response.status != STATUS_UNKNOWN:  # the common case, without a coroutine
                conn.status = response.status
            else:
                await conn.settle(response)
            captured = True
            if response.error is None and not (len(statements) == 1 and statements[0].plain):
                assigned = [name for st in statements for name in st.user_vars_assigned]
                if assigned:
                    captured = await capture_user_variables(conn, self.state, assigned)
                if any(st.sets_last_insert_id for st in statements):
                    last = await read_last_insert_id(conn)
                    if last is not None:
                        self.last_insert_id = last
            if cache_key is not None and outcome is not None and response.error is None:
                empty_too = outcome.cache_empty_result
                if empty_too is None:
                    empty_too = rt.settings.query_cache_stores_empty_result
                if response.rows or empty_too:
                    self.services.cache.put(cache_key, b"".join(relay.parts), outcome.cache_ttl or 0)
            if beside:
                release(conn)
                return response
            if branch is not None:
                if response.last_insert_id:
                    self.last_insert_id = response.last_insert_id
                return response
            self._after(conn, hostgroup, statements, response, outcome, captured, schema is None)
            return response

    def _after(
        self,
        conn: BackendConnection,
        hostgroup: int,
        statements: list[Statement],
        response: Response,
        outcome: RuleOutcome | None,
        captured: bool,
        own_schema: bool,
    ) -> None:
        """Carry out what ``track`` decided the statements changed: the connection's applied state (its schema the
        session's if it ran in it, ``own_schema``), the transaction, and whether the session keeps the connection."""
        state = self.state
        multiplex = outcome.multiplex if outcome is not None else None
        multiplexing = self.services.runtime.settings.multiplexing
        flags = track(state, statements, response, conn.in_transaction, multiplex, captured, multiplexing)
        in_trans = bool(flags & IN_TRANSACTION)
        if flags & APPLIED:
            state.adopt(conn.state)
            if own_schema:
                conn.state.schema = state.schema
        if response.last_insert_id:
            self.last_insert_id = response.last_insert_id
        if in_trans != self.in_transaction:
            self.in_transaction = in_trans
            self.transaction_since = self.busy_since
            self.services.counters.Active_Transactions += 1 if in_trans else -1
        if flags & DIRTY:
            conn.dirty = True
        own_wait = state.wait_timeout_s
        if own_wait and own_wait * 1000 < self.services.pools.settings.ping_interval_server_ms + 2000:
            conn.dirty = True  # its server would close it idle in the pool before its next ping: reset it first
        if flags & KEEP:
            self.conn = conn
            self.hostgroup = hostgroup
        elif self.conn is conn or self.conn is None:
            self.conn = None
            if conn.dirty:
                self.conn = conn
                spawn(self.drop(reset=True), self.services.background, "dropping a backend connection",
                      self.client.wire.loop)  # fmt: skip
            else:
                release(conn, now=self.services.clock.at(response.ended))

    async def borrow(self, hostgroup: int, schema: str | None = None) -> BackendConnection | None:
        """A connection from ``hostgroup`` brought to the session's state (in default schema ``schema`` instead of
        the session's when given: a shard's physical schema), or None after sending the error."""
        hg: Hostgroup = self.services.pools.hostgroup(hostgroup)
        return await self.complete(hg, schema, self.draw(hg, schema))

    def draw(self, hg: Hostgroup, schema: str | None) -> BackendConnection | ServerPool | None:
        """Without waiting, what ``hg`` has for the session (in ``schema`` when given): an idle connection (counted
        as got), else the server drawn by weight to open one on, or None (others queue, or nothing is usable)."""
        drawn = hg.take_idle(self.client.credentials, schema or self.state.schema)
        if isinstance(drawn, BackendConnection):
            self.services.counters.ConnPool_get_conn_success += 1
        return drawn

    async def complete(
        self, hg: Hostgroup, schema: str | None, drawn: BackendConnection | ServerPool | None
    ) -> BackendConnection | None:
        """Finish a borrow from ``hg`` that ``draw`` began with ``drawn``: wait for a connection when it gave none
        (the weights are drawn once per borrow), then bring it to the session's state; None after sending the
        error."""
        conn = drawn
        if not isinstance(conn, BackendConnection):
            try:
                conn = await hg.acquire(self.client.credentials, schema or self.state.schema, conn)
            except PoolError as exc:
                self.services.counters.ConnPool_get_conn_failure += 1
                self.client.send_error(exc.code, f"ProxyFleet: {exc}", 1)
                return None
            self.services.counters.ConnPool_get_conn_success += 1
        if self.state.matches(conn.state, schema):
            return conn
        err = await self._sync_safely(conn, schema)
        if err is not None:
            release(conn, reusable=False)
            self.client.send_error(err.code, err.message)
            return None
        return conn

    async def sync(self, conn: BackendConnection, schema: str | None = None) -> ErrPacket | None:
        """Bring ``conn``, a connection the session holds (a branch of its transaction over shards), to the
        session's state in default schema ``schema`` instead of the session's when given; the error met."""
        if self.state.matches(conn.state, schema):
            return None
        return await self._sync_safely(conn, schema)

    async def _sync_safely(self, conn: BackendConnection, schema: str | None = None) -> ErrPacket | None:
        try:
            return await bring(conn, self.state, schema)
        except CONNECTION_LOST as exc:
            pool = conn.pool
            assert isinstance(pool, ServerPool)
            self.lose(conn, pool)
            return ErrPacket(
                ErrorCode.BACKEND_LOST,
                "HY000",
                f"ProxyFleet: lost backend {pool.server.hostname}:{pool.server.port} "
                f"(hostgroup {pool.server.hostgroup_id}) while restoring session state: {exc}",
            )

    def lose(self, conn: BackendConnection, pool: ServerPool) -> None:
        """Forget a broken connection; a transaction or pinned state on it is gone with it."""
        if self.conn is conn:
            self.conn = None
            self.state.pins.clear()
            self.state.temp_tables.clear()
            self.state.locks_held = 0
            self.state.transaction_open = False
            self.end_transaction()
        pool.hostgroup.release(conn, pool, reusable=False)

    def defer(self, payload: bytes, hostgroup: int) -> None:
        """Hold back a BEGIN (COM_QUERY ``payload``, bound for ``hostgroup``): the session is in a transaction that
        opens on the connection of its first statement, so that a sharded table's key can choose the shard."""
        self.opening = payload
        self.opening_hostgroup = hostgroup
        if not self.in_transaction:
            self.in_transaction = True
            self.transaction_since = self.busy_since
            self.services.counters.Active_Transactions += 1

    def hold(self, conn: BackendConnection, hostgroup: int) -> None:
        """Keep ``conn`` (of ``hostgroup``), on which a transaction was just opened in the held-back BEGIN's place
        (``proxyapp.session.sharded.transactions``)."""
        self.conn = conn
        self.hostgroup = hostgroup
        self.opening = None
        if not self.in_transaction:
            self.in_transaction = True
            self.transaction_since = self.busy_since
            self.services.counters.Active_Transactions += 1

    async def _open(self, conn: BackendConnection) -> bool:
        """Run the held-back BEGIN on ``conn`` before the statement; False after sending the error it met (the
        connection is given back, the transaction is over)."""
        opening = self.opening
        assert opening is not None
        self.opening = None
        pool = conn.pool
        assert isinstance(pool, ServerPool)
        pool.queries += 1  # the backend runs it as a command of its own
        try:
            err = await conn.simple_command(opening)
        except CONNECTION_LOST as exc:
            self.lose(conn, pool)
            self.end_transaction()
            self.client.send_error(
                ErrorCode.BACKEND_LOST,
                f"Lost connection to backend {pool.server.hostname}:{pool.server.port} while opening the "
                f"transaction: {exc}",
            )
            return False
        if err is not None:
            release(conn, reusable=not conn.in_transaction)
            self.end_transaction()
            self.client.send_error(err.code, err.message, 1, err.sqlstate)
            return False
        return True

    def end_transaction(self) -> None:
        """The session is no longer in a transaction (its connection is gone, reset or the session ends)."""
        self.opening = None
        if self.in_transaction:
            self.in_transaction = False
            self.services.counters.Active_Transactions -= 1

    async def maybe_release(self) -> None:
        """Give the kept connection back if nothing pins it any more (reset first if it holds state)."""
        if self.conn is not None and not self.state.pins and self.services.runtime.settings.multiplexing:
            conn = self.conn
            self.conn = None
            if conn.dirty:
                self.conn = conn
                await self.drop(reset=True)
            else:
                release(conn)

    async def drop(self, reset: bool) -> None:
        """Give up the kept backend connection, resetting it first when the session left state on it."""
        conn = self.conn
        if conn is None:
            return
        self.conn = None
        pool = conn.pool
        assert isinstance(pool, ServerPool)
        reusable = True
        if reset and (conn.dirty or conn.in_transaction or self.state.transaction_open or self.state.pins & DIRTY_PINS):
            try:
                reusable = await asyncio.wait_for(conn.reset(), 2)
            except CONNECTION_LOST:
                reusable = False
        pool.hostgroup.release(conn, pool, reusable)

    def on_query_timeout(self, conn: BackendConnection) -> None:
        """The query timeout fired: kill the running query from a separate connection."""
        killing = kill_running(conn, self.client.credentials, self.services, "a timed-out query", self.session_id)
        spawn(killing, self.services.background, "killing a timed-out query")


def release(conn: BackendConnection, reusable: bool = True, now: float = 0.0) -> None:
    """Give ``conn`` back to its pool (``reusable``: another session may use it as it is; ``now``: the proxy's time,
    when read already)."""
    pool = conn.pool
    assert isinstance(pool, ServerPool)
    pool.hostgroup.release(conn, pool, reusable, now)
