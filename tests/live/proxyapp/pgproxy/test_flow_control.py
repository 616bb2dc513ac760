"""Flow control through the pooling proxy with clients slower than the server (issue 41, defect 1): a COPY out read
in small chunks after a pause that lasts until the server itself waits to write, a large SELECT read a byte at a
time, a COPY abandoned after its first row (a CancelRequest, then everything up to the ReadyForQuery), and a COPY in
sent faster than the server takes it; on one worker and on two. Each read has a deadline: a stall fails."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator

import pytest

from devstack.stack import wait_until
from tests.live.proxyapp.pgproxy.conftest import DATABASE, PASSWORD, ROLE, Pooler, superuser
from tests.support.pgraw import cancel_request, login, message, read_message

StartPooler = Callable[..., Pooler]
DEADLINE = 20.0  # seconds within which each read must return
COPY_ROWS = 3_000_000  # about 40 MB of COPY data, far more than every buffer on the way
IN_ROWS = 300_000


@pytest.fixture(params=[1, 2], ids=["one worker", "two workers"])
def pooler(request: pytest.FixtureRequest, start_pooler: StartPooler) -> Pooler:
    return start_pooler(**{"mysql-threads": request.param})


@pytest.fixture(params=[False, True], ids=["plain", "TLS"])
def tls(request: pytest.FixtureRequest) -> bool:
    """The client over TLS or not (the transports' own buffers and thresholds differ)."""
    return bool(request.param)


def slow_client(pooler: Pooler, tls: bool) -> tuple[socket.socket, tuple[int, int]]:
    """A logged-in raw client whose receive buffer is small, so what it does not read soon backs up."""
    return login(pooler.port, ROLE, PASSWORD, DATABASE, DEADLINE, rcvbuf=4096, tls=tls)


def messages(sock: socket.socket, chunk: int) -> Iterator[tuple[bytes, bytes]]:
    """The backend's messages, read ``chunk`` bytes at a time, up to and including a ReadyForQuery."""
    buffer = b""
    while True:
        while len(buffer) < 5 or len(buffer) < 1 + struct.unpack("!i", buffer[1:5])[0]:
            try:
                more = sock.recv(chunk)
            except TimeoutError:
                pytest.fail(f"the proxy sent nothing for {DEADLINE} s (buffered {len(buffer)} bytes)")
            assert more, "the proxy closed the connection"
            buffer += more
        end = 1 + struct.unpack("!i", buffer[1:5])[0]
        kind, body, buffer = buffer[:1], buffer[5:end], buffer[end:]
        yield kind, body
        if kind == b"Z":
            assert not buffer
            return


def server_waits_to_write() -> bool:
    """The test role's server connection blocks writing to the proxy (the proxy reads no more of it)."""
    with superuser() as conn:
        rows = conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE usename = %s AND wait_event = 'ClientWrite'", (ROLE,)
        ).fetchall()
    return bool(rows)


def test_a_copy_out_read_slowly_after_a_pause_finishes(pooler: Pooler, tls: bool) -> None:
    sock, _ = slow_client(pooler, tls)
    with sock:
        sock.sendall(message(b"Q", f"COPY (SELECT generate_series(1, {COPY_ROWS})) TO STDOUT\0".encode()))
        answers = messages(sock, 512)
        assert next(answers)[0] == b"H"  # CopyOutResponse
        assert next(answers) == (b"d", b"1\n")
        wait_until(server_waits_to_write, "the server waiting to write to the proxy", DEADLINE)
        rows = 1
        for kind, body in answers:
            if kind == b"d":
                rows += 1
            elif kind == b"C":
                assert body == f"COPY {COPY_ROWS}\0".encode()
            else:
                assert kind in b"cZ", (kind, body[:200])
        assert rows == COPY_ROWS


def test_a_large_select_read_a_byte_at_a_time_finishes(pooler: Pooler, tls: bool) -> None:
    sock, _ = slow_client(pooler, tls)
    with sock:
        sock.sendall(message(b"Q", b"SELECT generate_series(1, 100000)\0"))
        kinds = [kind for kind, _ in messages(sock, 1)]
        assert kinds[0] == b"T" and kinds.count(b"D") == 100_000 and kinds[-2:] == [b"C", b"Z"]


def test_a_copy_abandoned_after_one_row_ends(pooler: Pooler, tls: bool) -> None:
    sock, (pid, key) = slow_client(pooler, tls)
    with sock:
        sock.sendall(message(b"Q", f"COPY (SELECT generate_series(1, {COPY_ROWS})) TO STDOUT\0".encode()))
        answers = messages(sock, 512)
        assert next(answers)[0] == b"H"
        assert next(answers) == (b"d", b"1\n")
        wait_until(server_waits_to_write, "the server waiting to write to the proxy", DEADLINE)
        cancel_request(pooler.port, pid, key)
        ended = [(kind, body) for kind, body in answers if kind != b"d"]
        assert ended[0][0] == b"E" and b"C57014\0" in ended[0][1], ended  # canceling statement due to user request
        assert ended[-1] == (b"Z", b"I")
        sock.sendall(message(b"Q", b"SELECT 42\0"))
        assert [kind for kind, _ in messages(sock, 512)] == [b"T", b"D", b"C", b"Z"]


def test_a_copy_in_faster_than_the_server_takes_it_finishes(pooler: Pooler, tls: bool) -> None:
    sock, _ = slow_client(pooler, tls)
    with sock:
        sock.sendall(message(b"Q", b"CREATE TEMP TABLE copied (n int, pad text)\0"))
        list(messages(sock, 4096))
        sock.sendall(message(b"Q", b"BEGIN; COPY copied FROM STDIN\0"))
        assert [kind for kind, _ in messages_until(sock, b"G")] == [b"C", b"G"]
        pad = "x" * 200
        data = b"".join(message(b"d", f"{n}\t{pad}\n".encode()) for n in range(IN_ROWS))
        sock.sendall(data + message(b"c"))
        answers = [kind for kind, _ in messages(sock, 4096)]
        assert answers == [b"C", b"Z"]
        sock.sendall(message(b"Q", b"SELECT count(*) FROM copied; COMMIT\0"))
        answers_with_bodies = list(messages(sock, 4096))
        assert answers_with_bodies[1] == (b"D", struct.pack("!hi", 1, len(str(IN_ROWS))) + str(IN_ROWS).encode())


def messages_until(sock: socket.socket, last: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The backend's messages up to and including one of type ``last``."""
    while True:
        try:
            kind, body = read_message(sock)
        except TimeoutError:
            pytest.fail(f"no {last!r} within {DEADLINE} s")
        yield kind, body
        if kind == last:
            return
