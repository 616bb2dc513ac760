"""Text-protocol result sets the proxy builds itself (answers it gives without a backend)."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from proxyapp.protocol.constants import FieldType, Status
from proxyapp.protocol.packets import eof_packet, frame, lenenc_int, lenenc_str

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
