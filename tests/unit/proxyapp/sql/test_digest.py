"""Query digests: normalization of literals, comments, whitespace and lists; the hash; the cache."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys

import pytest

from devstack.stack import REPO
from proxyapp.sql.digest import CACHEABLE_LENGTH, MAX_QUERY_LENGTH, Digest, compute_digest, digest_text, simple_shape


@pytest.mark.parametrize(
    ("sql", "text"),
    [
        # numbers of every form
        ("SELECT c FROM sbtest1 WHERE id=4711", "SELECT c FROM sbtest1 WHERE id=?"),
        ("SELECT 1, 2.5, .5, 1e10, 1.5E-3, 0x1F, X'AB', x'', 0b101, b'01'", "SELECT ?,?,?,?,?,?,?,?,?,?"),
        ("SELECT * FROM t1 WHERE c2 = 3", "SELECT * FROM t1 WHERE c2 = ?"),
        ("SELECT 1st_col FROM t", "SELECT 1st_col FROM t"),
        ("SELECT a FROM db1.t2", "SELECT a FROM db1.t2"),
        # strings: quotes, escapes, doubled quotes, introducers, things that look like SQL inside
        ('SELECT \'it\'\'s\', \'it\\\'s\', "say \\"hi\\"", "a""b"', "SELECT ?,?,?,?"),
        ("SELECT * FROM t WHERE a = 'x -- y' AND b = '/* z */' AND c = ';' AND d = '?'", None),
        ("SELECT _utf8mb4'abc', N'xyz', _latin1 'q'", "SELECT ?,?, _latin1 ?"),
        ("SELECT 'ends with backslash \\\\'", "SELECT ?"),
        ("SELECT 'unterminated", "SELECT ?"),
        # NULL, TRUE, identifiers and placeholders stay
        (
            "SELECT NULL, TRUE FROM `weird 'name'` WHERE x IS NULL",
            "SELECT NULL, TRUE FROM `weird 'name'` WHERE x IS NULL",
        ),
        ("SELECT * FROM t WHERE a = ? AND b = ?", "SELECT * FROM t WHERE a = ? AND b = ?"),
        # signs: part of the literal where they can't be arithmetic
        ("SELECT * FROM t WHERE a = -5 AND b > +3", "SELECT * FROM t WHERE a = ? AND b > ?"),
        ("SELECT -1, 2-1, (3)-1, a -1, a - 1", "SELECT ?,?-?, (?)-?, a -?, a - ?"),
        ("SELECT 1--1", "SELECT ?-?"),
        ("UPDATE t SET a=a+1 WHERE id=-7", "UPDATE t SET a=a+? WHERE id=?"),
        # comments go, executable comments' content stays
        ("/* hostgroup=2 */ SELECT 1", "SELECT ?"),
        ("SELECT /* hint */ a FROM t -- trailing\n WHERE b = 1 # more\n", "SELECT a FROM t WHERE b = ?"),
        ("SELECT/**/a", "SELECT a"),
        ("SELECT /*!40001 SQL_NO_CACHE */ a FROM t", "SELECT SQL_NO_CACHE a FROM t"),
        ("/*!40101 SET NAMES utf8mb4 */", "SET NAMES utf8mb4"),
        ("/*M!100100 SET x = 1 */", "SET x = ?"),
        # whitespace
        ("  SELECT\ta\n\n  FROM\r\n t  ", "SELECT a FROM t"),
        ("SELECT 1;", "SELECT ?"),
        ("SELECT 1 ;  ", "SELECT ?"),
        ("SELECT 1; SELECT 'two'", "SELECT ?; SELECT ?"),
        ("", ""),
        ("-- only a comment", ""),
        # unicode is kept as written
        ("SELECT ünïcode FROM t WHERE name = 'Zoë'", "SELECT ünïcode FROM t WHERE name = ?"),
    ],
)
def test_normalization(sql: str, text: str | None) -> None:
    expected = text if text is not None else "SELECT * FROM t WHERE a = ? AND b = ? AND c = ? AND d = ?"
    assert compute_digest(sql).text == expected


@pytest.mark.parametrize(
    ("sql", "text"),
    [
        ("SELECT * FROM t WHERE id IN (1,2,3)", "SELECT * FROM t WHERE id IN (?,...)"),
        ("SELECT * FROM t WHERE id IN ( 1 , 2 , 3 )", "SELECT * FROM t WHERE id IN (?,...)"),
        ("SELECT * FROM t WHERE id in('a', 'b')", "SELECT * FROM t WHERE id in(?,...)"),
        ("SELECT * FROM t WHERE id NOT IN (-1, 2)", "SELECT * FROM t WHERE id NOT IN (?,...)"),
        ("SELECT * FROM t WHERE id IN (?, ?, ?)", "SELECT * FROM t WHERE id IN (?,...)"),
        ("SELECT * FROM t WHERE id IN (7)", "SELECT * FROM t WHERE id IN (?)"),
        ("SELECT * FROM t WHERE id IN (1, NULL)", "SELECT * FROM t WHERE id IN (?, NULL)"),
        ("SELECT * FROM t WHERE a IN (1,2) AND b IN (3,4,5)", "SELECT * FROM t WHERE a IN (?,...) AND b IN (?,...)"),
        ("SELECT * FROM a JOIN (SELECT 1, 2) x", "SELECT * FROM a JOIN (SELECT ?,?) x"),
        ("SELECT MIN(1, 2)", "SELECT MIN(?,?)"),
    ],
)
def test_in_lists_collapse(sql: str, text: str) -> None:
    assert compute_digest(sql).text == text


@pytest.mark.parametrize(
    ("sql", "text"),
    [
        ("INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y'), (3, 'z')", "INSERT INTO t (a, b) VALUES (?,?),..."),
        ("INSERT INTO t VALUES(1,2),(3,4)", "INSERT INTO t VALUES(?,?),..."),
        ("insert into t values (1) , (2)", "insert into t values (?),..."),
        ("INSERT INTO t VALUE (1, 2), (3, 4)", "INSERT INTO t VALUE (?,?),..."),
        ("INSERT INTO t VALUES (1, 2)", "INSERT INTO t VALUES (?,?)"),
        ("INSERT INTO t VALUES (1, NOW()), (2, NOW())", "INSERT INTO t VALUES (?, NOW()), (?, NOW())"),
        (
            "INSERT INTO t VALUES (1,2),(3,4) ON DUPLICATE KEY UPDATE b = VALUES(b)",
            "INSERT INTO t VALUES (?,?),... ON DUPLICATE KEY UPDATE b = VALUES(b)",
        ),
    ],
)
def test_values_rows_collapse(sql: str, text: str) -> None:
    assert compute_digest(sql).text == text


def test_same_shape_same_digest() -> None:
    variants = [
        "SELECT c FROM sbtest1 WHERE id=1",
        "SELECT c FROM sbtest1 WHERE id=99999",
        "SELECT c FROM sbtest1 WHERE id=-3",
        "SELECT c FROM sbtest1 WHERE id='abc'",
        "SELECT  c\nFROM sbtest1 /* x */ WHERE id=0x10",
        "/* hostgroup=1 */ SELECT c FROM sbtest1 WHERE id=1;",
    ]
    digests = {compute_digest(sql) for sql in variants}
    assert len(digests) == 1
    assert compute_digest("SELECT c FROM sbtest1 WHERE k=1") not in digests
    assert compute_digest("select c from sbtest1 where id=1") not in digests  # case is kept


def test_hash_format_and_known_value() -> None:
    digest = compute_digest("SELECT c FROM sbtest1 WHERE id=4711")
    assert isinstance(digest, Digest)
    assert re.fullmatch(r"0x[0-9A-F]{16}", digest.hash)
    assert digest.hash == "0x5EA8CC1FBF35BE09"  # computed once; must never change
    assert compute_digest("SELECT c FROM sbtest1 WHERE id=1").hash == "0x5EA8CC1FBF35BE09"
    assert compute_digest("SELECT c FROM sbtest1 WHERE id=4711 AND 1").hash != digest.hash


def test_hash_is_stable_across_processes() -> None:
    queries = ["SELECT c FROM sbtest1 WHERE id=4711", "INSERT INTO t VALUES (1,'a'),(2,'b')", "SELECT 'ü'"]
    code = (
        "import sys; from proxyapp.sql.digest import compute_digest; "
        "print('\\n'.join(compute_digest(q).hash for q in sys.argv[1:]))"
    )
    hashes = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        run = subprocess.run(
            [sys.executable, "-c", code, *queries], env=env, capture_output=True, text=True, check=True
        )
        hashes.append(run.stdout.split())
    assert hashes[0] == hashes[1] == [compute_digest(q).hash for q in queries]


def test_empty_query_has_a_hash() -> None:
    digest = compute_digest("")
    assert digest.text == ""
    assert re.fullmatch(r"0x[0-9A-F]{16}", digest.hash)


def test_max_length_cuts_text_and_hash_follows() -> None:
    sql = "SELECT " + ", ".join(f"col{i}" for i in range(100)) + " FROM t"
    full = compute_digest(sql)
    short = compute_digest(sql, max_length=20)
    assert short.text == full.text[:20] == "SELECT col0, col1, c"
    assert short.hash != full.hash
    assert short == compute_digest(full.text[:20] + "ol2", max_length=20)


def test_long_bulk_insert_collapses_even_when_cut() -> None:
    rows = ", ".join(f"({i}, 'value number {i}')" for i in range(5000))
    sql = f"INSERT INTO t (a, b) VALUES {rows}"
    assert len(sql) > MAX_QUERY_LENGTH
    assert compute_digest(sql).text == "INSERT INTO t (a, b) VALUES (?,?),..."
    fewer = f"INSERT INTO t (a, b) VALUES {', '.join(f'({i}, {i})' for i in range(4))}"
    assert compute_digest(fewer) == compute_digest(sql)


def test_cached_and_uncached_agree() -> None:
    short = "SELECT a FROM t WHERE b = 'x'"
    long = "SELECT a FROM t WHERE b = '" + "x" * CACHEABLE_LENGTH + "'"
    assert compute_digest(short) is compute_digest(short)  # served from the cache
    assert compute_digest(long) == compute_digest(short)
    assert compute_digest(long) is not compute_digest(long)  # too long to keep
    assert compute_digest(short, 10) == Digest(compute_digest("SELECT a F", 2048).hash, "SELECT a F")


def test_digest_text_is_uncut() -> None:
    sql = "SELECT " + "a" * 5000
    assert digest_text(sql) == sql
    assert len(compute_digest(sql).text) == 2048


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT c FROM sbtest1 WHERE id=4711",
        "SELECT c FROM sbtest1 WHERE id BETWEEN 10 AND 109 ORDER BY c",
        "SELECT 0x1F, t1.c2, a.b3 FROM t1, a WHERE a IN (1,2,3) LIMIT 5",
        "INSERT INTO t VALUES (1,2.5,3),(4,5,6)",
        "UPDATE t SET k=k WHERE id=7 AND x1=2",
        "SELECT $1, ?, 1.5, 12 FROM t",
    ],
)
def test_simple_query_shortcut_matches_the_full_digest(sql: str) -> None:
    """Queries whose only literals are bare numbers take a shortcut; it must agree with the tokenizer."""
    from proxyapp.sql.digest import _digest

    assert compute_digest(sql) == _digest(sql, 2048)


# What simple_shape must do, as the two regular expressions it replaced said it.
_NOT_SIMPLE_RE = re.compile(r"""['"`#/\\+\-]|\d[eE]""")
_BARE_NUMBER_RE = re.compile(r"(?<![\w.$?])\d+(?:\.\d+)?(?![\w.])")


def test_simple_shape_agrees_with_its_regular_expression_definition() -> None:
    rng = random.Random(20261203)
    alphabet = "0123456789" * 3 + "abcxyzeE_.$?,() =<>*;" + "٣²é" + "'\"`#/\\+-"
    cases = ["SELECT c FROM sbtest3 WHERE id=4978", "SELECT 1.5, 1.5.3, 1., .5, t1, 0x1F, 12e3, 3 LIMIT 10", ""]
    cases += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))) for _ in range(20000)]
    ascii_only = alphabet.replace("٣²é", "")  # the table-driven path over bytes
    cases += ["".join(rng.choice(ascii_only) for _ in range(rng.randint(1, 24))) for _ in range(20000)]
    for sql in cases:
        expected = None if _NOT_SIMPLE_RE.search(sql) else _BARE_NUMBER_RE.sub("?", sql)
        assert simple_shape(sql) == expected, sql
