"""A wire's writes straight to its socket (``Wire.put``, ``_sockio.send_now``).

While the transport holds nothing back, a write goes to the socket directly; what the kernel does not take, and every
write after it until the transport has drained, goes to the transport. The peer must read every byte, in the order
written, on a wire's own transport (``stream.SocketTransport``) and on the loop's, on uvloop and on asyncio's own loop;
a wire without a socket (``fd`` -1) writes through the transport only.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from types import ModuleType

import pytest

from proxyapp.mysql import wire as wire_module
from proxyapp.mysql.stream import SocketTransport, WireProtocol
from proxyapp.mysql.wire import PeerClosed, Wire
from tests.support.sockets import LOOPS, read_all


def test_send_now_reports_what_the_kernel_took(sockio: ModuleType) -> None:
    a, b = socket.socketpair()
    try:
        assert sockio.send_now(a.fileno(), b"hello") == 5
        assert b.recv(16) == b"hello"
        a.setblocking(False)
        taken = 0
        while (sent := sockio.send_now(a.fileno(), b"x" * 65536)) > 0:  # until the kernel's buffer is full
            taken += sent
        assert sent == 0 and taken > 0  # would block: nothing taken, no exception
        assert sockio.send_now(a.fileno(), bytearray(b"not bytes")) == 0  # the transport takes anything else
    finally:
        a.close()
        b.close()
    assert sockio.send_now(a.fileno(), b"closed") == 0  # a failed send: the transport meets and reports it


#: Each loop, with the wire on a transport of its own and on the loop's.
RUNS = [(name, own) for name in LOOPS for own in (True, False)]


def _run(loop_name: str, body: Callable[[Wire, socket.socket], object], own: bool = True) -> None:
    """Run ``body(wire, peer)`` on a wire over one end of a socket pair, in a loop of ``loop_name``, on its own
    transport (``own``) or the loop's."""
    loop = LOOPS[loop_name]()
    ours, peer = socket.socketpair()
    peer.setblocking(False)

    async def main() -> None:
        transport, protocol = await loop.create_connection(lambda: WireProtocol(own_socket=own), sock=ours)
        assert isinstance(protocol, WireProtocol) and protocol.wire is not None
        assert isinstance(protocol.wire.transport, SocketTransport) is own
        try:
            await body(protocol.wire, peer)  # type: ignore[misc]
        finally:
            transport.close()

    try:
        loop.run_until_complete(main())
    finally:
        peer.close()
        loop.close()


@pytest.mark.parametrize(("loop_name", "own"), RUNS)
def test_writes_go_straight_to_the_socket_while_nothing_is_held(loop_name: str, own: bool, sockio: ModuleType) -> None:
    async def body(wire: Wire, peer: socket.socket) -> None:
        assert wire.fd >= 0
        written = []
        for i in range(50):
            data = f"packet {i};".encode()
            wire.write(data)
            written.append(data)
        assert not wire.held and wire.transport.get_write_buffer_size() == 0  # none of it passed through the transport
        assert wire.bytes_out == sum(map(len, written))
        assert await read_all(peer, wire.bytes_out) == b"".join(written)

    _run(loop_name, body, own)


@pytest.mark.parametrize(("loop_name", "own"), RUNS)
def test_what_the_kernel_does_not_take_keeps_its_order(loop_name: str, own: bool, sockio: ModuleType) -> None:
    async def body(wire: Wire, peer: socket.socket) -> None:
        # Any byte the transport holds pauses the wire's writing, and only an empty buffer resumes it: the wire's
        # ``drain`` then waits for the event of the transport having written everything.
        wire.transport.set_write_buffer_limits(high=1, low=0)
        written = bytearray()
        i = 0
        while not wire.held:  # until a write did not fit the kernel's buffer: its rest went to the transport
            data = bytes([65 + i % 26]) * 65536
            wire.write(data)
            written += data
            i += 1
        assert wire.transport.get_write_buffer_size() > 0
        for j in range(20):  # these queue behind what the transport holds
            data = f"after {j};".encode()
            wire.write(data)
            written += data
        assert wire.held and wire.writing_paused
        assert await read_all(peer, len(written)) == bytes(written)
        await wire.drain()  # the transport has written the last of it (``resume_writing`` at an empty buffer)
        assert wire.transport.get_write_buffer_size() == 0
        wire.write(b"direct again")  # drained: the next write goes straight to the socket
        assert not wire.held
        assert await read_all(peer, 12) == b"direct again"

    _run(loop_name, body, own)


@pytest.mark.parametrize(("loop_name", "own"), RUNS)
def test_a_wire_without_its_socket_writes_through_the_transport(loop_name: str, own: bool) -> None:
    async def body(wire: Wire, peer: socket.socket) -> None:
        wire.fd = -1  # as when ``_sockio`` is not built
        wire.write(b"through the transport")
        assert not wire.held
        assert await read_all(peer, 21) == b"through the transport"
        wire.transport.close()
        with pytest.raises(PeerClosed):
            wire.write(b"late")

    _run(loop_name, body, own)


def test_the_wire_sends_directly_when_built(sockio: ModuleType) -> None:
    assert wire_module.SEND_NOW is sockio.send_now
