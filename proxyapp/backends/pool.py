"""Hostgroups of weighted servers and their backend connection pools.

One ``ServerPool`` per ``mysql_servers`` row (hostgroup, host, port), as in ProxySQL: the same address in two
hostgroups has two pools, each with its own ``max_connections``. A session asks a ``Hostgroup`` for a
connection; the hostgroup picks an ONLINE server by weight among those with room, reuses an idle connection of
the same user or opens one, and queues the session (first come, first served) when every server is full.

Server status (ONLINE, SHUNNED, OFFLINE_SOFT, OFFLINE_HARD) changes come from the config, the monitor (through the
runtime view the proxy applies) and the pool's own connect errors; each is logged and kept in
``PoolManager.transitions``. A writer hostgroup of a replication pair with no usable server makes a query wait up to
``mysql-no_writer_wait_ms`` for a writer to appear.

Why one file of this size: the three layers (``ServerPool``, ``Hostgroup``, ``PoolManager``) keep one invariant
together (a connection is idle, lent or handed straight to a waiter, never two of them) and are compiled as one unit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import random
import ssl
import time
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Final

from proxyapp.clock import MONOTONIC, Clock
from proxyapp.config.tables import MysqlServer, PgsqlServer
from proxyapp.config.variables import Variables
from proxyapp.driver import RUNNING, Driver
from proxyapp.mysql.backend import BackendConnection, BackendError, Credentials
from proxyapp.mysql.constants import Command, ErrorCode
from proxyapp.mysql.wire import CONNECTION_LOST
from proxyapp.report.stats import GlobalCounters
from proxyapp.tasks import spawn

log = logging.getLogger("proxyapp.backends.pool")

#: How many status transitions ``PoolManager.transitions`` keeps.
MAX_TRANSITIONS = 200
#: A backend's refusals that concern the request, not the server (a wrong password, a schema the client may not use
#: or that does not exist): told to the client at once, never retried nor counted toward shunning the server.
REQUEST_ERRORS = frozenset({ErrorCode.ACCESS_DENIED, ErrorCode.DB_ACCESS_DENIED, ErrorCode.BAD_DB})

ONLINE: Final = "ONLINE"
SHUNNED: Final = "SHUNNED"
OFFLINE_SOFT: Final = "OFFLINE_SOFT"
OFFLINE_HARD: Final = "OFFLINE_HARD"
#: A transition's ``from``/``to`` when the server was not, or is no longer, in the hostgroup.
ABSENT = "ABSENT"
#: ``mysql-throttle_connections_per_sec_to_hostgroup``'s default (ProxySQL's): no throttle, nothing counted.
UNTHROTTLED: Final = 1_000_000
#: ``mysql-max_connects_in_flight``'s default: connects one worker has under way to one server at once.
CONNECTS_IN_FLIGHT: Final = 16
#: The bound of connects in flight that stands for none (``mysql-max_connects_in_flight`` 0).
_NO_BOUND: Final = 1 << 30


class PoolError(Exception):
    """No backend connection could be had; the message names the hostgroup and the cause."""

    def __init__(self, message: str, code: int = 9001) -> None:
        super().__init__(message)
        self.code = code


@dataclass(slots=True)
class PoolSettings:
    """The global variables the pools follow."""

    connect_timeout_ms: int = 1000
    connect_timeout_max_ms: int = 10000
    connect_retries: int = 10
    connect_retries_delay_ms: int = 1
    shun_on_failures: int = 5
    shun_recovery_time_sec: int = 10
    free_connections_pct: int = 10
    connection_max_age_ms: int = 0
    ping_interval_server_ms: int = 10000
    ping_timeout_server_ms: int = 200
    connection_wait_timeout_ms: int = 10000
    no_writer_wait_ms: int = 5000
    max_connects_in_flight: int = CONNECTS_IN_FLIGHT  # per server and worker (0: no bound)
    throttle_connections_per_sec: int = UNTHROTTLED  # per hostgroup, shared by the workers
    max_allowed_packet: int = 1 << 26
    tls: ssl.SSLContext | None = None  # how servers with use_ssl=1 are reached (None: they cannot be)

    @classmethod
    def from_variables(cls, v: Variables, tls: ssl.SSLContext | None = None) -> PoolSettings:
        """Read the settings from the config's global variables; ``tls`` is the context built from its TLS ones."""
        return cls(
            tls=tls,
            connect_timeout_ms=v.integer("mysql-connect_timeout_server"),
            connect_timeout_max_ms=v.integer("mysql-connect_timeout_server_max"),
            connect_retries=v.integer("mysql-connect_retries_on_failure"),
            connect_retries_delay_ms=v.integer("mysql-connect_retries_delay"),
            shun_on_failures=v.integer("mysql-shun_on_failures"),
            shun_recovery_time_sec=v.integer("mysql-shun_recovery_time_sec"),
            free_connections_pct=v.integer("mysql-free_connections_pct"),
            connection_max_age_ms=v.integer("mysql-connection_max_age_ms"),
            ping_interval_server_ms=v.integer("mysql-ping_interval_server_msec"),
            ping_timeout_server_ms=v.integer("mysql-ping_timeout_server"),
            connection_wait_timeout_ms=v.integer("mysql-connection_wait_timeout"),
            no_writer_wait_ms=v.integer("mysql-no_writer_wait_ms"),
            max_connects_in_flight=v.integer("mysql-max_connects_in_flight"),
            throttle_connections_per_sec=v.integer("mysql-throttle_connections_per_sec_to_hostgroup"),
            max_allowed_packet=v.integer("mysql-max_allowed_packet"),
        )


def server_tls(server: MysqlServer | PgsqlServer, context: ssl.SSLContext | None) -> ssl.SSLContext | None:
    """The TLS context to reach ``server`` with: ``context`` when its ``use_ssl`` is set (BackendError when there is
    none: such a server is never reached in clear text), else None."""
    if not server.use_ssl:
        return None
    if context is None:
        where = f"{server.hostname}:{server.port}"
        raise BackendError(f"{where} has use_ssl=1 and no TLS context is configured", ErrorCode.SSL_CONNECTION)
    return context


class ServerPool:
    """The connections to one server in one hostgroup, and its ProxySQL-style statistics."""

    __slots__ = (
        "busy",
        "bytes_recv",
        "bytes_sent",
        "cap",
        "conn_err",
        "conn_ok",
        "connect_errors",
        "connect_slots",
        "connecting",
        "hostgroup",
        "idle",
        "latency_us",
        "max_used",
        "queries",
        "removed",
        "server",
        "shunned_at",
        "status",
        "status_reason",
        "used",
        "weight",
    )

    def __init__(self, server: MysqlServer, hostgroup: Hostgroup, reason: str = "configured") -> None:
        self.server = server  # its runtime row: the runtime hostgroup, and the status the config and monitor want
        # The row's weight, kept here: the row is an interpreted class, whose attributes are generic lookups.
        self.weight = server.weight
        self.hostgroup = hostgroup
        self.cap = hostgroup.manager.share_of(server.max_connections)
        self.status = server.status
        self.status_reason = reason
        # Least recently used first. A list: mypyc indexes, appends and pops it inline, where a deque's every
        # operation is a generic method call (the pool is small: taking the oldest out is rare and cheap).
        self.idle: list[BackendConnection] = []
        # The connections handed out (``used`` of them), each knowing its place (``busy_at``): a list, which mypyc
        # appends to and indexes inline, where a set's add and discard hash the connection every query.
        self.busy: list[BackendConnection] = []
        self.used = 0
        self.connecting = 0
        self.connect_slots = hostgroup.manager.connect_slots  # connects it may have under way at once
        self.max_used = 0
        self.conn_ok = 0
        self.conn_err = 0
        self.queries = 0
        self.bytes_sent = 0
        self.bytes_recv = 0
        self.latency_us = 0
        self.shunned_at = 0.0
        self.connect_errors: deque[float] = deque()
        self.removed = False

    @property
    def has_room(self) -> bool:
        """Whether a connection can be handed out without waiting: an idle one, or room for one more connect."""
        return bool(self.idle) or self.may_open

    @property
    def may_open(self) -> bool:
        """Whether a connect may start now: within ``max_connections`` and ``mysql-max_connects_in_flight``."""
        connecting = self.connecting
        return self.used + connecting < self.cap and connecting < self.connect_slots

    def unmark_used(self, conn: BackendConnection) -> None:
        """Take ``conn`` out of the connections handed out (the last one takes its place); nothing if it is not one."""
        at = conn.busy_at
        if at < 0:
            return
        busy = self.busy
        last = busy.pop()
        if last is not conn:
            busy[at] = last
            last.busy_at = at
        conn.busy_at = -1

    def usable(self, recovery_s: float) -> bool:
        """Whether new work may go to this server; a server this pool shunned for its connect errors (while the
        config and the monitor want it ONLINE) is retried after the recovery time (on the proxy's clock, read only
        then)."""
        if self.status == ONLINE:
            return True
        if (
            self.status == SHUNNED
            and self.server.status == ONLINE
            and self.hostgroup.manager.clock.now() - self.shunned_at >= recovery_s
        ):
            self.set_status(ONLINE, f"shun recovery time ({recovery_s:.0f} s) elapsed")
            return True
        return False

    def set_status(self, status: str, reason: str) -> None:
        """Change the runtime status (logged as a transition); leaving ONLINE closes the idle connections
        (OFFLINE_HARD: all), coming back wakes the queries waiting for a writer."""
        old = self.status
        self.status = status
        self.status_reason = reason
        if status != old:
            self.hostgroup.manager.record_transition(self.server, old, status, reason)
        if status == ONLINE:
            self.hostgroup.notify_change()
        if status == SHUNNED:
            self.shunned_at = self.hostgroup.manager.clock.now()
        if status != ONLINE:
            self.close_idle()
        if status == OFFLINE_HARD:
            for conn in list(self.busy):
                conn.close()  # the session using it gets an error naming the server and hostgroup

    def close_idle(self) -> None:
        """Close every idle connection."""
        while self.idle:
            self.idle.pop().close()

    def record_connect_error(self, settings: PoolSettings) -> None:
        """Count a failed connect; too many within a second shuns the server."""
        self.conn_err += 1
        now = self.hostgroup.manager.clock.now()
        errors = self.connect_errors
        errors.append(now)
        while errors and now - errors[0] > 1.0:
            errors.popleft()
        if self.status == ONLINE and len(errors) >= settings.shun_on_failures:
            self.set_status(SHUNNED, f"connect failed {len(errors)} times within 1 s")

    def row(self) -> dict[str, object]:
        """This pool as a stats_mysql_connection_pool row."""
        return {
            "hostgroup": self.server.hostgroup_id,
            "srv_host": self.server.hostname,
            "srv_port": self.server.port,
            "status": self.status,
            "ConnUsed": self.used,
            "ConnFree": len(self.idle),
            "ConnOK": self.conn_ok,
            "ConnERR": self.conn_err,
            "MaxConnUsed": self.max_used,
            "Queries": self.queries,
            "Bytes_data_sent": self.bytes_sent,
            "Bytes_data_recv": self.bytes_recv,
            "Latency_us": self.latency_us,
        }


#: The event loop's timers count whole milliseconds.
_TIMER_GRANULARITY: Final = 0.001


class _Waiter:
    """A session waiting for a connection (a plain class: mypyc compiles its ``__init__``, one is made per wait).

    A queued waiter has not ended; ``Hostgroup._end`` ends it once, by whoever takes it off the queue. A session run
    by a driver (``proxyapp.driver``) parks there and is resumed from the hostgroup's next scheduled resume; another
    coroutine (a task) awaits a future."""

    __slots__ = ("conn", "credentials", "deadline", "driver", "ended", "future", "park", "schema")

    def __init__(self, credentials: Credentials, schema: str | None, deadline: float) -> None:
        self.credentials = credentials
        self.schema = schema
        self.deadline = deadline  # on the monotonic clock (real time): past it, the wait ends with None
        self.ended = False
        self.conn: BackendConnection | None = None  # what it was handed
        self.driver: Driver | None = None
        self.park = 0  # the number of the driver's park it waits in (``Driver.park``)
        self.future: asyncio.Future[None] | None = None  # what a task awaits


class _Line:
    """The sessions waiting for a connection, first come first served: a list read from ``head`` on. Compiled, a
    list's methods are direct calls; a deque's were generic method calls, two a wait (1,000 sessions on 200
    connections wait at nearly every query)."""

    __slots__ = ("head", "items")

    def __init__(self) -> None:
        self.items: list[_Waiter] = []
        self.head = 0  # the items before it left the line

    def __len__(self) -> int:
        return len(self.items) - self.head

    def waiters(self) -> list[_Waiter]:
        """The waiters in line, first first (a copy)."""
        return self.items[self.head :]

    def first(self) -> _Waiter | None:
        """The longest waiting, or None when nobody waits."""
        return self.items[self.head] if self.head < len(self.items) else None

    def push(self, waiter: _Waiter) -> None:
        """Queue ``waiter`` last."""
        self.items.append(waiter)

    def pop_first(self) -> None:
        """Take the longest waiting off the line (there is one); the places it and those before it held are given
        back once they are most of the list, so the list holds at most twice the line."""
        head = self.head = self.head + 1
        items = self.items
        if head == len(items):
            items.clear()
            self.head = 0
        elif head >= 64 and head * 2 >= len(items):
            del items[:head]
            self.head = 0

    def remove(self, waiter: _Waiter) -> None:
        """Take ``waiter`` off the line wherever it is (nothing changes when it is not in line)."""
        items = self.items
        for i in range(self.head, len(items)):
            if items[i] is waiter:
                del items[i]
                if self.head == len(items):
                    items.clear()
                    self.head = 0
                return

    def keep(self, waiters: list[_Waiter]) -> None:
        """Leave only ``waiters`` in line, in that order."""
        self.items = waiters
        self.head = 0


def _fits(conn: BackendConnection, credentials: Credentials, schema: str | None) -> bool:
    """Whether ``conn`` can serve a session logging in with ``credentials`` (its user and its session flags) in
    ``schema``: a session that chose no schema must not inherit the one another session left on the connection (no
    command can unset it; a fresh one has none)."""
    return conn.serves(credentials) and (bool(schema) or not conn.state.schema)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Hostgroup:
    """A hostgroup: its server pools, the sessions waiting for a connection and those waiting for a writer.

    Why one class of ~500 lines: choosing a server, the waiting list, opening a connection under the connect
    throttle and a release that hands the connection straight to the first waiter share one state and run on every
    borrow of every query; split apart, each borrow would cross objects on the hot path. What needs none of it is
    elsewhere: a server's own pool (``ServerPool``), the hostgroups of a config (``PoolManager``)."""

    __slots__ = (
        "change_waiters",
        "ended",
        "expiry",
        "expiry_at",
        "id",
        "manager",
        "pools",
        "resuming",
        "token_timer",
        "tokens",
        "tokens_at",
        "waiters",
    )

    def __init__(self, hostgroup_id: int, manager: PoolManager) -> None:
        self.id = hostgroup_id
        self.manager = manager
        self.pools: list[ServerPool] = []
        self.waiters = _Line()
        self.change_waiters: list[asyncio.Future[None]] = []
        # One timer for all the waiters' deadlines, due at the earliest it knows of (``_queue``, ``_expire``): a timer
        # per wait cost a tenth of a query's instructions when most queries wait (1,000 sessions on 200 connections).
        self.expiry: asyncio.TimerHandle | None = None
        self.expiry_at = 0.0
        # The parked sessions whose waits ended since the last resume, resumed in that order by one scheduled call
        # (``_end``, ``_resume``): a call of their own each cost ~1,500 instructions when most queries wait.
        self.ended: list[_Waiter] = []
        self.resuming = False  # ``_resume`` is scheduled
        # mysql-throttle_connections_per_sec_to_hostgroup: a bucket of connects refilled at the worker's share of the
        # rate (real time), at most a second's worth; a session refused one is woken when the next is due.
        self.tokens = 0.0
        self.tokens_at = 0.0  # the bucket is full at the first connect
        self.token_timer: asyncio.TimerHandle | None = None

    def _choose(self) -> tuple[ServerPool | None, bool]:
        """Pick a server by weight among those with room; returns (pool, whether any server is usable)."""
        recovery = self.manager.settings.shun_recovery_time_sec
        pools = self.pools
        if len(pools) == 1:
            only = pools[0]
            if only.weight > 0 and only.usable(recovery):
                return (only if only.has_room else None), True
            return None, False
        usable = [p for p in pools if p.weight > 0 and p.usable(recovery)]
        if not usable:
            return None, False
        roomy = [p for p in usable if p.has_room]
        if not roomy:
            return None, True
        if len(roomy) == 1:
            return roomy[0], True
        return random.choices(roomy, weights=[p.weight for p in roomy])[0], True

    def take_idle(self, credentials: Credentials, schema: str | None) -> BackendConnection | ServerPool | None:
        """Without waiting: an idle connection of the server chosen by weight, when it has one and nobody queues.

        Otherwise the chosen server's pool (to pass to ``acquire``, so that the weights are drawn once per
        borrow: drawing again would favour servers that already have idle connections), or None.
        """
        if len(self.waiters):
            return None
        pool, _ = self._choose()
        if pool is None:
            return None
        conn = self._take_idle(pool, credentials, schema) if pool.idle else None
        if conn is None:
            return pool
        self.manager.counters.ConnPool_get_conn_immediate += 1
        return conn

    async def acquire(
        self, credentials: Credentials, schema: str | None, chosen: ServerPool | None = None
    ) -> BackendConnection:
        """Get a connection for ``credentials``; raises PoolError naming this hostgroup and the cause.

        ``chosen`` is the server ``take_idle`` just drew; it is tried first. Its waits are the event loop's, on real
        time; which servers are usable (shunning, recovery) is decided on the proxy's clock.

        When others wait already, or no usable server has room, the session queues at once, in this small frame:
        the common wait when sessions outnumber connections. The search over the servers (``_search``: opening a
        connection, waiting for a writer, retrying) runs in a frame of its own, far larger, only when it may find one.
        """
        if chosen is None or not chosen.has_room:
            pool, any_usable = (None, True) if len(self.waiters) else self._choose()
            if pool is None and any_usable:
                deadline = MONOTONIC() + self.manager.settings.connection_wait_timeout_ms / 1000
                self._count_connect_wait()
                waiter, wait = self._queue(credentials, schema, deadline)
                try:  # as in ``_search``
                    await wait
                except BaseException:
                    self._abandon(waiter)
                    raise
                handed = waiter.conn
                if handed is not None:
                    return handed
                return await self._search(credentials, schema, None, waiter.deadline, True)
            chosen = pool
        return await self._search(credentials, schema, chosen, 0.0, False)

    async def _search(
        self, credentials: Credentials, schema: str | None, chosen: ServerPool | None, deadline: float, woken: bool
    ) -> BackendConnection:
        """``acquire``'s search for a connection: ``chosen`` tried first; ``deadline`` where
        mysql-connection_wait_timeout ends it (0: not set yet; it is set at the first wait or connect); ``woken``: the
        session waited in line already and was woken with no connection."""
        settings = self.manager.settings
        last_error: BackendError | None = None
        attempts = 0
        connect_deadline: float | None = None  # mysql-connect_timeout_server_max, from the first connect attempt
        waited = False  # counted in Server_Connects_waited
        writer_deadline: float | None = None  # mysql-no_writer_wait_ms, from the first time no server is usable
        while True:
            pool: ServerPool | None
            if chosen is not None and chosen.has_room:
                pool, any_usable = chosen, True
            else:
                pool, any_usable = self._choose() if woken or not len(self.waiters) else (None, True)
            chosen = None
            if not any_usable:
                cause = f"; last error: {last_error}" if last_error else ""
                if self.id not in self.manager.reader_of or settings.no_writer_wait_ms <= 0:
                    raise PoolError(f"hostgroup {self.id} has no ONLINE server{self._states()}{cause}")
                real = MONOTONIC()
                if writer_deadline is None:
                    writer_deadline = real + settings.no_writer_wait_ms / 1000
                if real >= writer_deadline:
                    self.manager.counters.Writer_wait_timeouts += 1
                    raise PoolError(
                        f"hostgroup {self.id} has no writer: none came ONLINE within {settings.no_writer_wait_ms} ms "
                        f"(mysql-no_writer_wait_ms){self._states()}{cause}"
                    )
                await self._await_writer(min(writer_deadline - real, self._until_recovery()))
                deadline = 0.0  # the wait for a connection starts anew
                woken = True
                continue
            if pool is not None:
                conn = self._take_idle(pool, credentials, schema)
                if conn is not None:
                    self.manager.counters.ConnPool_get_conn_immediate += 1
                    return conn
            if pool is not None and not (pool.connecting < pool.connect_slots and self._take_token()):
                if not waited:  # too many connects under way, or throttled: wait in line (below)
                    waited = True
                    self.manager.counters.Server_Connects_waited += 1
            elif pool is not None:
                if connect_deadline is None:
                    now = MONOTONIC()
                    connect_deadline = now + settings.connect_timeout_max_ms / 1000
                    if not deadline:
                        deadline = now + settings.connection_wait_timeout_ms / 1000
                try:
                    return await self._open(pool, credentials, schema)
                except BackendError as exc:
                    if exc.code in REQUEST_ERRORS:  # another attempt would meet it again
                        raise PoolError(f"hostgroup {self.id}: {exc}", exc.code) from None
                    last_error = exc
                    attempts += 1
                    if MONOTONIC() >= connect_deadline:
                        raise PoolError(
                            f"Max connect timeout ({settings.connect_timeout_max_ms} ms) reached while reaching "
                            f"hostgroup {self.id} after {attempts} attempts: {exc}",
                        ) from None
                    if attempts > settings.connect_retries or MONOTONIC() >= deadline:
                        raise PoolError(
                            f"cannot connect to any server of hostgroup {self.id} after {attempts} attempts: {exc}"
                        ) from None
                # Waited outside the ``except`` block: compiled, a coroutine suspended inside one leaves its exception
                # as the thread's handled exception for whatever runs next (another session's ``finally`` re-raised it).
                await asyncio.sleep(settings.connect_retries_delay_ms / 1000)
                continue
            now = MONOTONIC()
            if not deadline:
                deadline = now + settings.connection_wait_timeout_ms / 1000
            elif now >= deadline:
                raise PoolError(
                    f"hostgroup {self.id}: no free backend connection within "
                    f"{settings.connection_wait_timeout_ms} ms ({self._busy()})"
                )
            # Queued until a connection is handed over, or the wait ends with none (try again, or the time is up).
            waiter, wait = self._queue(credentials, schema, deadline)
            try:  # as in ``acquire``
                await wait
            except BaseException:
                self._abandon(waiter)
                raise
            handed = waiter.conn
            if handed is not None:
                return handed
            deadline = waiter.deadline
            woken = True

    async def _await_writer(self, timeout: float) -> None:
        """Wait until this hostgroup's servers change (one may be usable now), at most ``timeout`` seconds."""
        loop = self.manager.loop()
        future: asyncio.Future[None] = loop.create_future()
        self.change_waiters.append(future)
        counters = self.manager.counters
        counters.Sessions_waiting_for_writer += 1
        expiry = loop.call_later(timeout, _wake, future)
        try:
            await future
        finally:
            expiry.cancel()
            counters.Sessions_waiting_for_writer -= 1
            with contextlib.suppress(ValueError):
                self.change_waiters.remove(future)

    def notify_change(self) -> None:
        """The hostgroup's servers or their status changed: wake the queries waiting for a writer."""
        waiting = self.change_waiters
        self.change_waiters = []
        for future in waiting:
            _wake(future)

    def _until_recovery(self) -> float:
        """Seconds until a server this hostgroup's pools shunned becomes worth retrying (a long time if none)."""
        now = self.manager.clock.now()
        recovery = self.manager.settings.shun_recovery_time_sec
        waits = [p.shunned_at + recovery - now for p in self.pools if p.status == SHUNNED and p.server.status == ONLINE]
        return max(0.01, min(waits)) if waits else 3600.0

    def _take_idle(self, pool: ServerPool, credentials: Credentials, schema: str | None) -> BackendConnection | None:
        idle = pool.idle
        for i in range(len(idle) - 1, -1, -1):
            conn = idle[i]
            if _fits(conn, credentials, schema):
                idle.pop(i)
                if conn.wire.closed is not None:
                    conn.close()
                    continue
                self._mark_used(pool, conn)
                return conn
        if idle and pool.used + pool.connecting >= pool.cap:
            idle.pop(0).close()  # make room for this user's connection
        return None

    def _mark_used(self, pool: ServerPool, conn: BackendConnection) -> None:
        pool.used += 1
        conn.busy_at = len(pool.busy)
        pool.busy.append(conn)
        if pool.used > pool.max_used:
            pool.max_used = pool.used

    async def _open(self, pool: ServerPool, credentials: Credentials, schema: str | None) -> BackendConnection:
        settings = self.manager.settings
        pool.connecting += 1
        try:
            conn = await BackendConnection.connect(
                pool.server.hostname,
                pool.server.port,
                credentials,
                schema,
                timeout=settings.connect_timeout_ms / 1000,
                max_packet=settings.max_allowed_packet,
                tls=server_tls(pool.server, settings.tls),
            )
        except BackendError as exc:
            pool.connecting -= 1
            self.manager.counters.Server_Connections_aborted += 1
            if exc.code not in REQUEST_ERRORS:
                pool.record_connect_error(settings)
            else:
                pool.conn_err += 1
            self._wake_one()
            raise
        except BaseException:
            pool.connecting -= 1
            self._wake_one()
            raise
        pool.connecting -= 1
        pool.conn_ok += 1
        if len(self.waiters) and pool.may_open:  # a connect slot is free: the next in line may start one
            self._wake_one()
        conn.created_at = conn.last_used = self.manager.clock.now()
        if self.manager.backend_version is None:
            self.manager.backend_version = conn.server_version
        self.manager.counters.Server_Connections_created += 1
        conn.pool = pool
        self._mark_used(pool, conn)
        return conn

    def _queue(self, credentials: Credentials, schema: str | None, deadline: float) -> tuple[_Waiter, Awaitable[None]]:
        """Queue a session for a connection until ``deadline`` (the monotonic clock): its waiter, and what it awaits
        until the wait ends (``_end``): its driver's park, or else a future."""
        waiter = _Waiter(credentials, schema, deadline)
        self.waiters.push(waiter)
        if self.expiry is None or deadline < self.expiry_at:
            self._expire_at(deadline)
        driver = RUNNING.driver
        if driver is not None:
            waiter.driver = driver
            waiter.park, wait = driver.park()
            return waiter, wait
        future: asyncio.Future[None] = self.manager.loop().create_future()
        waiter.future = future
        return waiter, future

    def _abandon(self, waiter: _Waiter) -> None:
        """A queued session was cancelled: it leaves the queue, or gives back the connection handed to it meanwhile."""
        handed = waiter.conn
        if handed is not None:
            waiter.conn = None
            assert isinstance(handed.pool, ServerPool)
            self.release(handed, handed.pool, reusable=True)
        if not waiter.ended:
            self.waiters.remove(waiter)

    def _expire_at(self, when: float) -> None:
        """Have ``_expire`` run at ``when`` (the monotonic clock), instead of when it was due."""
        if self.expiry is not None:
            self.expiry.cancel()
        self.expiry_at = when
        self.expiry = self.manager.loop().call_later(max(0.0, when - MONOTONIC()), self._expire)

    def _expire(self) -> None:
        """End the waits past their deadline (with None: ``acquire`` finds its time is up), and be due again at the
        earliest deadline left."""
        self.expiry = None
        now = MONOTONIC() + _TIMER_GRANULARITY  # a timer may fire up to that much before its time
        waiting: list[_Waiter] = []
        earliest: float | None = None
        for waiter in self.waiters.waiters():
            if waiter.deadline <= now:
                self._end(waiter, None)
            else:
                waiting.append(waiter)
                if earliest is None or waiter.deadline < earliest:
                    earliest = waiter.deadline
        self.waiters.keep(waiting)
        if earliest is not None:
            self._expire_at(earliest)

    def release(self, conn: BackendConnection, pool: ServerPool, reusable: bool, now: float = 0.0) -> None:
        """Take a connection back: hand it to a waiting session of the same user, keep it idle, or close it (``now``:
        the time on the proxy's clock, when the caller read it already)."""
        settings = self.manager.settings
        if not now:
            now = self.manager.clock.now()
        conn.last_used = now
        too_old = settings.connection_max_age_ms > 0 and (now - conn.created_at) * 1000 > settings.connection_max_age_ms
        if reusable and conn.in_transaction:  # the invariant: another session must never inherit a transaction
            log.error(
                "a connection to %s:%d was released inside a transaction (or in an unknown state): closed, not reused",
                pool.server.hostname,
                pool.server.port,
            )
            reusable = False
        if not reusable or pool.removed or pool.status != ONLINE or too_old:
            pool.used -= 1
            pool.unmark_used(conn)
            conn.close()
            self._wake_one()
            return
        waiters = self.waiters
        first = waiters.first()
        if first is not None:
            if _fits(conn, first.credentials, first.schema):  # the common case: the longest wait, of the same user
                waiters.pop_first()
                self._end(first, conn)
                return
            for waiter in waiters.waiters():
                if _fits(conn, waiter.credentials, waiter.schema):
                    waiters.remove(waiter)
                    self._end(waiter, conn)
                    return
        pool.used -= 1
        pool.unmark_used(conn)
        conn.wire.shed()  # idle, nothing reads it: a large result's buffer goes back now
        pool.idle.append(conn)  # the excess over free_connections_pct is trimmed by ``tidy``, not on the spot
        self._wake_one()

    def tidy(self, pool: ServerPool, now: float) -> list[BackendConnection]:
        """Close ``pool``'s idle connections that broke or passed ``mysql-connection_max_age_ms``, and those beyond
        ``mysql-free_connections_pct`` unused for ``mysql-ping_interval_server_msec``; the other idle connections
        unused that long are taken out (as in use) and returned, to be pinged. Least recently used go first."""
        settings = self.manager.settings
        max_age = settings.connection_max_age_ms / 1000
        quiet = settings.ping_interval_server_ms / 1000
        excess = len(pool.idle) - max(1, math.ceil(pool.cap * settings.free_connections_pct / 100))
        keep: list[BackendConnection] = []
        to_ping: list[BackendConnection] = []
        idle, pool.idle = pool.idle, keep
        for conn in idle:
            unused = now - conn.last_used >= quiet
            if conn.wire.closed is not None or (max_age and now - conn.created_at > max_age) or (unused and excess > 0):
                conn.close()
                excess -= 1
            elif unused:
                self._mark_used(pool, conn)
                to_ping.append(conn)
            else:
                keep.append(conn)
        return to_ping

    async def keep_alive(self, conn: BackendConnection, pool: ServerPool) -> None:
        """Ping an idle connection taken out by ``tidy`` and take it back (closed if the ping failed)."""
        timeout = self.manager.settings.ping_timeout_server_ms / 1000
        try:
            alive = await asyncio.wait_for(conn.simple_command(bytes((Command.PING,))), timeout) is None
        except CONNECTION_LOST:
            alive = False
        if alive:
            conn.last_used = self.manager.clock.now()
        self.release(conn, pool, reusable=alive)

    def _wake_one(self) -> None:
        first = self.waiters.first()
        if first is not None:
            self.waiters.pop_first()
            self._end(first, None)

    def _end(self, waiter: _Waiter, conn: BackendConnection | None) -> None:
        """End a wait taken off the queue with ``conn`` (None: try again, or the time is up). The session resumes on
        the loop's next turn, never inside the caller; one cancelled meanwhile finds ``conn`` when it unwinds and
        gives it back."""
        waiter.ended = True
        waiter.conn = conn
        if waiter.driver is not None:
            self.ended.append(waiter)
            if not self.resuming:
                self.resuming = True
                self.manager.loop().call_soon(self._resume)
            return
        future = waiter.future
        if future is not None and not future.done():
            future.set_result(None)

    def _resume(self) -> None:
        """Resume the parked sessions whose waits ended, in the order they ended; one that fails does not keep the
        others waiting."""
        ended, self.ended = self.ended, []
        self.resuming = False
        for waiter in ended:
            driver = waiter.driver
            assert driver is not None
            try:
                driver.unpark(waiter.park)
            except Exception as exc:  # as the loop reports a callback's exception, which each resume was before
                self.manager.loop().call_exception_handler(
                    {"message": "resuming a session handed a connection failed", "exception": exc}
                )

    def _count_connect_wait(self) -> None:
        """A session queues at once: counted in Server_Connects_waited when a server has its connects under way at
        the bound (it may have room for more connections)."""
        for pool in self.pools:
            if pool.connecting >= pool.connect_slots:
                self.manager.counters.Server_Connects_waited += 1
                return

    def _take_token(self) -> bool:
        """Whether a connect may start under ``mysql-throttle_connections_per_sec_to_hostgroup`` (taking its token);
        when not, the first in line is woken when the next token is due."""
        rate = self.manager.connect_rate
        if rate <= 0.0:  # not throttled
            return True
        now = MONOTONIC()
        tokens = min(max(rate, 1.0), self.tokens + (now - self.tokens_at) * rate)
        self.tokens_at = now
        if tokens >= 1.0:
            self.tokens = tokens - 1.0
            return True
        self.tokens = tokens
        if self.token_timer is None:
            self.token_timer = self.manager.loop().call_later((1.0 - tokens) / rate, self._token_due)
        return False

    def _token_due(self) -> None:
        self.token_timer = None
        self._wake_one()

    def _capacity(self) -> int:
        return sum(p.cap for p in self.pools if p.status == ONLINE)

    def _busy(self) -> str:
        """Why a session found no connection: connects under way at their bound, the throttle, or every connection
        in use."""
        online = [p for p in self.pools if p.status == ONLINE]
        if any(p.used + p.connecting < p.cap and p.connecting >= p.connect_slots for p in online):
            under_way = sum(p.connecting for p in online)
            return f"{under_way} connects under way, at mysql-max_connects_in_flight"
        if self.token_timer is not None:
            throttle = self.manager.settings.throttle_connections_per_sec
            return f"new connections throttled to {throttle}/s (mysql-throttle_connections_per_sec_to_hostgroup)"
        return f"all {self._capacity()} connections in use"

    def _states(self) -> str:
        if not self.pools:
            return " (it has no servers)"
        return " (" + ", ".join(f"{p.server.hostname}:{p.server.port} {p.status}" for p in self.pools) + ")"


class PoolManager:
    """Every hostgroup and server pool of the running config."""

    def __init__(self, counters: GlobalCounters, workers: int = 1, clock: Clock | None = None) -> None:
        self.counters = counters
        #: What connection ages, idle times and shunning count with (``proxyapp.clock``); waits keep real time.
        self.clock = clock if clock is not None else Clock()
        self.workers = workers  # worker processes sharing each server's max_connections
        self.settings = PoolSettings()
        self.hostgroups: dict[int, Hostgroup] = {}
        self.reader_of: dict[int, int] = {}  # writer hostgroup -> its reader hostgroup (replication pairs)
        self.backend_version: str | None = None  # from the first backend greeting, reported to clients
        #: The latest status changes: rows ``{"at", "hostgroup", "srv_host", "srv_port", "from", "to", "reason"}``,
        #: ``from``/``to`` ABSENT when the server was not / is no longer in the hostgroup.
        self.transitions: deque[dict[str, object]] = deque(maxlen=MAX_TRANSITIONS)
        self._pools: dict[tuple[int, str, int], ServerPool] = {}
        self._applied = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pings: set[asyncio.Task[None]] = set()  # keep-alive pings of idle connections in flight
        self.connect_slots = CONNECTS_IN_FLIGHT  # each server's bound of connects under way
        self.connect_rate = 0.0  # this worker's share of the hostgroups' connect throttle per second (0: none)

    def loop(self) -> asyncio.AbstractEventLoop:
        """The running event loop, kept: ``asyncio.get_running_loop()`` makes a getpid() system call each time."""
        loop = self._loop
        if loop is None or loop.is_closed():
            loop = self._loop = asyncio.get_running_loop()
        return loop

    def apply(
        self,
        servers: tuple[MysqlServer, ...],
        settings: PoolSettings,
        reader_of: dict[int, int] | None = None,
        placement: dict[tuple[int, str, int], str] | None = None,
        status_reasons: dict[tuple[int, str, int], str] | None = None,
    ) -> None:
        """Adopt a new (runtime) server list: pools of servers that stay keep their connections; removed ones drain.

        ``reader_of`` maps the replication pairs' writer hostgroups to their reader hostgroups; ``placement`` says why
        a server was added to or removed from a hostgroup, ``status_reasons`` why its status is what it is
        (``proxyapp.backends.topology.RuntimeView``); each change is recorded as a transition.
        """
        placed = placement or {}
        reasons = status_reasons or {}
        self.settings = settings
        self.connect_slots = settings.max_connects_in_flight or _NO_BOUND
        throttle = settings.throttle_connections_per_sec
        self.connect_rate = 0.0 if throttle >= UNTHROTTLED else throttle / self.workers
        self.reader_of = reader_of or {}
        fresh: dict[tuple[int, str, int], ServerPool] = {}
        hostgroups: dict[int, Hostgroup] = {}
        for server in servers:
            key = server.key
            hg = hostgroups.get(server.hostgroup_id)
            if hg is None:
                hg = self.hostgroups.get(server.hostgroup_id) or Hostgroup(server.hostgroup_id, self)
                hg.pools = []
                hostgroups[server.hostgroup_id] = hg
            pool = self._pools.get(key)
            if pool is None:
                why = placed.get(key) or "added by the config"
                if server.status != ONLINE and reasons.get(key):
                    why += f"; {reasons[key]}"
                pool = ServerPool(server, hg, why)
                if self._applied:
                    self.record_transition(server, ABSENT, server.status, why)
            else:
                wanted = pool.server.status != server.status
                pool.server = server
                pool.weight = server.weight
                if wanted:
                    pool.set_status(server.status, reasons.get(key) or f"set to {server.status} in the config")
                pool.cap = self.share_of(server.max_connections)
                pool.connect_slots = self.connect_slots
            hg.pools.append(pool)
            fresh[key] = pool
        for key, pool in self._pools.items():
            if key not in fresh:
                pool.removed = True
                pool.close_idle()
                self.record_transition(pool.server, pool.status, ABSENT, placed.get(key) or "removed from the config")
        for hg_id, hg in self.hostgroups.items():
            if hg_id not in hostgroups:
                # Kept, emptied: queries waiting in it for a writer must be woken when the next config fills it
                # (a failover publishes a topology whose writer hostgroup is empty for a moment).
                hg.pools = []
                hg._wake_one()
                hostgroups[hg_id] = hg
        self._pools = fresh
        self.hostgroups = hostgroups
        self._applied = True
        for hg in hostgroups.values():
            hg.notify_change()

    def record_transition(self, server: MysqlServer, old: str, new: str, reason: str) -> None:
        """Log a server's status change in a hostgroup (ABSENT: not in it) and keep it in ``transitions``."""
        where = f"{server.hostname}:{server.port} in hostgroup {server.hostgroup_id}"
        log.info("server %s: %s -> %s: %s", where, old, new, reason)
        self.transitions.append(
            {
                "at": time.time(),
                "hostgroup": server.hostgroup_id,
                "srv_host": server.hostname,
                "srv_port": server.port,
                "from": old,
                "to": new,
                "reason": reason,
            }
        )

    def stand_in(self, hostgroup_id: int) -> int:
        """Where a statement that only sets session state (SET, USE) runs: ``hostgroup_id``, or its reader hostgroup
        while it is a writer hostgroup without a usable server, so that clients still connect (drivers send SET
        NAMES) and read while a writer is missing. The state is replayed on the writer when one is back."""
        reader = self.reader_of.get(hostgroup_id)
        if reader is None:
            return hostgroup_id
        hg = self.hostgroups.get(hostgroup_id)
        recovery = self.settings.shun_recovery_time_sec
        if hg is not None and any(p.weight > 0 and p.usable(recovery) for p in hg.pools):
            return hostgroup_id
        return reader

    def share_of(self, max_connections: int) -> int:
        """This worker's part of a server's ``max_connections`` (at least 1 unless it is 0)."""
        if max_connections <= 0:
            return 0
        return max(1, max_connections // self.workers)

    def hostgroup(self, hostgroup_id: int) -> Hostgroup:
        """The hostgroup with this id (an empty one if the config has no servers in it): the same object for good
        (``apply`` keeps each hostgroup's, emptied when the config drops it), so a caller may keep it."""
        hg = self.hostgroups.get(hostgroup_id)
        if hg is None:
            hg = self.hostgroups[hostgroup_id] = Hostgroup(hostgroup_id, self)
        return hg

    def rows(self) -> list[dict[str, object]]:
        """stats_mysql_connection_pool rows."""
        return [pool.row() for hg in sorted(self.hostgroups) for pool in self.hostgroups[hg].pools]

    def housekeeping(self, now: float) -> None:
        """Tidy every pool's idle connections (``Hostgroup.tidy``) and ping those unused for a while."""
        loop = self.loop()
        for pool in list(self._pools.values()):
            for conn in pool.hostgroup.tidy(pool, now):
                spawn(pool.hostgroup.keep_alive(conn, pool), self._pings, "a keep-alive ping", loop)

    def close_all(self) -> None:
        """Close every idle connection and stop the keep-alive pings (at shutdown)."""
        for task in list(self._pings):
            task.cancel()
        for pool in self._pools.values():
            pool.close_idle()
