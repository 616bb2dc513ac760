"""SQL's ``EXECUTE name`` of a statement the client prepared by the protocol (a named Parse), through the pooler:
the server knows it by the proxy's name, so the proxy names it so (preparing it on the server connection first), by
the simple and the extended protocol, as asyncpg's ``test_prepare_explicitly_named`` does; an unknown name gets the
server's own error."""

from __future__ import annotations

from collections.abc import Callable

from tests.live.proxyapp.pgproxy.conftest import DATABASE, PASSWORD, ROLE, Pooler
from tests.support.pgraw import logged_in, message, read_message

StartPooler = Callable[..., Pooler]


def answers(sock: object, until: bytes = b"Z") -> list[tuple[bytes, bytes]]:
    """The messages up to the next ``until``."""
    out = []
    while not out or out[-1][0] != until:
        out.append(read_message(sock))  # type: ignore[arg-type]
    return out


def rows(msgs: list[tuple[bytes, bytes]]) -> list[bytes]:
    """The one column of each DataRow."""
    return [body[6:] for kind, body in msgs if kind == b"D"]


def test_execute_of_a_protocol_prepared_statement_runs_it(start_pooler: StartPooler) -> None:
    pooler = start_pooler()
    sock = logged_in(pooler.port, ROLE, PASSWORD, DATABASE, 30)
    with sock:
        sock.sendall(message(b"P", b"foobar\0SELECT 42\0\0\0") + message(b"S"))
        assert [k for k, _ in answers(sock)] == [b"1", b"Z"]
        sock.sendall(message(b"Q", b"EXECUTE foobar\0"))
        assert rows(answers(sock)) == [b"42"]
        extended = message(b"P", b"\0execute FooBar\0\0\0") + message(b"B", b"\0\0\0\0\0\0\0\0")
        sock.sendall(extended + message(b"E", b"\0\0\0\0\0") + message(b"S"))
        assert rows(answers(sock)) == [b"42"]
        named = message(b"P", b"runs_it\0EXECUTE foobar\0\0\0") + message(b"B", b"\0runs_it\0\0\0\0\0\0\0")
        sock.sendall(named + message(b"E", b"\0\0\0\0\0") + message(b"S"))  # a named statement (asyncpg's way)
        assert rows(answers(sock)) == [b"42"]
        sock.sendall(message(b"P", b"foobar\0SELECT 42\0\0\0") + message(b"S"))  # prepared again: its own name
        errors = [body for kind, body in answers(sock) if kind == b"E"]
        assert len(errors) == 1 and b"C42P05\0" in errors[0] and b'prepared statement "foobar" already' in errors[0]
        sock.sendall(message(b"Q", b"EXECUTE nope\0"))
        errors = [body for kind, body in answers(sock) if kind == b"E"]
        assert len(errors) == 1 and b'prepared statement "nope" does not exist' in errors[0]
