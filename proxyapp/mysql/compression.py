"""The MySQL compressed protocol (CLIENT_COMPRESS) between a client and the proxy.

Once a client that asked for it is logged in, every byte each way travels in compressed frames: a 7-byte header
(3 bytes of frame payload length, 1 byte of frame sequence id, 3 bytes of uncompressed length, 0 for a payload
sent as it is) and a zlib stream. The frames carry the ordinary packets, whose own sequence ids are unchanged, so
the proxy decompresses into a wire's read buffer and compresses what it writes: nothing between sees a difference.
The frame sequence restarts with each command the client sends and continues through the answer.
"""

from __future__ import annotations

import zlib

from proxyapp.mysql.packets import ProtocolError

_HEADER = 7
_MAX_FRAME = 0xFFFFFF
#: Payloads shorter than this are sent uncompressed, as the MySQL client library does.
MIN_COMPRESS_LENGTH = 50


def _inflate(body: bytes, size: int) -> bytes:
    """A frame's ``size`` bytes, inflated no further than one byte past them (a frame that would inflate to more
    is refused before it can take the memory: a decompression bomb); ProtocolError unless it holds exactly
    ``size``."""
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(body, size + 1)
    except zlib.error as exc:
        raise ProtocolError(f"compressed frame does not decompress: {exc}") from None
    if len(out) > size or inflater.unconsumed_tail:
        raise ProtocolError(f"compressed frame inflates past the {size} bytes its header says")
    if len(out) != size or not inflater.eof:
        raise ProtocolError(f"compressed frame holds {len(out)} bytes, its header says {size}")
    return out


class Compression:
    """One connection's compressed framing: unpacks received frames and packs bytes to send."""

    __slots__ = ("max_packet", "pending", "seq")

    def __init__(self, max_packet: int) -> None:
        self.pending = bytearray()  # received bytes of a frame not yet complete
        self.seq = 0  # the next frame sequence id to send
        self.max_packet = max_packet

    def unpack(self, data: bytes) -> bytes:
        """The packet bytes inside the complete frames received so far; keeps the rest for later.

        Raises ProtocolError for a frame that does not decompress to what its header says.
        """
        pending = self.pending
        pending += data
        out = []
        pos = 0
        while len(pending) - pos >= _HEADER:
            length = pending[pos] | pending[pos + 1] << 8 | pending[pos + 2] << 16
            if len(pending) - pos < _HEADER + length:
                break
            seq = pending[pos + 3]
            size = pending[pos + 4] | pending[pos + 5] << 8 | pending[pos + 6] << 16
            body = bytes(pending[pos + _HEADER : pos + _HEADER + length])
            if size:
                if size > self.max_packet:
                    raise ProtocolError(f"compressed frame of {size} bytes is over the limit")
                body = _inflate(body, size)
            out.append(body)
            self.seq = (seq + 1) & 0xFF
            pos += _HEADER + length
        del pending[:pos]
        return b"".join(out)

    def pack(self, raw: bytes) -> bytes:
        """``raw`` (framed packets) as compressed frames, numbered on from the last frame received or sent."""
        out = []
        for start in range(0, len(raw), _MAX_FRAME):
            chunk = raw[start : start + _MAX_FRAME]
            body, size = chunk, 0
            if len(chunk) >= MIN_COMPRESS_LENGTH:
                packed = zlib.compress(chunk, 1)
                if len(packed) < len(chunk):
                    body, size = packed, len(chunk)
            length = len(body)
            header = bytes(
                (length & 0xFF, length >> 8 & 0xFF, length >> 16, self.seq, size & 0xFF, size >> 8 & 0xFF, size >> 16)
            )
            out.append(header)
            out.append(body)
            self.seq = (self.seq + 1) & 0xFF
        return b"".join(out)
