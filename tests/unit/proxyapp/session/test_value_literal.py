"""The literal a user variable's value is replayed with on another connection (``state.value_literal``)."""

from __future__ import annotations

from proxyapp.mysql.constants import FieldType
from proxyapp.session.state import value_literal

UTF8MB4, LATIN1, BINARY = 45, 8, 63


def test_values_keep_their_type_and_character_set() -> None:
    assert value_literal(None, FieldType.VAR_STRING, UTF8MB4) == "NULL"
    assert value_literal(b"42", FieldType.LONGLONG, 63) == "42"
    assert value_literal(b"\xff", FieldType.VAR_STRING, BINARY) == "X'ff'"
    assert value_literal("é".encode(), FieldType.VAR_STRING, UTF8MB4) == "CONVERT(X'c3a9' USING utf8mb4)"
    assert value_literal(b"\xff", FieldType.VAR_STRING, LATIN1) == "CONVERT(X'ff' USING latin1)"


def test_bytes_that_are_not_utf8_in_a_utf8_value_are_kept() -> None:
    """``SET @u = '\\xfe''\\xff'`` in a utf8mb4 session: the server keeps the bytes, CONVERT would make each a '?';
    the literal sends them as they are (surrogateescape, as every statement the proxy sends)."""
    literal = value_literal(b"\xfe'\xff", FieldType.VAR_STRING, UTF8MB4)
    assert literal == "_utf8mb4'\udcfe''\udcff'"
    assert literal.encode("utf-8", "surrogateescape") == b"_utf8mb4'\xfe''\xff'"
    # A backslash reads as sql_mode says: such a value keeps the hex form.
    assert value_literal(b"\\\xff", FieldType.VAR_STRING, UTF8MB4) == "CONVERT(X'5cff' USING utf8mb4)"
