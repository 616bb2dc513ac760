"""The C relay (``_splice``) as the forwarding listeners use it: pairs of sockets it splices, counted in Python.

Once a client's server is connected and the client's first bytes are on their way, nothing of the connection needs
Python any more, so both sockets go to the C relay, which splices them in a thread of its own without the GIL (as
haproxy does in TCP mode). The server's socket is connected with ``loop.sock_connect`` and never gets a transport; the
client's transport has been paused since its first message, its write buffer is empty (nothing was sent to the
client yet), so a duplicate of its descriptor goes to the relay and the transport is closed: no byte read into Python
is lost (they are the pending ones, written first by the relay) and the event loop stops polling the socket.

Figures stay Python's: the bytes the relay moved are added to the listener's and the server's counters whenever a
report is made (``sync``) and when a pair ends; a pair's end, signalled on the relay's notify descriptor, counts the
connection out of both as a transport's end does. ``PROXYFLEET_SPLICE=0`` keeps every connection on the Python relay
(``relay``), which also serves when the extension is not built.
"""

from __future__ import annotations

import asyncio
import os
import socket
from types import ModuleType
from typing import Any, Protocol


class ServerCounters(Protocol):
    """What a pair counts of its server (``relay.ServerCounters``)."""

    bytes_sent: int
    bytes_recv: int


class ListenerBytes(Protocol):
    """What a pair counts of its listener (``relay.ListenerCounters``)."""

    bytes_from_clients: int
    bytes_to_clients: int


class ClientSide(Protocol):
    """The client a pair serves (``relay.ClientSide``): its listener's counters, and its end to count out."""

    @property
    def counters(self) -> ListenerBytes:
        """Its listener's counters."""
        ...

    def spliced_end(self, server: Any) -> None:
        """The relay ended the pair: count it out of the listener and ``server`` (its server's counters)."""
        ...


def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get("PROXYFLEET_SPLICE", "1") == "0":
        return None, "the Python relay (PROXYFLEET_SPLICE=0)"
    try:
        from proxyapp.forward import _splice
    except ImportError:
        return None, "the Python relay (the C relay is not built: make build)"
    return _splice, "the C relay"


#: The C relay when it is built and not switched off, and which relay this process uses, for the log.
SPLICE, RELAY = _load()


async def connect_socket(host: str, port: int) -> socket.socket:
    """A non-blocking TCP socket connected to ``host``:``port`` (each address it resolves to in turn)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    error: OSError = OSError(f"{host} resolves to no address")
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    raise error


class Spliced:
    """A pair in the C relay: its client, its server's counters and the bytes already counted in."""

    __slots__ = ("client", "from_client", "from_server", "server")

    def __init__(self, client: ClientSide, server: ServerCounters | None) -> None:
        self.client = client
        self.server = server
        self.from_client = 0
        self.from_server = 0

    def count(self, from_client: int, from_server: int) -> None:
        """Add what the relay moved since the last count to the listener's and the server's counters."""
        sent, received = from_client - self.from_client, from_server - self.from_server
        self.from_client, self.from_server = from_client, from_server
        listener = self.client.counters
        listener.bytes_from_clients += sent
        listener.bytes_to_clients += received
        if self.server is not None:
            self.server.bytes_sent += sent
            self.server.bytes_recv += received


class Splicer:
    """This process's pairs in the C relay (only used when ``SPLICE`` is)."""

    def __init__(self, relay: ModuleType) -> None:
        self.relay = relay
        self.pairs: dict[int, Spliced] = {}
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop watching the relay's notify descriptor

    def add(
        self, client: ClientSide, server: ServerCounters | None, client_fd: int, server_fd: int, pending: bytes
    ) -> int:
        """Hand both descriptors to the relay (it closes them from now on, even when this raises); the pair's id."""
        pair = self.relay.add(client_fd, server_fd, pending)
        self.pairs[pair] = Spliced(client, server)
        loop = asyncio.get_running_loop()
        if self.loop is not loop:  # an end queued meanwhile keeps the descriptor readable: it is seen at once
            loop.add_reader(self.relay.notify_fd(), self.reap)
            self.loop = loop
        return pair

    def close(self, pair: int) -> None:
        """End a pair now; it is counted out when the relay reports it ended."""
        self.relay.close(pair)

    def sync(self) -> None:
        """Count in the bytes the live pairs moved, for a report."""
        for pair, from_client, from_server in self.relay.snapshot():
            spliced = self.pairs.get(pair)
            if spliced is not None:
                spliced.count(from_client, from_server)

    def reap(self) -> None:
        """Count the pairs that ended out of their listener and server."""
        for pair, from_client, from_server in self.relay.ended():
            spliced = self.pairs.pop(pair, None)
            if spliced is not None:
                spliced.count(from_client, from_server)
                spliced.client.spliced_end(spliced.server)


#: This process's pairs, when the C relay is used.
SPLICER = Splicer(SPLICE) if SPLICE is not None else None
