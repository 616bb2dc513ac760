"""PostgreSQL server connections, pooled per server and per (user, database), as PgBouncer pools them.

A client's queries go to its user's ``default_hostgroup``. A connection is borrowed from a server of that hostgroup
(drawn by weight among the ONLINE ones with room, ``backends.choice``), reused idle when one of the same user and
database is there, opened otherwise. A server's ``max_connections`` bounds its connections of every user and
database together; each worker process takes its share. When every server is full the client waits, first come
first served, up to ``pgsql-connection_wait_timeout``. A full server with idle connections of other users makes room
by closing the oldest of them. A client of a ``pgsql_replication_hostgroups`` writer hostgroup that has no ONLINE
server (a failover under way, the monitor still placing the servers) waits up to ``pgsql-no_writer_wait_ms`` for the
monitor to find a writer, as ``mysql-no_writer_wait_ms`` does on the MySQL side.

A connection remembers what the proxy applied on it (``settings``: the SETs a client's session asked for) and the
prepared statements it holds (``prepared``, least recently used first), so that the next borrower replays only
what differs and prepares only what is missing.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import ssl
from collections import OrderedDict, deque
from typing import Any

from proxyapp.backends.choice import no_server, weighted_order
from proxyapp.backends.pool import OFFLINE_HARD, ONLINE, server_tls
from proxyapp.backends.topology import MonitorState, pgsql_runtime, show_address
from proxyapp.config.document import Config
from proxyapp.config.tables import PgsqlServer
from proxyapp.pgsql.auth import ServerSecret
from proxyapp.pgsql.backend import PgConnection, PgError, PgUnreachable, send_cancel
from proxyapp.pgsql.messages import CONNECTION_FAILURE, TOO_MANY_CONNECTIONS, error_response, message

log = logging.getLogger("proxyapp.pgproxy")

#: A pool key: (user, database).
PoolKey = tuple[str, str]


class PoolRefused(Exception):
    """No server connection for the client: the SQLSTATE and message its ErrorResponse carries, or the server's own
    error fields when the server refused the login."""

    def __init__(self, sqlstate: str, message: str, fields: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message
        self.fields = fields

    def response(self) -> bytes:
        """The FATAL ErrorResponse the client gets: the server's own fields when it answered."""
        if self.fields is None:
            return error_response(self.sqlstate, self.message)
        body = b"".join(k.encode() + v.encode() + b"\0" for k, v in self.fields.items()) + b"\0"
        return message(b"E", body)


class ServerConn:
    """A logged-in server connection and what the proxy knows of its state."""

    __slots__ = ("cancels", "conn", "key", "prepared", "returned", "settings", "target")

    def __init__(self, conn: PgConnection, target: PgTarget, key: PoolKey) -> None:
        self.conn = conn
        self.target = target
        self.key = key
        self.settings: dict[str, str] = {}  # name -> SQL value the proxy SET on it
        self.prepared: OrderedDict[str, None] = OrderedDict()  # server-side statement names, least recent first
        self.cancels = 0  # CancelRequests for it the server has not acted on yet (``PgPools.cancel``)
        self.returned: bool | None = None  # released while one was: reusable or not, its release when they are done

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()


class Waiter:
    """A client waiting for a connection: what it needs, and the future that hands it one (or None: room was made,
    open one)."""

    __slots__ = ("future", "key")

    def __init__(self, key: PoolKey, future: asyncio.Future[ServerConn | None]) -> None:
        self.key = key
        self.future = future


class PgTarget:
    """A ``pgsql_servers`` row in this process: its runtime status, its connections and their figures."""

    def __init__(self, server: PgsqlServer, reason: str) -> None:
        self.server = server
        self.reason = reason
        self.idle: dict[PoolKey, deque[ServerConn]] = {}
        self.lent: set[ServerConn] = set()
        self.connecting = 0
        self.conn_ok = 0
        self.conn_err = 0
        self.max_used = 0

    @property
    def idle_count(self) -> int:
        """Connections idle in the pool, of every key."""
        return sum(len(q) for q in self.idle.values())

    def total(self) -> int:
        """Connections open or opening."""
        return len(self.lent) + self.idle_count + self.connecting

    def close_all(self) -> None:
        """Close every connection, idle and lent (the lent ones' clients get an error)."""
        for queue in self.idle.values():
            while queue:
                queue.pop().close()
        for sc in list(self.lent):
            sc.close()

    def row(self) -> dict[str, Any]:
        """Its row of the ``pgsql`` report's ``connection_pool`` (ProxySQL's stats_pgsql_connection_pool)."""
        s = self.server
        return {
            "hostgroup": s.hostgroup_id,
            "srv_host": s.hostname,
            "srv_port": s.port,
            "status": s.status,
            "status_reason": self.reason,
            "ConnUsed": len(self.lent),
            "ConnFree": self.idle_count,
            "ConnOK": self.conn_ok,
            "ConnERR": self.conn_err,
            "MaxConnUsed": self.max_used,
        }


class PgPools:
    """Every PostgreSQL server of the config in this process, and the clients waiting for a connection."""

    def __init__(self, workers: int = 1, rng: random.Random | None = None) -> None:
        self.workers = workers
        self.rng = rng or random.Random()
        self.targets: dict[tuple[int, str, int], PgTarget] = {}
        self.tls: ssl.SSLContext | None = None
        self.wait_timeout_s = 10.0
        self.connect_timeout_s = 1.0
        self.no_writer_wait_s = 5.0
        self.writer_hostgroups: frozenset[int] = frozenset()  # of the pgsql_replication_hostgroups pairs
        self.waiters: dict[int, deque[Waiter]] = {}  # by hostgroup, first come first served
        self.writer_waiting = 0  # clients waiting for a writer hostgroup to have a server
        self._applied: asyncio.Future[None] | None = None  # resolved by the next apply
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop (kept: asking for the running loop costs a system call each time)."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def share(self, limit: int) -> int:
        """This process's share of a node-wide connection limit."""
        return max(1, math.ceil(limit / self.workers))

    def apply(self, config: Config, state: MonitorState, tls: ssl.SSLContext | None) -> None:
        """Follow a config and the monitor's findings: the servers, their status (OFFLINE_HARD and removed servers
        have their connections closed, others leaving ONLINE their idle ones) and the pools' settings."""
        v = config.variables
        self.tls = tls
        self.wait_timeout_s = v.integer("pgsql-connection_wait_timeout") / 1000
        self.connect_timeout_s = v.integer("pgsql-connect_timeout_server") / 1000
        self.no_writer_wait_s = v.integer("pgsql-no_writer_wait_ms") / 1000
        self.writer_hostgroups = frozenset(pair.writer_hostgroup for pair in config.pgsql_replication_hostgroups)
        runtime = {server.key: (server, reason) for server, reason in pgsql_runtime(config, state)}
        for key in list(self.targets):
            if key not in runtime:
                self.targets.pop(key).close_all()
        for key, (server, reason) in runtime.items():
            target = self.targets.get(key)
            if target is None:
                self.targets[key] = PgTarget(server, reason)
                continue
            target.server, target.reason = server, reason
            if server.status == OFFLINE_HARD:
                target.close_all()
            elif server.status != ONLINE:
                for queue in target.idle.values():
                    while queue:
                        queue.pop().close()
        for hostgroup in list(self.waiters):
            self._room_made(hostgroup)
        applied, self._applied = self._applied, None
        if applied is not None and not applied.done():
            applied.set_result(None)

    async def acquire(self, hostgroup: int, key: PoolKey, secret: ServerSecret) -> ServerConn:
        """A connection of ``key`` to a server of ``hostgroup``: an idle one, a new one, or the first to come back
        within the wait timeout; PoolRefused says why not."""
        loop = self.loop
        deadline = loop.time() + self.wait_timeout_s
        writer_deadline: float | None = None  # pgsql-no_writer_wait_ms, from the first time no server is usable
        errors: list[str] = []
        while True:
            targets = [t for t in self.targets.values() if t.server.hostgroup_id == hostgroup]
            usable = [t for t in targets if t.server.status == ONLINE]
            if not usable:
                refused = no_server(hostgroup, [t.server for t in targets])
                if hostgroup not in self.writer_hostgroups or self.no_writer_wait_s <= 0:
                    raise PoolRefused(CONNECTION_FAILURE, refused)
                if writer_deadline is None:
                    writer_deadline = loop.time() + self.no_writer_wait_s
                left = writer_deadline - loop.time()
                if left <= 0:
                    raise PoolRefused(
                        CONNECTION_FAILURE,
                        f"{refused}: no writer came ONLINE within {self.no_writer_wait_s * 1000:.0f} ms "
                        "(pgsql-no_writer_wait_ms)",
                    )
                await self._next_apply(left)
                deadline = loop.time() + self.wait_timeout_s
                continue
            for target in weighted_order(usable, lambda t: t.server.weight, self.rng):
                queue = target.idle.get(key)
                while queue:
                    sc = queue.popleft()
                    if sc.conn.closed:
                        continue
                    return self._lend(target, sc)
            for target in weighted_order(usable, lambda t: t.server.weight, self.rng):
                if target.total() >= self.share(target.server.max_connections) and not self._make_room(target, key):
                    continue
                try:
                    return self._lend(target, await self._open(target, key, secret))
                except PgUnreachable as exc:
                    errors.append(str(exc))
            if errors and not any(t.lent for t in usable):
                raise PoolRefused(CONNECTION_FAILURE, f"ProxyFleet: pgsql hostgroup {hostgroup}: {'; '.join(errors)}")
            left = deadline - loop.time()
            if left <= 0:
                raise PoolRefused(
                    TOO_MANY_CONNECTIONS,
                    f"ProxyFleet: no server connection of pgsql hostgroup {hostgroup} came free within "
                    f"pgsql-connection_wait_timeout ({self.wait_timeout_s * 1000:.0f} ms)",
                )
            handed = await self._wait(hostgroup, key, left)
            if handed is not None:
                return handed

    async def _next_apply(self, seconds: float) -> None:
        """Wait for the next ``apply`` (a config or the monitor's findings), at most ``seconds``."""
        applied = self._applied
        if applied is None:
            applied = self._applied = self.loop.create_future()
        self.writer_waiting += 1
        try:
            await asyncio.wait_for(asyncio.shield(applied), seconds)
        except TimeoutError:
            pass
        finally:
            self.writer_waiting -= 1

    async def _wait(self, hostgroup: int, key: PoolKey, seconds: float) -> ServerConn | None:
        """Wait in line for a connection released for this client (handed over, so that no later client takes it
        first), or for room to open one (None); None too when the time is up."""
        future: asyncio.Future[ServerConn | None] = self.loop.create_future()
        waiter = Waiter(key, future)
        self.waiters.setdefault(hostgroup, deque()).append(waiter)
        try:
            return await asyncio.wait_for(asyncio.shield(future), seconds)
        except TimeoutError:
            return future.result() if future.done() else None  # handed over as the time ran out: take it
        except asyncio.CancelledError:
            handed = future.result() if future.done() else None
            if handed is not None:
                self.release(handed, True)  # handed over to a client that is gone
            raise
        finally:
            line = self.waiters.get(hostgroup)
            if line is not None and waiter in line:
                line.remove(waiter)
            if not future.done():
                future.cancel()

    def _make_room(self, target: PgTarget, key: PoolKey) -> bool:
        """Close the oldest idle connection of another key on a full server; whether one was closed."""
        for other, queue in target.idle.items():
            if other != key and queue:
                queue.popleft().close()
                return True
        return False

    async def _open(self, target: PgTarget, key: PoolKey, secret: ServerSecret) -> ServerConn:
        host, port = target.server.address
        target.connecting += 1
        try:
            conn = await asyncio.wait_for(
                PgConnection.connect(host, port, key[0], secret, key[1], tls=server_tls(target.server, self.tls)),
                self.connect_timeout_s,
            )
        except TimeoutError:
            target.conn_err += 1
            raise PgUnreachable(f"connect to {show_address((host, port))} timed out") from None
        except PgUnreachable:
            target.conn_err += 1
            raise
        except PgError as exc:
            target.conn_err += 1
            raise PoolRefused(exc.sqlstate, exc.message, exc.fields) from None
        except Exception as unexpected:  # a TLS context that cannot be used: said, never a crash
            target.conn_err += 1
            raise PoolRefused(CONNECTION_FAILURE, f"ProxyFleet: {show_address((host, port))}: {unexpected}") from None
        finally:
            target.connecting -= 1
        target.conn_ok += 1
        return ServerConn(conn, target, key)

    def _lend(self, target: PgTarget, sc: ServerConn) -> ServerConn:
        target.lent.add(sc)
        target.max_used = max(target.max_used, len(target.lent))
        return sc

    async def cancel(self, sc: ServerConn) -> None:
        """Ask the server to cancel what ``sc`` runs (a client's CancelRequest, a statement's timeout), done when
        the server has acted on it; until then ``sc`` goes to no other client (a release waits for it), so a cancel
        meant for one client's statement never reaches another's."""
        sc.cancels += 1
        try:
            host, port = sc.target.server.address
            await send_cancel(host, port, sc.conn.backend_key)
        finally:
            sc.cancels -= 1
            returned = sc.returned
            if not sc.cancels and returned is not None:
                sc.returned = None
                self.release(sc, returned)

    def release(self, sc: ServerConn, reusable: bool) -> None:
        """Take a connection back: idle for the next borrower of its key when ``reusable`` (idle, no transaction,
        nothing pinned left on it) and its server is still ONLINE, closed otherwise; once the server has acted on
        the cancels sent for it (``cancel``)."""
        if sc.cancels:
            sc.returned = reusable if sc.returned is None else sc.returned and reusable
            return
        target = sc.target
        current = self.targets.get(target.server.key)
        hostgroup = target.server.hostgroup_id
        if reusable and current is target and target.server.status == ONLINE and not sc.conn.closed:
            line = self.waiters.get(hostgroup)
            waiter = next((w for w in line or () if not w.future.done() and w.key == sc.key), None)
            if waiter is not None:
                waiter.future.set_result(sc)  # stays lent: handed straight to the client first in line
                return
            target.lent.discard(sc)
            if line and any(not w.future.done() for w in line):
                sc.close()  # room for a waiting client of another user or database
            else:
                target.idle.setdefault(sc.key, deque()).append(sc)
        else:
            target.lent.discard(sc)
            sc.close()
        self._room_made(hostgroup)

    def _room_made(self, hostgroup: int) -> None:
        """Tell the first client in line that it may open a connection now."""
        line = self.waiters.get(hostgroup)
        for waiter in line or ():
            if not waiter.future.done():
                waiter.future.set_result(None)
                return

    def close_idle_of(self, database: str) -> int:
        """Close every idle connection to ``database`` (which is about to be dropped: PostgreSQL refuses while any
        session is connected to it); how many were closed."""
        closed = 0
        for target in self.targets.values():
            for (_, name), queue in target.idle.items():
                if name == database:
                    while queue:
                        queue.pop().close()
                        closed += 1
        return closed

    def close_all(self) -> None:
        """Close every connection (the proxy stopping)."""
        for target in self.targets.values():
            target.close_all()

    def rows(self) -> list[dict[str, Any]]:
        """The ``connection_pool`` rows of the ``pgsql`` report."""
        return [self.targets[key].row() for key in sorted(self.targets)]
