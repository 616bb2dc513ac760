"""The lexer under the SQL modes that change MySQL's lexical rules, and string literals decoded as MariaDB decodes
them (proxyapp.sql.lex: mysql_dialect, unquote). tests/live/proxyapp/sql/test_literals.py asks the server."""

from __future__ import annotations

import pytest

from proxyapp.sql.lex import MYSQL, TokenKind, mysql_dialect, tokenize, unquote


@pytest.mark.parametrize(
    ("literal", "value"),
    [
        (r"'a\_b'", "a\\_b"),  # outside LIKE \_ and \% keep their backslash
        (r"'50\%'", "50\\%"),
        (r"'x\y'", "xy"),  # any other \c is c
        (r"'\0\Z\b\n\r\t'", "\0\x1a\b\n\r\t"),
        (r"'\z\B\N'", "zBN"),  # only \Z and the lowercase controls are special
        (r"'\\'", "\\"),
        (r"'it''s'", "it's"),
        (r"'a\'b'", "a'b"),
        (r"'a\\''b'", "a\\'b"),  # left to right: an escaped backslash, then a doubled quote
        (r'"a\"b"', 'a"b'),
        ('"a""b"', 'a"b'),
        ("`a``b`", "a`b"),
        (r"`a\b`", "a\\b"),  # no escapes in names
    ],
)
def test_strings_decode_as_mariadb_reads_them(literal: str, value: str) -> None:
    assert unquote(literal) == value


@pytest.mark.parametrize(
    ("literal", "value"),
    [(r"'x\y'", "x\\y"), (r"'a\_b'", "a\\_b"), ("'it''s'", "it's"), (r"'\0'", "\\0"), (r'"a\"', "a\\")],
)
def test_without_backslash_escapes_a_backslash_is_itself(literal: str, value: str) -> None:
    assert unquote(literal, backslash_escapes=False) == value


def test_no_backslash_escapes_ends_a_string_at_its_quote() -> None:
    sql = r"SELECT 'x\', k FROM t WHERE k = 'y'"
    tokens = tokenize(sql, mysql_dialect(False, True))
    assert tokens.texts == ["SELECT", r"'x\'", ",", "k", "FROM", "t", "WHERE", "k", "=", "'y'"]
    assert not tokens.backslash_escapes
    assert tokenize(sql).texts[1] == r"'x\', k FROM t WHERE k = '"  # by default the backslash escapes the quote


def test_ansi_quotes_make_double_quotes_names() -> None:
    tokens = tokenize('SELECT "k", \'v\' FROM "t"', mysql_dialect(True, False))
    assert tokens.kinds[1] is TokenKind.QUOTED_IDENT
    assert tokens.kinds[3] is TokenKind.STRING
    assert tokens.kinds[5] is TokenKind.QUOTED_IDENT
    assert tokenize('SELECT "k"').kinds[1] is TokenKind.STRING


def test_the_default_modes_are_the_default_dialect() -> None:
    assert mysql_dialect(False, False) is MYSQL
    both = mysql_dialect(True, True)
    assert tokenize(r'SELECT "a\" FROM t', both).kinds[1] is TokenKind.QUOTED_IDENT
    assert tokenize(r"SELECT 'a\' FROM t", both).texts[1] == r"'a\'"
