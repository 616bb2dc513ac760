"""A COM_STMT_EXECUTE's parameters as SQL literals, and its statement rendered as the text statement it stands for,
so that a prepared statement on sharded tables is planned like a text query (``proxyapp.sharding.plan``).

Each value keeps the meaning the server gives the binary parameter: integers (signed or unsigned as bound) as
integers, doubles as DOUBLE literals (``1.5e0``: a bare ``1.5`` would be a DECIMAL), decimals as written, dates and
times as ``DATE``, ``TIMESTAMP`` and ``TIME`` literals, NULL as NULL. A string is a quoted literal in the connection's
character set, its quotes doubled; one holding a backslash is a hex literal with the character set's introducer
(``_utf8mb4 X'..'``), which means the same with and without the ``NO_BACKSLASH_ESCAPES`` SQL mode. A BLOB-typed
parameter (bytes) is a binary string (``_binary X'..'``), as the server reads it. A pure module: no IO.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Iterable, Mapping

from proxyapp.mysql.constants import FieldType
from proxyapp.mysql.packets import ProtocolError, read_lenenc_str
from proxyapp.sql.lex import TokenKind, tokenize

#: Parameter types the server reads as binary strings (BLOB family, and the ones with no character set).
_BINARY_TYPES = frozenset({0xF9, 0xFA, 0xFB, int(FieldType.BLOB), int(FieldType.BIT), 0xFF})  # the BLOBs, BIT, GEOMETRY
#: Fixed-size integer types: (signed format, unsigned format).
_INTEGERS = {
    int(FieldType.TINY): ("<b", "<B"),
    int(FieldType.SHORT): ("<h", "<H"),
    int(FieldType.YEAR): ("<h", "<H"),
    int(FieldType.LONG): ("<i", "<I"),
    int(FieldType.INT24): ("<i", "<I"),
    int(FieldType.LONGLONG): ("<q", "<Q"),
}
_UNSIGNED = 0x80  # in the second byte of a parameter's type
_DECIMAL = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_CHARSET_NAME = re.compile(r"\w+")


class ParamError(Exception):
    """Parameters that cannot be read or written as SQL (the client's error)."""


def long_data_values(chunks: Iterable[bytes]) -> dict[int, bytes]:
    """The value each parameter got by COM_STMT_SEND_LONG_DATA (``chunks``: the commands' payloads, in order)."""
    values: dict[int, bytes] = {}
    for chunk in chunks:
        if len(chunk) < 7:
            raise ParamError("truncated COM_STMT_SEND_LONG_DATA")
        param = struct.unpack_from("<H", chunk, 5)[0]
        values[param] = values.get(param, b"") + chunk[7:]
    return values


def literals(execute: bytes, num_params: int, long_data: Mapping[int, bytes], charset: str) -> list[str]:
    """The SQL literal of each parameter of ``execute``, a COM_STMT_EXECUTE payload that binds its types (as
    ``prepared.bind_types`` makes it); ``long_data`` the values sent apart, strings in ``charset`` (the
    connection's ``character_set_client``). Raises ParamError on a packet that does not hold them."""
    if num_params == 0:
        return []
    pos = 10  # command, statement id, flags, iteration count
    nulls = execute[pos : pos + (num_params + 7) // 8]
    pos += len(nulls)
    types = execute[pos + 1 : pos + 1 + 2 * num_params]
    if len(types) < 2 * num_params or execute[pos] != 1:
        raise ParamError("COM_STMT_EXECUTE without its parameter types")
    pos += 1 + 2 * num_params
    out: list[str] = []
    try:
        for i in range(num_params):
            field_type, unsigned = types[2 * i], bool(types[2 * i + 1] & _UNSIGNED)
            if nulls[i // 8] & (1 << (i % 8)) or field_type == FieldType.NULL:
                out.append("NULL")
            elif i in long_data:
                out.append(_string(long_data[i], field_type, charset))
            else:
                literal, pos = _value(execute, pos, field_type, unsigned, charset)
                out.append(literal)
    except (IndexError, struct.error, ProtocolError) as exc:
        raise ParamError(f"truncated COM_STMT_EXECUTE parameter values: {exc}") from None
    return out


def render(sql: str, values: list[str]) -> str:
    """``sql`` with its ``?`` placeholders replaced, in order, by ``values``; ParamError when they do not match."""
    tokens = tokenize(sql)
    spots = [tokens.starts[i] for i, kind in enumerate(tokens.kinds) if kind is TokenKind.PLACEHOLDER]
    if len(spots) != len(values):
        raise ParamError(f"the statement has {len(spots)} placeholders for {len(values)} parameters")
    parts: list[str] = []
    done = 0
    for spot, value in zip(spots, values, strict=True):
        parts.append(sql[done:spot])
        if spot and sql[spot - 1] == "-":  # "-?" of -5: "- -5", not a "--" comment opener
            parts.append(" ")
        parts.append(value)
        done = spot + 1
    parts.append(sql[done:])
    return "".join(parts)


def _value(data: bytes, pos: int, field_type: int, unsigned: bool, charset: str) -> tuple[str, int]:
    """The literal of the value of type ``field_type`` at ``pos``, and the position after it."""
    formats = _INTEGERS.get(field_type)
    if formats is not None:
        fmt = formats[unsigned]
        return str(struct.unpack_from(fmt, data, pos)[0]), pos + struct.calcsize(fmt)
    if field_type == FieldType.DOUBLE:
        return _double(struct.unpack_from("<d", data, pos)[0]), pos + 8
    if field_type == FieldType.FLOAT:
        return _double(struct.unpack_from("<f", data, pos)[0]), pos + 4
    if field_type in (FieldType.DATE, FieldType.DATETIME, FieldType.TIMESTAMP):
        size = data[pos]
        return _datetime(data[pos + 1 : pos + 1 + size], field_type == FieldType.DATE), pos + 1 + size
    if field_type == FieldType.TIME:
        size = data[pos]
        return _time(data[pos + 1 : pos + 1 + size]), pos + 1 + size
    value, pos = read_lenenc_str(data, pos)
    if value is None:
        raise ParamError("a parameter value with the NULL length prefix")
    if field_type in (FieldType.DECIMAL, FieldType.NEWDECIMAL):
        text = value.decode("ascii", "replace")
        if _DECIMAL.fullmatch(text):
            return text, pos
    return _string(value, field_type, charset), pos


def _double(value: float) -> str:
    if not math.isfinite(value):
        raise ParamError(f"a floating-point parameter SQL cannot hold ({value})")
    text = repr(value)
    return text if "e" in text else text + "e0"


def _string(value: bytes, field_type: int, charset: str) -> str:
    """A string parameter: binary for the BLOB types, else in ``charset``."""
    if field_type in _BINARY_TYPES:
        return f"_binary X'{value.hex()}'"
    if b"\\" in value:
        introducer = charset if _CHARSET_NAME.fullmatch(charset) else "binary"
        return f"_{introducer} X'{value.hex()}'"
    return "'" + value.decode("utf-8", "surrogateescape").replace("'", "''") + "'"


def _datetime(raw: bytes, date_only: bool) -> str:
    """A DATE, DATETIME or TIMESTAMP value (0, 4, 7 or 11 bytes) as a DATE or TIMESTAMP literal."""
    year, month, day = struct.unpack_from("<HBB", raw) if raw else (0, 0, 0)
    date = f"{year:04d}-{month:02d}-{day:02d}"
    if date_only:
        return f"DATE'{date}'"
    hour, minute, second = raw[4:7] if len(raw) >= 7 else (0, 0, 0)
    micro = struct.unpack_from("<I", raw, 7)[0] if len(raw) >= 11 else 0
    return f"TIMESTAMP'{date} {hour:02d}:{minute:02d}:{second:02d}{_fraction(micro)}'"


def _time(raw: bytes) -> str:
    """A TIME value (0, 8 or 12 bytes: sign, days, hours, minutes, seconds, microseconds) as a TIME literal."""
    negative, days, hour, minute, second = struct.unpack_from("<BIBBB", raw) if raw else (0, 0, 0, 0, 0)
    micro = struct.unpack_from("<I", raw, 8)[0] if len(raw) >= 12 else 0
    sign = "-" if negative else ""
    return f"TIME'{sign}{days * 24 + hour:02d}:{minute:02d}:{second:02d}{_fraction(micro)}'"


def _fraction(micro: int) -> str:
    return f".{micro:06d}" if micro else ""
