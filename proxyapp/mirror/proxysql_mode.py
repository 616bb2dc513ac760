"""ProxySQL's mirror: a statement copied with the session's user and schema and run on any pooled connection of the
mirror hostgroup, in no particular order, outside any transaction, its result thrown away."""

from __future__ import annotations

import time

from proxyapp.backends.pool import PoolError, PoolManager, ServerPool
from proxyapp.mirror.counts import MirrorCounts
from proxyapp.mysql.backend import BackendConnection, Credentials
from proxyapp.mysql.wire import CONNECTION_LOST, read_response

#: ProxySQL mirrors only packets below this size.
PROXYSQL_MAX_PACKET = 15 << 20
#: The error code counted when the mirror connection broke (the client's).
LOST_CONNECTION = 2013


class ProxysqlEntry:
    """A ProxySQL-mode mirror waiting to run."""

    __slots__ = ("created", "credentials", "hostgroup", "payload", "reusable", "schema")

    def __init__(
        self, hostgroup: int, credentials: Credentials, schema: str | None, payload: bytes, reusable: bool
    ) -> None:
        self.hostgroup = hostgroup
        self.credentials = credentials
        self.schema = schema
        self.payload = payload
        self.reusable = reusable  # the statement changes no session state: its connection may go back to the pool
        self.created = time.time()


async def run_entry(entry: ProxysqlEntry, pools: PoolManager, counts: MirrorCounts) -> None:
    """Run one ProxySQL-mode mirror on a pooled connection with the session's user and schema, counted in
    ``counts``."""
    hostgroup = pools.hostgroup(entry.hostgroup)
    try:
        idle = hostgroup.take_idle(entry.credentials, entry.schema)
        if isinstance(idle, BackendConnection):
            conn = idle
        else:
            conn = await hostgroup.acquire(entry.credentials, entry.schema, idle)
    except PoolError as unavailable:
        counts.fail(unavailable.code)
        counts.last_error = f"hostgroup {entry.hostgroup}: {unavailable}"
        return
    pool = conn.pool
    assert isinstance(pool, ServerPool)
    reusable = False
    try:
        if entry.schema and conn.state.schema != entry.schema:
            err = await conn.simple_command(b"\x02" + entry.schema.encode("utf-8", "surrogateescape"))
            if err is not None:
                counts.fail(err.code)
                return
            conn.state.schema = entry.schema
        sent = conn.wire.bytes_out
        conn.wire.send(entry.payload, 0)
        response = await read_response(conn.wire, None)
        await conn.settle(response)
        pool.queries += 1
        pool.bytes_sent += conn.wire.bytes_out - sent
        if response.error is not None:
            counts.fail(response.error.code)
        else:
            counts.complete(1)
        reusable = entry.reusable and not conn.in_transaction
    except CONNECTION_LOST as lost:
        counts.fail(LOST_CONNECTION)
        counts.last_error = f"hostgroup {entry.hostgroup}: lost the mirror connection: {lost}"
    finally:
        pool.hostgroup.release(conn, pool, reusable)
