"""One PostgreSQL client session of the pooling proxy, after its login, from the client's side: its messages read,
checked against the rules (``routing``), answered by the proxy where no server is needed, rewritten where they name
a prepared statement (``statements``, ``prepared``), and written to the server connection its link borrows for the
transaction or holds for the session (``link.PgLink``: the relay of the server's answers, the connection given back
when the server is idle with nothing owed). COPY in both directions, notices, notifications and errors pass as they
come.
"""

from __future__ import annotations

import logging
import re
import struct

from proxyapp.clock import MONOTONIC
from proxyapp.pgproxy.caching import CachedAnswer
from proxyapp.pgproxy.client_pids import REFUSED, bound_client_pid, refusal, refuse_written_pid
from proxyapp.pgproxy.host import SessionHost
from proxyapp.pgproxy.link import PgLink
from proxyapp.pgproxy.pool import PoolRefused, ServerConn
from proxyapp.pgproxy.prepared import PreparedStatements
from proxyapp.pgproxy.responses import FORWARD
from proxyapp.pgproxy.routing import Route
from proxyapp.pgproxy.settings import DROPS_STATEMENTS, deallocated, pin_reason, read_change, vacated_database
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
from proxyapp.pgsql.auth import ServerSecret
from proxyapp.pgsql.messages import cstring_body, error_response, message, ready_for_query
from proxyapp.pgsql.wire import PeerGone, PgWire, ProtocolViolation

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


class PgSession:
    """A logged-in client of the pooling proxy: its messages read, checked against the rules, rewritten where they
    name a prepared statement, and written to the server connection its link holds (``link.PgLink``), which relays
    the answers back.

    Why ~460 lines: the message loop and the rewriting of each message that names a statement or a portal (Parse,
    Bind, Describe, Close, Execute, a Query's EXECUTE or DEALLOCATE) read and write the same per-message state (the
    session's statement names, its portals, the outbox, the skip to the next Sync) on the pooler's hot path; the
    server side is the link's, the statements' names and their bookkeeping are ``statements`` and ``prepared``."""

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
        self.counters = host.counters
        self.proxy_port = client.local_port()
        self.id = session_id
        self.user = user
        self.database = database
        self.hostgroup = hostgroup
        self.skipping = False  # a blocked extended-protocol message: the client's messages are dropped until Sync
        self.routed: tuple[str, Route] | None = None  # the route the borrow asked for, for the pass that follows
        self.answered_alone = False  # the proxy answered the client's messages since its last Sync itself
        self.unnamed_query = ""  # the text of the unnamed statement
        self.unnamed_timeout = 0  # the unnamed statement's rule timeout (ms; 0: the default)
        #: portal name -> its statement's text (for the digest statistics) and rule timeout (ms; 0: the default)
        self.portals: dict[bytes, tuple[str, int]] = {}
        self.prepared = PreparedStatements(host.max_prepared)
        self.link = PgLink(
            client,
            host,
            self.prepared,
            session_id=session_id,
            user=user,
            database=database,
            secret=secret,
            pool_mode=pool_mode,
            settings=settings,
        )

    # ------------------------------------------------------------------------------------------- the client

    async def run(self) -> None:
        """Serve the client until it leaves."""
        link = self.link
        try:
            while True:
                try:
                    batch = await self.client.batch()
                except ProtocolViolation as exc:
                    link.fatal("08P01", f"ProxyFleet: {exc}")
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
                        elif link.server is not None and not (link.order.synced_parse and kind in _NAMING):
                            self._pass(kind, msg)
                        elif link.server is not None:
                            await self._settle()  # then the connection may have gone back to its pool
                            await self._pass_or_borrow(kind, msg)
                        else:
                            await self._borrow_and_pass(kind, msg)
                    except (ValueError, IndexError, struct.error) as broken:  # a body the proxy had to read is broken
                        link.fatal("08P01", f"ProxyFleet: a malformed {chr(kind)!r} message: {broken}")
                        return
                    if link.ended:
                        return
                await self._flush()
        except PeerGone:
            return
        finally:
            await self._end()

    async def _flush(self) -> None:
        """Write what the client's messages send the server, at once; wait while the server is slow to read."""
        server = self.link.server
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
        await self.link.wait_settled()

    async def _pass_or_borrow(self, kind: int, msg: bytes) -> None:
        """Pass a message on the connection held, or on one borrowed when the session holds none."""
        if self.link.server is not None:
            self._pass(kind, msg)
        else:
            await self._borrow_and_pass(kind, msg)

    def _skip(self, kind: int, msg: bytes) -> None:
        """A message after a refused one, dropped as the server drops messages after an error, up to the Sync,
        which the proxy answers, or the server when the messages before the refused one went to it (their answers
        come at that Sync)."""
        if kind == 83:  # Sync
            self.skipping = False
            if self.link.server is not None and self.link.unsynced:
                self._pass(kind, msg)
            else:
                self._answer(ready_for_query(self.link.status))

    def _from_cache(self, msg: bytes) -> bool:
        """A simple Query a ``cache_ttl`` rule caches, outside a transaction with nothing owed: answered from the
        query cache when a fresh answer is there (True); otherwise its answer is kept when it comes (False)."""
        sql = cstring_body(msg).decode("utf-8", "surrogateescape")
        route = self._route(sql)
        self.routed = (sql, route)  # the pass that follows asks again
        if (
            not route.cache_ttl
            or route.error is not None
            or self.link.status != b"I"
            or self.link.order
            or self.link.unsynced
        ):
            return False
        key = (self.user, self.database, msg)
        hit = self.host.cache.get(key)
        if hit is None:
            empty_too = route.cache_empty_result
            if empty_too is None:
                empty_too = self.host.caches_empty_result()
            self.link.caching = CachedAnswer(key, route.cache_ttl, empty_too)
            return False
        self.routed = None
        self.counters.queries += 1
        started = MONOTONIC()
        self._answer(hit + ready_for_query(b"I"))
        self.link.count(-1, route.query, started, 0, 0)
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
            self._answer(ready_for_query(self.link.status))
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
            server = await self.link.borrow(self.hostgroup if hostgroup is None else hostgroup)
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
        route = self.host.router.route(sql, self.user, self.database, self.link.client_addr, self.proxy_port)
        if route.error is None:
            route = refuse_written_pid(route)
        self.routed = (sql, route) if self.link.server is None else None
        return route

    def _block(self, kind: int, error: str, sqlstate: str) -> None:
        """A statement a rule refuses (``error_msg``), or the proxy: answered with the error (a Parse's batch is then
        dropped up to its Sync, as the server would), the server never sees it."""
        self.counters.blocked += 1
        self._answer(error_response(sqlstate, error, severity="ERROR"))
        if kind == 81:
            self._answer(ready_for_query(self.link.status))
        else:
            self.skipping = True

    def _pass(self, kind: int, msg: bytes) -> None:
        """Write one client message to the held server connection, as the proxy must rewrite it."""
        server = self.link.server
        assert server is not None
        order = self.link.order
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
            self.link.unsynced = True
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
                self.link.timer.arm(server, timeout or self.host.default_timeout_ms())
                return
            out.append(msg)
            if kind != 72:  # Flush is not answered
                order.sent(kind)
            return
        if kind == 83:  # Sync
            self.link.unsynced = False
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
        self.link.timer.arm(server, route.timeout or self.host.default_timeout_ms())
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
        prefix = self.prepared.ensure(server, self.link.order, statement, sync=True)
        server.prepared.pop(statement.server_name, None)
        return prefix + message(b"Q", f"DEALLOCATE {statement.server_name}".encode() + b"\0"), sql

    def _note(self, sql: str) -> None:
        """Note what ``sql`` does to the session: a setting changed, or a reason to pin it (a SET of a parameter
        value, whose value the proxy cannot replay)."""
        reason = pin_reason(sql)
        change = read_change(sql)
        if change is not None and change[1] is not None and "$" in change[1]:
            reason, change = "a SET of a parameter", None
        if reason is not None and self.link.pinned is None:
            self.link.pinned = reason
            log.debug("pgsql session %d pinned to its server connection: %s", self.id, reason)
        if change is not None:
            self.link.pending_changes.append(change)
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
            prefix = self.prepared.ensure(server, self.link.order, existing)
            self.link.order.sent(80)
            return prefix + parse_message(existing.server_name, query, types)
        self._note(route.query)
        if not name:
            self.unnamed_query = route.query
            self.unnamed_timeout = route.timeout
            named = self._execute_named(server, route.query, types=types) if route.query.lstrip()[:1] in "Ee" else b""
            self.link.order.sent(80)  # after the Parse ``_execute_named`` may send first
            return named or msg
        executes = self.prepared.executed(route.query) if route.query.lstrip()[:1] in "Ee" else None
        if executes is not None:  # its text names the server's statement, prepared here first
            query = executes[1]
        statement = server_statement(query, types, route.hostgroup, route.timeout, self.host.schema_epoch)
        self.prepared.named[name] = statement
        prefix = b""
        if executes is not None:
            statement.depends = executes[0]
            prefix = self.prepared.ensure(server, self.link.order, executes[0])
        if statement.server_name in server.prepared:
            server.prepared.move_to_end(statement.server_name)
            return prefix + self._answer(PARSE_COMPLETE, 80, (name, statement))
        closes = self.prepared.remember(server, self.link.order, statement.server_name)
        self.link.order.sent(80, FORWARD, statement.server_name, named=(name, statement))
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
        prefix = self.prepared.ensure(server, self.link.order, statement)
        return prefix + rename_bind(msg, statement.server_name)

    def _describe_or_close(self, server: ServerConn, kind: int, msg: bytes) -> None:
        what, name = target(msg[5:])
        statement = self.prepared.named.get(name) if what == b"S" and name else None
        if statement is None:
            self.outbox.append(msg)
            self.link.order.sent(kind)
            return
        if kind == 67:  # Close of a client's statement: the server keeps it for others
            del self.prepared.named[name]
            self._answer(CLOSE_COMPLETE, 67, (name, statement))
            return
        prefix = self.prepared.ensure(server, self.link.order, statement)
        self.outbox.append(prefix + renamed_target(b"D", statement.server_name))
        self.link.order.sent(kind)

    def _execute_named(self, server: ServerConn, sql: str, sync: bool = False, types: bytes | None = None) -> bytes:
        """An ``EXECUTE name`` of a statement the client prepared by the protocol, as a Query (or an unnamed Parse
        with ``types``) naming the server's statement, prepared on ``server`` first; b"" when it executes none of
        the client's (``PreparedStatements.executed``)."""
        executes = self.prepared.executed(sql)
        if executes is None:
            return b""
        statement, text = executes
        prefix = self.prepared.ensure(server, self.link.order, statement, sync=sync)
        if types is None:
            return prefix + message(b"Q", text + b"\0")
        return prefix + parse_message("", text, types)

    def _answer(self, answer: bytes, kind: int = 0, named: tuple[str, Statement] | None = None) -> bytes:
        """The proxy's own answer, written to the client in its turn (``kind`` and ``named``: the client's Parse or
        Close it answers, and the name and statement it creates or drops)."""
        self.client.write(self.link.order.answer_myself(answer, kind, named))
        return b""

    # ------------------------------------------------------------------------------------------- the server

    # ------------------------------------------------------------------------------------------- timeouts

    # ------------------------------------------------------------------------------------------- the end

    def _refuse(self, refused: PoolRefused) -> None:
        """No server connection: the client gets the error and the session ends (its messages in flight have
        nowhere to go)."""
        self.client.write(refused.response())
        self.client.close()
        self.link.ended = True

    async def _end(self) -> None:
        """The client is gone: its server connection goes back clean (DISCARD ALL after a pinned session) or is
        closed (in a transaction, or answers still owed)."""
        await self.link.end()
        self.client.close()


def _may_vacate(kind: int, msg: bytes) -> bool:
    """Whether a Query's or Parse's text may be a statement that ``vacated_database`` reads."""
    at = 5 if kind == 81 else msg.index(b"\0", 5) + 1
    return at < len(msg) and msg[at] in _VACATE_FIRST and _MAY_VACATE.match(msg, at) is not None


#: A portal the session does not know: no text, the default timeout.
_NO_PORTAL = ("", 0)
