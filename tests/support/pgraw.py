"""A raw PostgreSQL protocol client for tests: it logs in (trust, or SCRAM-SHA-256 as the pooling proxy asks), then
sends any frontend messages and reads the backend's answers one message at a time, each read within a deadline (a
hang fails the test instead of stalling it)."""

from __future__ import annotations

import socket
import ssl
import struct

from proxyapp.pgsql.auth import ScramClient


def message(kind: bytes, body: bytes = b"") -> bytes:
    """A typed message: its type byte, its length (itself included) and its body."""
    return kind + struct.pack("!i", len(body) + 4) + body


def startup(user: str, database: str) -> bytes:
    """A StartupMessage (protocol 3.0) for ``user`` and ``database``."""
    body = struct.pack("!i", 196608) + f"user\0{user}\0database\0{database}\0".encode() + b"\0"
    return struct.pack("!i", len(body) + 4) + body


def read_message(sock: socket.socket) -> tuple[bytes, bytes]:
    """The next backend message: its type and its body (AssertionError when the peer closes first)."""
    head = _exactly(sock, 5)
    (length,) = struct.unpack("!i", head[1:])
    return head[:1], _exactly(sock, length - 4)


def _exactly(sock: socket.socket, size: int) -> bytes:
    out = b""
    while len(out) < size:
        chunk = sock.recv(size - len(out))
        assert chunk, f"the peer closed the connection after {out[:200]!r}"
        out += chunk
    return out


def logged_in(port: int, user: str, password: str, database: str, timeout: float, rcvbuf: int = 0) -> socket.socket:
    """A raw connection that logged in and got its first ReadyForQuery (each read within ``timeout`` seconds; a
    receive buffer of ``rcvbuf`` bytes when given)."""
    return login(port, user, password, database, timeout, rcvbuf)[0]


def login(
    port: int, user: str, password: str, database: str, timeout: float, rcvbuf: int = 0, tls: bool = False
) -> tuple[socket.socket, tuple[int, int]]:
    """``logged_in``'s connection (over TLS if ``tls``, the certificate unchecked) and the process id and secret key
    its BackendKeyData gave."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(timeout)
    sock.connect(("127.0.0.1", port))
    if tls:
        sock.sendall(struct.pack("!ii", 8, 80877103))  # SSLRequest
        assert _exactly(sock, 1) == b"S"
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        sock = context.wrap_socket(sock)
    sock.sendall(startup(user, database))
    scram = ScramClient(password)
    key = (0, 0)
    while True:
        kind, body = read_message(sock)
        if kind == b"R":
            (code,) = struct.unpack("!i", body[:4])
            if code == 10:
                first = scram.first()
                sock.sendall(message(b"p", b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first))
            elif code == 11:
                sock.sendall(message(b"p", scram.final(body[4:])))
            elif code == 12:
                scram.verify(body[4:])
        elif kind == b"K":
            key = struct.unpack("!iI", body[:8])
        elif kind == b"Z":
            return sock, key
        else:
            assert kind == b"S", (kind, body[:200])


def cancel_request(port: int, pid: int, key: int) -> None:
    """Send a CancelRequest for ``pid`` and ``key`` and wait until the other end closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack("!iiiI", 16, 80877102, pid, key))
        assert sock.recv(1) == b""
