"""Buffered packet I/O over an asyncio stream, and the reader of a whole command response.

A backend's response is relayed to the client byte for byte: the reader walks the packets in its buffer only far
enough to find where the response ends and what it says (status flags, rows, affected rows, errors), then hands
the raw bytes on in large writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, Final, Protocol

from mypy_extensions import mypyc_attr

from proxyapp.driver import DIRECT_WAIT, RUNNING, Driver
from proxyapp.mysql.compression import Compression
from proxyapp.mysql.constants import MAX_PACKET
from proxyapp.mysql.packets import (
    ErrPacket,
    PacketTooLarge,
    ProtocolError,
    frame,
    load_byte_work,
    parse_err,
    parse_ok,
    read_lenenc_int,
)
from proxyapp.mysql.tls import TlsLayer

FLUSH_AT: Final = 1 << 20
PAUSE_READING_AT: Final = 8 << 20
#: Bytes already read that a quiet wire may keep until its next wait for more (``quiet``): what ``compact`` keeps of
#: a buffer's allocation anyway (``_bytes.c``'s KEEP), so keeping them holds no more memory.
KEPT_READ: Final = 64 << 10
# Plain ints: IntFlag arithmetic is slow on the per-packet path.
_MORE_RESULTS: Final = 0x0008  # Status.MORE_RESULTS_EXISTS
_CURSOR_EXISTS: Final = 0x0040  # Status.CURSOR_EXISTS
#: A response's status when it did not tell one: an ERR packet carries no status flags, so after an error the
#: server's transaction state must be asked (``BackendConnection.settle``). All bits set: read as "in a transaction".
STATUS_UNKNOWN: Final = -1


_BYTE_WORK: Final = load_byte_work()
#: Copy a span of a read buffer out as bytes (C when built: ``_bytes.c``).
CUT: Final = _BYTE_WORK[0]
#: Drop the bytes already read from the front of a read buffer.
COMPACT: Final = _BYTE_WORK[1]
#: A packet header in a read buffer as one int (-1: not all in).
HEADER: Final = _BYTE_WORK[2]


SendNow = Callable[[int, bytes], int]
SendSpan = Callable[[int, bytearray, int, int], int]
SendFramed = Callable[[int, bytes, int], int]


def _load_sends() -> tuple[SendNow, SendSpan, SendFramed] | tuple[None, None, None]:
    try:
        from proxyapp.mysql import _sockio
    except ImportError:  # not built (``make build``), or PROXYFLEET_NATIVE=0: every write goes through the transport
        return None, None, None
    return _sockio.send_now, _sockio.send_span, _sockio.send_framed


_SENDS: Final = _load_sends()
#: The writes straight to a socket without blocking, each saying how many bytes the kernel took (``_sockio.c``), when
#: built: bytes as they are; a span of a read buffer, with no copy made first; a payload with its packet header, in
#: one system call.
SEND_NOW: Final = _SENDS[0]
SEND_SPAN: Final = _SENDS[1]
SEND_FRAMED: Final = _SENDS[2]


@mypyc_attr(native_class=False)  # mypyc cannot compile a subclass of a built-in exception other than Exception
class PeerClosed(ConnectionError):
    """The peer closed the connection (or it broke) before a whole packet arrived."""


#: What a lost connection to a server raises, caught as one family: it closed or broke (``PeerClosed`` and every
#: other ``OSError``, ``TimeoutError`` among them), or it sent what is not MySQL (``ProtocolError``).
CONNECTION_LOST = (OSError, ProtocolError)


class Transport(Protocol):
    """What a wire asks of its transport: uvloop's and asyncio's stream transports, and ``stream.SocketTransport``."""

    def write(self, data: bytes) -> None:
        """Send ``data`` after what was written before."""

    def is_closing(self) -> bool:
        """Whether it is closing or closed."""

    def close(self) -> None:
        """Close once what was written is sent."""

    def abort(self) -> None:
        """Close now."""

    def get_write_buffer_size(self) -> int:
        """The bytes written and not yet sent."""

    def pause_reading(self) -> None:
        """Stop reading."""

    def resume_reading(self) -> None:
        """Read again."""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        """The socket, its addresses."""


#: What the C walk (``_walk.walk``) says of a whole response: (end, the last packet's sequence id, status, cursor,
#: affected rows, last insert id, rows, warnings, result sets, the ERR payload's start and length or -1).
Walked = tuple[int, int, int, int, int, int, int, int, int, int, int]
ResponseWalk = Callable[[bytearray, int, bool, int], "Walked | None"]


def _load_walk() -> ResponseWalk | None:
    try:
        from proxyapp.mysql import _walk
    except ImportError:  # not built (``make build``), or PROXYFLEET_NATIVE=0: the Python reader reads every response
        return None
    return _walk.walk


#: The C walk over a response that is all in the buffer, when it is built; None: the Python reader reads every one.
#: Each wire keeps it (``Wire.walk``), so a test can turn it off for one wire.
WALK: Final = _load_walk()


class Wire:
    """One side of a MySQL connection: a read buffer of whole packets, and the transport to write to."""

    __slots__ = (
        "buf",
        "bytes_in",
        "bytes_out",
        "closed",
        "compression",
        "direct",
        "drain_waiter",
        "fd",
        "held",
        "loop",
        "mark",
        "max_packet",
        "on_arrival",
        "on_close",
        "pos",
        "reading_paused",
        "resumer",
        "seq",
        "shut",
        "tls",
        "told",
        "transport",
        "waiter",
        "walk",
        "write_out",
        "writing_paused",
    )

    def __init__(self, transport: Transport, max_packet: int = 1 << 30) -> None:
        self.transport = transport
        self.write_out = transport.write  # kept bound: a call through it looks no method up
        self.fd = -1  # the socket the wire sends to directly (``SEND_NOW``); -1: every write goes through the transport
        self.held = False  # the transport was handed bytes: it may still hold some, which go out before any more
        self.told = False  # the transport tells the wire when it closes (``shut``), so ``write`` need not ask it
        self.shut = False  # the transport is closing or closed, as it told (``told``)
        # Kept: asyncio.get_running_loop() makes a getpid() system call each time (its fork check).
        self.loop = asyncio.get_running_loop()
        self.buf = bytearray()
        self.pos = 0
        self.mark = 0  # bytes before the mark may be discarded; [mark, pos) is read but not yet relayed
        self.seq = 0
        self.max_packet = max_packet
        self.bytes_in = 0  # bytes the peer sent, as read (decrypted, uncompressed), counted by the transport
        self.bytes_out = 0
        self.closed: str | None = None
        self.waiter: asyncio.Future[None] | None = None  # what a task reading this wire awaits
        self.resumer: Driver | None = None  # the driver whose coroutine awaits ``direct`` (resumed here, not the loop)
        self.direct = DIRECT_WAIT()  # what a driver's coroutine awaits for this wire's bytes: one, made once
        # Told when bytes arrive or the connection ends while no reader waits (a session serving its commands from
        # this callback, ``proxyapp.session.session``).
        self.on_arrival: Callable[[], None] | None = None
        self.drain_waiter: asyncio.Future[None] | None = None
        self.reading_paused = False
        self.writing_paused = False
        self.compression: Compression | None = None  # the compressed protocol, once the client's login enabled it
        self.tls: TlsLayer | None = None  # TLS, once the connection was upgraded (``start_tls``)
        self.on_close: Callable[[], None] | None = None  # told once when the peer closes or the connection breaks
        self.walk = WALK  # reads a whole response in one call (None: the Python reader reads every one)

    def peer_gone(self) -> None:
        """Tell ``on_close``, once, that the connection is over."""
        on_close = self.on_close
        if on_close is not None:
            self.on_close = None
            on_close()

    def compress(self) -> None:
        """From now on, read and write in compressed frames (after the login's OK, for a client that asked)."""
        self.compression = Compression(self.max_packet)

    async def start_tls(self, context: ssl.SSLContext, server_side: bool, server_hostname: str | None = None) -> None:
        """Upgrade the connection to TLS (after the SSL request was read or sent): the handshake starts from the
        bytes already buffered and not read; plaintext that came with its last records stays buffered to read.
        ``ssl.SSLError`` when the peer does not speak TLS or fails the handshake, PeerClosed when it goes."""
        layer = TlsLayer(context, server_side, server_hostname)
        while True:
            received = self.cut(self.pos, len(self.buf))
            self.pos = self.mark = len(self.buf)
            done, out = layer.handshake(received)
            if out:
                if self.transport.is_closing():
                    raise PeerClosed(self.closed or "connection closed")
                self.put(out)
            if done:
                break
            await self.fill()
        del self.buf[:]
        self.buf += layer.unwrap(b"")
        self.pos = self.mark = 0
        self.tls = layer

    def wake(self) -> None:
        """Bytes arrived or the connection ended: resume the reader waiting for them (a driver's coroutine right
        here, a task through the loop), else tell ``on_arrival``."""
        resumer = self.resumer
        if resumer is not None:
            self.resumer = None
            if resumer.direct is self.direct:  # no callback to schedule: the driver resumes its coroutine now
                resumer.wire_ready()
                return
            # else the wait of a cancelled coroutine, left behind
        waiter = self.waiter
        if waiter is not None:
            self.waiter = None
            if not waiter.done():
                waiter.set_result(None)
            return
        arrival = self.on_arrival
        if arrival is not None:
            arrival()

    def arrived(self) -> None:
        """Bytes were appended to the buffer: pause reading past ``PAUSE_READING_AT`` bytes not yet discarded, and wake
        the reader."""
        if len(self.buf) - self.mark > PAUSE_READING_AT and not self.reading_paused:
            self.reading_paused = True
            self.transport.pause_reading()
        self.wake()

    def resume_writing(self) -> None:
        """Wake the task waiting for the write buffer to drain."""
        self.writing_paused = False
        waiter = self.drain_waiter
        if waiter is not None:
            self.drain_waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def fill(self) -> Awaitable[None]:
        """What to await for more bytes or the connection's end (the caller then looks again at what it has), first
        discarding the bytes before the mark. A plain method handing back the awaitable, not a coroutine: a wait for
        bytes makes no coroutine object of its own, and a driver's coroutine waits on the wire's ``direct`` wait,
        made once (a task's on a future)."""
        self.want_more()
        if self.closed is not None:
            raise PeerClosed(self.closed)
        driver = RUNNING.driver
        if driver is not None:  # a driver's coroutine: resumed from ``wake`` itself
            self.resumer = driver
            direct = driver.direct = self.direct
            return direct
        waiter = self.waiter = self.loop.create_future()
        return waiter

    def want_more(self) -> None:
        """The reader needs more bytes than it has: discard those before the mark, and resume reading if it was
        paused (even over PAUSE_READING_AT: a packet larger than that, up to 16 MiB per part, must complete)."""
        if self.mark:
            COMPACT(self.buf, self.mark)
            self.pos -= self.mark
            self.mark = 0
        if self.reading_paused:
            self.reading_paused = False
            self.transport.resume_reading()

    def quiet(self) -> bool:
        """Whether there is nothing to read and nothing to tidy: no unread byte, the peer still there, reading not
        paused, and the bytes already read few enough to keep until the next wait for more drops them
        (``want_more``)."""
        return self.pos == len(self.buf) and self.closed is None and not self.reading_paused and self.mark <= KEPT_READ

    def shed(self) -> None:
        """Give back the read buffer's allocation when a large packet grew it and nothing in it is unread (a
        connection going idle in the pool, which nothing reads until it is lent again)."""
        if self.pos == len(self.buf) and self.buf.__sizeof__() > KEPT_READ:
            self.buf = bytearray()
            self.pos = self.mark = 0

    def unread(self) -> int:
        """Bytes that arrived and were not read yet (while a reader waits: the start of a packet not all in)."""
        return len(self.buf) - self.pos

    def part(self) -> tuple[int, int]:
        """The next wire packet if it is all in the buffer: (payload start, payload length), having advanced over
        it; else (0, -1). A tuple of two ints that is never None: compiled, it is returned in registers, with no
        object made."""
        buf = self.buf
        pos = self.pos
        header = HEADER(buf, pos)
        if header < 0:
            return 0, -1
        length = header & 0xFFFFFF
        if len(buf) - pos < 4 + length:
            if length > self.max_packet:
                raise PacketTooLarge(f"packet of {length} bytes is over the limit")
            return 0, -1
        self.seq = header >> 24
        self.pos = pos + 4 + length
        return pos + 4, length

    async def next_part(self) -> tuple[int, int]:
        """Advance over one wire packet, waiting for it; returns (payload start, payload length) in ``self.buf``.

        Hot loops call ``part()`` and await ``next_part()`` only when it finds no whole packet: no coroutine is made
        while the buffer has packets.
        """
        while True:
            start, length = self.part()
            if length >= 0:
                return start, length
            await self.fill()

    async def read_payload(self) -> bytes:
        """Read one logical packet (joining 16 MiB parts) and return a copy of its payload."""
        start, length = self.part()
        if length < 0:
            start, length = await self.next_part()
        payload = self.cut(start, start + length)
        if length == MAX_PACKET:
            parts = [payload]
            total = length
            while length == MAX_PACKET:
                start, length = await self.next_part()
                total += length
                if total > self.max_packet:
                    raise PacketTooLarge(f"packet over the {self.max_packet}-byte limit")
                parts.append(self.cut(start, start + length))
            payload = b"".join(parts)
        self.mark = self.pos
        return payload

    async def read_available(self) -> bytes:
        """Whatever bytes have arrived and were not read yet (waiting for some); for raw forwarding."""
        while self.pos >= len(self.buf):
            await self.fill()
        raw = self.cut(self.pos, len(self.buf))
        self.pos = self.mark = len(self.buf)
        return raw

    def cut(self, start: int, end: int) -> bytes:
        """A copy of the buffer's bytes from ``start`` to ``end``: the one way bytes are copied out of a wire."""
        return CUT(self.buf, start, end)

    def take(self) -> bytes:
        """Return the raw bytes read since the mark and move the mark."""
        raw = self.cut(self.mark, self.pos)
        self.mark = self.pos
        return raw

    def discard(self) -> None:
        """Forget the bytes read since the mark."""
        self.mark = self.pos

    def send(self, payload: bytes, seq: int) -> None:
        """Frame and write one payload; PeerClosed if the connection is closed (uvloop raises RuntimeError). Straight to
        the socket when it can be (``_straight``): the header and the payload in one system call, no framed copy."""
        if self._straight() and len(payload) < MAX_PACKET:
            total = len(payload) + 4
            self.bytes_out += total
            assert SEND_FRAMED is not None
            sent = SEND_FRAMED(self.fd, payload, seq)
            if sent < total:  # the rest waits in the transport, which reports a failed send
                self.held = True
                self.write_out(frame(payload, seq)[sent:])
            return
        self.write(frame(payload, seq))

    def write_span(self, buf: bytearray, start: int, end: int) -> None:
        """Write ``buf[start:end]``, framed bytes read on another wire; PeerClosed if the connection is closed. Straight
        from that buffer to the socket when it can be (``_straight``), with no copy made first."""
        if self._straight():
            self.bytes_out += end - start
            assert SEND_SPAN is not None
            sent = SEND_SPAN(self.fd, buf, start, end)
            if sent < end - start:  # the rest waits in the transport, which reports a failed send
                self.held = True
                self.write_out(CUT(buf, start + sent, end))
            return
        self.write(CUT(buf, start, end))

    def _straight(self) -> bool:
        """Whether bytes written now may go straight to the socket as they are: the wire sends to it itself
        (``fd``), nothing is held back in the transport, and they are neither compressed nor encrypted. PeerClosed if
        the connection is closed."""
        if self.shut or (not self.told and self.transport.is_closing()):
            raise PeerClosed(self.closed or "connection closed")
        return self.fd >= 0 and not self.held and self.compression is None and self.tls is None

    def write(self, raw: bytes) -> None:
        """Write already framed bytes; PeerClosed if the connection is closed."""
        if self.shut or (not self.told and self.transport.is_closing()):
            raise PeerClosed(self.closed or "connection closed")
        self.bytes_out += len(raw)
        if self.compression is not None:
            raw = self.compression.pack(raw)
        tls = self.tls
        if tls is not None:
            raw = tls.wrap(raw)
        self.put(raw)

    def put(self, raw: bytes) -> None:
        """Hand bytes ready for the socket (framed, compressed, encrypted) to it, on an open transport: straight to the
        socket while the transport holds none back, else (and whatever the kernel did not take) to the transport,
        which keeps them in order behind what it holds, flow-controls and reports a broken connection."""
        fd = self.fd
        if fd >= 0:
            if self.held:
                if self.transport.get_write_buffer_size():
                    self.write_out(raw)
                    return
                self.held = False
            assert SEND_NOW is not None
            sent = SEND_NOW(fd, raw)
            if sent == len(raw):
                return
            if sent:
                raw = raw[sent:]
            self.held = True
        self.write_out(raw)

    async def drain(self) -> None:
        """Wait until the transport's write buffer is below its high-water mark."""
        while self.writing_paused:
            if self.closed is not None:
                raise PeerClosed(self.closed)
            waiter = self.drain_waiter = self.loop.create_future()
            await waiter
        if self.closed is not None:
            raise PeerClosed(self.closed)

    def peer(self) -> tuple[str, int]:
        """The peer's address."""
        return self.transport.get_extra_info("peername") or ("", 0)

    def local(self) -> tuple[str, int]:
        """Our side's address."""
        return self.transport.get_extra_info("sockname") or ("", 0)

    def close(self) -> None:
        """Close the transport without waiting; over TLS, after the close_notify that says the close is meant."""
        tls = self.tls
        if tls is not None and not self.shut and not self.transport.is_closing():
            alert = tls.close_notify()
            if alert:
                with contextlib.suppress(OSError, RuntimeError):  # a connection already broken: the close still runs
                    self.put(alert)
        self.transport.close()


class Sink(Protocol):
    """Where a relayed response goes: the client's wire, or a wrapper around it."""

    def write(self, raw: bytes) -> None:
        """Write framed bytes."""

    async def drain(self) -> None:
        """Wait for the peer to take what was written."""


class Relay:
    """Collects what a response relay writes, for the query cache, and passes it on to the client."""

    __slots__ = ("capture", "client", "parts", "written")

    def __init__(self, client: Wire, capture: bool = False) -> None:
        self.client = client
        self.capture = capture
        self.parts: list[bytes] = []
        self.written = 0

    def start(self, capture: bool) -> None:
        """Begin relaying another response: nothing written yet, a copy kept when ``capture``."""
        self.capture = capture
        self.written = 0
        if self.parts:
            self.parts = []

    def write(self, raw: bytes) -> None:
        """Relay ``raw`` to the client (and keep a copy when capturing)."""
        if self.capture:
            self.parts.append(raw)
        self.written += len(raw)
        self.client.write(raw)

    def relay(self, backend: Wire) -> None:
        """Relay what ``backend`` read since its mark, and move the mark: from its buffer to the client's socket with
        no copy made first (``Wire.write_span``), unless capturing."""
        start = backend.mark
        end = backend.pos
        backend.mark = end
        if self.capture:
            self.write(backend.cut(start, end))
            return
        self.written += end - start
        self.client.write_span(backend.buf, start, end)

    async def drain(self) -> None:
        """Wait for the client to take what was written."""
        await self.client.drain()


class Response:
    """What a command's response said, summed over all its result sets.

    ``status`` is the server status of the last OK or EOF, or ``STATUS_UNKNOWN`` when the response ended in an
    error (which may have ended a transaction, or come after statements of a batch that opened one).

    A plain class, not a dataclass: mypyc compiles its ``__init__`` (one is made per query).
    """

    __slots__ = (
        "affected_rows",
        "cursor",
        "ended",
        "error",
        "last_insert_id",
        "result_sets",
        "rows",
        "status",
        "warnings",
    )

    def __init__(self, status: int = STATUS_UNKNOWN, error: ErrPacket | None = None) -> None:
        self.status = status
        self.error = error
        self.affected_rows = 0
        self.last_insert_id = 0
        self.warnings = 0
        self.rows = 0
        self.result_sets = 0
        self.cursor = False
        self.ended = 0.0  # when it was read whole (``clock.MONOTONIC``; 0: not told)


#: Relays a LOCAL INFILE exchange: given the backend wire, sends the client's file to it.
InfileRelay = Callable[["Wire"], Awaitable[None]]


async def read_response(
    backend: Wire,
    client: Relay | None,
    *,
    relay_infile: InfileRelay | None = None,
    binary: bool = False,
) -> Response:
    """Read one whole response to a query or execute command from ``backend``.

    With a ``client`` the raw packets are relayed to it (in large writes); without, they are discarded.
    ``relay_infile`` answers a LOCAL INFILE request; without it the request is refused with an empty file.

    A response that is all in the buffer once its first bytes are is read by the C walk (``Wire.walk``) in one call; the
    rest (one that arrives in several reads, is over ``FLUSH_AT``, holds a LOCAL INFILE request or a malformed
    packet) by the Python reader below, from the same place.
    """
    if backend.walk is not None:
        while backend.pos >= len(backend.buf):
            await backend.fill()
        whole = walked_response(backend, client, binary)
        if whole is not None:
            return whole
    result = Response()
    buf = backend.buf
    while True:
        start, length = backend.part()
        if length < 0:
            start, length = await backend.next_part()
        buf = backend.buf
        first = buf[start] if length else 0
        if first == 0x00 and length >= 7:
            ok = parse_ok(backend.cut(start, start + length))
            result.status = ok.status
            result.affected_rows += ok.affected_rows
            if ok.last_insert_id:
                result.last_insert_id = ok.last_insert_id
            result.warnings = ok.warnings
        elif first == 0xFF:
            result.error = parse_err(backend.cut(start, start + length))
            result.status = STATUS_UNKNOWN
            break
        elif first == 0xFB and not binary:
            if client is not None:
                client.relay(backend)
            if relay_infile is not None:
                await relay_infile(backend)
            else:
                backend.discard()
                backend.send(b"", backend.seq + 1)
            continue
        else:
            await _read_result_set(backend, client, result, start, length)
        if not result.status & _MORE_RESULTS or result.error is not None or result.cursor:
            break
        if client is not None and backend.pos - backend.mark > FLUSH_AT:
            client.relay(backend)
            await client.drain()
    if client is not None:
        client.relay(backend)
    else:
        backend.discard()
    return result


def walked_response(backend: Wire, client: Relay | None, binary: bool = False) -> Response | None:
    """The response to a query or execute (``binary``) command, relayed to ``client``, when it is all in
    ``backend``'s buffer and the C walk (``Wire.walk``) reads it in one call; else None, and ``read_response`` reads it
    from the same place."""
    walk = backend.walk
    if walk is None:
        return None
    walked = walk(backend.buf, backend.pos, binary, FLUSH_AT)
    return _walked(backend, client, walked) if walked is not None else None


def _walked(backend: Wire, client: Relay | None, walked: Walked) -> Response:
    """The response the C walk read: advance over it and relay it."""
    end, seq, status, cursor, affected, insert_id, rows, warnings, result_sets, error_start, error_length = walked
    error = parse_err(backend.cut(error_start, error_start + error_length)) if error_length >= 0 else None
    result = Response(status, error)
    result.affected_rows = affected
    result.last_insert_id = insert_id
    result.warnings = warnings
    result.rows = rows
    result.result_sets = result_sets
    result.cursor = cursor != 0
    backend.pos = end
    backend.seq = seq
    if client is not None:
        client.relay(backend)
    else:
        backend.discard()
    return result


async def _read_result_set(backend: Wire, client: Relay | None, result: Response, start: int, length: int) -> None:
    count = backend.buf[start] if length else 0
    if count >= 0xFB:  # more than 250 columns: a longer length-encoded integer
        wide, _ = read_lenenc_int(backend.cut(start, start + min(length, 9)), 0)
        count = wide or 0  # 0xFB (NULL) is no count at all
    if not count:
        raise ProtocolError("result set with no columns")
    result.result_sets += 1
    for _ in range(count):  # the column definitions, each one logical packet (inline: no coroutine per column)
        _, length = backend.part()
        if length < 0:
            _, length = await backend.next_part()
        while length == MAX_PACKET:
            _, length = backend.part()
            if length < 0:
                _, length = await backend.next_part()
    start, length = backend.part()
    if length < 0:
        start, length = await backend.next_part()
    buf = backend.buf
    if not (length and buf[start] == 0xFE and length < 9):
        raise ProtocolError("expected EOF after column definitions")
    status = buf[start + 3] | buf[start + 4] << 8 if length >= 5 else 0
    if status & _CURSOR_EXISTS:
        result.status = status
        result.cursor = True
        return
    rows = 0
    while True:
        start, length = backend.part()
        if length < 0:
            start, length = await backend.next_part()
        buf = backend.buf
        first = buf[start] if length else 0
        if first == 0xFE and length < 9:
            result.status = buf[start + 3] | buf[start + 4] << 8 if length >= 5 else 0
            result.warnings = buf[start + 1] | buf[start + 2] << 8 if length >= 3 else 0
            break
        if first == 0xFF and length < MAX_PACKET:
            result.error = parse_err(backend.cut(start, start + length))
            result.status = STATUS_UNKNOWN
            break
        rows += 1
        while length == MAX_PACKET:
            start, length = backend.part()
            if length < 0:
                start, length = await backend.next_part()
        if client is not None and backend.pos - backend.mark > FLUSH_AT:
            client.relay(backend)
            await client.drain()
    result.rows += rows
