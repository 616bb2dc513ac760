"""Constant expressions folded as the server stores them: for each expression, the value ``proxyapp.sql.constant``
computes (what the sharding planner places an INSERT's key by) is the one the server stores in a BIGINT and in a
VARCHAR column on a direct connection; an expression it does not fold is one the planner refuses, never a guess."""

from __future__ import annotations

from collections.abc import Callable

import pymysql

from proxyapp.sql.constant import NotConstant, constant
from proxyapp.sql.lex import tokenize

EXPRESSIONS = [
    "(37)", "+43", "- -4", "-(5)", "2 + 3", "2*-3", "(2 + 3) * 4", "2 + 3 * 4", "7 DIV 2", "-7 DIV 2", "-7 % 3",
    "7 MOD -3", "0x7", "0x41", "0x7 + 1", "b'101'", "b'1000001'", "0b11", "X'4142'", "((('k')))", "_utf8mb4'k'",
    "9223372036854775807 + 0", "-9223372036854775807 - 1", "10 - 3 - 2", "(1)+(2)",
]  # fmt: skip
#: Expressions the fold leaves to the server: each is NotConstant in both kinds of column.
NOT_FOLDED = ["1.5", "1e3", "'3' + 4", "1 / 2", "7 DIV 0", "NOW()", "9223372036854775807 + 1", "0xFFFFFFFFFFFFFFFF + 0"]


def test_constants_fold_as_the_server_stores_them(primary_conn: Callable[..., pymysql.Connection]) -> None:
    checked = 0
    with primary_conn(charset="utf8mb4", database="test") as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
        cur.execute("CREATE TEMPORARY TABLE folded (n BIGINT, s VARCHAR(40))")
        for text in EXPRESSIONS:
            tokens = tokenize(text)
            for column, strings in (("n", False), ("s", True)):
                try:
                    value = constant(tokens, 0, len(tokens), strings)
                except NotConstant:
                    continue  # the planner refuses it: the server's value is not checked
                if isinstance(value, str) and not strings:
                    continue  # a string for an integer key: the algorithm reads it as MariaDB compares (config)
                cur.execute("DELETE FROM folded")
                cur.execute(f"INSERT INTO folded ({column}) VALUES ({text})")
                cur.execute(f"SELECT {column} FROM folded")
                (stored,) = cur.fetchone()
                expected = str(value) if strings else value
                assert stored == expected, (text, column, stored, value)
                checked += 1
    assert checked >= 45


def test_what_is_not_folded_is_refused() -> None:
    for text in NOT_FOLDED:
        tokens = tokenize(text)
        for strings in (False, True):
            try:
                constant(tokens, 0, len(tokens), strings)
            except NotConstant:
                continue
            raise AssertionError(f"{text} folded")
