"""What a session may use of the proxy that runs it, and nothing more: counters and digest stats, the pools, the
loaded config (``runtime``, replaced by a reload), the query cache, the events log, the listener that hears its
commands, the task set for background work, the node's session seats, the clock, the start time, the TLS
contexts, the XA coordinator, the sharded tables' sequences, the hot-row queues, and KILL.
``server.Proxy`` provides it; a session never sees the rest of the proxy (its listener, admin endpoint, monitor,
other sessions).
"""

from __future__ import annotations

import asyncio

from proxyapp.backends.pool import PoolManager
from proxyapp.clients.seats import Seats
from proxyapp.clients.throttle import AuthThrottle
from proxyapp.clock import Clock
from proxyapp.hotrows.heat import HeatMap
from proxyapp.hotrows.service import HotRows
from proxyapp.mysql.tls import TlsContexts
from proxyapp.report.eventslog import EventsLog
from proxyapp.report.sharding import ShardingStats
from proxyapp.report.stats import DigestStats, GlobalCounters
from proxyapp.rules.cache import QueryCache
from proxyapp.rules.runtime import Runtime
from proxyapp.session.events import SessionListener
from proxyapp.sharding.coordinator import Coordinator
from proxyapp.sharding.sequence import Sequences


class SessionServices:
    """The proxy as its sessions see it (a concrete base class: mypyc compiles the calls directly)."""

    counters: GlobalCounters
    digests: DigestStats
    sharding: ShardingStats  # per-digest: statements on sharded tables by shards reached
    pools: PoolManager
    runtime: Runtime
    cache: QueryCache
    events: EventsLog
    listener: SessionListener
    background: set[asyncio.Task[None]]
    seats: Seats  # the node's sessions, for mysql-max_connections
    throttle: AuthThrottle  # failed logins by client address
    clock: Clock  # what session limits, idle times and login throttling count with
    started: float  # the clock's time the proxy started
    tls: TlsContexts  # what clients are offered (``frontend``) and TLS backends reached with, as last loaded
    xa: Coordinator | None  # the XA decision log and recovery, once a config has sharded tables
    xa_error: str  # why ``xa`` could not be opened ("" if it was, or was not needed)
    sequences: Sequences  # the blocks of the sharded tables' sequences this worker holds, kept across reloads
    hot_rows: HotRows  # the hot-row queues' lines (this worker's, or the node's through the supervisor's broker)
    heat: HeatMap  # the search for hot keys, its proposals and the queues it applied

    async def kill_session(self, target: int, query_only: bool, username: str | None) -> dict:
        """KILL [QUERY] of session ``target`` on behalf of ``username`` (None: the admin); the outcome."""
        raise NotImplementedError
