"""Digest statistics and global counters (proxyapp.report.stats)."""

from __future__ import annotations

import random
import time
from dataclasses import fields

import pytest

from devstack.stack import wait_until
from proxyapp.report.stats import (
    COUNTERS,
    DIGEST_COLUMNS,
    DIGEST_ORDER_COLUMNS,
    PGSQL_DIGEST_COLUMNS,
    DigestMemo,
    DigestStats,
    GlobalCounters,
)

KEY = (10, "shop", "app", "10.0.0.5", "0x00000000000000AA")


def record(stats: DigestStats, key: tuple = KEY, elapsed_us: int = 100, sent: int = 1, affected: int = 0) -> None:
    """Record one query for ``key`` (hostgroup, schemaname, username, client_addr, digest)."""
    stats.record(*key, f"text of {key[4]}", elapsed_us, sent, affected)


def key_with(digest: str, hostgroup: int = 10) -> tuple:
    """``KEY`` with another digest (and hostgroup)."""
    return (hostgroup, "shop", "app", "10.0.0.5", digest)


# --- DigestStats ---------------------------------------------------------------------------------------------


def test_a_row_has_proxysql_columns_in_order() -> None:
    stats = DigestStats()
    stats.record(10, "shop", "app", "10.0.0.5", "0xAB", "SELECT * FROM t WHERE id=?", 250, 3, 0)
    [row] = stats.rows()
    assert tuple(row) == DIGEST_COLUMNS
    assert DIGEST_COLUMNS[:6] == ("hostgroup", "schemaname", "username", "client_address", "digest", "digest_text")
    assert row["hostgroup"] == 10
    assert row["schemaname"] == "shop"
    assert row["username"] == "app"
    assert row["client_address"] == "10.0.0.5"
    assert row["digest"] == "0xAB"
    assert row["digest_text"] == "SELECT * FROM t WHERE id=?"
    assert (row["count_star"], row["sum_time"], row["min_time"], row["max_time"]) == (1, 250, 250, 250)
    assert (row["sum_rows_sent"], row["sum_rows_affected"]) == (3, 0)


def test_postgresql_rows_have_stats_pgsql_query_digest_columns_in_order() -> None:
    stats = DigestStats(schema_column="database")
    stats.record(20, "shop", "app", "10.0.0.5", "0xCD", "SELECT * FROM t WHERE id = ?::int", 250, 3, 0)
    stats.record(20, "shop", "app", "10.0.0.5", "0xCD", "SELECT * FROM t WHERE id = ?::int", 50, 1, 0)
    stats.record(20, "other", "app", "10.0.0.5", "0xCD", "SELECT * FROM t WHERE id = ?::int", 10, 1, 0)
    rows = stats.rows()
    assert [tuple(row) for row in rows] == [PGSQL_DIGEST_COLUMNS] * 2
    assert PGSQL_DIGEST_COLUMNS[:6] == ("hostgroup", "database", "username", "client_address", "digest", "digest_text")
    assert PGSQL_DIGEST_COLUMNS[6:] == DIGEST_COLUMNS[6:]
    assert [(row["database"], row["count_star"], row["sum_time"], row["min_time"]) for row in rows] == [
        ("shop", 2, 300, 50),
        ("other", 1, 10, 10),
    ]
    assert [tuple(row) for row in stats.reset()] == [PGSQL_DIGEST_COLUMNS] * 2
    assert stats.rows() == []


def test_the_schema_column_is_schemaname_or_database() -> None:
    stats = DigestStats()
    record(stats)
    assert tuple(stats.rows()[0]) == DIGEST_COLUMNS
    with pytest.raises(ValueError, match="schema_column"):
        DigestStats(schema_column="schema")


def test_records_of_one_key_aggregate() -> None:
    stats = DigestStats()
    before = int(time.time())
    record(stats, elapsed_us=300, sent=5, affected=0)
    record(stats, elapsed_us=100, sent=0, affected=2)
    record(stats, elapsed_us=700, sent=1, affected=4)
    record(stats, elapsed_us=200, sent=2, affected=0)
    after = int(time.time())
    [row] = stats.rows()
    assert row["count_star"] == 4
    assert row["sum_time"] == 1300
    assert row["min_time"] == 100
    assert row["max_time"] == 700
    assert row["sum_rows_sent"] == 8
    assert row["sum_rows_affected"] == 6
    assert before <= row["first_seen"] <= row["last_seen"] <= after


def test_min_and_max_follow_monotonic_series() -> None:
    rising, falling = DigestStats(), DigestStats()
    for us in (10, 20, 30, 40):
        record(rising, elapsed_us=us)
        record(falling, elapsed_us=100 - us)
    assert (rising.rows()[0]["min_time"], rising.rows()[0]["max_time"]) == (10, 40)
    assert (falling.rows()[0]["min_time"], falling.rows()[0]["max_time"]) == (60, 90)


def test_last_seen_moves_and_first_seen_stays() -> None:
    stats = DigestStats()
    record(stats)
    first = stats.rows()[0]["first_seen"]
    wait_until(lambda: int(time.time()) > first, "the next second", 3, interval=0.02)
    record(stats)
    [row] = stats.rows()
    assert row["first_seen"] == first
    assert row["last_seen"] > first


@pytest.mark.parametrize("position", range(5))
def test_every_key_column_separates_rows(position: int) -> None:
    stats = DigestStats()
    other = list(KEY)
    other[position] = 99 if position == 0 else f"other-{KEY[position]}"
    record(stats, KEY, elapsed_us=1)
    record(stats, tuple(other), elapsed_us=2)
    record(stats, KEY, elapsed_us=3)
    rows = {tuple(row[c] for c in DIGEST_COLUMNS[:5]): row["count_star"] for row in stats.rows()}
    assert rows == {KEY: 2, tuple(other): 1}


def test_a_full_table_counts_new_keys_in_overflow() -> None:
    stats = DigestStats(max_entries=3)
    for n in range(3):
        record(stats, key_with(f"0x{n}"))
    record(stats, key_with("0xnew"))
    record(stats, key_with("0xnew"))
    record(stats, key_with("0xother", hostgroup=20))
    record(stats, key_with("0x1"), elapsed_us=900)
    rows = stats.rows()
    assert len(rows) == 3
    assert {row["digest"] for row in rows} == {"0x0", "0x1", "0x2"}
    assert stats.overflow == 3
    assert next(row for row in rows if row["digest"] == "0x1")["count_star"] == 2


def test_default_bound_is_ten_thousand() -> None:
    stats = DigestStats()
    assert stats.max_entries == 10000
    for n in range(10001):
        record(stats, key_with(f"0x{n}"))
    assert len(stats.rows()) == 10000
    assert stats.overflow == 1


def test_max_entries_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_entries"):
        DigestStats(max_entries=0)


def sample_stats() -> DigestStats:
    """Three digests: A is the slowest in total, B the most frequent, C the slowest single query."""
    stats = DigestStats()
    for _ in range(2):
        record(stats, key_with("0xA"), elapsed_us=500, sent=10, affected=0)
    for _ in range(5):
        record(stats, key_with("0xB"), elapsed_us=10, sent=0, affected=3)
    record(stats, key_with("0xC"), elapsed_us=900, sent=1, affected=1)
    return stats


@pytest.mark.parametrize(
    ("order_by", "expected"),
    [
        ("sum_time", ["0xA", "0xC", "0xB"]),
        ("count_star", ["0xB", "0xA", "0xC"]),
        ("max_time", ["0xC", "0xA", "0xB"]),
        ("min_time", ["0xC", "0xA", "0xB"]),
        ("sum_rows_sent", ["0xA", "0xC", "0xB"]),
        ("sum_rows_affected", ["0xB", "0xC", "0xA"]),
    ],
)
def test_rows_are_ordered_largest_first(order_by: str, expected: list[str]) -> None:
    assert [row["digest"] for row in sample_stats().rows(order_by=order_by)] == expected


def test_default_order_is_sum_time_and_limit_keeps_the_top() -> None:
    stats = sample_stats()
    assert [row["digest"] for row in stats.rows()] == ["0xA", "0xC", "0xB"]
    assert [row["digest"] for row in stats.rows(limit=2, order_by="count_star")] == ["0xB", "0xA"]
    assert stats.rows(limit=0) == []
    assert len(stats.rows(limit=50)) == 3


def test_every_order_column_is_accepted_and_others_refused() -> None:
    stats = sample_stats()
    for column in DIGEST_ORDER_COLUMNS:
        assert len(stats.rows(order_by=column)) == 3
    with pytest.raises(ValueError, match="order_by"):
        stats.rows(order_by="digest_text")
    with pytest.raises(ValueError, match="limit"):
        stats.rows(limit=-1)


def _without_times(rows: list[dict]) -> list[dict]:
    """Rows without their time stamps, in a stable order."""
    return sorted(
        ({k: v for k, v in row.items() if k not in ("first_seen", "last_seen")} for row in rows),
        key=lambda row: (row["hostgroup"], row["schemaname"], row["username"], row["client_address"], row["digest"]),
    )


def test_a_memo_counts_the_same_as_the_key_lookup() -> None:
    """Random queries from three sessions, each with its memo, over keys that change in every column, with resets
    and a table that fills: every row and the overflow as a table recorded without memos has them."""
    rng = random.Random(7)
    plain, memoed = DigestStats(max_entries=12), DigestStats(max_entries=12)
    memos = [DigestMemo() for _ in range(3)]
    counted = 0
    for step in range(5000):
        if rng.random() < 0.01:
            rows = _without_times(memoed.reset())
            assert _without_times(plain.reset()) == rows
            counted += sum(row["count_star"] for row in rows)
        session = rng.randrange(3)
        key = (
            rng.choice((10, 20)),
            rng.choice(("shop", "shop", "shop", "")),
            f"user{session}" if rng.random() < 0.9 else "other",
            f"10.0.0.{session}",
            f"0x{rng.choice((1, 1, 1, 2, 3, 4)):016X}",
        )
        elapsed, sent, affected = rng.randrange(1, 1000), rng.randrange(3), rng.randrange(3)
        plain.record(*key, f"text of {key[4]}", elapsed, sent, affected, float(step))
        memoed.record(*key, f"text of {key[4]}", elapsed, sent, affected, float(step), memos[session])
    assert plain.overflow == memoed.overflow > 0
    assert _without_times(plain.rows()) == _without_times(memoed.rows())
    assert counted > 1000


def test_a_memo_from_before_a_reset_is_not_used() -> None:
    stats, memo = DigestStats(), DigestMemo()
    stats.record(*KEY, "text", 100, 1, 0, None, memo)
    assert list(memo.entries) == [KEY[4]] and memo.generation == stats.generation
    stats.reset()
    stats.record(*KEY, "text", 200, 1, 0, None, memo)  # the memo's entry was dropped: a new one counts it
    (row,) = stats.rows()
    assert row["count_star"] == 1 and row["sum_time"] == 200


def test_a_memo_tells_hostgroups_apart_and_starts_again_when_full() -> None:
    stats, memo = DigestStats(), DigestMemo()
    for hostgroup in (10, 20, 10, 20, 20):  # one digest, routed to two hostgroups
        record_in = (hostgroup, *KEY[1:])
        stats.record(*record_in, "text", 100, 1, 0, None, memo)
    assert [(row["hostgroup"], row["count_star"]) for row in stats.rows(order_by="count_star")] == [(20, 3), (10, 2)]
    for n in range(200):  # more digests than a memo keeps: it starts again, and every query is still counted
        stats.record(*key_with(f"0x{n % 100:X}"), "text", 1, 0, 0, None, memo)
    assert len(memo.entries) <= 64
    assert sum(row["count_star"] for row in stats.rows()) == 205


def test_reset_returns_the_rows_then_clears() -> None:
    stats = DigestStats(max_entries=2)
    record(stats, key_with("0xA"), elapsed_us=50)
    record(stats, key_with("0xA"), elapsed_us=70)
    record(stats, key_with("0xB"), elapsed_us=10)
    record(stats, key_with("0xC"))
    assert stats.overflow == 1
    returned = stats.reset()
    assert [(row["digest"], row["count_star"], row["sum_time"]) for row in returned] == [
        ("0xA", 2, 120),
        ("0xB", 1, 10),
    ]
    assert stats.rows() == []
    assert stats.overflow == 0
    assert stats.reset() == []
    record(stats, key_with("0xC"), elapsed_us=5)
    assert [(row["digest"], row["count_star"]) for row in stats.rows()] == [("0xC", 1)]


# --- GlobalCounters -----------------------------------------------------------------------------------------

REQUIRED_COUNTERS = [
    "Client_Connections_connected",
    "Client_Connections_created",
    "Client_Connections_aborted",
    "Client_Connections_non_idle",
    "Questions",
    "Slow_queries",
    "Active_Transactions",
    "Server_Connections_connected",
    "Server_Connections_created",
    "Server_Connections_aborted",
    "Query_Cache_count_GET",
    "Query_Cache_count_GET_OK",
    "Query_Cache_count_SET",
    "Query_Cache_Entries",
    "Query_Cache_Memory_bytes",
    "Query_Cache_Purged",
    "Access_Denied_Wrong_Password",
    "Access_Denied_Max_Connections",
    "generated_error_packets",
    "ConnPool_get_conn_success",
    "ConnPool_get_conn_failure",
    "ConnPool_get_conn_immediate",
    "mysql_killed_backend_queries",
    "Com_commit",
    "Com_rollback",
    "Mirror_concurrency",
    "Mirror_queue_length",
    "Queries_backends_bytes_sent",
    "Queries_backends_bytes_recv",
    "Queries_frontends_bytes_sent",
    "Queries_frontends_bytes_recv",
    "ProxySQL_Uptime",
]


def test_snapshot_has_every_proxysql_name_starting_at_zero() -> None:
    snapshot = GlobalCounters().snapshot()
    assert set(REQUIRED_COUNTERS) <= set(snapshot)
    assert next(iter(snapshot)) == "ProxySQL_Uptime"
    assert all(type(value) is int and value == 0 for value in snapshot.values())
    assert set(snapshot) == set(COUNTERS)


def test_snapshot_reflects_increments() -> None:
    counters = GlobalCounters()
    counters.Questions += 3
    counters.Client_Connections_connected += 2
    counters.Client_Connections_connected -= 1
    counters.Queries_backends_bytes_sent += 1500
    snapshot = counters.snapshot()
    assert snapshot["Questions"] == 3
    assert snapshot["Client_Connections_connected"] == 1
    assert snapshot["Queries_backends_bytes_sent"] == 1500
    assert snapshot["Slow_queries"] == 0
    snapshot["Questions"] = 100
    assert counters.Questions == 3


def test_counters_are_slots_only() -> None:
    counters = GlobalCounters()
    assert not hasattr(counters, "__dict__")
    with pytest.raises(AttributeError):
        counters.Questionz = 1  # type: ignore[attr-defined]


def test_uptime_counts_from_the_start_time() -> None:
    counters = GlobalCounters(started=time.monotonic() - 125.6)
    assert counters.snapshot()["ProxySQL_Uptime"] in (125, 126)


def test_every_counter_has_a_kind_and_help() -> None:
    names = {f.name for f in fields(GlobalCounters)} - {"started"}
    assert names | {"ProxySQL_Uptime"} == set(COUNTERS)
    assert all(spec.kind in ("counter", "gauge") and spec.help for spec in COUNTERS.values())
    gauges = {name for name, spec in COUNTERS.items() if spec.kind == "gauge"}
    assert {
        "Client_Connections_connected",
        "Active_Transactions",
        "Mirror_concurrency",
        "Mirror_queue_length",
    } <= gauges
    assert COUNTERS["Questions"].kind == "counter"


def test_texts_that_are_not_utf8_are_shown_escaped_in_the_rows() -> None:
    """A query's bytes that are not UTF-8 (``SELECT `\\xff```, ``USE db\\xfe``: lone surrogates once decoded) come out
    of the rows as ``\\xff``, for MySQL's table and PostgreSQL's; the key still tells them apart from valid texts."""
    for stats, schema_column in ((DigestStats(), "schemaname"), (DigestStats(schema_column="database"), "database")):
        stats.record(10, "db\udcfe", "app", "10.0.0.5", "0x1", "SELECT `\udcff`", 100, 1, 0)
        stats.record(10, "db\u00fe", "app", "10.0.0.5", "0x1", "SELECT `\u00ff`", 100, 1, 0)
        rows = sorted(stats.rows(), key=lambda row: row["digest_text"])
        assert [(row[schema_column], row["digest_text"]) for row in rows] == [
            ("db\\xfe", "SELECT `\\xff`"),
            ("db\u00fe", "SELECT `\u00ff`"),
        ]
        assert [row["digest_text"] for row in stats.reset()] == ["SELECT `\\xff`", "SELECT `\u00ff`"]
