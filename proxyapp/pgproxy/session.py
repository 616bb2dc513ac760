"""One PostgreSQL client session of the pooling proxy, after its login: the client's messages go to a server
connection borrowed for the transaction (or the whole session), the server's answers come back, and the connection
goes back to its pool when the server is idle again with nothing owed.

Two loops share the session while it holds a server connection: this one reads the client and writes to the
server (rewriting named prepared statements, ``statements``; replaying the session's settings first, ``settings``),
``_relay`` reads the server and writes to the client (``responses`` leaves out the answers to the proxy's own
messages and adds the proxy's own answers in their turn). The relay gives the connection back at a ReadyForQuery
that leaves the server idle ("I"), with no answer owed, no extended-protocol message since the last Sync, nothing
pinned and transaction pooling. COPY in both directions, notices, notifications and errors pass as they come.
"""

from __future__ import annotations

import asyncio
import logging
import re
import struct
from collections import OrderedDict
from typing import Protocol

from proxyapp.clock import MONOTONIC
from proxyapp.pgproxy.caching import CachedAnswer
from proxyapp.pgproxy.client_pids import REFUSED, bound_client_pid, refusal, refuse_written_pid
from proxyapp.pgproxy.pool import PgPools, PoolRefused, ServerConn
from proxyapp.pgproxy.prepared import PreparedStatements
from proxyapp.pgproxy.responses import FORWARD, SWALLOW, Entry, ResponseOrder
from proxyapp.pgproxy.routing import PgRouter, Route
from proxyapp.pgproxy.settings import (
    DROPS_STATEMENTS,
    apply_change,
    deallocated,
    pin_reason,
    read_change,
    replay,
    vacated_database,
)
from proxyapp.pgproxy.statements import (
    CLOSE_COMPLETE,
    PARSE_COMPLETE,
    Statement,
    bind_statement,
    parse_fields,
    parse_message,
    rename_bind,
    renamed_target,
    server_statement,
    target,
)
from proxyapp.pgproxy.timeout import StatementTimer
from proxyapp.pgsql.auth import ServerSecret
from proxyapp.pgsql.messages import (
    CONNECTION_FAILURE,
    error_response,
    is_fatal,
    message,
    ready_for_query,
)
from proxyapp.pgsql.wire import PeerGone, PgWire, ProtocolViolation
from proxyapp.report.stats import DigestMemo, DigestStats
from proxyapp.rules.cache import QueryCache
from proxyapp.sql.digest import compute_pg_digest

log = logging.getLogger("proxyapp.pgproxy")

#: Client messages a server answers with nothing by themselves (COPY data, Flush, the end of COPY).
_UNANSWERED = frozenset(b"dcfH")
#: Extended-protocol messages: after one, the connection is kept until the client's next Sync.
_EXTENDED = frozenset(b"PBDECH")
#: Extended-protocol messages that may name a statement.
_NAMING = frozenset(b"PBDC")
#: Bytes written to a client before the relay waits for it to read them (the client's transport then says it is slow).
_HIGH_WATER = 256 * 1024
#: The start of a statement that may need a database without other sessions (``vacated_database`` reads it then).
_MAY_VACATE = re.compile(rb"\s*(?:[Dd][Rr][Oo][Pp]|[Aa][Ll][Tt][Ee][Rr])\s")
#: The first bytes such a statement may have (a cheaper look first).
_VACATE_FIRST = frozenset(b"DdAa \t\r\n")
#: A statement that may change what a prepared statement's parameters and results are (``schema_epoch``).
_CHANGES_SCHEMA = re.compile(r"\s*(?:create|alter|drop)\s", re.IGNORECASE)
#: The first characters such a statement may have (a cheaper look first).
_DDL_FIRST = frozenset("CcAaDd \t\r\n")
#: The SQLSTATE of a Parse of a statement name the session has (duplicate_prepared_statement).
DUPLICATE_STATEMENT = "42P05"


class SessionCounters:
    """What the pooling proxy counts, in this process."""

    __slots__ = ("blocked", "queries", "timed_out", "transactions")

    def __init__(self) -> None:
        self.queries = 0
        self.transactions = 0
        self.blocked = 0  # statements a rule's error_msg refused
        self.timed_out = 0  # statements the server was asked to cancel for running past their timeout


class SessionHost(Protocol):
    """What a session uses of the proxy that serves it."""

    pools: PgPools
    counters: SessionCounters
    router: PgRouter
    digests: DigestStats
    #: Answers of ``cache_ttl`` rules (``pgsql-query_cache_size_MB``).
    cache: QueryCache
    #: Server-side statement names a server of this process prepared (least recently first).
    known: OrderedDict[str, None]
    #: Statements that may change the schema (CREATE, ALTER, DROP) this process's sessions sent: part of every
    #: server-side statement's name (``statements.server_statement``).
    schema_epoch: int

    def max_prepared(self) -> int:
        """``pgsql-max_prepared_statements``."""
        ...

    def default_timeout_ms(self) -> int:
        """``pgsql-default_query_timeout``."""
        ...

    def caches_empty_result(self) -> bool:
        """``pgsql-query_cache_stores_empty_result``."""
        ...

    async def close_idle(self, database: str) -> None:
        """Close the idle server connections to ``database`` in every worker process of the node."""
        ...


class PgSession:
    """A logged-in client of the pooling proxy.

    Why one class of ~640 lines: it is the pooler's hot path. The client loop (``run``, ``_pass``) and the relay of
    the server's answers (``_relay``) read and write the held connection's state (``order``, ``status``, ``timer``,
    ``unsynced``) on every message; split into objects, each message would cross them (issue 46 measures this path
    against PgBouncer). What needs no per-message state is a room of its own: ``statements`` (the server-side names),
    ``prepared`` (a session's statements), ``responses`` (the answers' order), ``settings`` (SETs replayed, pins),
    ``timeout``, ``caching``, ``client_pids``, ``routing`` and ``pool``."""

    def __init__(
        self,
        client: PgWire,
        host: SessionHost,
        *,
        session_id: int,
        user: str,
        database: str,
        secret: ServerSecret,
        hostgroup: int,
        pool_mode: str,
        settings: dict[str, str],
    ) -> None:
        self.client = client
        client.limit_writes(_HIGH_WATER)
        self.outbox: list[bytes] = []  # what the client's latest messages send the server, written at once
        self.host = host
        self.pools = host.pools
        self.counters = host.counters
        self.client_addr = client.peer_address()
        self.proxy_port = client.local_port()
        self.id = session_id
        self.user = user
        self.database = database
        self.secret = secret  # what its server connections log in with
        self.hostgroup = hostgroup
        self.session_pooling = pool_mode == "session"
        self.defaults = dict(settings)  # the startup settings: what RESET returns to
        self.settings = dict(settings)
        self.pending_changes: list[tuple[str, str | None]] = []  # SETs of the open transaction
        self.skipping = False  # a blocked extended-protocol message: the client's messages are dropped until Sync
        self.routed: tuple[str, Route] | None = None  # the route the borrow asked for, for the pass that follows
        self.answered_alone = False  # the proxy answered the client's messages since its last Sync itself
        self.unnamed_query = ""  # the text of the unnamed statement
        #: portal name -> its statement's text (for the digest statistics) and rule timeout (ms; 0: the default)
        self.portals: dict[bytes, tuple[str, int]] = {}
        self.prepared = PreparedStatements(host.max_prepared)
        self.server: ServerConn | None = None
        self.order = ResponseOrder()
        self.status = b"I"
        self.unsynced = False
        self.pinned: str | None = None
        self.last_tag = b""  # the latest CommandComplete's tag
        self.server_ended_it = False  # the held server connection said FATAL: it closes, and that error is the one
        self.digest_memo = DigestMemo()  # its entries in the digest statistics (``DigestStats.record``)
        self.caching: CachedAnswer | None = None  # the simple Query whose answer goes to the query cache
        self.unnamed_timeout = 0  # the unnamed statement's rule timeout (ms; 0: the default)
        self.timer = StatementTimer(self.pools, self._still_running, self._count_timeout)
        self.settled: asyncio.Future[None] | None = None  # set when the answers ``_settle`` waits for came
        self.ended = False

    # ------------------------------------------------------------------------------------------- the client

    async def run(self) -> None:
        """Serve the client until it leaves."""
        try:
            while True:
                try:
                    batch = await self.client.batch()
                except ProtocolViolation as exc:
                    self._fatal("08P01", f"ProxyFleet: {exc}")
                    return
                for msg in batch:
                    kind = msg[0]
                    if kind == 88:  # Terminate ("X")
                        return
                    try:
                        if kind in (81, 80) and _may_vacate(kind, msg):
                            await self._before_vacating(kind, msg)
                        if self.skipping:
                            self._skip(kind, msg)
                        elif kind == 81 and self.host.router.caching and self._from_cache(msg):
                            pass
                        elif self.server is not None and not (self.order.synced_parse and kind in _NAMING):
                            self._pass(kind, msg)
                        elif self.server is not None:
                            await self._settle()  # then the connection may have gone back to its pool
                            await self._pass_or_borrow(kind, msg)
                        else:
                            await self._borrow_and_pass(kind, msg)
                    except (ValueError, IndexError, struct.error) as broken:  # a body the proxy had to read is broken
                        self._fatal("08P01", f"ProxyFleet: a malformed {chr(kind)!r} message: {broken}")
                        return
                    if self.ended:
                        return
                await self._flush()
        except PeerGone:
            return
        finally:
            await self._end()

    async def _flush(self) -> None:
        """Write what the client's messages send the server, at once; wait while the server is slow to read."""
        server = self.server
        if server is None or not self.outbox:
            self.outbox.clear()
            return
        wire = server.conn.wire
        wire.write(b"".join(self.outbox))
        self.outbox.clear()
        if wire.writing_paused:
            await wire.drain()

    async def _before_vacating(self, kind: int, msg: bytes) -> None:
        """A Query or Parse that may be a DROP DATABASE (or an ALTER DATABASE that needs it alone): the node's idle
        connections to that database are closed first (the pool's own connections would make the server refuse)."""
        sql = (cstring_body(msg) if kind == 81 else parse_fields(msg[5:])[1]).decode("utf-8", "surrogateescape")
        vacated = vacated_database(sql)
        if vacated is not None:
            await self.host.close_idle(vacated)

    async def _settle(self) -> None:
        """Wait until the server answered every Sync sent: a client's named Parse before one of them may have
        failed or been skipped after an error, and the message that comes next names a statement (the proxy's
        server-side statement of that name may exist for other clients, so only the answer tells)."""
        await self._flush()
        while self.server is not None and self.order.synced_parse and not self.ended:
            self.settled = asyncio.get_running_loop().create_future()
            try:
                await self.settled
            finally:
                self.settled = None

    async def _pass_or_borrow(self, kind: int, msg: bytes) -> None:
        """Pass a message on the connection held, or on one borrowed when the session holds none."""
        if self.server is not None:
            self._pass(kind, msg)
        else:
            await self._borrow_and_pass(kind, msg)

    def _wake_settled(self) -> None:
        """Wake ``_settle``: the answers it waits for came (or the connection went)."""
        settled = self.settled
        if settled is not None and not settled.done():
            settled.set_result(None)

    def _skip(self, kind: int, msg: bytes) -> None:
        """A message after a refused one, dropped as the server drops messages after an error, up to the Sync,
        which the proxy answers, or the server when the messages before the refused one went to it (their answers
        come at that Sync)."""
        if kind == 83:  # Sync
            self.skipping = False
            if self.server is not None and self.unsynced:
                self._pass(kind, msg)
            else:
                self._answer(ready_for_query(self.status))

    def _from_cache(self, msg: bytes) -> bool:
        """A simple Query a ``cache_ttl`` rule caches, outside a transaction with nothing owed: answered from the
        query cache when a fresh answer is there (True); otherwise its answer is kept when it comes (False)."""
        sql = cstring_body(msg).decode("utf-8", "surrogateescape")
        route = self._route(sql)
        self.routed = (sql, route)  # the pass that follows asks again
        if not route.cache_ttl or route.error is not None or self.status != b"I" or self.order or self.unsynced:
            return False
        key = (self.user, self.database, msg)
        hit = self.host.cache.get(key)
        if hit is None:
            empty_too = route.cache_empty_result
            if empty_too is None:
                empty_too = self.host.caches_empty_result()
            self.caching = CachedAnswer(key, route.cache_ttl, empty_too)
            return False
        self.routed = None
        self.counters.queries += 1
        started = MONOTONIC()
        self._answer(hit + ready_for_query(b"I"))
        self._count(-1, route.query, started, 0, 0)
        return True

    def _answer_alone(self, kind: int, msg: bytes) -> bool:
        """Answer without a server what needs none: a Parse of a named statement a server of this process prepared
        already (it is prepared where the statement is first bound), and the Flush or Sync that follows. A client
        that prepares while others hold every server connection in a transaction (pgbench's PQprepare blocks a
        whole thread of clients) then never waits on them."""
        if kind == 80:  # Parse
            name, query, types = parse_fields(msg[5:])
            route = self._route(query.decode("utf-8", "surrogateescape"))
            statement = server_statement(
                route.query.encode("utf-8", "surrogateescape"),
                types,
                route.hostgroup,
                route.timeout,
                self.host.schema_epoch,
            )
            known = statement.server_name in self.host.known
            if not name or route.error is not None or not known or name in self.prepared.named:
                return False
            if route.query.lstrip()[:1] in "Ee":  # an EXECUTE may name a client's statement (``_parse``)
                return False
            self.routed = None
            self._note(route.query)
            self.prepared.named[name] = statement
            self.answered_alone = True
            self._answer(PARSE_COMPLETE)
            return True
        if kind == 72:  # Flush: everything before it is answered
            return self.answered_alone
        if kind == 83 and self.answered_alone:  # Sync
            self.answered_alone = False
            self._answer(ready_for_query(self.status))
            return True
        return False

    async def _borrow_and_pass(self, kind: int, msg: bytes) -> None:
        """A message that needs a server connection the session does not hold: the rules say where (a Query's or a
        Parse's text, a named statement's hostgroup), or that the statement is refused."""
        if kind in _UNANSWERED and kind != 72:
            return  # COPY data for a COPY the server ended already: nothing to pass it to
        if self._answer_alone(kind, msg):
            return
        self.answered_alone = False
        hostgroup: int | None = None
        if kind == 81:  # Query
            route = self._route(cstring_body(msg).decode("utf-8", "surrogateescape"))
            if route.error is not None:
                self._block(kind, route.error, route.sqlstate)
                return
            hostgroup = route.hostgroup
        elif kind == 80:  # Parse
            route = self._route(parse_fields(msg[5:])[1].decode("utf-8", "surrogateescape"))
            if route.error is not None:
                self._block(kind, route.error, route.sqlstate)
                return
            hostgroup = route.hostgroup
        elif kind == 66:  # Bind of a named statement: where its Parse was routed
            statement = self.prepared.named.get(bind_statement(msg))
            hostgroup = statement.hostgroup if statement is not None else None
        try:
            server = await self._borrow(self.hostgroup if hostgroup is None else hostgroup)
        except PoolRefused as refused:
            self._refuse(refused)
            return
        if server is not None:
            self._pass(kind, msg)

    def _route(self, sql: str) -> Route:
        """The rules' route of ``sql`` (asked once per statement: the borrow's answer is kept for its pass)."""
        routed = self.routed
        if routed is not None and routed[0] == sql:
            self.routed = None
            return routed[1]
        route = self.host.router.route(sql, self.user, self.database, self.client_addr, self.proxy_port)
        if route.error is None:
            route = refuse_written_pid(route)
        self.routed = (sql, route) if self.server is None else None
        return route

    def _block(self, kind: int, error: str, sqlstate: str) -> None:
        """A statement a rule refuses (``error_msg``), or the proxy: answered with the error (a Parse's batch is then
        dropped up to its Sync, as the server would), the server never sees it."""
        self.counters.blocked += 1
        self._answer(error_response(sqlstate, error, severity="ERROR"))
        if kind == 81:
            self._answer(ready_for_query(self.status))
        else:
            self.skipping = True

    def _pass(self, kind: int, msg: bytes) -> None:
        """Write one client message to the held server connection, as the proxy must rewrite it."""
        server = self.server
        assert server is not None
        order = self.order
        if order.skipping and kind != 83:
            return  # an extended-protocol message failed: the server drops all up to the Sync, unanswered
        out = self.outbox
        if kind == 81:  # Query ("Q")
            self.counters.queries += 1
            query = self._simple_query(server, msg)
            if query is not None:
                out.append(query[0])
                order.sent(kind, query=query[1], started=MONOTONIC())
            return
        if kind in _EXTENDED:
            self.unsynced = True
            if kind == 80:  # Parse
                out.append(self._parse(server, msg))
                return
            if kind == 66:  # Bind
                bind = self._bind(server, msg)
                if not bind:
                    return  # refused
                out.append(bind)
                order.sent(kind)
                return
            if kind in (68, 67):  # Describe, Close
                self._describe_or_close(server, kind, msg)
                return
            if kind == 69:  # Execute: timed for the digest statistics and its timeout
                self.counters.queries += 1
                out.append(msg)
                text, timeout = self.portals.get(msg[5 : msg.index(b"\0", 5)], _NO_PORTAL)
                order.sent(kind, query=text, started=MONOTONIC())
                self.timer.arm(server, timeout or self.host.default_timeout_ms())
                return
            out.append(msg)
            if kind != 72:  # Flush is not answered
                order.sent(kind)
            return
        if kind == 83:  # Sync
            self.unsynced = False
        out.append(msg)
        if kind not in _UNANSWERED:
            order.sent(kind)

    # ------------------------------------------------------------------------------------------- statements

    def _simple_query(self, server: ServerConn, msg: bytes) -> tuple[bytes, str] | None:
        """A simple Query: refused or rewritten by the rules, its settings change and pins noted, DEALLOCATE of a
        client's statement renamed."""
        sql = cstring_body(msg).decode("utf-8", "surrogateescape")
        route = self._route(sql)
        if route.error is not None:
            self._block(81, route.error, route.sqlstate)
            return None
        if route.query is not sql:
            sql = route.query
            msg = message(b"Q", sql.encode("utf-8", "surrogateescape") + b"\0")
        self.timer.arm(server, route.timeout or self.host.default_timeout_ms())
        self._note(sql)
        first = sql.lstrip()[:1]
        if first in ("E", "e"):
            return self._execute_named(server, sql, sync=True) or msg, sql
        if first not in ("D", "d"):  # what follows reads DROP DATABASE, DISCARD and DEALLOCATE only
            return msg, sql
        if DROPS_STATEMENTS.match(sql):
            server.prepared.clear()
            self.prepared.named.clear()
            return msg, sql
        name = deallocated(sql)
        statement = self.prepared.named.pop(name, None) if name is not None else None
        if statement is None:
            return msg, sql
        prefix = self.prepared.ensure(server, self.order, statement, sync=True)
        server.prepared.pop(statement.server_name, None)
        return prefix + message(b"Q", f"DEALLOCATE {statement.server_name}".encode() + b"\0"), sql

    def _note(self, sql: str) -> None:
        """Note what ``sql`` does to the session: a setting changed, or a reason to pin it (a SET of a parameter
        value, whose value the proxy cannot replay)."""
        reason = pin_reason(sql)
        change = read_change(sql)
        if change is not None and change[1] is not None and "$" in change[1]:
            reason, change = "a SET of a parameter", None
        if reason is not None and self.pinned is None:
            self.pinned = reason
            log.debug("pgsql session %d pinned to its server connection: %s", self.id, reason)
        if change is not None:
            self.pending_changes.append(change)
        if sql[:1] in _DDL_FIRST and _CHANGES_SCHEMA.match(sql) is not None:
            self.host.schema_epoch += 1  # the statements prepared from now on are read afresh by the server

    def _parse(self, server: ServerConn, msg: bytes) -> bytes:
        """A Parse: a named one is remembered and prepared under the proxy's name (or answered by the proxy when
        the connection holds it already); the unnamed one passes as it is."""
        name, query, types = parse_fields(msg[5:])
        route = self._route(query.decode("utf-8", "surrogateescape"))
        if route.error is not None:
            self._block(80, route.error, route.sqlstate)
            return b""
        if route.query != query.decode("utf-8", "surrogateescape"):
            query = route.query.encode("utf-8", "surrogateescape")
            msg = parse_message(name, query, types)
        existing = self.prepared.named.get(name) if name else None
        if existing is not None and existing.query == route.query:  # valid, it was prepared: "already exists"
            text = f'prepared statement "{name}" already exists'
            self._answer(error_response(DUPLICATE_STATEMENT, text, severity="ERROR"))
            self.skipping = True  # the messages up to the Sync are dropped, as the server drops them
            return b""
        if existing is not None:  # the server's own refusal (its syntax error first, else "already exists")
            prefix = self.prepared.ensure(server, self.order, existing)
            self.order.sent(80)
            return prefix + parse_message(existing.server_name, query, types)
        self._note(route.query)
        if not name:
            self.unnamed_query = route.query
            self.unnamed_timeout = route.timeout
            named = self._execute_named(server, route.query, types=types) if route.query.lstrip()[:1] in "Ee" else b""
            self.order.sent(80)  # after the Parse ``_execute_named`` may send first
            return named or msg
        executes = self.prepared.executed(route.query) if route.query.lstrip()[:1] in "Ee" else None
        if executes is not None:  # its text names the server's statement, prepared here first
            query = executes[1]
        statement = server_statement(query, types, route.hostgroup, route.timeout, self.host.schema_epoch)
        self.prepared.named[name] = statement
        prefix = b""
        if executes is not None:
            statement.depends = executes[0]
            prefix = self.prepared.ensure(server, self.order, executes[0])
        if statement.server_name in server.prepared:
            server.prepared.move_to_end(statement.server_name)
            return prefix + self._answer(PARSE_COMPLETE, 80, (name, statement))
        closes = self.prepared.remember(server, self.order, statement.server_name)
        self.order.sent(80, FORWARD, statement.server_name, named=(name, statement))
        return prefix + closes + statement.parse

    def _bind(self, server: ServerConn, msg: bytes) -> bytes:
        """A Bind of a client's statement names the server's, prepared there first if the connection lacks it; b""
        when it is refused (it binds a client's process id to pg_terminate_backend or pg_cancel_backend: answered)."""
        portal = msg[5 : msg.index(b"\0", 5)]
        name = bind_statement(msg)
        statement = self.prepared.named.get(name) if name else None
        query = statement.query if statement is not None else self.unnamed_query if not name else ""
        pid = bound_client_pid(query, msg, 5)
        if pid is not None:
            self._block(66, refusal(pid), REFUSED)
            return b""
        if statement is not None:
            self.portals[portal] = (statement.query, statement.timeout)
        else:
            self.portals[portal] = (self.unnamed_query, self.unnamed_timeout) if not name else _NO_PORTAL
        if statement is None:
            return msg  # the unnamed statement, or one the client never prepared (the server says so)
        prefix = self.prepared.ensure(server, self.order, statement)
        return prefix + rename_bind(msg, statement.server_name)

    def _describe_or_close(self, server: ServerConn, kind: int, msg: bytes) -> None:
        what, name = target(msg[5:])
        statement = self.prepared.named.get(name) if what == b"S" and name else None
        if statement is None:
            self.outbox.append(msg)
            self.order.sent(kind)
            return
        if kind == 67:  # Close of a client's statement: the server keeps it for others
            del self.prepared.named[name]
            self._answer(CLOSE_COMPLETE, 67, (name, statement))
            return
        prefix = self.prepared.ensure(server, self.order, statement)
        self.outbox.append(prefix + renamed_target(b"D", statement.server_name))
        self.order.sent(kind)

    def _execute_named(self, server: ServerConn, sql: str, sync: bool = False, types: bytes | None = None) -> bytes:
        """An ``EXECUTE name`` of a statement the client prepared by the protocol, as a Query (or an unnamed Parse
        with ``types``) naming the server's statement, prepared on ``server`` first; b"" when it executes none of
        the client's (``PreparedStatements.executed``)."""
        executes = self.prepared.executed(sql)
        if executes is None:
            return b""
        statement, text = executes
        prefix = self.prepared.ensure(server, self.order, statement, sync=sync)
        if types is None:
            return prefix + message(b"Q", text + b"\0")
        return prefix + parse_message("", text, types)

    def _answer(self, answer: bytes, kind: int = 0, named: tuple[str, Statement] | None = None) -> bytes:
        """The proxy's own answer, written to the client in its turn (``kind`` and ``named``: the client's Parse or
        Close it answers, and the name and statement it creates or drops)."""
        self.client.write(self.order.answer_myself(answer, kind, named))
        return b""

    # ------------------------------------------------------------------------------------------- the server

    async def _borrow(self, hostgroup: int) -> ServerConn | None:
        """A server connection of ``hostgroup`` for the session, its settings made the session's; None when the
        client is gone."""
        server = await self.pools.acquire(hostgroup, (self.user, self.database), self.secret)
        if self.ended:
            self.pools.release(server, True)
            return None
        self.adopt(server)
        return server

    def adopt(self, server: ServerConn) -> None:
        """Take ``server`` for the session: its settings made the session's (the SETs' answers left out), and the
        relay of its answers started."""
        sql = replay(server.settings, self.settings)
        if sql:
            server.conn.wire.write(message(b"Q", sql.encode("utf-8", "surrogateescape") + b"\0"))
            self.order.sent(81, SWALLOW)
            server.settings = dict(self.settings)
        self.server = server
        server.conn.wire.sink = self._relay

    def _relay(self, batch: list[bytes] | None) -> None:
        """The held server connection's answers as they arrive (None: the connection is gone), passed to the client
        in one write; the connection goes back to its pool at a ReadyForQuery that leaves nothing owed."""
        server = self.server
        if server is None:
            return
        if batch is None:
            if self.server_ended_it and not self.ended:  # the client has the server's own reason already
                self.client.close()
                self.ended = True
            elif not self.ended:
                why = server.conn.wire.closed or "the connection broke"
                self._fatal(CONNECTION_FAILURE, f"ProxyFleet: lost the server connection: {why}")
            self._release(server, False)
            return
        client = self.client
        order = self.order
        outs: list[bytes] = []
        last = len(batch) - 1
        for at, msg in enumerate(batch):
            kind = msg[0]
            out, ended = order.received(msg)
            if self.timer.fired_ms and kind == 69:  # the server's answer to the proxy's cancel: say why
                out = self.timer.error() + out[len(msg) :]
            caching = self.caching
            if caching is not None:
                if kind == 90 and ended is not None and ended.kind == 81:  # the cached Query's ReadyForQuery
                    self.caching = None
                    caching.store(self.host.cache, msg[5:6])
                elif out:
                    caching.add(kind, out)
            if order.failed_parse:
                for name in order.failed_parse:
                    server.prepared.pop(name, None)
                order.failed_parse.clear()
            if order.parsed:
                self.host.known.update(dict.fromkeys(order.parsed))
                order.parsed.clear()
            if order.undone:
                self.prepared.undo(order.undone)
            if kind == 67:  # CommandComplete: its tag
                self.last_tag = cstring_body(msg)
            elif kind == 69 and is_fatal(msg):  # the server ends the connection (an administrator, a shutdown)
                self.server_ended_it = True
            if ended is not None and ended.query:
                self._record(ended, server)
            if out:
                outs.append(out)
            if kind == 90:  # ReadyForQuery ("Z")
                self.status = msg[5:6]
                if not order:
                    self.timer.stop()
                self.timer.fired_ms = 0
                if ended:
                    self._transaction_state()
                    if at == last and self._may_release():
                        client.write(b"".join(outs))
                        self._release(server, True)
                        return
        client.write(b"".join(outs))
        if not order.synced_parse:
            self._wake_settled()
        if client.writing_paused:
            server.conn.wire.pause()  # until the client reads what it was sent
            client.on_drained = self._resume_server

    def _record(self, statement: Entry, server: ServerConn) -> None:
        """Count a statement that ended in the digest statistics (``pgsql_query_digest``)."""
        sent, affected = tag_rows(self.last_tag)
        self._count(server.target.server.hostgroup_id, statement.query, statement.started, sent, affected)

    def _count(self, hostgroup: int, query: str, started: float, sent: int, affected: int) -> None:
        """Count a statement in the digest statistics (hostgroup -1: answered from the query cache)."""
        ended = MONOTONIC()
        elapsed_us = int((ended - started) * 1_000_000)
        digest = compute_pg_digest(query)
        self.host.digests.record(
            hostgroup, self.database, self.user, self.client_addr, digest.hash, digest.text, elapsed_us, sent, affected,
            ended, self.digest_memo,
        )  # fmt: skip

    # ------------------------------------------------------------------------------------------- timeouts

    def _still_running(self, server: ServerConn) -> bool:
        return self.server is server and bool(self.order)

    def _count_timeout(self) -> None:
        self.counters.timed_out += 1

    def _resume_server(self) -> None:
        server = self.server
        if server is not None:
            server.conn.wire.resume()

    def _transaction_state(self) -> None:
        """At the client's ReadyForQuery: a transaction ended? Then its settings changes stand (or not)."""
        if self.status == b"I":
            if self.last_tag.startswith(b"ROLLBACK"):
                self.pending_changes.clear()
            for change in self.pending_changes:
                apply_change(self.settings, change, self.defaults)
            self.pending_changes.clear()
            self.counters.transactions += 1
            server = self.server
            if server is not None:
                server.settings = dict(self.settings)

    def _may_release(self) -> bool:
        return (
            self.status == b"I"
            and not self.order
            and not self.unsynced
            and self.pinned is None
            and not self.session_pooling
        )

    def _release(self, server: ServerConn, reusable: bool) -> None:
        reusable = reusable and not self.order
        self.timer.stop()
        server.conn.wire.sink = None
        server.conn.wire.resume()  # a connection paused for a slow client is read again by whoever is next
        self.client.on_drained = None
        if self.server is server:
            self.server = None
            self.order = ResponseOrder()
            self._wake_settled()
        self.pools.release(server, reusable)

    # ------------------------------------------------------------------------------------------- the end

    def _refuse(self, refused: PoolRefused) -> None:
        """No server connection: the client gets the error and the session ends (its messages in flight have
        nowhere to go)."""
        self.client.write(refused.response())
        self.client.close()
        self.ended = True

    def _fatal(self, sqlstate: str, text: str) -> None:
        self.client.write(error_response(sqlstate, text))
        self.client.close()
        self.ended = True

    async def _end(self) -> None:
        """The client is gone: its server connection goes back clean (DISCARD ALL after a pinned session) or is
        closed (in a transaction, or answers still owed)."""
        self.ended = True
        server = self.server
        if server is not None:
            server.conn.wire.sink = None
            server.conn.wire.resume()
            self.server = None
            clean = self.status == b"I" and not self.order and not self.unsynced
            if clean and self.pinned is not None:
                clean = await self._discard_all(server)
            self.pools.release(server, clean)
        self.client.close()

    async def _discard_all(self, server: ServerConn) -> bool:
        """Reset a connection a pinned session leaves (DISCARD ALL); whether it came back idle."""
        try:
            await server.conn.query("DISCARD ALL")
        except Exception:
            return False
        server.prepared.clear()
        server.settings = {}
        return True


def _may_vacate(kind: int, msg: bytes) -> bool:
    """Whether a Query's or Parse's text may be a statement that ``vacated_database`` reads."""
    at = 5 if kind == 81 else msg.index(b"\0", 5) + 1
    return at < len(msg) and msg[at] in _VACATE_FIRST and _MAY_VACATE.match(msg, at) is not None


#: A portal the session does not know: no text, the default timeout.
_NO_PORTAL = ("", 0)


#: CommandComplete tags whose count is of rows sent to the client (the others' is of rows changed).
_SENT_TAGS = (b"SELECT", b"FETCH", b"COPY", b"MOVE")


def tag_rows(tag: bytes) -> tuple[int, int]:
    """(rows sent, rows affected) of a CommandComplete tag ("SELECT 5", "INSERT 0 3", "UPDATE 2", ...)."""
    count = tag.rpartition(b" ")[2]
    if not count.isdigit():
        return 0, 0
    rows = int(count)
    return (rows, 0) if tag.startswith(_SENT_TAGS) else (0, rows)


def cstring_body(msg: bytes) -> bytes:
    """A message's body without its final NUL (a Query's text, a CommandComplete's tag); b"" for an empty body
    (never a slice that ends before it starts: compiled code refuses those)."""
    return msg[5 : max(5, len(msg) - 1)]
