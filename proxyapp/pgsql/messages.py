"""PostgreSQL protocol messages: what the first message of a connection asks for, and ErrorResponse.

A connection opens with a message that has no type byte: a length (int32, itself included) and a code (int32):
the protocol version of a StartupMessage, or one of the request codes below. Every later message is a type byte, a
length and a body. Field values in an ErrorResponse are C strings; the field types are single bytes (``S`` severity,
``V`` severity not localized, ``C`` SQLSTATE, ``M`` message, ``D`` detail, ``H`` hint).
"""

from __future__ import annotations

import struct

from proxyapp.shown import shown

#: The first message's codes (``StartupMessage`` carries the protocol version instead: 3.0 is 196608).
CANCEL_REQUEST = 80877102
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
PROTOCOL_3 = 196608
#: The requests a client may open with to have the connection encrypted, answered "S"/"G" (yes) or "N" (no).
ENCRYPTION_REQUESTS = frozenset({SSL_REQUEST, GSSENC_REQUEST})
#: A CancelRequest is always this long: length, code, process id, secret key.
CANCEL_REQUEST_LENGTH = 16

_HEAD = struct.Struct("!ii")

#: SQLSTATEs the proxy answers with.
TOO_MANY_CONNECTIONS = "53300"
CONNECTION_FAILURE = "08006"
CANNOT_CONNECT_NOW = "57P03"
QUERY_CANCELED = "57014"


def first_message(head: bytes) -> tuple[int, int]:
    """The length and code of a connection's first message from its first 8 bytes (ValueError when shorter)."""
    if len(head) < _HEAD.size:
        raise ValueError(f"a first message needs {_HEAD.size} bytes, got {len(head)}")
    length, code = _HEAD.unpack_from(head)
    return length, code


def is_cancel_request(head: bytes) -> bool:
    """Whether the first 8 bytes of a connection open a CancelRequest."""
    length, code = first_message(head)
    return length == CANCEL_REQUEST_LENGTH and code == CANCEL_REQUEST


def error_response(sqlstate: str, message: str, severity: str = "FATAL", detail: str = "") -> bytes:
    """An ErrorResponse message (type ``E``): what libpq, psycopg and asyncpg show as the error."""
    fields = [(b"S", severity), (b"V", severity), (b"C", sqlstate), (b"M", message)]
    if detail:
        fields.append((b"D", detail))
    body = b"".join(kind + shown(value).encode().replace(b"\0", b" ") + b"\0" for kind, value in fields)
    body += b"\0"
    return b"E" + struct.pack("!i", len(body) + 4) + body


def is_fatal(msg: bytes) -> bool:
    """Whether a whole ErrorResponse ends its session: its non-localized severity (``V``, from PostgreSQL 9.6) or
    else its severity (``S``, first) is FATAL or PANIC."""
    return b"\0VFATAL\0" in msg or b"\0VPANIC\0" in msg or msg[5:12] in (b"SFATAL\0", b"SPANIC\0")


def message(kind: bytes, body: bytes = b"") -> bytes:
    """A typed message: its type byte, its length (itself included) and its body."""
    return kind + struct.pack("!i", len(body) + 4) + body


def startup_message(parameters: dict[str, str]) -> bytes:
    """A StartupMessage (protocol 3.0) with ``parameters`` (user, database, application_name, ...)."""
    body = struct.pack("!i", PROTOCOL_3)
    body += b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in parameters.items()) + b"\0"
    return struct.pack("!i", len(body) + 4) + body


def request(code: int) -> bytes:
    """An SSLRequest or GSSENCRequest: the first message that asks for an encrypted connection."""
    return _HEAD.pack(8, code)


def error_fields(body: bytes) -> dict[str, str]:
    """An ErrorResponse's or NoticeResponse's fields by type letter (``C`` SQLSTATE, ``M`` message, ...)."""
    fields = {}
    for part in body.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode("utf-8", "replace")
    return fields


def data_row(body: bytes) -> tuple[bytes | None, ...]:
    """A DataRow's values (None for NULL), as the server sent them."""
    (count,) = struct.unpack_from("!h", body)
    values: list[bytes | None] = []
    at = 2
    for _ in range(count):
        (size,) = struct.unpack_from("!i", body, at)
        at += 4
        if size < 0:
            values.append(None)
            continue
        values.append(body[at : at + size])
        at += size
    return tuple(values)


def auth_request(code: int, data: bytes = b"") -> bytes:
    """An Authentication* message (``R``): its request code and data (a salt, mechanisms, a SASL answer)."""
    return message(b"R", struct.pack("!i", code) + data)


def parameter_status(name: str, value: str) -> bytes:
    """A ParameterStatus message (``S``)."""
    return message(b"S", name.encode() + b"\0" + value.encode() + b"\0")


def backend_key_data(pid: int, key: int) -> bytes:
    """A BackendKeyData message (``K``): what a client's CancelRequest must name."""
    return message(b"K", struct.pack("!iI", pid, key))


def ready_for_query(status: bytes) -> bytes:
    """A ReadyForQuery message (``Z``): ``I`` idle, ``T`` in a transaction, ``E`` in a failed transaction."""
    return message(b"Z", status)


def startup_parameters(first: bytes) -> dict[str, str]:
    """The parameters of a whole StartupMessage (user, database, options, ...); ValueError when malformed."""
    parts = first[8:].split(b"\0")
    if len(parts) < 2 or parts[-1] != b"" or parts[-2] != b"" or len(parts) % 2:
        raise ValueError("malformed startup packet")
    names, values = parts[0:-2:2], parts[1:-2:2]
    try:
        return {n.decode(): v.decode() for n, v in zip(names, values, strict=True)}
    except UnicodeDecodeError:
        raise ValueError("startup packet parameters are not UTF-8") from None


def cstring(body: bytes, at: int) -> tuple[bytes, int]:
    """The NUL-terminated string of ``body`` at ``at`` and the position after its NUL; ValueError when unterminated."""
    end = body.index(b"\0", at)
    return body[at:end], end + 1


#: CommandComplete tags whose count is of rows sent to the client (the others' is of rows changed).
_SENT_TAGS = (b"SELECT", b"FETCH", b"COPY", b"MOVE")


def tag_rows(tag: bytes) -> tuple[int, int]:
    """(rows sent, rows affected) of a CommandComplete tag ("SELECT 5", "INSERT 0 3", "UPDATE 2", ...)."""
    count = tag.rpartition(b" ")[2]
    if not count.isdigit():
        return 0, 0
    rows = int(count)
    return (rows, 0) if tag.startswith(_SENT_TAGS) else (0, rows)


def cstring_body(msg: bytes) -> bytes:
    """A message's body without its final NUL (a Query's text, a CommandComplete's tag); b"" for an empty body
    (never a slice that ends before it starts: compiled code refuses those)."""
    return msg[5 : max(5, len(msg) - 1)]
