"""The pooling proxy's listener (``pgsql-interfaces``): logins, sessions, cancel requests and what it reports.

Every worker process binds the address with ``SO_REUSEPORT``. A client logs in (``login``); the proxy then borrows
a server connection of the user's ``default_hostgroup`` for the user and database asked for, which both checks
that the server lets the user in (its refusal goes to the client as it is, fields intact) and gives the
ParameterStatus values the client is told. Under transaction pooling that connection goes back to the pool at once.

Each session is told a process id of the proxy's and a random 32-bit key. The id is random too, 2**30 or more, where
no server's process can be (Linux's ids stay below 2**22), so that a client's ``pg_terminate_backend`` of it can never
reach an unrelated server process (the session refuses it, ``CLIENT_PIDS``); its remainder modulo the number of
workers says which worker process serves it, as the MySQL sessions' numbers do. A CancelRequest naming them is sent
on, with the server's own id and key, to the server running the session's query; one that arrives at another worker
process is handed to the right one through its admin endpoint.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import ssl
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from proxyapp.backends.topology import MonitorState, show_address
from proxyapp.clients.owner import worker_of
from proxyapp.clients.throttle import AuthThrottle
from proxyapp.clock import Clock
from proxyapp.config.document import Config
from proxyapp.pgproxy.client_pids import CLIENT_PIDS
from proxyapp.pgproxy.host import SessionCounters
from proxyapp.pgproxy.login import Cancel, LoginFailed, authenticate, negotiate
from proxyapp.pgproxy.pool import PgPools, PoolRefused, ServerConn
from proxyapp.pgproxy.routing import PgRouter
from proxyapp.pgproxy.session import PgSession
from proxyapp.pgproxy.settings import quote_literal, startup_settings
from proxyapp.pgsql.backend import PgError, PgUnreachable
from proxyapp.pgsql.messages import (
    CANNOT_CONNECT_NOW,
    TOO_MANY_CONNECTIONS,
    auth_request,
    backend_key_data,
    error_response,
    parameter_status,
    ready_for_query,
)
from proxyapp.pgsql.wire import PeerGone, PgWire, ProtocolViolation
from proxyapp.report.stats import DigestStats, GlobalCounters
from proxyapp.rules.cache import QueryCache
from proxyapp.tasks import spawn

log = logging.getLogger("proxyapp.pgproxy")

#: The most statements the proxy remembers as prepared by a server (answering their Parse alone).
_KNOWN_STATEMENTS = 10_000

#: Forwards a cancel request to another worker process: (worker index, pid, key).
CancelForwarder = Callable[[int, int, int], Awaitable[None]]


#: Spellings of client_encoding a worker remembers (a client may make up any number).
_ENCODINGS_KEPT = 256


def _address(text: str) -> tuple[str, int] | None:
    """``pgsql-interfaces`` as (host, port); None for '' (no listener)."""
    if not text.strip():
        return None
    host, _, port = text.strip().split(";")[0].rpartition(":")
    return (host.strip("[]") or "127.0.0.1", int(port))


class PgFront:
    """The PostgreSQL pooling proxy of one process."""

    def __init__(
        self,
        config: Config,
        clock: Clock,
        throttle: AuthThrottle,
        forward_cancel: CancelForwarder,
        close_idle_elsewhere: Callable[[str], Awaitable[None]],
        worker: int = 0,
        workers: int = 1,
    ) -> None:
        self.config = config
        self.clock = clock
        self.throttle = throttle
        self.forward_cancel = forward_cancel
        self.close_idle_elsewhere = close_idle_elsewhere  # the other workers' ``close_idle``
        self.worker = worker
        self.workers = workers
        self.pools = PgPools(workers)
        self.counters = SessionCounters()
        self.router = PgRouter(config)
        self.known: OrderedDict[str, None] = OrderedDict()  # statements a server prepared (``PgSession``)
        self.schema_epoch = 0  # schema-changing statements sent (``SessionHost.schema_epoch``)
        self.digests = DigestStats(schema_column="database")  # stats_pgsql_query_digest
        self.cache = QueryCache(
            config.variables.integer("pgsql-query_cache_size_MB") << 20, GlobalCounters(), clock.now
        )
        self.tls: ssl.SSLContext | None = None
        self.sessions: dict[int, PgSession] = {}
        self.keys: dict[int, int] = {}  # session id -> the secret key its client was told
        self.encodings: dict[str, str] = {}  # a client_encoding as clients spell it -> as the server does
        self.clients_total = 0
        self.logins_failed = 0
        self.connecting = 0  # clients still logging in
        self.state = "off"
        self._address: tuple[str, int] | None = None
        self._server: asyncio.AbstractServer | None = None
        self._bind_lock = asyncio.Lock()
        self.tasks: set[asyncio.Task[Any]] = set()  # the clients being served

    # ------------------------------------------------------------------------------------------- config

    def apply(
        self, config: Config, state: MonitorState, tls: ssl.SSLContext | None, backend_tls: ssl.SSLContext
    ) -> None:
        """Follow a config, the monitor's findings and the TLS contexts; the listener moves at ``bind``."""
        if config is not self.config:
            self.router = PgRouter(config)
            self.cache.clear()  # the new rules may cache, route or rewrite the same statements otherwise
        self.cache.max_bytes = config.variables.integer("pgsql-query_cache_size_MB") << 20
        self.config = config
        self.tls = tls
        self.pools.apply(config, state, backend_tls)

    def sweep(self) -> None:
        """Housekeeping: keep the statements known to servers bounded."""
        while len(self.known) > _KNOWN_STATEMENTS:
            self.known.popitem(last=False)

    async def close_idle(self, database: str) -> None:
        """Close the idle server connections to ``database`` of every worker process of the node (a DROP DATABASE
        follows, which the server refuses while any is connected)."""
        self.pools.close_idle_of(database)
        if self.workers > 1:
            await self.close_idle_elsewhere(database)

    def max_prepared(self) -> int:
        """``pgsql-max_prepared_statements``: what a session keeps prepared per server connection."""
        return self.config.variables.integer("pgsql-max_prepared_statements")

    def default_timeout_ms(self) -> int:
        """``pgsql-default_query_timeout``: how long a statement without a rule's timeout may run."""
        return self.config.variables.integer("pgsql-default_query_timeout")

    def caches_empty_result(self) -> bool:
        """``pgsql-query_cache_stores_empty_result``: whether answers without rows are cached."""
        return self.config.variables.flag("pgsql-query_cache_stores_empty_result")

    async def bind(self) -> None:
        """Listen where ``pgsql-interfaces`` says (stop when it says nothing); an address that cannot be bound is
        reported and tried again by the housekeeping."""
        async with self._bind_lock:
            try:
                wanted = _address(self.config.variables.text("pgsql-interfaces"))
            except ValueError:
                wanted = None
                self.state = "error: pgsql-interfaces is not host:port"
            if wanted != self._address and self._server is not None:
                self._server.close()
                self._server = None
                self.state = "off"
            self._address = wanted
            if wanted is None or self._server is not None:
                return
            try:
                self._server = await asyncio.get_running_loop().create_server(
                    lambda: PgWire(on_made=self._accept), wanted[0], wanted[1], reuse_port=True, backlog=4096
                )
            except OSError as exc:
                state = f"error: cannot listen on {show_address(wanted)}: {exc.strerror or exc}"
                if state != self.state:
                    log.error("pgsql: %s", state.removeprefix("error: "))
                self.state = state
                return
            self.state = "listening"
            log.info("PostgreSQL clients on %s", show_address(wanted))

    def needs_bind(self) -> bool:
        """Whether the listener is wanted and not bound (the housekeeping retries)."""
        return self._address is not None and self._server is None

    async def stop(self) -> None:
        """Stop listening, end the sessions, close the pools."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for session in list(self.sessions.values()):
            session.client.close()
        for task in list(self.tasks):
            task.cancel()
        self.pools.close_all()

    # ------------------------------------------------------------------------------------------- clients

    def _accept(self, wire: PgWire) -> None:
        """Serve a new client connection in a task of its own."""
        spawn(self.serve(wire), self.tasks, "a PostgreSQL client session")

    async def serve(self, wire: PgWire) -> None:
        """Serve a new client connection, from its first message to its end."""
        self.clients_total += 1
        self.connecting += 1
        session: PgSession | None = None
        try:
            try:
                session = await self._login(wire)
            except LoginFailed as failed:
                wire.write(error_response(failed.sqlstate, failed.message))
            except PoolRefused as refused:
                wire.write(refused.response())
            except ProtocolViolation as exc:
                wire.write(error_response("08P01", f"ProxyFleet: {exc}"))
            except (PeerGone, ssl.SSLError, OSError):
                pass
            except TimeoutError:
                wire.write(error_response(CANNOT_CONNECT_NOW, "ProxyFleet: the login took longer than allowed"))
            finally:
                self.connecting -= 1
            if session is not None:
                await session.run()
        finally:
            if session is not None:
                self.sessions.pop(session.id, None)
                self.keys.pop(session.id, None)
            wire.close()

    async def _login(self, wire: PgWire) -> PgSession | None:
        """Log the client in; its session, or None for a cancel request (done already)."""
        timeout = self.config.variables.integer("pgsql-connect_timeout_client") / 1000
        opened = await asyncio.wait_for(negotiate(wire, self.tls), timeout)
        if isinstance(opened, Cancel):
            await self.cancel(opened.pid, opened.key)
            return None
        addr = wire.peer_address()
        if self.throttle.blocked(addr, self.clock.now()):
            raise LoginFailed("28000", "ProxyFleet: too many failed logins from this address; try again later")
        user = self.config.pgsql_user(opened.user)
        try:
            secret = await asyncio.wait_for(authenticate(wire, user, opened.user), timeout)
        except LoginFailed:
            self.logins_failed += 1
            if self.throttle.failed(addr, self.clock.now()):
                log.warning("pgsql: %s blocked after too many failed logins", addr)
            raise
        assert user is not None
        if user.use_ssl and not opened.tls:
            raise LoginFailed("28000", f'ProxyFleet: user "{user.username}" must connect over TLS')
        limit = max(1, -(-user.max_connections // self.workers)) if user.max_connections else 0
        if sum(1 for s in self.sessions.values() if s.user == user.username) >= limit:
            raise LoginFailed(TOO_MANY_CONNECTIONS, f'too many connections for role "{user.username}"')
        try:
            settings = startup_settings(opened.parameters)
        except ValueError as exc:
            raise LoginFailed("08P01", f"ProxyFleet: {exc}") from None
        server = await self.pools.acquire(user.default_hostgroup, (user.username, opened.database), secret)
        session_id = self._new_id()
        key = secrets.randbits(32)
        session = PgSession(
            wire,
            self,
            session_id=session_id,
            user=user.username,
            database=opened.database,
            secret=secret,
            hostgroup=user.default_hostgroup,
            pool_mode=user.pool_mode,
            settings=settings,
        )
        told = dict(server.conn.parameters)
        for name, value in opened.parameters.items():
            for known in told:
                if known.lower() == name.lower():
                    told[known] = value
        encoding = told.get("client_encoding")
        if encoding is not None and encoding != server.conn.parameters.get("client_encoding"):
            told["client_encoding"] = await self._encoding_name(server, encoding)
        out = auth_request(0) + b"".join(parameter_status(n, v) for n, v in told.items())
        wire.write(out + backend_key_data(session_id, key) + ready_for_query(b"I"))
        self.sessions[session_id] = session
        self.keys[session_id] = key
        if user.pool_mode == "session":
            session.link.adopt(server)
        else:
            self.pools.release(server, True)
        return session

    async def _encoding_name(self, server: ServerConn, encoding: str) -> str:
        """``encoding`` as the server spells it ('utf8', 'UTF-8' and 'unicode' are all 'UTF8'), asked of ``server``
        once per spelling; as given when the server knows no such encoding (the session's SET then fails)."""
        known = self.encodings.get(encoding)
        if known is not None:
            return known
        sql = f"SELECT pg_encoding_to_char(pg_char_to_encoding({quote_literal(encoding)}))"
        try:
            rows = await server.conn.query(sql)
        except (PgError, PgUnreachable):
            return encoding
        named = rows[0][0] if rows and rows[0][0] else encoding
        if len(self.encodings) < _ENCODINGS_KEPT:
            self.encodings[encoding] = named
        return named

    def _new_id(self) -> int:
        """A process id for a new session: random in ``CLIENT_PIDS``, one no session of this worker has, and one whose
        remainder says this worker serves it (``worker_of``)."""
        workers = self.workers
        low = -(-CLIENT_PIDS.start // workers) * workers  # the first multiple of ``workers`` in the range
        while True:
            pid = low + secrets.randbelow((CLIENT_PIDS.stop - 1 - low) // workers) * workers + self.worker + 1
            if pid not in self.sessions:
                return pid

    async def cancel(self, pid: int, key: int) -> None:
        """A CancelRequest for session ``pid``: sent on to the server running its query, if the key is right."""
        owner = worker_of(pid, self.workers)
        if owner != self.worker:
            await self.forward_cancel(owner, pid, key)
            return
        session = self.sessions.get(pid)
        if session is None or not secrets.compare_digest(self.keys.get(pid, -1).to_bytes(4), key.to_bytes(4)):
            return
        server = session.link.server
        if server is None:
            return  # nothing running
        await self.pools.cancel(server)

    # ------------------------------------------------------------------------------------------- report

    def rows(self) -> dict[str, Any]:
        """The ``pgsql`` section of the report."""
        address = self._address
        cache = self.cache.counters
        return {
            "listener": {"address": show_address(address) if address else "", "state": self.state},
            "clients_connected": len(self.sessions) + self.connecting,
            "clients_total": self.clients_total,
            "logins_failed": self.logins_failed,
            "transactions": self.counters.transactions,
            "queries": self.counters.queries,
            "blocked": self.counters.blocked,
            "timed_out": self.counters.timed_out,
            "query_cache_lookups": cache.Query_Cache_count_GET,
            "query_cache_hits": cache.Query_Cache_count_GET_OK,
            "query_cache_stored": cache.Query_Cache_count_SET,
            "query_cache_entries": cache.Query_Cache_Entries,
            "query_cache_bytes": cache.Query_Cache_Memory_bytes,
            "query_rules": [{"rule_id": k, "hits": v} for k, v in sorted(self.router.hits.items())],
            "waiting_clients": sum(len(q) for q in self.pools.waiters.values()) + self.pools.writer_waiting,
            "connection_pool": self.pools.rows(),
        }
