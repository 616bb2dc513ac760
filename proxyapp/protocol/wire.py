"""Buffered packet I/O over an asyncio stream, and the reader of a whole command response.

A backend's response is relayed to the client byte for byte: the reader walks the packets in its buffer only far
enough to find where the response ends and what it says (status flags, rows, affected rows, errors), then hands
the raw bytes on in large writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from proxyapp.protocol.constants import MAX_PACKET, Status
from proxyapp.protocol.packets import (
    ErrPacket,
    PacketTooLarge,
    ProtocolError,
    frame,
    parse_err,
    parse_ok,
    read_lenenc_int,
)

READ_CHUNK = 256 * 1024
FLUSH_AT = 1 << 20
# Plain ints: IntFlag arithmetic is slow on the per-packet path.
_MORE_RESULTS = int(Status.MORE_RESULTS_EXISTS)
_CURSOR_EXISTS = int(Status.CURSOR_EXISTS)


class PeerClosed(ConnectionError):
    """The peer closed the connection (or it broke) before a whole packet arrived."""


class Wire:
    """One side of a MySQL connection: a read buffer of whole packets and the stream writer."""

    __slots__ = ("buf", "bytes_out", "mark", "max_packet", "pos", "reader", "seq", "transport", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_packet: int = 1 << 30) -> None:
        self.reader = reader
        self.writer = writer
        self.transport = writer.transport
        self.buf = bytearray()
        self.pos = 0
        self.mark = 0  # bytes before the mark may be discarded; [mark, pos) is read but not yet relayed
        self.seq = 0
        self.max_packet = max_packet
        self.bytes_out = 0

    async def _fill(self) -> None:
        try:
            data = await self.reader.read(READ_CHUNK)
        except (ConnectionError, OSError) as exc:
            raise PeerClosed(str(exc) or type(exc).__name__) from exc
        if not data:
            raise PeerClosed("connection closed by peer")
        if self.mark:
            del self.buf[: self.mark]
            self.pos -= self.mark
            self.mark = 0
        self.buf += data

    async def next_part(self) -> tuple[int, int]:
        """Advance over one wire packet; returns (payload start, payload length) within ``self.buf``."""
        buf = self.buf
        while True:
            pos = self.pos
            avail = len(buf) - pos
            if avail >= 4:
                length = buf[pos] | buf[pos + 1] << 8 | buf[pos + 2] << 16
                if avail >= 4 + length:
                    self.seq = buf[pos + 3]
                    self.pos = pos + 4 + length
                    return pos + 4, length
                if length > self.max_packet:
                    raise PacketTooLarge(f"packet of {length} bytes is over the limit")
            await self._fill()
            buf = self.buf

    async def read_payload(self) -> bytes:
        """Read one logical packet (joining 16 MiB parts) and return a copy of its payload."""
        start, length = await self.next_part()
        payload = bytes(self.buf[start : start + length])
        if length == MAX_PACKET:
            parts = [payload]
            total = length
            while length == MAX_PACKET:
                start, length = await self.next_part()
                total += length
                if total > self.max_packet:
                    raise PacketTooLarge(f"packet over the {self.max_packet}-byte limit")
                parts.append(bytes(self.buf[start : start + length]))
            payload = b"".join(parts)
        self.mark = self.pos
        return payload

    def take(self) -> bytes:
        """Return the raw bytes read since the mark and move the mark."""
        raw = bytes(self.buf[self.mark : self.pos])
        self.mark = self.pos
        return raw

    def discard(self) -> None:
        """Forget the bytes read since the mark."""
        self.mark = self.pos

    def send(self, payload: bytes, seq: int) -> None:
        """Frame and write one payload."""
        raw = frame(payload, seq)
        self.bytes_out += len(raw)
        self.transport.write(raw)

    def write(self, raw: bytes) -> None:
        """Write already framed bytes."""
        self.bytes_out += len(raw)
        self.transport.write(raw)

    async def drain(self) -> None:
        """Wait until the write buffer is below the transport's high-water mark."""
        try:
            await self.writer.drain()
        except (ConnectionError, OSError) as exc:
            raise PeerClosed(str(exc) or type(exc).__name__) from exc

    def close(self) -> None:
        """Close the transport without waiting."""
        self.writer.close()


class Sink(Protocol):
    """Where a relayed response goes: the client's wire, or a wrapper around it."""

    def write(self, raw: bytes) -> None:
        """Write framed bytes."""

    async def drain(self) -> None:
        """Wait for the peer to take what was written."""


@dataclass(slots=True)
class Response:
    """What a command's response said, summed over all its result sets."""

    status: int = Status.AUTOCOMMIT
    affected_rows: int = 0
    last_insert_id: int = 0
    warnings: int = 0
    rows: int = 0
    result_sets: int = 0
    error: ErrPacket | None = None
    cursor: bool = False


#: Relays a LOCAL INFILE exchange: given the backend wire, sends the client's file to it.
InfileRelay = Callable[["Wire"], Awaitable[None]]


async def read_response(
    backend: Wire,
    client: Sink | None,
    *,
    relay_infile: InfileRelay | None = None,
    binary: bool = False,
) -> Response:
    """Read one whole response to a query or execute command from ``backend``.

    With a ``client`` the raw packets are relayed to it (in large writes); without, they are discarded.
    ``relay_infile`` answers a LOCAL INFILE request; without it the request is refused with an empty file.
    """
    result = Response()
    buf = backend.buf
    while True:
        start, length = await backend.next_part()
        buf = backend.buf
        first = buf[start] if length else 0
        if first == 0x00 and length >= 7:
            ok = parse_ok(bytes(buf[start : start + length]))
            result.status = ok.status
            result.affected_rows += ok.affected_rows
            if ok.last_insert_id:
                result.last_insert_id = ok.last_insert_id
            result.warnings = ok.warnings
        elif first == 0xFF:
            result.error = parse_err(bytes(buf[start : start + length]))
            break
        elif first == 0xFB and not binary:
            if client is not None:
                client.write(backend.take())
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
            client.write(backend.take())
            await client.drain()
    if client is not None:
        client.write(backend.take())
    else:
        backend.discard()
    return result


async def _read_result_set(backend: Wire, client: Sink | None, result: Response, start: int, length: int) -> None:
    count, _ = read_lenenc_int(bytes(backend.buf[start : start + min(length, 9)]), 0)
    if not count:
        raise ProtocolError("result set with no columns")
    result.result_sets += 1
    for _ in range(count):
        await _skip_logical(backend)
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
        start, length = await backend.next_part()
        buf = backend.buf
        first = buf[start] if length else 0
        if first == 0xFE and length < 9:
            result.status = buf[start + 3] | buf[start + 4] << 8 if length >= 5 else 0
            result.warnings = buf[start + 1] | buf[start + 2] << 8 if length >= 3 else 0
            break
        if first == 0xFF and length < MAX_PACKET:
            result.error = parse_err(bytes(buf[start : start + length]))
            break
        rows += 1
        while length == MAX_PACKET:
            start, length = await backend.next_part()
        if client is not None and backend.pos - backend.mark > FLUSH_AT:
            client.write(backend.take())
            await client.drain()
    result.rows += rows


async def _skip_logical(backend: Wire) -> None:
    _, length = await backend.next_part()
    while length == MAX_PACKET:
        _, length = await backend.next_part()
