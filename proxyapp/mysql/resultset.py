"""Result sets the proxy builds itself: text-protocol answers it gives without a backend, and binary-protocol
result sets of text-protocol rows (a prepared statement's merged scatter)."""

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
    return _framed(definitions, (text_row(row) for row in rows), status, warnings, seq)


def binary_result_set_of(
    columns: Sequence[ColumnInfo],
    rows: Iterable[Sequence[bytes | None]],
    status: int = Status.AUTOCOMMIT,
    warnings: int = 0,
    seq: int = 1,
) -> bytes:
    """A whole framed binary-protocol result set (a COM_STMT_EXECUTE's) of text-protocol ``rows`` of ``columns``."""
    return _framed([c.payload for c in columns], (binary_row(row, columns) for row in rows), status, warnings, seq)


def _framed(definitions: Sequence[bytes], rows: Iterable[bytes], status: int, warnings: int, seq: int) -> bytes:
    """Column count, definitions, EOF, row payloads, EOF: framed from sequence ``seq``."""
    out = bytearray()
    payloads = itertools.chain(
        (lenenc_int(len(definitions)),),
        definitions,
        (eof_packet(status),),
        rows,
        (eof_packet(status, warnings),),
    )
    for payload in payloads:
        out += frame(payload, seq)
        seq = (seq + len(payload) // MAX_PACKET + 1) & 0xFF  # a payload of 16 MB or more takes several packets
    return bytes(out)


#: Binary-protocol integer formats by column type: (signed, unsigned).
_INTEGER_FORMATS: dict[int, tuple[str, str]] = {
    FieldType.TINY: ("<b", "<B"),
    FieldType.SHORT: ("<h", "<H"),
    FieldType.YEAR: ("<h", "<H"),
    FieldType.LONG: ("<i", "<I"),
    FieldType.INT24: ("<i", "<I"),
    FieldType.LONGLONG: ("<q", "<Q"),
}
_FLOAT_FORMATS: dict[int, str] = {FieldType.FLOAT: "<f", FieldType.DOUBLE: "<d"}
_UNSIGNED_FLAG = 0x20


def binary_row(values: Sequence[bytes | None], columns: Sequence[ColumnInfo]) -> bytes:
    """A binary-protocol row payload of a text-protocol row (``values`` as the server wrote them for ``columns``):
    the NULL bitmap (offset 2), then each value in its type's binary form (https://mariadb.com/kb/en/resultset-row/):
    integers and floats fixed-size little-endian, dates and times as length-prefixed fields, the rest as strings."""
    bitmap = bytearray((len(values) + 9) // 8)
    out = bytearray()
    for i, (value, column) in enumerate(zip(values, columns, strict=True)):
        if value is None:
            bitmap[(i + 2) // 8] |= 1 << ((i + 2) % 8)
            continue
        field_type = column.type
        integer = _INTEGER_FORMATS.get(field_type)
        if integer is not None:
            out += struct.pack(integer[bool(column.flags & _UNSIGNED_FLAG)], int(value))
        elif field_type in _FLOAT_FORMATS:
            out += struct.pack(_FLOAT_FORMATS[field_type], float(value))
        elif field_type in (FieldType.DATE, FieldType.DATETIME, FieldType.TIMESTAMP):
            out += _binary_datetime(value)
        elif field_type == FieldType.TIME:
            out += _binary_time(value)
        else:
            out += lenenc_str(value)
    return b"\x00" + bytes(bitmap) + bytes(out)


def _binary_datetime(text: bytes) -> bytes:
    """'YYYY-MM-DD[ hh:mm:ss[.ffffff]]' as the binary protocol's 0, 4, 7 or 11 bytes after their length."""
    date, _, clock = text.partition(b" ")
    year, month, day = (int(part) for part in date.split(b"-"))
    hour = minute = second = micro = 0
    if clock:
        hours, minutes, seconds = clock.split(b":")
        hour, minute = int(hours), int(minutes)
        second, micro = _seconds(seconds)
    if micro:
        body = struct.pack("<HBBBBBI", year, month, day, hour, minute, second, micro)
    elif hour or minute or second:
        body = struct.pack("<HBBBBB", year, month, day, hour, minute, second)
    elif year or month or day:
        body = struct.pack("<HBB", year, month, day)
    else:
        body = b""
    return bytes((len(body),)) + body


def _binary_time(text: bytes) -> bytes:
    """'[-]hh:mm:ss[.ffffff]' as the binary protocol's 0, 8 or 12 bytes (sign, days, hours, ...) after their length."""
    negative = text.startswith(b"-")
    hours, minutes, seconds = text.lstrip(b"-").split(b":")
    days, hour = divmod(int(hours), 24)
    minute = int(minutes)
    second, micro = _seconds(seconds)
    if micro:
        body = struct.pack("<BIBBBI", negative, days, hour, minute, second, micro)
    elif days or hour or minute or second:
        body = struct.pack("<BIBBB", negative, days, hour, minute, second)
    else:
        body = b""
    return bytes((len(body),)) + body


def _seconds(text: bytes) -> tuple[int, int]:
    """'ss[.ffffff]' as (seconds, microseconds)."""
    whole, _, fraction = text.partition(b".")
    return int(whole), int(fraction.ljust(6, b"0")[:6]) if fraction else 0


@dataclass(slots=True)
class ColumnInfo:
    """One column of a text result: its definition as the server sent it, and what the proxy reads of it."""

    payload: bytes
    name: str
    type: int
    charset: int
    flags: int
    decimals: int
    length: int = 0  # the column's length in bytes, as the definition says


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
                int.from_bytes(definition[pos + 3 : pos + 7], "little"),
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
