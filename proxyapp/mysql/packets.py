"""Packet framing and the basic packet shapes: length-encoded values, OK, ERR and EOF packets; and the wire's byte
work (``load_byte_work``: C from ``_bytes.c`` when it is built, else the Python twins here)."""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from proxyapp.mysql.constants import MAX_PACKET, SQLSTATE, Status
from proxyapp.shown import shown

_HEADER = struct.Struct("<I")


def python_cut(buf: bytearray, start: int, end: int) -> bytes:
    """A copy of ``buf[start:end]`` as bytes (``_bytes.cut``'s Python twin)."""
    if not 0 <= start <= end <= len(buf):
        raise ValueError(f"span [{start}, {end}) is not within the buffer's {len(buf)} bytes")
    return bytes(buf[start:end])


def python_compact(buf: bytearray, count: int) -> None:
    """Drop the first ``count`` bytes of ``buf`` (``_bytes.compact``'s Python twin)."""
    if not 0 <= count <= len(buf):
        raise ValueError(f"cannot drop {count} of the buffer's {len(buf)} bytes")
    del buf[:count]


def python_header(buf: bytearray, pos: int) -> int:
    """The packet header at ``pos`` as one little-endian int, or -1 when its four bytes are not all in
    (``_bytes.header``'s Python twin)."""
    if pos < 0:
        raise ValueError(f"position {pos} is before the buffer")
    if len(buf) - pos < 4:
        return -1
    return int.from_bytes(buf[pos : pos + 4], "little")


def python_frame_one(payload: bytes, seq: int) -> bytes:
    """``payload`` framed as one packet (``_bytes.frame``'s Python twin)."""
    if len(payload) >= MAX_PACKET:
        raise ValueError(f"a payload of {len(payload)} bytes does not fit one packet")
    return _HEADER.pack(len(payload) | (seq & 0xFF) << 24) + payload


def python_stamp(data: bytes, at: int, stmt_id: int, flag_at: int, types: bytes) -> bytes:
    """``data`` with the 4-byte statement id at ``at`` set to ``stmt_id``; with ``types``, the byte at ``flag_at``
    (an execute's new-params-bound flag) set to 1 and ``types`` put after it (``_bytes.stamp``'s Python twin)."""
    if not 0 <= stmt_id <= 0xFFFFFFFF:
        raise OverflowError("a statement id takes 4 bytes")
    if at < 0 or at > len(data) - 4:
        raise ValueError(f"no 4-byte statement id at {at} of {len(data)} bytes")
    if types and (flag_at < at + 4 or flag_at >= len(data)):
        raise ValueError(f"no bound flag at {flag_at} of {len(data)} bytes")
    out = data[:at] + stmt_id.to_bytes(4, "little") + data[at + 4 :]
    if types:
        out = out[:flag_at] + b"\x01" + types + out[flag_at + 1 :]
    return out


def python_text(data: bytes, start: int) -> str:
    """``data[start:]`` decoded as UTF-8 with surrogateescape (``_bytes.text``'s Python twin)."""
    if not 0 <= start <= len(data):
        raise ValueError(f"no text at {start} of {len(data)} bytes")
    return data[start:].decode("utf-8", "surrogateescape")


#: The wire's byte work: (cut, compact, header, frame one packet, stamp a statement id, decode a command's text).
ByteWork = tuple[
    Callable[[bytearray, int, int], bytes],
    Callable[[bytearray, int], None],
    Callable[[bytearray, int], int],
    Callable[[bytes, int], bytes],
    Callable[[bytes, int, int, int, bytes], bytes],
    Callable[[bytes, int], str],
]


def load_byte_work() -> ByteWork:
    """The C byte work (``_bytes.c``) when it is built, else the Python twins. A compiled caller keeps what it uses in
    a Final name of its own module (a name imported from another module is looked up on every use)."""
    try:
        from proxyapp.mysql import _bytes
    except ImportError:  # not built (``make build``), or PROXYFLEET_NATIVE=0
        return python_cut, python_compact, python_header, python_frame_one, python_stamp, python_text
    return _bytes.cut, _bytes.compact, _bytes.header, _bytes.frame, _bytes.stamp, _bytes.text


_FRAME_ONE: Final = load_byte_work()[3]


class ProtocolError(Exception):
    """A peer sent bytes that are not a valid packet of the expected kind."""


class PacketTooLarge(ProtocolError):
    """A peer sent a packet over the allowed size."""


def lenenc_int(value: int) -> bytes:
    """Encode a length-encoded integer."""
    if value < 251:
        return bytes((value,))
    if value < 1 << 16:
        return b"\xfc" + value.to_bytes(2, "little")
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + value.to_bytes(8, "little")


def lenenc_str(value: bytes) -> bytes:
    """Encode a length-encoded string."""
    return lenenc_int(len(value)) + value


def read_lenenc_int(data: bytes | memoryview, pos: int) -> tuple[int | None, int]:
    """Decode a length-encoded integer at ``pos``; returns (value or None for NULL, next position)."""
    try:
        first = data[pos]
        if first < 251:
            return first, pos + 1
        if first == 0xFC:
            return data[pos + 1] | data[pos + 2] << 8, pos + 3
        if first == 0xFD:
            return int.from_bytes(data[pos + 1 : pos + 4], "little"), pos + 4
        if first == 0xFE:
            if len(data) < pos + 9:
                raise ProtocolError("truncated length-encoded integer")
            return int.from_bytes(data[pos + 1 : pos + 9], "little"), pos + 9
        if first == 0xFB:
            return None, pos + 1
    except IndexError:
        raise ProtocolError("truncated length-encoded integer") from None
    raise ProtocolError(f"invalid length-encoded integer prefix 0x{first:02x}")


def read_lenenc_str(data: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    """Decode a length-encoded string at ``pos``; returns (bytes or None for NULL, next position)."""
    length, pos = read_lenenc_int(data, pos)
    if length is None:
        return None, pos
    end = pos + length
    if end > len(data):
        raise ProtocolError("truncated length-encoded string")
    return bytes(data[pos:end]), end


def read_nul_str(data: bytes | memoryview, pos: int) -> tuple[bytes, int]:
    """Decode a NUL-terminated string at ``pos``; a missing NUL takes the rest of the packet."""
    raw = bytes(data[pos:])
    end = raw.find(b"\x00")
    if end < 0:
        return raw, len(data)
    return raw[:end], pos + end + 1


def schema_name(raw: bytes) -> str:
    """A schema name a client sent (a login's, COM_CHANGE_USER's, COM_INIT_DB's), kept as sent (undecodable bytes
    escaped) and interned: the sessions naming a schema share one object, so that checking whether a pooled
    connection is in a session's schema compares two references to it, not two copies of it (with 1,000 sessions,
    each copy read missed the CPU's cache)."""
    return sys.intern(raw.decode("utf-8", "surrogateescape"))


def query_payload(sql: str) -> bytes:
    """The COM_QUERY payload of ``sql`` (the client's bytes that are not UTF-8 kept as they came)."""
    return b"\x03" + sql.encode("utf-8", "surrogateescape")


def frame(payload: bytes, seq: int) -> bytes:
    """Frame a payload as one or more packets starting at sequence id ``seq``."""
    length = len(payload)
    if length < MAX_PACKET:
        return _FRAME_ONE(payload, seq)
    parts = []
    pos = 0
    while True:
        chunk = payload[pos : pos + MAX_PACKET]
        parts.append(_HEADER.pack(len(chunk) | (seq & 0xFF) << 24))
        parts.append(chunk)
        seq += 1
        pos += MAX_PACKET
        if len(chunk) < MAX_PACKET:
            break
    return b"".join(parts)


@dataclass(slots=True)
class OkPacket:
    """A decoded OK packet (or an EOF packet's status fields)."""

    affected_rows: int = 0
    last_insert_id: int = 0
    status: int = Status.AUTOCOMMIT
    warnings: int = 0
    info: bytes = b""


def ok_packet(
    affected_rows: int = 0,
    last_insert_id: int = 0,
    status: int = Status.AUTOCOMMIT,
    warnings: int = 0,
    info: bytes = b"",
) -> bytes:
    """Build an OK packet payload."""
    return (
        b"\x00" + lenenc_int(affected_rows) + lenenc_int(last_insert_id) + struct.pack("<HH", status, warnings) + info
    )


def parse_ok(payload: bytes) -> OkPacket:
    """Decode an OK packet payload (first byte 0x00 or 0xFE)."""
    affected, pos = read_lenenc_int(payload, 1)
    insert_id, pos = read_lenenc_int(payload, pos)
    if len(payload) < pos + 4:
        return OkPacket(affected or 0, insert_id or 0)
    status, warnings = struct.unpack_from("<HH", payload, pos)
    return OkPacket(affected or 0, insert_id or 0, status, warnings, payload[pos + 4 :])


def eof_packet(status: int = Status.AUTOCOMMIT, warnings: int = 0) -> bytes:
    """Build an EOF packet payload."""
    return b"\xfe" + struct.pack("<HH", warnings, status)


def eof_status(payload: bytes) -> int:
    """The status flags of an EOF packet payload."""
    return payload[3] | payload[4] << 8 if len(payload) >= 5 else 0


def err_packet(code: int, message: str, sqlstate: str | None = None) -> bytes:
    """Build an ERR packet payload; a client's bytes that are not UTF-8 in ``message`` (a hint it wrote) are shown
    as ``\\xff`` (``shown``), as MariaDB's own messages show them."""
    state = sqlstate or SQLSTATE.get(code, "HY000")  # type: ignore[call-overload]  # plain int codes too
    return b"\xff" + struct.pack("<H", code) + b"#" + state.encode("ascii") + shown(message).encode()


@dataclass(slots=True)
class ErrPacket:
    """A decoded ERR packet."""

    code: int
    sqlstate: str
    message: str


def parse_err(payload: bytes) -> ErrPacket:
    """Decode an ERR packet payload (first byte 0xFF)."""
    if len(payload) < 3:
        return ErrPacket(0, "HY000", "malformed error packet")
    code = payload[1] | payload[2] << 8
    if payload[3:4] == b"#":
        return ErrPacket(code, payload[4:9].decode("ascii", "replace"), payload[9:].decode("utf-8", "replace"))
    return ErrPacket(code, "HY000", payload[3:].decode("utf-8", "replace"))
