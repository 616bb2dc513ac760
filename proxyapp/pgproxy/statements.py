"""Named prepared statements under transaction pooling, as PgBouncer 1.21 keeps them: a client's statement names are
its own, the server connections know them by names of the proxy's.

A client's Parse of a named statement is remembered (its query and parameter types). On the server its name is
``pf_`` and a hash of both, so every client that prepares the same statement shares one server-side statement per
connection. Whatever server connection a later Bind or Describe lands on, the statement is prepared there first if
that connection lacks it (the proxy's Parse, its answer left out), and the message names the server's statement. A
Close of a client's statement is answered by the proxy: the server keeps the statement for the next client, up to
``pgsql-max_prepared_statements`` per connection (the least recently used one closed beyond it).
"""

from __future__ import annotations

import hashlib
import struct

from proxyapp.pgsql.messages import cstring, message

#: The prefix of the server-side statement names the proxy gives.
PREFIX = "pf_"


class Statement:
    """A client's named statement: its server-side name, the Parse that prepares it there, its text, the hostgroup
    the query rules route it to (None: the user's default) and their timeout (ms; 0: the default)."""

    __slots__ = ("depends", "hostgroup", "parse", "query", "server_name", "timeout")

    def __init__(
        self, server_name: str, parse: bytes, query: str, hostgroup: int | None = None, timeout: int = 0
    ) -> None:
        self.server_name = server_name
        self.parse = parse  # a whole Parse message naming ``server_name``
        self.query = query
        self.hostgroup = hostgroup
        self.timeout = timeout
        self.depends: Statement | None = None  # the statement an ``EXECUTE`` runs: prepared before this one


def parse_fields(body: bytes) -> tuple[str, bytes, bytes]:
    """A Parse body's statement name, query and the rest (parameter types); ValueError when malformed."""
    name, at = cstring(body, 0)
    query, rest_at = cstring(body, at)
    return name.decode("utf-8", "surrogateescape"), query, body[rest_at:]


def server_statement(
    query: bytes, types: bytes, hostgroup: int | None = None, timeout: int = 0, epoch: int = 0
) -> Statement:
    """The server-side statement of a query and its parameter types (routed to ``hostgroup``, with the rules'
    ``timeout``), in schema ``epoch``: a statement prepared after a schema change is another one on the server (its
    parameter and result types are read again), not the one prepared before it."""
    key = query + b"\0" + types
    if epoch:
        key += b"\0" + str(epoch).encode()
    digest = hashlib.sha1(key, usedforsecurity=False).hexdigest()[:24]
    name = PREFIX + digest
    text = query.decode("utf-8", "surrogateescape")
    return Statement(name, message(b"P", name.encode() + b"\0" + query + b"\0" + types), text, hostgroup, timeout)


def parse_message(name: str, query: bytes, types: bytes) -> bytes:
    """A whole Parse message."""
    return message(b"P", name.encode("utf-8", "surrogateescape") + b"\0" + query + b"\0" + types)


def rename_bind(msg: bytes, server_name: str) -> bytes:
    """A Bind message naming ``server_name`` as its statement instead of the client's name; its parameters, which
    may be large, are copied once (no slice of the whole message on the way)."""
    at = msg.index(b"\0", 5) + 1  # after the portal's name
    rest = msg.index(b"\0", at)  # the statement name's NUL, and the parameters after it
    name = server_name.encode()
    length = len(msg) - 1 - (rest - at) + len(name)
    return b"".join((b"B", struct.pack("!i", length), memoryview(msg)[5:at], name, memoryview(msg)[rest:]))


def bind_statement(msg: bytes) -> str:
    """The statement name a Bind message names."""
    _, at = cstring(msg, 5)
    name, _ = cstring(msg, at)
    return name.decode("utf-8", "surrogateescape")


def bind_parameter(body: bytes, index: int, start: int = 0) -> tuple[int, bytes | None]:
    """The parameter ``index`` (from 0) of the Bind body that starts at ``start`` of ``body``: its format code (0
    text, 1 binary) and its value (None: NULL, or no such parameter); ValueError when malformed."""
    _, at = cstring(body, start)
    _, at = cstring(body, at)
    (formats,) = struct.unpack_from("!h", body, at)
    codes = struct.unpack_from(f"!{formats}h", body, at + 2)
    at += 2 + 2 * formats
    (count,) = struct.unpack_from("!h", body, at)
    at += 2
    if not 0 <= index < count:
        return 0, None
    for _ in range(index):
        (size,) = struct.unpack_from("!i", body, at)
        at += 4 + max(size, 0)
    (size,) = struct.unpack_from("!i", body, at)
    code = codes[0] if formats == 1 else codes[index] if formats else 0
    if size < 0:
        return code, None
    value = body[at + 4 : at + 4 + size]
    if len(value) != size:
        raise ValueError("a Bind parameter runs past its message")
    return code, value


def target(body: bytes) -> tuple[bytes, str]:
    """A Describe's or Close's target: ``S`` (a statement) or ``P`` (a portal), and its name."""
    if not body:
        raise ValueError("a Describe or Close names nothing")
    name, _ = cstring(body, 1)
    return body[:1], name.decode("utf-8", "surrogateescape")


def renamed_target(kind: bytes, server_name: str) -> bytes:
    """A Describe (``kind`` ``D``) or Close (``C``) of the server-side statement ``server_name``."""
    return message(kind, b"S" + server_name.encode() + b"\0")


def close_statement(server_name: str) -> bytes:
    """A Close of a server-side statement (the proxy's, when a connection holds too many)."""
    return renamed_target(b"C", server_name)


#: The proxy's answers of its own: ParseComplete and CloseComplete.
PARSE_COMPLETE = message(b"1")
CLOSE_COMPLETE = message(b"3")
#: A Sync of the proxy's.
SYNC = message(b"S")
