"""PostgreSQL digests (issue 16): PostgreSQL's tokens (``tokenize(sql, PGSQL)``) and ``compute_pg_digest``'s
normalization of parameters, casts, dollar quotes, escape strings, quoted names and nested comments; hostile text."""

from __future__ import annotations

import random

import pytest

from proxyapp.sql.digest import (
    CACHEABLE_LENGTH,
    MAX_QUERY_LENGTH,
    Digest,
    _pg_digest,
    compute_digest,
    compute_pg_digest,
    digest_text,
)
from proxyapp.sql.lex import PGSQL, TokenKind, tokenize

_T = TokenKind


def pg_tokens(sql: str) -> list[tuple[str, str]]:
    tokens = tokenize(sql, PGSQL)
    return [(kind.name, text) for kind, text in zip(tokens.kinds, tokens.texts, strict=True)]


@pytest.mark.parametrize(
    ("sql", "tokens"),
    [
        ("SELECT $1::int", [("WORD", "SELECT"), ("PLACEHOLDER", "$1"), ("OPERATOR", "::"), ("WORD", "int")]),
        ("$12", [("PLACEHOLDER", "$12")]),
        ("$$a 'b' $x$ c$$", [("STRING", "$$a 'b' $x$ c$$")]),
        ("$fn$ x $$ y $fn$ z", [("STRING", "$fn$ x $$ y $fn$"), ("WORD", "z")]),
        ("$fn$ x $FN$ y $fn$", [("STRING", "$fn$ x $FN$ y $fn$")]),  # tags are case-sensitive
        ("$_1$x$_1$", [("STRING", "$_1$x$_1$")]),
        ("a$$b$$", [("WORD", "a$$b$$")]),  # '$' continues a name: no dollar quote there
        ("E'it\\'s' e'\\\\'", [("STRING", "E'it\\'s'"), ("STRING", "e'\\\\'")]),
        ("'a\\' 'b'", [("STRING", "'a\\'"), ("STRING", "'b'")]),  # no backslash escape in a standard string
        ("'it''s'", [("STRING", "'it''s'")]),
        ("N'x' U&'d\\0061t' u&'y'", [("STRING", "N'x'"), ("STRING", "U&'d\\0061t'"), ("STRING", "u&'y'")]),
        ("B'0101' x'1F'", [("NUMBER", "B'0101'"), ("NUMBER", "x'1F'")]),
        ('"Col ""x"""', [("QUOTED_IDENT", '"Col ""x"""')]),
        ('U&"d\\0061t"', [("QUOTED_IDENT", 'U&"d\\0061t"')]),
        (
            "1 1.5 .5 1. 1.5e10 2E-3 1_000 0x1F 0o17 0b1_01",
            [("NUMBER", n) for n in ["1", "1.5", ".5", "1.", "1.5e10", "2E-3", "1_000", "0x1F", "0o17", "0b1_01"]],
        ),
        ("a/* x /* y */ z */b", [("WORD", "a"), ("WORD", "b")]),
        ("a/*/b*/c", [("WORD", "a"), ("WORD", "c")]),
        ("a--b\nc", [("WORD", "a"), ("WORD", "c")]),
        (
            "j ? 'k' #> '{a}'",
            [("WORD", "j"), ("OPERATOR", "?"), ("STRING", "'k'"), ("OPERATOR", "#>"), ("STRING", "'{a}'")],
        ),
        ("@x", [("OPERATOR", "@"), ("WORD", "x")]),
        ("a;", [("WORD", "a"), ("SEMICOLON", ";")]),
    ],
)
def test_postgresql_tokens(sql: str, tokens: list[tuple[str, str]]) -> None:
    assert pg_tokens(sql) == tokens


def test_the_mysql_rules_stay_the_default() -> None:
    assert pg_tokens('"x"') == [("QUOTED_IDENT", '"x"')]
    assert tokenize('"x"').kinds == [_T.STRING]
    assert tokenize("# comment\nSELECT $1").texts == ["SELECT", "$1"]


@pytest.mark.parametrize(
    ("sql", "text"),
    [
        # parameters and casts
        ("SELECT $1::int", "SELECT ?::int"),
        ("SELECT * FROM t WHERE a = $1 AND b = $2", "SELECT * FROM t WHERE a = ? AND b = ?"),
        ("SELECT '2026-12-04'::date, 1::numeric(10, 2)", "SELECT ?::date,?::numeric(?,?)"),
        ('SELECT CAST($1 AS text), x::"MyType"', 'SELECT CAST(? AS text), x::"MyType"'),
        # strings of every kind
        ("SELECT $$it's$$, $body$ SELECT 1; $body$", "SELECT ?,?"),
        ("SELECT E'it\\'s', E'a\\\\', 'b\\'", "SELECT ?,?,?"),
        ("SELECT 'a\\', 'b'", "SELECT ?,?"),
        ("SELECT U&'d\\0061t' UESCAPE '!', N'x', B'01', X'1F'", "SELECT ? UESCAPE ?,?,?,?"),
        ("SELECT 1.5e10, -2, .5, 1_000, 0x1F", "SELECT ?,?,?,?,?"),
        # quoted names stay names
        ('SELECT "Name", "a""b" FROM "Order" WHERE "x" = \'x\'', 'SELECT "Name", "a""b" FROM "Order" WHERE "x" = ?'),
        # operators PostgreSQL has and MySQL does not read the same
        ("SELECT doc ? 'k', doc #> '{a,b}', doc @> $1", "SELECT doc ? ?, doc #> ?, doc @> ?"),
        # comments, nested ones too
        ("/* a /* b */ c */ SELECT 1 -- x", "SELECT ?"),
        ("SELECT/**/a--b\n", "SELECT a"),
        ("SELECT 1 /* unterminated /* nested */", "SELECT ?"),
        # lists and rows collapse as MySQL's do
        ("SELECT * FROM t WHERE id IN ($1, $2, $3)", "SELECT * FROM t WHERE id IN (?,...)"),
        ("SELECT * FROM t WHERE id IN (1,2,3)", "SELECT * FROM t WHERE id IN (?,...)"),
        ("INSERT INTO t VALUES ($1, $2), ($3, $4)", "INSERT INTO t VALUES (?,?),..."),
        ("SELECT * FROM t WHERE id = ANY($1::int[])", "SELECT * FROM t WHERE id = ANY(?::int[])"),
        # whitespace and trailing semicolons
        ("  SELECT\n 1 ;  ", "SELECT ?"),
        ("", ""),
    ],
)
def test_pg_normalization(sql: str, text: str) -> None:
    assert compute_pg_digest(sql).text == text


def test_same_shape_same_digest() -> None:
    variants = [
        "SELECT c FROM t WHERE id = $1",
        "SELECT c FROM t WHERE id = 42",
        "SELECT c FROM t WHERE id = -42",
        "SELECT c FROM t WHERE id = 'x'",
        "SELECT c FROM t WHERE id = E'\\x'",
        "SELECT c FROM t WHERE id = $q$x$q$",
        "SELECT c\nFROM t /* x /* y */ */ WHERE id = $7;",
    ]
    assert len({compute_pg_digest(sql) for sql in variants}) == 1
    assert compute_pg_digest("SELECT c FROM t WHERE id = $1::int") != compute_pg_digest(variants[0])


def test_hash_is_the_mysql_hash_of_the_same_text() -> None:
    sql = "SELECT c FROM sbtest1 WHERE id=4711"
    assert compute_pg_digest(sql) == compute_digest(sql)
    assert compute_pg_digest(sql).hash == "0x5EA8CC1FBF35BE09"  # test_digest's known value
    assert compute_pg_digest('SELECT "a"').hash != compute_digest('SELECT "a"').hash  # a name here, a string there


def test_digest_shape_and_max_length() -> None:
    digest = compute_pg_digest("SELECT $1, $2, $3 FROM a_table_with_a_long_name")
    assert isinstance(digest, Digest)
    short = compute_pg_digest("SELECT $1, $2, $3 FROM a_table_with_a_long_name", max_length=10)
    assert short.text == digest.text[:10] == "SELECT ?,?"
    assert short.hash != digest.hash


def test_cached_and_uncached_agree() -> None:
    short = "SELECT a FROM t WHERE b = $$x$$"
    long = "SELECT a FROM t WHERE b = $$" + "x" * CACHEABLE_LENGTH + "$$"
    assert compute_pg_digest(short) is compute_pg_digest(short)
    assert compute_pg_digest(long) == compute_pg_digest(short)
    assert compute_digest("SELECT 1") == compute_pg_digest("SELECT 1")  # each dialect its own cache, same answer


def test_bare_number_shortcut_matches_the_full_digest() -> None:
    """Text whose only literals are bare numbers is digested by its shape (numbers made 0): it must agree."""
    rng = random.Random(20261204)
    alphabet = "0123456789" * 3 + "abcxyzeE_.$?,() =<>*;:" + "٣é" + "'\"#/\\+-&"
    cases = ["SELECT c FROM t WHERE id=4978", "SELECT 1::int, $1, 1.5, t1, 0x1F, 1_000 LIMIT 10", "SELECT 0"]
    cases += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))) for _ in range(20000)]
    for sql in cases:
        assert compute_pg_digest(sql) == _pg_digest(sql, 2048), sql


# ------------------------------------------------------------------------------------------------ hostile text


def test_unterminated_dollar_quote_is_one_literal_to_the_end() -> None:
    sql = "SELECT $tag$ never closed $tag " + "x" * 10_000
    assert pg_tokens(sql) == [("WORD", "SELECT"), ("STRING", sql[7:])]
    assert compute_pg_digest(sql).text == "SELECT ?"


def test_unterminated_escape_string_is_one_literal_to_the_end() -> None:
    sql = "SELECT E'" + "\\'" * 10_000
    assert pg_tokens(sql) == [("WORD", "SELECT"), ("STRING", sql[7:])]
    assert compute_pg_digest(sql).text == "SELECT ?"


def test_a_megabyte_of_dollar_signs() -> None:
    sql = "$$" * (1 << 19)
    tokens = tokenize(sql, PGSQL)
    assert tokens.kinds == [_T.STRING] * (1 << 18) and set(tokens.texts) == {"$$$$"}
    assert digest_text(sql, PGSQL) == "?" * (MAX_QUERY_LENGTH // 4)
    assert compute_pg_digest(sql).text == "?" * 2048


def test_nested_comments_ten_thousand_deep() -> None:
    depth = 10_000
    sql = "SELECT 1 " + "/* " * depth + "*/ " * depth + "+ 2"
    assert pg_tokens(sql) == [("WORD", "SELECT"), ("NUMBER", "1"), ("OPERATOR", "+"), ("NUMBER", "2")]
    unclosed = "SELECT 1 " + "/* " * depth + "*/ " * (depth - 1) + "+ 2"
    assert pg_tokens(unclosed) == [("WORD", "SELECT"), ("NUMBER", "1")]
    assert digest_text(sql, PGSQL) == "SELECT ? + ?"
