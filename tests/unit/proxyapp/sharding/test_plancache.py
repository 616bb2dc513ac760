"""The planner's cache of statement shapes (proxyapp.sharding.plan): a statement of a shape seen before is planned
from the cached template with its own literals, to the plan a cold analysis gives; the cache is bounded and belongs
to its shard map."""

from __future__ import annotations

import re

import pytest

from proxyapp.sharding.plan import PLAN_CACHE_SIZE, Plan, plan
from proxyapp.sharding.shardmap import ShardMap

#: Statements whose literals the variants change: point, IN, joins, writes, scatters, refusals, string keys.
STATEMENTS = [
    "SELECT * FROM tb_Shop WHERE City_ID = 5",
    "SELECT * FROM tb_Shop WHERE City_ID = -3 AND name = 'x'",
    "SELECT * FROM tb_Shop WHERE 9 = City_ID",
    "SELECT * FROM tb_Shop WHERE City_ID IN (1, 2, 5)",
    "SELECT * FROM tb_Shop WHERE City_ID IN (1, 2) AND City_ID IN (2, 3)",
    "SELECT * FROM tb_Shop WHERE City_ID = '10'",
    "SELECT * FROM tb_Shop WHERE City_ID = 1 OR City_ID = 2",
    "SELECT * FROM tb_Shop WHERE ((City_ID = 6 AND n > 1)) AND name = 'x'",
    "SELECT * FROM tb_Shop s JOIN visits v ON v.city = s.City_ID WHERE v.city = 6",
    "SELECT name, COUNT(*) FROM tb_Shop WHERE City_ID IN (1, 2) GROUP BY name HAVING COUNT(*) > 1 LIMIT 3",
    "SELECT name, n + 1 FROM tb_Shop WHERE City_ID IN (4, 8) ORDER BY n + 1 LIMIT 2, 5",
    "SELECT * FROM cities WHERE id = 1",
    "UPDATE tb_Shop SET name = 'n' WHERE City_ID = 6",
    "UPDATE tb_Shop SET name = 'n' WHERE City_ID IN (6, 7) ORDER BY name LIMIT 1",
    "DELETE FROM tb_Shop WHERE City_ID IN (3, 7)",
    "DELETE s FROM tb_Shop s JOIN visits v ON v.city = s.City_ID WHERE s.City_ID IN (2, 3)",
    "INSERT INTO tb_Shop (City_ID, name) VALUES (5, 'a')",
    "INSERT INTO tb_Shop (name, City_ID) VALUES ('a', 5), ('b', 6), (CONCAT('c', 'd'), 9)",
    "INSERT INTO tb_Shop (City_ID) VALUES (LAST_INSERT_ID(5)), (6)",
    "INSERT INTO tb_Shop (City_ID, n) VALUES (4, 1) ON DUPLICATE KEY UPDATE n = n + 1",
    "INSERT INTO cities (id, name) VALUES (1, 'x')",
    "SELECT * FROM orders WHERE id = 'abc'",
    "SELECT * FROM orders WHERE id IN ('abc', 'def')",
    "SELECT * FROM orders WHERE id = _utf8mb4 X'5c78'",
    "UPDATE orders SET n = 1 WHERE id = 'abc'",
    "SELECT 1 FROM tb_Shop UNION SELECT 2",
    "UPDATE tb_Shop SET City_ID = 2 WHERE City_ID = 1",
]
#: What the variants put in place of each integer and each string: other values, values of another kind, NULL.
INTEGERS = ["0", "1", "2", "7", "12", "99999999999999999999", "'7'", "1.5", "NULL"]
STRINGS = ["''", "'abc'", "'zz'", "'5'", "'Ab'", "5", "N'x'"]


def variants(sql: str) -> list[str]:
    """``sql`` with its integers, then its strings, replaced by one value of the lists at a time (some of another
    kind), its integers each by another, and its hex strings by others."""
    out = [re.sub(r"(?<![\w'])\d+(?![\w'])", value, sql) for value in INTEGERS]
    out += [re.sub(r"(?<![\w'])(?<!X)'[^']*'", value, sql) for value in STRINGS]
    out += [re.sub(r"(?<![\w'])\d+(?![\w'])", lambda m: str(int(m[0]) * 3 + 1), sql)]
    out += [re.sub(r"X'[0-9a-f]*'", value, sql) for value in ("X'41'", "X''")]
    return out


def cold(sql: str, shard_map: ShardMap) -> Plan | None:
    shard_map.plans.clear()
    return plan(sql, "shop", shard_map)


@pytest.mark.parametrize("sql", STATEMENTS)
def test_statements_of_a_cached_shape_plan_as_if_cold(shard_map: ShardMap, sql: str) -> None:
    for variant in variants(sql):
        expected = cold(variant, shard_map)
        shard_map.plans.clear()
        plan(sql, "shop", shard_map)  # the shape's template, from the original statement
        assert plan(variant, "shop", shard_map) == expected, variant


def test_a_second_statement_of_one_shape_plans_to_its_shards(shard_map: ShardMap) -> None:
    shard_map.plans.clear()
    first = plan("SELECT * FROM tb_Shop WHERE City_ID = 5", "shop", shard_map)
    second = plan("SELECT * FROM tb_Shop WHERE City_ID = 6", "shop", shard_map)
    scatter = plan("SELECT * FROM tb_Shop WHERE City_ID = 'x'", "shop", shard_map)  # as MySQL compares: any shard
    assert first is not None and second is not None and scatter is not None
    assert (first.shards, second.shards, scatter.shards) == ({1}, {2}, frozenset(range(4)))
    assert len(shard_map.plans) == 2  # an integer and a string are shapes apart
    numbers = plan("SELECT * FROM tb_Shop WHERE City_ID IN (3, 6, 7)", "shop", shard_map)
    assert numbers is not None and numbers.shards == {2, 3}


def test_a_shape_is_planned_apart_per_default_schema(shard_map: ShardMap) -> None:
    shard_map.plans.clear()
    assert plan("SELECT * FROM tb_Shop WHERE City_ID = 5", "shop", shard_map) is not None
    assert plan("SELECT * FROM tb_Shop WHERE City_ID = 5", "SHOP", shard_map) is not None
    assert plan("SELECT * FROM tb_Shop WHERE City_ID = 5", "elsewhere", shard_map) is None


def test_the_cache_keeps_the_most_recently_used_shapes(shard_map: ShardMap) -> None:
    shard_map.plans.clear()
    for n in range(PLAN_CACHE_SIZE):
        plan(f"SELECT c{n} FROM tb_Shop WHERE City_ID = 1", "shop", shard_map)
    plan("SELECT c0 FROM tb_Shop WHERE City_ID = 2", "shop", shard_map)  # c0 is used again: c1 is the oldest now
    plan("SELECT more FROM tb_Shop WHERE City_ID = 1", "shop", shard_map)
    columns = [shape[1] for _, shape in shard_map.plans]
    assert len(columns) == PLAN_CACHE_SIZE
    assert (columns[0], columns[-2:]) == ("c2", ["c0", "more"])


def test_a_long_statement_is_analyzed_each_time(shard_map: ShardMap) -> None:
    shard_map.plans.clear()
    rows = ", ".join(f"({n}, 'a')" for n in range(400))
    found = plan(f"INSERT INTO tb_Shop (City_ID, name) VALUES {rows}", "shop", shard_map)
    assert found is not None and found.shards == frozenset(range(4)) and not shard_map.plans
