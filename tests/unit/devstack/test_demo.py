"""The demo config of ``make run`` (``devstack/demo.py``): valid for the proxy with its shard tables, and its shops
placed on the shards the proxy's own shard map gives."""

from __future__ import annotations

from devstack.demo import FIRST_SHARD_HOSTGROUP, SHARD_GROUP, SHOPS, WRITER_HOSTGROUP, demo_config
from devstack.sandbox import SandboxServer
from proxyapp.config.document import parse_config
from proxyapp.sharding.shardmap import ShardMap


def server(name: str, port: int) -> SandboxServer:
    """A sandbox server as its state file records it (nothing runs: the config only names it)."""
    return SandboxServer(name, "primary", "127.0.0.1", port, None, f"/nowhere/{name}/data", "/nowhere/sock", 1)


def test_the_demo_config_validates_with_its_shard_group_and_tables() -> None:
    shards = [server("shard0", 4100), server("shard1", 4101)]
    config = parse_config(demo_config(server("primary", 4000), [server("replica1", 4001)], shards))
    by_hostgroup = {s.hostgroup_id: s.port for s in config.mysql_servers if s.hostgroup_id >= FIRST_SHARD_HOSTGROUP}
    assert by_hostgroup == {100: 4100, 101: 4101}
    assert [(s.shard_group, s.shard, s.hostgroup_id) for s in config.mysql_shards] == [
        (SHARD_GROUP, 0, 100),
        (SHARD_GROUP, 1, 101),
    ]
    shard_map = ShardMap.build(config)
    shops, cities = shard_map.find("shop", "tb_Shop"), shard_map.find("SHOP", "cities")
    assert shops is not None and cities is not None and cities.is_global
    assert (shops.key, shops.algorithm.name, [s.hostgroup_id for s in shops.shards]) == ("city_id", "mod", [100, 101])
    placed = {shop_id: shops.algorithm.shard_of(city) for shop_id, city, _, _ in SHOPS}
    assert placed == {1: 1, 2: 0, 3: 1, 4: 0, 5: 1}  # both shards hold shops


def test_without_shard_servers_the_demo_is_the_read_write_split_alone() -> None:
    config = parse_config(demo_config(server("primary", 4000), []))
    assert not config.mysql_shards and not config.mysql_sharded_tables
    assert {s.hostgroup_id for s in config.mysql_servers} == {WRITER_HOSTGROUP, 20}
