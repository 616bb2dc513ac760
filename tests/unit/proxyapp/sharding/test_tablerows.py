"""What the table rows poll (proxyapp.sharding.tablerows) asks each shard server: one query per hostgroup naming its
tables in the schema that shard keeps them in, and the rows it reports before any answer."""

from __future__ import annotations

import asyncio

from proxyapp.config.document import parse_config
from proxyapp.mysql.backend import BackendConnection
from proxyapp.sharding.shardmap import ShardMap
from proxyapp.sharding.tablerows import TableRows, rows_sql, targets


async def unreachable(server: str) -> BackendConnection:
    raise AssertionError(f"no pass runs in these tests: {server}")


def test_each_hostgroup_is_asked_once_for_its_tables_in_their_schema_there(shard_map: ShardMap) -> None:
    asked = targets(shard_map)
    assert sorted(asked) == [100, 101, 102, 103, 200, 201]
    assert sorted((t.tablename, t.shard) for t in asked[101]) == [("cities", 1), ("tb_Shop", 1), ("visits", 1)]
    assert rows_sql(asked[200]) == (
        "SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES "
        "WHERE (TABLE_SCHEMA, TABLE_NAME) IN (('shop', 'orders'))"
    )
    assert targets(None) == {}


def test_a_shard_with_a_physical_schema_is_asked_in_it_and_odd_names_are_quoted() -> None:
    config = parse_config(
        {
            "mysql_servers": [{"hostgroup_id": hg, "hostname": "db"} for hg in (100, 101)],
            "mysql_shards": [
                {"shard_group": "g", "shard": 0, "hostgroup_id": 100},
                {"shard_group": "g", "shard": 1, "hostgroup_id": 101, "physical_schema": "shop_1"},
            ],
            "mysql_sharded_tables": [
                {"schemaname": "shop", "tablename": "it's", "shard_group": "g", "algorithm": "global"},
                {"schemaname": "shop", "tablename": "a\\b", "shard_group": "g", "algorithm": "global"},
            ],
        }
    )
    asked = targets(ShardMap.build(config))
    assert [(t.schemaname, t.physical) for t in asked[101]] == [("shop", "shop_1"), ("shop", "shop_1")]
    assert rows_sql(asked[101]).endswith("IN (('shop_1', _utf8mb4 X'615c62'), ('shop_1', 'it''s'))")


def test_before_any_answer_every_table_is_reported_with_its_rows_missing(shard_map: ShardMap) -> None:
    rows = TableRows(lambda: shard_map, lambda hostgroup: None, unreachable).rows()
    assert len(rows) == 3 * 4 + 2
    assert rows[0] == {
        "schemaname": "shop",
        "tablename": "cities",
        "shard": 0,
        "hostgroup": 100,
        "rows_estimate": None,
        "checked_at": None,
    }


def test_a_new_config_has_the_next_housekeeping_ask_at_once(shard_map: ShardMap) -> None:
    """A pass every interval, and one at the first housekeeping after a new config (its tables may be new)."""
    passes = []

    async def scenario() -> None:
        polled = TableRows(lambda: shard_map, lambda hostgroup: None, unreachable, interval=60.0)

        def sweep(now: float) -> None:
            before = polled._task
            polled.sweep(now)
            passes.append(polled._task is not before)

        sweep(0.0)
        assert polled._task is not None
        await polled._task  # the pass ends (no writer anywhere: nothing is asked)
        sweep(1.0)
        polled.reconfigure()
        sweep(2.0)
        await polled._task
        sweep(3.0)
        sweep(62.5)

    asyncio.run(scenario())
    assert passes == [True, False, True, False, True]
