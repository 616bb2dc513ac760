"""A wire's writes straight to its socket (``Wire.put``, ``Wire.send``, ``Wire.write_span``; ``_sockio.send_now``,
``send_framed``, ``send_span``).

While the transport holds nothing back, a write goes to the socket directly; what the kernel does not take, and every
write after it until the transport has drained, goes to the transport. The peer must read every byte, in the order
written, on a wire's own transport (``stream.SocketTransport``) and on the loop's, on uvloop and on asyncio's own loop;
a wire without a socket (``fd`` -1) writes through the transport only.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Callable
from types import ModuleType

import pytest

from proxyapp.mysql import wire as wire_module
from proxyapp.mysql.packets import frame
from proxyapp.mysql.stream import SocketTransport, WireProtocol
from proxyapp.mysql.wire import PeerClosed, Relay, Wire
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


def test_send_framed_sends_the_header_and_the_payload_as_one_packet(sockio: ModuleType) -> None:
    a, b = socket.socketpair()
    try:
        assert sockio.send_framed(a.fileno(), b"\x03SELECT 1", 0) == 13
        assert b.recv(64) == frame(b"\x03SELECT 1", 0) == b"\x09\x00\x00\x00\x03SELECT 1"
        assert sockio.send_framed(a.fileno(), b"", 257) == 4  # the sequence id's low byte; an empty payload
        assert b.recv(64) == b"\x00\x00\x00\x01"
        payload = bytes(range(256)) * 300  # a length in three bytes
        a.setblocking(False)
        assert sockio.send_framed(a.fileno(), payload, 7) == len(payload) + 4
        assert _recv_exactly(b, len(payload) + 4) == frame(payload, 7)
        with pytest.raises(ValueError, match="several packets"):
            sockio.send_framed(a.fileno(), bytes(0xFFFFFF), 0)
        with pytest.raises(TypeError):
            sockio.send_framed(a.fileno(), bytearray(b"x"), 0)
        taken = 0
        while (sent := sockio.send_framed(a.fileno(), bytes(65536), 0)) > 0:  # until the kernel's buffer is full
            taken += sent
        assert sent == 0 and taken > 0  # would block: nothing taken, no exception
    finally:
        a.close()
        b.close()
    assert sockio.send_framed(a.fileno(), b"closed", 0) == 0  # a failed send: the transport meets and reports it


def test_send_span_sends_a_span_of_a_buffer_as_it_is(sockio: ModuleType) -> None:
    a, b = socket.socketpair()
    buffer = bytearray(b"0123456789")
    try:
        assert sockio.send_span(a.fileno(), buffer, 2, 7) == 5
        assert b.recv(64) == b"23456"
        assert sockio.send_span(a.fileno(), buffer, 4, 4) == 0  # an empty span
        for start, end in ((-1, 3), (3, 2), (0, 11)):
            with pytest.raises(ValueError, match="not within the buffer"):
                sockio.send_span(a.fileno(), buffer, start, end)
        with pytest.raises(TypeError):
            sockio.send_span(a.fileno(), b"bytes", 0, 1)
    finally:
        a.close()
        b.close()
    assert sockio.send_span(a.fileno(), buffer, 0, 10) == 0  # a failed send: the transport meets and reports it


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    got = bytearray()
    while len(got) < count:
        chunk = sock.recv(count - len(got))
        assert chunk
        got += chunk
    return bytes(got)


#: Each loop, with the wire on a transport of its own and on the loop's.
RUNS = [(name, own) for name in LOOPS for own in (True, False)]


def _run(loop_name: str, body: Callable[[Wire, socket.socket], object], own: bool = True, send_buffer: int = 0) -> None:
    """Run ``body(wire, peer)`` on a wire over one end of a socket pair, in a loop of ``loop_name``, on its own
    transport (``own``) or the loop's (``send_buffer``: the wire's kernel send buffer, bytes; 0: the default)."""
    loop = LOOPS[loop_name]()
    ours, peer = socket.socketpair()
    if send_buffer:
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, send_buffer)
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


@pytest.mark.parametrize(("loop_name", "own"), RUNS)
@pytest.mark.parametrize("direct", [True, False], ids=["direct", "transport only"])
def test_random_writes_of_every_kind_reach_the_peer_in_order(
    loop_name: str, own: bool, direct: bool, sockio: ModuleType
) -> None:
    """Framed sends, spans of another wire's buffer and plain writes, of random sizes and in random order, on a
    socket whose kernel buffer is small (some go straight out, some partly, some wait behind what the transport
    holds): the peer reads exactly what a model of the writes says, in order, and ``bytes_out`` counts it."""

    async def body(wire: Wire, peer: socket.socket) -> None:
        if not direct:
            wire.fd = -1  # as when ``_sockio`` is not built
        wire.transport.set_write_buffer_limits(high=1 << 30)  # never paused: the test writes without draining
        rng = random.Random(f"{loop_name}-{own}-{direct}")
        other = bytearray(rng.randbytes(200_000))  # the read buffer of the wire a response came on
        model = bytearray()
        held_seen = 0
        for _ in range(400):
            kind = rng.choice(("send", "span", "write"))
            size = rng.choice((0, 1, 5, 300, 5000, 40_000, 150_000))
            if kind == "send":
                payload = rng.randbytes(size)
                seq = rng.randrange(512)
                wire.send(payload, seq)
                model += frame(payload, seq)
            elif kind == "span":
                start = rng.randrange(len(other) - size + 1)
                wire.write_span(other, start, start + size)
                model += other[start : start + size]
            else:
                data = rng.randbytes(size)
                wire.write(data)
                model += data
            held_seen += wire.held
        assert wire.bytes_out == len(model)
        assert await read_all(peer, len(model)) == bytes(model)
        if direct:
            assert held_seen  # some writes did not all fit: the rest waited in the transport, in order

    _run(loop_name, body, own, send_buffer=4096)


@pytest.mark.parametrize(("loop_name", "own"), RUNS)
def test_a_relay_sends_from_the_backends_buffer_and_copies_only_when_capturing(
    loop_name: str, own: bool, sockio: ModuleType
) -> None:
    async def body(client: Wire, peer: socket.socket) -> None:
        backend = Wire(client.transport)  # only its buffer and marks are used
        backend.buf += b"already relayed|first response|second response|not read yet"
        backend.pos = backend.mark = 15
        relay = Relay(client)
        backend.pos = 30
        relay.relay(backend)
        assert (backend.mark, relay.written, relay.parts) == (30, 15, [])
        relay.start(capture=True)
        backend.pos = 46
        relay.relay(backend)
        assert (backend.mark, relay.written, relay.parts) == (46, 16, [b"|second response"])
        assert await read_all(peer, 31) == b"|first response|second response"

    _run(loop_name, body, own)
