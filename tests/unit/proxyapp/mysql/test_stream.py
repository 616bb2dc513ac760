"""A wire on a transport of its own (``stream.SocketTransport``, ``_sockio.recv_append``).

``WireProtocol`` takes each new connection's socket off the loop's transport before it read anything; from then on the
loop's readiness callback appends what the socket holds to the wire's buffer. The wire must read every byte in order,
hear the peer's end and a broken connection once, and close as asyncio's transports do (``close`` sends what is
queued first, ``abort`` does not), on uvloop and on asyncio's own loop.
"""

from __future__ import annotations

import asyncio
import errno
import random
import socket
import struct
from collections.abc import Awaitable, Callable
from types import ModuleType

import pytest

from proxyapp.mysql.compression import Compression
from proxyapp.mysql.packets import frame, load_byte_work
from proxyapp.mysql.stream import SocketTransport, WireProtocol
from proxyapp.mysql.wire import PeerClosed, Wire
from tests.support.sockets import LOOPS, read_all

#: Drops the bytes read from the front of a buffer and keeps its allocation, as a wire does (``_bytes.compact``).
compact = load_byte_work()[1]


def test_recv_append_appends_what_the_socket_holds(sockio: ModuleType) -> None:
    a, b = socket.socketpair()
    try:
        buf = bytearray(b"kept:")
        assert sockio.recv_append(a.fileno(), buf) == -1  # nothing to read: no wait, no exception
        b.sendall(b"one")
        b.sendall(b"two")
        assert sockio.recv_append(a.fileno(), buf) == 6
        assert buf == b"kept:onetwo"
        b.setblocking(False)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        sent = b.send(b"x" * 1_000_000)  # what the kernel's buffers take, over the 256 KiB one read takes
        assert sent > 256 * 1024
        got = 0
        while got < sent:
            room = buf.__alloc__() - len(buf) - 1  # read into directly, then up to 256 KiB more
            n = sockio.recv_append(a.fileno(), buf)
            assert 0 < n <= max(room, 0) + 256 * 1024
            got += n
        assert buf == b"kept:onetwo" + b"x" * sent
        b.close()
        assert sockio.recv_append(a.fileno(), buf) == 0  # the end of the stream
        with pytest.raises(TypeError):
            sockio.recv_append(a.fileno(), b"not a bytearray")
    finally:
        a.close()
        b.close()
    with pytest.raises(OSError) as failed:
        sockio.recv_append(a.fileno(), bytearray())
    assert failed.value.errno == errno.EBADF


def test_recv_append_reads_into_the_room_a_buffer_kept(sockio: ModuleType) -> None:
    a, b = socket.socketpair()
    try:
        buf = bytearray(60_000)
        compact(buf, 60_000)  # emptied, its allocation kept (as a wire's buffer after a large response)
        allocated = buf.__alloc__()
        assert len(buf) == 0 and allocated > 60_000
        b.sendall(b"a" * 10_000)
        assert sockio.recv_append(a.fileno(), buf) == 10_000
        assert buf == b"a" * 10_000 and buf.__alloc__() == allocated  # read in place: nothing reallocated
        b.sendall(b"b" * 100_000)  # more than the room left: the room first, then the rest onto the end
        assert sockio.recv_append(a.fileno(), buf) == 100_000
        assert buf == b"a" * 10_000 + b"b" * 100_000
        b.sendall(b"last")
        b.close()
        compact(buf, len(buf))
        assert sockio.recv_append(a.fileno(), buf) == 4  # the end comes at the next read
        assert sockio.recv_append(a.fileno(), buf) == 0
        assert buf == b"last"
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("seed", range(10))
def test_random_reads_and_drops_keep_the_bytes_in_order(sockio: ModuleType, seed: int) -> None:
    """Random sends of random sizes, reads and drops of what was read, against a model: the buffer always holds the
    model's bytes, whether a read went into the room the buffer kept, onto its end, or both."""
    rng = random.Random(seed)
    a, b = socket.socketpair()
    b.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    try:
        buf = bytearray()
        model = bytearray()
        in_flight = 0
        for _ in range(300):
            step = rng.random()
            if step < 0.4 and in_flight < 400_000:
                data = rng.randbytes(rng.choice((1, 100, 5000, 20_000, 70_000)))
                b.sendall(data)
                model += data
                in_flight += len(data)
            elif step < 0.8:
                n = sockio.recv_append(a.fileno(), buf)
                in_flight -= max(n, 0)
                assert n != 0 and (n > 0 or in_flight == 0)
            else:
                drop = rng.randrange(len(buf) + 1)
                compact(buf, drop)
                del model[:drop]
            assert buf == model[: len(buf)] and len(model) - len(buf) == in_flight
    finally:
        a.close()
        b.close()


Body = Callable[[Wire, SocketTransport, socket.socket], Awaitable[None]]


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Two ends of a TCP connection on the loopback."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        ours = socket.create_connection(listener.getsockname())
        peer, _ = listener.accept()
    return ours, peer


def _run(loop_name: str, body: Body) -> list[str | None]:
    """Run ``body(wire, transport, peer)`` on a wire over one end of a TCP connection, in a loop of ``loop_name``;
    why the wire says it closed, once it did."""
    loop = LOOPS[loop_name]()
    ours, peer = _tcp_pair()
    peer.setblocking(False)
    lost: list[str | None] = []

    async def main() -> None:
        _, protocol = await loop.create_connection(WireProtocol, sock=ours)
        assert isinstance(protocol, WireProtocol) and protocol.wire is not None
        wire = protocol.wire
        transport = wire.transport
        assert isinstance(transport, SocketTransport)
        assert ours.fileno() == -1 or transport.fd != ours.fileno()  # a duplicate: the loop's transport let go
        ended = asyncio.Event()
        wire.on_close = ended.set
        try:
            await body(wire, transport, peer)
        finally:
            transport.abort()
        await ended.wait()
        lost.append(wire.closed)

    try:
        loop.run_until_complete(main())
    finally:
        peer.close()
        loop.close()
    return lost


@pytest.mark.parametrize("loop_name", LOOPS)
def test_packets_arrive_whole_and_in_order(loop_name: str, sockio: ModuleType) -> None:
    payloads = [f"packet {i}".encode() * (1 + i * 37) for i in range(200)]

    async def body(wire: Wire, transport: SocketTransport, peer: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(peer, b"".join(frame(p, i % 256) for i, p in enumerate(payloads)))
        for expected in payloads:
            assert await wire.read_payload() == expected
        wire.write(b"answer")
        assert await read_all(peer, 6) == b"answer"

    _run(loop_name, body)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_the_peers_end_ends_reads_once(loop_name: str, sockio: ModuleType) -> None:
    async def body(wire: Wire, transport: SocketTransport, peer: socket.socket) -> None:
        peer.sendall(frame(b"last", 0))
        peer.shutdown(socket.SHUT_WR)
        assert await wire.read_payload() == b"last"
        with pytest.raises(PeerClosed, match="closed by peer"):
            await wire.read_payload()
        assert transport.is_closing()

    assert _run(loop_name, body) == ["connection closed by peer"]


@pytest.mark.parametrize("loop_name", LOOPS)
def test_a_reset_connection_is_reported(loop_name: str, sockio: ModuleType) -> None:
    async def body(wire: Wire, transport: SocketTransport, peer: socket.socket) -> None:
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        peer.close()
        with pytest.raises(PeerClosed):
            await wire.read_payload()

    [closed] = _run(loop_name, body)
    assert closed is not None and "reset" in closed


@pytest.mark.parametrize("loop_name", LOOPS)
def test_close_sends_what_is_queued_first(loop_name: str, sockio: ModuleType) -> None:
    async def body(wire: Wire, transport: SocketTransport, peer: socket.socket) -> None:
        written = bytearray()
        i = 0
        while not wire.writing_paused:  # until the kernel's buffer is full and over the high-water mark is queued
            data = bytes([65 + i % 26]) * 65536
            wire.write(data)
            written += data
            i += 1
        assert transport.get_write_buffer_size() > 64 * 1024
        transport.close()
        assert transport.is_closing()
        with pytest.raises(PeerClosed):
            wire.write(b"late")  # nothing is written after a close
        assert await read_all(peer, len(written)) == bytes(written)
        assert await asyncio.get_running_loop().sock_recv(peer, 1) == b""  # then the end

    assert _run(loop_name, body) == ["connection closed"]


@pytest.mark.parametrize("loop_name", LOOPS)
def test_abort_drops_what_is_queued(loop_name: str, sockio: ModuleType) -> None:
    async def body(wire: Wire, transport: SocketTransport, peer: socket.socket) -> None:
        while transport.get_write_buffer_size() == 0:
            wire.write(b"x" * 65536)
        transport.abort()
        assert transport.get_write_buffer_size() == 0
        loop = asyncio.get_running_loop()
        while await loop.sock_recv(peer, 1 << 20):  # what the kernel took, then the end: not what was queued
            pass

    assert _run(loop_name, body) == ["connection closed"]


@pytest.mark.parametrize("loop_name", LOOPS)
def test_drain_waits_for_the_queue_to_go(loop_name: str, sockio: ModuleType) -> None:
    async def body(wire: Wire, transport: SocketTransport, peer: socket.socket) -> None:
        transport.set_write_buffer_limits(high=1, low=0)
        total = 0
        while transport.get_write_buffer_size() == 0:
            wire.write(b"y" * 65536)
            total += 65536
        assert wire.writing_paused
        reader = asyncio.ensure_future(read_all(peer, total))
        await wire.drain()  # resumed by the transport at an empty queue
        assert transport.get_write_buffer_size() == 0 and not wire.writing_paused
        assert await reader == b"y" * total

    _run(loop_name, body)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_paused_reading_keeps_the_bytes_in_the_socket(loop_name: str, sockio: ModuleType) -> None:
    async def body(wire: Wire, transport: SocketTransport, peer: socket.socket) -> None:
        transport.pause_reading()
        assert not transport.reading
        peer.sendall(frame(b"later", 0))
        transport.resume_reading()
        assert transport.reading
        assert await wire.read_payload() == b"later"

    _run(loop_name, body)


@pytest.mark.parametrize("loop_name", LOOPS)
def test_compressed_bytes_go_through_the_protocol(loop_name: str, sockio: ModuleType) -> None:
    async def body(wire: Wire, transport: SocketTransport, peer: socket.socket) -> None:
        wire.compress()
        packed = Compression(1 << 30).pack(frame(b"z" * 5000, 0))
        peer.sendall(packed)
        assert await wire.read_payload() == b"z" * 5000

    _run(loop_name, body)
