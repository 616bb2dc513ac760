"""Sharding algorithms (proxyapp.config.sharding) and the sharding tables of the config document: which shard holds
a key, table-driven, and every bad parameter or table named."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from proxyapp.config.document import ConfigError, parse_config
from proxyapp.config.sharding import ShardKeyError, build, parse_parameters

RANGES = '{"ranges": [[null, 100, 0], [100, 200, 1], [200, null, 2]]}'
LISTS = '{"lists": {"0": [1, 2, "eu"], "1": [3, "us"]}, "default": 2}'  # a string value: string keys
NUMBERS = '{"lists": {"0": [1, 2], "1": [3]}, "default": 2}'
STRINGS = '{"key_type": "string"}'
MONTHS = '{"unit": "month", "start": "2026-01-01"}'


@pytest.mark.parametrize(
    ("algorithm", "parameters", "shards", "key", "shard"),
    [
        ("mod", "", 2, 1, 1),  # Amoeba's City_ID % 2
        ("mod", "", 2, 2, 0),
        ("mod", "", 2, -3, 1),  # never negative
        ("mod", "", 3, "42", 0),  # a string of digits is the number
        ("hash", "", 4, 12345, 1),  # pinned: a changed hash would move every row
        ("hash", "", 4, 7, 2),
        ("hash", "", 4, "7", 2),  # 7 and '7' are one key, as MySQL compares them with an integer column
        ("hash", "", 4, "0401", 2),  # ... and '0401' is 401
        ("hash", "", 4, " +401 ", 2),
        ("hash", "", 4, 401, 2),
        ("hash", STRINGS, 4, "abc", 1),
        ("hash", STRINGS, 4, "ABC  ", 1),  # one key under a case-insensitive, PAD SPACE collation
        ("hash", STRINGS, 4, "Äbc", 1),  # ... and an accent-insensitive one
        ("consistent_hash", "", 4, 12345, 2),  # pinned too
        ("consistent_hash", '{"buckets": 4, "key_type": "string"}', 2, "abc", 0),  # bucket 1 of 0-1: shard 0
        ("consistent_hash", '{"buckets": 4, "key_type": "string"}', 2, "X", 1),  # bucket 3 of 2-3: shard 1
        ("consistent_hash", '{"buckets": 4, "assignment": [[0, 3, 1]]}', 2, 12345, 1),
        ("range", RANGES, 3, -5, 0),
        ("range", RANGES, 3, 99, 0),
        ("range", RANGES, 3, 100, 1),
        ("range", RANGES, 3, "199", 1),
        ("range", RANGES, 3, 10**12, 2),
        ("range", '{"ranges": [[0, 10, 1]], "default": 0}', 2, 10, 0),
        ("list", LISTS, 3, "1", 0),
        ("list", LISTS, 3, "us", 1),
        ("list", LISTS, 3, "US ", 1),
        ("list", LISTS, 3, "99", 2),
        ("list", NUMBERS, 3, 1, 0),
        ("list", NUMBERS, 3, "03", 1),  # an integer column: '03' is 3
        ("list", NUMBERS, 3, 99, 2),
        ("date", MONTHS, 4, "2026-01-15", 0),
        ("date", MONTHS, 4, "2026-02-01", 1),
        ("date", MONTHS, 4, "2026-05-31 23:59:59", 0),  # the fifth month wraps to shard 0
        ("date", '{"unit": "day", "start": "2026-01-01", "per_shard": 10}', 3, "2026-01-21", 2),
        ("date", '{"unit": "year", "start": "2020-06-01"}', 2, "2021-01-01", 1),
    ],
)
def test_which_shard_holds_a_key(algorithm: str, parameters: str, shards: int, key: Any, shard: int) -> None:
    assert build(algorithm, parameters, shards).shard_of(key) == shard


@pytest.mark.parametrize(
    ("algorithm", "parameters", "key", "error"),
    [
        ("mod", "", None, "a shard key cannot be NULL"),
        ("mod", "", "x", "must be an integer, not 'x'"),
        ("mod", "", "4_01", "must be an integer"),  # MariaDB reads 4, Python's int() 401
        ("mod", "", "401.5", "must be an integer"),
        ("hash", "", "abc", "must be an integer, not 'abc'"),
        ("hash", STRINGS, 7, r"an integer \(7\) compared with a string shard key matches many keys"),
        ("hash", STRINGS, "straße", r"\('ß', U\+00DF\) that ProxyFleet cannot place exactly"),  # general_ci: s
        ("list", '{"lists": {"0": ["eu"]}}', 1, "an integer"),  # WHERE region = 1 matches '1', '01', ' 1'...
        ("range", '{"ranges": [[0, 10, 0]]}', 10, "no shard holds the key 10: it is in no range and the rule has no"),
        ("list", '{"lists": {"0": [1]}}', 2, "no shard holds the key 2: it is in no list"),
        ("date", MONTHS, "2025-12-31", "no shard holds the date 2025-12-31: the rule starts on 2026-01-01"),
        ("date", MONTHS, "soon", "must be a date 'YYYY-MM-DD', not 'soon'"),
        ("date", MONTHS, 20260101, "must be a date"),
        ("global", "", 1, "a global table is on every shard"),
    ],
)
def test_a_key_no_shard_holds_is_refused_with_the_reason(algorithm: str, parameters: str, key: Any, error: str) -> None:
    with pytest.raises(ShardKeyError, match=error):
        build(algorithm, parameters, 2).shard_of(key)


def test_hashes_spread_keys_evenly() -> None:
    for algorithm in ("hash", "consistent_hash"):
        spread = Counter(build(algorithm, "", 4).shard_of(key) for key in range(20_000))
        assert sorted(spread) == [0, 1, 2, 3]
        assert all(4_500 < count < 5_500 for count in spread.values()), (algorithm, spread)


@pytest.mark.parametrize(
    ("algorithm", "parameters", "error"),
    [
        ("modulo", "", "unknown algorithm 'modulo'"),
        ("mod", "[1]", "must be a JSON object, not list"),
        ("mod", "{", "not a JSON object"),
        ("mod", '{"shards": 2}', r"mod takes no parameter 'shards' \(its parameters: none\)"),
        ("range", "", "ranges is required"),
        ("range", '{"ranges": [[10, 5, 0]]}', "holds no key"),
        ("range", '{"ranges": [[0, 10, 0], [5, 20, 1]]}', r"\[5, 20, 1\] overlaps another range"),
        ("range", '{"ranges": [[0, "9", 0]]}', "ranges: to must be an integer or null"),
        ("range", '{"ranges": [[0, 9, 0]], "default": -1}', "default must be a whole number 0 to 4095"),
        ("list", '{"lists": {"0": [1], "1": [1]}}', "1 of shard 1 is the same key as a value of shard 0"),
        ("list", '{"lists": {"0": ["eu"], "1": ["EU "]}}', r"\"EU \" of shard 1 is the same key .* without case"),
        ("list", '{"lists": {"0": ["Æ"]}}', "lists: shard 0: the string key 'Æ' has a character"),
        ("hash", '{"key_type": "text"}', 'key_type must be one of integer, string, not "text"'),
        ("list", '{"lists": {"a": [1]}}', '"a" is not a shard number'),
        ("list", '{"lists": {"0": [true]}}', "true is not an integer or a string"),
        ("date", '{"unit": "week", "start": "2026-01-01"}', "unit is required: one of day, month, year"),
        ("date", '{"unit": "day", "start": "2026-13-01"}', "start is required"),
        ("date", '{"unit": "day", "start": "2026-01-01", "per_shard": 0}', "per_shard must be a whole number 1"),
        ("consistent_hash", '{"buckets": 0}', "buckets must be a whole number 1 to 65536"),
        ("consistent_hash", '{"buckets": 4, "assignment": [[0, 2, 0], [2, 3, 1]]}', "bucket 2 is assigned twice"),
        ("consistent_hash", '{"buckets": 4, "assignment": [[0, 2, 0]]}', "bucket 3 is assigned to no shard"),
    ],
)
def test_bad_parameters_are_named(algorithm: str, parameters: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        parse_parameters(algorithm, parameters)


@pytest.mark.parametrize(
    ("algorithm", "parameters", "error"),
    [
        ("range", '{"ranges": [[0, 10, 2]]}', r"ranges: shard 2 is not in the group \(shards 0 to 1\)"),
        ("list", '{"lists": {"5": [1]}}', "lists: shard 5 is not in the group"),
        ("consistent_hash", '{"buckets": 2, "assignment": [[0, 1, 3]]}', "assignment: shard 3 is not in the group"),
        ("range", '{"ranges": [[0, 10, 0]], "default": 2}', "default: shard 2 is not in the group"),
    ],
)
def test_parameters_must_fit_their_group(algorithm: str, parameters: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        build(algorithm, parameters, 2)


def shop(**table: Any) -> dict[str, Any]:
    """Amoeba's tb_Shop on two shards by City_ID % 2, changed by ``table``."""
    return {
        "mysql_servers": [
            {"hostgroup_id": 100, "hostname": "10.0.0.1"},
            {"hostgroup_id": 101, "hostname": "10.0.0.2"},
        ],
        "mysql_users": [{"username": "app", "password": "pw", "default_hostgroup": 100}],
        "mysql_shards": [
            {"shard_group": "shops", "shard": 0, "hostgroup_id": 100},
            {"shard_group": "shops", "shard": 1, "hostgroup_id": 101, "physical_schema": "shop_1"},
        ],
        "mysql_sharded_tables": [
            {
                "schemaname": "shop",
                "tablename": "tb_Shop",
                "shard_group": "shops",
                "algorithm": "mod",
                "shard_key": "City_ID",
                **table,
            }
        ],
    }


def test_a_sharded_config_parses_and_keeps_its_tables() -> None:
    config = parse_config(shop())
    assert [(s.shard, s.hostgroup_id, s.physical_schema) for s in config.mysql_shards] == [
        (0, 100, None),
        (1, 101, "shop_1"),
    ]
    [table] = config.mysql_sharded_tables
    assert (table.tablename, table.algorithm, table.shard_key) == ("tb_Shop", "mod", "City_ID")
    assert parse_config(config.to_document()) == config


def test_a_config_without_sharding_keeps_its_document_and_checksum() -> None:
    plain = {key: value for key, value in shop().items() if not key.startswith("mysql_shard")}
    document = parse_config(plain).to_document()
    assert "mysql_shards" not in document and "mysql_sharded_tables" not in document


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"shard_group": "shop"}, "shard_group: no shard group 'shop' in mysql_shards (groups: shops)"),
        ({"algorithm": "global"}, "shard_key: a global table has no shard key"),
        ({"shard_key": None}, "shard_key: required by the mod algorithm"),
        ({"algorithm": "range", "parameters": '{"ranges": [[0, 9, 2]]}'}, "parameters: ranges: shard 2 is not in"),
        ({"algorithm": "list", "parameters": "{}"}, "parameters: lists is required"),
        ({"algorithm": "sharded"}, "algorithm"),
        (
            {"algorithm": "global", "shard_key": None, "sequence_column": "id"},
            "sequence_column: a global table has no sequence: it is written whole to every shard",
        ),
        (
            {"algorithm": "date", "parameters": '{"unit": "day", "start": "2024-01-01"}', "sequence_column": "city_id"},
            "sequence_column: city_id is the shard key, which the date algorithm reads as a date: a sequence numbers",
        ),
        (
            {"algorithm": "hash", "parameters": '{"key_type": "string"}', "sequence_column": "City_ID"},
            "sequence_column: City_ID is the shard key, which the hash algorithm reads as a string",
        ),
    ],
)
def test_a_bad_sharded_table_is_refused_naming_its_row_and_column(change: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(shop(**change))
    assert any(
        e.startswith("mysql_sharded_tables[0] (schemaname='shop', tablename='tb_Shop')") and error in e
        for e in refused.value.errors
    ), refused.value.errors


def test_a_sequence_may_number_the_key_or_another_column() -> None:
    for column in ("City_ID", "shop_id"):
        [table] = parse_config(shop(sequence_column=column)).mysql_sharded_tables
        assert table.sequence_column == column
    [table] = parse_config(shop(sequence_column="")).mysql_sharded_tables
    assert table.sequence_column is None
    parse_config(shop(algorithm="hash", parameters='{"key_type": "string"}', sequence_column="shop_id"))


@pytest.mark.parametrize(("value", "error"), [(0, "0 is below the minimum 1"), ("x", "expected an integer")])
def test_the_sequence_block_is_a_positive_count(value: object, error: str) -> None:
    document = shop()
    document["global_variables"] = [{"variable_name": "mysql-sharding_sequence_block", "variable_value": value}]
    with pytest.raises(ConfigError) as refused:
        parse_config(document)
    assert any("mysql-sharding_sequence_block" in e and error in e for e in refused.value.errors), refused.value.errors
    document["global_variables"][0]["variable_value"] = 3
    assert parse_config(document).variables.integer("mysql-sharding_sequence_block") == 3


def test_shards_are_numbered_from_0_without_gaps_and_once() -> None:
    document = shop()
    document["mysql_shards"][1]["shard"] = 3
    document["mysql_shards"].append({"shard_group": "shops", "shard": 0, "hostgroup_id": 102})
    with pytest.raises(ConfigError) as refused:
        parse_config(document)
    assert "mysql_shards: shard group 'shops' has shards up to 3 but not 1, 2 (number them 0 to N-1)" in (
        refused.value.errors
    )
    assert any("duplicate shard_group='shops', shard=0" in e for e in refused.value.errors)


def test_a_global_table_needs_no_key_and_a_shard_without_servers_is_warned_about() -> None:
    document = shop(algorithm="global", shard_key=None)
    document["mysql_shards"].append({"shard_group": "shops", "shard": 2, "hostgroup_id": 102})
    config = parse_config(document)
    assert config.mysql_sharded_tables[0].algorithm == "global"
    assert any("hostgroup 102 has no servers (referenced by mysql_shards[2]" in w for w in config.warnings)


@pytest.mark.parametrize("name", ["shop.1", "shop 1", "shop`1", "x" * 65])
def test_a_physical_schema_is_a_plain_schema_name(name: str) -> None:
    document = shop()
    document["mysql_shards"][1]["physical_schema"] = name
    with pytest.raises(ConfigError) as refused:
        parse_config(document)
    assert any(
        "mysql_shards[1]" in e and "physical_schema" in e and "not a schema name" in e for e in refused.value.errors
    )


def test_a_physical_schema_may_not_make_two_sharded_tables_one() -> None:
    document = shop()
    document["mysql_sharded_tables"].append(
        {"schemaname": "crm", "tablename": "TB_shop", "shard_group": "shops", "algorithm": "global"}
    )
    with pytest.raises(ConfigError) as refused:
        parse_config(document)
    assert any(
        "crm.TB_shop would be the same table as mysql_sharded_tables[0] shop.tb_Shop on hostgroup 101 (both in its "
        "schema shop_1)" in e
        for e in refused.value.errors
    ), refused.value.errors
    document["mysql_sharded_tables"][1]["tablename"] = "customers"  # another name: crm and shop share shop_1
    parse_config(document)
