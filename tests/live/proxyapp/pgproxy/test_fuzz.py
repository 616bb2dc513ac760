"""Malformed bytes at the PostgreSQL listeners (the pooling proxy's and a forwarding listener), before and after
login, with a fixed seed: the PostgreSQL half of the fuzz tests.

Every case ends within a few seconds in one of the ways a server may end it (an answer, an ErrorResponse, closing
the connection), never in a hang; after all of them the proxy still serves a normal client, no server connection is
left inside a transaction, and the proxy logged no unhandled error.
"""

from __future__ import annotations

import random
import socket
import struct
from collections.abc import Iterator

import pytest

from devstack.ports import free_port
from devstack.proxy import ProxyProcess
from tests.live.proxyapp.pgproxy.conftest import DATABASE, HG, PASSWORD, ROLE, pool_config, server_sessions
from tests.support import pgraw
from tests.support.pgraw import message

SEED = 0x5EED_F0A7
CASE_TIMEOUT = 5.0  # seconds any single case may take before it counts as a hang
BAD_LOG_MARKERS = ("Traceback", "Task exception was never retrieved", "Exception in callback")
#: Typed messages a client may send, each with a random body.
_KINDS = b"PBDECSHQFdcf"


@pytest.fixture(scope="module")
def ports() -> tuple[int, int]:
    """The pooling proxy's port and the forwarding listener's."""
    return free_port(), free_port()


@pytest.fixture(scope="module")
def proxy(pg_database: str, ports: tuple[int, int], tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxyProcess]:
    """A pooling proxy with a forwarding listener, for the whole fuzz run."""
    config = pool_config(ports[0], max_connections=4)
    config["pgsql_forward_listeners"] = [{"port": ports[1], "hostgroup_id": HG}]
    p = ProxyProcess(config, tmp_path_factory.mktemp("pg-fuzz-proxy")).start()
    yield p
    p.stop()


def finish(sock: socket.socket) -> bytes:
    """Everything the proxy sends until it closes the connection (or stops answering: a case may end with the
    proxy waiting for more), within the case timeout; a hang fails."""
    sock.settimeout(CASE_TIMEOUT)
    received = b""
    try:
        while chunk := sock.recv(65536):
            received += chunk
    except TimeoutError:
        pytest.fail(f"the proxy neither answered nor closed within {CASE_TIMEOUT} s (got {received[:200]!r})")
    except ConnectionResetError:
        pass
    return received


def logged_in(port: int) -> socket.socket:
    """A raw connection that logged in with SCRAM-SHA-256 and got its first ReadyForQuery."""
    return pgraw.logged_in(port, ROLE, PASSWORD, DATABASE, CASE_TIMEOUT)


def assert_healthy(proxy: ProxyProcess, port: int) -> None:
    """The proxy runs, serves a normal client, leaves no server connection in a transaction, logged no error."""
    assert proxy.proc is not None and proxy.proc.poll() is None, proxy.log()[-4000:]
    sock = logged_in(port)
    sock.sendall(message(b"Q", b"SELECT 40 + 2\0"))
    answer = b""
    while not answer.endswith(b"Z\0\0\0\x05I"):
        chunk = sock.recv(65536)
        assert chunk, answer
        answer += chunk
    assert b"42" in answer
    sock.close()
    assert server_sessions("idle in transaction") == []
    log = proxy.log()
    for marker in BAD_LOG_MARKERS:
        assert marker not in log, log[log.find(marker) - 2000 : log.find(marker) + 2000]


@pytest.mark.parametrize("listener", ["pool", "forward"])
def test_garbage_instead_of_a_first_message(proxy: ProxyProcess, ports: tuple[int, int], listener: str) -> None:
    port = ports[0] if listener == "pool" else ports[1]
    rng = random.Random(SEED)
    for _ in range(60):
        with socket.create_connection(("127.0.0.1", port), timeout=CASE_TIMEOUT) as sock:
            size = rng.choice((1, 4, 7, 8, 9, 16, 40, 300, 20000))
            head = rng.choice((struct.pack("!i", size), struct.pack("!ii", 8, 80877103), struct.pack("!i", -1), b""))
            try:
                sock.sendall(head + rng.randbytes(size))
                sock.shutdown(socket.SHUT_WR)
            except (BrokenPipeError, ConnectionResetError):
                continue
            finish(sock)
    assert_healthy(proxy, ports[0])


def test_garbage_messages_after_login(proxy: ProxyProcess, ports: tuple[int, int]) -> None:
    rng = random.Random(SEED + 1)
    for _ in range(150):
        sock = logged_in(ports[0])
        with sock:
            stream = b""
            for _ in range(rng.randint(1, 6)):
                kind = bytes((rng.choice(_KINDS),))
                stream += message(kind, rng.randbytes(rng.choice((0, 1, 5, 20, 200))))
            if rng.random() < 0.3:
                stream += rng.randbytes(rng.randint(1, 12))  # a torn message
            try:
                sock.sendall(stream + message(b"S", b""))
                sock.shutdown(socket.SHUT_WR)
            except (BrokenPipeError, ConnectionResetError):
                continue
            finish(sock)
    assert_healthy(proxy, ports[0])
