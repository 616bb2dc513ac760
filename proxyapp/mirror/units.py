"""What the mirror runs (``proxyapp.mirror.mirror``): a statement (``MirrorOp``), and a unit of them a lane runs as
one (``MirrorUnit``: one statement, or a committed transaction's), as they wait in memory and as the spill queue keeps
them on disk (``encode_unit``, ``decode_unit``)."""

from __future__ import annotations

import json
import struct

from proxyapp.mysql.backend import Credentials
from proxyapp.session.state import SessionState

#: An op's kind: a COM_QUERY payload, or a prepared statement's text and execute.
QUERY = 0
EXECUTE = 1
#: Bytes a queued statement is counted for besides its text (objects, context).
OP_OVERHEAD = 200


class MirrorOp:
    """One statement to run on the mirror: a COM_QUERY payload, or a prepared statement's text and execute."""

    __slots__ = ("ctx", "hostgroup", "insert_id", "kind", "long_data", "payload", "plain", "sql")

    def __init__(
        self,
        kind: int,
        hostgroup: int,
        payload: bytes,
        sql: str,
        long_data: list[bytes],
        insert_id: int,
        plain: bool,
        ctx: SessionState,
    ) -> None:
        self.kind = kind
        self.hostgroup = hostgroup
        self.payload = payload  # COM_QUERY: the whole packet payload; EXECUTE: COM_STMT_EXECUTE with types bound
        self.sql = sql  # EXECUTE: the prepared text
        self.long_data = long_data  # EXECUTE: COM_STMT_SEND_LONG_DATA payloads, sent before it
        self.insert_id = insert_id  # the AUTO_INCREMENT value the primary generated, replayed (0: none)
        self.plain = plain  # changes no session state on the connection (it may go back to the pool after)
        self.ctx = ctx  # the session's schema, character set and variables when it ran (shared while unchanged)


class MirrorUnit:
    """What a lane runs as a whole: one statement, or a committed transaction's statements."""

    __slots__ = ("attempts", "created", "credentials", "on_disk", "ops", "seq", "size", "transaction", "username")

    def __init__(
        self, seq: int, ops: list[MirrorOp], transaction: bool, created: float, username: str, size: int
    ) -> None:
        self.seq = seq  # this worker's order of units: a lane's units are in seq order, on disk too
        self.ops = ops
        self.transaction = transaction
        self.created = created  # wall time, so that ages survive a restart
        self.username = username
        self.credentials: Credentials | None = None  # the session's; None when read back from disk
        self.size = size
        self.on_disk = False
        self.attempts = 0


def unit_seq(unit: MirrorUnit) -> int:
    """A unit's place in its worker's order (a sort key)."""
    return unit.seq


_UNIT_VERSION = 1


def encode_unit(unit: MirrorUnit) -> bytes:
    """A unit as the bytes the spill queue keeps (its seq, time and user are columns of their own)."""
    out = bytearray(struct.pack("<BBI", _UNIT_VERSION, 1 if unit.transaction else 0, len(unit.ops)))
    contexts: dict[int, bytes] = {}
    for op in unit.ops:
        ctx = contexts.get(id(op.ctx))
        if ctx is None:
            c = op.ctx
            ctx = contexts[id(op.ctx)] = json.dumps(
                [c.schema, c.names, c.variables, c.user_variables, c.multi_statements]
            ).encode()
        sql = op.sql.encode("utf-8", "surrogateescape")
        out += struct.pack("<BqBI", op.kind, op.insert_id, 1 if op.plain else 0, len(ctx)) + ctx
        out += struct.pack("<I", len(op.payload)) + op.payload + struct.pack("<I", len(sql)) + sql
        out += struct.pack("<I", len(op.long_data))
        for chunk in op.long_data:
            out += struct.pack("<I", len(chunk)) + chunk
    return bytes(out)


def decode_unit(body: bytes, seq: int, created: float, username: str) -> MirrorUnit:
    """A unit back from the spill queue; ValueError when the bytes are not one."""
    try:
        version, transaction, count = struct.unpack_from("<BBI", body, 0)
        if version != _UNIT_VERSION:
            raise ValueError(f"unit format {version} is not {_UNIT_VERSION}")
        pos = 6
        ops: list[MirrorOp] = []
        contexts: dict[bytes, SessionState] = {}
        size = 0
        for _ in range(count):
            kind, insert_id, plain, ctx_len = struct.unpack_from("<BqBI", body, pos)
            pos += 14
            raw_ctx = body[pos : pos + ctx_len]
            pos += ctx_len
            ctx = contexts.get(raw_ctx)
            if ctx is None:
                schema, names, variables, user_variables, *multi = json.loads(
                    raw_ctx
                )  # units spilled before it was kept: on
                ctx = contexts[raw_ctx] = SessionState(
                    schema=schema,
                    names=names,
                    variables=variables,
                    user_variables=user_variables,
                    multi_statements=bool(multi[0]) if multi else True,
                )
            (length,) = struct.unpack_from("<I", body, pos)
            payload = body[pos + 4 : pos + 4 + length]
            pos += 4 + length
            (length,) = struct.unpack_from("<I", body, pos)
            sql = body[pos + 4 : pos + 4 + length].decode("utf-8", "surrogateescape")
            pos += 4 + length
            (chunks,) = struct.unpack_from("<I", body, pos)
            pos += 4
            long_data: list[bytes] = []
            for _ in range(chunks):
                (length,) = struct.unpack_from("<I", body, pos)
                long_data.append(body[pos + 4 : pos + 4 + length])
                pos += 4 + length
            ops.append(MirrorOp(kind, -1, payload, sql, long_data, insert_id, bool(plain), ctx))
            size += len(payload) + len(sql) + OP_OVERHEAD
    except (struct.error, UnicodeDecodeError, TypeError) as exc:
        raise ValueError(f"unit {seq} is damaged: {exc}") from None
    return MirrorUnit(seq, ops, bool(transaction), created, username, size)
