"""Where a planned statement runs for a session (proxyapp.sharding.placement): one shard's hostgroup, or why not yet."""

from __future__ import annotations

import pytest

from proxyapp.sharding.placement import placement
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
    assert placement(found, kept) == (hostgroup, "")


@pytest.mark.parametrize(
    ("sql", "kept", "reason"),
    [
        ("SELECT * FROM tb_Shop", None, "statements over several shards of shop.tb_Shop yet (4 of 4): compare its"),
        ("DELETE FROM tb_Shop WHERE City_ID IN (1, 2)", None, "several shards of shop.tb_Shop yet (2 of 4)"),
        ("INSERT INTO cities (id) VALUES (1)", None, "several shards of shop.cities yet (4 of 4)"),
        ("SELECT * FROM tb_Shop WHERE City_ID = 5", 100, "it is on hostgroup 100, shop.tb_Shop shard 1 is hostgroup"),
        ("UPDATE tb_Shop SET City_ID = 1", None, "changing the shard key"),
    ],
)
def test_what_needs_several_shards_is_refused_saying_so(
    shard_map: ShardMap, sql: str, kept: int | None, reason: str
) -> None:
    found = plan(sql, "shop", shard_map)
    assert found is not None
    hostgroup, refused = placement(found, kept)
    assert hostgroup == -1 and reason in refused
