"""One forwarded connection: the client's side and the server's, splicing bytes both ways and counting them.

The client's first 8 bytes are read before a server is chosen: a CancelRequest is not a session but a message for the
server that runs the session it names, so it goes to every server of the hostgroup (only that one acts on it) and
the connection ends. Anything else opens a connection to one server (the ``Opener`` picks it) and from then on bytes
pass untouched: TLS, authentication and every message are the client's and the server's business. Each side pauses
reading the other while its own write buffer is full, so a fast sender never fills the proxy's memory.

When the C relay is used (``splicing``) the opener connects a plain socket instead of a transport, and once it is
connected both sockets go to the C relay with the client's pending bytes: the Protocols here then only count the
connection out when the relay reports its end.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Awaitable, Callable

from proxyapp.forward.splicing import SPLICER
from proxyapp.pgsql.messages import (
    CANCEL_REQUEST_LENGTH,
    CANNOT_CONNECT_NOW,
    ENCRYPTION_REQUESTS,
    error_response,
    first_message,
    is_cancel_request,
)

log = logging.getLogger("proxyapp.forward")

#: The most a client may send before its server is connected (a first message is a few hundred bytes).
MAX_PENDING = 64 * 1024


class Refused(Exception):
    """No server connection for this client: the ErrorResponse's SQLSTATE and message say why."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message


class ListenerCounters:
    """A listener's figures in one process."""

    __slots__ = ("active", "bytes_from_clients", "bytes_to_clients", "refused", "spliced", "total")

    def __init__(self) -> None:
        self.active = 0
        self.total = 0
        self.refused = 0
        self.spliced = 0  # connections handed to the C relay
        self.bytes_from_clients = 0
        self.bytes_to_clients = 0


class ServerCounters:
    """A server's figures as forwarding target in one process."""

    __slots__ = ("active", "bytes_recv", "bytes_sent", "connect_errors", "total")

    def __init__(self) -> None:
        self.active = 0
        self.total = 0
        self.connect_errors = 0
        self.bytes_sent = 0
        self.bytes_recv = 0


#: Opens the server side of a client's connection (its ``counters`` set and counted in); ``Refused`` when no server
#: could be reached.
Opener = Callable[["ClientSide"], Awaitable["ServerSide"]]
#: Sends a CancelRequest to every server that may run the session it names.
CancelSender = Callable[[bytes], Awaitable[None]]


class ServerSide(asyncio.Protocol):
    """The connection to the chosen server: what it sends goes to the client. For the C relay it is only a
    connected ``sock``, never a transport."""

    __slots__ = ("client", "counters", "sock", "transport")

    def __init__(self, client: ClientSide, sock: socket.socket | None = None) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.sock = sock
        self.counters: ServerCounters | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport; the client's side links itself once the connect returns."""
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        """Pass the server's bytes to the client."""
        client = self.client
        transport = client.transport
        if transport is not None:
            transport.write(data)
        n = len(data)
        client.counters.bytes_to_clients += n
        counters = self.counters
        if counters is not None:
            counters.bytes_recv += n

    def pause_writing(self) -> None:
        """The server is not taking bytes: stop reading the client."""
        transport = self.client.transport
        if transport is not None:
            transport.pause_reading()

    def resume_writing(self) -> None:
        """The server takes bytes again: read the client again."""
        transport = self.client.transport
        if transport is not None and not transport.is_closing():
            transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        """The server went away: so does the client, once what it was sent is written."""
        self.client.server_lost(self)


class ClientSide(asyncio.Protocol):
    """A client of a forwarding listener, from its first bytes to its disconnect."""

    __slots__ = (
        "cancel",
        "counters",
        "ended",
        "on_end",
        "open_server",
        "pair",
        "pending",
        "refusal",
        "server",
        "spliced",
        "started",
        "timer",
        "transport",
    )

    def __init__(
        self,
        counters: ListenerCounters,
        open_server: Opener,
        cancel: CancelSender,
        refusal: tuple[str, str] | None,
    ) -> None:
        self.counters = counters
        self.open_server = open_server
        self.cancel = cancel
        self.refusal = refusal  # (SQLSTATE, message) when this client is refused at once (too many connections)
        self.transport: asyncio.Transport | None = None
        self.server: ServerSide | None = None
        self.pending = bytearray()
        self.started = False
        self.ended = False
        self.spliced = False  # its sockets were handed to the C relay
        self.pair = 0  # its id there
        self.timer: asyncio.TimerHandle | None = None
        self.on_end: list[Callable[[], None]] = []  # called once the client is gone

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Count the client in and wait for its first message."""
        self.transport = transport  # type: ignore[assignment]
        self.counters.active += 1
        self.counters.total += 1
        if self.refusal is not None:
            self.counters.refused += 1

    def start_timer(self, seconds: float) -> None:
        """End the connection if its first message has not come within ``seconds``."""
        self.timer = asyncio.get_running_loop().call_later(seconds, self._silent)

    def _silent(self) -> None:
        if not self.started and self.transport is not None:
            self._refuse(CANNOT_CONNECT_NOW, "no startup message within the client connect timeout")

    def data_received(self, data: bytes) -> None:
        """Forward to the server once linked; before that, read the first message and decide."""
        server = self.server
        if server is not None:
            transport = server.transport
            if transport is not None:
                transport.write(data)
            n = len(data)
            self.counters.bytes_from_clients += n
            counters = server.counters
            if counters is not None:
                counters.bytes_sent += n
            return
        self.pending += data
        self.counters.bytes_from_clients += len(data)
        if self.started:
            if len(self.pending) > MAX_PENDING and self.transport is not None:
                self.transport.pause_reading()
            return
        if len(self.pending) < 8:
            return
        length, _ = first_message(bytes(self.pending[:8]))
        if self.refusal is not None:
            self._refuse(*self.refusal)
            return
        if is_cancel_request(bytes(self.pending[:8])):
            if len(self.pending) < CANCEL_REQUEST_LENGTH:
                return
            self._begin()
            request = bytes(self.pending[:CANCEL_REQUEST_LENGTH])
            self._spawn(self._send_cancel(request))
            return
        if length < 8 or length > 10_000:
            self._refuse("08P01", f"invalid length of startup packet: {length}")
            return
        self._begin()
        if self.transport is not None:
            self.transport.pause_reading()
        self._spawn(self._connect())

    def _begin(self) -> None:
        self.started = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        _TASKS.add(task)
        task.add_done_callback(_TASKS.discard)

    async def _send_cancel(self, request: bytes) -> None:
        try:
            await self.cancel(request)
        finally:
            if self.transport is not None:
                self.transport.close()

    async def _connect(self) -> None:
        try:
            server = await self.open_server(self)
        except Refused as refused:
            self._refuse(refused.sqlstate, refused.message)
            return
        except Exception:
            log.exception("forwarding: opening a server connection failed")
            self._refuse(CANNOT_CONNECT_NOW, "the proxy could not open a server connection")
            return
        if server.sock is not None:
            self._splice(server, server.sock)
            return
        transport = server.transport
        if self.ended or self.transport is None or transport is None or transport.is_closing():
            if transport is not None:  # the client left while its server was being reached, or the server did
                transport.close()
            if self.transport is not None:
                self.transport.close()
            return
        self.server = server
        transport.write(bytes(self.pending))
        if server.counters is not None:
            server.counters.bytes_sent += len(self.pending)
        self.pending.clear()
        self.transport.resume_reading()

    def _splice(self, server: ServerSide, sock: socket.socket) -> None:
        """Hand the client's socket and its server's to the C relay, the pending bytes to be written first."""
        transport = self.transport
        fd = -1
        if not self.ended and transport is not None and not transport.is_closing() and SPLICER is not None:
            raw = transport.get_extra_info("socket")
            try:
                fd = os.dup(raw.fileno()) if raw is not None else -1
            except OSError as exc:
                log.error("forwarding: cannot take a client's socket over: %s", exc)
        if fd < 0:  # the client left while its server was being reached, or its socket cannot be taken over
            sock.close()
            self.server_lost(server)
            return
        assert transport is not None and SPLICER is not None
        self.server = server
        self.spliced = True
        self.transport = None
        transport.close()  # releases the event loop's descriptor, not the socket: connection_lost counts nothing
        pending = bytes(self.pending)
        self.pending.clear()
        if server.counters is not None:
            server.counters.bytes_sent += len(pending)
        try:
            self.pair = SPLICER.add(self, server.counters, fd, sock.detach(), pending)
        except (OSError, MemoryError) as exc:  # the relay could not take them: it closed both descriptors
            log.error("forwarding: the C relay cannot take a connection: %s", exc)
            self.spliced_end(server.counters)
            return
        self.counters.spliced += 1

    def spliced_end(self, server: ServerCounters | None) -> None:
        """The C relay ended the connection: count it out of the listener and the server."""
        if server is not None:
            server.active -= 1
        self.pair = 0
        self._end()

    def _refuse(self, sqlstate: str, message: str) -> None:
        """Answer with an ErrorResponse and end the connection. A client that asked for TLS or GSS encryption is
        told "N" first and refused at its StartupMessage: libpq shows no error text sent before it."""
        self._begin()
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if len(self.pending) >= 8 and first_message(bytes(self.pending[:8]))[1] in ENCRYPTION_REQUESTS:
            del self.pending[:8]
            transport.write(b"N")
            self.refusal = (sqlstate, message)
            self.started = False
            transport.resume_reading()
            self.data_received(b"")
            return
        transport.write(error_response(sqlstate, message))
        transport.close()

    def pause_writing(self) -> None:
        """The client is not taking bytes: stop reading the server."""
        server = self.server
        if server is not None and server.transport is not None:
            server.transport.pause_reading()

    def resume_writing(self) -> None:
        """The client takes bytes again: read the server again."""
        server = self.server
        if server is not None and server.transport is not None and not server.transport.is_closing():
            server.transport.resume_reading()

    def close(self) -> None:
        """End the connection both ways (a server taken OFFLINE_HARD, the proxy stopping)."""
        if self.pair and SPLICER is not None:
            SPLICER.close(self.pair)
        if self.transport is not None:
            self.transport.close()
        server = self.server
        if server is not None and server.transport is not None:
            server.transport.close()

    def server_lost(self, server: ServerSide) -> None:
        """The server side closed: count it out, and close the client after what it was sent."""
        counters = server.counters
        if counters is not None:
            counters.active -= 1
            server.counters = None
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """The client went away: close its server connection, count it out. A spliced client's transport closed when
        its socket went to the C relay: it is counted out when the relay reports its end."""
        if not self.spliced:
            self._end()

    def _end(self) -> None:
        if self.ended:
            return
        self.ended = True
        self.counters.active -= 1
        if self.timer is not None:
            self.timer.cancel()
        server = self.server
        if server is not None and server.transport is not None:
            server.transport.close()
        for done in self.on_end:
            done()


#: Tasks the relay started and nobody awaits (server connects, cancel requests): kept until done.
_TASKS: set[asyncio.Future[None]] = set()
