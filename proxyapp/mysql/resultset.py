"""Text-protocol result sets the proxy builds itself (answers it gives without a backend)."""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from proxyapp.mysql.constants import MAX_PACKET, FieldType, Status
from proxyapp.mysql.packets import (
    ErrPacket,
    OkPacket,
    ProtocolError,
    eof_packet,
    frame,
    lenenc_int,
    lenenc_str,
    parse_err,
    parse_ok,
    read_lenenc_int,
    read_lenenc_str,
)
from proxyapp.mysql.wire import Wire

_BINARY_CHARSET = 63
_UTF8MB4 = 45


def column_definition(name: str, field_type: int = FieldType.VAR_STRING, length: int = 255) -> bytes:
    """A ColumnDefinition41 payload for a computed column."""
    charset = _BINARY_CHARSET if field_type in (FieldType.LONGLONG, FieldType.LONG) else _UTF8MB4
    encoded = name.encode()
    return b"".join(
        (
            lenenc_str(b"def"),
            lenenc_str(b""),
            lenenc_str(b""),
            lenenc_str(b""),
            lenenc_str(encoded),
            lenenc_str(b""),
            b"\x0c",
            struct.pack("<HIBHB", charset, length, field_type, 0, 0),
            b"\x00\x00",
        )
    )


def text_row(values: Sequence[object]) -> bytes:
    """A text-protocol row payload; None is SQL NULL."""
    out = bytearray()
    for value in values:
        if value is None:
            out += b"\xfb"
        else:
            out += lenenc_str(value if isinstance(value, bytes) else str(value).encode())
    return bytes(out)


def result_set(
    columns: Sequence[tuple[str, int]],
    rows: Iterable[Sequence[object]],
    status: int = Status.AUTOCOMMIT,
    seq: int = 1,
) -> bytes:
    """A whole framed result set (column count, definitions, EOF, rows, EOF) starting at sequence ``seq``."""
    return result_set_of([column_definition(name, ftype) for name, ftype in columns], rows, status, 0, seq)


def result_set_of(
    definitions: Sequence[bytes],
    rows: Iterable[Sequence[object]],
    status: int = Status.AUTOCOMMIT,
    warnings: int = 0,
    seq: int = 1,
) -> bytes:
    """A whole framed result set from column definition payloads (as a server sent them, or ``column_definition``)
    and rows, starting at sequence ``seq``."""
    out = bytearray()
    payloads = itertools.chain(
        (lenenc_int(len(definitions)),),
        definitions,
        (eof_packet(status),),
        (text_row(row) for row in rows),
        (eof_packet(status, warnings),),
    )
    for payload in payloads:
        out += frame(payload, seq)
        seq = (seq + len(payload) // MAX_PACKET + 1) & 0xFF  # a payload of 16 MB or more takes several packets
    return bytes(out)


@dataclass(slots=True)
class ColumnInfo:
    """One column of a text result: its definition as the server sent it, and what the proxy reads of it."""

    payload: bytes
    name: str
    type: int
    charset: int
    flags: int
    decimals: int


@dataclass(slots=True)
class TextResult:
    """A whole text-protocol response read into memory: a result set's columns and rows, or an OK, or an error."""

    columns: list[ColumnInfo] = field(default_factory=list)
    rows: list[list[bytes | None]] = field(default_factory=list)
    status: int = 0
    warnings: int = 0
    ok: OkPacket | None = None
    error: ErrPacket | None = None


async def read_text_result(wire: Wire) -> tuple[list[tuple[int, int]], list[list[bytes | None]], int, ErrPacket | None]:
    """Read a small text-protocol result the proxy asked for itself.

    Returns ([(column type, charset id)], rows of raw values, status flags, error or None).
    """
    result = await read_whole_result(wire)
    return [(c.type, c.charset) for c in result.columns], result.rows, result.status, result.error


async def read_named_result(wire: Wire) -> tuple[list[str], list[list[bytes | None]], ErrPacket | None]:
    """Read a small text-protocol result by column name: ([column names], rows of raw values, error or None)."""
    result = await read_whole_result(wire)
    return [c.name for c in result.columns], result.rows, result.error


async def read_whole_result(wire: Wire) -> TextResult:
    """Read one whole text-protocol response (one result: a statement that returns several is not read past its
    first)."""
    first = await wire.read_payload()
    if first[:1] == b"\xff":
        return TextResult(error=parse_err(first))
    if first[:1] == b"\x00":
        ok = parse_ok(first)
        return TextResult(status=ok.status, warnings=ok.warnings, ok=ok)
    count, _ = read_lenenc_int(first, 0)
    result = TextResult()
    for _ in range(count or 0):
        definition = await wire.read_payload()
        pos = 0
        name = b""
        for index in range(6):  # catalog, schema, table, org_table, name, org_name
            value, pos = read_lenenc_str(definition, pos)
            if index == 4:
                name = value or b""
        if len(definition) < pos + 11:
            raise ProtocolError("truncated column definition")
        result.columns.append(
            ColumnInfo(
                definition,
                name.decode("utf-8", "replace"),
                definition[pos + 7],
                definition[pos + 1] | definition[pos + 2] << 8,
                definition[pos + 8] | definition[pos + 9] << 8,
                definition[pos + 10],
            )
        )
    await wire.read_payload()  # EOF after the definitions
    rows = result.rows
    width = len(result.columns)
    while True:
        payload = await wire.read_payload()
        if payload[:1] == b"\xfe" and len(payload) < 9:
            if len(payload) >= 5:
                result.warnings = payload[1] | payload[2] << 8
                result.status = payload[3] | payload[4] << 8
            return result
        if payload[:1] == b"\xff":
            result.error = parse_err(payload)
            return result
        row = []
        pos = 0
        for _ in range(width):
            value, pos = read_lenenc_str(payload, pos)
            row.append(value)
        rows.append(row)
