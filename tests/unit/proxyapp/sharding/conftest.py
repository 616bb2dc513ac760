"""The shard map the sharding tests plan against: Amoeba's tb_Shop on 4 shards (hostgroups 100-103) by City_ID mod 4,
a global table of cities and visits in the same group, and orders sharded by hash over 2 shards (200-201)."""

from __future__ import annotations

import pytest

from proxyapp.config.document import parse_config
from proxyapp.sharding.shardmap import ShardMap


@pytest.fixture(scope="module")
def shard_map() -> ShardMap:
    shards = [{"shard_group": "shops", "shard": n, "hostgroup_id": 100 + n} for n in range(4)]
    shards += [{"shard_group": "orders", "shard": n, "hostgroup_id": 200 + n} for n in range(2)]
    tables = [
        {
            "schemaname": "shop",
            "tablename": "tb_Shop",
            "shard_group": "shops",
            "algorithm": "mod",
            "shard_key": "City_ID",
        },
        {"schemaname": "shop", "tablename": "cities", "shard_group": "shops", "algorithm": "global"},
        {"schemaname": "shop", "tablename": "visits", "shard_group": "shops", "algorithm": "mod", "shard_key": "city"},
        {
            "schemaname": "shop",
            "tablename": "orders",
            "shard_group": "orders",
            "algorithm": "hash",
            "shard_key": "id",
            "parameters": '{"key_type": "string"}',
        },
    ]
    servers = [{"hostgroup_id": hg, "hostname": "db"} for hg in (100, 101, 102, 103, 200, 201)]
    return ShardMap.build(
        parse_config({"mysql_servers": servers, "mysql_shards": shards, "mysql_sharded_tables": tables})
    )
