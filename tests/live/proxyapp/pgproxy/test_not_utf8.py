"""Bytes that are not UTF-8 through the pooling proxy (issue 39): a Query's or a Parse's text sent raw to a UTF8
database, through the proxy and straight to the server, gets the server's own answer byte for byte (an
ErrorResponse: 22021), even past a rewrite rule, and the session goes on; the digests show the text escaped
(``\\xff``). The proxy read such a text with U+FFFD, so a rewrite sent the server a valid query it ran."""

from __future__ import annotations

import json
import socket
import struct
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from devstack.ports import free_port
from devstack.proxy import ProxyProcess
from proxyapp import credential
from proxyapp.pgsql.auth import ScramClient
from tests.live.proxyapp.pgproxy.conftest import DATABASE, PASSWORD, PG_PORT, ROLE, pool_config

#: Every answer the session may get in its own way (the server's parameters, its key, notices) is left out.
_OWN = (b"S", b"K", b"N")


def message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def read_message(sock: socket.socket) -> tuple[bytes, bytes]:
    head = b""
    while len(head) < 5:
        chunk = sock.recv(5 - len(head))
        assert chunk, "the connection closed"
        head += chunk
    (length,) = struct.unpack("!i", head[1:])
    body = b""
    while len(body) < length - 4:
        chunk = sock.recv(length - 4 - len(body))
        assert chunk, "the connection closed"
        body += chunk
    return head[:1], body


def until_ready(sock: socket.socket) -> list[tuple[bytes, bytes]]:
    """The messages up to the next ReadyForQuery, as they came (``_OWN`` left out)."""
    out = []
    while True:
        kind, body = read_message(sock)
        if kind not in _OWN:
            out.append((kind, body))
        if kind == b"Z":
            return out


def logged_in(port: int) -> socket.socket:
    """A raw connection to ``port`` logged in as the test role (SCRAM through the proxy; the server trusts it)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    body = struct.pack("!i", 196608) + f"user\0{ROLE}\0database\0{DATABASE}\0".encode() + b"\0"
    sock.sendall(struct.pack("!i", len(body) + 4) + body)
    scram = ScramClient(PASSWORD)
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
        elif kind == b"Z":
            return sock
        else:
            assert kind in _OWN, (kind, body)


def simple(sql: bytes) -> bytes:
    return message(b"Q", sql + b"\0")


def extended(sql: bytes, name: bytes = b"") -> bytes:
    """Parse (named ``name``), Bind, Execute and Sync of ``sql`` without parameters."""
    return (
        message(b"P", name + b"\0" + sql + b"\0" + b"\0\0")
        + message(b"B", b"\0" + name + b"\0" + b"\0\0" + b"\0\0" + b"\0\0")
        + message(b"E", b"\0" + b"\0\0\0\0")
        + message(b"S")
    )


def error_code(answer: list[tuple[bytes, bytes]]) -> bytes | None:
    """The SQLSTATE of the answer's ErrorResponse, if it has one."""
    for kind, body in answer:
        if kind == b"E":
            return next(field[1:] for field in body.split(b"\0") if field[:1] == b"C")
    return None


@pytest.fixture
def pooler(
    pg_database: str, start_proxy: Callable[[dict[str, Any]], ProxyProcess]
) -> Iterator[tuple[ProxyProcess, int]]:
    """A pooling proxy with a rewrite rule (``SELECT 'rw`` becomes ``SELECT 'RW``), and its PostgreSQL port."""
    port = free_port()
    config = pool_config(port)
    config["pgsql_query_rules"] = [
        {"rule_id": 1, "active": 1, "match_pattern": "^SELECT 'rw", "replace_pattern": "SELECT 'RW", "apply": 1}
    ]
    yield start_proxy(config), port


def test_texts_that_are_not_utf8_get_the_servers_answer_and_the_session_goes_on(
    pooler: tuple[ProxyProcess, int],
) -> None:
    proxy, port = pooler
    through, direct = logged_in(port), logged_in(PG_PORT)
    try:
        cases = [
            simple(b"SELECT \xff"),
            simple(b"SELECT '\xff'"),
            (simple(b"SELECT 'rw\xfe\xff'"), simple(b"SELECT 'RW\xfe\xff'")),  # rewritten, the bytes kept
            simple(b"SET application_name = '\xff'"),
            extended(b"SELECT '\xff'"),
            extended(b"SELECT '\xfe'", name=b"s1"),
            extended(b"SELECT '\xff'", name=b"s2"),  # another statement: not answered as the one before
            (extended(b"SELECT 'rw\xff'", name=b"r"), extended(b"SELECT 'RW\xff'", name=b"r")),
        ]
        for case in cases:
            sent, instead = case if isinstance(case, tuple) else (case, case)
            through.sendall(sent)
            direct.sendall(instead)
            answer = until_ready(through)
            assert answer == until_ready(direct), sent
            assert error_code(answer) == b"22021", (sent, answer)  # invalid byte sequence for encoding "UTF8"
            through.sendall(simple(b"SELECT 40 + 2"))
            assert (b"D", b"\0\x01\0\0\0\x0242") in until_ready(through)  # the session goes on
        status, body = _admin_get(proxy, "/stats")
        assert status == 200
        stats = json.loads(body)
        json.dumps(stats, ensure_ascii=False).encode("utf-8")  # not one lone surrogate in it
        assert {"SELECT \\xff", "SELECT ?"} <= {row["digest_text"] for row in stats["pgsql_query_digest"]}
        status, body = _admin_get(proxy, "/metrics")
        assert status == 200
        body.decode("utf-8")
    finally:
        through.close()
        direct.close()


def _admin_get(proxy: ProxyProcess, path: str) -> tuple[int, bytes]:
    request = urllib.request.Request(f"http://127.0.0.1:{proxy.admin_port}{path}")
    request.headers.update(credential.header(credential.read(proxy.token_path)))
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.read()
