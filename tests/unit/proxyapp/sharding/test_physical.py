"""A shard's physical schema (proxyapp.sharding.physical): what a statement becomes on a shard that keeps the logical
schema ``shop`` in ``shop_1``, and the default schema it runs in."""

from __future__ import annotations

import pytest

from proxyapp.config.document import parse_config
from proxyapp.sharding.physical import default_schema, rewrite, shard_on
from proxyapp.sharding.shardmap import Shard, ShardMap

RENAMED = Shard(1, 101, "shop_1", (("shop", "shop_1"),))


@pytest.mark.parametrize(
    ("sql", "on_shard"),
    [
        ("SELECT * FROM shop.tb_Shop WHERE City_ID = 1", "SELECT * FROM `shop_1`.tb_Shop WHERE City_ID = 1"),
        ("SELECT * FROM `shop`.`tb_Shop`", "SELECT * FROM `shop_1`.`tb_Shop`"),
        ("select * from SHOP.tb_Shop", "select * from `shop_1`.tb_Shop"),
        ("SELECT shop.tb_Shop.name FROM shop.tb_Shop", "SELECT `shop_1`.tb_Shop.name FROM `shop_1`.tb_Shop"),
        ("SELECT shop.tb_Shop.* FROM shop.tb_Shop s", "SELECT `shop_1`.tb_Shop.* FROM `shop_1`.tb_Shop s"),
        ("SELECT shop.total(id) FROM tb_Shop", "SELECT `shop_1`.total(id) FROM tb_Shop"),
        ("INSERT INTO shop.tb_Shop (City_ID) VALUES (1)", "INSERT INTO `shop_1`.tb_Shop (City_ID) VALUES (1)"),
        ("ALTER TABLE shop.tb_Shop ADD COLUMN x INT", "ALTER TABLE `shop_1`.tb_Shop ADD COLUMN x INT"),
        ("RENAME TABLE shop.a TO shop.b", "RENAME TABLE `shop_1`.a TO `shop_1`.b"),
        (
            "SELECT * FROM shop.tb_Shop s JOIN shop.cities c ON c.id = s.City_ID",
            "SELECT * FROM `shop_1`.tb_Shop s JOIN `shop_1`.cities c ON c.id = s.City_ID",
        ),
    ],
)
def test_names_qualified_by_the_logical_schema_are_renamed(sql: str, on_shard: str) -> None:
    assert rewrite(sql, RENAMED) == on_shard


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM tb_Shop WHERE City_ID = 1",  # unqualified: the default schema resolves it
        "SELECT 'shop.tb_Shop', \"shop.x\" FROM tb_Shop",  # strings
        "SELECT /* shop.tb_Shop */ name FROM tb_Shop -- shop.tb_Shop",  # comments
        "SELECT * FROM other.tb_Shop JOIN shopping.x",  # other schemas
        "SELECT s.shop FROM tb_Shop s",  # a column named like the schema
    ],
)
def test_the_rest_is_left_as_it_is(sql: str) -> None:
    assert rewrite(sql, RENAMED) is sql


def test_a_table_or_alias_named_like_the_schema_keeps_its_columns() -> None:
    sql = "SELECT shop.id, shop.tb_Shop.name FROM shop.tb_Shop AS shop WHERE shop.City_ID = 1"
    on_shard = "SELECT shop.id, `shop_1`.tb_Shop.name FROM `shop_1`.tb_Shop AS shop WHERE shop.City_ID = 1"
    assert rewrite(sql, RENAMED) == on_shard
    assert rewrite("SELECT shop.id FROM shop.shop", RENAMED) == "SELECT shop.id FROM `shop_1`.shop"


def test_the_default_schema_is_the_physical_one_for_the_logical_schema_only() -> None:
    assert default_schema(RENAMED, "shop") == default_schema(RENAMED, "SHOP") == "shop_1"
    assert default_schema(RENAMED, "other") is None
    assert default_schema(RENAMED, None) is None
    plain = Shard(0, 100, None)
    assert default_schema(plain, "shop") is None
    assert rewrite("SELECT * FROM shop.tb_Shop", plain) == "SELECT * FROM shop.tb_Shop"


def test_the_shard_map_renames_each_logical_schema_of_the_group_on_its_shard() -> None:
    shards = [
        {"shard_group": "shops", "shard": 0, "hostgroup_id": 100},
        {"shard_group": "shops", "shard": 1, "hostgroup_id": 101, "physical_schema": "shop_1"},
        {"shard_group": "shops", "shard": 2, "hostgroup_id": 102, "physical_schema": "shop"},
    ]
    tables = [
        {"schemaname": "shop", "tablename": "tb_Shop", "shard_group": "shops", "algorithm": "mod", "shard_key": "id"},
        {"schemaname": "crm", "tablename": "customers", "shard_group": "shops", "algorithm": "global"},
    ]
    servers = [{"hostgroup_id": hostgroup, "hostname": "db"} for hostgroup in (100, 101, 102)]
    shard_map = ShardMap.build(
        parse_config({"mysql_servers": servers, "mysql_shards": shards, "mysql_sharded_tables": tables})
    )
    table = shard_map.tables[("shop", "tb_shop")]
    assert [s.renamed for s in table.shards] == [(), (("crm", "shop_1"), ("shop", "shop_1")), (("crm", "shop"),)]
    assert shard_on(table, 101).number == 1
    two = "SELECT * FROM shop.tb_Shop JOIN crm.customers"
    assert rewrite(two, table.shards[1]) == "SELECT * FROM `shop_1`.tb_Shop JOIN `shop_1`.customers"
    assert rewrite(two, table.shards[2]) == "SELECT * FROM shop.tb_Shop JOIN `shop`.customers"


def test_bytes_that_are_not_utf8_keep_their_bytes_on_the_shard() -> None:
    on_shard = rewrite("SELECT '\udcff' FROM shop.tb_Shop WHERE x = `\udcfe`", RENAMED)
    assert on_shard.encode("utf-8", "surrogateescape") == b"SELECT '\xff' FROM `shop_1`.tb_Shop WHERE x = `\xfe`"
