"""Reading PostgreSQL messages off an asyncio stream, whole: the untyped first message of a connection and the
typed messages after it. A length outside the protocol's bounds is a ``ProtocolViolation``, never a huge read."""

from __future__ import annotations

import asyncio
import struct

#: The longest message read from a peer: PostgreSQL's own limit for most messages is 1 GB; a proxy holds less.
MAX_MESSAGE = 1 << 28
#: The longest first message (a StartupMessage, SSLRequest or CancelRequest): PostgreSQL's own limit.
MAX_FIRST_MESSAGE = 10_000


class ProtocolViolation(Exception):
    """The peer broke the protocol (a bad length, a message where none may be)."""


async def read_message(reader: asyncio.StreamReader, limit: int = MAX_MESSAGE) -> bytes:
    """The next typed message, whole: its type byte, its length and its body (IncompleteReadError at EOF)."""
    head = await reader.readexactly(5)
    (length,) = struct.unpack_from("!i", head, 1)
    if not 4 <= length <= limit:
        raise ProtocolViolation(f"invalid message length {length} for a {head[:1]!r} message")
    if length == 4:
        return head
    return head + await reader.readexactly(length - 4)


async def read_first(reader: asyncio.StreamReader) -> bytes:
    """A connection's first message, whole (its length and code included)."""
    head = await reader.readexactly(4)
    (length,) = struct.unpack("!i", head)
    if not 8 <= length <= MAX_FIRST_MESSAGE:
        raise ProtocolViolation(f"invalid length of startup packet: {length}")
    return head + await reader.readexactly(length - 4)
