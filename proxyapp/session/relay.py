"""Running a command on a backend connection and relaying its response to the client.

A *runner* sends a command on a backend connection and relays the response into a ``Relay`` (``mysql.wire``: the
client, with a copy kept for the query cache when asked); the link (``proxyapp.session.link``) calls it once it holds a
connection in the session's state. The common one, a command forwarded as it is (``Forward``), the link runs itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from proxyapp.mysql.backend import BackendConnection
from proxyapp.mysql.packets import ErrPacket, parse_err, parse_ok
from proxyapp.mysql.wire import STATUS_UNKNOWN, InfileRelay, Relay, Response, Sink, Wire
from proxyapp.session.prepared import for_statement


class InfileAbandoned(Exception):
    """During a LOAD DATA LOCAL the client sent a packet out of the file's sequence (``seq``): it gave up."""

    def __init__(self, seq: int) -> None:
        super().__init__(f"packet {seq} out of order during LOAD DATA LOCAL")
        self.seq = seq


class Forward:
    """The common runner: send ``payload`` (a client's command, as the backend is to run it) and relay the query or
    execute (``binary``) response; ``relay_infile`` answers a LOCAL INFILE request. The link runs it itself
    (``BackendLink.execute``), with no closure and no reading coroutine of its own when the whole response arrives
    in one read.

    A prepared statement's execute names the statement's text (``statement``): ``addressed`` sends it to the
    statement the drawn connection holds, and on a connection that does not hold it the link runs ``first``
    instead, which prepares it there and then executes it."""

    __slots__ = ("binary", "first", "payload", "relay_infile", "statement")

    def __init__(
        self,
        payload: bytes,
        binary: bool = False,
        relay_infile: InfileRelay | None = None,
        first: Callable[[BackendConnection, Relay], Awaitable[Response]] | None = None,
    ) -> None:
        self.payload = payload
        self.binary = binary
        self.relay_infile = relay_infile
        self.statement: str | None = None
        self.first = first

    def addressed(self, conn: BackendConnection) -> bytes | None:
        """What to send on ``conn``: ``payload`` as it is, or the execute addressed to ``conn``'s statement of the
        text ``statement``; None when ``conn`` holds no such statement (``first`` runs then)."""
        text = self.statement
        if text is None:
            return self.payload
        known = conn.prepared.get(text)
        if known is None:
            return None
        return for_statement(self.payload, known.stmt_id)


#: What runs a command on a backend connection: a ``Forward``, or a function that sends it and reads the response.
Runner = Forward | Callable[[BackendConnection, Relay], Awaitable[Response]]


def simple_runner(payload: bytes, reader: Callable[[Wire, Relay], Awaitable[Response]]) -> Runner:
    """A runner that sends ``payload`` as it is and reads the response with ``reader``."""

    def run(conn: BackendConnection, relay: Relay) -> Awaitable[Response]:
        conn.wire.send(payload, 0)
        return reader(conn.wire, relay)

    return run


def init_db_runner(payload: bytes, schema: str) -> Runner:
    """COM_INIT_DB's runner: ``payload`` sent as it is, the answer relayed, and once the server took it the
    connection noted as in ``schema``, before the link keeps or releases it (released in the schema it was brought
    to, it would serve the next session in this one)."""

    def run(conn: BackendConnection, relay: Relay) -> Awaitable[Response]:
        conn.wire.send(payload, 0)
        return _in_schema(conn, relay, schema)

    return run


async def _in_schema(conn: BackendConnection, relay: Relay, schema: str) -> Response:
    response = await read_single(conn.wire, relay)
    if response.error is None:
        conn.state.schema = schema
    return response


async def read_single(backend: Wire, client: Relay) -> Response:
    """The one-packet response of COM_INIT_DB and similar commands, relayed."""
    start, length = await backend.next_part()
    payload = backend.cut(start, start + length)
    client.relay(backend)
    if payload[:1] == b"\xff":
        return Response(error=parse_err(payload))
    if payload[:1] == b"\x00":
        return Response(status=parse_ok(payload).status)
    return Response()


async def read_field_list(backend: Wire, client: Relay) -> Response:
    """A COM_FIELD_LIST response (column definitions up to EOF, or ERR), relayed."""
    status, error = await relay_until_eof(backend, client)
    return Response(status, error)


async def relay_until_eof(backend: Wire, client: Sink) -> tuple[int, ErrPacket | None]:
    """Relay packets up to an EOF or ERR (COM_FIELD_LIST, COM_STMT_FETCH); returns (EOF status, error)."""
    while True:
        start, length = backend.part()
        if length < 0:
            start, length = await backend.next_part()
        first = backend.buf[start] if length else 0
        if first == 0xFF:
            error = parse_err(backend.cut(start, start + length))
            client.write(backend.take())
            return STATUS_UNKNOWN, error
        if first == 0xFE and length < 9:
            status = backend.buf[start + 3] | backend.buf[start + 4] << 8 if length >= 5 else 0
            client.write(backend.take())
            return status, None
