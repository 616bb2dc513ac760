"""Connection pools for unit tests: a hostgroup whose connections are all handed out, on in-memory transports (made
in a running event loop, as wires are)."""

from __future__ import annotations

from proxyapp.backends.pool import Hostgroup, PoolManager, ServerPool
from proxyapp.config.tables import MysqlServer
from proxyapp.mysql.backend import BackendConnection
from proxyapp.mysql.handshake import ServerGreeting
from proxyapp.mysql.wire import Wire
from proxyapp.report.stats import GlobalCounters
from tests.support.transport import MemoryTransport


def full_hostgroup(connections: int = 1, username: str = "app") -> tuple[Hostgroup, list[BackendConnection]]:
    """Hostgroup 1 of one server whose ``connections`` connections (its max_connections) are all handed out, to
    ``username``: a session asking for one waits."""
    hg = Hostgroup(1, PoolManager(GlobalCounters()))
    pool = ServerPool(MysqlServer(hostname="db", hostgroup_id=1, max_connections=connections), hg)
    hg.pools.append(pool)
    conns = []
    for _ in range(connections):
        wire = Wire(MemoryTransport())  # type: ignore[arg-type]
        conn = BackendConnection(wire, ServerGreeting("10.11.0", 7, b"s" * 20, 0, 45), username, None)
        conn.pool = pool
        hg._mark_used(pool, conn)
        conns.append(conn)
    return hg, conns
