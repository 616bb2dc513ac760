"""Binary-protocol rows of text-protocol values (proxyapp.mysql.resultset.binary_row): each type's binary form, the
NULL bitmap at offset 2, and a whole binary result set. (The live sharding tests compare them with a server's.)"""

from __future__ import annotations

import struct

import pytest

from proxyapp.mysql.constants import FieldType
from proxyapp.mysql.packets import lenenc_str
from proxyapp.mysql.resultset import ColumnInfo, binary_result_set_of, binary_row, column_definition

UNSIGNED = 0x20


def column(field_type: int, flags: int = 0) -> ColumnInfo:
    return ColumnInfo(column_definition("c", field_type), "c", field_type, 63, flags, 0)


@pytest.mark.parametrize(
    ("field_type", "flags", "text", "binary"),
    [
        (FieldType.TINY, 0, b"-128", struct.pack("<b", -128)),
        (FieldType.TINY, UNSIGNED, b"255", b"\xff"),
        (FieldType.SHORT, 0, b"-2", struct.pack("<h", -2)),
        (FieldType.YEAR, UNSIGNED, b"2024", struct.pack("<H", 2024)),
        (FieldType.INT24, 0, b"-8388608", struct.pack("<i", -8388608)),
        (FieldType.LONG, UNSIGNED, b"4294967295", b"\xff\xff\xff\xff"),
        (FieldType.LONGLONG, 0, b"-9223372036854775808", struct.pack("<q", -(2**63))),
        (FieldType.LONGLONG, UNSIGNED, b"18446744073709551615", b"\xff" * 8),
        (FieldType.FLOAT, 0, b"0.1", struct.pack("<f", 0.1)),
        (FieldType.DOUBLE, 0, b"-1.5e300", struct.pack("<d", -1.5e300)),
        (FieldType.NEWDECIMAL, 0, b"-12.50", lenenc_str(b"-12.50")),
        (FieldType.VAR_STRING, 0, b"it's \\ \x00", lenenc_str(b"it's \\ \x00")),
        (FieldType.BLOB, 0, b"x" * 300, lenenc_str(b"x" * 300)),
        (FieldType.DATE, 0, b"2024-02-29", b"\x04" + struct.pack("<HBB", 2024, 2, 29)),
        (FieldType.DATE, 0, b"0000-00-00", b"\x00"),
        (FieldType.DATETIME, 0, b"2024-01-02 00:00:00", b"\x04" + struct.pack("<HBB", 2024, 1, 2)),
        (FieldType.DATETIME, 0, b"2024-01-02 03:04:05", b"\x07" + struct.pack("<HBBBBB", 2024, 1, 2, 3, 4, 5)),
        (FieldType.TIMESTAMP, 0, b"2024-01-02 03:04:05.000000", b"\x07" + struct.pack("<HBBBBB", 2024, 1, 2, 3, 4, 5)),
        (
            FieldType.DATETIME,
            0,
            b"1999-12-31 23:59:59.12",
            b"\x0b" + struct.pack("<HBBBBBI", 1999, 12, 31, 23, 59, 59, 120000),
        ),
        (FieldType.DATETIME, 0, b"0000-00-00 00:00:00", b"\x00"),
        (FieldType.TIME, 0, b"01:02:03", b"\x08" + struct.pack("<BIBBB", 0, 0, 1, 2, 3)),
        (FieldType.TIME, 0, b"-838:59:59", b"\x08" + struct.pack("<BIBBB", 1, 34, 22, 59, 59)),
        (FieldType.TIME, 0, b"-00:00:00.000001", b"\x0c" + struct.pack("<BIBBBI", 1, 0, 0, 0, 0, 1)),
        (FieldType.TIME, 0, b"00:00:00", b"\x00"),
    ],
)
def test_each_type_in_its_binary_form(field_type: int, flags: int, text: bytes, binary: bytes) -> None:
    assert binary_row([text], [column(field_type, flags)]) == b"\x00\x00" + binary


def test_nulls_are_in_the_bitmap_from_offset_two_and_take_no_value() -> None:
    columns = [column(FieldType.LONG)] * 7
    row = binary_row([None, b"1", None, b"2", b"3", b"4", None], columns)
    # bits 2, 4 and 8 (columns 0, 2 and 6): 0b00010100, then 0b00000001
    assert row == b"\x00\x14\x01" + struct.pack("<iiii", 1, 2, 3, 4)


def test_a_whole_binary_result_set_is_framed_like_a_servers() -> None:
    columns = [column(FieldType.LONGLONG), column(FieldType.VAR_STRING)]
    raw = binary_result_set_of(columns, [[b"7", b"a"], [None, b""]], status=2)
    packets = []
    while raw:
        length = int.from_bytes(raw[:3], "little")
        packets.append((raw[3], raw[4 : 4 + length]))
        raw = raw[4 + length :]
    assert [seq for seq, _ in packets] == [1, 2, 3, 4, 5, 6, 7]
    assert packets[0][1] == b"\x02"
    assert packets[3][1][:1] == b"\xfe" and packets[6][1][:1] == b"\xfe"  # EOF after the columns, and at the end
    assert packets[4][1] == b"\x00\x00" + struct.pack("<q", 7) + b"\x01a"
    assert packets[5][1] == b"\x00\x04" + b"\x00"
