"""The analysis cache (``proxyapp.sql.analysis``): a query's statements and digest, kept per shape, are exactly what
``scan`` and ``compute_digest`` say of that query, whichever query of the shape came first."""

from __future__ import annotations

import random

import pytest

from proxyapp.sql.analysis import analyze
from proxyapp.sql.digest import compute_digest, simple_shape
from proxyapp.sql.scan import Kind, scan

HEADS = ("SELECT", "select", "Select", "INSERT INTO t VALUES", "UPDATE t SET", "DELETE FROM t", "REPLACE t",
         "SET", "WITH x AS (SELECT 1)", "  SELECT", "SELECT1", "DO", "")  # fmt: skip
PIECES = ("id = {n}", "t{n}", "c IN ({n}, {n})", "FOR UPDATE", "@x", "@@autocommit", ";", "LOCK IN SHARE MODE",
          "INTO @v", "LAST_INSERT_ID()", "LAST_INSERT_ID({n})", "{n}.{n}", "x{n}y", "'s{n}'", "-{n}", "1e{n}",
          "ROW_COUNT()", "foR", "nextval(s)", "FOUND_ROWS()", "SQL_CALC_FOUND_ROWS", "名前", "٣{n}", "ﬁ", "$1",
          "?{n}", ",", "(", ")", "=", "autocommit = {n}", "/* c{n} */", "# c\n", "`q{n}`", "\"d{n}\"")  # fmt: skip


def _query(rng: random.Random, template: list[str]) -> str:
    return (
        " ".join(template).format_map({"n": rng.randint(0, 99999)})
        if "{n}" in "".join(template)
        else " ".join(template)
    )


def _template(rng: random.Random) -> list[str]:
    return [rng.choice(HEADS), *(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))]


def _numbers(rng: random.Random, template: list[str]) -> str:
    return " ".join(piece.replace("{n}", str(rng.randint(0, 99999))) for piece in template)


def test_every_query_of_a_shape_gets_its_own_statements_and_digest() -> None:
    """2,000 templates, each filled with three sets of numbers: each query's analysis equals scan's and
    compute_digest's, though the first query of its shape filled the cache."""
    rng = random.Random(11)
    shared = 0
    for _ in range(2000):
        template = _template(rng)
        queries = [_numbers(rng, template) for _ in range(3)]
        for sql in queries:
            statements, digest, commented = analyze(sql, 2048)
            assert statements == scan(sql), sql
            assert digest == compute_digest(sql, 2048), sql
            assert commented or "/*" not in sql, sql  # a comment is never missed
        shapes = {simple_shape(sql) for sql in queries}
        shared += len(shapes) == 1 and None not in shapes and len(set(queries)) > 1
    assert shared > 200  # many templates made different queries of one shape, which hit the cache


def test_the_fast_path_answers_a_repeated_point_select_from_the_cache() -> None:
    first, first_digest, commented = analyze("SELECT c FROM sbtest1 WHERE id=17", 2048)
    second, second_digest, _ = analyze("SELECT c FROM sbtest1 WHERE id=4242", 2048)
    assert not commented
    assert first == second and first[0] is second[0] and first is not second  # one shared Statement, fresh lists
    assert first[0].kind is Kind.SELECT and first[0].is_read
    assert first_digest is second_digest
    assert first_digest.text == "SELECT c FROM sbtest1 WHERE id=?"


def test_statements_that_hold_their_numbers_are_scanned_each_time() -> None:
    """SET's values are the statement's own: two queries of one shape keep their own values."""
    one, _, _ = analyze("SET wait_timeout = 100", 2048)
    two, _, _ = analyze("SET wait_timeout = 200", 2048)
    assert one != two
    assert analyze("", 2048)[0] == []


@pytest.mark.parametrize(
    ("sql", "commented"),
    [
        ("SELECT c FROM sbtest1 WHERE id=17", False),
        ("/* hot_key=17 */ UPDATE t SET v=1 WHERE id=17", True),
        ("SELECT 1 /* trailing */", True),
        ("SELECT '/*' AS text", True),  # a quote: no simple shape, so the rules look (and find no annotation)
        ("SELECT 'plain' AS text", False),
    ],
)
def test_a_comment_the_rules_may_read_is_told(sql: str, commented: bool) -> None:
    assert analyze(sql, 2048)[2] is commented
