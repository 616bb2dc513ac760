"""Sequences (proxyapp.sharding.sequence): which rows of an INSERT get values and how the statement is written, and
the blocks a worker hands values out of. Orders sharded by their sequenced id (mod 2), and lines sharded by order
with their own sequenced line_id."""

from __future__ import annotations

import asyncio

import pytest

from proxyapp.config.document import parse_config
from proxyapp.sharding.plan import plan
from proxyapp.sharding.sequence import Sequence, Sequences, numbering
from proxyapp.sharding.shardmap import ShardMap


@pytest.fixture(scope="module")
def shard_map() -> ShardMap:
    shards = [{"shard_group": "g", "shard": n, "hostgroup_id": 100 + n} for n in range(2)]
    tables = [
        {"schemaname": "s", "tablename": "orders", "shard_group": "g", "algorithm": "mod", "shard_key": "id",
         "sequence_column": "ID"},
        {"schemaname": "s", "tablename": "lines", "shard_group": "g", "algorithm": "mod", "shard_key": "order_id",
         "sequence_column": "line_id"},
        {"schemaname": "s", "tablename": "plain", "shard_group": "g", "algorithm": "mod", "shard_key": "id"},
    ]  # fmt: skip
    servers = [{"hostgroup_id": hg, "hostname": "db"} for hg in (100, 101)]
    return ShardMap.build(
        parse_config({"mysql_servers": servers, "mysql_shards": shards, "mysql_sharded_tables": tables})
    )


@pytest.mark.parametrize(
    ("sql", "values", "numbered"),
    [
        # The column left out: added to the column list and to each row.
        ("INSERT INTO orders (name) VALUES ('a')", [7],
         "INSERT INTO orders (name, `ID`) VALUES ('a', LAST_INSERT_ID(7))"),
        ("insert into s.orders (name, n) values ('a', 1), ('b', 2)", [7, 8],
         "insert into s.orders (name, n, `ID`) values ('a', 1, LAST_INSERT_ID(7)), ('b', 2, 8)"),
        ("INSERT INTO orders () VALUES (), ()", [3, 4], "INSERT INTO orders (`ID`) VALUES (LAST_INSERT_ID(3)), (4)"),
        ("REPLACE INTO orders (name) VALUE ('a')", [9],
         "REPLACE INTO orders (name, `ID`) VALUE ('a', LAST_INSERT_ID(9))"),
        ("REPLACE LOW_PRIORITY orders (name) VALUES ('a')", [9],
         "REPLACE LOW_PRIORITY orders (name, `ID`) VALUES ('a', LAST_INSERT_ID(9))"),
        ("INSERT IGNORE INTO `orders` (name) VALUES (CONCAT('a', ')'))", [5],
         "INSERT IGNORE INTO `orders` (name, `ID`) VALUES (CONCAT('a', ')'), LAST_INSERT_ID(5))"),
        # NULL, DEFAULT and 0 ask for a value; other integers are kept, and LAST_INSERT_ID() tells the first generated.
        ("INSERT INTO orders (id, name) VALUES (NULL, 'a'), (0, 'b'), (DEFAULT, 'c'), ('0', 'd')", [1, 2, 3, 4],
         "INSERT INTO orders (id, name) VALUES (LAST_INSERT_ID(1), 'a'), (2, 'b'), (3, 'c'), (4, 'd')"),
        ("INSERT INTO orders (`Id`, name) VALUES (40, 'a'), (null, 'b'), (-3, 'c'), (LAST_INSERT_ID(9), 'd')", [12],
         "INSERT INTO orders (`Id`, name) VALUES (40, 'a'), (LAST_INSERT_ID(12), 'b'), (-3, 'c'), (LAST_INSERT_ID(9), "
         "'d')"),
        ("INSERT INTO orders (id) VALUES (-0), (LAST_INSERT_ID(0)), ( NULL )", [1, 2, 3],
         "INSERT INTO orders (id) VALUES (LAST_INSERT_ID(1)), (2), ( 3 )"),
        ("INSERT INTO orders (orders.id, name) VALUES (0, 'a') ON DUPLICATE KEY UPDATE name = VALUES(name)", [6],
         "INSERT INTO orders (orders.id, name) VALUES (LAST_INSERT_ID(6), 'a') ON DUPLICATE KEY UPDATE name = "
         "VALUES(name)"),
        # A sequence column that is not the shard key.
        ("INSERT INTO lines (order_id, qty) VALUES (3, 1), (4, 2)", [20, 21],
         "INSERT INTO lines (order_id, qty, `line_id`) VALUES (3, 1, LAST_INSERT_ID(20)), (4, 2, 21)"),
    ],
)  # fmt: skip
def test_rows_without_a_value_get_the_next_ones(
    shard_map: ShardMap, sql: str, values: list[int], numbered: str
) -> None:
    found = numbering(sql, "s", shard_map)
    assert found is not None and not found.refused
    assert found.count == len(values)
    assert found.fill(values) == numbered


@pytest.mark.parametrize(
    "sql",
    [
        "INSERT INTO orders (id, name) VALUES (1, 'a'), (2, 'b')",  # every value given
        "INSERT INTO plain (name) VALUES ('a')",  # no sequence
        "INSERT INTO other (name) VALUES ('a')",  # not sharded
        "SELECT * FROM orders",
        "UPDATE orders SET name = 'a' WHERE id = 0",
        # Forms the planner refuses anyway: left to it, unchanged.
        "INSERT INTO orders VALUES (NULL, 'a')",
        "INSERT INTO orders SET name = 'a'",
        "INSERT INTO orders (name) SELECT name FROM plain",
        "INSERT INTO orders (name) VALUES ('a', 'b')",
        "INSERT INTO orders (name) VALUES ('a'); INSERT INTO orders (name) VALUES ('b')",
        "INSERT INTO plain (id) SELECT id FROM orders",
    ],
)
def test_statements_that_need_no_values(shard_map: ShardMap, sql: str) -> None:
    assert numbering(sql, "s", shard_map) is None


def test_no_auto_value_on_zero_makes_0_a_value(shard_map: ShardMap) -> None:
    sql = "INSERT INTO orders (id, name) VALUES (0, 'a'), (NULL, 'b')"
    found = numbering(sql, "s", shard_map, zero_is_value=True)
    assert found is not None and found.count == 1
    assert found.fill([5]) == "INSERT INTO orders (id, name) VALUES (0, 'a'), (LAST_INSERT_ID(5), 'b')"


@pytest.mark.parametrize("value", ["1 + 1", "@id", "?", "'abc'", "1.5", "0x10", "UUID_SHORT()", "(NULL)"])
def test_a_value_that_might_be_null_or_0_is_refused(shard_map: ShardMap, value: str) -> None:
    found = numbering(f"INSERT INTO orders (id, name) VALUES ({value}, 'a')", "s", shard_map)
    assert found is not None and found.count == 0
    assert found.refused == (
        "ProxyFleet sharding does not support an INSERT into s.orders whose sequence column ID is not a literal "
        "integer yet (give an integer, NULL or 0, or leave the column out)"
    )


def test_the_numbered_statement_is_planned_by_its_new_keys(shard_map: ShardMap) -> None:
    found = numbering("INSERT INTO orders (name) VALUES ('a'), ('b'), ('c')", "s", shard_map)
    assert found is not None
    placed = plan(found.fill([10, 11, 12]), "s", shard_map)
    assert placed is not None and not placed.refused
    assert placed.shards == {0, 1} and placed.first_row_shard == 0
    assert dict(placed.statements) == {
        0: "INSERT INTO orders (name, `ID`) VALUES ('a', LAST_INSERT_ID(10)), ('c', 12)",
        1: "INSERT INTO orders (name, `ID`) VALUES ('b', 11)",
    }


# --- blocks ---------------------------------------------------------------------------------------------------


class Reserving:
    """A stand-in for shard 0's table: each reservation continues above the last, and says so."""

    def __init__(self, start: int = 1) -> None:
        self.next = start
        self.sizes: list[int] = []
        self.opened = asyncio.Event()
        self.asked = asyncio.Event()  # a reservation was asked for
        self.held = False

    async def reserve(self, size: int) -> int:
        self.sizes.append(size)
        self.asked.set()
        if self.held:
            self.opened.clear()
            await self.opened.wait()
        first, self.next = self.next, self.next + size
        return first


def test_values_come_from_the_block_until_it_runs_out() -> None:
    async def run() -> None:
        sequence, store = Sequence(), Reserving(start=101)
        assert await sequence.take(2, 3, store.reserve) == [101, 102]
        assert await sequence.take(1, 3, store.reserve) == [103]
        assert store.sizes == [3]
        store.next = 500  # another worker took 104-499 meanwhile
        assert await sequence.take(2, 3, store.reserve) == [500, 501]
        assert await sequence.take(5, 3, store.reserve) == [502, 503, 504, 505, 506]  # the rest, then two blocks
        assert store.sizes == [3, 3, 6]
        assert (sequence.next, sequence.end) == (507, 509)

    asyncio.run(run())


def test_one_reservation_at_a_time_the_others_wait_for_it() -> None:
    async def run() -> None:
        sequence, store = Sequence(), Reserving()
        store.held = True
        takers = [asyncio.ensure_future(sequence.take(2, 4, store.reserve)) for _ in range(3)]
        await store.asked.wait()
        assert not any(t.done() for t in takers)
        store.held = False
        store.opened.set()
        assert [await t for t in takers] == [[1, 2], [3, 4], [5, 6]]
        assert store.sizes == [4, 4]

    asyncio.run(run())


def test_a_failed_reservation_leaves_the_values_held() -> None:
    async def run() -> None:
        sequence, store = Sequence(), Reserving()
        assert await sequence.take(1, 2, store.reserve) == [1]

        async def fail(size: int) -> int:
            raise RuntimeError("shard 0 is down")

        with pytest.raises(RuntimeError):
            await sequence.take(3, 2, fail)
        assert await sequence.take(1, 2, fail) == [2]
        assert await sequence.take(2, 2, store.reserve) == [3, 4]

    asyncio.run(run())


def test_a_worker_keeps_one_sequence_per_table_and_group(shard_map: ShardMap) -> None:
    sequences = Sequences()
    orders = shard_map.find("s", "orders")
    lines = shard_map.find("S", "Lines")
    assert orders is not None and lines is not None
    assert sequences.of(orders) is sequences.of(shard_map.find("S", "ORDERS"))  # type: ignore[arg-type]
    assert sequences.of(orders) is not sequences.of(lines)
