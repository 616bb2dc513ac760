"""The C relay alone (``proxyapp.forward._splice``) over socket pairs: bytes pass both ways in order, a slow reader
holds its sender back with no byte lost, either side's end closes both and reports the counts, ``close`` ends a pair,
and a forked child does not inherit the pairs.

The module must be built (``make build``, or ``python -m proxyapp build``): these tests fail, never skip, without it.
"""

from __future__ import annotations

import hashlib
import os
import select
import socket
import threading
from collections.abc import Iterator
from types import ModuleType

import pytest

from devstack.stack import wait_until
from tests.support.native import built

CHUNK = 64 * 1024


@pytest.fixture(scope="module")
def splice() -> ModuleType:
    """The built C relay."""
    return built("proxyapp.forward._splice")


class Pair:
    """A client and a server, each talking to the relay over a socket pair."""

    def __init__(self, splice: ModuleType, pending: bytes = b"") -> None:
        self.client, client_end = socket.socketpair()
        self.server, server_end = socket.socketpair()
        for s in (self.client, self.server):
            s.settimeout(10)
        self.id = splice.add(client_end.detach(), server_end.detach(), pending)

    def close(self) -> None:
        self.client.close()
        self.server.close()


@pytest.fixture
def pair(splice: ModuleType) -> Iterator[Pair]:
    p = Pair(splice, b"startup")
    yield p
    p.close()


#: What ``ended`` reported so far, by pair id.
REPORTED: dict[int, tuple[int, int]] = {}


def final_counts(splice: ModuleType, pair_id: int) -> tuple[int, int]:
    """A pair's counts as ``ended`` reports them, waiting up to 10 s for the notify fd to say so."""
    while pair_id not in REPORTED:
        readable, _, _ = select.select([splice.notify_fd()], [], [], 10)
        assert readable, f"pair {pair_id} not reported ended"
        REPORTED.update((ended_id, (c2s, s2c)) for ended_id, c2s, s2c in splice.ended())
    return REPORTED[pair_id]


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, f"EOF after {len(data)} of {n} bytes"
        data += chunk
    return bytes(data)


def test_bytes_pass_both_ways_after_the_pending_ones(splice: ModuleType, pair: Pair) -> None:
    assert recv_exactly(pair.server, 7) == b"startup"
    pair.client.sendall(b"query")
    assert recv_exactly(pair.server, 5) == b"query"
    pair.server.sendall(b"answer!")
    assert recv_exactly(pair.client, 7) == b"answer!"
    assert (pair.id, 5, 7) in splice.snapshot()  # bytes read from each side: the pending ones were Python's


@pytest.mark.parametrize("direction", ["server to a slow client", "client to a slow server"])
def test_a_slow_reader_holds_the_sender_back_and_loses_nothing(splice: ModuleType, pair: Pair, direction: str) -> None:
    recv_exactly(pair.server, 7)
    sender, reader = (pair.server, pair.client) if direction.startswith("server") else (pair.client, pair.server)
    column = 2 if sender is pair.server else 1
    total = 16 * 1024 * 1024
    data = hashlib.sha256(direction.encode()).digest() * (total // 32)
    sender.setblocking(False)
    sent = 0
    while True:  # send until the whole way is full: the relay stopped reading the sender
        try:
            sent += sender.send(data[sent : sent + CHUNK])
        except BlockingIOError:
            _, writable, _ = select.select([], [sender], [], 1)
            if not writable:
                break
    (row,) = [r for r in splice.snapshot() if r[0] == pair.id]
    bound = CHUNK + 4 * (
        reader.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) + sender.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    )
    assert sent < bound and row[column] < bound, (sent, row, bound)
    received = bytearray()

    def read_all() -> None:
        while len(received) < total:
            chunk = reader.recv(4096)
            if not chunk:
                return
            received.extend(chunk)

    thread = threading.Thread(target=read_all)
    thread.start()
    sender.setblocking(True)
    sender.settimeout(30)
    sender.sendall(data[sent:])
    thread.join(60)
    assert not thread.is_alive()
    assert len(received) == total and hashlib.sha256(received).digest() == hashlib.sha256(data).digest()


@pytest.mark.parametrize("leaver", ["client", "server"])
def test_either_side_ending_closes_both_and_reports_the_counts(splice: ModuleType, pair: Pair, leaver: str) -> None:
    recv_exactly(pair.server, 7)
    pair.client.sendall(b"abc")
    recv_exactly(pair.server, 3)
    gone, other = (pair.client, pair.server) if leaver == "client" else (pair.server, pair.client)
    gone.sendall(b"last words")  # what it sent just before leaving still arrives
    gone.close()
    assert recv_exactly(other, 10) == b"last words"
    assert other.recv(100) == b""
    c2s, s2c = (13, 0) if leaver == "client" else (3, 10)
    wait_until(lambda: pair.id not in {r[0] for r in splice.snapshot()}, "the pair gone from the snapshot", 10)
    assert final_counts(splice, pair.id) == (c2s, s2c)


def test_a_server_that_leaves_while_its_client_is_slow_still_gets_its_last_bytes_through(splice: ModuleType) -> None:
    pair = Pair(splice)
    try:
        tail = b"the end"
        data = os.urandom(4 * 1024 * 1024)
        threading.Thread(target=lambda: (pair.server.sendall(data + tail), pair.server.close())).start()
        received = bytearray()
        while chunk := pair.client.recv(65536):
            received += chunk
        assert bytes(received) == data + tail
        assert final_counts(splice, pair.id) == (0, len(data) + len(tail))
    finally:
        pair.close()


def test_close_ends_a_pair_now(splice: ModuleType, pair: Pair) -> None:
    recv_exactly(pair.server, 7)
    assert splice.close(pair.id) is True
    assert pair.client.recv(100) == b""
    assert pair.server.recv(100) == b""
    assert final_counts(splice, pair.id) == (0, 0)
    assert splice.close(pair.id) is False


def test_ended_pairs_leave_no_descriptor_open(splice: ModuleType) -> None:
    splice.notify_fd()  # the relay's own descriptors, opened once
    before = len(os.listdir("/proc/self/fd"))
    pairs = [Pair(splice, b"x") for _ in range(50)]
    for p in pairs[:25]:
        p.close()  # half end from the apps' side
    for p in pairs[25:]:
        splice.close(p.id)  # half from Python's
    for p in pairs:
        final_counts(splice, p.id)
        p.close()
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_forked_child_has_no_pairs_and_does_not_hold_their_sockets(splice: ModuleType, pair: Pair) -> None:
    recv_exactly(pair.server, 7)
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: an empty relay that can start its own; it lives on while the parent checks
        pair.close()  # the test's own ends, which the child inherited too
        ok = splice.snapshot() == [] and splice.ended() == []
        child = Pair(splice, b"child")
        ok = ok and child.server.recv(5) == b"child"
        os.write(ready_w, b"1" if ok else b"0")
        os.read(done_r, 1)
        os._exit(0)
    try:
        assert os.read(ready_r, 1) == b"1"
        pair.client.sendall(b"still here")  # the parent's pair goes on
        assert recv_exactly(pair.server, 10) == b"still here"
        pair.server.close()  # and ends when its server leaves: no copy in the child keeps the client's socket open
        assert pair.client.recv(100) == b""
    finally:
        os.write(done_w, b"x")
        os.waitpid(pid, 0)
        for fd in (ready_r, ready_w, done_r, done_w):
            os.close(fd)
