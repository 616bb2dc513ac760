"""The extended query protocol through the pooling proxy, message by message beside the machine's PostgreSQL direct
(issue 41): errors before and after the client's Sync, pipelines of several Syncs, named statements the server
refused and statements re-created on another server connection after an error. Each step's answers must be the
server's own, in order; a step the proxy leaves unanswered fails at its deadline instead of hanging."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable

import pytest

from tests.live.proxyapp.pgproxy.conftest import DATABASE, PASSWORD, PG_PORT, ROLE, Pooler
from tests.support.pgraw import logged_in, message, read_message

StartPooler = Callable[..., Pooler]
DEADLINE = 10.0  # seconds within which every answer must come

#: A step: the messages to send, then the message type and count that end its answers.
Step = tuple[bytes, bytes, int]
#: A backend message as compared: its type and what identifies it (an error's SQLSTATE, a tag, a row).
Seen = tuple[str, str]


def parse(name: str, sql: str) -> bytes:
    return message(b"P", name.encode() + b"\0" + sql.encode() + b"\0" + struct.pack("!h", 0))


def bind(name: str, portal: str = "") -> bytes:
    return message(b"B", portal.encode() + b"\0" + name.encode() + b"\0" + struct.pack("!hhh", 0, 0, 0))


def describe(what: bytes, name: str) -> bytes:
    return message(b"D", what + name.encode() + b"\0")


def execute(portal: str = "") -> bytes:
    return message(b"E", portal.encode() + b"\0" + struct.pack("!i", 0))


SYNC, FLUSH = message(b"S"), message(b"H")


def query(sql: str) -> bytes:
    return message(b"Q", sql.encode() + b"\0")


def run(sock: socket.socket, steps: list[Step]) -> list[list[Seen]]:
    """Every step's answers, read until the step's last expected message (each read within the deadline)."""
    out = []
    for sent, until, count in steps:
        sock.sendall(sent)
        seen: list[Seen] = []
        while count:
            try:
                kind, body = read_message(sock)
            except TimeoutError:
                pytest.fail(f"no answer within {DEADLINE} s after {seen} (step {len(out) + 1}: {sent!r})")
            seen.append((kind.decode(), _identity(kind, body)))
            count -= kind == until
        out.append(seen)
    return out


def _identity(kind: bytes, body: bytes) -> str:
    if kind in (b"E", b"N"):
        fields = dict((f[:1], f[1:]) for f in body.split(b"\0") if f)
        return fields.get(b"C", b"").decode()
    if kind in (b"C", b"D", b"Z"):
        return body.hex()
    return ""


def direct() -> socket.socket:
    return logged_in(PG_PORT, ROLE, PASSWORD, DATABASE, DEADLINE)


def pooled(pooler: Pooler) -> socket.socket:
    return logged_in(pooler.port, ROLE, PASSWORD, DATABASE, DEADLINE)


#: Each case's steps; every one is answered alike by the server direct and through the proxy.
CASES: dict[str, list[Step]] = {
    "a named Parse fails before a Flush, then a Describe of it and the Sync": [
        (parse("s1", "SELEC 1") + FLUSH, b"E", 1),
        (describe(b"S", "s1") + SYNC, b"Z", 1),
        (bind("s1") + execute() + SYNC, b"Z", 1),
    ],
    "an unnamed Parse fails, then the Sync on its own": [
        (parse("", "SELEC 1") + FLUSH, b"E", 1),
        (SYNC, b"Z", 1),
        (parse("", "SELECT 1") + bind("") + execute() + SYNC, b"Z", 1),
    ],
    "a named Parse fails with its Sync, then its Bind": [
        (parse("s1", "SELEC 1") + SYNC, b"Z", 1),
        (bind("s1") + execute() + SYNC, b"Z", 1),
        (parse("s1", "SELECT 1") + bind("s1") + execute() + SYNC, b"Z", 1),
    ],
    "three Syncs in one pipeline, the middle one failing": [
        (
            parse("a", "SELECT 1")
            + bind("a")
            + execute()
            + SYNC
            + parse("", "SELEC 2")
            + bind("")
            + describe(b"P", "")
            + execute()
            + SYNC
            + parse("", "SELECT 3")
            + bind("")
            + execute()
            + SYNC,
            b"Z",
            3,
        ),
    ],
    "an error at Execute, after its Bind, then more before the Sync": [
        (parse("z", "SELECT 1 / (random() * 0)::int") + bind("z") + FLUSH, b"2", 1),
        (execute() + FLUSH, b"E", 1),
        (parse("y", "SELECT 2") + bind("z") + execute() + describe(b"S", "a") + SYNC, b"Z", 1),
        (bind("z") + execute() + SYNC + query("SELECT 4"), b"Z", 2),
    ],
    "errors in a transaction block and after it": [
        (query("BEGIN"), b"Z", 1),
        (parse("", "SELEC 1") + FLUSH, b"E", 1),
        (bind("") + execute() + SYNC, b"Z", 1),
        (parse("", "SELECT 1") + bind("") + execute() + SYNC, b"Z", 1),
        (query("ROLLBACK"), b"Z", 1),
        (parse("", "SELECT 5") + bind("") + execute() + SYNC, b"Z", 1),
    ],
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_message_gets_the_servers_answers(start_pooler: StartPooler, case: str) -> None:
    pooler = start_pooler()
    with direct() as twin, pooled(pooler) as client:
        expected = run(twin, CASES[case])
        assert run(client, CASES[case]) == expected


def test_a_statement_is_prepared_again_on_another_connection_after_an_error(start_pooler: StartPooler) -> None:
    """The client's statement was prepared on one server connection; after an error the next lacks it: the proxy's
    own Parse would be dropped by the server (skipping to the Sync) and must not take the Sync's answer."""
    pooler = start_pooler(max_connections=2)
    prepare = [(parse("s2", "SELECT 2") + SYNC, b"Z", 1)]
    after_error: list[Step] = [
        (parse("", "SELEC 1") + FLUSH, b"E", 1),
        (bind("s2") + execute() + SYNC, b"Z", 1),
        (bind("s2") + execute() + SYNC, b"Z", 1),
    ]
    with direct() as twin, pooled(pooler) as client:
        expected = run(twin, prepare + after_error)
        assert run(client, prepare) == expected[:1]
        with pooler.connect() as other:  # holds the connection that prepared s2, in a transaction
            other.execute("SELECT 1")
            assert run(client, after_error) == expected[1:]
            other.rollback()
