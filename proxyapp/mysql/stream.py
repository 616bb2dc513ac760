"""How a wire's bytes get to and from its socket: the protocol that makes a ``Wire`` for a new connection, and the
transport of its own it then runs on.

A uvloop stream read takes and gives back the GIL twice, makes a bytes object and calls the protocol, which copies it
onto the wire's buffer. When the C socket calls are built (``_sockio``), ``WireProtocol`` takes the connection's
socket away from the loop's transport as it is made (a duplicate of its descriptor; the transport is closed before
it read a byte) and runs it on a ``SocketTransport``: the loop tells it the socket is readable, and one ``recv``
appends to the wire's buffer. Writes go straight to the socket (``Wire.put``); what the kernel does not take waits
in the transport, in order, until the socket is writable, with the asyncio flow control (``pause_writing``) over it.
Without the extension every connection stays on the loop's own transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from proxyapp.mysql.packets import ProtocolError
from proxyapp.mysql.wire import SEND_NOW, Wire


def _load_recv_append() -> Callable[[int, bytearray], int] | None:
    try:
        from proxyapp.mysql import _sockio
    except ImportError:  # not built (``make build``), or PROXYFLEET_NATIVE=0: connections stay on the loop's transports
        return None
    return _sockio.recv_append


#: Reads what a socket holds onto a bytearray without blocking (``_sockio.c``), when built: then wires run on a
#: ``SocketTransport``.
RECV_APPEND: Final = _load_recv_append()
#: The write buffer's marks, as asyncio's transports have them: over ``HIGH_WATER`` the protocol is paused, at
#: ``LOW_WATER`` or under resumed.
HIGH_WATER: Final = 64 * 1024
LOW_WATER: Final = 16 * 1024

#: TCP keepalive on every connection, both sides: a peer that vanished (its host down, the network cut) is
#: noticed after about two minutes of silence (60 s idle, then 6 probes 10 s apart), not after mysql-wait_timeout
#: or default_query_timeout, and a session waiting on it ends.
KEEPALIVE = (
    (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
    (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 60),
    (socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 10),
    (socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 6),
)


def keep_alive(sock: socket.socket) -> None:
    """Turn TCP keepalive on for ``sock`` (``KEEPALIVE``)."""
    for level, option, value in KEEPALIVE:
        sock.setsockopt(level, option, value)


class _Released(asyncio.Protocol):
    """The protocol a loop's transport keeps once its socket went to a ``SocketTransport``: it hears that
    transport's end, which is not the connection's."""


class SocketTransport:
    """A transport over a connected non-blocking socket, for one ``WireProtocol``: reads appended straight to its
    wire's buffer from the loop's readiness callback; writes queued in order while the kernel will not take them.

    It has what a wire and its users ask of a transport (``proxyapp.mysql.wire.Transport``), with asyncio's
    meanings: ``close`` sends what is queued first, ``abort`` does not; ``connection_lost`` comes once, from the
    loop, after either or after the peer's end or a failed read or write."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: WireProtocol) -> None:
        self.loop = loop
        self.sock = sock
        self.fd = sock.fileno()
        self.protocol = protocol
        self.wire: Wire | None = None  # set by ``begin``
        self.queued: deque[bytes] = deque()  # what the kernel has not taken yet, in order
        self.queued_size = 0
        self.high = HIGH_WATER
        self.low = LOW_WATER
        self.reading = False  # the loop watches the socket for reading
        self.reading_paused = False  # the protocol paused reading
        self.writing_paused = False  # the protocol was told to pause writing
        self.closing = False
        self.finished = False  # the socket is closed and ``connection_lost`` was called or is due
        self.extra: dict[str, Any] = {"socket": sock}
        for name, ask in (("peername", sock.getpeername), ("sockname", sock.getsockname)):
            with contextlib.suppress(OSError):  # a peer gone already has no address: the wire says ("", 0)
                self.extra[name] = ask()

    def begin(self, wire: Wire) -> None:
        """Start reading into ``wire``."""
        self.wire = wire
        self._watch()

    def readable(self) -> None:
        """The loop's reading callback: what the socket holds goes onto the wire's buffer (through the protocol when
        it is encrypted or compressed); its end or a failed read ends the connection."""
        wire = self.wire
        assert wire is not None and RECV_APPEND is not None
        try:
            if wire.tls is None and wire.compression is None:
                got = RECV_APPEND(self.fd, wire.buf)
                if got > 0:
                    wire.bytes_in += got
                    wire.arrived()
                    return
            else:
                scratch = bytearray()
                got = RECV_APPEND(self.fd, scratch)
                if got > 0:
                    self.protocol.data_received(bytes(scratch))
                    return
        except OSError as exc:
            self._end(exc)
            return
        if got == 0:
            self._unwatch()
            if not self.protocol.eof_received():
                self.close()

    def write(self, data: bytes) -> None:
        """Queue ``data`` behind what the kernel has not taken yet (the wire sent what it could itself)."""
        if self.closing or not data:
            return
        if not self.queued:
            self.loop.add_writer(self.fd, self.writable)
        self.queued.append(bytes(data))
        self.queued_size += len(data)
        if self.queued_size > self.high and not self.writing_paused:
            self.writing_paused = True
            self.protocol.pause_writing()

    def writable(self) -> None:
        """The loop's writing callback: send what is queued, as much as the kernel takes."""
        queued = self.queued
        while queued:
            data = queued[0]
            try:
                sent = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self._end(exc)
                return
            self.queued_size -= sent
            if sent < len(data):
                queued[0] = data[sent:]
                break
            queued.popleft()
        if self.writing_paused and self.queued_size <= self.low:
            self.writing_paused = False
            self.protocol.resume_writing()
        if not queued:
            self.loop.remove_writer(self.fd)
            if self.closing:
                self._end(None)

    def get_write_buffer_size(self) -> int:
        """The bytes queued and not yet taken by the kernel."""
        return self.queued_size

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        """Set the write buffer's marks (as asyncio does: ``low`` defaults to a quarter of ``high``)."""
        if high is None:
            high = HIGH_WATER if low is None else 4 * low
        if low is None:
            low = high // 4
        if not high >= low >= 0:
            raise ValueError(f"high ({high!r}) must be >= low ({low!r}) must be >= 0")
        self.high, self.low = high, low

    def pause_reading(self) -> None:
        """Stop reading until ``resume_reading``."""
        self.reading_paused = True
        self._unwatch()

    def resume_reading(self) -> None:
        """Read again."""
        self.reading_paused = False
        if not self.closing:
            self._watch()

    def is_closing(self) -> bool:
        """Whether the transport is closing or closed."""
        return self.closing

    def close(self) -> None:
        """Stop reading, send what is queued, then close the socket."""
        if self.closing:
            return
        self._closing()
        self._unwatch()
        if not self.queued:
            self._end(None)

    def abort(self) -> None:
        """Close the socket now, dropping what is queued."""
        self._end(None)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """The socket (``socket``) and its addresses (``peername``, ``sockname``)."""
        return self.extra.get(name, default)

    def _closing(self) -> None:
        """From now on nothing more is written: tell the wire (``Wire.shut``)."""
        self.closing = True
        if self.wire is not None:
            self.wire.shut = True

    def _watch(self) -> None:
        if not self.reading and not self.reading_paused and not self.finished:
            self.reading = True
            self.loop.add_reader(self.fd, self.readable)

    def _unwatch(self) -> None:
        if self.reading:
            self.reading = False
            self.loop.remove_reader(self.fd)

    def _end(self, exc: Exception | None) -> None:
        """Close the socket now and have the loop tell the protocol (``exc``: why, when it failed)."""
        if self.finished:
            return
        self.finished = True
        self._closing()
        self._unwatch()
        if self.queued:
            self.queued.clear()
            self.queued_size = 0
            self.loop.remove_writer(self.fd)
        self.sock.close()
        self.loop.call_soon(self.protocol.connection_lost, exc)


def own_socket(transport: asyncio.BaseTransport, protocol: WireProtocol) -> SocketTransport | None:
    """Take the socket of a stream ``transport`` that was just made (nothing read from it yet) onto a
    ``SocketTransport`` for ``protocol``, closing the loop's transport; None when it has no stream socket or the C
    socket calls are not built."""
    sock = transport.get_extra_info("socket")
    if RECV_APPEND is None or sock is None or sock.type != socket.SOCK_STREAM:
        return None
    own = socket.socket(sock.family, sock.type, sock.proto, fileno=os.dup(sock.fileno()))
    own.setblocking(False)
    transport.set_protocol(_Released())
    transport.close()  # nothing written or read yet: it closes its descriptor now, and tells ``_Released``
    return SocketTransport(asyncio.get_running_loop(), own, protocol)


class WireProtocol(asyncio.Protocol):
    """Feeds a connection's bytes straight into a ``Wire``'s buffer (no stream layer in between)."""

    __slots__ = ("own_socket", "wire")

    def __init__(self, own_socket: bool = True) -> None:
        self.wire: Wire | None = None
        self.own_socket = own_socket  # False: stay on the loop's transport (the tests of both)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Attach a new wire to the connection, on a ``SocketTransport`` of its own when it can."""
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            keep_alive(sock)
        own = own_socket(transport, self) if self.own_socket else None
        wire = self.wire = Wire(own if own is not None else transport)  # type: ignore[arg-type]  # uvloop's
        if own is not None:
            wire.fd = own.fd
            wire.told = True
            own.begin(wire)
        elif sock is not None and SEND_NOW is not None:
            wire.fd = sock.fileno()

    def data_received(self, data: bytes) -> None:
        """Append to the buffer (decrypted, uncompressed) and wake the reader."""
        wire = self.wire
        assert wire is not None
        tls = wire.tls
        if tls is not None:
            try:
                data = tls.unwrap(data)
            except ssl.SSLError as broken:  # the session's next read ends it with this reason
                wire.closed = f"TLS error: {broken.reason or broken}"
                wire.transport.close()
                wire.wake()
                return
            answer = tls.pending()
            if answer:
                wire.put(answer)
            if not data:
                return
        if wire.compression is not None:
            try:
                data = wire.compression.unpack(data)
            except ProtocolError as malformed:  # the session's next read ends it with this reason
                wire.closed = f"malformed compressed packet: {malformed}"
                wire.transport.close()
                wire.wake()
                return
        wire.bytes_in += len(data)
        wire.buf += data
        wire.arrived()

    def eof_received(self) -> bool:
        """The peer will send no more."""
        if self.wire is not None:
            self.wire.closed = "connection closed by peer"
            self.wire.wake()
            self.wire.peer_gone()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """The transport is gone: fail pending reads and drains."""
        wire = self.wire
        if wire is None:
            return
        wire.closed = str(exc) if exc else (wire.closed or "connection closed")
        wire.wake()
        wire.resume_writing()
        wire.peer_gone()

    def pause_writing(self) -> None:
        """The transport's write buffer is over its high-water mark."""
        if self.wire is not None:
            self.wire.writing_paused = True

    def resume_writing(self) -> None:
        """The transport's write buffer has drained."""
        if self.wire is not None:
            self.wire.resume_writing()


async def open_wire(host: str, port: int) -> Wire:
    """Connect to ``host:port`` and return the connection's wire."""
    loop = asyncio.get_running_loop()
    _, protocol = await loop.create_connection(WireProtocol, host, port)
    assert protocol.wire is not None
    return protocol.wire
