"""Where a planned statement runs for a session (proxyapp.sharding.placement): one shard's hostgroup, a scatter over
several shards, or why not (yet)."""

from __future__ import annotations

import pytest

from proxyapp.sharding.placement import Placement, placement
from proxyapp.sharding.plan import plan
from proxyapp.sharding.shardmap import ShardMap


@pytest.mark.parametrize(
    ("sql", "kept", "hostgroup"),
    [
        ("SELECT * FROM tb_Shop WHERE City_ID = 5", None, 101),
        ("INSERT INTO tb_Shop (City_ID) VALUES (6), (10)", None, 102),
        ("SELECT * FROM tb_Shop WHERE City_ID = 5", 101, 101),  # inside a transaction on that shard
        ("SELECT * FROM cities", None, 100),  # a global table: read from the first shard ...
        ("SELECT * FROM cities", 103, 103),  # ... or from the shard the session is on
        ("SELECT * FROM orders WHERE id = 'abc'", None, 201),
    ],
)
def test_a_statement_on_one_shard_runs_on_its_hostgroup(
    shard_map: ShardMap, sql: str, kept: int | None, hostgroup: int
) -> None:
    found = plan(sql, "shop", shard_map)
    assert found is not None
    assert placement(found, kept, True) == Placement(hostgroup)


@pytest.mark.parametrize(
    ("sql", "hostgroups"),
    [
        ("SELECT * FROM tb_Shop", (100, 101, 102, 103)),
        ("SELECT name FROM tb_Shop WHERE City_ID IN (1, 2) ORDER BY name", (101, 102)),
        ("SELECT COUNT(*) FROM tb_Shop s JOIN cities c ON c.id = s.City_ID", (100, 101, 102, 103)),
        ("ALTER TABLE tb_Shop ADD COLUMN x int", (100, 101, 102, 103)),
        ("CREATE INDEX i ON cities (name)", (100, 101, 102, 103)),
        ("DELETE FROM tb_Shop WHERE City_ID IN (1, 2)", (101, 102)),  # a write: XA over both
        ("INSERT INTO cities (id) VALUES (1)", (100, 101, 102, 103)),
        ("INSERT INTO tb_Shop (City_ID) VALUES (1), (3), (4)", (100, 101, 103)),
    ],
)
def test_reads_and_ddl_over_several_shards_scatter(shard_map: ShardMap, sql: str, hostgroups: tuple[int, ...]) -> None:
    found = plan(sql, "shop", shard_map)
    assert found is not None
    where = placement(found, None, True)
    assert where.refused == "" and tuple(s.hostgroup_id for s in where.shards) == hostgroups


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("DELETE FROM tb_Shop WHERE City_ID IN (1, 2)", "shop.tb_Shop (2 of 4) is not allowed here "),
        ("INSERT INTO cities (id) VALUES (1)", "shop.cities (4 of 4) is not allowed here "),
    ],
)
def test_writes_over_several_shards_can_be_forbidden(shard_map: ShardMap, sql: str, reason: str) -> None:
    found = plan(sql, "shop", shard_map)
    assert found is not None
    where = placement(found, None, True, cross_shard_writes=False)
    assert reason in where.refused and "(mysql-sharding_cross_shard_writes=false)" in where.refused
    assert placement(found, None, True).refused == ""


@pytest.mark.parametrize(
    ("sql", "kept", "autocommit", "reason"),
    [
        ("DELETE FROM tb_Shop WHERE City_ID IN (1, 2)", None, False, "several shards of shop.tb_Shop inside a"),
        ("SELECT * FROM tb_Shop WHERE City_ID = 5", 100, True, "it is on hostgroup 100, shop.tb_Shop shard 1 is"),
        ("SELECT * FROM tb_Shop", 100, True, "several shards of shop.tb_Shop inside a transaction"),
        ("SELECT * FROM tb_Shop", None, False, "several shards of shop.tb_Shop inside a transaction"),
        ("UPDATE tb_Shop SET City_ID = 1", None, True, "changing the shard key"),
        ("SELECT GROUP_CONCAT(name) FROM tb_Shop", None, True, "GROUP_CONCAT without ORDER BY"),
    ],
)
def test_what_cannot_run_is_refused_saying_so(
    shard_map: ShardMap, sql: str, kept: int | None, autocommit: bool, reason: str
) -> None:
    found = plan(sql, "shop", shard_map)
    assert found is not None
    where = placement(found, kept, autocommit)
    assert where.hostgroup == -1 and where.shards == () and reason in where.refused
