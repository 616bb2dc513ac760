"""What the tests of a wire's socket I/O share: the event loops they run on, and a peer's read."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import uvloop

#: The loops a wire's transport is tried on: uvloop, as the proxy runs, and asyncio's own.
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": uvloop.new_event_loop,
    "asyncio": asyncio.new_event_loop,
}


async def read_all(peer: socket.socket, count: int) -> bytes:
    """Read ``count`` bytes from ``peer`` (the loop runs while it waits)."""
    loop = asyncio.get_running_loop()
    got = bytearray()
    while len(got) < count:
        chunk = await loop.sock_recv(peer, count - len(got))
        assert chunk, "the connection ended early"
        got += chunk
    return bytes(got)
