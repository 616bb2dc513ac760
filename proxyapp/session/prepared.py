"""Prepared statements that outlive any one backend connection.

The client sees statement ids the proxy hands out. Each backend connection keeps its own statements, prepared
once per connection and query text; an execute is rewritten for whichever connection runs it, carrying the
parameter types the client last bound so that a connection that never saw them still decodes the values.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Final

from proxyapp.mysql.backend import BackendConnection, PreparedOnBackend
from proxyapp.mysql.constants import Command
from proxyapp.mysql.packets import ErrPacket, ProtocolError, load_byte_work, parse_err
from proxyapp.mysql.wire import Wire
from proxyapp.rules.engine import RuleOutcome
from proxyapp.session.state import SessionState
from proxyapp.sharding.params import literals, long_data_values, render
from proxyapp.sql.digest import Digest
from proxyapp.sql.scan import Statement

MAX_STATEMENTS_PER_CONNECTION = 256

#: A packet addressed to a statement id (``_bytes.stamp``, or its Python twin ``packets.python_stamp``).
_STAMP: Final = load_byte_work()[4]


@dataclass(slots=True)
class ClientStatement:
    """A statement as the client knows it."""

    client_id: int
    sql: str
    statements: list[Statement]
    hostgroup: int
    num_params: int
    num_columns: int
    digest: Digest  # of ``sql``, for the digest statistics of every execute
    param_types: bytes | None = None
    long_data: list[bytes] = field(default_factory=list)  # COM_STMT_SEND_LONG_DATA payloads, replayed at execute
    long_data_bytes: int = 0  # their size; past mysql-max_allowed_packet they are dropped and the execute refused
    cursor: bool = False
    mirror: RuleOutcome | None = None  # the prepare's rule verdict when it asks for a mirror (proxyapp.mirror.mirror)
    sharded: bool = False  # it names a sharded or global table: each execute is planned (sharded_statements)
    queued: RuleOutcome | None = None  # the prepare's rule verdict when it asks for hot-row keys (session.trxqueue)


async def read_prepare_response(wire: Wire) -> tuple[PreparedOnBackend | ErrPacket, bytes]:
    """Read a COM_STMT_PREPARE response; returns (what was prepared or the error, the raw framed bytes)."""
    start, length = await wire.next_part()
    buf = wire.buf
    if length and buf[start] == 0xFF:
        return parse_err(wire.cut(start, start + length)), wire.take()
    if length < 12 or buf[start] != 0x00:
        raise ProtocolError("malformed prepare response")
    stmt_id, num_columns, num_params = struct.unpack_from("<IHH", buf, start + 1)
    for count in (num_params, num_columns):
        if count:
            for _ in range(count + 1):  # definitions, then EOF
                await wire.next_part()
    return PreparedOnBackend(stmt_id, num_params, num_columns), wire.take()


async def prepare_anew(conn: BackendConnection, sql: str) -> tuple[PreparedOnBackend | ErrPacket, bytes]:
    """Prepare ``sql`` on ``conn``: (what was prepared or the error, the raw response, for a client's
    COM_STMT_PREPARE). Closes the statement it replaces (the same text prepared before) or pushes over the
    per-connection cap: a backend statement nobody can reach again would stay open until max_prepared_stmt_count."""
    conn.wire.send(bytes((Command.STMT_PREPARE,)) + sql.encode("utf-8", "surrogateescape"), 0)
    result, raw = await read_prepare_response(conn.wire)
    if isinstance(result, ErrPacket):
        return result, raw
    old = conn.prepared.pop(sql, None)
    if old is None and len(conn.prepared) >= MAX_STATEMENTS_PER_CONNECTION:
        old = conn.prepared.pop(next(iter(conn.prepared)))
    if old is not None and old.stmt_id != result.stmt_id:
        conn.wire.send(bytes((Command.STMT_CLOSE,)) + struct.pack("<I", old.stmt_id), 0)
    conn.prepared[sql] = result
    return result, raw


def with_client_id(raw: bytes, client_id: int) -> bytes:
    """A prepare response with the backend's statement id replaced by the client's."""
    return _STAMP(raw, 5, client_id, 0, b"")


def for_statement(execute: bytes, stmt_id: int) -> bytes:
    """A COM_STMT_EXECUTE (as ``bind_types`` made it) or COM_STMT_SEND_LONG_DATA payload, addressed to statement
    ``stmt_id``."""
    return _STAMP(execute, 1, stmt_id, 0, b"")


async def prepare_on(conn: BackendConnection, sql: str) -> PreparedOnBackend | ErrPacket:
    """``sql`` prepared on ``conn``: the statement it already has, or a new one (closing the oldest at the cap)."""
    prepared = conn.prepared.get(sql)
    if prepared is not None:
        return prepared
    result, _ = await prepare_anew(conn, sql)
    return result


def bind_types(payload: bytes, stmt: ClientStatement) -> bytes:
    """The COM_STMT_EXECUTE ``payload`` of ``stmt`` with its parameter types bound: ``payload`` itself when it binds
    them (or has no parameters), else a copy with the types the client last bound. Its statement id is still the
    client's: whoever sends it addresses it (``for_statement``).

    Remembers the types when the client binds new ones; raises ProtocolError on a malformed packet.
    """
    n = stmt.num_params
    if len(payload) < 10:
        raise ProtocolError("truncated COM_STMT_EXECUTE")
    if n == 0:
        return payload
    bitmap_end = 10 + (n + 7) // 8
    if len(payload) < bitmap_end + 1:
        raise ProtocolError("truncated COM_STMT_EXECUTE parameter block")
    if payload[bitmap_end] == 1:
        types_end = bitmap_end + 1 + 2 * n
        if len(payload) < types_end:
            raise ProtocolError("truncated COM_STMT_EXECUTE parameter types")
        stmt.param_types = payload[bitmap_end + 1 : types_end]
        return payload
    if stmt.param_types is None:
        raise ProtocolError("COM_STMT_EXECUTE without parameter types on its first execution")
    return _STAMP(payload, 1, stmt.client_id, bitmap_end, stmt.param_types)


def rendered(stmt: ClientStatement, execute: bytes, state: SessionState) -> str:
    """The text of ``stmt`` with the parameter values of ``execute`` (a COM_STMT_EXECUTE payload that binds its
    types: ``bind_types``) as literals, in the session's ``character_set_client``; ParamError when the packet
    does not hold them."""
    values = literals(execute, stmt.num_params, long_data_values(stmt.long_data), client_charset(state))
    return render(stmt.sql, values)


def client_charset(state: SessionState) -> str:
    """The character set a session's client sends its strings in (``character_set_client``, as SET NAMES or SET
    character_set_client made it), lowercase."""
    chosen = state.variables.get("character_set_client") or state.names
    words = chosen.split()
    return words[0].strip("'\"`").lower() if words else "binary"
