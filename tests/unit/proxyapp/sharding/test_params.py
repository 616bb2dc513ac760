"""A COM_STMT_EXECUTE's parameters as SQL literals (proxyapp.sharding.params): every type as the client binds it, NULL,
long data, and the statement rendered, then planned like the text it stands for."""

from __future__ import annotations

import struct

import pytest

from proxyapp.mysql.constants import FieldType
from proxyapp.mysql.packets import lenenc_str
from proxyapp.sharding.params import ParamError, literals, long_data_values, render
from proxyapp.sharding.plan import plan
from proxyapp.sharding.shardmap import ShardMap

UNSIGNED = 0x80
TINY_BLOB = 0xF9


def execute(*params: tuple[int, bytes | None], flag: int = 0) -> bytes:
    """A COM_STMT_EXECUTE payload binding ``params`` ((type | unsigned << 8, value bytes or None for NULL))."""
    n = len(params)
    nulls = bytearray((n + 7) // 8)
    types = bytearray()
    values = bytearray()
    for i, (field_type, value) in enumerate(params):
        types += struct.pack("<H", field_type)
        if value is None:
            nulls[i // 8] |= 1 << (i % 8)
        else:
            values += value
    return b"\x17" + struct.pack("<IBI", 1, flag, 1) + bytes(nulls) + b"\x01" + bytes(types) + bytes(values)


def one(field_type: int, value: bytes | None, charset: str = "utf8mb4") -> str:
    """The literal of one parameter."""
    return literals(execute((field_type, value)), 1, {}, charset)[0]


@pytest.mark.parametrize(
    ("field_type", "value", "literal"),
    [
        (FieldType.TINY, struct.pack("<b", -128), "-128"),
        (FieldType.TINY | UNSIGNED << 8, struct.pack("<B", 255), "255"),
        (FieldType.SHORT, struct.pack("<h", -32768), "-32768"),
        (FieldType.SHORT | UNSIGNED << 8, struct.pack("<H", 65535), "65535"),
        (FieldType.YEAR, struct.pack("<h", 2024), "2024"),
        (FieldType.LONG, struct.pack("<i", -(2**31)), "-2147483648"),
        (FieldType.LONG | UNSIGNED << 8, struct.pack("<I", 2**32 - 1), "4294967295"),
        (FieldType.LONGLONG, struct.pack("<q", -(2**63)), "-9223372036854775808"),
        (FieldType.LONGLONG | UNSIGNED << 8, struct.pack("<Q", 2**64 - 1), "18446744073709551615"),
        (FieldType.DOUBLE, struct.pack("<d", 0.1), "0.1e0"),  # a DOUBLE literal, not the DECIMAL 0.1
        (FieldType.DOUBLE, struct.pack("<d", -1.5e300), "-1.5e+300"),
        (FieldType.FLOAT, struct.pack("<f", 0.5), "0.5e0"),
        (FieldType.NEWDECIMAL, lenenc_str(b"-12345.678900"), "-12345.678900"),
        (FieldType.DECIMAL, lenenc_str(b"1e3"), "1e3"),
        (FieldType.NEWDECIMAL, lenenc_str(b"1; DROP TABLE t"), "'1; DROP TABLE t'"),  # not a number: a string
        (FieldType.VAR_STRING, lenenc_str(b"plain"), "'plain'"),
        (FieldType.STRING, lenenc_str(b"it's"), "'it''s'"),
        (FieldType.VARCHAR, lenenc_str(b"a\x00b"), "'a\x00b'"),  # NUL needs no escape inside quotes
        (FieldType.VAR_STRING, lenenc_str(b"back\\slash'"), "_utf8mb4 X'6261636b5c736c61736827'"),
        (FieldType.VAR_STRING, lenenc_str("caf\u00e9".encode()), "'caf\u00e9'"),
        (FieldType.VAR_STRING, lenenc_str(b""), "''"),
        (FieldType.BLOB, lenenc_str(b"\x00\xff'\\"), "_binary X'00ff275c'"),
        (TINY_BLOB, lenenc_str(b""), "_binary X''"),
        (FieldType.DATE, b"\x04" + struct.pack("<HBB", 2024, 2, 29), "DATE'2024-02-29'"),
        (FieldType.DATE, b"\x00", "DATE'0000-00-00'"),
        (FieldType.DATETIME, b"\x04" + struct.pack("<HBB", 2024, 1, 2), "TIMESTAMP'2024-01-02 00:00:00'"),
        (FieldType.DATETIME, b"\x07" + struct.pack("<HBBBBB", 2024, 1, 2, 3, 4, 5), "TIMESTAMP'2024-01-02 03:04:05'"),
        (
            FieldType.TIMESTAMP,
            b"\x0b" + struct.pack("<HBBBBBI", 1999, 12, 31, 23, 59, 59, 120),
            "TIMESTAMP'1999-12-31 23:59:59.000120'",
        ),
        (FieldType.TIME, b"\x08" + struct.pack("<BIBBB", 0, 0, 1, 2, 3), "TIME'01:02:03'"),
        (FieldType.TIME, b"\x0c" + struct.pack("<BIBBBI", 1, 1, 1, 0, 0, 1), "TIME'-25:00:00.000001'"),
        (FieldType.TIME, b"\x08" + struct.pack("<BIBBB", 1, 34, 22, 59, 59), "TIME'-838:59:59'"),
        (FieldType.TIME, b"\x00", "TIME'00:00:00'"),
        (FieldType.NULL, None, "NULL"),
        (FieldType.VAR_STRING, None, "NULL"),  # the NULL bitmap, whatever the type
    ],
)
def test_each_type_is_the_literal_of_its_value(field_type: int, value: bytes | None, literal: str) -> None:
    assert one(field_type, value) == literal


def test_a_string_with_a_backslash_is_hex_in_the_connection_character_set() -> None:
    assert one(FieldType.VAR_STRING, lenenc_str(b"\xe9\\"), "latin1") == "_latin1 X'e95c'"
    assert one(FieldType.STRING, lenenc_str(b"\\"), "utf8mb4 COLLATE x") == "_binary X'5c'"  # not a name: binary


def test_bytes_that_are_not_utf8_come_back_unchanged_in_the_statement() -> None:
    sql = render("SELECT ?", [one(FieldType.VAR_STRING, lenenc_str(b"\xe9t\xe9"), "latin1")])
    assert sql.encode("utf-8", "surrogateescape") == b"SELECT '\xe9t\xe9'"


def test_several_parameters_with_nulls_and_long_data() -> None:
    payload = execute(
        (FieldType.LONGLONG, struct.pack("<q", 7)),
        (FieldType.VAR_STRING, None),
        (FieldType.BLOB, b""),  # sent by long data: no value here
        (FieldType.VAR_STRING, lenenc_str(b"x")),
        *[(FieldType.TINY, b"\x01")] * 5,
        (FieldType.NULL, None),  # the tenth: the bitmap's second byte
    )
    chunks = [b"\x18" + struct.pack("<IH", 1, 2) + b"ab", b"\x18" + struct.pack("<IH", 1, 2) + b"c"]
    values = literals(payload, 10, long_data_values(chunks), "utf8mb4")
    assert values == ["7", "NULL", "_binary X'616263'", "'x'", "1", "1", "1", "1", "1", "NULL"]


def test_a_string_sent_by_long_data_keeps_its_type() -> None:
    payload = execute((FieldType.STRING, b""))
    assert literals(payload, 1, long_data_values([b"\x18\x01\x00\x00\x00\x00\x00it's"]), "utf8mb4") == ["'it''s'"]


@pytest.mark.parametrize(
    "payload",
    [
        execute((FieldType.LONGLONG, b"\x01\x02")),  # cut short
        execute((FieldType.VAR_STRING, b"\x05ab")),
        execute((FieldType.DOUBLE, struct.pack("<d", float("nan")))),
        execute((FieldType.DOUBLE, struct.pack("<d", float("inf")))),
        execute((FieldType.VAR_STRING, b"\xfb")),  # the NULL length prefix: not a value
        b"\x17" + struct.pack("<IBI", 1, 0, 1) + b"\x00\x00" + struct.pack("<q", 1),  # types not bound
    ],
)
def test_a_parameter_block_that_cannot_be_read_is_the_clients_error(payload: bytes) -> None:
    with pytest.raises(ParamError):
        literals(payload, 1, {}, "utf8mb4")


def test_render_replaces_placeholders_not_question_marks_in_strings_or_comments() -> None:
    sql = "SELECT '?', `a?` /* ? */ FROM t WHERE a = ? AND b IN (?, ?) -- ?"
    assert render(sql, ["1", "'x'", "NULL"]) == (
        "SELECT '?', `a?` /* ? */ FROM t WHERE a = 1 AND b IN ('x', NULL) -- ?"
    )
    assert render("SELECT -?", ["-5"]) == "SELECT - -5"  # never a "--" comment
    with pytest.raises(ParamError):
        render("SELECT ?", ["1", "2"])


def test_the_rendered_statement_is_planned_like_its_text(shard_map: ShardMap) -> None:
    values = literals(execute((FieldType.LONGLONG, struct.pack("<q", 6))), 1, {}, "utf8mb4")
    found = plan(render("SELECT name FROM tb_Shop WHERE City_ID = ?", values), "shop", shard_map)
    assert found is not None and found.shards == frozenset({2})
    values = literals(
        execute((FieldType.LONG, struct.pack("<i", 1)), (FieldType.LONG, struct.pack("<i", 2))), 2, {}, ""
    )
    found = plan(render("INSERT INTO tb_Shop (City_ID) VALUES (?), (?)", values), "shop", shard_map)
    assert found is not None and dict(found.statements) == {
        1: "INSERT INTO tb_Shop (City_ID) VALUES (1)",
        2: "INSERT INTO tb_Shop (City_ID) VALUES (2)",
    }


def test_a_string_key_in_hex_is_planned_like_the_quoted_one(shard_map: ShardMap) -> None:
    for key in (b"back\\slash", b"plain", "caf\u00e9".encode()):
        escaped = key.decode().replace("\\", "\\\\")  # as a client writes it in a text statement
        quoted = plan(f"SELECT * FROM orders WHERE id = '{escaped}'", "shop", shard_map)
        values = literals(execute((FieldType.VAR_STRING, lenenc_str(key))), 1, {}, "utf8mb4")
        rendered = plan(render("SELECT * FROM orders WHERE id = ?", values), "shop", shard_map)
        assert quoted is not None and rendered is not None and not quoted.every
        assert rendered.shards == quoted.shards
    hexed = literals(execute((FieldType.VAR_STRING, lenenc_str(b"a\\b"))), 1, {}, "utf8mb4")[0]
    found = plan(f"INSERT INTO orders (id) VALUES ({hexed})", "shop", shard_map)
    assert found is not None and not found.refused
