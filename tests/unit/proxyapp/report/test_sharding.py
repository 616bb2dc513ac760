"""Per-digest sharding statistics (proxyapp.report.sharding): a statement counted by the shards it reached, rows of
several workers merged with their scatter ratio, the table bounded, and the rows a node's report carries."""

from __future__ import annotations

from proxyapp.report.sharding import ShardingStats, merge_rows, most_scattered
from tests.support.node_messages import sharding_row


def test_each_statement_counts_by_the_shards_it_reached() -> None:
    table = ShardingStats(max_entries=1)
    table.record("shop", "0x1", "SELECT * FROM items WHERE qty > ?", 2, merge_rows=5, merge_us=70)
    table.record("shop", "0x1", "SELECT * FROM items WHERE qty > ?", 1)
    table.record("shop", "0x1", "SELECT * FROM items WHERE qty > ?", 0)
    table.record("shop", "0x2", "SELECT ?", 1)  # past max_entries
    (row,) = table.rows()
    assert row == {
        "schemaname": "shop",
        "digest": "0x1",
        "digest_text": "SELECT * FROM items WHERE qty > ?",
        "single_shard": 1,
        "scatter": 1,
        "refused": 1,
        "shards_reached": 3,
        "merge_rows": 5,
        "merge_us": 70,
        "scatter_ratio": 0.5,
    }
    assert table.overflow == 1
    table.reset()
    assert (table.rows(), table.overflow) == ([], 0)


def test_rows_of_several_workers_merge_with_their_ratio_again() -> None:
    one, two = sharding_row("0x1", "SELECT ?", 3, 1), sharding_row("0x1", "SELECT ?", 0, 2, refused=4)
    (merged,) = merge_rows([one, two])
    assert (merged["single_shard"], merged["scatter"], merged["refused"], merged["scatter_ratio"]) == (3, 3, 4, 0.5)
    assert one["scatter"] == 1  # the rows merged are left as they were
    assert merge_rows([sharding_row("0x2", "SELECT ?", 0, 0, refused=1)])[0]["scatter_ratio"] == 0.0


def test_a_report_carries_the_rows_that_scatter_most() -> None:
    rows = [
        sharding_row("0x1", "a", 100, 0),
        sharding_row("0x2", "b", 0, 5),
        sharding_row("0x3", "c", 0, 0, refused=9),
        sharding_row("0x4", "d", 1, 5),
    ]
    assert [row["digest"] for row in most_scattered(rows, 3)] == ["0x4", "0x2", "0x3"]
    assert most_scattered(rows, 0) == []
