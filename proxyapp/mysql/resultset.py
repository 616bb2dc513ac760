"""Text-protocol result sets the proxy builds itself (answers it gives without a backend)."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from proxyapp.mysql.constants import FieldType, Status
from proxyapp.mysql.packets import (
    ErrPacket,
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
    packets = [lenenc_int(len(columns))]
    packets.extend(column_definition(name, ftype) for name, ftype in columns)
    packets.append(eof_packet(status))
    packets.extend(text_row(row) for row in rows)
    packets.append(eof_packet(status))
    out = bytearray()
    for payload in packets:
        out += frame(payload, seq)
        seq += 1
    return bytes(out)


async def read_text_result(wire: Wire) -> tuple[list[tuple[int, int]], list[list[bytes | None]], int, ErrPacket | None]:
    """Read a small text-protocol result the proxy asked for itself.

    Returns ([(column type, charset id)], rows of raw values, status flags, error or None).
    """
    columns, _, rows, status, err = await _read_result(wire)
    return columns, rows, status, err


async def read_named_result(wire: Wire) -> tuple[list[str], list[list[bytes | None]], ErrPacket | None]:
    """Read a small text-protocol result by column name: ([column names], rows of raw values, error or None)."""
    _, names, rows, _, err = await _read_result(wire)
    return names, rows, err


async def _read_result(
    wire: Wire,
) -> tuple[list[tuple[int, int]], list[str], list[list[bytes | None]], int, ErrPacket | None]:
    first = await wire.read_payload()
    if first[:1] == b"\xff":
        return [], [], [], 0, parse_err(first)
    if first[:1] == b"\x00":
        return [], [], [], parse_ok(first).status, None
    count, _ = read_lenenc_int(first, 0)
    columns = []
    names = []
    for _ in range(count or 0):
        definition = await wire.read_payload()
        pos = 0
        name = b""
        for index in range(6):  # catalog, schema, table, org_table, name, org_name
            value, pos = read_lenenc_str(definition, pos)
            if index == 4:
                name = value or b""
        if len(definition) < pos + 13:
            raise ProtocolError("truncated column definition")
        charset = definition[pos + 1] | definition[pos + 2] << 8
        columns.append((definition[pos + 7], charset))
        names.append(name.decode("utf-8", "replace"))
    await wire.read_payload()  # EOF after the definitions
    rows: list[list[bytes | None]] = []
    while True:
        payload = await wire.read_payload()
        if payload[:1] == b"\xfe" and len(payload) < 9:
            status = payload[3] | payload[4] << 8 if len(payload) >= 5 else 0
            return columns, names, rows, status, None
        if payload[:1] == b"\xff":
            return columns, names, rows, 0, parse_err(payload)
        row = []
        pos = 0
        for _ in columns:
            value, pos = read_lenenc_str(payload, pos)
            row.append(value)
        rows.append(row)
