"""A session's query path in one process, without sockets or servers: a ``Proxy`` built from a config document (never
started), a client on an in-memory transport, and backend connections whose server is a script (``ScriptedServer``):
each command it is sent is answered with the next reply written for it. What the client was sent, what each server was
sent, and what the session and its pools hold afterwards are all there to assert on."""

from __future__ import annotations

import asyncio
from typing import Any

from proxyapp.config.document import parse_config
from proxyapp.mysql.backend import BackendConnection
from proxyapp.mysql.constants import FieldType, Status
from proxyapp.mysql.handshake import ServerGreeting
from proxyapp.mysql.packets import err_packet, frame, ok_packet
from proxyapp.mysql.resultset import result_set
from proxyapp.mysql.wire import Wire
from proxyapp.process.server import Proxy
from proxyapp.session.client import Client
from proxyapp.session.link import BackendLink
from proxyapp.session.query import QueryPipeline
from proxyapp.session.state import SessionState
from tests.support.transport import MemoryTransport

HOSTGROUP = 10
USER = "app"


def ok(affected: int = 0, insert_id: int = 0, status: int = Status.AUTOCOMMIT) -> bytes:
    """A server's OK answer to a command."""
    return frame(ok_packet(affected, insert_id, status, 0), 1)


def error(code: int, message: str) -> bytes:
    """A server's error answer to a command."""
    return frame(err_packet(code, message), 1)


def rows(column: str, values: list[Any]) -> bytes:
    """A server's result set of one text column."""
    return result_set([(column, FieldType.VAR_STRING)], [[v] for v in values])


def packets(data: bytes | bytearray) -> list[tuple[int, bytes]]:
    """The MySQL packets in ``data``: (sequence id, payload) each."""
    found = []
    at = 0
    while at + 4 <= len(data):
        length = int.from_bytes(data[at : at + 3], "little")
        found.append((data[at + 3], bytes(data[at + 4 : at + 4 + length])))
        at += 4 + length
    return found


class PeerTransport(MemoryTransport):
    """An in-memory transport with the addresses a socket's has."""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("10.0.0.9", 40000), "sockname": ("127.0.0.1", 6033)}.get(name, default)


class ScriptedServer(PeerTransport):
    """A MySQL server in memory behind one backend connection: each command written to it is answered, on the loop's
    next turn, with the next of ``replies`` (whole packets); with none left it closes the connection, as a server that
    went away."""

    def __init__(self, replies: list[bytes]) -> None:
        super().__init__()
        self.replies = list(replies)
        self.commands: list[bytes] = []  # the command payloads it was sent, in order
        self.wire: Wire | None = None
        self._partial = bytearray()

    def write(self, data: bytes) -> None:
        super().write(data)
        self._partial += data
        for seq, payload in packets(self._partial):
            if seq == 0:
                self.commands.append(payload)
                reply = self.replies.pop(0) if self.replies else None
                asyncio.get_running_loop().call_soon(self._answer, reply)
        consumed = sum(4 + len(p) for _, p in packets(self._partial))
        del self._partial[:consumed]

    def _answer(self, reply: bytes | None) -> None:
        wire = self.wire
        assert wire is not None
        if reply is None:
            self.closed = True
            wire.closed = "connection closed by peer"
        else:
            wire.buf += reply
        wire.wake()


class SessionRig:
    """One session's query path (``QueryPipeline`` over a ``BackendLink``) in front of scripted servers; made in a
    running event loop."""

    def __init__(self, variables: dict[str, str] | None = None, rules: list[dict[str, Any]] | None = None) -> None:
        document = {
            "mysql_servers": [{"hostgroup_id": HOSTGROUP, "hostname": "db", "port": 3306}],
            "mysql_users": [{"username": USER, "password": "secret", "default_hostgroup": HOSTGROUP}],
            "mysql_query_rules": rules or [],
            "global_variables": [
                {"variable_name": name, "variable_value": value}
                for name, value in {"mysql-have_ssl": "false", **(variables or {})}.items()
            ],
        }
        self.proxy = Proxy(parse_config(document))
        self.client_transport = PeerTransport()
        self.client = Client(Wire(self.client_transport), self.proxy.counters)  # type: ignore[arg-type]
        self.client.become(self.proxy.runtime, USER, None)
        self.state = SessionState()
        self.link = BackendLink(self.proxy, self.client, self.state, 1)
        self.pipeline = QueryPipeline(self.proxy, self.client, self.state, self.link, 1)
        self.servers: list[ScriptedServer] = []

    def server(self, *replies: bytes) -> ScriptedServer:
        """An idle pooled connection of the hostgroup whose server answers with ``replies``, in order. The pools hand
        out the connection that went idle last first: the last one made is the first one drawn."""
        hostgroup = self.proxy.pools.hostgroup(HOSTGROUP)
        pool = hostgroup.pools[0]
        script = ScriptedServer(list(replies))
        wire = Wire(script)  # type: ignore[arg-type]
        script.wire = wire
        greeting = ServerGreeting("11.4.0-MariaDB", 100 + len(self.servers), b"s" * 20, 0, 45)
        conn = BackendConnection(wire, greeting, USER, None, flags=self.client.credentials.flags)
        conn.pool = pool
        hostgroup._mark_used(pool, conn)
        hostgroup.release(conn, pool, True)
        self.servers.append(script)
        return script

    async def query(self, sql: str) -> list[tuple[int, bytes]]:
        """Send ``sql`` as a COM_QUERY; the packets the client got for it."""
        start = len(self.client_transport.written)
        await self.pipeline.com_query(b"\x03" + sql.encode())
        return packets(self.client_transport.written[start:])

    def idle(self) -> int:
        """The hostgroup's idle connections."""
        return sum(len(pool.idle) for pool in self.proxy.pools.hostgroup(HOSTGROUP).pools)
