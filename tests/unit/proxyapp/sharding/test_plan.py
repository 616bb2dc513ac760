"""The plan of a statement on sharded tables (proxyapp.sharding.plan), table-driven: the shards each statement must
reach, the scatters, and the refusals, each with its reason. Amoeba's tb_Shop on 4 shards by City_ID mod 4, a
global table of cities, and an orders table sharded by hash in another group. Each statement is planned cold (its
shape analyzed) and warm (its shape's cached template finished), and both plans must agree."""

from __future__ import annotations

import pytest

from proxyapp.sharding import plan as planner
from proxyapp.sharding.plan import Plan
from proxyapp.sharding.shardmap import ShardMap
from proxyapp.sql.lex import MYSQL, Dialect, mysql_dialect

EVERY = frozenset(range(4))


def plan(sql: str, schema: str | None, shard_map: ShardMap) -> Plan | None:
    """The plan of ``sql``, made cold and then warm: the two agree."""
    shard_map.plans.clear()
    cold = planner.plan(sql, schema, shard_map)
    assert planner.plan(sql, schema, shard_map) == cold
    return cold


@pytest.mark.parametrize(
    ("sql", "shards", "every", "writes"),
    [
        ("SELECT * FROM tb_Shop WHERE City_ID = 5", {1}, False, False),
        ("select * from shop.TB_SHOP where city_id=6", {2}, False, False),
        ("SELECT * FROM `tb_Shop` s WHERE s.City_ID = 7 AND name = 'x'", {3}, False, False),
        ("SELECT * FROM tb_Shop AS s WHERE name = 'x' AND (s.city_id = 4)", {0}, False, False),
        ("SELECT * FROM tb_Shop WHERE 9 = City_ID", {1}, False, False),
        ("SELECT * FROM tb_Shop WHERE City_ID IN (1, 2, 5)", {1, 2}, False, False),
        ("SELECT * FROM tb_Shop WHERE City_ID = '10'", {2}, False, False),
        ("SELECT * FROM tb_Shop WHERE City_ID = -3", {1}, False, False),
        ("SELECT * FROM tb_Shop WHERE City_ID BETWEEN 1 AND 3 AND City_ID = 2", {2}, False, False),
        ("SELECT * FROM tb_Shop WHERE City_ID IN (1, 2) AND City_ID IN (2, 3)", {2}, False, False),
        ("SELECT * FROM tb_Shop WHERE City_ID = 1 AND City_ID = 2", {1}, False, False),  # no row: any shard
        ("SELECT * FROM tb_Shop WHERE City_ID = 1 FOR UPDATE", {1}, False, False),
        ("SELECT * FROM tb_Shop WHERE City_ID = 1 ORDER BY name LIMIT 3", {1}, False, False),
        ("SELECT * FROM tb_Shop s JOIN cities c ON c.id = s.City_ID WHERE s.City_ID = 3", {3}, False, False),
        # An outer join keeping a global table's rows on one shard answers as one server: the key's WHERE drops
        # the NULL-extended rows; one keeping the sharded table's rows runs on every shard.
        ("SELECT * FROM cities c LEFT JOIN tb_Shop s ON s.City_ID = c.id WHERE s.City_ID = 3", {3}, False, False),
        ("SELECT * FROM tb_Shop s LEFT JOIN cities c ON c.id = s.City_ID", EVERY, True, False),
        ("SELECT * FROM cities c RIGHT JOIN tb_Shop s ON c.id = s.City_ID", EVERY, True, False),
        ("SELECT LEFT(c.name, 1) FROM tb_Shop s JOIN cities c ON c.id = s.City_ID", EVERY, True, False),
        # Nothing narrows these: every shard (always correct).
        ("SELECT * FROM tb_Shop", EVERY, True, False),
        ("SELECT * FROM tb_Shop WHERE City_ID = 1 OR City_ID = 2", EVERY, True, False),
        ("SELECT * FROM tb_Shop WHERE City_ID > 3", EVERY, True, False),
        ("SELECT * FROM tb_Shop WHERE City_ID = 1 + 1", EVERY, True, False),
        ("SELECT * FROM tb_Shop WHERE City_ID = ?", EVERY, True, False),
        ("SELECT * FROM tb_Shop WHERE other.City_ID = 1", EVERY, True, False),
        ("SELECT * FROM tb_Shop WHERE City_ID = 'abc'", EVERY, True, False),  # as MySQL compares it: 0, maybe
        # Writes.
        ("UPDATE tb_Shop SET name = 'n' WHERE City_ID = 6", {2}, False, True),
        ("DELETE FROM tb_Shop WHERE City_ID IN (3, 7)", {3}, False, True),
        ("DELETE FROM tb_Shop", EVERY, True, True),
        ("INSERT INTO tb_Shop (City_ID, name) VALUES (5, 'a')", {1}, False, True),
        ("INSERT INTO tb_Shop (name, City_ID) VALUES ('a', 5), ('b', 6), (CONCAT('c', 'd'), 9)", {1, 2}, False, True),
        ("REPLACE INTO shop.tb_Shop (City_ID) VALUE (8)", {0}, False, True),
        ("INSERT INTO tb_Shop (City_ID) VALUES (LAST_INSERT_ID(5)), (6)", {1, 2}, False, True),  # a sequence's 5
        ("INSERT INTO tb_Shop (City_ID, n) VALUES (4, 1) ON DUPLICATE KEY UPDATE n = n + 1", {0}, False, True),
        # Subqueries reading only global tables: each shard reads its own copy.
        ("SELECT * FROM tb_Shop WHERE City_ID IN (SELECT id FROM cities)", EVERY, True, False),
        (
            "SELECT s.*, (SELECT name FROM cities c WHERE c.id = s.City_ID) AS cn FROM tb_Shop s ORDER BY cn",
            EVERY,
            True,
            False,
        ),
        (
            "SELECT * FROM tb_Shop WHERE City_ID = 5 AND name IN (SELECT name FROM cities WHERE City_ID = 6)",
            {1},
            False,
            False,
        ),
        ("SELECT * FROM (SELECT id FROM cities) d JOIN tb_Shop s ON s.City_ID = d.id", EVERY, True, False),
        # Keys written as constant expressions, folded as the server stores them (proxyapp.sql.constant).
        ("INSERT INTO tb_Shop (City_ID) VALUES ((37)), (+43), (0x7), (2 + 3)", {1, 3}, False, True),
        ("INSERT INTO tb_Shop (City_ID, name) VALUES (-(-6), 'a'), (b'110', 'b'), (13 DIV 2, 'c')", {2}, False, True),
        ("DELETE s FROM tb_Shop s WHERE s.City_ID = 5", {1}, False, True),  # a multi-table DELETE's target list
        ("DELETE s FROM tb_Shop AS s JOIN visits v ON v.city = s.City_ID WHERE s.City_ID = 2", {2}, False, True),
        # The verbs' modifiers, and INSERT without INTO (MariaDB allows it).
        ("INSERT tb_Shop (City_ID) VALUES (5)", {1}, False, True),
        ("REPLACE LOW_PRIORITY tb_Shop (City_ID) VALUES (6), (7)", {2, 3}, False, True),
        ("INSERT HIGH_PRIORITY IGNORE INTO tb_Shop (City_ID) VALUES (4)", {0}, False, True),
        ("UPDATE LOW_PRIORITY IGNORE tb_Shop SET n = 1 WHERE City_ID = 5", {1}, False, True),
        ("UPDATE IGNORE tb_Shop SET n = 1", EVERY, True, True),
        ("DELETE LOW_PRIORITY QUICK IGNORE FROM tb_Shop WHERE City_ID = 6", {2}, False, True),
        # A statement in parentheses, and conditions in parentheses.
        ("(SELECT * FROM tb_Shop WHERE City_ID = 5)", {1}, False, False),
        ("((SELECT * FROM tb_Shop ORDER BY name LIMIT 2))", EVERY, True, False),
        ("SELECT * FROM tb_Shop WHERE ((City_ID = 6 AND n > 1)) AND name = 'x'", {2}, False, False),
        ("SELECT * FROM tb_Shop WHERE (City_ID = 6 OR n > 1) AND name = 'x'", EVERY, True, False),
        (
            "SELECT * FROM tb_Shop s JOIN visits v ON (v.city = s.City_ID AND v.n > 1) WHERE v.city = 7",
            {3},
            False,
            False,
        ),
        ("SELECT * FROM tb_Shop s STRAIGHT_JOIN visits v ON v.city = s.City_ID", EVERY, True, False),
        ("SELECT STRAIGHT_JOIN name FROM tb_Shop WHERE City_ID = 5", {1}, False, False),
        # Global tables: read from one shard, written to all.
        ("SELECT * FROM cities WHERE id = 1", {0}, False, False),
        ("INSERT INTO cities (id, name) VALUES (1, 'x')", EVERY, True, True),
        ("UPDATE cities SET name = 'y'", EVERY, True, True),
        # Co-located joins: tables of one rule joined on their keys (an inner join's WHERE counts).
        ("SELECT * FROM tb_Shop s JOIN visits v ON v.city = s.City_ID WHERE s.City_ID = 5", {1}, False, False),
        ("SELECT * FROM tb_Shop s JOIN visits v ON v.city = s.City_ID WHERE v.city = 6", {2}, False, False),
        ("SELECT * FROM tb_Shop s LEFT JOIN visits v ON s.City_ID = v.city AND v.n > 1", EVERY, True, False),
        ("SELECT * FROM tb_Shop a, visits v WHERE a.City_ID = v.city AND a.City_ID = 3", {3}, False, False),
        ("SELECT * FROM tb_Shop a JOIN tb_Shop b ON a.City_ID = b.City_ID", EVERY, True, False),
        # DDL: every shard.
        ("ALTER TABLE tb_Shop ADD COLUMN x int", EVERY, True, True),
        ("TRUNCATE TABLE tb_Shop", EVERY, True, True),
        ("DROP TABLE IF EXISTS tb_Shop", EVERY, True, True),
        ("CREATE TABLE IF NOT EXISTS shop.tb_Shop (City_ID int)", EVERY, True, True),
    ],
)
def test_the_shards_a_statement_reaches(
    shard_map: ShardMap, sql: str, shards: set[int], every: bool, writes: bool
) -> None:
    found = plan(sql, "shop", shard_map)
    assert found is not None and found.refused == ""
    assert (set(found.shards), found.every, found.writes) == (set(shards), every, writes)


@pytest.mark.parametrize(
    ("sql", "schema"),
    [
        ("SELECT * FROM other_table WHERE City_ID = 1", "shop"),
        ("SELECT * FROM tb_Shop", "elsewhere"),  # another schema's tb_Shop
        ("SELECT * FROM tb_Shop", None),
        ("SELECT 'FROM tb_Shop'", "shop"),
        ("SELECT 1", "shop"),
        ("", "shop"),
    ],
)
def test_statements_on_other_tables_keep_todays_path(shard_map: ShardMap, sql: str, schema: str | None) -> None:
    assert plan(sql, schema, shard_map) is None


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT * FROM tb_Shop JOIN visits USING (x)", "a join of shop.tb_Shop, shop.visits that is not on their"),
        ("SELECT * FROM tb_Shop a JOIN tb_Shop b ON a.name = b.name WHERE a.City_ID = 1", "(a.city_id = b.city_id)"),
        ("SELECT * FROM tb_Shop s LEFT JOIN visits v ON s.n = v.n WHERE s.City_ID = v.city", "not on their shard"),
        ("SELECT * FROM tb_Shop s JOIN visits v ON v.city = s.City_ID + 0", "not on their shard keys"),
        ("SELECT * FROM tb_Shop, orders", "tables of several shard groups (orders, shops)"),
        ("SELECT * FROM cities WHERE id IN (SELECT City_ID FROM tb_Shop)", "a subquery on shop.tb_Shop"),
        ("SELECT * FROM tb_Shop WHERE City_ID IN (SELECT city FROM visits)", "a subquery on shop.visits"),
        ("SELECT * FROM (SELECT id FROM cities) d LEFT JOIN tb_Shop s ON s.City_ID = d.id", "LEFT JOIN keeping"),
        ("UPDATE tb_Shop SET n = 1 WHERE City_ID IN (SELECT id FROM cities)", "a write naming both"),
        ("SELECT 1 FROM tb_Shop UNION SELECT 2", "UNION over shop.tb_Shop"),
        ("SELECT 1 FROM tb_Shop; SELECT 2", "several statements in one query"),
        ("UPDATE tb_Shop SET City_ID = 2 WHERE City_ID = 1", "changing the shard key city_id of shop.tb_Shop"),
        ("UPDATE tb_Shop SET a = 1, city_id = 2", "changing the shard key"),
        # Every spelling of the key in SET: qualified, by alias, 3-part, quoted, any case, with :=.
        ("UPDATE tb_Shop SET tb_Shop.City_ID = 2 WHERE City_ID = 1", "changing the shard key"),
        ("UPDATE shop.tb_Shop SET shop.tb_Shop.city_id = 2 WHERE City_ID = 1", "changing the shard key"),
        ("UPDATE shop.tb_Shop SET `SHOP`.`TB_SHOP`.`CITY_ID` = 2", "changing the shard key"),
        ("UPDATE tb_Shop s SET n = 1, s.`City_ID` = 2", "changing the shard key"),
        ("UPDATE tb_Shop SET `city_ID` = 2", "changing the shard key"),
        ("UPDATE tb_Shop SET CITY_ID := 2 WHERE City_ID = 1", "changing the shard key"),
        ("UPDATE tb_Shop s JOIN visits v ON v.city = s.City_ID SET v.city = 3", "changing the shard key"),
        ("INSERT INTO tb_Shop (City_ID) VALUES (1) ON DUPLICATE KEY UPDATE tb_Shop.city_id = 2", "ON DUPLICATE"),
        ("INSERT INTO tb_Shop VALUES (1, 'a')", "without a column list"),
        ("INSERT INTO tb_Shop (name) VALUES ('a')", "without its shard key city_id"),
        ("INSERT INTO tb_Shop (City_ID, name) SELECT 1, 'a'", "INSERT ... SELECT into shop.tb_Shop"),
        ("INSERT INTO tb_Shop SET City_ID = 1", "INSERT ... SET into shop.tb_Shop"),
        ("INSERT INTO tb_Shop (City_ID) VALUES (NOW())", "whose shard key city_id is not a constant"),
        ("INSERT INTO tb_Shop (City_ID) VALUES (1.5)", "whose shard key city_id is not a constant"),
        ("INSERT INTO tb_Shop (City_ID) VALUES (X'05')", "whose shard key city_id is not a constant"),
        ("INSERT INTO tb_Shop (City_ID) VALUES (9223372036854775807 + 1)", "is beyond BIGINT"),
        ("INSERT INTO tb_Shop (City_ID, n) VALUES (1)", "whose rows do not match its column list"),
        ("INSERT INTO tb_Shop (City_ID) VALUES (1) ON DUPLICATE KEY UPDATE City_ID = 2", "ON DUPLICATE KEY UPDATE"),
        ("INSERT INTO tb_Shop (City_ID) VALUES (NULL)", "a shard key cannot be NULL"),
        ("INSERT INTO tb_Shop (City_ID) VALUES ('x')", "the shard key must be an integer, not 'x'"),
        ("UPDATE tb_Shop SET n = 1 ORDER BY name LIMIT 2", "ORDER BY or LIMIT in a write over several shards"),
        ("DELETE FROM tb_Shop WHERE City_ID IN (1, 2) LIMIT 1", "ORDER BY or LIMIT in a write over several"),
        ("DELETE s FROM tb_Shop s JOIN visits v ON v.city = s.City_ID", "a write joining several tables over"),
        ("UPDATE cities c JOIN tb_Shop s ON s.City_ID = c.id SET c.name = 'x' WHERE s.City_ID = 1", "a write naming"),
        ("UPDATE cities SET name = NOW()", "NOW() in a write to the global table shop.cities"),
        ("INSERT INTO cities (id, name) VALUES (1, UUID())", "UUID() in a write to the global table"),
        ("UPDATE cities SET made = CURRENT_TIMESTAMP", "CURRENT_TIMESTAMP() in a write to the global table"),
        ("SELECT COUNT(*) FROM tb_Shop a STRAIGHT_JOIN visits v ON a.n = v.n", "not on their shard keys"),
        ("SELECT * FROM tb_Shop a JOIN visits v ON (a.n = v.n OR a.City_ID = v.city)", "not on their shard keys"),
        ("INSERT tb_Shop VALUES (1, 'a')", "without a column list"),
        ("(SELECT 1 FROM tb_Shop) UNION (SELECT 2)", "UNION over shop.tb_Shop"),
        # A global table kept by an outer join with a sharded one, over several shards: its rows once per shard.
        ("SELECT c.id, s.n FROM cities c LEFT JOIN tb_Shop s ON s.City_ID = c.id", "a LEFT JOIN keeping the global"),
        ("SELECT COUNT(*) FROM cities c LEFT OUTER JOIN tb_Shop s ON s.n = c.id", "a LEFT JOIN keeping the global"),
        ("SELECT * FROM tb_Shop s RIGHT JOIN cities c ON s.City_ID = c.id", "a RIGHT JOIN keeping the global"),
        ("SELECT * FROM cities c NATURAL LEFT JOIN tb_Shop s WHERE s.City_ID IN (1, 2)", "a LEFT JOIN keeping"),
    ],
)
def test_what_cannot_be_done_exactly_is_refused_with_the_reason(shard_map: ShardMap, sql: str, reason: str) -> None:
    found = plan(sql, "shop", shard_map)
    assert found is not None
    assert found.shards == frozenset() and reason in found.refused, found


def test_a_global_write_may_name_columns_like_functions(shard_map: ShardMap) -> None:
    found = plan("UPDATE cities SET name = 'x' WHERE user = 'bob' AND `now` = 1", "shop", shard_map)
    assert found is not None and found.refused == "" and found.writes and len(found.shards) == 4


def test_an_insert_over_several_shards_gives_each_shard_its_rows(shard_map: ShardMap) -> None:
    found = plan(
        "INSERT INTO tb_Shop (City_ID, name) VALUES (5, 'a'), (6, 'b,c'), (9, CONCAT('x', ')')) "
        "ON DUPLICATE KEY UPDATE name = VALUES(name)",
        "shop",
        shard_map,
    )
    assert found is not None and found.refused == "" and found.first_row_shard == 1
    assert dict(found.statements) == {
        1: "INSERT INTO tb_Shop (City_ID, name) VALUES (5, 'a'), (9, CONCAT('x', ')')) "
        "ON DUPLICATE KEY UPDATE name = VALUES(name)",
        2: "INSERT INTO tb_Shop (City_ID, name) VALUES (6, 'b,c') ON DUPLICATE KEY UPDATE name = VALUES(name)",
    }
    assert plan("INSERT INTO tb_Shop (City_ID) VALUES (5), (9)", "shop", shard_map).statements == ()  # type: ignore[union-attr]


def test_texts_that_are_not_utf8_are_planned(shard_map: ShardMap) -> None:
    """A query's bytes that are not UTF-8 (lone surrogates once decoded with surrogateescape): a string key holding
    them, quoted or in hex (a prepared statement's), cannot be placed exactly under the collation, so every shard
    (always correct); elsewhere in the statement they change nothing; a table named so is not a sharded one."""
    for key in ("'\udcff'", "X'ff'", "_utf8mb4 X'ff'"):
        found = plan(f"SELECT * FROM orders WHERE id = {key}", "shop", shard_map)
        assert found is not None and found.shards == frozenset({0, 1}), key
    for sql, shards in (
        ("SELECT `\udcff` FROM tb_Shop WHERE City_ID = 5", {1}),
        ("INSERT INTO tb_Shop (City_ID, n) VALUES (6, '\udcfe')", {2}),
    ):
        found = plan(sql, "shop", shard_map)
        assert found is not None and found.shards == shards, sql
    assert plan("SELECT * FROM tb\udcff WHERE City_ID = 1", "shop", shard_map) is None


def _keyed_on(sql: str, shard_map: ShardMap, dialect: Dialect = MYSQL) -> frozenset[int]:
    """The shards ``sql`` reaches, read by ``dialect`` (cold, then warm: the two agree)."""
    shard_map.plans.clear()
    found = planner.plan(sql, "shop", shard_map, dialect)
    assert found is not None and found.refused == "", sql
    assert planner.plan(sql, "shop", shard_map, dialect) == found
    return found.shards


@pytest.mark.parametrize("key", ["x\\y", "a\\_b", "\\", "50\\%", "q\\'"])
def test_keys_are_read_under_no_backslash_escapes(shard_map: ShardMap, key: str) -> None:
    """Under NO_BACKSLASH_ESCAPES a backslash is itself: the key is placed as the same text written with doubled
    backslashes in the default mode (and an INSERT of it where a lookup finds it)."""
    plain = mysql_dialect(False, True)
    escaped = key.replace("\\", "\\\\").replace("'", "\\'")
    written = key.replace("'", "''")
    expected = _keyed_on(f"SELECT * FROM orders WHERE id = '{escaped}'", shard_map)
    assert len(expected) == 1
    assert _keyed_on(f"SELECT * FROM orders WHERE id = '{written}'", shard_map, plain) == expected
    assert _keyed_on(f"INSERT INTO orders (id) VALUES ('{written}')", shard_map, plain) == expected


def test_backslash_escapes_are_read_as_mariadb_reads_them(shard_map: ShardMap) -> None:
    """Outside LIKE ``\\_`` keeps its backslash: 'a\\_b' is the 4 characters a, \\, _, b (not 'a_b')."""
    kept = _keyed_on("SELECT * FROM orders WHERE id = 'a\\_b'", shard_map)
    assert kept == _keyed_on("SELECT * FROM orders WHERE id = 'a\\\\_b'", shard_map)


def test_ansi_quotes_read_double_quotes_as_names(shard_map: ShardMap) -> None:
    ansi = mysql_dialect(True, False)
    assert _keyed_on('SELECT * FROM "tb_Shop" WHERE "City_ID" = 5', shard_map, ansi) == {1}
    assert _keyed_on("INSERT INTO tb_Shop (\"City_ID\", name) VALUES (6, 'x')", shard_map, ansi) == {2}
    assert _keyed_on('SELECT * FROM tb_Shop WHERE "City_ID" = 5', shard_map) == EVERY  # a string by default


def test_executable_comments_are_sql_in_each_shards_statement(shard_map: ShardMap) -> None:
    """``/*! ... */``, ``/*M! ... */`` and ``/*!NNNNN ... */`` are SQL on MariaDB: each shard's statement holds their
    content without the marks (never an opened comment the server reads as 1064); a MariaDB version is refused."""
    found = plan("SELECT /*! SQL_NO_CACHE */ n /*M!, name */ FROM tb_Shop /*!50100 ORDER BY n */", "shop", shard_map)
    assert found is not None and found.gather is not None
    assert "/*" not in found.gather.sql and "*/" not in found.gather.sql and "ORDER BY n" in found.gather.sql
    found = plan("INSERT /*! IGNORE */ INTO tb_Shop (City_ID) VALUES (1), (/*!50100 2 */)", "shop", shard_map)
    assert found is not None and [s for _, s in found.statements if "/*" in s or "*/" in s] == []
    assert found.shards == {1, 2}
    found = plan("SELECT * FROM tb_Shop /*!50100 WHERE City_ID = 5 */", "shop", shard_map)
    assert found is not None and found.shards == {1}
    found = plan("SELECT n FROM tb_Shop /*M!100500 WHERE City_ID = 1 */", "shop", shard_map)
    assert found is not None and "an executable comment for a MariaDB version" in found.refused
