"""A PostgreSQL peer's connection as whole messages, straight from an asyncio Protocol.

What arrives is kept in one buffer and handed out as whole messages: ``batch()`` gives every message that has fully
arrived (waiting only when none has), so that the proxy answers a batch with one write, one system call, instead of
one per message. A ``sink`` takes them instead, as they arrive, with no task in between (a session relaying a
server's answers). Reading pauses while more than ``HIGH_WATER`` bytes wait unread, so a fast peer never fills the
proxy's memory, or while its sink's reader is slow (``pause``, until ``resume``); writers wait in ``drain`` (or are
called back by ``on_drained``) while the peer is slow to read: exactly while the transport says so (between its
``pause_writing`` and ``resume_writing``), never by a threshold of the proxy's own, which a transport that pauses
later (TLS's, at 512 KB) would never call back from.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Callable

#: The longest message read from a peer: PostgreSQL's own limit for most messages is 1 GB; a proxy holds less.
MAX_MESSAGE = 1 << 28
#: The longest first message (a StartupMessage, SSLRequest or CancelRequest): PostgreSQL's own limit.
MAX_FIRST_MESSAGE = 10_000
#: Unread bytes beyond which reading pauses.
HIGH_WATER = 1 << 20
_LENGTH = struct.Struct("!i")


class ProtocolViolation(Exception):
    """The peer broke the protocol (a bad length, a message where none may be)."""


class PeerGone(Exception):
    """The peer closed the connection (or it broke)."""


class PgWire(asyncio.Protocol):
    """One connection to a PostgreSQL peer (a client, or a server)."""

    def __init__(self, limit: int = MAX_MESSAGE, on_made: Callable[[PgWire], None] | None = None) -> None:
        self.on_made = on_made  # called once the connection is made (a listener serving a new client)
        self.transport: asyncio.Transport | None = None
        self.limit = limit
        self.buffer = bytearray()
        self.closed: str | None = None  # why, once the connection is gone
        self.paused = False
        #: Takes every whole message as it arrives (and None once the connection is gone), while set.
        self.sink: Callable[[list[bytes] | None], None] | None = None
        #: Called once when the peer reads again after being slow to (then cleared).
        self.on_drained: Callable[[], None] | None = None
        self.loop = asyncio.get_running_loop()  # kept: asking for it costs a system call each time
        self._waiter: asyncio.Future[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._writing_paused = False

    # ------------------------------------------------------------------------------------------- protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Keep the transport; tell ``on_made``."""
        self.transport = transport  # type: ignore[assignment]
        if self.on_made is not None:
            self.on_made(self)

    def data_received(self, data: bytes) -> None:
        """Keep what arrived; hand the whole messages to the sink, or wake the reader."""
        self.buffer += data
        sink = self.sink
        if sink is not None:
            try:
                messages = self._complete()
            except ProtocolViolation as exc:
                self.closed = str(exc)
                if self.transport is not None:
                    self.transport.close()
                sink(None)
                return
            if messages:
                sink(messages)
            return
        if len(self.buffer) > HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        """The peer will send nothing more: the connection ends."""
        self.closed = self.closed or "the peer closed the connection"
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection is gone."""
        self.closed = self.closed or (f"the connection broke: {exc}" if exc else "the peer closed the connection")
        self._wake()
        sink = self.sink
        if sink is not None:
            self.sink = None
            sink(None)
        drained = self._drained
        if drained is not None and not drained.done():
            drained.set_result(None)

    def pause_writing(self) -> None:
        """The peer is slow to read."""
        self._writing_paused = True

    def resume_writing(self) -> None:
        """The peer reads again."""
        self._writing_paused = False
        drained = self._drained
        if drained is not None and not drained.done():
            drained.set_result(None)
        callback, self.on_drained = self.on_drained, None
        if callback is not None:
            callback()

    def pause(self) -> None:
        """Stop reading the peer (its sink's reader is slow): what it sends waits in the kernel until ``resume``."""
        if not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        """Read the peer again."""
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # ------------------------------------------------------------------------------------------- reading

    async def _more(self) -> None:
        """Wait for more bytes; PeerGone when there will be none."""
        if self.closed is not None:
            raise PeerGone(self.closed)
        self.resume()
        waiter = self._waiter = self.loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    async def batch(self) -> list[bytes]:
        """Every whole typed message that has arrived (at least one), oldest first; each has its type byte, its
        length and its body."""
        while True:
            messages = self._complete()
            if messages:
                return messages
            await self._more()

    def _complete(self) -> list[bytes]:
        buffer = self.buffer
        size = len(buffer)
        at = 0
        out: list[bytes] = []
        while size - at >= 5:
            (length,) = _LENGTH.unpack_from(buffer, at + 1)
            if not 4 <= length <= self.limit:
                raise ProtocolViolation(f"invalid message length {length} for a {bytes(buffer[at : at + 1])!r} message")
            end = at + 1 + length
            if end > size:
                break
            out.append(bytes(buffer[at:end]))
            at = end
        if at:
            del buffer[:at]
        return out

    async def message(self) -> bytes:
        """The next whole typed message (the rest stay for later calls)."""
        while True:
            buffer = self.buffer
            if len(buffer) >= 5:
                (length,) = _LENGTH.unpack_from(buffer, 1)
                if not 4 <= length <= self.limit:
                    raise ProtocolViolation(f"invalid message length {length} for a {bytes(buffer[:1])!r} message")
                if len(buffer) >= 1 + length:
                    whole = bytes(buffer[: 1 + length])
                    del buffer[: 1 + length]
                    return whole
            await self._more()

    async def byte(self) -> bytes:
        """The next single byte (a server's answer to an SSLRequest)."""
        while not self.buffer:
            await self._more()
        answer = bytes(self.buffer[:1])
        del self.buffer[:1]
        return answer

    async def first(self) -> bytes:
        """A connection's first message, untyped (a StartupMessage, SSLRequest, GSSENCRequest or CancelRequest)."""
        while True:
            buffer = self.buffer
            if len(buffer) >= 4:
                (length,) = _LENGTH.unpack_from(buffer, 0)
                if not 8 <= length <= MAX_FIRST_MESSAGE:
                    raise ProtocolViolation(f"invalid length of startup packet: {length}")
                if len(buffer) >= length:
                    whole = bytes(buffer[:length])
                    del buffer[:length]
                    return whole
            await self._more()

    # ------------------------------------------------------------------------------------------- writing

    def write(self, data: bytes) -> None:
        """Send ``data`` (nothing once the connection is gone)."""
        transport = self.transport
        if transport is not None and self.closed is None and data:
            transport.write(data)

    async def drain(self) -> None:
        """Wait while the peer is slow to read what it was sent."""
        while self._writing_paused and self.closed is None:
            drained = self._drained = self.loop.create_future()
            try:
                await drained
            finally:
                self._drained = None

    @property
    def writing_paused(self) -> bool:
        """The peer is slow to read what it was sent (``on_drained`` will be called once it reads again)."""
        return self._writing_paused and self.closed is None

    def limit_writes(self, high: int) -> None:
        """Call the peer slow to read once more than ``high`` bytes wait to be sent."""
        if self.transport is not None:
            self.transport.set_write_buffer_limits(high=high)

    async def start_tls(self, context: ssl.SSLContext, server_side: bool, server_hostname: str | None = None) -> None:
        """Go on over TLS (the peer's handshake comes next; nothing may be buffered)."""
        assert self.transport is not None
        if self.buffer:
            raise ProtocolViolation("data sent before the TLS handshake")
        loop = asyncio.get_running_loop()
        try:
            upgraded = await loop.start_tls(
                self.transport, self, context, server_side=server_side, server_hostname=server_hostname
            )
        except BaseException:
            # start_tls closed the connection (uvloop's transport then raises RuntimeError on a write): gone
            self.closed = self.closed or "the TLS handshake failed"
            raise
        if upgraded is None:
            raise PeerGone("the TLS handshake did not complete")
        self.transport = upgraded  # type: ignore[assignment]

    def close(self) -> None:
        """Close the connection (what was written is sent first)."""
        transport = self.transport
        if transport is not None:
            transport.close()
        self.closed = self.closed or "closed by the proxy"

    def local_port(self) -> int:
        """The port the connection reached (0 when unknown)."""
        transport = self.transport
        local = transport.get_extra_info("sockname") if transport is not None else None
        return int(local[1]) if local else 0

    def peer_address(self) -> str:
        """The peer's IP address ('' when unknown)."""
        transport = self.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        return str(peer[0]) if peer else ""
