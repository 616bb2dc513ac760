"""PostgreSQL protocol messages: what the first message of a connection asks for, and ErrorResponse.

A connection opens with a message that has no type byte: a length (int32, itself included) and a code (int32):
the protocol version of a StartupMessage, or one of the request codes below. Every later message is a type byte, a
length and a body. Field values in an ErrorResponse are C strings; the field types are single bytes (``S`` severity,
``V`` severity not localized, ``C`` SQLSTATE, ``M`` message, ``D`` detail, ``H`` hint).
"""

from __future__ import annotations

import struct

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
    body = b"".join(kind + value.encode("utf-8", "replace").replace(b"\0", b" ") + b"\0" for kind, value in fields)
    body += b"\0"
    return b"E" + struct.pack("!i", len(body) + 4) + body
