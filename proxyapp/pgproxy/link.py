"""The server side of one PostgreSQL client session: the connection it borrows for a transaction (or holds for the
whole session), its settings replayed there (``settings``), the relay of the server's answers to the client in the
wire's callback (``relay``: ``responses`` leaves out the answers to the proxy's own messages), the digest statistics
of what ended, and the connection given back at a ReadyForQuery that leaves the server idle with nothing owed.

The client side (``session.PgSession``) writes the client's messages to ``server`` and notes what they change here
(``unsynced``, ``pinned``, ``pending_changes``); both read the answers' order (``order``) and the server's
transaction status (``status``).
"""

from __future__ import annotations

import asyncio
import logging

from proxyapp.clock import MONOTONIC
from proxyapp.pgproxy.caching import CachedAnswer
from proxyapp.pgproxy.host import SessionHost
from proxyapp.pgproxy.pool import ServerConn
from proxyapp.pgproxy.prepared import PreparedStatements
from proxyapp.pgproxy.responses import SWALLOW, Entry, ResponseOrder
from proxyapp.pgproxy.settings import apply_change, replay
from proxyapp.pgproxy.timeout import StatementTimer
from proxyapp.pgsql.auth import ServerSecret
from proxyapp.pgsql.messages import CONNECTION_FAILURE, cstring_body, error_response, is_fatal, message, tag_rows
from proxyapp.pgsql.wire import PgWire
from proxyapp.report.stats import DigestMemo
from proxyapp.sql.digest import compute_pg_digest

log = logging.getLogger("proxyapp.pgproxy")


class PgLink:
    """A session's server connection, and what the session's transaction left on it."""

    def __init__(
        self,
        client: PgWire,
        host: SessionHost,
        prepared: PreparedStatements,
        *,
        session_id: int,
        user: str,
        database: str,
        secret: ServerSecret,
        pool_mode: str,
        settings: dict[str, str],
    ) -> None:
        self.client = client
        self.host = host
        self.pools = host.pools
        self.counters = host.counters
        self.prepared = prepared
        self.session_id = session_id
        self.user = user
        self.database = database
        self.secret = secret  # what its server connections log in with
        self.client_addr = client.peer_address()
        self.session_pooling = pool_mode == "session"
        self.defaults = dict(settings)  # the startup settings: what RESET returns to
        self.settings = dict(settings)
        self.pending_changes: list[tuple[str, str | None]] = []  # SETs of the open transaction
        self.server: ServerConn | None = None
        self.order = ResponseOrder()
        self.status = b"I"
        self.unsynced = False
        self.pinned: str | None = None
        self.last_tag = b""  # the latest CommandComplete's tag
        self.server_ended_it = False  # the held server connection said FATAL: it closes, and that error is the one
        self.digest_memo = DigestMemo()  # its entries in the digest statistics (``DigestStats.record``)
        self.caching: CachedAnswer | None = None  # the simple Query whose answer goes to the query cache
        self.timer = StatementTimer(self.pools, self._still_running, self._count_timeout)
        self.settled: asyncio.Future[None] | None = None  # set when the answers ``PgSession._settle`` waits for came
        self.ended = False

    async def borrow(self, hostgroup: int) -> ServerConn | None:
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
        server.conn.wire.sink = self.relay

    def relay(self, batch: list[bytes] | None) -> None:
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
                self.fatal(CONNECTION_FAILURE, f"ProxyFleet: lost the server connection: {why}")
            self.release(server, False)
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
                    self.transaction_state()
                    if at == last and self.may_release():
                        client.write(b"".join(outs))
                        self.release(server, True)
                        return
        client.write(b"".join(outs))
        if not order.synced_parse:
            self.wake_settled()
        if client.writing_paused:
            server.conn.wire.pause()  # until the client reads what it was sent
            client.on_drained = self._resume_server

    def _record(self, statement: Entry, server: ServerConn) -> None:
        """Count a statement that ended in the digest statistics (``pgsql_query_digest``)."""
        sent, affected = tag_rows(self.last_tag)
        self.count(server.target.server.hostgroup_id, statement.query, statement.started, sent, affected)

    def count(self, hostgroup: int, query: str, started: float, sent: int, affected: int) -> None:
        """Count a statement in the digest statistics (hostgroup -1: answered from the query cache)."""
        ended = MONOTONIC()
        elapsed_us = int((ended - started) * 1_000_000)
        digest = compute_pg_digest(query)
        self.host.digests.record(
            hostgroup, self.database, self.user, self.client_addr, digest.hash, digest.text, elapsed_us, sent, affected,
            ended, self.digest_memo,
        )  # fmt: skip

    def _still_running(self, server: ServerConn) -> bool:
        return self.server is server and bool(self.order)

    def _count_timeout(self) -> None:
        self.counters.timed_out += 1

    def _resume_server(self) -> None:
        server = self.server
        if server is not None:
            server.conn.wire.resume()

    def transaction_state(self) -> None:
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

    def may_release(self) -> bool:
        return (
            self.status == b"I"
            and not self.order
            and not self.unsynced
            and self.pinned is None
            and not self.session_pooling
        )

    def release(self, server: ServerConn, reusable: bool) -> None:
        reusable = reusable and not self.order
        self.timer.stop()
        server.conn.wire.sink = None
        server.conn.wire.resume()  # a connection paused for a slow client is read again by whoever is next
        self.client.on_drained = None
        if self.server is server:
            self.server = None
            self.order = ResponseOrder()
            self.wake_settled()
        self.pools.release(server, reusable)

    def wake_settled(self) -> None:
        """Wake ``_settle``: the answers it waits for came (or the connection went)."""
        settled = self.settled
        if settled is not None and not settled.done():
            settled.set_result(None)

    def fatal(self, sqlstate: str, text: str) -> None:
        self.client.write(error_response(sqlstate, text))
        self.client.close()
        self.ended = True

    async def discard_all(self, server: ServerConn) -> bool:
        """Reset a connection a pinned session leaves (DISCARD ALL); whether it came back idle."""
        try:
            await server.conn.query("DISCARD ALL")
        except Exception:
            return False
        server.prepared.clear()
        server.settings = {}
        return True

    async def wait_settled(self) -> None:
        """Wait until the server answered every Sync sent (``PgSession._settle``), or the connection went."""
        while self.server is not None and self.order.synced_parse and not self.ended:
            self.settled = asyncio.get_running_loop().create_future()
            try:
                await self.settled
            finally:
                self.settled = None

    async def end(self) -> None:
        """The client is gone: the server connection goes back clean (DISCARD ALL after a pinned session) or is
        closed (in a transaction, or answers still owed)."""
        self.ended = True
        server = self.server
        if server is not None:
            server.conn.wire.sink = None
            server.conn.wire.resume()
            self.server = None
            clean = self.status == b"I" and not self.order and not self.unsynced
            if clean and self.pinned is not None:
                clean = await self.discard_all(server)
            self.pools.release(server, clean)
